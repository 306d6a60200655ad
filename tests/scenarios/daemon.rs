//! The daemon, run as users run it, for what only the binary has: signals (SIGTERM mid-export,
//! SIGHUP, a SIGTERM ending the wait for the lock), its port's `/metrics`, the folder's lock,
//! and several processes on one PostgreSQL state (a SIGKILL, leases, an outage of the
//! database). Its work itself is tested in process on a manual clock (`daemon_work.rs`). These
//! wait in real time for what they watch (a log line, a metric), never for a schedule's tick:
//! each daemon exports at start.

use crate::common::*;
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
        let text = crate::common::http_get(format!("http://{}/metrics", self.addr))
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

    /// Waits for the daemon's first export to end well (its metric).
    async fn first_export(&self) {
        self.wait_until(120, "the first export", async |d| {
            d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
                .await
                >= 1.0
        })
        .await;
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

/// The test config for the daemon: every project from `start`, `per_hour` analytics requests
/// an hour per organization (no headroom), no retries, and `extra` after `[export]`.
fn daemon_config(
    base_url: &str,
    dir: &Path,
    start: chrono::NaiveDate,
    per_hour: u64,
    extra: &str,
) -> PathBuf {
    TestConfig {
        max_retries: 0,
        per_hour,
        headroom: Some(0),
        start: Some(start),
        extra: extra.to_string(),
        ..TestConfig::new(base_url, &dir.join("out"))
    }
    .write(&dir.join("docpipe.toml"))
}

/// The daemon's section: the export at start and then once a year (no test waits for a tick),
/// a free port, no grace at SIGTERM.
const DAEMON: &str = "[daemon]\nexport_schedule = \"0 0 0 1 1 *\"\nlisten = \"127.0.0.1:0\"\nshutdown_grace_secs = 0";

/// Today for the binary, which runs on the wall clock.
fn today() -> chrono::NaiveDate {
    chrono::Utc::now().date_naive()
}

/// The latest day exported of alpha's page views (what a rule over `daily` reads as its latest).
fn latest_day(out: &Path) -> String {
    std::fs::read_dir(out.join("page_views/project=alpha"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            name.strip_prefix("date=").map(str::to_string)
        })
        .max()
        .unwrap()
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
async fn sigterm_mid_export_leaves_consistent_state_and_the_next_start_resumes() {
    let mut data = small();
    data.faults.latency_ms = 25;
    data.faults.ops = vec!["views".into()];
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let start = today() - chrono::Duration::days(40);
    // Only the export at start, and a budget that is no limit.
    let cfg = daemon_config(&live.server.base_url(), dir.path(), start, 100_000, DAEMON);
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
    let days = |_: &Path| (today() - start).num_days() as usize + 1;
    assert!(
        written_before < 3 * days(&out),
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
        assert_eq!(site_days(&out, p), days(&out), "{p}");
    }
    assert!(tmp_files(&out).is_empty());
    let state = docpipe::store::Store::open(&out.join("state.sqlite")).unwrap();
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(
            state.windows("page_views", p).unwrap().len(),
            days(&out),
            "{p}"
        );
    }
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
        100,
        DAEMON,
    );
    let first = Daemon::start(&cfg);
    first.first_export().await;
    // A hang-up (a closed terminal, `systemctl reload`) does not end the daemon: it reads the
    // rule files again, says so and goes on serving its port.
    signal(&first, "HUP");
    first
        .wait_until(60, "the SIGHUP line", async |d| {
            d.count("SIGHUP: the rule files were read again: nothing changed") == 1
        })
        .await;
    let health = crate::common::http_get(format!("http://{}/healthz", first.addr))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok\n");
    // An `export` beside it answers at once, naming the daemon (its pid) and the ways out;
    // its dry run needs no lock.
    let beside = docpipe(&cfg, &["export"], None);
    let stderr = String::from_utf8_lossy(&beside.stderr);
    assert_eq!(beside.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(":{} since ", first.child.id()))
            && stderr.contains(" UTC (docpipe run)); not waited: let the daemon fetch a range with `docpipe backfill --queue`"),
        "{stderr}"
    );
    let dry = docpipe(&cfg, &["export", "--dry-run"], None);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
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
            "enabled = true\nname = \"after\"\nproject = \"alpha\"\njob = \"job_ok\"\nwait = false\n\
             when = \"SELECT date FROM daily ORDER BY date DESC LIMIT 1\"\n\
             prompt = \"after: {{ rows[0].date }}\"\n",
        )
        .unwrap();
        daemon_config(
            &live.server.base_url(),
            dir,
            today() - chrono::Duration::days(1),
            100,
            &format!(
                "[rules]\ndir = \"{}\"\n{DAEMON}\n[state]\nurl = \"{}\"\nlease_secs = 10",
                rules.display(),
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

    /// Waits until every daemon's export at start ran.
    pub async fn exported(daemons: &[Daemon]) {
        for d in daemons {
            d.wait_until(120, "the export at start", async |d| {
                d.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}")
                    .await
                    >= 1.0
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
    shared::exported(&daemons).await;
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
    let out = dir.path().join("out");
    let windows: i64 = per_daemon
        .split(' ')
        .map(|n| n.parse::<i64>().unwrap())
        .sum();
    assert_eq!(windows, 27, "{per_daemon}");
    // The rule fired once, whichever daemon ran it first.
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        vec![format!("after: {}", latest_day(&out))]
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
async fn daemons_wait_through_an_outage_of_their_database_and_go_on() {
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
    // The database goes away until the daemons have met the outage twice (the step of the
    // backfill or the budget's read fails, and they wait).
    let met =
        |daemons: &[Daemon]| -> usize { daemons.iter().map(|d| d.count("state database")).sum() };
    let before = met(&daemons);
    server.stop();
    let start = Instant::now();
    while met(&daemons) < before + 2 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no daemon waited for the database"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.resume();
    let all: Vec<&Daemon> = daemons.iter().collect();
    shared::drained(&server, 400, &all).await;
    shared::exported(&daemons).await;
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
        vec![format!("after: {}", latest_day(&dir.path().join("out")))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_stops_a_backfill_with_one_line() {
    let mut data = small();
    data.faults.latency_ms = 2000;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
        .write(&dir.path().join("docpipe.toml"));
    let child = docpipe_command(
        &cfg,
        &["backfill", "--from", "2026-03-01", "--to", "2026-03-10"],
    )
    .env("RUST_LOG", "info")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    // What is left of the run, and how to go on.
    let last = stderr.lines().last().unwrap_or_default();
    let left = last
        .strip_prefix("error: stopped by a signal with ")
        .and_then(|l| l.strip_suffix(" of 30 windows left; what was written stays whole: run the same command again to go on from there, or add --queue to leave the rest to the daemon"))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!((1..=30).contains(&left), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_file_added_then_broken_while_the_daemon_runs_is_read_again_on_sighup() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("jobs")).unwrap();
    let cfg = daemon_config(
        &live.server.base_url(),
        dir.path(),
        today() - chrono::Duration::days(1),
        100,
        DAEMON,
    );
    let d = Daemon::start(&cfg);
    d.first_export().await;
    assert_eq!(d.count("rules now:"), 0, "{:?}", d.lines());
    // A rule file added: the next SIGHUP (or export) takes it.
    top_rule(dir.path());
    signal(&d, "HUP");
    d.wait_until(60, "the rule added", async |d| {
        d.count("rules now: 1 (top)") == 1
    })
    .await;
    assert_eq!(d.count("rule files changed: added top.toml"), 1);
    // The file broken: the error is logged, and the rule it held stays.
    std::fs::write(
        dir.path().join("jobs/top.toml"),
        "name = \"top\"\nwhen = 3\n",
    )
    .unwrap();
    signal(&d, "HUP");
    d.wait_until(60, "the rule kept", async |d| {
        d.count("rules now: 1 (top)") == 2
    })
    .await;
    assert_eq!(d.count("rule files changed: changed top.toml"), 1);
    assert_eq!(
        d.count("top.toml: line 2: invalid type: integer `3`, expected a string; the rule it held before, if any, stays until the file loads"),
        1,
        "{:?}",
        d.lines()
    );
    // `status` flags the file that does not load.
    let status = String::from_utf8_lossy(&docpipe(&cfg, &["status"], None).stdout).to_string();
    assert!(
        status.contains("top.toml: line 2: invalid type"),
        "{status}"
    );
    let (code, _) = d.terminate();
    assert_eq!(code, Some(0));
}

#[tokio::test]
async fn a_key_file_rotated_while_the_daemon_runs_ends_the_refused_state_and_its_alert() {
    use std::os::unix::fs::PermissionsExt;
    const ROTATED: &str = "mint_test_admin_a_rotated";
    let mut data = small();
    data.organizations
        .iter_mut()
        .find(|o| o.id == "org-a")
        .unwrap()
        .admin_keys
        .push(ROTATED.into());
    let live = Live::start_at(data, chrono::Utc::now()).await;
    let hook = Hook::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = daemon_config(
        &live.server.base_url(),
        dir.path(),
        today() - chrono::Duration::days(1),
        100,
        &format!(
            "{DAEMON}\n[alerts]\nwebhook_url_env = \"DOCPIPE_IT_HOOK\"\npage_url = \"http://status.example/\"\n"
        ),
    );
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "admin_key_env = \"DOCPIPE_IT_ADMIN_A\"",
        "admin_key_file = \"a.key\"",
    );
    std::fs::write(&cfg, text).unwrap();
    let key_file = dir.path().join("a.key");
    std::fs::write(&key_file, format!("{ADMIN_A}\n")).unwrap();
    // Readable by others: refused, as ssh refuses such a key, before anything is sent.
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = docpipe(&cfg, &["check"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "error: organization org-a: the key file {0} may be read by others (mode 0644): `chmod 600 {0}`, so that only its owner reads it",
            key_file.display()
        )
    );
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_docpipe"));
    cmd.env("DOCPIPE_IT_HOOK", &hook.url);
    let d = Daemon::start_with(&cfg, cmd);
    d.first_export().await;
    let key_of = |cfg: &Path| {
        let out = docpipe(cfg, &["status", "--json"], None);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["organizations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == "org-a")
            .unwrap()["key"]
            .clone()
    };
    let first = key_of(&cfg);
    assert_eq!(first["health"], "fine", "{first}");
    // The service expires the key; a queued backfill's requests find it refused.
    assert!(live.emu().expire_key(ADMIN_A));
    let back = |from: i64, to: i64| {
        let day = |n: i64| (today() - chrono::Duration::days(n)).to_string();
        let out = docpipe(
            &cfg,
            &[
                "backfill",
                "--from",
                &day(from),
                "--to",
                &day(to),
                "--queue",
            ],
            None,
        );
        assert!(out.status.success(), "{out:?}");
    };
    back(6, 5);
    let refused = hook.wait_for("key_refused", 1).await;
    let m = &refused[0];
    assert_eq!(m["state"], "problem");
    assert_eq!(m["organization"], "org-a");
    assert_eq!(m["page"], "http://status.example/");
    let text = m["text"].as_str().unwrap();
    let fingerprint = first["fingerprint"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "docpipe alert: the admin key of organization org-a (fingerprint {fingerprint}) is refused since "
        )) && text.contains(" (API key has expired); the service's keys expire after 90 days by default: make a new one on the API keys page and write it to ")
            && text.contains("a.key (read again at every run: no restart)"),
        "{text}"
    );
    assert_eq!(text.matches("since").count(), 1, "since once: {text}");
    let status = String::from_utf8_lossy(&docpipe(&cfg, &["status"], None).stdout).to_string();
    assert!(
        status.contains(&format!(
            "key org-a: the admin key of organization org-a (fingerprint {fingerprint}) is refused since "
        )),
        "{status}"
    );
    assert_eq!(key_of(&cfg)["health"], "refused");
    // The new key goes into the file; the daemon reads it again after the next 401.
    std::fs::write(&key_file, ROTATED).unwrap();
    back(9, 8);
    let both = hook.wait_for("key_refused", 2).await;
    assert_eq!(both[1]["state"], "recovered");
    assert!(
        both[1]["text"].as_str().unwrap().starts_with(
            "docpipe recovered: the admin key of organization org-a works again (a problem since "
        ),
        "{both:#?}"
    );
    assert_eq!(
        d.count("admin key read again: a new key"),
        1,
        "{:?}",
        d.lines()
    );
    let now = key_of(&cfg);
    assert_eq!(now["health"], "fine");
    assert_ne!(now["fingerprint"], first["fingerprint"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(hook.of("key_refused").len(), 2);
    let (code, lines) = d.terminate();
    assert_eq!(code, Some(0));
    for l in lines {
        assert!(
            !l.contains(ADMIN_A) && !l.contains(ROTATED) && !l.contains(&hook.url),
            "{l}"
        );
    }
}
