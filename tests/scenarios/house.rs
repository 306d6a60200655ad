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
    let live = Live::start_at(small(), chrono::Utc::now()).await;
    let dir = tempfile::tempdir().unwrap();
    // Ten days: the first are final, so that the rule with [impact] measures its days before.
    let start = chrono::Utc::now().date_naive() - chrono::Duration::days(9);
    let rules = top_rule(dir.path());
    // The example rule with [impact]: its firing records each term's figure before, from its
    // one table (search_terms), not from every trend table again.
    let gaps = std::fs::read_to_string(root().join("jobs/search-gaps.toml")).unwrap();
    std::fs::write(
        rules.join("search-gaps.toml"),
        gaps.replace("project = \"acme-docs\"", "project = \"alpha\"")
            .replace("min_rows = 3", "min_rows = 1")
            .replace("timeout = \"1h\"", "timeout = \"1s\""),
    )
    .unwrap();
    let out = dir.path().join("out");
    let cfg = dir.path().join("c.toml");
    let extra = format!("[rules]\ndir = \"{}\"", rules.display());
    std::fs::write(
        &cfg,
        config_from(&live.server.base_url(), &out, &extra, start).replace(
            r#"datasets = ["page_views"]"#,
            r#"datasets = ["page_views", "searches"]"#,
        ),
    )
    .unwrap();
    let (run, stdout, stderr) = docpipe_debug(&cfg, &["export"]);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("rule top (alpha): sent follow-up to job job_ok"),
        "{stdout}"
    );
    assert!(
        stdout.contains("rule search-gaps (alpha): held for review as firing 1 (5 rows, "),
        "{stdout}"
    );
    // The impact's table is read for the figures before when a firing is sent: the shipped
    // rule's firing holds readers' words, so it waits for a person and nothing is read now.
    assert_eq!(
        count(&stderr, "one trend table computed output="),
        0,
        "{stderr}"
    );
    assert_eq!(count(&stderr, "table=\"search_terms\""), 0, "{stderr}");
    // The output folder's state.sqlite (which is also the budget's and the ledger's) once, one
    // plan for the three projects (two in a first run: the newest day of each dataset never
    // walked first, then the rest measured by it), and the trend tables once for both the
    // files and the rules.
    assert_eq!(count(&stderr, "SQLite file opened"), 1, "{stderr}");
    assert_eq!(count(&stderr, "opens=1"), 1, "{stderr}");
    assert_eq!(count(&stderr, "plan made windows=60 "), 1, "{stderr}");
    assert_eq!(count(&stderr, "plan made windows=54 "), 1, "{stderr}");
    assert_eq!(count(&stderr, "plan made"), 2, "{stderr}");
    assert_eq!(count(&stderr, "trend tables computed"), 1, "{stderr}");
    assert!(stdout.contains("  alpha (to ") && stdout.contains("  gamma (to "));

    // Nothing written since, the same day: the trends and the rule are not run again.
    let (run, stdout, stderr) = docpipe_debug(&cfg, &["export"]);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stdout
            .contains("\ntrends and rules not run again: no window written since the last ones (")
            && stdout.contains("), the same day, and the rules did not change\n"),
        "{stdout}"
    );
    assert_eq!(count(&stderr, "trend tables computed"), 0, "{stderr}");
    assert_eq!(count(&stderr, "plan made"), 1, "{stderr}");
    assert!(!stdout.contains("rule top"), "{stdout}");

    // One project's export, the trend files gone: its summary alone, but the shared trend
    // files keep every project.
    std::fs::remove_dir_all(out.join("trends")).unwrap();
    let (run, stdout, stderr) = docpipe_debug(&cfg, &["export", "--project", "beta"]);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let summary: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("trends:"))
        .take_while(|l| !l.starts_with("docs gaps"))
        .collect();
    assert_eq!(summary.len(), 2, "{stdout}");
    assert!(
        stdout.contains("\n  beta searches (7 days to ") && !stdout.contains("  alpha searches ("),
        "{stdout}"
    );
    assert!(summary[1].starts_with("  beta (to "), "{stdout}");
    let csv = std::fs::read_to_string(out.join("trends/daily.csv")).unwrap();
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(
            csv.lines()
                .filter(|l| l.starts_with(&format!("{p},")))
                .count(),
            10,
            "{p}'s ten days stay in the shared table:\n{csv}"
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

/// Copies a folder, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[tokio::test]
async fn a_folder_written_by_66ba354_opens_in_one_windows_table_and_goes_on_without_fetching_a_final_day()
 {
    // `tests/fixtures/folder-66ba354`: `docpipe backfill --from 2026-03-08 --to 2026-03-10` of the
    // three test projects' default datasets, by commit 66ba354 on the emulator's small data
    // (page views' days in `windows`, the other datasets' in `record_windows`).
    let fixture = root().join("tests/fixtures/folder-66ba354");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    copy_dir(&fixture, &out);
    let before = dataset(&out);
    let live = Live::start(small()).await;
    let mut targets = targets(&live, open_limits());
    for t in &mut targets {
        t.datasets = docpipe::dataset::default_names();
    }
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap();
    // One table: page views' 9 days and the other datasets' days, each under its dataset.
    let conn = rusqlite::Connection::open(out.join("state.sqlite")).unwrap();
    let by_dataset: Vec<(String, i64, i64)> = conn
        .prepare(
            "SELECT dataset, COUNT(*), SUM(final) FROM windows GROUP BY dataset ORDER BY dataset",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let want: Vec<(String, i64, i64)> = [
        ("assistant", 9, 0),
        ("caller_stats", 9, 9),
        ("feedback", 9, 0),
        ("feedback_by_page", 9, 9),
        ("page_views", 9, 9),
        ("searches", 9, 9),
        ("visitors", 9, 9),
    ]
    .iter()
    .map(|(d, n, f)| (d.to_string(), *n, *f))
    .collect();
    assert_eq!(by_dataset, want);
    assert!(!sqlite_tables(&out.join("state.sqlite")).contains(&"record_windows".to_string()));
    // The final days are skipped without a request; the day after them is fetched (the spans,
    // feedback and assistant turns, are never final: walked again over their re-check days).
    let plan = exporter
        .plan(&targets, day("2026-03-08"), day("2026-03-11"))
        .unwrap();
    let due: Vec<_> = plan
        .due
        .iter()
        .filter(|d| !d.is_span() && d.day < day("2026-03-11"))
        .map(|d| (d.dataset(), d.project.clone(), d.day))
        .collect();
    assert_eq!(due, [], "no final day is due again");
    assert_eq!(plan.skipped_final, 45);
    let summary = exporter.run(&targets, &plan).await;
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    assert!(summary.windows.iter().all(|w| w.day == day("2026-03-11")));
    assert_eq!(summary.windows.len(), 3);
    let daily: Vec<_> = summary
        .others
        .iter()
        .filter(|r| {
            r.to == r.day.succ_opt().unwrap() && !["feedback", "assistant"].contains(&r.dataset)
        })
        .map(|r| (r.dataset, r.day))
        .collect();
    assert_eq!(daily.len(), 12, "{daily:?}");
    assert!(
        daily.iter().all(|(_, d)| *d == day("2026-03-11")),
        "{daily:?}"
    );
    // The final days' partitions written by 66ba354 are as they were (the spans' were
    // walked again).
    let after = dataset(&out);
    let spans = ["feedback/", "feedback_undated/", "assistant_turns/"];
    let mut kept = 0;
    for (file, rows) in before
        .iter()
        .filter(|(f, _)| !spans.iter().any(|s| f.starts_with(s)))
    {
        let now = after.iter().find(|(f, _)| f == file);
        assert!(
            now.map(|(_, r)| r) == Some(rows),
            "{} changed",
            file.display()
        );
        kept += 1;
    }
    assert_eq!(kept, 72);
    // Its spans are healed: with the project's first day before the backfill 66ba354 did,
    // the days before it are a hole, planned first.
    let mut from_first = targets.clone();
    for t in &mut from_first {
        t.start = Some(day("2026-03-05"));
    }
    let plan = exporter
        .plan(&from_first, day("2026-03-05"), day("2026-03-11"))
        .unwrap();
    let holes: Vec<_> = plan
        .due
        .iter()
        .filter(|d| d.is_span() && d.project == "alpha")
        .map(|d| (d.dataset(), d.day, d.to))
        .collect();
    assert_eq!(
        holes,
        [
            ("feedback", day("2026-03-05"), day("2026-03-08")),
            ("assistant", day("2026-03-05"), day("2026-03-08"))
        ]
    );
    // Its site_totals without `unlisted` and the new day's with it read as one table.
    let tables = docpipe::trends::compute(&out, &docpipe::trends::Selection::default()).unwrap();
    assert_eq!(tables.daily.height(), 12, "3 projects, 4 days");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_ends_quietly_with_exit_0_when_its_reader_goes_away() {
    // The binary's clock is the system's: the emulator's stands at the real now.
    let live = Live::start_at(small(), chrono::Utc::now()).await;
    let start = chrono::Utc::now().date_naive() - chrono::Duration::days(1);
    let dir = tempfile::tempdir().unwrap();
    top_rule(dir.path());
    let cfg = dir.path().join("docpipe.toml");
    std::fs::write(
        &cfg,
        config_from(&live.server.base_url(), &dir.path().join("out"), "", start),
    )
    .unwrap();
    // Two days: the second export below finds the hour's budget with room.
    let first = docpipe(&cfg, &["export"], None);
    assert!(first.status.success(), "{first:?}");
    let from = (start - chrono::Duration::days(2)).to_string();
    let commands: [&[&str]; 10] = [
        &["status"],
        &["status", "--json"],
        &["trends"],
        &["rules", "check"],
        &["validate"],
        &["check", "--dry-run"],
        &["export", "--dry-run"],
        &["export"],
        &["backfill", "--from", &from, "--dry-run"],
        &["--help"],
    ];
    for args in commands {
        // The reader goes away before the command writes its first line: `docpipe status | head`
        // where head has read what it wanted.
        let mut child = docpipe_command(&cfg, args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let done = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_missing_config_names_the_absolute_path_and_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .current_dir(dir.path())
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        format!(
            "error: no config at {}: write one with `docpipe init`, or name yours with `--config FILE`\n",
            dir.path().join("docpipe.toml").display()
        )
    );
}

#[test]
fn two_processes_opening_a_new_output_folder_at_once_bring_its_state_up_to_date_once() {
    for attempt in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let cfg = TestConfig::new("http://127.0.0.1:9", &dir.path().join("out"))
            .write(&dir.path().join("docpipe.toml"));
        for out in two_at_once(|| docpipe_command(&cfg, &["rules", "pending"])) {
            assert!(
                out.status.success(),
                "attempt {attempt}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "no firing waits for review\n"
            );
        }
    }
}

#[test]
fn validate_says_when_a_variable_the_daemon_reads_later_is_unset() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestConfig::new("http://127.0.0.1:9", &dir.path().join("out"));
    config.extra = "[alerts]\nwebhook_url_env = \"DOCPIPE_IT_UNSET_HOOK\"\n[warehouse]\npostgres_url_env = \"DOCPIPE_IT_UNSET_WAREHOUSE\"\n".into();
    let cfg = config.write(&dir.path().join("docpipe.toml"));
    let out = docpipe(&cfg, &["validate"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("warning: [alerts] webhook_url_env names DOCPIPE_IT_UNSET_HOOK, which is not set here: the daemon would send no alert\n")
            && stdout.contains("warning: [warehouse] postgres_url_env names DOCPIPE_IT_UNSET_WAREHOUSE, which is not set here: the runs would load no warehouse\n"),
        "{stdout}"
    );
}
