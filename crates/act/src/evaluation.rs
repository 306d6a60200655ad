//! What a rule's evaluation brings back: its rows, its prompt, the rows flagged for review.

use super::readers;
use super::rule::*;
use docpipe_state::ledger::Ledger;
use polars::prelude::*;

/// What the rules remember of their firings: the ledger, and the time now (the keys sent
/// within each rule's `key_cooldown` before it are left out).
#[derive(Debug, Clone, Copy)]
pub struct Memory<'a> {
    /// The ledger.
    pub ledger: &'a Ledger,
    /// Now.
    pub now: chrono::DateTime<chrono::Utc>,
}

/// What a rule's query gave, and the prompt it renders.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The rows the query returned (less those whose key was sent lately).
    pub rows: DataFrame,
    /// The keys of `rows` (a rule with a `key`).
    pub keys: Vec<String>,
    /// Rows the query returns with every key (before the key filter).
    pub matched: usize,
    /// Of those, the rows left out as their key was sent lately (the query then ran without
    /// them, so that others could take their place).
    pub left_out: usize,
    /// Whether there are at least `min_rows` of them.
    pub fires: bool,
    /// The rendered prompt (when it fires).
    pub prompt: Option<String>,
    /// The readers' values of `rows` that read as instructions to an agent.
    pub flags: Vec<RowFlag>,
    /// The flagged rows left out (a rule with `flagged = "drop"`).
    pub dropped: Vec<RowFlag>,
    /// The output columns that carry readers' words, by the query's lineage.
    pub reader_columns: Vec<String>,
    /// Whether the prompt renders a value derived from readers' words.
    pub renders_readers: bool,
    /// The rows as the template saw them (when it fires): kept with a held firing, so that a
    /// person may approve it without some rows.
    pub records: Vec<minijinja::Value>,
}

/// A held firing's rows as the ledger keeps them (JSON): the template, the values, which
/// columns carry readers' words and each row's key, so that the prompt can be rendered again
/// without some rows exactly as it was rendered with them.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HeldRows {
    /// The rule's template as it was rendered.
    pub template: String,
    /// The columns that carry readers' words.
    pub readers: Vec<String>,
    /// The keys of the rows, in order (empty without a key).
    pub keys: Vec<String>,
    /// The query's columns, in its order.
    pub columns: Vec<String>,
    /// The rows: each a value per column.
    pub rows: Vec<Vec<serde_json::Value>>,
}

impl HeldRows {
    /// The rows of an evaluation of `rule` as held.
    pub fn of(rule: &Rule, eval: &Evaluation) -> Option<Self> {
        let columns: Vec<String> = eval
            .rows
            .get_column_names()
            .iter()
            .map(ToString::to_string)
            .collect();
        let rows = eval
            .records
            .iter()
            .map(|r| {
                columns
                    .iter()
                    .map(|c| r.get_attr(c).map(|v| to_json(&v)).ok())
                    .collect::<Option<Vec<_>>>()
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            template: rule.prompt.clone(),
            readers: eval.reader_columns.clone(),
            keys: eval.keys.clone(),
            columns,
            rows,
        })
    }

    /// The rows again as template values: a reader's column's strings plain (the renderer
    /// escapes them), the others docpipe's own.
    pub fn values(&self, keep: impl Fn(usize) -> bool) -> Vec<minijinja::Value> {
        self.rows
            .iter()
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(_, row)| {
                let map: std::collections::BTreeMap<String, minijinja::Value> = self
                    .columns
                    .iter()
                    .zip(row)
                    .map(|(k, v)| (k.clone(), json_value(v, self.readers.contains(k))))
                    .collect();
                minijinja::Value::from(map)
            })
            .collect()
    }

    /// The keys of the rows at `indexes` (from 0; none for a rule without a key).
    pub fn keys_at(&self, indexes: &[usize]) -> Vec<String> {
        indexes
            .iter()
            .filter_map(|i| self.keys.get(*i).cloned())
            .collect()
    }

    /// Each row on a line, numbered from 1, its values `column=value` (a reader's quoted),
    /// then its flags: `row 2: search_query="..." hits_7d=5200 | flagged: link (search_query)`.
    pub fn lines(&self, flags: &[RowFlag]) -> Vec<String> {
        self.rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let values: Vec<String> = self
                    .columns
                    .iter()
                    .zip(row)
                    .map(|(k, v)| {
                        let shown = match v {
                            serde_json::Value::String(s) if self.readers.contains(k) => {
                                readers::quote(s)
                            }
                            serde_json::Value::String(s) => s.clone(),
                            serde_json::Value::Array(a) if self.readers.contains(k) => {
                                let items: Vec<String> = a
                                    .iter()
                                    .map(|e| match e {
                                        serde_json::Value::String(s) => readers::quote(s),
                                        other => other.to_string(),
                                    })
                                    .collect();
                                format!("[{}]", items.join(", "))
                            }
                            serde_json::Value::Number(n) if !n.is_i64() && !n.is_u64() => {
                                format!("{:.4}", n.as_f64().unwrap_or(f64::NAN))
                            }
                            other => other.to_string(),
                        };
                        format!("{k}={shown}")
                    })
                    .collect();
                let mine: Vec<String> = flags
                    .iter()
                    .filter(|f| f.row == i + 1)
                    .map(|f| {
                        let p: Vec<&str> = f.patterns.iter().map(|p| p.as_str()).collect();
                        format!("{} ({})", p.join(", "), f.column)
                    })
                    .collect();
                let verdict = if mine.is_empty() {
                    "no flag".to_string()
                } else {
                    format!("flagged: {}", mine.join("; "))
                };
                format!("row {}: {} | {verdict}", i + 1, values.join(" "))
            })
            .collect()
    }
}

/// A JSON value as a template value; strings plain when `reader`, else docpipe's own.
fn json_value(v: &serde_json::Value, reader: bool) -> minijinja::Value {
    use minijinja::Value;
    match v {
        serde_json::Value::String(s) if reader => Value::from(s.as_str()),
        serde_json::Value::String(s) => Value::from_safe_string(s.clone()),
        serde_json::Value::Array(a) => {
            Value::from(a.iter().map(|e| json_value(e, reader)).collect::<Vec<_>>())
        }
        serde_json::Value::Object(m) => Value::from(
            m.iter()
                .map(|(k, e)| (k.clone(), json_value(e, reader)))
                .collect::<std::collections::BTreeMap<_, _>>(),
        ),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => Value::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Null => Value::from(()),
    }
}

/// A template value as JSON (the rows of [`HeldRows`]).
fn to_json(v: &minijinja::Value) -> serde_json::Value {
    use minijinja::value::ValueKind;
    match v.kind() {
        ValueKind::String => serde_json::Value::from(v.as_str().unwrap_or_default()),
        ValueKind::Bool => serde_json::Value::from(v.is_true()),
        ValueKind::Number => match i64::try_from(v.clone()) {
            Ok(i) => serde_json::Value::from(i),
            Err(_) => serde_json::Value::from(f64::try_from(v.clone()).unwrap_or(f64::NAN)),
        },
        ValueKind::Seq => serde_json::Value::Array(
            v.try_iter()
                .map(|items| items.map(|e| to_json(&e)).collect())
                .unwrap_or_default(),
        ),
        ValueKind::Map => serde_json::Value::Object(
            v.try_iter()
                .map(|keys| {
                    keys.map(|k| {
                        let value = v.get_item(&k).unwrap_or_default();
                        (k.to_string(), to_json(&value))
                    })
                    .collect()
                })
                .unwrap_or_default(),
        ),
        _ => serde_json::Value::Null,
    }
}

/// A reader's value of a row that reads as an instruction to an agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowFlag {
    /// The row, from 1, in the query's order (of the rows before any was dropped).
    pub row: usize,
    /// The column.
    pub column: String,
    /// The value as a prompt renders it (escaped, cut).
    pub value: String,
    /// Why it is flagged.
    pub patterns: Vec<readers::Pattern>,
}

/// The flags a ledger's trail keeps as JSON (none: an empty list).
pub fn parse_flags(json: Option<&str>) -> Vec<RowFlag> {
    json.and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_default()
}

impl RowFlag {
    /// `row 2 search_query "..." : addresses_agent, link`.
    pub fn line(&self) -> String {
        let patterns: Vec<&str> = self.patterns.iter().map(|p| p.as_str()).collect();
        format!(
            "row {} {} {}: {}",
            self.row,
            self.column,
            self.value,
            patterns.join(", ")
        )
    }
}

impl Evaluation {
    /// Why a firing of `rule` waits for a person's review, if it does.
    pub fn hold(&self, rule: &Rule) -> Option<String> {
        if rule.action.automation().is_some() {
            // A trigger sends no readers' words (nothing but the automation's id).
            return None;
        }
        match rule.review {
            Review::Never => None,
            Review::Always => Some("the rule's review is \"always\"".to_string()),
            Review::Readers if !self.renders_readers => None,
            Review::Readers => Some(format!(
                "its prompt holds readers' words, {} of them flagged: a person sees them before the agent acts",
                self.flags.len()
            )),
            Review::Flagged if self.flags.is_empty() => None,
            Review::Flagged => Some(format!(
                "{} readers' values read as instructions to an agent",
                self.flags.len()
            )),
        }
    }
}

/// The readers' values of a frame's rows that read as instructions: every string of a column
/// that carries readers' words (`readers`, by the query's lineage), a list's element by
/// element.
pub(crate) fn flag_rows(df: &DataFrame, readers: &[bool], own: &[String]) -> Vec<RowFlag> {
    let mut out = Vec::new();
    let columns: Vec<&Column> = df
        .columns()
        .iter()
        .enumerate()
        .filter(|(i, _)| readers.get(*i).copied().unwrap_or(true))
        .map(|(_, c)| c)
        .collect();
    for (row, column, text) in &reader_texts(df, &columns) {
        // A column that joins several readers' texts is judged text by text (their sum may
        // be long; no one of them is).
        let base = column.split('[').next().unwrap_or(column);
        let patterns = if readers::JOINED_COLUMNS.contains(&base) {
            let mut all: Vec<readers::Pattern> = text
                .split(docpipe_derive::gaps::SEPARATOR)
                .flat_map(|t| readers::flags(t, own))
                .collect();
            all.sort();
            all.dedup();
            all
        } else {
            readers::flags(text, own)
        };
        if !patterns.is_empty() {
            out.push(RowFlag {
                row: row + 1,
                column: column.clone(),
                value: readers::quote(text),
                patterns,
            });
        }
    }
    out
}

/// The readers' texts of a frame's rows in `columns`: (row, column, text), a list's elements
/// named `column[i]` (from 1).
fn reader_texts(df: &DataFrame, columns: &[&Column]) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for i in 0..df.height() {
        for c in columns {
            let Ok(v) = c.get(i) else { continue };
            match v {
                AnyValue::String(s) => out.push((i, c.name().to_string(), s.to_string())),
                AnyValue::StringOwned(s) => out.push((i, c.name().to_string(), s.to_string())),
                AnyValue::List(list) => {
                    for j in 0..list.len() {
                        let text = match list.get(j) {
                            Ok(AnyValue::String(s)) => s.to_string(),
                            Ok(AnyValue::StringOwned(s)) => s.to_string(),
                            _ => continue,
                        };
                        out.push((i, format!("{}[{}]", c.name(), j + 1), text));
                    }
                }
                _ => {}
            }
        }
    }
    out
}
