//! After an export: the trend tables computed once over every project and written, then the
//! same tables handed to the rules without a schedule.

use super::Context;
use super::rules::{Fired, Loaded, Wait, evaluate_each, fire_all, load};
use crate::trends::{Selection, Tables, TrendsError, compute, write_tables};
use std::path::PathBuf;

/// The trends of a run.
#[derive(Debug)]
pub struct Trends {
    /// The tables (every project).
    pub tables: Tables,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// Computes the trend tables of every project once and writes them; `None` when nothing was
/// exported yet.
pub fn trends(ctx: &Context) -> Result<Option<Trends>, TrendsError> {
    match compute(ctx.output(), &Selection::default()) {
        Ok(mut tables) => {
            let files = write_tables(ctx.output(), &mut tables)?;
            Ok(Some(Trends { tables, files }))
        }
        Err(TrendsError::NoData(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The rules without a schedule of `[rules] dir`, when `[rules] after_export` is on and the
/// folder exists (`None` otherwise, or when it has no such rule).
pub fn unscheduled_rules(ctx: &Context) -> anyhow::Result<Option<Loaded>> {
    let s = &ctx.settings;
    if !s.rules_after_export || !s.rules_dir.is_dir() {
        return Ok(None);
    }
    let mut loaded = load(&s.rules_dir, s, &[])?;
    loaded.rules.retain(|r| r.schedule.is_none());
    if loaded.rules.is_empty() && loaded.problems.is_empty() {
        return Ok(None);
    }
    Ok(Some(loaded))
}

/// Fires `loaded` over `tables`; a rule file that does not load stops everything before
/// anything is sent, a rule that fails on the data fails alone.
pub async fn fire_rules(
    ctx: &Context,
    loaded: &Loaded,
    tables: &Tables,
    wait: Wait,
) -> anyhow::Result<Fired> {
    let engine = ctx.engine()?;
    let evals = evaluate_each(loaded, tables, Some(engine.memory()))?;
    Ok(fire_all(&engine, &loaded.rules, evals, wait).await?)
}
