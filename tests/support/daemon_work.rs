//! What the in-process tests and the scenarios of `daemon_work` share.

use crate::common::*;
use chrono::NaiveDate;
use docpipe::api::AdminKey;
use docpipe::app::{Access, Context, Keys};
use docpipe::clock::ManualClock;
use docpipe::daemon::Daemon;
use metrics_exporter_prometheus::PrometheusHandle;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The test projects from `start`, `per_hour` analytics requests an hour per organization (no
/// headroom), no retries (a service that is down fails fast), and `extra` after `[export]`.
pub fn daemon_config(base_url: &str, dir: &Path, start: NaiveDate, per_hour: u64) -> TestConfig {
    TestConfig {
        max_retries: 0,
        per_hour,
        headroom: Some(0),
        start: Some(start),
        ..TestConfig::new(base_url, &dir.join("out"))
    }
}

/// The settings of `config`, written into `dir` as `docpipe.toml` first (as a user's file).
pub fn settings(config: &TestConfig, dir: &Path) -> docpipe::config::Settings {
    let cfg = config.write(&dir.join("docpipe.toml"));
    docpipe::config::Settings::load(&cfg).unwrap()
}

/// A daemon in process over `settings`, on `clock`, with `rules` (a folder of rule files).
pub async fn daemon(
    settings: docpipe::config::Settings,
    clock: Arc<ManualClock>,
    keys: Keys,
    rules: Option<&Path>,
) -> Daemon {
    let given = settings.clone();
    let ctx = Context::open(settings, clock, Access::Export, keys)
        .await
        .unwrap();
    let rules = rules.map_or_else(Vec::new, |dir| {
        let loaded = docpipe::app::rules::load(dir, &given, &[]).unwrap();
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        loaded.rules
    });
    Daemon::open(ctx, rules).unwrap()
}

/// What a daemon in process logged and counted, as `docpipe run` prints and serves them: its
/// log lines (INFO and up) and its `/metrics` text. Both are captured on the test's thread, so
/// the tests that use it run on a current-thread runtime (every piece of the daemon's work runs
/// there).
pub struct Seen {
    pub log: Arc<Mutex<Vec<u8>>>,
    pub metrics: PrometheusHandle,
    pub _log: tracing::subscriber::DefaultGuard,
    pub _metrics: metrics::LocalRecorderGuard<'static>,
}

#[derive(Clone)]
pub struct LogSink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seen {
    pub fn capture() -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = LogSink(log.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        let recorder: &'static _ = Box::leak(Box::new(
            metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder(),
        ));
        Self {
            log,
            metrics: recorder.handle(),
            _log: tracing::subscriber::set_default(subscriber),
            _metrics: metrics::set_default_local_recorder(recorder),
        }
    }

    pub fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.log.lock().unwrap())
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Log lines that contain every one of `needles`.
    pub fn count(&self, needles: &[&str]) -> usize {
        self.lines()
            .iter()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }

    /// A series' value on `/metrics` (0 when it is not there).
    pub fn metric(&self, series: &str) -> f64 {
        self.metrics
            .render()
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }
}

/// Analytics requests an hour per organization.
pub const LIMIT: u64 = 30;

pub fn keys() -> Keys {
    keys_with(ADMIN_A)
}

/// The test keys, org-a's `a`.
pub fn keys_with(a: &str) -> Keys {
    let key = |k: &str| AdminKey::parse(k, "mint", "test").unwrap();
    Keys::Given(BTreeMap::from([
        ("org-a".to_string(), key(a)),
        ("org-b".to_string(), key(ADMIN_B)),
    ]))
}

/// The daemon's alerts to `hook`, naming a status page.
pub fn alerts_to(hook: &Hook) -> docpipe::daemon::alerts::Alerts {
    let webhook = docpipe::daemon::alerts::Webhook::new(&hook.url, "DOCPIPE_IT_HOOK").unwrap();
    docpipe::daemon::alerts::Alerts::to(webhook, Some("http://status.example/".into()))
}
