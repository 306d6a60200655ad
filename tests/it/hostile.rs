//! A hostile service: pages that never end, repeat or lie, and streams that fail. The client
//! ends each with a clear error instead of looping or hanging.

use crate::common::*;
use axum::Router;
use axum::extract::{Path, Query};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use docpipe::api::ErrorKind;
use docpipe::api::views::Window;
use futures::TryStreamExt;
use serde_json::json;
use std::collections::HashMap;

async fn views(Path(kind): Path<String>, Query(q): Query<HashMap<String, String>>) -> Response {
    let offset: u64 = q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
    let row = |i: u64| json!({"path": format!("/p{i}"), "human": 1, "ai": 0, "total": 1});
    let body = match kind.as_str() {
        // An empty page that claims more.
        "empty" => {
            json!({"totals": {"human": 5, "ai": 0, "total": 5}, "views": [], "hasMore": true})
        }
        // The same page whatever the offset.
        "repeat" => {
            json!({"totals": {"human": 900, "ai": 0, "total": 900}, "views": [row(0), row(1)], "hasMore": true})
        }
        // New rows forever, more than the totals allow.
        "endless" => {
            json!({"totals": {"human": 600, "ai": 0, "total": 600}, "views": (offset..offset + 250).map(row).collect::<Vec<_>>(), "hasMore": true})
        }
        _ => json!({"totals": {"human": "lots"}}),
    };
    axum::Json(body).into_response()
}

async fn stream(Path(kind): Path<String>) -> Response {
    let body = match kind.as_str() {
        "error" => "f:{\"messageId\":\"m\"}\n0:\"Partial \"\n3:\"model overloaded\"\n",
        _ => {
            "f:{\"messageId\":\"m\"}\n0:\"Hello\"\nd:{\"finishReason\":\"stop\",\"threadId\":\"t-from-finish\"}\n"
        }
    };
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "text/plain; charset=utf-8".parse().unwrap());
    (headers, body).into_response()
}

async fn serve() -> (String, tokio::task::JoinHandle<()>) {
    let app = Router::new()
        .route("/v1/analytics/{kind}/views", get(views))
        .route("/discovery/v1/assistant/{kind}/message", post(stream));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), task)
}

fn client(base: &str) -> docpipe::api::Client {
    use docpipe::api::*;
    let settings = ClientSettings {
        base_url: base.to_string(),
        timeout: std::time::Duration::from_secs(10),
        retry: RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::default()
        },
        limits: Limits {
            headroom_percent: 0,
            ..open_limits()
        },
    };
    Client::new(
        settings,
        "hostile",
        Some(AdminKey::parse(ADMIN_A, "mint", "t").unwrap()),
        Some(AssistantKey::parse(ASSIST_A, "mint", "t").unwrap()),
        docpipe::clock::ManualClock::new(noon()),
        std::sync::Arc::new(docpipe::api::budget::MemoryBudget::default()),
    )
    .unwrap()
}

#[tokio::test]
async fn a_walk_ends_with_an_error_when_the_service_misbehaves() {
    let (base, task) = serve().await;
    let c = client(&base);
    let w = Window::day(day("2026-03-10"));
    let cases = [
        (
            "empty",
            "page views for project empty (2026-03-10 to 2026-03-11): paging stopped: empty page at offset 0 says hasMore",
        ),
        (
            "repeat",
            "page views for project repeat (2026-03-10 to 2026-03-11): paging stopped: page at offset 250 repeats the previous page: the service ignores offset",
        ),
        (
            "endless",
            "page views for project endless (2026-03-10 to 2026-03-11): paging stopped: hasMore at offset 750, but the totals (600) allow no more rows",
        ),
    ];
    for (project, want) in cases {
        let result: Result<Vec<_>, _> = c.walk(project, w, 0).try_collect().await;
        assert_eq!(result.unwrap_err().to_string(), want);
    }
    let e = c.page_views("broken", w, 250, 0).await.unwrap_err();
    assert!(
        matches!(&e.kind, ErrorKind::Malformed(m) if m.starts_with("page views body: ")),
        "{e}"
    );
    task.abort();
}

#[tokio::test]
async fn an_error_part_ends_the_answer_and_a_finish_part_can_carry_the_thread() {
    let (base, task) = serve().await;
    let c = client(&base);
    let req = docpipe::api::assistant::AskRequest {
        fp: "anonymous".into(),
        messages: vec![docpipe::api::assistant::Message::user(
            "m",
            "q",
            "2026-03-15T12:00:00Z",
        )],
        thread_id: None,
        thread_key: None,
        retrieval_page_size: 5,
        current_path: None,
    };
    let mut answer = c.ask("error", &req).await.unwrap();
    let mut events = Vec::new();
    let err = loop {
        match answer.next().await {
            Some(Ok(ev)) => events.push(ev),
            Some(Err(e)) => break e,
            None => panic!("the answer must end with the error"),
        }
    };
    assert_eq!(events.len(), 2);
    assert_eq!(
        err.to_string(),
        "assistant message for domain error: stream: the assistant reported an error: model overloaded"
    );
    assert!(answer.next().await.is_none(), "nothing after the error");
    let mut answer = c.ask("ok", &req).await.unwrap();
    assert_eq!(answer.thread_id, None, "no X-Thread-Id header");
    while let Some(ev) = answer.next().await {
        ev.unwrap();
    }
    assert_eq!(answer.thread_id.as_deref(), Some("t-from-finish"));
    task.abort();
}
