//! The export steps: what a run is asked for ([`Intent`]) and its plan (one plan per run, each
//! project from its own first day), made here and only here: the front doors (the command
//! line, the daemon, the demo) pass an intent to `cycle::run`, which plans it.

use super::Context;
use crate::export::{Due, ExportError, Exporter, Plan, Target};
use chrono::NaiveDate;
use std::collections::HashSet;

/// A window as a backfill step names it: dataset, project, day.
pub type WindowId = (&'static str, String, NaiveDate);

/// What a run is asked to export; the run plans it.
#[derive(Clone, Copy)]
pub enum Intent<'a> {
    /// Every window due, from each target's first day to today, whatever this hour's budget
    /// (`export --wait`, the demo): the run waits for the budget where it must.
    Due,
    /// What is due, fitted to each organization's budget this hour (`export`, the daemon's
    /// scheduled run); `backfill_queued`: a queued backfill keeps its share of the budget.
    Fitted {
        /// Whether a backfill is queued.
        backfill_queued: bool,
    },
    /// Every target over `from..=to`, whatever its first day (`backfill`).
    Range {
        /// The first day.
        from: NaiveDate,
        /// The last day.
        to: NaiveDate,
    },
    /// The next window of `from..=to` in export order (page views first: the trends read
    /// them) that `tried` does not hold, if `room` lets its requests go now (the daemon's
    /// queued backfill, one window a step).
    Next {
        /// The first day.
        from: NaiveDate,
        /// The last day.
        to: NaiveDate,
        /// The windows of this backfill tried already.
        tried: &'a HashSet<WindowId>,
        /// Whether a target's organization has room for that many requests now.
        room: &'a (dyn Fn(&Target, u64) -> bool + Sync),
    },
}

/// What the planning of an intent came to.
pub(super) enum Planned {
    /// A plan to run, over these targets.
    Run(Plan, Vec<Target>),
    /// `Next` found no window left: the range's plan (what is not final in it).
    Drained(Plan),
    /// `Next` found a window the budget has no room for yet.
    Waits,
}

/// Plans `intent` over `targets`.
pub(super) fn plan(
    ctx: &Context,
    exporter: &Exporter,
    targets: &[Target],
    intent: Intent<'_>,
) -> Result<Planned, ExportError> {
    Ok(match intent {
        Intent::Due => Planned::Run(plan_due(ctx, exporter, targets)?, targets.to_vec()),
        Intent::Fitted { backfill_queued } => Planned::Run(
            plan_fitted(ctx, exporter, targets, backfill_queued)?,
            targets.to_vec(),
        ),
        Intent::Range { from, to } => {
            Planned::Run(plan_range(exporter, targets, from, to)?, targets.to_vec())
        }
        Intent::Next {
            from,
            to,
            tried,
            room,
        } => next(
            targets,
            plan_range(exporter, targets, from, to)?,
            tried,
            room,
        ),
    })
}

/// The one window of `range` to run next, as [`Intent::Next`] says.
fn next(
    targets: &[Target],
    range: Plan,
    tried: &HashSet<WindowId>,
    room: &(dyn Fn(&Target, u64) -> bool + Sync),
) -> Planned {
    let next: Option<Due> = range
        .due
        .iter()
        .filter(|d| !tried.contains(&(d.dataset(), d.project.clone(), d.day)))
        .min_by_key(|d| crate::dataset::order(d.dataset()))
        .cloned();
    let Some(next) = next else {
        return Planned::Drained(range);
    };
    let Some(target) = targets.iter().find(|t| t.project == next.project) else {
        return Planned::Drained(range);
    };
    if !room(target, next.expected_requests) {
        return Planned::Waits;
    }
    let one = Plan {
        expected_requests: next.expected_requests,
        due: vec![next],
        ..range
    };
    Planned::Run(one, vec![target.clone()])
}

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
