//! The datasets other than page views, described as data: the array a page holds, each
//! column's JSON field, type and nullability, the key, the day totals, the paging. One decoder
//! turns any of their pages into rows of [`Cell`]s (refusing a wrong type, a huge string or a
//! row past the limit), and one builder turns rows into a record batch of the table's schema.

use super::{Dataset, Paging, Table, Windowing};
use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use serde_json::Value;
use std::sync::Arc;

/// The longest string a field may hold (a response of the assistant is a few kilobytes).
pub const MAX_TEXT_BYTES: usize = 256 << 10;
/// The longest cursor docpipe sends back.
pub const MAX_CURSOR_BYTES: usize = 1024;
/// The most sources one assistant turn may cite.
pub const MAX_SOURCES: usize = 1000;

/// A column's type: how its JSON value reads and what Arrow type it is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (`Utf8`).
    Text,
    /// One of a set of strings (`Utf8`): the values docpipe knows today; another is kept as
    /// it is, and counted ([`Shape::unknown_values`]).
    Choice(&'static [&'static str]),
    /// A non-negative integer count (`Int64`); an integral float such as `12.0` reads too.
    Count,
    /// A finite non-negative number (`Float64`): a ratio.
    Ratio,
    /// `true` or `false` (`Boolean`).
    Flag,
    /// An RFC 3339 instant, or one in another ISO 8601 shape ([`instant`]) (`Timestamp(µs,
    /// UTC)`).
    Time,
    /// A list of `{title, url}` objects (`List<Struct<title, url>>`).
    Sources,
}

/// Whether a column's field may be null or absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Present and not null.
    Required,
    /// Present, possibly null.
    Nullable,
    /// Possibly absent or null (a field of only some shapes): null then.
    Optional,
    /// Possibly absent: this value then (the service's documented default).
    Default(&'static str),
}

/// One column: the snake_case name in the table, the field in the JSON.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Name in the table.
    pub name: &'static str,
    /// Field in the service's JSON.
    pub field: &'static str,
    /// Type.
    pub kind: Kind,
    /// Nullability.
    pub need: Need,
}

/// Shorthand for the descriptors.
pub const fn col(name: &'static str, field: &'static str, kind: Kind, need: Need) -> Column {
    Column {
        name,
        field,
        kind,
        need,
    }
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Null.
    Null,
    /// A string.
    Text(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// An instant, in microseconds since the epoch.
    Time(i64),
    /// `(title, url)` pairs.
    Sources(Vec<(String, String)>),
}

impl Cell {
    /// The text, if it is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if it is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The number, if it is an integer or a float.
    pub fn number(&self) -> Option<f64> {
        match self {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// The instant, if it is one.
    pub fn time(&self) -> Option<DateTime<Utc>> {
        match self {
            Cell::Time(us) => DateTime::from_timestamp_micros(*us),
            _ => None,
        }
    }

    /// The value as a key part (for duplicates and merges).
    fn key_part(&self, out: &mut String) {
        match self {
            Cell::Null => out.push('\u{0}'),
            Cell::Text(s) => out.push_str(s),
            Cell::Int(v) | Cell::Time(v) => out.push_str(&v.to_string()),
            Cell::Float(v) => out.push_str(&v.to_string()),
            Cell::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Cell::Sources(_) => out.push('*'),
        }
    }
}

/// A count the service sent with a fraction: its table has it rounded.
#[derive(Debug, Clone, PartialEq)]
pub struct Fraction {
    /// The row's key as people read it (`path "/docs/a"`), or `(day totals)`.
    pub key: String,
    /// The column.
    pub column: &'static str,
    /// The value as sent.
    pub sent: f64,
    /// The value written (rounded half away from zero).
    pub written: i64,
}

// `sent` is finite (the decoder keeps no other): equality is total.
impl Eq for Fraction {}

/// A row to write with its flags (see [`Shape::flags`]).
pub type FlaggedRow<'a> = (&'a [Cell], &'a [bool]);

/// A check of a whole decoded row.
pub type RowCheck = fn(&[Cell]) -> Result<(), String>;

/// Where a page's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowsAt {
    /// An array field of the body.
    Array(&'static str),
    /// The body itself is the one row.
    Body,
}

/// The day totals a page carries beside its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TotalsAt {
    /// None.
    None,
    /// An object field holding these columns.
    Object(&'static str),
    /// Top-level fields of the body.
    Fields,
}

/// A dataset read through the generic walk.
#[derive(Debug)]
pub struct Shape {
    /// Name in the config and the state.
    pub name: &'static str,
    /// The service's path, with `{project}` for the project id (and `{thread}`).
    pub endpoint: &'static str,
    /// How its pages follow each other.
    pub paging: Paging,
    /// How its windows are cut.
    pub windowing: Windowing,
    /// Where the rows are.
    pub rows: RowsAt,
    /// The row columns (`fetched_at` is added).
    pub columns: &'static [Column],
    /// The row key's columns: unique within a window, and what a merge replaces on.
    pub key: &'static [&'static str],
    /// The day totals.
    pub totals_at: TotalsAt,
    /// The totals' columns.
    pub totals: &'static [Column],
    /// `(row column, totals column)`: the rows of a complete window sum to the total.
    pub sums: &'static [(&'static str, &'static str)],
    /// The row table.
    pub table: &'static str,
    /// The totals table (`None`: no totals).
    pub totals_table: Option<&'static str>,
    /// For a span dataset: the instant column that gives a row's day (its partition).
    pub day_of: Option<&'static str>,
    /// For a span dataset: the table of rows whose instant is null (merged on the key).
    pub undated_table: Option<&'static str>,
    /// Span datasets: the table (per project, merged on the key) of the rows the service sent
    /// dated outside the days asked for (the range filters on another instant than the one a
    /// row is partitioned by): set aside there, not written under another window's days.
    pub outside_table: Option<&'static str>,
    /// A check of a whole row beyond its columns' types (fields that depend on another's value).
    pub check_row: Option<RowCheck>,
    /// The tables, for [`Dataset::tables`].
    pub tables: &'static [Table],
    /// Boolean columns the rows carry beyond the service's fields, set by the exporter
    /// (`cut_off` on `feedback_by_page`: the service had more rows for the day than it lets
    /// anyone fetch).
    pub flags: &'static [&'static str],
    /// Whether it is exported when the config does not list datasets.
    pub by_default: bool,
}

impl Dataset for Shape {
    fn name(&self) -> &'static str {
        self.name
    }
    fn endpoint(&self) -> &'static str {
        self.endpoint
    }
    fn paging(&self) -> Paging {
        self.paging
    }
    fn windowing(&self) -> Windowing {
        self.windowing
    }
    fn tables(&self) -> &'static [Table] {
        self.tables
    }
    fn by_default(&self) -> bool {
        self.by_default
    }
    fn walker(&'static self) -> crate::dataset::Walker {
        crate::dataset::Walker::Shaped(self)
    }
    fn rounds_fractions(&self) -> bool {
        true
    }
}

/// A table of a shape's descriptor (its schema comes from the shape by name).
pub const fn table(
    table: &'static docpipe_catalog::tables::Table,
    schema: fn() -> SchemaRef,
) -> Table {
    Table {
        name: table.name,
        schema,
        partition: table.partitioning,
    }
}

/// One decoded page.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// Its rows, cells in column order.
    pub rows: Vec<Vec<Cell>>,
    /// Its day totals, cells in the totals' column order (empty without totals).
    pub totals: Vec<Cell>,
    /// `hasMore`, when the page has one.
    pub has_more: Option<bool>,
    /// `nextCursor`, for cursor paging (`None`: null).
    pub next_cursor: Option<String>,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Where a value is, for an error: `conversations[3].query`. Built only when an error names it.
#[derive(Clone, Copy)]
struct Place<'a> {
    base: &'a str,
    index: Option<usize>,
    field: Option<&'a str>,
}

impl std::fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.base)?;
        if let Some(i) = self.index {
            write!(f, "[{i}]")?;
        }
        if let Some(field) = self.field {
            write!(f, ".{field}")?;
        }
        Ok(())
    }
}

/// The string of `v`, moved out of it (the page's JSON is not kept).
fn text(v: &mut Value, what: impl std::fmt::Display) -> Result<String, String> {
    match v {
        Value::String(s) if s.len() > MAX_TEXT_BYTES => Err(format!(
            "{what} is {} bytes, more than {} KiB",
            s.len(),
            MAX_TEXT_BYTES >> 10
        )),
        Value::String(s) => Ok(std::mem::take(s)),
        other => Err(format!("{what} is {}, not a string", type_name(other))),
    }
}

/// The largest count a float holds exactly (2^53).
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// A count: a non-negative integer in i64 (an integral float such as `12.0` too).
pub fn count(v: &Value, what: &str) -> Result<i64, String> {
    match v.as_number() {
        Some(n) => crate::api::views::integral(n, what),
        None => Err(format!("{what} is {}, not a number", type_name(v))),
    }
}

/// An instant in RFC 3339, or in another ISO 8601 shape the service might send, with how it
/// was read then: a zone without a colon, no zone (read as UTC), a date alone (its midnight,
/// UTC).
pub fn instant(s: &str) -> Option<(DateTime<Utc>, Option<&'static str>)> {
    use chrono::{NaiveDate, NaiveDateTime};
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some((t.with_timezone(&Utc), None));
    }
    // (RFC 3339 allows a space for the `T`: chrono reads it above.)
    let spaced = s.replacen(' ', "T", 1);
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f%#z",
        "%Y-%m-%dT%H:%M:%S%#z",
        "%Y-%m-%dT%H:%M%#z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(&spaced, f) {
            return Some((t.with_timezone(&Utc), Some("a zone without a colon")));
        }
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(&spaced, f) {
            return Some((t.and_utc(), Some("no zone: read as UTC")));
        }
    }
    let day = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    Some((
        day.and_hms_opt(0, 0, 0)?.and_utc(),
        Some("a date alone: read as its midnight, UTC"),
    ))
}

/// Logs, once per field and shape in a process, an instant read in another shape than RFC
/// 3339 (the value is the service's: shown quoted, on one line).
fn note_shape(what: Place<'_>, s: &str, t: DateTime<Utc>, how: &'static str) {
    static SEEN: std::sync::Mutex<Vec<(String, &'static str)>> = std::sync::Mutex::new(Vec::new());
    let field = what.field.unwrap_or(what.base).to_string();
    let Ok(mut seen) = SEEN.lock() else {
        return;
    };
    if seen.iter().any(|(f, h)| *f == field && *h == how) || seen.len() > 64 {
        return;
    }
    seen.push((field, how));
    tracing::warn!(
        "{what} {:?} is not an RFC 3339 instant: read as {} ({how}); later values of this shape are read alike",
        crate::text::one_line(s),
        t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    );
}

fn cell(c: &Column, v: &mut Value, what: Place<'_>) -> Result<Cell, String> {
    Ok(match c.kind {
        Kind::Text => Cell::Text(text(v, what)?),
        // A value outside today's list is kept as the string it is (the service may add
        // one): the run's summary counts it ([`Shape::unknown_values`]).
        Kind::Choice(_) => Cell::Text(text(v, what)?),
        // A fractional count (the OpenAPI files type counts as `number`) is kept as sent
        // until it is written: the table gets it rounded, `<table>_fractions` as sent
        // ([`Shape::whole_counts`]).
        Kind::Count => match v.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 && f.fract() != 0.0 && f <= MAX_EXACT => {
                Cell::Float(f)
            }
            _ => Cell::Int(count(v, &what.to_string())?),
        },
        Kind::Ratio => match v.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Cell::Float(f),
            _ => return Err(format!("{what} {v} is not a non-negative number")),
        },
        Kind::Flag => match v {
            Value::Bool(b) => Cell::Bool(*b),
            other => return Err(format!("{what} is {}, not a boolean", type_name(other))),
        },
        Kind::Time => {
            let Value::String(s) = &*v else {
                return Err(format!("{what} is {}, not a string", type_name(v)));
            };
            let (t, how) = instant(s)
                .ok_or_else(|| format!("{what} {s:?} is not an ISO 8601 instant or date"))?;
            if let Some(how) = how {
                note_shape(what, s, t, how);
            }
            Cell::Time(t.timestamp_micros())
        }
        Kind::Sources => {
            let Value::Array(items) = v else {
                return Err(format!("{what} is {}, not an array", type_name(v)));
            };
            if items.len() > MAX_SOURCES {
                return Err(format!(
                    "{what} has {} items, more than {MAX_SOURCES}",
                    items.len()
                ));
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter_mut().enumerate() {
                let mut field = |name: &str| match item.get_mut(name) {
                    Some(v) => text(v, format_args!("{what}[{i}].{name}")),
                    None => Err(format!("{what}[{i}] has no field `{name}`")),
                };
                let title = field("title")?;
                out.push((title, field("url")?));
            }
            Cell::Sources(out)
        }
    })
}

/// The cells of an object's columns, its strings moved out of it.
fn cells(obj: &mut Value, columns: &[Column], at: Place<'_>) -> Result<Vec<Cell>, String> {
    let Value::Object(map) = obj else {
        return Err(format!("{at} is {}, not an object", type_name(obj)));
    };
    let mut slots: Vec<Option<Value>> = columns.iter().map(|c| map.remove(c.field)).collect();
    cells_of(&mut slots, columns, at)
}

/// The cells of `obj`'s fields, as far as they are there: a field absent or null (or `obj`
/// absent or null) is a null cell; a field of another type is an error.
fn some_cells(
    obj: Option<&mut Value>,
    columns: &[Column],
    at: Place<'_>,
) -> Result<Vec<Cell>, String> {
    let map = match obj {
        None | Some(Value::Null) => return Ok(vec![Cell::Null; columns.len()]),
        Some(Value::Object(map)) => map,
        Some(other) => return Err(format!("{at} is {}, not an object", type_name(other))),
    };
    let mut out = Vec::with_capacity(columns.len());
    for c in columns {
        out.push(match map.get_mut(c.field) {
            None | Some(Value::Null) => Cell::Null,
            Some(v) => cell(
                c,
                v,
                Place {
                    field: Some(c.field),
                    ..at
                },
            )?,
        });
    }
    Ok(out)
}

/// The cells of a row whose columns' values are in `slots` (`None`: the field is absent).
fn cells_of(
    slots: &mut [Option<Value>],
    columns: &[Column],
    at: Place<'_>,
) -> Result<Vec<Cell>, String> {
    let mut out = Vec::with_capacity(columns.len() + 1);
    for (c, slot) in columns.iter().zip(slots.iter_mut()) {
        let name = Place {
            field: Some(c.field),
            ..at
        };
        let v = match (slot.as_mut(), c.need) {
            (None, Need::Required | Need::Nullable) => {
                return Err(format!("{at} has no field `{}`", c.field));
            }
            (None | Some(Value::Null), Need::Optional) => Cell::Null,
            (None, Need::Default(d)) => Cell::Text(d.to_string()),
            (Some(Value::Null), Need::Nullable) => Cell::Null,
            (Some(Value::Null), Need::Required | Need::Default(_)) => {
                return Err(format!("{name} is null"));
            }
            (Some(v), _) => cell(c, v, name)?,
        };
        out.push(v);
    }
    Ok(out)
}

/// The rows array of a page, read element by element straight into each row's column slots
/// (no map per row: the fields a descriptor does not name are skipped unread), checked as
/// [`cells_of`] checks them. The first problem is kept and the rest of the array only skipped;
/// the array's JSON errors stay serde's.
mod stream {
    use super::{Cell, Column, Place, Shape, cells_of};
    use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::Value;
    use std::fmt;

    #[derive(Clone, Copy)]
    pub struct RowsSeed<'a> {
        pub shape: &'a Shape,
        pub field: &'a str,
        pub limit: Option<u32>,
    }

    impl<'de> DeserializeSeed<'de> for RowsSeed<'_> {
        type Value = Result<Vec<Vec<Cell>>, String>;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    macro_rules! not_an {
        ($name:ident, $ty:ty, $what:expr, $target:expr) => {
            fn $name<E: de::Error>(self, _: $ty) -> Result<Self::Value, E> {
                Ok(Err(format!("{} is {}, not {}", self.at(), $what, $target)))
            }
        };
    }

    impl RowsSeed<'_> {
        fn at(&self) -> String {
            self.field.to_string()
        }
    }

    impl<'de> Visitor<'de> for RowsSeed<'_> {
        type Value = Result<Vec<Vec<Cell>>, String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of rows")
        }
        not_an!(visit_bool, bool, "a boolean", "an array");
        not_an!(visit_i64, i64, "a number", "an array");
        not_an!(visit_u64, u64, "a number", "an array");
        not_an!(visit_f64, f64, "a number", "an array");
        not_an!(visit_str, &str, "a string", "an array");
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Err(format!("{} is null, not an array", self.at())))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Err(format!("{} is an object, not an array", self.at())))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let columns = self.shape.columns;
            let mut rows = Vec::with_capacity(seq.size_hint().unwrap_or(64));
            let mut problem: Option<String> = None;
            let mut len = 0;
            loop {
                if problem.is_some() {
                    if seq.next_element::<IgnoredAny>()?.is_none() {
                        break;
                    }
                    len += 1;
                    continue;
                }
                let at = Place {
                    base: self.field,
                    index: Some(len),
                    field: None,
                };
                let Some(row) = seq.next_element_seed(RowSeed { columns, at })? else {
                    break;
                };
                len += 1;
                let checked = row.and_then(|r| match self.shape.check_row {
                    Some(check) => check(&r).map(|()| r).map_err(|e| format!("{at}: {e}")),
                    None => Ok(r),
                });
                match checked {
                    Ok(r) => rows.push(r),
                    Err(e) => problem = Some(e),
                }
            }
            if let Some(limit) = self.limit
                && len > limit as usize
            {
                return Ok(Err(format!(
                    "{len} rows in a page, more than the limit {limit}"
                )));
            }
            Ok(problem.map_or(Ok(rows), Err))
        }
    }

    /// One row: its columns' values in slots, the rest skipped.
    struct RowSeed<'a> {
        columns: &'a [Column],
        at: Place<'a>,
    }

    impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
        type Value = Result<Vec<Cell>, String>;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl RowSeed<'_> {
        fn at(&self) -> String {
            self.at.to_string()
        }
    }

    impl<'de> Visitor<'de> for RowSeed<'_> {
        type Value = Result<Vec<Cell>, String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a row object")
        }
        not_an!(visit_bool, bool, "a boolean", "an object");
        not_an!(visit_i64, i64, "a number", "an object");
        not_an!(visit_u64, u64, "a number", "an object");
        not_an!(visit_f64, f64, "a number", "an object");
        not_an!(visit_str, &str, "a string", "an object");
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Err(format!("{} is null, not an object", self.at())))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Err(format!("{} is an array, not an object", self.at())))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut slots: Vec<Option<Value>> = vec![None; self.columns.len()];
            while let Some(key) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                match self.columns.iter().position(|c| c.field == key.as_ref()) {
                    // A field given twice: the last one, as a JSON object read whole keeps.
                    Some(i) => slots[i] = Some(m.next_value::<Value>()?),
                    None => {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(cells_of(&mut slots, self.columns, self.at))
        }
    }

    /// The page's body: the rows array streamed, the other fields as values.
    pub struct BodySeed<'a> {
        pub rows: RowsSeed<'a>,
    }

    /// What a body gave.
    pub struct Body {
        pub rows: Option<Result<Vec<Vec<Cell>>, String>>,
        pub rest: serde_json::Map<String, Value>,
    }

    impl<'de> DeserializeSeed<'de> for BodySeed<'_> {
        type Value = Result<Body, String>;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for BodySeed<'_> {
        type Value = Result<Body, String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a page object")
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Err("a boolean".into()))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Err("a number".into()))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Err("a number".into()))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Err("a number".into()))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Err("a string".into()))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Err("null".into()))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Err("an array".into()))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut rows = None;
            let mut rest = serde_json::Map::new();
            while let Some(key) = m.next_key::<String>()? {
                if key == self.rows.field {
                    rows = Some(m.next_value_seed(self.rows)?);
                } else {
                    let v = m.next_value::<Value>()?;
                    rest.insert(key, v);
                }
            }
            Ok(Ok(Body { rows, rest }))
        }
    }
}

fn place(base: &str) -> Place<'_> {
    Place {
        base,
        index: None,
        field: None,
    }
}

impl Shape {
    /// A column's index by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    fn totals_index(&self, name: &str) -> Option<usize> {
        self.totals.iter().position(|c| c.name == name)
    }

    /// The key of a row (its key columns' values joined).
    pub fn key_of(&self, row: &[Cell]) -> String {
        let mut out = String::new();
        for (i, k) in self.key.iter().enumerate() {
            if i > 0 {
                out.push('\u{1f}');
            }
            if let Some(j) = self.index(k) {
                row[j].key_part(&mut out);
            }
        }
        out
    }

    /// The key as a reader would name it: `searchQuery "auth"`.
    pub fn show_key(&self, row: &[Cell]) -> String {
        self.key
            .iter()
            .filter_map(|k| self.index(k).map(|j| (k, &row[j])))
            .map(|(k, c)| match c {
                Cell::Text(s) => format!("{k} {s:?}"),
                Cell::Time(_) => format!(
                    "{k} {}",
                    c.time().map(|t| t.to_rfc3339()).unwrap_or_default()
                ),
                other => format!("{k} {other:?}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The day of a span dataset's row in `tz` (`None`: its instant is null).
    pub fn day_of(&self, row: &[Cell], tz: Tz) -> Option<NaiveDate> {
        let i = self.index(self.day_of?)?;
        row[i].time().map(|t| t.with_timezone(&tz).date_naive())
    }

    /// Decodes and checks a page: every column of every row typed as its descriptor says, no
    /// more rows than asked for, the paging fields present.
    pub fn decode(&self, body: &[u8], limit: Option<u32>) -> Result<Page, String> {
        let what = self.name;
        let (rows, mut v) = match self.rows {
            RowsAt::Body => {
                let mut v: Value =
                    serde_json::from_slice(body).map_err(|e| format!("{what} body: {e}"))?;
                if !v.is_object() {
                    return Err(format!("{what} body is {}, not an object", type_name(&v)));
                }
                (vec![cells(&mut v, self.columns, place("body"))?], v)
            }
            RowsAt::Array(field) => {
                use serde::de::DeserializeSeed;
                let seed = stream::BodySeed {
                    rows: stream::RowsSeed {
                        shape: self,
                        field,
                        limit,
                    },
                };
                let mut de = serde_json::Deserializer::from_slice(body);
                let parsed = seed
                    .deserialize(&mut de)
                    .and_then(|b| de.end().map(|()| b))
                    .map_err(|e| format!("{what} body: {e}"))?;
                let parsed =
                    parsed.map_err(|kind| format!("{what} body is {kind}, not an object"))?;
                let rows = match parsed.rows {
                    None => return Err(format!("{what} body has no field `{field}`")),
                    Some(r) => r?,
                };
                (rows, Value::Object(parsed.rest))
            }
        };
        // Totals are read as far as they are there (a field absent or null is a null cell):
        // the walk takes the first page's and checks what they hold; the output's needs are
        // checked with the window (`Shape::missing_totals`).
        let totals = match self.totals_at {
            TotalsAt::None => Vec::new(),
            TotalsAt::Fields => some_cells(Some(&mut v), self.totals, place("body"))?,
            TotalsAt::Object(field) => some_cells(v.get_mut(field), self.totals, place(field))?,
        };
        let has_more = match (self.paging, v.get("hasMore")) {
            (
                Paging::Cursor {
                    has_more: false, ..
                }
                | Paging::Single,
                _,
            ) => None,
            (_, Some(Value::Bool(b))) => Some(*b),
            (_, Some(other)) => {
                return Err(format!("hasMore is {}, not a boolean", type_name(other)));
            }
            // Under a cursor the cursor decides; paged by offset, nothing else tells the end.
            (Paging::Cursor { .. }, None) => None,
            (_, None) => return Err(format!("{what} body has no field `hasMore`")),
        };
        let next_cursor = match self.paging {
            Paging::Cursor { .. } => match v.get("nextCursor") {
                None => return Err(format!("{what} body has no field `nextCursor`")),
                Some(Value::Null) => None,
                Some(Value::String(s)) if s.is_empty() => {
                    return Err("nextCursor is an empty string".into());
                }
                Some(Value::String(s)) if s.len() > MAX_CURSOR_BYTES => {
                    return Err(format!(
                        "nextCursor is {} bytes, more than {MAX_CURSOR_BYTES}",
                        s.len()
                    ));
                }
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(format!("nextCursor is {}, not a string", type_name(other)));
                }
            },
            _ => None,
        };
        Ok(Page {
            rows,
            totals,
            has_more,
            next_cursor,
        })
    }

    /// The first totals field its totals table needs that `totals` (a page's) lacks, named as
    /// the body has it (`totals.human`), with the table.
    pub fn missing_total(&self, totals: &[Cell]) -> Option<(String, &'static str)> {
        let table = self.totals_table?;
        let (c, _) = self
            .totals
            .iter()
            .zip(totals)
            .find(|(c, v)| matches!(c.need, Need::Required) && **v == Cell::Null)?;
        let field = match self.totals_at {
            TotalsAt::Object(at) => format!("{at}.{}", c.field),
            _ => c.field.to_string(),
        };
        Some((field, table))
    }

    /// Its count columns' fractional values (kept as sent by the decoder) made whole in `rows`
    /// and `totals`, rounded half away from zero: each one as sent, with its row's key
    /// (`(day totals)` for the totals), column and the value written.
    pub fn whole_counts(&self, rows: &mut [Vec<Cell>], totals: &mut [Cell]) -> Vec<Fraction> {
        let mut out = Vec::new();
        let mut whole = |cells: &mut [Cell], columns: &[Column], key: &dyn Fn() -> String| {
            for (c, cell) in columns.iter().zip(cells.iter_mut()) {
                if let (Kind::Count, Cell::Float(f)) = (c.kind, &*cell) {
                    let written = f.round() as i64;
                    out.push(Fraction {
                        key: key(),
                        column: c.name,
                        sent: *f,
                        written,
                    });
                    *cell = Cell::Int(written);
                }
            }
        };
        for r in rows.iter_mut() {
            let shown = self.show_key(r);
            whole(r, self.columns, &|| shown.clone());
        }
        whole(totals, self.totals, &|| "(day totals)".to_string());
        out
    }

    /// The values of its choice columns outside today's lists in `rows`: per column, each
    /// value and its rows, in the order first seen.
    pub fn unknown_values<'r>(
        &self,
        rows: impl IntoIterator<Item = &'r [Cell]>,
    ) -> Vec<(&'static str, Vec<(String, u64)>)> {
        let mut out = Vec::new();
        self.add_unknown_values(&mut out, rows);
        out
    }

    /// Adds the values of its choice columns outside today's lists in `rows` to `out` (per
    /// column, each value and its rows, in the order first seen).
    pub fn add_unknown_values<'r>(
        &self,
        out: &mut Vec<(&'static str, Vec<(String, u64)>)>,
        rows: impl IntoIterator<Item = &'r [Cell]>,
    ) {
        let choices: Vec<(usize, &Column, &[&str])> = self
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c.kind {
                Kind::Choice(allowed) => Some((i, c, allowed)),
                _ => None,
            })
            .collect();
        for row in rows {
            for (i, c, allowed) in &choices {
                let Some(v) = row.get(*i).and_then(Cell::text) else {
                    continue;
                };
                if allowed.contains(&v) {
                    continue;
                }
                let at = match out.iter().position(|(n, _)| *n == c.name) {
                    Some(at) => at,
                    None => {
                        out.push((c.name, Vec::new()));
                        out.len() - 1
                    }
                };
                let values = &mut out[at].1;
                match values.iter_mut().find(|(x, _)| x == v) {
                    Some((_, n)) => *n += 1,
                    None => values.push((v.to_string(), 1)),
                }
            }
        }
    }

    /// Drops the rows that repeat an earlier row exactly (same key, same values) across
    /// `lists` (a walk's pages, in order): a page boundary that moved during the walk sends
    /// some twice, and one copy is the truth. Returns how many. A key twice with other values
    /// is left for [`Shape::check`] to refuse.
    pub fn drop_exact_repeats(&self, lists: &mut [&mut Vec<Vec<Cell>>]) -> usize {
        let mut seen: std::collections::HashMap<String, (usize, usize)> = Default::default();
        let mut repeats: Vec<(usize, usize)> = Vec::new();
        for (p, list) in lists.iter().enumerate() {
            for (i, row) in list.iter().enumerate() {
                match seen.entry(self.key_of(row)) {
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert((p, i));
                    }
                    std::collections::hash_map::Entry::Occupied(o) => {
                        let (fp, fi) = *o.get();
                        if lists[fp][fi] == *row {
                            repeats.push((p, i));
                        }
                    }
                }
            }
        }
        for &(p, i) in repeats.iter().rev() {
            lists[p].remove(i);
        }
        repeats.len()
    }

    /// The checks of a complete window's rows: each key once, each sum equal to its total.
    pub fn check(&self, rows: &[&[Cell]], totals: &[Cell]) -> Result<(), String> {
        let mut seen = std::collections::HashSet::with_capacity(rows.len());
        for r in rows {
            if !seen.insert(self.key_of(r)) {
                return Err(format!("{} appears twice", self.show_key(r)));
            }
        }
        for (row_col, total_col) in self.sums {
            let (Some(i), Some(j)) = (self.index(row_col), self.totals_index(total_col)) else {
                continue;
            };
            let fractional = rows.iter().any(|r| matches!(r[i], Cell::Float(_)))
                || matches!(totals.get(j), Some(Cell::Float(_)));
            if fractional {
                // Counts given with fractions add up as numbers, to a millionth.
                let sum: f64 = rows.iter().filter_map(|r| r[i].number()).sum();
                let total = totals.get(j).and_then(Cell::number);
                if total.is_some_and(|t| (t - sum).abs() > 1e-6 * t.abs().max(1.0)) {
                    return Err(format!(
                        "{row_col} of the rows sum to {sum}, but {total_col} is {}",
                        total.unwrap_or_default()
                    ));
                }
                continue;
            }
            let sum: i128 = rows.iter().filter_map(|r| r[i].int()).map(i128::from).sum();
            let total = totals.get(j).and_then(Cell::int).map(i128::from);
            if total.is_some_and(|t| t != sum) {
                return Err(format!(
                    "{row_col} of the rows sum to {sum}, but {total_col} is {}",
                    total.unwrap_or_default()
                ));
            }
        }
        Ok(())
    }

    /// Schema of the row table: the columns, then `fetched_at` (and the extra flags).
    pub fn schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self.columns.iter().map(field).collect();
        fields.extend(
            self.flags
                .iter()
                .map(|f| Field::new(*f, DataType::Boolean, false)),
        );
        fields.push(Field::new("fetched_at", ts_type(), false));
        Arc::new(Schema::new(fields))
    }

    /// Schema of the totals table.
    pub fn totals_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self.totals.iter().map(field).collect();
        fields.push(Field::new("rows", DataType::Int64, false));
        fields.push(Field::new("fetched_at", ts_type(), false));
        fields.push(Field::new("final", DataType::Boolean, false));
        Arc::new(Schema::new(fields))
    }

    /// The row table's batch of `rows`, each with its flags (see [`Shape::flags`]).
    pub fn batch(
        &self,
        rows: &[FlaggedRow<'_>],
        fetched_at: DateTime<Utc>,
    ) -> Result<RecordBatch, String> {
        let schema = self.schema();
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for (i, c) in self.columns.iter().enumerate() {
            cols.push(column(c, rows.iter().map(|(r, _)| &r[i]))?);
        }
        for j in 0..self.flags.len() {
            let mut b = BooleanBuilder::with_capacity(rows.len());
            for (_, flags) in rows {
                b.append_value(flags.get(j).copied().unwrap_or(false));
            }
            cols.push(Arc::new(b.finish()));
        }
        cols.push(times(rows.len(), fetched_at));
        RecordBatch::try_new(schema, cols).map_err(|e| e.to_string())
    }

    /// The totals table's one-row batch.
    pub fn totals_batch(
        &self,
        totals: &[Cell],
        rows: i64,
        fetched_at: DateTime<Utc>,
        is_final: bool,
    ) -> Result<RecordBatch, String> {
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(self.totals.len() + 3);
        for (i, c) in self.totals.iter().enumerate() {
            cols.push(column(c, std::iter::once(&totals[i]))?);
        }
        let mut n = Int64Builder::new();
        n.append_value(rows);
        cols.push(Arc::new(n.finish()));
        cols.push(times(1, fetched_at));
        let mut f = BooleanBuilder::new();
        f.append_value(is_final);
        cols.push(Arc::new(f.finish()));
        RecordBatch::try_new(self.totals_schema(), cols).map_err(|e| e.to_string())
    }
}

/// `Timestamp(µs, UTC)`.
pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn source_fields() -> Fields {
    Fields::from(vec![
        Field::new("title", DataType::Utf8, false),
        Field::new("url", DataType::Utf8, false),
    ])
}

fn field(c: &Column) -> Field {
    let ty = match c.kind {
        Kind::Text | Kind::Choice(_) => DataType::Utf8,
        Kind::Count => DataType::Int64,
        Kind::Ratio => DataType::Float64,
        Kind::Flag => DataType::Boolean,
        Kind::Time => ts_type(),
        Kind::Sources => DataType::List(Arc::new(Field::new(
            "item",
            DataType::Struct(source_fields()),
            true,
        ))),
    };
    let nullable = !matches!(c.need, Need::Required | Need::Default(_));
    Field::new(c.name, ty, nullable)
}

/// A column of `n` times `at` (a table's `fetched_at`).
pub fn times(n: usize, at: DateTime<Utc>) -> ArrayRef {
    let mut b = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    for _ in 0..n {
        b.append_value(at.timestamp_micros());
    }
    Arc::new(b.finish())
}

/// A column of one scalar kind: `$builder`'s values from the cells of variant `$variant`
/// (copied; text by reference), nulls for `Cell::Null`, an error for any other cell.
macro_rules! scalar_column {
    ($builder:expr, Text, $cells:expr, $wrong:expr) => {
        scalar_column!(@ $builder, Text, x => x, $cells, $wrong)
    };
    ($builder:expr, $variant:ident, $cells:expr, $wrong:expr) => {
        scalar_column!(@ $builder, $variant, x => *x, $cells, $wrong)
    };
    (@ $builder:expr, $variant:ident, $x:ident => $value:expr, $cells:expr, $wrong:expr) => {{
        let mut b = $builder;
        for v in $cells {
            match v {
                Cell::$variant($x) => b.append_value($value),
                Cell::Null => b.append_null(),
                other => return Err($wrong(other)),
            }
        }
        Arc::new(b.finish()) as ArrayRef
    }};
}

fn column<'a>(
    c: &Column,
    cells: impl ExactSizeIterator<Item = &'a Cell>,
) -> Result<ArrayRef, String> {
    let n = cells.len();
    let wrong = |v: &Cell| format!("column {}: {v:?} does not fit its type", c.name);
    Ok(match c.kind {
        Kind::Text | Kind::Choice(_) => {
            scalar_column!(StringBuilder::with_capacity(n, n * 16), Text, cells, wrong)
        }
        Kind::Count => scalar_column!(Int64Builder::with_capacity(n), Int, cells, wrong),
        Kind::Ratio => scalar_column!(Float64Builder::with_capacity(n), Float, cells, wrong),
        Kind::Flag => scalar_column!(BooleanBuilder::with_capacity(n), Bool, cells, wrong),
        Kind::Time => scalar_column!(
            TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC"),
            Time,
            cells,
            wrong
        ),
        Kind::Sources => sources_column(cells, wrong)?,
    })
}

/// The `sources` column: a list of (title, url) structs per row.
fn sources_column<'a>(
    cells: impl Iterator<Item = &'a Cell>,
    wrong: impl Fn(&Cell) -> String,
) -> Result<ArrayRef, String> {
    let s = StructBuilder::from_fields(source_fields(), 0);
    let mut b = ListBuilder::new(s).with_field(Arc::new(Field::new(
        "item",
        DataType::Struct(source_fields()),
        true,
    )));
    for v in cells {
        match v {
            Cell::Sources(items) => {
                let sb = b.values();
                for (title, url) in items {
                    sb.field_builder::<StringBuilder>(0)
                        .ok_or("sources: no title builder")?
                        .append_value(title);
                    sb.field_builder::<StringBuilder>(1)
                        .ok_or("sources: no url builder")?
                        .append_value(url);
                    sb.append(true);
                }
                b.append(true);
            }
            Cell::Null => b.append(false),
            other => return Err(wrong(other)),
        }
    }
    Ok(Arc::new(b.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::analytics::{ASSISTANT, FEEDBACK};

    #[test]
    fn instants_in_other_iso_8601_shapes_are_read_and_say_how() {
        let at = |s: &str| instant(s).map(|(t, how)| (t.to_rfc3339(), how));
        let utc = |s: &str| s.to_string();
        assert_eq!(
            at("2026-03-10T08:15:00Z"),
            Some((utc("2026-03-10T08:15:00+00:00"), None))
        );
        // RFC 3339 allows a space for the T (chrono reads it so).
        assert_eq!(
            at("2026-03-10 08:15:00+01:00"),
            Some((utc("2026-03-10T07:15:00+00:00"), None))
        );
        assert_eq!(
            at("2026-03-10T08:15:00+0100"),
            Some((
                utc("2026-03-10T07:15:00+00:00"),
                Some("a zone without a colon")
            ))
        );
        assert_eq!(
            at("2026-03-10 08:15:00.250"),
            Some((
                utc("2026-03-10T08:15:00.250+00:00"),
                Some("no zone: read as UTC")
            ))
        );
        assert_eq!(
            at("2026-03-10"),
            Some((
                utc("2026-03-10T00:00:00+00:00"),
                Some("a date alone: read as its midnight, UTC")
            ))
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-10",
            "10/03/2026",
            "2026-03-10T25:00:00Z",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
    }

    #[test]
    fn values_outside_a_choice_list_are_kept_and_counted_by_column() {
        let body = r#"{"feedback":[
            {"id":"a","path":"/p","comment":null,"createdAt":null,"source":"contextual","helpful":true,"status":"archived"},
            {"id":"b","path":"/p","comment":null,"createdAt":null,"source":"contextual","helpful":false,"status":"pending"},
            {"id":"c","path":"/p","comment":null,"createdAt":null,"source":"survey","status":"archived"}
            ],"nextCursor":null,"hasMore":false}"#;
        let page = FEEDBACK.decode(body.as_bytes(), Some(100)).unwrap();
        assert_eq!(page.rows.len(), 3);
        let unknown = FEEDBACK.unknown_values(page.rows.iter().map(Vec::as_slice));
        assert_eq!(
            unknown,
            [
                ("status", vec![("archived".to_string(), 2)]),
                ("source", vec![("survey".to_string(), 1)])
            ]
        );
    }

    /// The rows as the whole-tree reader gives them (`serde_json::Value`, then [`cells`]).
    fn tree_rows(shape: &Shape, body: &str, field: &str) -> Result<Vec<Vec<Cell>>, String> {
        let mut v: Value = serde_json::from_str(body).unwrap();
        let items = v[field].as_array_mut().unwrap();
        let mut out = Vec::new();
        for (i, item) in items.iter_mut().enumerate() {
            let at = Place {
                index: Some(i),
                ..place(field)
            };
            let row = cells(item, shape.columns, at)?;
            if let Some(check) = shape.check_row {
                check(&row).map_err(|e| format!("{at}: {e}"))?;
            }
            out.push(row);
        }
        Ok(out)
    }

    #[test]
    fn the_streamed_rows_are_the_rows_of_the_whole_tree_and_fail_alike() {
        let turn = |extra: &str| {
            format!(
                r#"{{"id":"t1","timestamp":"2026-03-10T10:00:00.123Z","query":"caf\u00e9 \"q\"","response":"r","sources":[{{"title":"A","url":"/a","x":1}}],"resolutionStatus":"answered","queryCategory":null,"pageUrl":null{extra}}}"#
            )
        };
        let cases = [
            (turn(""), true),
            (
                turn(r#","responseType":"clarifying_question","unknown":{"deep":[1,2]}"#),
                true,
            ),
            (turn(r#","query":"last one wins""#), true),
            (turn(r#","timestamp":5"#), false),
            // A value the service may add is kept (and counted when written).
            (turn(r#","resolutionStatus":"maybe""#), true),
            (turn(r#","resolutionStatus":7"#), false),
            ("7".to_string(), false),
            ("null".to_string(), false),
            (r#"[1]"#.to_string(), false),
        ];
        for (row, ok) in cases {
            let body = format!(
                r#"{{"hasMore":false,"conversations":[{row},{}],"nextCursor":null}}"#,
                turn("")
            );
            let streamed = ASSISTANT.decode(body.as_bytes(), Some(10)).map(|p| p.rows);
            assert_eq!(
                streamed,
                tree_rows(&ASSISTANT, &body, "conversations"),
                "{row}"
            );
            assert_eq!(streamed.is_ok(), ok, "{row}: {streamed:?}");
        }
        // A source's own check, and the limit.
        let fb = r#"{"feedback":[{"id":"f","path":"/p","comment":null,"createdAt":null,"source":"contextual","status":"pending"}],"nextCursor":null,"hasMore":false}"#;
        assert_eq!(
            FEEDBACK.decode(fb.as_bytes(), Some(10)).unwrap_err(),
            "feedback[0]: a contextual entry has no `helpful`"
        );
        assert_eq!(
            tree_rows(&FEEDBACK, fb, "feedback").unwrap_err(),
            "feedback[0]: a contextual entry has no `helpful`"
        );
        let two = format!(
            r#"{{"conversations":[{},{}],"nextCursor":null,"hasMore":false}}"#,
            turn(""),
            turn("")
        );
        assert_eq!(
            ASSISTANT.decode(two.as_bytes(), Some(1)).unwrap_err(),
            "2 rows in a page, more than the limit 1"
        );
        assert_eq!(
            ASSISTANT
                .decode(
                    br#"{"conversations":{},"nextCursor":null,"hasMore":false}"#,
                    Some(1)
                )
                .unwrap_err(),
            "conversations is an object, not an array"
        );
        assert_eq!(
            ASSISTANT.decode(b"[]", Some(1)).unwrap_err(),
            "assistant body is an array, not an object"
        );
    }
}
