//! The `windows` table: what was written for each project-day, and whether it is final.

use super::{Store, StoreError};
use crate::api::views::Counts;
use chrono::{DateTime, NaiveDate, Utc};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

/// What the state knows of a window.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowState {
    /// Never fetched again.
    pub is_final: bool,
    /// Rows written last time.
    pub rows: Option<i64>,
    /// A persistent mismatch, if one was recorded.
    pub mismatch: Option<String>,
}

/// A written window, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenWindow {
    /// Project.
    pub project: String,
    /// Day.
    pub day: NaiveDate,
    /// Final.
    pub is_final: bool,
    /// Rows.
    pub rows: i64,
    /// Totals.
    pub totals: Counts,
    /// Requests this walk took.
    pub requests: u64,
    /// Mismatch, if any.
    pub mismatch: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

impl Store {
    /// The state of every window of a project that the database knows.
    pub fn windows(
        &self,
        project: &str,
    ) -> Result<std::collections::HashMap<NaiveDate, WindowState>, StoreError> {
        self.db.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT day, final, rows, mismatch FROM windows WHERE project = ?1",
            )?;
            let rows = st.query_map(params![project], |r| {
                let day: String = r.get(0)?;
                Ok((
                    day,
                    WindowState {
                        is_final: r.get::<_, i64>(1)? != 0,
                        rows: r.get(2)?,
                        mismatch: r.get(3)?,
                    },
                ))
            })?;
            let mut out = std::collections::HashMap::new();
            for row in rows {
                let (day, ws) = row?;
                if let Ok(d) = NaiveDate::parse_from_str(&day, "%Y-%m-%d") {
                    out.insert(d, ws);
                }
            }
            Ok(out)
        })
    }

    /// The time zone of the folder's days: the one recorded, or `tz` when none is (folders
    /// written before the setting existed are UTC).
    pub fn claim_timezone(&self, tz: &str) -> Result<String, StoreError> {
        self.db.with_conn(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let recorded: Option<String> = tx
                .query_row(
                    "SELECT value FROM settings WHERE key = 'timezone'",
                    [],
                    |r| r.get(0),
                )
                .optional()?;
            let zone = match recorded {
                Some(z) => z,
                None => {
                    let any: i64 =
                        tx.query_row("SELECT COUNT(*) FROM windows", [], |r| r.get(0))?;
                    let zone = if any > 0 {
                        "UTC".to_string()
                    } else {
                        tz.to_string()
                    };
                    tx.execute(
                        "INSERT INTO settings (key, value) VALUES ('timezone', ?1)",
                        params![zone],
                    )?;
                    zone
                }
            };
            tx.commit()?;
            Ok(zone)
        })
    }

    /// Records a written window and ends its walk, in one transaction; then removes the journal.
    pub fn finish(&self, done: &WrittenWindow) -> Result<(), StoreError> {
        self.db.with_conn(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.prepare_cached("INSERT OR REPLACE INTO windows (project, day, final, rows, human, ai, total, requests, mismatch, done_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")?.execute(
                params![
                    done.project,
                    done.day.to_string(),
                    done.is_final as i64,
                    done.rows,
                    done.totals.human,
                    done.totals.ai,
                    done.totals.total,
                    done.requests as i64,
                    done.mismatch,
                    done.at.to_rfc3339(),
                ],
            )?;
            tx.prepare_cached("DELETE FROM walks WHERE project = ?1 AND day = ?2")?.execute( params![done.project, done.day.to_string()])?;
            tx.commit()
        })?;
        // Killed before this, the journal belongs to no walk: ignored, and swept at the next open.
        self.remove_journal(&done.project, done.day)
    }

    /// The most recent row count of a project (for estimates), if any.
    pub fn recent_rows(&self, project: &str) -> Result<Option<i64>, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached("SELECT rows FROM windows WHERE project = ?1 AND rows IS NOT NULL ORDER BY day DESC LIMIT 1")?.query_row(
                params![project],
                |r| r.get(0),
            )
            .optional()
        })
    }
}
