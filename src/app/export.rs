//! The export steps: plan what is due (one plan per run, each project from its own first day),
//! and what a run leaves due.

use super::Context;
use crate::export::{Due, ExportError, Exporter, Plan, RecordDue, Summary, Target};
use chrono::NaiveDate;

/// The plan of the incremental run: each target from its first day to today.
pub fn plan_due(
    ctx: &Context,
    exporter: &Exporter,
    targets: &[Target],
) -> Result<Plan, ExportError> {
    let today = ctx.settings.today(ctx.clock.now());
    exporter.plan(targets, today, today)
}

/// The plan of a backfill: every target over `from..=to`, whatever its first day.
pub fn plan_range(
    exporter: &Exporter,
    targets: &[Target],
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Plan, ExportError> {
    let targets: Vec<Target> = targets
        .iter()
        .map(|t| Target {
            start: None,
            ..t.clone()
        })
        .collect();
    exporter.plan(&targets, from, to)
}

/// The windows of `plan` still due after its run: all but those written as final (the next
/// run fetches the rest again). Computed from the two, with no I/O.
pub fn still_due<'a>(plan: &'a Plan, summary: &Summary) -> Vec<&'a Due> {
    plan.due
        .iter()
        .filter(|d| {
            !summary
                .windows
                .iter()
                .any(|w| w.is_final && w.project == d.project && w.day == d.day)
        })
        .collect()
}

/// The other datasets' windows of `plan` still due after its run, as [`still_due`] (a span is
/// always due again).
pub fn records_still_due<'a>(plan: &'a Plan, summary: &Summary) -> Vec<&'a RecordDue> {
    plan.records
        .iter()
        .filter(|d| {
            !summary.records.iter().any(|w| {
                w.is_final
                    && w.dataset == d.dataset()
                    && w.project == d.walk.project
                    && w.from == d.walk.from
            })
        })
        .collect()
}
