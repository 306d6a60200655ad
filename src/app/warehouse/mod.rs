//! The warehouse load after a run (and `docpipe warehouse sync`): what the lake has that the
//! warehouse lacks, loaded on a blocking thread; its outcome kept in the state's settings for
//! `status` and the page.

pub mod copy;
pub mod pg;

use super::Context;
pub use pg::{FAILING_LOADS, FailedFile, LastLoad, Loaded, Warehouse, WarehouseError};

const SETTING: &str = "warehouse_last_load";

/// Loads the lake into the warehouse when the config has one (`None` otherwise) after a run;
/// its outcome is logged and kept, a failure never the run's: the next load retries what this
/// one did not.
pub async fn load(ctx: &Context) -> Option<Result<Loaded, String>> {
    let done = sync(ctx).await?;
    match &done {
        Ok(l) if l.failed.is_empty() => tracing::info!(
            files = l.files,
            rows = l.rows,
            unchanged = l.unchanged,
            removed = l.removed,
            nuls_replaced = l.nuls_replaced,
            "warehouse loaded"
        ),
        Ok(l) => tracing::error!(
            files = l.files,
            failed = l.failed.len(),
            "warehouse: {} files not loaded, the first {}: {}; the next run retries them",
            l.failed.len(),
            l.failed[0].file,
            l.failed[0].error
        ),
        Err(e) => tracing::error!("{e}; the next run retries what was not loaded"),
    }
    Some(done)
}

/// Loads the lake into the warehouse (`docpipe warehouse sync`: the command says how it went),
/// keeping the outcome in the state.
pub async fn sync(ctx: &Context) -> Option<Result<Loaded, String>> {
    let settings = ctx.settings.warehouse.clone()?;
    let out = ctx.output().to_path_buf();
    let projects = ctx.settings.project_ids();
    let done =
        tokio::task::spawn_blocking(move || Warehouse::connect(&settings)?.sync(&out, &projects))
            .await
            .unwrap_or_else(|e| Err(WarehouseError(format!("the load stopped: {e}"))))
            .map_err(|e| e.to_string());
    let mut last = LastLoad {
        at: ctx.clock.now(),
        loaded: done.as_ref().ok().cloned(),
        error: done.as_ref().err().cloned(),
        failing_runs: 0,
    };
    if last.failed() {
        last.failing_runs = last_load(ctx).map_or(0, |l| l.failing_runs) + 1;
    }
    if let Err(e) = ctx
        .store()
        .set_setting(SETTING, &serde_json::to_string(&last).unwrap_or_default())
    {
        tracing::warn!("state: cannot record the warehouse load: {e}");
    }
    Some(done)
}

/// The last load the state records.
pub fn last_load(ctx: &Context) -> Option<LastLoad> {
    let text = ctx.store().setting(SETTING).ok()??;
    serde_json::from_str(&text).ok()
}

/// One line for a load's outcome.
pub fn line(schema: &str, done: &Result<Loaded, String>) -> String {
    match done {
        Ok(l) => format!(
            "warehouse (schema {schema}): {} files loaded ({} rows), {} unchanged{}{}{}",
            l.files,
            l.rows,
            l.unchanged,
            if l.removed > 0 {
                format!(", {} partitions removed", l.removed)
            } else {
                String::new()
            },
            if l.nuls_replaced > 0 {
                format!(
                    ", {} U+0000 in text written as U+FFFD (PostgreSQL's text cannot hold it)",
                    l.nuls_replaced
                )
            } else {
                String::new()
            },
            match l.failed.first() {
                Some(f) => format!(
                    "; {} files not loaded, the first {}: {}; the next run retries them",
                    l.failed.len(),
                    f.file,
                    f.error
                ),
                None => String::new(),
            }
        ),
        Err(e) => format!("{e}; the next run retries what was not loaded"),
    }
}
