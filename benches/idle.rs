//! Idle daemon run benchmark: the daemon's export tick on the demo's emulator and data, first
//! with everything due (the 30 days of every demo project), then again and again a few seconds
//! apart with nothing due. Prints each kind of run's CPU (user and system, from
//! /proc/self/stat, the emulator in the same process) and the files the idle runs wrote. Run
//! with `cargo bench --bench idle`; the target: an idle run writes no file and spends under
//! 50 ms of CPU.

use docpipe::app::{Access, Context};
use docpipe::clock::{Clock, ManualClock};
use docpipe::daemon::{Daemon, Tick};
use docpipe::emulator::{Emulator, Server};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// Idle runs measured.
const IDLE_RUNS: u32 = 20;

/// CPU seconds of this process so far (user + system), from /proc/self/stat.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let after = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

/// Every file below `dir` but the state's, with its size and time of change.
fn files(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(p);
            } else if !p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("state.sqlite")
            {
                out.insert(p, (m.len(), m.modified().unwrap()));
            }
        }
    }
    out
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut data = docpipe::cli::emulate::load_data(
            None,
            &docpipe::cli::emulate::FaultArgs::default(),
        )
        .unwrap();
        data.limits.analytics_per_hour = docpipe::cli::demo::DEMO_ANALYTICS_PER_HOUR;
        // Noon today, so that no day turns during the idle runs.
        let noon = chrono::Utc::now()
            .date_naive()
            .and_hms_opt(12, 0, 0)
            .unwrap()
            .and_utc();
        let clock = ManualClock::new(noon);
        let server = Server::start(
            Emulator::new(data.clone(), clock.clone()),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let o = docpipe::config::Overrides {
            output: Some(out.clone()),
            state_dir: None,
        };
        let settings =
            docpipe::cli::demo::demo_settings(&data, &server.base_url(), &o).unwrap();
        let keys = docpipe::cli::demo::demo_keys(&data).unwrap();
        let ctx = Context::open(settings, clock.clone(), Access::Export, keys)
            .await
            .unwrap();
        let mut d = Daemon::open(ctx, Vec::new()).unwrap();

        let (t, c) = (Instant::now(), cpu());
        d.work(Some(&Tick::Export)).await;
        let first = files(&out);
        println!(
            "first run (everything due): {:.0} ms CPU, {:.0} ms wall, {} files written, {} analytics requests served",
            (cpu() - c) * 1000.0,
            t.elapsed().as_secs_f64() * 1000.0,
            first.len(),
            server.emulator.stats().values().map(|s| s.requests).sum::<u64>()
        );
        let served = server.emulator.stats().values().map(|s| s.requests).sum::<u64>();
        let (t, c) = (Instant::now(), cpu());
        for _ in 0..IDLE_RUNS {
            clock.advance(Duration::from_secs(5));
            d.work(Some(&Tick::Export)).await;
        }
        let per_run = (cpu() - c) * 1000.0 / f64::from(IDLE_RUNS);
        let after = files(&out);
        let changed = after
            .iter()
            .filter(|(p, m)| first.get(*p) != Some(m))
            .count()
            + first.keys().filter(|p| !after.contains_key(*p)).count();
        println!(
            "idle runs (nothing due, {IDLE_RUNS} runs 5 s apart, to {}): {per_run:.1} ms CPU a run, {:.1} ms wall a run, {changed} files written or removed, {} requests sent",
            clock.now().format("%H:%M:%S"),
            t.elapsed().as_secs_f64() * 1000.0 / f64::from(IDLE_RUNS),
            server.emulator.stats().values().map(|s| s.requests).sum::<u64>() - served
        );
        println!(
            "target: no file written, under 50 ms of CPU a run: {}",
            if changed == 0 && per_run < 50.0 { "met" } else { "NOT met" }
        );
        server.stop().await;
    });
}
