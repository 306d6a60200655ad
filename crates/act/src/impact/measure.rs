//! Measuring: the final days each side of a firing, each key's figure over its one trend
//! table computed over exactly those days, and which plans are due.

use super::days::{Calendar, Due, due, final_count, polled, shift};
use super::{Impact, table};
use crate::{Rule, RuleError, key_values};
use chrono::{DateTime, NaiveDate, Utc};
use docpipe_derive::{Selection, Tables, TrendsError};
use docpipe_state::StoreError;
use docpipe_state::impact::{After, Days, Figure};
use docpipe_state::ledger::Ledger;
use docpipe_write::parquet::WriteError;
use polars::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

impl Impact {
    /// Each key's figure over `table` (the rule's table, already restricted to the days
    /// measured), for the project; every key of the table when `keys` is empty. polars runs on
    /// a thread of its own, so that this is callable from any runtime.
    pub fn figures(
        &self,
        table: &DataFrame,
        project: &str,
        keys: &[String],
    ) -> Result<Vec<(String, Figure)>, String> {
        std::thread::scope(|s| {
            s.spawn(|| self.figures_here(table, project, keys))
                .join()
                .unwrap_or_else(|_| Err("the metric's query panicked in polars".into()))
        })
    }

    fn figures_here(
        &self,
        table: &DataFrame,
        project: &str,
        keys: &[String],
    ) -> Result<Vec<(String, Figure)>, String> {
        let mut ctx = polars::sql::SQLContext::new();
        ctx.register(
            &self.table,
            table.clone().lazy().filter(col("project").eq(lit(project))),
        );
        let df = ctx
            .execute(&self.sql())
            .and_then(LazyFrame::collect)
            .map_err(|e| crate::one_line(&e.to_string()))?;
        let names = key_values(&df, "impact_key").map_err(|e| e.to_string())?;
        let values = df
            .column("impact_value")
            .and_then(|c| c.f64().cloned())
            .map_err(|e| e.to_string())?;
        let rows = df
            .column("impact_rows")
            .and_then(|c| c.i64().cloned())
            .map_err(|e| e.to_string())?;
        let mut found: HashMap<&str, Figure> = HashMap::new();
        for (i, k) in names.iter().enumerate() {
            found.entry(k.as_str()).or_insert(Figure {
                value: values.get(i).filter(|v| v.is_finite()),
                rows: rows.get(i),
            });
        }
        let wanted: Vec<String> = if keys.is_empty() {
            names.clone()
        } else {
            keys.to_vec()
        };
        Ok(wanted
            .into_iter()
            .map(|k| {
                let f = found.get(k.as_str()).cloned().unwrap_or(Figure {
                    value: self.absent,
                    rows: Some(0),
                });
                (k, f)
            })
            .collect())
    }
}

/// The rule's one trend table of one project over the days `from..=to` alone (none: the
/// output holds no page views, which the page tables are computed from).
pub fn table_over(
    out: &Path,
    impact: &Impact,
    project: &str,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Option<DataFrame>, TrendsError> {
    let sel = Selection {
        projects: vec![project.to_string()],
        from: Some(from),
        to: Some(to),
    };
    match docpipe_derive::table(out, &impact.table, &sel) {
        Ok(df) => Ok(Some(df)),
        Err(TrendsError::NoData(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Records a firing's plan and its keys' figures over the final days before it (the last
/// `days` of them up to the last final day). A failure is the caller's to log: the firing
/// stands without a plan, reported as not measurable.
pub fn record_before(
    out: &Path,
    ledger: &Ledger,
    rule: &Rule,
    firing_id: i64,
    keys: &[String],
    days: Calendar,
) -> Result<(), String> {
    let Some(impact) = &rule.impact else {
        return Ok(());
    };
    let today = days.today;
    let finals = days
        .final_days(ledger, impact.dataset(), &rule.project)
        .map_err(|e| e.to_string())?;
    let to = finals.last().copied().unwrap_or_else(|| shift(today, -1));
    let from = shift(to, 1 - impact.days);
    let days = Days {
        from,
        to,
        days: final_count(&finals, from, to),
    };
    let table = if days.days > 0 {
        table_over(out, impact, &rule.project, from, to).map_err(|e| e.to_string())?
    } else {
        None
    };
    let figures = match table {
        Some(t) => impact.figures(&t, &rule.project, keys)?,
        None => {
            let none = Figure {
                value: None,
                rows: None,
            };
            keys.iter().map(|k| (k.clone(), none.clone())).collect()
        }
    };
    let definition = serde_json::to_string(impact).map_err(|e| e.to_string())?;
    ledger
        .record_before(firing_id, &definition, days, &figures)
        .map_err(|e| e.to_string())
}

/// What one measuring pass did.
#[derive(Debug, Default)]
pub struct Measured {
    /// Firings measured now.
    pub measured: usize,
    /// Firings given up now (with why).
    pub given_up: Vec<(i64, String)>,
    /// The impact files rewritten.
    pub files: Vec<PathBuf>,
}

/// Measures every plan that is due, then rewrites `agent_impact/` when anything changed.
pub fn measure_due(
    out: &Path,
    ledger: &Ledger,
    cal: Calendar,
    now: DateTime<Utc>,
) -> Result<Measured, ImpactError> {
    let tz = cal.tz;
    let plans = ledger.plans()?;
    let polled = polled(ledger)?;
    let mut keys = ledger.key_figures()?;
    let mut done = Measured::default();
    let mut finals: HashMap<(&str, String), Vec<NaiveDate>> = HashMap::new();
    for f in ledger.all()? {
        let Some(plan) = plans.get(&f.id).filter(|p| p.settled.is_none()) else {
            continue;
        };
        let Ok(impact) = serde_json::from_str::<Impact>(&plan.definition) else {
            ledger.record_after(f.id, After::Never("its [impact] cannot be read"), now)?;
            continue;
        };
        let days = match finals.entry((impact.dataset(), f.project.clone())) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(cal.final_days(ledger, impact.dataset(), &f.project)?)
            }
        };
        match due(&f, plan, &impact, days, polled.contains(&f.id), tz) {
            Due::Wait(_) => {}
            Due::Never(why) => {
                ledger.record_after(f.id, After::Never(&why), now)?;
                done.given_up.push((f.id, why));
            }
            Due::Measure(from, to) => {
                let names: Vec<String> = keys
                    .remove(&f.id)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|k| k.key)
                    .collect();
                let figures = match table_over(out, &impact, &f.project, from, to)? {
                    Some(t) => impact
                        .figures(&t, &f.project, &names)
                        .map_err(ImpactError::Metric)?,
                    None => Vec::new(),
                };
                let after = Days {
                    from,
                    to,
                    days: final_count(days, from, to),
                };
                ledger.record_after(f.id, After::Measured(after, &figures), now)?;
                done.measured += 1;
            }
        }
    }
    if done.measured > 0 || !done.given_up.is_empty() {
        done.files = table::write(out, &table::rows(ledger)?)?;
    }
    Ok(done)
}

/// Errors measuring.
#[derive(Debug, thiserror::Error)]
pub enum ImpactError {
    /// The ledger.
    #[error(transparent)]
    State(#[from] StoreError),
    /// The trend tables.
    #[error(transparent)]
    Trends(#[from] TrendsError),
    /// The metric's query.
    #[error("impact: {0}")]
    Metric(String),
    /// Writing Parquet.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Checks a rule's `[impact]` against the tables a rule evaluation reads (every project), so
/// that a metric naming a missing column is found on the first run, not on the day it fires.
pub fn check_on(rule: &Rule, tables: &Tables) -> Result<(), RuleError> {
    let Some(impact) = &rule.impact else {
        return Ok(());
    };
    let table = tables
        .frames()
        .into_iter()
        .find_map(|(name, df)| (name == impact.table).then_some(df))
        .ok_or_else(|| format!("{} is not a trend table", impact.table));
    table
        .and_then(|t| impact.figures(t, &rule.project, &[]))
        .map(|_| ())
        .map_err(|e| RuleError {
            file: rule.file.clone(),
            message: format!("impact: {e}"),
        })
}
