//! What a rule's evaluation brings back: its rows, its prompt, the rows flagged for review.

use super::readers;
use super::rule::*;
use crate::store::ledger::Ledger;
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
        match rule.review {
            Review::Never => None,
            Review::Always => Some("the rule's review is \"always\"".to_string()),
            Review::Flagged if self.flags.is_empty() => None,
            Review::Flagged => Some(format!(
                "{} readers' values read as instructions to an agent",
                self.flags.len()
            )),
        }
    }
}

/// The readers' values of a frame's rows that read as instructions (every string column but
/// docpipe's and the service's own).
pub(crate) fn flag_rows(df: &DataFrame, own: &[String]) -> Vec<RowFlag> {
    let mut out = Vec::new();
    let columns: Vec<&Column> = df
        .columns()
        .iter()
        .filter(|c| c.dtype() == &DataType::String && !readers::is_service_column(c.name()))
        .collect();
    for i in 0..df.height() {
        for c in &columns {
            let Ok(v) = c.get(i) else { continue };
            let text = match &v {
                AnyValue::String(s) => *s,
                AnyValue::StringOwned(s) => s.as_str(),
                _ => continue,
            };
            // A column that joins several readers' texts is judged text by text (their sum
            // may be long; no one of them is).
            let patterns = if readers::JOINED_COLUMNS.contains(&c.name().as_str()) {
                let mut all: Vec<readers::Pattern> = text
                    .split(crate::trends::gaps::SEPARATOR)
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
                    row: i + 1,
                    column: c.name().to_string(),
                    value: readers::quote(text),
                    patterns,
                });
            }
        }
    }
    out
}
