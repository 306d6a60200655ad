//! The scenario half of `tests/it/emulator.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;

#[test]
fn emulate_says_which_organizations_keys_and_projects_it_serves() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .args(["emulate", "--addr", "127.0.0.1:0", "--data"])
        .arg(root().join("sample_data/small.toml"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let last = line.starts_with("data from ");
        said.push(line);
        if last {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        said[0].starts_with("emulator listening on http://127.0.0.1:"),
        "{said:?}"
    );
    assert_eq!(
        said[1..],
        [
            "organization org-a: admin keys mint_test_admin_a; read-only admin keys mint_test_readonly_a; assistant keys mint_dsc_test_assistant_a; expired keys mint_test_expired_a; user keys mint_us_test_user_a",
            "  project alpha: 620 pages, about 9000 views a weekday",
            "  project beta: 40 pages, about 300 views a weekday",
            "  assistant domain alpha-docs: answers from alpha",
            "organization org-b: admin keys mint_test_admin_b; assistant keys mint_dsc_test_assistant_b",
            "  project gamma: 30 pages, about 200 views a weekday",
            "data from 2026-03-01 (seed 7); limits an hour: 100 analytics requests an organization, 100 agent-job writes a project, 10000 assistant messages an organization; jobs run 5 s",
        ]
    );
}
