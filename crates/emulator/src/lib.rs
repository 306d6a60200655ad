//! A faithful stand-in of the documentation platform's service, as an axum `Router`.
//!
//! It serves page views, agent jobs and the v1 assistant with the service's authentication,
//! limits and error bodies, plus injectable faults and request counters under `/_emulator/`.

/// The demo's data file (`sample_data/demo.toml`), built into the binary.
pub const DEMO_DATA: &str = include_str!("../../../sample_data/demo.toml");

pub mod analytics;
pub mod assistant;
pub mod data;
pub mod datasets;
pub mod effects;
pub mod faults;
pub mod generate;
pub mod jobs;
pub mod records;
pub mod replay;
pub mod stream;

use axum::Json;
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Utc};
use data::{DataFile, KeyKind};
use docpipe_catalog::clock::SharedClock;
use docpipe_catalog::ratelimit::SlidingWindow;
use generate::{Generator, Row};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The operations the emulator counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// GET page views.
    Views,
    /// POST create job.
    JobCreate,
    /// GET job.
    JobGet,
    /// POST follow-up message.
    JobMessage,
    /// POST assistant message.
    Assistant,
    /// GET unique visitors.
    Visitors,
    /// GET searches.
    Searches,
    /// GET feedback.
    Feedback,
    /// GET feedback by page.
    FeedbackByPage,
    /// GET assistant conversations.
    Conversations,
    /// GET an assistant thread.
    Thread,
    /// GET assistant caller stats.
    CallerStats,
    /// POST an automation's trigger.
    Trigger,
}

impl Op {
    /// The operation that serves a dataset's pages, found as a request to its endpoint is
    /// (`None`: an endpoint the emulator does not serve).
    pub fn of_endpoint(endpoint: &str) -> Option<Self> {
        let path = endpoint.replace("{project}", "p").replace("{thread}", "t");
        faults::classify(&axum::http::Method::GET, &path).map(|(op, _)| op)
    }

    /// Name used in stats.
    pub fn name(self) -> &'static str {
        match self {
            Op::Views => "views",
            Op::JobCreate => "job_create",
            Op::JobGet => "job_get",
            Op::JobMessage => "job_message",
            Op::Assistant => "assistant",
            Op::Visitors => "visitors",
            Op::Searches => "searches",
            Op::Feedback => "feedback",
            Op::FeedbackByPage => "feedback_by_page",
            Op::Conversations => "conversations",
            Op::Thread => "thread",
            Op::CallerStats => "caller_stats",
            Op::Trigger => "trigger",
        }
    }
}

/// Counters of one operation.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct OpStats {
    /// Requests received.
    pub requests: u64,
    /// Requests by project (or domain).
    pub by_project: BTreeMap<String, u64>,
    /// Responses by status code.
    pub by_status: BTreeMap<u16, u64>,
}

/// A thread of the assistant: its key, its domain's project, when it began, and its messages
/// (role, content, when), which the analytics threads operation serves.
#[derive(Debug, Clone)]
struct Thread {
    key: String,
    domain: String,
    project: String,
    created: DateTime<Utc>,
    messages: Vec<(&'static str, String, DateTime<Utc>)>,
    /// The roles of the conversation each request of the thread sent, in order.
    received: Vec<Vec<String>>,
}

/// Mutable state behind one lock.
#[derive(Debug, Default)]
struct Inner {
    analytics: HashMap<String, SlidingWindow>,
    agent: HashMap<String, SlidingWindow>,
    assistant: HashMap<String, SlidingWindow>,
    jobs: HashMap<(String, String), jobs::Job>,
    /// Each trigger that started a run: project, automation and the run's job.
    triggers: Vec<(String, String, String)>,
    threads: HashMap<String, Thread>,
    /// Each question the v1 assistant was asked, in order: its domain and the question.
    asked: Vec<(String, String)>,
    stats: BTreeMap<&'static str, OpStats>,
    next_id: u64,
    /// When each wave added by hand came.
    extra_late_waves: Vec<DateTime<Utc>>,
    cache: Vec<(RowsKey, Arc<Vec<Row>>)>,
    refused_over_limit: BTreeMap<&'static str, u64>,
    /// What the jobs' pull requests changed.
    effects: Vec<effects::Effect>,
    /// Keys expired while it runs (`/_emulator/expire`): 401 from then on.
    expired: Vec<String>,
}

type RowsKey = (String, NaiveDateTime, NaiveDateTime, NaiveDate, u64);

/// The emulator: data, clock, generators and state.
#[derive(Debug)]
pub struct Emulator {
    data: DataFile,
    clock: SharedClock,
    started: DateTime<Utc>,
    generators: HashMap<String, Generator>,
    dice: AtomicU64,
    burst: AtomicU64,
    /// Every operation answers 503 while set ([`Emulator::set_outage`]).
    outage: std::sync::atomic::AtomicBool,
    inner: Mutex<Inner>,
}

/// An error response as the service sends it: `{"error": message, "details"?: [{"message"}]}`,
/// with `Retry-After` on a 429.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The `error` field.
    pub message: String,
    /// The `details` messages, if any.
    pub details: Vec<String>,
    /// `Retry-After` seconds.
    pub retry_after_secs: Option<u64>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = if self.details.is_empty() {
            json!({ "error": self.message })
        } else {
            let details: Vec<Value> = self
                .details
                .iter()
                .map(|m| json!({ "message": m }))
                .collect();
            json!({ "error": self.message, "details": details })
        };
        let mut resp = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// A JSON error: `{"error": message}`.
pub fn error(status: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        message: message.into(),
        details: Vec::new(),
        retry_after_secs: None,
    }
}

/// A 400 with details, as the analytics endpoints send it.
pub fn invalid(details: &[String]) -> ApiError {
    ApiError {
        details: details.to_vec(),
        ..error(StatusCode::BAD_REQUEST, "Invalid query parameters")
    }
}

/// A 429 with `Retry-After` in whole seconds (at least 1).
pub fn too_many(wait: chrono::Duration, what: &str) -> ApiError {
    let secs = (wait.num_milliseconds().max(0) as u64)
        .div_ceil(1000)
        .max(1);
    ApiError {
        retry_after_secs: Some(secs),
        ..error(
            StatusCode::TOO_MANY_REQUESTS,
            format!("Rate limit exceeded for {what}"),
        )
    }
}

/// What a handler returns.
pub type Reply = Result<Response, ApiError>;

/// Which limit a request counts against.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// Analytics, per organization.
    Analytics,
    /// Follow-ups and job creations, per project.
    Agent,
    /// Assistant, per organization.
    Assistant,
}

impl Emulator {
    /// An emulator over validated data, reading time from `clock`.
    pub fn new(data: DataFile, clock: SharedClock) -> Arc<Self> {
        let generators = data
            .projects
            .iter()
            .map(|p| (p.id.clone(), Generator::new(data.seed, data.start_date, p)))
            .collect();
        let started = clock.now();
        let mut inner = Inner::default();
        for seed in &data.jobs {
            let job = jobs::Job::seeded(seed, started);
            inner
                .jobs
                .insert((seed.project.clone(), seed.id.clone()), job);
        }
        Arc::new(Self {
            dice: AtomicU64::new(data.faults.seed),
            burst: AtomicU64::new(0),
            outage: std::sync::atomic::AtomicBool::new(false),
            data,
            clock,
            started,
            generators,
            inner: Mutex::new(inner),
        })
    }

    /// The data file in force.
    pub fn data(&self) -> &DataFile {
        &self.data
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the counters half-updated in a way that
        // matters to a test double, so a poisoned lock is recovered.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current time.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The current day, UTC.
    pub fn today(&self) -> NaiveDate {
        self.now().date_naive()
    }

    /// A fresh uniform number in [0, 1) from the fault dice.
    pub fn roll(&self) -> f64 {
        generate::unit(generate::mix(self.dice.fetch_add(1, Ordering::Relaxed)))
    }

    /// A fresh 64-bit random value from the fault dice.
    pub fn roll_u64(&self) -> u64 {
        generate::mix(self.dice.fetch_add(1, Ordering::Relaxed) ^ 0x5EED)
    }

    /// The position of this request in the 429-burst cycle (counts every service request).
    pub fn burst_position(&self) -> u64 {
        self.burst.fetch_add(1, Ordering::Relaxed)
    }

    /// A new unique id with a prefix.
    pub fn next_id(&self, prefix: &str) -> String {
        let mut inner = self.lock();
        inner.next_id += 1;
        format!("{prefix}_{:04}", inner.next_id)
    }

    /// Waves of late events a day has received so far. A wave comes every `late_every_secs`
    /// after the emulator starts; it reaches a day while the day is one of the last
    /// `late_days` (today included), with a chance that falls fourfold with each day of age
    /// (today: every wave, yesterday: one in 4, the day before: one in 16, ...). A day past the
    /// late days keeps what it received: its counts never change again. Waves added by
    /// [`Emulator::add_late_wave`] reach every day that was recent then.
    pub fn late_waves(&self, day: NaiveDate) -> u64 {
        let f = &self.data.faults;
        if f.late_days == 0 {
            return 0;
        }
        let now = self.now();
        let begins = generate::midnight(day).and_utc();
        let ends = begins + chrono::Duration::days(i64::from(f.late_days));
        let every = f.late_every_secs.max(1) as i64;
        let since = |t: DateTime<Utc>| (t - self.started).num_seconds();
        // The waves k (1, 2, ...) at started + k * every within [begins, min(now, ends)).
        let first = ((since(begins).max(every) as u64).div_ceil(every as u64) as i64).max(1);
        let last_at = since(now.min(ends - chrono::Duration::seconds(1)));
        let mut waves = 0;
        if last_at >= every {
            let last = last_at / every;
            for k in first..=last {
                let at = self.started + chrono::Duration::seconds(k * every);
                let age = (at.date_naive() - day).num_days().clamp(0, 31) as u32;
                let roll = generate::mix(
                    self.data.seed ^ (k as u64).wrapping_mul(0x9E37_79B9) ^ day_number(day),
                );
                if roll.is_multiple_of(1u64 << (2 * age)) {
                    waves += 1;
                }
            }
        }
        let extra = self
            .lock()
            .extra_late_waves
            .iter()
            .filter(|t| **t >= begins && **t < ends && **t <= now)
            .count() as u64;
        waves + extra
    }

    /// Expires a key now, as the service does after its lifetime: 401 "API key has expired"
    /// from then on. Whether the data file knows it.
    pub fn expire_key(&self, key: &str) -> bool {
        if self.data.key(key).is_none() {
            return false;
        }
        self.lock().expired.push(key.to_string());
        true
    }

    /// An outage begins (`true`: every operation answers 503) or ends.
    pub fn set_outage(&self, on: bool) {
        self.outage.store(on, Ordering::Relaxed);
    }

    /// Whether an outage is on.
    pub fn in_outage(&self) -> bool {
        self.outage.load(Ordering::Relaxed)
    }

    /// Adds one wave of late events to the recent days now.
    pub fn add_late_wave(&self) {
        let now = self.now();
        self.lock().extra_late_waves.push(now);
    }

    /// The true rows of a project over `from..to` as they stand now (stable order).
    pub fn truth(&self, project: &str, from: NaiveDate, to: NaiveDate) -> Option<Arc<Vec<Row>>> {
        self.truth_between(project, generate::midnight(from), generate::midnight(to))
    }

    /// Every row of a project over the instants `from..to` (UTC, to the minute).
    pub fn truth_between(
        &self,
        project: &str,
        from: NaiveDateTime,
        to: NaiveDateTime,
    ) -> Option<Arc<Vec<Row>>> {
        let generator = self.generators.get(project)?;
        let now = self.now();
        let today = now.date_naive();
        // Nothing after now is counted yet: today's counts grow as the clock moves, refreshed
        // on the hour (as an analytics pipeline's hourly batches would).
        let hour = now.naive_utc();
        let hour = hour
            .date()
            .and_hms_opt(chrono::Timelike::hour(&hour), 0, 0)
            .unwrap_or(hour);
        let to = to.min(hour);
        let from = from.min(to);
        // Each day's waves, counted once: for the cache key and for the rows.
        let mut waves: Vec<(NaiveDate, u64)> = Vec::new();
        if self.data.faults.late_days > 0 {
            let mut d = from.date();
            while d <= to.date() {
                waves.push((d, self.late_waves(d)));
                match d.succ_opt() {
                    Some(n) => d = n,
                    None => break,
                }
            }
        }
        let late_key = waves.iter().fold(self.effect_count(), |k, (_, w)| {
            k.wrapping_mul(31).wrapping_add(*w)
        });
        let key: RowsKey = (project.to_string(), from, to, today, late_key);
        if let Some((_, rows)) = self.lock().cache.iter().find(|(k, _)| *k == key) {
            return Some(rows.clone());
        }
        let late = |day: NaiveDate| waves.iter().find(|(d, _)| *d == day).map_or(0, |(_, w)| *w);
        let changes = self.effects(project);
        let factor = |path: &str, day: NaiveDate| effects::page_factor(&changes, path, day);
        let rows = Arc::new(generator.rows_changed(from, to, today, late, factor));
        let mut inner = self.lock();
        if inner.cache.len() >= 16 {
            inner.cache.remove(0);
        }
        inner.cache.push((key, rows.clone()));
        Some(rows)
    }

    /// The generator of a project.
    pub fn generator(&self, project: &str) -> Option<&Generator> {
        self.generators.get(project)
    }

    /// Takes one request from a limit's budget, or answers with the 429 to send.
    pub fn take(&self, limit: Limit, owner: &str) -> Result<(), ApiError> {
        let now = self.now();
        let l = &self.data.limits;
        let mut inner = self.lock();
        let (map, per_hour, what) = match limit {
            Limit::Analytics => (&mut inner.analytics, l.analytics_per_hour, "analytics"),
            Limit::Agent => (&mut inner.agent, l.agent_per_hour, "agent jobs"),
            Limit::Assistant => (&mut inner.assistant, l.assistant_per_hour, "assistant"),
        };
        let window = map
            .entry(owner.to_string())
            .or_insert_with(|| SlidingWindow::new(per_hour, chrono::Duration::hours(1)));
        match window.try_acquire(now) {
            Ok(()) => Ok(()),
            Err(wait) => {
                *inner.refused_over_limit.entry(what).or_default() += 1;
                Err(too_many(wait, what))
            }
        }
    }

    /// Requests refused because a client went over a limit (not injected 429 bursts), by limit:
    /// `analytics`, `agent jobs`, `assistant`.
    pub fn refused_over_limit(&self) -> BTreeMap<&'static str, u64> {
        self.lock().refused_over_limit.clone()
    }

    /// Records a request and its final status.
    pub fn record(&self, op: Op, project: &str, status: u16) {
        let mut inner = self.lock();
        let s = inner.stats.entry(op.name()).or_default();
        s.requests += 1;
        *s.by_project.entry(project.to_string()).or_default() += 1;
        *s.by_status.entry(status).or_default() += 1;
    }

    /// The counters, by operation name.
    pub fn stats(&self) -> BTreeMap<&'static str, OpStats> {
        self.lock().stats.clone()
    }

    /// Requests of one operation received for a project so far.
    pub fn requests(&self, op: Op, project: &str) -> u64 {
        self.lock()
            .stats
            .get(op.name())
            .and_then(|s| s.by_project.get(project).copied())
            .unwrap_or(0)
    }

    /// Checks the bearer key: its organization when it is of an accepted kind, else the 401/403.
    pub fn authorize(&self, headers: &HeaderMap, want: &[KeyKind]) -> Result<String, ApiError> {
        let Some(raw) = headers.get(header::AUTHORIZATION) else {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "Missing Authorization header",
            ));
        };
        let key = raw
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or("");
        if self.lock().expired.iter().any(|k| k == key) {
            return Err(error(StatusCode::UNAUTHORIZED, "API key has expired"));
        }
        match self.data.key(key) {
            None => Err(error(StatusCode::UNAUTHORIZED, "Invalid API key")),
            Some((KeyKind::Expired, _)) => {
                Err(error(StatusCode::UNAUTHORIZED, "API key has expired"))
            }
            Some((kind, org)) if want.contains(&kind) => Ok(org.to_string()),
            Some((KeyKind::ReadOnlyAdmin, _)) => Err(error(
                StatusCode::FORBIDDEN,
                "Read-only API key cannot be used for this request",
            )),
            Some(_) => Err(error(
                StatusCode::FORBIDDEN,
                "This API key cannot be used for this endpoint",
            )),
        }
    }

    /// A thread asked of the assistant, as the analytics threads operation serves it (message
    /// ids are ULIDs of their times).
    pub fn asked_thread(&self, project: &str, id: &str) -> Option<serde_json::Value> {
        let inner = self.lock();
        let t = inner.threads.get(id).filter(|t| t.project == project)?;
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let messages: Vec<serde_json::Value> = t
            .messages
            .iter()
            .enumerate()
            .map(|(i, (role, content, when))| {
                serde_json::json!({
                    "id": records::ulid(when.timestamp_millis() as u64, i as u128),
                    "role": role, "content": content, "createdAt": at(*when),
                })
            })
            .collect();
        Some(serde_json::json!({"threadId": id, "createdAt": at(t.created), "messages": messages}))
    }

    /// Checks that a project's plan includes an analytics dataset.
    pub fn in_plan(&self, project: &str, dataset: &str) -> Result<(), ApiError> {
        let lacks = self
            .data
            .projects
            .iter()
            .any(|p| p.id == project && p.not_in_plan.iter().any(|d| d == dataset));
        if lacks {
            return Err(error(
                StatusCode::FORBIDDEN,
                format!("Your plan does not include {dataset} analytics"),
            ));
        }
        Ok(())
    }

    /// Checks that a project exists and belongs to the organization.
    pub fn owned_project(&self, org: &str, project: &str) -> Result<(), ApiError> {
        match self.data.projects.iter().find(|p| p.id == project) {
            None => Err(error(StatusCode::NOT_FOUND, "Project not found")),
            Some(p) if p.organization != org => Err(error(
                StatusCode::FORBIDDEN,
                "This API key does not have access to this project",
            )),
            Some(_) => Ok(()),
        }
    }
}

/// Builds the router with every operation, the fault layer and the `/_emulator` endpoints.
pub fn router(emulator: Arc<Emulator>) -> Router {
    let service = Router::new()
        .route("/v1/analytics/{project}/views", get(analytics::views))
        .route("/v1/analytics/{project}/visitors", get(datasets::visitors))
        .route("/v1/analytics/{project}/searches", get(datasets::searches))
        .route("/v1/analytics/{project}/feedback", get(datasets::feedback))
        .route(
            "/v1/analytics/{project}/feedback/by-page",
            get(datasets::feedback_by_page),
        )
        .route(
            "/v1/analytics/{project}/assistant",
            get(datasets::conversations),
        )
        .route(
            "/v1/analytics/{project}/assistant/threads/{thread}",
            get(datasets::thread),
        )
        .route(
            "/v1/analytics/{project}/assistant/caller-stats",
            get(datasets::caller_stats),
        )
        .route("/v2/agent/{project}/job", post(jobs::create))
        .route(
            "/v1/workflow/{project}/{automation}/trigger",
            post(jobs::trigger),
        )
        .route("/v2/agent/{project}/job/{id}", get(jobs::get_job))
        .route("/v2/agent/{project}/job/{id}/message", post(jobs::message))
        .route(
            "/discovery/v1/assistant/{domain}/message",
            post(assistant::message),
        )
        .layer(axum::middleware::from_fn_with_state(
            emulator.clone(),
            faults::layer,
        ));
    Router::new()
        .route("/_emulator/stats", get(stats))
        .route("/_emulator/truth/{project}", get(analytics::truth))
        .route("/_emulator/truth/{project}/{dataset}", get(datasets::truth))
        .route("/_emulator/late", post(late))
        .route("/_emulator/expire", post(expire))
        .merge(service)
        .fallback(|| async { error(StatusCode::NOT_FOUND, "Not found").into_response() })
        .with_state(emulator)
}

async fn stats(axum::extract::State(emu): axum::extract::State<Arc<Emulator>>) -> Response {
    Json(emu.stats()).into_response()
}

async fn late(axum::extract::State(emu): axum::extract::State<Arc<Emulator>>) -> Response {
    emu.add_late_wave();
    StatusCode::NO_CONTENT.into_response()
}

/// `POST /_emulator/expire` with the key as its body: the key expires now (204), or 404 when
/// the data file does not know it.
async fn expire(
    axum::extract::State(emu): axum::extract::State<Arc<Emulator>>,
    body: String,
) -> Response {
    if emu.expire_key(body.trim()) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        error(StatusCode::NOT_FOUND, "no such key in the data file").into_response()
    }
}

/// A router served in a background task until stopped: the emulator's, or a replay's.
#[derive(Debug)]
pub struct Listening {
    /// The address it listens on.
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Listening {
    /// Serves `app` on a listener the caller bound.
    pub fn spawn(listener: tokio::net::TcpListener, app: axum::Router) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        });
        Ok(Self {
            addr,
            shutdown: Some(tx),
            task,
        })
    }

    /// The base address, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving and waits for the task.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// A running emulator server.
#[derive(Debug)]
pub struct Server {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The emulator behind it.
    pub emulator: Arc<Emulator>,
    listening: Listening,
}

impl Server {
    /// Binds `addr` (use `127.0.0.1:0` for a free port) and serves in a background task.
    pub async fn start(emulator: Arc<Emulator>, addr: SocketAddr) -> std::io::Result<Self> {
        Self::serve(emulator, tokio::net::TcpListener::bind(addr).await?)
    }

    /// Serves on a listener the caller bound (a test that holds a port closed, then opens it).
    pub fn serve(
        emulator: Arc<Emulator>,
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<Self> {
        let listening = Listening::spawn(listener, router(emulator.clone()))?;
        Ok(Self {
            addr: listening.addr,
            emulator,
            listening,
        })
    }

    /// The base address, `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.listening.base_url()
    }

    /// Stops serving and waits for the task.
    pub async fn stop(self) {
        self.listening.stop().await;
    }
}

/// A day as a number, for the dice.
fn day_number(day: NaiveDate) -> u64 {
    day.num_days_from_ce() as u64
}
