//! What the ledger keeps to measure a firing's impact: the rule's `[impact]` as it stood when
//! it fired (its definition, kept as JSON text: the store does not read it), the days before
//! and after, and beside each key the firing sent (`rule_firing_keys`) its metric and row
//! count before and after. A firing recorded before this existed has no plan and no values:
//! it is reported as not measurable. Written against [`Sql`]: the same statements on SQLite
//! and PostgreSQL (migration 9 in `pg.rs`); SQLite's tables are made with the ledger's.

use super::StoreError;
use super::ledger::Ledger;
use super::sql::{Row, SqlError, Value};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::HashMap;

/// A key's figure over a window: the metric (none: the table held no value for it) and the
/// rows behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The metric.
    pub value: Option<f64>,
    /// The count behind it (the rule's `count`).
    pub rows: Option<i64>,
}

/// Inclusive days, and how many of them were exported and final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days {
    /// First day.
    pub from: NaiveDate,
    /// Last day.
    pub to: NaiveDate,
    /// Days of them exported and final.
    pub days: i64,
}

/// A firing's plan: what was recorded when it fired, and what was measured since.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The firing.
    pub firing_id: i64,
    /// The rule's `[impact]` then, as JSON.
    pub definition: String,
    /// The days before.
    pub before: Days,
    /// The days after, once measured.
    pub after: Option<Days>,
    /// When it was measured or given up.
    pub settled_at: Option<DateTime<Utc>>,
    /// How it was settled (none: not yet).
    pub settled: Option<Settled>,
}

/// What settles a plan: each key's figure over the days after, or why it never will be
/// measured.
#[derive(Debug, Clone, Copy)]
pub enum After<'a> {
    /// Measured over these days.
    Measured(Days, &'a [(String, Figure)]),
    /// Never to be measured, and why.
    Never(&'a str),
}

/// How a plan was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Its keys were measured after.
    Measured,
    /// It never will be, and why.
    NotMeasured(String),
}

impl Settled {
    /// As the ledger keeps it: the `outcome` column holds why a plan was not measured; a
    /// measured plan has its days after (older ledgers also wrote a word there).
    fn of_columns(
        settled_at: Option<DateTime<Utc>>,
        after: Option<Days>,
        why: Option<String>,
    ) -> Option<Self> {
        settled_at?;
        Some(match after {
            Some(_) => Settled::Measured,
            None => Settled::NotMeasured(why.unwrap_or_default()),
        })
    }
}

/// One key of a firing with its figures (none for a firing recorded before the impact).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyFigures {
    /// The key.
    pub key: String,
    /// Before (none: not recorded).
    pub before: Option<Figure>,
    /// After (none: not measured yet).
    pub after: Option<Figure>,
}

fn figure(r: &Row, value: usize, rows: usize) -> Result<Option<Figure>, SqlError> {
    let (v, n) = (r.opt_real(value)?, r.opt_int(rows)?);
    Ok(Some(Figure { value: v, rows: n }).filter(|_| v.is_some() || n.is_some()))
}

fn day(r: &Row, i: usize) -> Result<Option<NaiveDate>, SqlError> {
    Ok(r.opt_text(i)?.and_then(|t| t.parse::<NaiveDate>().ok()))
}

fn figure_values(f: Option<&Figure>) -> [Value; 2] {
    [
        f.and_then(|f| f.value).into(),
        f.and_then(|f| f.rows).into(),
    ]
}

impl Ledger {
    /// Records a firing's plan and each key's figure before (the keys were recorded by
    /// [`Ledger::begin`]; one missing is added).
    pub fn record_before(
        &self,
        firing_id: i64,
        definition: &str,
        before: Days,
        figures: &[(String, Figure)],
    ) -> Result<(), StoreError> {
        let plan = vec![
            Value::Int(firing_id),
            definition.into(),
            before.from.into(),
            before.to.into(),
            Value::Int(before.days),
        ];
        let figures = figures.to_vec();
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO impact_plans (firing_id, definition, before_from, before_to, before_days)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (firing_id) DO UPDATE SET definition = excluded.definition,
                 before_from = excluded.before_from, before_to = excluded.before_to,
                 before_days = excluded.before_days",
                &plan,
            )?;
            for (key, f) in &figures {
                let [v, n] = figure_values(Some(f));
                tx.exec(
                    "INSERT INTO rule_firing_keys (firing_id, key, before_value, before_rows)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (firing_id, key) DO UPDATE SET
                     before_value = excluded.before_value, before_rows = excluded.before_rows",
                    &[Value::Int(firing_id), key.as_str().into(), v, n],
                )?;
            }
            Ok(())
        })
    }

    /// Records what was measured over the days `after` (each key's figure), or why nothing
    /// ever will be: the plan is settled either way.
    pub fn record_after(
        &self,
        firing_id: i64,
        after: After<'_>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let (days, why, figures) = match after {
            After::Measured(days, figures) => (Some(days), None, figures),
            After::Never(why) => (None, Some(why), &[][..]),
        };
        let plan = vec![
            Value::Int(firing_id),
            days.map(|a| a.from).into(),
            days.map(|a| a.to).into(),
            days.map(|a| a.days).into(),
            Value::Int(at.timestamp_millis()),
            why.into(),
        ];
        let figures = figures.to_vec();
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE impact_plans SET after_from = ?2, after_to = ?3, after_days = ?4,
                 settled_at_ms = ?5, outcome = ?6 WHERE firing_id = ?1",
                &plan,
            )?;
            for (key, f) in &figures {
                let [v, n] = figure_values(Some(f));
                tx.exec(
                    "UPDATE rule_firing_keys SET after_value = ?3, after_rows = ?4
                     WHERE firing_id = ?1 AND key = ?2",
                    &[Value::Int(firing_id), key.as_str().into(), v, n],
                )?;
            }
            Ok(())
        })
    }

    /// Every plan, by firing.
    pub fn plans(&self) -> Result<HashMap<i64, Plan>, StoreError> {
        self.sql.read(|tx| {
            tx.rows(
                "SELECT firing_id, definition, before_from, before_to, before_days, after_from,
                 after_to, after_days, settled_at_ms, outcome FROM impact_plans",
                &[],
            )?
            .iter()
            .map(|r| {
                let before = match (day(r, 2)?, day(r, 3)?) {
                    (Some(from), Some(to)) => Days {
                        from,
                        to,
                        days: r.int(4)?,
                    },
                    _ => {
                        return Err(SqlError {
                            message: "impact_plans: a before day is not a date".into(),
                            connection: false,
                        });
                    }
                };
                let after = match (day(r, 5)?, day(r, 6)?, r.opt_int(7)?) {
                    (Some(from), Some(to), Some(days)) => Some(Days { from, to, days }),
                    _ => None,
                };
                let settled_at = r
                    .opt_int(8)?
                    .and_then(DateTime::<Utc>::from_timestamp_millis);
                Ok((
                    r.int(0)?,
                    Plan {
                        firing_id: r.int(0)?,
                        definition: r.text(1)?,
                        before,
                        after,
                        settled_at,
                        settled: Settled::of_columns(settled_at, after, r.opt_text(9)?),
                    },
                ))
            })
            .collect()
        })
    }

    /// Every firing's keys with their figures, in key order.
    pub fn key_figures(&self) -> Result<HashMap<i64, Vec<KeyFigures>>, StoreError> {
        self.sql.read(|tx| {
            let mut out: HashMap<i64, Vec<KeyFigures>> = HashMap::new();
            for r in tx.rows(
                "SELECT firing_id, key, before_value, before_rows, after_value, after_rows
                 FROM rule_firing_keys ORDER BY firing_id, key",
                &[],
            )? {
                out.entry(r.int(0)?).or_default().push(KeyFigures {
                    key: r.text(1)?,
                    before: figure(&r, 2, 3)?,
                    after: figure(&r, 4, 5)?,
                });
            }
            Ok(out)
        })
    }

    /// The days of a dataset and project exported and final, in order (the windows table of
    /// the same state; none when it has no such table, as in a ledger opened alone): final as
    /// recorded, or written and on or before `settled` (a span's days, which the table never
    /// marks final: a span's walk re-reads only its last days).
    pub fn final_days(
        &self,
        dataset: &str,
        project: &str,
        settled: Option<NaiveDate>,
    ) -> Result<Vec<NaiveDate>, StoreError> {
        let p = vec![Value::from(dataset), Value::from(project)];
        let has_windows = self.sql.read(|tx| {
            let sql = if tx.postgres() {
                "SELECT 1 FROM information_schema.tables WHERE table_name = 'windows'"
            } else {
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'windows'"
            };
            Ok(tx.row(sql, &[])?.is_some())
        })?;
        if !has_windows {
            return Ok(Vec::new());
        }
        self.sql.read(move |tx| {
            let mut days = Vec::new();
            for r in tx.rows(
                "SELECT day, final FROM windows WHERE dataset = ?1 AND project = ?2",
                &p,
            )? {
                let Some(d) = day(&r, 0)? else { continue };
                if r.int(1)? != 0 || settled.is_some_and(|s| d <= s) {
                    days.push(d);
                }
            }
            days.sort();
            Ok(days)
        })
    }
}
