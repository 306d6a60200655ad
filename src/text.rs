//! Text from the service, made safe to print on a terminal: control characters (an ANSI escape
//! could clear the screen or forge a line) are shown escaped, as `\u{1b}`.

use std::borrow::Cow;

fn escaped(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() && !keep(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` for one line: every control character escaped (line breaks too).
pub fn one_line(s: &str) -> Cow<'_, str> {
    escaped(s, |_| false)
}

/// `s` as text of several lines: control characters escaped but line breaks and tabs.
pub fn lines(s: &str) -> Cow<'_, str> {
    escaped(s, |c| c == '\n' || c == '\t')
}

/// The text of an error and of each of its causes, outermost first.
pub fn causes(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    std::iter::successors(Some(e), |c| c.source())
        .map(ToString::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(one_line("job_1"), "job_1");
        assert_eq!(
            one_line("job\u{1b}[2J\rrule ok\n"),
            "job\\u{1b}[2J\\u{d}rule ok\\u{a}"
        );
        assert_eq!(lines("a\n\tb\u{7}"), "a\n\tb\\u{7}");
    }
}
