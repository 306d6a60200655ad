//! The state of the datasets described by a shape: the pages of walks in progress (their
//! bodies as the service sent them, so that a killed run resumes at the next page), their days
//! written (into the one `windows` table), the last day a span walk reached, and the threads
//! fetched.

use super::sql::{Row, SqlError, Value};
use super::{Store, StoreError};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::HashSet;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS record_pages (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    from_day TEXT NOT NULL,
    to_day TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (dataset, project, from_day, seq)
);
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

/// A walk's window: the days `from..to` (exclusive) of a dataset and project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordWalk {
    /// Dataset.
    pub dataset: &'static str,
    /// Project.
    pub project: String,
    /// First day.
    pub from: NaiveDate,
    /// The day after the last.
    pub to: NaiveDate,
}

/// What a finished window writes to the state.
#[derive(Debug, Clone)]
pub struct RecordsWritten<'a> {
    /// The walk.
    pub walk: &'a RecordWalk,
    /// Rows written per day (every day of the window, zero included).
    pub days: &'a [(NaiveDate, i64)],
    /// Whether the days are final.
    pub is_final: bool,
    /// Requests the window took.
    pub requests: u64,
    /// For a span walk: the day it reached (its `to`), recorded as the dataset's mark.
    pub span: bool,
    /// When.
    pub at: DateTime<Utc>,
}

fn walk_params(w: &RecordWalk) -> Vec<Value> {
    vec![
        Value::from(w.dataset),
        w.project.as_str().into(),
        w.from.into(),
        w.to.into(),
    ]
}

fn two(a: &str, b: &str) -> Vec<Value> {
    vec![Value::from(a), Value::from(b)]
}

impl Store {
    /// Stores a page of a walk (`seq` from 0; the first forgets any other walk of the dataset
    /// and project).
    pub fn put_record_page(&self, w: &RecordWalk, seq: u64, body: &[u8]) -> Result<(), StoreError> {
        let mut p = walk_params(w);
        p.push(Value::Int(seq as i64));
        p.push(body.to_vec().into());
        self.sql.tx(move |tx| {
            if seq == 0 {
                tx.exec(
                    "DELETE FROM record_pages WHERE dataset = ?1 AND project = ?2",
                    &p[..2],
                )?;
            }
            tx.exec(
                "INSERT INTO record_pages (dataset, project, from_day, to_day, seq, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (dataset, project, from_day, seq)
                 DO UPDATE SET to_day = excluded.to_day, body = excluded.body",
                &p,
            )
            .map(|_| ())
        })
    }

    /// The stored pages of a walk, in order.
    pub fn record_pages(&self, w: &RecordWalk) -> Result<Vec<Vec<u8>>, StoreError> {
        let p = walk_params(w);
        self.sql.read(move |tx| {
            tx.rows(
                "SELECT body FROM record_pages WHERE dataset = ?1 AND project = ?2 AND from_day = ?3 AND to_day = ?4 ORDER BY seq",
                &p,
            )?
            .iter()
            .map(|r| r.blob(0))
            .collect()
        })
    }

    /// How many pages of a walk are stored.
    pub fn record_page_count(&self, w: &RecordWalk) -> Result<u64, StoreError> {
        let p = walk_params(w);
        self.sql.read(move |tx| {
            tx.row(
                "SELECT count(*) FROM record_pages WHERE dataset = ?1 AND project = ?2 AND from_day = ?3 AND to_day = ?4",
                &p,
            )?
            .map_or(Ok(0), |r| r.int(0))
            .map(|n| n as u64)
        })
    }

    /// The walk in progress of a dataset and project, if any.
    pub fn record_walk(
        &self,
        dataset: &'static str,
        project: &str,
    ) -> Result<Option<RecordWalk>, StoreError> {
        let p = two(dataset, project);
        let found = self.sql.read(move |tx| {
            tx.row(
                "SELECT from_day, to_day FROM record_pages WHERE dataset = ?1 AND project = ?2 LIMIT 1",
                &p,
            )?
            .map(|r| Ok((r.day(0)?, r.day(1)?)))
            .transpose()
        })?;
        Ok(found.map(|(from, to)| RecordWalk {
            dataset,
            project: project.to_string(),
            from,
            to,
        }))
    }

    /// Forgets the stored pages of a walk (to walk it again).
    pub fn drop_record_pages(&self, w: &RecordWalk) -> Result<(), StoreError> {
        let p = two(w.dataset, &w.project);
        self.sql.tx(move |tx| {
            tx.exec(
                "DELETE FROM record_pages WHERE dataset = ?1 AND project = ?2",
                &p,
            )
            .map(|_| ())
        })
    }

    /// Records the days a walk wrote and ends it, in one transaction.
    pub fn finish_records(&self, done: &RecordsWritten<'_>) -> Result<(), StoreError> {
        let w = done.walk;
        let base = [
            Value::from(w.dataset),
            w.project.as_str().into(),
            w.to.into(),
            done.at.to_rfc3339().into(),
            done.is_final.into(),
            (done.requests as i64).into(),
        ];
        let days: Vec<(NaiveDate, i64)> = done.days.to_vec();
        let span = done.span;
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
                        base[4].clone(),
                        Value::Int(*rows),
                        base[5].clone(),
                        base[3].clone(),
                    ],
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
            tx.exec(
                "DELETE FROM record_pages WHERE dataset = ?1 AND project = ?2",
                &base[..2],
            )
            .map(|_| ())
        })
    }

    /// The most requests one of the latest 7 windows took (for estimates), if any.
    pub fn recent_requests(&self, dataset: &str, project: &str) -> Result<Option<i64>, StoreError> {
        let p = two(dataset, project);
        self.sql.read(move |tx| {
            tx.row(
                "SELECT max(requests) FROM (SELECT requests FROM windows WHERE dataset = ?1 AND project = ?2 ORDER BY day DESC LIMIT 7) AS latest",
                &p,
            )?
            .map_or(Ok(None), |r| r.opt_int(0))
        })
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
    pub fn span_through(
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
