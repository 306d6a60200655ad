//! Sending what the rules say: the hourly limit and the ledger first, then one request, an
//! unknown outcome resolved by reading the job (never by sending again), polling the job (until
//! it ends, or one look per [`Engine::poll_step`]), and the outcome log in `agent_runs/` as
//! Parquet.

use super::{Action, Evaluation, Rule, RuleError, prompt_hash};
use crate::api::budget::Budget;
use crate::api::jobs::{Job, Polling};
use crate::api::{ApiError, Client, ErrorKind, Operation};
use crate::clock::SharedClock;
use crate::dataset::derived::Columns;
use crate::dataset::parquet::WriteError;
use crate::events::RunOutcome;
use crate::store::StoreError;
use crate::store::activity::RuleRun;
use crate::store::ledger::{Decided, Firing, Kind, Ledger, NewFiring, Preview, Sent, Skip, Trail};
use crate::text::one_line;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The outcome log's folder in the output folder.
pub const AGENT_RUNS: &str = "agent_runs";

/// What happened to one rule on one run.
#[derive(Debug, Clone)]
pub enum Report {
    /// Fewer rows than `min_rows`.
    Quiet {
        /// Rule.
        rule: String,
        /// Project.
        project: String,
        /// Rows matched.
        rows: usize,
        /// Rows needed.
        min_rows: usize,
        /// Flagged rows left out (`flagged = "drop"`).
        dropped: usize,
    },
    /// The rule is not enabled: what it would send was recorded, nothing was sent.
    Previewed {
        /// Rule.
        rule: String,
        /// Project.
        project: String,
        /// The rule's file.
        file: String,
        /// Rows it would send.
        rows: usize,
        /// The prompt's hash.
        prompt_hash: String,
        /// Why it would wait for review once enabled, if it would.
        hold: Option<String>,
    },
    /// It fired and waits for a person's review: the ledger's row (`held`).
    Held(Firing),
    /// It matched but did not fire.
    Skipped {
        /// Rule.
        rule: String,
        /// Project.
        project: String,
        /// Rows matched.
        rows: usize,
        /// Why.
        skip: Skip,
    },
    /// It fired: the ledger's row.
    Fired(Firing),
    /// The rule could not be evaluated.
    Broken(RuleError),
}

impl Report {
    /// What the status page keeps of the report: the last run of its rule.
    pub fn run(&self, rule: &Rule, at: DateTime<Utc>) -> RuleRun {
        let rows = match self {
            Report::Quiet { rows, .. }
            | Report::Skipped { rows, .. }
            | Report::Previewed { rows, .. } => Some(*rows as i64),
            Report::Fired(f) | Report::Held(f) => Some(f.rows_matched),
            Report::Broken(_) => None,
        };
        let outcome = match self {
            _ if self.failed() => RunOutcome::Failed,
            Report::Quiet { .. } => RunOutcome::Quiet,
            Report::Skipped { .. } => RunOutcome::Skipped,
            Report::Previewed { .. } => RunOutcome::Previewed,
            Report::Held(_) => RunOutcome::Held,
            Report::Fired(_) => RunOutcome::Fired,
            Report::Broken(_) => RunOutcome::Failed,
        };
        RuleRun {
            rule: rule.name.clone(),
            project: rule.project.clone(),
            at,
            outcome,
            rows,
            line: one_line(&self.line()).into_owned(),
        }
    }

    /// One line for the terminal.
    pub fn line(&self) -> String {
        match self {
            Report::Quiet {
                rule,
                project,
                rows,
                min_rows,
                dropped: 0,
            } => format!("rule {rule} ({project}): {rows} rows, needs {min_rows}: does not fire"),
            Report::Quiet {
                rule,
                project,
                rows,
                min_rows,
                dropped,
            } => format!(
                "rule {rule} ({project}): {rows} rows after {dropped} flagged rows were dropped, needs {min_rows}: does not fire"
            ),
            Report::Previewed {
                rule,
                project,
                file,
                rows,
                prompt_hash,
                hold,
            } => format!(
                "rule {rule} ({project}): previewed, nothing sent ({rows} rows, prompt {}): the rule is not enabled; `docpipe rules check` shows the prompt, `enabled = true` in {file} sends it{}",
                super::short_hash(prompt_hash),
                match hold {
                    Some(h) => format!(" (after review: {h})"),
                    None => String::new(),
                }
            ),
            Report::Held(f) => format!(
                "rule {} ({}): held for review as firing {} ({} rows, prompt {}): {}; `docpipe rules pending` shows it, `docpipe rules approve {}` sends it",
                f.rule,
                f.project,
                f.id,
                f.rows_matched,
                super::short_hash(&f.prompt_hash),
                f.trail.hold.as_deref().unwrap_or("review"),
                f.id
            ),
            Report::Skipped {
                rule,
                project,
                rows,
                skip,
            } => format!("rule {rule} ({project}): {rows} rows; not sent: {skip}"),
            Report::Fired(f) => firing_line(f),
            Report::Broken(e) => format!("rule in {e}"),
        }
    }

    /// Whether docpipe could not do what the rule asked (a bad rule, a follow-up refused or not
    /// sent): the exit code shows it. A job that ran and failed is an outcome, not a failure.
    pub fn failed(&self) -> bool {
        match self {
            Report::Broken(_) => true,
            Report::Fired(f) => matches!(f.sent, Sent::Refused | Sent::NotSent),
            _ => false,
        }
    }
}

/// `rule R (p): sent follow-up to job J (5 rows) -> completed after 12.0 s, PR <link>`.
pub fn firing_line(f: &Firing) -> String {
    // The job id, status, link and error text come from the service: shown escaped.
    let what = match (f.kind, f.job.as_deref()) {
        (Kind::Create, Some(j)) => format!("new job {}", one_line(j)),
        (Kind::Create, None) => "a new job".to_string(),
        (_, j) => format!("follow-up to job {}", one_line(j.unwrap_or("?"))),
    };
    let mut line = format!(
        "rule {} ({}): {} {what} ({} rows, prompt {})",
        f.rule,
        f.project,
        match (f.sent, f.kind) {
            (Sent::Sent, Kind::Create) => "created",
            (Sent::Sent, _) => "sent",
            (Sent::Sending, _) => "sending",
            (Sent::Unknown, _) => "outcome unknown (not sent again) of",
            (Sent::Refused, _) => "refused by the service:",
            (Sent::NotSent, _) => "not sent:",
            (Sent::Held, _) => "held for review:",
            (Sent::Rejected, _) => "rejected in review:",
            (Sent::Expired, _) => "expired unreviewed:",
        },
        f.rows_matched,
        super::short_hash(&f.prompt_hash)
    );
    if let Some(status) = &f.status {
        line.push_str(&format!(" -> {}", one_line(status)));
    }
    if let Some(s) = f.seconds_to_done {
        line.push_str(&format!(" after {s:.1} s"));
    }
    match &f.pr_link {
        Some(pr) => line.push_str(&format!(", PR {}", one_line(pr))),
        None if f.status.as_deref() == Some("completed") => line.push_str(", no pull request"),
        None => {}
    }
    if let Some(e) = &f.error {
        line.push_str(&format!("; {}", one_line(e)));
    }
    line
}

/// Sends follow-ups for fired rules and records what happened.
#[derive(Debug)]
pub struct Engine {
    pub(in crate::rules) out: PathBuf,
    pub(in crate::rules) ledger: Ledger,
    budget: Arc<dyn Budget>,
    limits: HashMap<String, u32>,
    clients: HashMap<String, Client>,
    pub(in crate::rules) clock: SharedClock,
    polling: Polling,
    pub(in crate::rules) tz: chrono_tz::Tz,
    pub(in crate::rules) settle_days: i64,
    review_expires: std::time::Duration,
}

/// How long a held firing waits for review, unless `[rules] review_expires` says.
pub const DEFAULT_REVIEW_EXPIRES: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

impl Engine {
    /// An engine over an output folder's state database; `budget` is the shared request log and
    /// `limits` the follow-ups per hour docpipe allows itself per project. Firings a stopped
    /// process left `sending` over an hour ago are settled as `unknown`. It sends nothing until
    /// given clients (`with_clients`).
    pub fn open(
        out: &Path,
        budget: Arc<dyn Budget>,
        limits: HashMap<String, u32>,
        clock: SharedClock,
    ) -> Result<Self, StoreError> {
        let ledger = Ledger::open(&crate::store::state_path(out))?;
        Self::with_ledger(out, ledger, budget, limits, clock)
    }

    /// [`Engine::open`] with the ledger of a store already open.
    pub fn with_ledger(
        out: &Path,
        ledger: Ledger,
        budget: Arc<dyn Budget>,
        limits: HashMap<String, u32>,
        clock: SharedClock,
    ) -> Result<Self, StoreError> {
        let now = clock.now();
        let settled = ledger.settle_abandoned(now - chrono::Duration::hours(1), now)?;
        if settled > 0 {
            tracing::warn!(
                settled,
                "firings interrupted while sending are marked unknown and not sent again"
            );
        }
        Ok(Self {
            out: out.to_path_buf(),
            ledger,
            budget,
            limits,
            clients: HashMap::new(),
            clock,
            polling: Polling::default(),
            tz: chrono_tz::UTC,
            settle_days: 0,
            review_expires: DEFAULT_REVIEW_EXPIRES,
        })
    }

    /// Held firings expire after this long without review.
    pub fn with_review_expires(mut self, after: std::time::Duration) -> Self {
        self.review_expires = after;
        self
    }

    /// Expires the held firings nobody reviewed in time (nothing is sent); their ids.
    pub fn expire_reviews(&self) -> Result<Vec<i64>, StoreError> {
        let now = self.clock.now();
        let before = chrono::Duration::from_std(self.review_expires)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let expired = self.ledger.expire(before, now)?;
        for id in &expired {
            tracing::warn!(
                firing = id,
                "a held firing expired unreviewed: nothing was sent"
            );
        }
        Ok(expired)
    }

    /// The clients that send, by project.
    pub fn with_clients(mut self, clients: HashMap<String, Client>) -> Self {
        self.clients = clients;
        self
    }

    /// Polls with this first and largest wait (the timeout comes from each rule).
    pub fn with_polling(mut self, polling: Polling) -> Self {
        self.polling = polling;
        self
    }

    /// Counts the impact's days in this time zone (the output folder's), a day written more
    /// than `settle_days` after it being final (the export's lookback).
    pub fn with_days(mut self, tz: chrono_tz::Tz, settle_days: u32) -> Self {
        self.tz = tz;
        self.settle_days = i64::from(settle_days);
        self
    }

    /// The engine's clock's now.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// What the rules remember (the ledger, now): rows whose key was sent lately are left out.
    pub fn memory(&self) -> super::Memory<'_> {
        super::Memory {
            ledger: &self.ledger,
            now: self.clock.now(),
        }
    }

    fn client(&self, rule: &Rule) -> Result<&Client, RuleError> {
        self.clients.get(&rule.project).ok_or_else(|| RuleError {
            file: rule.file.clone(),
            message: format!("project {} has no client to send with", rule.project),
        })
    }

    /// The hourly limit, checked before recording a firing (the client takes the slot when it
    /// sends, counted in the shared request log).
    fn hourly(&self, rule: &Rule, now: DateTime<Utc>) -> Option<Skip> {
        let limit = self.limits.get(&rule.project).copied().unwrap_or(1);
        let used = self.budget.used(&format!("agent:{}", rule.project), now);
        (used >= limit).then_some(Skip::HourlyLimit { limit })
    }

    /// Why a matching rule would not be sent now, if it would not (reads only).
    pub fn would_skip(&self, rule: &Rule, prompt: &str) -> Result<Option<Skip>, RuleError> {
        let now = self.clock.now();
        if let Some(skip) = self
            .ledger
            .skip(rule.key(), &prompt_hash(prompt), now)
            .map_err(|e| RuleError {
                file: rule.file.clone(),
                message: e.to_string(),
            })?
        {
            return Ok(Some(skip));
        }
        Ok(self.hourly(rule, now))
    }

    /// Fires a rule if its evaluation says so: records, sends, resolves, polls until the job
    /// ends or the rule's timeout (when the rule waits), records.
    pub async fn fire(&self, rule: &Rule, eval: &Evaluation) -> Result<Report, StoreError> {
        let mut report = self.fire_nowait(rule, eval).await?;
        self.wait_for(&mut [(rule, &mut report)]).await?;
        Ok(report)
    }

    /// Fires a rule if its evaluation says so: records, sends, resolves, records. A job the
    /// rule waits for is left to [`Engine::poll_step`] (the daemon's way, so that nothing waits
    /// on an agent job) or to [`Engine::wait_for`] (the command line's, every job at once).
    pub async fn fire_nowait(&self, rule: &Rule, eval: &Evaluation) -> Result<Report, StoreError> {
        self.fire_with(rule, eval, false).await
    }

    /// Polls the jobs of the fired reports whose rules wait, all at once, each until it ends or
    /// its rule's timeout, and records each outcome (the firing is no longer left to
    /// [`Engine::poll_step`]): jobs run in parallel, so the wait is the longest job's, not
    /// their sum.
    pub async fn wait_for(&self, fired: &mut [(&Rule, &mut Report)]) -> Result<(), StoreError> {
        let waits = fired.iter_mut().filter_map(|(rule, report)| match report {
            Report::Fired(f) if polls(rule, f) => {
                let client = self.client(rule).ok()?;
                Some(async move {
                    self.poll(client, rule, f).await;
                    self.ledger.end_polling(f.id)?;
                    self.ledger.update(f, self.clock.now())
                })
            }
            _ => None,
        });
        futures::future::join_all(waits).await.into_iter().collect()
    }

    async fn fire_with(
        &self,
        rule: &Rule,
        eval: &Evaluation,
        inline: bool,
    ) -> Result<Report, StoreError> {
        let rows = eval.rows.height();
        let Some(prompt) = &eval.prompt else {
            return Ok(Report::Quiet {
                rule: rule.name.clone(),
                project: rule.project.clone(),
                rows,
                min_rows: rule.min_rows,
                dropped: eval.dropped.len(),
            });
        };
        if !rule.enabled {
            return self.preview(rule, eval, prompt);
        }
        self.ledger.forget_preview(&rule.name, &rule.project)?;
        let hold = eval.hold(rule);
        let client = match self.client(rule) {
            Ok(c) => Some(c),
            Err(e) if hold.is_none() => return Ok(Report::Broken(e)),
            Err(_) => None,
        };
        let skipped = |skip| Report::Skipped {
            rule: rule.name.clone(),
            project: rule.project.clone(),
            rows,
            skip,
        };
        let now = self.clock.now();
        let hash = prompt_hash(prompt);
        // Cheap checks first (the ledger's cooldown and prompt hash, then the hour's limit);
        // `begin` checks the ledger again, atomically, as it records the firing.
        if let Some(skip) = self.ledger.skip(rule.key(), &hash, now)? {
            return Ok(skipped(skip));
        }
        if hold.is_none()
            && let Some(skip) = self.hourly(rule, now)
        {
            return Ok(skipped(skip));
        }
        let mut firing = match self.record_firing(rule, eval, (prompt, &hash), hold.clone(), now)? {
            Ok(f) => f,
            Err(skip) => return Ok(skipped(skip)),
        };
        let Some(client) = client.filter(|_| hold.is_none()) else {
            firing.sent = Sent::Held;
            tracing::warn!(rule = %rule.name, firing = firing.id, "a firing waits for review");
            return Ok(Report::Held(firing));
        };
        self.deliver(client, rule, &mut firing, &eval.keys, inline)
            .await
    }

    /// Records a firing in the ledger before anything is sent (`sending`, or `held` for
    /// review), with its trail; the ledger's skip when it checked again and found one.
    fn record_firing(
        &self,
        rule: &Rule,
        eval: &Evaluation,
        (prompt, hash): (&String, &str),
        hold: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Result<Firing, Skip>, StoreError> {
        let rows = eval.rows.height();
        let job = match &rule.action {
            Action::FollowUp(j) => Some(j.clone()),
            Action::Create => None,
        };
        let trail = Trail {
            flags: json_of(&eval.flags),
            dropped: json_of(&eval.dropped),
            hold: hold.clone(),
            held_at: hold.as_ref().map(|_| now),
            ..Trail::default()
        };
        let id = match self.ledger.record(NewFiring {
            rule: rule.key(),
            job: job.as_deref(),
            prompt,
            hash,
            rows_matched: rows,
            keys: &eval.keys,
            now,
            state: if hold.is_some() {
                Sent::Held
            } else {
                Sent::Sending
            },
            trail: trail.clone(),
        })? {
            Ok(id) => id,
            Err(skip) => return Ok(Err(skip)),
        };
        Ok(Ok(Firing {
            id,
            rule: rule.name.clone(),
            project: rule.project.clone(),
            kind: rule.action.kind(),
            job,
            fired_at: now,
            prompt_hash: hash.to_string(),
            prompt: prompt.clone(),
            rows_matched: rows as i64,
            sent: Sent::Sending,
            status: None,
            pr_link: None,
            seconds_to_done: None,
            error: None,
            trail,
        }))
    }

    /// Sends a recorded firing (`sending`) once: the impact's figures before, one request, the
    /// job polled (inline, or left to [`Engine::poll_step`]); every step in the ledger.
    async fn deliver(
        &self,
        client: &Client,
        rule: &Rule,
        firing: &mut Firing,
        keys: &[String],
        inline: bool,
    ) -> Result<Report, StoreError> {
        let id = firing.id;
        if rule.impact.is_some() {
            let cal = self.calendar();
            if let Err(e) =
                super::impact::record_before(&self.out, &self.ledger, rule, id, keys, cal)
            {
                tracing::warn!(rule = %rule.name, "cannot record the impact's figures before: {e}");
            }
        }
        if let Err(limit) = self.send(client, rule, firing).await {
            // Another process took the hour's last slot between the check and the send: nothing
            // left docpipe, so the firing is as if it had not happened (an approved one waits
            // for review again).
            if firing.trail.decided_by.is_some() {
                self.ledger.hold_again(id)?;
            } else {
                self.ledger.discard(id)?;
            }
            return Ok(Report::Skipped {
                rule: rule.name.clone(),
                project: rule.project.clone(),
                rows: firing.rows_matched as usize,
                skip: Skip::HourlyLimit { limit },
            });
        }
        self.ledger.update(firing, self.clock.now())?;
        tracing::debug!(rule = %rule.name, sent = firing.sent.as_str(), job = ?firing.job, "rule fired");
        if polls(rule, firing) {
            if inline {
                self.poll(client, rule, firing).await;
                self.ledger.update(firing, self.clock.now())?;
            } else {
                let until = chrono::Duration::from_std(rule.timeout)
                    .ok()
                    .and_then(|t| firing.fired_at.checked_add_signed(t))
                    .unwrap_or(DateTime::<Utc>::MAX_UTC);
                self.ledger.poll_until(firing.id, until)?;
            }
        }
        Ok(Report::Fired(firing.clone()))
    }

    /// Records what a rule that is not enabled would send, and sends nothing.
    fn preview(&self, rule: &Rule, eval: &Evaluation, prompt: &str) -> Result<Report, StoreError> {
        let hold = eval.hold(rule);
        let reason = match &hold {
            Some(h) => format!(
                "the rule is not enabled (enabled = true in {} sends it); it would then wait for review: {h}",
                rule.file
            ),
            None => format!(
                "the rule is not enabled (enabled = true in {} sends it)",
                rule.file
            ),
        };
        self.ledger.preview(&Preview {
            rule: rule.name.clone(),
            project: rule.project.clone(),
            at: self.clock.now(),
            rows: eval.rows.height() as i64,
            prompt: prompt.to_string(),
            reason,
            flags: json_of(&eval.flags).unwrap_or_else(|| "[]".into()),
        })?;
        Ok(Report::Previewed {
            rule: rule.name.clone(),
            project: rule.project.clone(),
            file: rule.file.clone(),
            rows: eval.rows.height(),
            prompt_hash: prompt_hash(prompt),
            hold,
        })
    }

    /// Sends a held firing's prompt, exactly as held, once: `by` approved it. `rule` is its
    /// rule as loaded now (its `wait`, `timeout` and `[impact]`), if it still exists.
    pub async fn approve(
        &self,
        id: i64,
        by: &str,
        rule: Option<&Rule>,
    ) -> Result<Result<Report, Decided>, StoreError> {
        let Some(held) = self.ledger.firing(id)? else {
            return Ok(Err(Decided::Unknown(id)));
        };
        let action = match (held.kind, &held.job) {
            (Kind::Create, _) => Action::Create,
            (_, job) => Action::FollowUp(job.clone().unwrap_or_default()),
        };
        // The rule as it was held: its project and action; its polling and impact from the
        // file when it still names the same ones.
        let fallback = Rule {
            name: held.rule.clone(),
            file: "(the ledger)".into(),
            description: None,
            project: held.project.clone(),
            action: action.clone(),
            when: String::new(),
            min_rows: 1,
            prompt: String::new(),
            cooldown: std::time::Duration::ZERO,
            wait: false,
            timeout: super::DEFAULT_TIMEOUT,
            schedule: None,
            key: None,
            key_cooldown: super::DEFAULT_KEY_COOLDOWN,
            impact: None,
            enabled: true,
            enabled_given: true,
            review: super::Review::Flagged,
            on_flagged: super::OnFlagged::Hold,
            domains: Vec::new(),
            unescaped: Vec::new(),
        };
        let rule = match rule {
            Some(r) if r.project == held.project && r.action == action => r,
            _ => &fallback,
        };
        let client = match self.client(rule) {
            Ok(c) => c,
            Err(e) => return Ok(Ok(Report::Broken(e))),
        };
        if held.sent == Sent::Held
            && let Some(skip) = self.hourly(rule, self.clock.now())
        {
            return Ok(Ok(Report::Skipped {
                rule: held.rule.clone(),
                project: held.project.clone(),
                rows: held.rows_matched as usize,
                skip,
            }));
        }
        let mut firing = match self.ledger.approve(id, by, self.clock.now())? {
            Ok(f) => f,
            Err(d) => return Ok(Err(d)),
        };
        let keys = self.ledger.firing_keys(id)?;
        Ok(Ok(self
            .deliver(client, rule, &mut firing, &keys, true)
            .await?))
    }

    /// Drops a held firing: nothing is sent; `by` rejected it, `why` says why.
    pub fn reject(
        &self,
        id: i64,
        by: &str,
        why: Option<&str>,
    ) -> Result<Result<Firing, Decided>, StoreError> {
        self.ledger.reject(id, by, why, self.clock.now())
    }

    /// Looks once at each job being polled (fired by [`Engine::fire_nowait`], in this process
    /// or one that stopped): records its status, and ends its polling when it ended, when the
    /// rule's timeout passed, or when it cannot be read. Returns the firings whose polling
    /// ended in this step.
    pub async fn poll_step(&self) -> Result<Vec<Firing>, StoreError> {
        let mut ended = Vec::new();
        for (mut f, until) in self.ledger.polling()? {
            let Some(job) = f.job.clone() else {
                self.ledger.end_polling(f.id)?;
                continue;
            };
            let Some(client) = self.clients.get(&f.project) else {
                // Not this process's project any more: leave it for one that has it.
                continue;
            };
            let result = client.get_job(&f.project, &job).await;
            let now = self.clock.now();
            let outcome = match result {
                Ok(current) if !current.is_terminal() && now < until => {
                    f.status = Some(current.status_str().to_string());
                    self.ledger.update(&f, now)?;
                    continue;
                }
                // Past the rule's timeout: as `Client::wait_job` ends a wait.
                Ok(current) if !current.is_terminal() => Err(ApiError {
                    operation: Operation::GetJob,
                    target: format!("job {job} of project {}", f.project),
                    kind: ErrorKind::WaitTimeout {
                        status: current.status_str().to_string(),
                        waited: (until - f.fired_at).to_std().unwrap_or_default(),
                    },
                }),
                other => other,
            };
            self.record(&mut f, outcome);
            self.ledger.update(&f, now)?;
            if self.ledger.end_polling(f.id)? {
                ended.push(f);
            }
        }
        Ok(ended)
    }

    /// Records a job that ended.
    fn ended(&self, f: &mut Firing, done: &Job) {
        f.status = Some(done.status_str().to_string());
        f.pr_link = done.pr_link.clone();
        let took = self.clock.now() - f.fired_at;
        f.seconds_to_done = Some(took.num_milliseconds() as f64 / 1000.0);
        if done.status_str() == "failed" {
            note(f, "the job failed".into());
        }
    }

    /// Sends once. A follow-up's job is read first: a missing job is reported without sending,
    /// and its status tells, if the answer is lost, whether the follow-up arrived. `Err(limit)`
    /// when the hourly limit was reached before sending.
    async fn send(&self, client: &Client, rule: &Rule, f: &mut Firing) -> Result<(), u32> {
        let before = match &rule.action {
            Action::FollowUp(j) => match client.get_job(&rule.project, j).await {
                Ok(job) => Some(job),
                Err(e) => {
                    f.sent = Sent::NotSent;
                    f.error = Some(e.to_string());
                    return Ok(());
                }
            },
            Action::Create => None,
        };
        let result = match &rule.action {
            Action::FollowUp(j) => client.follow_up(&rule.project, j, &f.prompt).await,
            Action::Create => client.create_job(&rule.project, &f.prompt).await,
        };
        match result {
            Ok(job) => {
                f.sent = Sent::Sent;
                f.status = Some(job.status_str().to_string());
                if rule.action == Action::Create {
                    f.job = job.id.clone();
                    if f.job.is_none() {
                        f.error = Some("the service created a job but returned no id".into());
                    }
                }
            }
            Err(e) => match &e.kind {
                ErrorKind::OutcomeUnknown(_) => {
                    f.sent = Sent::Unknown;
                    f.error = Some(format!("{e}; not sent again"));
                    if let (Action::FollowUp(j), Some(before)) = (&rule.action, before) {
                        self.resolve(client, rule, j, &before, f).await;
                    }
                }
                ErrorKind::LimitReached { limit, .. } => return Err(*limit),
                ErrorKind::RateLimited { .. } | ErrorKind::Connect(_) => {
                    f.sent = Sent::NotSent;
                    f.error = Some(e.to_string());
                }
                _ => {
                    f.sent = Sent::Refused;
                    f.error = Some(e.to_string());
                }
            },
        }
        Ok(())
    }

    /// After a lost answer: a job that had ended and is active again received the follow-up.
    async fn resolve(&self, client: &Client, rule: &Rule, job: &str, before: &Job, f: &mut Firing) {
        match client.get_job(&rule.project, job).await {
            Ok(now) if before.is_terminal() && !now.is_terminal() => {
                tracing::info!(rule = %rule.name, job, "the answer was lost, but the job is active again: the follow-up arrived");
                f.sent = Sent::Sent;
                f.status = Some(now.status_str().to_string());
                f.error = None;
            }
            Ok(now) => f.status = Some(now.status_str().to_string()),
            Err(e) => {
                tracing::warn!(rule = %rule.name, error = %e, "cannot read the job after an unknown outcome")
            }
        }
    }

    /// Polls until the job ends or the rule's timeout.
    async fn poll(&self, client: &Client, rule: &Rule, f: &mut Firing) {
        let Some(job) = f.job.clone() else {
            return;
        };
        let polling = Polling {
            timeout: rule.timeout,
            ..self.polling
        };
        let outcome = client.wait_job(&rule.project, &job, polling).await;
        self.record(f, outcome);
    }

    /// Records how polling a firing's job ended: the job ended, the rule's timeout passed, or
    /// the job could not be read.
    fn record(&self, f: &mut Firing, outcome: Result<Job, ApiError>) {
        match outcome {
            Ok(done) => self.ended(f, &done),
            Err(e) => {
                if let ErrorKind::WaitTimeout { status, .. } = &e.kind {
                    f.status = Some(status.clone());
                    note(f, format!("gave up polling after the rule's timeout: {e}"));
                } else {
                    note(f, format!("polling: {e}"));
                }
            }
        }
    }

    /// Rewrites `agent_runs/project=<p>/part-00000.parquet` from the ledger (each file under a
    /// temporary name, renamed into place); returns the files.
    ///
    /// Processes take turns (a lock file in the folder), each reading the ledger once it has
    /// its turn: the last one to write has every firing that was recorded before it.
    pub fn write_log(&self) -> Result<Vec<PathBuf>, LogError> {
        let dir = self.out.join(AGENT_RUNS);
        let lock_path = dir.join(".lock");
        let io = |source| {
            LogError::Write(WriteError::Io {
                path: lock_path.display().to_string(),
                source,
            })
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let lock = std::fs::File::create(&lock_path).map_err(io)?;
        lock.lock().map_err(io)?;
        let firings = self.ledger.all()?;
        write_log(&self.out, &firings)
    }
}

/// Whether a firing's job is polled after it is sent: the rule waits, and a job may have the
/// prompt (its outcome then comes from polling, not from the send).
pub fn polls(rule: &Rule, f: &Firing) -> bool {
    rule.wait && f.job.is_some() && matches!(f.sent, Sent::Sent | Sent::Unknown)
}

/// A list as JSON, none when it is empty.
fn json_of<T: serde::Serialize>(items: &[T]) -> Option<String> {
    if items.is_empty() {
        None
    } else {
        serde_json::to_string(items).ok()
    }
}

/// Adds a note to a firing's error text.
fn note(f: &mut Firing, text: String) {
    f.error = Some(match f.error.take() {
        Some(e) => format!("{e}; {text}"),
        None => text,
    });
}

/// Errors writing the outcome log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Reading the ledger.
    #[error(transparent)]
    State(#[from] StoreError),
    /// Writing Parquet.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The columns of `agent_runs` (the project is the partition).
fn agent_runs_columns(c: Columns<'_, Firing>) -> Columns<'_, Firing> {
    c.int("firing_id", false, |f| Some(f.id))
        .text("rule", false, |f| Some(&f.rule))
        .text("action", false, |f| Some(f.kind.as_str()))
        .text("job", true, |f| f.job.as_deref())
        .time("fired_at", false, |f| Some(f.fired_at))
        .text("prompt_hash", false, |f| Some(&f.prompt_hash))
        .text("prompt", false, |f| Some(&f.prompt))
        .int("rows_matched", false, |f| Some(f.rows_matched))
        .text("sent", false, |f| Some(f.sent.as_str()))
        .text("status", true, |f| f.status.as_deref())
        .text("pr_link", true, |f| f.pr_link.as_deref())
        .real("seconds_to_done", |f| f.seconds_to_done)
        .text("error", true, |f| f.error.as_deref())
        .text("flags", true, |f| f.trail.flags.as_deref())
        .text("dropped", true, |f| f.trail.dropped.as_deref())
        .text("held_because", true, |f| f.trail.hold.as_deref())
        .text("decided_by", true, |f| f.trail.decided_by.as_deref())
        .time("decided_at", true, |f| f.trail.decided_at)
        .text("review_note", true, |f| f.trail.note.as_deref())
}

/// Schema of `agent_runs` (the project is the partition).
pub fn agent_runs_schema() -> arrow_schema::SchemaRef {
    crate::dataset::derived::schema(agent_runs_columns)
}

/// Writes the outcome log of every project in `firings`.
pub fn write_log(out: &Path, firings: &[Firing]) -> Result<Vec<PathBuf>, LogError> {
    Ok(crate::dataset::derived::write(
        out,
        AGENT_RUNS,
        firings,
        |f| &f.project,
        agent_runs_columns,
    )?)
}
