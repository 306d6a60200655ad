//! The daemon (`docpipe run`): the incremental export on a cron schedule (then the trends and
//! the rules without a schedule), each rule's own schedule, a queue of backfills drained between
//! scheduled runs within the budget, `/healthz` and `/metrics`, and a clean stop.
//!
//! One task does all the work, one piece at a time: scheduled runs never overlap, and a scheduled
//! run waiting in the channel goes before the next backfill window.

use crate::cli::UserError;
use crate::clock::SharedClock;
use crate::config::Settings;
use crate::export::{Exporter, Plan, Summary, Target, describe_summary};
use crate::rules::engine::{Engine, Report};
use crate::rules::{Rule, evaluate};
use chrono::{DateTime, NaiveDate, Utc};
use metrics_exporter_prometheus::PrometheusHandle;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_cron_scheduler::{Job, JobScheduler};

/// What the scheduler asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tick {
    /// The incremental export, then the trends and the unscheduled rules.
    Export,
    /// One scheduled rule.
    Rule(String),
}

/// The longest a waiting backfill sleeps before looking at the budget again.
const BACKFILL_RECHECK: Duration = Duration::from_secs(60);

/// The daemon's state.
struct Daemon {
    settings: Settings,
    clock: SharedClock,
    exporter: Exporter,
    targets: Vec<Target>,
    rules: Vec<Rule>,
    engine: Option<Engine>,
    /// Requests the next scheduled export expects, per organization: backfill leaves them free.
    reserve: HashMap<String, u64>,
    /// Backfill windows tried in this process, per queue entry (each is tried once per start).
    tried: HashMap<i64, HashSet<(String, NaiveDate)>>,
}

/// What a backfill step did.
enum Step {
    /// Nothing queued.
    Idle,
    /// Worked; call again.
    Worked,
    /// The budget has no room beyond the scheduled export's reserve: wait this long.
    Wait(Duration),
}

fn gauge_budget(targets: &[Target], now: DateTime<Utc>) {
    let mut seen = HashSet::new();
    for t in targets {
        let scope = t.client.analytics_scope();
        if seen.insert(scope.clone()) {
            let limits = t.client.settings().limits;
            let left = limits
                .effective(limits.analytics_per_hour)
                .saturating_sub(t.client.budget().used(&scope, now));
            metrics::gauge!("docpipe_budget_remaining", "scope" => scope).set(f64::from(left));
        }
    }
}

fn count_run(kind: &'static str, ok: bool) {
    metrics::counter!("docpipe_runs_total", "kind" => kind, "result" => if ok { "ok" } else { "failed" })
        .increment(1);
}

fn count_reports(reports: &[Report]) {
    for r in reports {
        if let Report::Fired(f) = r {
            metrics::counter!("docpipe_rule_firings_total", "rule" => f.rule.clone(), "sent" => f.sent.as_str())
                .increment(1);
            if let Some(status) = &f.status {
                metrics::counter!("docpipe_job_outcomes_total", "rule" => f.rule.clone(), "status" => status.clone())
                    .increment(1);
            }
        }
    }
}

impl Daemon {
    /// The incremental export of every project, then the trends and the unscheduled rules.
    async fn export(&mut self) {
        let now = self.clock.now();
        let today = self.settings.today(now);
        let mut summary = Summary::default();
        let groups = crate::cli::export::by_start(&self.settings, self.targets.clone(), today);
        let mut pending: HashMap<String, u64> = HashMap::new();
        let mut reserve: HashMap<String, u64> = HashMap::new();
        for (start, group) in &groups {
            match self.exporter.plan(group, *start, today) {
                Ok(plan) => {
                    let s = self.exporter.run(group, &plan).await;
                    summary.windows.extend(s.windows);
                    summary.failed.extend(s.failed);
                    summary.requests += s.requests;
                    summary.skipped_final += s.skipped_final;
                }
                Err(e) => {
                    tracing::error!("export: cannot plan: {e}");
                    count_run("export", false);
                    return;
                }
            }
            // What is still due, and what the next run will need.
            if let Ok(next) = self.exporter.plan(group, *start, today) {
                for d in &next.due {
                    *pending.entry(d.project.clone()).or_default() += 1;
                    let org = next.org_of.get(&d.project).cloned().unwrap_or_default();
                    *reserve.entry(org).or_default() += d.expected_requests;
                }
            }
        }
        self.reserve = reserve;
        let ok = summary.failed.is_empty();
        for line in describe_summary(&summary).lines() {
            if ok {
                tracing::info!("export: {line}");
            } else {
                tracing::warn!("export: {line}");
            }
        }
        let failed: HashSet<&str> = summary.failed.iter().map(|f| f.0.as_str()).collect();
        for t in &self.targets {
            metrics::gauge!("docpipe_windows_pending", "project" => t.project.clone())
                .set(pending.get(&t.project).copied().unwrap_or(0) as f64);
            if !failed.contains(t.project.as_str()) {
                metrics::gauge!("docpipe_last_export_success_timestamp_seconds", "project" => t.project.clone())
                    .set(self.clock.now().timestamp() as f64);
            }
        }
        gauge_budget(&self.targets, self.clock.now());
        count_run("export", ok);
        if self.settings.trends_after_export {
            self.trends();
        }
        if self.settings.rules_after_export {
            let names: Vec<String> = self
                .rules
                .iter()
                .filter(|r| r.schedule.is_none())
                .map(|r| r.name.clone())
                .collect();
            self.fire(&names).await;
        }
    }

    fn trends(&self) {
        let out = &self.settings.output_dir;
        let result = crate::trends::compute(out, &crate::trends::Selection::default())
            .and_then(|mut t| crate::trends::write_tables(out, &mut t));
        match result {
            Ok(files) => tracing::info!(files = files.len(), "trends written"),
            Err(crate::trends::TrendsError::NoData(_)) => {}
            Err(e) => tracing::error!("trends: {e}"),
        }
    }

    /// Evaluates and fires the named rules.
    async fn fire(&self, names: &[String]) {
        let Some(engine) = &self.engine else {
            return;
        };
        let rules: Vec<Rule> = self
            .rules
            .iter()
            .filter(|r| names.contains(&r.name))
            .cloned()
            .collect();
        if rules.is_empty() {
            return;
        }
        let tables = match crate::cli::rules::tables(&self.settings.output_dir) {
            Ok((t, _)) => t,
            Err(e) => {
                tracing::error!("rules: {e}");
                count_run("rules", false);
                return;
            }
        };
        let mut reports = Vec::new();
        for (rule, eval) in rules.iter().zip(evaluate(&rules, &tables)) {
            let report = match eval {
                Ok(e) => match engine.fire(rule, &e).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!(rule = %rule.name, "rules: {e}");
                        continue;
                    }
                },
                Err(e) => Report::Broken(e),
            };
            if report.failed() {
                tracing::warn!("{}", report.line());
            } else {
                tracing::info!("{}", report.line());
            }
            reports.push(report);
        }
        count_reports(&reports);
        if reports.iter().any(|r| matches!(r, Report::Fired(_)))
            && let Err(e) = engine.write_log()
        {
            tracing::error!("rules: cannot write the outcome log: {e}");
        }
        count_run("rules", !reports.iter().any(Report::failed));
    }

    /// One window of the oldest queued backfill, if the budget has room for it beyond what the
    /// next scheduled export needs.
    async fn backfill_step(&mut self) -> Step {
        let state = self.exporter.state();
        let queued = match state.queued() {
            Ok(q) => q,
            Err(e) => {
                tracing::error!("backfill queue: {e}");
                return Step::Wait(BACKFILL_RECHECK);
            }
        };
        metrics::gauge!("docpipe_backfills_queued").set(queued.len() as f64);
        let Some(q) = queued.first().cloned() else {
            return Step::Idle;
        };
        let targets: Vec<Target> = self
            .targets
            .iter()
            .filter(|t| q.projects.is_empty() || q.projects.contains(&t.project))
            .cloned()
            .collect();
        let plan = match self.exporter.plan(&targets, q.from, q.to) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("backfill {}: cannot plan: {e}", q.id);
                return Step::Wait(BACKFILL_RECHECK);
            }
        };
        let tried = self.tried.entry(q.id).or_default();
        let Some(due) = plan
            .due
            .iter()
            .find(|d| !tried.contains(&(d.project.clone(), d.day)))
            .cloned()
        else {
            let left = plan.due.len();
            if let Err(e) = state.queue_done(q.id, self.clock.now()) {
                tracing::error!("backfill queue: {e}");
            }
            self.tried.remove(&q.id);
            count_run("backfill", left == 0);
            if left == 0 {
                tracing::info!(id = q.id, from = %q.from, to = %q.to, "backfill done");
            } else {
                tracing::warn!(
                    id = q.id,
                    left,
                    "backfill drained; some windows failed or are not final: see the log, and queue it again to retry"
                );
            }
            return Step::Worked;
        };
        let Some(target) = targets.iter().find(|t| t.project == due.project) else {
            return Step::Idle;
        };
        let client = &target.client;
        let org = client.organization().to_string();
        let limits = client.settings().limits;
        let limit = u64::from(limits.effective(limits.analytics_per_hour));
        let now = self.clock.now();
        let used = u64::from(client.budget().used(&client.analytics_scope(), now));
        let reserve = self.reserve.get(&org).copied().unwrap_or(0);
        if used + reserve + due.expected_requests > limit {
            tracing::debug!(
                used,
                reserve,
                need = due.expected_requests,
                "backfill waits for the budget"
            );
            return Step::Wait(BACKFILL_RECHECK);
        }
        tried.insert((due.project.clone(), due.day));
        let one = Plan {
            due: vec![due.clone()],
            expected_requests: due.expected_requests,
            ..plan
        };
        let summary = self.exporter.run(std::slice::from_ref(target), &one).await;
        if let Some(w) = summary.windows.first() {
            tracing::info!(id = q.id, project = %w.project, day = %w.day, rows = w.rows, "backfill window written");
        }
        for (p, d, e) in &summary.failed {
            tracing::warn!(id = q.id, project = %p, day = %d, "backfill window failed: {e}");
        }
        gauge_budget(&self.targets, self.clock.now());
        Step::Worked
    }
}

/// Runs the daemon until `stop` resolves; then lets the work in progress finish for the grace
/// period (or abandons it: the state stays consistent and the next start resumes) and returns.
pub async fn run(
    settings: Settings,
    clock: SharedClock,
    metrics: Option<PrometheusHandle>,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let targets = crate::cli::export::targets(&settings, &[], &clock)?;
    let mut rules = Vec::new();
    if settings.rules_dir.is_dir() {
        let loaded = crate::cli::rules::load(&settings.rules_dir, &settings.project_ids(), &[])?;
        if !loaded.problems.is_empty() {
            return Err(UserError(loaded.problems.join("\n")).into());
        }
        rules = loaded.rules;
    }
    let engine = if rules.is_empty() {
        None
    } else {
        let clients = targets
            .iter()
            .map(|t| (t.project.clone(), t.client.clone()))
            .collect();
        Some(crate::cli::rules::engine(&settings, clock.clone())?.with_clients(clients))
    };
    let server = match settings.daemon.listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| UserError(format!("daemon.listen {addr}: cannot listen: {e}")))?;
            let bound = listener.local_addr()?;
            let app = health_router(metrics);
            tracing::info!("health and metrics on http://{bound}/healthz and /metrics");
            println!("listening on http://{bound}");
            Some(tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!("health server: {e}");
                }
            }))
        }
        None => None,
    };
    let exporter = crate::cli::export::open_folder(&settings, clock.clone()).await?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Tick>();
    let mut scheduler = JobScheduler::new().await?;
    let mut schedules = vec![(settings.daemon.export_schedule.clone(), Tick::Export)];
    for r in &rules {
        if let Some(s) = &r.schedule {
            schedules.push((s.clone(), Tick::Rule(r.name.clone())));
        }
    }
    for (schedule, tick) in schedules {
        let tx = tx.clone();
        let job = Job::new_async(schedule.as_str(), move |_, _| {
            let _ = tx.send(tick.clone());
            Box::pin(async {})
        })
        .map_err(|e| UserError(format!("schedule {schedule:?}: {e}")))?;
        scheduler.add(job).await?;
    }
    scheduler.start().await?;
    tracing::info!(
        export_schedule = %settings.daemon.export_schedule,
        rules = rules.len(),
        "docpipe daemon started"
    );
    let grace = settings.daemon.shutdown_grace;
    let mut daemon = Daemon {
        settings,
        clock,
        exporter,
        targets,
        rules,
        engine,
        reserve: HashMap::new(),
        tried: HashMap::new(),
    };
    // The first export at once: what is due now should not wait for the schedule.
    let _ = tx.send(Tick::Export);
    let mut stop = std::pin::pin!(stop);
    let mut backfill_wait = Duration::ZERO;
    // Ticks that arrived while work ran, each once: an export that took longer than its
    // schedule's period is followed by one export, not by one per missed tick.
    let mut pending: std::collections::VecDeque<Tick> = Default::default();
    let mut last_was_tick = false;
    loop {
        while let Ok(t) = rx.try_recv() {
            if !pending.contains(&t) {
                pending.push_back(t);
            }
        }
        // A tick waiting goes first, but when ticks come back to back (runs longer than their
        // schedule's period), one backfill window goes between two of them: no starvation.
        let backfill_turn = backfill_wait.is_zero() && last_was_tick;
        let next = match pending.pop_front() {
            Some(t) if !backfill_turn => Some(t),
            Some(t) => {
                pending.push_front(t);
                None
            }
            None => tokio::select! {
                biased;
                _ = &mut stop => break,
                tick = rx.recv() => tick,
                _ = tokio::time::sleep(backfill_wait) => None,
            },
        };
        let mut step = Step::Worked;
        {
            let work = async {
                match &next {
                    Some(Tick::Export) => daemon.export().await,
                    Some(Tick::Rule(name)) => daemon.fire(std::slice::from_ref(name)).await,
                    None => step = daemon.backfill_step().await,
                }
            };
            let mut work = std::pin::pin!(work);
            let stopped = tokio::select! {
                _ = &mut work => false,
                _ = &mut stop => true,
            };
            if stopped {
                tracing::info!(
                    grace_secs = grace.as_secs(),
                    "stopping: the run in progress has the grace period to finish"
                );
                if tokio::time::timeout(grace, &mut work).await.is_err() {
                    tracing::warn!(
                        "stopping: the run in progress was abandoned; what was fetched is kept, and the next start resumes"
                    );
                }
                break;
            }
        }
        last_was_tick = next.is_some();
        backfill_wait = match step {
            Step::Worked => Duration::ZERO,
            Step::Wait(d) => d,
            // Nothing queued: look again now and then (a `backfill --queue` may add some).
            Step::Idle => Duration::from_secs(5),
        };
    }
    let _ = scheduler.shutdown().await;
    if let Some(s) = server {
        s.abort();
    }
    tracing::info!("docpipe daemon stopped");
    Ok(())
}

fn health_router(metrics: Option<PrometheusHandle>) -> axum::Router {
    use axum::routing::get;
    let metrics = Arc::new(metrics);
    axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [("content-type", "text/plain; version=0.0.4")],
                        metrics
                            .as_ref()
                            .as_ref()
                            .map(PrometheusHandle::render)
                            .unwrap_or_default(),
                    )
                }
            }),
        )
}
