//! The scenario half of `tests/it/export.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;
use crate::support::export::*;
use std::io::Write;
use std::path::Path;
use std::process::Command;

// --- the binary, as a user runs it -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_any_crash_point_the_resumed_export_equals_an_uninterrupted_one() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let (ref_out, out) = (dir.path().join("ref"), dir.path().join("crashy"));
    let (ref_cfg, cfg) = (dir.path().join("ref.toml"), dir.path().join("crashy.toml"));
    std::fs::write(&ref_cfg, config(&live.server.base_url(), &ref_out, "")).unwrap();
    std::fs::write(&cfg, config(&live.server.base_url(), &out, "")).unwrap();
    let range = ["backfill", "--from", "2026-03-06", "--to", "2026-03-10"];
    let reference = docpipe(&ref_cfg, &range, None);
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    // The first crash stops at the 9th crash point. Windows go one after the other, the most
    // recent day first, projects taking turns: alpha's three pages (1-3), its files written
    // (4) and recorded (5); beta's one page (6), written (7) and recorded (8); gamma's first
    // page (9).
    let first = docpipe(&cfg, &range, Some(9));
    assert!(!first.status.success(), "aborted at crash point 9");
    let state = docpipe::store::Store::open(&out.join("state.sqlite")).unwrap();
    let stored: Vec<(&str, String, String, u64)> = state
        .walks(|n| docpipe::dataset::by_name(n).map(|d| d.name()))
        .unwrap()
        .into_iter()
        .map(|(w, pages)| (w.dataset, w.project, w.from.to_string(), pages))
        .collect();
    assert_eq!(
        stored,
        [(
            "page_views",
            "gamma".to_string(),
            "2026-03-10".to_string(),
            1
        )]
    );
    drop(state);
    let conn = rusqlite::Connection::open(out.join("state.sqlite")).unwrap();
    let done: Vec<(String, String)> = conn
        .prepare("SELECT project, day FROM windows WHERE dataset = 'page_views' ORDER BY project")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let d10 = "2026-03-10".to_string();
    assert_eq!(
        done,
        [
            ("alpha".to_string(), d10.clone()),
            ("beta".to_string(), d10)
        ]
    );
    drop(conn);
    // A kill in the middle of an append leaves a cut frame after gamma's page; a kill between
    // recording a window and removing its journal leaves a journal of no walk (here, beta's).
    let walks = out.join(".walks");
    let gamma = walks.join("project=gamma/page_views.2026-03-10.2026-03-11.pages");
    let journal = std::fs::read(&gamma).unwrap();
    let cut = journal[12..12 + 100].to_vec();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&gamma)
        .unwrap()
        .write_all(&cut)
        .unwrap();
    let stale = walks.join("project=beta/page_views.2026-03-10.2026-03-11.pages");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::copy(&gamma, &stale).unwrap();
    // Then crashes at many other moments, including between writing a file and renaming it.
    for n in [9, 2, 14, 7, 21, 3, 11, 4, 17, 6] {
        let run = docpipe(&cfg, &range, Some(n));
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        if run.status.success() {
            break;
        }
        assert!(err.contains(&format!("crash point {n}:")), "{err}");
    }
    let last = docpipe(&cfg, &range, None);
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    let got = dataset(&out);
    assert_eq!(
        got.len(),
        2 * 5 * 3,
        "page_views and site_totals for 5 days x 3 projects"
    );
    assert_eq!(got, dataset(&ref_out));
    assert!(
        files_below(&out)
            .iter()
            .all(|f| !f.to_string_lossy().contains(".tmp-")),
        "no temporary file remains"
    );
    assert!(
        !walks.exists(),
        "no journal remains: {:?}",
        files_below(&walks)
    );
    // And a rerun of the finished range sends nothing.
    let before = live.emu().stats()["views"].requests;
    let rerun = docpipe(&cfg, &range, None);
    assert!(String::from_utf8_lossy(&rerun.stdout).contains("exported 0 page-view windows"));
    assert_eq!(live.emu().stats()["views"].requests, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_polars_and_pandas_read_the_output_as_it_is() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    let s = export(&live, out.path(), open_limits(), "2026-03-09", "2026-03-11").await;
    let rows: i64 = s.rows();
    let views: i64 = s.windows.iter().map(|w| w.totals.total).sum();
    let ai: i64 = s.windows.iter().map(|w| w.totals.ai).sum();
    let script = format!(
        r#"
import duckdb, polars as pl, pandas as pd
root = {root:?}
con = duckdb.connect()
types = {{r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{{root}}/page_views/**/*.parquet', hive_partitioning = true)").fetchall()}}
print("duckdb", types["date"], types["project"], types["fetched_at"])
n, total = con.execute(f"SELECT count(*), sum(total) FROM read_parquet('{{root}}/page_views/**/*.parquet', hive_partitioning = true)").fetchone()
ai = con.execute(f"SELECT sum(ai) FROM read_parquet('{{root}}/site_totals/**/*.parquet', hive_partitioning = true)").fetchone()[0]
print("duckdb", n, total, ai)
lf = pl.scan_parquet(f"{{root}}/page_views/**/*.parquet", hive_partitioning=True)
schema = lf.collect_schema()
print("polars", schema["date"], schema["project"])
df = lf.filter(pl.col("project") == "alpha").select(pl.len(), pl.col("total").sum()).collect()
print("polars", df.item(0, 0) > 0, lf.select(pl.col("total").sum()).collect().item())
print("pandas", len(pd.read_parquet(f"{{root}}/page_views")))
"#,
        root = out.path().display().to_string()
    );
    let text = run_python(&script, &[]);
    assert_eq!(
        text,
        format!(
            "duckdb DATE VARCHAR TIMESTAMP WITH TIME ZONE\nduckdb {rows} {views} {ai}\npolars Date String\npolars True {views}\npandas {rows}\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_one_line_and_exit_code_2_and_writes_nothing() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let good = dir.path().join("good.toml");
    std::fs::write(&good, config(&live.server.base_url(), &out, "")).unwrap();
    let unknown = dir.path().join("unknown.toml");
    std::fs::write(
        &unknown,
        config(&live.server.base_url(), &out, "colour = \"blue\""),
    )
    .unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let unwritable = dir.path().join("unwritable.toml");
    std::fs::write(
        &unwritable,
        config(&live.server.base_url(), &blocker.join("sub"), ""),
    )
    .unwrap();
    let daemon = dir.path().join("daemon.toml");
    std::fs::write(
        &daemon,
        config(
            &live.server.base_url(),
            &out,
            "[daemon]\nexport_schedule = \"every hour\"\nlisten = \"localhost\"",
        ),
    )
    .unwrap();
    // Attacks of an outsider's: a key variable that is not set, a project id that is a dot
    // segment, a base_url without a host, a key with a control character.
    let variant = |name: &str, from: &str, to: &str| {
        let path = dir.path().join(name);
        let text = config(&live.server.base_url(), &out, "").replace(from, to);
        assert!(text.contains(to));
        std::fs::write(&path, text).unwrap();
        path
    };
    let unset = variant("unset.toml", "DOCPIPE_IT_ADMIN_A", "DOCPIPE_IT_NOT_SET");
    let dots = variant("dots.toml", "id = \"beta\"", "id = \"..\"");
    let no_host = variant(
        "nohost.toml",
        &format!("base_url = \"{}\"", live.server.base_url()),
        "base_url = \"http://\"",
    );
    let control = variant(
        "control.toml",
        "DOCPIPE_IT_ADMIN_A",
        "DOCPIPE_IT_CONTROL_KEY",
    );
    let cases: [(&Path, &[&str], &str); 15] = [
        (&daemon, &["run"], "error: invalid config "),
        (
            &good,
            &[
                "backfill",
                "--queue",
                "--from",
                "2026-03-01",
                "--to",
                "+262142-12-31",
            ],
            "error: --to +262142-12-31 is out of range: days from 2000-01-01 to 2099-12-31 are accepted",
        ),
        (
            &good,
            &["backfill", "--from=-5000-01-01", "--to", "2026-03-01"],
            "error: --from -5000-01-01 is out of range: days from 2000-01-01 to 2099-12-31 are accepted",
        ),
        (
            &good,
            &["backfill", "--from", "2000-01-01", "--to", "2026-03-01"],
            "error: --from 2000-01-01 --to 2026-03-01 is 9557 days; one backfill covers at most 3653 (ten years): split it",
        ),
        (
            &unset,
            &["export"],
            "error: organization org-a: environment variable DOCPIPE_IT_NOT_SET",
        ),
        (&dots, &["export"], "error: invalid config "),
        (&no_host, &["validate"], "error: invalid config "),
        (
            &control,
            &["export"],
            "error: organization org-a: the key in DOCPIPE_IT_CONTROL_KEY holds a control character or a space: a key is printable text (check how it was pasted)",
        ),
        (
            &good,
            &[
                "backfill",
                "--queue",
                "--from",
                "2026-03-01",
                "--project",
                "delta",
            ],
            "error: project delta is not configured in ",
        ),
        (
            &good,
            &["backfill", "--queue", "--dry-run", "--from", "2026-03-01"],
            "error: the argument '--queue' cannot be used with '--dry-run'",
        ),
        (&unknown, &["export"], "error: invalid config"),
        (
            &good,
            &["backfill", "--from", "2026-13-01"],
            "error: invalid value '2026-13-01' for '--from <FROM>'",
        ),
        (
            &good,
            &["backfill", "--from", "2026-03-05", "--to", "2026-03-01"],
            "error: --from 2026-03-05 is after --to 2026-03-01",
        ),
        (
            &good,
            &["backfill", "--from", "2026-03-01", "--project", "delta"],
            "error: project delta is not configured in ",
        ),
        (
            &unwritable,
            &["backfill", "--from", "2026-03-01"],
            "error: output folder ",
        ),
    ];
    for (cfg, args, want) in cases {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"));
        let run = cmd
            .current_dir(dir.path())
            .arg("--config")
            .arg(cfg)
            .args(args)
            .env("DOCPIPE_IT_ADMIN_A", ADMIN_A)
            .env("DOCPIPE_IT_ADMIN_B", ADMIN_B)
            .env("DOCPIPE_IT_CONTROL_KEY", format!("{ADMIN_A}\u{1b}[2J"))
            .env_remove("DOCPIPE_IT_NOT_SET")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        assert_eq!(run.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with(want), "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
    }
    // What the invalid configs name.
    for (cfg, args, names) in [
        (&unknown, "export", "unknown field `colour`"),
        (
            &dots,
            "validate",
            "project id \"..\" must be letters, digits, '-', '_' or '.'",
        ),
        (
            &no_host,
            "validate",
            "service.base_url \"http://\" must be an http:// or https:// address with a host",
        ),
    ] {
        let run = docpipe(cfg, &[args], None);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(names), "{stderr}");
    }
    let run = docpipe(&daemon, &["run"], None);
    assert!(
        String::from_utf8_lossy(&run.stderr).ends_with(
            ": 2 problems:\n  daemon.export_schedule: schedule \"every hour\" is not a cron expression of 6 fields, sec min hour day month weekday (Invalid pattern: Pattern must have 6 or 7 fields when seconds are required and years are optional.)\n  daemon.listen \"localhost\" must be an address like 127.0.0.1:9464 (or \"\" for none)\n"
        ),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!out.exists(), "nothing written");
    assert_eq!(live.emu().stats().get("views").map_or(0, |s| s.requests), 0);
    // A dry run prints the plan and sends nothing.
    let run = docpipe(
        &good,
        &[
            "backfill",
            "--from",
            "2026-03-01",
            "--to",
            "2026-03-10",
            "--dry-run",
        ],
        None,
    );
    assert!(run.status.success());
    let text = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(text.starts_with("plan: 30 page-view windows due (0 provisional, 0 resumed), 0 windows of other datasets (0 resumed), 0 of them probed first, 0 skipped as final, 0 as looked at recently, about 30 analytics requests\n"), "{text}");
    assert!(text.ends_with("dry run: nothing sent\n"));
    assert_eq!(live.emu().stats().get("views").map_or(0, |s| s.requests), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_plans_each_project_from_its_start_date_or_the_last_30_days() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    // The binary reads the system clock: a run that straddles midnight is run again (a second
    // run of well under a second cannot straddle it too), never taken as a pass.
    let (today, text) = loop {
        let today = chrono::Utc::now().date_naive();
        let start = today - chrono::Duration::days(5);
        let cfg = dir.path().join("c.toml");
        let text = config(&live.server.base_url(), &dir.path().join("out"), "").replace(
            "id = \"alpha\"\norganization = \"org-a\"",
            &format!("id = \"alpha\"\norganization = \"org-a\"\nstart_date = \"{start}\""),
        );
        std::fs::write(&cfg, text).unwrap();
        let run = docpipe(&cfg, &["export", "--dry-run"], None);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        if chrono::Utc::now().date_naive() == today {
            break (today, String::from_utf8_lossy(&run.stdout).to_string());
        }
    };
    let plans: Vec<&str> = text.lines().filter(|l| l.starts_with("plan:")).collect();
    assert_eq!(
        plans,
        [
            "plan: 66 page-view windows due (12 provisional, 0 resumed), 0 windows of other datasets (0 resumed), 0 of them probed first, 0 skipped as final, 0 as looked at recently, about 66 analytics requests"
        ],
        "one plan for every project, each from its own first day: {text}"
    );
    // alpha from its start_date, beta and gamma (no start_date) the last 30 days.
    let (start, last30) = (
        today - chrono::Duration::days(5),
        today - chrono::Duration::days(29),
    );
    let projects: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains(": ") && l.contains(" windows 20"))
        .collect();
    // Nothing walked yet: the estimate says it counts a request a window.
    assert!(
        text.contains("  guessed, never walked: 1 request a window (the first walk measures them; the run may take more): page_views alpha, page_views beta, page_views gamma\n"),
        "{text}"
    );
    assert_eq!(
        projects,
        [
            format!("  alpha: 6 windows {start}..{today}, about 6 requests"),
            format!("  beta: 30 windows {last30}..{today}, about 30 requests"),
            format!("  gamma: 30 windows {last30}..{today}, about 30 requests"),
        ],
        "{text}"
    );
    assert_eq!(live.emu().stats().get("views").map_or(0, |s| s.requests), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_aggregates_the_trends_afterwards_unless_told_not_to() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let start = chrono::Utc::now().date_naive() - chrono::Duration::days(1);
    let rules = top_rule(dir.path());
    let rules_on = format!("[rules]\ndir = \"{}\"", rules.display());
    let rules_off = format!("trends_after_export = false\n{rules_on}\nafter_export = false");
    for (name, extra, want_trends) in [
        ("on", rules_on.as_str(), true),
        ("off", rules_off.as_str(), false),
    ] {
        let out = dir.path().join(name);
        let cfg = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &cfg,
            config_from(&live.server.base_url(), &out, extra, start),
        )
        .unwrap();
        let run = docpipe(&cfg, &["export"], None);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let stdout = String::from_utf8_lossy(&run.stdout).to_string();
        assert_eq!(
            stdout.contains("trends: the last 7 complete days against the 7 before"),
            want_trends,
            "{stdout}"
        );
        assert_eq!(out.join("trends/daily.csv").exists(), want_trends);
        // The rules without a schedule run after the export (unless `after_export = false`).
        assert_eq!(
            stdout.contains("rule top (alpha): sent follow-up to job job_ok (1 rows, prompt "),
            want_trends,
            "{stdout}"
        );
        assert_eq!(
            live.emu().job_prompts("alpha", "job_ok").unwrap(),
            vec![format!("Views on {}: 0", start + chrono::Duration::days(1))],
            "sent once, by the first run only"
        );
        if want_trends {
            let csv = std::fs::read_to_string(out.join("trends/daily.csv")).unwrap();
            assert_eq!(
                csv.lines().count(),
                1 + 3 * 2,
                "a header and 2 days of 3 projects:\n{csv}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_with_different_outputs_share_one_budget_db() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared/budget.sqlite");
    let service = format!("[service]\nbudget_db = \"{}\"", shared.display());
    let cfg = |name: &str| {
        let path = dir.path().join(format!("{name}.toml"));
        let text = config(&live.server.base_url(), &dir.path().join(name), "")
            .replace("[service]", &service);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (a, b) = (cfg("a"), cfg("b"));
    let run = docpipe(
        &a,
        &[
            "backfill",
            "--from",
            "2026-03-06",
            "--to",
            "2026-03-10",
            "--project",
            "alpha",
        ],
        None,
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // alpha has 3 pages a day: 15 requests, which the other process's plan counts.
    let plan = docpipe(
        &b,
        &[
            "backfill",
            "--from",
            "2026-03-06",
            "--to",
            "2026-03-10",
            "--dry-run",
        ],
        None,
    );
    let text = String::from_utf8_lossy(&plan.stdout).to_string();
    assert!(
        text.contains("budget of org-a: 95000 requests/hour, 15 used in the last hour"),
        "{text}"
    );
    assert!(
        text.contains("budget of org-b: 95000 requests/hour, 0 used in the last hour"),
        "{text}"
    );
    let logged = |db: &Path| -> i64 {
        rusqlite::Connection::open(db)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM requests", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(
        logged(&shared),
        15,
        "the requests are logged in the shared file"
    );
    assert_eq!(
        sqlite_tables(&shared),
        ["request_counts", "requests"],
        "the shared file holds the budget's tables only"
    );
    assert!(
        !sqlite_tables(&dir.path().join("a/state.sqlite")).contains(&"requests".to_string()),
        "and the output folder's state has no request log"
    );
}

#[test]
fn a_time_zone_that_does_not_exist_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("tz.toml");
    let out = dir.path().join("out");
    std::fs::write(
        &cfg,
        config(
            "http://127.0.0.1:9",
            &out,
            "timezone = \"Mars/Olympus_Mons\"",
        ),
    )
    .unwrap();
    let run = docpipe(&cfg, &["export", "--dry-run"], None);
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        format!(
            "error: invalid config {}: export.timezone \"Mars/Olympus_Mons\" is not a time zone name (IANA, such as \"UTC\" or \"Europe/Berlin\")\n",
            cfg.display()
        )
    );
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_failure_stops_the_sending_at_once_with_one_line_and_exit_code_1() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = dir.path().join("c.toml");
    let start = chrono::Utc::now().date_naive() - chrono::Duration::days(20);
    std::fs::write(
        &cfg,
        config_from(
            &live.server.base_url(),
            &out,
            "trends_after_export = false",
            start,
        ),
    )
    .unwrap();
    // Files may not grow past 240 KiB (480 blocks of 512 bytes; the empty state is 176 KiB, more while it is made): a
    // full disk, as the process sees it (EFBIG instead of ENOSPC); the signal that would kill
    // the process is ignored, so writes fail.
    let run = std::process::Command::new("bash")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 480; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_docpipe"))
        .arg("--config")
        .arg(&cfg)
        .arg("export")
        .current_dir(dir.path())
        .env("DOCPIPE_IT_ADMIN_A", ADMIN_A)
        .env("DOCPIPE_IT_ADMIN_B", ADMIN_B)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stdout}\n{stderr}");
    // One line for all the windows the failure stopped, and the requests the summary counts
    // are all the service saw: a few, not one per window of the plan.
    let failed: Vec<&str> = stdout.lines().filter(|l| l.contains("failed")).collect();
    assert_eq!(failed.len(), 1, "{stdout}\n{stderr}");
    let (n, cause) = failed[0]
        .trim()
        .split_once(" windows failed (")
        .and_then(|(n, rest)| Some((n, rest.split_once("): ")?.1)))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        cause.contains(&format!(
            "state database {}",
            out.join("state.sqlite").display()
        )),
        "{cause}"
    );
    let exported = stdout
        .lines()
        .find_map(|l| l.strip_prefix("exported "))
        .map(|l| {
            l.replace(" page-view windows", " windows")
                .replace(" page-view window ", " windows ")
        })
        .unwrap();
    let written: usize = exported.split(' ').next().unwrap().parse().unwrap();
    assert_eq!(written + n.parse::<usize>().unwrap(), 63, "{stdout}");
    let sent = live.emu().stats().get("views").map_or(0, |s| s.requests);
    assert!(
        exported.contains(&format!(
            ", {} in all (the plan expected about ",
            docpipe::text::count(sent, "analytics request")
        )),
        "{exported}: the service saw {sent}"
    );
    assert!(
        sent <= written as u64 + 1,
        "{sent} requests for {written} windows"
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("the run stops sending"))
            .count(),
        1,
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_state_database_is_a_runtime_failure_not_bad_input() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("state.sqlite"), vec![0x5a; 8192]).unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, config(&live.server.base_url(), &out, "")).unwrap();
    for args in [&["export"][..], &["status"]] {
        let run = docpipe(&cfg, args, None);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().collect::<Vec<_>>(),
            [format!(
                "error: state database {}: file is not a database",
                out.join("state.sqlite").display()
            )],
            "{args:?}"
        );
    }
    assert_eq!(live.emu().stats().get("views").map_or(0, |s| s.requests), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_the_service_does_not_know_costs_one_request_then_waits_for_a_fix() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("docpipe.toml");
    let text = TestConfig {
        datasets: r#"datasets = ["page_views", "visitors"]"#.to_string(),
        ..TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
    }
    .toml()
    .replace(
        "[export]",
        "[[projects]]\nid = \"nw-apii\"\norganization = \"org-a\"\n[export]",
    );
    std::fs::write(&cfg, text).unwrap();
    let range = ["backfill", "--from", "2026-03-10", "--to", "2026-03-12"];
    let typo = |live: &Live| -> u64 {
        live.emu()
            .stats()
            .values()
            .map(|s| s.by_project.get("nw-apii").copied().unwrap_or(0))
            .sum()
    };
    let line = std::fs::read_to_string(&cfg)
        .unwrap()
        .lines()
        .position(|l| l == "id = \"nw-apii\"")
        .unwrap()
        + 1;
    let place = format!("{} line {line}", cfg.display());
    let first = docpipe(&cfg, &range, None);
    let out = String::from_utf8_lossy(&first.stdout);
    assert_eq!(first.status.code(), Some(1), "{out}");
    // One request: the 404 stops the project for the run (its other windows are skipped),
    // with one line sending the user to the config's line.
    assert_eq!(typo(&live), 1, "{out}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(
        stderr
            .matches(&format!("project 'nw-apii' is unknown to the service (404: Project not found): fix its id in {place}; this run and the later ones leave it out"))
            .count(),
        1,
        "{stderr}"
    );
    // One fact, one line: nothing else about it at ERROR.
    assert_eq!(
        stderr.lines().filter(|l| l.contains("ERROR")).count(),
        1,
        "{stderr}"
    );
    // No second line for the rest of the run's skip: the same fact.
    assert!(
        !stderr.contains("the rest of this run for project nw-apii"),
        "{stderr}"
    );
    // The next run does not plan it, and says why.
    let second = docpipe(&cfg, &range, None);
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{out}");
    assert!(
        out.contains("  nw-apii: not planned: the service said it does not know this project (404: Project not found, "),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "); fix its id in {place}, or pass --retry-unknown\n"
        )),
        "{out}"
    );
    assert_eq!(typo(&live), 1);
    let status = docpipe(&cfg, &["status"], None);
    let out = String::from_utf8_lossy(&status.stdout);
    assert!(
        out.contains(&format!(
            "nw-apii: unknown to the service at {} (404: Project not found, ",
            live.server.base_url()
        )),
        "{out}"
    );
    // Asked for again, it costs one request again.
    let mut retry = range.to_vec();
    retry.push("--retry-unknown");
    let third = docpipe(&cfg, &retry, None);
    assert_eq!(third.status.code(), Some(1));
    assert_eq!(typo(&live), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_beside_a_daemon_names_the_holder_at_once_and_a_dry_run_needs_no_lock() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = TestConfig::new(&live.server.base_url(), &out).write(&dir.path().join("c.toml"));
    let range = ["backfill", "--from", "2026-03-10", "--to", "2026-03-10"];
    // A first run writes the holder's line into the lock file, and leaves it free.
    assert!(docpipe(&cfg, &range, None).status.success());
    let line = std::fs::read_to_string(out.join(".lock")).unwrap();
    assert!(line.ends_with(" UTC (docpipe backfill)\n"), "{line}");
    assert!(
        line.split_once(" since ").unwrap().0.contains(':'),
        "{line}"
    );
    // Another process holds it (as a daemon would).
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(out.join(".lock"))
        .unwrap();
    lock.try_lock().unwrap();
    std::fs::write(
        out.join(".lock"),
        "host-a:4242 since 2026-11-25 01:00:00 UTC (docpipe run)\n",
    )
    .unwrap();
    let busy = docpipe(&cfg, &range, None);
    assert_eq!(busy.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&busy.stderr),
        format!(
            "error: output folder {}: another docpipe is exporting to it (host-a:4242 since 2026-11-25 01:00:00 UTC (docpipe run)); not waited: let the daemon fetch a range with `docpipe backfill --queue`, stop the other docpipe, or wait with --wait-lock 30m\n",
            out.display()
        )
    );
    let mut waiting = range.to_vec();
    waiting.extend(["--wait-lock", "1s"]);
    let busy = docpipe(&cfg, &waiting, None);
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("(docpipe run)); waited 1 second: "),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    // A dry run and status read beside it.
    let mut dry = range.to_vec();
    dry.push("--dry-run");
    let planned = docpipe(&cfg, &dry, None);
    assert!(
        planned.status.success(),
        "{}",
        String::from_utf8_lossy(&planned.stderr)
    );
    assert!(String::from_utf8_lossy(&planned.stdout).contains("dry run: nothing sent"));
    assert!(docpipe(&cfg, &["status"], None).status.success());
    drop(lock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configs_paths_are_relative_to_its_folder_and_the_first_line_names_them() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let text = TestConfig::new(&live.server.base_url(), Path::new("out"))
        .toml()
        .replace("[export]", "[rules]\ndir = \"rules\"\n[export]");
    std::fs::write(conf.join("docpipe.toml"), text).unwrap();
    // Run from another folder, naming the config by a relative path.
    let run = Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .current_dir(&elsewhere)
        .args([
            "--config",
            "../conf/docpipe.toml",
            "backfill",
            "--from",
            "2026-03-10",
            "--to",
            "2026-03-10",
            "--project",
            "alpha",
        ])
        .env("DOCPIPE_IT_ADMIN_A", ADMIN_A)
        .env("DOCPIPE_IT_ADMIN_B", ADMIN_B)
        .env("RUST_LOG", "docpipe=info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        conf.join("out/page_views/project=alpha/date=2026-03-10")
            .is_dir()
    );
    assert!(!elsewhere.join("out").exists());
    let first = stderr.lines().next().unwrap();
    let conf = std::fs::canonicalize(&conf).unwrap();
    for field in [
        format!("config={}", conf.join("docpipe.toml").display()),
        format!("output={}", conf.join("out").display()),
        format!("rules={}", conf.join("rules").display()),
        format!("version=\"{}\"", env!("CARGO_PKG_VERSION")),
    ] {
        assert!(first.contains(&field), "{field} not in {first}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_whose_windows_all_failed_ends_on_that_not_on_missing_trends() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
        .write(&dir.path().join("c.toml"));
    let run = docpipe_command(&cfg, &["export"])
        .env("DOCPIPE_IT_ADMIN_A", "mint_test_wrong_a")
        .env("DOCPIPE_IT_ADMIN_B", "mint_test_wrong_b")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("no exported data"), "{stderr}");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("error: ")
            && last.ends_with(
                " windows failed, and running again will not help until the key, the project id or the plan named above is fixed"
            ),
        "{stderr}"
    );
}
