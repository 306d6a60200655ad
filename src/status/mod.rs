//! What docpipe knows of its pipeline, as one model: `docpipe status` prints it as text or as
//! JSON (`--json`, the schema in `docs/status.schema.json`), and the daemon serves it as an HTML
//! page on `[daemon] listen`. [`collect`] reads the state database, the rule files and the
//! trends' tables (sends nothing); the renderers only format.

mod eta;
pub use eta::{Eta, EtaPart};
pub mod health;
pub mod html;
pub mod text;

use crate::app::Context;
use crate::app::plan_view::{Ahead, PlanView};
use crate::clock::SharedClock;
use crate::config::{Project, Settings};
use crate::dataset::Windowing;
use crate::store::activity::{RuleRun, WindowFailure};
use crate::store::state_path;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::Serialize;
use std::collections::BTreeMap;

/// The schema's name and version, the document's `schema` field.
pub const SCHEMA: &str = "docpipe-status/1";

/// Everything the status shows, at `generated_at`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// docpipe's version.
    pub version: &'static str,
    /// When the facts were read.
    pub generated_at: DateTime<Utc>,
    /// Whether anything was exported yet (without a state database, every list is empty).
    pub exported: bool,
    /// The state database: its file, or the shared database's name.
    pub state: String,
    /// Whether several daemons share the state (PostgreSQL).
    pub shared: bool,
    /// Per project, in the config's order.
    pub projects: Vec<ProjectStatus>,
    /// What `docpipe export` would do now.
    pub export_now: ExportNow,
    /// Per organization, in the config's order.
    pub organizations: Vec<OrgStatus>,
    /// The backfills queued for the daemons, oldest first.
    pub backfills: Vec<Backfill>,
    /// The daemons that wrote a heartbeat and did not leave.
    pub daemons: Vec<DaemonStatus>,
    /// Per project with follow-ups or job creations in the last hour.
    pub agent_budgets: Vec<AgentBudget>,
    /// Rules, firings and jobs.
    pub rules: Rules,
    /// The trends' charts and the docs-gaps tables' top rows, per project.
    pub trends: Vec<ProjectTrends>,
    /// The warehouse's last load (`None`: no `[warehouse]`).
    pub warehouse: Option<WarehouseStatus>,
    /// Each `[[streams]]` entry and what was read of it.
    pub streams: Vec<StreamStatus>,
}

/// An analytics event stream and what was read of it.
#[derive(Debug, Clone, Serialize)]
pub struct StreamStatus {
    /// Its URL or folder.
    pub name: String,
    /// What was read of it in all, as the state keeps it.
    #[serde(flatten)]
    pub counts: crate::store::streams::StreamCounts,
    /// Per project it maps, the stream's agent views against the API's `ai`.
    pub coverage: Vec<StreamCoverage>,
}

/// How much of the API's `ai` views a project's stream holds.
#[derive(Debug, Clone, Serialize)]
pub struct StreamCoverage {
    /// The project.
    pub project: String,
    /// Days with both counts.
    pub days: u64,
    /// The stream's agent page views over them.
    pub stream_ai: i64,
    /// The API's `ai` over them.
    pub api_ai: i64,
    /// Their ratio (`None`: no API views).
    pub ai_coverage: Option<f64>,
}

/// The PostgreSQL warehouse the lake is loaded into.
#[derive(Debug, Clone, Serialize)]
pub struct WarehouseStatus {
    /// Its schema.
    pub schema: String,
    /// The variable holding its URL.
    pub url_env: String,
    /// The last load (`None`: none yet).
    pub last_load: Option<crate::app::warehouse::LastLoad>,
}

/// A project.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectStatus {
    /// Its id.
    pub id: String,
    /// Its organization.
    pub organization: String,
    /// The first day it exports.
    pub first_day: NaiveDate,
    /// Set when the service said it does not know the project: nothing else is exported.
    pub unknown: Option<Unknown>,
    /// Per dataset it exports, in the config's order.
    pub datasets: Vec<DatasetStatus>,
}

/// The service's 404 for a project.
#[derive(Debug, Clone, Serialize)]
pub struct Unknown {
    /// The service that said so.
    pub base_url: String,
    /// Its words.
    pub message: String,
    /// When.
    pub at: DateTime<Utc>,
}

/// Days from `from` to `to`, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DayRange {
    /// First day.
    pub from: NaiveDate,
    /// Last day.
    pub to: NaiveDate,
}

impl DayRange {
    /// How many days.
    pub fn days(&self) -> i64 {
        (self.to - self.from).num_days() + 1
    }
}

/// How a dataset's staleness compares with its `[freshness]` target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Freshness {
    /// Within the target.
    Fresh,
    /// Past it, within twice it.
    Late,
    /// Past twice the target.
    Stale,
    /// Never fetched (or fetched on demand).
    Unknown,
}

impl Freshness {
    /// How `staleness` (`None`: never fetched) compares with `target`.
    pub fn of(staleness: Option<chrono::Duration>, target: chrono::Duration) -> Self {
        match staleness {
            None => Freshness::Unknown,
            Some(s) if s <= target => Freshness::Fresh,
            Some(s) if s <= target * 2 => Freshness::Late,
            Some(_) => Freshness::Stale,
        }
    }
}

/// A dataset of a project.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetStatus {
    /// Its name.
    pub name: &'static str,
    /// `daily` (a window per day), `span` (walked by ranges) or `on_demand` (threads).
    pub windowing: &'static str,
    /// Days exported (for a span: the days its walks covered).
    pub days_exported: usize,
    /// The first day exported.
    pub first: Option<NaiveDate>,
    /// The last day exported.
    pub last: Option<NaiveDate>,
    /// Days final (never fetched again).
    pub days_final: usize,
    /// The last final day.
    pub last_final: Option<NaiveDate>,
    /// Days still provisional, in order.
    pub provisional: Vec<NaiveDate>,
    /// Runs of days from the project's first day to the last exported that nothing covers.
    pub missing: Vec<DayRange>,
    /// Days with a persistent mismatch of their totals.
    pub mismatches: usize,
    /// Days `export` would fetch now (a daily dataset).
    pub due_days: usize,
    /// Ranges `export` would walk now (a span).
    pub due_walks: Vec<DayRange>,
    /// A span's last walk.
    pub walked_at: Option<DateTime<Utc>>,
    /// The last day a span was fetched through.
    pub fetched_through: Option<NaiveDate>,
    /// Threads fetched (the threads dataset).
    pub threads_fetched: Option<usize>,
    /// How long ago the newest data were taken.
    pub staleness_secs: Option<i64>,
    /// The `[freshness]` target of today's data.
    pub target_secs: i64,
    /// Staleness against the target.
    pub freshness: Freshness,
    /// When a window was last written.
    pub last_success: Option<DateTime<Utc>>,
    /// Windows whose last try failed, with the reason.
    pub failures: Vec<Failure>,
}

/// A window whose last try failed, or that is stuck.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The window (`2026-03-10`, `2026-03-01..2026-03-14`).
    pub window: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Why, in one line.
    pub reason: String,
    /// `failed` (the next run tries it again), `stuck` (its walk reached the bound of pages:
    /// tried again at `retry_at`), `long` (walking far beyond its estimate, in turns after the
    /// other windows).
    pub kind: crate::store::activity::Trouble,
    /// Its walks that reached the bound of pages, in a row.
    pub stuck_tries: u32,
    /// When a stuck window is tried again.
    pub retry_at: Option<DateTime<Utc>>,
}

impl From<&WindowFailure> for Failure {
    fn from(f: &WindowFailure) -> Self {
        Self {
            window: f.window.clone(),
            at: f.at,
            reason: f.reason.clone(),
            kind: f.kind,
            stuck_tries: f.stuck_tries,
            retry_at: f.retry_at,
        }
    }
}

impl Failure {
    /// What went wrong, as `status` and the page say it after the window.
    pub fn describe(&self) -> String {
        use crate::store::activity::Trouble;
        let at = self.at.format("%Y-%m-%d %H:%M UTC");
        match self.kind {
            Trouble::Failed => format!("failed {at}: {}", self.reason),
            Trouble::Long => format!("walking in turns since {at}: {}", self.reason),
            Trouble::Stuck => format!(
                "stuck since {at}: {}; {} walks in a row reached the bound, tried again after {}",
                self.reason,
                self.stuck_tries,
                self.retry_at.map_or("the next run".to_string(), |r| r
                    .format("%Y-%m-%d %H:%M UTC")
                    .to_string())
            ),
        }
    }
}

/// What `docpipe export` would do now.
#[derive(Debug, Clone, Serialize)]
pub struct ExportNow {
    /// Windows due.
    pub windows: usize,
    /// Requests they are expected to take.
    pub requests: u64,
    /// Seconds until they are all in at the budget (0: within this hour's).
    pub eta_secs: u64,
    /// Windows looked at recently enough that wait for their turn.
    pub waiting_turn: u64,
}

/// An organization's budget and forecast.
#[derive(Debug, Clone, Serialize)]
pub struct OrgStatus {
    /// Its id.
    pub id: String,
    /// When what is due and queued is in: the one ETA (see `eta.rs`).
    pub eta: Eta,
    /// Analytics requests an hour docpipe allows itself.
    pub limit: u32,
    /// Used in the last hour (by every process sharing the budget).
    pub used_last_hour: u32,
    /// Room left now.
    pub room_now: u32,
    /// When the next request can go, while the hour's budget is used (`None`: there is room).
    pub next_request_at: Option<DateTime<Utc>>,
    /// The last 24 hours, oldest first: requests docpipe sent each hour.
    pub hours: Vec<Hour>,
    /// The planner's next 24 hours (an organization with projects).
    pub forecast: Option<Forecast>,
    /// What the last `check --deep` learned of the service (never run: `None`).
    pub instants: Option<Instants>,
    /// Its admin key as docpipe saw the service answer it (never seen working: `None`).
    pub key: Option<KeyStatus>,
}

impl OrgStatus {
    /// Its agent jobs' requests in the last 24 hours (outside the analytics budget).
    pub fn jobs_last_24h(&self) -> u64 {
        self.hours.iter().map(|h| h.jobs).sum()
    }
}

/// An organization's admin key: since when it works, whether the service refuses it now, and
/// what a person has to do.
#[derive(Debug, Clone, Serialize)]
pub struct KeyStatus {
    /// Its fingerprint (never the key).
    pub fingerprint: String,
    /// When it first worked.
    pub first_used: DateTime<Utc>,
    /// Days since.
    pub age_days: i64,
    /// `fine`, `old` (used for 80 days or more) or `refused` (after it worked).
    pub health: crate::store::keys::KeyHealth,
    /// Since when the service refuses it.
    pub refused_since: Option<DateTime<Utc>>,
    /// What a person has to do, when anything.
    pub warning: Option<String>,
}

/// Whether the service filters by the instants `dateFrom` and `dateTo` name, as the last
/// `check --deep` found.
#[derive(Debug, Clone, Serialize)]
pub struct Instants {
    /// Whether a day's halves added up to the day.
    pub filters_instants: bool,
    /// The day compared.
    pub day: chrono::NaiveDate,
    /// What was compared, with the counts.
    pub detail: String,
    /// When.
    pub checked_at: DateTime<Utc>,
}

/// Requests sent in one hour.
#[derive(Debug, Clone, Serialize)]
pub struct Hour {
    /// The hour's start.
    pub start: DateTime<Utc>,
    /// Requests.
    pub total: u64,
    /// By dataset.
    pub by_dataset: BTreeMap<String, u64>,
    /// By purpose: `walk`, `probe`, `backfill`, `check`, `thread`.
    pub by_purpose: BTreeMap<String, u64>,
    /// Agent jobs' requests (created, read, followed up): outside the analytics budget, so in
    /// none of the above.
    pub jobs: u64,
}

/// The planner's forecast for an organization.
#[derive(Debug, Clone, Serialize)]
pub struct Forecast {
    /// The paragraph `docpipe status` and the daemon print.
    pub paragraph: String,
    /// Whether the config asks for more than the budget.
    pub short: bool,
    /// Requests an hour by dataset, simulated.
    pub by_dataset: Vec<Rate>,
    /// Per project and dataset: the most today's data will be stale, and the longest a
    /// provisional day waits between two looks.
    pub staleness: Vec<Expected>,
}

/// Requests an hour of a dataset.
#[derive(Debug, Clone, Serialize)]
pub struct Rate {
    /// Dataset.
    pub dataset: &'static str,
    /// Requests an hour.
    pub per_hour: f64,
}

/// The forecast's staleness of a project's dataset.
#[derive(Debug, Clone, Serialize)]
pub struct Expected {
    /// Project.
    pub project: String,
    /// Dataset.
    pub dataset: &'static str,
    /// The most today's data will be stale, seconds.
    pub today_secs: i64,
    /// The longest a provisional day waits between two looks, seconds.
    pub days_every_secs: i64,
}

/// A queued backfill.
#[derive(Debug, Clone, Serialize)]
pub struct Backfill {
    /// Its id.
    pub id: i64,
    /// First day.
    pub from: NaiveDate,
    /// Last day.
    pub to: NaiveDate,
    /// Its projects (empty: every project).
    pub projects: Vec<String>,
    /// The daemon working on it.
    pub holder: Option<String>,
    /// Windows not final yet.
    pub windows: usize,
    /// Requests they are expected to take.
    pub requests: u64,
    /// Seconds until done at the budget (0: within this hour's).
    pub eta_secs: u64,
}

/// A daemon.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonStatus {
    /// Its name (`host:pid`).
    pub name: String,
    /// Whether its heartbeat is recent.
    pub alive: bool,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub seen_at: DateTime<Utc>,
    /// What it holds: `backfill N`, `window K`.
    pub holds: Vec<String>,
    /// Windows it finished (shared state only).
    pub windows_done: Option<i64>,
}

/// A project's follow-ups and job creations in the last hour.
#[derive(Debug, Clone, Serialize)]
pub struct AgentBudget {
    /// Project.
    pub project: String,
    /// Used.
    pub used: u32,
    /// docpipe's limit an hour.
    pub limit: u32,
}

/// The rules.
#[derive(Debug, Clone, Serialize)]
pub struct Rules {
    /// Firings in the ledger.
    pub firings_total: usize,
    /// The last firings, oldest first.
    pub firings: Vec<FiringStatus>,
    /// Each rule's last run, by rule.
    pub runs: Vec<RuleRun>,
    /// Rule files that do not load, one line each.
    pub problems: Vec<String>,
    /// Each rule's latest measured firing: what its job changed.
    pub impact: Vec<crate::rules::impact::FiringImpact>,
    /// The latest preview of each rule that is not enabled: what it would send.
    pub previews: Vec<PreviewStatus>,
    /// The firings waiting for a person's review (`docpipe rules pending`), oldest first.
    pub pending: Vec<PendingStatus>,
    /// A line per rule whose review lets readers' words reach the agent without a person.
    pub warnings: Vec<String>,
}

/// What a rule that is not enabled would send.
#[derive(Debug, Clone, Serialize)]
pub struct PreviewStatus {
    /// Rule.
    pub rule: String,
    /// Project.
    pub project: String,
    /// When it was evaluated.
    pub at: DateTime<Utc>,
    /// Rows it would send.
    pub rows: i64,
    /// Why nothing was sent.
    pub reason: String,
    /// The flagged readers' values of its rows.
    pub flags: Vec<crate::rules::RowFlag>,
    /// The prompt it would send.
    pub prompt: String,
}

/// A firing waiting for review.
#[derive(Debug, Clone, Serialize)]
pub struct PendingStatus {
    /// The ledger's id (`docpipe rules approve ID`).
    pub id: i64,
    /// Rule.
    pub rule: String,
    /// Project.
    pub project: String,
    /// When it was held.
    pub held_at: DateTime<Utc>,
    /// When it expires unsent.
    pub expires_at: DateTime<Utc>,
    /// Rows it sends.
    pub rows: i64,
    /// Why it waits.
    pub why: String,
    /// `follow_up`, `create` (a trigger is never held).
    pub action: &'static str,
    /// The job it follows up (none: a creation).
    pub job: Option<String>,
    /// The flagged readers' values of its rows.
    pub flags: Vec<crate::rules::RowFlag>,
    /// The flagged rows left out (`flagged = "drop"`).
    pub dropped: Vec<crate::rules::RowFlag>,
    /// The prompt approval sends.
    pub prompt: String,
    /// Its SHA-256.
    pub prompt_sha256: String,
}

impl PendingStatus {
    /// A held firing as the status and `rules pending --json` show it; it expires `expires`
    /// after it was held.
    pub fn of(f: &crate::store::ledger::Firing, expires: std::time::Duration) -> Self {
        let held_at = f.trail.held_at.unwrap_or(f.fired_at);
        Self {
            id: f.id,
            rule: f.rule.clone(),
            project: f.project.clone(),
            held_at,
            expires_at: held_at + Duration::from_std(expires).unwrap_or(Duration::days(7)),
            rows: f.rows_matched,
            why: f.trail.hold.clone().unwrap_or_default(),
            action: f.kind.as_str(),
            job: f.job.clone(),
            flags: crate::rules::parse_flags(f.trail.flags.as_deref()),
            dropped: crate::rules::parse_flags(f.trail.dropped.as_deref()),
            prompt: f.prompt.clone(),
            prompt_sha256: f.prompt_hash.clone(),
        }
    }
}

/// A firing and its job.
#[derive(Debug, Clone, Serialize)]
pub struct FiringStatus {
    /// The ledger's id.
    pub id: i64,
    /// When it fired.
    pub fired_at: DateTime<Utc>,
    /// Rule.
    pub rule: String,
    /// Project.
    pub project: String,
    /// `follow_up`, `create` or `trigger`.
    pub kind: &'static str,
    /// The job (a trigger's: its run's `jobId`).
    pub job: Option<String>,
    /// The automation a trigger started.
    pub automation: Option<String>,
    /// The run it started (the service's `instanceId`).
    pub run: Option<String>,
    /// Rows the query matched.
    pub rows: i64,
    /// `sent`, `sending`, `unknown`, `refused`, `not_sent`.
    pub sent: &'static str,
    /// The job's last status seen.
    pub job_status: Option<String>,
    /// Its pull request.
    pub pr_link: Option<String>,
    /// Seconds from sending until the job ended.
    pub seconds_to_done: Option<f64>,
    /// What went wrong.
    pub error: Option<String>,
    /// The end of the rule's cooldown, while it runs.
    pub cooling_down_until: Option<DateTime<Utc>>,
    /// The line `docpipe status` prints.
    pub line: String,
}

/// A project's charts and gap rows.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectTrends {
    /// Project.
    pub project: String,
    /// The charts' SVG files, relative to the output folder.
    pub charts: Vec<String>,
    /// The docs-gaps tables' top rows.
    pub gaps: Vec<crate::trends::gaps::TopRows>,
}

/// The seconds until the ETA's part `what` is in, the latest of the organizations': the one
/// model of [`eta`], for "export now" and each backfill alike.
fn part_secs(organizations: &[OrgStatus], what: &str) -> u64 {
    organizations
        .iter()
        .flat_map(|o| &o.eta.parts)
        .filter(|p| p.what == what)
        .map(|p| p.hours * 3600)
        .max()
        .unwrap_or(0)
}

/// Rows of the gap tables shown per project.
pub const TOP_ROWS: usize = 5;

/// Reads the status at the clock's now, opening the output folder beside whatever exports into
/// it (`docpipe status`; the daemon's page before its own context is open); `firings`: how many
/// of the last firings to list.
pub async fn read(
    settings: &Settings,
    clock: SharedClock,
    firings: usize,
) -> anyhow::Result<Status> {
    let state_file = state_path(&settings.output_dir);
    if !state_file.exists() && settings.state_url.is_none() {
        return Ok(Status::nothing_yet(
            clock.now(),
            state_file.display().to_string(),
        ));
    }
    collect(&Context::shared(settings.clone(), clock).await?, firings)
}

/// The status of `ctx`'s output and state at its clock's now (the daemon's page reads it with
/// the daemon's own context, and what its last run planned while that is fresh:
/// [`Context::ahead`]); `firings`: how many of the last firings to list.
pub fn collect(ctx: &Context, firings: usize) -> anyhow::Result<Status> {
    let settings = &ctx.settings;
    let now = ctx.clock.now();
    let state_file = state_path(&settings.output_dir);
    let mut status = Status::nothing_yet(now, state_file.display().to_string());
    let ahead = ctx.ahead()?;
    let view = &ahead.view;
    status.exported = true;
    status.state = ctx.store().sql().name().to_string();
    status.shared = ctx.store().is_shared();
    let failures = ctx.store().history().failures()?;
    let unknown = ctx.store().unknown_projects()?;
    let exporter = ctx.exporter();
    for p in &settings.projects {
        let unknown = unknown.iter().find(|u| u.project == p.id).map(|u| Unknown {
            base_url: u.base_url.clone(),
            message: crate::text::one_line(&u.message).into_owned(),
            at: u.at,
        });
        let datasets = if unknown.is_some() {
            Vec::new()
        } else {
            let mut out = Vec::new();
            for name in &p.datasets {
                out.push(dataset(ctx, view, p, name, &exporter, &failures, now)?);
            }
            out
        };
        status.projects.push(ProjectStatus {
            id: p.id.clone(),
            organization: p.organization.clone(),
            first_day: p.first_day(settings.today(now)),
            unknown,
            datasets,
        });
    }
    status.organizations = organizations(ctx, &ahead, now)?;
    status.export_now = ExportNow {
        windows: view.due.due.len(),
        requests: view.due.expected_requests,
        eta_secs: part_secs(&status.organizations, "export now"),
        waiting_turn: view.due.fresh,
    };
    status.warehouse = settings.warehouse.as_ref().map(|w| WarehouseStatus {
        schema: w.schema.clone(),
        url_env: w.url_env.clone(),
        last_load: crate::app::warehouse::last_load(ctx),
    });
    status.streams = streams(ctx);
    status.backfills = view
        .queued
        .iter()
        .map(|(q, plan)| Backfill {
            id: q.id,
            from: q.from,
            to: q.to,
            projects: q.projects.clone(),
            holder: q.holder.clone(),
            windows: plan.due.len(),
            requests: plan.expected_requests,
            eta_secs: part_secs(&status.organizations, &format!("backfill {}", q.id)),
        })
        .collect();
    status.daemons = daemons(ctx, view, now)?;
    let limits = settings.agent_limits();
    for p in &settings.projects {
        let used = ctx.budget().used(&format!("agent:{}", p.id), now);
        if used > 0 {
            status.agent_budgets.push(AgentBudget {
                project: p.id.clone(),
                used,
                limit: limits.get(&p.id).copied().unwrap_or(0),
            });
        }
    }
    status.rules = rules(ctx, firings, now)?;
    status.trends = trends(settings);
    Ok(status)
}

/// Each configured stream's state and its projects' coverage (a stream whose state cannot be
/// read shows none read).
fn streams(ctx: &Context) -> Vec<StreamStatus> {
    ctx.settings
        .streams
        .iter()
        .map(|st| {
            let name = st.location.to_string();
            let state = ctx.store().stream_state(&name).unwrap_or_default();
            let mut projects: Vec<&String> = st.subdomains.values().collect();
            projects.sort();
            projects.dedup();
            let coverage = projects
                .into_iter()
                .filter_map(|p| {
                    let (days, stream_ai, api_ai) =
                        crate::stream::coverage::summed(ctx.output(), p).ok()??;
                    Some(StreamCoverage {
                        project: p.clone(),
                        days,
                        stream_ai,
                        api_ai,
                        ai_coverage: (api_ai > 0).then(|| stream_ai as f64 / api_ai as f64),
                    })
                })
                .collect();
            StreamStatus {
                name,
                counts: state.counts,
                coverage,
            }
        })
        .collect()
}

impl Status {
    /// The status of an output nothing was exported to yet (its state at `state`).
    pub fn nothing_yet(now: DateTime<Utc>, state: String) -> Self {
        Status {
            schema: SCHEMA,
            version: env!("CARGO_PKG_VERSION"),
            generated_at: now,
            exported: false,
            state,
            shared: false,
            projects: Vec::new(),
            export_now: ExportNow {
                windows: 0,
                requests: 0,
                eta_secs: 0,
                waiting_turn: 0,
            },
            organizations: Vec::new(),
            backfills: Vec::new(),
            daemons: Vec::new(),
            warehouse: None,
            streams: Vec::new(),
            agent_budgets: Vec::new(),
            rules: Rules {
                firings_total: 0,
                firings: Vec::new(),
                runs: Vec::new(),
                problems: Vec::new(),
                impact: Vec::new(),
                previews: Vec::new(),
                pending: Vec::new(),
                warnings: Vec::new(),
            },
            trends: Vec::new(),
        }
    }
}

/// The runs of days from `first` to the last of `known` (sorted) that `known` lacks.
pub fn holes(known: &[NaiveDate], first: NaiveDate) -> Vec<DayRange> {
    let Some(&last) = known.last() else {
        return Vec::new();
    };
    crate::export::holes(|d| known.binary_search(&d).is_ok(), first, last)
        .into_iter()
        .map(|r| DayRange {
            from: r.start,
            to: r.end.pred_opt().unwrap_or(r.start),
        })
        .collect()
}

/// A dataset's days, staleness and failures.
fn dataset(
    ctx: &Context,
    view: &PlanView,
    p: &Project,
    name: &'static str,
    exporter: &crate::export::Exporter,
    failures: &[WindowFailure],
    now: DateTime<Utc>,
) -> anyhow::Result<DatasetStatus> {
    let state = ctx.store();
    let windowing = crate::dataset::windowing_of(name);
    let written = state.windows_known(&view.due.known, name, &p.id)?;
    let mut known: Vec<NaiveDate> = written.keys().copied().collect();
    known.sort();
    let first_day = p.first_day(ctx.settings.today(now));
    let missing = holes(&known, first_day);
    let due: Vec<_> = view
        .due
        .due
        .iter()
        .filter(|d| d.dataset() == name && d.project == p.id)
        .collect();
    let provisional: Vec<NaiveDate> = known
        .iter()
        .filter(|d| !written[*d].is_final)
        .copied()
        .collect();
    let (walked_at, fetched_through) = match windowing {
        Windowing::Span { .. } => {
            let span = state.span_state(name, &p.id)?;
            (
                span.look.walked_at,
                span.through.map(|t| t.pred_opt().unwrap_or(t)),
            )
        }
        _ => (None, None),
    };
    let target = ctx.settings.freshness.policy(name).today;
    let staleness = exporter.staleness(name, &p.id, now)?;
    let freshness = Freshness::of(staleness, target);
    Ok(DatasetStatus {
        name,
        windowing: match windowing {
            Windowing::Daily => "daily",
            Windowing::Span { .. } => "span",
            Windowing::OnDemand => "on_demand",
        },
        days_exported: known.len(),
        first: known.first().copied(),
        last: known.last().copied(),
        days_final: known.len() - provisional.len(),
        last_final: known.iter().rev().find(|d| written[*d].is_final).copied(),
        provisional,
        missing,
        mismatches: written.values().filter(|w| w.mismatch.is_some()).count(),
        due_days: if matches!(windowing, Windowing::Span { .. }) {
            0
        } else {
            due.len()
        },
        due_walks: if matches!(windowing, Windowing::Span { .. }) {
            due.iter()
                .map(|d| DayRange {
                    from: d.day,
                    to: d.to.pred_opt().unwrap_or(d.to),
                })
                .collect()
        } else {
            Vec::new()
        },
        walked_at,
        fetched_through,
        threads_fetched: if windowing == Windowing::OnDemand {
            Some(state.threads_fetched(&p.id)?.len())
        } else {
            None
        },
        staleness_secs: staleness.map(|s| s.num_seconds()),
        target_secs: target.num_seconds(),
        freshness,
        last_success: state.last_written(name, &p.id)?,
        failures: failures
            .iter()
            .filter(|f| f.dataset == name && f.project == p.id)
            .map(Failure::from)
            .collect(),
    })
}

/// Each organization's budget: the last hour, the last 24 hours' spend, the forecast.
/// The first of the 24 hours the page charts, the one that holds `now` last.
fn first_hour(now: DateTime<Utc>) -> DateTime<Utc> {
    let this_hour =
        DateTime::from_timestamp(now.timestamp().div_euclid(3600) * 3600, 0).unwrap_or(now);
    this_hour - Duration::hours(23)
}

/// An organization's 24 hours from `since`, from the activity tables' spend.
fn hours_of(spent: &[crate::store::activity::Spent], since: DateTime<Utc>, org: &str) -> Vec<Hour> {
    (0..24)
        .map(|i| {
            let start = since + Duration::hours(i);
            let mut h = Hour {
                start,
                total: 0,
                by_dataset: BTreeMap::new(),
                by_purpose: BTreeMap::new(),
                jobs: 0,
            };
            for s in spent.iter().filter(|s| s.hour == start && s.org == org) {
                if s.purpose == crate::events::JOB {
                    h.jobs += s.requests;
                    continue;
                }
                h.total += s.requests;
                *h.by_dataset.entry(s.dataset.clone()).or_default() += s.requests;
                *h.by_purpose.entry(s.purpose.clone()).or_default() += s.requests;
            }
            h
        })
        .collect()
}

/// The analytics requests of every process sharing the state, as Prometheus series (what
/// `/metrics` adds to the daemon's own counters): each organization's last hour as its budget
/// counts it, and its last 24 hours by dataset as the page charts them: the same numbers as
/// the page's and `status --json`'s.
pub fn request_series(ctx: &Context) -> anyhow::Result<String> {
    use std::fmt::Write;
    let now = ctx.clock.now();
    let since = first_hour(now);
    let spent = ctx.store().history().spent_since(since)?;
    let label = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let mut used = String::from(
        "# HELP docpipe_budget_used_last_hour Analytics requests sent in the last hour by every process sharing the budget.\n# TYPE docpipe_budget_used_last_hour gauge\n",
    );
    let mut day = String::from(
        "# HELP docpipe_requests_spent_24h Analytics requests sent in the last 24 hours (the status page's chart), by dataset.\n# TYPE docpipe_requests_spent_24h gauge\n",
    );
    for o in &ctx.settings.organizations {
        let org = label(&o.id);
        let n = ctx.budget().used(&crate::api::analytics_scope(&o.id), now);
        let _ = writeln!(
            used,
            "docpipe_budget_used_last_hour{{organization=\"{org}\"}} {n}"
        );
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for h in hours_of(&spent, since, &o.id) {
            for (d, n) in h.by_dataset {
                *by.entry(d).or_default() += n;
            }
        }
        for (d, n) in by {
            let d = label(&d);
            let _ = writeln!(
                day,
                "docpipe_requests_spent_24h{{organization=\"{org}\",dataset=\"{d}\"}} {n}"
            );
        }
    }
    Ok(used + &day)
}

fn organizations(
    ctx: &Context,
    ahead: &Ahead,
    now: DateTime<Utc>,
) -> anyhow::Result<Vec<OrgStatus>> {
    let (view, streams, forecast) = (&ahead.view, &ahead.streams, &ahead.forecast);
    let since = first_hour(now);
    let spent = ctx.store().history().spent_since(since)?;
    let findings = ctx.store().instants_findings()?;
    let keys = ctx.store().key_records()?;
    let waiting = eta::Waiting::of(view);
    let mut out = Vec::new();
    for o in &ctx.settings.organizations {
        let room = crate::planner::Room::analytics(&o.limits, ctx.budget().as_ref(), &o.id, now);
        let (limit, used) = (room.limit as u32, room.used as u32);
        let scope = crate::api::analytics_scope(&o.id);
        let hours = hours_of(&spent, since, &o.id);
        let forecast = forecast.iter().find(|f| f.org == o.id).map(|f| Forecast {
            paragraph: f.paragraph(streams),
            short: f.short(),
            by_dataset: f
                .by_dataset
                .iter()
                .map(|(d, n)| Rate {
                    dataset: d,
                    per_hour: *n,
                })
                .collect(),
            staleness: f
                .staleness
                .iter()
                .map(|(p, d, today, every)| Expected {
                    project: p.clone(),
                    dataset: d,
                    today_secs: today.num_seconds(),
                    days_every_secs: every.num_seconds(),
                })
                .collect(),
        });
        out.push(OrgStatus {
            eta: eta::of(&waiting, &o.id, room, now),
            id: o.id.clone(),
            limit,
            used_last_hour: used,
            room_now: room.left() as u32,
            next_request_at: (used >= limit)
                .then(|| crate::api::budget::next_free(ctx.budget().as_ref(), &scope, limit, now)),
            hours,
            forecast,
            instants: findings.iter().find(|f| f.org == o.id).map(|f| Instants {
                filters_instants: f.filters_instants,
                day: f.day,
                detail: crate::text::one_line(&f.detail).into_owned(),
                checked_at: f.at,
            }),
            key: keys.iter().find(|k| k.org == o.id).map(|k| KeyStatus {
                fingerprint: k.fingerprint.clone(),
                first_used: k.first_used,
                age_days: k.age_days(now),
                health: k.health(now),
                refused_since: k.refused_since,
                warning: k.warning(now, o.admin_key.as_ref()),
            }),
        });
    }
    Ok(out)
}

/// The daemons: alive or not, what each holds.
fn daemons(
    ctx: &Context,
    view: &PlanView,
    now: DateTime<Utc>,
) -> anyhow::Result<Vec<DaemonStatus>> {
    let state = ctx.store();
    let (held, done_by) = if state.is_shared() {
        let claims = state.claims();
        (claims.held(now)?, claims.done_by()?)
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(state
        .daemons()
        .all()?
        .into_iter()
        .map(|d| {
            let mut holds: Vec<String> = view
                .queued
                .iter()
                .filter(|(q, _)| q.holder.as_ref() == Some(&d.name))
                .map(|(q, _)| format!("backfill {}", q.id))
                .collect();
            holds.extend(
                held.iter()
                    .filter(|(_, h)| *h == d.name)
                    .map(|(k, _)| format!("window {k}")),
            );
            let windows_done = state.is_shared().then(|| {
                done_by
                    .iter()
                    .find(|(h, _)| *h == d.name)
                    .map_or(0, |(_, n)| *n)
            });
            DaemonStatus {
                alive: d.alive(now),
                name: d.name,
                started_at: d.started_at,
                seen_at: d.seen_at,
                holds,
                windows_done,
            }
        })
        .collect())
}

/// The last firings with their cooldowns, each rule's last run, the rule files' problems.
fn rules(ctx: &Context, firings: usize, now: DateTime<Utc>) -> anyhow::Result<Rules> {
    let settings = &ctx.settings;
    let loaded = if settings.rules_dir.is_dir() {
        match crate::app::rules::load(&settings.rules_dir, settings, &[]) {
            Ok(l) => (l.rules, l.problems),
            Err(e) => (Vec::new(), vec![e.to_string()]),
        }
    } else {
        (Vec::new(), Vec::new())
    };
    let all = ctx.store().ledger().all()?;
    // A rule cools down from its last firing that may have reached the service.
    let mut last: BTreeMap<&str, DateTime<Utc>> = BTreeMap::new();
    for f in all.iter().filter(|f| f.sent.maybe_delivered()) {
        last.insert(&f.rule, f.fired_at);
    }
    let cooling = |rule: &str| -> Option<DateTime<Utc>> {
        let r = loaded.0.iter().find(|r| r.name == rule)?;
        let until = *last.get(rule)? + Duration::from_std(r.cooldown).ok()?;
        (now < until).then_some(until)
    };
    let shown: Vec<FiringStatus> = all
        .iter()
        .rev()
        .take(firings)
        .rev()
        .map(|f| FiringStatus {
            id: f.id,
            fired_at: f.fired_at,
            rule: f.rule.clone(),
            project: f.project.clone(),
            kind: f.kind.as_str(),
            job: f.job.clone(),
            automation: f.run.as_ref().map(|r| r.automation.clone()),
            run: f.run.as_ref().and_then(|r| r.instance_id.clone()),
            rows: f.rows_matched,
            sent: f.sent.as_str(),
            job_status: f.status.clone(),
            pr_link: f.pr_link.clone(),
            seconds_to_done: f.seconds_to_done,
            error: f.error.clone(),
            cooling_down_until: cooling(&f.rule),
            line: crate::rules::engine::firing_line(f),
        })
        .collect();
    let previews = previews(ctx, &loaded.0)?;
    let pending = all
        .iter()
        .filter(|f| f.sent == crate::store::ledger::Sent::Held)
        .map(|f| PendingStatus::of(f, settings.review_expires))
        .collect();
    Ok(Rules {
        firings_total: all.len(),
        firings: shown,
        // The runs of the rules the folder holds now: a rule whose file is gone is no longer
        // failing (nor anything else).
        runs: ctx
            .store()
            .history()
            .rule_runs()?
            .into_iter()
            .filter(|run| loaded.0.iter().any(|r| r.name == run.rule))
            .collect(),
        problems: loaded.1,
        impact: crate::rules::impact::latest(&crate::rules::impact::rows(&ctx.store().ledger())?),
        previews,
        pending,
        warnings: loaded
            .0
            .iter()
            .filter_map(|r| {
                r.review_warning()
                    .map(|w| format!("rule {} ({}): {w}", r.name, r.file))
            })
            .collect(),
    })
}

/// The latest preview of each rule that is not enabled (of `rules`, loaded now).
fn previews(ctx: &Context, rules: &[crate::rules::Rule]) -> anyhow::Result<Vec<PreviewStatus>> {
    let enabled = |rule: &str| rules.iter().any(|r| r.name == rule && r.enabled);
    Ok(ctx
        .store()
        .ledger()
        .previews()?
        .into_iter()
        .filter(|p| !enabled(&p.rule))
        .map(|p| PreviewStatus {
            flags: crate::rules::parse_flags(Some(&p.flags)),
            rule: p.rule,
            project: p.project,
            at: p.at,
            rows: p.rows,
            reason: p.reason,
            prompt: p.prompt,
        })
        .collect())
}

/// Each project's charts (the SVGs `docpipe trends` drew) and the gap tables' top rows.
fn trends(settings: &Settings) -> Vec<ProjectTrends> {
    let out = &settings.output_dir;
    let mut gaps = crate::trends::gaps::top_rows(out, TOP_ROWS);
    settings
        .projects
        .iter()
        .filter_map(|p| {
            let charts: Vec<String> = [
                format!("trends/chart-{}.svg", p.id),
                format!("trends/gaps-{}.svg", p.id),
            ]
            .into_iter()
            .filter(|c| out.join(c).is_file())
            .collect();
            let gaps = gaps.remove(&p.id).unwrap_or_default();
            (!charts.is_empty() || !gaps.is_empty()).then(|| ProjectTrends {
                project: p.id.clone(),
                charts,
                gaps,
            })
        })
        .collect()
}
