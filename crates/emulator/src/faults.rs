//! The fault layer: latency, 5xx, 429 bursts, cut bodies and dropped connections; and the
//! request counters, recorded with each response's final status.

use super::{ApiError, Emulator, Op, error};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use std::sync::Arc;

/// Classifies a request path: the operation and its project (or domain).
pub fn classify(method: &Method, path: &str) -> Option<(Op, String)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (&Method::GET, ["v1", "analytics", p, rest @ ..]) => {
            let op = match rest {
                ["views"] => Op::Views,
                ["visitors"] => Op::Visitors,
                ["searches"] => Op::Searches,
                ["feedback"] => Op::Feedback,
                ["feedback", "by-page"] => Op::FeedbackByPage,
                ["assistant"] => Op::Conversations,
                ["assistant", "threads", _] => Op::Thread,
                ["assistant", "caller-stats"] => Op::CallerStats,
                _ => return None,
            };
            Some((op, p.to_string()))
        }
        (&Method::POST, ["v2", "agent", p, "job"]) => Some((Op::JobCreate, p.to_string())),
        (&Method::POST, ["v1", "workflow", p, _, "trigger"]) => Some((Op::Trigger, p.to_string())),
        (&Method::GET, ["v2", "agent", p, "job", _]) => Some((Op::JobGet, p.to_string())),
        (&Method::POST, ["v2", "agent", p, "job", _, "message"]) => {
            Some((Op::JobMessage, p.to_string()))
        }
        (&Method::POST, ["discovery", "v1", "assistant", d, "message"]) => {
            Some((Op::Assistant, d.to_string()))
        }
        _ => None,
    }
}

/// Applies the configured faults around the service's handlers and records every response.
pub async fn layer(State(emu): State<Arc<Emulator>>, req: Request, next: Next) -> Response {
    let Some((op, project)) = classify(req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    if emu.in_outage() {
        emu.record(op, &project, 503);
        return error(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable").into_response();
    }
    let f = emu.data().faults.clone();
    if !f.ops.is_empty() && !f.ops.iter().any(|o| o == op.name()) {
        let response = next.run(req).await;
        emu.record(op, &project, response.status().as_u16());
        return response;
    }
    if f.latency_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(f.latency_ms)).await;
    }
    let response = if let Some(resp) = injected_status(&emu, &f) {
        resp
    } else {
        let resp = next.run(req).await;
        if resp.status() == StatusCode::OK && f.cut_body_rate > 0.0 && emu.roll() < f.cut_body_rate
        {
            cut(resp).await
        } else if f.drop_rate > 0.0 && emu.roll() < f.drop_rate {
            emu.record(op, &project, 0);
            return dropped();
        } else {
            resp
        }
    };
    emu.record(op, &project, response.status().as_u16());
    response
}

/// A 429 burst or a 5xx, decided before the handler runs (so nothing changes).
fn injected_status(emu: &Emulator, f: &super::data::Faults) -> Option<Response> {
    if f.burst_429_every > 0 && f.burst_429_len > 0 {
        let n = emu.burst_position();
        // The last `burst_429_len` requests of every `burst_429_every` are refused.
        if n % f.burst_429_every >= f.burst_429_every.saturating_sub(f.burst_429_len) {
            let error = ApiError {
                retry_after_secs: Some(f.burst_retry_after_secs.max(1)),
                ..error(StatusCode::TOO_MANY_REQUESTS, "Too many requests")
            };
            return Some(error.into_response());
        }
    }
    if f.error_rate > 0.0 && emu.roll() < f.error_rate {
        let status = match emu.roll_u64() % 3 {
            0 => StatusCode::INTERNAL_SERVER_ERROR,
            1 => StatusCode::BAD_GATEWAY,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        return Some(error(status, "Internal server error").into_response());
    }
    None
}

/// Keeps the status and headers (the length of the whole body too) but sends the first half
/// of the body, then the connection fails: a body cut in transit, as a client sees one.
async fn cut(resp: Response) -> Response {
    let (mut parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(_) => return dropped(),
    };
    let half = bytes.slice(..bytes.len() / 2);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    // The failure comes a moment after the first half, which the client has by then.
    let stream = futures::stream::iter([Ok(half)]).chain(futures::stream::once(async {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "emulator cut the body",
        ))
    }));
    Response::from_parts(parts, Body::from_stream(stream))
}

/// A response whose body fails at once: the server closes the connection without a complete
/// response (for a POST, after the request took effect).
fn dropped() -> Response {
    let stream = futures::stream::once(async {
        Err::<bytes::Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "emulator dropped the connection",
        ))
    });
    Response::new(Body::from_stream(stream))
}
