//! The prompt's template: minijinja with docpipe's filters, readers' words quoted as data,
//! the rows as the template sees them, and the prompt's hash.

use super::readers;
use minijinja::value::ValueKind;
use minijinja::{Environment, UndefinedBehavior, Value};
use polars::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The template work a prompt may take to render (minijinja's fuel: about one unit per
/// instruction), so that a loop of loops ends with an error instead of running for minutes.
pub const TEMPLATE_FUEL: u64 = 5_000_000;

/// The template environment: strict about undefined values, with a `pct` filter, and the
/// readers' escape applied by the renderer itself: every string that is not docpipe's own (a
/// reader's value, or text a filter made of one) is written by [`readers::quote`]. `readers`
/// is set when a reader's value was rendered; `unescaped` renders one as it is (a rule that
/// needs it says so per value, and `rules check` names each place).
pub fn environment(readers: Arc<AtomicBool>) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.add_filter("pct", pct);
    // The template's own way around the escape would be silent: only `unescaped` is.
    env.remove_filter("safe");
    let seen = readers.clone();
    env.add_filter("unescaped", move |value: Value| {
        seen.store(true, Ordering::Relaxed);
        match value.as_str() {
            Some(s) => Value::from_safe_string(s.to_string()),
            None => value,
        }
    });
    env.set_formatter(move |out, state, value| {
        if value.as_str().is_some() && value.is_safe() || !holds_text(value) {
            return minijinja::escape_formatter(out, state, value);
        }
        let mut text = String::new();
        if write_value(&mut text, value) {
            readers.store(true, Ordering::Relaxed);
        }
        out.write_str(&text).map_err(minijinja::Error::from)
    });
    env
}

/// Whether a value is a string, or a list or map that may hold one.
fn holds_text(value: &Value) -> bool {
    matches!(
        value.kind(),
        ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
    )
}

/// Writes a value whose strings are readers' words (any string not docpipe's own) quoted by
/// [`readers::quote`], element by element through lists and maps (`[a, b]`, `{k: v}`);
/// whether it wrote a reader's string.
fn write_value(out: &mut String, value: &Value) -> bool {
    if let Some(s) = value.as_str() {
        if value.is_safe() {
            out.push_str(s);
            return false;
        }
        out.push_str(&readers::quote(s));
        return true;
    }
    let map = value.kind() == ValueKind::Map;
    let Some(items) = value.try_iter().ok().filter(|_| holds_text(value)) else {
        out.push_str(&value.to_string());
        return false;
    };
    let mut any = false;
    out.push(if map { '{' } else { '[' });
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        any |= write_value(out, &item);
        if map {
            out.push_str(": ");
            any |= write_value(out, &value.get_item(&item).unwrap_or_default());
        }
    }
    out.push(if map { '}' } else { ']' });
    any
}

/// `{{ share | pct }}` renders 0.4523 as `45.2%` (`pct(0)` for no decimals); none gives `n/a`.
pub(crate) fn pct(value: Value, digits: Option<u32>) -> Result<Value, minijinja::Error> {
    if value.is_none() || value.is_undefined() {
        return Ok(Value::from_safe_string("n/a".to_string()));
    }
    let x = f64::try_from(value)?;
    Ok(Value::from_safe_string(format!(
        "{:.*}%",
        digits.unwrap_or(1) as usize,
        x * 100.0
    )))
}

/// The places where a template uses the `unescaped` filter: `line N: <the line>`.
pub(crate) fn unescaped_places(template: &str) -> Vec<String> {
    template
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            l.split('|')
                .skip(1)
                .any(|f| f.trim_start().starts_with("unescaped"))
        })
        .map(|(i, l)| format!("line {}: {}", i + 1, l.trim()))
        .collect()
}

/// Words that ask an agent to reuse a value's wording as it is.
const VERBATIM: [&str; 10] = [
    "title",
    "copy",
    "verbatim",
    "word for word",
    "as is",
    "exact",
    "paste",
    "quote",
    "wording",
    "heading",
];

/// Words that say a line asks for the opposite of reuse.
const NEGATIONS: [&str; 5] = ["not ", "never ", "don't ", "no ", "without "];

/// The places where a template asks to reuse a reader's value verbatim: in a template that
/// names one of `readers` (the query's columns that carry readers' words, as `.column` or
/// `['column']`), each line with a word of [`VERBATIM`] and no negation ("not", "never",
/// ...): `line N: <the line>`.
pub fn verbatim_places(template: &str, readers: &[String]) -> Vec<String> {
    let names = readers
        .iter()
        .any(|c| template.contains(&format!(".{c}")) || template.contains(&format!("['{c}']")));
    if !names {
        return Vec::new();
    }
    template
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = format!("{} ", l.to_lowercase());
            VERBATIM.iter().any(|w| l.contains(w)) && !NEGATIONS.iter().any(|n| l.contains(n))
        })
        .map(|(i, l)| format!("line {}: {}", i + 1, l.trim()))
        .collect()
}

/// A cell as a template value: in a column that carries readers' words (`reader`, from the
/// query's lineage) a string is a plain string, which the renderer escapes, and a list is a
/// list of such values (a `for` loop yields its elements); any other string is docpipe's or
/// the service's own and renders as it is. Numbers, dates and times are never a reader's.
pub(crate) fn cell_of(reader: bool, v: AnyValue) -> Value {
    match v {
        AnyValue::List(s) => Value::from(
            (0..s.len())
                .map(|i| s.get(i).map_or(Value::from(()), |e| cell_of(reader, e)))
                .collect::<Vec<_>>(),
        ),
        v => {
            let text = matches!(v, AnyValue::String(_) | AnyValue::StringOwned(_));
            let value = cell(v);
            match value.as_str() {
                Some(s) if !(reader && text) => Value::from_safe_string(s.to_string()),
                _ => value,
            }
        }
    }
}

/// A cell as a template value: numbers stay numbers, dates are `YYYY-MM-DD`, null is none.
pub(crate) fn cell(v: AnyValue) -> Value {
    match v {
        AnyValue::Null => Value::from(()),
        AnyValue::Boolean(b) => Value::from(b),
        AnyValue::Int8(x) => Value::from(x),
        AnyValue::Int16(x) => Value::from(x),
        AnyValue::Int32(x) => Value::from(x),
        AnyValue::Int64(x) => Value::from(x),
        AnyValue::UInt8(x) => Value::from(x),
        AnyValue::UInt16(x) => Value::from(x),
        AnyValue::UInt32(x) => Value::from(x),
        AnyValue::UInt64(x) => Value::from(x),
        AnyValue::Float32(x) => Value::from(f64::from(x)),
        AnyValue::Float64(x) => Value::from(x),
        AnyValue::String(s) => Value::from(s),
        AnyValue::StringOwned(s) => Value::from(s.as_str()),
        AnyValue::Date(days) => {
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
            Value::from_safe_string((epoch + chrono::Duration::days(i64::from(days))).to_string())
        }
        other => Value::from(other.to_string()),
    }
}

/// The rows of a frame as maps from column name to value; `readers` says, column by column,
/// which carry readers' words (see [`cell_of`]).
pub(crate) fn records(df: &DataFrame, readers: &[bool]) -> PolarsResult<Vec<Value>> {
    let columns = df.columns();
    let mut out = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let mut row = BTreeMap::new();
        for (n, c) in columns.iter().enumerate() {
            let reader = readers.get(n).copied().unwrap_or(true);
            row.insert(c.name().to_string(), cell_of(reader, c.get(i)?));
        }
        out.push(Value::from(row));
    }
    Ok(out)
}

/// A row of zero values for a frame's columns.
pub(crate) fn sample(df: &DataFrame) -> Value {
    let mut row = BTreeMap::new();
    for c in df.columns() {
        let v = match c.dtype() {
            d if d.is_integer() => Value::from(0),
            d if d.is_float() => Value::from(0.0),
            DataType::Boolean => Value::from(false),
            DataType::Date => Value::from_safe_string("1970-01-01".to_string()),
            _ => Value::from(""),
        };
        row.insert(c.name().to_string(), v);
    }
    Value::from(row)
}

/// Up to `max` rows of a frame as `column=value` lines (floats to 4 decimals), for the terminal.
pub fn preview(df: &DataFrame, max: usize) -> Vec<String> {
    (0..df.height().min(max))
        .map(|i| {
            df.columns()
                .iter()
                .map(|c| {
                    let v = match c.get(i) {
                        Ok(AnyValue::Float64(x)) => format!("{x:.4}"),
                        Ok(AnyValue::Float32(x)) => format!("{x:.4}"),
                        Ok(v) => cell(v).to_string(),
                        Err(_) => "?".into(),
                    };
                    format!("{}={v}", c.name())
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A prompt's hash as lines show it: its first 12 hex digits.
pub fn short_hash(hash: &str) -> &str {
    &hash[..12.min(hash.len())]
}

/// The SHA-256 of a prompt, in hex: how the ledger knows a prompt was sent before.
pub fn prompt_hash(prompt: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(prompt.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
