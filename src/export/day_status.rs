//! The lake's `day_status` table: what each day of each dataset is, so that a reader of the
//! Parquet files can tell a complete day from one that is not (`final` in `site_totals` means
//! "can no longer change", not "the day is over"). One file a project,
//! `<output>/day_status/project=<id>/part-00000.parquet`, rewritten from the state by each run
//! that wrote a window or saw the day turn.

use super::Exporter;
use crate::dataset::parquet::{WriteError, write_table};
use crate::layout::project_dir;
use crate::store::DayRecord;
use arrow_array::TimestampMicrosecondArray;
use arrow_array::{ArrayRef, Date32Array, Int64Array, StringArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use std::path::PathBuf;
use std::sync::Arc;

/// The table's folder under the output.
pub const DAY_STATUS: &str = "day_status";

/// The day is not over in the project's time zone, or its data were fetched before it ended:
/// they cover part of it.
pub const PARTIAL: &str = "partial";
/// Over and fetched after its end, within the lateness allowance: it may still change.
pub const PROVISIONAL: &str = "provisional";
/// Past the lateness allowance and fetched after it: it can no longer change.
pub const FINAL: &str = "final";

/// What a day is, `now` in `tz`.
pub fn status_of(r: &DayRecord, tz: Tz, now: DateTime<Utc>) -> &'static str {
    if r.is_final {
        return FINAL;
    }
    let over_at = r
        .day
        .succ_opt()
        .map(|next| crate::api::views::local_midnight(next, tz).with_timezone(&Utc));
    match over_at {
        Some(end) if now >= end && r.fetched_at.is_some_and(|f| f >= end) => PROVISIONAL,
        _ => PARTIAL,
    }
}

/// The table's columns (`project` is the folder's Hive partition).
pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("dataset", DataType::Utf8, false),
        Field::new("date", DataType::Date32, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("timezone", DataType::Utf8, false),
        Field::new(
            "fetched_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("requests", DataType::Int64, false),
        Field::new("rows", DataType::Int64, false),
    ]))
}

impl Exporter {
    /// Rewrites the `day_status` of each of `projects` from the state (a project with no day
    /// recorded has none).
    pub fn write_day_status(&self, projects: &[String]) -> Result<Vec<PathBuf>, WriteError> {
        let records = self.state().day_records().map_err(|e| WriteError::Encode {
            path: DAY_STATUS.to_string(),
            message: e.to_string(),
        })?;
        let now = self.clock.now();
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
        let mut written = Vec::new();
        for project in projects {
            let rows: Vec<&DayRecord> = records.iter().filter(|r| &r.project == project).collect();
            if rows.is_empty() {
                continue;
            }
            let text = |f: &dyn Fn(&DayRecord) -> String| -> ArrayRef {
                Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
            };
            let cols: Vec<ArrayRef> = vec![
                text(&|r| r.dataset.clone()),
                Arc::new(Date32Array::from_iter_values(
                    rows.iter().map(|r| (r.day - epoch).num_days() as i32),
                )),
                text(&|r| status_of(r, self.tz, now).to_string()),
                text(&|_| self.tz.name().to_string()),
                Arc::new(
                    rows.iter()
                        .map(|r| r.fetched_at.map(|t| t.timestamp_micros()))
                        .collect::<TimestampMicrosecondArray>()
                        .with_timezone("UTC"),
                ),
                Arc::new(Int64Array::from_iter_values(
                    rows.iter().map(|r| r.requests as i64),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.rows))),
            ];
            let dir = project_dir(self.folder.path(), DAY_STATUS, project);
            written.push(write_table(&dir, schema(), cols)?);
        }
        Ok(written)
    }
}
