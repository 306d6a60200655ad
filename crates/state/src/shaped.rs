//! The state of the datasets described by a shape: their days written (into the one `windows`
//! table), the last day a span walk reached, and the threads fetched.

use super::sql::{Row, SqlError, Value};
use super::{Store, StoreError, WalkKey};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::HashSet;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS record_spans (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    through TEXT NOT NULL,
    done_at TEXT NOT NULL,
    PRIMARY KEY (dataset, project)
);
CREATE TABLE IF NOT EXISTS threads_fetched (
    project TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    messages INTEGER NOT NULL,
    done_at TEXT NOT NULL,
    PRIMARY KEY (project, thread_id)
);
";

/// What a finished window writes to the state.
#[derive(Debug, Clone)]
pub struct ShapedWritten<'a> {
    /// The walk.
    pub walk: &'a WalkKey,
    /// Rows written per day (every day of the window, zero included).
    pub days: &'a [(NaiveDate, i64)],
    /// Whether the days are final.
    pub is_final: bool,
    /// A span's last final day (the exporter's `ShapedSettings::settled_through`): its days
    /// written on or before it are final, and so are those an earlier walk wrote (no walk
    /// reads them again).
    pub settled: Option<NaiveDate>,
    /// Requests the window took.
    pub requests: u64,
    /// For a span walk: the day it reached (its `to`), recorded as the dataset's mark.
    pub span: bool,
    /// When.
    pub at: DateTime<Utc>,
}

/// Whether a day a walk wrote is final: the walk's days are, or the span's day is settled.
fn done_final(is_final: bool, settled: Option<NaiveDate>, day: NaiveDate) -> bool {
    is_final || settled.is_some_and(|s| day <= s)
}

fn two(a: &str, b: &str) -> Vec<Value> {
    vec![Value::from(a), Value::from(b)]
}

impl Store {
    /// Records the days a walk wrote and ends it, in one transaction.
    pub fn finish_shaped(&self, done: &ShapedWritten<'_>) -> Result<(), StoreError> {
        let w = done.walk;
        let base = [
            Value::from(w.dataset),
            w.project.as_str().into(),
            w.to.into(),
            done.at.to_rfc3339().into(),
            done.is_final.into(),
            (done.requests as i64).into(),
        ];
        let settled = done.settled;
        let done_is_final = done.is_final;
        let days: Vec<(NaiveDate, i64)> = done.days.to_vec();
        let span = done.span;
        let walk = w.clone();
        self.sql.tx(move |tx| {
            for (d, rows) in &days {
                tx.exec(
                    "INSERT INTO windows (dataset, project, day, final, rows, requests, done_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (dataset, project, day) DO UPDATE SET final = excluded.final,
                       rows = excluded.rows, requests = excluded.requests, done_at = excluded.done_at",
                    &[
                        base[0].clone(),
                        base[1].clone(),
                        (*d).into(),
                        (done_final(done_is_final, settled, *d)).into(),
                        Value::Int(*rows),
                        base[5].clone(),
                        base[3].clone(),
                    ],
                )?;
            }
            if let Some(s) = settled {
                tx.exec(
                    "UPDATE windows SET final = 1 WHERE dataset = ?1 AND project = ?2 AND day <= ?3 AND final = 0",
                    &[base[0].clone(), base[1].clone(), s.into()],
                )?;
            }
            if span {
                tx.exec(
                    "INSERT INTO record_spans (dataset, project, through, done_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (dataset, project) DO UPDATE SET through = excluded.through,
                       done_at = excluded.done_at",
                    &base[..4],
                )?;
            }
            super::pages::end(tx, &walk)
        })?;
        self.walk_ended(w)
    }

    /// Whether every day of `from..to` of a dataset was written after `since` (by any process
    /// sharing the state).
    pub fn days_written_since(
        &self,
        dataset: &str,
        project: &str,
        (from, to): (NaiveDate, NaiveDate),
        since: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut p = two(dataset, project);
        p.extend([Value::from(from), Value::from(to)]);
        let done: Vec<Option<DateTime<Utc>>> = self.sql.read(move |tx| {
            tx.rows(
                "SELECT done_at FROM windows WHERE dataset = ?1 AND project = ?2
                 AND day >= ?3 AND day < ?4",
                &p,
            )?
            .iter()
            .map(|r| {
                Ok(DateTime::parse_from_rfc3339(&r.text(0)?)
                    .ok()
                    .map(|d| d.to_utc()))
            })
            .collect()
        })?;
        let days = (to - from).num_days().max(0) as usize;
        Ok(done.len() == days && done.iter().all(|d| d.is_some_and(|d| d > since)))
    }

    /// A span's latest walk: the most requests a day took and how many days it wrote.
    pub fn span_cost(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<Option<(u64, u64)>, StoreError> {
        let p = two(dataset, project);
        self.sql.read(move |tx| {
            tx.row(
                "SELECT max(requests), count(*) FROM windows WHERE dataset = ?1 AND project = ?2
                 GROUP BY done_at ORDER BY done_at DESC LIMIT 1",
                &p,
            )?
            .map(|r: Row| Ok((r.int(0)?.max(0) as u64, r.int(1)?.max(1) as u64)))
            .transpose()
        })
    }

    /// The end (excluded) of a span's latest walk, if any.
    pub(super) fn span_through(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<Option<NaiveDate>, StoreError> {
        let p = two(dataset, project);
        self.sql.read(move |tx| {
            tx.row(
                "SELECT through FROM record_spans WHERE dataset = ?1 AND project = ?2",
                &p,
            )?
            .map(|r| r.day(0))
            .transpose()
        })
    }

    /// The threads of a project already fetched.
    pub fn threads_fetched(&self, project: &str) -> Result<HashSet<String>, StoreError> {
        let p = vec![Value::from(project)];
        self.sql.read(move |tx| {
            tx.rows(
                "SELECT thread_id FROM threads_fetched WHERE project = ?1",
                &p,
            )?
            .iter()
            .map(|r| r.text(0))
            .collect::<Result<HashSet<String>, SqlError>>()
        })
    }

    /// Records a thread fetched.
    pub fn thread_fetched(
        &self,
        project: &str,
        thread: &str,
        messages: i64,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let p = vec![
            Value::from(project),
            thread.into(),
            messages.into(),
            at.to_rfc3339().into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO threads_fetched (project, thread_id, messages, done_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (project, thread_id) DO UPDATE SET messages = excluded.messages,
                   done_at = excluded.done_at",
                &p,
            )
            .map(|_| ())
        })
    }
}
