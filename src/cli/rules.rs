//! `docpipe rules check|run` and `docpipe validate`: rule files in `jobs/`, evaluated over the
//! trend tables, sent within the hourly limit and the cooldowns, polled, and logged.

use super::UserError;
use crate::clock::{self, SharedClock};
use crate::config::Settings;
use crate::rules::engine::{AGENT_RUNS, Engine, Report};
use crate::rules::{Evaluation, Rule, evaluate, load_dir, preview, prompt_hash};
use crate::trends::{Selection, Tables, TrendsError, compute, empty_tables};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Agent-job follow-ups from the rule files (`[rules] dir`, default `jobs/`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: RulesCommand,
}

/// The rules subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RulesCommand {
    /// Evaluate every rule over the trend tables and show what would be sent (rows, rendered
    /// prompt, cooldown); send nothing.
    Check(Select),
    /// Evaluate the rules and send what fires, within the hourly limit and the cooldowns; poll
    /// each job until it ends; log the outcomes in the state database and `agent_runs/`.
    Run(RunArgs),
}

/// Which rules.
#[derive(Debug, clap::Args)]
pub struct Select {
    /// Only this rule (repeatable; default: all).
    #[arg(long = "rule")]
    pub rules: Vec<String>,
    /// Rules folder (default: `[rules] dir` of the config).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `rules run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Which rules.
    #[command(flatten)]
    pub select: Select,
    /// Send, but do not poll the jobs (overrides each rule's `wait`).
    #[arg(long)]
    pub no_wait: bool,
}

/// Check the config file and the rule files (fields, projects, queries against the trend
/// tables' columns, templates, schedules) without sending anything.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Rules folder (default: `[rules] dir` of the config).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// The rules of a folder, and the problems found so far (one line each, naming the file).
#[derive(Debug)]
pub struct Loaded {
    /// Valid rules (the selected ones).
    pub rules: Vec<Rule>,
    /// Problems.
    pub problems: Vec<String>,
}

/// Loads the rules of `dir`, keeping the named ones (all when `names` is empty).
pub fn load(dir: &Path, projects: &[String], names: &[String]) -> Result<Loaded, UserError> {
    if !dir.is_dir() {
        return Err(UserError(format!(
            "rules folder {} does not exist (set [rules] dir in the config, or pass --dir)",
            dir.display()
        )));
    }
    let (rules, problems) = load_dir(dir, projects).map_err(|e| UserError(e.to_string()))?;
    for n in names {
        if !rules.iter().any(|r| &r.name == n) && problems.is_empty() {
            let known: Vec<_> = rules.iter().map(|r| r.name.as_str()).collect();
            return Err(UserError(format!(
                "no rule named {n} in {} (rules: {})",
                dir.display(),
                known.join(", ")
            )));
        }
    }
    Ok(Loaded {
        rules: rules
            .into_iter()
            .filter(|r| names.is_empty() || names.contains(&r.name))
            .collect(),
        problems: problems.iter().map(ToString::to_string).collect(),
    })
}

/// The trend tables of the output folder; empty ones (real columns, no rows) when nothing was
/// exported yet, so that the queries can still be checked.
pub fn tables(out: &Path) -> anyhow::Result<(Tables, bool)> {
    match compute(out, &Selection::default()) {
        Ok(t) => Ok((t, true)),
        Err(TrendsError::NoData(_)) => Ok((empty_tables()?, false)),
        Err(e) => Err(e.into()),
    }
}

/// Evaluates every rule: any problem, in a file or in an evaluation, stops everything before
/// anything is sent, with one line per problem.
pub fn evaluate_all(loaded: &Loaded, tables: &Tables) -> Result<Vec<Evaluation>, UserError> {
    let mut evals = Vec::new();
    let mut problems = loaded.problems.clone();
    for r in evaluate(&loaded.rules, tables) {
        match r {
            Ok(e) => evals.push(e),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if problems.is_empty() {
        Ok(evals)
    } else {
        Err(UserError(problems.join("\n")))
    }
}

/// The ledger and the limits of a config (no client: enough to check).
pub fn engine(settings: &Settings, clock: SharedClock) -> anyhow::Result<Engine> {
    std::fs::create_dir_all(&settings.output_dir).map_err(|e| {
        UserError(format!(
            "output folder {}: cannot create it: {e}",
            settings.output_dir.display()
        ))
    })?;
    let budget = crate::export::state::SqliteBudget::open(&settings.budget_db)
        .map_err(|e| UserError(e.to_string()))?;
    Ok(Engine::open(
        &settings.output_dir,
        Arc::new(budget),
        settings.agent_limits(),
        clock,
    )?)
}

fn describe_rule(r: &Rule) -> String {
    format!(
        "rule {} ({}): project {}, {}, cooldown {}, {}{}",
        r.name,
        r.file,
        r.project,
        r.target(),
        humantime::format_duration(r.cooldown),
        match &r.schedule {
            Some(s) => format!("schedule {s:?}"),
            None => "after each export".to_string(),
        },
        if r.wait {
            format!(", polls up to {}", humantime::format_duration(r.timeout))
        } else {
            ", does not poll".to_string()
        }
    )
}

/// Prints what each rule would do; returns how many would send.
pub fn check(engine: &Engine, rules: &[Rule], evals: &[Evaluation]) -> Result<usize, UserError> {
    let mut sending = 0;
    for (r, e) in rules.iter().zip(evals) {
        println!("{}", describe_rule(r));
        println!(
            "  query: {} rows (fires at {} or more)",
            e.rows.height(),
            r.min_rows
        );
        for line in preview(&e.rows, 10) {
            println!("    {line}");
        }
        if e.rows.height() > 10 {
            println!("    ... {} more", e.rows.height() - 10);
        }
        let Some(prompt) = &e.prompt else {
            println!("  does not fire");
            continue;
        };
        println!(
            "  prompt (sha256 {}, {} bytes):",
            &prompt_hash(prompt)[..12],
            prompt.len()
        );
        for line in prompt.lines() {
            println!("    | {line}");
        }
        match engine
            .would_skip(r, prompt)
            .map_err(|e| UserError(e.to_string()))?
        {
            Some(skip) => println!("  would not send now: {skip}"),
            None => {
                sending += 1;
                println!("  would send now")
            }
        }
    }
    Ok(sending)
}

/// Fires the rules (in order), printing a line each, then writes the outcome log.
pub async fn fire(
    engine: &Engine,
    rules: &[Rule],
    evals: &[Evaluation],
) -> anyhow::Result<Vec<Report>> {
    let mut reports = Vec::new();
    for (r, e) in rules.iter().zip(evals) {
        let report = engine.fire(r, e).await?;
        println!("{}", report.line());
        reports.push(report);
    }
    if reports.iter().any(|r| matches!(r, Report::Fired(_))) {
        let files = engine.write_log()?;
        println!("outcome log ({AGENT_RUNS}):");
        for f in files {
            println!("  {}", f.display());
        }
    }
    Ok(reports)
}

/// Ends with exit code 1 when a follow-up was refused or could not be sent.
pub fn outcome(reports: &[Report]) -> anyhow::Result<()> {
    let failed = reports.iter().filter(|r| r.failed()).count();
    if failed == 0 {
        Ok(())
    } else {
        anyhow::bail!("{failed} rule firings were refused or not sent; see the lines above")
    }
}

/// Clients for the projects of `rules`, sharing the request log of `budget_db`.
pub fn clients(
    settings: &Settings,
    rules: &[Rule],
    clock: &SharedClock,
) -> Result<HashMap<String, crate::api::Client>, UserError> {
    let mut projects: Vec<String> = rules.iter().map(|r| r.project.clone()).collect();
    projects.sort();
    projects.dedup();
    Ok(super::export::targets(settings, &projects, clock)?
        .into_iter()
        .map(|t| (t.project, t.client))
        .collect())
}

/// Runs the unscheduled rules after an export (when `[rules] after_export` and the folder exists).
pub async fn after_export(settings: &Settings, clock: SharedClock) -> anyhow::Result<()> {
    if !settings.rules_after_export || !settings.rules_dir.is_dir() {
        return Ok(());
    }
    let mut loaded = load(&settings.rules_dir, &settings.project_ids(), &[])?;
    loaded.rules.retain(|r| r.schedule.is_none());
    if loaded.rules.is_empty() && loaded.problems.is_empty() {
        return Ok(());
    }
    println!("\nrules ({}):", settings.rules_dir.display());
    let (tables, _) = tables(&settings.output_dir)?;
    let evals = evaluate_all(&loaded, &tables)?;
    let rules = loaded.rules;
    let engine = engine(settings, clock.clone())?.with_clients(clients(settings, &rules, &clock)?);
    outcome(&fire(&engine, &rules, &evals).await?)
}

/// Runs `rules`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let clock = clock::system();
    let (select, no_wait) = match &args.command {
        RulesCommand::Check(s) => (s, false),
        RulesCommand::Run(r) => (&r.select, r.no_wait),
    };
    let dir = select.dir.clone().unwrap_or(settings.rules_dir.clone());
    let mut loaded = load(&dir, &settings.project_ids(), &select.rules)?;
    if no_wait {
        for r in &mut loaded.rules {
            r.wait = false;
        }
    }
    let (tables, has_data) = tables(&settings.output_dir)?;
    if !has_data {
        println!(
            "no exported data in {} yet: the queries were checked against empty tables",
            settings.output_dir.display()
        );
    }
    let evals = evaluate_all(&loaded, &tables)?;
    let rules = loaded.rules;
    let engine = engine(settings, clock.clone())?;
    match args.command {
        RulesCommand::Check(_) => {
            let n = check(&engine, &rules, &evals)?;
            println!("{} rules; {n} would send now; nothing sent", rules.len());
            Ok(())
        }
        RulesCommand::Run(_) => {
            let engine = engine.with_clients(clients(settings, &rules, &clock)?);
            outcome(&fire(&engine, &rules, &evals).await?)
        }
    }
}

/// Runs `validate`.
pub async fn validate(args: ValidateArgs, settings: &Settings) -> anyhow::Result<()> {
    println!(
        "config {}: {} organizations, {} projects",
        settings.origin,
        settings.organizations.len(),
        settings.projects.len()
    );
    if args.dir.is_none() && !settings.rules_dir.is_dir() {
        println!("no rules folder {}: no rules", settings.rules_dir.display());
        return Ok(());
    }
    let dir = args.dir.unwrap_or(settings.rules_dir.clone());
    let loaded = load(&dir, &settings.project_ids(), &[])?;
    let (tables, _) = tables(&settings.output_dir)?;
    evaluate_all(&loaded, &tables)?;
    println!(
        "rules {}: {} rules, all valid",
        dir.display(),
        loaded.rules.len()
    );
    Ok(())
}
