//! `docpipe emulate --replay DIR`: serves a folder of captures (`api::capture`). A request is
//! answered by the captures of its method, path and query, in file order, the last one again
//! once they are used up (a walk that asks again gets what the service last said); a request
//! no capture matches gets a 404 that says so.

use super::Listening;
use crate::api::capture::{self, Capture};
use axum::extract::{Query, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The captures by what they answer, and how many of each were served.
#[derive(Debug, Default)]
pub struct Replay {
    answers: Mutex<HashMap<String, (Vec<Capture>, usize)>>,
}

impl Replay {
    /// The captures of `dir`; an error names the file that does not read.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let mut answers: HashMap<String, (Vec<Capture>, usize)> = HashMap::new();
        for c in capture::read_dir(dir)? {
            let key = Capture::key(&c.method, &c.path, &c.query);
            answers.entry(key).or_default().0.push(c);
        }
        Ok(Self {
            answers: Mutex::new(answers),
        })
    }

    /// The answer to a request.
    fn answer(&self, method: &Method, path: &str, query: &[(String, String)]) -> Response {
        let key = Capture::key(method.as_str(), path, query);
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let Some((list, served)) = answers.get_mut(&key) else {
            let body = serde_json::json!({ "error": format!("no capture answers {key}") });
            return (StatusCode::NOT_FOUND, axum::Json(body)).into_response();
        };
        let c = &list[(*served).min(list.len() - 1)];
        *served += 1;
        let mut resp = Response::new(axum::body::Body::from(c.body()));
        *resp.status_mut() = StatusCode::from_u16(c.status).unwrap_or(StatusCode::BAD_GATEWAY);
        for (k, v) in &c.headers {
            if let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::try_from(v)) {
                resp.headers_mut().insert(k, v);
            }
        }
        resp
    }
}

async fn serve_one(
    State(replay): State<Arc<Replay>>,
    method: Method,
    uri: Uri,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    replay.answer(&method, uri.path(), &query)
}

/// Serves `replay` on `addr` (use `127.0.0.1:0` for a free port) in a background task.
pub async fn start(replay: Replay, addr: SocketAddr) -> std::io::Result<Listening> {
    let app = axum::Router::new()
        .fallback(serve_one)
        .with_state(Arc::new(replay));
    Listening::spawn(tokio::net::TcpListener::bind(addr).await?, app)
}
