//! `docpipe emulate --replay DIR`: serves a folder of captures (`api::capture`). A request is
//! answered by the captures of its method, path and query, in file order, the last one again
//! once they are used up (a walk that asks again gets what the service last said); a request
//! no capture matches gets a 404 that says so.

use super::Listening;
use axum::extract::{Query, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use docpipe_catalog::capture::{self, Capture};
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
        // Only the headers a capture keeps: a length or hop-by-hop header written into a file
        // by hand would contradict the body the server sends.
        for (k, v) in &c.headers {
            if !capture::KEPT_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                continue;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(headers: &[(&str, &str)]) -> String {
        let headers: std::collections::BTreeMap<String, String> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        serde_json::to_string(&Capture {
            method: "GET".into(),
            path: "/x".into(),
            query: Vec::new(),
            status: 200,
            headers,
            body: Some("{\"ok\":true}".into()),
            body_bytes: None,
        })
        .unwrap()
    }

    #[test]
    fn a_hostile_capture_folder_is_refused_or_served_without_its_length_headers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("00001.json"),
            capture(&[
                ("content-length", "999"),
                ("connection", "close"),
                ("content-type", "application/json"),
            ]),
        )
        .unwrap();
        let replay = Replay::load(dir.path()).unwrap();
        let resp = replay.answer(&Method::GET, "/x", &[]);
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers().get("content-length"), None);
        assert_eq!(resp.headers().get("connection"), None);
        assert_eq!(resp.headers()["content-type"], "application/json");

        // A link (to /dev/zero, which never ends) and a pipe (which blocks) are refused by name,
        // the name's escape codes shown escaped.
        let link = dir.path().join("00002\u{1b}[2J.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let err = Replay::load(dir.path()).unwrap_err();
        assert!(err.ends_with("00002\\u{1b}[2J.json: not a regular file (a link, a pipe or a device): replay reads capture files only"), "{err}");
        std::fs::remove_file(&link).unwrap();
        let fifo = dir.path().join("00003.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string and mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = Replay::load(dir.path()).unwrap_err();
        assert!(err.contains("00003.json: not a regular file"), "{err}");
    }
}
