//! `POST /discovery/v1/assistant/{domain}/message`: answers from the domain's pages as a
//! version-4 data stream, with thread continuity through `X-Thread-Id` and `X-Thread-Key`.

use super::data::KeyKind;
use super::generate::page_title;
use super::{ApiError, Emulator, Limit, Reply, Thread, error};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

/// Most search results the emulator returns, whatever `retrievalPageSize` asks.
const MAX_RESULTS: usize = 20;

/// The validated parts of a request body that the emulator uses.
#[derive(Debug)]
struct Ask {
    question: String,
    page_size: usize,
    thread: Option<(String, Option<String>)>,
    /// The roles of the conversation sent, in order.
    roles: Vec<String>,
}

fn bad(message: impl Into<String>) -> ApiError {
    error(StatusCode::BAD_REQUEST, message)
}

fn parse(body: &Bytes) -> Result<Ask, ApiError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("Invalid JSON body: {e}")))?;
    let Some(obj) = v.as_object() else {
        return Err(bad("body must be a JSON object"));
    };
    match obj.get("fp") {
        Some(Value::String(_)) => {}
        Some(_) => return Err(bad("fp must be a string")),
        None => return Err(bad("fp is required")),
    }
    let messages = match obj.get("messages") {
        Some(Value::Array(m)) => m,
        Some(_) => return Err(bad("messages must be an array")),
        None => return Err(bad("messages is required")),
    };
    if let Some(p) = obj.get("currentPath") {
        match p.as_str() {
            Some(s) if s.chars().count() <= 200 => {}
            Some(_) => return Err(bad("currentPath must be at most 200 characters")),
            None => return Err(bad("currentPath must be a string")),
        }
    }
    let page_size = match obj.get("retrievalPageSize") {
        None | Some(Value::Null) => 5,
        Some(n) => match n.as_f64() {
            Some(x) if x > 0.0 && x.is_finite() => (x.ceil() as usize).min(MAX_RESULTS),
            _ => return Err(bad("retrievalPageSize must be a positive number")),
        },
    };
    let thread = match obj.get("threadId") {
        // An empty id is no thread, as a client that sends `""` for "none" means it.
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if id.is_empty() => None,
        Some(Value::String(id)) => {
            let key = obj
                .get("threadKey")
                .and_then(Value::as_str)
                .map(str::to_string);
            Some((id.clone(), key))
        }
        Some(_) => return Err(bad("threadId must be a string or null")),
    };
    let question = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(message_text)
        .unwrap_or_default();
    if question.trim().is_empty() {
        return Err(bad("messages must contain a user message with text"));
    }
    let roles = messages
        .iter()
        .map(|m| {
            m.get("role")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect();
    Ok(Ask {
        question,
        page_size,
        thread,
        roles,
    })
}

/// The text of a message: `content`, or its text parts joined.
fn message_text(m: &Value) -> String {
    if let Some(c) = m.get("content").and_then(Value::as_str)
        && !c.is_empty()
    {
        return c.to_string();
    }
    m.get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// The domain's pages that best match the question: by shared words, then popularity; and
/// whether any shares a word with it.
fn search(emu: &Emulator, project: &str, question: &str, n: usize) -> (Vec<String>, bool) {
    let Some(g) = emu.generator(project) else {
        return (Vec::new(), false);
    };
    let q = words(question);
    let mut scored: Vec<(usize, f64, &String)> = g
        .paths()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let pw = words(p);
            let score = q
                .iter()
                .filter(|w| pw.iter().any(|x| x.starts_with(w.as_str())))
                .count();
            (score, g.weight(i), p)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(b.2)));
    let found = scored.first().is_some_and(|s| s.0 > 0);
    let pages = scored
        .into_iter()
        .take(n)
        .map(|(_, _, p)| p.clone())
        .collect();
    (pages, found)
}

/// The pages an answer cites, and whether it found any: a question a job's change answers cites
/// the page the job put the answer on first; one the analytics left unanswered lately is not
/// found; any other is searched for.
fn answer_pages(
    emu: &Emulator,
    project: &str,
    ask: &Ask,
    now: chrono::DateTime<chrono::Utc>,
) -> (Vec<String>, bool) {
    if let Some(change) = emu.answering(project, &ask.question, now.date_naive()) {
        let (mut pages, _) = search(emu, project, &ask.question, ask.page_size);
        if let Some(page) = change.page {
            pages.retain(|p| *p != page);
            pages.insert(0, page);
            pages.truncate(ask.page_size.max(1));
        }
        return (pages, true);
    }
    if emu.unanswered_lately(project, &ask.question) {
        return (Vec::new(), false);
    }
    search(emu, project, &ask.question, ask.page_size)
}

fn line(code: char, v: &Value) -> String {
    format!("{code}:{v}\n")
}

/// The data stream parts of an answer, split into text pieces of a few words, and the
/// answer's text. When no page matches (`found` false), the search finds nothing and the
/// assistant marks the question not found in a step of its own, as recorded from the service:
/// a `markNotFound` tool call with no arguments, its result `{acknowledged: true}`.
fn stream_parts(
    emu: &Emulator,
    question: &str,
    results: &[String],
    found: bool,
    thread_id: &str,
) -> (Vec<String>, String) {
    let mut out = Vec::new();
    let call = emu.next_id("call");
    let search_args = json!({ "query": question });
    let result: Vec<Value> = results
        .iter()
        .filter(|_| found)
        .map(|p| json!({ "path": p, "metadata": { "title": page_title(p) } }))
        .collect();
    out.push(line('f', &json!({ "messageId": emu.next_id("msg") })));
    out.push(line('0', &json!("Let me search the documentation. ")));
    out.push(line(
        '9',
        &json!({ "toolCallId": call, "toolName": "search", "args": search_args }),
    ));
    out.push(line('a', &json!({ "toolCallId": call, "result": result })));
    let step1 =
        json!({ "promptTokens": 40 + words(question).len() as u64 * 2, "completionTokens": 12 });
    out.push(line(
        'e',
        &json!({ "finishReason": "tool-calls", "usage": step1, "isContinued": false }),
    ));
    // The marking step's tokens (none when the search found a page).
    let mut marking = 0;
    if !found {
        let call = emu.next_id("call");
        out.push(line('f', &json!({ "messageId": emu.next_id("msg") })));
        out.push(line(
            '9',
            &json!({ "toolCallId": call, "toolName": "markNotFound", "args": {} }),
        ));
        out.push(line(
            'a',
            &json!({ "toolCallId": call, "result": { "acknowledged": true } }),
        ));
        marking = 8;
        let usage = json!({ "promptTokens": 60, "completionTokens": marking });
        out.push(line(
            'e',
            &json!({ "finishReason": "tool-calls", "usage": usage, "isContinued": false }),
        ));
    }
    let answer = if result.is_empty() {
        "I could not find a page about that in the documentation.".to_string()
    } else {
        let cited: Vec<String> = results
            .iter()
            .take(3)
            .map(|p| format!("{} ({p})", page_title(p)))
            .collect();
        format!(
            "The most relevant pages for your question are {}. Start with {}.",
            cited.join(", "),
            results[0]
        )
    };
    out.push(line('f', &json!({ "messageId": emu.next_id("msg") })));
    let pieces: Vec<&str> = answer.split_inclusive(' ').collect();
    for chunk in pieces.chunks(3) {
        out.push(line('0', &json!(chunk.concat())));
    }
    let completion = answer.split_whitespace().count() as u64;
    let step2 =
        json!({ "promptTokens": 200 + results.len() as u64 * 50, "completionTokens": completion });
    out.push(line(
        'e',
        &json!({ "finishReason": "stop", "usage": step2, "isContinued": false }),
    ));
    let marked_prompt = if found { 0 } else { 60 };
    let total = json!({
        "promptTokens": step1["promptTokens"].as_u64().unwrap_or(0) + marked_prompt + step2["promptTokens"].as_u64().unwrap_or(0),
        "completionTokens": 12 + marking + completion,
    });
    out.push(line(
        'd',
        &json!({ "finishReason": "stop", "usage": total, "threadId": thread_id }),
    ));
    (out, answer)
}

impl Emulator {
    /// Each question the v1 assistant was asked, in order: its domain and the question (for
    /// tests).
    pub fn asked(&self) -> Vec<(String, String)> {
        self.lock().asked.clone()
    }

    /// The roles of the conversation each request of a thread sent, in order (none for a
    /// thread it does not know).
    pub fn thread_conversations(&self, thread: &str) -> Option<Vec<Vec<String>>> {
        self.lock().threads.get(thread).map(|t| t.received.clone())
    }
}

/// The assistant message handler.
pub async fn message(
    State(emu): State<Arc<Emulator>>,
    Path(domain): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    let org = emu.authorize(&headers, &[KeyKind::Assistant])?;
    let Some(dom) = emu
        .data()
        .domains
        .iter()
        .find(|d| d.id == domain && d.organization == org)
    else {
        return Err(error(StatusCode::NOT_FOUND, "Domain not found"));
    };
    emu.take(Limit::Assistant, &org)?;
    let ask = parse(&body)?;
    let now = emu.now();
    let (thread_id, new_key) = match ask.thread.clone() {
        Some((id, key)) => {
            let known = emu.lock().threads.get(&id).cloned();
            match known {
                Some(t) if Some(&t.key) == key.as_ref() && t.domain == domain => (id, None),
                _ => return Err(error(StatusCode::NOT_FOUND, "Thread not found")),
            }
        }
        None => {
            // A ULID, as the analytics operations give thread ids.
            let id = super::records::ulid(
                now.timestamp_millis() as u64,
                (u128::from(emu.roll_u64()) << 64) | u128::from(emu.roll_u64()),
            );
            let key = format!("tk_{:016x}{:016x}", emu.roll_u64(), emu.roll_u64());
            let thread = Thread {
                key: key.clone(),
                domain: domain.clone(),
                project: dom.project.clone(),
                created: now,
                messages: Vec::new(),
                received: Vec::new(),
            };
            emu.lock().threads.insert(id.clone(), thread);
            (id, Some(key))
        }
    };
    let (results, found) = answer_pages(&emu, &dom.project, &ask, now);
    let (parts, answer) = stream_parts(&emu, &ask.question, &results, found, &thread_id);
    emu.lock()
        .asked
        .push((domain.clone(), ask.question.clone()));
    if let Some(t) = emu.lock().threads.get_mut(&thread_id) {
        t.received.push(ask.roles.clone());
        t.messages.push(("user", ask.question.clone(), now));
        t.messages
            .push(("assistant", answer, now + chrono::Duration::seconds(1)));
    }
    let stream = futures::stream::iter(
        parts
            .into_iter()
            .map(|p| Ok::<Bytes, std::io::Error>(Bytes::from(p))),
    );
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert("x-vercel-ai-data-stream", HeaderValue::from_static("v1"));
    if let Ok(v) = HeaderValue::from_str(&thread_id) {
        h.insert("x-thread-id", v);
    }
    if let Some(Ok(v)) = new_key.map(|k| HeaderValue::from_str(&k)) {
        h.insert("x-thread-key", v);
    }
    Ok(resp)
}
