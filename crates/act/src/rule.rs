//! A rule as its file says it: its fields, their defaults and bounds, and the checks a file
//! passes before its rule is loaded.

use super::impact;
use super::query;
use super::template::*;
use docpipe_catalog::schedule::parse_schedule;
use docpipe_state::ledger::{self, RuleKey};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// How long a rule stays quiet after it fired, unless it says otherwise.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(24 * 3600);
/// How long a fired rule polls its job, unless it says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The largest prompt docpipe sends: a query that matches too much must say `LIMIT`.
pub const MAX_PROMPT_BYTES: usize = 100_000;
/// The longest `cooldown` or `timeout` a rule may set.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);
/// How long a rule with a `key` leaves a gap it sent out of its next prompts, unless it says.
pub const DEFAULT_KEY_COOLDOWN: Duration = Duration::from_secs(28 * 24 * 3600);
/// The most rows a rule may ask for before it fires.
pub const MAX_MIN_ROWS: i64 = 1_000_000;
/// The most rows a rule's query may make by joining (its bound, see [`query::join_bound`]):
/// beyond it the query fails its rule instead of taking the process's memory.
pub const MAX_JOIN_ROWS: u64 = 5_000_000;
/// The rows of zeros a template is checked with when its rule does not fire.
pub const SAMPLE_ROWS: usize = 10;

/// How many questions a firing asks again of the assistant, unless `[impact] reask_max` says.
pub const DEFAULT_REASK_MAX: usize = 5;
/// The most `reask_max` may be.
pub const MAX_REASK_MAX: i64 = 50;
/// How long after a first ask that found nothing a question is asked once more, unless
/// `[impact] reask_again` says (the pull request's pages may deploy later).
pub const DEFAULT_REASK_AGAIN: Duration = Duration::from_secs(2 * 24 * 3600);

/// The firing's questions asked again of the project's assistant once its job ended with a
/// pull request: at most `max` of its keys, each a second time `again` after a first ask that
/// found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reask {
    /// Questions per firing.
    pub max: usize,
    /// When to ask once more.
    pub again: Duration,
}

/// What a firing does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send a follow-up to this job.
    FollowUp(String),
    /// Create a new job.
    Create,
    /// Start a run of this automation (no prompt: the automation has its own instructions).
    Trigger(String),
}

/// What a trigger's firing records in the ledger in place of a prompt: its rows, as docpipe
/// writes them (nothing of them is sent; the same rows are not triggered for twice).
pub const TRIGGER_RECORD: &str = "Rows that started the automation (nothing of them was sent):
{% for row in rows %}{{ loop.index }}. {{ row }}
{% endfor %}";

/// Whether an automation id can be sent as one segment of the trigger's path.
pub fn automation_id_ok(id: &str) -> bool {
    (1..=100).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Rule {
    /// What the ledger needs of the rule.
    pub fn key(&self) -> RuleKey<'_> {
        RuleKey {
            name: &self.name,
            project: &self.project,
            cooldown: self.cooldown,
            kind: self.action.kind(),
            keyed: self.key.is_some(),
        }
    }
}

impl Action {
    /// Its kind, as the ledger stores it.
    pub fn kind(&self) -> ledger::Kind {
        match self {
            Action::FollowUp(_) => ledger::Kind::FollowUp,
            Action::Create => ledger::Kind::Create,
            Action::Trigger(_) => ledger::Kind::Trigger,
        }
    }

    /// The automation a trigger starts.
    pub fn automation(&self) -> Option<&str> {
        match self {
            Action::Trigger(a) => Some(a),
            _ => None,
        }
    }
}

/// A validated rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Unique name.
    pub name: String,
    /// The file it came from.
    pub file: String,
    /// What it is for (free text).
    pub description: Option<String>,
    /// Project: the tables are filtered to it, and the job belongs to it.
    pub project: String,
    /// The job to message, or create one.
    pub action: Action,
    /// SQL over `daily`, `weekly` and `pages`.
    pub when: String,
    /// Rows the query must return for the rule to fire.
    pub min_rows: usize,
    /// The prompt template (minijinja).
    pub prompt: String,
    /// Quiet time after a firing.
    pub cooldown: Duration,
    /// Poll the job until it ends.
    pub wait: bool,
    /// How long to poll.
    pub timeout: Duration,
    /// Cron schedule for the daemon; without one, the rule runs after each export.
    pub schedule: Option<String>,
    /// The column of the query's rows that names each gap (a search term, a question): a
    /// row whose key a firing of this rule sent within `key_cooldown` is left out.
    pub key: Option<String>,
    /// How long a sent key is left out.
    pub key_cooldown: Duration,
    /// How its effect is measured (none: by nothing).
    pub impact: Option<impact::Impact>,
    /// Whether its questions are asked again of the assistant after a pull request.
    pub reask: Option<Reask>,
    /// Whether it sends: without `enabled = true` it is previewed (what it would send is
    /// recorded, nothing is sent).
    pub enabled: bool,
    /// Whether the file says `enabled` at all, or in a comment (a file written for an earlier
    /// docpipe does not).
    pub enabled_given: bool,
    /// When a firing waits for a person's review.
    pub review: Review,
    /// What a row whose reader's value is flagged does.
    pub on_flagged: OnFlagged,
    /// The project's own domains: a reader's value naming one is not flagged as a link (from
    /// the config's `[[projects]] domains`).
    pub domains: Vec<String>,
    /// The places where the template renders a value without the readers' escape (the
    /// `unescaped` filter): `line N: <the line>`.
    pub unescaped: Vec<String>,
}

/// When a firing waits for a person's review (`review` in a rule file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// A firing whose prompt renders any value derived from readers' words waits (the default):
    /// readers are anonymous, and a person sees their words before an agent acts on them.
    Readers,
    /// Only a firing with a flagged reader's value waits: the flags are a heuristic, so a
    /// reader's instruction they miss reaches the agent (`rules check` and `status` warn).
    Flagged,
    /// Every firing waits.
    Always,
    /// Nothing waits, flagged or not (`rules check` warns).
    Never,
}

/// What a flagged row does (`flagged` in a rule file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFlagged {
    /// The firing waits for review with every row (the default).
    Hold,
    /// The flagged rows are left out; the rule fires with the rest if `min_rows` still holds.
    Drop,
}

impl Review {
    /// The word of the rule file.
    pub fn as_str(self) -> &'static str {
        match self {
            Review::Readers => "readers",
            Review::Flagged => "flagged",
            Review::Always => "always",
            Review::Never => "never",
        }
    }
}

/// A problem with one rule file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct RuleError {
    /// The file.
    pub file: String,
    /// What is wrong, on one line.
    pub message: String,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    name: String,
    #[serde(default)]
    description: Option<String>,
    project: String,
    #[serde(default)]
    job: Option<String>,
    #[serde(default)]
    create: bool,
    #[serde(default)]
    trigger: Option<String>,
    when: String,
    #[serde(default = "one")]
    min_rows: i64,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    cooldown: Option<String>,
    #[serde(default = "yes")]
    wait: bool,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    schedule: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    key_cooldown: Option<String>,
    #[serde(default)]
    impact: Option<impact::RawImpact>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    review: Option<String>,
    #[serde(default)]
    flagged: Option<String>,
}

pub(crate) const fn one() -> i64 {
    1
}
pub(crate) const fn yes() -> bool {
    true
}

/// The first line of a message, with runs of white space made single spaces.
pub fn one_line(text: &str) -> String {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    first.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A duration such as `24h`, `90m`, `7d` or `1h 30m`.
pub(crate) fn duration(
    field: &str,
    text: Option<&str>,
    default: Duration,
) -> Result<Duration, String> {
    match text {
        None => Ok(default),
        Some(t) => {
            let d = humantime::parse_duration(t.trim()).map_err(|e| {
                format!("{field} {t:?} is not a duration like \"24h\" or \"30m\" ({e})")
            })?;
            if d > MAX_DURATION {
                return Err(format!("{field} {t:?} is longer than 366 days"));
            }
            Ok(d)
        }
    }
}

impl Rule {
    /// Parses and checks one rule file (everything that needs no data): `projects` are the
    /// configured ones.
    #[expect(clippy::too_many_lines)]
    pub fn parse(text: &str, file: &str, projects: &[String]) -> Result<Rule, RuleError> {
        let fail = |message: String| RuleError {
            file: file.to_string(),
            message: one_line(&message),
        };
        let raw: RawRule = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let hint = docpipe_catalog::text::did_you_mean(e.message());
            fail(match line {
                Some(l) => format!("line {l}: {}{hint}", e.message()),
                None => format!("{}{hint}", e.message()),
            })
        })?;
        let name = raw.name.trim().to_string();
        if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
            return Err(fail(format!(
                "name {:?} must be 1 to 100 characters without control characters",
                raw.name
            )));
        }
        if !projects.contains(&raw.project) {
            return Err(fail(format!(
                "project {} is not configured (configured: {})",
                raw.project,
                projects.join(", ")
            )));
        }
        let action = action(raw.job, raw.create, raw.trigger).map_err(fail)?;
        if raw.when.trim().is_empty() {
            return Err(fail("when: the query is empty".into()));
        }
        query::check(&raw.when).map_err(|e| fail(format!("when: {e}")))?;
        if !(1..=MAX_MIN_ROWS).contains(&raw.min_rows) {
            return Err(fail(format!(
                "min_rows {} must be between 1 and {MAX_MIN_ROWS}",
                raw.min_rows
            )));
        }
        let prompt = prompt_of(&action, raw.prompt, &raw.review, &raw.flagged).map_err(fail)?;
        environment(Arc::default())
            .template_from_str(&prompt)
            .map_err(|e| fail(format!("prompt: {e}")))?;
        let review = match raw.review.as_deref() {
            None | Some("readers") => Review::Readers,
            Some("flagged") => Review::Flagged,
            Some("always") => Review::Always,
            Some("never") => Review::Never,
            Some(other) => {
                return Err(fail(format!(
                    "review {other:?} must be \"readers\", \"flagged\", \"always\" or \"never\""
                )));
            }
        };
        let on_flagged = match raw.flagged.as_deref() {
            None | Some("hold") => OnFlagged::Hold,
            Some("drop") => OnFlagged::Drop,
            Some(other) => {
                return Err(fail(format!(
                    "flagged {other:?} must be \"hold\" or \"drop\""
                )));
            }
        };
        let cooldown =
            duration("cooldown", raw.cooldown.as_deref(), DEFAULT_COOLDOWN).map_err(fail)?;
        let timeout = duration("timeout", raw.timeout.as_deref(), DEFAULT_TIMEOUT).map_err(fail)?;
        if timeout.is_zero() {
            return Err(fail("timeout must be more than 0s".into()));
        }
        if let Some(s) = &raw.schedule {
            parse_schedule(s).map_err(fail)?;
        }
        if raw.key.as_deref().is_some_and(|k| k.trim().is_empty()) {
            return Err(fail("key must name a column of the query".into()));
        }
        if raw.key.is_none() && raw.key_cooldown.is_some() {
            return Err(fail(
                "key_cooldown needs a key (the column that names each gap)".into(),
            ));
        }
        let key_cooldown = duration(
            "key_cooldown",
            raw.key_cooldown.as_deref(),
            DEFAULT_KEY_COOLDOWN,
        )
        .map_err(fail)?;
        let reask =
            reask_of(raw.impact.as_ref(), &raw.when, raw.key.is_some(), raw.wait).map_err(fail)?;
        let impact = match raw.impact {
            Some(i) => Some(
                i.check(&raw.when, raw.key.as_deref(), raw.wait)
                    .map_err(fail)?,
            ),
            None => None,
        };
        let unescaped = unescaped_places(&prompt);
        Ok(Rule {
            name,
            file: file.to_string(),
            description: raw.description,
            project: raw.project,
            action,
            when: raw.when,
            min_rows: raw.min_rows as usize,
            prompt,
            cooldown,
            wait: raw.wait,
            timeout,
            schedule: raw.schedule,
            key: raw.key,
            key_cooldown,
            impact,
            reask,
            enabled: raw.enabled.unwrap_or(false),
            // A file that mentions `enabled` in a comment (as `init` writes it) knows of it.
            enabled_given: raw.enabled.is_some()
                || text.lines().any(|l| {
                    l.trim_start()
                        .strip_prefix('#')
                        .is_some_and(|c| c.trim_start().starts_with("enabled ="))
                }),
            review,
            on_flagged,
            domains: Vec::new(),
            unescaped,
        })
    }

    /// What `rules check`, `validate`, `status` and the page warn about the rule's review.
    pub fn review_warning(&self) -> Option<&'static str> {
        match self.review {
            Review::Flagged => Some(
                "review = \"flagged\" sends readers' words without a person unless a flag fires; flags are a heuristic",
            ),
            Review::Never => {
                Some("review = \"never\" sends readers' words without a person, flagged or not")
            }
            Review::Readers | Review::Always => None,
        }
    }

    /// `follow-up to job X` or `a new job`.
    pub fn target(&self) -> String {
        match &self.action {
            Action::FollowUp(j) => format!("follow-up to job {j}"),
            Action::Create => "a new job".to_string(),
            Action::Trigger(a) => format!("a run of automation {a}"),
        }
    }
}

/// Whether and how a rule asks its firings' questions again: `[impact] reask`, by default on
/// for a rule over `unanswered_questions` that has keys (its `key`, or `[impact]`'s) and waits
/// for its job.
fn reask_of(
    impact: Option<&impact::RawImpact>,
    when: &str,
    keyed: bool,
    waits: bool,
) -> Result<Option<Reask>, String> {
    let given = impact.and_then(|i| i.reask);
    let questions = query::tables(when).is_ok_and(|t| {
        t.iter()
            .any(|t| t == docpipe_catalog::tables::name::UNANSWERED_QUESTIONS)
    });
    let on = given.unwrap_or(questions && (keyed || impact.is_some()) && waits);
    let (max, again) = impact.map_or((None, None), |i| (i.reask_max, i.reask_again.as_deref()));
    if !on {
        if max.is_some() || again.is_some() {
            return Err("impact.reask_max and impact.reask_again need reask = true".into());
        }
        return Ok(None);
    }
    if !waits {
        return Err("impact.reask needs wait = true: the questions are asked again once the job ends with a pull request".into());
    }
    if !keyed && impact.is_none() {
        return Err(
            "impact.reask needs keys: the rule's key or [impact] names the questions".into(),
        );
    }
    let max = max.unwrap_or(DEFAULT_REASK_MAX as i64);
    if !(1..=MAX_REASK_MAX).contains(&max) {
        return Err(format!(
            "impact.reask_max {max} must be between 1 and {MAX_REASK_MAX}"
        ));
    }
    let again = duration("impact.reask_again", again, DEFAULT_REASK_AGAIN)?;
    if again.is_zero() {
        return Err("impact.reask_again must be more than 0s".into());
    }
    Ok(Some(Reask {
        max: max as usize,
        again,
    }))
}

/// What the rule's file says it does: a follow-up to `job`, a new job, or a run of `trigger`.
fn action(job: Option<String>, create: bool, trigger: Option<String>) -> Result<Action, String> {
    match (job, create, trigger) {
        (None, false, None) => Err(
            "say which job to message (job = \"<id>\"), create = true, or which automation to start (trigger = \"<id>\")"
                .into(),
        ),
        (Some(j), false, None) if j.trim().is_empty() => Err("job must not be empty".into()),
        (Some(j), false, None) => Ok(Action::FollowUp(j)),
        (None, true, None) => Ok(Action::Create),
        (None, false, Some(a)) if !automation_id_ok(&a) => Err(format!(
            "trigger {a:?} is not an automation id (1 to 100 letters, digits, - or _)"
        )),
        (None, false, Some(a)) => Ok(Action::Trigger(a)),
        _ => Err("give one of job, create = true or trigger, not several".into()),
    }
}

/// The rule's template: its `prompt`, or for a trigger (which sends none, and so waits for no
/// review) docpipe's record of its rows.
fn prompt_of(
    action: &Action,
    prompt: Option<String>,
    review: &Option<String>,
    flagged: &Option<String>,
) -> Result<String, String> {
    if let Action::Trigger(_) = action {
        if prompt.is_some() {
            return Err("a trigger sends no prompt (the automation has its own instructions): remove prompt".into());
        }
        if review.is_some() || flagged.is_some() {
            return Err("a trigger sends no readers' words, so nothing of it waits for review: remove review and flagged".into());
        }
        return Ok(TRIGGER_RECORD.to_string());
    }
    match prompt {
        None => Err("prompt is missing: what the job is told (prompt = \"...\")".into()),
        Some(p) if p.trim().is_empty() => Err("prompt is empty".into()),
        Some(p) => Ok(p),
    }
}
