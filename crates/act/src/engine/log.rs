//! The outcome log: `agent_runs/` rewritten from the ledger, as Parquet.

use super::*;
use docpipe_state::StoreError;
use docpipe_state::ledger::Firing;
use docpipe_write::derived::Columns;
use docpipe_write::parquet::WriteError;
use std::path::{Path, PathBuf};

/// The outcome log's folder in the output folder.
pub const AGENT_RUNS: &str = docpipe_catalog::tables::AGENT_RUNS.name;

impl Engine {
    /// Rewrites `agent_runs/project=<p>/part-00000.parquet` from the ledger (each file under a
    /// temporary name, renamed into place); returns the files.
    ///
    /// Processes take turns (a lock file in the folder), each reading the ledger once it has
    /// its turn: the last one to write has every firing that was recorded before it.
    pub fn write_log(&self) -> Result<Vec<PathBuf>, LogError> {
        let _turn = self.turn(AGENT_RUNS)?;
        let firings = self.ledger.all()?;
        write_log(&self.out, &firings)
    }

    /// Waits for this process's turn to rewrite a table derived from the ledger (a lock file in
    /// its folder, made if missing), held until the file returned is dropped: the ledger read
    /// after it has every row recorded before.
    pub(super) fn turn(&self, table: &str) -> Result<std::fs::File, LogError> {
        let dir = self.out.join(table);
        let lock_path = dir.join(".lock");
        let io = |source| {
            LogError::Write(WriteError::Io {
                path: lock_path.display().to_string(),
                source,
            })
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let lock = std::fs::File::create(&lock_path).map_err(io)?;
        lock.lock().map_err(io)?;
        Ok(lock)
    }
}

/// Errors writing the outcome log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Reading the ledger.
    #[error(transparent)]
    State(#[from] StoreError),
    /// Writing Parquet.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The columns of `agent_runs` (the project is the partition).
pub(super) fn agent_runs_columns(c: Columns<'_, Firing>) -> Columns<'_, Firing> {
    c.int("firing_id", false, |f| Some(f.id))
        .text("rule", false, |f| Some(&f.rule))
        .text("action", false, |f| Some(f.kind.as_str()))
        .text("job", true, |f| f.job.as_deref())
        .time("fired_at", false, |f| Some(f.fired_at))
        .text("prompt_hash", false, |f| Some(&f.prompt_hash))
        .text("prompt", false, |f| Some(&f.prompt))
        .int("rows_matched", false, |f| Some(f.rows_matched))
        .text("sent", false, |f| Some(f.sent.as_str()))
        .text("status", true, |f| f.status.as_deref())
        .text("pr_link", true, |f| f.pr_link.as_deref())
        .real("seconds_to_done", |f| f.seconds_to_done)
        .text("error", true, |f| f.error.as_deref())
        .text("flags", true, |f| f.trail.flags.as_deref())
        .text("dropped", true, |f| f.trail.dropped.as_deref())
        .text("held_because", true, |f| f.trail.hold.as_deref())
        .text("decided_by", true, |f| f.trail.decided_by.as_deref())
        .time("decided_at", true, |f| f.trail.decided_at)
        .text("review_note", true, |f| f.trail.note.as_deref())
        .text("automation", true, |f| {
            f.run.as_ref().map(|r| r.automation.as_str())
        })
        .text("schema_id", true, |f| {
            f.run.as_ref().and_then(|r| r.schema_id.as_deref())
        })
        .text("instance_id", true, |f| {
            f.run.as_ref().and_then(|r| r.instance_id.as_deref())
        })
}

/// Schema of `agent_runs` (the project is the partition).
pub fn agent_runs_schema() -> arrow_schema::SchemaRef {
    docpipe_write::derived::schema(agent_runs_columns)
}

/// Writes the outcome log of every project in `firings`.
pub fn write_log(out: &Path, firings: &[Firing]) -> Result<Vec<PathBuf>, LogError> {
    Ok(docpipe_write::derived::write(
        out,
        AGENT_RUNS,
        firings,
        |f| &f.project,
        agent_runs_columns,
    )?)
}
