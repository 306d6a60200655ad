//! The export: date windows and request plan -> offset walk -> Parquet partitions -> state.

pub mod journal;
pub mod parquet;
pub mod state;

use crate::api::views::{Counts, PAGE_LIMIT, Rows, Window};
use crate::api::{ApiError, Client};
use crate::clock::SharedClock;
use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use state::{Done, State, StateError, StoredPage};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Export errors.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The service.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The state database.
    #[error(transparent)]
    State(#[from] StateError),
    /// Writing Parquet.
    #[error(transparent)]
    Write(#[from] parquet::WriteError),
    /// The output folder.
    #[error("output folder {path}: {message}")]
    Output {
        /// Folder.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// One project to export, with the client of its organization.
#[derive(Debug, Clone)]
pub struct Target {
    /// Project id.
    pub project: String,
    /// Client of its organization.
    pub client: Client,
}

/// A window that needs fetching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// Project.
    pub project: String,
    /// Day.
    pub day: NaiveDate,
    /// Whether it is final once written (older than the lateness allowance).
    pub becomes_final: bool,
    /// Offsets already stored from an interrupted walk.
    pub stored_pages: u64,
    /// Requests this window is expected to need.
    pub expected_requests: u64,
}

/// The work of a run, known before sending anything.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Windows due, most recent first.
    pub due: Vec<Due>,
    /// Windows skipped because they are final.
    pub skipped_final: u64,
    /// Requests expected in all.
    pub expected_requests: u64,
    /// Per organization: (budget per hour, used in the last hour).
    pub budgets: BTreeMap<String, (u32, u32)>,
    /// Organization of each project.
    pub org_of: HashMap<String, String>,
}

impl Plan {
    /// Expected time to send the planned requests within the budgets.
    pub fn eta(&self) -> Duration {
        let mut per_org: HashMap<&str, u64> = HashMap::new();
        for d in &self.due {
            let org = self.org_of.get(&d.project).map_or("", String::as_str);
            *per_org.entry(org).or_default() += d.expected_requests;
        }
        let mut worst = Duration::ZERO;
        for (org, need) in per_org {
            let Some((limit, used)) = self.budgets.get(org).copied() else {
                continue;
            };
            let left = u64::from(limit.saturating_sub(used));
            if need > left {
                let hours = (need - left).div_ceil(u64::from(limit.max(1)));
                worst = worst.max(Duration::from_secs(3600 * hours));
            }
        }
        worst
    }
}

/// Organizations (or projects) whose run stopped, and why.
#[derive(Debug, Default)]
struct Stops {
    by_scope: HashMap<String, String>,
}

impl Stops {
    /// Whether a window is skipped because its organization or project stopped; records it.
    fn skip(&self, due: &Due, client: &Client, summary: &mut Summary) -> bool {
        let reason = self
            .by_scope
            .get(&format!("organization {}", client.organization()))
            .or_else(|| self.by_scope.get(&format!("project {}", due.project)));
        match reason {
            Some(r) => {
                summary
                    .failed
                    .push((due.project.clone(), due.day, format!("skipped: {r}")));
                true
            }
            None => false,
        }
    }
}

/// What happened to one window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowOutcome {
    /// Project.
    pub project: String,
    /// Day.
    pub day: NaiveDate,
    /// Rows written.
    pub rows: i64,
    /// Totals written.
    pub totals: Counts,
    /// Final.
    pub is_final: bool,
    /// Requests sent for it in this run.
    pub requests: u64,
    /// A mismatch that persisted after one re-walk.
    pub mismatch: Option<String>,
}

/// A run's summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Windows written.
    pub windows: Vec<WindowOutcome>,
    /// Windows skipped as final.
    pub skipped_final: u64,
    /// Analytics requests sent.
    pub requests: u64,
    /// Windows that failed, with the error.
    pub failed: Vec<(String, NaiveDate, String)>,
}

impl Summary {
    /// Rows written in all.
    pub fn rows(&self) -> i64 {
        self.windows.iter().map(|w| w.rows).sum()
    }
}

/// Hook for tests of crash safety: with `DOCPIPE_CRASH_AT=N` the process aborts at the N-th
/// crash point (after a page is stored, before a partition is renamed into place, before the
/// state records a written window). Unset, it does nothing.
#[derive(Debug, Default)]
pub struct CrashPoints {
    at: Option<u64>,
    seen: AtomicU64,
}

impl CrashPoints {
    /// Reads `DOCPIPE_CRASH_AT`.
    pub fn from_env() -> Self {
        Self {
            at: std::env::var("DOCPIPE_CRASH_AT")
                .ok()
                .and_then(|v| v.parse().ok()),
            seen: AtomicU64::new(0),
        }
    }

    fn hit(&self, what: &str) {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if self.at == Some(n) {
            eprintln!("crash point {n}: {what}");
            std::process::abort();
        }
    }
}

/// The exporter over one output folder.
#[derive(Debug)]
pub struct Exporter {
    out: PathBuf,
    state: State,
    clock: SharedClock,
    lookback_days: u32,
    tz: Tz,
    crash: CrashPoints,
    progress: ProgressBar,
    _lock: std::fs::File,
}

/// The state database of an output folder.
pub fn state_path(out: &Path) -> PathBuf {
    out.join("state.sqlite")
}

impl Exporter {
    /// Opens the output folder with UTC days: see [`Exporter::open_in`].
    pub async fn open(
        out: &Path,
        clock: SharedClock,
        lookback_days: u32,
    ) -> Result<Self, ExportError> {
        Self::open_in(out, clock, lookback_days, Tz::UTC).await
    }

    /// Opens the output folder for the days of `tz`: creates it, takes its lock (waiting for
    /// another docpipe that holds it), removes temporary files a killed run left, opens the
    /// state, and refuses a folder whose days are another time zone's.
    pub async fn open_in(
        out: &Path,
        clock: SharedClock,
        lookback_days: u32,
        tz: Tz,
    ) -> Result<Self, ExportError> {
        let fail = |message: String| ExportError::Output {
            path: out.display().to_string(),
            message,
        };
        std::fs::create_dir_all(out).map_err(|e| fail(format!("cannot create it: {e}")))?;
        let lock_path = out.join(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| fail(format!("cannot write in it: {e}")))?;
        let lock = match lock.try_lock() {
            Ok(()) => lock,
            Err(std::fs::TryLockError::WouldBlock) => {
                tracing::info!(output = %out.display(), "another docpipe is exporting to this folder; waiting for it");
                tokio::task::spawn_blocking(move || lock.lock().map(|()| lock))
                    .await
                    .map_err(|e| fail(e.to_string()))?
                    .map_err(|e| fail(format!("cannot lock it: {e}")))?
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(fail(format!("cannot lock it: {e}")));
            }
        };
        let removed = parquet::remove_leftovers(out);
        if removed > 0 {
            tracing::info!(removed, "removed temporary files of an interrupted run");
        }
        let state = State::open(&state_path(out))?;
        let swept = state.sweep_journals()?;
        if swept > 0 {
            tracing::info!(
                removed = swept,
                "removed walk journals of an interrupted run"
            );
        }
        let recorded = state.claim_timezone(tz.name())?;
        if recorded != tz.name() {
            return Err(fail(format!(
                "its days are {recorded} days, not {}: set export.timezone = {recorded:?} or use another output folder",
                tz.name()
            )));
        }
        Ok(Self {
            out: out.to_path_buf(),
            state,
            clock,
            lookback_days,
            tz,
            crash: CrashPoints::from_env(),
            progress: ProgressBar::hidden(),
            _lock: lock,
        })
    }

    /// Shows a progress bar on standard error when it is a terminal.
    pub fn with_progress_bar(mut self) -> Self {
        use std::io::IsTerminal;
        if std::io::stderr().is_terminal() {
            self.progress = ProgressBar::new(0).with_style(
                ProgressStyle::with_template("{spinner} {bar:30} {pos}/{len} windows  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
        }
        self
    }

    /// The state database.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The output folder.
    pub fn output(&self) -> &Path {
        &self.out
    }

    /// Today in the time zone of the windows.
    pub fn today(&self) -> NaiveDate {
        self.clock.now().with_timezone(&self.tz).date_naive()
    }

    /// Whether a day is past the lateness allowance today.
    pub fn is_settled(&self, day: NaiveDate) -> bool {
        (self.today() - day).num_days() > i64::from(self.lookback_days)
    }

    /// The windows due for `targets` over the days `from..=to`, most recent first.
    pub fn plan(
        &self,
        targets: &[Target],
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Plan, ExportError> {
        let mut plan = Plan::default();
        let to = to.min(self.today());
        for t in targets {
            let known = self.state.windows(&t.project)?;
            let per_window = self.state.recent_rows(&t.project)?.map_or(1, |rows| {
                (rows.max(1) as u64).div_ceil(u64::from(PAGE_LIMIT))
            });
            let mut day = to;
            while day >= from {
                if known.get(&day).is_some_and(|w| w.is_final) {
                    plan.skipped_final += 1;
                } else {
                    let (offsets, complete) = self.state.progress(&t.project, day)?;
                    let stored = offsets.len() as u64;
                    let expected = if complete {
                        0
                    } else {
                        per_window.saturating_sub(stored).max(1)
                    };
                    plan.due.push(Due {
                        project: t.project.clone(),
                        day,
                        becomes_final: self.is_settled(day),
                        stored_pages: stored,
                        expected_requests: expected,
                    });
                }
                match day.pred_opt() {
                    Some(d) => day = d,
                    None => break,
                }
            }
            let org = t.client.organization().to_string();
            let limits = t.client.settings().limits;
            let used = t
                .client
                .budget()
                .used(&t.client.analytics_scope(), self.clock.now());
            plan.budgets.insert(
                org.clone(),
                (limits.effective(limits.analytics_per_hour), used),
            );
            plan.org_of.insert(t.project.clone(), org);
        }
        // Most recent first, projects interleaved.
        plan.due
            .sort_by(|a, b| b.day.cmp(&a.day).then(a.project.cmp(&b.project)));
        plan.expected_requests = plan.due.iter().map(|d| d.expected_requests).sum();
        Ok(plan)
    }

    /// Carries out a plan: first the first page of every window (it carries the day's totals),
    /// then the rest of each window, most recent first; each window is checked, written and
    /// recorded as soon as it is complete. A window that fails is reported and the run goes on.
    pub async fn run(&self, targets: &[Target], plan: &Plan) -> Summary {
        let clients: HashMap<&str, &Client> = targets
            .iter()
            .map(|t| (t.project.as_str(), &t.client))
            .collect();
        let mut summary = Summary {
            skipped_final: plan.skipped_final,
            ..Summary::default()
        };
        self.progress.set_length(plan.due.len() as u64);
        if !self.progress.is_hidden() {
            crate::progress::show(&self.progress);
            // The spinner turns during a budget wait too.
            self.progress
                .enable_steady_tick(std::time::Duration::from_millis(250));
        }
        let mut sent: HashMap<(String, NaiveDate), u64> = HashMap::new();
        let mut open: Vec<&Due> = Vec::new();
        let mut stops = Stops::default();
        for due in &plan.due {
            let Some(client) = clients.get(due.project.as_str()) else {
                continue;
            };
            if stops.skip(due, client, &mut summary) {
                self.progress.inc(1);
                continue;
            }
            let result = self.first_page(client, due, &mut sent).await;
            match result {
                Ok(true) => {
                    if let Err(e) = self.complete(client, due, &mut sent, &mut summary).await {
                        self.failed(due, client, e, &mut summary, &mut stops);
                    }
                }
                Ok(false) => open.push(due),
                Err(e) => self.failed(due, client, e, &mut summary, &mut stops),
            }
        }
        for due in open {
            let Some(client) = clients.get(due.project.as_str()) else {
                continue;
            };
            if stops.skip(due, client, &mut summary) {
                self.progress.inc(1);
                continue;
            }
            if let Err(e) = self.complete(client, due, &mut sent, &mut summary).await {
                self.failed(due, client, e, &mut summary, &mut stops);
            }
        }
        summary.requests = sent.values().sum();
        for t in targets {
            t.client.budget().release();
        }
        self.progress.finish_and_clear();
        crate::progress::hide();
        summary
    }

    /// Records a failed window. A rejected key or an unreachable service stops the rest of
    /// the run for the organization (a 403, for the project): reported once, not per window.
    fn failed(
        &self,
        due: &Due,
        client: &Client,
        e: ExportError,
        summary: &mut Summary,
        stops: &mut Stops,
    ) {
        metrics::counter!("docpipe_windows_failed_total", "project" => due.project.clone())
            .increment(1);
        let scope = match &e {
            ExportError::Api(a) => match a.kind {
                crate::api::ErrorKind::BadKey | crate::api::ErrorKind::Connect(_) => {
                    Some(format!("organization {}", client.organization()))
                }
                crate::api::ErrorKind::Forbidden { .. } => Some(format!("project {}", due.project)),
                _ => None,
            },
            _ => None,
        };
        match scope {
            Some(scope) => {
                tracing::error!(project = %due.project, day = %due.day, "{e}; the rest of this run for {scope} is skipped");
                stops.by_scope.insert(scope, e.to_string());
            }
            None => tracing::error!(project = %due.project, day = %due.day, "window failed: {e}"),
        }
        summary
            .failed
            .push((due.project.clone(), due.day, e.to_string()));
        self.progress.inc(1);
    }

    /// Fetches the first page unless it is stored; returns whether the walk is complete.
    async fn first_page(
        &self,
        client: &Client,
        due: &Due,
        sent: &mut HashMap<(String, NaiveDate), u64>,
    ) -> Result<bool, ExportError> {
        let (offsets, complete) = self.state.progress(&due.project, due.day)?;
        if offsets.first() == Some(&0) {
            return Ok(complete);
        }
        let page = client
            .page_views(
                &due.project,
                Window::local_day(due.day, self.tz),
                PAGE_LIMIT,
                0,
            )
            .await?;
        *sent.entry((due.project.clone(), due.day)).or_default() += 1;
        self.state.put_page(&due.project, due.day, 0, &page)?;
        self.crash.hit("page stored");
        Ok(!page.has_more)
    }

    /// Walks the rest of a window, checks it (walking again once on a mismatch), writes it.
    async fn complete(
        &self,
        client: &Client,
        due: &Due,
        sent: &mut HashMap<(String, NaiveDate), u64>,
        summary: &mut Summary,
    ) -> Result<(), ExportError> {
        let result = async {
            let mut pages = self.walk_rest(client, due, sent).await?;
            let mut mismatch = check(&pages).err();
            if let Some(m) = &mismatch {
                tracing::warn!(project = %due.project, day = %due.day, "{m}; walking the window again");
                self.state.drop_pages(&due.project, due.day)?;
                pages = self.walk_rest(client, due, sent).await?;
                mismatch = check(&pages).err();
            }
            let requests = sent.get(&(due.project.clone(), due.day)).copied().unwrap_or(0);
            self.write(due, &pages, requests, mismatch)
        }
        .await;
        match result {
            Ok(outcome) => {
                metrics::counter!("docpipe_rows_exported_total", "project" => due.project.clone())
                    .increment(outcome.rows.max(0) as u64);
                metrics::counter!("docpipe_windows_written_total", "project" => due.project.clone())
                    .increment(1);
                self.progress.inc(1);
                let rows = summary.rows() + outcome.rows;
                let requests: u64 = sent.values().sum();
                self.progress.set_message(format!(
                    "{rows} rows, {requests} requests; last {} {}",
                    outcome.project, outcome.day
                ));
                if let Some(m) = &outcome.mismatch {
                    tracing::warn!(project = %due.project, day = %due.day, "window written with a persistent mismatch: {m}");
                } else if self.progress.is_hidden() {
                    tracing::info!(project = %due.project, day = %due.day, rows = outcome.rows, requests = outcome.requests, is_final = outcome.is_final, "window written");
                } else {
                    tracing::debug!(project = %due.project, day = %due.day, rows = outcome.rows, requests = outcome.requests, "window written");
                }
                summary.windows.push(outcome);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Fetches the pages after the last stored one, storing each; returns every page of the
    /// window (those stored before, read back once, then those just fetched).
    async fn walk_rest(
        &self,
        client: &Client,
        due: &Due,
        sent: &mut HashMap<(String, NaiveDate), u64>,
    ) -> Result<Vec<StoredPage>, ExportError> {
        let mut pages = self.state.pages(&due.project, due.day)?;
        if pages.last().is_some_and(|p| !p.page.has_more) {
            return Ok(pages);
        }
        let start = pages.last().map_or(0, |p| p.offset + u64::from(PAGE_LIMIT));
        let walk = client.walk(&due.project, Window::local_day(due.day, self.tz), start);
        futures::pin_mut!(walk);
        while let Some(fetched) = walk.next().await {
            let fetched = fetched?;
            *sent.entry((due.project.clone(), due.day)).or_default() += 1;
            self.state
                .put_page(&due.project, due.day, fetched.offset, &fetched.page)?;
            self.crash.hit("page stored");
            pages.push(StoredPage {
                offset: fetched.offset,
                page: fetched.page,
            });
        }
        Ok(pages)
    }

    fn write(
        &self,
        due: &Due,
        pages: &[StoredPage],
        requests: u64,
        mismatch: Option<String>,
    ) -> Result<WindowOutcome, ExportError> {
        let at: DateTime<Utc> = self.clock.now();
        let rows: Vec<&Rows> = pages.iter().map(|p| &p.page.views).collect();
        let totals = pages.last().map(|p| p.page.totals).unwrap_or_default();
        let is_final = due.becomes_final && mismatch.is_none();
        let n = rows.iter().map(|r| r.len() as i64).sum();
        let views = parquet::write_page_views(&self.out, &due.project, due.day, &rows, at)?;
        let site = match parquet::write_site_totals(
            &self.out,
            &due.project,
            due.day,
            totals,
            n,
            at,
            is_final,
        ) {
            Ok(s) => s,
            Err(e) => {
                views.abandon();
                return Err(e.into());
            }
        };
        self.crash.hit("before rename");
        views.commit()?;
        site.commit()?;
        self.crash.hit("before state commit");
        self.state.finish(&Done {
            project: due.project.clone(),
            day: due.day,
            is_final,
            rows: n,
            totals,
            requests,
            mismatch: mismatch.clone(),
            at,
        })?;
        Ok(WindowOutcome {
            project: due.project.clone(),
            day: due.day,
            rows: n,
            totals,
            is_final,
            requests,
            mismatch,
        })
    }
}

/// The quality checks of a complete walk: pages contiguous from 0, the same totals on every page,
/// no path twice, and rows that sum to the totals.
pub fn check(pages: &[StoredPage]) -> Result<(), String> {
    for (i, p) in pages.iter().enumerate() {
        if p.offset != i as u64 * u64::from(PAGE_LIMIT) {
            return Err(format!("page at offset {} is out of sequence", p.offset));
        }
    }
    if pages.last().is_none_or(|p| p.page.has_more) {
        return Err("walk incomplete".into());
    }
    let totals = pages[0].page.totals;
    if let Some(p) = pages.iter().find(|p| p.page.totals != totals) {
        return Err(format!(
            "totals changed during the walk (offset {}: {} views, offset 0: {})",
            p.offset, p.page.totals.total, totals.total
        ));
    }
    let rows: usize = pages.iter().map(|p| p.page.views.len()).sum();
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(rows, foldhash::fast::RandomState::default());
    let mut sum = Counts::default();
    for r in pages.iter().flat_map(|p| p.page.views.iter()) {
        if !seen.insert(r.path) {
            return Err(format!("path {} appears twice", r.path));
        }
        sum.human += r.human;
        sum.ai += r.ai;
        sum.total += r.total;
    }
    if sum != totals {
        return Err(format!(
            "rows sum to {} human + {} ai = {}, totals say {} + {} = {}",
            sum.human, sum.ai, sum.total, totals.human, totals.ai, totals.total
        ));
    }
    Ok(())
}

/// Prints a plan for people.
pub fn describe_plan(plan: &Plan) -> String {
    let mut out = String::new();
    let provisional = plan.due.iter().filter(|d| !d.becomes_final).count();
    let resumed = plan.due.iter().filter(|d| d.stored_pages > 0).count();
    out += &format!(
        "plan: {} windows due ({} provisional, {} resumed), {} skipped as final, about {} analytics requests\n",
        plan.due.len(),
        provisional,
        resumed,
        plan.skipped_final,
        plan.expected_requests
    );
    let mut by_project: BTreeMap<&str, Vec<&Due>> = BTreeMap::new();
    for d in &plan.due {
        by_project.entry(&d.project).or_default().push(d);
    }
    for (p, due) in by_project {
        let first = due.iter().map(|d| d.day).min().unwrap_or_default();
        let last = due.iter().map(|d| d.day).max().unwrap_or_default();
        let req: u64 = due.iter().map(|d| d.expected_requests).sum();
        out += &format!(
            "  {p}: {} windows {first}..{last}, about {req} requests\n",
            due.len()
        );
    }
    for (org, (limit, used)) in &plan.budgets {
        out += &format!("  budget of {org}: {limit} requests/hour, {used} used in the last hour\n");
    }
    let eta = plan.eta();
    if eta.is_zero() {
        out += "  ETA: within the current hour's budget\n";
    } else {
        out += &format!("  ETA: about {} h at the budget\n", eta.as_secs() / 3600);
    }
    out
}

/// Prints a summary for people.
pub fn describe_summary(s: &Summary) -> String {
    let finals = s.windows.iter().filter(|w| w.is_final).count();
    let mut out = format!(
        "exported {} windows ({} final, {} provisional), {} rows, {} analytics requests; {} windows already final were skipped\n",
        s.windows.len(),
        finals,
        s.windows.len() - finals,
        s.rows(),
        s.requests,
        s.skipped_final
    );
    for w in s.windows.iter().filter(|w| w.mismatch.is_some()) {
        out += &format!(
            "  mismatch in {} {}: {}\n",
            w.project,
            w.day,
            w.mismatch.as_deref().unwrap_or_default()
        );
    }
    // One line per cause: the windows a rejected key or an unreachable service stopped are
    // counted with the failure that stopped them.
    let mut causes: Vec<(&str, Vec<(&str, NaiveDate)>)> = Vec::new();
    for (p, d, e) in &s.failed {
        let cause = e.strip_prefix("skipped: ").unwrap_or(e);
        match causes.iter_mut().find(|(c, _)| *c == cause) {
            Some((_, windows)) => windows.push((p, *d)),
            None => causes.push((cause, vec![(p, *d)])),
        }
    }
    for (cause, windows) in causes {
        match windows.as_slice() {
            [(p, d)] => out += &format!("  failed {p} {d}: {cause}\n"),
            _ => out += &format!("  {} windows failed: {cause}\n", windows.len()),
        }
    }
    out
}
