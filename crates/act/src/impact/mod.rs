//! What each agent job changed: a rule's `[impact]` names a metric over one trend table, per
//! key (a search term, a question, a page). When the rule fires, each key's metric over the
//! `days` final days before is recorded in the ledger beside the key; once the job has ended
//! (with a pull request, unless the rule measures the others too) and `wait` has passed, the
//! same keys are measured over the same number of days after, as soon as those days are
//! final. The table is computed over exactly those days (its `_28d` columns hold all of
//! them, its `_7d` columns the last 7). Measurements go to `agent_impact/project=<id>/` as
//! Parquet, rewritten whole from the ledger.
//!
//! Its rooms: this file is the rule's `[impact]` (its config, checked) and the words it is read
//! back by ([`Better`], [`Verdict`]); [`days`] is the calendar and the rule that says a plan is
//! due; [`measure`] measures (each key's figure over the rule's one table, computed over exactly
//! the days measured); [`table`] is `agent_impact` (its rows and files, written by the derived
//! tables' one writer); [`report`] is what a person reads (the model `docpipe rules impact`
//! renders in `text.rs`, and each rule's latest firing on the status page).

pub mod days;
pub mod measure;
pub mod report;
pub mod table;
pub mod text;

pub use days::Calendar;
pub use measure::{ImpactError, Measured, check_on, measure_due, record_before};
pub use report::{FiringImpact, latest, pct};
pub use table::{AGENT_IMPACT, Row, read, rows, schema, write};

use serde::{Deserialize, Serialize};
use std::time::Duration;

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

impl Better {
    /// Its word (`higher`, `lower`).
    pub fn as_str(self) -> &'static str {
        match self {
            Better::Higher => "higher",
            Better::Lower => "lower",
        }
    }
}

impl std::str::FromStr for Better {
    type Err = String;

    /// Its word, as [`Better::as_str`] writes it (trimmed).
    fn from_str(word: &str) -> Result<Self, String> {
        [Better::Higher, Better::Lower]
            .into_iter()
            .find(|b| b.as_str() == word.trim())
            .ok_or_else(|| format!("{:?} must be \"higher\" or \"lower\"", word.trim()))
    }
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

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Verdict {
    type Err = String;

    /// A verdict's word, as [`Verdict::as_str`] writes it.
    fn from_str(word: &str) -> Result<Self, String> {
        [
            Verdict::Improved,
            Verdict::Stayed,
            Verdict::Worse,
            Verdict::NoData,
        ]
        .into_iter()
        .find(|v| v.as_str() == word)
        .ok_or_else(|| format!("{word:?} is not a verdict"))
    }
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
    /// Ask the firing's questions again of the assistant once its job ends with a pull request
    /// (default: for a rule over `unanswered_questions`); read by the rule, not by the measure.
    #[serde(default)]
    pub(crate) reask: Option<bool>,
    /// At most this many questions per firing.
    #[serde(default)]
    pub(crate) reask_max: Option<i64>,
    /// A question the first ask found nothing for is asked once more this long after.
    #[serde(default)]
    pub(crate) reask_again: Option<String>,
}

/// The dataset whose final days a trend table's days are.
pub fn dataset_of(table: &str) -> &'static str {
    docpipe_derive::gaps::dataset_of_trend(table)
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
        let better: Better = self
            .better
            .parse()
            .map_err(|e| format!("impact.better {e}"))?;
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
            self.better.as_str(),
            self.days,
            match self.wait_secs {
                s if s % 86_400 == 0 => format!("{} days", s / 86_400),
                s if s % 3_600 == 0 => format!("{} hours", s / 3_600),
                s => docpipe_catalog::text::duration(Duration::from_secs(s)),
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::{Rule, RuleError};

    /// A rule reading `search_terms`, with `extra` after its lines.
    pub(super) fn rule(extra: &str) -> Result<Rule, RuleError> {
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
                "impact.table \"secrets\" is not a trend table (daily, weekly, pages, search_terms, search_daily, assistant_daily, assistant_categories, unanswered_questions, feedback_pages, visitors_daily, callers_weekly, agent_page_reads, ai_operators_daily)",
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
                "line 11: unknown field `min_rows`, expected one of `table`, `key`, `metric`, `count`, `better`, `days`, `wait`, `absent`, `min_count`, `tolerance`, `without_pull_request`, `reask`, `reask_max`, `reask_again`",
            ),
            (
                format!("wait = false\n{base}better = \"higher\"\nreask = true\n"),
                "impact.reask needs wait = true: the questions are asked again once the job ends with a pull request",
            ),
            (
                format!("{base}better = \"higher\"\nreask = true\nreask_max = 0\n"),
                "impact.reask_max 0 must be between 1 and 50",
            ),
            (
                format!("{base}better = \"higher\"\nreask_again = \"2d\"\n"),
                "impact.reask_max and impact.reask_again need reask = true",
            ),
            (
                format!("{base}better = \"higher\"\nreask = true\nreask_again = \"0s\"\n"),
                "impact.reask_again must be more than 0s",
            ),
        ] {
            let e = rule(&extra).unwrap_err();
            assert_eq!(e.message, why, "{extra}");
        }
    }
}
