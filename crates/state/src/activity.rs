//! What the status page shows that no other table keeps: the analytics requests spent per hour
//! (by organization, dataset and purpose), each window's last failure (until it is written),
//! and each rule's last run. Written against [`Sql`]: the same statements on SQLite and
//! PostgreSQL (migration 8 in `pg.rs`).

use super::StoreError;
use super::sql::{Row, Sql, SqlError, Value};
use chrono::{DateTime, NaiveDate, Utc};
use docpipe_catalog::events::{Event, RunOutcome, Troubled};

/// SQLite's tables.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS spent (
    hour_ms INTEGER NOT NULL,
    org TEXT NOT NULL,
    dataset TEXT NOT NULL,
    purpose TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (hour_ms, org, dataset, purpose)
);
CREATE TABLE IF NOT EXISTS window_failures (
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    day TEXT NOT NULL,
    win TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    reason TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'failed',
    stuck_tries INTEGER NOT NULL DEFAULT 0,
    retry_at_ms INTEGER,
    PRIMARY KEY (dataset, project, day)
);
CREATE TABLE IF NOT EXISTS rule_runs (
    rule TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    rows_matched INTEGER,
    line TEXT NOT NULL
);
";

/// How long the hourly spend is kept (the page shows 24 hours).
const KEEP_HOURS: i64 = 48;

const HOUR_MS: i64 = 3_600_000;

/// Requests spent in one hour for one organization, dataset and purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spent {
    /// The hour's start.
    pub hour: DateTime<Utc>,
    /// Organization.
    pub org: String,
    /// Dataset.
    pub dataset: String,
    /// `walk`, `probe`, `backfill`, `check` or `thread`.
    pub purpose: String,
    /// Requests.
    pub requests: u64,
}

/// The columns `window_failures` gained after its first version (SQLite adds them to a file
/// made before; PostgreSQL's migration 11).
pub(super) const FAILURE_COLUMNS: [(&str, &str); 3] = [
    ("kind", "TEXT NOT NULL DEFAULT 'failed'"),
    ("stuck_tries", "INTEGER NOT NULL DEFAULT 0"),
    ("retry_at_ms", "INTEGER"),
];

/// How long a window stuck on the bound of pages waits before its first try again; each
/// failure in a row doubles it, up to [`STUCK_WAIT_MAX`].
pub const STUCK_WAIT: chrono::Duration = chrono::Duration::hours(24);

/// The longest a stuck window waits between two tries.
pub const STUCK_WAIT_MAX: chrono::Duration = chrono::Duration::days(7);

pub use docpipe_catalog::events::Trouble;

/// The log lines' target: the module they came from before this crate was cut out.
const TARGET: &str = "docpipe::store::activity";

/// The wait before a stuck window's next try, after its `tries`-th failure in a row.
pub fn stuck_wait(tries: u32) -> chrono::Duration {
    let doubled = STUCK_WAIT * 2i32.saturating_pow(tries.saturating_sub(1).min(8));
    doubled.min(STUCK_WAIT_MAX)
}

/// A window whose last try failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowFailure {
    /// Dataset.
    pub dataset: String,
    /// Project.
    pub project: String,
    /// The window as people read it (`2026-03-10`, `2026-03-01..2026-03-14`).
    pub window: String,
    /// When it failed.
    pub at: DateTime<Utc>,
    /// Why, in one line.
    pub reason: String,
    /// How it went wrong.
    pub kind: Trouble,
    /// Its walks that reached the bound of pages, in a row.
    pub stuck_tries: u32,
    /// Not tried before this (a stuck window).
    pub retry_at: Option<DateTime<Utc>>,
    /// The first day of the window.
    pub day: NaiveDate,
}

/// What a rule's last run did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleRun {
    /// The rule.
    pub rule: String,
    /// Its project.
    pub project: String,
    /// When it ran.
    pub at: DateTime<Utc>,
    /// What it came to.
    pub outcome: RunOutcome,
    /// Rows its query matched (none when it could not run).
    pub rows: Option<i64>,
    /// Its report line (for `failed`, why).
    pub line: String,
}

/// The activity tables.
#[derive(Debug, Clone)]
pub struct Activity {
    sql: Sql,
}

fn time(v: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(v).unwrap_or_default()
}

fn rule_run(r: &Row) -> Result<RuleRun, SqlError> {
    Ok(RuleRun {
        rule: r.text(0)?,
        project: r.text(1)?,
        at: time(r.int(2)?),
        outcome: r.text(3)?.parse().map_err(|message| SqlError {
            message,
            connection: false,
        })?,
        rows: r.opt_int(4)?,
        line: r.text(5)?,
    })
}

impl Activity {
    /// The tables in `sql`.
    pub fn new(sql: Sql) -> Self {
        Self { sql }
    }

    /// Records what an event says the status page shows (the others are not its): requests
    /// spent, a window's trouble or its end, a rule's run. A failure to record is logged: the
    /// work goes on.
    pub fn receive(&self, event: &Event<'_>) {
        let done = match *event {
            Event::Spent {
                org,
                at,
                dataset,
                purpose,
                requests,
            } if requests > 0 => self.spend(org, dataset, purpose, requests, at),
            Event::Written {
                dataset,
                project,
                day,
                ..
            } => self.window_written(dataset, project, day),
            Event::Fetched { dataset, project } => self.window_written(dataset, project, None),
            Event::Failed {
                dataset,
                project,
                trouble: Some(t),
            }
            | Event::Long {
                dataset,
                project,
                trouble: t,
                ..
            } => self.troubled(dataset, project, &t),
            Event::RuleRan {
                rule,
                project,
                at,
                outcome,
                rows,
                line,
            } => self.rule_ran(&RuleRun {
                rule: rule.to_string(),
                project: project.to_string(),
                at,
                outcome,
                rows,
                line: line.to_string(),
            }),
            _ => Ok(()),
        };
        if let Err(e) = done {
            tracing::warn!(target: TARGET, "cannot record it for the status page: {e}");
        }
    }

    /// Records a window's trouble; a stuck one's next try is logged.
    fn troubled(&self, dataset: &str, project: &str, t: &Troubled<'_>) -> Result<(), StoreError> {
        if let Some((tries, retry)) =
            self.window_trouble(dataset, project, (t.day, t.window), t.reason, t.at, t.kind)?
        {
            tracing::error!(target: TARGET,
                dataset,
                project,
                day = %t.day,
                "stuck: the service led the walk to the bound of pages ({tries} times in a row); tried again after {}",
                retry.format("%Y-%m-%d %H:%M UTC")
            );
        }
        Ok(())
    }

    /// Counts `n` requests sent `at`; forgets the hours older than two days.
    fn spend(
        &self,
        org: &str,
        dataset: &str,
        purpose: &str,
        n: u64,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let hour = at.timestamp_millis().div_euclid(HOUR_MS) * HOUR_MS;
        let values = vec![
            Value::Int(hour),
            org.into(),
            dataset.into(),
            purpose.into(),
            Value::Int(n as i64),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO spent (hour_ms, org, dataset, purpose, n) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (hour_ms, org, dataset, purpose) DO UPDATE SET n = spent.n + excluded.n",
                &values,
            )?;
            tx.exec(
                "DELETE FROM spent WHERE hour_ms < ?1",
                &[Value::Int(hour - KEEP_HOURS * HOUR_MS)],
            )?;
            Ok(())
        })
    }

    /// The requests spent from `since` on, by hour, organization, dataset and purpose.
    pub fn spent_since(&self, since: DateTime<Utc>) -> Result<Vec<Spent>, StoreError> {
        let from = since.timestamp_millis().div_euclid(HOUR_MS) * HOUR_MS;
        self.sql.read(move |tx| {
            tx.rows(
                "SELECT hour_ms, org, dataset, purpose, n FROM spent WHERE hour_ms >= ?1
                 ORDER BY hour_ms, org, dataset, purpose",
                &[Value::Int(from)],
            )?
            .iter()
            .map(|r| {
                Ok(Spent {
                    hour: time(r.int(0)?),
                    org: r.text(1)?,
                    dataset: r.text(2)?,
                    purpose: r.text(3)?,
                    requests: r.int(4)?.max(0) as u64,
                })
            })
            .collect()
        })
    }

    /// Records how a window's last try went wrong (see [`Trouble`]); for a stuck window, returns
    /// its failures on the bound in a row and when it is tried again. A stuck window keeps its
    /// count through the tries that follow until it is written.
    fn window_trouble(
        &self,
        dataset: &str,
        project: &str,
        (day, window): (NaiveDate, &str),
        reason: &str,
        at: DateTime<Utc>,
        kind: Trouble,
    ) -> Result<Option<(u32, DateTime<Utc>)>, StoreError> {
        let key = vec![dataset.into(), project.into(), day.to_string().into()];
        let (window, reason) = (window.to_string(), reason.to_string());
        self.sql.tx(move |tx| {
            let before = tx
                .row(
                    "SELECT stuck_tries FROM window_failures
                     WHERE dataset = ?1 AND project = ?2 AND day = ?3",
                    &key,
                )?
                .map(|r| r.int(0))
                .transpose()?
                .unwrap_or(0)
                .max(0) as u32;
            let (tries, retry) = match kind {
                Trouble::Stuck => {
                    let tries = before + 1;
                    (tries, Some(at + stuck_wait(tries)))
                }
                _ => (before, None),
            };
            let mut values = key.clone();
            values.extend([
                Value::from(window.as_str()),
                Value::Int(at.timestamp_millis()),
                reason.as_str().into(),
                kind.name().into(),
                Value::Int(i64::from(tries)),
                retry.map(|r| r.timestamp_millis()).into(),
            ]);
            tx.exec(
                "INSERT INTO window_failures
                   (dataset, project, day, win, at_ms, reason, kind, stuck_tries, retry_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (dataset, project, day) DO UPDATE
                 SET win = excluded.win, at_ms = excluded.at_ms, reason = excluded.reason,
                   kind = excluded.kind, stuck_tries = excluded.stuck_tries,
                   retry_at_ms = COALESCE(excluded.retry_at_ms, window_failures.retry_at_ms)",
                &values,
            )?;
            Ok(retry.map(|r| (tries, r)))
        })
    }

    /// The windows held back at `now` (stuck, their next try later): dataset, project, first
    /// day and when they are tried again.
    pub fn held_back(&self, now: DateTime<Utc>) -> Result<Vec<WindowFailure>, StoreError> {
        Ok(self
            .failures()?
            .into_iter()
            .filter(|f| f.retry_at.is_some_and(|r| r > now))
            .collect())
    }

    /// Forgets a window's failure: a day's when it was written (`Some(day)`); every failure of
    /// the dataset and project when a walk of its span or its threads was (`None`: their next
    /// window starts on another day than the one that failed).
    fn window_written(
        &self,
        dataset: &str,
        project: &str,
        day: Option<NaiveDate>,
    ) -> Result<(), StoreError> {
        let mut values = vec![dataset.into(), project.into()];
        let sql = match day {
            Some(day) => {
                values.push(day.to_string().into());
                "DELETE FROM window_failures WHERE dataset = ?1 AND project = ?2 AND day = ?3"
            }
            None => "DELETE FROM window_failures WHERE dataset = ?1 AND project = ?2",
        };
        self.sql.tx(move |tx| {
            tx.exec(sql, &values)?;
            Ok(())
        })
    }

    /// The windows whose last try failed, by dataset, project and day.
    pub fn failures(&self) -> Result<Vec<WindowFailure>, StoreError> {
        self.sql.read(|tx| {
            tx.rows(
                "SELECT dataset, project, win, at_ms, reason, kind, stuck_tries, retry_at_ms, day
                 FROM window_failures ORDER BY dataset, project, day",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(WindowFailure {
                    dataset: r.text(0)?,
                    project: r.text(1)?,
                    window: r.text(2)?,
                    at: time(r.int(3)?),
                    reason: r.text(4)?,
                    kind: Trouble::of(&r.text(5)?),
                    stuck_tries: r.int(6)?.clamp(0, i64::from(u32::MAX)) as u32,
                    retry_at: r.opt_int(7)?.map(time),
                    day: r.text(8)?.parse().unwrap_or_default(),
                })
            })
            .collect()
        })
    }

    /// Records a rule's run (the last one per rule is kept).
    fn rule_ran(&self, run: &RuleRun) -> Result<(), StoreError> {
        let values = vec![
            run.rule.as_str().into(),
            run.project.as_str().into(),
            Value::Int(run.at.timestamp_millis()),
            run.outcome.as_str().into(),
            run.rows.map_or(Value::Null, Value::Int),
            run.line.as_str().into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO rule_runs (rule, project, at_ms, outcome, rows_matched, line)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (rule) DO UPDATE SET project = excluded.project,
                 at_ms = excluded.at_ms, outcome = excluded.outcome,
                 rows_matched = excluded.rows_matched, line = excluded.line",
                &values,
            )?;
            Ok(())
        })
    }

    /// Each rule's last run, by rule.
    pub fn rule_runs(&self) -> Result<Vec<RuleRun>, StoreError> {
        self.sql.read(|tx| {
            tx.rows(
                "SELECT rule, project, at_ms, outcome, rows_matched, line FROM rule_runs ORDER BY rule",
                &[],
            )?
            .iter()
            .map(rule_run)
            .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity() -> (tempfile::TempDir, Activity) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(&dir.path().join("state.sqlite")).unwrap();
        let a = store.history();
        (dir, a)
    }

    impl Activity {
        fn window_failed(
            &self,
            dataset: &str,
            project: &str,
            day: NaiveDate,
            window: &str,
            reason: &str,
            at: DateTime<Utc>,
        ) -> Result<(), StoreError> {
            self.window_trouble(dataset, project, (day, window), reason, at, Trouble::Failed)
                .map(|_| ())
        }
    }

    #[test]
    fn spend_adds_up_by_hour_and_forgets_after_two_days() {
        let (_dir, a) = activity();
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        a.spend("o", "page_views", "walk", 3, t("2026-03-13T10:05:00Z"))
            .unwrap();
        a.spend("o", "page_views", "walk", 2, t("2026-03-15T10:59:00Z"))
            .unwrap();
        a.spend("o", "page_views", "walk", 4, t("2026-03-15T10:00:00Z"))
            .unwrap();
        a.spend("o", "searches", "probe", 1, t("2026-03-15T11:00:00Z"))
            .unwrap();
        let all = a.spent_since(t("2026-03-13T00:00:00Z")).unwrap();
        let got: Vec<_> = all
            .iter()
            .map(|s| (s.hour.to_rfc3339(), s.dataset.as_str(), s.requests))
            .collect();
        // The 10:05 of two days before is forgotten by the 11:00 hour's write.
        assert_eq!(
            got,
            [
                ("2026-03-15T10:00:00+00:00".to_string(), "page_views", 6),
                ("2026-03-15T11:00:00+00:00".to_string(), "searches", 1),
            ]
        );
    }

    #[test]
    fn a_stuck_window_waits_longer_after_each_failure_in_a_row_until_it_is_written() {
        let (_dir, a) = activity();
        let d = "2026-03-10".parse::<NaiveDate>().unwrap();
        let t0: DateTime<Utc> = "2026-03-15T10:00:00Z".parse().unwrap();
        let h = chrono::Duration::hours;
        let trouble = |kind, at| {
            a.window_trouble("page_views", "p", (d, "2026-03-10"), "why", at, kind)
                .unwrap()
        };
        assert_eq!(trouble(Trouble::Long, t0), None);
        assert_eq!(trouble(Trouble::Stuck, t0), Some((1, t0 + h(24))));
        assert_eq!(a.held_back(t0 + h(23)).unwrap().len(), 1);
        assert!(a.held_back(t0 + h(24)).unwrap().is_empty());
        // Walking again in turns keeps the count and the time of the next try.
        assert_eq!(trouble(Trouble::Long, t0 + h(30)), None);
        let f = &a.failures().unwrap()[0];
        assert_eq!(
            (f.kind, f.stuck_tries, f.retry_at),
            (Trouble::Long, 1, Some(t0 + h(24)))
        );
        assert_eq!(
            trouble(Trouble::Stuck, t0 + h(80)),
            Some((2, t0 + h(80 + 48)))
        );
        assert_eq!(
            trouble(Trouble::Stuck, t0 + h(200)),
            Some((3, t0 + h(200 + 96)))
        );
        assert_eq!(
            trouble(Trouble::Stuck, t0 + h(400)),
            Some((4, t0 + h(400 + 168)))
        );
        assert_eq!(
            trouble(Trouble::Stuck, t0 + h(600)),
            Some((5, t0 + h(600 + 168)))
        );
        a.window_written("page_views", "p", Some(d)).unwrap();
        assert!(a.failures().unwrap().is_empty());
        assert_eq!(trouble(Trouble::Stuck, t0 + h(900)), Some((1, t0 + h(924))));
    }

    #[test]
    fn a_failure_is_kept_until_its_window_is_written() {
        let (_dir, a) = activity();
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        let at = "2026-03-15T10:00:00Z".parse().unwrap();
        a.window_failed("searches", "p", d("2026-03-10"), "2026-03-10", "first", at)
            .unwrap();
        a.window_failed("searches", "p", d("2026-03-10"), "2026-03-10", "second", at)
            .unwrap();
        a.window_failed("visitors", "p", d("2026-03-11"), "2026-03-11", "other", at)
            .unwrap();
        let reasons: Vec<_> = a
            .failures()
            .unwrap()
            .into_iter()
            .map(|f| f.reason)
            .collect();
        assert_eq!(reasons, ["second", "other"]);
        a.window_written("searches", "p", Some(d("2026-03-10")))
            .unwrap();
        let left: Vec<_> = a
            .failures()
            .unwrap()
            .into_iter()
            .map(|f| f.dataset)
            .collect();
        assert_eq!(left, ["visitors"]);
        // A span's walk clears its dataset's failures whatever day they began on.
        a.window_failed(
            "feedback",
            "p",
            d("2026-03-01"),
            "2026-03-01..2026-03-14",
            "x",
            at,
        )
        .unwrap();
        a.window_failed(
            "feedback",
            "q",
            d("2026-03-01"),
            "2026-03-01..2026-03-14",
            "y",
            at,
        )
        .unwrap();
        a.window_written("feedback", "p", None).unwrap();
        let left: Vec<_> = a
            .failures()
            .unwrap()
            .into_iter()
            .map(|f| (f.dataset, f.project))
            .collect();
        assert_eq!(
            left,
            [
                ("feedback".to_string(), "q".to_string()),
                ("visitors".to_string(), "p".to_string())
            ]
        );
    }
}
