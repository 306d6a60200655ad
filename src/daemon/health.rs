//! `/healthz` and `/metrics` on `[daemon] listen`: an axum router with the Prometheus handle as
//! its state, stopped gracefully with the daemon.

use axum::extract::State;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// The router's state.
#[derive(Clone)]
struct Health {
    metrics: Arc<Option<PrometheusHandle>>,
}

/// The router: `/healthz` says `ok`, `/metrics` renders the recorder's metrics (empty without
/// one).
pub fn router(metrics: Option<PrometheusHandle>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(render))
        .with_state(Health {
            metrics: Arc::new(metrics),
        })
}

async fn render(State(h): State<Health>) -> impl axum::response::IntoResponse {
    (
        [("content-type", "text/plain; version=0.0.4")],
        h.metrics
            .as_ref()
            .as_ref()
            .map(PrometheusHandle::render)
            .unwrap_or_default(),
    )
}

/// Binds `addr` and serves the router until `stop` resolves; returns the bound address and the
/// server's task.
pub async fn serve(
    addr: SocketAddr,
    metrics: Option<PrometheusHandle>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(metrics);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::error!("health server: {e}");
        }
    });
    Ok((bound, task))
}
