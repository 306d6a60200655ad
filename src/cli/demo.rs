//! `docpipe demo`: the main job end to end on the embedded emulator.

use crate::api::AdminKey;
use crate::api::jobs::Polling;
use crate::app::cycle::Intent;
use crate::app::cycle::{After, Options, RulesRun, TrendsRun, When};
use crate::app::rules::{Loaded, Wait};
use crate::app::{Access, Context, Keys};
use crate::clock;
use crate::config::{RawConfig, Settings};
use crate::dataset::page_views::most_viewed;
use crate::emulator::data::DataFile;
use crate::emulator::{Emulator, Server};
use crate::layout::PART;
use crate::rules::engine::AGENT_RUNS;
use crate::rules::impact;
use crate::store::state_path;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Analytics requests per hour the demo allows, on both sides, so that it finishes in seconds.
pub const DEMO_ANALYTICS_PER_HOUR: u32 = 1_000_000;

/// The example rules of `jobs/`, built into the binary so that the demo runs from any folder.
pub const DEMO_RULES: [(&str, &str); 7] = [
    (
        "jobs/agent-heavy-pages.toml",
        include_str!("../../jobs/agent-heavy-pages.toml"),
    ),
    (
        "jobs/agent-only-markdown.toml",
        include_str!("../../jobs/agent-only-markdown.toml"),
    ),
    (
        "jobs/ai-share-movers.toml",
        include_str!("../../jobs/ai-share-movers.toml"),
    ),
    (
        "jobs/feedback-down-votes.toml",
        include_str!("../../jobs/feedback-down-votes.toml"),
    ),
    (
        "jobs/help-questions-run.toml",
        include_str!("../../jobs/help-questions-run.toml"),
    ),
    (
        "jobs/search-gaps.toml",
        include_str!("../../jobs/search-gaps.toml"),
    ),
    (
        "jobs/unanswered-questions.toml",
        include_str!("../../jobs/unanswered-questions.toml"),
    ),
];

/// Run the main job end to end on the embedded emulator: start it on a free port with the demo
/// data, back-fill the last 30 days of every demo project to Parquet, aggregate the trends, run
/// the example rules of `jobs/` (a follow-up and a new agent job, polled until they end), and
/// show what was written.
/// The output (`--output`, default `docpipe-demo`) may be a bucket (`s3://…`) with a
/// `--state-dir`. With `--weeks N`, the demo starts N weeks ago on a simulated clock and
/// lives each week after: the new days exported, the rules run again, and what the agent
/// jobs changed measured; it ends with the impact table (`docpipe rules impact`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Simulated weeks after the first run (0 to 8): each exports the week's days, runs the
    /// rules and measures the jobs' impact; 2 or more gives before/after figures.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub weeks: u32,
}

/// The demo's output folder when `--output` is not given.
pub const DEMO_OUTPUT: &str = "docpipe-demo";

/// The settings of a config that points at the demo's emulator and writes to `out`.
pub fn demo_settings(
    data: &DataFile,
    base_url: &str,
    o: &crate::config::Overrides,
) -> anyhow::Result<Settings> {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let out = o.output.clone().unwrap_or(PathBuf::from(DEMO_OUTPUT));
    let mut text = format!(
        "[service]\nbase_url = {}\nbrand = {}\n[export]\noutput_dir = {}\n",
        quote(base_url),
        quote(&data.brand),
        quote(&out.display().to_string())
    );
    if let Some(dir) = &o.state_dir {
        text += &format!("state_dir = {}\n", quote(&dir.display().to_string()));
    }
    for org in &data.organizations {
        text += &format!(
            // The keys come from the emulator's data (`Keys::Given`, and the assistant's by
            // `Context::with_assistant_keys`); the variables are not read.
            "[[organizations]]\nid = {}\nadmin_key_env = \"DOCPIPE_DEMO_ADMIN_KEY\"\nanalytics_per_hour = {DEMO_ANALYTICS_PER_HOUR}\n",
            quote(&org.id)
        );
        // The organization's assistant: the domain of its first project that has one.
        if let Some(d) = data.domains.iter().find(|d| d.organization == org.id) {
            text += &format!(
                "assistant_domain = {}\nassistant_key_env = \"DOCPIPE_DEMO_ASSISTANT_KEY\"\n",
                quote(&d.id)
            );
        }
    }
    for p in &data.projects {
        text += &format!(
            "[[projects]]\nid = {}\norganization = {}\n",
            quote(&p.id),
            quote(&p.organization)
        );
    }
    if let Some(stream) = data.stream.as_ref().filter(|s| !s.projects.is_empty()) {
        let subdomains: Vec<String> = stream
            .projects
            .iter()
            .map(|p| {
                format!(
                    "{} = {}",
                    quote(&crate::emulator::stream::subdomain(p)),
                    quote(p)
                )
            })
            .collect();
        text += &format!(
            "[[streams]]\nurl = {}\nsubdomains = {{ {} }}\n",
            quote(&stream_dir(&out).display().to_string()),
            subdomains.join(", ")
        );
    }
    Ok(RawConfig::parse(&text, "demo")?.validate("demo")?)
}

/// Where the demo's emulator writes its event stream: a hidden folder of the output (the
/// mirror and the lake's readers pass it by), as the service would write a bucket.
pub fn stream_dir(out: &std::path::Path) -> PathBuf {
    out.join(".stream")
}

/// Writes the emulator's stream objects of the complete days after `after` up to yesterday
/// (at most a week) into the demo's stream folder; returns the last day written.
fn write_stream(
    emulator: &Emulator,
    dir: &std::path::Path,
    after: Option<chrono::NaiveDate>,
) -> anyhow::Result<Option<chrono::NaiveDate>> {
    let today = emulator.today();
    let first = today - chrono::Duration::days(7);
    let from = after.map_or(first, |d| (d + chrono::Duration::days(1)).max(first));
    let mut last = after;
    for day in from.iter_days().take_while(|d| *d < today) {
        for o in crate::emulator::stream::day(emulator, day).0 {
            crate::layout::write_whole(&dir.join(&o.name), &o.bytes)?;
        }
        last = Some(day);
    }
    Ok(last)
}

/// The stream's week of each streamed project, as the demo prints it.
fn print_stream_week(
    out: &std::path::Path,
    data: &DataFile,
    to: Option<chrono::NaiveDate>,
) -> anyhow::Result<()> {
    let (Some(stream), Some(to)) = (&data.stream, to) else {
        return Ok(());
    };
    let from = to - chrono::Duration::days(6);
    crate::outln!(
        "
AI agents and their readers, from the event stream ({from} to {to}; tables agent_daily, agent_pages, ai_referrals, unknown_agents):"
    );
    for p in &stream.projects {
        let week = crate::stream::report::week(out, p, from, to)?;
        for line in week.lines(p) {
            crate::outln!("{line}");
        }
    }
    Ok(())
}

/// Runs the demo.
pub async fn run(args: Args, o: &crate::config::Overrides) -> anyhow::Result<()> {
    let mut data = super::emulate::load_data(None, &super::emulate::FaultArgs::default())?;
    data.limits.analytics_per_hour = DEMO_ANALYTICS_PER_HOUR;
    // The simulated weeks end now: the clock starts as many weeks ago.
    let week = chrono::Duration::days(7);
    let manual = (args.weeks > 0)
        .then(|| clock::ManualClock::new(chrono::Utc::now() - week * args.weeks as i32));
    let clock: clock::SharedClock = match &manual {
        Some(m) => m.clone(),
        None => clock::system(),
    };
    let server = Server::start(
        Emulator::new(data.clone(), clock.clone()),
        "127.0.0.1:0".parse()?,
    )
    .await?;
    crate::outln!(
        "emulator: {} (demo data; analytics limit raised to {DEMO_ANALYTICS_PER_HOUR}/hour on both sides, so the demo takes seconds)",
        server.base_url()
    );
    let settings = demo_settings(&data, &server.base_url(), o)?;
    let output_dir = settings.output_dir.clone();
    let ctx = Context::open(settings, clock.clone(), Access::Export, demo_keys(&data)?)
        .await?
        .with_events(Arc::new(super::progress::Bar::on_terminal()))
        .with_assistant_keys(demo_assistant_keys(&data)?);
    let targets = ctx.targets(&[])?;
    let loaded = demo_rules(&ctx, &targets);
    let engine = ctx.engine()?.with_polling(Polling {
        first: std::time::Duration::from_secs(1),
        max: std::time::Duration::from_secs(1),
        ..Polling::default()
    });
    let opts = Options {
        trends: When::Always,
        rules: After::These(&loaded, &engine),
        wait: Wait::AsRulesSay,
        ..Options::export_only(false)
    };
    let out = std::fs::canonicalize(&output_dir).unwrap_or(output_dir.clone());
    let mut streamed = write_stream(&server.emulator, &stream_dir(&output_dir), None)?;
    let report = demo_run(&ctx, &targets, opts).await?;
    print_latest(&out, &targets, &report.summary)?;
    print_stream_week(&out, &data, streamed)?;
    crate::outln!();
    let mut fired = after_run(&ctx, &out, report.trends, report.rules, true)?;
    approve_as_demo(&engine, &loaded, &mut fired).await?;
    let mut summary = report.summary;
    if let Some(m) = &manual {
        for n in 1..=args.weeks {
            m.advance(week.to_std().unwrap_or_default());
            crate::outln!(
                "\n--- week {n} of {}: {} (simulated clock) ---",
                args.weeks,
                ctx.settings.today(clock::Clock::now(m.as_ref()))
            );
            streamed = write_stream(&server.emulator, &stream_dir(&output_dir), streamed)?;
            let report = demo_run(&ctx, &targets, opts).await?;
            summary.failed.extend(report.summary.failed);
            fired = after_run(&ctx, &out, report.trends, report.rules, false)?;
            approve_as_demo(&engine, &loaded, &mut fired).await?;
        }
        let report = impact::text::text(&loaded.rules, engine.ledger(), engine.calendar())?;
        crate::out!("\n{report}");
    }
    print_output(&ctx, &out, ctx.push().await?, &server.emulator.stats());
    server.stop().await;
    super::export::outcome(&summary)?;
    super::rules::outcome(&fired.reports)
}

/// Where the outputs are: the bucket's URL or the output folder's full path, what was sent,
/// each table's files and rows.
fn print_output(
    ctx: &Context,
    out: &std::path::Path,
    pushed: Option<crate::remote::Synced>,
    stats: &BTreeMap<&str, crate::emulator::OpStats>,
) {
    // The bucket's URL, or the output folder's full path.
    let shown = match &ctx.settings.output {
        Some(l) => l.to_string(),
        None => out.display().to_string(),
    };
    crate::outln!("\noutput: {shown}");
    if let Some(p) = pushed {
        crate::outln!(
            "  {} files sent ({} bytes); the working copy and the state are in {}",
            p.files,
            p.bytes,
            out.display()
        );
    }
    print_tables(out, &shown, stats);
}

/// Each demo organization's first admin key.
pub fn demo_keys(data: &crate::emulator::data::DataFile) -> anyhow::Result<Keys> {
    let mut keys = BTreeMap::new();
    for org in &data.organizations {
        if let Some(key) = org.admin_keys.first() {
            keys.insert(
                org.id.clone(),
                AdminKey::parse(key, &data.brand, "demo data")?,
            );
        }
    }
    Ok(Keys::Given(keys))
}

/// Each demo organization's first assistant key.
pub fn demo_assistant_keys(
    data: &crate::emulator::data::DataFile,
) -> anyhow::Result<BTreeMap<String, crate::api::AssistantKey>> {
    let mut keys = BTreeMap::new();
    for org in &data.organizations {
        if let Some(key) = org.assistant_keys.first() {
            keys.insert(
                org.id.clone(),
                crate::api::AssistantKey::parse(key, &data.brand, "demo data")?,
            );
        }
    }
    Ok(keys)
}

/// Each project's latest day written: its totals and its three most viewed pages.
fn print_latest(
    out: &std::path::Path,
    targets: &[crate::export::Target],
    summary: &crate::export::Summary,
) -> anyhow::Result<()> {
    crate::outln!("\nwhat was written, per project (latest day):");
    for t in targets {
        let Some(latest) = summary
            .windows
            .iter()
            .filter(|w| w.project == t.project)
            .max_by_key(|w| w.day)
        else {
            continue;
        };
        let rows = most_viewed(out, &t.project, latest.day).map_err(anyhow::Error::msg)?;
        let share = if latest.totals.total > 0 {
            100.0 * latest.totals.ai as f64 / latest.totals.total as f64
        } else {
            0.0
        };
        crate::outln!(
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
            let path = crate::text::one_line(&r.path);
            crate::outln!("      {path:<40} {:>6} human {:>6} AI", r.human, r.ai);
        }
    }
    Ok(())
}

/// The example rules of `jobs/`, for the demo's projects.
fn demo_rules(ctx: &Context, targets: &[crate::export::Target]) -> Loaded {
    let files: Vec<(String, String)> = DEMO_RULES
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    let projects: Vec<String> = targets.iter().map(|t| t.project.clone()).collect();
    let (mut rules, problems) = crate::rules::parse_all(&files, &projects);
    crate::app::rules::with_settings(&mut rules, &ctx.settings);
    Loaded {
        rules,
        problems: problems.iter().map(ToString::to_string).collect(),
    }
}

/// One run of the demo: the plan of what is due printed, the run, its summary printed.
async fn demo_run(
    ctx: &Context,
    targets: &[crate::export::Target],
    opts: Options<'_>,
) -> anyhow::Result<crate::app::cycle::Report> {
    let exporter = ctx.exporter();
    let shown = |plan: &crate::export::Plan| super::export::announce(plan, false);
    let opts = Options {
        announce: Some(&shown),
        ..opts
    };
    let outcome = crate::app::cycle::run(ctx, &exporter, targets, Intent::Due, opts).await?;
    let crate::app::cycle::Outcome::Ran(report) = outcome else {
        anyhow::bail!("the demo's run did not run: {outcome:?}");
    };
    crate::out!("{}", crate::export::describe_summary(&report.summary));
    if let Some(streams) = &report.streams {
        for line in crate::app::streams::lines(streams) {
            crate::outln!("{line}");
        }
    }
    Ok(*report)
}

/// The firings a run held for review (their prompts hold readers' words), approved by the demo
/// as a person would with `docpipe rules approve ID --as NAME`, saying so, so that its loop
/// ends: each approval's report replaces the held one, their jobs polled at once.
async fn approve_as_demo(
    engine: &crate::rules::engine::Engine,
    loaded: &Loaded,
    fired: &mut crate::app::rules::Fired,
) -> anyhow::Result<()> {
    use crate::rules::engine::Report;
    let held: Vec<usize> = (0..fired.reports.len())
        .filter(|i| matches!(fired.reports[*i], Report::Held(_)))
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    crate::outln!(
        "the demo approves the {} firings held for review as `demo`: their prompts hold readers' words, which a person sees first (yours wait in `docpipe rules pending` for `docpipe rules approve ID --as NAME`, or `reject ID`)",
        held.len()
    );
    let mut approved = Vec::new();
    for i in held {
        let Report::Held(f) = &fired.reports[i] else {
            continue;
        };
        let (id, name) = (f.id, f.rule.clone());
        let Some(rule) = loaded.rules.iter().find(|r| r.name == name) else {
            continue;
        };
        match engine
            .approve_with(id, "demo", Some(rule), &[], false, false)
            .await?
        {
            Ok(r) => {
                fired.reports[i] = r;
                approved.push((rule, i));
            }
            Err(decided) => crate::outln!("firing {id}: {decided}"),
        }
    }
    let mut reports: Vec<Report> = approved
        .iter()
        .map(|(_, i)| fired.reports[*i].clone())
        .collect();
    let mut pairs: Vec<(&crate::rules::Rule, &mut Report)> = approved
        .iter()
        .map(|(r, _)| *r)
        .zip(reports.iter_mut())
        .collect();
    engine.wait_for(&mut pairs).await?;
    for ((_, i), r) in approved.iter().zip(reports) {
        crate::outln!("approved by demo: {}", r.line());
        fired.reports[*i] = r;
    }
    fired.pending = engine.ledger().pending()?.len();
    engine.write_log()?;
    // The approved jobs ended: their questions asked again where their rules say.
    for line in engine.reask(&loaded.rules).await?.lines {
        crate::outln!("{line}");
    }
    Ok(())
}

/// The trends of a demo run (printed when `print_trends`), and its rules' firings, their jobs
/// polled each second.
fn after_run(
    ctx: &Context,
    out: &std::path::Path,
    trends: TrendsRun,
    rules: RulesRun,
    print_trends: bool,
) -> anyhow::Result<crate::app::rules::Fired> {
    match trends {
        TrendsRun::Computed(t, _) if print_trends => {
            super::trends::print(out, &t.tables, &t.files, &[])?;
        }
        TrendsRun::Computed(..) => {}
        TrendsRun::Failed(e) => return Err(e.into()),
        TrendsRun::Off | TrendsRun::Unchanged(_) | TrendsRun::NoData => {
            return Err(super::export::no_data(ctx).into());
        }
    }
    crate::outln!("\nrules (the example rules of jobs/, built into the binary):");
    match rules {
        RulesRun::Fired(fired) => {
            super::rules::print_fired(&fired);
            Ok(fired)
        }
        RulesRun::Failed(e) => Err(e),
        RulesRun::None | RulesRun::NotRun => Ok(crate::app::rules::Fired::default()),
    }
}

/// Each table's files and rows beside the emulator's count of its dataset's requests, where
/// the outputs are, and two queries to try.
fn print_tables(
    out: &std::path::Path,
    shown: &str,
    stats: &BTreeMap<&str, crate::emulator::OpStats>,
) {
    crate::outln!(
        "  table                 files     rows  requests  (the emulator's count of its dataset's requests)"
    );
    for d in crate::dataset::ALL.iter().filter(|d| d.by_default()) {
        let op = crate::emulator::Op::of_endpoint(d.endpoint()).map_or(d.name(), |op| op.name());
        let served = stats.get(op).map_or(0, |s| s.requests);
        for (i, t) in d.tables().iter().enumerate() {
            let (files, rows) =
                crate::dataset::parquet::count_rows(&out.join(t.name)).unwrap_or_default();
            if files == 0 && i > 0 {
                continue;
            }
            let requests = if i == 0 {
                served.to_string()
            } else {
                String::new()
            };
            crate::outln!("  {:<20} {files:>6} {rows:>8} {requests:>9}", t.name);
        }
    }
    for t in crate::tables::STREAM {
        let (files, rows) =
            crate::dataset::parquet::count_rows(&out.join(t.name)).unwrap_or_default();
        if files > 0 {
            crate::outln!("  {:<20} {files:>6} {rows:>8}  (the event stream)", t.name);
        }
    }
    crate::outln!("  tables are under {shown}/<table>/project=<id>/date=<YYYY-MM-DD>/{PART}");
    crate::outln!("  {shown}/{AGENT_RUNS}/project=<id>/{PART}  (rule firings and job outcomes)");
    crate::outln!(
        "  {shown}/{}/project=<id>/{PART}  (what each job changed, key by key, once measured)",
        crate::rules::impact::AGENT_IMPACT
    );
    crate::outln!(
        "  {shown}/{}/project=<id>/{PART}  (the questions asked again of the assistant after a pull request)",
        crate::rules::engine::AGENT_REASKS
    );
    crate::outln!(
        "  {shown}/{}/project=<id>/{PART}  (each dataset's days: partial, provisional or final)",
        crate::export::DAY_STATUS
    );
    crate::outln!(
        "  {shown}/{}/  (the lake described: manifest.json, duckdb.sql with a view per table, dbt_sources.yml)",
        crate::app::lake::FOLDER
    );
    crate::outln!(
        "  {}  (state: windows, walks in progress, request log, rule ledger)",
        state_path(out).display()
    );
    crate::outln!("query it, e.g. with DuckDB:");
    crate::outln!(
        "  SELECT project, date, sum(human) AS human, sum(ai) AS ai FROM read_parquet('{shown}/page_views/**/*.parquet', hive_partitioning = true) GROUP BY ALL ORDER BY ALL;"
    );
    crate::outln!(
        "  SELECT project, date, count(*) FILTER (resolution_status = 'unanswered') AS unanswered, count(*) AS turns FROM read_parquet('{shown}/assistant_turns/**/*.parquet', hive_partitioning = true) GROUP BY ALL ORDER BY ALL;"
    );
}
