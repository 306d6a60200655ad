//! `docpipe trends`: human-versus-AI trend tables and a terminal summary.

use crate::app::{Access, Context, Keys};
use crate::clock;
use crate::config::Settings;
use crate::error::UserError;
use crate::trends::{Selection, Tables, TrendsError, compute, describe, summarize, write_tables};
use chrono::NaiveDate;
use std::path::{Path, PathBuf};

/// Aggregate the exported partitions with polars into `trends/daily` and `trends/weekly`
/// (Parquet and CSV) in the output folder, and print the last 7 days against the 7 before.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these projects (repeatable; default: all exported).
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// First day (YYYY-MM-DD).
    #[arg(long)]
    pub from: Option<NaiveDate>,
    /// Last day, included (YYYY-MM-DD).
    #[arg(long)]
    pub to: Option<NaiveDate>,
}

/// Prints the summary of the tables (of `projects` only, when some are named) and the files.
pub fn print(
    out: &Path,
    tables: &Tables,
    files: &[PathBuf],
    projects: &[String],
) -> anyhow::Result<()> {
    let mut summaries = summarize(tables)?;
    summaries.retain(|s| projects.is_empty() || projects.contains(&s.project));
    crate::out!("{}", describe(&summaries));
    let mut gaps = tables.gaps.clone();
    if !projects.is_empty() {
        for (_, df) in gaps.named() {
            let keep = df
                .column("project")?
                .str()?
                .iter()
                .map(|p| p.is_some_and(|p| projects.iter().any(|x| x == p)))
                .collect::<polars::prelude::BooleanChunked>();
            *df = df.filter(&keep)?;
        }
    }
    crate::out!("{}", crate::trends::gaps::describe(&gaps));
    let mut latest = crate::rules::impact::latest(&crate::rules::impact::read(out)?);
    latest.retain(|l| projects.is_empty() || projects.contains(&l.project));
    if !latest.is_empty() {
        crate::outln!("latest impact of the agent jobs (docpipe rules impact tells more):");
        for l in &latest {
            crate::outln!("  {}", l.line());
        }
    }
    crate::outln!("trend tables:");
    for f in files {
        crate::outln!("  {}", f.display());
    }
    Ok(())
}

/// Computes, writes and prints the trends of an output folder (`trends::compute` runs polars on
/// a thread of its own, so this is safe on any runtime).
pub fn report(out: &Path, sel: &Selection) -> anyhow::Result<()> {
    let mut tables = match compute(out, sel) {
        Ok(t) => t,
        Err(e @ TrendsError::NoData(_)) => return Err(UserError::from_source(e).into()),
        Err(e) => return Err(e.into()),
    };
    let files = write_tables(out, &mut tables)?;
    print(out, &tables, &files, &[])
}

/// Runs `trends`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    if let (Some(from), Some(to)) = (args.from, args.to)
        && from > to
    {
        return Err(UserError::new(format!("--from {from} is after --to {to}")).into());
    }
    let sel = Selection {
        projects: args.projects,
        from: args.from,
        to: args.to,
    };
    if settings.output.is_none() {
        return report(&settings.output_dir, &sel);
    }
    // The output is a bucket: the working copy fetches what it lacks, and the trend tables
    // written go back.
    let ctx = Context::open(
        settings.clone(),
        clock::system(),
        Access::Shared,
        Keys::None,
    )
    .await?;
    ctx.pull().await?;
    report(ctx.output(), &sel)?;
    ctx.push().await?;
    Ok(())
}
