//! What the planner would do now, read-only (for `docpipe status`): the incremental run's plan
//! and each queued backfill's, from the same planner the runs use.

use super::Context;
use super::export::{plan_due, plan_range};
use crate::export::{ExportError, Plan};
use crate::store::Queued;

/// The plans of what is due.
#[derive(Debug)]
pub struct PlanView {
    /// The incremental run (`docpipe export`, or the daemon's next scheduled run).
    pub due: Plan,
    /// Each queued backfill, oldest first, with its plan.
    pub queued: Vec<(Queued, Plan)>,
}

/// Plans the incremental run and every queued backfill (reads the state; sends nothing).
pub fn plan_view(ctx: &Context) -> Result<PlanView, ExportError> {
    let exporter = ctx.exporter();
    let all = ctx.targets(&[]).unwrap_or_default();
    let due = plan_due(ctx, &exporter, &all)?;
    let mut queued = Vec::new();
    for q in ctx.store().queued()? {
        let targets: Vec<_> = all
            .iter()
            .filter(|t| q.projects.is_empty() || q.projects.contains(&t.project))
            .cloned()
            .collect();
        let plan = plan_range(&exporter, &targets, q.from, q.to)?;
        queued.push((q, plan));
    }
    Ok(PlanView { due, queued })
}
