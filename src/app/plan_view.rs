//! What the planner would do now, read-only (for `docpipe status`): the incremental run's plan
//! and each queued backfill's, from the same planner the runs use.

use super::Context;
use super::export::{plan_due, plan_range};
use crate::dataset::{Dataset, Windowing};
use crate::export::{ExportError, Plan};
use crate::planner::Room;
use crate::planner::forecast::{OrgForecast, Stream, Windows};
use crate::store::activity::Trouble;
use crate::store::{Known, Queued, StoreError};
use chrono::{DateTime, NaiveDate, Utc};
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

/// What is due and what is left, planned and forecast at one time: by a run (the daemon's,
/// after each export) and read by the status while fresh, or by the status itself.
#[derive(Debug)]
pub struct Ahead {
    /// When it was planned.
    pub at: DateTime<Utc>,
    /// The plans of what is due.
    pub view: PlanView,
    /// Each project's dataset as the planner sees it.
    pub streams: Vec<Stream>,
    /// Each organization's forecast.
    pub forecast: Vec<OrgForecast>,
}

/// How long what a run planned stands for the status, when no window was written since.
pub const FRESH: chrono::Duration = chrono::Duration::minutes(2);

impl Ahead {
    /// Plans the incremental run and every queued backfill, and forecasts each organization
    /// (reads the state; sends nothing).
    pub fn now(ctx: &Context) -> anyhow::Result<Self> {
        let at = ctx.clock.now();
        let view = plan_view(ctx)?;
        let (streams, forecast) = forecast_knowing(ctx, &view.due.known)?;
        Ok(Self {
            at,
            view,
            streams,
            forecast,
        })
    }

    /// Each organization's paragraph (what the config asks of the budget, and what happens
    /// when it cannot be met), with whether it is short.
    pub fn paragraphs(&self) -> Vec<(bool, String)> {
        self.forecast
            .iter()
            .map(|f| (f.short(), f.paragraph(&self.streams)))
            .collect()
    }

    /// The windows not final yet, by project: each will be looked at again.
    pub fn pending_by_project(&self) -> std::collections::HashMap<String, u64> {
        let mut pending = std::collections::HashMap::new();
        for s in &self.streams {
            if let Windows::Days { days, .. } = &s.windows {
                *pending.entry(s.project.clone()).or_default() += days.len() as u64;
            }
        }
        pending
    }

    /// By organization, the requests of an hour a backfill leaves free for what the next
    /// hourly runs need: the forecast's steady demand, at most the budget less the backfill's
    /// floor under `freshness`.
    pub fn reserve(
        &self,
        freshness: &crate::planner::Freshness,
    ) -> std::collections::HashMap<String, u64> {
        self.forecast
            .iter()
            .map(|f| {
                let floor = freshness.backfill_floor(f.limit);
                (
                    f.org.clone(),
                    (f.demand.ceil() as u64).min(f.limit.saturating_sub(floor)),
                )
            })
            .collect()
    }

    /// Whether it still says what is due: planned less than [`FRESH`] ago, and no window
    /// written since by any process.
    pub fn fresh(&self, ctx: &Context) -> bool {
        ctx.clock.now() - self.at < FRESH
            && ctx
                .store()
                .newest_written()
                .is_ok_and(|w| w.is_none_or(|w| w <= self.at))
    }
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
/// (measured: the latest windows). Reads the state only; the days a plan read are taken from
/// `known` rather than read again.
pub fn streams(ctx: &Context, known: &Known) -> Result<Vec<Stream>, StoreError> {
    let s = &ctx.settings;
    let today = s.today(ctx.clock.now());
    let now = ctx.clock.now();
    // Windows stuck on the service's paging (waiting for their next try, or walking far
    // beyond their estimate) are left out of the forecast, and named.
    let stuck: Vec<crate::store::activity::WindowFailure> = ctx
        .store()
        .history()
        .failures()?
        .into_iter()
        .filter(|f| match f.kind {
            Trouble::Long => true,
            Trouble::Stuck => f.retry_at.is_some_and(|r| r > now),
            Trouble::Failed => false,
        })
        .collect();
    let mut out = Vec::new();
    for p in &s.projects {
        for name in &p.datasets {
            let Some(dataset) = crate::dataset::by_name(name) else {
                continue;
            };
            let mine: Vec<_> = stuck
                .iter()
                .filter(|f| f.dataset == dataset.name() && f.project == p.id)
                .collect();
            let (walk_cost, mut windows) = match dataset.windowing() {
                Windowing::Daily => (
                    crate::dataset::window_cost(ctx.store(), dataset, &p.id)?,
                    Windows::Days {
                        days: days_not_final(
                            ctx,
                            (dataset.name(), &p.id),
                            p.first_day(today),
                            known,
                        )?,
                        lookback_days: s.lookback_days,
                    },
                ),
                Windowing::Span { .. } => span_stream(ctx, dataset, &p.id)?,
                Windowing::OnDemand => continue,
            };
            if let Windows::Days { days, .. } = &mut windows {
                for f in &mine {
                    days.remove(&f.day);
                }
            }
            out.push(Stream {
                org: p.organization.clone(),
                project: p.id.clone(),
                dataset: dataset.name(),
                policy: s.freshness.policy(name),
                walk_cost,
                windows,
                stuck: mine
                    .iter()
                    .map(|f| {
                        let when = match (f.kind, f.retry_at) {
                            (Trouble::Stuck, Some(r)) => {
                                format!("tried again after {}", r.format("%Y-%m-%d %H:%M UTC"))
                            }
                            _ => "walking in turns after the other windows".to_string(),
                        };
                        format!("{} {} {} ({when})", f.dataset, f.project, f.window)
                    })
                    .collect(),
            });
        }
    }
    Ok(out)
}

/// A day written by a version of docpipe that kept no looks: due at once.
fn long_ago(ctx: &Context) -> DateTime<Utc> {
    ctx.clock.now() - chrono::Duration::days(30)
}

/// The days `first..=today` of a daily dataset and project not final: when each written one
/// was last looked at (`None`: never written).
fn days_not_final(
    ctx: &Context,
    (dataset, project): (&'static str, &str),
    first: NaiveDate,
    known: &Known,
) -> Result<BTreeMap<NaiveDate, Option<DateTime<Utc>>>, StoreError> {
    let today = ctx.settings.today(ctx.clock.now());
    let known = ctx.store().windows_known(known, dataset, project)?;
    let looks = ctx.store().looks(dataset, project)?;
    let long_ago = long_ago(ctx);
    let mut days = BTreeMap::new();
    let mut d = first;
    while d <= today {
        match known.get(&d).map(|w| w.is_final) {
            Some(true) => {}
            Some(false) => {
                let at = looks.get(&d).map_or(long_ago, |l| l.checked_at);
                days.insert(d, Some(at));
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
    Ok(days)
}

/// A span's walks for the forecast: the recent walk's cost, its last walk and its last full
/// re-check with that walk's cost.
fn span_stream(
    ctx: &Context,
    dataset: &dyn Dataset,
    project: &str,
) -> Result<(u64, Windows), StoreError> {
    let state = ctx.store().span_state(dataset.name(), project)?;
    let look = state.look;
    let latest = ctx.store().span_cost(dataset.name(), project)?;
    let walked = state
        .through
        .map(|_| look.walked_at.unwrap_or(long_ago(ctx)));
    let recheck = u64::from(ctx.shaped_settings().recheck(dataset));
    // The recent walk covers the last day reached (today); the full one its re-check.
    let full = (recheck > 1).then(|| {
        (
            look.full_at.or(walked),
            crate::planner::span_estimate(latest, recheck + 1),
        )
    });
    let recent = crate::planner::span_estimate(latest, recheck.min(1) + 1);
    Ok((
        recent,
        Windows::Span {
            walked_at: walked,
            full,
        },
    ))
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
            (
                o.id.clone(),
                Room::analytics(&o.limits, ctx.budget().as_ref(), &o.id, now),
            )
        })
        .collect()
}

/// The forecast of every organization (see [`crate::planner::forecast`]), with the streams it
/// was made from.
pub fn forecast(ctx: &Context) -> Result<(Vec<Stream>, Vec<OrgForecast>), StoreError> {
    forecast_knowing(ctx, &Known::new())
}

/// [`forecast`], the days a plan read taken from `known` rather than read again.
pub fn forecast_knowing(
    ctx: &Context,
    known: &Known,
) -> Result<(Vec<Stream>, Vec<OrgForecast>), StoreError> {
    let streams = streams(ctx, known)?;
    let f = crate::planner::forecast::forecast(
        &streams,
        &rooms(ctx),
        &ctx.settings.freshness,
        ctx.settings.timezone,
        ctx.clock.now(),
    );
    Ok((streams, f))
}
