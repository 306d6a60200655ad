//! Agent-job follow-ups from rule files: a rule is a polars SQL query over the trend tables, a
//! prompt template rendered with the rows it returns, a cooldown, and the job to message (or
//! `create = true`). `ledger` records every firing before it is sent; `engine` sends, resolves
//! unknown outcomes, polls and writes the outcome log.

pub mod engine;
pub mod impact;
pub mod query;
pub mod readers;

use crate::schedule::parse_schedule;
use crate::store::ledger::{self, Ledger, RuleKey};
use crate::trends::Tables;
use minijinja::{Environment, UndefinedBehavior, Value};
use polars::prelude::*;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
/// The template work a prompt may take to render (minijinja's fuel: about one unit per
/// instruction), so that a loop of loops ends with an error instead of running for minutes.
pub const TEMPLATE_FUEL: u64 = 5_000_000;

/// What a firing does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send a follow-up to this job.
    FollowUp(String),
    /// Create a new job.
    Create,
}

impl Rule {
    /// What the ledger needs of the rule.
    pub fn key(&self) -> RuleKey<'_> {
        RuleKey {
            name: &self.name,
            project: &self.project,
            cooldown: self.cooldown,
            kind: self.action.kind(),
        }
    }
}

impl Action {
    /// Its kind, as the ledger stores it.
    pub fn kind(&self) -> ledger::Kind {
        match self {
            Action::FollowUp(_) => ledger::Kind::FollowUp,
            Action::Create => ledger::Kind::Create,
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
    /// Whether it sends: without `enabled = true` it is previewed (what it would send is
    /// recorded, nothing is sent).
    pub enabled: bool,
    /// Whether the file says `enabled` at all (a file written for an earlier docpipe does not).
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
    /// A firing with a flagged reader's value waits (the default).
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
struct RawRule {
    name: String,
    #[serde(default)]
    description: Option<String>,
    project: String,
    #[serde(default)]
    job: Option<String>,
    #[serde(default)]
    create: bool,
    when: String,
    #[serde(default = "one")]
    min_rows: i64,
    prompt: String,
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

const fn one() -> i64 {
    1
}
const fn yes() -> bool {
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
fn duration(field: &str, text: Option<&str>, default: Duration) -> Result<Duration, String> {
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

/// The template environment: strict about undefined values, with a `pct` filter, and the
/// readers' escape applied by the renderer itself: every string that is not docpipe's own (a
/// reader's value, or text a filter made of one) is written by [`readers::quote`]. `readers`
/// is set when a reader's value was rendered; `unescaped` renders one as it is (a rule that
/// needs it says so per value, and `rules check` names each place).
pub fn environment(readers: Arc<AtomicBool>) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.add_filter("pct", pct);
    // The template's own way around the escape would be silent: only `unescaped` is.
    env.remove_filter("safe");
    let seen = readers.clone();
    env.add_filter("unescaped", move |value: Value| {
        seen.store(true, Ordering::Relaxed);
        match value.as_str() {
            Some(s) => Value::from_safe_string(s.to_string()),
            None => value,
        }
    });
    env.set_formatter(move |out, state, value| match value.as_str() {
        Some(s) if !value.is_safe() => {
            readers.store(true, Ordering::Relaxed);
            out.write_str(&readers::quote(s))
                .map_err(minijinja::Error::from)
        }
        _ => minijinja::escape_formatter(out, state, value),
    });
    env
}

/// `{{ share | pct }}` renders 0.4523 as `45.2%` (`pct(0)` for no decimals); none gives `n/a`.
fn pct(value: Value, digits: Option<u32>) -> Result<Value, minijinja::Error> {
    if value.is_none() || value.is_undefined() {
        return Ok(Value::from_safe_string("n/a".to_string()));
    }
    let x = f64::try_from(value)?;
    Ok(Value::from_safe_string(format!(
        "{:.*}%",
        digits.unwrap_or(1) as usize,
        x * 100.0
    )))
}

/// The places where a template uses the `unescaped` filter: `line N: <the line>`.
fn unescaped_places(template: &str) -> Vec<String> {
    template
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            l.split('|')
                .skip(1)
                .any(|f| f.trim_start().starts_with("unescaped"))
        })
        .map(|(i, l)| format!("line {}: {}", i + 1, l.trim()))
        .collect()
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
            let hint = crate::text::did_you_mean(e.message());
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
        let action = match (raw.job, raw.create) {
            (Some(_), true) => {
                return Err(fail("give either job or create = true, not both".into()));
            }
            (None, false) => {
                return Err(fail(
                    "say which job to message (job = \"<id>\") or create = true".into(),
                ));
            }
            (Some(j), false) if j.trim().is_empty() => {
                return Err(fail("job must not be empty".into()));
            }
            (Some(j), false) => Action::FollowUp(j),
            (None, true) => Action::Create,
        };
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
        if raw.prompt.trim().is_empty() {
            return Err(fail("prompt is empty".into()));
        }
        environment(Arc::default())
            .template_from_str(&raw.prompt)
            .map_err(|e| fail(format!("prompt: {e}")))?;
        let review = match raw.review.as_deref() {
            None | Some("flagged") => Review::Flagged,
            Some("always") => Review::Always,
            Some("never") => Review::Never,
            Some(other) => {
                return Err(fail(format!(
                    "review {other:?} must be \"flagged\", \"always\" or \"never\""
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
        let impact = match raw.impact {
            Some(i) => Some(
                i.check(&raw.when, raw.key.as_deref(), raw.wait)
                    .map_err(fail)?,
            ),
            None => None,
        };
        let unescaped = unescaped_places(&raw.prompt);
        Ok(Rule {
            name,
            file: file.to_string(),
            description: raw.description,
            project: raw.project,
            action,
            when: raw.when,
            min_rows: raw.min_rows as usize,
            prompt: raw.prompt,
            cooldown,
            wait: raw.wait,
            timeout,
            schedule: raw.schedule,
            key: raw.key,
            key_cooldown,
            impact,
            enabled: raw.enabled.unwrap_or(false),
            enabled_given: raw.enabled.is_some(),
            review,
            on_flagged,
            domains: Vec::new(),
            unescaped,
        })
    }

    /// `follow-up to job X` or `a new job`.
    pub fn target(&self) -> String {
        match &self.action {
            Action::FollowUp(j) => format!("follow-up to job {j}"),
            Action::Create => "a new job".to_string(),
        }
    }
}

/// Rules from named texts (file name, content), each checked; names must be unique. Returns the
/// valid rules and a problem per invalid file.
pub fn parse_all(files: &[(String, String)], projects: &[String]) -> (Vec<Rule>, Vec<RuleError>) {
    let mut rules = Vec::new();
    let mut problems = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for (file, text) in files {
        match Rule::parse(text, file, projects) {
            Ok(rule) => {
                if let Some(first) = names.get(&rule.name) {
                    problems.push(RuleError {
                        file: file.clone(),
                        message: format!("name {:?} is already used by {first}", rule.name),
                    });
                } else {
                    names.insert(rule.name.clone(), file.clone());
                    rules.push(rule);
                }
            }
            Err(e) => problems.push(e),
        }
    }
    (rules, problems)
}

/// Loads and checks every `*.toml` file of a folder (other files are left alone), in name
/// order: the valid rules, and a problem per file that is not one.
pub fn load_dir(dir: &Path, projects: &[String]) -> Result<(Vec<Rule>, Vec<RuleError>), RuleError> {
    let entries = std::fs::read_dir(dir).map_err(|e| RuleError {
        file: dir.display().to_string(),
        message: format!("cannot read the rules folder: {e}"),
    })?;
    let mut paths: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for p in paths {
        let file = p.display().to_string();
        match std::fs::read(&p).map(String::from_utf8) {
            Ok(Ok(text)) => files.push((file, text)),
            Ok(Err(_)) => problems.push(RuleError {
                file,
                message: "not UTF-8 text".into(),
            }),
            Err(e) => problems.push(RuleError {
                file,
                message: format!("cannot read: {e}"),
            }),
        }
    }
    let (rules, more) = parse_all(&files, projects);
    problems.extend(more);
    Ok((rules, problems))
}

/// What the rules remember of their firings: the ledger, and the time now (the keys sent
/// within each rule's `key_cooldown` before it are left out).
#[derive(Debug, Clone, Copy)]
pub struct Memory<'a> {
    /// The ledger.
    pub ledger: &'a Ledger,
    /// Now.
    pub now: chrono::DateTime<chrono::Utc>,
}

/// What a rule's query gave, and the prompt it renders.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The rows the query returned (less those whose key was sent lately).
    pub rows: DataFrame,
    /// The keys of `rows` (a rule with a `key`).
    pub keys: Vec<String>,
    /// Rows the query returns with every key (before the key filter).
    pub matched: usize,
    /// Of those, the rows left out as their key was sent lately (the query then ran without
    /// them, so that others could take their place).
    pub left_out: usize,
    /// Whether there are at least `min_rows` of them.
    pub fires: bool,
    /// The rendered prompt (when it fires).
    pub prompt: Option<String>,
    /// The readers' values of `rows` that read as instructions to an agent.
    pub flags: Vec<RowFlag>,
    /// The flagged rows left out (a rule with `flagged = "drop"`).
    pub dropped: Vec<RowFlag>,
}

/// A reader's value of a row that reads as an instruction to an agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowFlag {
    /// The row, from 1, in the query's order (of the rows before any was dropped).
    pub row: usize,
    /// The column.
    pub column: String,
    /// The value as a prompt renders it (escaped, cut).
    pub value: String,
    /// Why it is flagged.
    pub patterns: Vec<readers::Pattern>,
}

/// The flags a ledger's trail keeps as JSON (none: an empty list).
pub fn parse_flags(json: Option<&str>) -> Vec<RowFlag> {
    json.and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_default()
}

impl RowFlag {
    /// `row 2 search_query "..." : addresses_agent, link`.
    pub fn line(&self) -> String {
        let patterns: Vec<&str> = self.patterns.iter().map(|p| p.as_str()).collect();
        format!(
            "row {} {} {}: {}",
            self.row,
            self.column,
            self.value,
            patterns.join(", ")
        )
    }
}

impl Evaluation {
    /// Why a firing of `rule` waits for a person's review, if it does.
    pub fn hold(&self, rule: &Rule) -> Option<String> {
        match rule.review {
            Review::Never => None,
            Review::Always => Some("the rule's review is \"always\"".to_string()),
            Review::Flagged if self.flags.is_empty() => None,
            Review::Flagged => Some(format!(
                "{} readers' values read as instructions to an agent",
                self.flags.len()
            )),
        }
    }
}

/// The readers' values of a frame's rows that read as instructions (every string column but
/// docpipe's and the service's own).
fn flag_rows(df: &DataFrame, own: &[String]) -> Vec<RowFlag> {
    let mut out = Vec::new();
    let columns: Vec<&Column> = df
        .columns()
        .iter()
        .filter(|c| c.dtype() == &DataType::String && !readers::is_service_column(c.name()))
        .collect();
    for i in 0..df.height() {
        for c in &columns {
            let Ok(v) = c.get(i) else { continue };
            let text = match &v {
                AnyValue::String(s) => *s,
                AnyValue::StringOwned(s) => s.as_str(),
                _ => continue,
            };
            // A column that joins several readers' texts is judged text by text (their sum
            // may be long; no one of them is).
            let patterns = if readers::JOINED_COLUMNS.contains(&c.name().as_str()) {
                let mut all: Vec<readers::Pattern> = text
                    .split(crate::trends::gaps::SEPARATOR)
                    .flat_map(|t| readers::flags(t, own))
                    .collect();
                all.sort();
                all.dedup();
                all
            } else {
                readers::flags(text, own)
            };
            if !patterns.is_empty() {
                out.push(RowFlag {
                    row: i + 1,
                    column: c.name().to_string(),
                    value: readers::quote(text),
                    patterns,
                });
            }
        }
    }
    out
}

/// Evaluates rules against the trend tables (all of them, filtered to each rule's project),
/// leaving out the rows whose key was sent lately when `memory` is given: runs polars on a
/// thread of its own, so it is callable from any runtime.
pub fn evaluate(
    rules: &[Rule],
    tables: &Tables,
    memory: Option<Memory<'_>>,
) -> Vec<Result<Evaluation, RuleError>> {
    std::thread::scope(|s| {
        s.spawn(|| {
            rules
                .iter()
                .map(|r| evaluate_here(r, tables, memory))
                .collect()
        })
        .join()
    })
    .unwrap_or_else(|_| {
        rules
            .iter()
            .map(|r| {
                Err(RuleError {
                    file: r.file.clone(),
                    message: "the query panicked in polars".into(),
                })
            })
            .collect()
    })
}

#[expect(clippy::too_many_lines)]
fn evaluate_here(
    rule: &Rule,
    tables: &Tables,
    memory: Option<Memory<'_>>,
) -> Result<Evaluation, RuleError> {
    let fail = |message: String| RuleError {
        file: rule.file.clone(),
        message: one_line(&message),
    };
    // The keys sent within the key cooldown: rows holding one are taken out of the tables
    // before the query runs, so that its ORDER BY and LIMIT make room for the next rows.
    let sent = match (&rule.key, memory) {
        (Some(_), Some(m)) => {
            let since = chrono::Duration::from_std(rule.key_cooldown)
                .ok()
                .and_then(|d| m.now.checked_sub_signed(d))
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
            m.ledger
                .sent_keys(&rule.name, &rule.project, since)
                .map_err(|e| fail(e.to_string()))?
        }
        _ => Default::default(),
    };
    let run = |without: Option<(&str, &std::collections::HashSet<String>)>| {
        let mut ctx = polars::sql::SQLContext::new();
        for (name, df) in tables.frames() {
            let df = match without {
                Some((key, sent)) if df.column(key).is_ok() => without_keys(df, key, sent)?.0,
                _ => df.clone(),
            };
            ctx.register(
                name,
                df.lazy()
                    .filter(col("project").eq(lit(rule.project.as_str()))),
            );
        }
        ctx.execute(&rule.when).and_then(LazyFrame::collect)
    };
    let mut sizes = ProjectSizes {
        tables,
        project: &rule.project,
        cache: HashMap::new(),
    };
    let bound =
        query::join_bound(&rule.when, &mut sizes).map_err(|e| fail(format!("when: {e}")))?;
    if bound > MAX_JOIN_ROWS {
        return Err(fail(format!(
            "when: the query's joins may produce up to {bound} rows, more than {MAX_JOIN_ROWS}; join on a key of the rows (a path, a search term), not on the project alone"
        )));
    }
    let mut rows = run(None).map_err(|e| fail(format!("when: {e}")))?;
    let mut keys = Vec::new();
    let mut left_out = 0;
    let matched = rows.height();
    if let Some(key) = &rule.key {
        let values = key_values(&rows, key).map_err(|_| {
            let names: Vec<String> = rows
                .get_column_names()
                .iter()
                .map(ToString::to_string)
                .collect();
            fail(format!(
                "key: the query returns no column {key:?} (it returns {})",
                names.join(", ")
            ))
        })?;
        left_out = values.iter().filter(|v| sent.contains(*v)).count();
        if !sent.is_empty() {
            rows = run(Some((key, &sent))).map_err(|e| fail(format!("when: {e}")))?;
        }
        // A key the tables do not hold (computed by the query) is left out afterwards.
        (rows, keys) = without_keys(&rows, key, &sent).map_err(|e| fail(format!("key: {e}")))?;
    } else if let Some(i) = &rule.impact {
        // The keys a firing's impact is measured by: the rows' values of the impact's key.
        keys = key_values(&rows, &i.key).map_err(|_| {
            fail(format!(
                "impact.key: the query returns no column {:?}, the key the impact is measured by",
                i.key
            ))
        })?;
    }
    impact::check_on(rule, tables)?;
    let mut flags = flag_rows(&rows, &rule.domains);
    let mut dropped = Vec::new();
    if rule.on_flagged == OnFlagged::Drop && rule.review != Review::Never && !flags.is_empty() {
        let out: std::collections::HashSet<usize> = flags.iter().map(|f| f.row - 1).collect();
        let keep: BooleanChunked = (0..rows.height()).map(|i| !out.contains(&i)).collect();
        rows = rows.filter(&keep).map_err(|e| fail(format!("when: {e}")))?;
        if !keys.is_empty() {
            keys = keys
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !out.contains(i))
                .map(|(_, k)| k)
                .collect();
        }
        dropped = std::mem::take(&mut flags);
    }
    let fires = rows.height() >= rule.min_rows;
    let records = if fires {
        records(&rows).map_err(|e| fail(format!("when: {e}")))?
    } else {
        // Nothing to send: render with zero values of the query's columns, so that a template
        // that names a missing column or filter is found now, not on the day the rule fires
        // (a few rows: a loop over a million would only spend the template's fuel).
        vec![sample(&rows); rule.min_rows.min(SAMPLE_ROWS)]
    };
    let prompt = render(rule, &records, rows.height()).map_err(fail)?;
    if fires && prompt.trim().is_empty() {
        return Err(fail("prompt: renders as empty text".into()));
    }
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(fail(format!(
            "prompt: renders as {} bytes, more than {MAX_PROMPT_BYTES}; add a LIMIT to the query",
            prompt.len()
        )));
    }
    Ok(Evaluation {
        rows,
        keys,
        matched,
        left_out,
        fires,
        prompt: fires.then_some(prompt),
        flags,
        dropped,
    })
}

/// The trend tables' sizes for one project, for the join bound.
struct ProjectSizes<'a> {
    tables: &'a Tables,
    project: &'a str,
    cache: HashMap<(String, String), Option<u64>>,
}

impl ProjectSizes<'_> {
    /// One number of a table filtered to the project, `None` when it has no such column.
    fn figure(&mut self, table: &str, column: Option<&str>) -> Option<u64> {
        let key = (table.to_string(), column.unwrap_or("").to_string());
        if let Some(v) = self.cache.get(&key) {
            return *v;
        }
        let df = self
            .tables
            .frames()
            .into_iter()
            .find(|(n, _)| *n == table)
            .map(|(_, df)| df);
        let v = df.and_then(|df| {
            let lf = df
                .clone()
                .lazy()
                .filter(col("project").eq(lit(self.project)));
            let lf = match column {
                None => lf.select([len().alias("n")]),
                Some(c) => {
                    df.column(c).ok()?;
                    lf.group_by([col(c)])
                        .agg([len().alias("n")])
                        .select([col("n").max()])
                }
            };
            let out = lf.collect().ok()?;
            let n = out.column("n").ok()?.get(0).ok()?;
            Some(match n {
                AnyValue::UInt32(x) => u64::from(x),
                AnyValue::UInt64(x) => x,
                AnyValue::Int64(x) => x.max(0) as u64,
                AnyValue::Int32(x) => x.max(0) as u64,
                _ => 0,
            })
        });
        self.cache.insert(key, v);
        v
    }
}

impl query::Sizes for ProjectSizes<'_> {
    fn rows(&mut self, table: &str) -> u64 {
        self.figure(table, None).unwrap_or(0)
    }

    fn most_per_value(&mut self, table: &str, column: &str) -> Option<u64> {
        self.figure(table, Some(column))
    }
}

/// Renders the prompt with `rows`, `row_count`, `columns`, `project` and `rule`; a prompt that
/// renders a reader's value starts with docpipe's [`readers::PREAMBLE`], outside the template.
fn render(rule: &Rule, rows: &[Value], row_count: usize) -> Result<String, String> {
    let columns: Vec<Value> = rows
        .first()
        .and_then(|r| r.try_iter().ok())
        .map(|keys| {
            keys.map(|k| Value::from_safe_string(k.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let safe = |s: &str| Value::from_safe_string(s.to_string());
    let ctx = Value::from(BTreeMap::from([
        ("rows".to_string(), Value::from(rows.to_vec())),
        ("row_count".to_string(), Value::from(row_count)),
        ("columns".to_string(), Value::from(columns)),
        ("project".to_string(), safe(&rule.project)),
        ("rule".to_string(), safe(&rule.name)),
    ]));
    let readers = Arc::new(AtomicBool::new(false));
    let text = environment(readers.clone())
        .render_str(&rule.prompt, ctx)
        .map_err(|e| format!("prompt: {e}"))?;
    Ok(if readers.load(Ordering::Relaxed) {
        format!("{}{text}", readers::PREAMBLE)
    } else {
        text
    })
}

/// A frame without the rows whose `key` is in `sent`, and the keys of the rows kept.
fn without_keys(
    df: &DataFrame,
    key: &str,
    sent: &std::collections::HashSet<String>,
) -> PolarsResult<(DataFrame, Vec<String>)> {
    let mut kept = key_values(df, key)?;
    let keep: BooleanChunked = kept.iter().map(|v| !sent.contains(v)).collect();
    kept.retain(|v| !sent.contains(v));
    Ok((df.filter(&keep)?, kept))
}

/// The values of a frame's column as the ledger keeps keys.
fn key_values(df: &DataFrame, key: &str) -> PolarsResult<Vec<String>> {
    let column = df.column(key)?;
    (0..df.height())
        .map(|i| column.get(i).map(|v| cell(v).to_string()))
        .collect()
}

/// A cell of a column as a template value: a reader's text (any string column but those of
/// [`readers::SERVICE_COLUMNS`]) is a plain string, which the renderer escapes; the others are
/// docpipe's or the service's own words and render as they are.
fn cell_of(column: &str, v: AnyValue) -> Value {
    // Times and other scalars shown as text are docpipe's; lists may hold readers' texts.
    let own = readers::is_service_column(column)
        || !matches!(
            v,
            AnyValue::String(_) | AnyValue::StringOwned(_) | AnyValue::List(_)
        );
    let value = cell(v);
    match value.as_str() {
        Some(s) if own => Value::from_safe_string(s.to_string()),
        _ => value,
    }
}

/// A cell as a template value: numbers stay numbers, dates are `YYYY-MM-DD`, null is none.
fn cell(v: AnyValue) -> Value {
    match v {
        AnyValue::Null => Value::from(()),
        AnyValue::Boolean(b) => Value::from(b),
        AnyValue::Int8(x) => Value::from(x),
        AnyValue::Int16(x) => Value::from(x),
        AnyValue::Int32(x) => Value::from(x),
        AnyValue::Int64(x) => Value::from(x),
        AnyValue::UInt8(x) => Value::from(x),
        AnyValue::UInt16(x) => Value::from(x),
        AnyValue::UInt32(x) => Value::from(x),
        AnyValue::UInt64(x) => Value::from(x),
        AnyValue::Float32(x) => Value::from(f64::from(x)),
        AnyValue::Float64(x) => Value::from(x),
        AnyValue::String(s) => Value::from(s),
        AnyValue::StringOwned(s) => Value::from(s.as_str()),
        AnyValue::Date(days) => {
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
            Value::from_safe_string((epoch + chrono::Duration::days(i64::from(days))).to_string())
        }
        other => Value::from(other.to_string()),
    }
}

/// The rows of a frame as maps from column name to value.
fn records(df: &DataFrame) -> PolarsResult<Vec<Value>> {
    let columns = df.columns();
    let mut out = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let mut row = BTreeMap::new();
        for c in columns {
            row.insert(c.name().to_string(), cell_of(c.name(), c.get(i)?));
        }
        out.push(Value::from(row));
    }
    Ok(out)
}

/// A row of zero values for a frame's columns.
fn sample(df: &DataFrame) -> Value {
    let mut row = BTreeMap::new();
    for c in df.columns() {
        let v = match c.dtype() {
            d if d.is_integer() => Value::from(0),
            d if d.is_float() => Value::from(0.0),
            DataType::Boolean => Value::from(false),
            DataType::Date => Value::from_safe_string("1970-01-01".to_string()),
            _ => Value::from(""),
        };
        row.insert(c.name().to_string(), v);
    }
    Value::from(row)
}

/// Up to `max` rows of a frame as `column=value` lines (floats to 4 decimals), for the terminal.
pub fn preview(df: &DataFrame, max: usize) -> Vec<String> {
    (0..df.height().min(max))
        .map(|i| {
            df.columns()
                .iter()
                .map(|c| {
                    let v = match c.get(i) {
                        Ok(AnyValue::Float64(x)) => format!("{x:.4}"),
                        Ok(AnyValue::Float32(x)) => format!("{x:.4}"),
                        Ok(v) => cell(v).to_string(),
                        Err(_) => "?".into(),
                    };
                    format!("{}={v}", c.name())
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A prompt's hash as lines show it: its first 12 hex digits.
pub fn short_hash(hash: &str) -> &str {
    &hash[..12.min(hash.len())]
}

/// The SHA-256 of a prompt, in hex: how the ledger knows a prompt was sent before.
pub fn prompt_hash(prompt: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(prompt.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> Result<Rule, RuleError> {
        Rule::parse(text, "jobs/r.toml", &["p".to_string()])
    }

    #[test]
    fn a_misspelt_field_gets_the_field_it_likely_meant() {
        let e = rule(&format!("{BASE}enabeld = true\n")).unwrap_err();
        assert!(
            e.message.ends_with(" (did you mean `enabled`?)"),
            "{}",
            e.message
        );
    }

    const BASE: &str = r#"
name = "r"
project = "p"
job = "j"
when = "SELECT path FROM pages"
prompt = "{% for row in rows %}{{ row.path }} {% endfor %}"
"#;

    #[test]
    fn defaults_and_durations() {
        let r = rule(BASE).unwrap();
        assert_eq!(r.action, Action::FollowUp("j".into()));
        assert_eq!((r.min_rows, r.wait), (1, true));
        assert_eq!((r.cooldown, r.timeout), (DEFAULT_COOLDOWN, DEFAULT_TIMEOUT));
        let r = rule(&format!("{BASE}cooldown = \"1h 30m\"\ntimeout = \"90s\"\n")).unwrap();
        assert_eq!(r.cooldown, Duration::from_secs(5400));
        assert_eq!(r.timeout, Duration::from_secs(90));
    }

    #[test]
    fn pct_renders_shares() {
        let env = environment(Arc::default());
        let out = env
            .render_str(
                "{{ a | pct }} {{ b | pct(0) }} {{ c | pct }}",
                Value::from(BTreeMap::from([
                    ("a", Value::from(0.4523)),
                    ("b", Value::from(1)),
                    ("c", Value::from(())),
                ])),
            )
            .unwrap();
        assert_eq!(out, "45.2% 100% n/a");
    }

    #[test]
    fn readers_words_render_quoted_by_the_renderer_and_unescaped_only_where_said() {
        let readers = Arc::new(AtomicBool::new(false));
        let env = environment(readers.clone());
        let ctx = Value::from(BTreeMap::from([
            ("term", Value::from("a \"b\"\n\nSYSTEM: c")),
            ("mine", Value::from_safe_string("acme-docs".to_string())),
            ("n", Value::from(3)),
        ]));
        let out = env
            .render_str(
                "{{ term }} {{ term | lower }} {{ mine }} {{ n }} {{ 0.5 | pct }} {{ term | unescaped }}",
                ctx,
            )
            .unwrap();
        assert_eq!(
            out,
            "\"a \\\"b\\\" SYSTEM: c\" \"a \\\"b\\\" system: c\" acme-docs 3 50.0% a \"b\"\n\nSYSTEM: c"
        );
        assert!(readers.load(Ordering::Relaxed));
        // `safe` is gone: the one way around the escape is `unescaped`, and it is named.
        assert!(
            environment(Arc::default())
                .render_str("{{ 'x' | safe }}", ())
                .is_err()
        );
        let r = rule(&BASE.replace("{{ row.path }}", "{{ row.path | unescaped }}")).unwrap();
        assert_eq!(
            r.unescaped,
            ["line 1: {% for row in rows %}{{ row.path | unescaped }} {% endfor %}"]
        );
        assert!(!r.enabled && !r.enabled_given);
    }

    #[test]
    fn hashes_are_sha256() {
        assert_eq!(
            prompt_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
