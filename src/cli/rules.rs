//! `docpipe rules check|run` and `docpipe validate`: rule files in `jobs/`, evaluated over the
//! trend tables, sent within the hourly limit and the cooldowns, polled, and logged.

use crate::app::rules::{Fired, Wait, evaluate_all, load, tables};
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
    /// List the firings held for review: rule, project, when, rows, each flagged reader's value
    /// with its row and pattern, and the full prompt. Sends nothing.
    Pending(PendingArgs),
    /// Send a held firing's prompt once: exactly as held, or rendered again without the rows
    /// `--drop` names (the new prompt is shown and its hash recorded).
    Approve(ApproveArgs),
    /// Drop a held firing: nothing is sent; the keys of the rows it rejects (`--rows`, default
    /// all) cool down, its other rows may be sent by the rule's next firing.
    Reject(RejectArgs),
}

/// `rules pending`.
#[derive(Debug, clap::Args)]
pub struct PendingArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `rules approve`.
#[derive(Debug, clap::Args)]
pub struct Decide {
    /// The held firing's id (`docpipe rules pending` lists them).
    pub id: i64,
    /// Who decides, for the trail (default: the login name).
    #[arg(long = "as", value_name = "NAME")]
    pub by: Option<String>,
    /// Rules folder (default: `[rules] dir` of the config): the firing's rule is read from it
    /// for its polling and `[impact]`.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `rules approve`.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The held firing and who decides.
    #[command(flatten)]
    pub decide: Decide,
    /// Send it without these rows (numbered from 1 as `rules pending` shows them, e.g.
    /// `--drop 2,5`); their keys cool down as rejected.
    #[arg(long, value_name = "N[,M]", value_delimiter = ',')]
    pub drop: Vec<usize>,
    /// Send again an approved firing whose send was cut off (its process stopped between the
    /// ledger and the request): only after checking that it did not reach the service.
    #[arg(long, conflicts_with = "drop")]
    pub retry: bool,
}

/// `rules reject`.
#[derive(Debug, clap::Args)]
pub struct RejectArgs {
    /// The held firing and who decides.
    #[command(flatten)]
    pub decide: Decide,
    /// Why, for the trail.
    #[arg(long, value_name = "TEXT")]
    pub why: Option<String>,
    /// Reject only these rows (numbered from 1, e.g. `--rows 2,5`; default: all): only their
    /// keys cool down.
    #[arg(long, value_name = "N[,M]", value_delimiter = ',')]
    pub rows: Vec<usize>,
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
        "rule {} ({}): {}, project {}, {}, {}, cooldown {}, {}{}{}",
        r.name,
        r.file,
        if r.enabled {
            "enabled"
        } else {
            "previewed (not enabled)"
        },
        r.project,
        r.target(),
        match r.action.automation() {
            Some(_) => "no review (a trigger sends no readers' words)".to_string(),
            None => format!("review {}", r.review.as_str()),
        },
        crate::text::duration(r.cooldown),
        match &r.schedule {
            Some(s) => format!("schedule {s:?}"),
            None => "after each export".to_string(),
        },
        if r.wait {
            format!(", polls up to {}", crate::text::duration(r.timeout))
        } else {
            ", does not poll".to_string()
        },
        match r.reask {
            Some(q) => format!(
                ", asks the assistant its questions again after a pull request (at most {}, once more {} later if it found nothing)",
                q.max,
                crate::text::duration(q.again)
            ),
            None => String::new(),
        }
    )
}

/// Prints what each rule would do; returns how many would send.
pub fn check(engine: &Engine, rules: &[Rule], evals: &[Evaluation]) -> Result<usize, UserError> {
    let mut sending = 0;
    for (r, e) in rules.iter().zip(evals) {
        crate::outln!("{}", describe_rule(r));
        match &r.key {
            Some(key) if e.left_out > 0 => crate::outln!(
                "  query: {} rows to send (fires at {} or more); {} rows whose {key} was sent or held within {} were left out, and the query ran again without them",
                e.rows.height(),
                r.min_rows,
                e.left_out,
                crate::text::duration(r.key_cooldown),
            ),
            Some(_) => crate::outln!(
                "  query: {} rows to send (fires at {} or more)",
                e.rows.height(),
                r.min_rows
            ),
            None => crate::outln!(
                "  query: {} rows (fires at {} or more)",
                e.rows.height(),
                r.min_rows
            ),
        }
        for line in preview(&e.rows, 10) {
            crate::outln!("    {line}");
        }
        if e.rows.height() > 10 {
            crate::outln!("    ... {} more", e.rows.height() - 10);
        }
        for f in &e.flags {
            crate::outln!("  flagged: {}", f.line());
        }
        for f in &e.dropped {
            crate::outln!("  dropped (flagged = \"drop\"): {}", f.line());
        }
        for place in &r.unescaped {
            crate::outln!(
                "  renders a reader's value unescaped (the `unescaped` filter) at {place}"
            );
        }
        if let Some(w) = r.review_warning() {
            crate::outln!("  warning: {w}");
        }
        if let Some(why) = r.reask.and_then(|_| engine.cannot_reask(&r.project)) {
            crate::outln!("  warning: its questions will not be asked again: {why}");
        }
        for place in crate::rules::verbatim_places(&r.prompt, &e.reader_columns) {
            crate::outln!(
                "  warning: the template asks to reuse a reader's wording as it is at {place}: ask for the need behind it instead (docs/rules.md)"
            );
        }
        let Some(prompt) = &e.prompt else {
            crate::outln!("  does not fire");
            continue;
        };
        if print_prompt(engine, r, e, prompt)? {
            sending += 1;
        }
    }
    Ok(sending)
}

/// Prints a firing rule's prompt (a trigger's record: never sent) and whether it would send
/// now; whether it would.
fn print_prompt(
    engine: &Engine,
    r: &Rule,
    e: &Evaluation,
    prompt: &str,
) -> Result<bool, UserError> {
    let full = prompt_hash(prompt);
    let hash = crate::rules::short_hash(&full);
    match r.action.automation() {
        Some(_) => crate::outln!(
            "  record (sha256 {hash}, {} bytes; a trigger sends none of it, so it waits for no review):",
            prompt.len()
        ),
        None => crate::outln!("  prompt (sha256 {hash}, {} bytes):", prompt.len()),
    }
    for line in prompt.lines() {
        crate::outln!("    | {line}");
    }
    let skip = engine
        .would_skip(r, prompt)
        .map_err(UserError::from_source)?;
    match (r.enabled, e.hold(r), skip) {
        (false, hold, _) => crate::outln!(
            "  preview: the rule is not enabled, so nothing is sent; `enabled = true` in {} sends it{}",
            r.file,
            hold.map(|h| format!(" (it would then wait for review: {h})"))
                .unwrap_or_default()
        ),
        (true, _, Some(skip)) => crate::outln!("  would not send now: {skip}"),
        (true, Some(hold), None) => crate::outln!(
            "  would be held for review ({hold}): `docpipe rules pending` would list it"
        ),
        (true, None, None) => {
            match r.action.automation() {
                Some(a) => crate::outln!("  would start a run of automation {a} now"),
                None => crate::outln!("  would send now"),
            }
            return Ok(true);
        }
    }
    Ok(false)
}

/// Prints what firing did: a line per rule, and the outcome log's files.
pub fn print_fired(fired: &Fired) {
    for id in &fired.expired {
        crate::outln!("firing {id} expired unreviewed: nothing was sent");
    }
    for r in &fired.reports {
        crate::outln!("{}", r.line());
    }
    if fired.pending > 0 {
        crate::outln!(
            "{} firings wait for review: docpipe rules pending",
            fired.pending
        );
    }
    if !fired.log.is_empty() {
        crate::outln!("outcome log ({AGENT_RUNS}):");
        for f in &fired.log {
            crate::outln!("  {}", f.display());
        }
    }
    for line in &fired.reasked.lines {
        crate::outln!("{line}");
    }
    if !fired.reasked.files.is_empty() {
        crate::outln!(
            "questions asked again ({}):",
            crate::rules::engine::AGENT_REASKS
        );
        for f in &fired.reasked.files {
            crate::outln!("  {}", f.display());
        }
    }
    let m = &fired.impact;
    for (id, why) in &m.given_up {
        crate::outln!("impact of firing {id}: not measured: {why}");
    }
    if m.measured > 0 {
        crate::outln!(
            "impact measured for {} firings (docpipe rules impact shows them):",
            m.measured
        );
        for f in &m.files {
            crate::outln!("  {}", f.display());
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
        RulesCommand::Pending(p) => return pending(p, settings).await,
        RulesCommand::Approve(d) => return approve(d, settings).await,
        RulesCommand::Reject(r) => return reject(r, settings).await,
    };
    let dir = select.dir.clone().unwrap_or(settings.rules_dir.clone());
    let mut loaded = load(&dir, settings, &select.rules)?;
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
    // A bucket's tables: fetched into the working copy first.
    let ctx = open(settings, keys).await?;
    let (tables, has_data) = tables(&settings.output_dir)?;
    if !has_data {
        crate::outln!(
            "no exported data in {} yet: the queries were checked against empty tables",
            settings.output_name()
        );
    }
    let engine = ctx.engine()?;
    let rules = &loaded.rules;
    if sending {
        let fired =
            crate::app::cycle::fire(&ctx, &loaded, &engine, Some(&tables), Wait::AsRulesSay)
                .await?;
        print_fired(&fired);
        // The firings' table goes to the bucket too.
        ctx.push().await?;
        outcome(&fired.reports)
    } else {
        let evals = evaluate_all(&loaded, &tables, Some(engine.memory()))?;
        let n = check(&engine, rules, &evals)?;
        crate::outln!("{} rules; {n} would send now; nothing sent", rules.len());
        Ok(())
    }
}

/// Runs `rules impact`.
async fn impact(select: &Select, settings: &Settings) -> anyhow::Result<()> {
    let dir = select.dir.clone().unwrap_or(settings.rules_dir.clone());
    let loaded = load(&dir, settings, &select.rules)?;
    let ctx = open(settings, Keys::None).await?;
    let engine = ctx.engine()?;
    let measured = engine.measure_impact()?;
    crate::out!(
        "{}",
        crate::rules::impact::text::text(&loaded.rules, engine.ledger(), engine.calendar())?
    );
    for p in &loaded.problems {
        crate::outln!("rule file not loaded: {p}");
    }
    if !measured.files.is_empty() {
        crate::outln!("\nimpact table ({}):", crate::rules::impact::AGENT_IMPACT);
        for f in &measured.files {
            crate::outln!("  {}", f.display());
        }
        ctx.push().await?;
    }
    Ok(())
}

/// Runs `validate`.
pub async fn validate(args: ValidateArgs, settings: &Settings) -> anyhow::Result<()> {
    crate::outln!(
        "config {}: {}, {}",
        settings.origin,
        crate::text::count(settings.organizations.len() as u64, "organization"),
        crate::text::count(settings.projects.len() as u64, "project")
    );
    // The variables the daemon reads later: said now when unset (their values never shown).
    let unset = |var: &str| std::env::var(var).map_or(true, |v| v.trim().is_empty());
    if let Some(a) = &settings.alerts
        && unset(&a.webhook_url_env)
    {
        crate::outln!(
            "warning: [alerts] webhook_url_env names {}, which is not set here: the daemon would send no alert",
            a.webhook_url_env
        );
    }
    if let Some(w) = &settings.warehouse
        && unset(&w.url_env)
    {
        crate::outln!(
            "warning: [warehouse] postgres_url_env names {}, which is not set here: the runs would load no warehouse",
            w.url_env
        );
    }
    if args.dir.is_none() && !settings.rules_dir.is_dir() {
        crate::outln!("no rules folder {}: no rules", settings.rules_dir.display());
        return Ok(());
    }
    let dir = args.dir.unwrap_or(settings.rules_dir.clone());
    let loaded = load(&dir, settings, &[])?;
    let (tables, _) = tables(&settings.output_dir)?;
    let evals = evaluate_all(&loaded, &tables, None)?;
    crate::outln!(
        "rules {}: {} rules, all valid",
        dir.display(),
        loaded.rules.len()
    );
    for r in &loaded.rules {
        if !r.enabled {
            crate::outln!(
                "rule {} ({}): previewed, sends nothing until the file says enabled = true",
                r.name,
                r.file
            );
        }
        for place in &r.unescaped {
            crate::outln!(
                "rule {} ({}): renders a reader's value unescaped (the `unescaped` filter) at {place}",
                r.name,
                r.file
            );
        }
        if let Some(w) = r.review_warning() {
            crate::outln!("rule {} ({}): warning: {w}", r.name, r.file);
        }
    }
    for (r, e) in loaded.rules.iter().zip(&evals) {
        for place in crate::rules::verbatim_places(&r.prompt, &e.reader_columns) {
            crate::outln!(
                "rule {} ({}): warning: the template asks to reuse a reader's wording as it is at {place}",
                r.name,
                r.file
            );
        }
    }
    Ok(())
}

/// The output folder's context, shared with a daemon, with a bucket's tables pulled first.
async fn open(settings: &Settings, keys: Keys) -> anyhow::Result<Context> {
    let ctx = Context::open(settings.clone(), clock::system(), Access::Shared, keys).await?;
    ctx.pull().await?;
    Ok(ctx)
}

/// Who decides a review: `--as`, else the login name.
fn reviewer(by: &Option<String>) -> Result<String, UserError> {
    let name = match by {
        Some(n) => n.trim().to_string(),
        None => std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_default(),
    };
    if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
        return Err(UserError::new(
            "say who decides with --as NAME (1 to 100 characters; no login name was found)",
        ));
    }
    Ok(name)
}

/// A held firing as `rules pending` prints it.
fn pending_text(f: &crate::store::ledger::Firing) -> String {
    let mut out = format!(
        "firing {}: rule {} ({}), {} of job {}, held {} with {} rows: {}\n",
        f.id,
        f.rule,
        f.project,
        f.kind.as_str(),
        f.job.as_deref().unwrap_or("(a new job)"),
        f.trail
            .held_at
            .unwrap_or(f.fired_at)
            .format("%Y-%m-%d %H:%M:%SZ"),
        f.rows_matched,
        f.trail.hold.as_deref().unwrap_or("review")
    );
    let flags = crate::rules::parse_flags(f.trail.flags.as_deref());
    let rows = f
        .trail
        .rows
        .as_deref()
        .and_then(|j| serde_json::from_str::<crate::rules::HeldRows>(j).ok());
    match rows {
        Some(rows) => {
            out.push_str("  rows (readers' words quoted; a row without a flag may still be an instruction):\n");
            for line in rows.lines(&flags) {
                out.push_str(&format!("  {line}\n"));
            }
        }
        None => {
            for flag in &flags {
                out.push_str(&format!("  flagged: {}\n", flag.line()));
            }
        }
    }
    for flag in crate::rules::parse_flags(f.trail.dropped.as_deref()) {
        out.push_str(&format!("  dropped: {}\n", flag.line()));
    }
    out.push_str(&format!(
        "  prompt (sha256 {}, {} bytes):\n",
        crate::rules::short_hash(&f.prompt_hash),
        f.prompt.len()
    ));
    for line in f.prompt.lines() {
        out.push_str(&format!("    | {}\n", crate::text::one_line(line)));
    }
    out.push_str(&format!(
        "  docpipe rules approve {} sends it ([--drop N,M] without those rows); docpipe rules reject {} [--rows N,M] [--why TEXT] drops it\n",
        f.id, f.id
    ));
    out
}

/// Runs `rules pending`.
async fn pending(args: &PendingArgs, settings: &Settings) -> anyhow::Result<()> {
    let ctx = open(settings, Keys::None).await?;
    let engine = ctx.engine()?;
    let expired = engine.expire_reviews()?;
    let held = engine.ledger().pending()?;
    if args.json {
        let items: Vec<crate::status::PendingStatus> = held
            .iter()
            .map(|f| crate::status::PendingStatus::of(f, settings.review_expires))
            .collect();
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "pending": items,
                "expired_now": expired,
            }))?
        );
        return Ok(());
    }
    for id in &expired {
        crate::outln!("firing {id} expired unreviewed: nothing was sent");
    }
    if held.is_empty() {
        crate::outln!("no firing waits for review");
        return Ok(());
    }
    for f in &held {
        crate::out!("{}", pending_text(f));
    }
    crate::outln!(
        "{} firings wait for review; each expires unsent after {}",
        held.len(),
        crate::text::duration(settings.review_expires)
    );
    Ok(())
}

/// Runs `rules approve`: sends the held prompt once (without the rows `--drop` names).
async fn approve(approve: &ApproveArgs, settings: &Settings) -> anyhow::Result<()> {
    let args = &approve.decide;
    let by = reviewer(&args.by)?;
    // The ledger only (no bucket to pull): which project's key the sending needs.
    let probe = Context::open(
        settings.clone(),
        clock::system(),
        Access::Shared,
        Keys::None,
    )
    .await?;
    let Some(held) = probe.store().ledger().firing(args.id)? else {
        return Err(
            UserError::new(crate::store::ledger::Decided::Unknown(args.id).to_string()).into(),
        );
    };
    drop(probe);
    let dir = args.dir.clone().unwrap_or(settings.rules_dir.clone());
    let rule = if dir.is_dir() {
        load(&dir, settings, &[])?
            .rules
            .into_iter()
            .find(|r| r.name == held.rule)
    } else {
        None
    };
    let ctx = open(settings, Keys::Of(vec![held.project.clone()])).await?;
    let engine = ctx.engine()?;
    engine.expire_reviews()?;
    let report = match engine
        .approve_with(
            args.id,
            &by,
            rule.as_ref(),
            &approve.drop,
            true,
            approve.retry,
        )
        .await?
    {
        Ok(r) => r,
        Err(decided) => return Err(UserError::new(decided.to_string()).into()),
    };
    if !approve.drop.is_empty()
        && let Some(f) = engine.ledger().firing(args.id)?
    {
        let rows: Vec<String> = approve.drop.iter().map(ToString::to_string).collect();
        crate::outln!(
            "firing {} without rows {} (their keys cool down as rejected): prompt (sha256 {}, {} bytes):",
            f.id,
            rows.join(", "),
            crate::rules::short_hash(&f.prompt_hash),
            f.prompt.len()
        );
        for line in f.prompt.lines() {
            crate::outln!("    | {}", crate::text::one_line(line));
        }
    }
    crate::outln!("approved by {by}: {}", report.line());
    engine.write_log()?;
    // Its job ended with a pull request: its questions asked again now, where its rule says.
    if let Some(rule) = &rule {
        for line in engine.reask(std::slice::from_ref(rule)).await?.lines {
            crate::outln!("{line}");
        }
    }
    ctx.push().await?;
    outcome(std::slice::from_ref(&report))
}

/// Runs `rules reject`: drops the held firing.
async fn reject(args: &RejectArgs, settings: &Settings) -> anyhow::Result<()> {
    let by = reviewer(&args.decide.by)?;
    let ctx = open(settings, Keys::None).await?;
    let engine = ctx.engine()?;
    engine.expire_reviews()?;
    match engine.reject(args.decide.id, &by, args.why.as_deref(), &args.rows)? {
        Ok(f) if args.rows.is_empty() => crate::outln!(
            "firing {} of rule {} ({}) rejected by {by}: nothing was sent; its rows' keys cool down",
            f.id,
            f.rule,
            f.project
        ),
        Ok(f) => crate::outln!(
            "firing {} of rule {} ({}) rejected by {by}: nothing was sent; the keys of rows {} cool down, its other rows may be sent by the rule's next firing",
            f.id,
            f.rule,
            f.project,
            args.rows
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(decided) => return Err(UserError::new(decided.to_string()).into()),
    }
    engine.write_log()?;
    ctx.push().await?;
    Ok(())
}
