//! A rule evaluated: its query run over the trend tables (within the join bound), the rows
//! already sent left out, its prompt rendered.

use super::evaluation::*;
use super::impact;
use super::lineage;
use super::query;
use super::readers;
use super::rule::*;
use super::template::*;
use docpipe_derive::Tables;
use minijinja::Value;
use polars::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Evaluates rules against the trend tables (all of them, filtered to each rule's project),
/// leaving out the rows whose key was sent lately when `memory` is given: runs polars on a
/// thread of its own, so it is callable from any runtime.
pub fn evaluate(
    rules: &[Rule],
    tables: &Tables,
    memory: Option<Memory<'_>>,
) -> Vec<Result<Evaluation, RuleError>> {
    std::thread::scope(|s| {
        s.spawn(|| {
            rules
                .iter()
                .map(|r| evaluate_here(r, tables, memory))
                .collect()
        })
        .join()
    })
    .unwrap_or_else(|_| {
        rules
            .iter()
            .map(|r| {
                Err(RuleError {
                    file: r.file.clone(),
                    message: "the query panicked in polars".into(),
                })
            })
            .collect()
    })
}

#[expect(clippy::too_many_lines)]
pub(crate) fn evaluate_here(
    rule: &Rule,
    tables: &Tables,
    memory: Option<Memory<'_>>,
) -> Result<Evaluation, RuleError> {
    let fail = |message: String| RuleError {
        file: rule.file.clone(),
        message: docpipe_catalog::text::column_hint(&one_line(&message)).into_owned(),
    };
    // The keys sent within the key cooldown: rows holding one are taken out of the tables
    // before the query runs, so that its ORDER BY and LIMIT make room for the next rows.
    let sent = match (&rule.key, memory) {
        (Some(_), Some(m)) => {
            let since = chrono::Duration::from_std(rule.key_cooldown)
                .ok()
                .and_then(|d| m.now.checked_sub_signed(d))
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
            m.ledger
                .sent_keys(&rule.name, &rule.project, since)
                .map_err(|e| fail(e.to_string()))?
        }
        _ => Default::default(),
    };
    let run = |without: Option<(&str, &std::collections::HashSet<String>)>| {
        let mut ctx = polars::sql::SQLContext::new();
        for (name, df) in tables.frames() {
            let df = match without {
                Some((key, sent)) if df.column(key).is_ok() => without_keys(df, key, sent)?.0,
                _ => df.clone(),
            };
            ctx.register(
                name,
                df.lazy()
                    .filter(col("project").eq(lit(rule.project.as_str()))),
            );
        }
        ctx.execute(&rule.when).and_then(LazyFrame::collect)
    };
    let mut sizes = ProjectSizes {
        tables,
        project: &rule.project,
        cache: HashMap::new(),
    };
    let bound =
        query::join_bound(&rule.when, &mut sizes).map_err(|e| fail(format!("when: {e}")))?;
    if bound > MAX_JOIN_ROWS {
        return Err(fail(format!(
            "when: the query's joins may produce up to {bound} rows, more than {MAX_JOIN_ROWS}; join on a key of the rows (a path, a search term), not on the project alone"
        )));
    }
    let mut rows = run(None).map_err(|e| fail(format!("when: {e}")))?;
    let mut keys = Vec::new();
    let mut left_out = 0;
    let matched = rows.height();
    if let Some(key) = &rule.key {
        let values = key_values(&rows, key).map_err(|_| {
            let names: Vec<String> = rows
                .get_column_names()
                .iter()
                .map(ToString::to_string)
                .collect();
            fail(format!(
                "key: the query returns no column {key:?} (it returns {})",
                names.join(", ")
            ))
        })?;
        left_out = values.iter().filter(|v| sent.contains(*v)).count();
        if !sent.is_empty() {
            rows = run(Some((key, &sent))).map_err(|e| fail(format!("when: {e}")))?;
        }
        // A key the tables do not hold (computed by the query) is left out afterwards.
        (rows, keys) = without_keys(&rows, key, &sent).map_err(|e| fail(format!("key: {e}")))?;
    } else if let Some(i) = &rule.impact {
        // The keys a firing's impact is measured by: the rows' values of the impact's key.
        keys = key_values(&rows, &i.key).map_err(|_| {
            fail(format!(
                "impact.key: the query returns no column {:?}, the key the impact is measured by",
                i.key
            ))
        })?;
    }
    impact::check_on(rule, tables)?;
    let readers = lineage::reader_columns(&rule.when, &lineage_base(tables), rows.width());
    // Only a column that can hold text carries readers' words as such: a number or a date
    // derived from them is rendered as a number or a date.
    let readers: Vec<bool> = rows
        .columns()
        .iter()
        .zip(readers)
        .map(|(c, r)| r && matches!(c.dtype(), DataType::String | DataType::List(_)))
        .collect();
    let reader_columns: Vec<String> = rows
        .get_column_names()
        .iter()
        .zip(&readers)
        .filter(|(_, r)| **r)
        .map(|(n, _)| n.to_string())
        .collect();
    let mut flags = flag_rows(&rows, &readers, &rule.domains);
    let mut dropped = Vec::new();
    if rule.on_flagged == OnFlagged::Drop && rule.review != Review::Never && !flags.is_empty() {
        let out: std::collections::HashSet<usize> = flags.iter().map(|f| f.row - 1).collect();
        let keep: BooleanChunked = (0..rows.height()).map(|i| !out.contains(&i)).collect();
        rows = rows.filter(&keep).map_err(|e| fail(format!("when: {e}")))?;
        if !keys.is_empty() {
            keys = keys
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !out.contains(i))
                .map(|(_, k)| k)
                .collect();
        }
        dropped = std::mem::take(&mut flags);
    }
    let fires = rows.height() >= rule.min_rows;
    let records = if fires {
        records(&rows, &readers).map_err(|e| fail(format!("when: {e}")))?
    } else {
        // Nothing to send: render with zero values of the query's columns, so that a template
        // that names a missing column or filter is found now, not on the day the rule fires
        // (a few rows: a loop over a million would only spend the template's fuel).
        vec![sample(&rows); rule.min_rows.min(SAMPLE_ROWS)]
    };
    let (prompt, renders_readers) =
        render(&rule.prompt, rule, &records, rows.height()).map_err(fail)?;
    if fires && prompt.trim().is_empty() {
        return Err(fail("prompt: renders as empty text".into()));
    }
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(fail(format!(
            "prompt: renders as {} bytes, more than {MAX_PROMPT_BYTES}; add a LIMIT to the query",
            prompt.len()
        )));
    }
    Ok(Evaluation {
        rows,
        keys,
        matched,
        left_out,
        fires,
        prompt: fires.then_some(prompt),
        flags,
        dropped,
        reader_columns,
        renders_readers: fires && renders_readers,
        records: if fires { records } else { Vec::new() },
    })
}

/// The trend tables' columns as the lineage's roots: every column but the service's own is a
/// reader's (numbers and dates among them: a value rendered as a number or a date is never
/// a reader's text, whatever its lineage).
pub(crate) fn lineage_base(tables: &Tables) -> lineage::Base {
    tables
        .frames()
        .into_iter()
        .map(|(name, df)| {
            let columns = df
                .get_column_names()
                .iter()
                .map(|c| (c.to_string(), !readers::is_service_column(c)))
                .collect();
            (name.to_string(), columns)
        })
        .collect()
}

/// The trend tables' sizes for one project, for the join bound.
pub(crate) struct ProjectSizes<'a> {
    tables: &'a Tables,
    project: &'a str,
    cache: HashMap<(String, String), Option<u64>>,
}

impl ProjectSizes<'_> {
    /// One number of a table filtered to the project, `None` when it has no such column.
    fn figure(&mut self, table: &str, column: Option<&str>) -> Option<u64> {
        let key = (table.to_string(), column.unwrap_or("").to_string());
        if let Some(v) = self.cache.get(&key) {
            return *v;
        }
        let df = self
            .tables
            .frames()
            .into_iter()
            .find(|(n, _)| *n == table)
            .map(|(_, df)| df);
        let v = df.and_then(|df| {
            let lf = df
                .clone()
                .lazy()
                .filter(col("project").eq(lit(self.project)));
            let lf = match column {
                None => lf.select([len().alias("n")]),
                Some(c) => {
                    df.column(c).ok()?;
                    lf.group_by([col(c)])
                        .agg([len().alias("n")])
                        .select([col("n").max()])
                }
            };
            let out = lf.collect().ok()?;
            let n = out.column("n").ok()?.get(0).ok()?;
            Some(match n {
                AnyValue::UInt32(x) => u64::from(x),
                AnyValue::UInt64(x) => x,
                AnyValue::Int64(x) => x.max(0) as u64,
                AnyValue::Int32(x) => x.max(0) as u64,
                _ => 0,
            })
        });
        self.cache.insert(key, v);
        v
    }
}

impl query::Sizes for ProjectSizes<'_> {
    fn rows(&mut self, table: &str) -> u64 {
        self.figure(table, None).unwrap_or(0)
    }

    fn most_per_value(&mut self, table: &str, column: &str) -> Option<u64> {
        self.figure(table, Some(column))
    }
}

/// Renders `template` with `rows`, `row_count`, `columns`, `project` and `rule`; a prompt that
/// renders a reader's value starts with docpipe's [`readers::PREAMBLE`], outside the template
/// (and the second value says it does).
pub fn render(
    template: &str,
    rule: &Rule,
    rows: &[Value],
    row_count: usize,
) -> Result<(String, bool), String> {
    let columns: Vec<Value> = rows
        .first()
        .and_then(|r| r.try_iter().ok())
        .map(|keys| {
            keys.map(|k| Value::from_safe_string(k.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let safe = |s: &str| Value::from_safe_string(s.to_string());
    let ctx = Value::from(BTreeMap::from([
        ("rows".to_string(), Value::from(rows.to_vec())),
        ("row_count".to_string(), Value::from(row_count)),
        ("columns".to_string(), Value::from(columns)),
        ("project".to_string(), safe(&rule.project)),
        ("rule".to_string(), safe(&rule.name)),
    ]));
    let readers = Arc::new(AtomicBool::new(false));
    let text = environment(readers.clone())
        .render_str(template, ctx)
        .map_err(|e| format!("prompt: {e}"))?;
    // A trigger's record is never sent: it needs no word to an agent about readers' words.
    Ok(
        if readers.load(Ordering::Relaxed) && rule.action.automation().is_none() {
            (format!("{}{text}", readers::PREAMBLE), true)
        } else {
            (text, false)
        },
    )
}

/// A frame without the rows whose `key` is in `sent`, and the keys of the rows kept.
pub(crate) fn without_keys(
    df: &DataFrame,
    key: &str,
    sent: &std::collections::HashSet<String>,
) -> PolarsResult<(DataFrame, Vec<String>)> {
    let mut kept = key_values(df, key)?;
    let keep: BooleanChunked = kept.iter().map(|v| !sent.contains(v)).collect();
    kept.retain(|v| !sent.contains(v));
    Ok((df.filter(&keep)?, kept))
}

/// The values of a frame's column as the ledger keeps keys.
pub(crate) fn key_values(df: &DataFrame, key: &str) -> PolarsResult<Vec<String>> {
    let column = df.column(key)?;
    (0..df.height())
        .map(|i| column.get(i).map(|v| cell(v).to_string()))
        .collect()
}
