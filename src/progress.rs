//! The progress bar of the command running now, if it shows one: log lines are drawn above it
//! (not through it), and a wait for the rate budget shows in it until the wait ends.

use chrono::{DateTime, Utc};
use indicatif::ProgressBar;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn active() -> Option<ProgressBar> {
    ACTIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .filter(|b| !b.is_hidden())
}

/// Makes `bar` the one that log lines and budget waits go to, until [`hide`].
pub fn show(bar: &ProgressBar) {
    *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
}

/// No bar any more: log lines go straight to standard error.
pub fn hide() {
    *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Standard error, with the bar (if any) cleared while a log line is written.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match active() {
            Some(bar) => bar.suspend(|| std::io::stderr().write(buf)),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The writer the log subscriber makes for each line.
pub fn log_writer() -> LogWriter {
    LogWriter
}

/// The message a budget wait shows in the bar.
pub fn wait_message(scope: &str, wait: Duration, until: DateTime<Utc>) -> String {
    let secs = wait.as_secs();
    let length = if secs >= 60 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    };
    format!(
        "waiting {length} for the rate budget ({scope}), until {} UTC",
        until.format("%H:%M:%S")
    )
}

/// Shows a budget wait in the bar; the bar's message comes back when the guard is dropped.
pub struct Waiting {
    bar: Option<(ProgressBar, String)>,
}

/// Puts the wait in the bar's message, if a bar is shown.
pub fn waiting(scope: &str, wait: Duration, until: DateTime<Utc>) -> Waiting {
    let bar = active().map(|bar| {
        let before = bar.message();
        bar.set_message(wait_message(scope, wait, until));
        (bar, before)
    });
    Waiting { bar }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some((bar, before)) = self.bar.take() {
            bar.set_message(before);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_wait_reads_as_minutes_and_the_time_it_ends() {
        let until = Utc.with_ymd_and_hms(2026, 11, 22, 14, 5, 9).unwrap();
        assert_eq!(
            wait_message("analytics:acme", Duration::from_secs(1390), until),
            "waiting 23m 10s for the rate budget (analytics:acme), until 14:05:09 UTC"
        );
        assert_eq!(
            wait_message("analytics:acme", Duration::from_secs(42), until),
            "waiting 42s for the rate budget (analytics:acme), until 14:05:09 UTC"
        );
    }
}
