//! The export steps: plan what is due (one plan per run, each project from its own first day),
//! and what a run leaves due.

use super::Context;
use crate::export::{ExportError, Exporter, Plan, Target};
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

/// The plan of the incremental run, fitted to each organization's budget this hour (see
/// [`Plan::fit`]); `backfill_queued`: a queued backfill keeps its share of the budget.
pub fn plan_fitted(
    ctx: &Context,
    exporter: &Exporter,
    targets: &[Target],
    backfill_queued: bool,
) -> Result<Plan, ExportError> {
    let mut plan = plan_due(ctx, exporter, targets)?;
    plan.backfill_queued = backfill_queued;
    plan.fit(exporter.freshness());
    Ok(plan)
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
