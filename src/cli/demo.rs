//! `docpipe demo`: the main job end to end on the embedded emulator.

use crate::api::budget::Budget;
use crate::api::jobs::Polling;
use crate::api::{AdminKey, Client, ClientSettings, Limits, RetryPolicy};
use crate::clock;
use crate::emulator::{Emulator, Server};
use crate::export::parquet::{PAGE_VIEWS, PART, partition_dir, read_page_views};
use crate::export::state::SqliteBudget;
use crate::export::{Exporter, Target, state_path};
use crate::rules::engine::{AGENT_RUNS, Engine};
use chrono::Duration;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Analytics requests per hour the demo allows, on both sides, so that it finishes in seconds.
pub const DEMO_ANALYTICS_PER_HOUR: u32 = 1_000_000;

/// The example rules of `jobs/`, built into the binary so that the demo runs from any folder.
pub const DEMO_RULES: [(&str, &str); 2] = [
    (
        "jobs/agent-heavy-pages.toml",
        include_str!("../../jobs/agent-heavy-pages.toml"),
    ),
    (
        "jobs/ai-share-movers.toml",
        include_str!("../../jobs/ai-share-movers.toml"),
    ),
];

/// Run the main job end to end on the embedded emulator: start it on a free port with the demo
/// data, back-fill the last 30 days of every demo project to Parquet, aggregate the trends, run
/// the example rules of `jobs/` (a follow-up and a new agent job, polled until they end), and
/// show what was written.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output folder.
    #[arg(long, default_value = "docpipe-demo")]
    pub output: PathBuf,
}

/// Runs the demo.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut data = super::emulate::load_data(None, &super::emulate::FaultArgs::default())?;
    data.limits.analytics_per_hour = DEMO_ANALYTICS_PER_HOUR;
    let clock = clock::system();
    let server = Server::start(
        Emulator::new(data.clone(), clock.clone()),
        "127.0.0.1:0".parse()?,
    )
    .await?;
    println!(
        "emulator: {} (demo data; analytics limit raised to {DEMO_ANALYTICS_PER_HOUR}/hour on both sides, so the demo takes seconds)",
        server.base_url()
    );
    let exporter = match Exporter::open(&args.output, clock.clone(), 3).await {
        Ok(e) => e.with_progress_bar(),
        Err(e) => return Err(super::UserError(e.to_string()).into()),
    };
    let budget: Arc<dyn Budget> = Arc::new(SqliteBudget::open(&state_path(&args.output))?);
    let mut targets = Vec::new();
    let mut agent_limits = HashMap::new();
    for org in &data.organizations {
        let Some(key) = org.admin_keys.first() else {
            continue;
        };
        let limits = Limits {
            analytics_per_hour: DEMO_ANALYTICS_PER_HOUR,
            ..Limits::default()
        };
        let settings = ClientSettings {
            base_url: server.base_url(),
            timeout: std::time::Duration::from_secs(30),
            retry: RetryPolicy::default(),
            limits,
        };
        let admin = AdminKey::parse(key, &data.brand, "demo data")?;
        let client = Client::new(
            settings,
            &org.id,
            Some(admin),
            None,
            clock.clone(),
            budget.clone(),
        )?;
        for p in data.projects.iter().filter(|p| p.organization == org.id) {
            targets.push(Target {
                project: p.id.clone(),
                client: client.clone(),
            });
            agent_limits.insert(p.id.clone(), limits.effective(limits.agent_per_hour));
        }
    }
    let today = clock.now().date_naive();
    let summary = super::export::plan_and_run(
        &exporter,
        &targets,
        today - Duration::days(29),
        today,
        false,
    )
    .await?;
    let out = std::fs::canonicalize(&args.output).unwrap_or(args.output.clone());
    println!("\nwhat was written, per project (latest day):");
    for t in &targets {
        let Some(latest) = summary
            .windows
            .iter()
            .filter(|w| w.project == t.project)
            .max_by_key(|w| w.day)
        else {
            continue;
        };
        let file = partition_dir(&out, PAGE_VIEWS, &t.project, latest.day).join(PART);
        let mut rows = read_page_views(&file).map_err(anyhow::Error::msg)?;
        rows.sort_by(|a, b| b.total.cmp(&a.total).then(a.path.cmp(&b.path)));
        let share = if latest.totals.total > 0 {
            100.0 * latest.totals.ai as f64 / latest.totals.total as f64
        } else {
            0.0
        };
        println!(
            "  {} {}: {} pages, {} views ({} human, {} AI, {share:.1}% AI){}",
            t.project,
            latest.day,
            rows.len(),
            latest.totals.total,
            latest.totals.human,
            latest.totals.ai,
            if latest.is_final { "" } else { ", provisional" }
        );
        for r in rows.iter().take(3) {
            println!("      {:<40} {:>6} human {:>6} AI", r.path, r.human, r.ai);
        }
    }
    println!();
    super::trends::report(&out, &crate::trends::Selection::default())?;
    println!("\nrules (the example rules of jobs/, built into the binary):");
    let files: Vec<(String, String)> = DEMO_RULES
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    let projects: Vec<String> = targets.iter().map(|t| t.project.clone()).collect();
    let (rules, problems) = crate::rules::parse_all(&files, &projects);
    let loaded = super::rules::Loaded {
        rules,
        problems: problems.iter().map(ToString::to_string).collect(),
    };
    let (tables, _) = super::rules::tables(&out)?;
    let evals = super::rules::evaluate_all(&loaded, &tables)?;
    let engine = Engine::open(&out, budget.clone(), agent_limits, clock.clone())?
        .with_clients(
            targets
                .iter()
                .map(|t| (t.project.clone(), t.client.clone()))
                .collect(),
        )
        .with_polling(Polling {
            first: std::time::Duration::from_secs(1),
            max: std::time::Duration::from_secs(1),
            ..Polling::default()
        });
    let reports = super::rules::fire(&engine, &loaded.rules, &evals).await?;
    let served = server
        .emulator
        .stats()
        .get("views")
        .map_or(0, |s| s.requests);
    println!("\nthe emulator served {served} page-view requests");
    println!("output: {}", out.display());
    println!(
        "  {}/page_views/project=<id>/date=<YYYY-MM-DD>/{PART}",
        out.display()
    );
    println!(
        "  {}/site_totals/project=<id>/date=<YYYY-MM-DD>/{PART}",
        out.display()
    );
    println!(
        "  {}/{AGENT_RUNS}/project=<id>/{PART}  (rule firings and job outcomes)",
        out.display()
    );
    println!(
        "  {}  (state: windows, walks in progress, request log, rule ledger)",
        state_path(&out).display()
    );
    println!("query it, e.g. with DuckDB:");
    println!(
        "  SELECT project, date, sum(human) AS human, sum(ai) AS ai FROM read_parquet('{}/page_views/**/*.parquet', hive_partitioning = true) GROUP BY ALL ORDER BY ALL;",
        out.display()
    );
    server.stop().await;
    super::export::outcome(&summary)?;
    super::rules::outcome(&reports)
}
