//! Every analytics dataset beside page views: the emulator's answers against the OpenAPI file,
//! exports against the emulator's truth with faults on, resume after kills, real readers, and
//! hostile pages.

use crate::common::*;
use crate::support::datasets::*;
use crate::truth::*;
use serde_json::{Value, json};

// ---- the OpenAPI file's schemas, checked by a small validator of the keywords it uses ----
fn openapi() -> Value {
    let text = std::fs::read_to_string(root().join("tests/data/analytics.openapi.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn resolve<'a>(doc: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap();
            resolve(doc, &doc["components"]["schemas"][name])
        }
        None => s,
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// The problems of `v` against schema `s` (empty: valid).
fn validate(doc: &Value, s: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
    let s = resolve(doc, s);
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|alt| {
            let mut p = Vec::new();
            validate(doc, alt, v, at, &mut p);
            p.is_empty()
        });
        if !ok {
            out.push(format!("{at}: matches no alternative of anyOf"));
        }
        return;
    }
    match s.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => out.push(format!("{at}: {v} is not {t}")),
        Some(Value::Array(ts)) if !ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)) => {
            out.push(format!("{at}: {v} is none of {ts:?}"))
        }
        _ => {}
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !v.is_null()
        && !e.contains(v)
    {
        out.push(format!("{at}: {v} is not in {e:?}"));
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        out.push(format!("{at}: {n} < {min}"));
    }
    if let Some(obj) = v.as_object() {
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !obj.contains_key(r.as_str().unwrap()) {
                out.push(format!("{at}: missing {r}"));
            }
        }
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (k, sub) in props {
                if let Some(x) = obj.get(k) {
                    validate(doc, sub, x, &format!("{at}.{k}"), out);
                }
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(doc, items, x, &format!("{at}[{i}]"), out);
        }
    }
}

fn response_schema<'a>(doc: &'a Value, path: &str, status: &str) -> &'a Value {
    &doc["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
}

#[tokio::test]
async fn every_emulated_analytics_answer_validates_against_the_openapi_files_schemas() {
    let doc = openapi();
    let (app, _emu) = app(small());
    let p = "/v1/analytics/{projectId}";
    let mut checked = 0;
    let mut check = |path: &str, status: &str, body: &Value| {
        let mut problems = Vec::new();
        validate(
            &doc,
            response_schema(&doc, path, status),
            body,
            "body",
            &mut problems,
        );
        assert!(problems.is_empty(), "{path} {status}: {problems:?}\n{body}");
        checked += 1;
    };
    let ranges = [
        ("2026-03-10", "2026-03-11"),
        ("2026-03-01", "2026-03-16"),
        ("2026-03-15", "2026-03-16"),
    ];
    for (from, to) in ranges {
        let q = format!("dateFrom={from}&dateTo={to}");
        for (op, limit) in [
            ("visitors", 250),
            ("searches", 100),
            ("feedback", 100),
            ("feedback/by-page", 100),
            ("assistant", 1000),
            ("assistant/caller-stats", 0),
        ] {
            let mut uri = format!("/v1/analytics/alpha/{op}?{q}");
            if limit > 0 {
                uri += &format!("&limit={limit}");
            }
            let r = get(&app, &uri, Some(ADMIN_A)).await;
            assert_eq!(r.status.as_u16(), 200, "{uri}: {}", r.text());
            let body = r.json();
            check(&format!("{p}/{op}"), "200", &body);
            // The next page, when there is one, validates too.
            if let Some(c) = body.get("nextCursor").and_then(Value::as_str) {
                let r = get(&app, &format!("{uri}&cursor={c}"), Some(ADMIN_A)).await;
                assert_eq!(r.status.as_u16(), 200, "{}", r.text());
                check(&format!("{p}/{op}"), "200", &r.json());
            }
            if op == "assistant" {
                let first = body["conversations"][0]["id"].as_str().unwrap().to_string();
                let r = get(
                    &app,
                    &format!("/v1/analytics/alpha/assistant/threads/{first}"),
                    Some(ADMIN_A),
                )
                .await;
                assert_eq!(r.status.as_u16(), 200, "{}", r.text());
                check(
                    &format!("{p}/assistant/threads/{{threadId}}"),
                    "200",
                    &r.json(),
                );
            }
        }
    }
    // The errors the file documents, in its error shape.
    for (uri, op, status, message) in [
        (
            "/v1/analytics/alpha/searches?limit=101",
            "searches",
            "400",
            "limit must be a number between 1 and 100",
        ),
        (
            "/v1/analytics/alpha/searches?cursor=bogus",
            "searches",
            "400",
            "cursor is not valid for this query",
        ),
        (
            "/v1/analytics/alpha/feedback?status=open",
            "feedback",
            "400",
            "status \"open\" must be one of pending, in_progress, resolved, dismissed",
        ),
        (
            "/v1/analytics/alpha/feedback/by-page?source=email",
            "feedback/by-page",
            "400",
            "source must be one of code_snippet, contextual, agent, thumbs_only",
        ),
        (
            "/v1/analytics/alpha/assistant?cursor=not-a-ulid",
            "assistant",
            "400",
            "cursor must be a ULID",
        ),
        (
            "/v1/analytics/alpha/assistant?limit=1001",
            "assistant",
            "400",
            "limit must be a number between 1 and 1000",
        ),
        (
            "/v1/analytics/alpha/visitors?limit=2.5",
            "visitors",
            "400",
            "limit must be an integer between 1 and 250",
        ),
        (
            "/v1/analytics/alpha/assistant/caller-stats?dateFrom=soon",
            "assistant/caller-stats",
            "400",
            "dateFrom must be a date in ISO 8601 or YYYY-MM-DD format",
        ),
    ] {
        let r = get(&app, uri, Some(ADMIN_A)).await;
        assert_eq!(r.status.as_u16().to_string(), status, "{uri}");
        let body = r.json();
        check(&format!("{p}/{op}"), status, &body);
        assert_eq!(body["details"][0]["message"], message, "{uri}");
    }
    let r = get(
        &app,
        "/v1/analytics/alpha/assistant/threads/nope",
        Some(ADMIN_A),
    )
    .await;
    assert_eq!(
        (r.status.as_u16(), r.json()["error"].clone()),
        (400, json!("Invalid thread ID"))
    );
    let r = get(
        &app,
        "/v1/analytics/alpha/assistant/threads/01ARZ3NDEKTSV4RRFFQ69G5FAV",
        Some(ADMIN_A),
    )
    .await;
    assert_eq!(
        (r.status.as_u16(), r.json()["error"].clone()),
        (404, json!("Thread not found"))
    );
    check(
        &format!("{p}/assistant/threads/{{threadId}}"),
        "404",
        &r.json(),
    );
    // 18 first pages, 4 next pages, 3 threads, 8 errors, one 404.
    assert_eq!(checked, 18 + 4 + 3 + 8 + 1);
}

#[tokio::test]
async fn the_emulators_datasets_hang_together() {
    let (app, _emu) = app(small());
    let day = "dateFrom=2026-03-10&dateTo=2026-03-11";
    let truth = |d: &str| format!("/_emulator/truth/alpha/{d}?{day}");
    // Caller stats count the day's turns; the turns' share unanswered is about one in six.
    let turns = get(&app, &truth("assistant"), None).await.json();
    let turns = turns["conversations"].as_array().unwrap().clone();
    let callers = get(&app, &truth("caller_stats"), None).await.json();
    assert_eq!(callers["total"].as_u64().unwrap() as usize, turns.len());
    assert_eq!(
        callers["total"],
        json!(
            callers["web"].as_u64().unwrap()
                + callers["api"].as_u64().unwrap()
                + callers["other"].as_u64().unwrap()
        )
    );
    let unanswered = turns
        .iter()
        .filter(|t| t["resolutionStatus"] == "unanswered")
        .count();
    assert!(
        (turns.len() / 10..turns.len() / 4).contains(&unanswered),
        "{unanswered} of {}",
        turns.len()
    );
    // Searches: the hits sum to the day's total; every top clicked page is a page of the site.
    let views = get(&app, &format!("/_emulator/truth/alpha?{day}"), None)
        .await
        .json();
    let paths: std::collections::HashSet<&str> = views["views"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["path"].as_str().unwrap())
        .collect();
    let searches = get(&app, &truth("searches"), None).await.json();
    let hits: u64 = searches["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["hits"].as_u64().unwrap())
        .sum();
    assert_eq!(json!(hits), searches["totalSearches"]);
    for s in searches["searches"].as_array().unwrap() {
        if let Some(p) = s["topClickedPage"].as_str() {
            assert!(paths.contains(p) || p.starts_with('/'), "{p}");
        }
    }
    // Feedback by page counts the feedback entries of the day.
    let feedback = get(&app, &truth("feedback"), None).await.json();
    let by_page = get(&app, &truth("feedback_by_page"), None).await.json();
    let total: u64 = by_page["feedback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["total"].as_u64().unwrap())
        .sum();
    assert_eq!(
        total as usize,
        feedback["feedback"].as_array().unwrap().len()
    );
    // Visitors are fewer than views, and a week's are fewer than the sum of its days'.
    let visitors = get(&app, &truth("visitors"), None).await.json();
    assert!(
        visitors["totals"]["total"].as_u64().unwrap() < views["totals"]["total"].as_u64().unwrap()
    );
    let mut days_sum = 0;
    for d in 9..16 {
        let q = format!(
            "/_emulator/truth/alpha/visitors?dateFrom=2026-03-{d:02}&dateTo=2026-03-{:02}",
            d + 1
        );
        days_sum += get(&app, &q, None).await.json()["totals"]["human"]
            .as_u64()
            .unwrap();
    }
    let week = get(
        &app,
        "/_emulator/truth/alpha/visitors?dateFrom=2026-03-09&dateTo=2026-03-16",
        None,
    )
    .await
    .json();
    assert!(week["totals"]["human"].as_u64().unwrap() < days_sum);
}

#[tokio::test]
async fn every_dataset_exported_with_faults_on_equals_the_emulators_truth() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    data.faults = docpipe::emulator::data::Faults {
        seed: 11,
        error_rate: 0.08,
        cut_body_rate: 0.05,
        burst_429_every: 40,
        burst_429_len: 2,
        burst_retry_after_secs: 1,
        ..Default::default()
    };
    // The retries' waits move the client's clock, not the service's: the truth stays the
    // truth the export saw (today's searches grow, feedback statuses move on with time).
    let live = Live::start_frozen(data).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap();
    let targets = all_datasets(&live);
    let (from, to) = (day("2026-03-01"), day("2026-03-15"));
    let plan = exporter.plan(&targets, from, to).unwrap();
    // 15 days of each daily dataset, one span each for feedback and the assistant.
    let views = plan
        .due
        .iter()
        .filter(|d| d.dataset() == "page_views")
        .count();
    assert_eq!((views, plan.due.len() - views), (15, 4 * 15 + 2));
    let summary = exporter.run(&targets, &plan).await;
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    let counts = assert_equals_truth(
        &live.server.base_url(),
        &out,
        "alpha",
        from,
        to,
        to,
        chrono_tz::UTC,
    )
    .await;
    // Every dataset has rows, and the summary counts exactly what was written.
    assert!(counts.values().all(|&n| n > 0), "{counts:?}");
    assert_eq!(
        summary.other_rows() as usize,
        counts.values().sum::<usize>()
    );
    let stats = live.emu().stats();
    assert!(
        stats["searches"].by_status.keys().any(|s| *s >= 500),
        "faults hit searches: {:?}",
        stats["searches"].by_status
    );
    // Six hours later, a second run walks today and the spans again and probes the provisional
    // days, and changes nothing.
    let before = dataset(&out)
        .into_iter()
        .map(|(f, _)| f)
        .collect::<Vec<_>>();
    live.clock.advance(std::time::Duration::from_secs(6 * 3600));
    let plan = exporter.plan(&targets, from, to).unwrap();
    // Its plan expects what the most of the latest 7 windows of each dataset took.
    let conn = rusqlite::Connection::open(out.join("state.sqlite")).unwrap();
    let took = conn
        .query_row(
            "SELECT max(requests) FROM (SELECT requests FROM windows WHERE dataset = 'searches' AND project = 'alpha' ORDER BY day DESC LIMIT 7)",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as u64;
    assert!(took >= 2, "a day of alpha's searches spans pages: {took}");
    let searches = plan
        .due
        .iter()
        .find(|d| d.dataset() == "searches" && d.project == "alpha" && d.day == to)
        .unwrap();
    assert_eq!(searches.expected_requests, took);
    let summary = exporter.run(&targets, &plan).await;
    assert!(summary.failed.is_empty());
    assert_eq!(
        dataset(&out)
            .into_iter()
            .map(|(f, _)| f)
            .collect::<Vec<_>>(),
        before
    );
    assert_equals_truth(
        &live.server.base_url(),
        &out,
        "alpha",
        from,
        to,
        to,
        chrono_tz::UTC,
    )
    .await;
}

#[tokio::test]
async fn feedback_status_changes_and_late_turns_land_through_the_recheck_and_the_overlap() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap();
    let mut targets = all_datasets(&live);
    targets[0].datasets = vec!["feedback", "assistant"];
    targets[0].start = Some(day("2026-03-01"));
    let today = day("2026-03-15");
    let plan = exporter.plan(&targets, today, today).unwrap();
    let spans = |plan: &docpipe::export::Plan| {
        let mut spans = plan
            .due
            .iter()
            .filter(|d| d.dataset() != "page_views")
            .map(|d| (d.dataset(), d.day, d.to))
            .collect::<Vec<_>>();
        spans.sort();
        spans
    };
    assert_eq!(
        spans(&plan),
        [
            ("assistant", day("2026-03-01"), day("2026-03-16")),
            ("feedback", day("2026-03-01"), day("2026-03-16"))
        ]
    );
    assert!(exporter.run(&targets, &plan).await.failed.is_empty());
    // A day and a half later: statuses moved on, today's turns went on, yesterday's got categories.
    live.clock
        .advance(std::time::Duration::from_secs(36 * 3600));
    let today = day("2026-03-17");
    let plan = exporter.plan(&targets, today, today).unwrap();
    // Feedback goes back 14 days from the last day fetched, the assistant 1.
    assert_eq!(
        spans(&plan),
        [
            ("assistant", day("2026-03-15"), day("2026-03-18")),
            ("feedback", day("2026-03-02"), day("2026-03-18"))
        ]
    );
    assert!(exporter.run(&targets, &plan).await.failed.is_empty());
    // Over everything fetched, the tables are the truth as it stands now: no duplicates, and
    // the changed statuses and categories are the new ones.
    let feedback = truth_of(
        &live.server.base_url(),
        "alpha",
        "feedback",
        day("2026-03-02"),
        day("2026-03-18"),
    )
    .await;
    let mut got = Vec::new();
    for (d, rows) in rows_of(&out, "feedback", "alpha") {
        if d >= day("2026-03-02") {
            got.extend(rows.iter().map(|r| as_service(&crate::truth::FEEDBACK, r)));
        }
    }
    let want: Vec<String> = feedback["feedback"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["createdAt"].is_null())
        .map(|r| truth_row(&crate::truth::FEEDBACK, r))
        .collect();
    assert_eq!(sorted(got), sorted(want));
    let turns = truth_of(
        &live.server.base_url(),
        "alpha",
        "assistant",
        day("2026-03-15"),
        day("2026-03-18"),
    )
    .await;
    let want = turns["conversations"].as_array().unwrap();
    let got: usize = rows_of(&out, "assistant_turns", "alpha")
        .range(day("2026-03-15")..)
        .map(|(_, r)| r.len())
        .sum();
    assert_eq!(got, want.len());
    let categorized = rows_of(&out, "assistant_turns", "alpha")[&day("2026-03-15")]
        .iter()
        .filter(|r| !r["query_category"].is_null())
        .count();
    assert_eq!(
        categorized,
        rows_of(&out, "assistant_turns", "alpha")[&day("2026-03-15")].len()
    );
    // The full re-check comes back after `full` (6 h); until then an hour later walks today
    // only. A config asking for it once a day gets it 24 hours later.
    let sorted_spans = |plan: &docpipe::export::Plan| {
        let mut s = spans(plan);
        s.sort();
        s
    };
    let hour = std::time::Duration::from_secs(3600);
    live.clock.advance(hour * 5);
    let today = day("2026-03-17");
    let only_today = [
        ("assistant", day("2026-03-17"), day("2026-03-18")),
        ("feedback", day("2026-03-17"), day("2026-03-18")),
    ];
    assert_eq!(
        sorted_spans(&exporter.plan(&targets, today, today).unwrap()),
        only_today
    );
    live.clock.advance(hour);
    assert_eq!(
        sorted_spans(&exporter.plan(&targets, today, today).unwrap()),
        [
            ("assistant", day("2026-03-17"), day("2026-03-18")),
            ("feedback", day("2026-03-04"), day("2026-03-18"))
        ]
    );
    let daily = docpipe::planner::Freshness {
        by_dataset: vec![(
            "feedback",
            docpipe::planner::Policy {
                full: chrono::Duration::hours(24),
                ..Default::default()
            },
        )],
        ..Default::default()
    };
    // One exporter holds an output folder at a time.
    drop(exporter);
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap()
        .with_freshness(daily);
    assert_eq!(
        sorted_spans(&exporter.plan(&targets, today, today).unwrap()),
        only_today
    );
    // 23 hours after the full re-check (23:00), today still; at midnight it is due again.
    live.clock.advance(hour * 17);
    assert_eq!(
        sorted_spans(&exporter.plan(&targets, today, today).unwrap()),
        only_today
    );
    live.clock.advance(hour);
    let today = day("2026-03-18");
    assert_eq!(
        sorted_spans(&exporter.plan(&targets, today, today).unwrap()),
        [
            ("assistant", day("2026-03-17"), day("2026-03-19")),
            ("feedback", day("2026-03-04"), day("2026-03-19"))
        ]
    );
}

#[tokio::test]
async fn threads_of_unanswered_turns_are_fetched_within_the_cap_and_never_twice() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap()
        .with_shaped(docpipe::export::ShapedSettings {
            threads_per_run: 5,
            ..Default::default()
        });
    let mut targets = all_datasets(&live);
    targets[0].datasets = vec!["assistant", "threads"];
    let (from, to) = (day("2026-03-10"), day("2026-03-12"));
    let plan = exporter.plan(&targets, from, to).unwrap();
    let summary = exporter.run(&targets, &plan).await;
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    let threads: Vec<_> = summary
        .others
        .iter()
        .filter(|r| r.dataset == "threads")
        .collect();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].requests, 5);
    assert_eq!(
        live.emu().requests(docpipe::emulator::Op::Thread, "alpha"),
        5
    );
    // Each fetched thread's messages are the truth's, in the partition of the day it began.
    let mut ids = std::collections::BTreeSet::new();
    let mut messages = 0;
    for (d, rows) in rows_of(&out, "assistant_messages", "alpha") {
        for r in &rows {
            assert_eq!(
                &r["thread_created_at"].as_str().unwrap()[..10],
                d.to_string()
            );
            ids.insert(r["thread_id"].as_str().unwrap().to_string());
        }
        messages += rows.len();
    }
    assert_eq!(ids.len(), 5);
    let mut want = 0;
    for id in &ids {
        let url = format!(
            "{}/_emulator/truth/alpha/threads?thread={id}",
            live.server.base_url()
        );
        let t: Value = crate::common::http_get(url)
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        want += t["messages"].as_array().unwrap().len();
        // Only threads with an unanswered turn.
        let turns = truth_of(
            &live.server.base_url(),
            "alpha",
            "assistant",
            day("2026-03-09"),
            day("2026-03-13"),
        )
        .await;
        assert!(
            turns["conversations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["id"] == json!(id) && c["resolutionStatus"] == "unanswered")
        );
    }
    assert_eq!(messages, want);
    assert_eq!(threads[0].rows as usize, want);
    // The next run takes the next five, not the same.
    let plan = exporter.plan(&targets, from, to).unwrap();
    exporter.run(&targets, &plan).await;
    assert_eq!(
        live.emu().requests(docpipe::emulator::Op::Thread, "alpha"),
        10
    );
    let after: std::collections::BTreeSet<String> = rows_of(&out, "assistant_messages", "alpha")
        .values()
        .flatten()
        .map(|r| r["thread_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(after.len(), 10);
}

#[tokio::test]
async fn a_provisional_day_of_every_daily_dataset_is_probed_with_one_request_and_left_as_it_is() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    // The service's data does not move: every probe finds what was stored.
    let live = Live::start_frozen(data).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap();
    let targets = all_datasets(&live);
    let (from, to) = (day("2026-03-13"), day("2026-03-14"));
    let first = exporter
        .run(&targets, &exporter.plan(&targets, from, to).unwrap())
        .await;
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    // The daily tables' files, byte for byte.
    let daily = [
        "page_views",
        "site_totals",
        "visitors",
        "site_visitors",
        "searches",
        "search_totals",
        "feedback_by_page",
        "assistant_callers",
    ];
    let files = || -> Vec<(std::path::PathBuf, Vec<u8>)> {
        files_below(&out)
            .into_iter()
            .filter(|f| daily.iter().any(|t| f.starts_with(t)))
            .map(|f| (f.clone(), std::fs::read(out.join(&f)).unwrap()))
            .collect()
    };
    let before = files();
    assert_eq!(before.len(), 8 * 2, "8 tables, 2 days of alpha");
    // Six hours later both days (1 and 2 days old) are due: each daily dataset's day is probed.
    live.clock.advance(std::time::Duration::from_secs(6 * 3600));
    let plan = exporter.plan(&targets, from, to).unwrap();
    let probed: Vec<&str> = plan
        .due
        .iter()
        .filter(|d| d.probe && d.dataset() != "page_views")
        .map(|d| d.dataset())
        .collect();
    // 2 days of visitors, searches, feedback by page, caller stats.
    assert_eq!(probed.len(), 2 * 4, "{probed:?}");
    assert!(
        plan.due
            .iter()
            .filter(|d| d.probe)
            .all(|d| d.expected_requests == 1)
    );
    let again = exporter.run(&targets, &plan).await;
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    for name in [
        "page_views",
        "visitors",
        "searches",
        "feedback_by_page",
        "caller_stats",
    ] {
        assert_eq!(
            again.spent.get(&(name, "probe")).copied(),
            Some(2),
            "{name}: one request a day"
        );
        assert_eq!(
            again.checked.iter().filter(|c| c.dataset == name).count(),
            2,
            "{name}"
        );
    }
    // Nothing of those days was written again (the spans, walked, rewrite theirs).
    assert!(files() == before, "a day probed unchanged is not written");
}

/// Each column's `Need` as the OpenAPI file's row schema says: a field every alternative of the
/// schema requires is `Required` (or `Nullable` when its type allows null); one some leave out
/// is `Optional` (null then) or has a documented default. Keeps the tolerant reader in step
/// with the file (a newer version that drops a field from `required` fails here first).
#[test]
fn every_columns_need_matches_the_openapi_files_required_lists() {
    use docpipe::dataset::analytics::*;
    use docpipe::dataset::shape::{Need, RowsAt, Shape};
    let doc = openapi();
    let shapes: [&Shape; 7] = [
        &VISITORS,
        &SEARCHES,
        &FEEDBACK,
        &FEEDBACK_BY_PAGE,
        &ASSISTANT,
        &CALLER_STATS,
        &THREADS,
    ];
    let mut problems = Vec::new();
    for shape in shapes {
        let path = shape
            .endpoint
            .replace("{project}", "{projectId}")
            .replace("{thread}", "{threadId}");
        let body = resolve(&doc, response_schema(&doc, &path, "200"));
        let row = match shape.rows {
            RowsAt::Array(field) => resolve(&doc, &body["properties"][field]["items"]),
            RowsAt::Body => body,
        };
        let alternatives: Vec<&Value> = match row.get("anyOf").and_then(Value::as_array) {
            Some(any) => any.iter().map(|a| resolve(&doc, a)).collect(),
            None => vec![row],
        };
        for c in shape.columns {
            let required = alternatives.iter().all(|a| {
                a["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|f| f == c.field))
            });
            let nullable = alternatives.iter().any(|a| {
                let t = &a["properties"][c.field]["type"];
                t == "null"
                    || t.as_array()
                        .is_some_and(|ts| ts.iter().any(|x| x == "null"))
            });
            let ok = match c.need {
                Need::Required => required && !nullable,
                Need::Nullable => required && nullable,
                Need::Optional | Need::Default(_) => !required,
            };
            if !ok {
                problems.push(format!(
                    "{}.{}: {:?}, but the file says required {required}, nullable {nullable}",
                    shape.name, c.field, c.need
                ));
            }
        }
    }
    assert_eq!(problems, Vec::<String>::new());
}

/// Every dataset of alpha exported as days of `tz` over `from..=to`, compared day by day with
/// the emulator's truth of each local day's instants.
async fn local_days_equal_the_truth(tz: chrono_tz::Tz, from: &str, to: &str) {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start_frozen(data).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = docpipe::export::Exporter::open_in(&out, live.clock.clone(), 3, tz)
        .await
        .unwrap();
    let targets = all_datasets(&live);
    let (from, to) = (day(from), day(to));
    let plan = exporter.plan(&targets, from, to).unwrap();
    let summary = exporter.run(&targets, &plan).await;
    assert!(summary.failed.is_empty(), "{tz}: {:?}", summary.failed);
    let base = live.server.base_url();
    let counts = assert_equals_truth(&base, &out, "alpha", from, to, to, tz).await;
    assert!(counts.values().all(|&n| n > 0), "{tz}: {counts:?}");
    // A local day's visitors and searches are neither the UTC day's of its date nor of the
    // next date (what a service counting whole UTC days would give west or east of UTC).
    let visitors = rows_of(&out, "site_visitors", "alpha");
    let searches = rows_of(&out, "search_totals", "alpha");
    let next = from.succ_opt().unwrap();
    for utc in [from, next] {
        let v = truth_of(&base, "alpha", "visitors", utc, utc.succ_opt().unwrap()).await;
        assert_ne!(
            visitors[&from][0]["human"], v["totals"]["human"],
            "{tz} {from}"
        );
        let s = truth_of(&base, "alpha", "searches", utc, utc.succ_opt().unwrap()).await;
        assert_ne!(
            searches[&from][0]["total_searches"], s["totalSearches"],
            "{tz} {from}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dataset_as_days_west_of_utc_across_a_clock_change_equals_the_truth() {
    // New York's clocks go forward on 2026-03-08: a day of 23 hours.
    local_days_equal_the_truth(chrono_tz::America::New_York, "2026-03-06", "2026-03-09").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dataset_as_days_east_of_utc_equals_the_truth() {
    local_days_equal_the_truth(chrono_tz::Asia::Tokyo, "2026-03-09", "2026-03-11").await;
}

#[tokio::test]
async fn a_span_begun_by_a_later_backfill_has_its_hole_filled_from_the_first_day() {
    let live = Live::start_frozen(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap();
    let mut t = targets(&live, open_limits());
    t.truncate(1);
    t[0].datasets = vec!["feedback", "assistant"];
    // A backfill of the last 6 days only.
    t[0].start = None;
    let plan = exporter
        .plan(&t, day("2026-03-10"), day("2026-03-15"))
        .unwrap();
    assert!(exporter.run(&t, &plan).await.failed.is_empty());
    // Then the export from the project's first day: the days before the backfill are a hole,
    // walked first, as a backfill.
    t[0].start = Some(day("2026-03-01"));
    let plan = exporter
        .plan(&t, day("2026-03-01"), day("2026-03-15"))
        .unwrap();
    let holes: Vec<_> = plan
        .due
        .iter()
        .map(|d| (d.dataset(), d.day, d.to))
        .collect();
    assert_eq!(
        holes,
        [
            ("feedback", day("2026-03-01"), day("2026-03-10")),
            ("assistant", day("2026-03-01"), day("2026-03-10"))
        ]
    );
    let s = exporter.run(&t, &plan).await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    // Every day from the first is covered now, and written.
    let conn = rusqlite::Connection::open(out.join("state.sqlite")).unwrap();
    for dataset in ["feedback", "assistant"] {
        let days: i64 = conn
            .query_row(
                "SELECT COUNT(DISTINCT day) FROM windows WHERE dataset = ?1 AND project = 'alpha' AND day >= '2026-03-01'",
                [dataset],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(days, 15, "{dataset}");
    }
    assert!(out.join("feedback/project=alpha/date=2026-03-02").is_dir());
    assert!(
        out.join("assistant_turns/project=alpha/date=2026-03-02")
            .is_dir()
    );
    // And nothing is a hole any more: the next plan walks the recent days only.
    let plan = exporter
        .plan(&t, day("2026-03-01"), day("2026-03-15"))
        .unwrap();
    assert!(
        plan.due.iter().all(|d| d.day >= day("2026-03-14")),
        "{:?}",
        plan.due
            .iter()
            .map(|d| (d.dataset(), d.day))
            .collect::<Vec<_>>()
    );
}
