//! `docpipe export`: the incremental run a scheduler calls.

use crate::app::after::{fire_rules, trends, unscheduled_rules};
use crate::app::export::{plan_due, plan_fitted};
use crate::app::rules::Wait;
use crate::app::{Access, Context, Keys};
use crate::clock;
use crate::config::Settings;
use crate::export::{Exporter, Plan, Summary, Target, describe_plan, describe_summary};
use std::sync::Arc;

/// Fetch what is due: days since each project's `start_date` (default: the last 30 days) that are
/// not final yet; days within `lookback_days` are fetched again and replaced. Then aggregate the
/// trends of every project (unless `trends_after_export = false` in `[export]`) and run the rules
/// without a schedule (unless `[rules] after_export = false`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these projects (repeatable; default: all configured).
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// Print the plan (windows, requests, ETA) and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Fetch everything due, waiting for the budget when it runs out (by default a run takes
    /// what fits this hour's budget and leaves the rest for the next run).
    #[arg(long)]
    pub wait: bool,
    /// Look at every provisional day now, however recently it was looked at.
    #[arg(long)]
    pub refresh: bool,
    /// Write every response into DIR, one file per response, keys removed (`docpipe emulate
    /// --replay DIR` serves them): what a bug report attaches.
    #[arg(long, value_name = "DIR")]
    pub record: Option<std::path::PathBuf>,
    /// Beside other docpipes and earlier runs.
    #[command(flatten)]
    pub beside: Beside,
}

/// The flags of `export` and `backfill` about what is beside a run: other docpipes holding the
/// folder, projects earlier runs found unknown.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Beside {
    /// Ask again for the projects the service said it does not know (left out of later runs
    /// until then; `docpipe status` lists them).
    #[arg(long)]
    pub retry_unknown: bool,
    /// Wait this long for another docpipe (a daemon) that holds the folder's lock, e.g. `30m`
    /// (by default: not at all, and the error names the holder; `--dry-run` and `backfill
    /// --queue` need no lock).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "0s")]
    pub wait_lock: std::time::Duration,
}

impl Beside {
    /// How the folder is opened: a dry run only reads the state, so it never needs (nor waits
    /// for) the lock.
    pub fn access(&self, dry_run: bool) -> Access {
        if dry_run {
            Access::Shared
        } else {
            Access::ExportWithin(self.wait_lock)
        }
    }
}

/// Opens the context of an exporting command: the keys of `projects` (all when empty), the
/// output folder as `access` says, every response captured into `record` when given, and a
/// progress bar on a terminal.
pub async fn open(
    settings: &Settings,
    projects: &[String],
    record: Option<&std::path::Path>,
    access: Access,
) -> anyhow::Result<Context> {
    let keys = if projects.is_empty() {
        Keys::All
    } else {
        Keys::Of(projects.to_vec())
    };
    let mut settings = settings.clone();
    if let Some(dir) = record {
        let recorder = crate::api::capture::Recorder::new(dir).map_err(|e| {
            crate::error::UserError::new(format!("cannot record into {}: {e}", dir.display()))
        })?;
        settings.record = Some(Arc::new(recorder));
    }
    Ok(Context::open(settings, clock::system(), access, keys)
        .await?
        .with_events(Arc::new(super::progress::Bar::on_terminal())))
}

/// Prints `plan`, then runs it (unless `dry_run`) and prints the summary.
pub async fn run_plan(
    exporter: &Exporter,
    targets: &[Target],
    plan: &Plan,
    dry_run: bool,
) -> Option<Summary> {
    print!("{}", describe_plan(plan));
    if dry_run {
        println!("dry run: nothing sent");
        return None;
    }
    let summary = exporter.run(targets, plan).await;
    print!("{}", describe_summary(&summary));
    Some(summary)
}

/// Sends what the run wrote to the output when it is a bucket, and says where the output is.
pub async fn push(ctx: &Context) -> anyhow::Result<()> {
    if let Some(p) = ctx.push().await? {
        println!(
            "output: {} ({} files sent, {} bytes; {} deleted; the working copy and the state are in {})",
            ctx.settings.output_name(),
            p.files,
            p.bytes,
            p.deleted,
            ctx.output().display()
        );
    } else {
        println!("output: {}", ctx.output().display());
    }
    Ok(())
}

/// Ends with exit code 1 when some window failed.
pub fn outcome(summary: &Summary) -> anyhow::Result<()> {
    if summary.failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "{} windows failed; run again to retry them",
            summary.failed.len()
        )
    }
}

/// Runs `export`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let access = args.beside.access(args.dry_run);
    let ctx = open(settings, &args.projects, args.record.as_deref(), access).await?;
    let targets = ctx.targets(&args.projects)?;
    let exporter = ctx
        .exporter()
        .with_refresh(args.refresh)
        .with_retry_unknown(args.beside.retry_unknown);
    let plan = if args.wait {
        plan_due(&ctx, &exporter, &targets)?
    } else {
        plan_fitted(&ctx, &exporter, &targets, false)?
    };
    let Some(summary) = run_plan(&exporter, &targets, &plan, args.dry_run).await else {
        return Ok(());
    };
    let after = after_export(&ctx, settings, &args.projects).await;
    // What was written goes to the output, whatever came after the export.
    push(&ctx).await?;
    // Failed windows are the run's error: a later step's (no data to aggregate after they
    // failed) would only contradict it.
    outcome(&summary)?;
    after
}

/// The trends and the unscheduled rules after an export.
async fn after_export(
    ctx: &Context,
    settings: &Settings,
    projects: &[String],
) -> anyhow::Result<()> {
    // The trend tables always cover every project (the files are shared); the summary shows
    // the projects of this run.
    let computed = if settings.trends_after_export {
        println!();
        let t = trends(ctx)?.ok_or_else(|| no_data(ctx))?;
        super::trends::print(ctx.output(), &t.tables, &t.files, projects)?;
        Some(t)
    } else {
        None
    };
    if let Some(loaded) = unscheduled_rules(ctx)? {
        println!("\nrules ({}):", settings.rules_dir.display());
        let tables = match computed {
            Some(t) => t.tables,
            None => crate::app::rules::tables(ctx.output())?.0,
        };
        let fired = fire_rules(ctx, &loaded, &tables, Wait::AsRulesSay).await?;
        super::rules::print_fired(&fired);
        super::rules::outcome(&fired.reports)?;
    }
    Ok(())
}

/// Trends were asked for and nothing was exported: the user's to fix.
pub fn no_data(ctx: &Context) -> crate::error::UserError {
    crate::error::UserError::from_source(crate::trends::TrendsError::NoData(
        ctx.output().display().to_string(),
    ))
}
