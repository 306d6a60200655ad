//! The firings held for review: approved (sent exactly as held) or rejected.

use super::*;
use crate::{Action, HeldRows, Rule};
use docpipe_state::StoreError;
use docpipe_state::ledger::{Decided, Edit, Firing, Kind, Sent};

/// A held firing's rows as kept, or why `--drop`/`--rows` cannot name them.
fn held_rows(held: &Firing) -> Result<HeldRows, Decided> {
    held.trail
        .rows
        .as_deref()
        .and_then(|j| serde_json::from_str::<HeldRows>(j).ok())
        .ok_or_else(|| Decided::Rows {
            id: held.id,
            why: "it was held without its rows (by an earlier docpipe): approve or reject it whole"
                .into(),
        })
}

/// Rows named from 1 checked against a held firing's rows: their indexes from 0.
fn row_indexes(held: &Firing, rows: &HeldRows, named: &[usize]) -> Result<Vec<usize>, Decided> {
    let n = rows.rows.len();
    match named.iter().find(|r| **r == 0 || **r > n) {
        Some(bad) => Err(Decided::Rows {
            id: held.id,
            why: format!("it has no row {bad} (its rows are 1 to {n})"),
        }),
        None => Ok(named.iter().map(|r| r - 1).collect()),
    }
}

impl Engine {
    /// Sends a held firing's prompt once: `by` approved it. Without `drop`, exactly as held;
    /// with it, rendered again without those rows (numbered from 1, as `rules pending` shows
    /// them), whose keys then cool down as rejected. `rule` is its rule as loaded now (its
    /// `wait`, `timeout` and `[impact]`), if it still exists.
    pub async fn approve(
        &self,
        id: i64,
        by: &str,
        rule: Option<&Rule>,
        drop: &[usize],
    ) -> Result<Result<Report, Decided>, StoreError> {
        self.approve_with(id, by, rule, drop, true, false).await
    }

    /// [`Engine::approve`]; a job its rule waits for is polled now when `inline`, else left to
    /// [`Engine::poll_step`] or [`Engine::wait_for`] (so that several approvals wait at once).
    /// With `retry`, an approved firing whose send was cut off is sent again instead (a person
    /// checked that it did not reach the service).
    pub async fn approve_with(
        &self,
        id: i64,
        by: &str,
        rule: Option<&Rule>,
        drop: &[usize],
        inline: bool,
        retry: bool,
    ) -> Result<Result<Report, Decided>, StoreError> {
        let Some(held) = self.ledger.firing(id)? else {
            return Ok(Err(Decided::Unknown(id)));
        };

        let action = match (held.kind, &held.job) {
            (Kind::Create, _) => Action::Create,
            (Kind::Trigger, _) => Action::Trigger(
                held.run
                    .as_ref()
                    .map(|r| r.automation.clone())
                    .unwrap_or_default(),
            ),
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
            timeout: crate::DEFAULT_TIMEOUT,
            schedule: None,
            key: None,
            key_cooldown: crate::DEFAULT_KEY_COOLDOWN,
            impact: None,
            reask: None,
            enabled: true,
            enabled_given: true,
            review: crate::Review::Readers,
            on_flagged: crate::OnFlagged::Hold,
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
        let edit = if drop.is_empty() {
            None
        } else {
            match self.edit(&held, rule, drop) {
                Ok(e) => Some(e),
                Err(d) => return Ok(Err(d)),
            }
        };
        let dropped = edit
            .as_ref()
            .map(|e| e.dropped_keys.clone())
            .unwrap_or_default();
        let taken = if retry {
            self.ledger.retry(id, by, self.clock.now())?
        } else {
            self.ledger.approve_edited(id, by, self.clock.now(), edit)?
        };
        let mut firing = match taken {
            Ok(f) => f,
            Err(d) => return Ok(Err(d)),
        };
        let mut keys = self.ledger.firing_keys(id)?;
        keys.retain(|k| !dropped.contains(k));
        Ok(Ok(self
            .deliver(client, rule, &mut firing, &keys, inline)
            .await?))
    }

    /// The held firing's prompt rendered again without the rows `drop` names.
    fn edit(&self, held: &Firing, rule: &Rule, drop: &[usize]) -> Result<Edit, Decided> {
        let rows = held_rows(held)?;
        let out = row_indexes(held, &rows, drop)?;
        if (0..rows.rows.len()).all(|i| out.contains(&i)) {
            return Err(Decided::Rows {
                id: held.id,
                why: "dropping every row leaves nothing to send: reject it instead".into(),
            });
        }
        let values = rows.values(|i| !out.contains(&i));
        let (prompt, _) = crate::render(&rows.template, rule, &values, values.len())
            .map_err(|why| Decided::Rows { id: held.id, why })?;
        let dropped_keys = rows.keys_at(&out);
        Ok(Edit {
            hash: crate::prompt_hash(&prompt),
            rows: values.len() as i64,
            prompt,
            dropped_keys,
        })
    }

    /// Drops a held firing: nothing is sent; `by` rejected it, `why` says why. `rows` names the
    /// rows rejected (from 1; none: all): only their keys cool down.
    pub fn reject(
        &self,
        id: i64,
        by: &str,
        why: Option<&str>,
        rows: &[usize],
    ) -> Result<Result<Firing, Decided>, StoreError> {
        let keys = if rows.is_empty() {
            None
        } else {
            let Some(held) = self.ledger.firing(id)? else {
                return Ok(Err(Decided::Unknown(id)));
            };
            let kept = match held_rows(&held) {
                Ok(k) => k,
                Err(d) => return Ok(Err(d)),
            };
            match row_indexes(&held, &kept, rows) {
                Ok(ix) => Some(kept.keys_at(&ix)),
                Err(d) => return Ok(Err(d)),
            }
        };
        self.ledger.reject(id, by, why, keys, self.clock.now())
    }
}
