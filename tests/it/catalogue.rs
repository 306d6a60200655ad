//! The catalogue types every lake table once: each writer's Arrow schema, and each trend table's
//! frame, has exactly the catalogue's columns (names, order, types, and for the written tables
//! whether a column may be null). A writer that adds or retypes a column fails here until the
//! catalogue says so.

use arrow_schema::{DataType, Field, Schema, TimeUnit};
use docpipe::tables::{self, Column, SOURCE_FIELDS, Table, Ty};
use std::collections::BTreeSet;

/// The catalogue's type of an Arrow type (`None`: a type no lake table has).
fn ty_of_arrow(t: &DataType) -> Option<Ty> {
    Some(match t {
        DataType::Utf8 => Ty::Text,
        DataType::Int64 => Ty::Int,
        DataType::Float64 => Ty::Float,
        DataType::Boolean => Ty::Bool,
        DataType::Date32 => Ty::Date,
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if &**tz == "UTC" => Ty::Time,
        DataType::List(item) => {
            let DataType::Struct(fields) = item.data_type() else {
                return None;
            };
            let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
            let text = fields
                .iter()
                .all(|f| f.data_type() == &DataType::Utf8 && !f.is_nullable());
            (names == SOURCE_FIELDS && text).then_some(Ty::Sources)?
        }
        _ => return None,
    })
}

/// A schema's columns as (name, type, nullable).
fn columns_of_schema(schema: &Schema) -> Vec<(String, Ty, bool)> {
    schema
        .fields()
        .iter()
        .map(|f: &std::sync::Arc<Field>| {
            let ty = ty_of_arrow(f.data_type()).unwrap_or_else(|| {
                panic!("{}: type {} not in the catalogue", f.name(), f.data_type())
            });
            (f.name().clone(), ty, f.is_nullable())
        })
        .collect()
}

/// A catalogue table's columns as (name, type, nullable).
fn columns_of_table(table: &Table) -> Vec<(String, Ty, bool)> {
    table
        .columns
        .iter()
        .map(|c: &Column| (c.name.to_string(), c.ty, c.nullable))
        .collect()
}

/// The Arrow schema each written table's writer gives its files.
fn written_schemas() -> Vec<(&'static str, std::sync::Arc<Schema>)> {
    let mut out: Vec<_> = docpipe::dataset::ALL
        .iter()
        .flat_map(|d| d.tables())
        .map(|t| (t.name, (t.schema)()))
        .collect();
    out.push((
        tables::DAY_STATUS.name,
        docpipe::export::day_status_schema(),
    ));
    out.push((
        tables::AGENT_RUNS.name,
        docpipe::rules::engine::agent_runs_schema(),
    ));
    out.push((tables::AGENT_IMPACT.name, docpipe::rules::impact::schema()));
    out.push((
        tables::AGENT_REASKS.name,
        docpipe::rules::engine::agent_reasks_schema(),
    ));
    out
}

#[test]
fn every_written_tables_writer_writes_exactly_the_catalogues_columns() {
    let schemas = written_schemas();
    let named: BTreeSet<&str> = schemas.iter().map(|(n, _)| *n).collect();
    let catalogued: BTreeSet<&str> = tables::WRITTEN.iter().map(|t| t.name).collect();
    assert_eq!(named, catalogued, "the writers' tables and the catalogue's");
    for (name, schema) in &schemas {
        let table: &Table = tables::WRITTEN.iter().find(|t| t.name == *name).unwrap();
        assert_eq!(columns_of_schema(schema), columns_of_table(table), "{name}");
    }
    // What the catalogue says, spot-checked against the README's description of the tables.
    assert_eq!(tables::SITE_TOTALS.columns.len(), 7);
    let unlisted = tables::SITE_TOTALS.columns[6];
    assert_eq!(
        (unlisted.name, unlisted.ty, unlisted.nullable),
        ("unlisted", Ty::Int, true)
    );
    let sources = tables::ASSISTANT_TURNS.columns[5];
    assert_eq!((sources.name, sources.ty), ("sources", Ty::Sources));
}

#[test]
fn every_trend_tables_frame_has_exactly_the_catalogues_columns() {
    use polars::prelude::DataType as P;
    let ty_of = |t: &P| match t {
        P::String => Ty::Text,
        P::Int64 => Ty::Int,
        P::Float64 => Ty::Float,
        P::Boolean => Ty::Bool,
        P::Date => Ty::Date,
        P::Datetime(polars::prelude::TimeUnit::Microseconds, Some(tz)) if tz.as_str() == "UTC" => {
            Ty::Time
        }
        other => panic!("a trend column of type {other} is not in the catalogue"),
    };
    let mut t = docpipe::trends::empty_tables().unwrap();
    let mut frames = vec![
        (tables::DAILY_TREND.name, t.daily.clone()),
        (tables::WEEKLY_TREND.name, t.weekly.clone()),
        (tables::PAGES_TREND.name, t.pages.clone()),
    ];
    frames.extend(t.gaps.named().into_iter().map(|(n, df)| (n, df.clone())));
    assert_eq!(frames.len(), tables::TRENDS.len());
    for ((name, df), table) in frames.iter().zip(tables::TRENDS) {
        assert_eq!(*name, table.name);
        let got: Vec<(&str, Ty)> = df
            .columns()
            .iter()
            .map(|c| (c.name().as_str(), ty_of(c.dtype())))
            .collect();
        let want: Vec<(&str, Ty)> = table.columns.iter().map(|c| (c.name, c.ty)).collect();
        assert_eq!(got, want, "{name}");
    }
}
