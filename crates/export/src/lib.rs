//! docpipe's export stage: the datasets (`dataset`: each one's endpoint, paging, windowing and
//! tables), the planner (`planner`: which windows are due, in what order, within the budget; the
//! forecast), and the export itself: date windows and request plan -> the one window path
//! (`window.rs`) over each dataset's walk -> Parquet partitions -> state.

#![warn(clippy::too_many_lines)]

pub mod dataset;
pub mod planner;

// The stages below this one, by the names the code reads them with.
use docpipe_catalog::{calendar, clock, events, layout, text};
use docpipe_extract as api;
use docpipe_state as store;

mod day_status;
mod failure;
mod plan;
mod report;
mod threads;
mod window;

pub use crate::dataset::shape_walk::{fractions_schema, fractions_table};
pub use crate::dataset::walk::{CrashPoints, ExportError, WindowOutcome};
pub use day_status::{DAY_STATUS, FINAL, PARTIAL, PROVISIONAL, schema as day_status_schema};
pub use failure::Failure;
use failure::WindowId;
pub use plan::holes;
pub use report::{describe_plan, describe_summary};
pub use threads::{ShapedSettings, fetch_thread};

use crate::api::Client;
use crate::calendar::Window;
use crate::clock::SharedClock;
use crate::dataset::analytics::THREADS;
use crate::dataset::{Dataset, Walker, Windowing};
use crate::events::{Event, Events, Quiet, Trouble, Troubled};
use crate::planner::{Candidate, DayState, DueRule, Freshness, Purpose, Room};
use crate::store::claims::Claim;
use crate::store::{Folder, Store, StoreError, WalkKey};
use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// One project to export, with the client of its organization.
#[derive(Debug, Clone)]
pub struct Target {
    /// Project id.
    pub project: String,
    /// Client of its organization.
    pub client: Client,
    /// The first day to export for it (its `start_date`, or the default 30 days); `None`: the
    /// `from` of the plan (a backfill's range).
    pub start: Option<NaiveDate>,
    /// The datasets it exports (names of `dataset::ALL`).
    pub datasets: Vec<&'static str>,
}

/// A window that needs fetching, of any dataset: a day of a daily dataset, or a span's days.
#[derive(Debug, Clone)]
pub struct Due {
    /// Its dataset.
    pub dataset: &'static dyn Dataset,
    /// Project.
    pub project: String,
    /// Its (first) day.
    pub day: NaiveDate,
    /// The day after its last (a daily window: the day after `day`).
    pub to: NaiveDate,
    /// Whether it is final once written (a day older than the lateness allowance).
    pub becomes_final: bool,
    /// Pages already stored from an interrupted walk.
    pub stored_pages: u64,
    /// Requests this window is expected to need.
    pub expected_requests: u64,
    /// Why it is due.
    pub purpose: Purpose,
    /// Whether its first page is a probe: totals equal to the stored ones leave the day as it
    /// is (nothing more fetched, nothing written).
    pub probe: bool,
    /// How late it is (see [`planner::Policy::urgency`]).
    pub urgency: u32,
    /// A re-check at its deadline (see [`planner::Candidate::deadline`]).
    pub deadline: bool,
    /// The most requests it may take this run: walked in parts, its pages stored, its walk
    /// going on next run (`None`: whole). Set by [`Plan::fit`].
    pub part: Option<u64>,
    /// For a span: the full re-check (every re-checked day), not only the recent days.
    pub full: bool,
    /// For a span: it reaches the recent days (today, or yesterday for a walk begun before
    /// midnight), so finishing it is a look at them; a backfill's older range is not.
    pub recent: bool,
    /// For a span's first walk: how much earlier than its walk its first full re-check falls
    /// due, so that the projects' full re-checks fall in different hours.
    pub stagger: chrono::Duration,
    /// Requests this run already spent on it in its earlier turns (see [`turn`]): counted in
    /// its part and in the requests it records.
    pub earlier: u64,
}

impl Due {
    /// A daily window of `dataset` (the span fields unset).
    fn day_window(
        dataset: &'static dyn Dataset,
        project: &str,
        day: NaiveDate,
        becomes_final: bool,
        state: &DayState,
        d: planner::DayDue,
    ) -> Self {
        Self {
            dataset,
            project: project.to_string(),
            day,
            to: day.succ_opt().unwrap_or(day),
            becomes_final,
            stored_pages: state.stored,
            expected_requests: d.cost,
            purpose: d.purpose,
            probe: d.probe,
            urgency: d.urgency,
            deadline: d.deadline,
            part: None,
            full: false,
            recent: false,
            stagger: chrono::Duration::zero(),
            earlier: 0,
        }
    }

    /// The dataset's name.
    pub fn dataset(&self) -> &'static str {
        self.dataset.name()
    }

    /// Whether it is a span (walked again on every run) rather than a day.
    pub fn is_span(&self) -> bool {
        matches!(self.dataset.windowing(), Windowing::Span { .. })
    }

    /// The walk it is, as the state keys its stored pages.
    pub fn walk(&self) -> WalkKey {
        WalkKey {
            dataset: self.dataset(),
            project: self.project.clone(),
            from: self.day,
            to: self.to,
        }
    }

    /// The window as a failure names it.
    fn window(&self) -> WindowId<'_> {
        let to = (!self.dataset.names_itself()).then_some(self.to);
        (self.dataset(), self.project.as_str(), self.day, to)
    }
}

/// The work of a run, known before sending anything.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// What the state recorded of the days of each daily dataset and project planned, as the
    /// plan read it (the status shows it beside the plan rather than read it again).
    pub known: crate::store::Known,
    /// The windows due, every dataset's, in serving order (unfinished walks, today,
    /// re-checks, backfill; projects taking turns: see [`planner::order`]).
    pub due: Vec<Due>,
    /// Windows skipped because they are final.
    pub skipped_final: u64,
    /// Requests expected in all.
    pub expected_requests: u64,
    /// Per organization: its budget an hour and the requests sent in the last hour.
    pub budgets: BTreeMap<String, Room>,
    /// Per organization: its budget an hour and the requests that will still count in
    /// [`ROOM_LOOKAHEAD`] (what a run starting now can spend without waiting long).
    pub rooms: BTreeMap<String, Room>,
    /// Per organization: when its budget has room for a request again (now when it has).
    pub frees_at: BTreeMap<String, DateTime<Utc>>,
    /// A queued backfill waits (the daemon's queue): the fit keeps its share of the budget.
    pub backfill_queued: bool,
    /// Organization of each project.
    pub org_of: HashMap<String, String>,
    /// Windows skipped because they were looked at recently enough.
    pub fresh: u64,
    /// Windows due that did not fit the budget (left for the next run).
    pub deferred: u64,
    /// The requests the deferred windows are expected to take, per organization: the ETA
    /// counts them with the run's.
    pub deferred_requests: HashMap<String, u64>,
    /// The windows deferred, per organization.
    pub deferred_by_org: HashMap<String, u64>,
    /// Per organization, the requests the run may spend (none: no limit but the budget's
    /// waits): set by [`Plan::fit`].
    pub allowance: HashMap<String, u64>,
    /// When it was made: a window another process did since is not walked again.
    pub made_at: DateTime<Utc>,
    /// Projects not planned: the service said it does not know them (see
    /// [`Exporter::with_retry_unknown`]); and where each is in the config.
    pub unknown: Vec<(crate::store::unknown::UnknownProject, String)>,
    /// Projects recorded as unknown that the plan asks for again (`--retry-unknown`, or
    /// another service): forgotten once one of their windows succeeds.
    pub asked_again: std::collections::HashSet<String>,
    /// Windows due but stuck on the service's paging, waiting for their next try.
    pub stuck: Vec<crate::store::activity::WindowFailure>,
    /// The datasets and projects never walked: a daily dataset's windows are counted 1
    /// request each, a span's walk one page a day (the first walk measures them).
    pub unmeasured: std::collections::BTreeSet<(&'static str, String)>,
    /// The daily datasets and projects whose newest window the run walked before it made this
    /// plan (see [`Plan::measuring`]), and the requests that took: counted in
    /// `expected_requests`, so that the estimate is of the whole run.
    pub measured: (std::collections::BTreeSet<(&'static str, String)>, u64),
}

impl Plan {
    fn candidate(&self, d: &Due) -> Candidate {
        Candidate {
            org: self.org_of.get(&d.project).cloned().unwrap_or_default(),
            project: d.project.clone(),
            dataset: d.dataset(),
            purpose: d.purpose,
            newness: planner::newness(d.day),
            cost: d.part.unwrap_or(d.expected_requests),
            urgency: d.urgency,
            started: d.stored_pages > 0,
            deadline: d.deadline,
        }
    }

    /// Puts the windows in serving order (see [`planner::order`]).
    fn sort(&mut self) {
        let cands: Vec<Candidate> = self.due.iter().map(|d| self.candidate(d)).collect();
        let mut due: Vec<Option<Due>> = std::mem::take(&mut self.due)
            .into_iter()
            .map(Some)
            .collect();
        self.due = planner::order(&cands)
            .into_iter()
            .filter_map(|i| due[i].take())
            .collect();
    }

    /// Keeps the windows that fit each organization's room this hour (see [`planner::fit`]);
    /// the rest are counted as deferred.
    pub fn fit(&mut self, freshness: &Freshness) {
        let rooms = self.rooms.clone();
        let room = |org: &str| rooms.get(org).copied();
        self.fit_in(freshness, &room);
    }

    /// [`Plan::fit`] with the rooms `rooms` gives.
    pub fn fit_in(&mut self, freshness: &Freshness, rooms: &dyn Fn(&str) -> Option<Room>) {
        let mut cands: Vec<Candidate> = self.due.iter().map(|d| self.candidate(d)).collect();
        if self.backfill_queued {
            // The queue's windows are not in this plan: stand-ins keep their share free.
            let orgs: std::collections::BTreeSet<String> =
                cands.iter().map(|c| c.org.clone()).collect();
            for org in orgs {
                cands.push(Candidate {
                    org,
                    project: String::new(),
                    dataset: "",
                    purpose: Purpose::Backfill,
                    newness: i64::MIN,
                    cost: u64::MAX,
                    urgency: 0,
                    started: false,
                    deadline: false,
                });
            }
        }
        let served: Vec<usize> = (0..self.due.len()).collect();
        let (chosen, allowance) = planner::fit(&cands, &served, rooms, freshness);
        // The kept windows, in serving order; a window walked in parts has its part (the
        // backfill queue's stand-ins are past the list's end).
        let due: Vec<Due> = chosen
            .iter()
            .filter_map(|&(i, part)| self.due.get(i).map(|d| Due { part, ..d.clone() }))
            .collect();
        let kept: std::collections::HashSet<usize> = chosen.iter().map(|&(i, _)| i).collect();
        for (i, d) in self.due.iter().enumerate() {
            if !kept.contains(&i) {
                let c = self.candidate(d);
                *self.deferred_by_org.entry(c.org.clone()).or_default() += 1;
                *self.deferred_requests.entry(c.org).or_default() += c.cost;
            }
        }
        self.deferred += (self.due.len() - due.len()) as u64;
        self.due = due;
        self.allowance = allowance.into_iter().collect();
        self.expected_requests = self.due.iter().map(|d| self.candidate(d).cost).sum();
    }

    /// The organizations whose windows [`Plan::fit`] left for later with no room left this
    /// hour, each with when its budget has room again.
    pub fn budget_used(&self) -> Vec<BudgetUsed> {
        let mut out = Vec::new();
        for (org, room) in &self.rooms {
            let Some(&next) = self.frees_at.get(org) else {
                continue;
            };
            let windows = self.deferred_by_org.get(org).copied().unwrap_or_default();
            if windows == 0 || room.left() > 0 {
                continue;
            }
            out.push(BudgetUsed {
                org: org.clone(),
                room: self.budgets.get(org).copied().unwrap_or(*room),
                windows,
                next,
            });
        }
        out
    }

    /// The requests each organization's windows are expected to take.
    pub fn expected_by_org(&self) -> HashMap<String, u64> {
        let mut out: HashMap<String, u64> = HashMap::new();
        for d in &self.due {
            let c = self.candidate(d);
            *out.entry(c.org).or_default() += c.cost;
        }
        out
    }

    /// Per organization, the windows due and the requests they are expected to take: this
    /// run's and the ones deferred to the next runs (what [`Plan::eta`] and `status`'s ETA
    /// count).
    pub fn waiting_by_org(&self) -> HashMap<String, (u64, u64)> {
        let mut out: HashMap<String, (u64, u64)> = HashMap::new();
        for d in &self.due {
            let org = self.org_of.get(&d.project).cloned().unwrap_or_default();
            let e = out.entry(org).or_default();
            e.0 += 1;
            e.1 += d.expected_requests;
        }
        for (org, n) in &self.deferred_by_org {
            out.entry(org.clone()).or_default().0 += n;
        }
        for (org, n) in &self.deferred_requests {
            out.entry(org.clone()).or_default().1 += n;
        }
        out
    }

    /// Expected time to send every due window's requests within the budgets: this run's and
    /// the ones deferred to the next runs.
    pub fn eta(&self) -> Duration {
        let mut worst = Duration::ZERO;
        for (org, (_, need)) in self.waiting_by_org() {
            let Some(room) = self.budgets.get(&org) else {
                continue;
            };
            worst = worst.max(Duration::from_secs(3600 * room.hours_for(need)));
        }
        worst
    }
}

/// How far ahead a plan counts the budget free: a run on the hour may spend what the run an
/// hour before spent (its requests leave the window within seconds).
pub const ROOM_LOOKAHEAD: chrono::Duration = chrono::Duration::minutes(10);

/// What a fitted plan's run may still spend, per organization.
#[derive(Debug, Default)]
struct Spend {
    allowance: HashMap<String, u64>,
    spent: HashMap<String, u64>,
    /// Requests the windows not started yet are expected to take.
    planned: HashMap<String, u64>,
}

impl Spend {
    fn new(plan: &Plan) -> Self {
        Self {
            allowance: plan.allowance.clone(),
            spent: HashMap::new(),
            planned: plan.expected_by_org(),
        }
    }

    /// A window starts: its expected requests are no longer "still planned".
    fn starting(&mut self, c: &Candidate) {
        if let Some(p) = self.planned.get_mut(&c.org) {
            *p = p.saturating_sub(c.cost);
        }
    }

    fn used(&self, org: &str) -> u64 {
        self.spent.get(org).copied().unwrap_or(0)
    }

    /// The most requests a window may take now: its part, and no more than the allowance
    /// left (an estimate short of the truth stops at the budget: the walk goes on next run).
    fn part(&self, org: &str, part: Option<u64>) -> Option<u64> {
        let left = self
            .allowance
            .get(org)
            .map(|a| a.saturating_sub(self.used(org)));
        match (part, left) {
            (Some(p), Some(l)) => Some(p.min(l)),
            (p, l) => p.or(l),
        }
    }

    /// Whether a window of `cost` requests still fits the allowance.
    fn fits(&self, org: &str, cost: u64) -> bool {
        self.allowance
            .get(org)
            .is_none_or(|a| self.used(org) + cost <= *a)
    }

    /// Whether `rest` unplanned requests fit beside the windows still planned.
    fn spare(&self, org: &str, rest: u64) -> bool {
        let planned = self.planned.get(org).copied().unwrap_or(0);
        self.allowance
            .get(org)
            .is_none_or(|a| self.used(org) + rest + planned <= *a)
    }

    fn spent(&mut self, org: &str, n: u64) {
        *self.spent.entry(org.to_string()).or_default() += n;
    }
}

/// An organization whose hour's budget left windows for later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetUsed {
    /// The organization.
    pub org: String,
    /// Its budget an hour, and the requests of the last hour.
    pub room: Room,
    /// The windows left for later.
    pub windows: u64,
    /// When it has room for a request again.
    pub next: DateTime<Utc>,
}

/// What a failure stops for the rest of a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Scope {
    /// An organization (its key was refused, the service unreachable).
    Organization(String),
    /// A project (403).
    Project(String),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Organization(o) => write!(f, "organization {o}"),
            Scope::Project(p) => write!(f, "project {p}"),
        }
    }
}

/// Which step of a run [`Exporter::run_on`] carries out.
#[derive(Debug)]
pub enum Step {
    /// The whole run.
    Whole,
    /// Its first windows (see [`Plan::measuring`]), of `of` it plans in all.
    First {
        /// The run's windows in all, as its first plan counted them.
        of: u64,
    },
    /// The rest, after the first step's summary.
    Rest(Box<Summary>),
}

/// Organizations (or projects, or the whole run) whose run stopped, and why.
#[derive(Debug, Clone, Default)]
struct Stops {
    by_scope: HashMap<Scope, Arc<ExportError>>,
    /// A failure of the storage (the output folder, the state, the budget's log): every window
    /// after it would fail the same way, after spending its requests.
    all: Option<Arc<ExportError>>,
}

impl Stops {
    /// Why the run, the organization or the project stopped, if it did.
    fn reason(&self, project: &str, client: &Client) -> Option<&Arc<ExportError>> {
        self.all
            .as_ref()
            .or_else(|| {
                self.by_scope
                    .get(&Scope::Organization(client.organization().to_string()))
            })
            .or_else(|| self.by_scope.get(&Scope::Project(project.to_string())))
    }

    /// Whether a window is skipped because the run, its organization or its project stopped;
    /// records it.
    fn skip(&self, window: WindowId<'_>, client: &Client, summary: &mut Summary) -> bool {
        match self.reason(window.1, client) {
            Some(r) => {
                summary.failed.push(Failure::of(window, true, r.clone()));
                true
            }
            None => false,
        }
    }
}

/// A run's summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The leading dataset's windows written (page views': see [`crate::dataset::LEADING`]).
    pub windows: Vec<WindowOutcome>,
    /// The other datasets' windows written.
    pub others: Vec<WindowOutcome>,
    /// Windows skipped as final.
    pub skipped_final: u64,
    /// Analytics requests the plan expected (its "about N requests"), to measure the run
    /// against.
    pub expected: u64,
    /// Analytics requests sent (counted as the clients sent them: see `tally`).
    pub requests: u64,
    /// The organizations whose windows the plan left for later because their hour's budget
    /// was used: each with its budget and when it has room again.
    pub budget_used: Vec<BudgetUsed>,
    /// Windows that failed, or were skipped after a failure that stopped their organization.
    pub failed: Vec<Failure>,
    /// Days a probe found unchanged (nothing written; the day is final when `is_final`).
    pub checked: Vec<Checked>,
    /// Windows another process (sharing the state) did since the plan was made: not walked
    /// again.
    pub done_by_others: Vec<OtherWindow>,
    /// Windows another process held when first tried, walked by this run after it let go.
    pub walked_after_others: Vec<OtherWindow>,
    /// Windows another process still held after this run waited `waited` for them: not done
    /// by this run, and said so.
    pub left_to_others: Vec<OtherWindow>,
    /// How long the run waited for the windows left to others.
    pub waited: Duration,
    /// Windows of the plan not fetched: the run's allowance had no room for them (left for
    /// the next run; a probed day that changed keeps its first page and resumes).
    pub deferred: u64,
    /// Windows walked in parts that took their part (their pages stored: the walk goes on next
    /// run).
    pub paused: u64,
    /// Requests by dataset and purpose (`walk`, `probe`, `backfill`, `thread`).
    pub spent: BTreeMap<(&'static str, &'static str), u64>,
    /// The run's clients' requests as they sent them: `requests` and `spent` are its count at
    /// the run's end.
    tally: Arc<crate::events::Tally>,
    /// What stopped for the rest of the run, carried into the plan it goes on with (see
    /// [`Exporter::run_on`]).
    stops: Stops,
}

/// A window another process had: which, and that process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherWindow {
    /// Dataset.
    pub dataset: &'static str,
    /// Project.
    pub project: String,
    /// First day.
    pub from: NaiveDate,
    /// The day after the last.
    pub to: NaiveDate,
    /// The process (`host:pid`; empty when the state does not say).
    pub by: String,
}

impl OtherWindow {
    fn of(due: &Due, by: &str) -> Self {
        Self {
            dataset: due.dataset(),
            project: due.project.clone(),
            from: due.day,
            to: due.to,
            by: by.to_string(),
        }
    }
}

/// What claiming a window found.
enum Claimed {
    /// Walk it.
    Go,
    /// Nothing to do (done by another process, or the claim failed: recorded).
    Settled,
    /// Another process holds it.
    Held(String),
}

/// A run going on: its windows' clients, what it may still spend, what stopped, and what
/// waits.
struct Running<'a> {
    clients: HashMap<&'a str, &'a Client>,
    targets: &'a [Target],
    plan: &'a Plan,
    summary: Summary,
    stops: Stops,
    spend: Spend,
    unanswered: BTreeMap<String, Vec<String>>,
    unknown: std::collections::HashSet<String>,
    /// Windows another process held, and that process: tried again after the others.
    held: Vec<(Due, String)>,
    /// Windows that walked to the end of their turn, with the requests spent on them so far:
    /// walked on after the others.
    again: Vec<(Due, u64)>,
}

/// Which turn of a window a run serves.
#[derive(Debug, Clone, Copy)]
enum Turn<'a> {
    /// Its first, in the plan's order.
    First,
    /// Another process (named) held it at its first.
    AfterHeld(&'a str),
    /// It walked to the end of an earlier turn (these requests spent in the turns before).
    Again(u64),
}

/// The requests a window may take in one turn: twice its estimate, and at least 4 more. A
/// window that needs more (a day the service pages far beyond what was expected, or forever)
/// yields to the windows waiting behind it, so that each gets its turn before any gets a
/// second.
pub fn turn(expected: u64) -> u64 {
    expected.saturating_mul(2).max(expected.saturating_add(4))
}

/// A day a probe found as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Dataset.
    pub dataset: &'static str,
    /// Project.
    pub project: String,
    /// Day.
    pub day: NaiveDate,
    /// Made final by this look (past the lateness allowance).
    pub is_final: bool,
}

/// A window whose first page was a probe.
struct Probed<'a> {
    dataset: &'static str,
    project: &'a str,
    day: NaiveDate,
    becomes_final: bool,
    purpose: Purpose,
    expected: u64,
}

impl Summary {
    /// A window written, among the leading dataset's or the others'.
    pub fn push(&mut self, w: WindowOutcome) {
        if w.dataset == crate::dataset::LEADING {
            self.windows.push(w);
        } else {
            self.others.push(w);
        }
    }

    /// After a probe (`None`: the day was as stored; else whether its walk is complete):
    /// records an unchanged day as checked, defers a changed re-check whose walk goes on when
    /// there is no room to spare (its first page is kept: the next run walks on). Returns
    /// whether to walk on now.
    fn after_probe(
        &mut self,
        p: &Probed<'_>,
        complete: Option<bool>,
        spend: &Spend,
        org: &str,
    ) -> bool {
        let Some(complete) = complete else {
            self.checked.push(Checked {
                dataset: p.dataset,
                project: p.project.to_string(),
                day: p.day,
                is_final: p.becomes_final,
            });
            return false;
        };
        let rest = p.expected.saturating_sub(1);
        if p.purpose == Purpose::Recheck && !complete && !spend.spare(org, rest) {
            self.deferred += 1;
            return false;
        }
        true
    }

    /// Every window the run wrote or found as stored, of any dataset: its dataset, project and
    /// first day.
    pub fn settled(&self) -> impl Iterator<Item = (&'static str, &str, NaiveDate)> {
        let written = self
            .windows
            .iter()
            .chain(&self.others)
            .map(|w| (w.dataset, w.project.as_str(), w.day));
        let checked = self
            .checked
            .iter()
            .map(|c| (c.dataset, c.project.as_str(), c.day));
        written.chain(checked)
    }

    /// Whether the run wrote a window of any dataset.
    pub fn wrote(&self) -> bool {
        !self.windows.is_empty() || !self.others.is_empty()
    }

    /// Page-view rows written.
    pub fn rows(&self) -> i64 {
        self.windows.iter().map(|w| w.rows).sum()
    }

    /// The other datasets' rows written.
    pub fn other_rows(&self) -> i64 {
        self.others.iter().map(|w| w.rows).sum()
    }
}

/// The exporter over one output folder.
#[derive(Debug)]
pub struct Exporter {
    folder: Arc<Folder>,
    clock: SharedClock,
    lookback_days: u32,
    tz: Tz,
    crash: CrashPoints,
    events: Arc<dyn Events>,
    /// The state's activity tables, where the clients it walks with record each request.
    recorder: Arc<dyn Events>,
    shaped: ShapedSettings,
    freshness: Freshness,
    refresh: bool,
    retry_unknown: bool,
    /// Where each project is in the config (`docpipe.toml line 12`), for messages.
    origins: HashMap<String, String>,
    /// This process's name on its window claims.
    holder: String,
    /// How long a window claim lasts without renewal.
    lease: chrono::Duration,
}

/// A window's claim key: a day of a daily dataset, or a span (one walk at a time per dataset
/// and project, whatever its days).
fn claim_key(dataset: &str, project: &str, day: Option<NaiveDate>) -> String {
    match day {
        Some(d) => format!("{dataset}/{project}/{d}"),
        None => format!("{dataset}/{project}"),
    }
}

/// Renews a process's window claims while a run goes on (every third of the lease); stops
/// when dropped.
struct Renewing(tokio::task::JoinHandle<()>);

impl Drop for Renewing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Exporter {
    /// The exporter of an opened output folder, for the days of `tz`, re-fetching the last
    /// `lookback_days` days.
    pub fn new(folder: Arc<Folder>, clock: SharedClock, lookback_days: u32, tz: Tz) -> Self {
        Self {
            recorder: Arc::new(crate::store::Recorder::new(folder.clone())),
            folder,
            clock,
            lookback_days,
            tz,
            crash: CrashPoints::from_env(),
            events: Arc::new(Quiet),
            shaped: ShapedSettings::default(),
            freshness: Freshness::default(),
            refresh: false,
            retry_unknown: false,
            origins: HashMap::new(),
            holder: crate::store::daemons::this_process(),
            lease: chrono::Duration::minutes(2),
        }
    }

    /// Claims windows for `lease` (renewed every third of it while a run goes on).
    pub fn with_lease(mut self, lease: chrono::Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Claims windows as `holder` (default: this machine and process).
    pub fn with_holder(mut self, holder: &str) -> Self {
        self.holder = holder.to_string();
        self
    }

    /// Renews this process's claims from a task while the returned guard lives.
    fn renewing(&self) -> Renewing {
        let claims = self.state().claims();
        let (holder, lease, clock) = (self.holder.clone(), self.lease, self.clock.clone());
        let every = (lease / 3)
            .to_std()
            .unwrap_or(std::time::Duration::from_secs(10));
        Renewing(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let (claims, holder, now) = (claims.clone(), holder.clone(), clock.now());
                let renewed =
                    tokio::task::spawn_blocking(move || claims.renew(&holder, now, lease)).await;
                if let Ok(Err(e)) = renewed {
                    tracing::warn!(error = %e, "window claims not renewed");
                }
            }
        }))
    }

    /// Claims a window for this process. A day another process did since `plan` was made,
    /// and a span whose days another process all wrote since, are settled (named in the
    /// summary as done by it); a window held is to be tried again after the run's other
    /// windows; a claim that failed is counted as failed.
    fn claim(&self, key: &str, due: &Due, plan: &Plan, summary: &mut Summary) -> Claimed {
        // One process exports into a folder whose state is its own (it holds the folder's
        // lock): nothing to claim.
        if !self.state().is_shared() {
            return Claimed::Go;
        }
        let claims = self.state().claims();
        let window = due.window();
        let span = due.is_span();
        // A span's claim is its project's dataset (its walk writes back the project's undated
        // and outside tables whole); whether its own days were done is the days' record.
        let planned = (!span).then_some(plan.made_at);
        let settled = match claims.take(key, &self.holder, self.clock.now(), self.lease, planned) {
            Ok(Claim::Taken) if span => self
                .state()
                .days_written_since(due.dataset(), &due.project, (due.day, due.to), plan.made_at)
                .and_then(|all| match all {
                    true => claims
                        .done_by_of(key)
                        .map(|by| Some(by.unwrap_or_default())),
                    false => Ok(None),
                }),
            Ok(Claim::Taken) => Ok(None),
            Ok(Claim::DoneSince(_, by)) => Ok(Some(by)),
            Ok(Claim::Held(by)) => {
                tracing::info!(
                    window = key,
                    "held by {by}: tried again after this run's other windows"
                );
                return Claimed::Held(by);
            }
            Err(e) => Err(e),
        };
        match settled {
            Ok(None) => Claimed::Go,
            Ok(Some(by)) => {
                tracing::debug!(window = key, "window done by {by} since this run's plan");
                if span && let Err(e) = claims.end(key, &self.holder, None) {
                    tracing::warn!(window = key, error = %e, "window claim not ended (its lease runs out)");
                }
                summary.done_by_others.push(OtherWindow::of(due, &by));
                Claimed::Settled
            }
            Err(e) => {
                tracing::error!(window = key, "claiming the window: {e}");
                summary
                    .failed
                    .push(Failure::of(window, false, Arc::new(e.into())));
                Claimed::Settled
            }
        }
    }

    /// Ends this process's claim of a window: done when the window was written or looked at
    /// (nothing failed, paused or deferred meanwhile), else given back.
    fn unclaim(&self, key: &str, before: (usize, u64, u64), summary: &Summary) {
        if !self.state().is_shared() {
            return;
        }
        let done = before == (summary.failed.len(), summary.paused, summary.deferred);
        let at = done.then(|| self.clock.now());
        if let Err(e) = self.state().claims().end(key, &self.holder, at) {
            tracing::warn!(window = key, error = %e, "window claim not ended (its lease runs out)");
        }
    }

    /// Looks at days again as `freshness` says (by default: today every hour, yesterday every
    /// 2 hours, a day n days old every 2n hours up to 6).
    pub fn with_freshness(mut self, freshness: Freshness) -> Self {
        self.freshness = freshness;
        self
    }

    /// Where each project is in the config (`docpipe.toml line 12`), named in messages about it.
    pub fn with_origins(mut self, origins: HashMap<String, String>) -> Self {
        self.origins = origins;
        self
    }

    /// Where `project` is in the config, or "the config".
    pub(crate) fn origin(&self, project: &str) -> String {
        self.origins
            .get(project)
            .cloned()
            .unwrap_or_else(|| "the config".to_string())
    }

    /// Plans the projects the service said it does not know again (by default they are left
    /// out until the service they were asked of changes).
    pub fn with_retry_unknown(mut self, retry: bool) -> Self {
        self.retry_unknown = retry;
        self
    }

    /// Plans every provisional day (and span) as due, however recently it was looked at.
    pub fn with_refresh(mut self, refresh: bool) -> Self {
        self.refresh = refresh;
        self
    }

    /// The planner's settings.
    pub fn freshness(&self) -> &Freshness {
        &self.freshness
    }

    /// The due rule of a dataset's days (its policy, the lateness allowance, `--refresh`).
    pub fn due_rule(&self, dataset: &str) -> DueRule {
        DueRule {
            policy: self.freshness.policy(dataset),
            lookback_days: self.lookback_days,
            refresh: self.refresh,
        }
    }

    /// Re-fetches the span datasets and fetches threads as `shaped` says.
    pub fn with_shaped(mut self, shaped: ShapedSettings) -> Self {
        self.shaped = shaped;
        self
    }

    /// Opens an output folder with UTC days (for tools and tests; the commands open it through
    /// `app::Context`): see [`Folder::open_locked`].
    pub async fn open(
        out: &Path,
        clock: SharedClock,
        lookback_days: u32,
    ) -> Result<Self, ExportError> {
        Self::open_in(out, clock, lookback_days, Tz::UTC).await
    }

    /// Opens an output folder for the days of `tz`: see [`Folder::open_locked`].
    pub async fn open_in(
        out: &Path,
        clock: SharedClock,
        lookback_days: u32,
        tz: Tz,
    ) -> Result<Self, ExportError> {
        let folder = Folder::open_locked(out, tz.name()).await?;
        Ok(Self::new(Arc::new(folder), clock, lookback_days, tz))
    }

    /// The client that walks for `purpose`, each request it sends recorded as it is sent in
    /// this exporter's state and in the run's `summary`.
    pub(crate) fn client_for(
        &self,
        client: &Client,
        purpose: &'static str,
        summary: &Summary,
    ) -> Client {
        let receivers: Vec<Arc<dyn Events>> = vec![self.recorder.clone(), summary.tally.clone()];
        client
            .for_purpose(purpose)
            .recording_into(Arc::new(crate::events::Fan(receivers)))
    }

    /// Counts an event on `/metrics`, logs it and hands it to the receivers: the state's
    /// activity tables, this exporter's events.
    fn emit(&self, event: Event<'_>) {
        event.log(self.events.draws());
        self.emit_unlogged(event);
    }

    /// [`Exporter::emit`] without the event's line (one said before it says it).
    fn emit_unlogged(&self, event: Event<'_>) {
        event.count();
        self.state().receive(&event);
        self.events.event(&event);
    }

    /// Reports progress to `events`.
    pub fn with_events(mut self, events: Arc<dyn Events>) -> Self {
        self.events = events;
        self
    }

    /// The state database.
    pub fn state(&self) -> &Store {
        self.folder.store()
    }

    /// The output folder.
    pub fn output(&self) -> &Path {
        self.folder.path()
    }
    /// Today in the time zone of the windows.
    pub fn today(&self) -> NaiveDate {
        self.clock.now().with_timezone(&self.tz).date_naive()
    }

    /// How long ago the newest data of a dataset and project were taken: a span's last walk;
    /// for a daily dataset, the look at its newest day looked at (or that day's end, when the
    /// look came after it). None: never looked at, or fetched on demand (threads).
    pub fn staleness(
        &self,
        dataset: &str,
        project: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<chrono::Duration>, StoreError> {
        let windowing = crate::dataset::windowing_of(dataset);
        let at = match windowing {
            crate::dataset::Windowing::Span { .. } => {
                self.state().span_state(dataset, project)?.look.walked_at
            }
            crate::dataset::Windowing::OnDemand => None,
            crate::dataset::Windowing::Daily => {
                self.state()
                    .newest_look(dataset, project)?
                    .map(|(day, look)| {
                        let end = day.succ_opt().map_or(look.checked_at, |next| {
                            crate::calendar::local_midnight(next, self.tz).to_utc()
                        });
                        look.checked_at.min(end)
                    })
            }
        };
        Ok(at.map(|t| (now - t).max(chrono::Duration::zero())))
    }

    /// Whether a day is past the lateness allowance today.
    pub fn is_settled(&self, day: NaiveDate) -> bool {
        (self.today() - day).num_days() > i64::from(self.lookback_days)
    }

    /// Carries out a plan in its serving order: each window walked (a probed one: its first
    /// page compared with what is stored, and walked on only when it changed), checked,
    /// written and recorded as soon as it is complete; then the threads of the unanswered
    /// turns fetched. A window that fails is reported and the run goes on. With an allowance
    /// (a fitted plan), a window that no longer fits is deferred, and a probed day that
    /// changed is walked on only with room to spare after the windows still planned.
    pub async fn run(&self, targets: &[Target], plan: &Plan) -> Summary {
        self.run_on(targets, plan, Step::Whole).await
    }

    /// [`Exporter::run`] as one step of a run (see [`Step`] and [`Plan::measuring`]): after a
    /// first step, its windows, failures, requests and what stopped (an organization whose key
    /// was refused is not asked again) go on; what was deferred or paused is this plan's alone
    /// (it took them up again).
    pub async fn run_on(&self, targets: &[Target], plan: &Plan, step: Step) -> Summary {
        let n = plan.due.len() as u64;
        // The run's windows in all and those done, for the progress shown.
        let (mut before, windows, done, last) = match step {
            Step::Whole => (Summary::default(), n, 0, true),
            Step::First { of } => (Summary::default(), of, 0, false),
            Step::Rest(before) => {
                let before = *before;
                let done = before.windows.len() + before.others.len() + before.failed.len();
                let done = done as u64;
                (before, done + n, done, true)
            }
        };
        let stops = std::mem::take(&mut before.stops);
        let mut r = Running {
            clients: targets
                .iter()
                .map(|t| (t.project.as_str(), &t.client))
                .collect(),
            targets,
            plan,
            summary: Summary {
                skipped_final: plan.skipped_final,
                expected: plan.expected_requests,
                budget_used: plan.budget_used(),
                deferred: 0,
                paused: 0,
                ..before
            },
            stops,
            spend: Spend::new(plan),
            unanswered: BTreeMap::new(),
            unknown: plan.asked_again.clone(),
            held: Vec::new(),
            again: Vec::new(),
        };
        self.emit(Event::Planned { windows, done });
        let _renewing = self.state().is_shared().then(|| self.renewing());
        for due in &plan.due {
            self.serve(&mut r, due, Turn::First).await;
        }
        self.wait_for_others(&mut r).await;
        self.turns_again(&mut r).await;
        self.run_threads(&r.clients, r.unanswered, &mut r.stops, &mut r.summary)
            .await;
        for t in targets {
            t.client.budget().release();
        }
        if last {
            self.emit(Event::Finished);
        }
        r.summary.requests = r.summary.tally.analytics();
        r.summary.spent = r.summary.tally.spent();
        r.summary.stops = r.stops;
        r.summary
    }

    /// Serves one window of the plan: deferred when it no longer fits, skipped after a
    /// failure that stopped its organization, claimed (see [`Exporter::claim`]), walked for
    /// its turn (see [`turn`]), written. A window that walks beyond its turn yields: its
    /// pages are kept, and it goes on after every other window had its turn.
    async fn serve(&self, r: &mut Running<'_>, held: &Due, turn: Turn<'_>) {
        let Some((due, yields)) = self.this_turn(r, held, turn) else {
            return;
        };
        let due = &due;
        let Some(client) = r.clients.get(due.project.as_str()).copied() else {
            return;
        };
        let window = due.window();
        if r.stops.skip(window, client, &mut r.summary) {
            self.emit(Event::Failed {
                dataset: due.dataset(),
                project: &due.project,
                trouble: None,
            });
            return;
        }
        let key = claim_key(
            due.dataset(),
            &due.project,
            (!due.is_span()).then_some(due.day),
        );
        match self.claim(&key, due, r.plan, &mut r.summary) {
            Claimed::Go => {}
            Claimed::Settled => return,
            Claimed::Held(by) => {
                r.held.push((held.clone(), by));
                return;
            }
        }
        if let Turn::AfterHeld(by) = turn {
            r.summary.walked_after_others.push(OtherWindow::of(due, by));
        }
        let marks = (r.summary.failed.len(), r.summary.paused, r.summary.deferred);
        let before = client.requests_sent();
        let org = r.plan.candidate(due).org;
        let result = self.walk_window(r, due, client, &org).await;
        let n = client.requests_sent() - before;
        r.spend.spent(&org, n);
        match result {
            Err(e) => self.failed(window, client, e, &mut r.summary, &mut r.stops),
            // A project asked for again (`--retry-unknown`) that answers is known again.
            Ok(()) if r.unknown.remove(&due.project) => {
                if let Err(e) = self.state().clear_unknown(&due.project) {
                    tracing::warn!(project = %due.project, "cannot forget the unknown project: {e}");
                }
            }
            Ok(()) => {}
        }
        // Walked to the end of its turn, far beyond its estimate: it goes on after the others
        // (or, when the allowance ended its next turn, next run).
        let paused = r.summary.paused > marks.1;
        if paused && (yields || due.earlier > 0) {
            self.long(due);
        }
        if paused && yields {
            r.summary.paused -= 1;
            r.again.push((held.clone(), due.earlier + n));
        }
        self.unclaim(&key, marks, &r.summary);
    }

    /// A window's turn: the window with the part it may take now, and whether that part is its
    /// turn rather than all it may take (it yields when it walks to the end of it). `None`: it
    /// no longer fits this run (deferred; a window that yielded before is paused).
    fn this_turn(&self, r: &mut Running<'_>, due: &Due, turn: Turn<'_>) -> Option<(Due, bool)> {
        let c = r.plan.candidate(due);
        if matches!(turn, Turn::First) {
            r.spend.starting(&c);
        }
        // A window's next turn needs one request; the others, what the plan expects.
        let earlier = match turn {
            Turn::Again(n) => Some(n),
            _ => None,
        };
        if !r.spend.fits(&c.org, earlier.map_or(c.cost, |_| 1)) {
            match earlier {
                Some(_) => r.summary.paused += 1,
                None => r.summary.deferred += 1,
            }
            return None;
        }
        let earlier = earlier.unwrap_or(0);
        // What is left of its part of the run, after its earlier turns.
        let limit = r
            .spend
            .part(&c.org, due.part.map(|p| p.saturating_sub(earlier)));
        if limit == Some(0) {
            r.summary.paused += 1;
            return None;
        }
        // Once every window had its turn, the ones walking on share what is left, each next
        // turn at least as long as all its turns before (a walk of n pages takes about log n
        // turns, each reading its kept pages again).
        let share = match (turn, limit) {
            (Turn::Again(_), Some(l)) => {
                let waiting = r.again.len() as u64 + 1;
                self::turn(due.expected_requests)
                    .max(earlier)
                    .max(l / waiting)
            }
            (Turn::Again(_), None) => self::turn(due.expected_requests).max(earlier),
            _ => self::turn(due.expected_requests),
        };
        // A later turn goes on from the pages kept: no probe again.
        let this = Due {
            part: Some(earlier + limit.map_or(share, |l| l.min(share))),
            probe: due.probe && earlier == 0,
            earlier,
            ..due.clone()
        };
        Some((this, limit.is_none_or(|l| share < l)))
    }

    /// Walks a window of any dataset on the one window path: the one branch on the dataset,
    /// which page it walks.
    async fn walk_window(
        &self,
        r: &mut Running<'_>,
        due: &Due,
        client: &Client,
        org: &str,
    ) -> Result<(), ExportError> {
        let days = Window {
            from: due.day,
            to: due.to,
            tz: self.tz,
            part: crate::calendar::Part::Whole,
        };
        let (spend, summary) = (&r.spend, &mut r.summary);
        match due.dataset.walker() {
            Walker::Views => {
                let w = &mut crate::dataset::ViewWalk {
                    key: due.walk(),
                    window: days,
                    becomes_final: due.becomes_final,
                };
                self.window(due, w, client, spend, org, summary).await
            }
            Walker::Shaped(shape) => {
                let wants_threads = r
                    .targets
                    .iter()
                    .any(|t| t.project == due.project && t.datasets.contains(&THREADS.name));
                let w = &mut crate::dataset::ShapeWalk {
                    shape,
                    walk: due.walk(),
                    window: days,
                    becomes_final: due.becomes_final,
                    settled: self.shaped.settled_through(
                        due.dataset.name(),
                        self.today(),
                        self.lookback_days,
                    ),
                    recent: due.recent,
                    full: due.full,
                    stagger: due.stagger,
                    unanswered: wants_threads.then_some(&mut r.unanswered),
                    building: Default::default(),
                    index: None,
                };
                self.window(due, w, client, spend, org, summary).await
            }
        }
    }

    /// Records a window walking far beyond its estimate (its turn spent), for `status`.
    fn long(&self, due: &Due) {
        let pages = self.state().progress(&due.walk()).map_or(0, |p| p.0);
        let days = failure::days_of(due.day, due.window().3);
        let reason = format!(
            "{pages} pages walked, far beyond the {} expected: it walks in turns after the other windows (a walk of more than {} pages fails)",
            due.expected_requests,
            crate::api::views::MAX_WALK_PAGES
        );
        // Never written before: the estimate was the first walk's guess.
        let guessed = self
            .state()
            .last_written(due.dataset(), &due.project)
            .is_ok_and(|w| w.is_none());
        self.emit(Event::Long {
            dataset: due.dataset(),
            project: &due.project,
            trouble: Troubled {
                day: due.day,
                window: &days,
                reason: &reason,
                at: self.clock.now(),
                kind: Trouble::Long,
            },
            guessed,
        });
    }

    /// Gives the windows that yielded their next turns, each in turn, while the allowance
    /// lasts; what is left is paused (its walk goes on next run).
    async fn turns_again(&self, r: &mut Running<'_>) {
        while !r.again.is_empty() {
            for (due, earlier) in std::mem::take(&mut r.again) {
                self.serve(r, &due, Turn::Again(earlier)).await;
            }
        }
    }

    /// Tries the windows another process held again, until each is walked or settled or one
    /// lease has passed (a living holder renews its claim; one that died loses it when its
    /// lease runs out); what is still held then is named in the summary as not done.
    async fn wait_for_others(&self, r: &mut Running<'_>) {
        if r.held.is_empty() {
            return;
        }
        let patience = self.lease.to_std().unwrap_or(Duration::from_secs(120));
        let poll = (patience / 20).clamp(Duration::from_millis(100), Duration::from_secs(2));
        let until = std::time::Instant::now() + patience;
        while !r.held.is_empty() && std::time::Instant::now() < until {
            tokio::time::sleep(poll).await;
            for (due, by) in std::mem::take(&mut r.held) {
                self.serve(r, &due, Turn::AfterHeld(&by)).await;
            }
        }
        for (due, by) in std::mem::take(&mut r.held) {
            tracing::warn!(
                dataset = due.dataset(),
                project = %due.project,
                day = %due.day,
                "still held by {by} after {} s: not walked by this run",
                patience.as_secs()
            );
            r.summary.left_to_others.push(OtherWindow::of(&due, &by));
            r.summary.waited = patience;
        }
    }

    /// Records a failed window of any dataset. A rejected key or an unreachable service stops
    /// the rest of the run for the organization (a 403, for the project), a failed storage the
    /// whole run: reported once, in the window's own line, and the windows after it recorded as
    /// skipped. A window already in flight when its scope stopped fails for the same cause: it is
    /// recorded, and its line is at debug (the first one said it).
    fn failed(
        &self,
        window: WindowId<'_>,
        client: &Client,
        e: ExportError,
        summary: &mut Summary,
        stops: &mut Stops,
    ) {
        let (dataset, project, day, _) = window;
        let failure = Failure::of(window, false, Arc::new(e));
        let e = &failure.cause;
        let mut reason = crate::text::one_line(&e.to_string()).into_owned();
        let scope = self.stop_scope(project, client, e);
        let said = match &scope {
            _ if e.is_storage() => stops.all.is_some(),
            Some(scope) => stops.by_scope.contains_key(scope),
            None => false,
        };
        // An unknown project's one line: the fact, where to fix it, and what the runs do.
        if let ExportError::Api(a) = &**e
            && matches!(a.kind, crate::api::ErrorKind::UnknownProject { .. })
        {
            reason.push_str(&format!(
                ": fix its id in {}; this run and the later ones leave it out until then (or --retry-unknown)",
                self.origin(project)
            ));
        } else if e.is_storage() {
            reason.push_str("; the run stops sending: it cannot keep what it fetches");
        } else if let Some(scope) = &scope {
            reason.push_str(&format!("; the rest of this run for {scope} is skipped"));
        }
        let trouble = match **e {
            ExportError::Bound(_) => Trouble::Stuck,
            _ => Trouble::Failed,
        };
        let days = failure.days();
        let event = Event::Failed {
            dataset,
            project,
            trouble: Some(Troubled {
                day,
                window: &days,
                reason: &reason,
                at: self.clock.now(),
                kind: trouble,
            }),
        };
        if said {
            tracing::debug!(dataset, project, window = days, "window failed: {reason}");
            self.emit_unlogged(event);
        } else {
            self.emit(event);
        }
        if e.is_storage() {
            stops.all = Some(e.clone());
        } else if let Some(scope) = scope {
            stops.by_scope.insert(scope, e.clone());
        }
        summary.failed.push(failure);
    }

    /// What a failure stops for the rest of the run, beside the whole run a failed storage
    /// stops. An unknown project is remembered, so that later runs do not spend the budget on it.
    fn stop_scope(&self, project: &str, client: &Client, e: &ExportError) -> Option<Scope> {
        let ExportError::Api(a) = e else {
            return None;
        };
        match &a.kind {
            crate::api::ErrorKind::BadKey { .. } | crate::api::ErrorKind::Connect(_) => {
                Some(Scope::Organization(client.organization().to_string()))
            }
            crate::api::ErrorKind::UnknownProject { message, .. } => {
                let unknown = crate::store::unknown::UnknownProject {
                    project: project.to_string(),
                    base_url: client.settings().base_url.clone(),
                    message: format!("404: {message}"),
                    at: self.clock.now(),
                };
                if let Err(e) = self.state().mark_unknown(&unknown) {
                    tracing::warn!(project, "cannot record the unknown project: {e}");
                }
                Some(Scope::Project(project.to_string()))
            }
            crate::api::ErrorKind::Forbidden { .. } => Some(Scope::Project(project.to_string())),
            _ => None,
        }
    }
}
