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

/// A wait for a rate budget as every surface says it, in absolute time and from now: "the
/// hour's budget of analytics:acme is used; next request at 15:40:47 UTC, in 52m 10s".
pub fn budget_wait(
    scope: &str,
    wait: std::time::Duration,
    until: chrono::DateTime<chrono::Utc>,
) -> String {
    format!(
        "the hour's budget of {scope} is used; next request at {} UTC, in {}",
        until.format("%H:%M:%S"),
        from_now(wait.as_secs())
    )
}

/// A span from now, short: `42s`, `23m 10s`, `2h 05m`.
pub fn from_now(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// The planner's time estimate, in words, from now and in absolute time: "about 2 h at the
/// budget, around 17:40 UTC".
pub fn eta(secs: u64, now: chrono::DateTime<chrono::Utc>) -> String {
    if secs == 0 {
        "within the current hour's budget".to_string()
    } else {
        let at = now + chrono::Duration::seconds(secs.min(i64::MAX as u64) as i64);
        format!(
            "about {} h at the budget, around {} UTC",
            secs / 3600,
            at.format(if secs >= 86_400 {
                "%Y-%m-%d %H:%M"
            } else {
                "%H:%M"
            })
        )
    }
}
/// Writes what a command prints to standard output (`docpipe::out!`, `docpipe::outln!`): a
/// reader that went away ends the process quietly with exit code 0 (nothing is left half-done
/// by then: commands print what they did after doing it); any other failure to write is one
/// line on standard error and exit code 1.
pub fn stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// Writes a line to standard output and says whether it could: for the services (the daemon,
/// the emulator), which go on when nobody reads it.
pub fn try_stdout(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)?;
    out.write_all(b"\n")
}

/// For "unknown field `x`, expected one of `a`, `b`": " (did you mean `a`?)" when one of them
/// is a likely typo of `x`.
pub fn did_you_mean(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return String::new();
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return String::new();
    };
    let best = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|c| (strsim::damerau_levenshtein(field, c), c))
        .min();
    match best {
        Some((d, c)) if d <= (field.chars().count() / 3).max(2) => {
            format!(" (did you mean `{c}`?)")
        }
        _ => String::new(),
    }
}

/// A duration in words a person reads: `1 day`, `28 days`, `1 hour 30 minutes`, `45 seconds`
/// (whole days, hours, minutes and seconds, the parts that are not zero).
pub fn duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let parts: Vec<String> = [
        (s / 86_400, "day"),
        (s % 86_400 / 3_600, "hour"),
        (s % 3_600 / 60, "minute"),
        (s % 60, "second"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, unit)| format!("{n} {unit}{}", if n == 1 { "" } else { "s" }))
    .collect();
    if parts.is_empty() {
        "0 seconds".to_string()
    } else {
        parts.join(" ")
    }
}

/// A polars error about a column it cannot find, made short: its list of every valid column
/// (32 names in a failing rule's alert) becomes the one it likely meant.
pub fn column_hint(message: &str) -> Cow<'_, str> {
    let Some((head, list)) = message.split_once("; valid columns: [") else {
        return Cow::Borrowed(message);
    };
    let Some(wanted) = head
        .rsplit_once("unable to find column \"")
        .map(|(_, w)| w.trim_end_matches('"'))
    else {
        return Cow::Borrowed(message);
    };
    let best = list
        .trim_end_matches(']')
        .split(", ")
        .map(|c| c.trim_matches('"'))
        .map(|c| (strsim::damerau_levenshtein(wanted, c), c))
        .min();
    Cow::Owned(match best {
        Some((d, c)) if d <= (wanted.chars().count() / 3).max(2) => {
            format!("{head} (did you mean \"{c}\"?)")
        }
        _ => format!(
            "{head} (no column of the query's tables is named so; docs/output.md lists them)"
        ),
    })
}

/// `n` and its noun, singular for one: "1 window", "2 windows" (the plural adds an s).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_one_is_singular() {
        assert_eq!(count(1u64, "window"), "1 window");
        assert_eq!(count(0u64, "window"), "0 windows");
        assert_eq!(count(95u64, "analytics request"), "95 analytics requests");
    }

    #[test]
    fn a_missing_column_gets_the_one_it_likely_meant_not_the_whole_list() {
        assert_eq!(
            column_hint(
                "when: not found: unable to find column \"totl_7d\"; valid columns: [\"project\", \"total_7d\", \"ai_7d\"]"
            ),
            "when: not found: unable to find column \"totl_7d\" (did you mean \"total_7d\"?)"
        );
        assert_eq!(
            column_hint("unable to find column \"nope\"; valid columns: [\"project\", \"date\"]"),
            "unable to find column \"nope\" (no column of the query's tables is named so; docs/output.md lists them)"
        );
        assert_eq!(column_hint("other"), "other");
    }

    #[test]
    fn durations_read_as_words() {
        let d = |s| duration(std::time::Duration::from_secs(s));
        assert_eq!(d(86_400), "1 day");
        assert_eq!(d(28 * 86_400), "28 days");
        assert_eq!(d(5_400), "1 hour 30 minutes");
        assert_eq!(d(1), "1 second");
        assert_eq!(d(0), "0 seconds");
    }

    #[test]
    fn an_eta_says_how_long_and_until_when() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-25T14:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(eta(0, now), "within the current hour's budget");
        assert_eq!(eta(7200, now), "about 2 h at the budget, around 16:00 UTC");
        assert_eq!(
            eta(3 * 86_400, now),
            "about 72 h at the budget, around 2026-11-28 14:00 UTC"
        );
        assert_eq!(
            (from_now(42), from_now(1390), from_now(7500)),
            ("42s".into(), "23m 10s".into(), "2h 05m".into())
        );
    }

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
