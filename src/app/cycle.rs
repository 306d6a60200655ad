//! One run of the pipeline, owned here once: the plan of what it is asked for (an
//! [`Intent`]), the export of that plan, the trends (only when a window was written or the day
//! turned), the rules over the same tables (with the impact of their jobs measured), the push
//! of what was written, and the forecast of what is left when asked. `export`, `backfill`, the
//! daemon's ticks and the demo each pass an intent to [`run`] and read its typed [`Report`],
//! which carries the plan and the forecast: the command line prints it, the daemon logs and
//! gauges it, and its status page reads the forecast instead of making one again.

use super::Context;
pub use super::export::{Intent, WindowId};
use super::export::{Planned, plan};
use super::plan_view::Ahead;
use super::rules::{Fired, Loaded, Wait, evaluate_each, fire_all};
use crate::export::{Due, ExportError, Exporter, Plan, Step, Summary, Target};
use crate::remote::Synced;
use crate::rules::engine::Engine;
use crate::trends::{Selection, Tables, TrendsError, compute, write_tables};
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::sync::Arc;

/// What comes after the export in a run.
#[derive(Clone, Copy)]
pub struct Options<'a> {
    /// When the trend tables are computed and written.
    pub trends: When,
    /// Which rules fire over the tables.
    pub rules: After<'a>,
    /// Whether firing waits for the jobs.
    pub wait: Wait,
    /// Send what was written to the output when it is a bucket.
    pub push: bool,
    /// Shown the plan before anything is sent; `false` stops the run there (a dry run).
    pub announce: Option<&'a (dyn Fn(&Plan) -> bool + Sync)>,
    /// Plan ahead after the run: what is left to do within each organization's budget, in the
    /// report's `ahead` (the daemon's reserve for the next runs, its gauges and its status
    /// page).
    pub ahead: bool,
    /// Walk the newest window of each daily dataset never walked before the plan is made and
    /// shown (see [`Plan::measuring`]); off in a dry run, which sends nothing.
    pub measure: bool,
}

impl Options<'_> {
    /// The export alone, pushed when `push` (a backfill).
    pub fn export_only(push: bool) -> Self {
        Self {
            trends: When::Never,
            rules: After::Nothing,
            wait: Wait::Never,
            push,
            announce: None,
            ahead: false,
            measure: true,
        }
    }
}

/// What a run came to.
#[derive(Debug)]
pub enum Outcome {
    /// It ran: its report.
    Ran(Box<Report>),
    /// It was planned and stopped before anything was sent (a dry run): the plan.
    Stopped(Plan),
    /// [`Intent::Next`] found no window left: the range's plan (what is not final in it).
    Drained(Plan),
    /// [`Intent::Next`] found a window the budget has no room for yet.
    Waits,
}

/// When a run computes the trends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Never (a backfill, `[export] trends_after_export = false`).
    Never,
    /// When a window was written since the last ones, or the day turned.
    Changed,
    /// Every run (the demo shows them).
    Always,
}

impl When {
    /// `Changed`, or `Never` when `on` is false.
    pub fn changed_if(on: bool) -> Self {
        if on { Self::Changed } else { Self::Never }
    }
}

/// The rules of a run.
#[derive(Debug, Clone, Copy)]
pub enum After<'a> {
    /// None.
    Nothing,
    /// The rules without a schedule of `[rules] dir`, loaded after the export when `[rules]
    /// after_export` is on (a file that does not load fails the rules, not the export).
    Unscheduled,
    /// These rules, fired by this engine (the daemon's, the demo's).
    These(&'a Loaded, &'a Engine),
}

/// Why the trends were computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Because {
    /// None were computed over this state before.
    First,
    /// A window was written since the last ones (by this run or another process).
    Written,
    /// The day turned since the last ones (a day became yesterday).
    DayTurned,
    /// The trend files were not in the output.
    Missing,
}

/// The trends of a run.
#[derive(Debug)]
pub struct Trends {
    /// The tables (every project).
    pub tables: Tables,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// What became of the trends in a run.
#[derive(Debug)]
pub enum TrendsRun {
    /// Computed and written.
    Computed(Box<Trends>, Because),
    /// Not asked for.
    Off,
    /// Not computed again: no window written since the last ones, at this time, the same day.
    Unchanged(DateTime<Utc>),
    /// Nothing was exported yet.
    NoData,
    /// Computing or writing them failed.
    Failed(TrendsError),
}

/// What became of the rules in a run.
#[derive(Debug)]
pub enum RulesRun {
    /// No rules after this run.
    None,
    /// Not run: the trends were unchanged, or there are no tables to run them on.
    NotRun,
    /// Fired (each rule's report, the outcome log, the impact measured).
    Fired(Fired),
    /// A rule file that does not load, the ledger or the outcome log failed.
    Failed(anyhow::Error),
}

/// What one run did, every step of it.
#[derive(Debug)]
pub struct Report {
    /// The plan it ran.
    pub plan: Plan,
    /// What is left, planned and forecast after the run (`None`: not asked for).
    pub ahead: Option<anyhow::Result<Arc<Ahead>>>,
    /// The export: windows written, failed, skipped, requests by dataset and purpose.
    pub summary: Summary,
    /// What the streams' reading did (`None`: no `[[streams]]`), or why it could not start.
    pub streams: Option<Result<super::streams::StreamsRun, String>>,
    /// The lake's `day_status` files rewritten (none when nothing changed), or why they could
    /// not be.
    pub day_status: Result<Vec<PathBuf>, String>,
    /// The trends.
    pub trends: TrendsRun,
    /// The rules.
    pub rules: RulesRun,
    /// The lake's description (`_docpipe/`) rewritten (none when no table was), or why it
    /// could not be.
    pub described: Result<Vec<PathBuf>, String>,
    /// What was sent to the output (`Ok(None)`: the output is the local folder, or not asked).
    pub pushed: anyhow::Result<Option<Synced>>,
    /// How long ago each project's dataset's newest data were taken, after the run.
    pub staleness: Vec<(String, &'static str, chrono::Duration)>,
    /// What the warehouse load did (`None`: no `[warehouse]`), or why it failed (the next run
    /// retries what it did not load).
    pub warehouse: Option<Result<crate::app::warehouse::Loaded, String>>,
}

impl Report {
    /// The line saying that the trends were not computed again, and whether the rules ran.
    pub fn unchanged_line(&self, ctx: &Context) -> Option<String> {
        let TrendsRun::Unchanged(at) = self.trends else {
            return None;
        };
        let since = format!(
            "no window written since the last ones ({}), the same day",
            at.with_timezone(&ctx.settings.timezone)
                .format("%Y-%m-%d %H:%M %Z")
        );
        Some(match self.rules {
            RulesRun::NotRun => {
                format!("trends and rules not run again: {since}, and the rules did not change")
            }
            RulesRun::Fired(_) | RulesRun::Failed(_) => format!(
                "trends not computed again: {since}; the rules changed since they last ran: run over the same data"
            ),
            RulesRun::None => format!("trends not computed again: {since}"),
        })
    }
}

/// Plans what `intent` asks of `targets`, runs the plan, then what `opts` asks for after it.
pub async fn run(
    ctx: &Context,
    exporter: &Exporter,
    targets: &[Target],
    intent: Intent<'_>,
    opts: Options<'_>,
) -> Result<Outcome, ExportError> {
    let (mut plan, targets) = match plan(ctx, exporter, targets, intent)? {
        Planned::Run(plan, targets) => (plan, targets),
        Planned::Drained(plan) => return Ok(Outcome::Drained(plan)),
        Planned::Waits => return Ok(Outcome::Waits),
    };
    let first = if opts.measure && !matches!(intent, Intent::Next { .. }) {
        measure(ctx, exporter, &targets, intent, &mut plan).await
    } else {
        None
    };
    if opts.announce.is_some_and(|go| !go(&plan)) {
        return Ok(Outcome::Stopped(plan));
    }
    Ok(Outcome::Ran(Box::new(
        run_plan(ctx, exporter, &targets, plan, first, opts).await,
    )))
}

/// A window as the first step's failures name it.
fn window(d: &Due) -> (&'static str, &str, chrono::NaiveDate) {
    (d.dataset(), d.project.as_str(), d.day)
}

/// A first run's first step: the newest window of each daily dataset never walked (see
/// [`Plan::measuring`]) is walked, then the rest planned again from what it took, so that the
/// plan's estimate holds. Returns the first windows' summary, which the run goes on from (see
/// [`Exporter::run_on`]).
async fn measure(
    ctx: &Context,
    exporter: &Exporter,
    targets: &[Target],
    intent: Intent<'_>,
    plan: &mut Plan,
) -> Option<Summary> {
    let today = ctx.settings.today(ctx.clock.now());
    let first = plan.measuring(today)?;
    let of = plan.due.len() as u64;
    let summary = exporter.run_on(targets, &first, Step::First { of }).await;
    let mut again = match super::export::plan(ctx, exporter, targets, intent) {
        Ok(Planned::Run(again, _)) => again,
        // The state cannot be read again (the first step's failure says why): the rest of the
        // plan as it was.
        _ => {
            let mut rest = plan.clone();
            rest.due
                .retain(|d| !first.due.iter().any(|f| window(f) == window(d)));
            rest
        }
    };
    // A window that failed in the first step failed once: not tried again.
    again.due.retain(|d| {
        !summary
            .failed
            .iter()
            .any(|f| (f.dataset, f.project.as_str(), f.day) == window(d))
    });
    again.measured = (
        first
            .due
            .iter()
            .map(|d| (d.dataset(), d.project.clone()))
            .collect(),
        summary.requests,
    );
    again.expected_requests =
        summary.requests + again.due.iter().map(|d| d.expected_requests).sum::<u64>();
    // The windows the first step wrote are the run's, not windows found final or looked at
    // recently.
    for w in summary.windows.iter().chain(&summary.others) {
        let count = if w.is_final {
            &mut again.skipped_final
        } else {
            &mut again.fresh
        };
        *count = count.saturating_sub(1);
    }
    *plan = again;
    Some(summary)
}

/// Runs `plan` over `targets`, then what `opts` asks for after it.
async fn run_plan(
    ctx: &Context,
    exporter: &Exporter,
    targets: &[Target],
    plan: Plan,
    first: Option<Summary>,
    opts: Options<'_>,
) -> Report {
    warn_instants(ctx);
    let step = first.map_or(Step::Whole, |s| Step::Rest(Box::new(s)));
    let summary = exporter.run_on(targets, &plan, step).await;
    let streams = super::streams::read(ctx).await;
    let written = Written::since(ctx, &summary);
    let day_status = day_status(ctx, exporter, &written);
    let trends = match opts.trends {
        When::Never => TrendsRun::Off,
        When::Changed => trends(ctx, &written),
        When::Always => compute_trends(ctx, Because::Written),
    };
    let rules = match (&trends, opts.rules) {
        (_, After::Nothing) => RulesRun::None,
        (TrendsRun::NoData | TrendsRun::Failed(_), _) => RulesRun::NotRun,
        (TrendsRun::Computed(t, _), after) => {
            rules(ctx, after, Some(&t.tables), opts.wait, false).await
        }
        (TrendsRun::Unchanged(_), after) => rules(ctx, after, None, opts.wait, true).await,
        (TrendsRun::Off, after) => rules(ctx, after, None, opts.wait, false).await,
    };
    let described = describe(ctx, &streams, &day_status, &trends, &rules);
    let pushed = if opts.push {
        ctx.push().await
    } else {
        Ok(None)
    };
    let warehouse = crate::app::warehouse::load(ctx).await;
    let ahead = opts.ahead.then(|| ctx.plan_ahead());
    Report {
        plan,
        ahead,
        warehouse,
        staleness: staleness(ctx, exporter),
        day_status,
        summary,
        streams,
        trends,
        rules,
        described,
        pushed,
    }
}

/// Warns, in a timezone other than UTC, of each organization whose service `check --deep`
/// found does not filter by the instants asked for: its days are not that zone's.
fn warn_instants(ctx: &Context) {
    if ctx.settings.timezone == chrono_tz::UTC {
        return;
    }
    let findings = match ctx.store().instants_findings() {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("cannot read what check --deep found: {e}");
            return;
        }
    };
    for f in findings.iter().filter(|f| !f.filters_instants) {
        tracing::warn!(
            "the service of organization {} does not filter by the instants asked for (check --deep of {}, run {}): the days of timezone {} are the whole UTC days their bounds fall on, not that zone's days",
            f.org,
            f.day,
            f.at.format("%Y-%m-%d %H:%M UTC"),
            ctx.settings.timezone
        );
    }
}

/// Rewrites the lake's description when the run wrote a table (`day_status`, the trends, the
/// outcome log) or it is not there.
fn describe(
    ctx: &Context,
    streams: &Option<Result<super::streams::StreamsRun, String>>,
    day_status: &Result<Vec<PathBuf>, String>,
    trends: &TrendsRun,
    rules: &RulesRun,
) -> Result<Vec<PathBuf>, String> {
    let streamed = matches!(streams, Some(Ok(s)) if s.runs.iter().any(|r| !r.files.is_empty()));
    let wrote = streamed
        || day_status.as_ref().is_ok_and(|f| !f.is_empty())
        || matches!(trends, TrendsRun::Computed(..))
        || matches!(rules, RulesRun::Fired(f) if !f.log.is_empty());
    let missing = !ctx
        .output()
        .join(super::lake::FOLDER)
        .join("manifest.json")
        .is_file();
    if !wrote && !missing {
        return Ok(Vec::new());
    }
    super::lake::describe(ctx).map_err(|e| format!("_docpipe: {e}"))
}

/// What a run knows of the windows written, read once for the trends and `day_status`.
enum Written {
    /// This run wrote some.
    ByThisRun,
    /// It wrote none, and the state could not say when the newest was (taken as written).
    Unknown,
    /// It wrote none; the newest any process wrote was written then (`None`: none yet).
    Newest(Option<DateTime<Utc>>),
}

impl Written {
    fn since(ctx: &Context, summary: &Summary) -> Self {
        if summary.wrote() {
            return Self::ByThisRun;
        }
        match ctx.store().newest_written() {
            Ok(newest) => Self::Newest(newest),
            Err(_) => Self::Unknown,
        }
    }

    /// Whether a window was written after `at`.
    fn after(&self, at: DateTime<Utc>) -> bool {
        match self {
            Self::ByThisRun | Self::Unknown => true,
            Self::Newest(newest) => newest.is_some_and(|w| w > at),
        }
    }
}

/// The trends, computed and written unless nothing changed since the last ones the same day.
fn trends(ctx: &Context, written: &Written) -> TrendsRun {
    match changed(ctx, TRENDS_AT, "trends", written) {
        Ok(because) => compute_trends(ctx, because),
        Err(at) => TrendsRun::Unchanged(at),
    }
}

/// Why what is made from the windows (its time recorded under `key` when made, into the
/// output's `dir`) is to be made again now; `Err(at)`: nothing changed since it was made at
/// `at`, the same day.
fn changed(
    ctx: &Context,
    key: &'static str,
    dir: &str,
    written: &Written,
) -> Result<Because, DateTime<Utc>> {
    let Ok(Some(at)) = ctx.store().setting_at(key) else {
        return Ok(Because::First);
    };
    if ctx.settings.today(at) != ctx.settings.today(ctx.clock.now()) {
        Ok(Because::DayTurned)
    } else if written.after(at) {
        Ok(Because::Written)
    } else if !ctx.output().join(dir).is_dir() {
        Ok(Because::Missing)
    } else {
        Err(at)
    }
}

/// The `settings` keys of when the trends and the lake's `day_status` were last made.
const TRENDS_AT: &str = "trends_at";
const DAY_STATUS_AT: &str = "day_status_at";

/// The lake's `day_status` of every project, rewritten unless nothing changed since it was.
fn day_status(
    ctx: &Context,
    exporter: &Exporter,
    written: &Written,
) -> Result<Vec<PathBuf>, String> {
    if changed(ctx, DAY_STATUS_AT, crate::export::DAY_STATUS, written).is_err() {
        return Ok(Vec::new());
    }
    let files = exporter
        .write_day_status(&ctx.settings.project_ids())
        .map_err(|e| format!("day_status: {e}"))?;
    if let Err(e) = ctx.store().set_setting_at(DAY_STATUS_AT, ctx.clock.now()) {
        tracing::warn!("cannot record when day_status was written: {e}");
    }
    Ok(files)
}

/// Computes and writes the trends, and records when.
fn compute_trends(ctx: &Context, because: Because) -> TrendsRun {
    match compute(ctx.output(), &Selection::default()) {
        Ok(mut tables) => match write_tables(ctx.output(), &mut tables) {
            Ok(files) => {
                if let Err(e) = ctx.store().set_setting_at(TRENDS_AT, ctx.clock.now()) {
                    tracing::warn!("cannot record when the trends were computed: {e}");
                }
                TrendsRun::Computed(Box::new(Trends { tables, files }), because)
            }
            Err(e) => TrendsRun::Failed(e),
        },
        Err(TrendsError::NoData(_)) => TrendsRun::NoData,
        Err(e) => TrendsRun::Failed(e),
    }
}

/// Fires the rules `after` names over `tables` (computed now, not written, when `None`);
/// `if_changed`: only when they are not the rules that ran last (a rule enabled or edited
/// since), the data being the same.
async fn rules(
    ctx: &Context,
    after: After<'_>,
    tables: Option<&Tables>,
    wait: Wait,
    if_changed: bool,
) -> RulesRun {
    let fired = async {
        let owned_loaded;
        let owned_engine;
        let (loaded, engine) = match after {
            After::Nothing => return Ok(RulesRun::None),
            After::Unscheduled => {
                let Some(l) = unscheduled_rules(ctx)? else {
                    return Ok(RulesRun::None);
                };
                owned_loaded = l;
                owned_engine = ctx.engine()?;
                (&owned_loaded, &owned_engine)
            }
            After::These(l, e) => (l, e),
        };
        let seen = crate::rules::prompt_hash(&format!("{:?}{:?}", loaded.rules, loaded.problems));
        if if_changed && ctx.store().setting(RULES_RAN)?.as_deref() == Some(seen.as_str()) {
            return Ok(RulesRun::NotRun);
        }
        let fired = fire(ctx, loaded, engine, tables, wait).await?;
        if let Err(e) = ctx.store().set_setting(RULES_RAN, &seen) {
            tracing::warn!("cannot record which rules ran: {e}");
        }
        Ok(RulesRun::Fired(fired))
    };
    fired.await.unwrap_or_else(RulesRun::Failed)
}

/// The `settings` key of the fingerprint of the rules that ran after an export last.
const RULES_RAN: &str = "rules_ran";

/// Fires `loaded` with `engine` over `tables` (the output's trend tables computed now, not
/// written, when `None`; empty tables when nothing was exported): a rule file that does not
/// load stops everything before anything is sent, a rule that fails on the data fails alone.
pub async fn fire(
    ctx: &Context,
    loaded: &Loaded,
    engine: &Engine,
    tables: Option<&Tables>,
    wait: Wait,
) -> anyhow::Result<Fired> {
    let computed;
    let tables = match tables {
        Some(t) => t,
        None => {
            computed = super::rules::tables(ctx.output())?.0;
            &computed
        }
    };
    let evals = evaluate_each(loaded, tables, Some(engine.memory()))?;
    Ok(fire_all(engine, &loaded.rules, evals, wait).await?)
}

/// The rules without a schedule of `[rules] dir`, when `[rules] after_export` is on and the
/// folder exists (`None` otherwise, or when it has no such rule).
fn unscheduled_rules(ctx: &Context) -> anyhow::Result<Option<Loaded>> {
    let s = &ctx.settings;
    if !s.rules_after_export || !s.rules_dir.is_dir() {
        return Ok(None);
    }
    let mut loaded = super::rules::load(&s.rules_dir, s, &[])?;
    loaded.rules.retain(|r| r.schedule.is_none());
    if loaded.rules.is_empty() && loaded.problems.is_empty() {
        return Ok(None);
    }
    Ok(Some(loaded))
}

/// How long ago each configured project's dataset's newest data were taken.
fn staleness(ctx: &Context, exporter: &Exporter) -> Vec<(String, &'static str, chrono::Duration)> {
    let now = ctx.clock.now();
    let mut out = Vec::new();
    for p in &ctx.settings.projects {
        for name in &p.datasets {
            if let Ok(Some(stale)) = exporter.staleness(name, &p.id, now) {
                out.push((p.id.clone(), *name, stale));
            }
        }
    }
    out
}
