//! The typed client of the service: one file per operation, plus keys, errors, retry and budget.

pub mod analytics;
pub mod assistant;
pub use docpipe_catalog::capture;
pub use docpipe_state::rate as budget;
pub mod error;
pub mod jobs;
pub mod keys;
pub mod retry;
pub mod stream;
pub mod tls;
pub mod views;

use backon::Retryable;
use budget::Budget;
use bytes::Bytes;
use docpipe_catalog::clock::SharedClock;
use docpipe_catalog::events::{Events, Quiet};
use docpipe_catalog::random::Dice;
pub use error::{ApiError, ErrorKind, Operation};
use futures::StreamExt;
pub use keys::{AdminKey, AssistantKey, KeySource};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Method, StatusCode};
pub use retry::RetryPolicy;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Largest JSON body accepted (a hostile body stops here, not in memory).
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// Longest service message kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;

/// The service's documented limits, per hour.
pub use docpipe_catalog::service::limits as service_limits;

/// The log lines' target: the module they came from before this crate was cut out.
const TARGET: &str = "docpipe::api";

/// Per-hour limits the client keeps under, and the share of them it leaves unused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Analytics requests per organization per hour.
    pub analytics_per_hour: u32,
    /// Follow-ups and job creations per project per hour.
    pub agent_per_hour: u32,
    /// Assistant messages per organization per hour.
    pub assistant_per_hour: u32,
    /// Percent of each limit left for other clients of the same organization.
    pub headroom_percent: u8,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            analytics_per_hour: service_limits::ANALYTICS_PER_HOUR,
            agent_per_hour: service_limits::AGENT_PER_HOUR,
            assistant_per_hour: service_limits::ASSISTANT_PER_HOUR,
            headroom_percent: 5,
        }
    }
}

/// The rate budget's scope of an organization's analytics requests.
pub fn analytics_scope(org: &str) -> String {
    format!("analytics:{org}")
}

impl Limits {
    /// A limit less its headroom, at least 1.
    pub fn effective(&self, per_hour: u32) -> u32 {
        let keep = u64::from(per_hour) * u64::from(100 - self.headroom_percent.min(100)) / 100;
        (keep as u32).max(1)
    }
}

/// How the client talks to the service.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Base address, e.g. `http://127.0.0.1:8080` (no trailing slash needed).
    pub base_url: String,
    /// Timeout of one request (for a stream: until its headers arrive).
    pub timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
    /// Limits.
    pub limits: Limits,
    /// Where every response is captured (`--record DIR`), if anywhere.
    pub record: Option<Arc<capture::Recorder>>,
}

/// A client for one organization: its keys and its budgets.
#[derive(Debug, Clone)]
pub struct Client {
    /// The HTTP client, built when the first request is sent and shared by the clones (one
    /// that sends nothing, as `status` does, never loads the system's certificates).
    http: Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>,
    settings: ClientSettings,
    organization: String,
    /// The keys, shared by the clones: read again from their files or variables at every run
    /// and after a 401 ([`Client::reread_keys`]).
    admin: Arc<RwLock<Option<AdminKey>>>,
    assistant: Arc<RwLock<Option<AssistantKey>>>,
    /// The fingerprint of the admin key last reported as working (one event per key).
    worked: Arc<std::sync::Mutex<Option<String>>>,
    clock: SharedClock,
    budget: Arc<dyn Budget>,
    dice: Arc<Dice>,
    events: Arc<dyn Events>,
    /// Where the analytics requests it sends are recorded (the state's activity tables).
    recorder: Option<Arc<dyn Events>>,
    /// Why it sends analytics requests: `walk`, `probe`, `backfill`, `check`, `thread`.
    purpose: &'static str,
    /// Requests sent by this client and its clones (every attempt, failed ones too).
    sent: Arc<std::sync::atomic::AtomicU64>,
}

/// One request, described so that it can be sent again.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub operation: Operation,
    pub target: String,
    pub method: Method,
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<Bytes>,
    /// `(scope, limit)` of the budget this request counts against.
    pub budget: Option<(String, u32)>,
    pub admin: bool,
    /// Wait for room in the budget (true), or fail at once with `LimitReached` (false).
    pub wait_for_budget: bool,
    /// The answer is a stream read as it comes (the assistant's): the timeout covers the
    /// headers, and then each wait for more of the body, not the whole answer.
    pub streams: bool,
    /// The project a 404 means is unknown (`None`: a 404 names something else, a job or a
    /// thread).
    pub project: Option<String>,
}

impl Client {
    /// A client for `organization`, with whichever keys it has.
    pub fn new(
        settings: ClientSettings,
        organization: &str,
        admin: Option<AdminKey>,
        assistant: Option<AssistantKey>,
        clock: SharedClock,
        budget: Arc<dyn Budget>,
    ) -> Self {
        Self {
            http: Arc::default(),
            settings,
            organization: organization.to_string(),
            admin: Arc::new(RwLock::new(admin)),
            assistant: Arc::new(RwLock::new(assistant)),
            worked: Arc::default(),
            clock,
            budget,
            dice: Arc::new(Dice::from_process()),
            events: Arc::new(Quiet),
            recorder: None,
            purpose: "walk",
            sent: Arc::default(),
        }
    }

    /// The same client (sharing its count), its analytics requests counted under `purpose`.
    pub fn for_purpose(&self, purpose: &'static str) -> Self {
        Self {
            purpose,
            ..self.clone()
        }
    }

    /// The same client, each analytics request it sends recorded by `recorder` as it is sent
    /// (one event: its organization, dataset and purpose), beside `/metrics` and its events.
    pub fn recording_into(mut self, recorder: Arc<dyn Events>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Counts one request of `call` where it is sent: the one count every surface reads
    /// (`/metrics`, the state's hourly spend, the progress bar). An operation that reads a
    /// dataset is an analytics request (its budget is the organization's analytics budget); an
    /// agent job's request counts as purpose `job` of `agent_jobs`, outside that budget.
    fn spend(&self, call: &Call) {
        let (dataset, purpose) = match call.operation.dataset() {
            Some(dataset) => (dataset, self.purpose),
            None if call.operation.is_job() => (
                docpipe_catalog::events::AGENT_JOBS,
                docpipe_catalog::events::JOB,
            ),
            None => return,
        };
        let event = docpipe_catalog::events::Event::Spent {
            org: &self.organization,
            at: self.clock.now(),
            dataset,
            purpose,
            requests: 1,
        };
        event.count();
        if let Some(r) = &self.recorder {
            r.event(&event);
        }
        self.events.event(&event);
    }

    /// How many requests this client (and its clones) sent: every attempt, the failed ones and
    /// the retries too (what the service counts against its limits).
    pub fn requests_sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The same client, reporting its waits for the rate budget to `events`.
    pub fn with_events(mut self, events: Arc<dyn Events>) -> Self {
        self.events = events;
        self
    }

    /// The organization this client speaks for.
    pub fn organization(&self) -> &str {
        &self.organization
    }

    /// The client's settings.
    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// The clock the client reads.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The budget the client spends.
    pub fn budget(&self) -> &Arc<dyn Budget> {
        &self.budget
    }

    /// The analytics budget scope of this organization.
    pub fn analytics_scope(&self) -> String {
        analytics_scope(&self.organization)
    }

    /// Replaces every key this client holds with its redacted form.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        if let Some(k) = &*read(&self.admin) {
            out = out.replace(k.expose(), &k.to_string());
        }
        if let Some(k) = &*read(&self.assistant) {
            out = out.replace(k.expose(), &k.to_string());
        }
        out
    }

    /// The admin key's fingerprint, when it has one.
    pub fn admin_fingerprint(&self) -> Option<String> {
        read(&self.admin).as_ref().map(AdminKey::fingerprint)
    }

    /// Reads the keys again from where they came (a file, the environment) and takes those
    /// that changed: whether one did. A key that no longer reads (a file made readable by
    /// others, emptied, removed) leaves the key read before in place, with a warning.
    pub fn reread_keys(&self) -> bool {
        let org = &self.organization;
        let admin = reread(
            &self.admin,
            org,
            "admin",
            AdminKey::reread,
            AdminKey::source,
        );
        let assistant = reread(
            &self.assistant,
            org,
            "assistant",
            AssistantKey::reread,
            AssistantKey::source,
        );
        admin || assistant
    }

    /// Reports how the service answered the admin key of `call`: refused (`Some`: its words),
    /// or working (once per key).
    fn key_answered(&self, call: &Call, refused: Option<&str>) {
        if !call.admin {
            return;
        }
        let Some(fingerprint) = self.admin_fingerprint() else {
            return;
        };
        if refused.is_none() {
            let mut worked = self
                .worked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if worked.as_deref() == Some(fingerprint.as_str()) {
                return;
            }
            *worked = Some(fingerprint.clone());
        }
        let event = docpipe_catalog::events::Event::KeyAnswered {
            org: &self.organization,
            fingerprint: &fingerprint,
            at: self.clock.now(),
            refused,
        };
        if let Some(r) = &self.recorder {
            r.event(&event);
        }
        self.events.event(&event);
    }

    fn fail(&self, call: &Call, kind: ErrorKind) -> ApiError {
        ApiError {
            operation: call.operation,
            target: call.target.clone(),
            kind,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.settings.base_url.trim_end_matches('/'), path)
    }

    fn auth_header(&self, call: &Call) -> Result<String, ApiError> {
        let bearer = if call.admin {
            read(&self.admin).as_ref().map(AdminKey::bearer)
        } else {
            read(&self.assistant).as_ref().map(AssistantKey::bearer)
        };
        bearer.ok_or_else(|| self.refused(call, "none given: not sent".into()))
    }

    /// The key of `call` refused, with `message`.
    fn refused(&self, call: &Call, message: String) -> ApiError {
        self.fail(
            call,
            ErrorKind::BadKey {
                key: if call.admin { "admin" } else { "assistant" },
                organization: self.organization.as_str().into(),
                source_name: match (call.admin, &*read(&self.admin), &*read(&self.assistant)) {
                    (true, Some(k), _) => k.source().into(),
                    (false, _, Some(k)) => k.source().into(),
                    _ => "its environment variable".into(),
                },
                message,
            },
        )
    }

    /// One attempt: budget, send, and a non-2xx status mapped to its error. A state-changing
    /// request whose fate is uncertain becomes `OutcomeUnknown`.
    #[expect(clippy::too_many_lines)]
    async fn attempt(&self, call: &Call) -> Result<reqwest::Response, ApiError> {
        let auth = self.auth_header(call)?;
        if let Some((scope, limit)) = &call.budget {
            if call.wait_for_budget {
                budget::acquire(
                    self.budget.as_ref(),
                    &self.clock,
                    scope,
                    *limit,
                    self.events.as_ref(),
                )
                .await
                .map_err(|why| self.fail(call, ErrorKind::Budget(why)))?;
            } else {
                match self.budget.try_take(scope, *limit, self.clock.now()) {
                    Ok(()) => {}
                    Err(budget::Refusal::Wait(wait)) => {
                        return Err(self.fail(
                            call,
                            ErrorKind::LimitReached {
                                limit: *limit,
                                wait: wait.to_std().unwrap_or_default(),
                            },
                        ));
                    }
                    Err(budget::Refusal::Broken(why)) => {
                        return Err(self.fail(call, ErrorKind::Budget(why)));
                    }
                }
            }
        }
        let mut url = self.url(&call.path);
        for (i, (k, v)) in call.query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(k);
            url.push('=');
            url.push_str(&escape(v));
        }
        let http = self
            .http
            .get_or_init(|| {
                // `timeout` bounds a request that is not a stream as a whole, and a stream's
                // headers and each wait for more of it (see the assistant's stream).
                crate::tls::install();
                reqwest::Client::builder()
                    .connect_timeout(self.settings.timeout.min(Duration::from_secs(10)))
                    .user_agent(concat!("docpipe/", env!("CARGO_PKG_VERSION")))
                    // An API answers where it is asked: a redirect is reported with where it
                    // points, never followed (with the key) to another address.
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))
            })
            .as_ref()
            .map_err(|e| self.fail(call, ErrorKind::Connect(e.clone())))?;
        let mut req = http
            .request(call.method.clone(), url)
            .header("authorization", auth);
        if let Some(body) = &call.body {
            req = req
                .header("content-type", "application/json")
                .body(body.clone());
        }
        let timeout = self.settings.timeout;
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.spend(call);
        let sent = if call.streams {
            match tokio::time::timeout(timeout, req.send()).await {
                Ok(sent) => sent,
                Err(_) => {
                    count_request(call.operation, "timeout");
                    return Err(self.uncertain(call, ErrorKind::Timeout(timeout)));
                }
            }
        } else {
            req.timeout(timeout).send().await
        };
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                let kind = self.transport(&e);
                let class = match kind {
                    ErrorKind::Timeout(_) => "timeout",
                    ErrorKind::Connect(_) => "connect",
                    _ => "connection",
                };
                count_request(call.operation, class);
                return Err(self.uncertain(call, kind));
            }
        };
        let status = resp.status();
        count_request(call.operation, status.as_str());
        // A streamed answer is recorded too: read whole first, then streamed from memory
        // (under `--record` an answer shows at its end, not as it comes).
        let resp = match &self.settings.record {
            Some(r) => self
                .record(r, call, resp)
                .await
                .map_err(|k| self.uncertain(call, k))?,
            None => resp,
        };
        if status.is_success() {
            self.key_answered(call, None);
            return Ok(resp);
        }
        let retry_after = retry_after(resp.headers());
        let location = resp.headers().get(reqwest::header::LOCATION).map(|v| {
            docpipe_catalog::text::one_line(&String::from_utf8_lossy(v.as_bytes())).into_owned()
        });
        let kind = content_type(resp.headers());
        let text = match read_capped(resp).await {
            Ok(b) => b,
            Err(kind) => return Err(self.uncertain(call, kind)),
        };
        let message = self.service_message(&text, &kind);
        let kind = match status {
            StatusCode::BAD_REQUEST => ErrorKind::Invalid { message },
            StatusCode::UNAUTHORIZED => {
                self.key_answered(call, Some(&message));
                return Err(self.refused(call, format!("401: {message}")));
            }
            StatusCode::FORBIDDEN => ErrorKind::Forbidden { message },
            StatusCode::NOT_FOUND => match &call.project {
                Some(project) => ErrorKind::UnknownProject {
                    project: project.clone(),
                    message,
                },
                None => ErrorKind::NotFound { message },
            },
            StatusCode::REQUEST_TIMEOUT => ErrorKind::RequestTimeout,
            StatusCode::TOO_MANY_REQUESTS => ErrorKind::RateLimited {
                retry_after,
                // A quick retry would only spend more of the hour.
                next_slot: retry_after.is_none().then(|| self.next_slot(call)),
            },
            s if s.is_server_error() => ErrorKind::Server {
                status: s.as_u16(),
                message,
            },
            s if s.is_redirection() => ErrorKind::Unexpected {
                status: s.as_u16(),
                message: format!(
                    "the service redirects to {}; docpipe does not follow redirects: check service.base_url",
                    location
                        .as_deref()
                        .unwrap_or("no address (no Location header)")
                ),
            },
            s => ErrorKind::Unexpected {
                status: s.as_u16(),
                message,
            },
        };
        Err(self.uncertain(call, kind))
    }

    /// Writes a response's capture and gives back the same response (its body read whole).
    async fn record(
        &self,
        r: &capture::Recorder,
        call: &Call,
        resp: reqwest::Response,
    ) -> Result<reqwest::Response, ErrorKind> {
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = read_capped(resp).await?;
        let kept = capture::KEPT_HEADERS
            .iter()
            .filter_map(|h| {
                let v = headers.get(*h)?.to_str().ok()?;
                Some((h.to_string(), v.to_string()))
            })
            .collect();
        let (text, bytes) = match std::str::from_utf8(&body) {
            Ok(s) => (Some(s.to_string()), None),
            Err(_) => (None, Some(body.clone())),
        };
        let query = call.query.iter().map(|(k, v)| (k.to_string(), v.clone()));
        r.record(
            capture::Capture {
                method: call.method.to_string(),
                path: call.path.clone(),
                query: query.collect(),
                status: status.as_u16(),
                headers: kept,
                body: text,
                body_bytes: bytes,
            },
            |s| self.redact(s),
        );
        let mut rebuilt = http::Response::new(body);
        *rebuilt.status_mut() = status;
        *rebuilt.headers_mut() = headers;
        Ok(reqwest::Response::from(rebuilt))
    }

    /// For a state-changing request, everything but "never reached the service" and 429 and the
    /// 4xx answers is an unknown outcome: the caller must read the job, not resend.
    fn uncertain(&self, call: &Call, kind: ErrorKind) -> ApiError {
        let unsure = matches!(
            kind,
            ErrorKind::Server { .. }
                | ErrorKind::RequestTimeout
                | ErrorKind::Timeout(_)
                | ErrorKind::Connection(_)
                | ErrorKind::Malformed(_)
        );
        if unsure && !call.operation.idempotent() {
            return self.fail(call, ErrorKind::OutcomeUnknown(kind.to_string()));
        }
        self.fail(call, kind)
    }

    fn transport(&self, e: &reqwest::Error) -> ErrorKind {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        let text = self.redact(&text);
        if e.is_timeout() {
            ErrorKind::Timeout(self.settings.timeout)
        } else if e.is_connect() {
            ErrorKind::Connect(text)
        } else {
            ErrorKind::Connection(text)
        }
    }

    /// After a 429 without `Retry-After`: how long until the oldest request the call's budget
    /// counts leaves the service's hour (the next slot the hour frees, as far as docpipe can
    /// know); the whole window for a call without a budget.
    fn next_slot(&self, call: &Call) -> Duration {
        let window = budget::window();
        let whole = window.to_std().unwrap_or(Duration::from_secs(3600));
        let Some((scope, _)) = &call.budget else {
            return whole;
        };
        let now = self.clock.now();
        let used = self.budget.used(scope, now);
        if used == 0 {
            return whole;
        }
        // The first second at which fewer requests count than now.
        let (mut lo, mut hi) = (1, window.num_seconds());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self
                .budget
                .used(scope, now + chrono::Duration::seconds(mid))
                < used
            {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Duration::from_secs(hi as u64)
    }

    /// `{"error": ..., "details": [{"message"}]}`, or the start of a body that is not JSON,
    /// quoted, with its content type (a proxy's HTML page), or the start of other JSON;
    /// redacted and capped.
    fn service_message(&self, body: &[u8], content_type: &str) -> String {
        if !body.is_empty() && !looks_like_json(body) {
            return self.redact(&format!("{}, {content_type}", quote(body)));
        }
        let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        let text = match parsed
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(|e| e.as_str())
        {
            Some(err) => {
                // `[{"message"}]` as documented; a string, or strings, read as well.
                let details: Vec<&str> = match parsed.as_ref().and_then(|v| v.get("details")) {
                    Some(serde_json::Value::String(s)) => vec![s.as_str()],
                    Some(serde_json::Value::Array(a)) => a
                        .iter()
                        .filter_map(|d| d.get("message").unwrap_or(d).as_str())
                        .collect(),
                    _ => Vec::new(),
                };
                if details.is_empty() {
                    err.to_string()
                } else {
                    format!("{err}: {}", details.join("; "))
                }
            }
            None => String::from_utf8_lossy(body).trim().to_string(),
        };
        let text = if text.is_empty() {
            "no message".to_string()
        } else {
            text
        };
        let text: String = text
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_MESSAGE_CHARS)
            .collect();
        self.redact(&text)
    }

    /// Sends with retries and returns the response of the first successful attempt.
    pub(crate) async fn send(&self, call: &Call) -> Result<reqwest::Response, ApiError> {
        self.with_retries(call, || self.attempt(call)).await
    }

    /// Sends with retries, reads the body and decodes it, all inside each attempt (so a cut body
    /// of a read-only request is fetched again).
    pub(crate) async fn send_json<T>(
        &self,
        call: &Call,
        decode: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, ApiError> {
        self.with_retries(call, || async {
            let resp = self.attempt(call).await?;
            let kind = content_type(resp.headers());
            let body = read_capped(resp)
                .await
                .map_err(|k| self.uncertain(call, k))?;
            if !looks_like_json(&body) {
                let quoted = self.redact(&quote(&body));
                return Err(self.uncertain(
                    call,
                    ErrorKind::Malformed(format!("the body is not JSON ({kind}): {quoted}")),
                ));
            }
            decode(&body).map_err(|d| self.uncertain(call, ErrorKind::Malformed(self.redact(&d))))
        })
        .await
    }

    /// Sends with [`Client::retrying`]; after a 401, reads the keys again and, when one
    /// changed (a rotated key file), sends once more with it.
    async fn with_retries<T, F, Fut>(&self, call: &Call, mut f: F) -> Result<T, ApiError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ApiError>>,
    {
        match self.retrying(call, &mut f).await {
            Err(e) if matches!(e.kind, ErrorKind::BadKey { .. }) && self.reread_keys() => {
                self.retrying(call, f).await
            }
            other => other,
        }
    }

    async fn retrying<T, F, Fut>(&self, call: &Call, f: F) -> Result<T, ApiError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ApiError>>,
    {
        let policy = self.settings.retry;
        let clock = self.clock.clone();
        // A body that arrived whole and does not parse is tried once more (a proxy's page, a
        // deploy in progress), not as often as a cut one: each try costs the budget a request.
        let malformed = std::sync::atomic::AtomicU32::new(0);
        f.retry(policy.backoff())
            .sleep(move |d| clock.sleep(d))
            .when(|e: &ApiError| {
                if matches!(e.kind, ErrorKind::Malformed(_))
                    && malformed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 1
                {
                    return false;
                }
                e.retryable()
            })
            .adjust(|e: &ApiError, step| policy.delay(step, e.retry_after(), &self.dice))
            .notify(|e: &ApiError, wait| {
                tracing::warn!(target: TARGET,
                    operation = call.operation.name(),
                    target = %call.target,
                    wait_ms = wait.as_millis() as u64,
                    "retrying: {}",
                    e.kind
                );
            })
            .await
    }
}

/// Reads the key `lock` holds again where it came from: takes it when it changed (true); keeps
/// the one before, with a warning, when it no longer reads.
fn reread<K>(
    lock: &RwLock<Option<K>>,
    org: &str,
    what: &str,
    again: fn(&K) -> Option<Result<K, keys::KeyError>>,
    source: fn(&K) -> &str,
) -> bool {
    let fresh = read(lock).as_ref().and_then(again);
    match fresh {
        Some(Ok(k)) => {
            tracing::info!(target: TARGET, organization = %org, key = %source(&k), "{what} key read again: a new key");
            *lock
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(k);
            true
        }
        Some(Err(e)) => {
            tracing::warn!(target: TARGET, organization = %org, "{what} key: {e}; the key read before is kept");
            false
        }
        None => false,
    }
}

/// The key a lock holds (a poisoned lock still holds it).
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Counts a request in `docpipe_requests_total{operation, status}` (a status code, or
/// `timeout`, `connect`, `connection`): a no-op unless a metrics recorder is installed (the daemon).
fn count_request(operation: Operation, status: &str) {
    metrics::counter!(
        "docpipe_requests_total",
        "operation" => operation.name().replace(' ', "_"),
        "status" => status.to_string()
    )
    .increment(1);
}

/// Percent-escapes a path segment or query value (everything but unreserved characters).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A response's content type as sent, or `no content type`.
fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map_or_else(
            || "no content type".to_string(),
            |v| format!("content type {v}"),
        )
}

/// Whether a body starts as a JSON value does (after white space).
fn looks_like_json(body: &[u8]) -> bool {
    body.iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_none_or(|b| b"{[\"-0123456789tfn".contains(b))
}

/// The first 200 bytes of a body, escaped as Rust escapes bytes, in quotes, with `...` when
/// there is more.
fn quote(body: &[u8]) -> String {
    let head = &body[..body.len().min(200)];
    let more = if body.len() > 200 { "..." } else { "" };
    format!("\"{}\"{more}", head.escape_ascii())
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?;
    retry::parse_retry_after(v, std::time::SystemTime::now())
}

/// Reads a whole body, refusing more than `MAX_BODY_BYTES`.
async fn read_capped(resp: reqwest::Response) -> Result<Vec<u8>, ErrorKind> {
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
    {
        return Err(ErrorKind::Malformed(format!(
            "body larger than {} MiB",
            MAX_BODY_BYTES >> 20
        )));
    }
    // Sized once from the announced length (already known to be within the cap).
    let mut out = Vec::with_capacity(resp.content_length().unwrap_or(0) as usize);
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            if e.is_timeout() {
                ErrorKind::Connection(format!("body timed out: {e}"))
            } else {
                ErrorKind::Connection(format!("body interrupted: {e}"))
            }
        })?;
        if out.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ErrorKind::Malformed(format!(
                "body larger than {} MiB",
                MAX_BODY_BYTES >> 20
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
