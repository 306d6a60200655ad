//! Cron schedules, checked as the daemon's scheduler reads them.

/// Parses a cron expression as the daemon's scheduler (tokio-cron-scheduler) does: six fields,
/// `sec min hour day-of-month month day-of-week`, UTC.
pub fn parse_schedule(expr: &str) -> Result<croner::Cron, String> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .dom_and_dow(true)
        .build()
        .parse(expr)
        .map_err(|e| {
            format!("schedule {expr:?} is not a cron expression of 6 fields, sec min hour day month weekday ({e})")
        })
}
