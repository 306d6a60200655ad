//! The documentation stays true: every config field is in the reference, every relative link
//! of the README and `docs/` resolves (file and heading), and the README stays a front door.

use crate::common::*;

/// The fields a config section accepts, as the loader's error for an unknown one lists them.
fn fields_of(section: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let text = match section {
        "" => "zz_unknown = 1\n[service]\nbase_url = \"http://x\"\n".to_string(),
        "[service]" => "[service]\nbase_url = \"http://x\"\nzz_unknown = 1\n".to_string(),
        s => format!("[service]\nbase_url = \"http://x\"\n{s}\nzz_unknown = 1\n"),
    };
    std::fs::write(&file, text).unwrap();
    let err = docpipe::config::Settings::load(&file)
        .unwrap_err()
        .to_string();
    named_fields(&err, section)
}

/// The fields an unknown-field error lists: "expected one of `a`, `b`", "expected `a` or `b`",
/// "expected `a`", on the unknown field's line (a missing `id` of the table may follow on a
/// line of its own).
fn named_fields(err: &str, section: &str) -> Vec<String> {
    let list = err
        .split("expected ")
        .nth(1)
        .and_then(|l| l.lines().next())
        .unwrap_or_else(|| panic!("{section}: {err}"));
    list.trim_start_matches("one of ")
        .split(", ")
        .flat_map(|f| f.split(" or "))
        .map(|f| f.trim().trim_matches('`').to_string())
        .collect()
}

#[test]
fn every_config_field_is_in_the_reference() {
    let reference = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let mut missing = Vec::new();
    for section in [
        "",
        "[service]",
        "[[organizations]]",
        "[[projects]]",
        "[export]",
        "[rules]",
        "[daemon]",
        "[freshness]",
        "[freshness.dataset.searches]",
        "[state]",
        "[alerts]",
        "[warehouse]",
    ] {
        let fields = fields_of(section);
        assert!(!fields.is_empty(), "{section}");
        for f in fields {
            let named = reference.contains(&format!("`{f}`"))
                || reference.contains(&format!("\n{f} ="))
                || reference.contains(&format!("\n# {f} ="))
                || reference.contains(&format!("[{f}]"))
                || reference.contains(&format!("[[{f}]]"));
            if !named {
                missing.push(format!("{section} {f}"));
            }
        }
    }
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "fields missing in docs/config.md"
    );
}

/// A heading's anchor as GitHub makes it.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_resolves_to_a_file_and_a_heading() {
    let mut files = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for part in text.split("](").skip(1) {
            let Some(target) = part.split(')').next() else {
                continue;
            };
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !dest.is_file() {
                broken.push(format!("{}: {target} (no file)", file.display()));
                continue;
            }
            if let Some(a) = anchor {
                let dest_text = std::fs::read_to_string(&dest).unwrap();
                if !anchors(&dest_text).iter().any(|x| x == a) {
                    broken.push(format!("{}: {target} (no heading)", file.display()));
                }
            }
        }
    }
    assert_eq!(broken, Vec::<String>::new());
    assert!(checked >= 10, "{checked} links checked");
}

#[test]
fn the_readme_is_a_front_door_of_at_most_1500_words_with_the_two_commands() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let words = readme.split_whitespace().count();
    assert!(words <= 1500, "{words} words: reference belongs in docs/");
    assert!(readme.contains("cargo run --locked -- demo\n"));
    assert!(readme.contains("bash .ci/run\n"));
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.contains("cargo test --locked"), "{ci}");
}

/// The fields of a section of the emulator's data file, as its reader names them when it
/// meets one it does not know.
fn data_fields_of(section: &str) -> Vec<String> {
    let text = match section {
        "" => "start_date = \"2026-01-01\"\nzz_unknown = 1\n".to_string(),
        s => format!("start_date = \"2026-01-01\"\n{s}\nzz_unknown = 1\n"),
    };
    let err = docpipe::emulator::data::DataFile::parse(&text, "d.toml")
        .unwrap_err()
        .to_string();
    named_fields(&err, section)
}

#[test]
fn every_field_of_the_emulators_data_file_is_in_docs_service_md() {
    let reference = std::fs::read_to_string(root().join("docs/service.md")).unwrap();
    let mut missing = Vec::new();
    for section in [
        "",
        "[[organizations]]",
        "[[projects]]",
        "[[domains]]",
        "[[jobs]]",
        "[limits]",
        "[faults]",
        "[impact]",
        "[[readers]]",
    ] {
        let fields = data_fields_of(section);
        assert!(fields.len() > 2, "{section}: {fields:?}");
        for f in fields {
            let named = [format!("`{f}`"), format!("`[{f}]`"), format!("`[[{f}]]`")]
                .iter()
                .any(|n| reference.contains(n.as_str()));
            if !named {
                missing.push(format!("{section} {f}"));
            }
        }
    }
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "fields missing in docs/service.md"
    );
}

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
