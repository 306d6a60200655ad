//! Captures (`--record DIR`) and their replay (`docpipe emulate --replay DIR`): a capture of
//! the emulator replays to the same Parquet files, and the shapes the service may legally send
//! (kept in `tests/data/captures/`) are read without losing the day.

use crate::common::*;
use docpipe::emulator::Listening;
use docpipe::emulator::replay::{self, Replay};

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn serve_captures(dir: &std::path::Path) -> Listening {
    replay::start(Replay::load(dir).unwrap(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_of_the_emulator_replays_to_the_same_parquet_files_without_a_key() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let (ref_out, out, captured) = (
        dir.path().join("ref"),
        dir.path().join("replayed"),
        dir.path().join("capture"),
    );
    let (ref_cfg, cfg) = (dir.path().join("ref.toml"), dir.path().join("replay.toml"));
    std::fs::write(&ref_cfg, config_all(&live.server.base_url(), &ref_out, "")).unwrap();
    let range = [
        "backfill",
        "--from",
        "2026-03-09",
        "--to",
        "2026-03-10",
        "--project",
        "alpha",
    ];
    let mut recording = range.to_vec();
    recording.extend(["--record", captured.to_str().unwrap()]);
    ok(&docpipe(&ref_cfg, &recording, None));
    let files = std::fs::read_dir(&captured).unwrap().count();
    let sent: u64 = live.emu().stats().values().map(|s| s.requests).sum();
    assert_eq!(files as u64, sent, "one file per response");
    for f in std::fs::read_dir(&captured).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        assert!(!text.contains(ADMIN_A), "a key in a capture");
        assert!(!text.to_lowercase().contains("authorization"));
    }
    let server = serve_captures(&captured).await;
    std::fs::write(&cfg, config_all(&server.base_url(), &out, "")).unwrap();
    ok(&docpipe(&cfg, &range, None));
    let (got, want) = (dataset(&out), dataset(&ref_out));
    assert!(got.len() >= 11, "{} files", got.len());
    assert_eq!(got, want);
    server.stop().await;
}

/// Backfills 2026-03-10 of alpha's page views from the captures of `case`.
async fn page_views_of(case: &str) -> (std::process::Output, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let server = serve_captures(&root().join("tests/data/captures").join(case)).await;
    let out = dir.path().join("out");
    let cfg = dir.path().join("docpipe.toml");
    std::fs::write(&cfg, TestConfig::new(&server.base_url(), &out).toml()).unwrap();
    let run = docpipe(
        &cfg,
        &[
            "backfill",
            "--from",
            "2026-03-10",
            "--to",
            "2026-03-10",
            "--project",
            "alpha",
        ],
        None,
    );
    server.stop().await;
    let file = out.join("page_views/project=alpha/date=2026-03-10/part-00000.parquet");
    let rows = if file.is_file() {
        parquet_rows(&file)
    } else {
        Vec::new()
    };
    (run, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_views_with_an_empty_page_mid_walk_and_totals_only_on_the_first_page_lose_nothing() {
    let (run, rows) = page_views_of("views-empty-page-mid-walk").await;
    ok(&run);
    assert_eq!(rows.len(), 300);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains(
            "1 page-view windows (1 final, 0 provisional), 300 rows, 3 analytics requests in all"
        ),
        "{stdout}"
    );
}
