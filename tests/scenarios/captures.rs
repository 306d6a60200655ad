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

/// What a backfill of alpha's 2026-03-10 made of the captures of a case.
struct Replayed {
    run: std::process::Output,
    /// The rows of `table`'s partition of the day (none when it was not written).
    rows: Vec<String>,
    /// The requests the summary counts.
    requests: u64,
    /// The line about the failed window, if any.
    failed: Option<String>,
    /// The rows of `<table>_outside` (dated outside the days asked for).
    outside: Vec<String>,
}

/// Backfills 2026-03-10 of alpha's `dataset` from the captures of `case`, reading `table`.
async fn replayed(case: &str, dataset: &str, table: &str) -> Replayed {
    let dir = tempfile::tempdir().unwrap();
    replayed_into(case, dataset, table, &dir.path().join("out")).await
}

/// The same, into the output folder `out` (kept for the caller to read).
async fn replayed_into(case: &str, dataset: &str, table: &str, out: &std::path::Path) -> Replayed {
    let server = serve_captures(&root().join("tests/data/captures").join(case)).await;
    let dir = out.parent().unwrap();
    let out = out.to_path_buf();
    let cfg = dir.join("docpipe.toml");
    let config = TestConfig {
        datasets: format!("datasets = [\"{dataset}\"]"),
        ..TestConfig::new(&server.base_url(), &out)
    };
    config.write(&cfg);
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
    // A file not written has no rows.
    let rows_of = |file: std::path::PathBuf| {
        if file.is_file() {
            parquet_rows(&file)
        } else {
            Vec::new()
        }
    };
    let rows = rows_of(
        out.join(table)
            .join("project=alpha/date=2026-03-10/part-00000.parquet"),
    );
    let outside = rows_of(out.join(format!("{table}_outside/project=alpha/part-00000.parquet")));
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let requests = stdout
        .lines()
        .find(|l| l.starts_with("exported "))
        .and_then(|l| l.split(" analytics request").next())
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in {stdout}"));
    let failed = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("failed alpha 2026-03-10: "))
        .map(str::to_string);
    Replayed {
        run,
        rows,
        requests,
        failed,
        outside,
    }
}

async fn page_views_of(case: &str) -> Replayed {
    replayed(case, "page_views", "page_views").await
}

async fn assistant_of(case: &str) -> Replayed {
    replayed(case, "assistant", "assistant_turns").await
}

impl Replayed {
    /// Asserts the day was written whole: `rows` rows in `requests` requests.
    fn written(&self, rows: usize, requests: u64) {
        ok(&self.run);
        assert_eq!((self.rows.len(), self.requests), (rows, requests));
        assert_eq!(self.failed, None);
    }

    /// The rows of the day that hold `text`.
    fn rows_with(&self, text: &str) -> usize {
        self.rows.iter().filter(|row| row.contains(text)).count()
    }

    /// Asserts that standard output or error has `line`.
    fn says(&self, line: &str) {
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&self.run.stdout),
            String::from_utf8_lossy(&self.run.stderr)
        );
        assert!(said.contains(line), "{said}");
    }

    /// Asserts the window failed with `message` after `requests` requests, nothing written.
    fn refused(&self, requests: u64, message: &str) {
        assert_eq!(self.run.status.code(), Some(1));
        assert_eq!((self.rows.len(), self.requests), (0, requests));
        assert_eq!(self.failed.as_deref(), Some(message));
    }
}

const VIEWS: &str = "page views for project alpha (2026-03-10 to 2026-03-11)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_views_with_an_empty_page_mid_walk_and_totals_only_on_the_first_page_lose_nothing() {
    let r = page_views_of("views-empty-page-mid-walk").await;
    r.written(300, 3);
    let stdout = String::from_utf8_lossy(&r.run.stdout);
    assert!(
        stdout.contains("1 page-view window (1 final, 0 provisional), 300 rows"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_views_with_partial_totals_on_a_later_page_and_unknown_fields_are_written() {
    let r = page_views_of("views-partial-totals-later").await;
    r.written(5, 2);
    assert_eq!(
        [r.rows[0].as_str(), r.rows[4].as_str()],
        [
            r#"path="/docs/page-000",human=1,ai=0,total=1"#,
            r#"path="/docs/page-004",human=0,ai=1,total=1"#
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_page_without_the_totals_its_table_needs_is_refused_naming_them() {
    page_views_of("views-partial-totals-first").await.refused(
        1,
        &format!(
            "{VIEWS}: paging stopped: the page at offset 0 has no `totals` (or not all of human, ai and total), which the site_totals table needs"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_error_body_is_shown_in_the_services_words() {
    let cases = [
        (
            "views-401",
            "the service refused the admin key of organization org-a (401: Unauthorized); check the key in DOCPIPE_IT_ADMIN_A",
        ),
        (
            "views-404",
            "project 'alpha' is unknown to the service (404: Invalid project id)",
        ),
        (
            "views-403",
            "forbidden (403: Forbidden: Analytics export is not included in your plan); the key may be of the wrong kind, read-only, outside its IP allow-list, or the plan lacks this feature",
        ),
        (
            "views-400",
            "invalid request (400: Invalid query parameters: dateTo must be after dateFrom; limit must be at most 250)",
        ),
    ];
    for (case, words) in cases {
        page_views_of(case)
            .await
            .refused(1, &format!("{VIEWS}: {words}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_in_text_or_html_and_a_503_in_html_are_retried_not_read() {
    // The 429s say Retry-After: 1; the 503 comes on the second page.
    for case in ["views-429-text", "views-429-html", "views-503-html"] {
        let r = page_views_of(case).await;
        r.written(5, 3);
        let stderr = String::from_utf8_lossy(&r.run.stderr);
        assert!(stderr.contains("retrying: "), "{case}: {stderr}");
        assert!(!stderr.contains("not JSON"), "{case}: {stderr}");
        // Log lines carry no colour codes off a terminal.
        assert!(!stderr.contains('\u{1b}'), "{case}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_without_retry_after_waits_for_the_hours_next_slot_not_a_quick_retry() {
    let r = page_views_of("views-429-no-retry-after").await;
    // The one request sent counts in the hour: its slot frees an hour later, longer than
    // max_retry_after, so the window fails at once instead of spending the hour on retries.
    let failed = r.failed.clone().unwrap();
    assert!(
        failed.starts_with(&format!(
            "{VIEWS}: rate limited (429) without Retry-After; the hour's next slot is in 36"
        )),
        "{failed}"
    );
    assert_eq!((r.rows.len(), r.requests), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_of_html_is_quoted_with_its_content_type() {
    // Read as a malformed body: retried once (a proxy's page may pass), then refused.
    page_views_of("views-200-html").await.refused(
        2,
        &format!(
            r#"{VIEWS}: malformed response: the body is not JSON (content type text/html; charset=utf-8): "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Please sign in to continue.</body></html>\n""#
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assistant_turns_with_an_empty_page_mid_walk_lose_nothing() {
    let r = assistant_of("assistant-empty-page-mid-walk").await;
    r.written(3, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_body_without_has_more_and_a_turn_without_response_type_are_read() {
    let r = assistant_of("assistant-no-has-more").await;
    r.written(3, 2);
    // The turn without `responseType` is written with the documented default.
    let types: Vec<&str> = r
        .rows
        .iter()
        .map(|row| {
            row.split("response_type=")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(types, ["\"answer\"", "\"answer\"", "\"answer\""]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_without_a_field_the_table_needs_fails_the_window_naming_field_and_page() {
    assistant_of("assistant-missing-required").await.refused(
        2,
        "assistant 2026-03-10..2026-03-11: assistant for project alpha (2026-03-10 to 2026-03-11): malformed response: the first page: conversations[1] has no field `query`",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_dated_outside_the_days_asked_for_is_set_aside_and_the_others_written() {
    let r = assistant_of("assistant-row-outside-range").await;
    r.written(2, 1);
    let stdout = String::from_utf8_lossy(&r.run.stdout);
    assert!(
        stdout.contains("  assistant: 1 window, 2 rows, 1 request, 1 rows dated outside the days asked for set aside in assistant_turns_outside\n"),
        "{stdout}"
    );
    assert_eq!(r.outside.len(), 1);
    assert!(
        r.outside[0].contains(r#"id="c-1",timestamp=2026-03-11 09:00:00.000000 +00:00"#),
        "{:?}",
        r.outside
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolution_status_the_service_added_is_kept_and_counted_in_the_summary() {
    let r = assistant_of("assistant-unknown-resolution-status").await;
    r.written(3, 2);
    r.says("  assistant: 1 row with a resolution_status docpipe does not know, kept as sent: \"partially_answered\" (1)\n");
    let statuses: Vec<&str> = r
        .rows
        .iter()
        .map(|row| {
            row.split("resolution_status=")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        statuses,
        ["\"answered\"", "\"partially_answered\"", "\"answered\""]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feedback_status_the_service_added_is_kept_and_counted_in_the_summary() {
    let r = replayed("feedback-unknown-status", "feedback", "feedback").await;
    r.written(3, 1);
    assert_eq!(r.rows_with("status=\"archived\""), 1, "{:?}", r.rows);
    r.says(
        "  feedback: 1 row with a status docpipe does not know, kept as sent: \"archived\" (1)\n",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_time_without_t_and_zone_is_read_as_utc_and_noted() {
    let r = replayed("searches-time-without-zone", "searches", "searches").await;
    r.written(3, 1);
    let noted = r.rows_with("last_searched_at=2026-03-10 08:15:00.000000 +00:00");
    assert_eq!(noted, 1, "{:?}", r.rows);
    r.says("searches[0].lastSearchedAt \"2026-03-10 08:15:00\" is not an RFC 3339 instant: read as 2026-03-10T08:15:00Z (no zone: read as UTC); later values of this shape are read alike");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_sent_with_a_fraction_are_rounded_in_the_table_and_kept_as_sent_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = replayed_into("visitors-fractional-count", "visitors", "visitors", &out).await;
    r.written(3, 1);
    assert_eq!(
        r.rows_with(r#"path="/api-reference/frames",human=10,ai=3,total=13"#),
        1,
        "{:?}",
        r.rows
    );
    r.says("  visitors: 2 counts sent with a fraction, rounded in visitors and kept as sent in visitors_fractions: ai 2.5 of path \"/api-reference/frames\" (written 3)\n");
    let kept = parquet_rows(
        &out.join("visitors_fractions/project=alpha/date=2026-03-10/part-00000.parquet"),
    );
    let kept: Vec<String> = kept
        .iter()
        .map(|row| row.split(",fetched_at=").next().unwrap().to_string())
        .collect();
    assert_eq!(
        kept,
        [
            r#"key="path "/api-reference/frames"",column="ai",sent=2.5,written=3"#,
            r#"key="path "/api-reference/frames"",column="total",sent=12.5,written=13"#,
        ]
    );
}
