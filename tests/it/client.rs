//! The typed client against the emulator over TCP: operations, errors, retries, budgets, keys.

use crate::common::*;
use docpipe::api::jobs::{JobStatus, Polling};
use docpipe::api::views::{ViewsPage, decode_page, next_offset};
use docpipe::api::{ErrorKind, Limits, Operation};
use docpipe::calendar::Window;
use docpipe::emulator::Op;
use docpipe::emulator::data::DataFile;
use std::time::Duration;

fn faulty(f: impl FnOnce(&mut DataFile)) -> DataFile {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    f(&mut data);
    data
}

const WINDOW: &str = "2026-03-10";

/// The pages of a day from `offset` on, as the export walks them (its guards: [`next_offset`]).
async fn walk_from(
    client: &docpipe::api::Client,
    project: &str,
    day_s: &str,
    offset: u64,
) -> Result<Vec<(u64, ViewsPage)>, docpipe::api::ApiError> {
    let mut pages: Vec<(u64, ViewsPage)> = Vec::new();
    let mut at = Some(offset);
    while let Some(o) = at {
        let page = client
            .page_views(project, Window::day(day(day_s)), 250, o)
            .await?;
        pages.push((o, page));
        let n = (o / 250) as usize + 1;
        let (first, last) = (pages.first().map(|p| &p.1), pages.last().map(|p| &p.1));
        let rows = pages.iter().map(|p| p.1.views.len() as u64).sum();
        at = next_offset(n, rows, first, last, || 0).unwrap();
    }
    Ok(pages)
}

async fn walk_all(
    client: &docpipe::api::Client,
    project: &str,
    day_s: &str,
) -> Result<Vec<(u64, ViewsPage)>, docpipe::api::ApiError> {
    walk_from(client, project, day_s, 0).await
}

fn rows_of(pages: &[(u64, ViewsPage)]) -> Vec<(String, i64, i64)> {
    let mut rows: Vec<_> = pages
        .iter()
        .flat_map(|p| {
            p.1.views
                .iter()
                .map(|r| (r.path.to_string(), r.human, r.ai))
        })
        .collect();
    rows.sort();
    rows
}

fn truth_rows(live: &Live, project: &str, day_s: &str) -> Vec<(String, i64, i64)> {
    crate::truth::true_views(live.emu(), project, day(day_s))
}

#[tokio::test]
async fn a_walk_fetches_every_row_once_with_the_minimum_number_of_requests() {
    let live = Live::start(faulty(|_| {})).await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    let pages = walk_all(&client, "alpha", WINDOW).await.unwrap();
    let truth = truth_rows(&live, "alpha", WINDOW);
    assert_eq!(rows_of(&pages), truth);
    assert_eq!(pages.len(), truth.len().div_ceil(250));
    assert_eq!(
        live.emu().requests(Op::Views, "alpha"),
        truth.len().div_ceil(250) as u64
    );
    assert_eq!(
        pages.iter().map(|p| p.0).collect::<Vec<_>>(),
        (0..pages.len() as u64).map(|i| i * 250).collect::<Vec<_>>()
    );
    // A day with no views is one request and one empty page.
    let empty = walk_all(&client, "alpha", "2026-04-01").await.unwrap();
    assert_eq!((empty.len(), empty[0].1.views.len()), (1, 0));
    // Resuming at an offset fetches only the rest.
    let rest = walk_from(&client, "alpha", WINDOW, 500).await.unwrap();
    assert_eq!(rest.len(), pages.len() - 2);
}

#[tokio::test]
async fn faults_are_retried_until_the_walk_equals_the_truth() {
    let live = Live::start(faulty(|f| {
        f.faults.error_rate = 0.25;
        f.faults.cut_body_rate = 0.1;
        f.faults.drop_rate = 0.1;
        f.faults.row_order = docpipe::emulator::data::RowOrder::Shuffled;
        f.faults.seed = 11;
    }))
    .await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    for d in ["2026-03-08", "2026-03-09", WINDOW] {
        let pages = walk_all(&client, "alpha", d).await.unwrap();
        assert_eq!(rows_of(&pages), truth_rows(&live, "alpha", d), "{d}");
    }
    let stats = live.emu().stats();
    let views = &stats["views"];
    let failed: u64 = views
        .by_status
        .iter()
        .filter(|(s, _)| **s != 200)
        .map(|(_, n)| n)
        .sum();
    assert!(failed > 0, "faults happened: {views:?}");
    assert!(live.slept() > 0, "backoff waited");
}

#[tokio::test]
async fn retry_after_sets_the_wait() {
    let live = Live::start(faulty(|f| {
        f.faults.burst_429_every = 3;
        f.faults.burst_429_len = 1;
        f.faults.burst_retry_after_secs = 7;
    }))
    .await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    let pages = walk_all(&client, "alpha", WINDOW).await.unwrap();
    assert_eq!(rows_of(&pages), truth_rows(&live, "alpha", WINDOW));
    let n429 = live.emu().stats()["views"].by_status[&429];
    assert!(n429 >= 1);
    assert_eq!(
        live.slept(),
        7 * n429 as i64,
        "each 429 waited exactly its Retry-After"
    );
}

#[tokio::test]
async fn the_budget_keeps_our_traffic_under_the_limit_and_waits_instead() {
    let live = Live::start(faulty(|d| d.limits.analytics_per_hour = 10)).await;
    let limits = Limits {
        analytics_per_hour: 10,
        headroom_percent: 0,
        ..open_limits()
    };
    let client = live.client(Some(ADMIN_A), None, limits);
    for i in 0..25 {
        client
            .page_views("beta", Window::day(day(WINDOW)), 250, 0)
            .await
            .unwrap_or_else(|e| panic!("request {i}: {e}"));
    }
    let stats = live.emu().stats();
    assert_eq!(stats["views"].requests, 25);
    assert_eq!(
        stats["views"].by_status.get(&429),
        None,
        "no 429 caused by our own traffic"
    );
    // 25 requests at 10 per hour (plus the 5-second margin): two full windows of waiting.
    assert_eq!(live.slept(), 2 * 3605);
    // Headroom leaves a share of the limit unused.
    assert_eq!(
        Limits {
            analytics_per_hour: 100,
            headroom_percent: 5,
            ..open_limits()
        }
        .effective(100),
        95
    );
}

#[tokio::test]
async fn each_error_class_names_the_operation_and_target() {
    let live = Live::start(faulty(|_| {})).await;
    let bad_key = live.client(Some("mint_test_nobody"), None, open_limits());
    let e = bad_key
        .page_views("alpha", Window::day(day(WINDOW)), 250, 0)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "page views for project alpha (2026-03-10 to 2026-03-11): the service refused the admin key of organization org-a (401: Invalid API key); check the key in test"
    );
    let client = live.client(Some(ADMIN_A), None, open_limits());
    let e = client
        .page_views("gamma", Window::day(day(WINDOW)), 250, 0)
        .await
        .unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::Forbidden { ref message } if message == "This API key does not have access to this project"),
        "{e}"
    );
    let e = client
        .page_views("alpha", Window::day(day(WINDOW)), 0, 0)
        .await
        .unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::Invalid {
            message: "Invalid query parameters: limit must be an integer between 1 and 250".into()
        }
    );
    let e = client
        .page_views("nw-apii", Window::day(day(WINDOW)), 250, 0)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "page views for project nw-apii (2026-03-10 to 2026-03-11): project 'nw-apii' is unknown to the service (404: Project not found)"
    );
    let e = client.get_job("alpha", "job_nope").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "get job for job job_nope of project alpha: not found (404: Job job_nope not found)"
    );
    let e = client
        .follow_up("alpha", "job_archived", "x")
        .await
        .unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::Invalid {
            message: "Job job_archived is archived".into()
        }
    );
    // A check made before sending says so, not "400".
    let e = client.follow_up("alpha", "job_ok", "").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "follow-up for job job_ok of project alpha: not sent: prompt must be at least 1 character"
    );
    // Server errors on a read retry, then give up with the last error.
    let live5 = Live::start(faulty(|f| f.faults.error_rate = 1.0)).await;
    let c5 = live5.client(Some(ADMIN_A), None, open_limits());
    let e = c5
        .page_views("alpha", Window::day(day(WINDOW)), 250, 0)
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Server { .. }), "{e}");
    assert_eq!(
        live5.emu().stats()["views"].requests,
        7,
        "one attempt and six retries"
    );
    // Nothing listening: a connection error, retried.
    let dead = ClosedPort::new();
    let mut settings = client.settings().clone();
    settings.base_url = dead.base_url();
    let c = docpipe::api::Client::new(
        settings,
        "org-a",
        Some(docpipe::api::AdminKey::parse(ADMIN_A, "mint", "t").unwrap()),
        None,
        live.clock.clone(),
        std::sync::Arc::new(docpipe::api::budget::MemoryBudget::default()),
    );
    let before = live.slept();
    let e = c.follow_up("alpha", "job_ok", "x").await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Connect(_)), "{e}");
    assert!(
        live.slept() > before,
        "a follow-up that never arrived is retried"
    );
}

#[tokio::test]
async fn a_follow_up_is_not_resent_when_its_outcome_is_unknown() {
    // 5xx: maybe applied. Exactly one request, and the error says to read the job.
    let live = Live::start(faulty(|f| f.faults.error_rate = 1.0)).await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    let e = client
        .follow_up("alpha", "job_ok", "fix it")
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::OutcomeUnknown(_)), "{e}");
    assert!(
        e.to_string()
            .contains("read the job to see whether it was applied")
    );
    assert_eq!(live.emu().requests(Op::JobMessage, "alpha"), 1);
    // A dropped connection after the request took effect: unknown too, and not resent.
    let live = Live::start(faulty(|f| f.faults.drop_rate = 1.0)).await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    let e = client.create_job("alpha", "new page").await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::OutcomeUnknown(_)), "{e}");
    assert_eq!(live.emu().requests(Op::JobCreate, "alpha"), 1);
    let e = client
        .follow_up("alpha", "job_ok", "fix it")
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::OutcomeUnknown(_)));
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        ["fix it"],
        "applied once"
    );
    // A 429 was certainly not applied: it is retried and succeeds.
    let live = Live::start(faulty(|f| {
        f.faults.burst_429_every = 2;
        f.faults.burst_429_len = 1;
        f.faults.burst_retry_after_secs = 3;
    }))
    .await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    client.get_job("alpha", "job_ok").await.unwrap();
    let job = client.follow_up("alpha", "job_ok", "again").await.unwrap();
    assert_eq!(job.status, Some(JobStatus::Active));
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        ["again"]
    );
    assert_eq!(live.emu().requests(Op::JobMessage, "alpha"), 2);
}

#[tokio::test]
async fn wait_polls_until_every_terminal_status_or_the_timeout() {
    let live = Live::start(faulty(|_| {})).await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    let fast = Polling {
        first: Duration::from_secs(1),
        max: Duration::from_secs(4),
        timeout: Duration::from_secs(60),
    };
    let created = client.create_job("alpha", "write a page").await.unwrap();
    let id = created.id.clone().unwrap();
    let done = client.wait_job("alpha", &id, fast).await.unwrap();
    assert_eq!(done.status, Some(JobStatus::Completed));
    assert!(
        done.pr_link
            .unwrap()
            .starts_with("https://github.com/org-a/docs/pull/")
    );
    client
        .follow_up("alpha", "job_nochange", "go")
        .await
        .unwrap();
    let j = client
        .wait_job("alpha", "job_nochange", fast)
        .await
        .unwrap();
    assert_eq!((j.status, j.pr_link), (Some(JobStatus::Completed), None));
    client.follow_up("beta", "job_fail", "go").await.unwrap();
    assert_eq!(
        client
            .wait_job("beta", "job_fail", fast)
            .await
            .unwrap()
            .status,
        Some(JobStatus::Failed)
    );
    assert_eq!(
        client
            .wait_job("alpha", "job_archived", fast)
            .await
            .unwrap()
            .status,
        Some(JobStatus::Archived)
    );
    client.follow_up("alpha", "job_ok", "slow").await.unwrap();
    let short = Polling {
        timeout: Duration::from_secs(3),
        ..fast
    };
    let e = client.wait_job("alpha", "job_ok", short).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "get job for job job_ok of project alpha: still active after 3s"
    );
    let e = client
        .wait_job("alpha", "job_gone", fast)
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::NotFound { .. }));
}

#[tokio::test]
async fn the_assistant_streams_events_and_continues_the_thread() {
    let live = Live::start(small()).await;
    let client = live.client(None, Some(ASSIST_A), open_limits());
    let req = |thread: Option<(String, String)>| docpipe::api::assistant::AskRequest {
        fp: "anonymous".into(),
        messages: vec![docpipe::api::assistant::Message::user(
            "m1",
            "How do webhooks work?",
            "2026-03-15T12:00:00Z",
        )],
        thread_id: thread.as_ref().map(|t| t.0.clone()),
        thread_key: thread.map(|t| t.1),
        retrieval_page_size: 2,
        current_path: Some("/guides/introduction".into()),
    };
    let mut answer = client.ask("alpha-docs", &req(None)).await.unwrap();
    let mut text = String::new();
    let mut finish = None;
    while let Some(ev) = answer.next().await {
        match ev.unwrap() {
            docpipe::api::stream::Event::Text { text: t } => text.push_str(&t),
            f @ docpipe::api::stream::Event::Finish { .. } => finish = Some(f),
            _ => {}
        }
    }
    assert!(
        text.starts_with("Let me search the documentation. The most relevant pages"),
        "{text}"
    );
    assert_eq!(answer.sources.len(), 2);
    assert!(
        answer
            .sources
            .iter()
            .all(|s| s.location.contains("webhooks"))
    );
    let thread = answer.thread_id.clone().unwrap();
    let key = answer.thread_key.clone().unwrap();
    let Some(docpipe::api::stream::Event::Finish {
        reason, thread_id, ..
    }) = finish
    else {
        panic!("no finish")
    };
    assert_eq!(
        (reason.as_str(), thread_id.as_deref()),
        ("stop", Some(thread.as_str()))
    );
    let mut again = client
        .ask("alpha-docs", &req(Some((thread.clone(), key))))
        .await
        .unwrap();
    while let Some(ev) = again.next().await {
        ev.unwrap();
    }
    assert_eq!(again.thread_id.as_deref(), Some(thread.as_str()));
    let e = client
        .ask("alpha-docs", &req(Some((thread, "tk_wrong".into()))))
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::NotFound { .. }));
    // An admin client has no assistant key: refused before sending anything.
    let admin = live.client(Some(ADMIN_A), None, open_limits());
    let e = admin.ask("alpha-docs", &req(None)).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "assistant message for domain alpha-docs: the service refused the assistant key of organization org-a (none given: not sent); check the key in its environment variable"
    );
    assert_eq!(live.emu().requests(Op::Assistant, "alpha-docs"), 3);
}

#[tokio::test]
async fn a_cut_stream_ends_the_answer_with_an_error() {
    let live = Live::start(faulty(|f| f.faults.cut_body_rate = 1.0)).await;
    let client = live.client(None, Some(ASSIST_A), open_limits());
    let req = docpipe::api::assistant::AskRequest {
        fp: "a".into(),
        messages: vec![docpipe::api::assistant::Message::user(
            "m",
            "webhooks",
            "2026-03-15T12:00:00Z",
        )],
        thread_id: None,
        thread_key: None,
        retrieval_page_size: 5,
        current_path: None,
    };
    let mut answer = client.ask("alpha-docs", &req).await.unwrap();
    let mut last = None;
    while let Some(ev) = answer.next().await {
        last = Some(ev);
    }
    let e = last.unwrap().unwrap_err();
    assert!(
        matches!(&e.kind, ErrorKind::Stream(m) if m.starts_with("connection failed mid-answer: ")),
        "{e}"
    );
}

#[tokio::test]
async fn key_mix_ups_are_refused_before_any_request() {
    use docpipe::config::RawConfig;
    let text = r#"
[service]
base_url = "http://127.0.0.1:9"
[[organizations]]
id = "org-a"
admin_key_env = "DOCPIPE_TEST_MIXUP_ADMIN"
assistant_key_env = "DOCPIPE_TEST_MIXUP_ASSIST"
assistant_domain = "alpha-docs"
[[projects]]
id = "alpha"
organization = "org-a"
"#;
    let settings = RawConfig::parse(text, "t.toml")
        .unwrap()
        .validate("t.toml")
        .unwrap();
    // SAFETY: this test alone uses these variables.
    unsafe {
        std::env::set_var("DOCPIPE_TEST_MIXUP_ADMIN", ASSIST_A);
        std::env::set_var("DOCPIPE_TEST_MIXUP_ASSIST", ADMIN_A);
    }
    let clock = docpipe::clock::system();
    let org = settings.organizations[0].clone();
    let e = docpipe::app::Context::open(
        settings.clone(),
        clock.clone(),
        docpipe::app::Access::Export,
        docpipe::app::Keys::All,
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "organization org-a: the key in DOCPIPE_TEST_MIXUP_ADMIN is not an admin API key: it must start with mint_ (not mint_dsc_ or mint_us_) (it starts with mint_dsc_)"
    );
    let e = docpipe::app::assistant_client(&settings, &org, clock)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "organization org-a: the key in DOCPIPE_TEST_MIXUP_ASSIST is not an assistant API key: it must start with mint_dsc_ (it starts with mint_)"
    );
    assert!(!e.contains("test_admin_a") && !e.contains("test_assistant_a"));
}

#[test]
fn a_long_path_is_data() {
    // The spec allows any string as a path: a 10,000-byte one is kept as it is.
    let huge = format!(
        r#"{{"totals":{{"human":0,"ai":0,"total":0}},"views":[{{"path":"{}","human":0,"ai":0,"total":0}}],"hasMore":false}}"#,
        "a".repeat(10_000)
    );
    let page = decode_page(huge.as_bytes(), 250).unwrap();
    assert_eq!(
        (
            page.views.len(),
            page.views.path(0).len(),
            page.rejects.len()
        ),
        (1, 10_000, 0)
    );
    assert!(!Operation::FollowUp.idempotent());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_reported_with_where_it_points_and_not_followed() {
    use axum::routing::get;
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = hits.clone();
    let app = axum::Router::new().route(
        "/v1/analytics/{p}/views",
        get(move || {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (
                    axum::http::StatusCode::FOUND,
                    [("location", "http://127.0.0.1:9/v1/analytics/alpha/views")],
                    "",
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let live = Live::start(small()).await;
    let base = live.client(Some(ADMIN_A), None, open_limits());
    let mut settings = base.settings().clone();
    settings.base_url = format!("http://{addr}");
    let client = docpipe::api::Client::new(
        settings,
        "org-a",
        Some(docpipe::api::AdminKey::parse(ADMIN_A, "mint", "t").unwrap()),
        None,
        live.clock.clone(),
        base.budget().clone(),
    );
    let err = client
        .page_views("alpha", Window::day(day(WINDOW)), 250, 0)
        .await
        .unwrap_err();
    assert!(
        err.to_string().ends_with(
            "unexpected status 302: the service redirects to http://127.0.0.1:9/v1/analytics/alpha/views; docpipe does not follow redirects: check service.base_url"
        ),
        "{err}"
    );
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "not retried"
    );
}

/// The automation trigger: an active custom-schedule automation starts a run whose job the
/// agent-job operations read; the documented 400s and 404s are their own lines, naming the
/// automation and the project; each trigger that started a run is what the emulator saw.
#[tokio::test]
async fn a_trigger_starts_a_run_and_each_refusal_says_why() {
    use docpipe::emulator::data::Automation;
    let automation = |id: &str, project: &str, active: bool, custom_schedule: bool| Automation {
        id: id.into(),
        project: project.into(),
        active,
        custom_schedule,
        outcome: None,
    };
    let live = Live::start(faulty(|d| {
        d.automations = vec![
            automation("wf_refresh", "alpha", true, true),
            automation("wf_paused", "alpha", false, true),
            automation("wf_on_merge", "alpha", true, false),
            automation("wf_beta", "beta", true, true),
        ];
    }))
    .await;
    let client = live.client(Some(ADMIN_A), None, open_limits());
    let run = client.trigger("alpha", "wf_refresh").await.unwrap();
    assert_eq!(run.schema_id, "wf_refresh");
    let job = run.job_id.clone().unwrap();
    assert!(run.instance_id.starts_with("run_"), "{run:?}");
    let read = client.get_job("alpha", &job).await.unwrap();
    assert_eq!(read.status, Some(JobStatus::Active));
    let refused = |id: &'static str| {
        let client = &client;
        async move { client.trigger("alpha", id).await.unwrap_err().to_string() }
    };
    let lines = [
        refused("wf_paused").await,
        refused("wf_on_merge").await,
        refused("wf_beta").await,
        refused("wf_gone").await,
        refused("wf bad").await,
    ];
    assert_eq!(
        lines,
        [
            "trigger for automation wf_paused of project alpha: invalid request (400: Workflow wf_paused is not active)",
            "trigger for automation wf_on_merge of project alpha: invalid request (400: Workflow wf_on_merge is not a custom schedule workflow)",
            "trigger for automation wf_beta of project alpha: not found (404: Workflow wf_beta not found)",
            "trigger for automation wf_gone of project alpha: not found (404: Workflow wf_gone not found)",
            "trigger for automation wf bad of project alpha: invalid request (400: Invalid workflow schema id)",
        ]
    );
    assert_eq!(
        live.emu().triggers(),
        [("alpha".to_string(), "wf_refresh".to_string(), job)]
    );
    assert_eq!(live.emu().requests(Op::Trigger, "alpha"), 6);
}
