//! The scenario half of `tests/it/soak.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;
use docpipe::emulator::data::RowOrder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_20_random_moments_then_the_resumed_backfill_equals_an_uninterrupted_one() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    data.faults.latency_ms = 40;
    data.faults.row_order = RowOrder::Shuffled;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let (ref_out, out) = (dir.path().join("ref"), dir.path().join("killed"));
    let (ref_cfg, cfg) = (dir.path().join("ref.toml"), dir.path().join("killed.toml"));
    std::fs::write(&ref_cfg, config(&live.server.base_url(), &ref_out, "")).unwrap();
    std::fs::write(&cfg, config(&live.server.base_url(), &out, "")).unwrap();
    let args = ["backfill", "--from", "2026-03-01", "--to", "2026-03-15"];
    let reference = docpipe(&ref_cfg, &args, None);
    assert!(reference.status.success());
    // A fixed seed: the same 20 moments on every run of the test.
    let dice = docpipe::random::Dice::seeded(2026);
    let mut killed = 0;
    for _ in 0..20 {
        let wait = 20 + (dice.next() * 400.0) as u64;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
            .current_dir(dir.path())
            .arg("--config")
            .arg(&cfg)
            .args(args)
            .env("DOCPIPE_IT_ADMIN_A", ADMIN_A)
            .env("DOCPIPE_IT_ADMIN_B", ADMIN_B)
            .env("RUST_LOG", "off")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            killed += 1;
        }
        child.wait().unwrap();
    }
    assert!(
        killed >= 10,
        "only {killed} of the 20 runs were killed mid-way"
    );
    let last = docpipe(&cfg, &args, None);
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    assert_eq!(dataset(&out), dataset(&ref_out));
    let leftovers: Vec<_> = files_below(&out)
        .into_iter()
        .filter(|f| f.to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
