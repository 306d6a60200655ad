//! What the planner would do now, read-only (for `docpipe status`): the incremental run's plan
//! and each queued backfill's, from the same planner the runs use.

use super::Context;
use super::export::{plan_due, plan_range};
use crate::dataset::Windowing;
use crate::dataset::page_views::PAGE_VIEWS;
use crate::export::{ExportError, Plan};
use crate::planner::Room;
use crate::planner::forecast::{OrgForecast, Stream, Windows};
use crate::store::{Queued, StoreError};
use chrono::NaiveDate;
use std::collections::BTreeMap;

/// The plans of what is due.
#[derive(Debug)]
pub struct PlanView {
    /// The incremental run (`docpipe export`, or the daemon's next scheduled run), fitted to
    /// this hour's budget.
    pub due: Plan,
    /// Each queued backfill, oldest first, with its plan.
    pub queued: Vec<(Queued, Plan)>,
}

/// Plans the incremental run and every queued backfill (reads the state; sends nothing).
pub fn plan_view(ctx: &Context) -> Result<PlanView, ExportError> {
    let exporter = ctx.exporter();
    let all = ctx.targets(&[]).unwrap_or_default();
    let mut due = plan_due(ctx, &exporter, &all)?;
    due.backfill_queued = !ctx.store().queue().pending(ctx.clock.now())?.is_empty();
    due.fit(exporter.freshness());
    let mut queued = Vec::new();
    for q in ctx.store().queue().pending(ctx.clock.now())? {
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

/// The planner's view of every configured project and dataset, for the forecast: the days not
/// final with when each was last looked at, each span's last walks, and what a walk costs
/// (measured: the latest windows' requests). Reads the state only.
pub fn streams(ctx: &Context) -> Result<Vec<Stream>, StoreError> {
    let s = &ctx.settings;
    let st = ctx.store();
    let now = ctx.clock.now();
    let today = s.today(now);
    // A day written by a version of docpipe that kept no looks: due at once.
    let long_ago = now - chrono::Duration::days(30);
    let records = ctx.record_settings();
    let mut out = Vec::new();
    for p in &s.projects {
        let first = p.first_day(today);
        for name in &p.datasets {
            let policy = s.freshness.policy(name);
            let stream = |walk_cost: u64, windows: Windows| Stream {
                org: p.organization.clone(),
                project: p.id.clone(),
                dataset: crate::dataset::by_name(name).map_or("", |d| d.name()),
                policy,
                walk_cost,
                windows,
            };
            let days =
                |finals: &dyn Fn(NaiveDate) -> Option<bool>,
                 looks: &std::collections::HashMap<NaiveDate, crate::store::Look>| {
                    let mut days = BTreeMap::new();
                    let mut d = first;
                    while d <= today {
                        match finals(d) {
                            Some(true) => {}
                            Some(false) => {
                                days.insert(
                                    d,
                                    Some(looks.get(&d).map_or(long_ago, |l| l.checked_at)),
                                );
                            }
                            None => {
                                days.insert(d, None);
                            }
                        }
                        match d.succ_opt() {
                            Some(n) => d = n,
                            None => break,
                        }
                    }
                    days
                };
            if *name == PAGE_VIEWS {
                let windows = st.windows(PAGE_VIEWS, &p.id)?;
                let looks = st.looks(PAGE_VIEWS, &p.id)?;
                let cost = st.recent_rows(&p.id)?.map_or(1, |rows| {
                    (rows.max(1) as u64).div_ceil(u64::from(crate::api::views::PAGE_LIMIT))
                });
                let days = days(&|d| windows.get(&d).map(|w| w.is_final), &looks);
                out.push(stream(
                    cost,
                    Windows::Days {
                        days,
                        lookback_days: s.lookback_days,
                    },
                ));
                continue;
            }
            let Some(shape) = crate::dataset::shape_by_name(name) else {
                continue;
            };
            let cost = st
                .recent_requests(shape.name, &p.id)?
                .map_or(1, |n| n.max(1) as u64);
            match shape.windowing {
                Windowing::Daily => {
                    let known = st.windows(shape.name, &p.id)?;
                    let looks = st.looks(shape.name, &p.id)?;
                    let days = days(&|d| known.get(&d).map(|w| w.is_final), &looks);
                    out.push(stream(
                        cost,
                        Windows::Days {
                            days,
                            lookback_days: s.lookback_days,
                        },
                    ));
                }
                Windowing::Span { .. } => {
                    let look = st.span_look(shape.name, &p.id)?;
                    let walked = st
                        .span_through(shape.name, &p.id)?
                        .map(|_| look.walked_at.unwrap_or(long_ago));
                    let recheck = u64::from(records.recheck(shape));
                    let latest = st.span_cost(shape.name, &p.id)?;
                    // The recent walk covers the last day reached (today); the full one its re-check.
                    let full = (recheck > 1).then(|| {
                        (
                            look.full_at.or(walked),
                            crate::planner::span_estimate(latest, recheck + 1),
                        )
                    });
                    let recent = crate::planner::span_estimate(latest, recheck.min(1) + 1);
                    out.push(stream(
                        recent,
                        Windows::Span {
                            walked_at: walked,
                            full,
                        },
                    ));
                }
                Windowing::OnDemand => {}
            }
        }
    }
    Ok(out)
}

/// Each organization's budget an hour, and what will still count of the last hour's use in
/// a few minutes (the room of a run starting now).
pub fn rooms(ctx: &Context) -> BTreeMap<String, Room> {
    let now = ctx.clock.now() + crate::export::ROOM_LOOKAHEAD;
    ctx.settings
        .organizations
        .iter()
        .filter(|o| ctx.settings.projects.iter().any(|p| p.organization == o.id))
        .map(|o| {
            let limit = o.limits.effective(o.limits.analytics_per_hour);
            let used = ctx.budget().used(&format!("analytics:{}", o.id), now);
            (
                o.id.clone(),
                Room {
                    limit: u64::from(limit),
                    used: u64::from(used),
                },
            )
        })
        .collect()
}

/// The forecast of every organization (see [`crate::planner::forecast`]), with the streams it
/// was made from.
pub fn forecast(ctx: &Context) -> Result<(Vec<Stream>, Vec<OrgForecast>), StoreError> {
    let streams = streams(ctx)?;
    let f = crate::planner::forecast::forecast(
        &streams,
        &rooms(ctx),
        &ctx.settings.freshness,
        ctx.settings.timezone,
        ctx.clock.now(),
    );
    Ok((streams, f))
}
