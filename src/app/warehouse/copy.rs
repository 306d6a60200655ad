//! Arrow columns as PostgreSQL's binary COPY wants them: each lake type's PostgreSQL type, and
//! each value written in its binary form (dates and instants from the Unix epoch to
//! PostgreSQL's 2000-01-01, lists and structs as JSONB). PostgreSQL's `text` and `jsonb` cannot
//! hold U+0000, which JSON (and so a reader's search term) may: it is written as U+FFFD, and
//! counted.

use arrow_array::{Array, ArrayRef, cast::AsArray, types};
use arrow_schema::{DataType, Field, TimeUnit};
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
const PG_EPOCH_DAYS: i32 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The PostgreSQL type of an Arrow type (`None`: docpipe writes no such column).
pub fn pg_type(t: &DataType) -> Option<Type> {
    Some(match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Type::TEXT,
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => Type::INT8,
        DataType::Float32 | DataType::Float64 => Type::FLOAT8,
        DataType::Boolean => Type::BOOL,
        DataType::Date32 => Type::DATE,
        DataType::Timestamp(TimeUnit::Microsecond, _) => Type::TIMESTAMPTZ,
        DataType::List(_) | DataType::LargeList(_) | DataType::Struct(_) => Type::JSONB,
        _ => return None,
    })
}

/// One value, in the binary form of its column's type.
#[derive(Debug)]
pub enum Cell {
    /// NULL.
    Null,
    /// `text`.
    Text(String),
    /// `bigint`.
    Int(i64),
    /// `double precision`.
    Float(f64),
    /// `boolean`.
    Bool(bool),
    /// `date`: days since 1970-01-01.
    Date(i32),
    /// `timestamptz`: microseconds since 1970-01-01 UTC.
    Instant(i64),
    /// `jsonb`.
    Json(String),
}

impl ToSql for Cell {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use bytes::BufMut;
        match self {
            Cell::Null => return Ok(IsNull::Yes),
            Cell::Text(s) => out.put_slice(s.as_bytes()),
            Cell::Int(v) => out.put_i64(*v),
            Cell::Float(v) => out.put_f64(*v),
            Cell::Bool(v) => out.put_u8(u8::from(*v)),
            Cell::Date(d) => out.put_i32(d - PG_EPOCH_DAYS),
            Cell::Instant(us) => out.put_i64(us - PG_EPOCH_MICROS),
            Cell::Json(s) => {
                out.put_u8(1);
                out.put_slice(s.as_bytes());
            }
        }
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// What U+0000 becomes in the warehouse.
pub const NUL_REPLACEMENT: char = '\u{FFFD}';

/// A text as PostgreSQL can hold it: U+0000 replaced by [`NUL_REPLACEMENT`], each counted in
/// `nuls`.
fn text(s: &str, nuls: &mut u64) -> String {
    if !s.contains('\0') {
        return s.to_string();
    }
    *nuls += s.matches('\0').count() as u64;
    s.replace('\0', &NUL_REPLACEMENT.to_string())
}

/// The value of row `i` of `a`, as a cell of its column's type; the U+0000 it held (replaced)
/// are added to `nuls`.
pub fn cell(a: &ArrayRef, i: usize, nuls: &mut u64) -> Cell {
    if a.is_null(i) {
        return Cell::Null;
    }
    match a.data_type() {
        DataType::Utf8 => Cell::Text(text(a.as_string::<i32>().value(i), nuls)),
        DataType::LargeUtf8 => Cell::Text(text(a.as_string::<i64>().value(i), nuls)),
        DataType::Utf8View => Cell::Text(text(a.as_string_view().value(i), nuls)),
        DataType::Int8 => Cell::Int(a.as_primitive::<types::Int8Type>().value(i).into()),
        DataType::Int16 => Cell::Int(a.as_primitive::<types::Int16Type>().value(i).into()),
        DataType::Int32 => Cell::Int(a.as_primitive::<types::Int32Type>().value(i).into()),
        DataType::Int64 => Cell::Int(a.as_primitive::<types::Int64Type>().value(i)),
        DataType::UInt8 => Cell::Int(a.as_primitive::<types::UInt8Type>().value(i).into()),
        DataType::UInt16 => Cell::Int(a.as_primitive::<types::UInt16Type>().value(i).into()),
        DataType::UInt32 => Cell::Int(a.as_primitive::<types::UInt32Type>().value(i).into()),
        DataType::UInt64 => Cell::Int(
            i64::try_from(a.as_primitive::<types::UInt64Type>().value(i)).unwrap_or(i64::MAX),
        ),
        DataType::Float32 => Cell::Float(a.as_primitive::<types::Float32Type>().value(i).into()),
        DataType::Float64 => Cell::Float(a.as_primitive::<types::Float64Type>().value(i)),
        DataType::Boolean => Cell::Bool(a.as_boolean().value(i)),
        DataType::Date32 => Cell::Date(a.as_primitive::<types::Date32Type>().value(i)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Cell::Instant(a.as_primitive::<types::TimestampMicrosecondType>().value(i))
        }
        _ => Cell::Json(json(a, i, nuls).to_string()),
    }
}

/// A value of a list or struct column (or anything else) as JSON.
fn json(a: &ArrayRef, i: usize, nuls: &mut u64) -> serde_json::Value {
    use serde_json::Value;
    if a.is_null(i) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::List(_) => {
            let list = a.as_list::<i32>().value(i);
            Value::Array((0..list.len()).map(|j| json(&list, j, nuls)).collect())
        }
        DataType::LargeList(_) => {
            let list = a.as_list::<i64>().value(i);
            Value::Array((0..list.len()).map(|j| json(&list, j, nuls)).collect())
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c): (&std::sync::Arc<Field>, &ArrayRef)| {
                        (text(f.name(), nuls), json(c, i, nuls))
                    })
                    .collect(),
            )
        }
        _ => match cell(a, i, nuls) {
            Cell::Null => Value::Null,
            Cell::Text(s) | Cell::Json(s) => Value::String(s),
            Cell::Int(v) | Cell::Instant(v) => v.into(),
            Cell::Date(v) => v.into(),
            Cell::Float(v) => serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
            Cell::Bool(v) => v.into(),
        },
    }
}
