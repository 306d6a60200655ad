//! What a dataset brings to the one window path (`export/window.rs`): its [`Walk`] (its
//! decoded page, how a page is fetched, kept and checked, the partitions it writes), over a
//! [`Sink`] (the state, the output folder, the clock), and what a window written comes to.
//! Page views' walk is in `page_views/walk.rs`, the shaped datasets' in `shape_walk.rs`.

use super::parquet::WriteError;
use crate::api::Client;
use crate::api::analytics::At;
use crate::api::error::ApiError;
use crate::api::views::Counts;
use crate::clock::SharedClock;
use crate::store::{Store, StoreError, WalkKey};
use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;
use std::borrow::Cow;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Export errors.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The service (boxed: the error stays small on every `Result`'s path).
    #[error(transparent)]
    Api(Box<ApiError>),
    /// The state database, or the output folder.
    #[error(transparent)]
    State(#[from] StoreError),
    /// Writing Parquet.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A walk the service led to the bound of pages ([`crate::api::views::MAX_WALK_PAGES`]):
    /// the window is stuck, and tried again at a falling rate.
    #[error(transparent)]
    Bound(Box<ApiError>),
}

impl From<ApiError> for ExportError {
    fn from(e: ApiError) -> Self {
        ExportError::Api(Box::new(e))
    }
}

impl ExportError {
    /// Whether the storage failed (a full disk, a read-only or unwritable folder, a damaged
    /// state, the budget's log): not the window's fault, and the same for every window after.
    pub fn is_storage(&self) -> bool {
        match self {
            ExportError::State(_) => true,
            ExportError::Write(w) => w.is_storage(),
            ExportError::Api(a) => matches!(a.kind, crate::api::ErrorKind::Budget(_)),
            ExportError::Bound(_) => false,
        }
    }

    /// Whether the service's data was refused (its paging led the walk astray, a body not as
    /// documented, rows docpipe cannot encode): the window's stored pages are worth nothing.
    pub fn refuses_data(&self) -> bool {
        match self {
            ExportError::Api(a) => matches!(
                a.kind,
                crate::api::ErrorKind::Paging(_) | crate::api::ErrorKind::Malformed(_)
            ),
            ExportError::Write(WriteError::Encode { .. }) | ExportError::Bound(_) => true,
            _ => false,
        }
    }

    /// The error of a walk that reached the bound of pages (see [`ExportError::Bound`]).
    pub(crate) fn bound(self) -> Self {
        match self {
            ExportError::Api(a) => ExportError::Bound(a),
            e => e,
        }
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
        Self::from_var("DOCPIPE_CRASH_AT")
    }

    /// Reads the crash point from the variable `name` (the stream's: `DOCPIPE_CRASH_AT_STREAM`).
    pub fn from_var(name: &str) -> Self {
        Self {
            at: std::env::var(name).ok().and_then(|v| v.parse().ok()),
            seen: AtomicU64::new(0),
        }
    }

    /// A crash point: the process aborts here when it is the one asked for.
    pub fn hit(&self, what: &str) {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if self.at == Some(n) {
            eprintln!("crash point {n}: {what}");
            std::process::abort();
        }
    }
}

/// What a walk writes through: the state, the output folder, the windows' time zone, the
/// clock and the crash points (not the exporter, whose plan and run are not a walk's).
pub struct Sink<'a> {
    /// The state: pages kept, windows recorded.
    pub store: &'a Store,
    /// The output folder.
    pub out: &'a Path,
    /// The time zone of the windows.
    pub tz: Tz,
    /// The exporter's clock.
    pub clock: &'a SharedClock,
    /// The crash points of the tests of crash safety.
    pub crash: &'a CrashPoints,
}

impl Sink<'_> {
    /// Now, on the exporter's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}

/// What a window's first page showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstPage {
    /// Its rows.
    pub rows: usize,
    /// Whether the service says there are more.
    pub more: bool,
    /// How it differs from what docpipe reads (none: it does not).
    pub differs: Option<String>,
    /// The id of an assistant turn on it, whose thread a probe can read.
    pub thread: Option<String>,
}

/// What a dataset brings to the window path.
pub(crate) trait Walk {
    /// A decoded page.
    type Page;
    /// The walk, as the page store keys its pages.
    fn key(&self) -> &WalkKey;
    /// A page as the page store keeps it (`body`: as the service sent it).
    fn keep<'p>(&self, page: &'p Self::Page, body: &'p [u8]) -> Cow<'p, [u8]>;
    /// A kept page read back (`None`: kept by another version of docpipe).
    fn unkeep(&self, kept: &[u8]) -> Option<Self::Page>;
    /// Where the request after `pages` starts (`None`: the walk is complete), or why the
    /// pages so far lead nowhere.
    fn next(&self, pages: &[Self::Page]) -> Result<Option<At>, String>;
    /// Fetches the page at `at`, with its body as sent.
    async fn fetch(&self, client: &Client, at: &At) -> Result<(Self::Page, Vec<u8>), ExportError>;
    /// The window's first page: where the walk starts, fetched (what the exporter's probe
    /// compares and `check` shows).
    async fn first_page(&self, client: &Client) -> Result<(Self::Page, Vec<u8>), ExportError> {
        let at = self
            .next(&[])
            .map_err(|d| self.astray(d))?
            .unwrap_or(At::Start);
        self.fetch(client, &at).await
    }
    /// What a first page shows `check`: its rows, whether there are more, how it differs from
    /// what docpipe reads, the id of a thread to read.
    fn glance(&self, first: &Self::Page) -> FirstPage;
    /// A hash of a page's rows (`None`: it has none), for the guards against a service that
    /// ignores the paging (a page seen before) or leads it nowhere (empty pages that say
    /// there is more, [`crate::api::views::MAX_EMPTY_RUN`] in a row).
    fn hash(&self, page: &Self::Page) -> Option<u64>;
    /// The error of a walk the service led astray.
    fn astray(&self, detail: String) -> ExportError;
    /// What a probe compares with the stored one (`None`: the day cannot stand as stored).
    fn fingerprint(&self, first: &Self::Page) -> Option<String>;
    /// A probed day found as stored, now final: its partitions and state made final.
    fn settle(&self, sink: &Sink<'_>, first: &Self::Page) -> Result<(), ExportError>;
    /// Page `n` of the walk (from 0: a walk begun again starts again), stored and taken into
    /// account by the guards, as the walk keeps it in memory until its end: a walk whose pages
    /// together may be far larger than memory allows (a span's) notes what it needs of their
    /// rows here, drops them, and reads them back from the page store to write them.
    fn shed(&self, _n: usize, _page: &mut Self::Page) {}
    /// The checks of a complete walk (rows sent twice alike may be dropped first): the
    /// mismatch found, if any (the inner error), or why the walk could not be checked.
    fn check(
        &mut self,
        sink: &Sink<'_>,
        pages: &mut Vec<Self::Page>,
    ) -> Result<Result<(), String>, ExportError>;
    /// A mismatch found again after walking again: written with this doubt, or refused.
    fn doubt(&self, mismatch: String) -> Result<String, ExportError>;
    /// Writes the window's partitions and records it in the state.
    fn write(
        &mut self,
        sink: &Sink<'_>,
        pages: Vec<Self::Page>,
        mismatch: Option<String>,
        requests: u64,
    ) -> Result<WindowOutcome, ExportError>;
}

/// What happened to one window written, of any dataset: what every window has, then what
/// page views' days have (their totals, a mismatch, rows set aside, views of no listed page),
/// then what the shaped datasets' windows have (a day cut off, rows outside a span, values and
/// fractions docpipe did not expect); zero where a dataset has no such thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowOutcome {
    /// Dataset.
    pub dataset: &'static str,
    /// Project.
    pub project: String,
    /// Its (first) day.
    pub day: NaiveDate,
    /// The day after its last.
    pub to: NaiveDate,
    /// Rows written.
    pub rows: i64,
    /// Requests sent for it in this run.
    pub requests: u64,
    /// Final.
    pub is_final: bool,
    /// The day's totals written (page views).
    pub totals: Counts,
    /// A mismatch that persisted after one re-walk (page views).
    pub mismatch: Option<String>,
    /// Rows set aside in `rejects/` (page views: counts docpipe cannot store faithfully).
    pub rejected: u64,
    /// Views the totals count beyond the rows (page views: `site_totals.unlisted`).
    pub unlisted: i64,
    /// For `feedback_by_page`: the service had more rows than it lets anyone fetch.
    pub cut_off: bool,
    /// Span datasets: rows dated outside the days asked for, set aside in the outside table.
    pub outside: u64,
    /// Values of its choice columns outside docpipe's lists, kept as they are: per column,
    /// each value and its rows.
    pub unknown: Vec<(&'static str, Vec<(String, u64)>)>,
    /// Counts the service sent with a fraction: rounded in the table, kept as sent in
    /// `<table>_fractions`.
    pub fractions: Vec<super::shape::Fraction>,
}

impl WindowOutcome {
    /// A window written of `dataset`, with nothing beyond its rows, requests and finality.
    pub fn of(dataset: &'static str, project: &str, (day, to): (NaiveDate, NaiveDate)) -> Self {
        Self {
            dataset,
            project: project.to_string(),
            day,
            to,
            rows: 0,
            requests: 0,
            is_final: false,
            totals: Counts::default(),
            mismatch: None,
            rejected: 0,
            unlisted: 0,
            cut_off: false,
            outside: 0,
            unknown: Vec::new(),
            fractions: Vec::new(),
        }
    }

    /// The log lines of what a window written holds beyond the event (rows set aside, views
    /// without a listed path, a mismatch, a day cut off).
    pub fn log(&self) {
        let (project, day) = (&self.project, self.day);
        if self.rejected > 0 {
            tracing::warn!(%project, %day, rejected = self.rejected, "rows set aside in rejects/: counts docpipe cannot store faithfully; the day stays provisional");
        }
        if self.unlisted != 0 && self.mismatch.is_none() {
            tracing::info!(%project, %day, unlisted = self.unlisted, "the service's totals count views without a listed path: kept in site_totals.unlisted");
        }
        if let Some(m) = &self.mismatch {
            tracing::warn!(%project, %day, "window written with a persistent mismatch: {m}");
        }
        if self.cut_off {
            tracing::debug!(%project, %day, "{}: the service has more rows than the 100 it lets anyone fetch; the day's rows are marked cut_off", self.dataset);
        }
    }
}
