//! The backfill queue: ranges `docpipe backfill --queue` left for the daemon.

use super::{Store, StoreError};
use chrono::{DateTime, NaiveDate, Utc};
use rusqlite::params;

/// A backfill queued for the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Row id.
    pub id: i64,
    /// Projects (empty: all configured).
    pub projects: Vec<String>,
    /// First day.
    pub from: NaiveDate,
    /// Last day, included.
    pub to: NaiveDate,
}

impl Store {
    /// Queues a backfill for the daemon (`projects` empty: all).
    pub fn queue_backfill(
        &self,
        projects: &[String],
        from: NaiveDate,
        to: NaiveDate,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "INSERT INTO backfill_queue (projects, from_day, to_day, queued_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                projects.join(","),
                from.to_string(),
                to.to_string(),
                now.to_rfc3339()
            ])?;
            Ok(c.last_insert_rowid())
        })
    }

    /// Queued backfills not drained yet, oldest first.
    pub fn queued(&self) -> Result<Vec<Queued>, StoreError> {
        self.db.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT id, projects, from_day, to_day FROM backfill_queue WHERE done_at IS NULL ORDER BY id",
            )?;
            let rows = st.query_map([], |r| {
                let projects: String = r.get(1)?;
                let day = |i: usize| -> rusqlite::Result<NaiveDate> {
                    let s: String = r.get(i)?;
                    s.parse().map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
                    })
                };
                Ok(Queued {
                    id: r.get(0)?,
                    projects: projects
                        .split(',')
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect(),
                    from: day(2)?,
                    to: day(3)?,
                })
            })?;
            rows.collect()
        })
    }

    /// Marks a queued backfill drained.
    pub fn queue_done(&self, id: i64, now: DateTime<Utc>) -> Result<(), StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached("UPDATE backfill_queue SET done_at = ?2 WHERE id = ?1")?
                .execute(params![id, now.to_rfc3339()])
                .map(|_| ())
        })
    }
}
