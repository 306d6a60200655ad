//! What the status page shows that no other table keeps: the analytics requests spent per hour
//! (by organization, dataset and purpose), each window's last failure (until it is written),
//! and each rule's last run. Written against [`Sql`]: the same statements on SQLite and
//! PostgreSQL (migration 8 in `pg.rs`).

use super::StoreError;
use super::sql::{Row, Sql, SqlError, Value};
use chrono::{DateTime, NaiveDate, Utc};

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
    /// `walk`, `probe` or `backfill`.
    pub purpose: String,
    /// Requests.
    pub requests: u64,
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
    /// `fired`, `quiet`, `skipped`, `failed`.
    pub outcome: String,
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
        outcome: r.text(3)?,
        rows: r.opt_int(4)?,
        line: r.text(5)?,
    })
}

impl Activity {
    /// The tables in `sql`.
    pub fn new(sql: Sql) -> Self {
        Self { sql }
    }

    /// Counts `n` requests sent `at`; forgets the hours older than two days.
    pub fn spend(
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

    /// Records that a window (first day `day`, `window` as people read it) failed `at`.
    pub fn window_failed(
        &self,
        dataset: &str,
        project: &str,
        day: NaiveDate,
        window: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let values = vec![
            dataset.into(),
            project.into(),
            day.to_string().into(),
            window.into(),
            Value::Int(at.timestamp_millis()),
            reason.into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO window_failures (dataset, project, day, win, at_ms, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (dataset, project, day) DO UPDATE
                 SET win = excluded.win, at_ms = excluded.at_ms, reason = excluded.reason",
                &values,
            )?;
            Ok(())
        })
    }

    /// Forgets a window's failure: a day's when it was written (`Some(day)`); every failure of
    /// the dataset and project when a walk of its span or its threads was (`None`: their next
    /// window starts on another day than the one that failed).
    pub fn window_written(
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
                "SELECT dataset, project, win, at_ms, reason FROM window_failures
                 ORDER BY dataset, project, day",
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
                })
            })
            .collect()
        })
    }

    /// Records a rule's run (the last one per rule is kept).
    pub fn rule_ran(&self, run: &RuleRun) -> Result<(), StoreError> {
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
        let store = crate::store::Store::open(&dir.path().join("state.sqlite")).unwrap();
        let a = store.activity();
        (dir, a)
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
