//! Status page benchmark: the daemon's `/` (and `status --json`) for 20 projects x 8 datasets x
//! 90 days of state (14,400 windows, each project's range from its `start_date`, all final but
//! the last day, each with its files, empty), then for 50 x 8 x 365 (146,000 windows), with 48
//! hours of spend, a failed
//! window per project, 200 rule firings and 10 rules' last runs. It times what a request to `/`
//! does (read the state, plan, forecast, render the HTML) and its parts, and the JSON document,
//! on a manual clock, and prints the median and the slowest of 30 renders; then it runs
//! `docpipe status --json` (the release binary) 10 times, a process each, on the same state as a
//! user would. Run with `cargo bench --bench status`; the targets: the page within 100 ms at the
//! first size, the page and the JSON within 200 ms at the second.
//!
//! Then the page under load: a daemon in this process (the same single-threaded runtime as
//! `docpipe run`) exports 12 projects' default datasets of 30 days from the emulator (a process
//! of its own) into a fresh folder, alone and while ten requests to `/` at once come every
//! second (and, for the record, back to back), from another thread as browsers would. The
//! target: the export's median time under the bursts within 10% of its median alone.

use chrono::{DateTime, Duration, DurationRound, NaiveDate, Utc};
use docpipe::clock::ManualClock;
use docpipe::config::RawConfig;
use docpipe::events::{Event, Trouble, Troubled};
use std::time::Instant;

mod emulator;

/// The sizes measured: (projects, days), each with every dataset.
const SIZES: [(usize, i64); 2] = [(20, 90), (50, 365)];
/// Every dataset (eight).
fn datasets() -> Vec<&'static str> {
    docpipe::dataset::ALL.iter().map(|d| d.name()).collect()
}
const RUNS: usize = 30;

fn config(out: &std::path::Path, (projects, days): (usize, i64), now: DateTime<Utc>) -> String {
    let start = now.date_naive() - Duration::days(days - 1);
    let mut text = "[service]\nbase_url = \"http://127.0.0.1:9\"\n".to_string();
    for o in 0..4 {
        text +=
            &format!("[[organizations]]\nid = \"org-{o}\"\nadmin_key_env = \"BENCH_KEY_{o}\"\n");
    }
    for p in 0..projects {
        text += &format!(
            "[[projects]]\nid = \"project-{p:02}\"\norganization = \"org-{}\"\nstart_date = \"{start}\"\ndatasets = [{}]\n",
            p % 4,
            datasets()
                .iter()
                .map(|d| format!("\"{d}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    text + &format!(
        "[export]\noutput_dir = \"{}\"\n[rules]\ndir = \"{}/jobs\"\n",
        out.display(),
        out.display()
    )
}

/// The state: every window of `days` days, the spend of 48 hours, failures, firings, rule runs.
fn fill(out: &std::path::Path, (projects, days): (usize, i64), now: DateTime<Utc>) {
    let state = out.join("state.sqlite");
    let store = docpipe::store::Store::open(&state).unwrap();
    for h in 0..48 {
        for (d, dataset) in datasets().iter().enumerate() {
            store.receive(&Event::Spent {
                org: &format!("org-{}", h % 4),
                at: now - Duration::hours(h),
                dataset,
                purpose: ["walk", "probe", "backfill"][d % 3],
                requests: 3,
            });
        }
    }
    let today = now.date_naive().to_string();
    for p in 0..projects {
        store.receive(&Event::Failed {
            dataset: "searches",
            project: &format!("project-{p:02}"),
            trouble: Some(Troubled {
                day: now.date_naive(),
                window: &today,
                reason: "the service answered 502: bad gateway",
                at: now,
                kind: Trouble::Failed,
            }),
        });
    }
    for r in 0..10 {
        store.receive(&Event::RuleRan {
            rule: &format!("rule-{r}"),
            project: &format!("project-{r:02}"),
            at: now,
            outcome: if r == 3 {
                docpipe::events::RunOutcome::Failed
            } else {
                docpipe::events::RunOutcome::Fired
            },
            rows: Some(5),
            line: "rule in r.toml: no such table",
        });
    }
    drop(store);
    let c = rusqlite::Connection::open(&state).unwrap();
    c.execute_batch("BEGIN").unwrap();
    let today = now.date_naive();
    let first: NaiveDate = today - Duration::days(days - 1);
    for p in 0..projects {
        for dataset in datasets() {
            for i in 0..days {
                let day = first + Duration::days(i);
                c.execute(
                    "INSERT INTO windows (dataset, project, day, final, rows, requests, done_at) VALUES (?1, ?2, ?3, ?4, 250, 1, ?5)",
                    rusqlite::params![dataset, format!("project-{p:02}"), day.to_string(), i < days - 1, (now - Duration::minutes(30)).to_rfc3339()],
                )
                .unwrap();
            }
        }
    }
    for f in 0..200i64 {
        c.execute(
            "INSERT INTO rule_firings (rule, project, action, job, fired_at_ms, prompt_hash, prompt, rows_matched, sent, status, pr_link, seconds_to_done, updated_at_ms)
             VALUES (?1, ?2, 'follow_up', 'job_1', ?3, ?4, 'x', 5, 'sent', 'completed', 'https://github.com/acme/docs/pull/7', 12.0, ?3)",
            rusqlite::params![format!("rule-{}", f % 10), format!("project-{:02}", f % projects as i64), (now - Duration::hours(200 - f)).timestamp_millis(), format!("{f:064}")],
        )
        .unwrap();
    }
    c.execute_batch("COMMIT").unwrap();
    // Each written day's files, as the export leaves them (the planner looks for them): empty,
    // since only their presence is read.
    for p in 0..projects {
        for d in docpipe::dataset::ALL {
            for t in d
                .tables()
                .iter()
                .filter(|t| t.partition.contains(&docpipe::dataset::Key::Date))
                .filter(|t| t.name != "rejects")
            {
                for i in 0..days {
                    let dir = docpipe::layout::partition_dir(
                        out,
                        t.name,
                        &format!("project-{p:02}"),
                        first + Duration::days(i),
                    );
                    std::fs::create_dir_all(&dir).unwrap();
                    std::fs::write(dir.join(docpipe::layout::PART), b"").unwrap();
                }
            }
        }
    }
}

fn median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() - 1])
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // `DOCPIPE_BENCH_SIZE=50x365` measures that size alone (to profile it).
    let one = std::env::var("DOCPIPE_BENCH_SIZE").ok().map(|s| {
        let (p, d) = s
            .split_once('x')
            .expect("DOCPIPE_BENCH_SIZE: projects x days");
        (p.parse().unwrap(), d.parse().unwrap())
    });
    // `DOCPIPE_BENCH_LOADED=only` measures the export under the page's load alone.
    let loaded_only = std::env::var("DOCPIPE_BENCH_LOADED").is_ok_and(|v| v == "only");
    let sizes = if loaded_only {
        Vec::new()
    } else {
        one.map_or(SIZES.to_vec(), |s| vec![s])
    };
    for size in sizes {
        measure(size).await;
    }
    if one.is_none() {
        under_export().await;
    }
}

/// Projects and days of the export measured under the page's load.
const LOADED: (usize, i64) = (12, 30);
const LOADED_ROUNDS: usize = 3;

/// How the page is asked while the export runs.
#[derive(Clone, Copy, PartialEq)]
enum Load {
    Alone,
    /// Ten requests at once, every second.
    Bursts,
    /// Ten at once, again as soon as the ten are answered.
    BackToBack,
}

/// The export's time alone and under the page's load (module docs).
async fn under_export() {
    // `DOCPIPE_BENCH_LOG=info` shows the daemon's lines (to see where the time goes).
    if let Ok(level) = std::env::var("DOCPIPE_BENCH_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(tracing_subscriber::EnvFilter::new(level))
            .try_init();
    }
    let dir = tempfile::tempdir().unwrap();
    let (projects, days) = LOADED;
    let today = Utc::now().date_naive();
    let start = today - Duration::days(days - 1);
    let mut data = format!(
        "brand = \"mint\"\nstart_date = \"{start}\"\nseed = 7\n[[organizations]]\nid = \"bench\"\nadmin_keys = [\"mint_bench_admin\"]\n[limits]\nanalytics_per_hour = 100000000\n"
    );
    for p in 0..projects {
        data += &format!(
            "[[projects]]\nid = \"site-{p:02}\"\norganization = \"bench\"\npages = 600\ndaily_views = 20000\n"
        );
    }
    let data_file = dir.path().join("emulator.toml");
    std::fs::write(&data_file, data).unwrap();
    let (mut emulator, addr) = emulator::start(&data_file);
    let mut times: Vec<(Load, f64, usize)> = Vec::new();
    for round in 0..LOADED_ROUNDS {
        for load in [Load::Alone, Load::Bursts, Load::BackToBack] {
            let out = dir.path().join(format!("out-{round}-{}", load as u8));
            let (secs, pages) = export_loaded(&addr, &out, start, load).await;
            times.push((load, secs, pages));
        }
    }
    let _ = emulator.kill();
    let _ = emulator.wait();
    let of = |load: Load| {
        let t: Vec<f64> = times.iter().filter(|t| t.0 == load).map(|t| t.1).collect();
        let pages: usize = times.iter().filter(|t| t.0 == load).map(|t| t.2).sum();
        (median(t.clone()).0, t, pages / LOADED_ROUNDS)
    };
    let (alone, alone_all, _) = of(Load::Alone);
    println!(
        "\nexport of {projects} projects x {days} days, every default dataset ({LOADED_ROUNDS} rounds each):"
    );
    println!("  alone:                          median {alone:.2} s (each: {alone_all:.2?})");
    for (load, name) in [
        (Load::Bursts, "10 requests at once, every 1 s"),
        (Load::BackToBack, "10 at once, back to back"),
    ] {
        let (m, all, pages) = of(load);
        println!(
            "  {name:<31} median {m:.2} s ({:+.1}% of alone; each: {all:.2?}), {pages} pages served a round",
            (m / alone - 1.0) * 100.0
        );
    }
}

/// One export into `out` by a daemon in this process, its page asked as `load` says; its time
/// in seconds and the pages served meanwhile.
async fn export_loaded(
    addr: &str,
    out: &std::path::Path,
    start: NaiveDate,
    load: Load,
) -> (f64, usize) {
    use docpipe::daemon::{Daemon, Tick, health};
    std::fs::create_dir_all(out).unwrap();
    let (projects, _) = LOADED;
    let mut text = format!(
        "[service]\nbase_url = \"http://{addr}\"\n[[organizations]]\nid = \"bench\"\nadmin_key_env = \"DOCPIPE_BENCH_KEY\"\nanalytics_per_hour = 100000000\n"
    );
    for p in 0..projects {
        text += &format!(
            "[[projects]]\nid = \"site-{p:02}\"\norganization = \"bench\"\nstart_date = \"{start}\"\n"
        );
    }
    text += &format!("[export]\noutput_dir = \"{}\"\n", out.display());
    let cfg = out.join("docpipe.toml");
    std::fs::write(&cfg, text).unwrap();
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let key = docpipe::api::AdminKey::parse("mint_bench_admin", "mint", "bench").unwrap();
    let keys = docpipe::app::Keys::Given([("bench".to_string(), key)].into());
    let clock = docpipe::clock::system();
    let ctx = std::sync::Arc::new(
        docpipe::app::Context::open(
            settings.clone(),
            clock.clone(),
            docpipe::app::Access::Export,
            keys,
        )
        .await
        .unwrap(),
    );
    let shared: health::Shared = Default::default();
    let _ = shared.set(ctx.clone());
    let app = health::router(None, settings, clock, shared, None);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (bound, server) = health::serve("127.0.0.1:0".parse().unwrap(), app, async {
        let _ = stop_rx.await;
    })
    .await
    .unwrap();
    let mut daemon = Daemon::open(ctx, Vec::new()).unwrap();
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let asking = (load != Load::Alone).then(|| {
        let running = running.clone();
        std::thread::spawn(move || ask(bound, load, &running))
    });
    let t = Instant::now();
    daemon.work(Some(&Tick::Export)).await;
    let secs = t.elapsed().as_secs_f64();
    running.store(false, std::sync::atomic::Ordering::Relaxed);
    // Joined off this thread: the asks in flight are answered by the server on it.
    let pages = match asking {
        Some(h) => tokio::task::spawn_blocking(move || h.join().unwrap())
            .await
            .unwrap(),
        None => 0,
    };
    daemon.leave();
    let _ = stop_tx.send(());
    let _ = server.await;
    (secs, pages)
}

/// Asks `/` ten at a time, as `load` says, until `running` ends; the pages served.
fn ask(addr: std::net::SocketAddr, load: Load, running: &std::sync::atomic::AtomicBool) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = {
            docpipe::tls::install();
            reqwest::Client::new()
        };
        let url = format!("http://{addr}/");
        let mut served = 0;
        while running.load(std::sync::atomic::Ordering::Relaxed) {
            let burst = Instant::now();
            let asks = (0..10).map(|_| {
                let http = http.clone();
                let url = url.clone();
                async move {
                    let r = http.get(url).send().await.unwrap();
                    assert!(r.status().is_success(), "{}", r.status());
                    !r.bytes().await.unwrap().is_empty()
                }
            });
            let pages = futures::future::join_all(asks).await;
            served += pages.into_iter().filter(|p| *p).count();
            if load == Load::Bursts {
                let wait = std::time::Duration::from_secs(1).saturating_sub(burst.elapsed());
                tokio::time::sleep(wait).await;
            }
        }
        served
    })
}

async fn measure((projects, days): (usize, i64)) {
    // `DOCPIPE_BENCH_DIR=folder` leaves the state, the folders and the config there (to run
    // `docpipe status` on them by hand, or to profile it); each measure makes them again.
    let dir = tempfile::tempdir().unwrap();
    let out = std::env::var_os("DOCPIPE_BENCH_DIR").map_or(dir.path().join("out"), |d| {
        std::path::PathBuf::from(d).join(format!("status-{projects}x{days}"))
    });
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(out.join("jobs")).unwrap();
    // The state is made for this minute, so that `docpipe status --json`, run as a process on
    // the real clock, reads the same days as the renders on the manual clock.
    let now = Utc::now().duration_trunc(Duration::minutes(1)).unwrap();
    fill(&out, (projects, days), now);
    let text = config(&out, (projects, days), now);
    let settings = RawConfig::parse(&text, "bench.toml")
        .unwrap()
        .validate("bench.toml")
        .unwrap();
    let clock = ManualClock::new(now);
    let (mut collect, mut html, mut whole, mut json) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut bytes, mut json_bytes, mut due) = (0, 0, 0);
    for _ in 0..RUNS {
        let t = Instant::now();
        let status = docpipe::status::read(&settings, clock.clone(), 20)
            .await
            .unwrap();
        let c = t.elapsed().as_secs_f64() * 1e3;
        let t2 = Instant::now();
        let page = docpipe::status::html::render(&status);
        let h = t2.elapsed().as_secs_f64() * 1e3;
        let t3 = Instant::now();
        let document = serde_json::to_string_pretty(&status).unwrap();
        let j = t3.elapsed().as_secs_f64() * 1e3;
        bytes = page.len();
        json_bytes = document.len();
        due = status.export_now.windows;
        collect.push(c);
        html.push(h);
        whole.push(c + h);
        json.push(c + j);
        assert_eq!(status.projects.len(), projects);
        assert_eq!(
            status
                .projects
                .iter()
                .map(|p| p.datasets.len())
                .sum::<usize>(),
            projects * datasets().len()
        );
    }
    // Its parts: opening the state, the planner's plan of what is due, the 24-hour forecast.
    let (mut open, mut plan, mut forecast) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..10 {
        let t = Instant::now();
        let ctx = docpipe::app::Context::open(
            settings.clone(),
            clock.clone(),
            docpipe::app::Access::Shared,
            docpipe::app::Keys::None,
        )
        .await
        .unwrap();
        open.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        docpipe::app::plan_view::plan_view(&ctx).unwrap();
        plan.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        docpipe::app::plan_view::forecast(&ctx).unwrap();
        forecast.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (c, cmax) = median(collect);
    let (h, hmax) = median(html);
    let (w, wmax) = median(whole);
    let (js, jsmax) = median(json);
    let target = if days > 90 { 200 } else { 100 };
    println!(
        "status page: {projects} projects x {} datasets x {days} days of state ({} windows), {RUNS} renders",
        datasets().len(),
        projects as i64 * datasets().len() as i64 * days
    );
    println!("  read the state, plan, forecast: median {c:.1} ms, slowest {cmax:.1} ms");
    println!(
        "    of which: open the state {:.1} ms, plan what is due {:.1} ms, forecast {:.1} ms (medians of 10)",
        median(open).0,
        median(plan).0,
        median(forecast).0
    );
    println!("  render the HTML ({bytes} bytes): median {h:.2} ms, slowest {hmax:.2} ms");
    println!("  the page: median {w:.1} ms, slowest {wmax:.1} ms (target: under {target} ms)");
    println!(
        "  status --json ({json_bytes} bytes): median {js:.1} ms, slowest {jsmax:.1} ms (target: under {target} ms)"
    );
    let cfg = out.join("docpipe.toml");
    std::fs::write(&cfg, text).unwrap();
    let (cli, climax) = median((0..10).map(|_| status_json(&cfg, projects, due)).collect());
    println!(
        "  `docpipe status --json`, the release binary, a process each time: median {cli:.1} ms, slowest {climax:.1} ms (10 runs)"
    );
}

/// Runs `docpipe status --json` as a user does (the release binary, in a process of its own):
/// its wall time in ms, its document checked to name every project and the windows `due` now
/// (as many as the renders found).
fn status_json(cfg: &std::path::Path, projects: usize, due: usize) -> f64 {
    let t = Instant::now();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .arg("--config")
        .arg(cfg)
        .args(["status", "--json"])
        .output()
        .expect("run docpipe status --json");
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(
        run.status.success(),
        "docpipe status --json: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(doc["projects"].as_array().map(Vec::len), Some(projects));
    assert_eq!(doc["export_now"]["windows"].as_u64(), Some(due as u64));
    ms
}
