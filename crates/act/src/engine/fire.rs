//! A firing sent: the ledger first (held for review, or recorded as sending), then one
//! request, or a preview that sends nothing.

use super::*;
use crate::{Action, Evaluation, Rule, prompt_hash};
use chrono::{DateTime, Utc};
use docpipe_extract::Client;
use docpipe_state::StoreError;
use docpipe_state::ledger::{Firing, NewFiring, Preview, Sent, Skip, Trail};

/// The target of this file's log lines, as before the rules had a crate of their own (a
/// `RUST_LOG` filter names it).
const TARGET: &str = "docpipe::rules::engine::fire";

impl Engine {
    pub(super) async fn fire_with(
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
            tracing::debug!(target: TARGET, rule = %rule.name, firing = firing.id, "a firing waits for review");
            return Ok(Report::Held(firing));
        };
        self.deliver(client, rule, &mut firing, &eval.keys, inline)
            .await
    }

    /// Records a firing in the ledger before anything is sent (`sending`, or `held` for
    /// review), with its trail; the ledger's skip when it checked again and found one.
    pub(super) fn record_firing(
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
            Action::Create | Action::Trigger(_) => None,
        };
        let trail = Trail {
            flags: json_of(&eval.flags),
            dropped: json_of(&eval.dropped),
            hold: hold.clone(),
            held_at: hold.as_ref().map(|_| now),
            rows: hold
                .as_ref()
                .and_then(|_| crate::HeldRows::of(rule, eval))
                .and_then(|h| serde_json::to_string(&h).ok()),
            ..Trail::default()
        };
        let id = match self.ledger.record(NewFiring {
            rule: rule.key(),
            job: job.as_deref(),
            automation: rule.action.automation(),
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
            run: rule
                .action
                .automation()
                .map(|a| docpipe_state::ledger::Run {
                    automation: a.to_string(),
                    ..Default::default()
                }),
        }))
    }

    /// Sends a recorded firing (`sending`) once: the impact's figures before, one request, the
    /// job polled (inline, or left to [`Engine::poll_step`]); every step in the ledger.
    pub(super) async fn deliver(
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
                crate::impact::record_before(&self.out, &self.ledger, rule, id, keys, cal)
            {
                tracing::warn!(target: TARGET, rule = %rule.name, "cannot record the impact's figures before: {e}");
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
        tracing::debug!(target: TARGET, rule = %rule.name, sent = firing.sent.as_str(), job = ?firing.job, "rule fired");
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
    pub(super) fn preview(
        &self,
        rule: &Rule,
        eval: &Evaluation,
        prompt: &str,
    ) -> Result<Report, StoreError> {
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
}
