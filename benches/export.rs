//! Export benchmark: a backfill of over a million rows from the emulator (run as its own process,
//! limits off), measuring docpipe's CPU per row, rows per second, requests against the minimum
//! and peak memory, in three rounds (medians and ranges). Each round's output is then sent to an
//! S3-compatible server (moto's, from the test tools' virtual environment, when it is there) the
//! way `--output s3://…` sends it, for the CPU per row of S3 output beside local output. Run with
//! `cargo bench --bench export`; it prints its figures.
//!
//! Then each dataset's backfill alone, each in a process of its own (this bench run again as
//! a child, `DOCPIPE_BENCH_ROLE`), printing its peak resident memory: every dataset over the
//! same days, the assistant's turns over 8 and 90 days (its span's memory must not grow with
//! the span), and a span of 1,000,000 turns over a year from a server of synthetic turns (the
//! emulator makes every turn of a range for each page: too slow at that size).

use docpipe::api::budget::Budget;
use docpipe::api::{AdminKey, Client, ClientSettings, Limits, RetryPolicy};
use docpipe::clock;
use docpipe::export::{Exporter, Target};
use docpipe::store::SqliteBudget;
use docpipe::store::state_path;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod emulator;

const PAGES: u32 = 14_000;
const DAYS: i64 = 80;
const ROUNDS: usize = 3;
/// The synthetic span: turns over `SPAN_DAYS` days.
const SPAN_TURNS: u64 = 1_000_000;
const SPAN_DAYS: i64 = 365;

/// CPU seconds of this process, from /proc/self/stat: user and system (the kernel's work for
/// the process: sockets, files, fsync).
#[derive(Clone, Copy)]
struct Cpu {
    user: f64,
    sys: f64,
}

impl Cpu {
    fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
        let after = &stat[stat.rfind(')').expect("stat format") + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| f[i].parse::<f64>().unwrap() / 100.0;
        Self {
            user: ticks(11),
            sys: ticks(12),
        }
    }

    fn since(self, start: Self) -> Self {
        Self {
            user: self.user - start.user,
            sys: self.sys - start.sys,
        }
    }

    fn total(self) -> f64 {
        self.user + self.sys
    }
}

/// The transport alone, for comparison: the same requests with a bare reqwest client, each
/// body read and (when `decode`) decoded, nothing stored or written.
async fn transport_only(
    addr: &str,
    windows: &[(chrono::NaiveDate, u64)],
    decode: bool,
) -> (u64, Cpu) {
    let http = {
        docpipe::tls::install();
        reqwest::Client::new()
    };
    let start = Cpu::now();
    let mut rows = 0u64;
    for &(day, n) in windows {
        let mut offset = 0;
        loop {
            let url = format!(
                "http://{addr}/v1/analytics/big/views?dateFrom={day}&dateTo={}&limit=250&offset={offset}",
                day.succ_opt().unwrap()
            );
            let body = http
                .get(url)
                .bearer_auth("mint_bench_admin")
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            if decode {
                let page = docpipe::api::views::decode_page(&body, 250).unwrap();
                rows += page.views.len() as u64;
            } else {
                rows += (n - offset).min(250);
            }
            offset += 250;
            if offset >= n {
                break;
            }
        }
    }
    (rows, Cpu::now().since(start))
}

/// Every file below `dir`.
fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Peak resident memory of this process in MiB (VmHWM).
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<f64>()
        .unwrap()
        / 1024.0
}

fn main() {
    // As `docpipe` does (src/main.rs).
    docpipe::alloc::tune();
    if let Ok(role) = std::env::var("DOCPIPE_BENCH_ROLE") {
        return child(&role);
    }
    let dir = tempfile::tempdir().unwrap();
    let today = chrono::Utc::now().date_naive();
    // Old enough for the 90-day assistant backfill.
    let start = today - chrono::Duration::days(100);
    let data = format!(
        r#"
brand = "mint"
start_date = "{start}"
seed = 99
[[organizations]]
id = "bench"
admin_keys = ["mint_bench_admin"]
[[projects]]
id = "big"
organization = "bench"
pages = {PAGES}
daily_views = 600000
churn = 0.0
[limits]
analytics_per_hour = 100000000
"#
    );
    let data_file = dir.path().join("bench.toml");
    std::fs::write(&data_file, data).unwrap();
    let (mut emulator, addr) = emulator::start(&data_file);
    // The same runtime as `docpipe backfill` and `docpipe export` (see src/main.rs).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Three rounds, each a whole backfill into a fresh folder, then the bare transport over the
    // same requests: this machine's system time varies from run to run, and the medians say
    // more than any one run.
    let moto = Moto::start();
    let mut rounds: Vec<Round> = Vec::new();
    for round in 0..ROUNDS {
        let out = dir.path().join(format!("out-{round}"));
        let (summary, wall, cpu) = rt.block_on(export_once(&addr, &out, today));
        assert!(summary.failed.is_empty(), "{:?}", summary.failed);
        let windows: Vec<(chrono::NaiveDate, u64)> = summary
            .windows
            .iter()
            .map(|w| (w.day, w.rows as u64))
            .collect();
        let pushed = moto
            .as_ref()
            .map(|m| rt.block_on(m.push(&out, &format!("round-{round}"))));
        let (bare_rows, bare) = rt.block_on(transport_only(&addr, &windows, false));
        let (decoded_rows, decoded) = rt.block_on(transport_only(&addr, &windows, true));
        assert_eq!(decoded_rows as i64, summary.rows());
        assert_eq!(bare_rows as i64, summary.rows());
        let parquet_bytes: u64 = walk_files(&out)
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let minimum: u64 = summary
            .windows
            .iter()
            .map(|w| (w.rows as u64).div_ceil(250).max(1))
            .sum();
        rounds.push(Round {
            rows: summary.rows() as f64,
            requests: summary.requests,
            minimum,
            wall: wall.as_secs_f64(),
            cpu,
            bare,
            decoded,
            parquet_bytes,
            pushed,
        });
        std::fs::remove_dir_all(&out).unwrap();
    }
    // A cursor-paged dataset beside it: searches (100 terms a page, a walk a day) and the
    // assistant's turns (1000 a page, one span over all the days), through the generic walk.
    let mut cursor_rounds: Vec<CursorRound> = Vec::new();
    for round in 0..ROUNDS {
        for dataset in ["searches", "assistant"] {
            let out = dir.path().join(format!("cursor-{round}-{dataset}"));
            let (summary, cpu, requests) =
                rt.block_on(export_dataset(&addr, &out, today, dataset, DAYS));
            assert!(summary.failed.is_empty(), "{:?}", summary.failed);
            let rows = summary.other_rows() as f64;
            let bare = rt.block_on(transport_cursor(&addr, today, dataset));
            // Today's turns and searches grow as the clock runs: a later walk may read a few more.
            let extra = bare.0 as f64 - rows;
            assert!(
                (0.0..=rows / 1000.0 + 10.0).contains(&extra),
                "{dataset}: the bare walk read {} rows, docpipe {rows}",
                bare.0
            );
            // The bare transport's CPU scaled to docpipe's rows.
            let scale = rows / bare.0 as f64;
            let bare_cpu = Cpu {
                user: bare.1.user * scale,
                sys: bare.1.sys * scale,
            };
            cursor_rounds.push((dataset, rows, requests, cpu, bare_cpu));
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
    // Each dataset alone, in a process of its own.
    let each: Vec<(String, Alone)> = docpipe::dataset::default_names()
        .iter()
        .map(|d| (d.to_string(), alone(&format!("export {d} {DAYS} {addr}"))))
        .collect();
    let assistant_8 = alone(&format!("export assistant 8 {addr}"));
    let assistant_90 = alone(&format!("export assistant 90 {addr}"));
    let _ = emulator.kill();
    let _ = emulator.wait();
    drop(moto);
    let span = {
        let port = free_port();
        let mut server = std::process::Command::new(std::env::current_exe().unwrap())
            .env(
                "DOCPIPE_BENCH_ROLE",
                format!("turns 127.0.0.1:{port} {SPAN_TURNS}"),
            )
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start the turns server");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the turns server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let span = alone(&format!("export assistant {SPAN_DAYS} 127.0.0.1:{port}"));
        let _ = server.kill();
        let _ = server.wait();
        span
    };
    let first = &rounds[0];
    let mut o = std::io::stdout().lock();
    writeln!(o, "export benchmark: {DAYS} day windows of a {PAGES}-page project, emulator in its own process; {ROUNDS} rounds, median [range]").unwrap();
    writeln!(o, "  rows exported        {}", first.rows).unwrap();
    for r in &rounds {
        assert_eq!(r.rows, first.rows);
    }
    writeln!(
        o,
        "  analytics requests   {} (minimum {})",
        rounds
            .iter()
            .map(|r| r.requests.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        first.minimum
    )
    .unwrap();
    let rows = first.rows;
    let stat = |f: &dyn Fn(&Round) -> f64, digits: usize| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        format!(
            "{:.digits$} [{:.digits$}-{:.digits$}]",
            v[v.len() / 2],
            v[0],
            v[v.len() - 1]
        )
    };
    writeln!(o, "  wall time            {} s", stat(&|r| r.wall, 2)).unwrap();
    writeln!(o, "  rows per second      {}", stat(&|r| rows / r.wall, 0)).unwrap();
    let us = |c: &dyn Fn(&Round) -> Cpu| {
        format!(
            "{} us per row (user {}, system {})",
            stat(&|r| c(r).total() * 1e6 / rows, 3),
            stat(&|r| c(r).user * 1e6 / rows, 3),
            stat(&|r| c(r).sys * 1e6 / rows, 3)
        )
    };
    writeln!(o, "  docpipe CPU          {}", us(&|r| r.cpu)).unwrap();
    writeln!(o, "the same requests, for comparison:").unwrap();
    writeln!(o, "  bare reqwest, bodies read        {}", us(&|r| r.bare)).unwrap();
    writeln!(
        o,
        "  bare reqwest, bodies decoded     {}",
        us(&|r| r.decoded)
    )
    .unwrap();
    writeln!(
        o,
        "docpipe's own work (its CPU minus the bare transport's): {} us per row",
        stat(&|r| (r.cpu.total() - r.bare.total()) * 1e6 / rows, 3)
    )
    .unwrap();
    writeln!(
        o,
        "  Parquet written      {:.1} MiB ({:.1} bytes per row)",
        first.parquet_bytes as f64 / 1048576.0,
        first.parquet_bytes as f64 / rows
    )
    .unwrap();
    match &first.pushed {
        Some(p) => {
            writeln!(
                o,
                "S3 output (moto's S3 server on loopback): {} files, {:.1} MiB, one PUT each; a second push sends {} files",
                p.files,
                p.bytes as f64 / 1048576.0,
                p.again
            )
            .unwrap();
            fn push(r: &Round) -> &Pushed {
                r.pushed.as_ref().unwrap()
            }
            writeln!(
                o,
                "  push CPU             {} us per row (user {}, system {}), wall {} s",
                stat(&|r| push(r).cpu.total() * 1e6 / rows, 3),
                stat(&|r| push(r).cpu.user * 1e6 / rows, 3),
                stat(&|r| push(r).cpu.sys * 1e6 / rows, 3),
                stat(&|r| push(r).wall, 2)
            )
            .unwrap();
            writeln!(
                o,
                "  docpipe CPU, S3 output {} us per row beside local output {} us per row",
                stat(&|r| (r.cpu.total() + push(r).cpu.total()) * 1e6 / rows, 3),
                stat(&|r| r.cpu.total() * 1e6 / rows, 3)
            )
            .unwrap();
        }
        None => writeln!(
            o,
            "S3 output: not measured ({} not found: run .ci/run, which installs the test tools)",
            moto_server().display()
        )
        .unwrap(),
    }
    for dataset in ["searches", "assistant"] {
        let rs: Vec<&CursorRound> = cursor_rounds.iter().filter(|r| r.0 == dataset).collect();
        let stat = |f: &dyn Fn(&CursorRound) -> f64| {
            let mut v: Vec<f64> = rs.iter().map(|r| f(r)).collect();
            v.sort_by(f64::total_cmp);
            format!("{:.3} [{:.3}-{:.3}]", v[v.len() / 2], v[0], v[v.len() - 1])
        };
        writeln!(
            o,
            "cursor-paged {dataset}: {} rows, {} requests; docpipe CPU {} us per row, bare reqwest {} us per row, docpipe's own work {} us per row",
            rs[0].1,
            rs[0].2,
            stat(&|r| r.3.total() * 1e6 / r.1),
            stat(&|r| r.4.total() * 1e6 / r.1),
            stat(&|r| (r.3.total() - r.4.total()) * 1e6 / r.1),
        )
        .unwrap();
    }
    writeln!(o, "  peak resident memory {:.1} MiB", peak_rss_mib()).unwrap();
    writeln!(
        o,
        "each dataset's backfill of {DAYS} days alone, in a process of its own (release build):"
    )
    .unwrap();
    for (d, a) in &each {
        writeln!(o, "  {d:<18} {}", a.show()).unwrap();
    }
    writeln!(o, "the assistant's span on the emulator:").unwrap();
    writeln!(o, "  8 days             {}", assistant_8.show()).unwrap();
    writeln!(o, "  90 days            {}", assistant_90.show()).unwrap();
    writeln!(
        o,
        "  90 days against 8: peak {:+.1}% (goal: within 20%)",
        (assistant_90.peak / assistant_8.peak - 1.0) * 100.0
    )
    .unwrap();
    assert_eq!(span.rows, SPAN_TURNS as f64, "the synthetic span's turns");
    writeln!(
        o,
        "a span of {SPAN_TURNS} turns over {SPAN_DAYS} days (synthetic server, 1000 a page): {} (goal: peak within 64 MiB)",
        span.show()
    )
    .unwrap();
}

/// What a backfill alone in a process of its own came to.
struct Alone {
    rows: f64,
    requests: u64,
    wall: f64,
    cpu: f64,
    peak: f64,
}

impl Alone {
    fn show(&self) -> String {
        format!(
            "{:>9} rows {:>6} requests {:>7.2} s wall {:>7.2} s CPU  peak {:>6.1} MiB",
            self.rows, self.requests, self.wall, self.cpu, self.peak
        )
    }
}

/// Runs `role` in a child process (this bench again) and reads the figures it prints.
fn alone(role: &str) -> Alone {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env("DOCPIPE_BENCH_ROLE", role)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run the bench's child");
    assert!(out.status.success(), "{role}: {}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    let f: Vec<f64> = text
        .split_whitespace()
        .map(|x| {
            x.parse::<f64>()
                .unwrap_or_else(|_| panic!("{role}: {text}"))
        })
        .collect();
    assert_eq!(f.len(), 5, "{role}: {text}");
    Alone {
        rows: f[0],
        requests: f[1] as u64,
        wall: f[2],
        cpu: f[3],
        peak: f[4],
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child's part: `export <dataset> <days> <addr>` backfills one dataset over the last days
/// into a folder of its own and prints its rows, requests, wall and CPU seconds and peak
/// resident memory (MiB); `turns <addr> <n>` serves a span of n synthetic turns.
fn child(role: &str) {
    let args: Vec<&str> = role.split_whitespace().collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match args.as_slice() {
        ["export", dataset, days, addr] => {
            let dataset: &'static str = docpipe::dataset::by_name(dataset).unwrap().name();
            let days: i64 = days.parse().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let today = chrono::Utc::now().date_naive();
            let (t0, c0) = (Instant::now(), Cpu::now());
            let (mut rows, mut requests) = (0.0, 0);
            // A walk longer than its share of a run goes on in the next (as the daemon does).
            loop {
                let (summary, _, r) =
                    rt.block_on(export_dataset(addr, dir.path(), today, dataset, days));
                assert!(summary.failed.is_empty(), "{:?}", summary.failed);
                rows += (summary.rows() + summary.other_rows()) as f64;
                requests += r;
                if summary.paused == 0 {
                    break;
                }
            }
            println!(
                "{rows} {requests} {:.3} {:.3} {:.1}",
                t0.elapsed().as_secs_f64(),
                Cpu::now().since(c0).total(),
                peak_rss_mib()
            );
        }
        ["turns", addr, n] => rt.block_on(serve_turns(addr, n.parse().unwrap())),
        _ => panic!("unknown DOCPIPE_BENCH_ROLE {role:?}"),
    }
}

/// Serves `n` synthetic assistant turns, spread evenly over the days asked for, newest first,
/// 1000 a page at most; the cursor is the next turn's number.
async fn serve_turns(addr: &str, n: u64) {
    use axum::extract::Query;
    use std::collections::HashMap;
    async fn page(n: u64, q: HashMap<String, String>) -> axum::Json<serde_json::Value> {
        let day = |k: &str| chrono::NaiveDate::parse_from_str(&q[k], "%Y-%m-%d").unwrap();
        let (from, to) = (
            day("dateFrom").and_hms_opt(0, 0, 0).unwrap().and_utc(),
            day("dateTo").and_hms_opt(0, 0, 0).unwrap().and_utc(),
        );
        let limit: u64 = q.get("limit").map_or(100, |l| l.parse().unwrap());
        let first: u64 = q.get("cursor").map_or(0, |c| c.parse().unwrap());
        let step = (to - from).num_milliseconds() as f64 / n as f64;
        let last = (first + limit).min(n);
        let turns: Vec<serde_json::Value> = (first..last)
            .map(|i| {
                let at = to - chrono::Duration::milliseconds(((i as f64 + 1.0) * step) as i64);
                serde_json::json!({
                    "id": format!("thread-{:08}", i / 3),
                    "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    "query": format!("how do I configure the {} option of the API client?", i % 97),
                    "response": "You set it in the client's settings file: add the option under [client], restart the client, and check the logs for the line that confirms it. The reference page lists every option with its default and an example; the guide on configuration walks through a full file.",
                    "sources": [
                        {"title": "Configuration", "url": "https://docs.example.com/configuration"},
                        {"title": "API client", "url": "https://docs.example.com/api/client"}
                    ],
                    "resolutionStatus": if i % 10 == 0 { "unanswered" } else { "answered" },
                    "queryCategory": "configuration",
                    "pageUrl": "https://docs.example.com/quickstart",
                })
            })
            .collect();
        let next = (last < n).then(|| last.to_string());
        axum::Json(serde_json::json!({
            "conversations": turns,
            "nextCursor": next,
            "hasMore": last < n,
        }))
    }
    let app = axum::Router::new().route(
        "/v1/analytics/{project}/assistant",
        axum::routing::get(move |Query(q): Query<HashMap<String, String>>| page(n, q)),
    );
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    axum::serve(listener, app).await.unwrap();
}

/// The client of the bench's organization, limits off.
fn bench_client(addr: &str, out: &std::path::Path) -> Client {
    let clock = clock::system();
    let budget: Arc<dyn Budget> = Arc::new(SqliteBudget::open(&state_path(out)).unwrap());
    let settings = ClientSettings {
        base_url: format!("http://{addr}"),
        timeout: Duration::from_secs(120),
        retry: RetryPolicy::default(),
        limits: Limits {
            analytics_per_hour: 100_000_000,
            headroom_percent: 0,
            ..Limits::default()
        },
        record: None,
    };
    let key = AdminKey::parse("mint_bench_admin", "mint", "bench").unwrap();
    Client::new(settings, "bench", Some(key), None, clock, budget)
}

/// A backfill of one dataset over the last `days` days: its summary, CPU and requests.
async fn export_dataset(
    addr: &str,
    out: &std::path::Path,
    today: chrono::NaiveDate,
    dataset: &'static str,
    days: i64,
) -> (docpipe::export::Summary, Cpu, u64) {
    let exporter = Exporter::open(out, clock::system(), 3).await.unwrap();
    let client = bench_client(addr, out);
    let targets = vec![Target {
        project: "big".into(),
        client,
        start: None,
        datasets: vec![dataset],
    }];
    let plan = exporter
        .plan(&targets, today - chrono::Duration::days(days - 1), today)
        .unwrap();
    let c0 = Cpu::now();
    let summary = exporter.run(&targets, &plan).await;
    let requests = summary.requests;
    (summary, Cpu::now().since(c0), requests)
}

/// The same walks with a bare reqwest client: each body read and parsed as JSON, nothing
/// checked, stored or written.
async fn transport_cursor(addr: &str, today: chrono::NaiveDate, dataset: &str) -> (u64, Cpu) {
    let http = {
        docpipe::tls::install();
        reqwest::Client::new()
    };
    let from = today - chrono::Duration::days(DAYS - 1);
    let end = today.succ_opt().unwrap();
    let windows: Vec<(chrono::NaiveDate, chrono::NaiveDate)> = if dataset == "assistant" {
        vec![(from, end)]
    } else {
        (0..DAYS)
            .map(|i| from + chrono::Duration::days(i))
            .map(|d| (d, d.succ_opt().unwrap()))
            .collect()
    };
    let (field, limit) = if dataset == "assistant" {
        ("conversations", 1000)
    } else {
        ("searches", 100)
    };
    let start = Cpu::now();
    let mut rows = 0u64;
    for (a, b) in windows {
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!(
                "http://{addr}/v1/analytics/big/{dataset}?dateFrom={a}&dateTo={b}&limit={limit}"
            );
            if let Some(c) = &cursor {
                url += &format!("&cursor={c}");
            }
            let body = http
                .get(url)
                .bearer_auth("mint_bench_admin")
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            rows += v[field].as_array().unwrap().len() as u64;
            match v["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
    }
    (rows, Cpu::now().since(start))
}

/// One round of a cursor-paged dataset: its name, rows, requests, docpipe's CPU, the bare
/// transport's.
type CursorRound = (&'static str, f64, u64, Cpu, Cpu);

/// One round's figures.
struct Round {
    rows: f64,
    requests: u64,
    minimum: u64,
    wall: f64,
    cpu: Cpu,
    bare: Cpu,
    decoded: Cpu,
    parquet_bytes: u64,
    pushed: Option<Pushed>,
}

/// One round's push of its output to the S3 server.
struct Pushed {
    files: u64,
    bytes: u64,
    /// Files a second push sends (none: the first one sent them all).
    again: u64,
    cpu: Cpu,
    wall: f64,
}

/// The S3 server of the test tools' virtual environment (`DOCPIPE_TEST_PYTHON`'s folder, or
/// `target/test-venv`).
fn moto_server() -> std::path::PathBuf {
    let python = std::env::var_os("DOCPIPE_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv/bin/python")
        });
    python.with_file_name("moto_server")
}

/// A moto S3 server on a free loopback port with one bucket, `bench`; stopped when dropped.
struct Moto {
    child: std::process::Child,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts the server, if the test tools are installed, and points this process's S3
    /// settings at it.
    fn start() -> Option<Self> {
        let server = moto_server();
        if !server.exists() {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start moto_server");
        let moto = Self { child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let endpoint = format!("http://127.0.0.1:{port}");
        // SAFETY: set before any other thread of this process reads the environment.
        unsafe {
            std::env::set_var("AWS_ENDPOINT_URL", &endpoint);
            std::env::set_var("AWS_ACCESS_KEY_ID", "bench");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "bench-secret");
            std::env::set_var("AWS_REGION", "us-east-1");
        }
        let made = std::process::Command::new(server.with_file_name("python"))
            .arg("-c")
            .arg("import boto3, os\nboto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL']).create_bucket(Bucket='bench')")
            .status()
            .unwrap();
        assert!(made.success(), "cannot create the bench bucket");
        Some(moto)
    }

    /// Sends the working copy `out` to `s3://bench/<prefix>` as `--output` does after a run:
    /// what it sent, its CPU and wall time, and what a second push sends.
    async fn push(&self, out: &std::path::Path, prefix: &str) -> Pushed {
        let location = docpipe::config::Location::parse(&format!("s3://bench/{prefix}")).unwrap();
        let remote = docpipe::remote::Remote::open(&location).unwrap();
        remote.check().await.unwrap();
        let db = Arc::new(docpipe::store::Db::open(&state_path(out), "").unwrap());
        let mirror = docpipe::remote::Mirror::new(remote, out, db).unwrap();
        let (c0, t0) = (Cpu::now(), Instant::now());
        let sent = mirror.push().await.unwrap();
        let (cpu, wall) = (Cpu::now().since(c0), t0.elapsed().as_secs_f64());
        let again = mirror.push().await.unwrap();
        Pushed {
            files: sent.files,
            bytes: sent.bytes,
            again: again.files,
            cpu,
            wall,
        }
    }
}

/// A backfill of the last `DAYS` days into `out`, as `docpipe backfill` does it: its summary,
/// wall time and CPU.
async fn export_once(
    addr: &str,
    out: &std::path::Path,
    today: chrono::NaiveDate,
) -> (docpipe::export::Summary, Duration, Cpu) {
    let exporter = Exporter::open(out, clock::system(), 3).await.unwrap();
    let client = bench_client(addr, out);
    let targets = vec![Target {
        project: "big".into(),
        client,
        start: None,
        datasets: vec!["page_views"],
    }];
    let plan = exporter
        .plan(&targets, today - chrono::Duration::days(DAYS - 1), today)
        .unwrap();
    let (c0, t0) = (Cpu::now(), Instant::now());
    let summary = exporter.run(&targets, &plan).await;
    (summary, t0.elapsed(), Cpu::now().since(c0))
}
