//! `agent_impact`: a row per measured key of a firing, its verdict, and the table's files
//! (written from the ledger by the derived tables' writer, read back by the trends summary).

use super::days::shift;
use super::{Better, Impact, MIN_DAYS, Verdict};
use chrono::{DateTime, NaiveDate, Utc};
use docpipe_state::StoreError;
use docpipe_state::impact::{Days, KeyFigures};
use docpipe_state::ledger::{Firing, Ledger};
use docpipe_write::derived::{self, Columns};
use docpipe_write::parquet::WriteError;
use polars::prelude::*;
use std::path::{Path, PathBuf};

/// The impact table's folder in the output folder.
pub const AGENT_IMPACT: &str = docpipe_catalog::tables::AGENT_IMPACT.name;

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

/// The columns of `agent_impact` (the project is the partition).
fn columns(c: Columns<'_, Row>) -> Columns<'_, Row> {
    c.int("firing_id", false, |r| Some(r.firing_id))
        .text("rule", false, |r| Some(&r.rule))
        .text("job", true, |r| r.job.as_deref())
        .text("job_status", true, |r| r.job_status.as_deref())
        .text("pr_link", true, |r| r.pr_link.as_deref())
        .time("fired_at", false, |r| Some(r.fired_at))
        .text("key", false, |r| Some(&r.key))
        .text("metric", false, |r| Some(&r.metric))
        .text("better", false, |r| Some(r.better.as_str()))
        .real("before", |r| r.before)
        .real("after", |r| r.after)
        .real("change", Row::change)
        .real("relative_change", Row::relative)
        .text("verdict", false, |r| Some(r.verdict.as_str()))
        .flag("enough_data", |r| r.enough)
        .int("rows_before", true, |r| r.rows_before)
        .int("rows_after", true, |r| r.rows_after)
        .int("days_before", false, |r| Some(r.days_before.days))
        .int("days_after", false, |r| Some(r.days_after.days))
        .date("before_from", |r| r.days_before.from)
        .date("before_to", |r| r.days_before.to)
        .date("after_from", |r| r.days_after.from)
        .date("after_to", |r| r.days_after.to)
        .time("measured_at", false, |r| Some(r.measured_at))
}

/// Schema of `agent_impact` (the project is the partition).
pub fn schema() -> arrow_schema::SchemaRef {
    derived::schema(columns)
}

/// Writes `agent_impact/project=<p>/part-00000.parquet` for each project of `rows`.
pub fn write(out: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, WriteError> {
    derived::write(out, AGENT_IMPACT, rows, |r| &r.project, columns)
}

/// `agent_impact`'s files as a frame, each column in the type [`read`] takes it in.
fn frame(root: &Path) -> PolarsResult<DataFrame> {
    let args = ScanArgsParquet {
        hive_options: HiveOptions::new_enabled(),
        ..Default::default()
    };
    let texts = [
        "project",
        "rule",
        "job",
        "job_status",
        "pr_link",
        "key",
        "metric",
        "better",
        "verdict",
    ];
    let ints = [
        "firing_id",
        "rows_before",
        "rows_after",
        "days_before",
        "days_after",
    ];
    let dates = ["before_from", "before_to", "after_from", "after_to"];
    LazyFrame::scan_parquet(PlRefPath::try_from_path(root)?, args)?
        .with_columns(
            texts
                .map(|c| col(c).cast(DataType::String))
                .into_iter()
                .chain(ints.map(|c| col(c).cast(DataType::Int64)))
                .chain(dates.map(|c| col(c).cast(DataType::Int32).cast(DataType::Int64)))
                .chain(
                    ["fired_at", "measured_at"]
                        .map(|c| col(c).dt().timestamp(TimeUnit::Microseconds)),
                )
                .chain(["before", "after"].map(|c| col(c).cast(DataType::Float64)))
                .collect::<Vec<_>>(),
        )
        .collect()
}

/// The rows of `agent_impact/` in an output folder (none when it has none).
pub fn read(out: &Path) -> Result<Vec<Row>, PolarsError> {
    let root = out.join(AGENT_IMPACT);
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let df = frame(&root)?;
    let text = |c: &str, n| -> PolarsResult<Option<String>> {
        Ok(df.column(c)?.str()?.get(n).map(str::to_string))
    };
    let int = |c: &str, n| -> PolarsResult<Option<i64>> { Ok(df.column(c)?.i64()?.get(n)) };
    let real = |c: &str, n| -> PolarsResult<Option<f64>> { Ok(df.column(c)?.f64()?.get(n)) };
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let days = |from: &str, to: &str, count: &str, n| -> PolarsResult<Days> {
        Ok(Days {
            from: shift(epoch, int(from, n)?.unwrap_or(0)),
            to: shift(epoch, int(to, n)?.unwrap_or(0)),
            days: int(count, n)?.unwrap_or(0),
        })
    };
    let time = |c: &str, n| -> PolarsResult<DateTime<Utc>> {
        Ok(DateTime::from_timestamp_micros(int(c, n)?.unwrap_or(0)).unwrap_or_default())
    };
    let enough = df.column("enough_data")?.bool()?;
    (0..df.height())
        .map(|n| {
            Ok(Row {
                firing_id: int("firing_id", n)?.unwrap_or(0),
                rule: text("rule", n)?.unwrap_or_default(),
                project: text("project", n)?.unwrap_or_default(),
                job: text("job", n)?,
                job_status: text("job_status", n)?,
                pr_link: text("pr_link", n)?,
                fired_at: time("fired_at", n)?,
                key: text("key", n)?.unwrap_or_default(),
                metric: text("metric", n)?.unwrap_or_default(),
                better: text("better", n)?
                    .and_then(|b| b.parse().ok())
                    .unwrap_or(Better::Higher),
                before: real("before", n)?,
                after: real("after", n)?,
                rows_before: int("rows_before", n)?,
                rows_after: int("rows_after", n)?,
                days_before: days("before_from", "before_to", "days_before", n)?,
                days_after: days("after_from", "after_to", "days_after", n)?,
                measured_at: time("measured_at", n)?,
                verdict: text("verdict", n)?
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(Verdict::NoData),
                enough: enough.get(n).unwrap_or(false),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::report::{Counts, count, median};

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
        assert_eq!(
            count(&refs),
            Counts {
                improved: 1,
                stayed: 1,
                worse: 1,
                too_little: 0,
                median_change: Some(0.0)
            }
        );
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), Some(2.5));
    }
}
