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
    #[arg(long, conflicts_with = "queue")]
    pub dry_run: bool,
    /// Queue the range for the daemon (`docpipe run`), which drains it between scheduled runs
    /// within the budget; sends nothing now.
    #[arg(long)]
    pub queue: bool,
}

/// Runs `backfill`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let clock = clock::system();
    let today = settings.today(clock.now());
    let to = args.to.unwrap_or(today);
    if args.from > to {
        return Err(UserError(format!("--from {} is after --to {to}", args.from)).into());
    }
    if args.queue {
        for p in &args.projects {
            if !settings.projects.iter().any(|c| &c.id == p) {
                return Err(UserError(format!(
                    "project {p} is not configured in {}",
                    settings.origin
                ))
                .into());
            }
        }
        std::fs::create_dir_all(&settings.output_dir).map_err(|e| {
            UserError(format!(
                "output folder {}: cannot create it: {e}",
                settings.output_dir.display()
            ))
        })?;
        let state =
            crate::export::state::State::open(&crate::export::state_path(&settings.output_dir))?;
        let id = state.queue_backfill(&args.projects, args.from, to, clock.now())?;
        println!(
            "queued backfill {id}: {}..{to} of {}; `docpipe run` drains it between scheduled runs, within the budget",
            args.from,
            if args.projects.is_empty() {
                "every project".to_string()
            } else {
                args.projects.join(", ")
            }
        );
        return Ok(());
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
