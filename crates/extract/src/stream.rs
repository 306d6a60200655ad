//! An incremental parser of the version-4 data stream protocol: lines `CODE:JSON\n`.
//! It accepts input split at any byte and yields typed events.

use serde::Deserialize;
use serde_json::Value;

/// Longest line accepted (a hostile endless line stops here).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Token usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(rename = "promptTokens", default)]
    pub prompt_tokens: u64,
    /// Completion tokens.
    #[serde(rename = "completionTokens", default)]
    pub completion_tokens: u64,
}

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// `0:` a piece of answer text.
    Text {
        /// The text.
        text: String,
    },
    /// `2:` data.
    Data {
        /// Items.
        data: Vec<Value>,
    },
    /// `3:` an error; the answer ends with it.
    Error {
        /// Message.
        message: String,
    },
    /// `8:` message annotations.
    Annotations {
        /// Items.
        annotations: Vec<Value>,
    },
    /// `9:` a tool call.
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        args: Value,
    },
    /// `a:` a tool result.
    ToolResult {
        /// Call id.
        id: String,
        /// Result.
        result: Value,
    },
    /// `b:` a streamed tool call starts.
    ToolCallStart {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// `c:` a piece of a streamed tool call's arguments.
    ToolCallDelta {
        /// Call id.
        id: String,
        /// Argument text.
        delta: String,
    },
    /// `d:` the finish message (last).
    Finish {
        /// Why it finished.
        reason: String,
        /// Usage over all steps.
        usage: Option<Usage>,
        /// Thread id, when the service puts it here.
        thread_id: Option<String>,
    },
    /// `e:` a step finished.
    StepFinish {
        /// Why.
        reason: String,
        /// Usage of the step.
        usage: Option<Usage>,
        /// Whether the next step continues this one.
        is_continued: bool,
    },
    /// `f:` a step starts.
    StepStart {
        /// Message id.
        message_id: String,
    },
    /// `g:` reasoning text.
    Reasoning {
        /// Text.
        text: String,
    },
    /// `h:` a source.
    Source {
        /// Source id.
        id: String,
        /// URL.
        url: String,
        /// Title.
        title: Option<String>,
    },
    /// `i:` redacted reasoning.
    RedactedReasoning {
        /// Payload.
        data: Value,
    },
    /// `j:` reasoning signature.
    ReasoningSignature {
        /// Payload.
        data: Value,
    },
    /// `k:` a file.
    File {
        /// Data (base64 or URL).
        data: String,
        /// MIME type.
        mime_type: String,
    },
}

const FINISH_REASONS: [&str; 7] = [
    "stop",
    "length",
    "content-filter",
    "tool-calls",
    "error",
    "other",
    "unknown",
];

/// A parse failure, with the 1-based line it happened on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct StreamError {
    /// Line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The incremental parser.
#[derive(Debug, Default)]
pub struct Parser {
    buf: Vec<u8>,
    line: usize,
    finished: bool,
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.get(name)
}

fn string(v: &Value, name: &str) -> Result<String, String> {
    field(v, name)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("missing string field {name}"))
}

fn usage(v: &Value) -> Result<Option<Usage>, String> {
    match field(v, "usage") {
        None | Some(Value::Null) => Ok(None),
        Some(u) => serde_json::from_value(u.clone())
            .map(Some)
            .map_err(|e| format!("usage: {e}")),
    }
}

fn reason(v: &Value) -> Result<String, String> {
    let r = string(v, "finishReason")?;
    if FINISH_REASONS.contains(&r.as_str()) {
        Ok(r)
    } else {
        Err(format!("unknown finishReason {r:?}"))
    }
}

/// Parses one complete line (without its newline).
pub fn parse_line(line: &str) -> Result<Event, String> {
    let (code, json) = line
        .split_once(':')
        .ok_or_else(|| "no ':' after the part code".to_string())?;
    let v: Value =
        serde_json::from_str(json).map_err(|e| format!("invalid JSON in part '{code}': {e}"))?;
    let as_array = |v: Value| match v {
        Value::Array(a) => Ok(a),
        _ => Err(format!("part '{code}' must be an array")),
    };
    let as_string = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("part '{code}' must be a string"))
    };
    Ok(match code {
        "0" => Event::Text {
            text: as_string(&v)?,
        },
        "2" => Event::Data { data: as_array(v)? },
        "3" => Event::Error {
            message: as_string(&v)?,
        },
        "8" => Event::Annotations {
            annotations: as_array(v)?,
        },
        "9" => Event::ToolCall {
            id: string(&v, "toolCallId")?,
            name: string(&v, "toolName")?,
            args: field(&v, "args").cloned().unwrap_or(Value::Null),
        },
        "a" => Event::ToolResult {
            id: string(&v, "toolCallId")?,
            result: field(&v, "result").cloned().unwrap_or(Value::Null),
        },
        "b" => Event::ToolCallStart {
            id: string(&v, "toolCallId")?,
            name: string(&v, "toolName")?,
        },
        "c" => Event::ToolCallDelta {
            id: string(&v, "toolCallId")?,
            delta: string(&v, "argsTextDelta")?,
        },
        "d" => Event::Finish {
            reason: reason(&v)?,
            usage: usage(&v)?,
            thread_id: field(&v, "threadId")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        "e" => Event::StepFinish {
            reason: reason(&v)?,
            usage: usage(&v)?,
            is_continued: field(&v, "isContinued")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
        "f" => Event::StepStart {
            message_id: string(&v, "messageId")?,
        },
        "g" => Event::Reasoning {
            text: as_string(&v)?,
        },
        "h" => Event::Source {
            id: string(&v, "id")?,
            url: string(&v, "url")?,
            title: field(&v, "title")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        "i" => Event::RedactedReasoning { data: v },
        "j" => Event::ReasoningSignature { data: v },
        "k" => Event::File {
            data: string(&v, "data")?,
            mime_type: string(&v, "mimeType")?,
        },
        other => return Err(format!("unknown part code {other:?}")),
    })
}

impl Parser {
    /// A new parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the finish part has been seen.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Feeds bytes; returns the events of every line completed by them, in order. After an
    /// error the stream is unusable.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Event>, StreamError> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(pos) = rest.iter().position(|b| *b == b'\n') {
            self.push(&rest[..pos])?;
            let line = std::mem::take(&mut self.buf);
            if let Some(ev) = self.line_event(&line)? {
                out.push(ev);
            }
            rest = &rest[pos + 1..];
        }
        self.push(rest)?;
        Ok(out)
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        if self.buf.len() + bytes.len() > MAX_LINE_BYTES {
            return Err(StreamError {
                line: self.line + 1,
                message: format!("line longer than {} MiB", MAX_LINE_BYTES >> 20),
            });
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn line_event(&mut self, raw: &[u8]) -> Result<Option<Event>, StreamError> {
        self.line += 1;
        let line = self.line;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.is_empty() {
            return Ok(None);
        }
        let text = std::str::from_utf8(raw).map_err(|_| StreamError {
            line,
            message: "not valid UTF-8".into(),
        })?;
        let event = parse_line(text).map_err(|message| StreamError { line, message })?;
        if matches!(event, Event::Finish { .. }) {
            self.finished = true;
        }
        Ok(Some(event))
    }

    /// Ends the input: a last line without a newline is parsed; a stream without a finish part
    /// is an error (it was cut off).
    pub fn finish(&mut self) -> Result<Vec<Event>, StreamError> {
        let mut out = Vec::new();
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            if let Some(ev) = self.line_event(&line)? {
                out.push(ev);
            }
        }
        if !self.finished {
            return Err(StreamError {
                line: self.line,
                message: "stream ended before its finish part".into(),
            });
        }
        Ok(out)
    }
}

/// A page the search tool returned.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// Path or URL.
    pub location: String,
    /// Title, when given.
    pub title: Option<String>,
}

/// The pages in a search tool result: an array of `{path|url, metadata:{title}}`, or
/// `{results: [...]}` of the same.
pub fn search_results(result: &Value) -> Vec<Found> {
    let items = match result {
        Value::Array(a) => a.as_slice(),
        Value::Object(o) => o
            .get("results")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
        _ => &[],
    };
    items
        .iter()
        .filter_map(|item| {
            let location = item
                .get("path")
                .or_else(|| item.get("url"))
                .and_then(Value::as_str)?;
            let title = item
                .get("metadata")
                .and_then(|m| m.get("title"))
                .or_else(|| item.get("title"))
                .and_then(Value::as_str)
                .map(str::to_string);
            Some(Found {
                location: location.to_string(),
                title,
            })
        })
        .collect()
}
