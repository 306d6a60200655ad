//! `docpipe status`: what the state database says, after an export and a rule firing.

use crate::common::*;
use docpipe::api::budget::Budget;
use docpipe::config::RawConfig;
use docpipe::events::{Event, Trouble, Troubled};
use docpipe::store::SqliteBudget;
use docpipe::store::ledger::{Ledger, Sent};

#[tokio::test]
async fn status_reports_days_budgets_and_firings() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let text = config(&live.server.base_url(), &out, "").replace(
        "id = \"beta\"\norganization = \"org-a\"",
        "id = \"beta\"\norganization = \"org-a\"\nstart_date = \"2026-03-10\"",
    );
    // The rules of the status: `r` (for alpha, cooling down 6 hours) and a file that does not
    // load.
    let jobs = dir.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    let rule_text = "enabled = true\nname = \"r\"\nproject = \"alpha\"\njob = \"job_ok\"\ncooldown = \"6h\"\nwhen = \"SELECT 1\"\nprompt = \"x\"\n";
    std::fs::write(jobs.join("r.toml"), rule_text).unwrap();
    // `q`, of beta, whose last run failed (a rule gone from the folder would not be listed).
    std::fs::write(
        jobs.join("q.toml"),
        rule_text
            .replace("\"alpha\"", "\"beta\"")
            .replace("\"r\"", "\"q\""),
    )
    .unwrap();
    std::fs::write(
        jobs.join("broken.toml"),
        rule_text
            .replace("\"alpha\"", "\"nope\"")
            .replace("\"r\"", "\"b\""),
    )
    .unwrap();
    let text = format!("{text}\n[rules]\ndir = \"{}\"\n", jobs.display());
    let settings = RawConfig::parse(&text, "t.toml")
        .unwrap()
        .validate("t.toml")
        .unwrap();
    let before =
        docpipe::cli::status::describe(&settings, docpipe::clock::ManualClock::new(noon()), 5)
            .await
            .unwrap();
    assert_eq!(
        before,
        format!(
            "nothing exported yet: no state database at {}/state.sqlite\n",
            out.display()
        )
    );
    exported(&live, &out, &[("2026-03-01", "2026-03-15")]).await;
    // Requests of other processes in the shared log, and a firing in the ledger.
    let now = noon();
    let state = out.join("state.sqlite");
    let budget = SqliteBudget::open(&state).unwrap();
    for i in 0..3 {
        budget
            .try_take(
                "analytics:org-a",
                100,
                now - chrono::Duration::minutes(30 + i),
            )
            .unwrap();
    }
    budget
        .try_take("analytics:org-b", 100, now - chrono::Duration::minutes(90))
        .unwrap();
    budget.try_take("agent:alpha", 100, now).unwrap();
    let rule = docpipe::rules::Rule::parse(rule_text, "r.toml", &["alpha".to_string()]).unwrap();
    let ledger = Ledger::open(&state).unwrap();
    let id = ledger
        .begin(
            rule.key(),
            Some("job_ok"),
            "x",
            "0123456789abcdef",
            2,
            &[],
            now,
        )
        .unwrap()
        .unwrap();
    let mut firing = ledger.all().unwrap().pop().unwrap();
    assert_eq!(firing.id, id);
    firing.sent = Sent::Sent;
    firing.status = Some("completed".into());
    firing.pr_link = Some("https://github.com/org-a/docs/pull/7".into());
    firing.seconds_to_done = Some(7.0);
    ledger.update(&firing, now).unwrap();

    let store = docpipe::store::Store::open(&state).unwrap();
    store
        .queue()
        .push(
            &["beta".to_string()],
            day("2026-02-01"),
            day("2026-03-02"),
            now,
        )
        .unwrap();
    // Two daemons on this state: one alive, holding the backfill; one cut off 10 minutes ago.
    let (min, sec) = (chrono::Duration::minutes, chrono::Duration::seconds);
    store.queue().claim("box-1:41", now, min(10)).unwrap();
    let daemons = store.daemons();
    daemons
        .beat("box-1:41", now - min(60), now - sec(20))
        .unwrap();
    daemons
        .beat("box-2:77", now - min(180), now - min(10))
        .unwrap();
    daemons.beat("box-3:9", now - min(5), now - min(5)).unwrap();
    daemons.leave("box-3:9").unwrap();
    // A window that failed, one written after failing, and a rule whose last run failed.
    let at = now - min(20);
    for (project, d, reason) in [
        (
            "gamma",
            "2026-03-15",
            "the service answered 502: bad gateway",
        ),
        ("alpha", "2026-03-14", "timeout"),
    ] {
        store.receive(&Event::Failed {
            dataset: "page_views",
            project,
            trouble: Some(Troubled {
                day: day(d),
                window: d,
                reason,
                at,
                kind: Trouble::Failed,
            }),
        });
    }
    store.receive(&Event::Written {
        dataset: "page_views",
        project: "alpha",
        window: "2026-03-14",
        day: Some(day("2026-03-14")),
        rows: 3,
        rejected: 0,
        requests: 1,
        run_rows: 3,
        run_requests: 1,
    });
    store.receive(&Event::RuleRan {
        rule: "q",
        project: "beta",
        at,
        outcome: docpipe::events::RunOutcome::Failed,
        rows: None,
        line: "rule in q.toml: no such table: dialy",
    });
    drop(store);
    let status =
        docpipe::cli::status::describe(&settings, docpipe::clock::ManualClock::new(now), 5)
            .await
            .unwrap();
    let provisional = "4 provisional (2026-03-12, 2026-03-13, 2026-03-14, 2026-03-15)";
    assert_eq!(
        status,
        format!(
            "state: {}
project alpha: 15 days exported (2026-03-01..2026-03-15), last final day 2026-03-11, {provisional}; `export` would fetch 15 days from 2026-02-14
project beta: 15 days exported (2026-03-01..2026-03-15), last final day 2026-03-11, {provisional}; `export` would fetch 0 days from 2026-03-10
project gamma: 15 days exported (2026-03-01..2026-03-15), last final day 2026-03-11, {provisional}; `export` would fetch 15 days from 2026-02-14
  page_views 2026-03-15 failed 2026-03-15 11:40 UTC: the service answered 502: bad gateway
export now: 30 of 30 windows due fit this hour's budget, about 30 requests
  12 windows looked at recently enough wait for their turn
ETA org-a: 43 windows, about 43 requests at 95000 an hour (94997 left this hour): export now (15 windows) within this hour's budget; backfill 1 (28 windows) within this hour's budget
ETA org-b: 15 windows, about 15 requests at 95000 an hour (95000 left this hour): export now (15 windows) within this hour's budget
planner, the next 24 hours:
  organization org-a: the config asks for 4 requests an hour (page_views 3.9), the budget gives 95000: it fits.
    requests an hour by dataset: page_views 4.2
    alpha: page_views today <= 1h, days every <= 6h
    beta: page_views today <= 1h, days every <= 6h
  organization org-b: the config asks for 2 requests an hour (page_views 2.0), the budget gives 95000: it fits.
    requests an hour by dataset: page_views 2.4
    gamma: page_views today <= 1h, days every <= 6h
backfill queued (1, held by daemon box-1:41): 2026-02-01..2026-03-02 of beta: 28 windows not final yet, about 28 requests (in the ETA above)
daemon box-1:41: alive (heartbeat 0m ago), started 2026-03-15 11:00:00Z, holds backfill 1
daemon box-2:77: no heartbeat for 10m (stopped without leaving, or cut off), started 2026-03-15 09:00:00Z; what it held is taken over when its lease runs out
budget analytics:org-a: 3 of 95000 requests used in the last hour
key org-a: the admin key (fingerprint 95256e2e80c9) works, first used 2026-03-15 (0 days ago)
budget analytics:org-b: 0 of 95000 requests used in the last hour
key org-b: the admin key (fingerprint 9ba0f6db71bd) works, first used 2026-03-15 (0 days ago)
budget agent:alpha: 1 of 95 follow-ups and job creations used in the last hour
rules: 1 firings; the last:
  2026-03-15 12:00:00Z rule r (alpha): sent follow-up to job job_ok (2 rows, prompt 0123456789ab) -> completed after 7.0 s, PR https://github.com/org-a/docs/pull/7
rule q failed 2026-03-15 11:40 UTC: rule in q.toml: no such table: dialy
rule file problem: {}: project nope is not configured (configured: alpha, beta, gamma)
",
            state.display(),
            jobs.join("broken.toml").display()
        )
    );

    // The same facts as JSON: valid against the schema kept in the repository, and equal to
    // the text's figures.
    let model = docpipe::status::read(&settings, docpipe::clock::ManualClock::new(now), 5)
        .await
        .unwrap();
    let json = serde_json::to_value(&model).unwrap();
    assert_valid_status(&json, dir.path());
    let alpha = &json["projects"][0]["datasets"][0];
    assert_eq!(
        (
            &alpha["name"],
            &alpha["days_final"],
            &alpha["provisional"].as_array().unwrap().len(),
            &alpha["failures"]
        ),
        (
            &serde_json::json!("page_views"),
            &serde_json::json!(11),
            &4,
            &serde_json::json!([])
        )
    );
    let gamma = &json["projects"][2]["datasets"][0];
    assert_eq!(
        gamma["failures"][0]["reason"],
        "the service answered 502: bad gateway"
    );
    let firing = &json["rules"]["firings"][0];
    assert_eq!(firing["pr_link"], "https://github.com/org-a/docs/pull/7");
    // It fired at noon with a 6-hour cooldown.
    assert_eq!(firing["cooling_down_until"], "2026-03-15T18:00:00Z");
    assert_eq!(json["rules"]["runs"][0]["outcome"], "failed");
    let org_a = &json["organizations"][0];
    assert_eq!(
        (&org_a["used_last_hour"], &org_a["room_now"]),
        (&serde_json::json!(3), &serde_json::json!(94997))
    );
    assert_eq!(org_a["hours"].as_array().unwrap().len(), 24);

    // A document that breaks the schema is refused (the check can fail).
    let mut broken = json.clone();
    broken["projects"][0]["datasets"][0]["freshness"] = "green".into();
    let refused = validate_status(&broken, dir.path());
    assert!(refused.contains("'green' is not one of"), "{refused}");
}

/// Validates a status document against `docs/status.schema.json` with Python's jsonschema;
/// the validator's words, empty when valid.
pub fn validate_status(doc: &serde_json::Value, dir: &std::path::Path) -> String {
    let file = dir.join("status.json");
    std::fs::write(&file, serde_json::to_vec(doc).unwrap()).unwrap();
    let schema = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/status.schema.json");
    run_python(
        "import json, sys, jsonschema\nschema = json.load(open(sys.argv[1]))\njsonschema.Draft202012Validator.check_schema(schema)\nv = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)\nerrors = sorted(v.iter_errors(json.load(open(sys.argv[2]))), key=str)\nprint('\\n'.join(e.message for e in errors))",
        &[schema.as_os_str(), file.as_os_str()],
    )
    .trim()
    .to_string()
}

/// Asserts that a status document is valid against the schema.
pub fn assert_valid_status(doc: &serde_json::Value, dir: &std::path::Path) {
    assert_eq!(validate_status(doc, dir), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_hours_budget_used_status_says_when_the_next_request_can_go() {
    // The binary runs on the wall clock: the emulator's stands at the real now.
    let live = Live::start_at(small(), chrono::Utc::now()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = TestConfig {
        per_hour: 3,
        headroom: Some(0),
        start: Some(chrono::Utc::now().date_naive() - chrono::Duration::days(3)),
        ..TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
    }
    .write(&dir.path().join("c.toml"));
    let before = chrono::Utc::now();
    let run = docpipe(&cfg, &["export"], None);
    assert!(run.status.code().is_some(), "{run:?}");
    let after = chrono::Utc::now();
    let json: serde_json::Value =
        serde_json::from_slice(&docpipe(&cfg, &["status", "--json"], None).stdout).unwrap();
    crate::status::assert_valid_status(&json, dir.path());
    let org = json["organizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "org-a")
        .unwrap();
    assert_eq!(
        (org["used_last_hour"].as_u64(), org["room_now"].as_u64()),
        (Some(3), Some(0))
    );
    // An hour after the first of the three requests, to the second (the budget stamps the
    // slots it takes a few seconds ahead).
    let at: chrono::DateTime<chrono::Utc> =
        org["next_request_at"].as_str().unwrap().parse().unwrap();
    assert!(
        at >= before + chrono::Duration::minutes(60) - chrono::Duration::seconds(1)
            && at <= after + chrono::Duration::minutes(60) + chrono::Duration::seconds(10),
        "{at} not an hour after {before}..{after}"
    );
    let text = String::from_utf8_lossy(&docpipe(&cfg, &["status"], None).stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.starts_with("budget analytics:org-a: "))
        .unwrap();
    assert!(
        line.starts_with(&format!(
            "budget analytics:org-a: 3 of 3 requests used in the last hour; next request at {} UTC, in ",
            at.format("%H:%M:%S")
        )) && (line.contains(", in 59m ") || line.ends_with(", in 1h 00m")),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_used_for_85_days_is_flagged_by_check_status_and_the_page() {
    let live = Live::start_at(small(), chrono::Utc::now()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = TestConfig {
        start: Some(chrono::Utc::now().date_naive() - chrono::Duration::days(1)),
        ..TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
    }
    .write(&dir.path().join("c.toml"));
    let run = docpipe(&cfg, &["check"], None);
    assert!(run.status.success(), "{run:?}");
    assert!(!String::from_utf8_lossy(&run.stdout).contains("key org-a:"));
    // The state says the key first worked 85 days ago (as if the daemon had run since).
    let state = docpipe::store::Store::open(&dir.path().join("out/state.sqlite")).unwrap();
    let records = state.key_records().unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    let mut a = records.iter().find(|k| k.org == "org-a").unwrap().clone();
    assert_eq!(a.fingerprint.len(), 12);
    let first_used = chrono::Utc::now() - chrono::Duration::days(85);
    a.first_used = first_used;
    state
        .set_setting("admin_key:org-a", &serde_json::to_string(&a).unwrap())
        .unwrap();
    drop(state);
    let warning = format!(
        "the admin key of organization org-a (fingerprint {}) was first used on {}, 85 days ago; the service's keys expire after 90 days by default (made that day, it expires around {}): make a new one on the API keys page and put it in DOCPIPE_IT_ADMIN_A and restart docpipe (an admin_key_file is read again at every run)",
        a.fingerprint,
        first_used.format("%Y-%m-%d"),
        (first_used + chrono::Duration::days(90)).format("%Y-%m-%d")
    );
    let check = String::from_utf8_lossy(&docpipe(&cfg, &["check"], None).stdout).to_string();
    assert_eq!(
        check
            .lines()
            .filter(|l| l.starts_with("key "))
            .collect::<Vec<_>>(),
        [format!("key org-a: {warning}")],
        "{check}"
    );
    let status = String::from_utf8_lossy(&docpipe(&cfg, &["status"], None).stdout).to_string();
    assert!(
        status.contains(&format!("key org-a: {warning}\n")),
        "{status}"
    );
    assert!(
        status.contains("key org-b: the admin key (fingerprint "),
        "{status}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&docpipe(&cfg, &["status", "--json"], None).stdout).unwrap();
    crate::status::assert_valid_status(&json, dir.path());
    let org = |id: &str| {
        json["organizations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id)
            .unwrap()["key"]
            .clone()
    };
    assert_eq!(org("org-a")["health"], "old");
    assert_eq!(org("org-a")["age_days"], 85);
    assert_eq!(org("org-a")["warning"], warning.as_str());
    assert_eq!(org("org-b")["health"], "fine");
    assert_eq!(org("org-b")["warning"], serde_json::Value::Null);
    // The page shows the same line, escaped as HTML.
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let s = docpipe::status::read(
        &settings,
        std::sync::Arc::new(docpipe::clock::SystemClock),
        5,
    )
    .await
    .unwrap();
    let page = docpipe::status::html::render(&s);
    assert!(
        page.contains(&format!(
            "<p class=\"key short\">{}</p>",
            warning.replace('\'', "&#39;")
        )),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_the_plan_and_the_page_give_one_eta_per_organization_from_one_model() {
    let live = Live::start_at(small(), chrono::Utc::now()).await;
    let dir = tempfile::tempdir().unwrap();
    let today = chrono::Utc::now().date_naive();
    let cfg = TestConfig {
        per_hour: 10,
        headroom: Some(0),
        start: Some(today - chrono::Duration::days(19)),
        ..TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
    }
    .write(&dir.path().join("c.toml"));
    // 60 windows (20 days of 3 projects), and 10 older days of beta queued for the daemon.
    let (from, to) = (
        today - chrono::Duration::days(29),
        today - chrono::Duration::days(20),
    );
    let queued = docpipe(
        &cfg,
        &[
            "backfill",
            "--from",
            &from.to_string(),
            "--to",
            &to.to_string(),
            "--project",
            "beta",
            "--queue",
        ],
        None,
    );
    assert!(queued.status.success(), "{queued:?}");
    let text = String::from_utf8_lossy(&docpipe(&cfg, &["status"], None).stdout).to_string();
    let json: serde_json::Value =
        serde_json::from_slice(&docpipe(&cfg, &["status", "--json"], None).stdout).unwrap();
    crate::status::assert_valid_status(&json, dir.path());
    let plan =
        String::from_utf8_lossy(&docpipe(&cfg, &["export", "--dry-run"], None).stdout).to_string();
    // One ETA line per organization, and no other ETA on the screen.
    let etas: Vec<&str> = text.lines().filter(|l| l.starts_with("ETA ")).collect();
    assert_eq!(etas.len(), 2, "{text}");
    assert_eq!(
        text.matches("ETA").count(),
        3,
        "the two, and the backfill's pointer: {text}"
    );
    assert!(!text.contains("will be in within"), "{text}");
    let org = |id: &str| {
        json["organizations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id)
            .unwrap()
            .clone()
    };
    let a = org("org-a");
    let parts = a["eta"]["parts"].as_array().unwrap();
    let hours = |what: &str| {
        parts
            .iter()
            .find(|p| p["what"] == what)
            .map(|p| p["hours"].as_u64().unwrap())
            .unwrap()
    };
    let id = json["backfills"][0]["id"].as_i64().unwrap();
    let (now_h, back_h) = (hours("export now"), hours(&format!("backfill {id}")));
    assert!(now_h > 0 && back_h >= now_h, "{a:#}");
    // The figures `status --json` gives elsewhere are this model's.
    assert_eq!(json["export_now"]["eta_secs"].as_u64(), Some(now_h * 3600));
    assert_eq!(
        json["backfills"][0]["eta_secs"].as_u64(),
        Some(back_h * 3600)
    );
    assert_eq!(a["eta"]["hours"].as_u64(), Some(back_h));
    // The line says which windows wait for which hour, as the JSON has them.
    assert!(
        etas[0].starts_with(&format!(
            "ETA org-a: {} windows, about {} requests at 10 an hour (",
            a["eta"]["windows"], a["eta"]["requests"]
        )) && etas[0].contains(&format!("backfill {id} (10 windows) in the hour from ")),
        "{}",
        etas[0]
    );
    // Nothing was walked yet: the ETA says whose windows are a guess.
    assert!(
        etas[0].ends_with(
            "; guessed, never walked (the first walk measures them): page_views alpha, page_views beta"
        ),
        "{}",
        etas[0]
    );
    assert_eq!(
        a["eta"]["guessed"],
        serde_json::json!(["page_views alpha", "page_views beta"])
    );
    // The plan of `export --dry-run` reckons the same hours for the windows due now.
    assert!(
        plan.contains(&format!("  ETA: about {now_h} h at the budget")),
        "{plan}\n{text}"
    );
}
