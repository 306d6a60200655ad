//! Captures: every response the client gets, written one file per response (`--record DIR`),
//! with the request's method, path and query, the status, the headers that matter to docpipe
//! and the body, keys removed; `docpipe emulate --replay DIR` serves such a folder. A capture
//! of a problem is what a user attaches to a bug report, and it becomes a test
//! (`tests/data/captures/`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The response headers a capture keeps (the rest may carry cookies or tokens, and docpipe
/// reads none of them): an assistant answer's thread id and stream version too, never its
/// `x-thread-key` (the thread's secret).
pub const KEPT_HEADERS: &[&str] = &[
    "content-type",
    "retry-after",
    "x-thread-id",
    "x-vercel-ai-data-stream",
];

/// One response, as a capture file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    /// `GET`, `POST`...
    pub method: String,
    /// The path, escaped as sent.
    pub path: String,
    /// The query's pairs, in the order sent, unescaped.
    #[serde(default)]
    pub query: Vec<(String, String)>,
    /// The status code.
    pub status: u16,
    /// The kept headers (see [`KEPT_HEADERS`]), lowercase names.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body's bytes, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<Vec<u8>>,
}

impl Capture {
    /// The body's bytes.
    pub fn body(&self) -> Vec<u8> {
        match (&self.body, &self.body_bytes) {
            (Some(s), _) => s.as_bytes().to_vec(),
            (None, Some(b)) => b.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// What a replay matches a request on: method, path and the query's pairs, sorted.
    pub fn key(method: &str, path: &str, query: &[(String, String)]) -> String {
        let mut q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        q.sort();
        format!("{method} {path}?{}", q.join("&"))
    }
}

/// Writes `bytes` into a file made anew at `path`: a file or link already there (left by a
/// stopped run, or planted) is removed first, never followed, and the file is created only if
/// nothing took its place meanwhile.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)
}

/// Writes the captures of a run into a folder: `00001.json`, `00002.json`... (after the
/// highest number already there, so that several commands can record into one folder).
#[derive(Debug)]
pub struct Recorder {
    dir: PathBuf,
    next: AtomicU64,
}

impl Recorder {
    /// A recorder into `dir`, made if missing.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut highest = 0;
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name();
            let n = name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u64>().ok());
            highest = highest.max(n.unwrap_or(0));
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            next: AtomicU64::new(highest + 1),
        })
    }

    /// Writes one capture whole (a temporary file renamed), `redact` applied to its query and
    /// body (the keys the client holds). A failure is logged, never the request's.
    pub fn record(&self, capture: Capture, redact: impl Fn(&str) -> String) {
        let mut c = capture;
        c.path = redact(&c.path);
        for (_, v) in &mut c.query {
            *v = redact(v);
        }
        // A header may echo the key too (a `Retry-After` of a hostile service).
        for v in c.headers.values_mut() {
            *v = redact(v);
        }
        c.body = c.body.as_deref().map(&redact);
        // A body that is not UTF-8 may still hold a key: kept as text where one was removed.
        if let Some(bytes) = &c.body_bytes {
            let text = String::from_utf8_lossy(bytes);
            let redacted = redact(&text);
            if redacted != text {
                c.body = Some(redacted);
                c.body_bytes = None;
            }
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{n:05}.json"));
        let tmp = self.dir.join(format!(".{n:05}.json.tmp"));
        let written = serde_json::to_vec_pretty(&c)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_new(&tmp, &bytes))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::warn!(target: "docpipe::api::capture", path = %path.display(), "cannot write the capture: {e}");
        }
    }
}

/// The captures of a folder, in file order; an error names the file that does not read.
pub fn read_dir(dir: &Path) -> Result<Vec<Capture>, String> {
    let shown = |p: &Path| crate::text::one_line(&p.display().to_string()).into_owned();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the capture folder {}: {e}", shown(dir)))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("no capture (*.json) in {}", shown(dir)));
    }
    files.iter().map(|p| read_one(p, &shown(p))).collect()
}

/// The largest capture file replay reads.
pub const MAX_CAPTURE_BYTES: u64 = 64 << 20;

/// One capture file: a regular file (not a link, a pipe or a device, which could block or
/// never end) of at most [`MAX_CAPTURE_BYTES`].
fn read_one(p: &Path, shown: &str) -> Result<Capture, String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(p).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{shown}: not a regular file (a link, a pipe or a device): replay reads capture files only"
        ));
    }
    if meta.len() > MAX_CAPTURE_BYTES {
        return Err(format!(
            "{shown}: {} bytes, more than a capture may hold ({MAX_CAPTURE_BYTES})",
            meta.len()
        ));
    }
    let mut text = Vec::new();
    std::fs::File::open(p)
        .and_then(|f| f.take(MAX_CAPTURE_BYTES + 1).read_to_end(&mut text))
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if text.len() as u64 > MAX_CAPTURE_BYTES {
        return Err(format!(
            "{shown}: grew past {MAX_CAPTURE_BYTES} bytes while read"
        ));
    }
    serde_json::from_slice(&text).map_err(|e| format!("{shown}: not a capture: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_echoed_in_a_header_is_removed_and_a_planted_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        std::fs::write(&target, "keep me").unwrap();
        let rec = Recorder::new(&dir.path().join("c")).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("c/.00001.json.tmp")).unwrap();
        let mut c = Capture {
            method: "GET".into(),
            path: "/v1/analytics/p/views".into(),
            query: Vec::new(),
            status: 429,
            headers: BTreeMap::from([("retry-after".to_string(), "mint_secret".to_string())]),
            body: Some("{}".into()),
            body_bytes: None,
        };
        rec.record(c.clone(), |s| s.replace("mint_secret", "[redacted]"));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        let got = read_dir(&dir.path().join("c")).unwrap();
        c.headers.insert("retry-after".into(), "[redacted]".into());
        assert_eq!(got, vec![c]);
    }

    #[test]
    fn a_key_is_removed_from_the_query_the_body_and_a_body_that_is_not_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(dir.path()).unwrap();
        let redact = |s: &str| s.replace("mint_secret", "[redacted]");
        let bytes = b"\xff key mint_secret".to_vec();
        let capture = |body: Option<&str>, body_bytes: Option<Vec<u8>>| Capture {
            method: "GET".into(),
            path: "/v1/x".into(),
            query: vec![("key".into(), "mint_secret".into())],
            status: 200,
            headers: BTreeMap::new(),
            body: body.map(str::to_string),
            body_bytes,
        };
        rec.record(capture(Some("{\"k\":\"mint_secret\"}"), None), redact);
        rec.record(capture(None, Some(bytes.clone())), redact);
        let clean = b"\xff no key".to_vec();
        rec.record(capture(None, Some(clean.clone())), redact);
        let got = read_dir(dir.path()).unwrap();
        assert_eq!(got[0].query[0].1, "[redacted]");
        assert_eq!(got[0].body.as_deref(), Some("{\"k\":\"[redacted]\"}"));
        assert_eq!(
            (got[1].body.as_deref(), got[1].body_bytes.is_none()),
            (Some("\u{fffd} key [redacted]"), true)
        );
        assert_eq!(got[2].body_bytes.as_deref(), Some(&clean[..]));
    }
}
