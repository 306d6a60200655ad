//! `docpipe agents` as a user tries a row of their own: the table, a user agent named, a file of
//! theirs read before docpipe's, and a bad file refused in one line with exit code 2.

use std::process::{Command, Output};

fn agents(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .arg("agents")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn docpipe_agents_prints_the_table_and_names_user_agents_with_a_users_file_read_first() {
    let table = stdout(&agents(&[]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 24);
    assert_eq!(
        lines[0],
        "agents table 2026-11-28: 22 named agents, tried in this order (the first whose pattern a user agent contains names it)"
    );
    assert_eq!(lines[1], "  claude-code            Anthropic      coding");
    assert_eq!(
        lines[16],
        "  GPTBot                 OpenAI         training"
    );

    let named = stdout(&agents(&[
        "Claude-User (claude-code/1.0.83; +https://support.anthropic.com/)",
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ChatGPT-User/1.0; +https://openai.com/bot",
    ]));
    assert_eq!(
        named,
        "\"Claude-User (claude-code/1.0.83; +https://support.anthropic.com/)\": claude-code (Anthropic), coding, reading html (table 2026-11-28)\n\
         \"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ChatGPT-User/1.0; +https://openai.com/bot\": ChatGPT-User (OpenAI), assistant, reading html (table 2026-11-28)\n"
    );
    let masked = stdout(&agents(&[
        "--event",
        "docs.content.md.view",
        "--path",
        "/guides/quickstart",
        "Mozilla/5.0 (Macintosh) Safari/605.1.15",
    ]));
    assert_eq!(
        masked,
        "\"Mozilla/5.0 (Macintosh) Safari/605.1.15\": unnamed agent (a browser's user agent), unknown, reading markdown (table 2026-11-28)\n"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("my-agents.toml");
    std::fs::write(
        &file,
        "version = \"acme-1\"\n\n[[agents]]\nagent = \"NewAgentBot\"\noperator = \"Example AI\"\nclass = \"assistant\"\npatterns = [\"NewAgentBot\"]\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let before = stdout(&agents(&["NewAgentBot/2.1"]));
    assert_eq!(
        before,
        "\"NewAgentBot/2.1\": NewAgentBot, unknown, reading html (table 2026-11-28)\n"
    );
    let after = stdout(&agents(&["--file", f, "NewAgentBot/2.1"]));
    assert_eq!(
        after,
        "\"NewAgentBot/2.1\": NewAgentBot (Example AI), assistant, reading html (table 2026-11-28+acme-1)\n"
    );

    std::fs::write(&file, "version = \"acme-1\"\n[generic]\nbots = [\"b\"]\n").unwrap();
    let bad = agents(&["--file", f, "x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        format!("error: {f}: generic: pattern \"b\": at least three characters of one line\n")
    );
}
