//! The data stream parser: every split of a recorded stream, and its errors with line numbers.

use crate::common::*;
use docpipe::api::stream::{Event, Parser, search_results};
use serde_json::json;

/// A stream recorded from the emulator.
async fn recorded() -> Vec<u8> {
    let (app, _) = app(small());
    let body = json!({"fp": "a", "messages": [{"id": "1", "role": "user", "content": "rate limits for webhooks"}]}).to_string();
    let r = post(
        &app,
        "/discovery/v1/assistant/alpha-docs/message",
        Some(ASSIST_A),
        &body,
    )
    .await;
    r.body.unwrap().to_vec()
}

fn parse_all(chunks: &[&[u8]]) -> Result<Vec<Event>, String> {
    let mut p = Parser::new();
    let mut out = Vec::new();
    for c in chunks {
        out.extend(p.feed(c).map_err(|e| e.to_string())?);
    }
    out.extend(p.finish().map_err(|e| e.to_string())?);
    Ok(out)
}

#[tokio::test]
async fn every_split_of_a_recorded_stream_gives_the_same_events() {
    let bytes = recorded().await;
    let whole = parse_all(&[&bytes]).unwrap();
    assert!(matches!(whole.first(), Some(Event::StepStart { .. })));
    assert!(matches!(whole.last(), Some(Event::Finish { .. })));
    assert_eq!(whole.len(), bytes.iter().filter(|b| **b == b'\n').count());
    for i in 0..=bytes.len() {
        assert_eq!(
            parse_all(&[&bytes[..i], &bytes[i..]]).unwrap(),
            whole,
            "split at {i}"
        );
    }
    // Byte by byte, and in three pieces around multi-byte text.
    let singles: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(parse_all(&singles).unwrap(), whole);
    let utf8 = "0:\"caf\u{e9} \u{1F600}\"\nd:{\"finishReason\":\"stop\"}\n".as_bytes();
    for i in 0..utf8.len() {
        for j in i..utf8.len() {
            let evs = parse_all(&[&utf8[..i], &utf8[i..j], &utf8[j..]]).unwrap();
            assert_eq!(
                evs[0],
                Event::Text {
                    text: "caf\u{e9} \u{1F600}".into()
                }
            );
        }
    }
}

#[test]
fn every_part_code_is_typed() {
    let stream = concat!(
        "f:{\"messageId\":\"m1\"}\n",
        "0:\"Hi\"\n",
        "2:[{\"k\":1}]\n",
        "8:[{\"a\":1}]\n",
        "b:{\"toolCallId\":\"c1\",\"toolName\":\"search\"}\n",
        "c:{\"toolCallId\":\"c1\",\"argsTextDelta\":\"{\\\"q\"}\n",
        "9:{\"toolCallId\":\"c1\",\"toolName\":\"search\",\"args\":{\"q\":\"x\"}}\n",
        "a:{\"toolCallId\":\"c1\",\"result\":{\"results\":[{\"url\":\"https://d/x\",\"metadata\":{\"title\":\"X\"}}]}}\n",
        "g:\"thinking\"\n",
        "i:{\"data\":\"zz\"}\n",
        "j:{\"signature\":\"s\"}\n",
        "h:{\"sourceType\":\"url\",\"id\":\"s1\",\"url\":\"https://d/y\",\"title\":\"Y\"}\n",
        "k:{\"data\":\"aGk=\",\"mimeType\":\"text/plain\"}\n",
        "e:{\"finishReason\":\"stop\",\"usage\":{\"promptTokens\":3,\"completionTokens\":4},\"isContinued\":false}\n",
        "d:{\"finishReason\":\"stop\",\"usage\":{\"promptTokens\":3,\"completionTokens\":4},\"threadId\":\"t9\"}\n",
    );
    let evs = parse_all(&[stream.as_bytes()]).unwrap();
    let kinds: Vec<String> = evs
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "step_start",
            "text",
            "data",
            "annotations",
            "tool_call_start",
            "tool_call_delta",
            "tool_call",
            "tool_result",
            "reasoning",
            "redacted_reasoning",
            "reasoning_signature",
            "source",
            "file",
            "step_finish",
            "finish"
        ]
    );
    let Event::ToolResult { result, .. } = &evs[7] else {
        panic!()
    };
    assert_eq!(search_results(result)[0].location, "https://d/x");
    assert_eq!(
        search_results(&json!([{"path": "/p", "metadata": {"title": "P"}}]))[0]
            .title
            .as_deref(),
        Some("P")
    );
    let Event::Finish {
        thread_id, usage, ..
    } = &evs[14]
    else {
        panic!()
    };
    assert_eq!(
        (thread_id.as_deref(), usage.unwrap().completion_tokens),
        (Some("t9"), 4)
    );
}

#[test]
fn errors_name_the_line() {
    let cases = [
        ("0:\"a\"\nz:1\n", "line 2: unknown part code \"z\""),
        (
            "0:\"a\"\n0:\"b\n",
            "line 2: invalid JSON in part '0': EOF while parsing a string at line 1 column 2",
        ),
        ("0:5\n", "line 1: part '0' must be a string"),
        ("no colon\n", "line 1: no ':' after the part code"),
        (
            "d:{\"finishReason\":\"bored\"}\n",
            "line 1: unknown finishReason \"bored\"",
        ),
        ("0:\"a\"\n", "line 1: stream ended before its finish part"),
        (
            "0:\"\u{0}\"\n",
            "line 1: invalid JSON in part '0': control character (\\u0000-\\u001F) found while parsing a string at line 1 column 2",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            parse_all(&[input.as_bytes()]).unwrap_err(),
            want,
            "{input:?}"
        );
    }
    let mut p = Parser::new();
    assert_eq!(
        p.feed(b"0:\"\xff\"\n").unwrap_err().to_string(),
        "line 1: not valid UTF-8"
    );
    let mut p = Parser::new();
    let big = vec![b'a'; 1 << 20];
    let mut err = None;
    for _ in 0..17 {
        if let Err(e) = p.feed(&big) {
            err = Some(e.to_string());
            break;
        }
    }
    assert_eq!(err.unwrap(), "line 1: line longer than 16 MiB");
    // An error part is an event; the client turns it into the answer's error.
    assert_eq!(
        parse_all(&[b"3:\"overloaded\"\nd:{\"finishReason\":\"error\"}\n"]).unwrap()[0],
        Event::Error {
            message: "overloaded".into()
        }
    );
}
