//! The firings held for review: approved (sent exactly as held) or rejected.

use super::*;
use crate::rules::{Action, Rule};
use crate::store::StoreError;
use crate::store::ledger::{Decided, Firing, Kind, Sent};

impl Engine {
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
            timeout: crate::rules::DEFAULT_TIMEOUT,
            schedule: None,
            key: None,
            key_cooldown: crate::rules::DEFAULT_KEY_COOLDOWN,
            impact: None,
            enabled: true,
            enabled_given: true,
            review: crate::rules::Review::Flagged,
            on_flagged: crate::rules::OnFlagged::Hold,
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
}
