//! The one writer of the tables docpipe derives from its state rather than fetches
//! (`agent_runs`, `agent_impact`, `day_status`): a table declares each column once, its name,
//! type and how a row gives its value, so that its schema (which the lake's manifest and views
//! describe) and its files cannot disagree. Each project's rows are one file,
//! `<table>/project=<id>/part-00000.parquet`, rewritten whole.

use crate::coded::{Coded, Col, NONE};
use crate::parquet::{WriteError, commit, write_coded, write_table};
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, StringArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, NaiveDate, Utc};
use docpipe_catalog::layout::{PART, project_dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A derived table's columns over some rows, declared one by one.
pub struct Columns<'a, R> {
    rows: Vec<&'a R>,
    fields: Vec<Field>,
    cols: Vec<Col<'a>>,
    /// Why a column could not be made (the table is then not written).
    error: Option<String>,
}

fn days_since_epoch(day: NaiveDate) -> i32 {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    (day - epoch).num_days() as i32
}

impl<'a, R> Columns<'a, R> {
    /// The columns of `rows` (none yet).
    pub fn new(rows: impl IntoIterator<Item = &'a R>) -> Self {
        Self {
            rows: rows.into_iter().collect(),
            fields: Vec::new(),
            cols: Vec::new(),
            error: None,
        }
    }

    fn with(mut self, field: Field, array: ArrayRef) -> Self {
        self.fields.push(field);
        self.cols.push(Col::Array(array));
        self
    }

    /// A text column (`nullable`: whether a row may have none).
    pub fn text<S: AsRef<str>>(
        self,
        name: &str,
        nullable: bool,
        value: impl Fn(&'a R) -> Option<S>,
    ) -> Self {
        let array: StringArray = self.rows.iter().map(|r| value(*r)).collect();
        self.with(Field::new(name, DataType::Utf8, nullable), Arc::new(array))
    }

    /// A text column whose value each row writes into the column's bytes (`false`: none), so
    /// that no row's text is allocated, copied or checked as UTF-8 on its own (the whole column
    /// is checked once); `width` is a row's usual length in bytes (the column's room is made for
    /// that many, once). Texts of over 2 GiB in all are an error of the table's.
    pub fn text_written(
        mut self,
        name: &str,
        nullable: bool,
        width: usize,
        write: impl Fn(&'a R, &mut Vec<u8>) -> bool,
    ) -> Self {
        let mut bytes = Vec::with_capacity(self.rows.len() * width);
        let mut offsets: Vec<i32> = Vec::with_capacity(self.rows.len() + 1);
        offsets.push(0);
        let mut nulls = NullBufferBuilder::new(self.rows.len());
        for r in &self.rows {
            let start = bytes.len();
            let some = write(r, &mut bytes);
            if !some {
                bytes.truncate(start);
            }
            let Ok(end) = i32::try_from(bytes.len()) else {
                self.error = Some(format!("the column {name}'s texts pass 2 GiB"));
                return self;
            };
            offsets.push(end);
            nulls.append(some);
        }
        let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
        match StringArray::try_new(offsets, Buffer::from_vec(bytes), nulls.finish()) {
            Ok(array) => self.with(Field::new(name, DataType::Utf8, nullable), Arc::new(array)),
            Err(e) => {
                self.error = Some(format!("the column {name}: {e}"));
                self
            }
        }
    }

    /// A whole number column.
    pub fn int(self, name: &str, nullable: bool, value: impl Fn(&'a R) -> Option<i64>) -> Self {
        let array: Int64Array = self.rows.iter().map(|r| value(*r)).collect();
        self.with(Field::new(name, DataType::Int64, nullable), Arc::new(array))
    }

    /// A real number column (may be null).
    pub fn real(self, name: &str, value: impl Fn(&'a R) -> Option<f64>) -> Self {
        let array: Float64Array = self.rows.iter().map(|r| value(*r)).collect();
        self.with(Field::new(name, DataType::Float64, true), Arc::new(array))
    }

    /// A true-or-false column (never null).
    pub fn flag(self, name: &str, value: impl Fn(&'a R) -> bool) -> Self {
        let array: BooleanArray = self.rows.iter().map(|r| Some(value(*r))).collect();
        self.with(Field::new(name, DataType::Boolean, false), Arc::new(array))
    }

    /// A date column (never null).
    pub fn date(self, name: &str, value: impl Fn(&'a R) -> NaiveDate) -> Self {
        let array =
            Date32Array::from_iter_values(self.rows.iter().map(|r| days_since_epoch(value(*r))));
        self.with(Field::new(name, DataType::Date32, false), Arc::new(array))
    }

    /// A UTC timestamp column, in microseconds.
    pub fn time(
        self,
        name: &str,
        nullable: bool,
        value: impl Fn(&'a R) -> Option<DateTime<Utc>>,
    ) -> Self {
        self.micros(name, nullable, |r| value(r).map(|t| t.timestamp_micros()))
    }

    /// A UTC time column of microseconds since the epoch, as they are (no conversion a row).
    pub fn micros(self, name: &str, nullable: bool, value: impl Fn(&'a R) -> Option<i64>) -> Self {
        let array = self
            .rows
            .iter()
            .map(|r| value(*r))
            .collect::<TimestampMicrosecondArray>()
            .with_timezone("UTC");
        let dtype = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        self.with(Field::new(name, dtype, nullable), Arc::new(array))
    }

    /// Writes the columns as `<dir>/part-00000.parquet`, in place when it returns.
    pub fn write_in(self, dir: &Path) -> Result<PathBuf, WriteError> {
        if let Some(message) = self.error {
            return Err(WriteError::Encode {
                path: dir.display().to_string(),
                message,
            });
        }
        let schema = self.schema();
        write_table(dir, schema, self.arrays())
    }

    /// Writes the columns `columns` declares over `rows` as `<dir>/part-00000.parquet`, in place
    /// when it returns, `chunk` rows at a time: each chunk's arrays are made, encoded and dropped
    /// before the next, so a day of a million events is held a chunk at a time, not whole (a
    /// coded column's codes, 4 bytes a row, are kept until the file is closed).
    pub fn write_chunked(
        dir: &Path,
        rows: &'a [R],
        chunk: usize,
        columns: impl Fn(Columns<'a, R>) -> Columns<'a, R>,
    ) -> Result<PathBuf, WriteError> {
        let schema = columns(Columns::new(&rows[..0])).schema();
        let chunks = rows.chunks(chunk.max(1)).map(|part| {
            let c = columns(Columns::new(part));
            c.error.map_or(Ok(c.cols), Err)
        });
        commit(write_coded(&dir.join(PART), schema, chunks)?)
    }

    /// A text column written from codes: a row's value is `name(code(row))`, none for
    /// [`NONE`](crate::coded::NONE). Parquet's dictionary is made from the codes, each distinct
    /// text named once (when the table is written by [`Columns::write_chunked`]).
    pub fn coded(
        mut self,
        name: &str,
        nullable: bool,
        text: impl Fn(u32) -> Option<&'a str> + 'a,
        code: impl Fn(&'a R) -> u32,
    ) -> Self {
        let codes = self.rows.iter().map(|r| code(*r)).collect();
        self.fields.push(Field::new(name, DataType::Utf8, nullable));
        self.cols.push(Col::Coded(Coded {
            codes,
            name: Box::new(text),
        }));
        self
    }

    /// The columns as Arrow arrays (a coded column's texts named row by row).
    fn arrays(self) -> Vec<ArrayRef> {
        self.cols
            .into_iter()
            .map(|c| match c {
                Col::Array(a) => a,
                Col::Coded(c) => {
                    let texts: StringArray = c
                        .codes
                        .iter()
                        .map(|&k| if k == NONE { None } else { (c.name)(k) })
                        .collect();
                    Arc::new(texts) as ArrayRef
                }
            })
            .collect()
    }

    /// The table's schema (the `project` partition aside).
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.fields.clone()))
    }
}

/// The schema of a table whose columns `columns` declares.
pub fn schema<R>(columns: impl for<'b> Fn(Columns<'b, R>) -> Columns<'b, R>) -> SchemaRef {
    columns(Columns::new(std::iter::empty())).schema()
}

/// Writes `<out>/<table>/project=<p>/part-00000.parquet` for each project of `rows` (a project
/// with no row keeps whatever file it has), each in place when it returns.
pub fn write<R>(
    out: &Path,
    table: &str,
    rows: &[R],
    project: impl Fn(&R) -> &str,
    columns: impl for<'b> Fn(Columns<'b, R>) -> Columns<'b, R>,
) -> Result<Vec<PathBuf>, WriteError> {
    let mut by_project: BTreeMap<&str, Vec<&R>> = BTreeMap::new();
    for r in rows {
        by_project.entry(project(r)).or_default().push(r);
    }
    let mut written = Vec::new();
    for (p, rows) in by_project {
        let dir = project_dir(out, table, p);
        written.push(columns(Columns::new(rows)).write_in(&dir)?);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Row {
        project: &'static str,
        name: Option<&'static str>,
        n: i64,
    }

    fn columns(c: Columns<'_, Row>) -> Columns<'_, Row> {
        c.text("name", false, |r| r.name)
            .int("n", false, |r| Some(r.n))
            .date("day", |_| NaiveDate::from_ymd_opt(2026, 3, 1).unwrap())
    }

    #[test]
    fn each_project_is_one_file_with_the_declared_schema_and_a_null_where_none_is_allowed_fails() {
        let dir = tempfile::tempdir().unwrap();
        let rows = [
            Row {
                project: "a",
                name: Some("x"),
                n: 1,
            },
            Row {
                project: "b",
                name: Some("y"),
                n: 2,
            },
            Row {
                project: "a",
                name: Some("z"),
                n: 3,
            },
        ];
        let files = write(dir.path(), "t", &rows, |r| r.project, columns).unwrap();
        assert_eq!(
            files,
            ["a", "b"].map(|p| dir.path().join(format!("t/project={p}/part-00000.parquet")))
        );
        assert_eq!(
            crate::parquet::count_rows(&dir.path().join("t")).unwrap(),
            (2, 3)
        );
        let names: Vec<String> = schema(columns)
            .fields()
            .iter()
            .map(|f| format!("{}:{}", f.name(), f.data_type()))
            .collect();
        assert_eq!(names, ["name:Utf8", "n:Int64", "day:Date32"]);
        let bad = [Row {
            project: "c",
            name: None,
            n: 4,
        }];
        let e = write(dir.path(), "t", &bad, |r| r.project, columns).unwrap_err();
        assert!(e.to_string().contains("name"), "{e}");
        assert!(!dir.path().join("t/project=c/part-00000.parquet").exists());
    }

    #[test]
    fn written_texts_are_read_back_with_their_nulls_and_bytes_not_utf8_are_one_line_and_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<u32> = (0..20_000).collect();
        // A row's text written into the column's bytes: none for every seventh, and a write
        // that put bytes before saying "none" leaves nothing of them.
        fn text(c: Columns<'_, u32>) -> Columns<'_, u32> {
            c.text_written("t", true, 4, |&i, out| {
                out.extend_from_slice(format!("r{i}").as_bytes());
                i % 7 != 0
            })
        }
        let file = Columns::write_chunked(&dir.path().join("ok"), &rows, 8_192, text).unwrap();
        let batches = crate::parquet::read_file(&file).unwrap();
        let got: Vec<Option<String>> = batches
            .iter()
            .flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
                a.iter().map(|v| v.map(String::from)).collect::<Vec<_>>()
            })
            .collect();
        let want: Vec<Option<String>> = rows
            .iter()
            .map(|i| (i % 7 != 0).then(|| format!("r{i}")))
            .collect();
        assert_eq!(got, want);
        fn bad(c: Columns<'_, u32>) -> Columns<'_, u32> {
            c.text_written("t", false, 4, |&i, out| {
                out.push(if i == 9_000 { 0xff } else { b'a' });
                true
            })
        }
        let e = Columns::write_chunked(&dir.path().join("bad"), &rows, 8_192, bad).unwrap_err();
        // Row 9,000 is at 808 in the second chunk of 8,192.
        assert_eq!(
            e.to_string(),
            format!(
                "cannot encode {}: Parquet error: the column t: Invalid argument error: \
                 Encountered non UTF-8 data: invalid utf-8 sequence of 1 bytes from index 808",
                dir.path().join("bad").join(PART).display()
            )
        );
        let left = std::fs::read_dir(dir.path().join("bad")).map_or(0, |d| d.count());
        assert_eq!(left, 0);
        // The same column in a table written a project at a time: the same line, no file.
        let e = write(dir.path(), "w", &rows, |_| "p", bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot encode {}: the column t: Invalid argument error: Encountered non UTF-8 \
                 data: invalid utf-8 sequence of 1 bytes from index 9000",
                dir.path().join("w/project=p").display()
            )
        );
        assert!(!dir.path().join("w").exists());
    }
}
