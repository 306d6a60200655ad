//! The daemon, run as users run it: the binary on a fast schedule against the emulator, stopped
//! with SIGTERM. (The scheduler runs on real time, so these tests wait in real time: seconds.)

use crate::common::*;
use docpipe::emulator::data::DataFile;
use docpipe::emulator::{Emulator, Op};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `docpipe run`, its log lines and its metrics address.
struct Daemon {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    addr: String,
}

impl Daemon {
    fn start(cfg: &Path) -> Self {
        Self::start_with(cfg, Command::new(env!("CARGO_BIN_EXE_docpipe")))
    }

    fn start_with(cfg: &Path, mut cmd: Command) -> Self {
        let mut child = cmd
            .current_dir(cfg.parent().unwrap())
            .arg("--config")
            .arg(cfg)
            .arg("run")
            .env("DOCPIPE_IT_ADMIN_A", ADMIN_A)
            .env("DOCPIPE_IT_ADMIN_B", ADMIN_B)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let addr = first
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_string();
        Self { child, log, addr }
    }

    fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn count(&self, needle: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(needle)).count()
    }

    async fn metric(&self, series: &str) -> f64 {
        let text = reqwest::get(format!("http://{}/metrics", self.addr))
            .await
            .unwrap_or_else(|e| panic!("{e}: {:?}", self.lines()))
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits (real time) until `ok`, failing after `secs` (generous: it returns as soon as `ok`,
    /// and a loaded machine can be several times slower).
    async fn wait_until(&self, secs: u64, what: &str, mut ok: impl AsyncFnMut(&Self) -> bool) {
        let start = Instant::now();
        while !ok(self).await {
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "timed out waiting for {what}; log:\n{}",
                self.lines().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, and the exit code.
    fn terminate(mut self) -> (Option<i32>, Vec<String>) {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let status = self.child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        (status.code(), self.lines())
    }
}

/// The test config for the daemon: every project from `start`, 100 analytics requests an hour
/// per organization (no headroom), no retries (so that a service that is down fails fast).
fn daemon_config(base_url: &str, dir: &Path, start: chrono::NaiveDate, extra: &str) -> PathBuf {
    let cfg = dir.join("docpipe.toml");
    let text = config(base_url, &dir.join("out"), extra)
        .replace("max_retries = 3", "max_retries = 0")
        .replace(
            "analytics_per_hour = 100000",
            "analytics_per_hour = 100\nheadroom_percent = 0",
        );
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        // `organization = ...` lines are the projects' (organizations say `id = ...`).
        if line.starts_with("organization = ") {
            out.push_str(&format!("start_date = \"{start}\"\n"));
        }
    }
    std::fs::write(&cfg, out).unwrap();
    cfg
}

const DAEMON: &str = "[daemon]\nexport_schedule = \"*/2 * * * * *\"\nlisten = \"127.0.0.1:0\"\nshutdown_grace_secs = 0";

fn today() -> chrono::NaiveDate {
    chrono::Utc::now().date_naive()
}

fn tmp_files(out: &Path) -> Vec<PathBuf> {
    files_below(out)
        .into_iter()
        .filter(|f| {
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".tmp-")
        })
        .collect()
}

fn site_days(out: &Path, project: &str) -> usize {
    std::fs::read_dir(out.join(format!("site_totals/project={project}")))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_run_on_schedule_a_queued_backfill_drains_within_the_budget_after_them() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let start = today() - chrono::Duration::days(1);
    // A rule after each export, and one on its own schedule.
    let rules = after_and_timed_rules(dir.path(), "*/3 * * * * *");
    let cfg = daemon_config(
        &live.server.base_url(),
        dir.path(),
        start,
        &format!(
            "[rules]\ndir = \"{}\"\n{}",
            rules.display(),
            DAEMON.replace("*/2", "*/5")
        ),
    );
    // Two weeks of real data for every project, queued before the daemon starts.
    let queued = docpipe(
        &cfg,
        &[
            "backfill",
            "--queue",
            "--from",
            "2026-03-01",
            "--to",
            "2026-03-14",
        ],
        None,
    );
    assert_eq!(queued.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&queued.stdout),
        "queued backfill 1: 2026-03-01..2026-03-14 of every project; `docpipe run` drains it between scheduled runs, within the budget\n"
    );
    let d = Daemon::start(&cfg);
    d.wait_until(120, "the backfill and two scheduled exports", async |d| {
        d.metric("docpipe_runs_total{kind=\"backfill\",result=\"ok\"}")
            .await
            >= 1.0
            && d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
                .await
                >= 2.0
    })
    .await;
    let health = reqwest::get(format!("http://{}/healthz", d.addr))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    d.wait_until(60, "the scheduled rule", async |d| {
        d.metric("docpipe_rule_firings_total{rule=\"timed\",sent=\"sent\"}")
            .await
            >= 1.0
    })
    .await;
    // Both rules fired once (the cooldown holds the rest), each as its schedule says.
    assert_eq!(
        d.metric("docpipe_rule_firings_total{rule=\"after\",sent=\"sent\"}")
            .await,
        1.0
    );
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        vec![format!("after: {}", today())]
    );
    assert_eq!(
        live.emu().job_prompts("alpha", "job_nochange").unwrap(),
        vec![format!("timed: {}", today())]
    );
    // The metrics say what happened.
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(
            d.metric(&format!("docpipe_windows_pending{{project=\"{p}\"}}"))
                .await,
            2.0,
            "{p}"
        );
        let last = d
            .metric(&format!(
                "docpipe_last_export_success_timestamp_seconds{{project=\"{p}\"}}"
            ))
            .await;
        assert!(
            (chrono::Utc::now().timestamp() as f64 - last).abs() < 60.0,
            "{p}: {last}"
        );
    }
    assert_eq!(d.metric("docpipe_backfills_queued").await, 0.0);
    assert!(
        d.metric("docpipe_requests_total{operation=\"page_views\",status=\"200\"}")
            .await
            >= 70.0
    );
    assert!(
        d.metric("docpipe_budget_remaining{scope=\"analytics:org-a\"}")
            .await
            <= 100.0 - 60.0
    );
    let (code, log) = d.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    // The first export came before the first backfill window.
    let first = |needle: &str| log.iter().position(|l| l.contains(needle)).unwrap();
    assert!(first("export: exported") < first("backfill window written"));
    assert_eq!(
        log.iter().filter(|l| l.contains("backfill done")).count(),
        1
    );
    // Every backfilled day equals the emulator's truth.
    let out = dir.path().join("out");
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(site_days(&out, p), 14 + 2, "{p}");
        for day in ["2026-03-01", "2026-03-14"] {
            let truth = live
                .emu()
                .truth(
                    p,
                    crate::common::day(day),
                    crate::common::day(day).succ_opt().unwrap(),
                )
                .unwrap();
            let file = out.join(format!(
                "page_views/project={p}/date={day}/part-00000.parquet"
            ));
            assert_eq!(parquet_rows(&file).len(), truth.len(), "{p} {day}");
        }
    }
    // Nothing over the budget: no 429, and org-a's requests within its 100 an hour.
    let stats = live.emu().stats();
    let views = &stats["views"];
    assert_eq!(views.by_status.get(&429), None);
    let org_a = views.by_project.get("alpha").unwrap() + views.by_project.get("beta").unwrap();
    assert!(org_a <= 100, "{org_a}");
    assert!(tmp_files(&out).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_export_leaves_consistent_state_and_the_next_start_resumes() {
    let mut data = small();
    data.faults.latency_ms = 25;
    data.faults.ops = vec!["views".into()];
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let start = today() - chrono::Duration::days(40);
    // Only the export at start (the schedule says once a year), and a budget that is no limit.
    let cfg = daemon_config(
        &live.server.base_url(),
        dir.path(),
        start,
        &DAEMON.replace("*/2 * * * * *", "0 0 0 1 1 *"),
    );
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "analytics_per_hour = 100\n",
        "analytics_per_hour = 100000\n",
    );
    std::fs::write(&cfg, text).unwrap();
    let d = Daemon::start(&cfg);
    d.wait_until(120, "the first windows", async |d| {
        d.count("window written") >= 5
    })
    .await;
    let (code, log) = d.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    assert!(
        log.iter()
            .any(|l| l.contains("the run in progress was abandoned")),
        "{}",
        log.join("\n")
    );
    assert!(tmp_files(&out).is_empty());
    let written_before: usize = ["alpha", "beta", "gamma"]
        .iter()
        .map(|p| site_days(&out, p))
        .sum();
    assert!(
        written_before < 3 * 41,
        "stopped mid-export: {written_before}"
    );

    // The next start completes the export: every day of every project, once.
    let d = Daemon::start(&cfg);
    d.wait_until(120, "the resumed export", async |d| {
        d.count("export: exported") >= 1
    })
    .await;
    let (code, log) = d.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(site_days(&out, p), 41, "{p}");
    }
    assert!(tmp_files(&out).is_empty());
    let state = docpipe::store::Store::open(&out.join("state.sqlite")).unwrap();
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(state.windows("page_views", p).unwrap().len(), 41, "{p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_down_for_a_while_loses_nothing_and_is_reported_once_per_run() {
    let data: DataFile = small();
    let clock = docpipe::clock::ManualClock::new(noon());
    // Down: connections to the address are refused (and no other server can take the port).
    let port = ClosedPort::new();
    let base_url = port.base_url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let start = today() - chrono::Duration::days(2);
    let cfg = daemon_config(&base_url, dir.path(), start, DAEMON);
    let d = Daemon::start(&cfg);
    d.wait_until(120, "two failed runs", async |d| {
        d.metric("docpipe_runs_total{kind=\"export\",result=\"failed\"}")
            .await
            >= 2.0
    })
    .await;
    // Once per organization per run, not once per window.
    let runs = d
        .metric("docpipe_runs_total{kind=\"export\",result=\"failed\"}")
        .await as usize;
    let reported = d.count("the rest of this run for organization org-a is skipped");
    assert!(
        reported >= 2 && reported <= runs + 1,
        "{reported} reports for {runs} runs; log:\n{}",
        d.lines().join("\n")
    );
    // The service comes back: the next run fetches everything.
    let server = port.open(Emulator::new(data, clock));
    d.wait_until(120, "a successful run", async |d| {
        d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
            .await
            >= 1.0
    })
    .await;
    let (code, log) = d.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(site_days(&out, p), 3, "{p}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_key_is_reported_once_per_run_and_the_daemon_goes_on() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let start = today() - chrono::Duration::days(5);
    let cfg = daemon_config(&live.server.base_url(), dir.path(), start, DAEMON);
    // org-a's variable holds a key of the right shape that the service does not know.
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("DOCPIPE_IT_ADMIN_A", "DOCPIPE_IT_ADMIN_UNKNOWN");
    std::fs::write(&cfg, text).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_docpipe"));
    cmd.env("DOCPIPE_IT_ADMIN_UNKNOWN", "mint_test_admin_unknown");
    let d = Daemon::start_with(&cfg, cmd);
    d.wait_until(120, "two runs", async |d| {
        d.metric("docpipe_runs_total{kind=\"export\",result=\"failed\"}")
            .await
            >= 2.0
    })
    .await;
    let (code, log) = d.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    let runs = log
        .iter()
        .filter(|l| l.contains("export: exported"))
        .count();
    let mentions = |level: &str| {
        log.iter()
            .filter(|l| l.contains(level) && l.contains("the API key was rejected (401"))
            .count()
    };
    // One error per run, and one line of the run's summary (alpha and beta: 12 windows, one cause);
    // a run that SIGTERM cut (no grace) has logged its error and has no summary.
    let errors = mentions(" ERROR ");
    assert!(
        errors == runs || errors == runs + 1,
        "{errors} errors in {runs} runs:\n{}",
        log.join("\n")
    );
    assert_eq!(mentions(" WARN "), runs, "{}", log.join("\n"));
    assert!(
        log.iter()
            .any(|l| l.contains("export:   12 windows failed: page views for project alpha"))
    );
    // org-b's project was exported all the same: 6 days.
    assert_eq!(site_days(&dir.path().join("out"), "gamma"), 6);
    assert_eq!(site_days(&dir.path().join("out"), "alpha"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_job_of_ten_minutes_delays_no_export_and_its_polling_resumes_after_a_restart() {
    let mut data = small();
    data.limits.job_duration_secs = 600;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    // A rule after each export that waits for its job (the default), for up to 30 minutes.
    std::fs::write(
        rules.join("watch.toml"),
        "name = \"watch\"\nproject = \"alpha\"\njob = \"job_ok\"\n\
         when = \"SELECT date FROM daily ORDER BY date DESC LIMIT 1\"\n\
         prompt = \"watch: {{ rows[0].date }}\"\n",
    )
    .unwrap();
    let cfg = daemon_config(
        &live.server.base_url(),
        dir.path(),
        today() - chrono::Duration::days(1),
        &format!("[rules]\ndir = \"{}\"\n{DAEMON}", rules.display()),
    );
    let d = Daemon::start(&cfg);
    // The job runs for 10 minutes of the service's clock; the exports go on every 2 s, and
    // the job is looked at between them.
    d.wait_until(120, "three exports and two polling steps", async |d| {
        d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
            .await
            >= 3.0
            && d.metric("docpipe_poll_steps_total").await >= 2.0
    })
    .await;
    assert_eq!(
        d.metric("docpipe_rule_firings_total{rule=\"watch\",sent=\"sent\"}")
            .await,
        1.0
    );
    assert!(live.emu().requests(Op::JobGet, "alpha") >= 2);
    let (code, log) = d.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    let state = dir.path().join("out/state.sqlite");
    let ledger = docpipe::store::ledger::Ledger::open(&state).unwrap();
    let polling = ledger.polling().unwrap();
    assert_eq!(polling.len(), 1, "the job is still being polled");
    assert_eq!(polling[0].0.status.as_deref(), Some("active"));

    // A new daemon takes the polling over from the ledger; the job ends; it is recorded.
    let d = Daemon::start(&cfg);
    live.clock.advance(Duration::from_secs(601));
    d.wait_until(120, "the job's end", async |d| {
        d.metric("docpipe_job_outcomes_total{rule=\"watch\",status=\"completed\"}")
            .await
            >= 1.0
    })
    .await;
    let (code, log) = d.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    assert!(ledger.polling().unwrap().is_empty());
    let all = ledger.all().unwrap();
    assert_eq!(all.len(), 1, "sent once: {all:?}");
    assert_eq!(all[0].status.as_deref(), Some("completed"));
    assert!(
        all[0]
            .pr_link
            .as_deref()
            .is_some_and(|l| l.starts_with("https://github.com/")),
        "{all:?}"
    );
    assert_eq!(live.emu().job_prompts("alpha", "job_ok").unwrap().len(), 1);
    let runs = parquet_rows(
        &dir.path()
            .join("out/agent_runs/project=alpha/part-00000.parquet"),
    );
    assert_eq!(runs.len(), 1);
    assert!(runs[0].contains("status=\"completed\""), "{runs:?}");
}

/// Sends `signal` to a running daemon.
fn signal(d: &Daemon, signal: &str) {
    Command::new("kill")
        .args([&format!("-{signal}"), &d.child.id().to_string()])
        .status()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_waiting_for_the_lock_stops_on_sigterm_and_sighup_is_ignored() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = daemon_config(
        &live.server.base_url(),
        dir.path(),
        today() - chrono::Duration::days(1),
        DAEMON,
    );
    let first = Daemon::start(&cfg);
    first
        .wait_until(120, "the first export", async |d| {
            d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
                .await
                >= 1.0
        })
        .await;
    // A hang-up (a closed terminal, `systemctl reload`) does not end the daemon.
    signal(&first, "HUP");
    first
        .wait_until(60, "the SIGHUP line and another export", async |d| {
            d.count("SIGHUP ignored") == 1
                && d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
                    .await
                    >= 2.0
        })
        .await;
    // The second one waits for the folder's lock, and a SIGTERM ends the wait.
    let second = Daemon::start(&cfg);
    second
        .wait_until(60, "the wait for the lock", async |d| {
            d.count("another docpipe is exporting to this folder; waiting for it") == 1
        })
        .await;
    let (code, log) = second.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    assert_eq!(
        log.iter()
            .filter(|l| l.contains("stopped before starting"))
            .count(),
        1,
        "{}",
        log.join("\n")
    );
    assert!(!log.iter().any(|l| l.contains("export: exported")));
    let (code, log) = first.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_backfill_of_every_dataset_drains_one_window_a_step_to_what_the_cli_writes() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let all = |text: String| {
        text.replace("datasets = [\"page_views\"]\n", "").replace(
            "analytics_per_hour = 100\nheadroom_percent = 0",
            "analytics_per_hour = 100000\nheadroom_percent = 0",
        )
    };
    // Exports every 20 s, so that the steps of the backfill run in between.
    let cfg = daemon_config(
        &live.server.base_url(),
        dir.path(),
        today(),
        &DAEMON.replace("*/2", "*/20"),
    );
    std::fs::write(&cfg, all(std::fs::read_to_string(&cfg).unwrap())).unwrap();
    let range = ["--from", "2026-03-09", "--to", "2026-03-10"];
    let queued = docpipe(&cfg, &[&["backfill", "--queue"][..], &range].concat(), None);
    assert_eq!(queued.status.code(), Some(0));
    let d = Daemon::start(&cfg);
    d.wait_until(120, "the backfill", async |d| {
        d.metric("docpipe_runs_total{kind=\"backfill\",result=\"ok\"}")
            .await
            >= 1.0
    })
    .await;
    let (_, lines) = d.terminate();
    // Each step took one window: 6 page-view windows, 4 daily datasets x 6, 2 spans x 3.
    let steps = lines
        .iter()
        .filter(|l| l.contains("backfill window written"))
        .count();
    assert_eq!(steps, 6 + 4 * 6 + 2 * 3, "{lines:#?}");
    // The same files as the command line's backfill of the range.
    let ref_dir = dir.path().join("ref");
    std::fs::create_dir_all(&ref_dir).unwrap();
    let ref_cfg = ref_dir.join("c.toml");
    std::fs::write(
        &ref_cfg,
        config_all(&live.server.base_url(), &ref_dir.join("out"), ""),
    )
    .unwrap();
    let run = docpipe(&ref_cfg, &[&["backfill"][..], &range].concat(), None);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let of_range = |out: &Path| -> Vec<_> {
        dataset(out)
            .into_iter()
            .filter(|(f, _)| {
                let f = f.to_string_lossy();
                f.contains("date=2026-03-") || f.contains("feedback_undated")
            })
            .collect()
    };
    let got = of_range(&dir.path().join("out"));
    // 8 daily tables and the 2 span tables, for 3 projects and 2 days (and any undated feedback).
    assert!(
        got.len() >= 10 * 3 * 2,
        "{:?}",
        got.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    assert_eq!(got, of_range(&ref_dir.join("out")));
}

/// Daemons sharing their state on PostgreSQL: the config of one of `n` (each its own folder
/// for its config, one output folder), the database's password in their environment.
mod shared {
    use super::*;
    use crate::pg::{PASSWORD, Postgres};
    use docpipe::store::pg::PASSWORD_ENV;

    /// The config: every project from yesterday, a rule after each export (its cooldown lets
    /// it fire once), the state on `server` with 10-second leases.
    pub fn config(live: &Live, dir: &Path, server: &Postgres) -> PathBuf {
        let rules = dir.join("jobs");
        std::fs::create_dir_all(&rules).unwrap();
        std::fs::write(
            rules.join("after.toml"),
            "name = \"after\"\nproject = \"alpha\"\njob = \"job_ok\"\nwait = false\n\
             when = \"SELECT date FROM daily ORDER BY date DESC LIMIT 1\"\n\
             prompt = \"after: {{ rows[0].date }}\"\n",
        )
        .unwrap();
        daemon_config(
            &live.server.base_url(),
            dir,
            today() - chrono::Duration::days(1),
            &format!(
                "[rules]\ndir = \"{}\"\n{}\n[state]\nurl = \"{}\"\nlease_secs = 10",
                rules.display(),
                // Every 5 s: a run's trends leave room for backfill windows on a busy machine.
                DAEMON.replace("*/2", "*/5"),
                server.url()
            ),
        )
    }

    pub fn start(cfg: &Path) -> Daemon {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_docpipe"));
        cmd.env(PASSWORD_ENV, PASSWORD);
        Daemon::start_with(cfg, cmd)
    }

    pub fn command(cfg: &Path, args: &[&str]) -> std::process::Output {
        docpipe_command(cfg, args)
            .env(PASSWORD_ENV, PASSWORD)
            .output()
            .unwrap()
    }

    /// Queues a backfill of every project.
    pub fn queue(cfg: &Path, from: &str, to: &str) {
        let out = command(cfg, &["backfill", "--queue", "--from", from, "--to", to]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits (real time) until the database says every queued backfill is done.
    pub async fn drained(server: &Postgres, secs: u64, daemons: &[&Daemon]) {
        let start = Instant::now();
        while server.psql("SELECT COUNT(*) FROM backfill_queue WHERE done_at IS NULL") != "0" {
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "the backfill did not drain; logs:\n{}",
                daemons
                    .iter()
                    .map(|d| d.lines().join("\n"))
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until every daemon's scheduled export ran twice at least.
    pub async fn exported_twice(daemons: &[Daemon]) {
        for d in daemons {
            d.wait_until(120, "two scheduled exports", async |d| {
                d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
                    .await
                    >= 2.0
            })
            .await;
        }
    }

    /// Stops every daemon with SIGTERM: each exits 0.
    pub fn stop(daemons: Vec<Daemon>) {
        for d in daemons {
            let (code, log) = d.terminate();
            assert_eq!(code, Some(0), "{}", log.join("\n"));
        }
    }

    /// Every day of `from..=to` of every project equals the emulator's truth; nothing refused
    /// for the limit; org-a's requests within its 100 an hour; every page-view request the
    /// emulator served is one a written window counted, give or take `lost` (pages a killed
    /// daemon fetched and a resumed walk did not count).
    pub fn equals_the_truth(
        live: &Live,
        out: &Path,
        server: &Postgres,
        days: (&str, &str),
        lost: u64,
    ) {
        let (from, to) = (crate::common::day(days.0), crate::common::day(days.1));
        for p in ["alpha", "beta", "gamma"] {
            let mut d = from;
            while d <= to {
                let truth = live.emu().truth(p, d, d.succ_opt().unwrap()).unwrap();
                let file = out.join(format!(
                    "page_views/project={p}/date={d}/part-00000.parquet"
                ));
                assert_eq!(parquet_rows(&file).len(), truth.len(), "{p} {d}");
                d = d.succ_opt().unwrap();
            }
        }
        let stats = live.emu().stats();
        let views = &stats["views"];
        assert_eq!(views.by_status.get(&429), None);
        assert!(live.emu().refused_over_limit().values().all(|n| *n == 0));
        let org_a = views.by_project.get("alpha").unwrap() + views.by_project.get("beta").unwrap();
        assert!(org_a <= 100, "{org_a}");
        let served: u64 = views.by_project.values().sum();
        let counted: u64 = server
            .psql("SELECT SUM(requests) FROM windows WHERE dataset = 'page_views'")
            .parse()
            .unwrap();
        assert!(
            served >= counted && served - counted <= lost,
            "served {served}, counted {counted}"
        );
        assert!(tmp_files(out).is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_on_one_postgres_share_the_budget_walk_each_window_once_and_fire_once() {
    let server = crate::pg::Postgres::start();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = shared::config(&live, dir.path(), &server);
    shared::queue(&cfg, "2026-03-01", "2026-03-07");
    let started = Instant::now();
    let daemons: Vec<Daemon> = (0..3).map(|_| shared::start(&cfg)).collect();
    let all: Vec<&Daemon> = daemons.iter().collect();
    shared::drained(&server, 400, &all).await;
    shared::exported_twice(&daemons).await;
    let took = started.elapsed();
    // `status` on the shared state: three daemons alive, the budget of each organization.
    let status = shared::command(&cfg, &["status"]);
    let text = String::from_utf8_lossy(&status.stdout).to_string();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains(": alive (heartbeat"))
            .count(),
        3,
        "{text}"
    );
    assert!(text.contains(&format!("state: {}", server.url())), "{text}");
    assert!(text.contains("budget analytics:org-a: "), "{text}");
    let per_daemon = server.psql(
        "SELECT string_agg(n::text, ' ' ORDER BY n DESC) FROM
         (SELECT COUNT(*) AS n FROM window_claims WHERE done_by IS NOT NULL GROUP BY done_by) d",
    );
    let requests = server.psql("SELECT COUNT(*) FROM requests");
    shared::stop(daemons);
    // Every window once: the emulator served exactly the requests the written windows counted.
    shared::equals_the_truth(
        &live,
        &dir.path().join("out"),
        &server,
        ("2026-03-01", "2026-03-07"),
        0,
    );
    // 7 days and yesterday and today, for 3 projects: 27 windows, each done by one daemon.
    let windows: i64 = per_daemon
        .split(' ')
        .map(|n| n.parse::<i64>().unwrap())
        .sum();
    assert_eq!(windows, 27, "{per_daemon}");
    // The rule fired once, whichever daemon ran it first.
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        vec![format!("after: {}", today())]
    );
    assert_eq!(
        server.psql("SELECT COUNT(*) FROM rule_firings WHERE sent = 'sent'"),
        "1"
    );
    eprintln!(
        "three daemons: windows per daemon {per_daemon}, {requests} requests in {:.0} s",
        took.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_backfill_is_taken_over_when_its_lease_runs_out() {
    let server = crate::pg::Postgres::start();
    let mut data = small();
    data.faults.latency_ms = 150;
    data.faults.ops = vec!["views".into()];
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = shared::config(&live, dir.path(), &server);
    shared::queue(&cfg, "2026-03-01", "2026-03-12");
    let mut a = shared::start(&cfg);
    a.wait_until(300, "a's first backfill windows", async |d| {
        d.count("backfill window written") >= 3
    })
    .await;
    let b = shared::start(&cfg);
    // SIGKILL: no release, no leave; its claims run out in 10 s.
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed = Instant::now();
    b.wait_until(300, "b taking the backfill over", async |d| {
        d.count("backfill window written") >= 1
    })
    .await;
    let takeover = killed.elapsed();
    shared::drained(&server, 400, &[&b]).await;
    let (code, log) = b.terminate();
    assert_eq!(code, Some(0), "{}", log.join("\n"));
    assert!(
        takeover >= Duration::from_secs(5),
        "taken over after {takeover:?}, before the lease ran out"
    );
    // Pages the killed daemon fetched for the walk it left are not counted by the window b
    // finished from them (3 pages a day at most).
    shared::equals_the_truth(
        &live,
        &dir.path().join("out"),
        &server,
        ("2026-03-01", "2026-03-12"),
        3,
    );
    eprintln!("takeover after the kill: {:.1} s", takeover.as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_wait_through_a_minute_without_their_database_and_go_on() {
    let mut server = crate::pg::Postgres::start();
    let mut data = small();
    data.faults.latency_ms = 150;
    data.faults.ops = vec!["views".into()];
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = shared::config(&live, dir.path(), &server);
    shared::queue(&cfg, "2026-03-01", "2026-03-10");
    let daemons: Vec<Daemon> = (0..2).map(|_| shared::start(&cfg)).collect();
    // Whichever daemon holds the queued range.
    let start = Instant::now();
    while daemons
        .iter()
        .map(|d| d.count("backfill window written"))
        .sum::<usize>()
        < 2
    {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no backfill window written"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.stop();
    tokio::time::sleep(Duration::from_secs(60)).await;
    server.resume();
    let ok = "docpipe_runs_total{kind=\"export\",result=\"ok\"}";
    let mut before = Vec::new();
    for d in &daemons {
        before.push(d.metric(ok).await);
    }
    let all: Vec<&Daemon> = daemons.iter().collect();
    shared::drained(&server, 400, &all).await;
    for (d, b) in daemons.iter().zip(before) {
        d.wait_until(120, "an export after the outage", async |d| {
            d.metric(ok).await > b
        })
        .await;
    }
    shared::stop(daemons);
    // Nothing lost (every day equals the truth) or doubled (one firing; a window cut by the
    // outage walked again from its stored pages: 3 pages a day at most per daemon).
    shared::equals_the_truth(
        &live,
        &dir.path().join("out"),
        &server,
        ("2026-03-01", "2026-03-10"),
        6,
    );
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        vec![format!("after: {}", today())]
    );
}
