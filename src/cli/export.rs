//! `docpipe export`: the incremental run a scheduler calls.

use crate::app::cycle::{self, After, Intent, Options, Outcome, Report, RulesRun, TrendsRun, When};
use crate::app::rules::Wait;
use crate::app::{Access, Context, Keys};
use crate::clock;
use crate::config::Settings;
use crate::export::{Plan, Summary, describe_plan, describe_summary};
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

/// Prints `plan`; `false` (after saying so) when it is a dry run.
pub fn announce(plan: &Plan, dry_run: bool) -> bool {
    crate::out!("{}", describe_plan(plan));
    if dry_run {
        crate::outln!("dry run: nothing sent");
    }
    !dry_run
}

/// Prints a run's report, step by step, and ends as it says: the push's error first (what was
/// written is not in the output), then failed windows (the run's error: a later step's, no data
/// to aggregate after they failed, would only contradict it), then the trends' and the rules'.
pub fn finish(ctx: &Context, report: Report, projects: &[String]) -> anyhow::Result<()> {
    crate::out!("{}", describe_summary(&report.summary));
    let mut after: anyhow::Result<()> = report
        .day_status
        .as_ref()
        .and(report.described.as_ref())
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e}"));
    if let Some(streams) = &report.streams {
        for line in crate::app::streams::lines(streams) {
            crate::outln!("{line}");
        }
        let failed = match streams {
            Err(e) => Some(e.clone()),
            Ok(s) => s.runs.iter().find_map(|r| r.error.clone()),
        };
        if let (Some(e), true) = (failed, after.is_ok()) {
            after = Err(anyhow::anyhow!("a stream was not read to its end: {e}"));
        }
    }
    match &report.trends {
        TrendsRun::Computed(t, _) => {
            // The trend tables always cover every project (the files are shared); the summary
            // shows the projects of this run.
            crate::outln!();
            super::trends::print(ctx.output(), &t.tables, &t.files, projects)?;
        }
        TrendsRun::Unchanged(_) => {
            crate::outln!("\n{}", report.unchanged_line(ctx).unwrap_or_default());
        }
        TrendsRun::Off => {}
        TrendsRun::NoData => after = Err(no_data(ctx).into()),
        TrendsRun::Failed(e) => after = Err(anyhow::anyhow!("{e}")),
    }
    match report.rules {
        RulesRun::None | RulesRun::NotRun => {}
        RulesRun::Fired(fired) => {
            crate::outln!("\nrules ({}):", ctx.settings.rules_dir.display());
            super::rules::print_fired(&fired);
            if after.is_ok() {
                after = super::rules::outcome(&fired.reports);
            }
        }
        RulesRun::Failed(e) => {
            crate::outln!("\nrules ({}):", ctx.settings.rules_dir.display());
            after = Err(e);
        }
    }
    match report.pushed? {
        Some(p) => crate::outln!(
            "output: {} ({} files sent, {} bytes; {} deleted; the working copy and the state are in {})",
            ctx.settings.output_name(),
            p.files,
            p.bytes,
            p.deleted,
            ctx.output().display()
        ),
        None => crate::outln!("output: {}", ctx.output().display()),
    }
    if let (Some(done), Some(w)) = (&report.warehouse, &ctx.settings.warehouse) {
        crate::outln!("{}", crate::app::warehouse::line(&w.schema, done));
    }
    for line in ctx.key_warnings()? {
        crate::outln!("{line}");
    }
    outcome(&report.summary)?;
    after
}

/// Ends with exit code 1 when some window failed, saying whether running again can help: not
/// for a refused key, an unknown project or a dataset the plan lacks, which need a fix first.
pub fn outcome(summary: &Summary) -> anyhow::Result<()> {
    let failed = summary.failed.len();
    let fix = summary.failed.iter().filter(|f| f.needs_a_fix()).count();
    match (failed, fix) {
        (0, _) => Ok(()),
        (n, 0) => anyhow::bail!("{n} windows failed; run again to retry them"),
        (n, k) if k == n => anyhow::bail!(
            "{n} windows failed, and running again will not help until the key, the project id or the plan named above is fixed"
        ),
        (n, k) => anyhow::bail!(
            "{n} windows failed: {} can be retried by running again; {k} need the key, the project id or the plan named above fixed first",
            n - k
        ),
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
    let intent = if args.wait {
        Intent::Due
    } else {
        Intent::Fitted {
            backfill_queued: false,
        }
    };
    let shown = |plan: &Plan| announce(plan, args.dry_run);
    let opts = Options {
        trends: When::changed_if(settings.trends_after_export),
        rules: After::Unscheduled,
        wait: Wait::AsRulesSay,
        push: true,
        announce: Some(&shown),
        ahead: false,
        measure: !args.dry_run,
    };
    match cycle::run(&ctx, &exporter, &targets, intent, opts).await? {
        Outcome::Ran(report) => finish(&ctx, *report, &args.projects),
        Outcome::Stopped(_) | Outcome::Drained(_) | Outcome::Waits => Ok(()),
    }
}

/// Trends were asked for and nothing was exported: the user's to fix.
pub fn no_data(ctx: &Context) -> crate::error::UserError {
    crate::error::UserError::from_source(crate::trends::TrendsError::NoData(
        ctx.output().display().to_string(),
    ))
}
