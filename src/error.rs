//! The user-error type, and the one place exit codes are decided: 0 ok, 1 runtime failure,
//! 2 bad input (config, arguments, data or rule files).

use std::fmt;

/// Bad input from the user (exit code 2): a message naming the problem, and what caused it.
#[derive(Debug)]
pub struct UserError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl UserError {
    /// A user error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// A user error that says what `source` says, and keeps it.
    pub fn from_source(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            message: source.to_string(),
            source: Some(Box::new(source)),
        }
    }
}

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UserError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The exit code of a failed command: 2 when the user's input is at fault, 1 otherwise.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let user = e
        .chain()
        .any(|c| c.is::<UserError>() || c.is::<crate::config::ConfigError>());
    if user { 2 } else { 1 }
}

/// The lines an error is reported with: each cause once (a cause whose text its parent already
/// shows is not repeated), and a message of several problems one line each.
pub fn lines(e: &anyhow::Error) -> Vec<String> {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        // SQLite's errors say "<text>: Error code N: <text>" when their source is printed.
        let shown = text.contains(&c)
            || c.rsplit_once(": ")
                .is_some_and(|(_, tail)| text.ends_with(tail));
        if shown {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text.lines().map(str::to_string).collect()
}
