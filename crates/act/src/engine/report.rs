//! What a rule's evaluation came to, as a run's report and a line for people.

use crate::{Rule, RuleError};
use chrono::{DateTime, Utc};
use docpipe_catalog::events::RunOutcome;
use docpipe_catalog::text::one_line;
use docpipe_state::activity::RuleRun;
use docpipe_state::ledger::{Firing, Kind, Sent, Skip};

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
                crate::short_hash(prompt_hash),
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
                crate::short_hash(&f.prompt_hash),
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
        (Kind::Trigger, j) => {
            let automation = f.run.as_ref().map_or("?", |r| r.automation.as_str());
            match (f.run.as_ref().and_then(|r| r.instance_id.as_deref()), j) {
                (Some(run), Some(j)) => format!(
                    "automation {automation} as run {}, job {}",
                    one_line(run),
                    one_line(j)
                ),
                (Some(run), None) => format!("automation {automation} as run {}", one_line(run)),
                _ => format!("automation {automation}"),
            }
        }
        (_, j) => format!("follow-up to job {}", one_line(j.unwrap_or("?"))),
    };
    let mut line = format!(
        "rule {} ({}): {} {what} ({} rows, {} {})",
        f.rule,
        f.project,
        match (f.sent, f.kind) {
            (Sent::Sent, Kind::Create) => "created",
            (Sent::Sent, Kind::Trigger) => "started",
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
        // A trigger sends no prompt: its hash is of docpipe's record of the rows.
        if f.kind == Kind::Trigger {
            "record"
        } else {
            "prompt"
        },
        crate::short_hash(&f.prompt_hash)
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
