//! Sending what the rules say: the hourly limit and the ledger first, then one request, an
//! unknown outcome resolved by reading the job (never by sending again), polling the job (until
//! it ends, or one look per [`Engine::poll_step`]), and the outcome log in `agent_runs/` as
//! Parquet.

mod fire;
mod log;
mod poll;
mod reask;
mod report;
mod review;

pub use log::{AGENT_RUNS, LogError, agent_runs_schema, write_log};
pub use poll::polls;
pub use reask::{
    AGENT_REASKS, Asker, REASK_FP, REASK_WITHIN, ReaskRow, Reasked, agent_reasks_schema,
    names_page, reask_line, reask_rows, resolution,
};
pub use report::{Report, firing_line};

use crate::{Evaluation, Rule, RuleError, prompt_hash};
use chrono::{DateTime, Utc};
use docpipe_catalog::clock::SharedClock;
use docpipe_extract::Client;
use docpipe_extract::budget::Budget;
use docpipe_extract::jobs::Polling;
use docpipe_state::StoreError;
use docpipe_state::ledger::{Firing, Ledger, Skip};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use docpipe_catalog::calendar::Settle;

/// The target of this file's log lines, as before the rules had a crate of their own (a
/// `RUST_LOG` filter names it).
const TARGET: &str = "docpipe::rules::engine";

/// Sends follow-ups for fired rules and records what happened.
#[derive(Debug)]
pub struct Engine {
    pub(crate) out: PathBuf,
    pub(crate) ledger: Ledger,
    budget: Arc<dyn Budget>,
    limits: HashMap<String, u32>,
    clients: HashMap<String, Client>,
    pub(crate) clock: SharedClock,
    polling: Polling,
    pub(crate) tz: chrono_tz::Tz,
    pub(crate) settle: Settle,
    review_expires: std::time::Duration,
    askers: HashMap<String, reask::Asker>,
}

impl Engine {
    /// How the impact counts days, now.
    pub fn calendar(&self) -> crate::impact::Calendar {
        crate::impact::Calendar {
            tz: self.tz,
            today: self.clock.now().with_timezone(&self.tz).date_naive(),
            settle: self.settle,
        }
    }

    /// Measures the impact of every firing that is due (the jobs ended, the wait passed, the
    /// days after final) and rewrites `agent_impact/` when anything was measured.
    pub fn measure_impact(&self) -> Result<crate::impact::Measured, crate::impact::ImpactError> {
        crate::impact::measure_due(&self.out, &self.ledger, self.calendar(), self.clock.now())
    }
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
        let ledger = Ledger::open(&docpipe_state::state_path(out))?;
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
                target: TARGET,
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
            settle: Settle::default(),
            review_expires: DEFAULT_REVIEW_EXPIRES,
            askers: HashMap::new(),
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
                target: TARGET,
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

    /// Counts the impact's days in this time zone (the output folder's), a span's day final
    /// as the export marks it (see [`Settle`]).
    pub fn with_days(mut self, tz: chrono_tz::Tz, settle: Settle) -> Self {
        self.tz = tz;
        self.settle = settle;
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
