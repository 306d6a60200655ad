//! The firing's questions asked again: once a job (or an automation's run) ended with a pull
//! request, each question of the firing (its keys, at most the rule's `reask_max`) goes to the
//! project's assistant as `docpipe ask` sends one; a question the first ask found nothing for
//! is asked once more `reask_again` later (the pull request's pages may deploy later), then
//! left. Each answer's resolution and cited pages are kept in the ledger.

use super::*;
use crate::Rule;
use docpipe_extract::assistant::{AskRequest, Message};
use docpipe_extract::stream::Event;
use docpipe_state::ledger::Firing;
use docpipe_state::reask::{Reask, Resolution};

/// The target of this file's log lines.
const TARGET: &str = "docpipe::rules::engine::reask";

/// A firing's questions are asked again only while it is this recent: a ledger older than
/// the re-ask is not asked about all at once.
pub const REASK_WITHIN: chrono::Duration = chrono::Duration::days(14);

/// The fingerprint the re-asks send (the service's analytics count them as turns).
pub const REASK_FP: &str = "docpipe-reask";

/// Where a project's questions are asked: its organization's assistant, or why it cannot be.
#[derive(Debug, Clone)]
pub enum Asker {
    /// The client (with the assistant key) and the domain.
    Ready {
        /// The client.
        client: Box<Client>,
        /// The assistant's domain.
        domain: String,
    },
    /// Why the project's questions cannot be asked (no domain, no key).
    Missing(String),
}

/// What one step of asking again did.
#[derive(Debug, Default)]
pub struct Reasked {
    /// Firings whose questions were planned in this step.
    pub planned: usize,
    /// The asks sent, each as its line.
    pub lines: Vec<String>,
    /// `agent_reasks`' files, rewritten when anything was planned or asked.
    pub files: Vec<std::path::PathBuf>,
}

impl Engine {
    /// Where each project's questions are asked again.
    pub fn with_askers(mut self, askers: HashMap<String, Asker>) -> Self {
        self.askers = askers;
        self
    }

    /// Why `project`'s questions cannot be asked again, if they cannot.
    pub fn cannot_reask(&self, project: &str) -> Option<String> {
        match self.askers.get(project) {
            Some(Asker::Ready { .. }) => None,
            Some(Asker::Missing(why)) => Some(why.clone()),
            None => Some(format!("project {project} has no assistant to ask")),
        }
    }

    /// Plans the questions of each firing of `rules` that re-ask whose job ended with a pull
    /// request, then asks every question due now, one at a time; each answer in the ledger.
    pub async fn reask(&self, rules: &[Rule]) -> Result<Reasked, LogError> {
        let now = self.clock.now();
        let firings = self.ledger.all()?;
        let mut out = Reasked::default();
        for f in firings
            .iter()
            .filter(|f| f.pr_link.is_some() && now - f.fired_at <= REASK_WITHIN)
        {
            let Some(reask) = rule_of(rules, f).and_then(|r| r.reask) else {
                continue;
            };
            if let Some(why) = self.cannot_reask(&f.project) {
                tracing::debug!(target: TARGET, firing = f.id, "its questions are not asked again: {why}");
                continue;
            }
            let mut keys = self.ledger.firing_keys(f.id)?;
            keys.truncate(reask.max);
            if !keys.is_empty() && self.ledger.plan_reasks(f.id, &keys, now)? {
                out.planned += 1;
            }
        }
        for mut due in self.ledger.due_reasks(now)? {
            // Only the firings of `rules` (a rule's own `reask_again` plans its next ask).
            let Some((f, reask)) = firings
                .iter()
                .find(|f| f.id == due.firing_id)
                .and_then(|f| Some((f, rule_of(rules, f)?.reask?)))
            else {
                continue;
            };
            let asked_at = self.clock.now();
            due.asked_at = Some(asked_at);
            match self.ask_once(f, &due.question, asked_at).await {
                Ok((resolution, sources)) => {
                    due.cites_named = sources.iter().any(|s| names_page(&f.prompt, s));
                    due.resolution = Some(resolution);
                    due.sources = sources;
                }
                Err(e) => due.error = Some(e),
            }
            let next = (due.attempt == 1 && due.resolution != Some(Resolution::Answered))
                .then(|| chrono::Duration::from_std(reask.again).ok())
                .flatten()
                .map(|d| asked_at + d);
            self.ledger.record_reask(&due, next)?;
            let line = reask_line(f, &due);
            tracing::debug!(target: TARGET, "{line}");
            out.lines.push(line);
        }
        if out.planned > 0 || !out.lines.is_empty() {
            out.files = self.write_reasks()?;
        }
        Ok(out)
    }

    /// Asks one question of the firing's project's assistant: how it answered, and the pages it
    /// cited.
    async fn ask_once(
        &self,
        f: &Firing,
        question: &str,
        now: DateTime<Utc>,
    ) -> Result<(Resolution, Vec<String>), String> {
        let (client, domain) = match self.askers.get(&f.project) {
            Some(Asker::Ready { client, domain }) => (client, domain),
            Some(Asker::Missing(why)) => return Err(why.clone()),
            None => return Err(format!("project {} has no assistant to ask", f.project)),
        };
        let request = AskRequest {
            fp: REASK_FP.to_string(),
            messages: vec![Message::user_at(
                &format!("m{}", now.timestamp_millis()),
                question,
                now,
            )],
            thread_id: None,
            thread_key: None,
            retrieval_page_size: 5,
            current_path: None,
        };
        let mut answer = client
            .ask(domain.as_str(), &request)
            .await
            .map_err(|e| e.to_string())?;
        let (mut text, mut marked) = (String::new(), false);
        while let Some(event) = answer.next().await {
            match event.map_err(|e| e.to_string())? {
                Event::Text { text: t } => text.push_str(&t),
                Event::ToolCall { name, .. } | Event::ToolCallStart { name, .. }
                    if name == "markNotFound" =>
                {
                    marked = true;
                }
                _ => {}
            }
        }
        let sources: Vec<String> = answer
            .sources
            .iter()
            .map(|s| page_of(&s.location))
            .collect();
        Ok((resolution(marked, &sources, &text), sources))
    }
}

/// The rule a firing was fired by, among those loaded now (its name and project).
fn rule_of<'r>(rules: &'r [Rule], f: &Firing) -> Option<&'r Rule> {
    rules
        .iter()
        .find(|r| r.name == f.rule && r.project == f.project)
}

/// How an answer resolved: not found when the assistant marked it so (its `markNotFound`
/// tool) or cited no page; a clarifying question when it cited none and ended asking; else
/// answered. The v1 stream has no marker for a clarifying question: its text says.
pub fn resolution(marked: bool, sources: &[String], text: &str) -> Resolution {
    if marked {
        Resolution::NotFound
    } else if sources.is_empty() && text.trim_end().ends_with('?') {
        Resolution::Clarifying
    } else if sources.is_empty() {
        Resolution::NotFound
    } else {
        Resolution::Answered
    }
}

/// A source's page: its path (a URL's path, without query or fragment).
fn page_of(location: &str) -> String {
    let path = match location.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => location,
    };
    path.split(['?', '#']).next().unwrap_or(path).to_string()
}

/// Whether `text` names page `path` as a whole path, alone or as a URL's path (not as the start
/// of a longer path: a sentence's full stop after it is fine, `/a.md` does not name `/a`).
pub fn names_page(text: &str, path: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || matches!(c, '/' | '-' | '_');
    !path.is_empty()
        && text.match_indices(path).any(|(i, _)| {
            let mut after = text[i + path.len()..].chars();
            let whole_after = match after.next() {
                None => true,
                Some('.') => !after.next().is_some_and(char::is_alphanumeric),
                Some(c) => !part(c),
            };
            // What comes before, back to white space or a quote: nothing, or a URL's
            // `scheme://host`.
            let start = text[..i]
                .rfind(|c: char| c.is_whitespace() || matches!(c, '"' | '(' | ','))
                .map_or(0, |j| j + 1);
            let before = &text[start..i];
            let whole_before = before.is_empty()
                || before.split_once("://").is_some_and(|(scheme, host)| {
                    matches!(scheme, "http" | "https") && !host.is_empty() && !host.contains('/')
                });
            whole_before && whole_after
        })
}

/// `firing 12 (rule q, acme-docs): asked again "how do i ..." (2nd time): answered, citing
/// /guides/webhooks (a page the firing named)`.
pub fn reask_line(f: &Firing, r: &Reask) -> String {
    format!(
        "firing {} (rule {}, {}): asked again {}{}: {}",
        f.id,
        f.rule,
        f.project,
        crate::readers::quote(&r.question),
        if r.attempt > 1 { " (2nd time)" } else { "" },
        crate::impact::text::asked_what(r)
    )
}

/// The questions asked again, in the lake: `agent_reasks/project=<id>/part-00000.parquet`.
pub const AGENT_REASKS: &str = docpipe_catalog::tables::AGENT_REASKS.name;

/// One ask as `agent_reasks` has it: the ask, and its firing's rule and pull request.
#[derive(Debug, Clone)]
pub struct ReaskRow {
    /// The firing's project (the partition).
    pub project: String,
    /// Its rule.
    pub rule: String,
    /// Its job's pull request.
    pub pr_link: Option<String>,
    /// The ask.
    pub ask: Reask,
    /// The pages cited, as a JSON array (none before the ask).
    sources: Option<String>,
}

/// The rows of `agent_reasks`: every ask of every firing in the ledger.
pub fn reask_rows(ledger: &docpipe_state::ledger::Ledger) -> Result<Vec<ReaskRow>, StoreError> {
    let firings = ledger.all()?;
    Ok(ledger
        .reasks()?
        .into_iter()
        .filter_map(|ask| {
            let f = firings.iter().find(|f| f.id == ask.firing_id)?;
            Some(ReaskRow {
                project: f.project.clone(),
                rule: f.rule.clone(),
                pr_link: f.pr_link.clone(),
                sources: ask
                    .asked_at
                    .and_then(|_| serde_json::to_string(&ask.sources).ok()),
                ask,
            })
        })
        .collect())
}

/// The columns of `agent_reasks` (the project is the partition).
fn agent_reasks_columns(
    c: docpipe_write::derived::Columns<'_, ReaskRow>,
) -> docpipe_write::derived::Columns<'_, ReaskRow> {
    c.int("firing_id", false, |r| Some(r.ask.firing_id))
        .text("rule", false, |r| Some(&r.rule))
        .text("pr_link", true, |r| r.pr_link.as_deref())
        .text("question", false, |r| Some(&r.ask.question))
        .int("attempt", false, |r| Some(r.ask.attempt))
        .time("due_at", false, |r| Some(r.ask.due_at))
        .time("asked_at", true, |r| r.ask.asked_at)
        .text("resolution", true, |r| r.ask.resolution.map(|x| x.as_str()))
        .text("sources", true, |r| r.sources.as_deref())
        .flag("cites_named_page", |r| r.ask.cites_named)
        .text("error", true, |r| r.ask.error.as_deref())
}

/// Schema of `agent_reasks` (the project is the partition).
pub fn agent_reasks_schema() -> arrow_schema::SchemaRef {
    docpipe_write::derived::schema(agent_reasks_columns)
}

impl Engine {
    /// Rewrites `agent_reasks/project=<p>/part-00000.parquet` from the ledger (processes take
    /// turns through a lock file, as for the outcome log); returns the files.
    pub fn write_reasks(&self) -> Result<Vec<std::path::PathBuf>, LogError> {
        let _turn = self.turn(AGENT_REASKS)?;
        let rows = reask_rows(&self.ledger)?;
        Ok(docpipe_write::derived::write(
            &self.out,
            AGENT_REASKS,
            &rows,
            |r| &r.project,
            agent_reasks_columns,
        )?)
    }
}
