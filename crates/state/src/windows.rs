//! The `windows` table: what was written for each dataset's project-day, and whether it is
//! final; page views add their totals and a persistent mismatch. Before schema 6 it held page
//! views' days alone, and `record_windows` the other datasets': [`one_table`] makes one of them.

use super::sql::Value;
use super::{Store, StoreError, WalkKey};
use chrono::{DateTime, NaiveDate, Utc};
use docpipe_catalog::views::Counts;
use std::collections::HashMap;

/// The log lines' target: the module they came from before this crate was cut out.
const TARGET: &str = "docpipe::store::windows";

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

/// What the state records of the days of a dataset and project.
pub type KnownDays = HashMap<NaiveDate, WindowState>;

/// The days read of several datasets and projects, by dataset and project (what a plan read,
/// shared with what shows it).
pub type Known = HashMap<(&'static str, String), std::sync::Arc<KnownDays>>;

/// A written window, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenWindow {
    /// Dataset (one with totals: a day's rows and their human, AI and total counts).
    pub dataset: &'static str,
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
    /// When a window of a dataset and project was last written.
    pub fn last_written(
        &self,
        dataset: &str,
        project: &str,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let p = vec![Value::from(dataset), Value::from(project)];
        let at = self.sql.read(move |tx| {
            tx.row(
                "SELECT max(done_at) FROM windows WHERE dataset = ?1 AND project = ?2",
                &p,
            )?
            .map_or(Ok(None), |r| r.opt_text(0))
        })?;
        Ok(at
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.to_utc()))
    }

    /// When any window of any dataset and project was last written, by any process sharing
    /// the state.
    pub fn newest_written(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at = self.sql.read(move |tx| {
            tx.row("SELECT max(done_at) FROM windows", &[])?
                .map_or(Ok(None), |r| r.opt_text(0))
        })?;
        Ok(at.as_deref().and_then(parse_at))
    }

    /// A time of the `settings` table (`None`: never recorded): when the trends or the lake's
    /// `day_status` were last made.
    pub fn setting_at(&self, key: &'static str) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(self.setting(key)?.as_deref().and_then(parse_at))
    }

    /// Records a time in the `settings` table.
    pub fn set_setting_at(&self, key: &'static str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.set_setting(key, &at.to_rfc3339())
    }

    /// Every day of every dataset and project the state records, by project, dataset and day:
    /// what the lake's `day_status` says of each.
    pub fn day_records(&self) -> Result<Vec<DayRecord>, StoreError> {
        self.sql.read(|tx| {
            tx.rows(
                "SELECT dataset, project, day, final, rows, requests, done_at FROM windows
                 ORDER BY project, dataset, day",
                &[],
            )?
            .iter()
            .filter_map(|r| {
                let day = match r.text(2).map(|d| d.parse::<NaiveDate>()) {
                    Ok(Ok(day)) => day,
                    Ok(Err(_)) => return None,
                    Err(e) => return Some(Err(e)),
                };
                Some((|| {
                    Ok(DayRecord {
                        dataset: r.text(0)?,
                        project: r.text(1)?,
                        day,
                        is_final: r.int(3)? != 0,
                        rows: r.opt_int(4)?.unwrap_or(0),
                        requests: r.int(5)?.max(0) as u64,
                        fetched_at: r.opt_text(6)?.as_deref().and_then(parse_at),
                    })
                })())
            })
            .collect()
        })
    }

    /// A value of the `settings` table.
    pub fn setting(&self, key: &'static str) -> Result<Option<String>, StoreError> {
        self.sql.read(move |tx| {
            tx.row("SELECT value FROM settings WHERE key = ?1", &[key.into()])?
                .map_or(Ok(None), |r| r.opt_text(0))
        })
    }

    /// The JSON values of the `settings` table whose keys start with `prefix`, in the keys'
    /// order (a value that does not read as a `T` is left out).
    pub(super) fn settings_json<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        prefix: &str,
    ) -> Result<Vec<T>, StoreError> {
        let like = format!("{prefix}%");
        self.sql.read(move |tx| {
            let rows = tx.rows(
                "SELECT value FROM settings WHERE key LIKE ?1 ORDER BY key",
                &[like.into()],
            )?;
            let mut out = Vec::new();
            for r in rows {
                if let Ok(v) = serde_json::from_str(&r.text(0)?) {
                    out.push(v);
                }
            }
            Ok(out)
        })
    }

    /// Sets a value of the `settings` table.
    pub fn set_setting(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO settings (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[key.into(), value.into()],
            )?;
            Ok(())
        })
    }

    /// The state of every day of a dataset and project that the database knows.
    pub fn windows(&self, dataset: &str, project: &str) -> Result<KnownDays, StoreError> {
        let p = vec![Value::from(dataset), Value::from(project)];
        self.sql.read(move |tx| {
            let mut out = HashMap::new();
            tx.each(
                "SELECT day, final, rows, mismatch FROM windows WHERE dataset = ?1 AND project = ?2",
                &p,
                &mut |r| {
                    if let Some(d) = docpipe_catalog::calendar::parse_day(r.str(0)?) {
                        out.insert(
                            d,
                            WindowState {
                                is_final: r.int(1)? != 0,
                                rows: r.opt_int(2)?,
                                mismatch: r.opt_text(3)?,
                            },
                        );
                    }
                    Ok(())
                },
            )?;
            Ok(out)
        })
    }

    /// The days of a dataset and project as `known` holds them (what a plan read), else read
    /// here.
    pub fn windows_known(
        &self,
        known: &Known,
        dataset: &'static str,
        project: &str,
    ) -> Result<std::sync::Arc<KnownDays>, StoreError> {
        Ok(match known.get(&(dataset, project.to_string())) {
            Some(k) => k.clone(),
            None => std::sync::Arc::new(self.windows(dataset, project)?),
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
            done.dataset.into(),
        ];
        let walk_key = WalkKey::day(done.dataset, &done.project, done.day);
        let walk = walk_key.clone();
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO windows (dataset, project, day, final, rows, human, ai, total, requests, mismatch, done_at)
                 VALUES (?11, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (dataset, project, day) DO UPDATE SET final = excluded.final, rows = excluded.rows,
                   human = excluded.human, ai = excluded.ai, total = excluded.total,
                   requests = excluded.requests, mismatch = excluded.mismatch, done_at = excluded.done_at",
                &p,
            )?;
            super::pages::end(tx, &walk)
        })?;
        self.walk_ended(&walk_key)
    }

    /// The rows of the latest window of a dataset and project that recorded its rows.
    pub fn latest_rows(&self, dataset: &str, project: &str) -> Result<Option<i64>, StoreError> {
        let p = vec![Value::from(dataset), Value::from(project)];
        self.sql.read(move |tx| {
            tx.row(
                "SELECT rows FROM windows WHERE dataset = ?1 AND project = ?2 AND rows IS NOT NULL ORDER BY day DESC LIMIT 1",
                &p,
            )?
            .map(|r| r.int(0))
            .transpose()
        })
    }

    /// The most requests one of the latest 7 windows of a dataset and project took (retries
    /// included).
    pub fn most_requests(&self, dataset: &str, project: &str) -> Result<Option<i64>, StoreError> {
        let p = vec![Value::from(dataset), Value::from(project)];
        self.sql.read(move |tx| {
            tx.row(
                "SELECT max(requests) FROM (SELECT requests FROM windows WHERE dataset = ?1 AND project = ?2 ORDER BY day DESC LIMIT 7) AS latest",
                &p,
            )?
            .map_or(Ok(None), |r| r.opt_int(0))
        })
    }
}

/// The days written, every dataset's; page views add their totals and a persistent mismatch.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS windows (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    day TEXT NOT NULL,
    final INTEGER NOT NULL DEFAULT 0,
    rows INTEGER,
    human INTEGER,
    ai INTEGER,
    total INTEGER,
    requests INTEGER NOT NULL DEFAULT 0,
    mismatch TEXT,
    done_at TEXT,
    PRIMARY KEY (dataset, project, day)
);
";

/// An index that holds every column the planner and the status read of a dataset's and
/// project's days, in day order: their reads never visit the table (measured: the status of
/// 50 projects x 8 datasets x 365 days read 146,000 rows a render, each a seek into the table).
/// And one by the time each day was written, so that when a dataset's and project's days were
/// last written, and what its last walk cost ([`Store::span_cost`]), are one seek each (the
/// plan and the status ask them of every dataset and project; each read all its days).
pub(super) const COVERING: &str = "
CREATE INDEX IF NOT EXISTS windows_covering
    ON windows (dataset, project, day, final, rows, requests, done_at, mismatch);
CREATE INDEX IF NOT EXISTS windows_done
    ON windows (dataset, project, done_at, requests);
";

/// Makes one `windows` table of a state file written before schema 6 (page views' days in
/// `windows` without a dataset, the other datasets' in `record_windows`), in one transaction;
/// nothing to do in a newer file.
pub(super) fn one_table(c: &mut rusqlite::Connection) -> rusqlite::Result<()> {
    let has_dataset = c
        .prepare("SELECT 1 FROM pragma_table_info('windows') WHERE name = 'dataset'")?
        .exists([])?;
    let records = c
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'record_windows'")?
        .exists([])?;
    if has_dataset && !records {
        return Ok(());
    }
    // A new file has no `windows` yet: made here.
    let tx = c.transaction()?;
    let before_6 = !has_dataset
        && tx
            .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'windows'")?
            .exists([])?;
    if before_6 {
        tx.execute_batch("ALTER TABLE windows RENAME TO windows_before_6;")?;
    }
    tx.execute_batch(SCHEMA)?;
    if before_6 {
        tx.execute_batch(
            "INSERT INTO windows (dataset, project, day, final, rows, human, ai, total, requests, mismatch, done_at)
               SELECT 'page_views', project, day, final, rows, human, ai, total, requests, mismatch, done_at
               FROM windows_before_6;
             DROP TABLE windows_before_6;",
        )?;
        tracing::info!(target: TARGET, "state database: the days of every dataset now in one table (windows)");
    }
    if records {
        tx.execute_batch(
            "INSERT INTO windows (dataset, project, day, final, rows, requests, done_at)
               SELECT dataset, project, day, final, rows, requests, done_at FROM record_windows
               WHERE true ON CONFLICT (dataset, project, day) DO NOTHING;
             DROP TABLE record_windows;",
        )?;
    }
    tx.commit()
}

/// A day of a dataset and project as the state records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayRecord {
    /// Dataset.
    pub dataset: String,
    /// Project.
    pub project: String,
    /// The day.
    pub day: NaiveDate,
    /// Never fetched again.
    pub is_final: bool,
    /// Rows written last time.
    pub rows: i64,
    /// Requests its last walk took.
    pub requests: u64,
    /// When it was last written.
    pub fetched_at: Option<DateTime<Utc>>,
}

/// A time as the state stores it (RFC 3339).
fn parse_at(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|t| t.to_utc())
}
