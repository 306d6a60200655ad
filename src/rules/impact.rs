//! What each agent job changed: a rule's `[impact]` names a metric over one trend table, per
//! key (a search term, a question, a page). When the rule fires, each key's metric over the
//! `days` final days before is recorded in the ledger beside the key; once the job has ended
//! (with a pull request, unless the rule measures the others too) and `wait` has passed, the
//! same keys are measured over the same number of days after, as soon as those days are
//! final. The table is computed over exactly those days (its `_28d` columns hold all of
//! them, its `_7d` columns the last 7). Measurements go to `agent_impact/project=<id>/` as
//! Parquet, rewritten whole from the ledger.

use super::{Rule, RuleError, key_values};
use crate::dataset::parquet::WriteError;
use crate::layout::project_dir;
use crate::store::StoreError;
use crate::store::impact::{Days, Figure, KeyFigures, Plan};
use crate::store::ledger::{Firing, Ledger, Sent};
use crate::trends::{Selection, Tables, TrendsError};
use chrono::{DateTime, NaiveDate, Utc};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The impact table's folder in the output folder.
pub const AGENT_IMPACT: &str = "agent_impact";
/// Final days each side a measurement needs before it says anything.
pub const MIN_DAYS: i64 = 7;
/// Days measured each side, unless the rule says.
pub const DEFAULT_DAYS: i64 = 7;
/// The most days a side may have (the trend tables' longest window).
pub const MAX_DAYS: i64 = 28;
/// How long after the job ended the days after begin, unless the rule says.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(2 * 24 * 3600);
/// Rows behind each figure, each side, unless the rule says.
pub const DEFAULT_MIN_COUNT: i64 = 30;
/// A relative change within this is "stayed", unless the rule says.
pub const DEFAULT_TOLERANCE: f64 = 0.1;

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// A rise is an improvement (a click-through rate, views).
    Higher,
    /// A fall is an improvement (unanswered questions, a thumbs-down rate).
    Lower,
}

/// A rule's `[impact]`, checked; kept in the ledger (as JSON) with each firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Impact {
    /// The trend table the metric reads.
    pub table: String,
    /// The table's column that names each key.
    pub key: String,
    /// SQL expression: the metric of a key's row.
    pub metric: String,
    /// SQL expression: the rows (searches, views, asks, votes) behind the metric.
    pub count: String,
    /// Which way is better.
    pub better: Better,
    /// Days each side.
    pub days: i64,
    /// Seconds after the job ended before the days after begin (the next whole day).
    pub wait_secs: u64,
    /// The metric of a key the table does not hold (none: no figure).
    pub absent: Option<f64>,
    /// Rows behind each figure, each side, to say anything.
    pub min_count: i64,
    /// A relative change within this is "stayed".
    pub tolerance: f64,
    /// Measure a job that failed or ended without a pull request too.
    pub without_pull_request: bool,
}

/// `[impact]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawImpact {
    #[serde(default)]
    table: Option<String>,
    #[serde(default)]
    key: Option<String>,
    metric: String,
    count: String,
    better: String,
    #[serde(default)]
    days: Option<i64>,
    #[serde(default)]
    wait: Option<String>,
    #[serde(default)]
    absent: Option<f64>,
    #[serde(default)]
    min_count: Option<i64>,
    #[serde(default)]
    tolerance: Option<f64>,
    #[serde(default)]
    without_pull_request: bool,
}

/// The dataset whose final days a trend table's days are.
pub fn dataset_of(table: &str) -> &'static str {
    match table {
        "search_terms" | "search_daily" => "searches",
        "assistant_daily" | "assistant_categories" | "unanswered_questions" => "assistant",
        "feedback_pages" => "feedback",
        "visitors_daily" => "visitors",
        "callers_weekly" => "caller_stats",
        _ => "page_views",
    }
}

fn identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

impl RawImpact {
    /// Checks `[impact]` against the rule: `when` (its tables), its key, whether it waits.
    #[expect(clippy::too_many_lines)]
    pub(super) fn check(
        self,
        when: &str,
        rule_key: Option<&str>,
        waits: bool,
    ) -> Result<Impact, String> {
        let read = super::query::tables(when)?;
        let table = match self.table {
            Some(t) => {
                let t = t.trim().to_lowercase();
                if !super::query::TABLES.contains(&t.as_str()) {
                    return Err(format!(
                        "impact.table {t:?} is not a trend table ({})",
                        super::query::TABLES.join(", ")
                    ));
                }
                t
            }
            None => match read.as_slice() {
                [one] => one.clone(),
                [] => return Err("impact.table: the query reads no table; name one".into()),
                many => {
                    return Err(format!(
                        "impact.table: the query reads {}; say which one the metric reads",
                        many.join(" and ")
                    ));
                }
            },
        };
        let key = match (self.key, rule_key) {
            (Some(k), _) => k.trim().to_string(),
            (None, Some(k)) => k.trim().to_string(),
            (None, None) => {
                return Err(
                    "impact.key: name the column each key is measured by (the rule has no key)"
                        .into(),
                );
            }
        };
        if !identifier(&key) {
            return Err(format!(
                "impact.key {key:?} must be a column name (letters, digits, _)"
            ));
        }
        for (field, text) in [("metric", &self.metric), ("count", &self.count)] {
            if text.trim().is_empty() {
                return Err(format!("impact.{field} is empty"));
            }
        }
        let better = match self.better.trim() {
            "higher" => Better::Higher,
            "lower" => Better::Lower,
            other => {
                return Err(format!(
                    "impact.better {other:?} must be \"higher\" or \"lower\""
                ));
            }
        };
        let days = self.days.unwrap_or(DEFAULT_DAYS);
        if !(1..=MAX_DAYS).contains(&days) {
            return Err(format!(
                "impact.days {days} must be between 1 and {MAX_DAYS}"
            ));
        }
        let wait = super::duration("impact.wait", self.wait.as_deref(), DEFAULT_WAIT)?;
        let min_count = self.min_count.unwrap_or(DEFAULT_MIN_COUNT);
        if min_count < 0 {
            return Err(format!("impact.min_count {min_count} must be 0 or more"));
        }
        let tolerance = self.tolerance.unwrap_or(DEFAULT_TOLERANCE);
        if !(0.0..=1.0).contains(&tolerance) {
            return Err(format!(
                "impact.tolerance {tolerance} must be between 0 and 1"
            ));
        }
        if self.absent.is_some_and(|a| !a.is_finite()) {
            return Err("impact.absent must be a finite number".into());
        }
        if !waits {
            return Err(
                "impact needs wait = true: the days after are counted from the job's end".into(),
            );
        }
        let impact = Impact {
            table,
            key,
            metric: self.metric.trim().to_string(),
            count: self.count.trim().to_string(),
            better,
            days,
            wait_secs: wait.as_secs(),
            absent: self.absent,
            min_count,
            tolerance,
            without_pull_request: self.without_pull_request,
        };
        let read = super::query::tables(&impact.sql())
            .map_err(|e| format!("impact.metric or impact.count: {e}"))?;
        if read != [impact.table.clone()] {
            return Err(format!(
                "impact.metric and impact.count read table {} alone, not {}",
                impact.table,
                read.join(", ")
            ));
        }
        Ok(impact)
    }
}

impl Impact {
    /// The dataset whose final days count: the table's.
    pub fn dataset(&self) -> &'static str {
        dataset_of(&self.table)
    }

    /// The query that measures every key of the table.
    fn sql(&self) -> String {
        format!(
            "SELECT \"{}\" AS impact_key, CAST(({}) AS DOUBLE) AS impact_value, \
             CAST(({}) AS BIGINT) AS impact_rows FROM {}",
            self.key, self.metric, self.count, self.table
        )
    }

    /// `ctr_7d per search_query in search_terms, higher is better, 7 days each side, after 2d`.
    pub fn describe(&self) -> String {
        format!(
            "{} per {} in {}, {} is better, {} days each side, from {} after the job ended",
            self.metric,
            self.key,
            self.table,
            match self.better {
                Better::Higher => "higher",
                Better::Lower => "lower",
            },
            self.days,
            match self.wait_secs {
                s if s % 86_400 == 0 => format!("{} days", s / 86_400),
                s if s % 3_600 == 0 => format!("{} hours", s / 3_600),
                s => humantime::format_duration(Duration::from_secs(s)).to_string(),
            }
        )
    }

    /// Each key's figure over `tables` (already restricted to the days measured), for the
    /// project; every key of the table when `keys` is empty. polars runs on a thread of its
    /// own, so that this is callable from any runtime.
    pub fn figures(
        &self,
        tables: &Tables,
        project: &str,
        keys: &[String],
    ) -> Result<Vec<(String, Figure)>, String> {
        std::thread::scope(|s| {
            s.spawn(|| self.figures_here(tables, project, keys))
                .join()
                .unwrap_or_else(|_| Err("the metric's query panicked in polars".into()))
        })
    }

    fn figures_here(
        &self,
        tables: &Tables,
        project: &str,
        keys: &[String],
    ) -> Result<Vec<(String, Figure)>, String> {
        let mut ctx = polars::sql::SQLContext::new();
        for (name, df) in tables.frames() {
            ctx.register(
                name,
                df.clone().lazy().filter(col("project").eq(lit(project))),
            );
        }
        let df = ctx
            .execute(&self.sql())
            .and_then(LazyFrame::collect)
            .map_err(|e| super::one_line(&e.to_string()))?;
        let names = key_values(&df, "impact_key").map_err(|e| e.to_string())?;
        let values = df
            .column("impact_value")
            .and_then(|c| c.f64().cloned())
            .map_err(|e| e.to_string())?;
        let rows = df
            .column("impact_rows")
            .and_then(|c| c.i64().cloned())
            .map_err(|e| e.to_string())?;
        let mut found: HashMap<&str, Figure> = HashMap::new();
        for (i, k) in names.iter().enumerate() {
            found.entry(k.as_str()).or_insert(Figure {
                value: values.get(i).filter(|v| v.is_finite()),
                rows: rows.get(i),
            });
        }
        let wanted: Vec<String> = if keys.is_empty() {
            names.clone()
        } else {
            keys.to_vec()
        };
        Ok(wanted
            .into_iter()
            .map(|k| {
                let f = found.get(k.as_str()).cloned().unwrap_or(Figure {
                    value: self.absent,
                    rows: Some(0),
                });
                (k, f)
            })
            .collect())
    }
}

/// The trend tables of one project over the days `from..=to` alone.
pub fn tables_over(
    out: &Path,
    project: &str,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Option<Tables>, TrendsError> {
    let sel = Selection {
        projects: vec![project.to_string()],
        from: Some(from),
        to: Some(to),
    };
    // polars runs on a thread of its own, so that this is callable from any runtime.
    let computed = std::thread::scope(|s| {
        s.spawn(|| crate::trends::compute(out, &sel))
            .join()
            .unwrap_or_else(|_| {
                Err(TrendsError::Polars(PolarsError::ComputeError(
                    "the trends panicked".into(),
                )))
            })
    });
    match computed {
        Ok(t) => Ok(Some(t)),
        Err(TrendsError::NoData(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn shift(day: NaiveDate, days: i64) -> NaiveDate {
    day.checked_add_signed(chrono::Duration::days(days))
        .unwrap_or(day)
}

/// How the impact counts days: the output folder's time zone, today in it, and the days after
/// which a day no longer changes (the export's lookback).
#[derive(Debug, Clone, Copy)]
pub struct Calendar {
    /// The time zone.
    pub tz: chrono_tz::Tz,
    /// Today.
    pub today: NaiveDate,
    /// Days that may still change (the export's lookback): a span's day older is final.
    pub settle_days: i64,
}

impl Calendar {
    /// The final days of a dataset and project.
    fn final_days(
        &self,
        ledger: &Ledger,
        dataset: &str,
        project: &str,
    ) -> Result<Vec<NaiveDate>, StoreError> {
        let span = crate::dataset::shape_by_name(dataset)
            .is_some_and(|s| matches!(s.windowing, crate::dataset::Windowing::Span { .. }));
        let settled = span.then(|| shift(self.today, -self.settle_days - 1));
        ledger.final_days(dataset, project, settled)
    }
}

/// The days `from..=to` that are in `finals`.
fn final_count(finals: &[NaiveDate], from: NaiveDate, to: NaiveDate) -> i64 {
    finals.iter().filter(|d| **d >= from && **d <= to).count() as i64
}

/// Records a firing's plan and its keys' figures over the final days before it (the last
/// `days` of them up to the last final day). A failure is the caller's to log: the firing
/// stands without a plan, reported as not measurable.
pub fn record_before(
    out: &Path,
    ledger: &Ledger,
    rule: &Rule,
    firing_id: i64,
    keys: &[String],
    days: Calendar,
) -> Result<(), String> {
    let Some(impact) = &rule.impact else {
        return Ok(());
    };
    let today = days.today;
    let finals = days
        .final_days(ledger, impact.dataset(), &rule.project)
        .map_err(|e| e.to_string())?;
    let to = finals.last().copied().unwrap_or_else(|| shift(today, -1));
    let from = shift(to, 1 - impact.days);
    let days = Days {
        from,
        to,
        days: final_count(&finals, from, to),
    };
    let tables = if days.days > 0 {
        tables_over(out, &rule.project, from, to).map_err(|e| e.to_string())?
    } else {
        None
    };
    let figures = match tables {
        Some(t) => impact.figures(&t, &rule.project, keys)?,
        None => keys
            .iter()
            .map(|k| {
                (
                    k.clone(),
                    Figure {
                        value: None,
                        rows: None,
                    },
                )
            })
            .collect(),
    };
    let definition = serde_json::to_string(impact).map_err(|e| e.to_string())?;
    ledger
        .record_before(firing_id, &definition, days, &figures)
        .map_err(|e| e.to_string())
}

/// What a plan waits for, or why it will never be measured, or the days to measure.
#[derive(Debug, Clone, PartialEq)]
enum Due {
    Wait(String),
    Never(String),
    Measure(NaiveDate, NaiveDate),
}

/// Whether a firing's job ended in a way its plan measures, and the days after if so;
/// `polled` says whether its job is still being polled.
fn due(
    f: &Firing,
    plan: &Plan,
    impact: &Impact,
    finals: &[NaiveDate],
    polled: bool,
    tz: chrono_tz::Tz,
) -> Due {
    if plan.before.days == 0 {
        return Due::Never("no final day before the firing to compare with".into());
    }
    if !matches!(f.sent, Sent::Sent | Sent::Unknown) {
        return Due::Never(format!("the follow-up was {}", f.sent.as_str()));
    }
    let status = f.status.as_deref().unwrap_or("");
    if !crate::api::jobs::JobStatus::from_word(status).is_terminal() {
        // Polling ends when the job ends, when the rule's timeout passes, or when the job
        // cannot be read: a job not seen to end after that never will be.
        return if polled {
            Due::Wait("the job is running".into())
        } else {
            Due::Never(
                "docpipe stopped polling the job before it ended (the rule's timeout passed, or the job could not be read)".into(),
            )
        };
    }
    if f.pr_link.is_none() && !impact.without_pull_request {
        let how = if status == "completed" {
            "the job ended without a pull request"
        } else {
            &format!("the job {status}")
        };
        return Due::Never(format!(
            "{how}: not measured (without_pull_request = true measures it)"
        ));
    }
    let end = f.fired_at
        + chrono::Duration::milliseconds((f.seconds_to_done.unwrap_or(0.0) * 1000.0) as i64)
        + chrono::Duration::seconds(impact.wait_secs.min(i64::MAX as u64) as i64);
    let from = shift(end.with_timezone(&tz).date_naive(), 1);
    let to = shift(from, impact.days - 1);
    if final_count(finals, from, to) < impact.days {
        return Due::Wait(format!("the days {from}..{to} are not all final yet"));
    }
    Due::Measure(from, to)
}

/// The firings whose jobs are being polled.
fn polled(ledger: &Ledger) -> Result<std::collections::HashSet<i64>, StoreError> {
    Ok(ledger.polling()?.into_iter().map(|(f, _)| f.id).collect())
}

/// What one measuring pass did.
#[derive(Debug, Default)]
pub struct Measured {
    /// Firings measured now.
    pub measured: usize,
    /// Firings given up now (with why).
    pub given_up: Vec<(i64, String)>,
    /// The impact files rewritten.
    pub files: Vec<PathBuf>,
}

/// Measures every plan that is due, then rewrites `agent_impact/` when anything changed.
pub fn measure_due(
    out: &Path,
    ledger: &Ledger,
    cal: Calendar,
    now: DateTime<Utc>,
) -> Result<Measured, ImpactError> {
    let tz = cal.tz;
    let plans = ledger.plans()?;
    let polled = polled(ledger)?;
    let mut keys = ledger.key_figures()?;
    let mut done = Measured::default();
    let mut finals: HashMap<(&str, String), Vec<NaiveDate>> = HashMap::new();
    for f in ledger.all()? {
        let Some(plan) = plans.get(&f.id).filter(|p| p.outcome.is_none()) else {
            continue;
        };
        let Ok(impact) = serde_json::from_str::<Impact>(&plan.definition) else {
            ledger.record_after(f.id, None, &[], "its [impact] cannot be read", now)?;
            continue;
        };
        let days = match finals.entry((impact.dataset(), f.project.clone())) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(cal.final_days(ledger, impact.dataset(), &f.project)?)
            }
        };
        match due(&f, plan, &impact, days, polled.contains(&f.id), tz) {
            Due::Wait(_) => {}
            Due::Never(why) => {
                ledger.record_after(f.id, None, &[], &why, now)?;
                done.given_up.push((f.id, why));
            }
            Due::Measure(from, to) => {
                let names: Vec<String> = keys
                    .remove(&f.id)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|k| k.key)
                    .collect();
                let figures = match tables_over(out, &f.project, from, to)? {
                    Some(t) => impact
                        .figures(&t, &f.project, &names)
                        .map_err(ImpactError::Metric)?,
                    None => Vec::new(),
                };
                let after = Days {
                    from,
                    to,
                    days: final_count(days, from, to),
                };
                ledger.record_after(f.id, Some(after), &figures, "measured", now)?;
                done.measured += 1;
            }
        }
    }
    if done.measured > 0 || !done.given_up.is_empty() {
        done.files = write(out, &rows(ledger)?)?;
    }
    Ok(done)
}

/// Errors measuring.
#[derive(Debug, thiserror::Error)]
pub enum ImpactError {
    /// The ledger.
    #[error(transparent)]
    State(#[from] StoreError),
    /// The trend tables.
    #[error(transparent)]
    Trends(#[from] TrendsError),
    /// The metric's query.
    #[error("impact: {0}")]
    Metric(String),
    /// Writing Parquet.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// How a key moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// In the better direction, beyond the tolerance.
    Improved,
    /// Within the tolerance.
    Stayed,
    /// In the worse direction, beyond the tolerance.
    Worse,
    /// A figure is missing on a side.
    NoData,
}

impl Verdict {
    /// Its word.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Stayed => "stayed",
            Verdict::Worse => "worse",
            Verdict::NoData => "no data",
        }
    }
}

/// One key of one measured firing: a row of `agent_impact`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The firing.
    pub firing_id: i64,
    /// Rule.
    pub rule: String,
    /// Project.
    pub project: String,
    /// The job.
    pub job: Option<String>,
    /// Its status when polling ended.
    pub job_status: Option<String>,
    /// Its pull request.
    pub pr_link: Option<String>,
    /// When the rule fired.
    pub fired_at: DateTime<Utc>,
    /// The key.
    pub key: String,
    /// The metric's expression.
    pub metric: String,
    /// Which way is better.
    pub better: Better,
    /// Before.
    pub before: Option<f64>,
    /// After.
    pub after: Option<f64>,
    /// Rows behind `before`.
    pub rows_before: Option<i64>,
    /// Rows behind `after`.
    pub rows_after: Option<i64>,
    /// Days before (final days of the window).
    pub days_before: Days,
    /// Days after.
    pub days_after: Days,
    /// When it was measured.
    pub measured_at: DateTime<Utc>,
    /// How the key moved.
    pub verdict: Verdict,
    /// Whether there were enough days and rows each side to say anything.
    pub enough: bool,
}

impl Row {
    /// after - before.
    pub fn change(&self) -> Option<f64> {
        Some(self.after? - self.before?)
    }

    /// after / before - 1 (none when before is 0 and after is not).
    pub fn relative(&self) -> Option<f64> {
        let (b, a) = (self.before?, self.after?);
        if b != 0.0 {
            Some(a / b - 1.0)
        } else if a == 0.0 {
            Some(0.0)
        } else {
            None
        }
    }

    /// How the key moved, beyond `tolerance` (relative) in `better`'s direction.
    fn judge(&self, tolerance: f64) -> Verdict {
        let Some(change) = self.change() else {
            return Verdict::NoData;
        };
        let signed = match self.better {
            Better::Higher => change,
            Better::Lower => -change,
        };
        match self.relative() {
            Some(r) if r.abs() <= tolerance => Verdict::Stayed,
            _ if signed > 0.0 => Verdict::Improved,
            _ if signed < 0.0 => Verdict::Worse,
            _ => Verdict::Stayed,
        }
    }

    /// Whether there are at least [`MIN_DAYS`] final days and `min_count` rows each side.
    fn has_enough(&self, min_count: i64) -> bool {
        self.days_before.days >= MIN_DAYS
            && self.days_after.days >= MIN_DAYS
            && self.rows_before.unwrap_or(0) >= min_count
            && self.rows_after.unwrap_or(0) >= min_count
    }
}

/// Every measured key of the ledger, by firing then key.
pub fn rows(ledger: &Ledger) -> Result<Vec<Row>, StoreError> {
    let plans = ledger.plans()?;
    let keys = ledger.key_figures()?;
    let mut out = Vec::new();
    for f in ledger.all()? {
        let Some(plan) = plans.get(&f.id) else {
            continue;
        };
        let (Some(after), Some(at), Ok(impact)) = (
            plan.after,
            plan.settled_at,
            serde_json::from_str::<Impact>(&plan.definition),
        ) else {
            continue;
        };
        for k in keys.get(&f.id).map_or(&[][..], Vec::as_slice) {
            out.push(row(&f, plan.before, after, at, &impact, k));
        }
    }
    Ok(out)
}

fn row(
    f: &Firing,
    before: Days,
    after: Days,
    at: DateTime<Utc>,
    i: &Impact,
    k: &KeyFigures,
) -> Row {
    let mut r = Row {
        firing_id: f.id,
        rule: f.rule.clone(),
        project: f.project.clone(),
        job: f.job.clone(),
        job_status: f.status.clone(),
        pr_link: f.pr_link.clone(),
        fired_at: f.fired_at,
        key: k.key.clone(),
        metric: i.metric.clone(),
        better: i.better,
        before: k.before.as_ref().and_then(|x| x.value),
        after: k.after.as_ref().and_then(|x| x.value),
        rows_before: k.before.as_ref().and_then(|x| x.rows),
        rows_after: k.after.as_ref().and_then(|x| x.rows),
        days_before: before,
        days_after: after,
        measured_at: at,
        verdict: Verdict::NoData,
        enough: false,
    };
    r.verdict = r.judge(i.tolerance);
    r.enough = r.has_enough(i.min_count);
    r
}

/// Schema of `agent_impact` (the project is the partition).
pub fn schema() -> Arc<arrow_schema::Schema> {
    use arrow_schema::{DataType as A, Field as F, TimeUnit as T};
    let ts = || A::Timestamp(T::Microsecond, Some("UTC".into()));
    Arc::new(arrow_schema::Schema::new(vec![
        F::new("firing_id", A::Int64, false),
        F::new("rule", A::Utf8, false),
        F::new("job", A::Utf8, true),
        F::new("job_status", A::Utf8, true),
        F::new("pr_link", A::Utf8, true),
        F::new("fired_at", ts(), false),
        F::new("key", A::Utf8, false),
        F::new("metric", A::Utf8, false),
        F::new("better", A::Utf8, false),
        F::new("before", A::Float64, true),
        F::new("after", A::Float64, true),
        F::new("change", A::Float64, true),
        F::new("relative_change", A::Float64, true),
        F::new("verdict", A::Utf8, false),
        F::new("enough_data", A::Boolean, false),
        F::new("rows_before", A::Int64, true),
        F::new("rows_after", A::Int64, true),
        F::new("days_before", A::Int64, false),
        F::new("days_after", A::Int64, false),
        F::new("before_from", A::Date32, false),
        F::new("before_to", A::Date32, false),
        F::new("after_from", A::Date32, false),
        F::new("after_to", A::Date32, false),
        F::new("measured_at", ts(), false),
    ]))
}

/// Writes `agent_impact/project=<p>/part-00000.parquet` for each project of `rows`.
pub fn write(out: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, WriteError> {
    use arrow_array::{
        ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, StringArray,
        TimestampMicrosecondArray,
    };
    let mut by_project: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by_project.entry(r.project.as_str()).or_default().push(r);
    }
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let mut written = Vec::new();
    for (project, rows) in by_project {
        let text = |get: &dyn Fn(&Row) -> Option<String>| -> ArrayRef {
            Arc::new(rows.iter().map(|r| get(r)).collect::<StringArray>())
        };
        let real = |get: &dyn Fn(&Row) -> Option<f64>| -> ArrayRef {
            Arc::new(rows.iter().map(|r| get(r)).collect::<Float64Array>())
        };
        let int = |get: &dyn Fn(&Row) -> Option<i64>| -> ArrayRef {
            Arc::new(rows.iter().map(|r| get(r)).collect::<Int64Array>())
        };
        let date = |get: &dyn Fn(&Row) -> NaiveDate| -> ArrayRef {
            Arc::new(Date32Array::from_iter_values(
                rows.iter().map(|r| (get(r) - epoch).num_days() as i32),
            ))
        };
        let time = |get: &dyn Fn(&Row) -> DateTime<Utc>| -> ArrayRef {
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|r| get(r).timestamp_micros()),
                )
                .with_timezone("UTC"),
            )
        };
        let cols: Vec<ArrayRef> = vec![
            int(&|r| Some(r.firing_id)),
            text(&|r| Some(r.rule.clone())),
            text(&|r| r.job.clone()),
            text(&|r| r.job_status.clone()),
            text(&|r| r.pr_link.clone()),
            time(&|r| r.fired_at),
            text(&|r| Some(r.key.clone())),
            text(&|r| Some(r.metric.clone())),
            text(&|r| {
                Some(match r.better {
                    Better::Higher => "higher".into(),
                    Better::Lower => "lower".into(),
                })
            }),
            real(&|r| r.before),
            real(&|r| r.after),
            real(&Row::change),
            real(&Row::relative),
            text(&|r| Some(r.verdict.as_str().into())),
            Arc::new(
                rows.iter()
                    .map(|r| Some(r.enough))
                    .collect::<BooleanArray>(),
            ),
            int(&|r| r.rows_before),
            int(&|r| r.rows_after),
            int(&|r| Some(r.days_before.days)),
            int(&|r| Some(r.days_after.days)),
            date(&|r| r.days_before.from),
            date(&|r| r.days_before.to),
            date(&|r| r.days_after.from),
            date(&|r| r.days_after.to),
            time(&|r| r.measured_at),
        ];
        let dir = project_dir(out, AGENT_IMPACT, project);
        written.push(crate::dataset::parquet::write_table(&dir, schema(), cols)?);
    }
    Ok(written)
}

/// The median of some numbers (none of none).
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// One firing's measured keys, counted.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FiringImpact {
    /// The rule.
    pub rule: String,
    /// Its project.
    pub project: String,
    /// The firing.
    pub firing_id: i64,
    /// The job's pull request.
    pub pr_link: Option<String>,
    /// When it was measured.
    pub measured_at: DateTime<Utc>,
    /// Keys measured.
    pub keys: usize,
    /// Of those with enough data: improved.
    pub improved: usize,
    /// Stayed.
    pub stayed: usize,
    /// Got worse.
    pub worse: usize,
    /// Keys with too little data (or none) to say.
    pub too_little: usize,
    /// The median relative change of the keys with enough data.
    pub median_change: Option<f64>,
}

/// Counts rows (of one rule, or one firing) as a summary.
pub fn count(rows: &[&Row]) -> (usize, usize, usize, usize, Option<f64>) {
    let (mut improved, mut stayed, mut worse, mut little) = (0, 0, 0, 0);
    let mut changes = Vec::new();
    for r in rows {
        match (r.enough, r.verdict) {
            (false, _) | (_, Verdict::NoData) => little += 1,
            (true, v) => {
                if let Some(c) = r.relative() {
                    changes.push(c);
                }
                match v {
                    Verdict::Improved => improved += 1,
                    Verdict::Stayed => stayed += 1,
                    _ => worse += 1,
                }
            }
        }
    }
    (improved, stayed, worse, little, median(changes))
}

/// Each rule's latest measured firing, counted (for the trends' summary and the status page).
pub fn latest(rows: &[Row]) -> Vec<FiringImpact> {
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    for r in rows {
        let e = last.entry(r.rule.as_str()).or_insert(r.firing_id);
        *e = (*e).max(r.firing_id);
    }
    last.into_iter()
        .filter_map(|(rule, id)| {
            let of: Vec<&Row> = rows
                .iter()
                .filter(|r| r.rule == rule && r.firing_id == id)
                .collect();
            let first = of.first()?;
            let (improved, stayed, worse, too_little, median_change) = count(&of);
            Some(FiringImpact {
                rule: rule.to_string(),
                project: first.project.clone(),
                firing_id: id,
                pr_link: first.pr_link.clone(),
                measured_at: first.measured_at,
                keys: of.len(),
                improved,
                stayed,
                worse,
                too_little,
                median_change,
            })
        })
        .collect()
}

/// `+12.3%` (or `n/a`).
pub fn pct(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |x| format!("{:+.1}%", x * 100.0))
}

impl FiringImpact {
    /// One line: `rule R (p), firing 3 (PR <link>): 5 keys: 2 improved, 3 stayed, 0 worse;
    /// median change +12.0%`.
    pub fn line(&self) -> String {
        let pr = self
            .pr_link
            .as_deref()
            .map(|p| format!(" (PR {})", crate::text::one_line(p)))
            .unwrap_or_default();
        let mut line = format!(
            "rule {} ({}), firing {}{pr}: {} keys: {} improved, {} stayed, {} worse; median change {}",
            self.rule,
            self.project,
            self.firing_id,
            self.keys,
            self.improved,
            self.stayed,
            self.worse,
            pct(self.median_change)
        );
        if self.too_little > 0 {
            line.push_str(&format!(
                ", {} with too little data to say",
                self.too_little
            ));
        }
        line
    }
}

/// The rows of `agent_impact/` in an output folder (none when it has none).
#[expect(clippy::too_many_lines)]
pub fn read(out: &Path) -> Result<Vec<Row>, PolarsError> {
    let root = out.join(AGENT_IMPACT);
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let args = ScanArgsParquet {
        hive_options: HiveOptions::new_enabled(),
        ..Default::default()
    };
    let df = LazyFrame::scan_parquet(PlRefPath::try_from_path(&root)?, args)?
        .with_columns([
            col("fired_at").dt().timestamp(TimeUnit::Microseconds),
            col("measured_at").dt().timestamp(TimeUnit::Microseconds),
            col("before_from").cast(DataType::Int32),
            col("before_to").cast(DataType::Int32),
            col("after_from").cast(DataType::Int32),
            col("after_to").cast(DataType::Int32),
        ])
        .collect()?;
    let s = |n: &str| df.column(n).and_then(|c| c.cast(&DataType::String));
    let (verdict, enough) = (s("verdict")?, df.column("enough_data")?.bool()?.clone());
    let verdict = verdict.str()?;
    let (project, rule, job, status, pr, key, metric, better) = (
        s("project")?,
        s("rule")?,
        s("job")?,
        s("job_status")?,
        s("pr_link")?,
        s("key")?,
        s("metric")?,
        s("better")?,
    );
    let (project, rule, job, status, pr, key, metric, better) = (
        project.str()?,
        rule.str()?,
        job.str()?,
        status.str()?,
        pr.str()?,
        key.str()?,
        metric.str()?,
        better.str()?,
    );
    let i = |n: &str| df.column(n).and_then(|c| c.cast(&DataType::Int64));
    let f = |n: &str| df.column(n).and_then(|c| c.cast(&DataType::Float64));
    let (id, fired, measured) = (i("firing_id")?, i("fired_at")?, i("measured_at")?);
    let (rb, ra, db, da) = (
        i("rows_before")?,
        i("rows_after")?,
        i("days_before")?,
        i("days_after")?,
    );
    let (bf, bt, af, at) = (
        i("before_from")?,
        i("before_to")?,
        i("after_from")?,
        i("after_to")?,
    );
    let (before, after) = (f("before")?, f("after")?);
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let day = |c: &Column, n: usize| shift(epoch, c.i64().ok().and_then(|a| a.get(n)).unwrap_or(0));
    let num = |c: &Column, n: usize| c.i64().ok().and_then(|a| a.get(n));
    let time = |c: &Column, n: usize| {
        DateTime::from_timestamp_micros(num(c, n).unwrap_or(0)).unwrap_or_default()
    };
    let text = |a: &StringChunked, n: usize| a.get(n).map(str::to_string);
    let mut out = Vec::with_capacity(df.height());
    for n in 0..df.height() {
        out.push(Row {
            firing_id: num(&id, n).unwrap_or(0),
            rule: text(rule, n).unwrap_or_default(),
            project: text(project, n).unwrap_or_default(),
            job: text(job, n),
            job_status: text(status, n),
            pr_link: text(pr, n),
            fired_at: time(&fired, n),
            key: text(key, n).unwrap_or_default(),
            metric: text(metric, n).unwrap_or_default(),
            better: if better.get(n) == Some("lower") {
                Better::Lower
            } else {
                Better::Higher
            },
            before: before.f64().ok().and_then(|a| a.get(n)),
            after: after.f64().ok().and_then(|a| a.get(n)),
            rows_before: num(&rb, n),
            rows_after: num(&ra, n),
            days_before: Days {
                from: day(&bf, n),
                to: day(&bt, n),
                days: num(&db, n).unwrap_or(0),
            },
            days_after: Days {
                from: day(&af, n),
                to: day(&at, n),
                days: num(&da, n).unwrap_or(0),
            },
            measured_at: time(&measured, n),
            verdict: match verdict.get(n) {
                Some("improved") => Verdict::Improved,
                Some("stayed") => Verdict::Stayed,
                Some("worse") => Verdict::Worse,
                _ => Verdict::NoData,
            },
            enough: enough.get(n).unwrap_or(false),
        });
    }
    Ok(out)
}

/// Checks a rule's `[impact]` against the tables a rule evaluation reads (every project), so
/// that a metric naming a missing column is found on the first run, not on the day it fires.
pub fn check_on(rule: &Rule, tables: &Tables) -> Result<(), RuleError> {
    let Some(impact) = &rule.impact else {
        return Ok(());
    };
    impact
        .figures(tables, &rule.project, &[])
        .map(|_| ())
        .map_err(|e| RuleError {
            file: rule.file.clone(),
            message: format!("impact: {e}"),
        })
}

/// Keys with enough data a rule needs before its counts say anything.
pub const MIN_KEYS: usize = 3;

/// The how-to-read line `docpipe rules impact` starts with.
pub const READING: &str = "a key improved (or got worse) when its metric moved more than the rule's tolerance (10% unless it says) the better (or worse) way, and stayed otherwise; a key counts only with at least 7 final days and the rule's min_count rows (30 unless it says) on each side";

/// `docpipe rules impact`: per rule, the jobs measured, the keys that improved, stayed and got
/// worse, the median change, each measured firing's keys, what waits and what never will be
/// measured; a rule without `[impact]` says it is measured by nothing.
#[expect(clippy::too_many_lines)]
pub fn report(rules: &[Rule], ledger: &Ledger, cal: Calendar) -> Result<String, StoreError> {
    let tz = cal.tz;
    use std::fmt::Write as _;
    let all = rows(ledger)?;
    let plans = ledger.plans()?;
    let firings = ledger.all()?;
    let polled = polled(ledger)?;
    let mut out = format!("impact of the agent jobs: {READING}\n");
    for rule in rules {
        let _ = write!(out, "\nrule {} ({}): ", rule.name, rule.project);
        let Some(impact) = &rule.impact else {
            let _ = writeln!(out, "measured by nothing (no [impact] in {})", rule.file);
            continue;
        };
        let _ = writeln!(out, "{}", impact.describe());
        let mine: Vec<&Firing> = firings
            .iter()
            .filter(|f| f.rule == rule.name && f.project == rule.project)
            .collect();
        let measured: Vec<&Row> = all
            .iter()
            .filter(|r| r.rule == rule.name && r.project == rule.project)
            .collect();
        let jobs = mine
            .iter()
            .filter(|f| plans.get(&f.id).is_some_and(|p| p.after.is_some()))
            .count();
        let (improved, stayed, worse, little, median_change) = count(&measured);
        let _ = writeln!(
            out,
            "  jobs measured: {jobs}; keys: {improved} improved, {stayed} stayed, {worse} worse; median change {}",
            pct(median_change)
        );
        for f in &mine {
            let Some(plan) = plans.get(&f.id) else {
                continue;
            };
            let Some(after) = plan.after else {
                continue;
            };
            let _ = writeln!(
                out,
                "  firing {} ({}), job {}, {}; before {}..{} ({} final days), after {}..{} ({} final days):",
                f.id,
                f.fired_at.with_timezone(&tz).format("%Y-%m-%d %H:%M"),
                crate::text::one_line(f.job.as_deref().unwrap_or("?")),
                f.pr_link
                    .as_deref()
                    .map_or("no pull request".into(), |p| format!(
                        "PR {}",
                        crate::text::one_line(p)
                    )),
                plan.before.from,
                plan.before.to,
                plan.before.days,
                after.from,
                after.to,
                after.days
            );
            let _ = writeln!(
                out,
                "    {:<40} {:>10} {:>10} {:>9} {:>13}  verdict",
                "key", "before", "after", "change", "rows bef/aft"
            );
            for r in measured.iter().filter(|r| r.firing_id == f.id) {
                let num = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.4}"));
                let n = |x: Option<i64>| x.map_or("?".into(), |x| x.to_string());
                let _ = writeln!(
                    out,
                    "    {:<40} {:>10} {:>10} {:>9} {:>13}  {}{}",
                    crate::text::one_line(&r.key),
                    num(r.before),
                    num(r.after),
                    pct(r.relative()),
                    format!("{}/{}", n(r.rows_before), n(r.rows_after)),
                    r.verdict.as_str(),
                    if r.enough || r.verdict == Verdict::NoData {
                        ""
                    } else {
                        " (too little data)"
                    }
                );
            }
        }
        let pending: Vec<String> = mine
            .iter()
            .filter_map(|f| {
                let plan = plans.get(&f.id)?;
                let impact: Impact = serde_json::from_str(&plan.definition).ok()?;
                let finals = cal.final_days(ledger, impact.dataset(), &f.project).ok()?;
                match (
                    &plan.outcome,
                    due(f, plan, &impact, &finals, polled.contains(&f.id), tz),
                ) {
                    (None, Due::Wait(why)) => Some(format!("firing {} ({why})", f.id)),
                    _ => None,
                }
            })
            .collect();
        if !pending.is_empty() {
            let _ = writeln!(out, "  waiting: {}", pending.join("; "));
        }
        let never: Vec<String> = mine
            .iter()
            .filter_map(|f| {
                let o = plans.get(&f.id)?.outcome.as_deref()?;
                (o != "measured").then(|| format!("firing {} ({})", f.id, o))
            })
            .collect();
        if !never.is_empty() {
            let _ = writeln!(out, "  not measured: {}", never.join("; "));
        }
        let old = mine.iter().filter(|f| !plans.contains_key(&f.id)).count();
        if old > 0 {
            let _ = writeln!(
                out,
                "  not measurable: {old} firings recorded no figures before (they fired before the rule had [impact], or before docpipe measured impact)"
            );
        }
        let enough = measured.len() - little;
        if !measured.is_empty() && (enough < MIN_KEYS || little > 0) {
            let _ = writeln!(
                out,
                "  caveat: {enough} of {} keys have at least {MIN_DAYS} final days and {} rows on each side{}",
                measured.len(),
                impact.min_count,
                if enough < MIN_KEYS {
                    format!("; fewer than {MIN_KEYS}: too few to say anything yet")
                } else {
                    "; the others are not counted".into()
                }
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(extra: &str) -> Result<Rule, RuleError> {
        let text = format!(
            "name = \"r\"\nproject = \"p\"\njob = \"j\"\nkey = \"search_query\"\n\
             when = \"SELECT search_query, ctr_7d FROM search_terms\"\n\
             prompt = \"{{% for row in rows %}}{{{{ row.search_query }}}}{{% endfor %}}\"\n{extra}"
        );
        Rule::parse(&text, "jobs/r.toml", &["p".to_string()])
    }

    #[test]
    fn impact_is_checked_when_the_rule_loads() {
        let ok = rule("[impact]\nmetric = \"ctr_7d\"\ncount = \"hits_7d\"\nbetter = \"higher\"\n")
            .unwrap()
            .impact
            .unwrap();
        assert_eq!(
            (ok.table.as_str(), ok.dataset(), ok.key.as_str()),
            ("search_terms", "searches", "search_query")
        );
        assert_eq!((ok.days, ok.wait_secs, ok.min_count), (7, 2 * 86_400, 30));
        assert_eq!(
            ok.describe(),
            "ctr_7d per search_query in search_terms, higher is better, 7 days each side, from 2 days after the job ended"
        );
        let base = "[impact]\nmetric = \"ctr_7d\"\ncount = \"hits_7d\"\n";
        for (extra, why) in [
            (
                format!("{base}better = \"up\"\n"),
                "impact.better \"up\" must be \"higher\" or \"lower\"",
            ),
            (
                format!("{base}better = \"higher\"\ndays = 40\n"),
                "impact.days 40 must be between 1 and 28",
            ),
            (
                format!("{base}better = \"higher\"\ntable = \"secrets\"\n"),
                "impact.table \"secrets\" is not a trend table (daily, weekly, pages, search_terms, search_daily, assistant_daily, assistant_categories, unanswered_questions, feedback_pages, visitors_daily, callers_weekly)",
            ),
            (
                "[impact]\nmetric = \"x FROM read_csv('/etc/passwd') --\"\ncount = \"1\"\nbetter = \"lower\"\n".to_string(),
                "impact.metric or impact.count: the query does not parse: sql parser error: Expected: ), found: FROM at Line: 1, Column: 46",
            ),
            (
                format!("{base}better = \"higher\"\nkey = \"a b\"\n"),
                "impact.key \"a b\" must be a column name (letters, digits, _)",
            ),
            (
                format!("wait = false\n{base}better = \"higher\"\n"),
                "impact needs wait = true: the days after are counted from the job's end",
            ),
            (
                format!("{base}better = \"higher\"\nmin_rows = 2\n"),
                "line 11: unknown field `min_rows`, expected one of `table`, `key`, `metric`, `count`, `better`, `days`, `wait`, `absent`, `min_count`, `tolerance`, `without_pull_request`",
            ),
        ] {
            let e = rule(&extra).unwrap_err();
            assert_eq!(e.message, why, "{extra}");
        }
    }

    #[test]
    fn a_ledger_written_before_the_impact_keeps_working_and_is_not_measurable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        // The ledger as docpipe wrote it before: no impact columns, no plans.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE rule_firings (id INTEGER PRIMARY KEY AUTOINCREMENT, rule TEXT NOT NULL,
             project TEXT NOT NULL, action TEXT NOT NULL, job TEXT, fired_at_ms INTEGER NOT NULL,
             prompt_hash TEXT NOT NULL, prompt TEXT NOT NULL, rows_matched INTEGER NOT NULL,
             sent TEXT NOT NULL, status TEXT, pr_link TEXT, seconds_to_done REAL, error TEXT,
             updated_at_ms INTEGER NOT NULL, poll_until_ms INTEGER);
             CREATE TABLE rule_firing_keys (firing_id INTEGER NOT NULL, key TEXT NOT NULL,
             PRIMARY KEY (firing_id, key));
             INSERT INTO rule_firings VALUES (1, 'r', 'p', 'follow_up', 'j', 0, 'h', 'prompt', 3,
             'sent', 'completed', 'https://github.com/o/r/pull/1', 5.0, NULL, 0, NULL);
             INSERT INTO rule_firing_keys VALUES (1, 'webhooks');",
        )
        .unwrap();
        drop(c);
        let ledger = Ledger::open(&path).unwrap();
        let figures = ledger.key_figures().unwrap();
        assert_eq!(
            figures[&1],
            vec![KeyFigures {
                key: "webhooks".into(),
                before: None,
                after: None
            }]
        );
        assert!(ledger.plans().unwrap().is_empty());
        let r = rule("[impact]\nmetric = \"ctr_7d\"\ncount = \"hits_7d\"\nbetter = \"higher\"\n")
            .unwrap();
        // The key cooldown still reads the old keys.
        let sent = ledger
            .sent_keys("r", "p", DateTime::<Utc>::MIN_UTC)
            .unwrap();
        assert!(sent.contains("webhooks"));
        let cal = Calendar {
            tz: chrono_tz::UTC,
            today: NaiveDate::from_ymd_opt(2026, 3, 1).unwrap(),
            settle_days: 3,
        };
        let m = measure_due(dir.path(), &ledger, cal, Utc::now()).unwrap();
        assert_eq!((m.measured, m.given_up.len()), (0, 0));
        let text = report(std::slice::from_ref(&r), &ledger, cal).unwrap();
        assert!(
            text.ends_with("  jobs measured: 0; keys: 0 improved, 0 stayed, 0 worse; median change n/a\n  not measurable: 1 firings recorded no figures before (they fired before the rule had [impact], or before docpipe measured impact)\n"),
            "{text}"
        );
        let mut none = r.clone();
        none.impact = None;
        let text = report(&[none], &ledger, cal).unwrap();
        assert!(
            text.ends_with("\nrule r (p): measured by nothing (no [impact] in jobs/r.toml)\n"),
            "{text}"
        );
    }

    #[test]
    fn a_job_whose_polling_ended_before_it_did_is_never_measured() {
        let day = NaiveDate::from_ymd_opt(2026, 3, 1).unwrap();
        let impact =
            rule("[impact]\nmetric = \"ctr_7d\"\ncount = \"hits_7d\"\nbetter = \"higher\"\n")
                .unwrap()
                .impact
                .unwrap();
        let plan = Plan {
            firing_id: 1,
            definition: String::new(),
            before: Days {
                from: day,
                to: day,
                days: 7,
            },
            after: None,
            settled_at: None,
            outcome: None,
        };
        let firing = Firing {
            id: 1,
            rule: "r".into(),
            project: "p".into(),
            kind: crate::store::ledger::Kind::FollowUp,
            job: Some("j".into()),
            fired_at: Utc::now(),
            prompt_hash: "h".into(),
            prompt: "p".into(),
            rows_matched: 1,
            sent: Sent::Sent,
            status: Some("active".into()),
            pr_link: None,
            seconds_to_done: None,
            error: Some("polling: job j of project p: 500".into()),
            trail: Default::default(),
        };
        let due = |polled| due(&firing, &plan, &impact, &[], polled, chrono_tz::UTC);
        assert_eq!(due(true), Due::Wait("the job is running".into()));
        assert_eq!(
            due(false),
            Due::Never("docpipe stopped polling the job before it ended (the rule's timeout passed, or the job could not be read)".into())
        );
    }

    #[test]
    fn verdicts_follow_the_better_way_and_the_tolerance() {
        let day = NaiveDate::from_ymd_opt(2026, 3, 1).unwrap();
        let days = Days {
            from: day,
            to: day,
            days: 7,
        };
        let row = |before: f64, after: f64, better| {
            let mut r = Row {
                firing_id: 1,
                rule: "r".into(),
                project: "p".into(),
                job: None,
                job_status: None,
                pr_link: None,
                fired_at: Utc::now(),
                key: "k".into(),
                metric: "m".into(),
                better,
                before: Some(before),
                after: Some(after),
                rows_before: Some(40),
                rows_after: Some(40),
                days_before: days,
                days_after: days,
                measured_at: Utc::now(),
                verdict: Verdict::NoData,
                enough: false,
            };
            r.verdict = r.judge(0.1);
            r.enough = r.has_enough(30);
            r
        };
        assert_eq!(row(10.0, 12.0, Better::Higher).verdict, Verdict::Improved);
        assert_eq!(row(10.0, 10.9, Better::Higher).verdict, Verdict::Stayed);
        assert_eq!(row(10.0, 12.0, Better::Lower).verdict, Verdict::Worse);
        assert_eq!(row(0.0, 2.0, Better::Lower).verdict, Verdict::Worse);
        assert_eq!(row(0.0, 0.0, Better::Lower).verdict, Verdict::Stayed);
        assert_eq!(row(4.0, 0.0, Better::Lower).relative(), Some(-1.0));
        let rows = [
            row(10.0, 15.0, Better::Higher),
            row(10.0, 10.0, Better::Higher),
            row(10.0, 5.0, Better::Higher),
        ];
        let refs: Vec<&Row> = rows.iter().collect();
        assert_eq!(count(&refs), (1, 1, 1, 0, Some(0.0)));
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), Some(2.5));
    }
}
