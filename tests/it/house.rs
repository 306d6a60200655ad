//! One pipeline under the CLI: a run opens each SQLite file once, plans once, computes the trend
//! tables once and hands them to the rules; `export --project X` keeps every project's trends.

use crate::common::*;
use std::path::Path;

/// The debug lines of a run that contain `needle`.
fn count(stderr: &str, needle: &str) -> usize {
    stderr.lines().filter(|l| l.contains(needle)).count()
}

/// Runs the binary with docpipe's debug log.
fn docpipe_debug(cfg: &Path, args: &[&str]) -> (std::process::Output, String, String) {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .current_dir(cfg.parent().unwrap())
        .arg("--config")
        .arg(cfg)
        .args(args)
        .env("DOCPIPE_IT_ADMIN_A", ADMIN_A)
        .env("DOCPIPE_IT_ADMIN_B", ADMIN_B)
        .env("RUST_LOG", "docpipe=debug")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    (run, out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_opens_each_file_once_plans_once_and_computes_trends_once_for_every_project() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let start = chrono::Utc::now().date_naive() - chrono::Duration::days(1);
    let rules = top_rule(dir.path());
    let out = dir.path().join("out");
    let cfg = dir.path().join("c.toml");
    let extra = format!("[rules]\ndir = \"{}\"", rules.display());
    std::fs::write(
        &cfg,
        config_from(&live.server.base_url(), &out, &extra, start),
    )
    .unwrap();
    let (run, stdout, stderr) = docpipe_debug(&cfg, &["export"]);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("rule top (alpha): sent follow-up to job job_ok"),
        "{stdout}"
    );
    // The output folder's state.sqlite (which is also the budget's and the ledger's) once, one
    // plan for the three projects, and the trend tables once for both the files and the rules.
    assert_eq!(count(&stderr, "SQLite file opened"), 1, "{stderr}");
    assert_eq!(count(&stderr, "opens=1"), 1, "{stderr}");
    assert_eq!(count(&stderr, "plan made"), 1, "{stderr}");
    assert_eq!(count(&stderr, "trend tables computed"), 1, "{stderr}");
    assert!(stdout.contains("  alpha (to ") && stdout.contains("  gamma (to "));

    // One project's export: its summary alone, but the shared trend files keep every project.
    let (run, stdout, stderr) = docpipe_debug(&cfg, &["export", "--project", "beta"]);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let summary: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("trends:"))
        .take_while(|l| !l.starts_with("trend tables:"))
        .collect();
    assert_eq!(summary.len(), 2, "{stdout}");
    assert!(summary[1].starts_with("  beta (to "), "{stdout}");
    let csv = std::fs::read_to_string(out.join("trends/daily.csv")).unwrap();
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(
            csv.lines()
                .filter(|l| l.starts_with(&format!("{p},")))
                .count(),
            2,
            "{p}'s two days stay in the shared table:\n{csv}"
        );
    }
    assert_eq!(count(&stderr, "SQLite file opened"), 1, "{stderr}");
    assert_eq!(count(&stderr, "trend tables computed"), 1, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_rules_check_read_without_the_folder_lock_and_open_the_state_once() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    exported(&live, &out, &[("2026-03-10", "2026-03-15")]).await;
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, config(&live.server.base_url(), &out, "")).unwrap();
    // Another process holds the folder's lock (an export running): status does not wait.
    let lock = std::fs::File::open(out.join(".lock")).unwrap();
    lock.lock().unwrap();
    let (run, stdout, stderr) = docpipe_debug(&cfg, &["status"]);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("export now: "), "{stdout}");
    assert_eq!(count(&stderr, "SQLite file opened"), 1, "{stderr}");
    assert_eq!(count(&stderr, "plan made"), 1, "{stderr}");
}
