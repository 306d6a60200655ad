//! When each day of each dataset was last looked at (walked or probed) and last changed, with
//! the fingerprint of what was stored (a day's totals) that a probe compares; when each span
//! was last walked, recent days and full re-check apart. What the planner decides from.

use super::sql::{Row, SqlError, Value};
use super::{Store, StoreError};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::HashMap;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS freshness (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    day TEXT NOT NULL,
    fingerprint TEXT,
    checked_at TEXT NOT NULL,
    changed_at TEXT NOT NULL,
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
const LOOK: &str = "day, checked_at, changed_at, fingerprint";

fn look_row(r: &Row) -> Result<(NaiveDate, Look), SqlError> {
    Ok((
        r.day(0)?,
        Look {
            checked_at: r.time(1)?,
            changed_at: r.time(2)?,
            fingerprint: r.opt_text(3)?,
        },
    ))
}

fn three(dataset: &str, project: &str, day: NaiveDate) -> Vec<Value> {
    vec![Value::from(dataset), project.into(), day.into()]
}

/// What the state knows of a span stream, read in one place for the plan, the plan view,
/// `status` and the staleness: its last walk and full re-check, and the last day a walk
/// reached. What its walks cost is a query over its windows, read only where a walk is planned
/// ([`Store::span_cost`]): reading it for every stream of every render doubled the status
/// page's time at 50 projects x 8 datasets x 365 days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpanState {
    /// When it was last walked, and last walked whole.
    pub look: SpanLook,
    /// The last day a walk reached (none: never walked).
    pub through: Option<NaiveDate>,
}

impl Store {
    /// A span stream's state (see [`SpanState`]).
    pub fn span_state(&self, dataset: &str, project: &str) -> Result<SpanState, StoreError> {
        Ok(SpanState {
            look: self.span_look(dataset, project)?,
            through: self.span_through(dataset, project)?,
        })
    }

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
        let mut p = three(dataset, project, day);
        let fingerprint = fingerprint.map(str::to_string);
        p.push(fingerprint.clone().into());
        p.push(at.to_rfc3339().into());
        self.sql.tx(move |tx| {
            let old = tx.row(
                "SELECT fingerprint FROM freshness WHERE dataset = ?1 AND project = ?2 AND day = ?3",
                &p[..3],
            )?;
            let old = old.map(|r| r.opt_text(0)).transpose()?;
            let changed = match (&old, &fingerprint) {
                (Some(Some(o)), Some(n)) => o != n,
                _ => true,
            };
            let mut p = p.clone();
            p.push(Value::Int(i64::from(changed)));
            tx.exec(
                "INSERT INTO freshness (dataset, project, day, fingerprint, checked_at, changed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT (dataset, project, day) DO UPDATE SET
                   fingerprint = excluded.fingerprint,
                   checked_at = excluded.checked_at,
                   changed_at = CASE WHEN ?6 = 1 THEN excluded.checked_at ELSE freshness.changed_at END",
                &p,
            )?;
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
        let p = three(dataset, project, day);
        self.sql.read(move |tx| {
            tx.row(
                &format!(
                    "SELECT {LOOK} FROM freshness WHERE dataset = ?1 AND project = ?2 AND day = ?3"
                ),
                &p,
            )?
            .map(|r| look_row(&r).map(|(_, l)| l))
            .transpose()
        })
    }

    /// The newest day of a dataset and project that was looked at, and that look.
    pub fn newest_look(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<Option<(NaiveDate, Look)>, StoreError> {
        let p = vec![Value::from(dataset), project.into()];
        self.sql.read(move |tx| {
            tx.row(
                &format!(
                    "SELECT {LOOK} FROM freshness WHERE dataset = ?1 AND project = ?2 ORDER BY day DESC LIMIT 1"
                ),
                &p,
            )?
            .map(|r| look_row(&r))
            .transpose()
        })
    }

    /// The last look at every day of a dataset and project.
    pub fn looks(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<HashMap<NaiveDate, Look>, StoreError> {
        let p = vec![Value::from(dataset), project.into()];
        self.sql.read(move |tx| {
            tx.rows(
                &format!("SELECT {LOOK} FROM freshness WHERE dataset = ?1 AND project = ?2"),
                &p,
            )?
            .iter()
            .map(look_row)
            .collect()
        })
    }

    /// Records a span's walk at `at` (`full`: it was the full re-check, counted from
    /// `stagger` before `at` so that the next one falls due that much earlier).
    pub fn span_walked(
        &self,
        dataset: &str,
        project: &str,
        full: bool,
        at: DateTime<Utc>,
        stagger: chrono::Duration,
    ) -> Result<(), StoreError> {
        let p = vec![
            Value::from(dataset),
            project.into(),
            at.to_rfc3339().into(),
            full.into(),
            (at - stagger).to_rfc3339().into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO span_looks (dataset, project, walked_at, full_at)
                 VALUES (?1, ?2, ?3, CASE WHEN ?4 = 1 THEN ?5 END)
                 ON CONFLICT (dataset, project) DO UPDATE SET walked_at = excluded.walked_at,
                   full_at = CASE WHEN ?4 = 1 THEN ?5 ELSE span_looks.full_at END",
                &p,
            )
            .map(|_| ())
        })
    }

    /// When a span was last walked, and last walked whole.
    pub(super) fn span_look(&self, dataset: &str, project: &str) -> Result<SpanLook, StoreError> {
        let p = vec![Value::from(dataset), project.into()];
        self.sql.read(move |tx| {
            let Some(r) = tx.row(
                "SELECT walked_at, full_at FROM span_looks WHERE dataset = ?1 AND project = ?2",
                &p,
            )?
            else {
                return Ok(SpanLook::default());
            };
            Ok(SpanLook {
                walked_at: Some(r.time(0)?),
                full_at: r.opt_text(1)?.map(|_| r.time(1)).transpose()?,
            })
        })
    }

    /// Marks a day of a dataset final (a probe found it unchanged past the lateness
    /// allowance); returns the rows it holds.
    pub fn finalize_day(
        &self,
        dataset: &str,
        project: &str,
        day: NaiveDate,
    ) -> Result<i64, StoreError> {
        let p = three(dataset, project, day);
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE windows SET final = 1 WHERE dataset = ?1 AND project = ?2 AND day = ?3",
                &p,
            )?;
            tx.row(
                "SELECT rows FROM windows WHERE dataset = ?1 AND project = ?2 AND day = ?3",
                &p,
            )?
            .map_or(Ok(0), |r| Ok(r.opt_int(0)?.unwrap_or(0)))
        })
    }
}
