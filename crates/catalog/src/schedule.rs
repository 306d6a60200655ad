//! Cron schedules, checked as the daemon's scheduler reads them.

/// Parses a cron expression as the daemon's scheduler (tokio-cron-scheduler) does: six fields,
/// `sec min hour day-of-month month day-of-week`, UTC.
/// A schedule must also run within a year (`0 0 0 30 2 *`, the 30th of February, parses but
/// never runs: a daemon with it would never export again).
pub fn parse_schedule(expr: &str) -> Result<croner::Cron, String> {
    let cron = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .dom_and_dow(true)
        .build()
        .parse(expr)
        .map_err(|e| {
            format!("schedule {expr:?} is not a cron expression of 6 fields, sec min hour day month weekday ({e})")
        })?;
    // From the start of a year that is not a leap year: each day of a year comes within it.
    let from = chrono::DateTime::<chrono::Utc>::from_naive_utc_and_offset(
        chrono::NaiveDate::from_ymd_opt(2001, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap_or_default(),
        chrono::Utc,
    );
    match cron.find_next_occurrence(&from, true) {
        Ok(next) if next - from <= chrono::Duration::days(366) => Ok(cron),
        _ => Err(format!(
            "schedule {expr:?} has no run within a year (a day that does not exist, such as the 30th of February): it would never run"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_that_never_runs_is_refused() {
        assert!(parse_schedule("0 0 * * * *").is_ok());
        assert!(parse_schedule("0 0 6 31 12 *").is_ok());
        assert_eq!(
            parse_schedule("0 0 0 30 2 *").unwrap_err(),
            "schedule \"0 0 0 30 2 *\" has no run within a year (a day that does not exist, such as the 30th of February): it would never run"
        );
        assert!(parse_schedule("0 0 0 31 4 *").is_err(), "the 31st of April");
    }
}
