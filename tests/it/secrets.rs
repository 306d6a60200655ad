//! No key ever appears in a log line, an error or a Debug print.

use crate::common::*;
use docpipe::calendar::Window;

#[tokio::test]
async fn no_key_appears_in_logs_errors_or_debug_output() {
    let (capture, _guard) = Capture::start();
    let live = Live::start({
        let mut d = small();
        d.faults.error_rate = 0.5;
        d.faults.drop_rate = 0.2;
        d.faults.burst_429_every = 4;
        d.faults.burst_429_len = 1;
        d.faults.burst_retry_after_secs = 2;
        d
    })
    .await;
    let mut seen = String::new();
    let admin = live.client(Some(ADMIN_A), None, open_limits());
    let assistant = live.client(None, Some(ASSIST_A), open_limits());
    seen += &format!("{admin:?} {assistant:?}");
    for _ in 0..5 {
        if let Err(e) = admin
            .page_views("alpha", Window::day(day("2026-03-10")), 250, 0)
            .await
        {
            seen += &format!("{e} {e:?}");
        }
        if let Err(e) = admin.follow_up("alpha", "job_ok", "x").await {
            seen += &format!("{e} {e:?}");
        }
        if let Err(e) = admin
            .page_views("gamma", Window::day(day("2026-03-10")), 250, 0)
            .await
        {
            seen += &format!("{e} {e:?}");
        }
    }
    let wrong = live.client(Some("mint_test_admin_b"), None, open_limits());
    if let Err(e) = wrong.get_job("alpha", "job_ok").await {
        seen += &format!("{e} {e:?}");
    }
    let logs = capture.text();
    assert!(logs.contains("retrying"), "the run logged its retries");
    for secret in [ADMIN_A, ASSIST_A, "mint_test_admin_b"] {
        assert!(!logs.contains(secret), "log leaks {secret}");
        assert!(!seen.contains(secret), "errors or Debug leak {secret}");
    }
    assert!(seen.contains("AdminKey(mint_***)"));
    // A service message that echoes the key is redacted.
    assert_eq!(
        admin.redact(&format!("bad key {ADMIN_A}")),
        "bad key mint_***"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_error_part_that_echoes_the_key_is_shown_redacted_and_escaped() {
    use axum::routing::post;
    let body = "0:\"hi\"\n3:\"Bearer mint_dsc_test_assistant_a \\u001b[2J bad\"\n";
    let app = axum::Router::new().route(
        "/discovery/v1/assistant/{d}/message",
        post(move || async move { body }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let live = Live::start(small()).await;
    let mut client = live.client(None, Some(ASSIST_A), open_limits());
    let mut settings = client.settings().clone();
    settings.base_url = format!("http://{addr}");
    client = docpipe::api::Client::new(
        settings,
        "org-a",
        None,
        Some(docpipe::api::AssistantKey::parse(ASSIST_A, "mint", "t").unwrap()),
        live.clock.clone(),
        client.budget().clone(),
    );
    let request = docpipe::api::assistant::AskRequest {
        fp: "anonymous".into(),
        messages: vec![docpipe::api::assistant::Message::user_at(
            "m1",
            "hello",
            noon(),
        )],
        thread_id: None,
        thread_key: None,
        retrieval_page_size: 1,
        current_path: None,
    };
    let mut answer = client.ask("d", &request).await.unwrap();
    let mut error = None;
    while let Some(ev) = answer.next().await {
        if let Err(e) = ev {
            error = Some(e.to_string());
        }
    }
    let error = error.unwrap();
    assert!(!error.contains(ASSIST_A), "{error}");
    assert!(!error.chars().any(char::is_control), "{error}");
    assert!(
        error.ends_with(
            "stream: the assistant reported an error: Bearer mint_dsc_*** \\u{1b}[2J bad"
        ),
        "{error}"
    );
}
