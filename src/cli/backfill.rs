//! `docpipe backfill`: fetch a range of days once, within the budget.

use super::UserError;
use crate::clock;
use crate::config::Settings;
use chrono::NaiveDate;

/// Fetch every day of a range that is not final yet, most recent first, waiting for the rate
/// budget rather than causing 429s. Pages of an interrupted walk are kept, and a second run
/// resumes at the next offset.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// First day (YYYY-MM-DD).
    #[arg(long)]
    pub from: NaiveDate,
    /// Last day, included (YYYY-MM-DD; default: today, UTC).
    #[arg(long)]
    pub to: Option<NaiveDate>,
    /// Only these projects (repeatable; default: all configured).
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// Print the plan (windows, requests, ETA) and send nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs `backfill`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let clock = clock::system();
    let today = clock.now().date_naive();
    let to = args.to.unwrap_or(today);
    if args.from > to {
        return Err(UserError(format!("--from {} is after --to {to}", args.from)).into());
    }
    let targets = super::export::targets(settings, &args.projects, &clock)?;
    let exporter = super::export::open(settings, clock).await?;
    let summary =
        super::export::plan_and_run(&exporter, &targets, args.from, to, args.dry_run).await?;
    if !args.dry_run {
        println!("output: {}", exporter.output().display());
    }
    super::export::outcome(&summary)
}
