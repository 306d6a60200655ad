//! The lake's `day_status` table: what each day of each dataset is, so that a reader of the
//! Parquet files can tell a complete day from one that is not (`final` in `site_totals` means
//! "can no longer change", not "the day is over"). One file a project,
//! `<output>/day_status/project=<id>/part-00000.parquet`, rewritten from the state by each run
//! that wrote a window or saw the day turn.

use super::Exporter;
use crate::dataset::derived::{self, Columns};
use crate::dataset::parquet::WriteError;
use crate::store::DayRecord;
use arrow_schema::SchemaRef;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::path::PathBuf;

/// The table's folder under the output.
pub const DAY_STATUS: &str = docpipe_catalog::tables::DAY_STATUS.name;

pub use docpipe_catalog::tables::day_status::{FINAL, PARTIAL, PROVISIONAL};

/// What a day is, `now` in `tz`.
pub fn status_of(r: &DayRecord, tz: Tz, now: DateTime<Utc>) -> &'static str {
    if r.is_final {
        return FINAL;
    }
    let over_at = r
        .day
        .succ_opt()
        .map(|next| crate::calendar::local_midnight(next, tz).with_timezone(&Utc));
    match over_at {
        Some(end) if now >= end && r.fetched_at.is_some_and(|f| f >= end) => PROVISIONAL,
        _ => PARTIAL,
    }
}

/// The table's columns (`project` is the folder's Hive partition), each day's status `now` in
/// `tz`.
fn columns(c: Columns<'_, DayRecord>, tz: Tz, now: DateTime<Utc>) -> Columns<'_, DayRecord> {
    c.text("dataset", false, |r| Some(&r.dataset))
        .date("date", |r| r.day)
        .text("status", false, move |r| Some(status_of(r, tz, now)))
        .text("timezone", false, move |_| Some(tz.name()))
        .time("fetched_at", true, |r| r.fetched_at)
        .int("requests", false, |r| Some(r.requests as i64))
        .int("rows", false, |r| Some(r.rows))
}

/// The table's columns (`project` is the folder's Hive partition).
pub fn schema() -> SchemaRef {
    derived::schema(|c| columns(c, Tz::UTC, DateTime::<Utc>::MIN_UTC))
}

impl Exporter {
    /// Rewrites the `day_status` of each of `projects` from the state (a project with no day
    /// recorded has none).
    pub fn write_day_status(&self, projects: &[String]) -> Result<Vec<PathBuf>, WriteError> {
        let mut records = self.state().day_records().map_err(|e| WriteError::Encode {
            path: DAY_STATUS.to_string(),
            message: e.to_string(),
        })?;
        let wanted: std::collections::HashSet<&str> = projects.iter().map(String::as_str).collect();
        records.retain(|r| wanted.contains(r.project.as_str()));
        let (tz, now) = (self.tz, self.clock.now());
        derived::write(
            self.folder.path(),
            DAY_STATUS,
            &records,
            |r| &r.project,
            |c| columns(c, tz, now),
        )
    }
}
