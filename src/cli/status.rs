//! `docpipe status`: what the state database knows, per project, and what the planner would do
//! now; reads only, needs no key.

use crate::app::plan_view::{PlanView, plan_view};
use crate::app::{Access, Context, Keys};
use crate::clock::{self, SharedClock};
use crate::config::Settings;
use crate::dataset::page_views::PAGE_VIEWS;
use crate::export::Plan;
use crate::rules::engine::firing_line;
use crate::store::state_path;
use chrono::NaiveDate;
use std::fmt::Write as _;

/// Print, from the state database, per project: the days exported, the last final day, the
/// provisional days, the days `export` would fetch now; the backfills queued for the daemon; the
/// requests used in the last hour per budget; and the last rule firings. Sends nothing.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many of the last rule firings to show.
    #[arg(long, default_value_t = 5)]
    pub firings: usize,
}

fn days(list: &[NaiveDate]) -> String {
    list.iter()
        .map(NaiveDate::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A duration in hours and minutes, short.
fn short(d: chrono::Duration) -> String {
    let m = d.num_minutes().max(0);
    match (m / 60, m % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m:02}m"),
    }
}

/// The planner's time estimate, in words.
fn eta(plan: &Plan) -> String {
    let eta = plan.eta();
    if eta.is_zero() {
        "within the current hour's budget".to_string()
    } else {
        format!("about {} h at the budget", eta.as_secs() / 3600)
    }
}

/// The status text at the clock's now.
pub async fn describe(
    settings: &Settings,
    clock: SharedClock,
    firings: usize,
) -> anyhow::Result<String> {
    let state_file = state_path(&settings.output_dir);
    let mut out = String::new();
    if !state_file.exists() && settings.state_url.is_none() {
        return Ok(format!(
            "nothing exported yet: no state database at {}\n",
            state_file.display()
        ));
    }
    let now = clock.now();
    let ctx = Context::open(settings.clone(), clock, Access::Shared, Keys::None).await?;
    let view = plan_view(&ctx)?;
    let _ = writeln!(out, "state: {}", ctx.store().sql().name());
    let today = settings.today(now);
    let unknown = ctx.store().unknown_projects()?;
    for p in &settings.projects {
        if let Some(u) = unknown.iter().find(|u| u.project == p.id) {
            let _ = writeln!(
                out,
                "{}: unknown to the service at {} ({}, {}): not exported until its id is fixed in the config, or `export --retry-unknown`",
                p.id,
                u.base_url,
                crate::text::one_line(&u.message),
                u.at.format("%Y-%m-%d %H:%M UTC")
            );
            continue;
        }
        page_view_line(&mut out, &ctx, &view, p, today)?;
        for name in p.datasets.iter().filter(|d| **d != PAGE_VIEWS) {
            if let Some(line) = dataset_line(&ctx, &view, p, name, now)? {
                let _ = writeln!(out, "  {name}: {line}");
            }
        }
    }
    plan_lines(&mut out, &ctx, &view)?;
    daemon_lines(&mut out, &ctx, &view, now)?;
    budget_lines(&mut out, &ctx, now);
    rule_lines(&mut out, &ctx, firings)?;
    Ok(out)
}

/// A project's page views: the days exported, the last final one, the provisional ones.
fn page_view_line(
    out: &mut String,
    ctx: &Context,
    view: &PlanView,
    p: &crate::config::Project,
    today: NaiveDate,
) -> anyhow::Result<()> {
    let state = ctx.store();
    let windows = state.windows(PAGE_VIEWS, &p.id)?;
    let mut known: Vec<NaiveDate> = windows.keys().copied().collect();
    known.sort();
    let start = p.first_day(today);
    let due = view
        .due
        .due
        .iter()
        .filter(|d| d.project == p.id && d.dataset() == PAGE_VIEWS)
        .count();
    let last_final = known.iter().rev().find(|d| windows[*d].is_final);
    let provisional: Vec<NaiveDate> = known
        .iter()
        .filter(|d| !windows[*d].is_final)
        .copied()
        .collect();
    let mismatches = windows.values().filter(|w| w.mismatch.is_some()).count();
    let _ = match (known.first(), known.last()) {
        (Some(first), Some(last)) => writeln!(
            out,
            "project {}: {} days exported ({first}..{last}), last final day {}, {} provisional{}{}; `export` would fetch {due} days from {start}",
            p.id,
            known.len(),
            last_final.map_or("none".to_string(), ToString::to_string),
            provisional.len(),
            if provisional.is_empty() {
                String::new()
            } else {
                format!(" ({})", days(&provisional))
            },
            if mismatches > 0 {
                format!(", {mismatches} with a persistent mismatch")
            } else {
                String::new()
            },
        ),
        _ => writeln!(
            out,
            "project {}: nothing exported; `export` would fetch {due} days from {start}",
            p.id
        ),
    };
    Ok(())
}

/// The runs of days from `first` to the last of `known` (sorted) that `known` lacks, as
/// (first, last) inclusive.
fn holes(known: &[NaiveDate], first: NaiveDate) -> Vec<(NaiveDate, NaiveDate)> {
    let Some(&last) = known.last() else {
        return Vec::new();
    };
    crate::export::holes(|d| known.binary_search(&d).is_ok(), first, last)
        .into_iter()
        .map(|r| (r.start, r.end.pred_opt().unwrap_or(r.start)))
        .collect()
}

/// A dataset's line beside page views: its days, or its span's reach, or its threads.
fn dataset_line(
    ctx: &Context,
    view: &PlanView,
    p: &crate::config::Project,
    name: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<Option<String>> {
    let state = ctx.store();
    let Some(shape) = crate::dataset::shape_by_name(name) else {
        return Ok(None);
    };
    let due: Vec<_> = view
        .due
        .due
        .iter()
        .filter(|d| d.dataset() == name && d.project == p.id)
        .collect();
    let written = state.windows(name, &p.id)?;
    let mut known: Vec<NaiveDate> = written.keys().copied().collect();
    known.sort();
    // Days from the project's first one to the last covered that nothing covers.
    let first = p.first_day(ctx.settings.today(now));
    let gaps = holes(&known, first);
    let gaps = if gaps.is_empty() {
        String::new()
    } else {
        format!(
            "; not covered: {} (`export` fills them)",
            gaps.iter()
                .map(|(a, b)| if a == b {
                    a.to_string()
                } else {
                    format!("{a}..{b}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let line = match shape.windowing {
        crate::dataset::Windowing::Daily => {
            let provisional = written.values().filter(|w| !w.is_final).count();
            match (known.first(), known.last()) {
                (Some(a), Some(b)) => format!(
                    "{} days ({a}..{b}), {provisional} provisional{gaps}; `export` would fetch {} days",
                    known.len(),
                    due.len()
                ),
                _ => format!("nothing exported; `export` would fetch {} days", due.len()),
            }
        }
        crate::dataset::Windowing::Span { .. } => {
            let walks = due
                .iter()
                .map(|d| format!("{}..{}", d.day, d.to.pred_opt().unwrap_or(d.to)))
                .collect::<Vec<_>>()
                .join(", ");
            let walks = if walks.is_empty() {
                let look = state.span_look(name, &p.id)?;
                match look.walked_at {
                    Some(at) => {
                        format!("nothing (walked {} ago: not due yet)", short(now - at))
                    }
                    None => "nothing".to_string(),
                }
            } else {
                walks
            };
            match (state.span_through(name, &p.id)?, known.first()) {
                (Some(t), Some(a)) => format!(
                    "covered {a}..{}{gaps}; `export` would walk {walks}",
                    t.pred_opt().unwrap_or(t)
                ),
                (Some(t), None) => format!(
                    "fetched through {}; `export` would walk {walks}",
                    t.pred_opt().unwrap_or(t)
                ),
                (None, _) => format!("nothing exported; `export` would walk {walks}"),
            }
        }
        crate::dataset::Windowing::OnDemand => {
            format!("{} threads fetched", state.threads_fetched(&p.id)?.len())
        }
    };
    Ok(Some(line))
}

/// What `export` would do now, the planner's next 24 hours and the backfills queued.
fn plan_lines(out: &mut String, ctx: &Context, view: &PlanView) -> anyhow::Result<()> {
    let _ = writeln!(
        out,
        "export now: {} windows, about {} requests, ETA {}",
        view.due.due.len(),
        view.due.expected_requests,
        eta(&view.due)
    );
    if view.due.deferred > 0 || view.due.fresh > 0 {
        let _ = writeln!(
            out,
            "  {} windows looked at recently enough wait for their turn",
            view.due.fresh
        );
    }
    let (streams, forecast) = crate::app::plan_view::forecast(ctx)?;
    let _ = writeln!(out, "planner, the next 24 hours:");
    for f in &forecast {
        let _ = writeln!(out, "  {}", f.paragraph(&streams));
        let spend: Vec<String> = f
            .by_dataset
            .iter()
            .map(|(d, n)| format!("{d} {n:.1}"))
            .collect();
        let _ = writeln!(
            out,
            "    requests an hour by dataset: {}",
            if spend.is_empty() {
                "none".to_string()
            } else {
                spend.join(", ")
            }
        );
        let mut by_project: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for (p, d, today_stale, days_every) in &f.staleness {
            by_project.entry(p).or_default().push(format!(
                "{d} today <= {}, days every <= {}",
                short(*today_stale),
                short(*days_every)
            ));
        }
        for (p, parts) in by_project {
            let _ = writeln!(out, "    {p}: {}", parts.join("; "));
        }
    }
    if view.queued.is_empty() {
        let _ = writeln!(out, "backfill queue: empty");
    }
    for (q, plan) in &view.queued {
        let _ = writeln!(
            out,
            "backfill queued ({}{}): {}..{} of {}: {} windows not final yet, about {} requests, ETA {}",
            q.id,
            q.holder
                .as_ref()
                .map_or(String::new(), |h| format!(", held by daemon {h}")),
            q.from,
            q.to,
            if q.projects.is_empty() {
                "every project".to_string()
            } else {
                q.projects.join(", ")
            },
            plan.due.len(),
            plan.expected_requests,
            eta(plan)
        );
    }
    Ok(())
}

/// The daemons: alive or not, what each holds.
fn daemon_lines(
    out: &mut String,
    ctx: &Context,
    view: &PlanView,
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<()> {
    let state = ctx.store();
    let daemons = state.daemons().all()?;
    if daemons.is_empty() {
        let _ = writeln!(out, "daemons: none running");
    }
    let (held, done_by) = if state.is_shared() {
        let claims = state.claims();
        (claims.held(now)?, claims.done_by()?)
    } else {
        (Vec::new(), Vec::new())
    };
    for d in &daemons {
        let mut holds: Vec<String> = view
            .queued
            .iter()
            .filter(|(q, _)| q.holder.as_ref() == Some(&d.name))
            .map(|(q, _)| format!("backfill {}", q.id))
            .collect();
        holds.extend(
            held.iter()
                .filter(|(_, h)| *h == d.name)
                .map(|(k, _)| format!("window {k}")),
        );
        let done = done_by
            .iter()
            .find(|(h, _)| *h == d.name)
            .map_or(0, |(_, n)| *n);
        let holds = if holds.is_empty() {
            "nothing".to_string()
        } else {
            holds.join(", ")
        };
        let seen = short(now - d.seen_at);
        let started = d.started_at.format("%Y-%m-%d %H:%M:%SZ");
        let _ = if d.alive(now) {
            writeln!(
                out,
                "daemon {}: alive (heartbeat {seen} ago), started {started}, holds {holds}{}",
                d.name,
                if state.is_shared() {
                    format!("; {done} windows done")
                } else {
                    String::new()
                }
            )
        } else {
            writeln!(
                out,
                "daemon {}: no heartbeat for {seen} (stopped without leaving, or cut off), started {started}; what it held is taken over when its lease runs out",
                d.name
            )
        };
    }
    Ok(())
}

/// The requests used in the last hour, per budget.
fn budget_lines(out: &mut String, ctx: &Context, now: chrono::DateTime<chrono::Utc>) {
    let settings = &ctx.settings;
    let budget = ctx.budget();
    for o in &settings.organizations {
        let scope = format!("analytics:{}", o.id);
        let _ = writeln!(
            out,
            "budget {scope}: {} of {} requests used in the last hour",
            budget.used(&scope, now),
            o.limits.effective(o.limits.analytics_per_hour)
        );
    }
    let limits = settings.agent_limits();
    for p in &settings.projects {
        let scope = format!("agent:{}", p.id);
        let used = budget.used(&scope, now);
        if used > 0 {
            let _ = writeln!(
                out,
                "budget {scope}: {used} of {} follow-ups and job creations used in the last hour",
                limits.get(&p.id).copied().unwrap_or(0)
            );
        }
    }
}

/// The last rule firings.
fn rule_lines(out: &mut String, ctx: &Context, firings: usize) -> anyhow::Result<()> {
    let state = ctx.store();
    let all = state.ledger().all()?;
    if all.is_empty() {
        let _ = writeln!(out, "rules: no firing yet");
    } else {
        let _ = writeln!(out, "rules: {} firings; the last:", all.len());
        for f in all.iter().rev().take(firings).rev() {
            let _ = writeln!(
                out,
                "  {} {}",
                f.fired_at.format("%Y-%m-%d %H:%M:%SZ"),
                firing_line(f)
            );
        }
    }
    Ok(())
}

/// Runs `status`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    print!(
        "{}",
        describe(settings, clock::system(), args.firings).await?
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_the_runs_of_days_missing_before_the_last_one_covered() {
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        let known = [
            d("2026-03-03"),
            d("2026-03-04"),
            d("2026-03-07"),
            d("2026-03-09"),
        ];
        assert_eq!(
            holes(&known, d("2026-03-01")),
            [
                (d("2026-03-01"), d("2026-03-02")),
                (d("2026-03-05"), d("2026-03-06")),
                (d("2026-03-08"), d("2026-03-08"))
            ]
        );
        assert_eq!(holes(&known, d("2026-03-10")), []);
        assert_eq!(holes(&[], d("2026-03-01")), []);
    }
}
