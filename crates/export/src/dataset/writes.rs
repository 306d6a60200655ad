//! The partitions a window writes, put in place together: written under temporary names,
//! then renamed all at once (or none), and a partition merged on its key with new rows.

use super::parquet::{self as pq, WriteError};
use super::shape::{FlaggedRow, Shape};
use super::walk::CrashPoints;
use crate::layout::{PART, Pending};
use crate::store::WalkKey;
use arrow_array::{Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The error of a partition at `dir` docpipe cannot encode or merge.
pub(crate) fn encode_error(dir: &Path, message: String) -> WriteError {
    WriteError::Encode {
        path: dir.display().to_string(),
        message,
    }
}

/// The batches of a written partition, if there is one.
pub(crate) fn read_partition(dir: &Path) -> Result<Option<RecordBatch>, WriteError> {
    let file = dir.join(PART);
    let f = match std::fs::File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(WriteError::Io {
                path: file.display().to_string(),
                source: e,
            });
        }
    };
    let bad = |e: String| encode_error(dir, format!("cannot read the partition to merge: {e}"));
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .and_then(|b| b.build())
        .map_err(|e| bad(e.to_string()))?;
    let schema = arrow_array::RecordBatchReader::schema(&reader);
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| bad(e.to_string()))?;
    arrow_select::concat::concat_batches(&schema, &batches)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The keys of a written batch's rows, as [`Shape::key_of`] makes them (text and instant keys).
pub(crate) fn batch_keys(shape: &Shape, batch: &RecordBatch) -> Vec<String> {
    let mut keys = vec![String::new(); batch.num_rows()];
    for (n, k) in shape.key.iter().enumerate() {
        let Some(col) = batch.column_by_name(k) else {
            continue;
        };
        for (i, key) in keys.iter_mut().enumerate() {
            if n > 0 {
                key.push('\u{1f}');
            }
            if col.is_null(i) {
                key.push('\u{0}');
            } else if let Some(s) = col.as_any().downcast_ref::<StringArray>() {
                key.push_str(s.value(i));
            } else if let Some(t) = col.as_any().downcast_ref::<TimestampMicrosecondArray>() {
                key.push_str(&t.value(i).to_string());
            }
        }
    }
    keys
}

/// `existing` with the rows whose key is in `new` left out, then `new`: a merge on the key.
pub(crate) fn merge(
    shape: &Shape,
    existing: RecordBatch,
    new: RecordBatch,
    dir: &Path,
) -> Result<RecordBatch, WriteError> {
    let replaced: HashSet<String> = batch_keys(shape, &new).into_iter().collect();
    let keep: arrow_array::BooleanArray = batch_keys(shape, &existing)
        .iter()
        .map(|k| Some(!replaced.contains(k)))
        .collect();
    let bad = |e: arrow_schema::ArrowError| encode_error(dir, e.to_string());
    let kept = arrow_select::filter::filter_record_batch(&existing, &keep).map_err(bad)?;
    if kept.schema() != new.schema() {
        return Err(encode_error(
            dir,
            "the partition to merge into has another schema; move it away and export again".into(),
        ));
    }
    arrow_select::concat::concat_batches(&new.schema(), &[kept, new]).map_err(bad)
}

/// The partitions a window writes, not yet in place; committed together.
#[derive(Default)]
pub(crate) struct Writes {
    pending: Vec<Pending>,
    removals: Vec<PathBuf>,
}

impl Writes {
    /// Writes the partitions `build` adds under temporary names, then renames them all into
    /// place (and removes the ones it named); on an error none is put in place.
    pub(crate) fn all<E: From<WriteError>>(
        crash: &CrashPoints,
        build: impl FnOnce(&mut Writes) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut writes = Writes::default();
        if let Err(e) = build(&mut writes) {
            for p in writes.pending {
                p.abandon();
            }
            return Err(e);
        }
        crash.hit("before rename");
        for p in writes.pending {
            pq::commit(p)?;
        }
        for d in writes.removals {
            pq::remove_partition(&d)?;
        }
        Ok(())
    }

    pub(crate) fn add(&mut self, dir: &Path, batch: &RecordBatch) -> Result<(), WriteError> {
        self.pending.push(pq::write_batch(dir, batch)?);
        Ok(())
    }

    /// Names the partition at `dir` to remove with the others' commit.
    pub(crate) fn remove(&mut self, dir: PathBuf) {
        self.removals.push(dir);
    }

    /// Adds the partition at `dir` as it was (read back, if there is one) merged on the key
    /// with `rows`.
    pub(crate) fn merge_into(
        &mut self,
        shape: &Shape,
        dir: &Path,
        rows: &[FlaggedRow<'_>],
        at: DateTime<Utc>,
    ) -> Result<(), WriteError> {
        let new = shape.batch(rows, at).map_err(|e| encode_error(dir, e))?;
        let merged = match read_partition(dir)? {
            Some(old) => merge(shape, old, new, dir)?,
            None => new,
        };
        self.add(dir, &merged)
    }
}

/// The walk as messages name it: its project and days.
pub(crate) fn target(w: &WalkKey) -> String {
    format!("project {} ({} to {})", w.project, w.from, w.to)
}
