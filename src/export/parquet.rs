//! Parquet partitions: fixed schemas, zstd, Hive paths, written under a temporary name and
//! renamed into place so a reader never sees a partial file.

use crate::api::views::{Counts, Rows, ViewRow};
use arrow_array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, NaiveDate, Utc};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Parquet errors.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// File system.
    #[error("cannot write {path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Encoder.
    #[error("cannot encode {path}: {message}")]
    Encode {
        /// File.
        path: String,
        /// Cause.
        message: String,
    },
}

/// The table of per-page rows.
pub const PAGE_VIEWS: &str = "page_views";
/// The table of site totals.
pub const SITE_TOTALS: &str = "site_totals";
/// The one file of a partition.
pub const PART: &str = "part-00000.parquet";
/// Prefix of temporary files (left only by a killed process; removed at the next start).
pub const TMP_PREFIX: &str = ".tmp-";

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Schema of `page_views`.
pub fn page_views_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("human", DataType::Int64, false),
        Field::new("ai", DataType::Int64, false),
        Field::new("total", DataType::Int64, false),
        Field::new("fetched_at", ts_type(), false),
    ]))
}

/// Schema of `site_totals`.
pub fn site_totals_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("human", DataType::Int64, false),
        Field::new("ai", DataType::Int64, false),
        Field::new("total", DataType::Int64, false),
        Field::new("rows", DataType::Int64, false),
        Field::new("fetched_at", ts_type(), false),
        Field::new("final", DataType::Boolean, false),
    ]))
}

/// Escapes a partition value as Hive does: `%XX` for characters that are not safe in a path.
pub fn escape_partition_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        let unsafe_char = c.is_control() || "\"#%'*/:=?\\\u{7f}{[]^".contains(c);
        if unsafe_char {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `<root>/<table>/project=<id>/date=<YYYY-MM-DD>`: the one place partition paths are built.
pub fn partition_dir(root: &Path, table: &str, project: &str, day: NaiveDate) -> PathBuf {
    root.join(table)
        .join(format!("project={}", escape_partition_value(project)))
        .join(format!("date={}", day.format("%Y-%m-%d")))
}

fn props() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap_or_default()))
        .set_created_by(concat!("docpipe ", env!("CARGO_PKG_VERSION")).to_string())
        // Paths are unique within a partition: a dictionary would only cost hashing.
        .set_column_dictionary_enabled(parquet::schema::types::ColumnPath::from("path"), false)
        .build()
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// A partition file being written; `commit` renames it into place.
#[derive(Debug)]
pub struct Pending {
    tmp: PathBuf,
    dest: PathBuf,
}

impl Pending {
    /// Renames into place (atomically replacing any previous file) and syncs the folder.
    pub fn commit(self) -> Result<PathBuf, WriteError> {
        let io = |source| WriteError::Io {
            path: self.dest.display().to_string(),
            source,
        };
        std::fs::rename(&self.tmp, &self.dest).map_err(io)?;
        if let Some(dir) = self.dest.parent() {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        Ok(self.dest)
    }

    /// Removes the temporary file.
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Writes one batch as `<dir>/part-00000.parquet` under a temporary name (not yet in place).
pub fn write_batch(dir: &Path, batch: &RecordBatch) -> Result<Pending, WriteError> {
    let dest = dir.join(PART);
    let shown = dest.display().to_string();
    let io = |source| WriteError::Io {
        path: shown.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = dir.join(format!("{TMP_PREFIX}{}-{PART}", std::process::id()));
    let file = File::create(&tmp).map_err(io)?;
    let enc = |e: parquet::errors::ParquetError| WriteError::Encode {
        path: shown.clone(),
        message: e.to_string(),
    };
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props())).map_err(enc)?;
    writer.write(batch).map_err(enc)?;
    let file = writer.into_inner().map_err(enc)?;
    file.sync_all().map_err(io)?;
    Ok(Pending { tmp, dest })
}

/// Writes the `page_views` partition of a window (not yet in place) from its pages' rows, in
/// order: each column is copied page by page into one Arrow buffer.
pub fn write_page_views(
    root: &Path,
    project: &str,
    day: NaiveDate,
    pages: &[&Rows],
    fetched_at: DateTime<Utc>,
) -> Result<Pending, WriteError> {
    let dir = partition_dir(root, PAGE_VIEWS, project, day);
    let encode = |message: String| WriteError::Encode {
        path: dir.display().to_string(),
        message,
    };
    let n: usize = pages.iter().map(|p| p.len()).sum();
    let bytes: usize = pages.iter().map(|p| p.path_bytes().len()).sum();
    let mut offsets: Vec<i32> = Vec::with_capacity(n + 1);
    offsets.push(0);
    let mut values: Vec<u8> = Vec::with_capacity(bytes);
    let int = |col: fn(&Rows) -> &[i64]| {
        let mut v = Vec::with_capacity(n);
        for p in pages {
            v.extend_from_slice(col(p));
        }
        Int64Array::from(v)
    };
    for p in pages {
        let base = i32::try_from(values.len()).map_err(|_| encode("paths over 2 GiB".into()))?;
        offsets.extend(p.path_ends().iter().map(|&e| base + e as i32));
        values.extend_from_slice(p.path_bytes().as_bytes());
    }
    let paths = StringArray::try_new(
        arrow_buffer::OffsetBuffer::new(offsets.into()),
        values.into(),
        None,
    )
    .map_err(|e| encode(e.to_string()))?;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(paths),
        Arc::new(int(Rows::human)),
        Arc::new(int(Rows::ai)),
        Arc::new(int(Rows::total)),
        Arc::new(TimestampMicrosecondArray::from(vec![micros(fetched_at); n]).with_timezone("UTC")),
    ];
    let batch =
        RecordBatch::try_new(page_views_schema(), cols).map_err(|e| encode(e.to_string()))?;
    write_batch(&dir, &batch)
}

/// Writes the `site_totals` partition of a window (not yet in place).
pub fn write_site_totals(
    root: &Path,
    project: &str,
    day: NaiveDate,
    totals: Counts,
    rows: i64,
    fetched_at: DateTime<Utc>,
    is_final: bool,
) -> Result<Pending, WriteError> {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![totals.human])),
        Arc::new(Int64Array::from(vec![totals.ai])),
        Arc::new(Int64Array::from(vec![totals.total])),
        Arc::new(Int64Array::from(vec![rows])),
        Arc::new(TimestampMicrosecondArray::from(vec![micros(fetched_at)]).with_timezone("UTC")),
        Arc::new(BooleanArray::from(vec![is_final])),
    ];
    let dir = partition_dir(root, SITE_TOTALS, project, day);
    let batch =
        RecordBatch::try_new(site_totals_schema(), cols).map_err(|e| WriteError::Encode {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
    write_batch(&dir, &batch)
}

/// Removes temporary files a killed process left in the tables' partitions.
pub fn remove_leftovers(root: &Path) -> usize {
    let mut removed = 0;
    for table in [PAGE_VIEWS, SITE_TOTALS] {
        let Ok(projects) = std::fs::read_dir(root.join(table)) else {
            continue;
        };
        for p in projects.flatten() {
            let Ok(days) = std::fs::read_dir(p.path()) else {
                continue;
            };
            for d in days.flatten() {
                let Ok(files) = std::fs::read_dir(d.path()) else {
                    continue;
                };
                for f in files.flatten() {
                    if f.file_name().to_string_lossy().starts_with(TMP_PREFIX)
                        && std::fs::remove_file(f.path()).is_ok()
                    {
                        removed += 1;
                    }
                }
            }
        }
    }
    removed
}

/// Reads a `page_views` partition back (for the demo's preview and for tests).
pub fn read_page_views(file: &Path) -> Result<Vec<ViewRow>, String> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let f = File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .and_then(|b| b.build())
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        let col = |i: usize| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .cloned()
                .ok_or("not int64")
        };
        let paths = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or("path is not a string")?;
        let (h, a, t) = (col(1)?, col(2)?, col(3)?);
        for i in 0..batch.num_rows() {
            out.push(ViewRow {
                path: paths.value(i).to_string(),
                human: h.value(i),
                ai: a.value(i),
                total: t.value(i),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_escaped_like_hive() {
        assert_eq!(escape_partition_value("acme-docs"), "acme-docs");
        assert_eq!(escape_partition_value("a/b=c%"), "a%2Fb%3Dc%25");
        let d = NaiveDate::from_ymd_opt(2026, 3, 1).unwrap();
        assert_eq!(
            partition_dir(Path::new("/out"), PAGE_VIEWS, "p:1", d),
            PathBuf::from("/out/page_views/project=p%3A1/date=2026-03-01")
        );
    }
}
