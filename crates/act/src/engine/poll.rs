//! The jobs being polled: one look each per step, an unknown outcome resolved by reading the
//! job (never by sending again), the outcome recorded.

use super::*;
use crate::{Action, Rule};
use docpipe_extract::jobs::{Job, Polling};
use docpipe_extract::{ApiError, Client, ErrorKind, Operation};
use docpipe_state::StoreError;
use docpipe_state::ledger::{Firing, Run, Sent};

/// The target of this file's log lines, as before the rules had a crate of their own (a
/// `RUST_LOG` filter names it).
const TARGET: &str = "docpipe::rules::engine::poll";

impl Engine {
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
    pub(super) fn ended(&self, f: &mut Firing, done: &Job) {
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
    pub(super) async fn send(
        &self,
        client: &Client,
        rule: &Rule,
        f: &mut Firing,
    ) -> Result<(), u32> {
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
            Action::Trigger(a) => return self.start(client, rule, a, f).await,
        };
        let result = match &rule.action {
            Action::FollowUp(j) => client.follow_up(&rule.project, j, &f.prompt).await,
            _ => client.create_job(&rule.project, &f.prompt).await,
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
            Err(e) => {
                failed(f, &e)?;
                if let (ErrorKind::OutcomeUnknown(_), Action::FollowUp(j), Some(before)) =
                    (&e.kind, &rule.action, before)
                {
                    self.resolve(client, rule, j, &before, f).await;
                }
            }
        }
        Ok(())
    }

    /// Starts a run of `automation` once: the run's ids in the firing (its job is then polled
    /// as a created job's). `Err(limit)` when the hourly limit was reached before sending.
    async fn start(
        &self,
        client: &Client,
        rule: &Rule,
        automation: &str,
        f: &mut Firing,
    ) -> Result<(), u32> {
        match client.trigger(&rule.project, automation).await {
            Ok(run) => {
                f.sent = Sent::Sent;
                f.job = run.job_id;
                if f.job.is_none() {
                    f.error = Some(
                        "the service started a run but returned no jobId: it cannot be followed"
                            .into(),
                    );
                }
                f.run = Some(Run {
                    automation: automation.to_string(),
                    schema_id: Some(run.schema_id),
                    instance_id: Some(run.instance_id),
                });
                Ok(())
            }
            // A lost answer leaves no job to read: the run may have started, and is not
            // started again.
            Err(e) => failed(f, &e),
        }
    }

    /// After a lost answer: a job that had ended and is active again received the follow-up.
    pub(super) async fn resolve(
        &self,
        client: &Client,
        rule: &Rule,
        job: &str,
        before: &Job,
        f: &mut Firing,
    ) {
        match client.get_job(&rule.project, job).await {
            Ok(now) if before.is_terminal() && !now.is_terminal() => {
                tracing::info!(target: TARGET, rule = %rule.name, job, "the answer was lost, but the job is active again: the follow-up arrived");
                f.sent = Sent::Sent;
                f.status = Some(now.status_str().to_string());
                f.error = None;
            }
            Ok(now) => f.status = Some(now.status_str().to_string()),
            Err(e) => {
                tracing::warn!(target: TARGET, rule = %rule.name, error = %e, "cannot read the job after an unknown outcome")
            }
        }
    }

    /// Polls until the job ends or the rule's timeout.
    pub(super) async fn poll(&self, client: &Client, rule: &Rule, f: &mut Firing) {
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
    pub(super) fn record(&self, f: &mut Firing, outcome: Result<Job, ApiError>) {
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
}

/// Records a send the service did not accept: `Err(limit)` when the hourly limit was reached
/// before sending (nothing left docpipe).
fn failed(f: &mut Firing, e: &ApiError) -> Result<(), u32> {
    match &e.kind {
        ErrorKind::OutcomeUnknown(_) => {
            f.sent = Sent::Unknown;
            f.error = Some(format!("{e}; not sent again"));
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
    }
    Ok(())
}

/// Whether a firing's job is polled after it is sent: the rule waits, and a job may have the
/// prompt (its outcome then comes from polling, not from the send).
pub fn polls(rule: &Rule, f: &Firing) -> bool {
    rule.wait && f.job.is_some() && matches!(f.sent, Sent::Sent | Sent::Unknown)
}
