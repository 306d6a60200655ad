//! `docpipe check`: the fewest requests that prove a set-up, against the emulator.

use crate::common::*;
use std::collections::BTreeMap;

/// A config of two organizations: alpha (every default dataset, a rule following up job_ok),
/// beta (page views) of org-a, gamma (page views, searches, assistant turns and threads) of
/// org-b; org-a's key from `key_a_env`.
fn setup(dir: &std::path::Path, base_url: &str, key_a_env: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(
        dir.join("jobs/follow.toml"),
        latest_day_rule("follow", "job_ok", ""),
    )
    .unwrap();
    let cfg = dir.join("docpipe.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"[service]
base_url = "{base_url}"
[[organizations]]
id = "org-a"
admin_key_env = "{key_a_env}"
[[organizations]]
id = "org-b"
admin_key_env = "DOCPIPE_IT_ADMIN_B"
[[projects]]
id = "alpha"
organization = "org-a"
[[projects]]
id = "beta"
organization = "org-a"
datasets = ["page_views"]
[[projects]]
id = "gamma"
organization = "org-b"
datasets = ["page_views", "searches", "assistant", "threads"]
[export]
output_dir = "{}"
"#,
            dir.join("out").display()
        ),
    )
    .unwrap();
    cfg
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn sent(live: &Live) -> u64 {
    live.emu().stats().values().map(|s| s.requests).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_config_works_in_the_requests_it_announced() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path(), &live.server.base_url(), "DOCPIPE_IT_ADMIN_A");
    let dry = docpipe(&cfg, &["check", "--day", "2026-03-14", "--dry-run"], None);
    assert!(dry.status.success(), "{}", text(&dry));
    assert_eq!(sent(&live), 0, "a dry run sends nothing");
    let captures = dir.path().join("captures");
    let record = captures.to_str().unwrap();
    let run = docpipe(
        &cfg,
        &["check", "--day", "2026-03-14", "--record", record],
        None,
    );
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    assert_eq!(
        std::fs::read_dir(&captures).unwrap().count(),
        14,
        "one capture a response"
    );
    let announced = "check: 13 requests for 2026-03-14: org-a 8 of the 95 analytics requests docpipe takes of its hour's 100 (0 used in the last hour); org-b 3 of the 95 analytics requests docpipe takes of its hour's 100 (0 used in the last hour); up to 1 more for a thread of the day's assistant turns; 1 agent-job read; 1 agent-job write probe (a follow-up to a job that cannot exist: 404 means the key may write; one of the project's 100 agent uses an hour)\n";
    assert!(
        String::from_utf8_lossy(&dry.stdout).starts_with(announced),
        "{}",
        text(&dry)
    );
    assert!(out.starts_with(announced), "{out}");
    let table: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(
        table,
        [
            "PROJECT  DATASET             RESULT",
            "alpha    page_views          works: 250 rows on the first page of 2026-03-14 (more on later pages)",
            "alpha    visitors            works: 250 rows on the first page of 2026-03-14 (more on later pages)",
            "alpha    searches            works: 100 rows on the first page of 2026-03-14 (more on later pages)",
            "alpha    feedback            works: 60 rows on 2026-03-14",
            "alpha    feedback_by_page    works: 57 rows on 2026-03-14",
            "alpha    assistant           works: 118 rows on 2026-03-14",
            "alpha    caller_stats        works: 1 row on 2026-03-14",
            "beta     page_views          works: 35 rows on 2026-03-14",
            "gamma    page_views          works: 27 rows on 2026-03-14",
            "gamma    searches            works: 5 rows on 2026-03-14",
            "gamma    assistant           works: 6 rows on 2026-03-14",
            "gamma    threads             works: a thread of 6 messages",
            "alpha    job job_ok          works: job completed",
            "alpha    agent jobs (write)  works: the admin key of organization org-a may write agent jobs (a follow-up to a job that cannot exist got 404: Job docpipe-check-no-such-job-0000 not found)",
            "all 14 checks work (14 requests sent: 12 analytics, 2 agent-job)",
        ]
    );
    // 13 announced, and the one thread the day's turns gave.
    assert_eq!(sent(&live), 14);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_an_unknown_project_a_dataset_the_plan_lacks_and_a_broken_rule_each_get_their_line()
 {
    let mut data = small();
    data.projects[2].not_in_plan = vec!["searches".into()];
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path(), &live.server.base_url(), "DOCPIPE_IT_WRONG_KEY");
    let text_cfg = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text_cfg.replace(
            "[export]",
            "[[projects]]\nid = \"nw-apii\"\norganization = \"org-b\"\ndatasets = [\"page_views\"]\n[export]",
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("jobs/broken.toml"),
        latest_day_rule("broken", "job_ok", "").replace("\"alpha\"", "\"nope\""),
    )
    .unwrap();
    let run = docpipe_command(&cfg, &["check", "--day", "2026-03-14"])
        .env("DOCPIPE_IT_WRONG_KEY", "mint_test_wrong_a")
        .output()
        .unwrap();
    let out = text(&run);
    assert_eq!(run.status.code(), Some(2), "{out}");
    let table: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(
        table,
        [
            "PROJECT  DATASET             RESULT",
            "alpha    page_views          PROBLEM: the service refused the admin key of organization org-a (401: Invalid API key); check the key in DOCPIPE_IT_WRONG_KEY",
            "alpha    visitors            not sent: the key of organization org-a was refused",
            "alpha    searches            not sent: the key of organization org-a was refused",
            "alpha    feedback            not sent: the key of organization org-a was refused",
            "alpha    feedback_by_page    not sent: the key of organization org-a was refused",
            "alpha    assistant           not sent: the key of organization org-a was refused",
            "alpha    caller_stats        not sent: the key of organization org-a was refused",
            "beta     page_views          not sent: the key of organization org-a was refused",
            "gamma    page_views          works: 27 rows on 2026-03-14",
            "gamma    searches            PROBLEM: forbidden (403: Your plan does not include searches analytics); the key may be of the wrong kind, read-only, outside its IP allow-list, or the plan lacks this feature",
            "gamma    assistant           works: 6 rows on 2026-03-14",
            "gamma    threads             works: a thread of 6 messages",
            "nw-apii  page_views          PROBLEM: project 'nw-apii' is unknown to the service (404: Project not found)",
            &format!(
                "-        rules               PROBLEM: {}: project nope is not configured (configured: alpha, beta, gamma, nw-apii)",
                std::fs::canonicalize(dir.path())
                    .unwrap()
                    .join("jobs/broken.toml")
                    .display()
            ),
            "alpha    job job_ok          not sent: the key of organization org-a was refused",
            "alpha    agent jobs (write)  not sent: the key of organization org-a was refused",
            "error: 4 of 16 checks found a problem (6 requests sent: 6 analytics)",
        ]
    );
    assert_eq!(sent(&live), 6);
}

#[test]
fn init_writes_a_config_that_loads_and_a_rule_that_validates_and_never_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("first/docpipe.toml");
    let init = |extra: &[&str]| {
        let mut args = vec![
            "init",
            "--org",
            "acme",
            "--project",
            "acme-docs",
            "--project",
            "acme-api",
        ];
        args.extend(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
            .arg("--config")
            .arg(&cfg)
            .args(&args)
            .env("DOCPIPE_ACME_ADMIN_KEY", "mint_secret_never_written")
            .output()
            .unwrap()
    };
    let first = init(&[]);
    assert!(first.status.success(), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        stdout.contains("export DOCPIPE_ACME_ADMIN_KEY=mint_..."),
        "{stdout}"
    );
    assert!(stdout.contains(" check "), "{stdout}");
    assert!(
        stdout.contains(" backfill --from <first day> --queue "),
        "{stdout}"
    );
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    assert_eq!(settings.project_ids(), ["acme-docs", "acme-api"]);
    assert_eq!(settings.base_url, "https://api.mintlify.com");
    assert_eq!(
        settings.organizations[0].admin_key,
        Some(docpipe::api::KeySource::Env(
            "DOCPIPE_ACME_ADMIN_KEY".into()
        ))
    );
    assert_eq!(settings.output_dir, dir.path().join("first/docpipe-data"));
    for f in files_below(dir.path()) {
        let body = std::fs::read_to_string(dir.path().join(&f)).unwrap();
        assert!(
            !body.contains("mint_secret_never_written"),
            "{}",
            f.display()
        );
    }
    // The example rule is valid against the config.
    let validate = docpipe_command(&cfg, &["validate"])
        .env("DOCPIPE_ACME_ADMIN_KEY", "mint_x")
        .output()
        .unwrap();
    assert!(validate.status.success(), "{}", text(&validate));
    assert!(
        text(&validate).contains("1 rules, all valid"),
        "{}",
        text(&validate)
    );
    // A second init does not overwrite; bad ids are refused before anything is written.
    let again = init(&[]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&again.stderr),
        format!(
            "error: {} exists: pass --force to overwrite it, or --config another path\n",
            cfg.display()
        )
    );
    let bad = init(&["--force", "--key-env", "lower case"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("--key-env \"lower case\" is not an environment variable name"));
}

/// The analytics requests the emulator served, by organization (its projects) and dataset.
fn served_by(live: &Live) -> BTreeMap<(String, String), u64> {
    let org = |p: &str| if p == "gamma" { "org-b" } else { "org-a" };
    let dataset = |op: &'static str| match op {
        "views" => "page_views",
        "conversations" => "assistant",
        "thread" => "threads",
        other => other,
    };
    let mut out = BTreeMap::new();
    for (op, s) in live.emu().stats() {
        if matches!(op, "job_create" | "job_get" | "job_message" | "assistant") {
            continue;
        }
        for (project, n) in &s.by_project {
            *out.entry((org(project).to_string(), dataset(op).to_string()))
                .or_default() += *n;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_backfill_and_export_count_each_request_once_on_every_surface() {
    // The binary's clock is the system's: the emulator's too, so that the budget's hour is
    // the same hour.
    let now = chrono::Utc::now();
    let live = Live::start_at(small(), now).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path(), &live.server.base_url(), "DOCPIPE_IT_ADMIN_A");
    let from = (now.date_naive() - chrono::Duration::days(6)).to_string();
    // What each command says it sent: check's analytics requests, the runs' summaries.
    let mut said = 0u64;
    let mut checked = 0u64;
    for (args, count) in [
        (vec!["check"], " analytics, "),
        (
            vec!["backfill", "--from", from.as_str(), "--project", "alpha"],
            " analytics requests in all",
        ),
        (
            vec!["export", "--project", "alpha"],
            " analytics requests in all",
        ),
    ] {
        let run = docpipe(&cfg, &args, None);
        let out = text(&run);
        assert!(run.status.success(), "{out}");
        let sent = out
            .lines()
            .find_map(|l| {
                let (before, _) = l.split_once(count)?;
                before.rsplit(' ').next()?.parse::<u64>().ok()
            })
            .unwrap_or_else(|| panic!("{args:?}: no count in {out}"));
        said += sent;
        if args[0] == "check" {
            checked = sent;
        }
        // The estimate the run is measured against: within 10%, or the plan says why not.
        if let Some(expected) = out.lines().find_map(|l| {
            let (_, after) = l.split_once("(the plan expected about ")?;
            after.split(')').next()?.parse::<u64>().ok()
        }) {
            let near = sent.abs_diff(expected) * 10 <= expected;
            assert!(near || out.contains("  guessed, never walked: "), "{out}");
        }
    }
    let served = served_by(&live);
    let total: u64 = served.values().sum();
    assert_eq!(said, total);
    let per_org = |o: &str| -> u64 {
        served
            .iter()
            .filter(|((org, _), _)| org == o)
            .map(|(_, n)| n)
            .sum()
    };
    let want_used = BTreeMap::from([
        ("org-a".to_string(), per_org("org-a")),
        ("org-b".to_string(), per_org("org-b")),
    ]);
    // status --json: each organization's last hour, the sum of its hours, by dataset.
    let status = docpipe(&cfg, &["status", "--json"], None);
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let (used, charted) = counted(&json);
    assert_eq!(charted, served);
    assert_eq!(used, want_used);
    // Each request under the purpose it was sent for, counted where the client sent it.
    let purpose = |p: &str| -> u64 {
        json["organizations"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|o| o["hours"].as_array().unwrap())
            .filter_map(|h| h["by_purpose"][p].as_u64())
            .sum()
    };
    assert!(checked > 0);
    assert_eq!(purpose("check"), checked);
    assert_eq!(
        purpose("check")
            + purpose("walk")
            + purpose("probe")
            + purpose("backfill")
            + purpose("thread"),
        total
    );
    // The daemon's /status.json and /metrics, its router over a context opened once.
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let clock = docpipe::clock::system();
    let shared = docpipe::daemon::StatusContext::default();
    let ctx = docpipe::app::Context::shared(settings.clone(), clock.clone())
        .await
        .unwrap();
    assert!(shared.set(std::sync::Arc::new(ctx)).is_ok());
    let app = docpipe::daemon::health_router(None, settings, clock, shared, None);
    let (addr, _task) =
        docpipe::daemon::serve_status("127.0.0.1:0".parse().unwrap(), app, std::future::pending())
            .await
            .unwrap();
    let page: serde_json::Value = crate::common::http_get(format!("http://{addr}/status.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(counted(&page), (want_used.clone(), served.clone()));
    let metrics = crate::common::http_get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut hour = BTreeMap::new();
    let mut day = BTreeMap::new();
    for l in metrics.lines().filter(|l| !l.starts_with('#')) {
        let (series, n) = l.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        let label = |name: &str| {
            let (_, v) = series.split_once(&format!("{name}=\"")).unwrap();
            v.split('"').next().unwrap().to_string()
        };
        if series.starts_with("docpipe_budget_used_last_hour{") {
            hour.insert(label("organization"), n);
        } else if series.starts_with("docpipe_requests_spent_24h{") {
            day.insert((label("organization"), label("dataset")), n);
        }
    }
    assert_eq!(hour, want_used, "{metrics}");
    assert_eq!(day, served, "{metrics}");
    // `status` for people says the same last hour.
    let people = text(&docpipe(&cfg, &["status"], None));
    for (org, n) in &used {
        assert!(
            people.contains(&format!("budget analytics:{org}: {n} of ")),
            "{people}"
        );
    }
}

/// What a status document counts: each organization's last hour, and the sum of its 24 hours
/// by organization and dataset (each hour's datasets adding up to its total).
fn counted(json: &serde_json::Value) -> (BTreeMap<String, u64>, BTreeMap<(String, String), u64>) {
    let mut used = BTreeMap::new();
    let mut charted: BTreeMap<(String, String), u64> = BTreeMap::new();
    for o in json["organizations"].as_array().unwrap() {
        let org = o["id"].as_str().unwrap().to_string();
        used.insert(org.clone(), o["used_last_hour"].as_u64().unwrap());
        for h in o["hours"].as_array().unwrap() {
            let by: u64 = h["by_dataset"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(d, n)| {
                    *charted.entry((org.clone(), d.clone())).or_default() += n.as_u64().unwrap();
                    n.as_u64().unwrap()
                })
                .sum();
            assert_eq!(by, h["total"].as_u64().unwrap());
        }
    }
    (used, charted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_assistant_record_records_the_streamed_answer_without_the_thread_key() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = assistant_config(dir.path(), &live.server.base_url());
    let captures = dir.path().join("captures");
    let run = docpipe_command(
        &cfg,
        &[
            "check",
            "--day",
            "2026-03-14",
            "--assistant",
            "--record",
            captures.to_str().unwrap(),
        ],
    )
    .env("DOCPIPE_IT_ASSIST_A", ASSIST_A)
    .output()
    .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    let mut asked = Vec::new();
    for f in std::fs::read_dir(&captures).unwrap() {
        let raw = std::fs::read_to_string(f.unwrap().path()).unwrap();
        assert!(!raw.contains(ASSIST_A) && !raw.contains(ADMIN_A), "{raw}");
        let c: serde_json::Value = serde_json::from_str(&raw).unwrap();
        if c["path"] == "/discovery/v1/assistant/alpha-docs/message" {
            asked.push(c);
        }
    }
    assert_eq!(asked.len(), 1, "one capture of the answer");
    let c = &asked[0];
    assert_eq!(c["method"], "POST");
    assert_eq!(c["status"], 200);
    assert_eq!(c["headers"]["x-vercel-ai-data-stream"], "v1");
    assert_eq!(c["headers"]["x-thread-id"].as_str().unwrap().len(), 26);
    assert_eq!(c["headers"].get("x-thread-key"), None);
    // The whole stream: its first step, and the finish part last.
    let body = c["body"].as_str().unwrap();
    assert!(body.starts_with("f:{\"messageId\":"), "{body}");
    let last = body.lines().last().unwrap();
    assert!(last.starts_with("d:{\"finishReason\":\"stop\""), "{body}");
}

/// A config of one organization whose project exports page views and searches, in Berlin's
/// days.
fn berlin(dir: &std::path::Path, base_url: &str) -> std::path::PathBuf {
    let cfg = dir.join("docpipe.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"[service]
base_url = "{base_url}"
[[organizations]]
id = "org-a"
admin_key_env = "DOCPIPE_IT_ADMIN_A"
[[projects]]
id = "alpha"
organization = "org-a"
start_date = "2026-03-14"
datasets = ["page_views", "searches"]
[export]
output_dir = "{}"
timezone = "Europe/Berlin"
"#,
            dir.join("out").display()
        ),
    )
    .unwrap();
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_deep_finds_a_service_that_filters_by_utc_days_and_passes_one_that_filters_by_instants()
 {
    // A service that filters by the instants asked for: each day's halves add up.
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = berlin(dir.path(), &live.server.base_url());
    let run = docpipe(&cfg, &["check", "--deep", "--day", "2026-03-14"], None);
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "check: 8 requests for 2026-03-14: org-a 8 of the 95 analytics requests docpipe takes of its hour's 100 (0 used in the last hour); --deep: 6 of them for 2 datasets (the day whole and in its two halves, to learn whether the service filters by the instants asked for)",
            "PROJECT  DATASET              RESULT",
            "alpha    page_views           works: 250 rows on the first page of 2026-03-14 (more on later pages)",
            "alpha    searches             works: 100 rows on the first page of 2026-03-14 (more on later pages)",
            "alpha    page_views (halves)  works: 4699 views = 2048 + 2651 in its halves on 2026-03-14: the service filters by the instants asked for",
            "alpha    searches (halves)    works: 1434 searches = 371 + 1063 in its halves on 2026-03-14: the service filters by the instants asked for",
            "instants: organization org-a: the service filters by the instants asked for (kept in the state; `docpipe status` shows it)",
            "all 4 checks work (8 requests sent: 8 analytics)",
        ]
    );
    assert_eq!(sent(&live), 8);
    let status = text(&docpipe(&cfg, &["status"], None));
    assert!(status.contains("instants org-a: the service filters by the instants asked for (page_views (halves): 4699 views = 2048 + 2651 in its halves; searches (halves): 1434 searches = 371 + 1063 in its halves; check --deep on "), "{status}");

    // A service that reads the bounds as UTC days: each half is served the whole UTC days.
    let mut data = small();
    data.faults.utc_days = true;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = berlin(dir.path(), &live.server.base_url());
    let run = docpipe(&cfg, &["check", "--deep", "--day", "2026-03-14"], None);
    let out = text(&run);
    assert_eq!(run.status.code(), Some(2), "{out}");
    let meaning = "the service does not filter by the instants asked for: a day of timezone Europe/Berlin is not that zone's day but the whole UTC days its bounds fall on; exports warn until a check --deep finds otherwise";
    assert_eq!(
        out.lines().skip(4).collect::<Vec<_>>(),
        [
            format!(
                "alpha    page_views (halves)  PROBLEM: 13654 views, but 13654 + 4554 in its halves on 2026-03-14: {meaning}"
            ),
            format!(
                "alpha    searches (halves)    PROBLEM: 2875 searches, but 2875 + 1425 in its halves on 2026-03-14: {meaning}"
            ),
            "instants: organization org-a: the service does not filter by the instants asked for (kept in the state; `docpipe status` shows it)".into(),
            "error: 2 of 4 checks found a problem (8 requests sent: 8 analytics)".into(),
        ]
    );
    let status = text(&docpipe(&cfg, &["status"], None));
    assert!(
        status.contains("instants org-a: the service does not filter by the instants asked for (page_views (halves): 13654 views, but 13654 + 4554 in its halves; searches (halves): 2875 searches, but 2875 + 1425 in its halves; check --deep on "),
        "{status}"
    );
    assert!(
        status.contains("): days of a timezone other than UTC are whole UTC days\n"),
        "{status}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&docpipe(&cfg, &["status", "--json"], None).stdout).unwrap();
    assert_eq!(
        json["organizations"][0]["instants"]["filters_instants"],
        false
    );
    crate::status::assert_valid_status(&json, dir.path());
    // Exports in Berlin's days warn; the finding stays until a check --deep finds otherwise.
    let export = docpipe(&cfg, &["export"], None);
    let err = String::from_utf8_lossy(&export.stderr);
    assert!(export.status.success(), "{err}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("does not filter by the instants"))
            .count(),
        1,
        "{err}"
    );

    // In UTC's days the same service works: a note, not a problem.
    let mut data = small();
    data.faults.utc_days = true;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = berlin(dir.path(), &live.server.base_url());
    let utc = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("Europe/Berlin", "UTC");
    std::fs::write(&cfg, utc).unwrap();
    let run = docpipe(&cfg, &["check", "--deep", "--day", "2026-03-14"], None);
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    assert_eq!(
        out.lines().nth(4),
        Some(
            "alpha    page_views (halves)  NOTE: 4554 views, but 4554 + 4554 in its halves on 2026-03-14: the service does not filter by the instants asked for; this config's UTC days are whole days and not affected, but a timezone other than UTC would get whole UTC days, not that zone's"
        ),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_on_a_large_hourly_budget_counts_what_it_sent_not_what_it_leased() {
    let now = chrono::Utc::now();
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start_at(data, now).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = setup(dir.path(), &live.server.base_url(), "DOCPIPE_IT_ADMIN_A");
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replace(
        "admin_key_env = \"DOCPIPE_IT_ADMIN_A\"\n",
        "admin_key_env = \"DOCPIPE_IT_ADMIN_A\"\nanalytics_per_hour = 100000\n",
    );
    std::fs::write(&cfg, text_cfg).unwrap();
    let run = docpipe(&cfg, &["check"], None);
    assert!(run.status.success(), "{}", text(&run));
    let served = served_by(&live);
    let org_a: u64 = served
        .iter()
        .filter(|((org, _), _)| org == "org-a")
        .map(|(_, n)| n)
        .sum();
    assert!(org_a > 0);
    let status = docpipe(&cfg, &["status", "--json"], None);
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let (used, _) = counted(&json);
    assert_eq!(used["org-a"], org_a, "the leased slots are handed back");
}
