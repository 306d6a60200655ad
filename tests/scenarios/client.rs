//! The scenario half of `tests/it/client.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_in_a_continued_thread_sends_the_conversation_as_the_client_library_does() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = assistant_config(dir.path(), &live.server.base_url());
    let ask = |args: &[&str]| {
        let mut all = vec!["ask", "--json"];
        all.extend(args);
        let run = docpipe_command(&cfg, &all)
            .env("DOCPIPE_IT_ASSIST_A", ASSIST_A)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&run.stdout).to_string();
        assert!(
            run.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let last: serde_json::Value = serde_json::from_str(said.lines().last().unwrap()).unwrap();
        let text: String = said
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == "text")
            .map(|e| e["text"].as_str().unwrap().to_string())
            .collect();
        (last, text)
    };
    let (first, answer) = ask(&["webhooks"]);
    let id = first["thread_id"].as_str().unwrap().to_string();
    let key = first["thread_key"].as_str().unwrap().to_string();
    let (_, again) = ask(&["--thread", &id, "--thread-key", &key, "qqqzz xyzzy?"]);
    // The service got the conversation: the question, then the question, its answer and the
    // new question.
    assert_eq!(
        live.emu().thread_conversations(&id).unwrap(),
        [vec!["user"], vec!["user", "assistant", "user"]]
    );
    // Kept beside the output (never the key): each answer as its stream gave it.
    let kept = std::fs::read_to_string(out.join(format!(".threads/{id}.json"))).unwrap();
    assert!(!kept.contains(&key), "{kept}");
    let kept: Vec<serde_json::Value> = serde_json::from_str(&kept).unwrap();
    let roles: Vec<&str> = kept.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(kept[1]["content"], answer.as_str());
    assert_eq!(kept[3]["content"], again.as_str());
    let parts: Vec<&str> = kept[3]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        parts,
        [
            "step-start",
            "text",
            "tool-invocation",
            "step-start",
            "tool-invocation",
            "step-start",
            "text"
        ]
    );
    let marked = &kept[3]["parts"][4]["toolInvocation"];
    assert_eq!(
        (
            &marked["state"],
            &marked["step"],
            &marked["toolName"],
            &marked["result"]
        ),
        (
            &serde_json::json!("result"),
            &serde_json::json!(1),
            &serde_json::json!("markNotFound"),
            &serde_json::json!({"acknowledged": true})
        )
    );
    // A kept conversation that is a FIFO (it would block for ever) or /dev/zero (it would never
    // end) is refused by name, exit 2, before anything is sent.
    let kept = out.join(format!(".threads/{id}.json"));
    let asked = live.emu().thread_conversations(&id).unwrap().len();
    for make in ["fifo", "zero"] {
        std::fs::remove_file(&kept).unwrap();
        if make == "fifo" {
            let c = std::ffi::CString::new(kept.to_str().unwrap()).unwrap();
            // SAFETY: a path this test made, as a C string that outlives the call.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &kept).unwrap();
        }
        let run = docpipe_command(&cfg, &["ask", "--thread", &id, "--thread-key", &key, "x?"])
            .env("DOCPIPE_IT_ASSIST_A", ASSIST_A)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(2), "{run:?}");
        assert_eq!(
            String::from_utf8_lossy(&run.stderr),
            format!(
                "error: {} is not a regular file (a FIFO, a device or a folder): remove it, and the thread goes on without its earlier messages\n",
                kept.display()
            )
        );
    }
    assert_eq!(live.emu().thread_conversations(&id).unwrap().len(), asked);
}
