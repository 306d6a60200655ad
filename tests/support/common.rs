//! Shared helpers: data files, a test clock and one-shot calls into the emulator's router.
// Both tiers include this file; each uses part of it.
#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use chrono::{DateTime, NaiveDate, Utc};
use docpipe::clock::TokioClock;
use docpipe::emulator::data::DataFile;
use docpipe::emulator::{Emulator, router};
use std::sync::Arc;
use tower::ServiceExt;

pub const ADMIN_A: &str = "mint_test_admin_a";
pub const ADMIN_B: &str = "mint_test_admin_b";
pub const ASSIST_A: &str = "mint_dsc_test_assistant_a";

/// The small test data file.
pub fn small() -> DataFile {
    DataFile::load(&root().join("sample_data/small.toml")).expect("small.toml loads")
}

/// An automation of `project` a trigger starts (active, a *Custom schedule* one, its runs
/// ending as the project's jobs do).
pub fn automation(id: &str, project: &str) -> docpipe::emulator::data::Automation {
    docpipe::emulator::data::Automation {
        id: id.into(),
        project: project.into(),
        active: true,
        custom_schedule: true,
        outcome: None,
    }
}

pub fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// "Now" in the tests: noon on 2026-03-15, two weeks after the small data starts.
pub fn noon() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-15T12:00:00Z")
        .unwrap()
        .to_utc()
}

/// An emulator over `data` on a clock that moves with tokio's (paused) time.
pub fn emulator(data: DataFile) -> Arc<Emulator> {
    Emulator::new(data, Arc::new(TokioClock::starting_at(noon())))
}

/// A response's parts.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Result<bytes::Bytes, String>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(self.body.as_ref().expect("body")).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(self.body.as_ref().expect("body")).expect("json body")
    }
}

/// Sends one request through the router.
pub async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    key: Option<&str>,
    body: Option<&str>,
) -> Reply {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let req = req
        .header("content-type", "application/json")
        .body(body.map_or(Body::empty(), |b| Body::from(b.to_string())))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map_err(|e| e.to_string());
    Reply {
        status,
        headers,
        body,
    }
}

pub async fn get(app: &Router, uri: &str, key: Option<&str>) -> Reply {
    call(app, Method::GET, uri, key, None).await
}

pub async fn post(app: &Router, uri: &str, key: Option<&str>, body: &str) -> Reply {
    call(app, Method::POST, uri, key, Some(body)).await
}

/// A router over `data`, and the emulator behind it.
pub fn app(data: DataFile) -> (Router, Arc<Emulator>) {
    let emu = emulator(data);
    (router(emu.clone()), emu)
}

/// An emulator served over TCP on a free loopback port, on a manual clock shared with clients.
pub struct Live {
    pub server: docpipe::emulator::Server,
    pub clock: Arc<docpipe::clock::ManualClock>,
}

impl Live {
    pub async fn start(data: DataFile) -> Self {
        let clock = docpipe::clock::ManualClock::new(noon());
        let emu = Emulator::new(data, clock.clone());
        let server = docpipe::emulator::Server::start(emu, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Self { server, clock }
    }

    /// An emulator whose clock stands at `now` (the binary's own clock is the system's: a test
    /// that runs it starts the emulator at the real now).
    pub async fn start_at(data: DataFile, now: DateTime<Utc>) -> Self {
        let clock = docpipe::clock::ManualClock::new(now);
        let emu = Emulator::new(data, clock.clone());
        let server = docpipe::emulator::Server::start(emu, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Self { server, clock }
    }

    /// An emulator whose clock stays at noon while the clients' moves (with their retries'
    /// waits): what it serves does not change during a test.
    pub async fn start_frozen(data: DataFile) -> Self {
        let clock = docpipe::clock::ManualClock::new(noon());
        let emu = Emulator::new(data, docpipe::clock::ManualClock::new(noon()));
        let server = docpipe::emulator::Server::start(emu, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Self { server, clock }
    }

    pub fn emu(&self) -> &Arc<Emulator> {
        &self.server.emulator
    }

    /// A client of organization `org-a` with the given keys and limits.
    pub fn client(
        &self,
        admin: Option<&str>,
        assistant: Option<&str>,
        limits: docpipe::api::Limits,
    ) -> docpipe::api::Client {
        self.client_sharing(
            admin,
            assistant,
            limits,
            Arc::new(docpipe::api::budget::MemoryBudget::default()),
        )
    }

    /// A client of organization `org-a` that counts its requests in `budget`.
    pub fn client_sharing(
        &self,
        admin: Option<&str>,
        assistant: Option<&str>,
        limits: docpipe::api::Limits,
        budget: Arc<dyn docpipe::api::budget::Budget>,
    ) -> docpipe::api::Client {
        use docpipe::api::*;
        let settings = ClientSettings {
            base_url: self.server.base_url(),
            timeout: std::time::Duration::from_secs(10),
            retry: RetryPolicy {
                max_retries: 6,
                ..RetryPolicy::default()
            },
            limits,
            record: None,
        };
        Client::new(
            settings,
            "org-a",
            admin.map(|k| AdminKey::parse(k, "mint", "test").unwrap()),
            assistant.map(|k| AssistantKey::parse(k, "mint", "test").unwrap()),
            self.clock.clone(),
            budget,
        )
    }

    /// Seconds the shared clock has moved since the start.
    pub fn slept(&self) -> i64 {
        use docpipe::clock::Clock;
        (self.clock.now() - noon()).num_seconds()
    }
}

/// Limits with no headroom and a high analytics limit.
pub fn open_limits() -> docpipe::api::Limits {
    docpipe::api::Limits {
        analytics_per_hour: 100_000,
        agent_per_hour: 100,
        assistant_per_hour: 10_000,
        headroom_percent: 0,
    }
}

/// Every row of a Parquet file as `name=value` text, without `fetched_at` (it differs per run).
pub fn parquet_rows(file: &std::path::Path) -> Vec<String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(std::fs::File::open(file).unwrap()).unwrap();
    let mut out: Vec<String> = reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .filter(|(name, _)| name.as_str() != "fetched_at")
                .map(|(name, v)| format!("{name}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    out.sort();
    out
}

/// Every file below a folder, relative, sorted.
pub fn files_below(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// The three test projects, with clients of their organizations sharing one budget.
pub fn targets(live: &Live, limits: docpipe::api::Limits) -> Vec<docpipe::export::Target> {
    let a = live.client(Some(ADMIN_A), None, limits);
    let b = {
        use docpipe::api::*;
        let mut s = a.settings().clone();
        s.limits = limits;
        Client::new(
            s,
            "org-b",
            Some(AdminKey::parse(ADMIN_B, "mint", "t").unwrap()),
            None,
            live.clock.clone(),
            a.budget().clone(),
        )
    };
    vec![
        docpipe::export::Target {
            project: "alpha".into(),
            client: a.clone(),
            start: None,
            datasets: vec!["page_views"],
        },
        docpipe::export::Target {
            project: "beta".into(),
            client: a,
            start: None,
            datasets: vec!["page_views"],
        },
        docpipe::export::Target {
            project: "gamma".into(),
            client: b,
            start: None,
            datasets: vec!["page_views"],
        },
    ]
}

/// A config for the test projects (page views only) on `base_url`, writing to `out`; `extra`
/// is appended.
pub fn config(base_url: &str, out: &std::path::Path, extra: &str) -> String {
    config_of(base_url, out, extra, r#"datasets = ["page_views"]"#)
}

/// A config for the test projects exporting the default datasets.
pub fn config_all(base_url: &str, out: &std::path::Path, extra: &str) -> String {
    config_of(base_url, out, extra, "")
}

pub fn config_of(base_url: &str, out: &std::path::Path, extra: &str, datasets: &str) -> String {
    TestConfig {
        datasets: datasets.to_string(),
        extra: extra.to_string(),
        ..TestConfig::new(base_url, out)
    }
    .toml()
}

/// A config of the test projects (alpha and beta of org-a, gamma of org-b), set field by field.
#[derive(Debug, Clone)]
pub struct TestConfig {
    pub base_url: String,
    pub out: std::path::PathBuf,
    /// Each project's `datasets = [...]` line (empty: the default datasets).
    pub datasets: String,
    pub max_retries: u32,
    /// Analytics requests an hour of each organization.
    pub per_hour: u64,
    /// `headroom_percent` of each organization (`None`: the default).
    pub headroom: Option<u32>,
    /// Each project's `start_date` (`None`: the default 30 days).
    pub start: Option<chrono::NaiveDate>,
    /// The variable of org-a's admin key.
    pub key_a_env: String,
    /// More lines after `[export]`'s.
    pub extra: String,
}

impl TestConfig {
    /// Page views of the three projects into `out`, 3 retries, no limit to speak of.
    pub fn new(base_url: &str, out: &std::path::Path) -> Self {
        Self {
            base_url: base_url.to_string(),
            out: out.to_path_buf(),
            datasets: r#"datasets = ["page_views"]"#.to_string(),
            max_retries: 3,
            per_hour: 100_000,
            headroom: None,
            start: None,
            key_a_env: "DOCPIPE_IT_ADMIN_A".to_string(),
            extra: String::new(),
        }
    }

    pub fn toml(&self) -> String {
        let org = |id: &str, env: &str| {
            let headroom = self
                .headroom
                .map(|h| format!("headroom_percent = {h}\n"))
                .unwrap_or_default();
            format!(
                "[[organizations]]\nid = \"{id}\"\nadmin_key_env = \"{env}\"\nanalytics_per_hour = {}\n{headroom}",
                self.per_hour
            )
        };
        let project = |id: &str, org: &str| {
            let start = self
                .start
                .map(|d| format!("start_date = \"{d}\"\n"))
                .unwrap_or_default();
            format!(
                "[[projects]]\nid = \"{id}\"\norganization = \"{org}\"\n{start}{}\n",
                self.datasets
            )
        };
        format!(
            "[service]\nbase_url = \"{}\"\nmax_retries = {}\n{}{}{}{}{}[export]\noutput_dir = \"{}\"\n{}\n",
            self.base_url,
            self.max_retries,
            org("org-a", &self.key_a_env),
            org("org-b", "DOCPIPE_IT_ADMIN_B"),
            project("alpha", "org-a"),
            project("beta", "org-a"),
            project("gamma", "org-b"),
            self.out.display(),
            self.extra
        )
    }

    /// Writes it to `path`, and returns the path.
    pub fn write(&self, path: &std::path::Path) -> std::path::PathBuf {
        std::fs::write(path, self.toml()).unwrap();
        path.to_path_buf()
    }
}

/// The binary with the test keys in its environment, run in the config's folder.
pub fn docpipe_command(cfg: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"));
    // In the config's folder, so that nothing of the repository (its `jobs/`) is picked up.
    cmd.current_dir(cfg.parent().unwrap())
        .arg("--config")
        .arg(cfg)
        .args(args)
        .env("DOCPIPE_IT_ADMIN_A", ADMIN_A)
        .env("DOCPIPE_IT_ADMIN_B", ADMIN_B)
        .env("RUST_LOG", "warn");
    cmd
}

/// Runs the binary with the test keys in its environment.
pub fn docpipe(
    cfg: &std::path::Path,
    args: &[&str],
    crash_at: Option<u64>,
) -> std::process::Output {
    let mut cmd = docpipe_command(cfg, args);
    if let Some(n) = crash_at {
        cmd.env("DOCPIPE_CRASH_AT", n.to_string());
    }
    cmd.output().unwrap()
}

/// Exports the test projects over each `(from, to)` range into `out`.
pub async fn exported(live: &Live, out: &std::path::Path, ranges: &[(&str, &str)]) {
    let targets = targets(live, open_limits());
    let exporter = docpipe::export::Exporter::open(out, live.clock.clone(), 3)
        .await
        .unwrap();
    for (from, to) in ranges {
        let plan = exporter.plan(&targets, day(from), day(to)).unwrap();
        assert!(exporter.run(&targets, &plan).await.failed.is_empty());
    }
}

/// Alpha's page views, searches, feedback and assistant turns exported to `out` from `from` to
/// `to`.
pub async fn export_alpha(live: &Live, out: &std::path::Path, from: &str, to: &str) {
    let targets = vec![docpipe::export::Target {
        project: "alpha".into(),
        client: live.client(Some(ADMIN_A), None, open_limits()),
        start: None,
        datasets: vec!["page_views", "searches", "feedback", "assistant"],
    }];
    let exporter = docpipe::export::Exporter::open(out, live.clock.clone(), 3)
        .await
        .unwrap();
    let plan = exporter.plan(&targets, day(from), day(to)).unwrap();
    let run = exporter.run(&targets, &plan).await;
    assert!(run.failed.is_empty(), "{:?}", run.failed);
}

/// Every Parquet file below `out` and its rows (without `fetched_at`), but `day_status`: like
/// `fetched_at`, it says how and when the data were fetched (a resumed walk took more requests
/// than an uninterrupted one), not what they are.
pub fn dataset(out: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<String>)> {
    files_below(out)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "parquet"))
        .filter(|f| !f.starts_with(docpipe::export::DAY_STATUS))
        .map(|f| {
            let rows = parquet_rows(&out.join(&f));
            (f, rows)
        })
        .collect()
}

/// A loopback port that refuses connections (bound, not listening, so no other server of the
/// suite can take it) until `open` serves an emulator on it.
pub struct ClosedPort {
    socket: socket2::Socket,
    /// Where it is.
    pub addr: std::net::SocketAddr,
}

impl ClosedPort {
    pub fn new() -> Self {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket
            .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        let addr = socket.local_addr().unwrap().as_socket().unwrap();
        Self { socket, addr }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts listening on the same socket: the service comes up at the same address.
    pub fn open(self, emulator: Arc<Emulator>) -> docpipe::emulator::Server {
        self.socket.listen(128).unwrap();
        self.socket.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(self.socket.into()).unwrap();
        docpipe::emulator::Server::serve(emulator, listener).unwrap()
    }
}

/// The Python with the Parquet readers: `DOCPIPE_TEST_PYTHON` (set by `.ci/run`), else the
/// virtual environment `.ci/run` makes in `target/test-venv`, else `python3`.
pub fn python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("DOCPIPE_TEST_PYTHON") {
        return p.into();
    }
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv/bin/python");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

/// Runs `script` with [`python`] (`args` after it); its standard output. A script that fails
/// fails the test with its standard error.
pub fn run_python(script: &str, args: &[&std::ffi::OsStr]) -> String {
    let run = std::process::Command::new(python())
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python runs (bash .ci/run installs the readers in target/test-venv)");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8(run.stdout).unwrap()
}

/// Writes `jobs/top.toml` in `dir`: a rule after each export that sends alpha's last day's views
/// to `job_ok` without waiting; returns the folder.
pub fn top_rule(dir: &std::path::Path) -> std::path::PathBuf {
    let rules = dir.join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("top.toml"),
        "enabled = true\nname = \"top\"\nproject = \"alpha\"\njob = \"job_ok\"\nwait = false\n\
         when = \"SELECT date, total FROM daily ORDER BY date DESC LIMIT 1\"\n\
         prompt = \"Views on {{ rows[0].date }}: {{ rows[0].total }}\"\n",
    )
    .unwrap();
    rules
}

/// [`config`] with every test project starting at `start`.
pub fn config_from(
    base_url: &str,
    out: &std::path::Path,
    extra: &str,
    start: chrono::NaiveDate,
) -> String {
    config(base_url, out, extra)
        .replace(
            "organization = \"org-a\"\n",
            &format!("organization = \"org-a\"\nstart_date = \"{start}\"\n"),
        )
        .replace(
            "id = \"gamma\"\norganization = \"org-b\"",
            &format!("id = \"gamma\"\norganization = \"org-b\"\nstart_date = \"{start}\""),
        )
}

/// The tables of a SQLite file, by name.
pub fn sqlite_tables(db: &std::path::Path) -> Vec<String> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A rules folder `jobs` in `dir` with two rules of alpha's latest day: `after` (each export,
/// to job_ok) and `timed` (on `schedule`, to job_nochange).
pub fn after_and_timed_rules(dir: &std::path::Path, schedule: &str) -> std::path::PathBuf {
    let rules = dir.join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("after.toml"),
        latest_day_rule("after", "job_ok", ""),
    )
    .unwrap();
    std::fs::write(
        rules.join("timed.toml"),
        latest_day_rule(
            "timed",
            "job_nochange",
            &format!("schedule = \"{schedule}\""),
        ),
    )
    .unwrap();
    rules
}

/// A rule of alpha sending its latest day to `job` without waiting for it (`extra`: more lines,
/// a schedule say).
pub fn latest_day_rule(name: &str, job: &str, extra: &str) -> String {
    format!(
        "enabled = true\nname = \"{name}\"\nproject = \"alpha\"\njob = \"{job}\"\nwait = false\n{extra}\n\
         when = \"SELECT date FROM daily ORDER BY date DESC LIMIT 1\"\n\
         prompt = \"{name}: {{{{ rows[0].date }}}}\"\n"
    )
}

/// A config in `dir` of org-a with its assistant (`alpha-docs`, its key in
/// `DOCPIPE_IT_ASSIST_A`) and alpha's page views, the output in `dir/out`.
pub fn assistant_config(dir: &std::path::Path, base_url: &str) -> std::path::PathBuf {
    let cfg = dir.join("docpipe.toml");
    std::fs::write(
        &cfg,
        format!(
            "[service]\nbase_url = \"{base_url}\"\n[[organizations]]\nid = \"org-a\"\nadmin_key_env = \"DOCPIPE_IT_ADMIN_A\"\n\
             assistant_key_env = \"DOCPIPE_IT_ASSIST_A\"\nassistant_domain = \"alpha-docs\"\n\
             [[projects]]\nid = \"alpha\"\norganization = \"org-a\"\ndatasets = [\"page_views\"]\n\
             [export]\noutput_dir = \"{}\"\n",
            dir.join("out").display()
        ),
    )
    .unwrap();
    cfg
}

/// A local webhook on 127.0.0.1: the JSON bodies POSTed to it, in order. While `failing` is
/// set it answers 500 (and keeps nothing).
pub struct Hook {
    pub url: String,
    pub got: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    pub failing: Arc<std::sync::atomic::AtomicBool>,
    /// POSTs received, answered or not.
    pub hits: Arc<std::sync::atomic::AtomicU64>,
    _server: tokio::task::JoinHandle<()>,
}

impl Hook {
    pub async fn start() -> Self {
        let got: Arc<std::sync::Mutex<Vec<serde_json::Value>>> = Arc::default();
        let failing: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let hits: Arc<std::sync::atomic::AtomicU64> = Arc::default();
        let (kept, fails, count) = (got.clone(), failing.clone(), hits.clone());
        let app = Router::new().route(
            "/hook",
            axum::routing::post(move |body: axum::Json<serde_json::Value>| {
                let (kept, fails, count) = (kept.clone(), fails.clone(), count.clone());
                async move {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if fails.load(std::sync::atomic::Ordering::Relaxed) {
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    kept.lock().unwrap().push(body.0);
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url,
            got,
            failing,
            hits,
            _server: server,
        }
    }

    /// The messages of `what` received so far.
    pub fn of(&self, what: &str) -> Vec<serde_json::Value> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["what"] == what)
            .cloned()
            .collect()
    }

    /// Waits (up to 20 s) until `n` messages of `what` came, and gives them.
    pub async fn wait_for(&self, what: &str, n: usize) -> Vec<serde_json::Value> {
        for _ in 0..200 {
            let got = self.of(what);
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!(
            "{n} {what} messages did not come: {:#?}",
            self.got.lock().unwrap()
        );
    }
}

/// Two processes of `command` started at once (each its output captured), waited for: their
/// outputs, in order.
pub fn two_at_once(command: impl Fn() -> std::process::Command) -> [std::process::Output; 2] {
    let start = || {
        command()
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()]
}

/// `GET url` with reqwest, TLS's provider installed first (as docpipe's own clients do).
pub async fn http_get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
    docpipe::tls::install();
    reqwest::get(url).await
}

/// `GET url`'s JSON body.
pub async fn get_json(url: impl reqwest::IntoUrl) -> serde_json::Value {
    http_get(url).await.unwrap().json().await.unwrap()
}

// The event stream's tables, read back (both tiers).

/// `(project, agent, class, surface) -> events`.
pub type Reads = std::collections::BTreeMap<(String, String, String, String), u64>;

pub fn text_col<'a>(b: &'a arrow_array::RecordBatch, name: &str) -> &'a arrow_array::StringArray {
    use arrow_array::Array;
    b.column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap()
}

/// An integer column of a file read back.
pub fn int_col<'a>(b: &'a arrow_array::RecordBatch, name: &str) -> &'a arrow_array::Int64Array {
    use arrow_array::Array;
    b.column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .unwrap()
}

/// Every `agent_daily` row of the lake as `(project, agent, class, surface) -> events`.
pub fn stream_reads(out: &std::path::Path) -> Reads {
    let mut rows = std::collections::BTreeMap::new();
    for (file, project) in partitions(out, "agent_daily") {
        for b in docpipe::write::parquet::read_file(&file).unwrap() {
            let events = int_col(&b, "events");
            let (agent, class, surface) = (
                text_col(&b, "agent"),
                text_col(&b, "class"),
                text_col(&b, "surface"),
            );
            for i in 0..b.num_rows() {
                let key = (
                    project.clone(),
                    agent.value(i).to_string(),
                    class.value(i).to_string(),
                    surface.value(i).to_string(),
                );
                *rows.entry(key).or_default() += events.value(i) as u64;
            }
        }
    }
    rows
}

/// The files of a table's partitions and their project.
pub fn partitions(out: &std::path::Path, table: &str) -> Vec<(std::path::PathBuf, String)> {
    let mut files: Vec<(std::path::PathBuf, String)> = files_below(&out.join(table))
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "parquet"))
        .map(|f| {
            let project = f
                .components()
                .find_map(|c| c.as_os_str().to_str()?.strip_prefix("project="))
                .unwrap()
                .to_string();
            (out.join(table).join(f), project)
        })
        .collect();
    files.sort();
    files
}

/// Writes the emulator's stream objects of `days` into `dir` but those `held` keeps back (named
/// by the hour); the truth of every day written.
pub fn write_stream(
    emu: &Emulator,
    dir: &std::path::Path,
    days: &[NaiveDate],
    held: &[&str],
) -> docpipe::emulator::stream::DayTruth {
    let mut all = docpipe::emulator::stream::DayTruth::default();
    for d in days {
        let (objects, truth) = docpipe::emulator::stream::day(emu, *d);
        for o in objects {
            if held.iter().any(|h| o.name.ends_with(h)) {
                continue;
            }
            let path = dir.join(&o.name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &o.bytes).unwrap();
        }
        for (k, v) in truth.reads {
            *all.reads.entry(k).or_default() += v;
        }
        for (k, v) in truth.referrals {
            *all.referrals.entry(k).or_default() += v;
        }
        all.events += truth.events;
        all.repeated += truth.repeated;
        all.bad += truth.bad;
    }
    all
}

/// One read of the streams `settings` names, on the system clock.
pub async fn read_stream_once(
    settings: &docpipe::config::Settings,
) -> docpipe::app::streams::StreamsRun {
    let ctx = docpipe::app::Context::open(
        settings.clone(),
        docpipe::clock::system(),
        docpipe::app::Access::Export,
        docpipe::app::Keys::None,
    )
    .await
    .unwrap();
    docpipe::app::streams::read(&ctx).await.unwrap().unwrap()
}

/// What the log lines of a test's thread wrote (see [`Capture::start`]).
#[derive(Clone, Default)]
pub struct Capture(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// Captures every log line of this thread, at every level, while the guard lives.
    pub fn start() -> (Self, tracing::subscriber::DefaultGuard) {
        let capture = Capture::default();
        let sink = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        (capture, tracing::subscriber::set_default(subscriber))
    }

    /// The lines written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
