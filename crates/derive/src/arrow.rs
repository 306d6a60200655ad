//! One set of types: the trend tables hold the raw tables' logical types (UTF-8 strings, signed
//! 64-bit integers, doubles, booleans, dates, UTC timestamps in microseconds), in memory (what
//! rule queries read) and in their Parquet files, which are written by the same Arrow writer as
//! the raw tables (polars would record its own `string_view` type in the files).

use super::TrendsError;
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_schema::{
    DataType as Arrow, Field as ArrowField, Schema as ArrowSchema, TimeUnit as Unit,
};
use docpipe_catalog::layout::Pending;
use docpipe_write::parquet::{WriteError, write_file};
use polars::prelude::*;
use std::path::Path;

/// The type a trend column is held in: every integer a signed 64-bit one, every float a double,
/// a timestamp in microseconds (UTC kept); the others as they are.
fn one_type(dtype: &DataType) -> Option<DataType> {
    match dtype {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => Some(DataType::Int64),
        DataType::Float32 => Some(DataType::Float64),
        DataType::Datetime(unit, tz) if *unit != TimeUnit::Microseconds => {
            Some(DataType::Datetime(TimeUnit::Microseconds, tz.clone()))
        }
        _ => None,
    }
}

/// `df` with its columns in [`one_type`]s.
pub fn typed(df: DataFrame) -> PolarsResult<DataFrame> {
    let casts: Vec<Expr> = df
        .columns()
        .iter()
        .filter_map(|c| one_type(c.dtype()).map(|t| col(c.name().clone()).cast(t)))
        .collect();
    if casts.is_empty() {
        return Ok(df);
    }
    df.lazy().with_columns(casts).collect()
}

/// A column as an Arrow array of the raw tables' types.
fn array(c: &Column) -> Result<(Arrow, ArrayRef), PolarsError> {
    let unsupported = || {
        PolarsError::ComputeError(
            format!("column {} of type {} is not written", c.name(), c.dtype()).into(),
        )
    };
    Ok(match c.dtype() {
        DataType::String => (
            Arrow::Utf8,
            std::sync::Arc::new(c.str()?.iter().collect::<StringArray>()),
        ),
        DataType::Int64 => (
            Arrow::Int64,
            std::sync::Arc::new(c.i64()?.iter().collect::<Int64Array>()),
        ),
        DataType::Float64 => (
            Arrow::Float64,
            std::sync::Arc::new(c.f64()?.iter().collect::<Float64Array>()),
        ),
        DataType::Boolean => (
            Arrow::Boolean,
            std::sync::Arc::new(c.bool()?.iter().collect::<BooleanArray>()),
        ),
        DataType::Date => {
            let days = c.cast(&DataType::Int32)?;
            (
                Arrow::Date32,
                std::sync::Arc::new(days.i32()?.iter().collect::<Date32Array>()),
            )
        }
        DataType::Datetime(TimeUnit::Microseconds, tz) => {
            let micros = c.cast(&DataType::Int64)?;
            let values = micros.i64()?.iter().collect::<TimestampMicrosecondArray>();
            let tz: Option<std::sync::Arc<str>> = tz.as_ref().map(|t| t.as_str().into());
            (
                Arrow::Timestamp(Unit::Microsecond, tz.clone()),
                std::sync::Arc::new(values.with_timezone_opt(tz)),
            )
        }
        _ => return Err(unsupported()),
    })
}

/// A frame as one Arrow record batch.
pub fn batch(df: &DataFrame) -> Result<RecordBatch, PolarsError> {
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for c in df.columns() {
        let (dtype, values) = array(c)?;
        fields.push(ArrowField::new(c.name().as_str(), dtype, true));
        arrays.push(values);
    }
    RecordBatch::try_new(std::sync::Arc::new(ArrowSchema::new(fields)), arrays)
        .map_err(|e| PolarsError::ComputeError(e.to_string().into()))
}

/// Writes a frame as the Parquet file `path` under a temporary name (not yet in place).
pub fn write_parquet(df: &DataFrame, path: &Path) -> Result<Pending, TrendsError> {
    let batch = batch(df)?;
    write_file(path, &batch).map_err(|e| match e {
        WriteError::Io { path, source } => TrendsError::Io { path, source },
        WriteError::Encode { message, .. } => {
            TrendsError::Polars(PolarsError::ComputeError(message.into()))
        }
    })
}
