//! `docpipe export`: the incremental run a scheduler calls; and what `backfill` shares with it.

use super::UserError;
use crate::clock::{self, SharedClock};
use crate::config::Settings;
use crate::export::state::SqliteBudget;
use crate::export::{ExportError, Exporter, Target, describe_plan, describe_summary};
use chrono::{Duration, NaiveDate};
use std::collections::HashMap;
use std::sync::Arc;

/// Fetch what is due: days since each project's `start_date` (default: the last 30 days) that are
/// not final yet; days within `lookback_days` are fetched again and replaced. Then aggregate the
/// trends, unless `trends_after_export = false` in `[export]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these projects (repeatable; default: all configured).
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// Print the plan (windows, requests, ETA) and send nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Clients for the selected projects, all sharing the request log of `budget_db`.
pub fn targets(
    settings: &Settings,
    selected: &[String],
    clock: &SharedClock,
) -> Result<Vec<Target>, UserError> {
    for p in selected {
        if !settings.projects.iter().any(|c| &c.id == p) {
            return Err(UserError(format!(
                "project {p} is not configured in {}",
                settings.origin
            )));
        }
    }
    std::fs::create_dir_all(&settings.output_dir).map_err(|e| {
        UserError(format!(
            "output folder {}: cannot create it: {e}",
            settings.output_dir.display()
        ))
    })?;
    if let Some(dir) = settings
        .budget_db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(|e| {
            UserError(format!(
                "budget_db folder {}: cannot create it: {e}",
                dir.display()
            ))
        })?;
    }
    let budget = SqliteBudget::open(&settings.budget_db).map_err(|e| UserError(e.to_string()))?;
    let budget: Arc<dyn crate::api::budget::Budget> = Arc::new(budget);
    let mut clients = HashMap::new();
    let mut out = Vec::new();
    for p in settings
        .projects
        .iter()
        .filter(|p| selected.is_empty() || selected.contains(&p.id))
    {
        let org = settings
            .organization(&p.organization)
            .ok_or_else(|| UserError(format!("project {} names an unknown organization", p.id)))?;
        if !clients.contains_key(&org.id) {
            let client = settings
                .client(org, clock.clone(), budget.clone(), false)
                .map_err(|e| UserError(e.to_string()))?;
            clients.insert(org.id.clone(), client);
        }
        out.push(Target {
            project: p.id.clone(),
            client: clients[&org.id].clone(),
        });
    }
    Ok(out)
}

/// The targets grouped by the first day `export` fetches for them: each project's `start_date`,
/// or 30 days ago.
pub fn by_start(
    settings: &Settings,
    targets: Vec<Target>,
    today: NaiveDate,
) -> std::collections::BTreeMap<NaiveDate, Vec<Target>> {
    let mut out: std::collections::BTreeMap<NaiveDate, Vec<Target>> = Default::default();
    for t in targets {
        let start = settings
            .projects
            .iter()
            .find(|p| p.id == t.project)
            .and_then(|p| p.start_date)
            .unwrap_or(today - Duration::days(29));
        out.entry(start).or_default().push(t);
    }
    out
}

/// Opens the exporter, plans `from..=to`, and runs it (or prints the plan).
pub async fn plan_and_run(
    exporter: &Exporter,
    targets: &[Target],
    from: NaiveDate,
    to: NaiveDate,
    dry_run: bool,
) -> anyhow::Result<crate::export::Summary> {
    let plan = exporter.plan(targets, from, to)?;
    print!("{}", describe_plan(&plan));
    if dry_run {
        println!("dry run: nothing sent");
        return Ok(crate::export::Summary::default());
    }
    let summary = exporter.run(targets, &plan).await;
    print!("{}", describe_summary(&summary));
    Ok(summary)
}

/// Opens the configured output folder, mapping a folder problem to a user error.
pub async fn open_folder(settings: &Settings, clock: SharedClock) -> anyhow::Result<Exporter> {
    match Exporter::open_in(
        &settings.output_dir,
        clock,
        settings.lookback_days,
        settings.timezone,
    )
    .await
    {
        Ok(e) => Ok(e),
        Err(e @ ExportError::Output { .. }) => Err(UserError(e.to_string()).into()),
        Err(e) => Err(e.into()),
    }
}

/// Opens the output folder for a command: [`open_folder`], with a progress bar on a terminal.
pub async fn open(settings: &Settings, clock: SharedClock) -> anyhow::Result<Exporter> {
    Ok(open_folder(settings, clock).await?.with_progress_bar())
}

/// Ends with exit code 1 when some window failed.
pub fn outcome(summary: &crate::export::Summary) -> anyhow::Result<()> {
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
    let clock = clock::system();
    let targets = targets(settings, &args.projects, &clock)?;
    let exporter = open(settings, clock.clone()).await?;
    let today = settings.today(clock.now());
    let mut summary = crate::export::Summary::default();
    for (start, group) in by_start(settings, targets, today) {
        let s = plan_and_run(&exporter, &group, start, today, args.dry_run).await?;
        summary.failed.extend(s.failed);
    }
    if !args.dry_run {
        println!("output: {}", exporter.output().display());
    }
    if settings.trends_after_export && !args.dry_run {
        println!();
        super::trends::report(
            &settings.output_dir,
            &crate::trends::Selection {
                projects: args.projects,
                ..Default::default()
            },
        )?;
    }
    if !args.dry_run {
        super::rules::after_export(settings, clock).await?;
    }
    outcome(&summary)
}
