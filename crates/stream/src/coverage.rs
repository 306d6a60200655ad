//! How much of the API's counts the stream holds: per project and day, the stream's human and
//! agent page views (`agent_daily`) against the API's `human` and `ai` (`site_totals`), so a
//! user learns on their own account whether agents' fetches are in the stream.

use crate::day::{Day, column, reads_of};
use arrow_array::{Array, Int64Array};
use chrono::NaiveDate;
use docpipe_catalog::layout::{PART, partition_days, partition_dir, project_dir};
use docpipe_catalog::tables;
use docpipe_write::derived::Columns;
use docpipe_write::parquet::{WriteError, read_file};
use std::path::{Path, PathBuf};

/// One day of a project's coverage.
#[derive(Debug, Clone, PartialEq)]
pub struct Covered {
    /// The local day.
    pub date: NaiveDate,
    /// The stream's human page views.
    pub stream_human: i64,
    /// The stream's agent page views.
    pub stream_ai: i64,
    /// The API's human views (`None`: the day is not exported).
    pub api_human: Option<i64>,
    /// The API's ai views.
    pub api_ai: Option<i64>,
}

impl Covered {
    /// The stream's share of the API's human views.
    pub fn human_coverage(&self) -> Option<f64> {
        ratio(self.stream_human, self.api_human)
    }

    /// The stream's share of the API's ai views.
    pub fn ai_coverage(&self) -> Option<f64> {
        ratio(self.stream_ai, self.api_ai)
    }
}

fn ratio(stream: i64, api: Option<i64>) -> Option<f64> {
    api.filter(|a| *a > 0).map(|a| stream as f64 / a as f64)
}

/// The API's (human, ai) of a day, from its `site_totals` partition.
fn api_of(out: &Path, project: &str, date: NaiveDate) -> Result<Option<(i64, i64)>, WriteError> {
    let file = partition_dir(out, tables::SITE_TOTALS.name, project, date).join(PART);
    if !file.is_file() {
        return Ok(None);
    }
    let mut sums = (0, 0);
    for b in read_file(&file)? {
        let col = |name: &str| {
            column::<Int64Array>(&b, name)
                .map(|a| (0..a.len()).map(|i| a.value(i)).sum::<i64>())
                .map_err(|message| WriteError::Encode {
                    path: file.display().to_string(),
                    message,
                })
        };
        sums.0 += col("human")?;
        sums.1 += col("ai")?;
    }
    Ok(Some(sums))
}

/// Every day of `project` the stream holds, with the API's counts beside.
pub fn coverage(out: &Path, project: &str) -> Result<Vec<Covered>, WriteError> {
    let mut days: Vec<NaiveDate> = partition_days(out, tables::AGENT_DAILY.name, project)
        .into_iter()
        .collect();
    days.sort();
    let mut rows = Vec::new();
    for date in days {
        let day = Day { out, project, date };
        let Some((stream_human, stream_ai)) = reads_of(&day)? else {
            continue;
        };
        let api = api_of(out, project, date)?;
        rows.push(Covered {
            date,
            stream_human,
            stream_ai,
            api_human: api.map(|a| a.0),
            api_ai: api.map(|a| a.1),
        });
    }
    Ok(rows)
}

/// Writes `stream_coverage/project=<p>/part-00000.parquet` from [`coverage`]; returns its rows.
pub fn write_coverage(
    out: &Path,
    project: &str,
) -> Result<(Vec<Covered>, Option<PathBuf>), WriteError> {
    let rows = coverage(out, project)?;
    if rows.is_empty() {
        return Ok((rows, None));
    }
    let dir = project_dir(out, tables::STREAM_COVERAGE.name, project);
    let file = Columns::new(&rows)
        .date("date", |r| r.date)
        .int("stream_human", false, |r| Some(r.stream_human))
        .int("stream_ai", false, |r| Some(r.stream_ai))
        .int("api_human", true, |r| r.api_human)
        .int("api_ai", true, |r| r.api_ai)
        .real("human_coverage", Covered::human_coverage)
        .real("ai_coverage", Covered::ai_coverage)
        .write_in(&dir)?;
    Ok((rows, Some(file)))
}

/// A project's coverage summed over the days its `stream_coverage` file has the API's counts
/// for: `(days, stream_ai, api_ai)` (`None`: no file).
pub fn summed(out: &Path, project: &str) -> Result<Option<(u64, i64, i64)>, WriteError> {
    let file = project_dir(out, tables::STREAM_COVERAGE.name, project).join(PART);
    if !file.is_file() {
        return Ok(None);
    }
    let mut sums = (0, 0, 0);
    for b in read_file(&file)? {
        let col = |name: &str| {
            column::<Int64Array>(&b, name).map_err(|message| WriteError::Encode {
                path: file.display().to_string(),
                message,
            })
        };
        let (stream, api) = (col("stream_ai")?, col("api_ai")?);
        for i in 0..b.num_rows() {
            if !api.is_null(i) {
                sums.0 += 1;
                sums.1 += stream.value(i);
                sums.2 += api.value(i);
            }
        }
    }
    Ok(Some(sums))
}
