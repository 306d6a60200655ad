//! The scenario half of `tests/it/docs.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;

/// The README's block that starts with `after` (the first ```sh block after that line).
fn readme_block(readme: &str, after: &str) -> String {
    let from = readme.find(after).unwrap_or_else(|| panic!("no {after:?}"));
    let rest = &readme[from..];
    let start = rest.find("```sh\n").unwrap() + "```sh\n".len();
    let len = rest[start..].find("```").unwrap();
    rest[start..start + len].to_string()
}

/// The README's emulator rehearsal, run as written by `bash -e` with the binary on the path and
/// a home of its own: every command succeeds, the export's and `status`' lines are those the
/// README quotes. The emulator it starts in the background (on 127.0.0.1:8080, as written) is
/// stopped with the block's process group.
#[test]
fn the_readmes_rehearsal_runs_as_written() {
    use std::os::unix::process::CommandExt;
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme_block(&readme, "To rehearse the same path on the emulator first");
    assert!(block.starts_with("mkdir ~/docs-lake"), "{block}");
    // In a network namespace of its own (loopback up), where 127.0.0.1:8080 is always free,
    // whatever else runs beside the suite (a README's rehearsal, say); where none can be made
    // (not root), on the machine's loopback, which must have the port free.
    let own_network = std::process::Command::new("unshare")
        .args(["-n", "--", "ip", "link", "set", "lo", "up"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        own_network || std::net::TcpListener::bind("127.0.0.1:8080").is_ok(),
        "the rehearsal serves the emulator on 127.0.0.1:8080, which another program holds (and no network namespace of its own could be made: run the suite as root)"
    );
    let home = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_docpipe"))
        .parent()
        .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut command = if own_network {
        let mut c = std::process::Command::new("unshare");
        c.args([
            "-n",
            "--",
            "bash",
            "-c",
            "ip link set lo up && exec bash -e -c \"$0\"",
            &block,
        ]);
        c
    } else {
        let mut c = std::process::Command::new("bash");
        c.args(["-e", "-c", &block]);
        c
    };
    let mut child = command
        .env("HOME", home.path())
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = i32::try_from(child.id()).unwrap();
    // A guard against a wait on the budget (an hour), not a measure: the README gives the time.
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(300) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let finished = child.try_wait().unwrap().is_some();
    // SAFETY: a signal to the process group this test made; no memory is shared.
    unsafe { libc::killpg(group, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        finished,
        "the rehearsal did not end in 5 minutes:\n{stdout}\n{stderr}"
    );
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    let lake = home.path().join("docs-lake");
    assert!(lake.join("docpipe.toml").is_file());
    assert!(lake.join("jobs/search-gaps.toml").is_file());
    // The export's line as the README quotes it, "..." standing for what varies.
    let flat = readme.replace('\n', " ");
    let quoted = flat
        .split("export previews the rule (`")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .expect("the README quotes the export's preview line");
    for piece in quoted.split("...").map(str::trim).filter(|p| !p.is_empty()) {
        assert!(stdout.contains(piece), "{piece:?} not in:\n{stdout}");
    }
    // check, backfill and export took the days, the export sent nothing, status shows the preview.
    assert!(
        stdout.contains("acme-docs  agent jobs (write)  works"),
        "{stdout}"
    );
    // The backfill's three days and today are in (the export after it fills older days with
    // what the hour's budget has left, which depends on the hour of the day: not counted).
    let covered = stdout
        .lines()
        .find_map(|l| l.strip_prefix("project acme-docs: "))
        .and_then(|l| l.split_once(" exported (")?.1.split_once(')'))
        .and_then(|(range, _)| range.split_once(".."))
        .unwrap_or_else(|| panic!("no days exported of acme-docs:\n{stdout}"));
    let today = chrono::Utc::now().date_naive();
    assert!(
        covered.0 <= (today - chrono::Duration::days(2)).to_string().as_str()
            && covered.1 == today.to_string(),
        "{covered:?}"
    );
    assert!(
        stdout.contains("preview: rule search-gaps (acme-docs) would send 5 rows (0 flagged)"),
        "{stdout}"
    );
    assert!(stdout.contains("rules: no firing yet"), "{stdout}");
    // The review step: held, each row shown, approved by a person, sent once.
    for piece in [
        "rule search-gaps (acme-docs): held for review as firing 1 (5 rows, prompt ",
        "firing 1: rule search-gaps (acme-docs), create of job (a new job), held ",
        "  rows (readers' words quoted; a row without a flag may still be an instruction):",
        "  row 5: search_query=\"",
        "approved by me: rule search-gaps (acme-docs): created new job ",
    ] {
        assert!(stdout.contains(piece), "{piece:?} not in:\n{stdout}");
    }
    assert!(
        !stderr.contains("WARN") && !stderr.contains("ERROR"),
        "{stderr}"
    );
}
