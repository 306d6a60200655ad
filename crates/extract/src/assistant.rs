//! The v1 assistant: send a question, stream the answer's events, keep the thread.

use super::stream::{Event, Found, Parser, search_results};
use super::{ApiError, Call, Client, ErrorKind, Operation, escape};
use bytes::Bytes;
use futures::StreamExt;
use reqwest::Method;
use serde::Serialize;
use std::collections::{HashSet, VecDeque};

/// Longest `currentPath` the service accepts.
pub const MAX_CURRENT_PATH: usize = 200;

/// A message of the conversation, with the fields the client chat library (AI SDK v4's
/// `useChat`) sends: the user's, and the assistant's answers as their streams gave them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Message {
    /// Identifier.
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    /// Text.
    pub content: String,
    /// The message as parts: a user's text; an answer's steps (`step-start`), texts and tool
    /// invocations with their results.
    pub parts: Vec<serde_json::Value>,
    /// Creation time (ISO 8601), one of the library's extra fields.
    #[serde(rename = "createdAt")]
    pub created_at: String,
    /// An answer's tool invocations (the library's older field beside `parts`).
    #[serde(
        rename = "toolInvocations",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_invocations: Vec<serde_json::Value>,
}

impl Message {
    /// A user message made at `at`, its `createdAt` as the chat library writes it
    /// (milliseconds, `Z`).
    pub fn user_at(id: &str, text: &str, at: chrono::DateTime<chrono::Utc>) -> Self {
        Self::user(
            id,
            text,
            &at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
    }

    /// A user message.
    pub fn user(id: &str, text: &str, created_at: &str) -> Self {
        Self {
            id: id.to_string(),
            role: "user".into(),
            content: text.to_string(),
            parts: vec![serde_json::json!({ "type": "text", "text": text })],
            created_at: created_at.to_string(),
            tool_invocations: Vec::new(),
        }
    }
}

/// An answer assembled from its stream as the client library does: its text, one
/// `step-start` part per step, the texts of a step joined into one part, each tool call a
/// `tool-invocation` part (`state` `call`, then `result` with its result) numbered by step.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    id: Option<String>,
    content: String,
    parts: Vec<serde_json::Value>,
    invocations: Vec<serde_json::Value>,
    step: u64,
}

impl Reply {
    /// Takes the next event of the stream.
    pub fn take(&mut self, event: &Event) {
        use serde_json::json;
        match event {
            Event::StepStart { message_id } => {
                self.id.get_or_insert_with(|| message_id.clone());
                self.parts.push(json!({ "type": "step-start" }));
            }
            Event::Text { text } => {
                self.content.push_str(text);
                match self.parts.last_mut() {
                    Some(p) if p["type"] == "text" => {
                        let joined = format!("{}{text}", p["text"].as_str().unwrap_or(""));
                        p["text"] = json!(joined);
                    }
                    _ => self.parts.push(json!({ "type": "text", "text": text })),
                }
            }
            Event::ToolCall { id, name, args } => {
                let call = json!({
                    "state": "call", "step": self.step, "toolCallId": id,
                    "toolName": name, "args": args,
                });
                self.invocations.push(call.clone());
                self.parts
                    .push(json!({ "type": "tool-invocation", "toolInvocation": call }));
            }
            Event::ToolResult { id, result } => {
                let done = |v: &mut serde_json::Value| {
                    v["state"] = json!("result");
                    v["result"] = result.clone();
                };
                for v in self
                    .invocations
                    .iter_mut()
                    .filter(|v| v["toolCallId"] == *id)
                {
                    done(v);
                }
                for p in self
                    .parts
                    .iter_mut()
                    .filter(|p| p["toolInvocation"]["toolCallId"] == *id)
                {
                    done(&mut p["toolInvocation"]);
                }
            }
            Event::StepFinish { .. } => self.step += 1,
            _ => {}
        }
    }

    /// The answer as a message of the conversation, made at `at`.
    pub fn message(&self, at: chrono::DateTime<chrono::Utc>) -> Message {
        Message {
            id: self
                .id
                .clone()
                .unwrap_or_else(|| format!("a{}", at.timestamp_millis())),
            role: "assistant".into(),
            content: self.content.clone(),
            parts: self.parts.clone(),
            created_at: at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            tool_invocations: self.invocations.clone(),
        }
    }
}

/// The request body (spec 2.3), plus `threadKey` for continuing a thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AskRequest {
    /// `anonymous` or a user id.
    pub fp: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Thread to continue.
    #[serde(rename = "threadId", skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The thread's key (needed with `threadId`).
    #[serde(rename = "threadKey", skip_serializing_if = "Option::is_none")]
    pub thread_key: Option<String>,
    /// Search results used for the answer.
    #[serde(rename = "retrievalPageSize")]
    pub retrieval_page_size: u32,
    /// Page the user is on.
    #[serde(rename = "currentPath", skip_serializing_if = "Option::is_none")]
    pub current_path: Option<String>,
}

/// A streamed answer: thread ids from the headers, then events as they arrive.
pub struct AnswerStream {
    /// `X-Thread-Id`, or the finish part's `threadId` once seen.
    pub thread_id: Option<String>,
    /// `X-Thread-Key` (sent when a thread is created).
    pub thread_key: Option<String>,
    body: futures::stream::BoxStream<'static, reqwest::Result<Bytes>>,
    /// The longest wait for more of the answer.
    idle: std::time::Duration,
    parser: Parser,
    queue: VecDeque<Event>,
    ended: bool,
    search_calls: HashSet<String>,
    /// Pages the search tool returned, in order, without repeats.
    pub sources: Vec<Found>,
    target: String,
    /// The client, to redact its keys from what the service says.
    client: super::Client,
}

impl std::fmt::Debug for AnswerStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerStream")
            .field("thread_id", &self.thread_id)
            .finish_non_exhaustive()
    }
}

impl AnswerStream {
    fn fail(&mut self, message: String) -> ApiError {
        self.ended = true;
        ApiError {
            operation: Operation::AssistantMessage,
            target: self.target.clone(),
            kind: ErrorKind::Stream(message),
        }
    }

    fn note(&mut self, ev: &Event) {
        match ev {
            Event::ToolCall { id, name, .. } if name == "search" => {
                self.search_calls.insert(id.clone());
            }
            Event::ToolResult { id, result } if self.search_calls.contains(id) => {
                for found in search_results(result) {
                    if !self.sources.contains(&found) {
                        self.sources.push(found);
                    }
                }
            }
            Event::Source { url, title, .. } => {
                let found = Found {
                    location: url.clone(),
                    title: title.clone(),
                };
                if !self.sources.contains(&found) {
                    self.sources.push(found);
                }
            }
            Event::Finish {
                thread_id: Some(t), ..
            } if self.thread_id.is_none() => {
                self.thread_id = Some(t.clone());
            }
            _ => {}
        }
    }

    /// The next event; `None` after the finish part. A `3:` error part, a parse error or a cut
    /// stream ends the answer with an error.
    pub async fn next(&mut self) -> Option<Result<Event, ApiError>> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                if let Event::Error { message } = &ev {
                    // The service's words: any key it echoes removed, control characters escaped.
                    let message = format!(
                        "the assistant reported an error: {}",
                        docpipe_catalog::text::one_line(&self.client.redact(message))
                    );
                    return Some(Err(self.fail(message)));
                }
                self.note(&ev);
                return Some(Ok(ev));
            }
            if self.ended {
                return None;
            }
            let next = match tokio::time::timeout(self.idle, self.body.next()).await {
                Ok(next) => next,
                Err(_) => {
                    self.ended = true;
                    return Some(Err(
                        self.fail("no more of the answer came within the timeout".into())
                    ));
                }
            };
            let step = match next {
                Some(Ok(chunk)) => self.parser.feed(&chunk),
                Some(Err(e)) => {
                    self.ended = true;
                    return Some(Err(self.fail(format!("connection failed mid-answer: {e}"))));
                }
                None => {
                    self.ended = true;
                    self.parser.finish()
                }
            };
            match step {
                Ok(events) => self.queue.extend(events),
                Err(e) => return Some(Err(self.fail(e.to_string()))),
            }
        }
    }
}

impl Client {
    /// Sends a question to the assistant of `domain` and returns the answer as a stream.
    /// Retried (before any of the answer arrives) on 429, 5xx and connection failures.
    pub async fn ask(&self, domain: &str, request: &AskRequest) -> Result<AnswerStream, ApiError> {
        let limits = self.settings().limits;
        let target = format!("domain {domain}");
        let local = |message: String| ApiError {
            operation: Operation::AssistantMessage,
            target: target.clone(),
            kind: ErrorKind::NotSent { message },
        };
        if let Some(p) = &request.current_path
            && p.chars().count() > MAX_CURRENT_PATH
        {
            return Err(local(format!(
                "currentPath is longer than {MAX_CURRENT_PATH} characters"
            )));
        }
        if request.thread_id.is_some() != request.thread_key.is_some() {
            return Err(local("a thread id and its key go together".into()));
        }
        let body = serde_json::to_vec(request).map_err(|e| local(e.to_string()))?;
        let call = Call {
            operation: Operation::AssistantMessage,
            target: target.clone(),
            method: Method::POST,
            path: format!("/discovery/v1/assistant/{}/message", escape(domain)),
            query: Vec::new(),
            body: Some(Bytes::from(body)),
            budget: Some((
                format!("assistant:{}", self.organization()),
                limits.effective(limits.assistant_per_hour),
            )),
            admin: false,
            wait_for_budget: true,
            streams: true,
            project: None,
        };
        let resp = self.send(&call).await?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        Ok(AnswerStream {
            thread_id: header("x-thread-id"),
            thread_key: header("x-thread-key"),
            body: resp.bytes_stream().boxed(),
            idle: self.settings().timeout,
            parser: Parser::new(),
            queue: VecDeque::new(),
            ended: false,
            search_calls: HashSet::new(),
            sources: Vec::new(),
            target,
            client: self.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_thread_sends_no_thread_id_and_times_as_the_chat_library_writes_them() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-25T01:02:03.456789123+00:00")
            .unwrap()
            .to_utc();
        let request = AskRequest {
            fp: "anonymous".into(),
            messages: vec![Message::user_at("m1", "hi", at)],
            thread_id: None,
            thread_key: None,
            retrieval_page_size: 5,
            current_path: None,
        };
        let body = serde_json::to_value(&request).unwrap();
        assert_eq!(body.get("threadId"), None);
        assert_eq!(body["messages"][0]["createdAt"], "2026-11-25T01:02:03.456Z");
        let continued = AskRequest {
            thread_id: Some("01KK".into()),
            ..request
        };
        assert_eq!(
            serde_json::to_value(&continued).unwrap()["threadId"],
            "01KK"
        );
    }
}
