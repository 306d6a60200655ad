//! The `windows` table: what was written for each project-day, and whether it is final.

use super::sql::Value;
use super::{Store, StoreError};
use crate::api::views::Counts;
use chrono::{DateTime, NaiveDate, Utc};

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
        let p = vec![Value::from(project)];
        self.sql.read(move |tx| {
            let mut out = std::collections::HashMap::new();
            for r in tx.rows(
                "SELECT day, final, rows, mismatch FROM windows WHERE project = ?1",
                &p,
            )? {
                if let Ok(d) = NaiveDate::parse_from_str(&r.text(0)?, "%Y-%m-%d") {
                    out.insert(
                        d,
                        WindowState {
                            is_final: r.int(1)? != 0,
                            rows: r.opt_int(2)?,
                            mismatch: r.opt_text(3)?,
                        },
                    );
                }
            }
            Ok(out)
        })
    }

    /// The time zone of the folder's days: the one recorded, or `tz` when none is (folders
    /// written before the setting existed are UTC).
    pub fn claim_timezone(&self, tz: &str) -> Result<String, StoreError> {
        let tz = tz.to_string();
        self.sql.tx(move |tx| {
            if let Some(r) = tx.row("SELECT value FROM settings WHERE key = 'timezone'", &[])? {
                return r.text(0);
            }
            let any = tx
                .row("SELECT COUNT(*) FROM windows", &[])?
                .map_or(Ok(0), |r| r.int(0))?;
            let zone = if any > 0 {
                "UTC".to_string()
            } else {
                tz.clone()
            };
            tx.exec(
                "INSERT INTO settings (key, value) VALUES ('timezone', ?1)
                 ON CONFLICT (key) DO NOTHING",
                &[zone.clone().into()],
            )?;
            // Another process may have recorded one first (PostgreSQL): its stands.
            tx.row("SELECT value FROM settings WHERE key = 'timezone'", &[])?
                .map_or(Ok(zone), |r| r.text(0))
        })
    }

    /// Records a written window and ends its walk, in one transaction; then removes the journal.
    pub fn finish(&self, done: &WrittenWindow) -> Result<(), StoreError> {
        let p = vec![
            Value::from(done.project.as_str()),
            done.day.into(),
            done.is_final.into(),
            done.rows.into(),
            done.totals.human.into(),
            done.totals.ai.into(),
            done.totals.total.into(),
            (done.requests as i64).into(),
            done.mismatch.clone().into(),
            done.at.to_rfc3339().into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO windows (project, day, final, rows, human, ai, total, requests, mismatch, done_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (project, day) DO UPDATE SET final = excluded.final, rows = excluded.rows,
                   human = excluded.human, ai = excluded.ai, total = excluded.total,
                   requests = excluded.requests, mismatch = excluded.mismatch, done_at = excluded.done_at",
                &p,
            )?;
            super::walks::end_walk(tx, &p[0], &p[1])
        })?;
        // Killed before this, the journal belongs to no walk: ignored, and swept at the next open.
        self.remove_journal(&done.project, done.day)
    }

    /// The most recent row count of a project (for estimates), if any.
    pub fn recent_rows(&self, project: &str) -> Result<Option<i64>, StoreError> {
        let p = vec![Value::from(project)];
        self.sql.read(move |tx| {
            tx.row(
                "SELECT rows FROM windows WHERE project = ?1 AND rows IS NOT NULL ORDER BY day DESC LIMIT 1",
                &p,
            )?
            .map(|r| r.int(0))
            .transpose()
        })
    }
}
