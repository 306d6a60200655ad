//! When each day of each dataset was last looked at (walked or probed) and last changed, with
//! the fingerprint of what was stored (a day's totals) that a probe compares; when each span
//! was last walked, recent days and full re-check apart. What the planner decides from.

use super::{Store, StoreError};
use chrono::{DateTime, NaiveDate, Utc};
use rusqlite::{OptionalExtension, params};
use std::collections::HashMap;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS freshness (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    day TEXT NOT NULL,
    fingerprint TEXT,
    checked_at TEXT NOT NULL,
    changed_at TEXT NOT NULL,
    looks INTEGER NOT NULL DEFAULT 0,
    changes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (dataset, project, day)
);
CREATE TABLE IF NOT EXISTS span_looks (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    walked_at TEXT NOT NULL,
    full_at TEXT,
    PRIMARY KEY (dataset, project)
);
";

/// What the state knows of a day's last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    /// When it was last walked or probed.
    pub checked_at: DateTime<Utc>,
    /// When what it holds last changed.
    pub changed_at: DateTime<Utc>,
    /// The fingerprint of what is stored (`None`: not to be probed, walk it).
    pub fingerprint: Option<String>,
}

/// When a span was last walked, and last walked whole (its full re-check).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpanLook {
    /// The last walk.
    pub walked_at: Option<DateTime<Utc>>,
    /// The last full re-check.
    pub full_at: Option<DateTime<Utc>>,
}

/// A `freshness` row read as `(day, checked_at, changed_at, fingerprint)`.
fn look_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Look)> {
    Ok((
        r.get(0)?,
        Look {
            checked_at: instant(r.get(1)?)?,
            changed_at: instant(r.get(2)?)?,
            fingerprint: r.get(3)?,
        },
    ))
}

fn instant(s: String) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(&s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
}

impl Store {
    /// Records a look at a day at `at`: what it holds now has `fingerprint` (`None`: written
    /// with a doubt, so the next look walks it). Returns whether it changed since the last
    /// look (true for a first look).
    pub fn looked(
        &self,
        dataset: &str,
        project: &str,
        day: NaiveDate,
        fingerprint: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let at = at.to_rfc3339();
        self.db.with_conn(|c| {
            let old: Option<Option<String>> = c
                .prepare_cached(
                    "SELECT fingerprint FROM freshness WHERE dataset = ?1 AND project = ?2 AND day = ?3",
                )?
                .query_row(params![dataset, project, day.to_string()], |r| r.get(0))
                .optional()?;
            let changed = match (&old, fingerprint) {
                (Some(Some(o)), Some(n)) => o != n,
                _ => true,
            };
            c.prepare_cached(
                "INSERT INTO freshness (dataset, project, day, fingerprint, checked_at, changed_at, looks, changes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, 1, 1)
                 ON CONFLICT (dataset, project, day) DO UPDATE SET
                   fingerprint = excluded.fingerprint,
                   checked_at = excluded.checked_at,
                   changed_at = CASE WHEN ?6 THEN excluded.checked_at ELSE changed_at END,
                   looks = looks + 1,
                   changes = changes + ?6",
            )?
            .execute(params![
                dataset,
                project,
                day.to_string(),
                fingerprint,
                at,
                changed as i64
            ])?;
            Ok(changed)
        })
    }

    /// The last look at one day of a dataset and project, if there was one.
    pub fn look(
        &self,
        dataset: &str,
        project: &str,
        day: NaiveDate,
    ) -> Result<Option<Look>, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT checked_at, changed_at, fingerprint FROM freshness WHERE dataset = ?1 AND project = ?2 AND day = ?3",
            )?
            .query_row(params![dataset, project, day.to_string()], |r| {
                Ok(Look {
                    checked_at: instant(r.get(0)?)?,
                    changed_at: instant(r.get(1)?)?,
                    fingerprint: r.get(2)?,
                })
            })
            .optional()
        })
    }

    /// The newest day of a dataset and project that was looked at, and that look.
    pub fn newest_look(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<Option<(NaiveDate, Look)>, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT day, checked_at, changed_at, fingerprint FROM freshness WHERE dataset = ?1 AND project = ?2 ORDER BY day DESC LIMIT 1",
            )?
            .query_row(params![dataset, project], look_row)
            .optional()
            .map(|row| row.and_then(|(d, l)| d.parse().ok().map(|d| (d, l))))
        })
    }

    /// The last look at every day of a dataset and project.
    pub fn looks(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<HashMap<NaiveDate, Look>, StoreError> {
        self.db.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT day, checked_at, changed_at, fingerprint FROM freshness WHERE dataset = ?1 AND project = ?2",
            )?;
            st.query_map(params![dataset, project], look_row)?
            .filter_map(|row| match row {
                Ok((d, l)) => d.parse().ok().map(|d| Ok((d, l))),
                Err(e) => Some(Err(e)),
            })
            .collect()
        })
    }

    /// The share of looks at a dataset's days (of a project) that found a change, over the
    /// days still looked at (for estimates).
    pub fn change_rate(&self, dataset: &str, project: &str) -> Result<Option<f64>, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT sum(changes), sum(looks) FROM freshness WHERE dataset = ?1 AND project = ?2 AND looks > 1",
            )?
            .query_row(params![dataset, project], |r| {
                let (ch, lo): (Option<i64>, Option<i64>) = (r.get(0)?, r.get(1)?);
                Ok(match (ch, lo) {
                    (Some(ch), Some(lo)) if lo > 0 => Some(ch as f64 / lo as f64),
                    _ => None,
                })
            })
        })
    }

    /// Records a span's walk at `at` (`full`: it was the full re-check).
    pub fn span_walked(
        &self,
        dataset: &str,
        project: &str,
        full: bool,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let at = at.to_rfc3339();
        self.db.with_conn(|c| {
            c.prepare_cached(
                "INSERT INTO span_looks (dataset, project, walked_at, full_at) VALUES (?1, ?2, ?3, CASE WHEN ?4 THEN ?3 END)
                 ON CONFLICT (dataset, project) DO UPDATE SET walked_at = excluded.walked_at,
                   full_at = CASE WHEN ?4 THEN excluded.walked_at ELSE full_at END",
            )?
            .execute(params![dataset, project, at, full as i64])
            .map(|_| ())
        })
    }

    /// When a span was last walked, and last walked whole.
    pub fn span_look(&self, dataset: &str, project: &str) -> Result<SpanLook, StoreError> {
        self.db.with_conn(|c| {
            let got = c
                .prepare_cached(
                    "SELECT walked_at, full_at FROM span_looks WHERE dataset = ?1 AND project = ?2",
                )?
                .query_row(params![dataset, project], |r| {
                    let full: Option<String> = r.get(1)?;
                    Ok(SpanLook {
                        walked_at: Some(instant(r.get(0)?)?),
                        full_at: full.map(instant).transpose()?,
                    })
                })
                .optional()?;
            Ok(got.unwrap_or_default())
        })
    }

    /// Marks a page-view day final (a probe found it unchanged past the lateness allowance).
    pub fn finalize_window(&self, project: &str, day: NaiveDate) -> Result<(), StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached("UPDATE windows SET final = 1 WHERE project = ?1 AND day = ?2")?
                .execute(params![project, day.to_string()])
                .map(|_| ())
        })
    }

    /// Marks a day of another dataset final; returns the rows it holds.
    pub fn finalize_record_day(
        &self,
        dataset: &str,
        project: &str,
        day: NaiveDate,
    ) -> Result<i64, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "UPDATE record_windows SET final = 1 WHERE dataset = ?1 AND project = ?2 AND day = ?3",
            )?
            .execute(params![dataset, project, day.to_string()])?;
            c.prepare_cached(
                "SELECT rows FROM record_windows WHERE dataset = ?1 AND project = ?2 AND day = ?3",
            )?
            .query_row(params![dataset, project, day.to_string()], |r| r.get(0))
            .optional()
            .map(Option::unwrap_or_default)
        })
    }
}
