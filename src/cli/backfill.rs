//! `docpipe backfill`: fetch a range of days once, within the budget.

use crate::app::Context;
use crate::app::cycle::{Intent, Options, Outcome};
use crate::clock;
use crate::config::Settings;
use crate::error::UserError;
use chrono::NaiveDate;

/// Fetch every day of a range that is not final yet, most recent first, waiting for the rate
/// budget rather than causing 429s. Pages of an interrupted walk are kept, and a second run
/// resumes at the next offset.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// First day (YYYY-MM-DD).
    #[arg(long)]
    pub from: NaiveDate,
    /// Last day, included (YYYY-MM-DD; default: today in `[export] timezone`).
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
    /// Write every response into DIR, one file per response, keys removed (`docpipe emulate
    /// --replay DIR` serves them): what a bug report attaches.
    #[arg(long, value_name = "DIR", conflicts_with = "queue")]
    pub record: Option<std::path::PathBuf>,
    /// Beside other docpipes and earlier runs.
    #[command(flatten)]
    pub beside: super::export::Beside,
}

/// Runs `backfill`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let clock = clock::system();
    let today = settings.today(clock.now());
    let to = args.to.unwrap_or(today);
    crate::config::check_range(args.from, to).map_err(UserError::new)?;
    if args.queue {
        for p in &args.projects {
            crate::app::configured(settings, p)?;
        }
        let ctx = Context::shared(settings.clone(), clock.clone()).await?;
        let id = ctx
            .store()
            .queue()
            .push(&args.projects, args.from, to, clock.now())?;
        crate::outln!(
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
    let access = args.beside.access(args.dry_run);
    let ctx = super::export::open(settings, &args.projects, args.record.as_deref(), access).await?;
    let targets = ctx.targets(&args.projects)?;
    let exporter = ctx.exporter().with_retry_unknown(args.beside.retry_unknown);
    let shown = |plan: &crate::export::Plan| super::export::announce(plan, args.dry_run);
    let opts = Options {
        announce: Some(&shown),
        measure: !args.dry_run,
        ..Options::export_only(true)
    };
    let intent = Intent::Range {
        from: args.from,
        to,
    };
    match crate::app::cycle::run(&ctx, &exporter, &targets, intent, opts).await? {
        Outcome::Ran(report) => super::export::finish(&ctx, *report, &args.projects),
        Outcome::Stopped(_) | Outcome::Drained(_) | Outcome::Waits => Ok(()),
    }
}
