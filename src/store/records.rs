//! The state of the datasets read through the generic walk: the pages of walks in progress
//! (their bodies as the service sent them, so that a killed run resumes at the next page), the
//! days written, the last day a span walk reached, and the threads fetched.

use super::{Store, StoreError};
use chrono::{DateTime, NaiveDate, Utc};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use std::collections::{HashMap, HashSet};

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
CREATE TABLE IF NOT EXISTS record_windows (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    day TEXT NOT NULL,
    final INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    done_at TEXT NOT NULL,
    PRIMARY KEY (dataset, project, day)
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

fn day(s: String) -> rusqlite::Result<NaiveDate> {
    s.parse().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

impl Store {
    /// Stores page `seq` of a walk; page 0 starts it (dropping pages an earlier walk of the
    /// same window left).
    pub fn put_record_page(&self, w: &RecordWalk, seq: u64, body: &[u8]) -> Result<(), StoreError> {
        self.db.with_conn(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if seq == 0 {
                tx.prepare_cached("DELETE FROM record_pages WHERE dataset = ?1 AND project = ?2")?
                    .execute(params![w.dataset, w.project])?;
            }
            tx.prepare_cached(
                "INSERT OR REPLACE INTO record_pages (dataset, project, from_day, to_day, seq, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                w.dataset,
                w.project,
                w.from.to_string(),
                w.to.to_string(),
                seq as i64,
                body
            ])?;
            tx.commit()
        })
    }

    /// The stored pages of a walk, in order.
    pub fn record_pages(&self, w: &RecordWalk) -> Result<Vec<Vec<u8>>, StoreError> {
        self.db.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT body FROM record_pages WHERE dataset = ?1 AND project = ?2 AND from_day = ?3 AND to_day = ?4 ORDER BY seq",
            )?;
            st.query_map(
                params![w.dataset, w.project, w.from.to_string(), w.to.to_string()],
                |r| r.get(0),
            )?
            .collect()
        })
    }

    /// How many pages of a walk are stored (without reading them).
    pub fn record_page_count(&self, w: &RecordWalk) -> Result<u64, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT count(*) FROM record_pages WHERE dataset = ?1 AND project = ?2 AND from_day = ?3 AND to_day = ?4",
            )?
            .query_row(
                params![w.dataset, w.project, w.from.to_string(), w.to.to_string()],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
        })
    }

    /// The walk in progress of a dataset and project (one at a time: a new one drops it).
    pub fn record_walk(
        &self,
        dataset: &'static str,
        project: &str,
    ) -> Result<Option<RecordWalk>, StoreError> {
        let found = self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT from_day, to_day FROM record_pages WHERE dataset = ?1 AND project = ?2 LIMIT 1",
            )?
            .query_row(params![dataset, project], |r| {
                Ok((day(r.get(0)?)?, day(r.get(1)?)?))
            })
            .optional()
        })?;
        Ok(found.map(|(from, to)| RecordWalk {
            dataset,
            project: project.to_string(),
            from,
            to,
        }))
    }

    /// Drops a walk's pages (to walk it again from the start).
    pub fn drop_record_pages(&self, w: &RecordWalk) -> Result<(), StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached("DELETE FROM record_pages WHERE dataset = ?1 AND project = ?2")?
                .execute(params![w.dataset, w.project])
                .map(|_| ())
        })
    }

    /// Records a written window and ends its walk, in one transaction.
    pub fn finish_records(&self, done: &RecordsWritten<'_>) -> Result<(), StoreError> {
        let w = done.walk;
        let at = done.at.to_rfc3339();
        self.db.with_conn(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut put = tx.prepare_cached(
                    "INSERT OR REPLACE INTO record_windows (dataset, project, day, final, rows, requests, done_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?;
                for (d, rows) in done.days {
                    put.execute(params![
                        w.dataset,
                        w.project,
                        d.to_string(),
                        done.is_final as i64,
                        rows,
                        done.requests as i64,
                        at
                    ])?;
                }
            }
            if done.span {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO record_spans (dataset, project, through, done_at) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![w.dataset, w.project, w.to.to_string(), at])?;
            }
            tx.prepare_cached("DELETE FROM record_pages WHERE dataset = ?1 AND project = ?2")?
                .execute(params![w.dataset, w.project])?;
            tx.commit()
        })
    }

    /// The days written of a dataset and project, with whether each is final.
    pub fn record_days(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<HashMap<NaiveDate, bool>, StoreError> {
        self.db.with_conn(|c| {
            let mut st = c.prepare_cached(
                "SELECT day, final FROM record_windows WHERE dataset = ?1 AND project = ?2",
            )?;
            st.query_map(params![dataset, project], |r| {
                Ok((day(r.get(0)?)?, r.get::<_, i64>(1)? != 0))
            })?
            .collect()
        })
    }

    /// The most requests one of the latest 7 windows of a dataset and project took (for
    /// estimates: today's window is young and small), if any.
    pub fn recent_requests(&self, dataset: &str, project: &str) -> Result<Option<i64>, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT max(requests) FROM (SELECT requests FROM record_windows WHERE dataset = ?1 AND project = ?2 ORDER BY day DESC LIMIT 7)",
            )?
            .query_row(params![dataset, project], |r| r.get::<_, Option<i64>>(0))
        })
    }

    /// What a span dataset's latest walk took: its requests and its days (for estimates: a
    /// walk of the recent days costs its share of them).
    pub fn span_cost(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<Option<(u64, u64)>, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT max(requests), count(*) FROM record_windows WHERE dataset = ?1 AND project = ?2
                 GROUP BY done_at ORDER BY done_at DESC LIMIT 1",
            )?
            .query_row(params![dataset, project], |r| {
                Ok((r.get::<_, i64>(0)?.max(0) as u64, r.get::<_, i64>(1)?.max(1) as u64))
            })
            .optional()
        })
    }

    /// The day after the last one a span dataset's walk reached, if any.
    pub fn span_through(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<Option<NaiveDate>, StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "SELECT through FROM record_spans WHERE dataset = ?1 AND project = ?2",
            )?
            .query_row(params![dataset, project], |r| day(r.get(0)?))
            .optional()
        })
    }

    /// The threads of a project fetched already.
    pub fn threads_fetched(&self, project: &str) -> Result<HashSet<String>, StoreError> {
        self.db.with_conn(|c| {
            let mut st =
                c.prepare_cached("SELECT thread_id FROM threads_fetched WHERE project = ?1")?;
            st.query_map(params![project], |r| r.get(0))?.collect()
        })
    }

    /// Records a thread as fetched.
    pub fn thread_fetched(
        &self,
        project: &str,
        thread: &str,
        messages: i64,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.db.with_conn(|c| {
            c.prepare_cached(
                "INSERT OR REPLACE INTO threads_fetched (project, thread_id, messages, done_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![project, thread, messages, at.to_rfc3339()])
            .map(|_| ())
        })
    }
}
