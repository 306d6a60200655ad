//! Handler tests of the emulator: every operation, every documented error, every fault.

use crate::common::*;
use axum::http::StatusCode;
use docpipe::emulator::Op;
use docpipe::emulator::data::{DataFile, RowOrder};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;

const VIEWS: &str = "/v1/analytics/alpha/views?dateFrom=2026-03-10&dateTo=2026-03-11";

fn sums(rows: &[Value]) -> (u64, u64, u64) {
    rows.iter().fold((0, 0, 0), |(h, a, t), r| {
        (
            h + r["human"].as_u64().unwrap(),
            a + r["ai"].as_u64().unwrap(),
            t + r["total"].as_u64().unwrap(),
        )
    })
}

#[tokio::test(start_paused = true)]
async fn walking_all_offsets_gives_rows_that_sum_to_totals_for_any_limit() {
    let mut data = small();
    data.limits.analytics_per_hour = 10_000;
    let (app, emu) = app(data);
    let truth = emu
        .truth("alpha", day("2026-03-10"), day("2026-03-11"))
        .unwrap();
    assert!(
        truth.len() > 500,
        "a day of alpha spans several pages of 250: {}",
        truth.len()
    );
    for limit in [1usize, 7, 50, 249, 250] {
        let (mut offset, mut rows) = (0usize, Vec::new());
        let totals = loop {
            let r = get(
                &app,
                &format!("{VIEWS}&limit={limit}&offset={offset}"),
                Some(ADMIN_A),
            )
            .await;
            assert_eq!(r.status, StatusCode::OK);
            let body = r.json();
            let page = body["views"].as_array().unwrap().clone();
            let has_more = body["hasMore"].as_bool().unwrap();
            assert_eq!(
                has_more,
                offset + limit < truth.len(),
                "hasMore is exact at offset {offset}"
            );
            rows.extend(page);
            if !has_more {
                break body["totals"].clone();
            }
            offset += limit;
        };
        assert_eq!(rows.len(), truth.len(), "limit {limit}");
        let paths: HashSet<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
        assert_eq!(paths.len(), rows.len(), "no path twice with limit {limit}");
        let (h, a, t) = sums(&rows);
        assert_eq!(
            (h, a, t),
            (
                totals["human"].as_u64().unwrap(),
                totals["ai"].as_u64().unwrap(),
                totals["total"].as_u64().unwrap()
            )
        );
        assert_eq!(h + a, t);
        assert!(
            rows.iter()
                .all(|r| r["human"].as_u64().unwrap() + r["ai"].as_u64().unwrap()
                    == r["total"].as_u64().unwrap())
        );
    }
}

#[tokio::test(start_paused = true)]
async fn defaults_are_limit_50_offset_0_and_ranges_are_exclusive_of_date_to() {
    let (app, emu) = app(small());
    let r = get(
        &app,
        "/v1/analytics/beta/views?dateFrom=2026-03-10&dateTo=2026-03-12",
        Some(ADMIN_A),
    )
    .await;
    let body = r.json();
    let truth = emu
        .truth("beta", day("2026-03-10"), day("2026-03-12"))
        .unwrap();
    assert_eq!(body["views"].as_array().unwrap().len(), truth.len().min(50));
    let two_days = body["totals"]["total"].as_u64().unwrap();
    let d1 = get(
        &app,
        "/v1/analytics/beta/views?dateFrom=2026-03-10&dateTo=2026-03-11",
        Some(ADMIN_A),
    )
    .await
    .json();
    let d2 = get(
        &app,
        "/v1/analytics/beta/views?dateFrom=2026-03-11&dateTo=2026-03-12",
        Some(ADMIN_A),
    )
    .await
    .json();
    assert_eq!(
        two_days,
        d1["totals"]["total"].as_u64().unwrap() + d2["totals"]["total"].as_u64().unwrap()
    );
    // ISO 8601 date-times are accepted as bounds.
    let iso = get(
        &app,
        "/v1/analytics/beta/views?dateFrom=2026-03-10T00:00:00Z&dateTo=2026-03-11T00:00:00Z",
        Some(ADMIN_A),
    )
    .await
    .json();
    assert_eq!(iso["totals"], d1["totals"]);
    // Days after today have no views.
    let future = get(
        &app,
        "/v1/analytics/beta/views?dateFrom=2026-03-16&dateTo=2026-03-20",
        Some(ADMIN_A),
    )
    .await
    .json();
    assert_eq!(
        future,
        json!({"totals": {"human": 0, "ai": 0, "total": 0}, "views": [], "hasMore": false})
    );
}

#[tokio::test(start_paused = true)]
async fn keys_are_checked_as_the_service_does() {
    let (app, _) = app(small());
    let cases: [(Option<&str>, StatusCode, &str); 6] = [
        (
            None,
            StatusCode::UNAUTHORIZED,
            "Missing Authorization header",
        ),
        (
            Some("mint_not_a_key"),
            StatusCode::UNAUTHORIZED,
            "Invalid API key",
        ),
        (
            Some("mint_test_expired_a"),
            StatusCode::UNAUTHORIZED,
            "API key has expired",
        ),
        (
            Some(ASSIST_A),
            StatusCode::FORBIDDEN,
            "This API key cannot be used for this endpoint",
        ),
        (
            Some("mint_us_test_user_a"),
            StatusCode::FORBIDDEN,
            "This API key cannot be used for this endpoint",
        ),
        (
            Some(ADMIN_B),
            StatusCode::FORBIDDEN,
            "This API key does not have access to this project",
        ),
    ];
    for (key, status, message) in cases {
        let r = get(&app, VIEWS, key).await;
        assert_eq!(
            (r.status, r.json()),
            (status, json!({ "error": message })),
            "key {key:?}"
        );
    }
    // A read-only admin key reads but cannot send a follow-up; the assistant takes only dsc keys.
    assert_eq!(
        get(&app, VIEWS, Some("mint_test_readonly_a")).await.status,
        StatusCode::OK
    );
    let r = post(
        &app,
        "/v2/agent/alpha/job/job_ok/message",
        Some("mint_test_readonly_a"),
        r#"{"prompt":"x"}"#,
    )
    .await;
    assert_eq!(
        (r.status, r.json()),
        (
            StatusCode::FORBIDDEN,
            json!({"error": "Read-only API key cannot be used for this request"})
        )
    );
    let r = post(
        &app,
        "/discovery/v1/assistant/alpha-docs/message",
        Some(ADMIN_A),
        r#"{"fp":"a","messages":[]}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = get(&app, "/v1/analytics/nope/views", Some(ADMIN_A)).await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::NOT_FOUND, json!({"error": "Project not found"}))
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_query_parameters_get_400_with_details() {
    let (app, _) = app(small());
    let cases = [
        ("limit=0", "limit must be an integer between 1 and 250"),
        ("limit=251", "limit must be an integer between 1 and 250"),
        ("limit=ten", "limit must be an integer between 1 and 250"),
        ("offset=-1", "offset must be an integer of at least 0"),
        (
            "dateFrom=yesterday",
            "dateFrom must be a date in ISO 8601 or YYYY-MM-DD format",
        ),
        (
            "dateTo=2026-13-01",
            "dateTo must be a date in ISO 8601 or YYYY-MM-DD format",
        ),
        (
            "dateFrom=2026-03-05&dateTo=2026-03-01",
            "dateFrom must not be after dateTo",
        ),
    ];
    for (query, message) in cases {
        let r = get(
            &app,
            &format!("/v1/analytics/alpha/views?{query}"),
            Some(ADMIN_A),
        )
        .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(
            r.json(),
            json!({"error": "Invalid query parameters", "details": [{"message": message}]}),
            "{query}"
        );
    }
    let r = get(
        &app,
        "/v1/analytics/alpha/views?limit=0&offset=-2",
        Some(ADMIN_A),
    )
    .await;
    assert_eq!(
        r.json()["details"].as_array().unwrap().len(),
        2,
        "every problem is reported"
    );
}

#[tokio::test(start_paused = true)]
async fn analytics_limit_is_per_organization_shared_by_projects_and_slides() {
    let mut data = small();
    data.limits.analytics_per_hour = 10;
    let (app, emu) = app(data);
    for i in 0..10 {
        let project = if i % 2 == 0 { "alpha" } else { "beta" };
        let r = get(
            &app,
            &format!("/v1/analytics/{project}/views"),
            Some(ADMIN_A),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "request {i}");
        tokio::time::advance(Duration::from_secs(60)).await;
    }
    let r = get(&app, "/v1/analytics/beta/views", Some(ADMIN_A)).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        r.json(),
        json!({"error": "Rate limit exceeded for analytics"})
    );
    // The first request was sent 10 minutes ago: it leaves the window in 50 minutes.
    assert_eq!(r.headers["retry-after"], "3000");
    // Another organization has its own budget.
    assert_eq!(
        get(&app, "/v1/analytics/gamma/views", Some(ADMIN_B))
            .await
            .status,
        StatusCode::OK
    );
    tokio::time::advance(Duration::from_secs(3000)).await;
    assert_eq!(
        get(&app, "/v1/analytics/alpha/views", Some(ADMIN_A))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        get(&app, "/v1/analytics/alpha/views", Some(ADMIN_A))
            .await
            .status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let stats = emu.stats();
    assert_eq!(stats["views"].requests, 14);
    assert_eq!(stats["views"].by_status[&429], 2);
    assert_eq!(emu.requests(Op::Views, "beta"), 6);
}

#[tokio::test(start_paused = true)]
async fn jobs_are_created_followed_up_and_end_after_their_run_time() {
    let (app, emu) = app(small());
    let r = post(
        &app,
        "/v2/agent/alpha/job",
        Some(ADMIN_A),
        r#"{"prompt":"write a page"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let job = r.json();
    assert_eq!(job["status"], "active");
    assert_eq!(job["prLink"], Value::Null);
    assert_eq!(
        job["source"],
        json!({"repository": "org-a/docs", "ref": "main"})
    );
    let id = job["id"].as_str().unwrap().to_string();
    tokio::time::advance(Duration::from_secs(4)).await;
    assert_eq!(
        get(&app, &format!("/v2/agent/alpha/job/{id}"), Some(ADMIN_A))
            .await
            .json()["status"],
        "active"
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    let done = get(&app, &format!("/v2/agent/alpha/job/{id}"), Some(ADMIN_A))
        .await
        .json();
    assert_eq!(done["status"], "completed");
    assert!(
        done["prLink"]
            .as_str()
            .unwrap()
            .starts_with("https://github.com/org-a/docs/pull/")
    );
    // A follow-up makes the finished job active again, and it ends again.
    let r = post(
        &app,
        &format!("/v2/agent/alpha/job/{id}/message"),
        Some(ADMIN_A),
        r#"{"prompt":"also fix links"}"#,
    )
    .await;
    assert_eq!(
        (
            r.status,
            r.json()["status"].clone(),
            r.json()["prLink"].clone()
        ),
        (StatusCode::OK, json!("active"), Value::Null)
    );
    assert_eq!(
        emu.job_prompts("alpha", &id).unwrap(),
        ["write a page", "also fix links"]
    );
    // Seeded jobs end as their data says.
    for (project, job, status, pr_null) in [
        ("alpha", "job_nochange", "completed", true),
        ("beta", "job_fail", "failed", true),
    ] {
        post(
            &app,
            &format!("/v2/agent/{project}/job/{job}/message"),
            Some(ADMIN_A),
            r#"{"prompt":"go"}"#,
        )
        .await;
        tokio::time::advance(Duration::from_secs(5)).await;
        let j = get(
            &app,
            &format!("/v2/agent/{project}/job/{job}"),
            Some(ADMIN_A),
        )
        .await
        .json();
        assert_eq!(
            (j["status"].as_str().unwrap(), j["prLink"].is_null()),
            (status, pr_null),
            "{job}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn job_errors_have_the_documented_status_and_body() {
    let (app, _) = app(small());
    let msg = "/v2/agent/alpha/job/job_ok/message";
    let cases = [
        ("{}", "prompt is required"),
        (r#"{"prompt":""}"#, "prompt must be at least 1 character"),
        (r#"{"prompt":5}"#, "prompt must be a string"),
    ];
    for (body, message) in cases {
        let r = post(&app, msg, Some(ADMIN_A), body).await;
        assert_eq!(
            (r.status, r.json()),
            (StatusCode::BAD_REQUEST, json!({ "error": message })),
            "{body}"
        );
    }
    let r = post(&app, msg, Some(ADMIN_A), "{not json").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid JSON body: ")
    );
    let r = get(&app, "/v2/agent/alpha/job/job_nope", Some(ADMIN_A)).await;
    assert_eq!(
        (r.status, r.json()),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "Job job_nope not found"})
        )
    );
    let r = post(
        &app,
        "/v2/agent/alpha/job/job_nope/message",
        Some(ADMIN_A),
        r#"{"prompt":"x"}"#,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = post(
        &app,
        "/v2/agent/alpha/job/job_archived/message",
        Some(ADMIN_A),
        r#"{"prompt":"x"}"#,
    )
    .await;
    assert_eq!(
        (r.status, r.json()),
        (
            StatusCode::BAD_REQUEST,
            json!({"error": "Job job_archived is archived"})
        )
    );
    assert_eq!(
        get(&app, "/v2/agent/alpha/job/job_archived", Some(ADMIN_A))
            .await
            .json()["status"],
        "archived"
    );
}

#[tokio::test(start_paused = true)]
async fn follow_ups_and_creations_share_a_per_project_hourly_limit() {
    let mut data = small();
    data.limits.agent_per_hour = 3;
    let (app, _) = app(data);
    post(
        &app,
        "/v2/agent/alpha/job",
        Some(ADMIN_A),
        r#"{"prompt":"a"}"#,
    )
    .await;
    post(
        &app,
        "/v2/agent/alpha/job/job_ok/message",
        Some(ADMIN_A),
        r#"{"prompt":"b"}"#,
    )
    .await;
    post(
        &app,
        "/v2/agent/alpha/job/job_ok/message",
        Some(ADMIN_A),
        r#"{"prompt":"c"}"#,
    )
    .await;
    let r = post(
        &app,
        "/v2/agent/alpha/job",
        Some(ADMIN_A),
        r#"{"prompt":"d"}"#,
    )
    .await;
    assert_eq!(
        (r.status, r.json()),
        (
            StatusCode::TOO_MANY_REQUESTS,
            json!({"error": "Rate limit exceeded for agent jobs"})
        )
    );
    assert_eq!(r.headers["retry-after"], "3600");
    // Reading a job is not limited; another project has its own budget.
    assert_eq!(
        get(&app, "/v2/agent/alpha/job/job_ok", Some(ADMIN_A))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        post(
            &app,
            "/v2/agent/beta/job/job_fail/message",
            Some(ADMIN_A),
            r#"{"prompt":"e"}"#
        )
        .await
        .status,
        StatusCode::OK
    );
}

fn ask_body(question: &str, extra: Value) -> String {
    let mut body = json!({
        "fp": "anonymous",
        "messages": [{"id": "m1", "role": "user", "content": question, "parts": [{"type": "text", "text": question}]}],
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body.to_string()
}

const ASK: &str = "/discovery/v1/assistant/alpha-docs/message";

#[tokio::test(start_paused = true)]
async fn assistant_streams_a_v4_data_stream_and_keeps_threads() {
    let (app, _) = app(small());
    let r = post(
        &app,
        ASK,
        Some(ASSIST_A),
        &ask_body("How do webhooks work?", json!({"retrievalPageSize": 3})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(r.headers["x-vercel-ai-data-stream"], "v1");
    let thread = r.headers["x-thread-id"].to_str().unwrap().to_string();
    let key = r.headers["x-thread-key"].to_str().unwrap().to_string();
    let text = r.text();
    let codes: Vec<&str> = text.lines().map(|l| l.split_once(':').unwrap().0).collect();
    assert_eq!(&codes[..5], ["f", "0", "9", "a", "e"]);
    assert_eq!(codes[5], "f");
    assert_eq!(codes[codes.len() - 2..], ["e", "d"]);
    let last: Value =
        serde_json::from_str(text.lines().last().unwrap().strip_prefix("d:").unwrap()).unwrap();
    assert_eq!(last["finishReason"], "stop");
    assert_eq!(last["threadId"], thread.as_str());
    let result: Value =
        serde_json::from_str(text.lines().nth(3).unwrap().strip_prefix("a:").unwrap()).unwrap();
    let results = result["result"].as_array().unwrap();
    assert_eq!(results.len(), 3, "retrievalPageSize results");
    assert!(
        results
            .iter()
            .all(|r| r["path"].as_str().unwrap().contains("webhooks"))
    );
    let answer: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("0:"))
        .map(|s| serde_json::from_str::<String>(s).unwrap())
        .collect();
    assert!(
        answer.contains(results[0]["path"].as_str().unwrap()),
        "{answer}"
    );
    // Usage of the finish part is the sum of the steps'.
    let steps: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("e:"))
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
    let prompt: u64 = steps
        .iter()
        .map(|s| s["usage"]["promptTokens"].as_u64().unwrap())
        .sum();
    assert_eq!(last["usage"]["promptTokens"].as_u64().unwrap(), prompt);
    // Continuing the thread needs its key; a new key is not sent again.
    let follow = ask_body(
        "and retries?",
        json!({"threadId": thread, "threadKey": key}),
    );
    let r = post(&app, ASK, Some(ASSIST_A), &follow).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["x-thread-id"].to_str().unwrap(), thread);
    assert!(r.headers.get("x-thread-key").is_none());
    let r = post(
        &app,
        ASK,
        Some(ASSIST_A),
        &ask_body("x", json!({"threadId": thread})),
    )
    .await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::NOT_FOUND, json!({"error": "Thread not found"}))
    );
}

#[tokio::test(start_paused = true)]
async fn assistant_bodies_are_validated() {
    let (app, _) = app(small());
    let long_path = "/".repeat(201);
    let cases = [
        (r#"{"messages":[]}"#.to_string(), "fp is required"),
        (r#"{"fp":"a"}"#.to_string(), "messages is required"),
        (
            r#"{"fp":"a","messages":{}}"#.to_string(),
            "messages must be an array",
        ),
        (
            ask_body("q", json!({"currentPath": long_path})),
            "currentPath must be at most 200 characters",
        ),
        (
            ask_body("q", json!({"retrievalPageSize": 0})),
            "retrievalPageSize must be a positive number",
        ),
        (
            ask_body("q", json!({"retrievalPageSize": "5"})),
            "retrievalPageSize must be a positive number",
        ),
        (
            r#"{"fp":"a","messages":[]}"#.to_string(),
            "messages must contain a user message with text",
        ),
    ];
    for (body, message) in cases {
        let r = post(&app, ASK, Some(ASSIST_A), &body).await;
        assert_eq!(
            (r.status, r.json()),
            (StatusCode::BAD_REQUEST, json!({ "error": message })),
            "{body}"
        );
    }
    let r = post(
        &app,
        "/discovery/v1/assistant/nope/message",
        Some(ASSIST_A),
        &ask_body("q", json!({})),
    )
    .await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::NOT_FOUND, json!({"error": "Domain not found"}))
    );
    let ok = ask_body(
        "q",
        json!({"currentPath": "/".repeat(200), "retrievalPageSize": 2.5}),
    );
    assert_eq!(
        post(&app, ASK, Some(ASSIST_A), &ok).await.status,
        StatusCode::OK
    );
}

fn with_faults(f: impl FnOnce(&mut DataFile)) -> DataFile {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    f(&mut data);
    data
}

#[tokio::test(start_paused = true)]
async fn error_rate_one_turns_every_response_into_a_5xx_without_side_effects() {
    let (app, emu) = app(with_faults(|d| d.faults.error_rate = 1.0));
    let mut seen = HashSet::new();
    for _ in 0..30 {
        let r = get(&app, VIEWS, Some(ADMIN_A)).await;
        assert_eq!(r.json(), json!({"error": "Internal server error"}));
        seen.insert(r.status.as_u16());
    }
    assert_eq!(seen, HashSet::from([500, 502, 503]));
    post(
        &app,
        "/v2/agent/alpha/job/job_ok/message",
        Some(ADMIN_A),
        r#"{"prompt":"x"}"#,
    )
    .await;
    assert_eq!(
        emu.job_prompts("alpha", "job_ok").unwrap().len(),
        0,
        "a 5xx fault never reaches the handler"
    );
}

#[tokio::test(start_paused = true)]
async fn error_rate_is_a_fraction() {
    let (app, _) = app(with_faults(|d| d.faults.error_rate = 0.2));
    let mut errors = 0;
    for _ in 0..500 {
        if get(&app, VIEWS, Some(ADMIN_A))
            .await
            .status
            .is_server_error()
        {
            errors += 1;
        }
    }
    assert!((70..=130).contains(&errors), "about 20% of 500: {errors}");
}

#[tokio::test(start_paused = true)]
async fn burst_429s_come_in_runs_with_retry_after() {
    let (app, _) = app(with_faults(|d| {
        d.faults.burst_429_every = 5;
        d.faults.burst_429_len = 2;
        d.faults.burst_retry_after_secs = 7;
    }));
    let mut pattern = String::new();
    for _ in 0..10 {
        let r = get(&app, VIEWS, Some(ADMIN_A)).await;
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(r.headers["retry-after"], "7");
            pattern.push('x');
        } else {
            pattern.push('.');
        }
    }
    assert_eq!(pattern, "...xx...xx");
}

#[tokio::test(start_paused = true)]
async fn cut_bodies_fail_in_transit_and_dropped_connections_have_no_body() {
    // A cut body: the status and the whole body's length arrive, then half of it, then the
    // connection fails (as a client sees a body cut in transit).
    let (app, _) = app(with_faults(|d| d.faults.cut_body_rate = 1.0));
    let r = get(&app, VIEWS, Some(ADMIN_A)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.headers["content-length"]
            .to_str()
            .unwrap()
            .parse::<usize>()
            .unwrap()
            > 100
    );
    assert_eq!(r.body.unwrap_err(), "emulator cut the body");
    let r = post(&app, ASK, Some(ASSIST_A), &ask_body("webhooks", json!({}))).await;
    assert_eq!(r.body.unwrap_err(), "emulator cut the body");

    let (app2, emu) = crate::common::app(with_faults(|d| d.faults.drop_rate = 1.0));
    let app = app2;
    let r = get(&app, VIEWS, Some(ADMIN_A)).await;
    assert_eq!(r.body.unwrap_err(), "emulator dropped the connection");
    // A dropped follow-up took effect before the connection closed: the outcome is unknown.
    let r = post(
        &app,
        "/v2/agent/alpha/job/job_ok/message",
        Some(ADMIN_A),
        r#"{"prompt":"x"}"#,
    )
    .await;
    assert!(r.body.is_err());
    assert_eq!(emu.job_prompts("alpha", "job_ok").unwrap(), ["x"]);
}

#[tokio::test(start_paused = true)]
async fn latency_delays_every_response() {
    let (app, _) = app(with_faults(|d| d.faults.latency_ms = 1500));
    let t0 = tokio::time::Instant::now();
    get(&app, VIEWS, Some(ADMIN_A)).await;
    assert_eq!(t0.elapsed().as_millis(), 1500);
}

#[tokio::test(start_paused = true)]
async fn late_events_change_only_the_most_recent_days() {
    let (app, emu) = app(with_faults(|d| {
        d.faults.late_days = 2;
        d.faults.late_every_secs = 600;
    }));
    let total = |r: Value| r["totals"]["total"].as_u64().unwrap();
    let url = |d: &str, e: &str| format!("/v1/analytics/alpha/views?dateFrom={d}&dateTo={e}");
    let today0 = total(
        get(&app, &url("2026-03-15", "2026-03-16"), Some(ADMIN_A))
            .await
            .json(),
    );
    let old0 = total(
        get(&app, &url("2026-03-13", "2026-03-14"), Some(ADMIN_A))
            .await
            .json(),
    );
    tokio::time::advance(Duration::from_secs(600)).await;
    let today1 = total(
        get(&app, &url("2026-03-15", "2026-03-16"), Some(ADMIN_A))
            .await
            .json(),
    );
    emu.add_late_wave();
    let today2 = total(
        get(&app, &url("2026-03-15", "2026-03-16"), Some(ADMIN_A))
            .await
            .json(),
    );
    let old1 = total(
        get(&app, &url("2026-03-13", "2026-03-14"), Some(ADMIN_A))
            .await
            .json(),
    );
    assert!(
        today0 < today1 && today1 < today2,
        "{today0} {today1} {today2}"
    );
    assert_eq!(old0, old1, "a day older than late_days does not change");
}

#[tokio::test(start_paused = true)]
async fn shuffled_order_keeps_each_pages_rows_but_not_their_order() {
    let stable = app(small()).0;
    let shuffled = app(with_faults(|d| d.faults.row_order = RowOrder::Shuffled)).0;
    let paths = |v: Value| -> Vec<String> {
        v["views"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["path"].as_str().unwrap().to_string())
            .collect()
    };
    let url = format!("{VIEWS}&limit=250&offset=250");
    let a = paths(get(&stable, &url, Some(ADMIN_A)).await.json());
    let b = paths(get(&shuffled, &url, Some(ADMIN_A)).await.json());
    assert_ne!(a, b);
    let (mut sa, mut sb) = (a.clone(), b);
    sa.sort();
    sb.sort();
    assert_eq!(sa, sb);
}

#[tokio::test(start_paused = true)]
async fn stats_and_truth_endpoints_need_no_key() {
    let (app, emu) = app(small());
    get(&app, VIEWS, Some(ADMIN_A)).await;
    let stats = get(&app, "/_emulator/stats", None).await.json();
    assert_eq!(stats["views"]["requests"], 1);
    assert_eq!(stats["views"]["by_project"]["alpha"], 1);
    let truth = get(
        &app,
        "/_emulator/truth/alpha?dateFrom=2026-03-10&dateTo=2026-03-11",
        None,
    )
    .await
    .json();
    assert_eq!(
        truth["views"].as_array().unwrap().len(),
        emu.truth("alpha", day("2026-03-10"), day("2026-03-11"))
            .unwrap()
            .len()
    );
    let r = get(&app, "/nope", None).await;
    assert_eq!(
        (r.status, r.json()),
        (StatusCode::NOT_FOUND, json!({"error": "Not found"}))
    );
}

#[test]
fn every_data_and_config_file_in_the_repo_loads() {
    for entry in std::fs::read_dir(root().join("sample_data")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("docpipe") && name.ends_with(".toml") {
            docpipe::config::Settings::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        } else if name == "agents.toml" {
            // The table of agents, built in: read as a user's file would be.
            let text = std::fs::read_to_string(&path).unwrap();
            let agents = docpipe::agents::Agents::with_user(&text, &name)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(agents.version(), "2026-11-28+2026-11-28");
        } else if name.ends_with(".toml") {
            DataFile::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    let demo = DataFile::load(&root().join("sample_data/demo.toml")).unwrap();
    assert!(demo.projects.iter().any(|p| p.pages >= 600));
}

#[test]
fn data_file_errors_name_every_problem() {
    let text = r#"
start_date = "2026-01-01"
[[organizations]]
id = "o"
admin_keys = ["mint_dsc_wrong"]
[[projects]]
id = "p"
organization = "missing"
pages = 0
daily_views = 10
[faults]
error_rate = 2.0
ops = ["views", "job_delete"]
"#;
    let err = DataFile::parse(text, "x.toml").unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid data file x.toml: admin key in organization o must start with mint_ (not mint_dsc_ or mint_us_); \
project p names unknown organization missing; project p has pages = 0: must be between 1 and 1000000; \
faults.error_rate = 2: must be between 0 and 1; \
faults.ops: unknown operation \"job_delete\" (known: views, job_create, job_get, job_message, assistant, visitors, searches, feedback, feedback_by_page, conversations, thread, caller_stats)"
    );
    let err = DataFile::parse("start_date = \"2026-01-01\"\nbogus = 1\n", "y.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("invalid data file y.toml: unknown field `bogus`"),
        "{err}"
    );
}

#[tokio::test]
async fn the_server_binds_a_free_port_and_serves_over_tcp() {
    let emu = emulator(small());
    let server = docpipe::emulator::Server::start(emu, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    assert_ne!(server.addr.port(), 0);
    server.stop().await;
}

#[tokio::test]
async fn a_date_to_alone_before_the_data_is_an_empty_range_and_an_empty_thread_id_is_none() {
    let (app, _) = app(small());
    let r = get(
        &app,
        "/v1/analytics/alpha/views?dateTo=2024-01-01",
        Some(ADMIN_A),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"totals": {"human": 0, "ai": 0, "total": 0}, "views": [], "hasMore": false})
    );
    let r = post(
        &app,
        ASK,
        Some(ASSIST_A),
        &ask_body("webhooks", json!({"threadId": ""})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert!(!r.headers["x-thread-id"].is_empty());
}

#[tokio::test]
async fn a_question_no_page_answers_is_marked_not_found_and_every_thread_is_found_by_the_threads_operation()
 {
    let (app, _) = app(small());
    let r = post(
        &app,
        ASK,
        Some(ASSIST_A),
        &ask_body("qqqzz xyzzy?", json!({"retrievalPageSize": 2})),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let thread = r.headers["x-thread-id"].to_str().unwrap().to_string();
    let text = r.text();
    let codes: Vec<&str> = text.lines().map(|l| l.split_once(':').unwrap().0).collect();
    // As recorded from the service: the search finds nothing, then a step of its own marks
    // the question not found (no arguments, acknowledged), then the answer.
    assert_eq!(
        &codes[..10],
        ["f", "0", "9", "a", "e", "f", "9", "a", "e", "f"]
    );
    let part = |i: usize, code: &str| -> Value {
        let l = text.lines().nth(i).unwrap();
        serde_json::from_str(l.strip_prefix(code).unwrap()).unwrap()
    };
    assert_eq!(part(3, "a:")["result"], json!([]));
    let mark = part(6, "9:");
    assert_eq!(
        (&mark["toolName"], &mark["args"]),
        (&json!("markNotFound"), &json!({}))
    );
    assert_eq!(part(7, "a:")["result"], json!({"acknowledged": true}));
    // The finish part's usage sums the three steps'.
    let steps: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("e:"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let finish = part(text.lines().count() - 1, "d:");
    for k in ["promptTokens", "completionTokens"] {
        let sum: u64 = steps.iter().map(|s| s["usage"][k].as_u64().unwrap()).sum();
        assert_eq!(finish["usage"][k].as_u64().unwrap(), sum, "{k}");
    }
    // A thread id is a ULID the analytics threads operation finds, with both messages.
    assert_eq!(thread.len(), 26);
    let got = get(
        &app,
        &format!("/v1/analytics/alpha/assistant/threads/{thread}"),
        Some(ADMIN_A),
    )
    .await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    let body = got.json();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(body["threadId"], thread.as_str());
    assert_eq!(
        messages
            .iter()
            .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect::<Vec<_>>(),
        [
            ("user", "qqqzz xyzzy?"),
            (
                "assistant",
                "I could not find a page about that in the documentation."
            )
        ]
    );
    // A question a page answers calls no markNotFound.
    let r = post(&app, ASK, Some(ASSIST_A), &ask_body("webhooks", json!({}))).await;
    assert!(!r.text().contains("markNotFound"));
}
