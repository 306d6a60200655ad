//! What installs docpipe beside its binary: the completions and man pages it generates from its
//! own command line (the Debian package ships them), and the keys systemd hands over
//! (`LoadCredential=`: a relative key file is read from `$CREDENTIALS_DIRECTORY`).

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_docpipe"))
}

#[test]
fn completions_and_man_pages_come_from_the_command_line() {
    let bash = bin().args(["completions", "bash"]).output().unwrap();
    assert_eq!(bash.status.code(), Some(0));
    let script = String::from_utf8(bash.stdout).unwrap();
    assert!(script.starts_with("_docpipe() {\n"), "{script}");
    assert!(script.contains("complete -F _docpipe -o nosort -o bashdefault -o default docpipe"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("docpipe.bash");
    std::fs::write(&file, &script).unwrap();
    let parsed = Command::new("bash").arg("-n").arg(&file).status().unwrap();
    assert!(parsed.success());
    let zsh = bin().args(["completions", "zsh"]).output().unwrap();
    assert!(String::from_utf8_lossy(&zsh.stdout).starts_with("#compdef docpipe\n"));
    let fish = bin().args(["completions", "fish"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&fish.stdout)
            .contains("complete -c docpipe -n \"__fish_docpipe_needs_command\" -f -a \"export\"")
    );
    let tcsh = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(tcsh.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&tcsh.stderr)
            .starts_with("error: invalid value 'tcsh' for '<SHELL>'\n  [possible values: bash, elvish, fish, powershell, zsh]"),
        "{}",
        String::from_utf8_lossy(&tcsh.stderr)
    );

    let man = dir.path().join("man1");
    let out = bin().arg("manpages").arg(&man).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("23 man pages written into {}\n", man.display())
    );
    let mut pages: Vec<String> = std::fs::read_dir(&man)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let subcommands = [
        "agents",
        "ask",
        "backfill",
        "check",
        "completions",
        "demo",
        "emulate",
        "export",
        "init",
        "rules",
        "rules-approve",
        "rules-check",
        "rules-impact",
        "rules-pending",
        "rules-reject",
        "rules-run",
        "run",
        "status",
        "trends",
        "validate",
        "warehouse",
        "warehouse-sync",
    ];
    let mut expected: Vec<String> = subcommands
        .iter()
        .map(|s| format!("docpipe-{s}.1"))
        .collect();
    expected.push("docpipe.1".into());
    expected.sort();
    assert_eq!(pages, expected);
    let top = std::fs::read_to_string(man.join("docpipe.1")).unwrap();
    assert!(
        top.starts_with(".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH docpipe 1"),
        "{top}"
    );
    let check = std::fs::read_to_string(man.join("docpipe-rules-check.1")).unwrap();
    assert!(
        check.contains("docpipe\\-rules\\-check \\- Evaluate every rule over the trend tables"),
        "{check}"
    );
    // The hidden command that writes them has no page of its own.
    assert!(!man.join("docpipe-manpages.1").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_key_file_is_read_from_systemds_credentials() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("docpipe.toml");
    let text = config(&live.server.base_url(), &dir.path().join("out"), "").replace(
        "admin_key_env = \"DOCPIPE_IT_ADMIN_A\"",
        "admin_key_file = \"docpipe_org-a-admin\"",
    );
    std::fs::write(&cfg, text).unwrap();
    let creds = dir.path().join("credentials");
    std::fs::create_dir(&creds).unwrap();
    let key = creds.join("docpipe_org-a-admin");
    std::fs::write(&key, format!("{ADMIN_A}\n")).unwrap();
    // systemd grants the service's user the credential through an ACL, which shows as group
    // bits: no other user reads it, so docpipe takes it.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o440)).unwrap();
    let check = |credentials: Option<&std::path::Path>| {
        let mut cmd = docpipe_command(&cfg, &["check"]);
        match credentials {
            Some(c) => cmd.env("CREDENTIALS_DIRECTORY", c),
            None => cmd.env_remove("CREDENTIALS_DIRECTORY"),
        };
        cmd.output().unwrap()
    };
    let ok = check(Some(&creds));
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // The same mode outside the credentials' folder is refused.
    let outside = dir.path().join("docpipe_org-a-admin");
    std::fs::copy(&key, &outside).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o440)).unwrap();
    let exposed = check(None);
    assert_eq!(exposed.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&exposed.stderr).trim(),
        format!(
            "error: organization org-a: the key file {0} may be read by others (mode 0440): `chmod 600 {0}`, so that only its owner reads it",
            outside.display()
        )
    );
    std::fs::remove_file(&outside).unwrap();
    // Without systemd's credentials the name is the config folder's file, which is not there.
    let missing = check(None);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        format!(
            "error: organization org-a: the key file {} cannot be read: No such file or directory (os error 2): it must hold the admin API key",
            dir.path().join("docpipe_org-a-admin").display()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_json_log_lines_keep_their_targets() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("docpipe.toml");
    std::fs::write(
        &cfg,
        config(&live.server.base_url(), &dir.path().join("out"), ""),
    )
    .unwrap();
    let range = [
        "backfill",
        "--from",
        "2026-03-08",
        "--to",
        "2026-03-10",
        "--project",
        "beta",
    ];
    let out = docpipe_command(&cfg, &[&["--log-format", "json"][..], &range[..]].concat())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["fields"]["message"] == "window written")
        .collect();
    assert_eq!(written.len(), 3, "{written:?}");
    for line in &written {
        assert_eq!(line["target"], "docpipe::events");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["fields"]["dataset"], "page_views");
        assert_eq!(line["fields"]["project"], "beta");
    }
}
