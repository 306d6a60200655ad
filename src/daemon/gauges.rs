//! The daemon's metrics on `/metrics`, each set here from what a piece of work returned (a
//! run's report, a firing's reports, a poll's ended jobs): the work itself sets none. The
//! export's own events (windows, rows, requests) are counted where they are emitted
//! ([`crate::events::Event::count`]).

use crate::app::cycle::{Report, TrendsRun};
use crate::app::rules::Fired;
use crate::export::Target;
use crate::rules::Rule;
use crate::rules::engine::{Report as FiringReport, polls};
use crate::store::ledger::Firing;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};

/// A run of `kind` (`export`, `rules`, `backfill`) ended, `ok` or not.
pub fn run(kind: &'static str, ok: bool) {
    metrics::counter!("docpipe_runs_total", "kind" => kind, "result" => if ok { "ok" } else { "failed" })
        .increment(1);
}

/// What the rate budget of each organization of `targets` has left now.
pub fn budget(targets: &[Target], now: DateTime<Utc>) {
    let mut seen = HashSet::new();
    for t in targets {
        let scope = t.client.analytics_scope();
        if seen.insert(scope.clone()) {
            let room = crate::planner::Room::analytics(
                &t.client.settings().limits,
                t.client.budget().as_ref(),
                t.client.organization(),
                now,
            );
            metrics::gauge!("docpipe_budget_remaining", "scope" => scope).set(room.left() as f64);
        }
    }
}

/// An incremental export's report: staleness, windows pending and the last success per
/// project, the trends, the push, the run.
pub fn export(
    report: &Report,
    targets: &[Target],
    pending: &HashMap<String, u64>,
    now: DateTime<Utc>,
) {
    for (project, dataset, stale) in &report.staleness {
        metrics::gauge!("docpipe_staleness_seconds", "project" => project.clone(), "dataset" => *dataset)
            .set(stale.num_seconds() as f64);
    }
    let failed: HashSet<&str> = report
        .summary
        .failed
        .iter()
        .map(|f| f.project.as_str())
        .collect();
    for t in targets {
        metrics::gauge!("docpipe_windows_pending", "project" => t.project.clone())
            .set(pending.get(&t.project).copied().unwrap_or(0) as f64);
        if !failed.contains(t.project.as_str()) {
            metrics::gauge!("docpipe_last_export_success_timestamp_seconds", "project" => t.project.clone())
                .set(now.timestamp() as f64);
        }
    }
    if matches!(report.trends, TrendsRun::Computed(..)) {
        metrics::counter!("docpipe_trends_computed_total").increment(1);
    }
    if report.pushed.is_err() {
        push_failed();
    }
    budget(targets, now);
    run("export", failed.is_empty());
}

/// Sending the output to its bucket failed.
pub fn push_failed() {
    metrics::counter!("docpipe_output_push_failures_total").increment(1);
}

/// A set of firings: each counted, with the outcomes of the jobs not left to polling (those are
/// counted when polling ends), and the firings waiting for review.
pub fn fired(rules: &[Rule], fired: &Fired) {
    metrics::gauge!("docpipe_rule_firings_pending").set(fired.pending as f64);
    for (rule, r) in rules.iter().zip(&fired.reports) {
        let (FiringReport::Held(f) | FiringReport::Fired(f)) = r else {
            continue;
        };
        metrics::counter!("docpipe_rule_firings_total", "rule" => f.rule.clone(), "sent" => f.sent.as_str())
            .increment(1);
        if matches!(r, FiringReport::Fired(_))
            && let Some(status) = &f.status
            && !polls(rule, f)
        {
            outcome(f, status);
        }
    }
    run("rules", !fired.reports.iter().any(FiringReport::failed));
}

/// A look at the jobs being polled, and those that ended in it.
pub fn polled(ended: &[Firing]) {
    metrics::counter!("docpipe_poll_steps_total").increment(1);
    for f in ended {
        if let Some(status) = &f.status {
            outcome(f, status);
        }
    }
}

fn outcome(f: &Firing, status: &str) {
    metrics::counter!("docpipe_job_outcomes_total", "rule" => f.rule.clone(), "status" => status.to_string())
        .increment(1);
}

/// Backfill ranges waiting in the queue.
pub fn queued(n: usize) {
    metrics::gauge!("docpipe_backfills_queued").set(n as f64);
}

/// The problems the alerts track, as series a Prometheus alert can watch (1 while a problem
/// is open, 0 once it ended): `docpipe_key_refused{organization}`,
/// `docpipe_project_unknown{project}`, `docpipe_windows_failing{project, dataset}` (windows
/// failed 3 runs in a row or more), `docpipe_rule_failing{rule}`, `docpipe_warehouse_failing{schema}`; and each dataset's
/// `docpipe_freshness_target_seconds{project, dataset}` beside its staleness.
pub fn problems(ctx: &crate::app::Context, rules: &[Rule], alerts: &super::alerts::Alerts) {
    use super::alerts::What;
    let open: Vec<_> = alerts.problems().collect();
    let is_open = |what: What, f: &dyn Fn(&super::alerts::Problem) -> bool| {
        open.iter().filter(|p| p.what == what && f(p)).count() as f64
    };
    for o in &ctx.settings.organizations {
        let v = is_open(What::KeyRefused, &|p| {
            p.organization.as_deref() == Some(&o.id)
        });
        metrics::gauge!("docpipe_key_refused", "organization" => o.id.clone()).set(v);
    }
    for p in &ctx.settings.projects {
        let v = is_open(What::ProjectUnknown, &|q| {
            q.project.as_deref() == Some(&p.id)
        });
        metrics::gauge!("docpipe_project_unknown", "project" => p.id.clone()).set(v);
        for d in &p.datasets {
            let v = is_open(What::WindowFailing, &|q| {
                q.project.as_deref() == Some(&p.id) && q.dataset.as_deref() == Some(*d)
            });
            metrics::gauge!("docpipe_windows_failing", "project" => p.id.clone(), "dataset" => *d)
                .set(v);
            let target = ctx.settings.freshness.policy(d).today.num_seconds() as f64;
            metrics::gauge!("docpipe_freshness_target_seconds", "project" => p.id.clone(), "dataset" => *d)
                .set(target);
        }
    }
    for r in rules {
        let v = is_open(What::RuleFailing, &|p| p.subject == r.name);
        metrics::gauge!("docpipe_rule_failing", "rule" => r.name.clone()).set(v);
    }
    if let Some(w) = &ctx.settings.warehouse {
        let v = is_open(What::WarehouseFailing, &|p| p.subject == w.schema);
        metrics::gauge!("docpipe_warehouse_failing", "schema" => w.schema.clone()).set(v);
    }
}
