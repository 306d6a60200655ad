//! The prompt's template: minijinja with docpipe's filters, readers' words quoted as data,
//! the rows as the template sees them, and the prompt's hash.

use super::readers;
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
    env.set_formatter(move |out, state, value| match value.as_str() {
        Some(s) if !value.is_safe() => {
            readers.store(true, Ordering::Relaxed);
            out.write_str(&readers::quote(s))
                .map_err(minijinja::Error::from)
        }
        _ => minijinja::escape_formatter(out, state, value),
    });
    env
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

/// A cell of a column as a template value: a reader's text (any string column but those of
/// [`readers::SERVICE_COLUMNS`]) is a plain string, which the renderer escapes; the others are
/// docpipe's or the service's own words and render as they are.
pub(crate) fn cell_of(column: &str, v: AnyValue) -> Value {
    // Times and other scalars shown as text are docpipe's; lists may hold readers' texts.
    let own = readers::is_service_column(column)
        || !matches!(
            v,
            AnyValue::String(_) | AnyValue::StringOwned(_) | AnyValue::List(_)
        );
    let value = cell(v);
    match value.as_str() {
        Some(s) if own => Value::from_safe_string(s.to_string()),
        _ => value,
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

/// The rows of a frame as maps from column name to value.
pub(crate) fn records(df: &DataFrame) -> PolarsResult<Vec<Value>> {
    let columns = df.columns();
    let mut out = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let mut row = BTreeMap::new();
        for c in columns {
            row.insert(c.name().to_string(), cell_of(c.name(), c.get(i)?));
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
