//! The daemon's work, one piece at a time: the incremental export (then the trends, computed
//! once, and the rules without a schedule over the same tables), a scheduled rule, one look at
//! each agent job being polled, or one window of a queued backfill.

use super::gauges;
use crate::app::Context;
use crate::app::cycle::{self, After, Intent, Options, Outcome, Report, RulesRun, TrendsRun, When};
use crate::app::rules::{Fired, Loaded, Wait};
use crate::export::{Exporter, Plan, Summary, Target, describe_summary};
use crate::planner::Room;
use crate::rules::Rule;
use crate::rules::engine::{Engine, firing_line};
use chrono::NaiveDate;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What the scheduler asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// The incremental export, then the trends and the unscheduled rules.
    Export,
    /// One scheduled rule.
    Rule(String),
    /// One look at each agent job being polled.
    Poll,
    /// A SIGHUP: the rule files read again (the run loop does it; no work of its own).
    Reload,
}

/// The longest a waiting backfill sleeps before looking at the budget again.
const BACKFILL_RECHECK: Duration = Duration::from_secs(60);

/// How long a claimed backfill stays this daemon's without a step (renewed at every step) on
/// a folder's own state: when the daemon dies, another takes the range over after this. On a
/// shared database, `[state] lease_secs`.
pub const BACKFILL_LEASE: chrono::Duration = chrono::Duration::minutes(10);

/// The daemon's state and work, over a context opened once: the schedules and the serve loop
/// (`daemon::run`) decide when each piece of work runs, tests call [`Daemon::work`] on a
/// manual clock.
pub struct Daemon {
    pub(super) ctx: std::sync::Arc<Context>,
    pub(super) exporter: Exporter,
    pub(super) targets: Vec<Target>,
    pub(super) rules: Vec<Rule>,
    /// The rule files as last read (see `reload.rs`).
    pub(super) rule_files: super::reload::Files,
    pub(super) engine: Option<Engine>,
    /// Requests the next scheduled export expects, per organization: backfill leaves them free.
    pub(super) reserve: HashMap<String, u64>,
    /// Backfill windows tried in this process, per queue entry (each is tried once per start):
    /// (dataset, project, first day).
    pub(super) tried: HashMap<i64, HashSet<(&'static str, String, NaiveDate)>>,
    /// This daemon's name: the holder of the queued backfill it works on.
    pub(super) me: String,
    /// The problems found in its runs, and where they are sent.
    pub(super) alerts: super::alerts::Alerts,
}

/// What a piece of work did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing queued.
    Idle,
    /// Worked; call again.
    Worked,
    /// The budget has no room beyond the scheduled export's reserve: wait this long.
    Wait(Duration),
}

impl Daemon {
    /// The daemon's work over `ctx`: its projects, its exporter, `rules` and their engine.
    pub fn open(ctx: impl Into<std::sync::Arc<Context>>, rules: Vec<Rule>) -> anyhow::Result<Self> {
        let ctx = ctx.into();
        let targets = ctx.targets(&[])?;
        let engine = if rules.is_empty() {
            None
        } else {
            Some(ctx.engine()?)
        };
        let exporter = ctx.exporter();
        let rule_files = super::reload::rule_files(&ctx.settings.rules_dir);
        let alerts =
            super::alerts::Alerts::open(&ctx.settings).map_err(crate::error::UserError::new)?;
        Ok(Self {
            ctx,
            exporter,
            targets,
            rules,
            rule_files,
            engine,
            reserve: HashMap::new(),
            tried: HashMap::new(),
            me: crate::store::daemons::this_process(),
            alerts,
        })
    }

    /// The same daemon, its alerts sent as `alerts` says (tests name their webhook).
    #[must_use]
    pub fn alerting(mut self, alerts: super::alerts::Alerts) -> Self {
        self.alerts = alerts;
        self
    }

    /// The problems open now (what the alerts said began and has not ended).
    pub fn problems(&self) -> Vec<super::alerts::Problem> {
        self.alerts.problems().cloned().collect()
    }

    /// Does one piece of work: what `tick` asks for, or without one a window of the queued
    /// backfill (its step says whether to call again at once, wait, or idle).
    pub async fn work(&mut self, tick: Option<&Tick>) -> Step {
        let step = match tick {
            Some(Tick::Export) => {
                self.export().await;
                Step::Worked
            }
            Some(Tick::Rule(name)) => {
                self.fire(std::slice::from_ref(name)).await;
                // The firings' table goes to the bucket too.
                self.push().await;
                Step::Worked
            }
            Some(Tick::Poll) => {
                self.poll().await;
                Step::Worked
            }
            Some(Tick::Reload) => Step::Worked,
            None => self.backfill_step().await,
        };
        // Whatever sent requests may have found a key refused, or working again.
        if step != Step::Idle {
            self.alerts.keys(&self.ctx);
            self.alerts.reviews(&self.ctx);
            self.alerts.warehouse(&self.ctx);
            gauges::problems(&self.ctx, &self.rules, &self.alerts);
        }
        step
    }

    /// This daemon's name (its heartbeat, the holder of what it claims).
    pub fn name(&self) -> &str {
        &self.me
    }

    /// The context it works over.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Gives back what this daemon held (the queued backfill it worked on, its heartbeat):
    /// another's to take at once, not when its lease runs out.
    pub fn leave(&self) {
        if let Err(e) = self.ctx.store().queue().release(&self.me) {
            tracing::warn!("backfill queue: cannot give back the range this daemon held: {e}");
        }
        if let Err(e) = self.ctx.store().daemons().leave(&self.me) {
            tracing::warn!("heartbeat: cannot remove this daemon's: {e}");
        }
    }
}

impl Daemon {
    /// The incremental export of every project (one plan), then the trends and the unscheduled
    /// rules over the same tables: one run, logged and gauged from its report.
    pub(super) async fn export(&mut self) {
        self.ctx.reread_keys();
        let queued = self
            .ctx
            .store()
            .queue()
            .pending(self.ctx.clock.now())
            .map(|q| !q.is_empty())
            .unwrap_or(false);
        let unscheduled = Loaded {
            rules: if self.ctx.settings.rules_after_export {
                self.rules
                    .iter()
                    .filter(|r| r.schedule.is_none())
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            },
            problems: Vec::new(),
        };
        let rules = match &self.engine {
            Some(engine) if !unscheduled.rules.is_empty() => After::These(&unscheduled, engine),
            _ => After::Nothing,
        };
        let opts = Options {
            trends: When::changed_if(self.ctx.settings.trends_after_export),
            rules,
            wait: Wait::Never,
            push: true,
            announce: None,
            ahead: true,
            measure: true,
        };
        let intent = Intent::Fitted {
            backfill_queued: queued,
        };
        let report = match cycle::run(&self.ctx, &self.exporter, &self.targets, intent, opts).await
        {
            Ok(Outcome::Ran(report)) => report,
            Ok(other) => {
                tracing::error!("export: the run did not run: {other:?}");
                gauges::run("export", false);
                return;
            }
            Err(e) => {
                tracing::error!("export: cannot plan: {e}");
                gauges::run("export", false);
                return;
            }
        };
        let pending = self.plan_ahead(&report);
        self.log_export(&report);
        if let RulesRun::Fired(fired) = &report.rules {
            log_fired(fired);
            gauges::fired(&unscheduled.rules, fired);
        }
        self.alerts.exported(&self.ctx, &report, &unscheduled.rules);
        gauges::export(&report, &self.targets, &pending, self.ctx.clock.now());
    }

    /// An export's report in the log.
    fn log_export(&self, report: &Report) {
        let summary = &report.summary;
        for ((dataset, purpose), n) in &summary.spent {
            tracing::debug!(dataset, purpose, requests = n, "requests spent");
        }
        let ok = summary.failed.is_empty();
        for line in describe_summary(summary).lines() {
            if ok {
                tracing::info!("export: {line}");
            } else {
                tracing::warn!("export: {line}");
            }
        }
        match &report.trends {
            TrendsRun::Computed(t, because) => {
                tracing::info!(files = t.files.len(), because = ?because, "trends written");
            }
            TrendsRun::Failed(e) => tracing::error!("trends: {e}"),
            TrendsRun::Unchanged(_) => {
                tracing::info!("{}", report.unchanged_line(&self.ctx).unwrap_or_default());
            }
            TrendsRun::Off | TrendsRun::NoData => {}
        }
        for e in [&report.day_status, &report.described]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
        {
            tracing::error!("{e}");
        }
        if let RulesRun::Failed(e) = &report.rules {
            tracing::error!("rules: {e}");
        }
        match &report.pushed {
            Ok(Some(p)) => tracing::debug!(files = p.files, bytes = p.bytes, "output sent"),
            Ok(None) => {}
            Err(e) => tracing::error!("output: {}", crate::error::lines(e).join(" ")),
        }
    }

    /// After a run, from what its report says is left: the windows not final yet by project
    /// (they will be looked at again), and the reserve the backfill leaves free for what the
    /// next hourly runs need (by organization).
    fn plan_ahead(&mut self, report: &Report) -> HashMap<String, u64> {
        match &report.ahead {
            None => HashMap::new(),
            Some(Ok(ahead)) => {
                self.reserve = ahead.reserve(&self.ctx.settings.freshness);
                ahead.pending_by_project()
            }
            Some(Err(e)) => {
                tracing::error!("planner: {e:#}");
                HashMap::new()
            }
        }
    }

    /// Sends what was written to the output when it is a bucket; a failure is logged and the
    /// next run sends it.
    pub(super) async fn push(&self) {
        match self.ctx.push().await {
            Ok(Some(p)) => tracing::debug!(files = p.files, bytes = p.bytes, "output sent"),
            Ok(None) => {}
            Err(e) => {
                gauges::push_failed();
                tracing::error!("output: {}", crate::error::lines(&e).join(" "));
            }
        }
    }

    /// Evaluates and fires the named scheduled rules over the output's trend tables; nothing
    /// waits for the jobs: [`Daemon::poll`] looks at them.
    pub(super) async fn fire(&mut self, names: &[String]) {
        let Some(engine) = &self.engine else {
            return;
        };
        let loaded = Loaded {
            rules: self
                .rules
                .iter()
                .filter(|r| names.contains(&r.name))
                .cloned()
                .collect(),
            problems: Vec::new(),
        };
        if loaded.rules.is_empty() {
            return;
        }
        match cycle::fire(&self.ctx, &loaded, engine, None, Wait::Never).await {
            Ok(fired) => {
                log_fired(&fired);
                gauges::fired(&loaded.rules, &fired);
                self.alerts
                    .rules_ran(&loaded.rules, &fired, self.ctx.clock.now());
            }
            Err(e) => {
                tracing::error!("rules: {e}");
                gauges::run("rules", false);
                self.alerts.rules_failed(&e, self.ctx.clock.now());
            }
        }
    }

    /// One look at each agent job being polled; the jobs that ended are logged and counted,
    /// and the outcome log rewritten.
    pub(super) async fn poll(&self) {
        let Some(engine) = &self.engine else {
            return;
        };
        let ended = match engine.poll_step().await {
            Ok(ended) => ended,
            Err(e) => {
                tracing::error!("polling jobs: {e}");
                return;
            }
        };
        gauges::polled(&ended);
        for f in &ended {
            tracing::info!("{}", firing_line(f));
        }
        if !ended.is_empty()
            && let Err(e) = engine.write_log()
        {
            tracing::error!("rules: cannot write the outcome log: {e}");
        }
    }

    /// One window of the oldest queued backfill, if the budget has room for it beyond what the
    /// next scheduled export needs.
    pub(super) async fn backfill_step(&mut self) -> Step {
        let q = match self.claim_backfill() {
            Ok(Some(q)) => q,
            Ok(None) => return Step::Idle,
            Err(e) => {
                tracing::error!("backfill queue: {e}");
                return Step::Wait(BACKFILL_RECHECK);
            }
        };
        let targets: Vec<Target> = self
            .targets
            .iter()
            .filter(|t| q.projects.is_empty() || q.projects.contains(&t.project))
            .cloned()
            .collect();
        // The datasets in export order (page views first: the trends read them), one window
        // a step.
        let tried = self.tried.remove(&q.id).unwrap_or_default();
        let room = |t: &Target, expected: u64| self.has_room(t, expected);
        let intent = Intent::Next {
            from: q.from,
            to: q.to,
            tried: &tried,
            room: &room,
        };
        let opts = Options::export_only(false);
        let outcome = cycle::run(&self.ctx, &self.exporter, &targets, intent, opts).await;
        self.tried.insert(q.id, tried);
        let report = match outcome {
            Ok(Outcome::Ran(report)) => report,
            Ok(Outcome::Drained(plan)) => {
                self.drained(&q, &plan);
                return Step::Worked;
            }
            Ok(Outcome::Waits) => return Step::Wait(BACKFILL_RECHECK),
            Ok(Outcome::Stopped(_)) => return Step::Idle,
            Err(e) => {
                tracing::error!("backfill {}: cannot plan: {e}", q.id);
                return Step::Wait(BACKFILL_RECHECK);
            }
        };
        let Some(window) = report
            .plan
            .due
            .first()
            .map(|d| (d.dataset(), d.project.clone(), d.day))
        else {
            return Step::Idle;
        };
        self.tried.entry(q.id).or_default().insert(window.clone());
        let summary = report.summary;
        log_backfill_window(q.id, &summary);
        gauges::budget(&self.targets, self.ctx.clock.now());
        // The state database failing is not the window's fault (a shared database away for a
        // while): the window is tried again after a wait, not left out of the drain.
        if summary.failed.iter().any(|f| f.is_state_database()) {
            if let Some(tried) = self.tried.get_mut(&q.id) {
                tried.remove(&window);
            }
            return Step::Wait(BACKFILL_RECHECK);
        }
        Step::Worked
    }

    /// The oldest queued range not held by another daemon (this one's own first), its lease
    /// renewed; the gauge of the queue set on the way.
    fn claim_backfill(&self) -> Result<Option<crate::store::Queued>, crate::store::StoreError> {
        let queue = self.ctx.store().queue();
        let now = self.ctx.clock.now();
        let pending = queue.pending(now)?;
        gauges::queued(pending.len());
        let lease = if self.ctx.store().is_shared() {
            chrono::Duration::from_std(self.ctx.settings.window_lease).unwrap_or(BACKFILL_LEASE)
        } else {
            BACKFILL_LEASE
        };
        queue.claim(&self.me, now, lease)
    }

    /// Whether `target`'s organization has room for `expected` requests beside what the next
    /// scheduled export needs.
    fn has_room(&self, target: &Target, expected: u64) -> bool {
        let client = &target.client;
        let Room { limit, used } = Room::analytics(
            &client.settings().limits,
            client.budget().as_ref(),
            client.organization(),
            self.ctx.clock.now(),
        );
        let reserve = self
            .reserve
            .get(client.organization())
            .copied()
            .unwrap_or(0);
        let room = used + reserve + expected <= limit;
        if !room {
            tracing::debug!(
                used,
                reserve,
                need = expected,
                "backfill waits for the budget"
            );
        }
        room
    }

    /// A queued range with no window left to try: marked done, counted and logged.
    fn drained(&mut self, q: &crate::store::Queued, plan: &Plan) {
        // A span is due on every plan (its recent days are fetched again): walked once here,
        // it is done; so is a day within the lateness allowance (the exports look at it again
        // until it is final). A day left is one that failed, or should be final and is not.
        let left = plan
            .due
            .iter()
            .filter(|d| !d.is_span() && d.becomes_final)
            .count();
        if let Err(e) = self.ctx.store().queue().done(q.id, self.ctx.clock.now()) {
            tracing::error!("backfill queue: {e}");
        }
        self.tried.remove(&q.id);
        gauges::run("backfill", left == 0);
        if left == 0 {
            tracing::info!(id = q.id, from = %q.from, to = %q.to, "backfill done");
        } else {
            tracing::warn!(
                id = q.id,
                left,
                "backfill drained; some windows failed or are not final: see the log, and queue it again to retry"
            );
        }
    }
}

/// What a backfill window did, in the log.
fn log_backfill_window(id: i64, summary: &Summary) {
    if let Some(w) = summary.windows.first() {
        tracing::info!(id, project = %w.project, day = %w.day, rows = w.rows, "backfill window written");
    }
    if let Some(w) = summary.others.first() {
        tracing::info!(id, dataset = w.dataset, project = %w.project, from = %w.day, rows = w.rows, "backfill window written");
    }
    for f in &summary.failed {
        tracing::warn!(id, project = %f.project, day = %f.day, "backfill window failed: {f}");
    }
}

/// A set of firings in the log: each rule's report, the held firings that expired.
fn log_fired(fired: &Fired) {
    for id in &fired.expired {
        tracing::warn!(
            firing = id,
            "a held firing expired unreviewed: nothing was sent"
        );
    }
    for report in &fired.reports {
        if report.failed() {
            tracing::warn!("{}", report.line());
        } else {
            tracing::info!("{}", report.line());
        }
    }
}

impl Daemon {
    /// Reads the rule files again when they changed since the last look (`asked`: a SIGHUP,
    /// which is answered even when nothing changed): true when the rules' schedules changed,
    /// so that the scheduler is made again.
    pub fn reload_rules(&mut self, asked: bool) -> bool {
        let dir = self.ctx.settings.rules_dir.clone();
        let now = super::reload::rule_files(&dir);
        if now == self.rule_files {
            if asked {
                tracing::info!(
                    "SIGHUP: the rule files were read again: nothing changed (the config is read at start; restart docpipe to change it)"
                );
            }
            return false;
        }
        tracing::info!(
            "rule files changed: {}",
            super::reload::changes(&self.rule_files, &now)
        );
        self.rule_files = now;
        let loaded = if dir.is_dir() {
            match crate::app::rules::load(&dir, &self.ctx.settings, &[]) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(
                        "the rule files cannot be read again: {e}; the rules loaded before stay"
                    );
                    return false;
                }
            }
        } else {
            crate::app::rules::Loaded {
                rules: Vec::new(),
                problems: Vec::new(),
            }
        };
        for p in &loaded.problems {
            tracing::error!("{p}; the rule it held before, if any, stays until the file loads");
        }
        // A file that is there but did not load keeps its rule as it was.
        let mut rules = loaded.rules;
        if !loaded.problems.is_empty() {
            for old in &self.rules {
                let reloaded = rules.iter().any(|r| r.file == old.file);
                if !reloaded && self.rule_files.contains_key(&old.file) {
                    rules.push(old.clone());
                }
            }
        }
        if self.engine.is_none() && !rules.is_empty() {
            match self.ctx.engine() {
                Ok(e) => self.engine = Some(e),
                Err(e) => tracing::error!("the rules cannot run: {e}"),
            }
        }
        let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        tracing::info!(
            "rules now: {} ({})",
            rules.len(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        let changed = super::reload::schedules(&self.rules) != super::reload::schedules(&rules);
        // A rule gone from the folder ends its problem (and its gauge, set to 0 once).
        self.alerts.rules_loaded(&rules, self.ctx.clock.now());
        for gone in self
            .rules
            .iter()
            .filter(|o| !rules.iter().any(|r| r.name == o.name))
        {
            metrics::gauge!("docpipe_rule_failing", "rule" => gone.name.clone()).set(0.0);
        }
        self.rules = rules;
        changed
    }
}
