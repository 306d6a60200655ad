//! Writing record batches as Parquet partitions: explicit properties (zstd always), one file per
//! partition, under a temporary name until [`Pending::commit`] renames it into place.

use arrow_array::RecordBatch;
use docpipe_catalog::layout::{PART, Pending};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::path::Path;

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

impl WriteError {
    /// Whether the storage failed (no space, read-only, permission) rather than the data.
    pub fn is_storage(&self) -> bool {
        matches!(self, WriteError::Io { .. })
    }
}

/// The encoder's error for the file `shown`: it reports the file's write errors as its own, and
/// they are the storage's.
fn encode_error(shown: &str, e: parquet::errors::ParquetError) -> WriteError {
    match e {
        parquet::errors::ParquetError::External(inner) => {
            match inner.downcast::<std::io::Error>() {
                Ok(source) => WriteError::Io {
                    path: shown.to_string(),
                    source: *source,
                },
                Err(other) => WriteError::Encode {
                    path: shown.to_string(),
                    message: other.to_string(),
                },
            }
        }
        e => WriteError::Encode {
            path: shown.to_string(),
            message: e.to_string(),
        },
    }
}

/// The level of zstd every file is compressed at.
fn level() -> ZstdLevel {
    ZstdLevel::try_new(1).unwrap_or_default()
}

fn props() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(level()))
        .set_created_by(concat!("docpipe ", env!("CARGO_PKG_VERSION")).to_string())
        // Paths are unique within a partition: a dictionary would only cost hashing.
        .set_column_dictionary_enabled(ColumnPath::from("path"), false)
        // A stream event's id is unique (a dictionary fills, then falls back) and its min and
        // max prune nothing (random texts), nor do a hashed session's or a user agent's: both
        // cost a hash or comparisons a row (docs/benchmarks.md). (`session` is written from
        // codes, with a dictionary: a session reads a few pages.)
        .set_column_dictionary_enabled(ColumnPath::from("event_id"), false)
        // Its texts follow each other without a length before each (the lengths apart): zstd
        // finds no match in random hex and passes over it 3 to 4 times faster, and its Huffman
        // codes halve it as before (docs/benchmarks.md).
        .set_column_encoding(
            ColumnPath::from("event_id"),
            Encoding::DELTA_LENGTH_BYTE_ARRAY,
        )
        // An event's time: in order, nearly unique (to the millisecond): written as the
        // differences between times, not through a dictionary.
        .set_column_dictionary_enabled(ColumnPath::from("at"), false)
        .set_column_encoding(ColumnPath::from("at"), Encoding::DELTA_BINARY_PACKED)
        .set_column_statistics_enabled(ColumnPath::from("event_id"), EnabledStatistics::None)
        .set_column_statistics_enabled(ColumnPath::from("session"), EnabledStatistics::None)
        .set_column_statistics_enabled(ColumnPath::from("user_agent"), EnabledStatistics::None)
        .build()
}

/// Writes one batch as `<dir>/part-00000.parquet` under a temporary name (not yet in place).
pub fn write_batch(dir: &Path, batch: &RecordBatch) -> Result<Pending, WriteError> {
    write_file(&dir.join(PART), batch)
}

/// Writes one batch as the file `dest` under a temporary name (not yet in place).
pub fn write_file(dest: &Path, batch: &RecordBatch) -> Result<Pending, WriteError> {
    in_pending(dest, |file, shown| {
        let enc = |e| encode_error(shown, e);
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props())).map_err(enc)?;
        writer.write(batch).map_err(enc)?;
        writer.into_inner().map_err(enc)
    })
}

/// Writes `chunks` (each the columns of `schema` over some rows, text columns as codes or arrays)
/// as one file `dest` under a temporary name (not yet in place), one row group; a chunk that
/// could not be made (`Err`, its reason) abandons the file.
pub fn write_coded<'a>(
    dest: &Path,
    schema: arrow_schema::SchemaRef,
    chunks: impl IntoIterator<Item = Result<Vec<crate::coded::Col<'a>>, String>>,
) -> Result<Pending, WriteError> {
    in_pending(dest, |file, shown| {
        crate::coded::write_columns(file, schema, props(), level(), chunks)
            .map_err(|e| encode_error(shown, e))
    })
}

/// The file `dest` under a temporary name, written by `write` (given the file and the name to
/// show) and synced; abandoned if either fails.
fn in_pending(
    dest: &Path,
    write: impl FnOnce(std::fs::File, &str) -> Result<std::fs::File, WriteError>,
) -> Result<Pending, WriteError> {
    let shown = dest.display().to_string();
    let io = |source| WriteError::Io {
        path: shown.clone(),
        source,
    };
    let (pending, file) = Pending::create(dest).map_err(io)?;
    let written = write(file, &shown).and_then(|file| file.sync_all().map_err(io));
    match written {
        Ok(()) => Ok(pending),
        Err(e) => {
            pending.abandon();
            Err(e)
        }
    }
}

/// Writes `cols` of `schema` as `<dir>/part-00000.parquet`, in place when it returns.
pub fn write_table(
    dir: &Path,
    schema: arrow_schema::SchemaRef,
    cols: Vec<arrow_array::ArrayRef>,
) -> Result<std::path::PathBuf, WriteError> {
    let batch = RecordBatch::try_new(schema, cols).map_err(|e| WriteError::Encode {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    commit(write_batch(dir, &batch)?)
}

/// Removes a partition (a day that has no rows any more); one that is not there is fine.
pub fn remove_partition(dir: &Path) -> Result<(), WriteError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(WriteError::Io {
            path: dir.display().to_string(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Renames a written partition into place.
pub fn commit(pending: Pending) -> Result<std::path::PathBuf, WriteError> {
    let path = pending.dest().display().to_string();
    pending
        .commit()
        .map_err(|source| WriteError::Io { path, source })
}

/// The files and rows of a table (every `part-*.parquet` under `dir`, from their footers).
pub fn count_rows(dir: &Path) -> std::io::Result<(u64, i64)> {
    let (mut files, mut rows) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().and_then(|n| n.to_str()) == Some(PART) {
                let f = std::fs::File::open(&path)?;
                let reader = parquet::file::reader::SerializedFileReader::new(f)
                    .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
                use parquet::file::reader::FileReader;
                rows += reader.metadata().file_metadata().num_rows();
                files += 1;
            }
        }
    }
    Ok((files, rows))
}

/// Every record batch of the Parquet file `path` (a table's partition read back whole).
pub fn read_file(path: &Path) -> Result<Vec<RecordBatch>, WriteError> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| WriteError::Io {
        path: shown.clone(),
        source,
    })?;
    let enc = |e: parquet::errors::ParquetError| WriteError::Encode {
        path: shown.clone(),
        message: e.to_string(),
    };
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(enc)?
        .build()
        .map_err(enc)?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| WriteError::Encode {
            path: shown.clone(),
            message: e.to_string(),
        })
}
