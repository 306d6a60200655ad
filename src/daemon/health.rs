//! The daemon's port (`[daemon] listen`): `/` the status page, `/status.json` the same facts
//! for scripts, the trends' charts under `/trends/`, `/metrics` for Prometheus and `/healthz`.
//! An axum router, stopped gracefully with the daemon.
//!
//! Who may see it: the page shows project ids and readers' text, so on an address other than
//! loopback the daemon does not start without a token (`[daemon] status_token_env`); with one,
//! every path but `/healthz` asks for it, as `Authorization: Bearer <token>` or as the cookie
//! `/login?token=<token>` sets (which holds the token's SHA-256, never the token).

use crate::clock::SharedClock;
use crate::config::Settings;
use crate::error::UserError;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use sha2::{Digest, Sha256};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// The cookie `/login` sets.
pub const COOKIE: &str = "docpipe_status";

/// Firings listed on the page.
const PAGE_FIRINGS: usize = 20;

/// The status page's token (its `Debug` shows nothing of it).
#[derive(Clone)]
pub struct Token {
    /// SHA-256 of the token, hex: what the cookie holds and what is compared.
    digest: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

pub fn digest(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares in time that does not depend on where the two differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Token {
    /// A token from its text.
    pub fn new(token: &str) -> Self {
        Self {
            digest: digest(token),
        }
    }

    fn matches(&self, token: &str) -> bool {
        same(&self.digest, &digest(token))
    }

    /// Whether a request carries the token: a bearer header, or the cookie.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| self.matches(t.trim()));
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(k, v)| k == COOKIE && same(v, &self.digest));
        bearer || cookie
    }
}

/// The token the daemon's port asks for: read from `[daemon] status_token_env`. An address
/// other than loopback without one is refused (the page shows readers' text).
pub fn token(settings: &Settings, addr: SocketAddr) -> Result<Option<Token>, UserError> {
    let Some(var) = &settings.daemon.status_token_env else {
        if addr.ip().is_loopback() {
            return Ok(None);
        }
        return Err(UserError::new(format!(
            "daemon.listen {addr} is not a loopback address: set [daemon] status_token_env to the variable of a token (the status page shows project ids and readers' text), or listen on 127.0.0.1"
        )));
    };
    match std::env::var(var) {
        Ok(t) if t.trim().len() >= 16 => Ok(Some(Token::new(t.trim()))),
        Ok(t) if !t.trim().is_empty() => Err(UserError::new(format!(
            "daemon.status_token_env: the token in {var} is shorter than 16 characters"
        ))),
        _ => Err(UserError::new(format!(
            "daemon.status_token_env: {var} is not set (the status page's token)"
        ))),
    }
}

/// What the router serves from.
#[derive(Clone)]
struct Port {
    metrics: Arc<Option<PrometheusHandle>>,
    /// The config and clock the page is collected with.
    page: Arc<(Settings, SharedClock)>,
    /// The daemon's context, once open: every page reads the state through it.
    ctx: Shared,
    token: Option<Token>,
    /// The last status collected and when it was done: a request that came while it was being
    /// collected is served from it (the collection, 130 ms at 50 projects, runs once, off the
    /// async workers).
    last: Arc<tokio::sync::Mutex<Option<Collected>>>,
}

/// A status collected, and when the collection ended.
type Collected = (
    std::time::Instant,
    Result<Arc<crate::status::Status>, String>,
);

/// The daemon's context, set once it is open (the server listens before: the daemon may wait
/// for another's lock on the folder, and its page says what the state holds meanwhile).
pub type Shared = Arc<std::sync::OnceLock<Arc<crate::app::Context>>>;

/// The router: `/healthz` says `ok`, `/metrics` renders the recorder's metrics (empty without
/// one), `/` the status page of `settings` at the clock's now, `/status.json` its facts and
/// `/trends/*.svg` its charts; with `token`, everything but `/healthz` asks for it.
pub fn router(
    metrics: Option<PrometheusHandle>,
    settings: Settings,
    clock: SharedClock,
    ctx: Shared,
    token: Option<Token>,
) -> axum::Router {
    let state = Port {
        metrics: Arc::new(metrics),
        page: Arc::new((settings, clock)),
        ctx,
        token,
        last: Arc::default(),
    };
    let guarded = axum::Router::new()
        .route("/metrics", get(render_metrics))
        .route("/", get(status_page))
        .route("/status.json", get(json))
        .route("/trends/{file}", get(chart))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), guard));
    axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/login", get(login))
        .merge(guarded)
        .with_state(state)
}

/// Refuses a request without the token (when there is one), with 401 and no data.
async fn guard(State(p): State<Port>, req: Request, next: Next) -> Response {
    match &p.token {
        Some(t) if !t.admits(req.headers()) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "401: this daemon's status asks for its token: send `Authorization: Bearer <token>`, or open /login?token=<token> once\n",
        )
            .into_response(),
        _ => next.run(req).await,
    }
}

#[derive(serde::Deserialize)]
struct Login {
    token: Option<String>,
}

/// Sets the cookie when the token is right, and goes to `/`.
async fn login(State(p): State<Port>, Query(q): Query<Login>) -> Response {
    let Some(t) = &p.token else {
        return (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    };
    match q.token.as_deref() {
        Some(given) if t.matches(given.trim()) => {
            let cookie = format!(
                "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000",
                t.digest
            );
            let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        _ => (StatusCode::UNAUTHORIZED, "401: not this daemon's token\n").into_response(),
    }
}

/// The recorder's metrics (this process's counters and gauges), and once the daemon's context
/// is open the requests of every process sharing the state, read as the page reads them.
async fn render_metrics(State(p): State<Port>) -> impl IntoResponse {
    let mut text = p
        .metrics
        .as_ref()
        .as_ref()
        .map(PrometheusHandle::render)
        .unwrap_or_default();
    if let Some(ctx) = p.ctx.get() {
        match crate::status::request_series(ctx) {
            Ok(series) => text += &series,
            Err(e) => tracing::warn!("metrics: the state's request counts cannot be read: {e:#}"),
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// The page's policy: nothing but this daemon, no script.
const POLICY: &str = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

async fn collect(p: &Port) -> Result<Arc<crate::status::Status>, Response> {
    let asked = std::time::Instant::now();
    let read = match p.ctx.get() {
        Some(ctx) => {
            // One collection at a time; a request that came while one ran takes its result.
            let mut last = p.last.lock().await;
            match &*last {
                Some((done, read)) if *done >= asked => read.clone(),
                _ => {
                    let ctx = ctx.clone();
                    let read = tokio::task::spawn_blocking(move || {
                        crate::status::collect(&ctx, PAGE_FIRINGS)
                            .map(Arc::new)
                            .map_err(|e| format!("{e:#}"))
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("the status stopped: {e}")));
                    *last = Some((std::time::Instant::now(), read.clone()));
                    read
                }
            }
        }
        None => crate::status::read(&p.page.0, p.page.1.clone(), PAGE_FIRINGS)
            .await
            .map(Arc::new)
            .map_err(|e| format!("{e:#}")),
    };
    read.map_err(|e| {
        tracing::warn!("status page: {e}");
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "503: the status cannot be read now: {}\n",
                crate::text::one_line(&e)
            ),
        )
            .into_response()
    })
}

async fn status_page(State(p): State<Port>) -> Response {
    match collect(&p).await {
        Ok(s) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CONTENT_SECURITY_POLICY, POLICY),
                (header::CACHE_CONTROL, "no-store"),
            ],
            crate::status::html::render(&s),
        )
            .into_response(),
        Err(r) => r,
    }
}

async fn json(State(p): State<Port>) -> Response {
    match collect(&p).await {
        Ok(s) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            serde_json::to_string_pretty(&s).unwrap_or_default(),
        )
            .into_response(),
        Err(r) => r,
    }
}

/// A chart `docpipe trends` drew: `chart-<project>.svg` or `gaps-<project>.svg` of a
/// configured project, nothing else.
async fn chart(State(p): State<Port>, Path(file): Path<String>) -> Response {
    let settings = &p.page.0;
    let known = settings.projects.iter().any(|proj| {
        file == format!("chart-{}.svg", proj.id) || file == format!("gaps-{}.svg", proj.id)
    });
    if !known {
        return StatusCode::NOT_FOUND.into_response();
    }
    match tokio::fs::read(settings.output_dir.join("trends").join(&file)).await {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, "image/svg+xml"),
                (header::CONTENT_SECURITY_POLICY, POLICY),
            ],
            bytes,
        )
            .into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Binds `addr` and serves the router until `stop` resolves; returns the bound address and the
/// server's task.
pub async fn serve(
    addr: SocketAddr,
    app: axum::Router,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::error!("status server: {e}");
        }
    });
    Ok((bound, task))
}
