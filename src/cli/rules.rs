//! `docpipe rules check|run` and `docpipe validate`: rule files in `jobs/`, evaluated over the
//! trend tables, sent within the hourly limit and the cooldowns, polled, and logged.

use crate::app::rules::{Fired, Wait, evaluate_all, fire_all, load, tables};
use crate::app::{Access, Context, Keys};
use crate::clock;
use crate::config::Settings;
use crate::error::UserError;
use crate::rules::engine::{AGENT_RUNS, Engine, Report};
use crate::rules::{Evaluation, Rule, preview, prompt_hash};
use std::path::PathBuf;

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
    /// Measure what the agent jobs changed (each rule's `[impact]`: its keys' metric over the
    /// days before the firing and after the job ended, once final), rewrite `agent_impact/`,
    /// and print, per rule, the keys that improved, stayed and got worse. Sends nothing.
    Impact(Select),
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
        match &r.key {
            Some(key) => println!(
                "  query: {} rows matched, {} left out by the key ({key} sent within {}), {} rows to send (fires at {} or more)",
                e.matched,
                e.left_out,
                humantime::format_duration(r.key_cooldown),
                e.rows.height(),
                r.min_rows
            ),
            None => println!(
                "  query: {} rows (fires at {} or more)",
                e.rows.height(),
                r.min_rows
            ),
        }
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
            .map_err(UserError::from_source)?
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

/// Prints what firing did: a line per rule, and the outcome log's files.
pub fn print_fired(fired: &Fired) {
    for r in &fired.reports {
        println!("{}", r.line());
    }
    if !fired.log.is_empty() {
        println!("outcome log ({AGENT_RUNS}):");
        for f in &fired.log {
            println!("  {}", f.display());
        }
    }
    let m = &fired.impact;
    for (id, why) in &m.given_up {
        println!("impact of firing {id}: not measured: {why}");
    }
    if m.measured > 0 {
        println!(
            "impact measured for {} firings (docpipe rules impact shows them):",
            m.measured
        );
        for f in &m.files {
            println!("  {}", f.display());
        }
    }
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

/// The projects of some rules, once each.
fn projects_of(rules: &[Rule]) -> Vec<String> {
    let mut projects: Vec<String> = rules.iter().map(|r| r.project.clone()).collect();
    projects.sort();
    projects.dedup();
    projects
}

/// Runs `rules`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let (select, no_wait) = match &args.command {
        RulesCommand::Check(s) => (s, false),
        RulesCommand::Run(r) => (&r.select, r.no_wait),
        RulesCommand::Impact(s) => return impact(s, settings).await,
    };
    let dir = select.dir.clone().unwrap_or(settings.rules_dir.clone());
    let mut loaded = load(&dir, &settings.project_ids(), &select.rules)?;
    if no_wait {
        for r in &mut loaded.rules {
            r.wait = false;
        }
    }
    let sending = matches!(args.command, RulesCommand::Run(_));
    let keys = if sending {
        Keys::Of(projects_of(&loaded.rules))
    } else {
        Keys::None
    };
    let ctx = Context::open(settings.clone(), clock::system(), Access::Shared, keys).await?;
    // A bucket's tables: fetched into the working copy first.
    ctx.pull().await?;
    let (tables, has_data) = tables(&settings.output_dir)?;
    if !has_data {
        println!(
            "no exported data in {} yet: the queries were checked against empty tables",
            settings.output_name()
        );
    }
    let engine = ctx.engine()?;
    let evals = evaluate_all(&loaded, &tables, Some(engine.memory()))?;
    let rules = loaded.rules;
    if sending {
        let fired = fire_all(
            &engine,
            &rules,
            evals.into_iter().map(Ok).collect(),
            Wait::AsRulesSay,
        )
        .await?;
        print_fired(&fired);
        // The firings' table goes to the bucket too.
        ctx.push().await?;
        outcome(&fired.reports)
    } else {
        let n = check(&engine, &rules, &evals)?;
        println!("{} rules; {n} would send now; nothing sent", rules.len());
        Ok(())
    }
}

/// Runs `rules impact`.
async fn impact(select: &Select, settings: &Settings) -> anyhow::Result<()> {
    let dir = select.dir.clone().unwrap_or(settings.rules_dir.clone());
    let loaded = load(&dir, &settings.project_ids(), &select.rules)?;
    let ctx = Context::open(
        settings.clone(),
        clock::system(),
        Access::Shared,
        Keys::None,
    )
    .await?;
    ctx.pull().await?;
    let engine = ctx.engine()?;
    let measured = engine.measure_impact()?;
    print!(
        "{}",
        crate::rules::impact::report(&loaded.rules, engine.ledger(), engine.calendar())?
    );
    for p in &loaded.problems {
        println!("rule file not loaded: {p}");
    }
    if !measured.files.is_empty() {
        println!("\nimpact table ({}):", crate::rules::impact::AGENT_IMPACT);
        for f in &measured.files {
            println!("  {}", f.display());
        }
        ctx.push().await?;
    }
    Ok(())
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
    evaluate_all(&loaded, &tables, None)?;
    println!(
        "rules {}: {} rules, all valid",
        dir.display(),
        loaded.rules.len()
    );
    Ok(())
}
