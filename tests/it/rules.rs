//! Rules against the emulator: what fires, what is sent (exactly once), what is polled and
//! logged, and what a bad rule file gets.

use crate::common::*;
use docpipe::api::budget::Budget;
use docpipe::api::{Client, ClientSettings, Limits, RetryPolicy};
use docpipe::clock::Clock;
use docpipe::emulator::Op;
use docpipe::emulator::data::DataFile;
use docpipe::rules::engine::{Engine, Report};
use docpipe::rules::{Rule, evaluate};
use docpipe::store::SqliteBudget;
use docpipe::store::ledger::{Sent, Skip};
use docpipe::store::state_path;
use docpipe::trends::{Selection, Tables, compute};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const PROJECTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// An enabled rule; `review = "never"` unless `extra` says: these tests are of the sending (a
/// prompt of paths holds readers' words, which the default review holds; review.rs tests it).
fn rule(name: &str, project: &str, target: &str, when: &str, prompt: &str, extra: &str) -> Rule {
    let review = if extra.contains("review") {
        ""
    } else {
        "review = \"never\"\n"
    };
    let text = format!(
        "enabled = true\nname = {name:?}\nproject = {project:?}\n{target}\nwhen = {when:?}\nprompt = {prompt:?}\n{review}{extra}\n"
    );
    let projects: Vec<String> = PROJECTS.iter().map(|p| p.to_string()).collect();
    Rule::parse(&text, &format!("jobs/{name}.toml"), &projects).unwrap()
}

/// The top pages of the last 7 days: a query with a known answer.
const TOP3: &str = "SELECT path, total_7d FROM pages ORDER BY total_7d DESC, path LIMIT 3";
const TOP3_PROMPT: &str = "Top pages:{% for r in rows %} {{ r.path }}={{ r.total_7d }}{% endfor %}";

/// The same prompt, from the emulator's truth: 7 days to "today" (2026-03-15).
fn top3_from_truth(live: &Live, project: &str) -> String {
    let rows = live
        .emu()
        .truth(project, day("2026-03-09"), day("2026-03-16"))
        .unwrap();
    let mut totals: Vec<(u64, String)> = rows
        .iter()
        .map(|r| (r.human + r.ai, r.path.clone()))
        .collect();
    totals.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    // Paths are readers' words: quoted, after docpipe's block.
    let mut out = format!("{}Top pages:", docpipe::rules::readers::PREAMBLE);
    for (t, p) in totals.iter().take(3) {
        out.push_str(&format!(" {}={t}", docpipe::rules::readers::quote(p)));
    }
    out
}

struct Setup {
    live: Live,
    _dir: tempfile::TempDir,
    out: std::path::PathBuf,
    tables: Tables,
}

/// A folder with `out/`: the test projects exported from 2026-03-01 to "today" (03-15).
async fn two_weeks_exported(live: &Live) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    exported(
        live,
        &dir.path().join("out"),
        &[("2026-03-01", "2026-03-15")],
    )
    .await;
    dir
}

async fn setup(data: DataFile) -> Setup {
    let live = Live::start(data).await;
    let dir = two_weeks_exported(&live).await;
    let out = dir.path().join("out");
    let tables = compute(&out, &Selection::default()).unwrap();
    Setup {
        live,
        _dir: dir,
        out,
        tables,
    }
}

/// An engine over the output folder, sending through a client of org-a with `settings`.
fn engine_with(s: &Setup, agent_per_hour: u32, settings: Option<ClientSettings>) -> Engine {
    let budget: Arc<dyn Budget> = Arc::new(SqliteBudget::open(&state_path(&s.out)).unwrap());
    let limits = Limits {
        agent_per_hour,
        ..open_limits()
    };
    let mut client = s
        .live
        .client_sharing(Some(ADMIN_A), None, limits, budget.clone());
    if let Some(settings) = settings {
        client = Client::new(
            settings,
            "org-a",
            Some(docpipe::api::AdminKey::parse(ADMIN_A, "mint", "t").unwrap()),
            None,
            s.live.clock.clone(),
            budget.clone(),
        );
    }
    let clients: HashMap<String, Client> = ["alpha", "beta"]
        .iter()
        .map(|p| (p.to_string(), client.clone()))
        .collect();
    let limits = ["alpha", "beta"]
        .iter()
        .map(|p| (p.to_string(), agent_per_hour))
        .collect();
    Engine::open(&s.out, budget, limits, s.live.clock.clone())
        .unwrap()
        .with_clients(clients)
}

fn engine(s: &Setup) -> Engine {
    engine_with(s, 100, None)
}

async fn fire(engine: &Engine, rule: &Rule, tables: &Tables) -> Report {
    let eval = evaluate(std::slice::from_ref(rule), tables, Some(engine.memory()))
        .pop()
        .unwrap()
        .unwrap();
    engine.fire(rule, &eval).await.unwrap()
}

fn fired(report: Report) -> docpipe::store::ledger::Firing {
    match report {
        Report::Fired(f) => f,
        other => panic!("expected a firing, got {}", other.line()),
    }
}

#[tokio::test]
async fn a_rule_with_a_key_never_sends_the_same_gap_twice_within_its_key_cooldown() {
    let s = setup(small()).await;
    let engine = engine(&s);
    let top = |n: usize| {
        rule(
            "gaps",
            "alpha",
            "job = \"job_ok\"",
            &format!("SELECT path, total_7d FROM pages ORDER BY total_7d DESC, path LIMIT {n}"),
            "Pages:{% for r in rows %} {{ r.path }}{% endfor %}",
            "key = \"path\"\ncooldown = \"1m\"\nkey_cooldown = \"2h\"\nwait = false",
        )
    };
    let paths = |f: &docpipe::store::ledger::Firing| {
        f.prompt
            .trim_start_matches(docpipe::rules::readers::PREAMBLE)
            .trim_start_matches("Pages: ")
            .split(' ')
            .map(|p| serde_json::from_str::<String>(p).unwrap())
            .collect::<Vec<_>>()
    };
    let first = fired(fire(&engine, &top(3), &s.tables).await);
    assert_eq!(first.rows_matched, 3);
    let sent = paths(&first);
    // Past the rule's cooldown, the three gaps sent are taken out before the query's ORDER BY
    // and LIMIT: the next three take their place (a LIMIT does not trap the key).
    s.live.clock.advance(Duration::from_secs(120));
    let eval = evaluate(
        std::slice::from_ref(&top(3)),
        &s.tables,
        Some(engine.memory()),
    )
    .pop()
    .unwrap()
    .unwrap();
    assert_eq!((eval.matched, eval.left_out, eval.rows.height()), (3, 3, 3));
    let second = fired(fire(&engine, &top(3), &s.tables).await);
    assert_eq!(second.rows_matched, 3);
    let new = paths(&second);
    assert!(new.iter().all(|p| !sent.contains(p)), "{new:?} {sent:?}");
    // The top 5 now are all among the 6 sent: the 5 after those are sent.
    s.live.clock.advance(Duration::from_secs(120));
    let third = fired(fire(&engine, &top(5), &s.tables).await);
    let next = paths(&third);
    assert_eq!(next.len(), 5);
    assert!(
        next.iter().all(|p| !sent.contains(p) && !new.contains(p)),
        "{next:?}"
    );
    // After the key cooldown (2 h), every gap may be sent again: the top 5 of all.
    s.live.clock.advance(Duration::from_secs(2 * 3600 + 60));
    let fourth = fired(fire(&engine, &top(5), &s.tables).await);
    assert_eq!(fourth.rows_matched, 5);
    assert_eq!(paths(&fourth)[..3], sent[..]);
    // A key that is not a column of the query is one clear error.
    let bad = rule(
        "bad",
        "alpha",
        "job = \"job_ok\"",
        TOP3,
        TOP3_PROMPT,
        "key = \"term\"",
    );
    let err = evaluate(std::slice::from_ref(&bad), &s.tables, None)
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "jobs/bad.toml: key: the query returns no column \"term\" (it returns path, total_7d)"
    );
}

#[tokio::test]
async fn a_rule_that_fires_sends_one_follow_up_with_the_rendered_prompt() {
    let s = setup(small()).await;
    let engine = engine(&s);
    let r = rule("top", "alpha", "job = \"job_ok\"", TOP3, TOP3_PROMPT, "");
    let expected = top3_from_truth(&s.live, "alpha");
    let f = fired(fire(&engine, &r, &s.tables).await);
    assert_eq!(f.prompt, expected);
    assert_eq!(
        s.live.emu().job_prompts("alpha", "job_ok").unwrap(),
        vec![expected.clone()]
    );
    assert_eq!(f.sent, Sent::Sent);
    assert_eq!(f.rows_matched, 3);
    assert_eq!(f.job.as_deref(), Some("job_ok"));
    assert_eq!(f.status.as_deref(), Some("completed"));
    let pr = f.pr_link.clone().unwrap();
    assert!(
        pr.starts_with("https://github.com/org-a/docs/pull/"),
        "{pr}"
    );
    // The job runs 5 s; polls at 0, 1, 3 and 7 s (backoff 1, 2, 4) see it end at the last.
    assert_eq!(f.seconds_to_done, Some(7.0));
    assert_eq!(f.error, None);
    assert_eq!(f.prompt_hash, docpipe::rules::prompt_hash(&expected));
    assert_eq!(
        Report::Fired(f.clone()).line(),
        format!(
            "rule top (alpha): sent follow-up to job job_ok (3 rows, prompt {}) -> completed after 7.0 s, PR {pr}",
            &f.prompt_hash[..12]
        )
    );

    // At once again: cooling down. After the cooldown, with the same rows: the same prompt.
    let fired_at = f.fired_at;
    match fire(&engine, &r, &s.tables).await {
        Report::Skipped {
            skip: Skip::CoolingDown { last, until },
            rows: 3,
            ..
        } => {
            assert_eq!(last, fired_at);
            assert_eq!(until, fired_at + chrono::Duration::hours(24));
        }
        other => panic!("{}", other.line()),
    }
    s.live.clock.advance(Duration::from_secs(25 * 3600));
    match fire(&engine, &r, &s.tables).await {
        Report::Skipped {
            skip: Skip::SamePrompt { at },
            ..
        } => assert_eq!(at, fired_at),
        other => panic!("{}", other.line()),
    }
    assert_eq!(
        s.live.emu().job_prompts("alpha", "job_ok").unwrap().len(),
        1
    );
    assert_eq!(s.live.emu().requests(Op::JobMessage, "alpha"), 1);

    // The outcome log: one row, as the ledger has it.
    let files = engine.write_log().unwrap();
    assert_eq!(
        files,
        vec![s.out.join("agent_runs/project=alpha/part-00000.parquet")]
    );
    let rows = parquet_rows(&files[0]);
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].starts_with(&format!(
            "firing_id=1,rule=\"top\",action=\"follow_up\",job=\"job_ok\",fired_at={}",
            "2026-03-15 12:00:00.000000 +00:00"
        )),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].ends_with(&format!(
            "rows_matched=3,sent=\"sent\",status=\"completed\",pr_link=\"{pr}\",seconds_to_done=7.0,error=null,flags=null,dropped=null,held_because=null,decided_by=null,decided_at=null,review_note=null"
        )),
        "{}",
        rows[0]
    );
}

#[tokio::test]
async fn a_rule_with_too_few_rows_does_not_fire_and_sends_nothing() {
    let s = setup(small()).await;
    let engine = engine(&s);
    let r = rule(
        "quiet",
        "alpha",
        "job = \"job_ok\"",
        "SELECT path FROM pages WHERE total_7d > 1000000000",
        "{{ rows[0].path }}",
        "",
    );
    match fire(&engine, &r, &s.tables).await {
        Report::Quiet {
            rows: 0,
            min_rows: 1,
            ..
        } => {}
        other => panic!("{}", other.line()),
    }
    assert_eq!(s.live.emu().requests(Op::JobGet, "alpha"), 0);
    assert!(engine.ledger().all().unwrap().is_empty());
}

#[tokio::test]
async fn a_lost_answer_is_resolved_by_reading_the_job_not_by_sending_again() {
    let mut data = small();
    data.faults.ops = vec!["job_message".into(), "job_create".into()];
    data.faults.drop_rate = 1.0;
    let s = setup(data).await;
    let engine = engine(&s);
    // The follow-up arrives, its answer is lost; the job was completed and is active again.
    let r = rule(
        "lost",
        "alpha",
        "job = \"job_nochange\"",
        TOP3,
        TOP3_PROMPT,
        "",
    );
    let f = fired(fire(&engine, &r, &s.tables).await);
    assert_eq!(f.sent, Sent::Sent);
    assert_eq!(f.status.as_deref(), Some("completed"));
    assert_eq!(f.pr_link, None);
    assert_eq!(f.error, None);
    assert_eq!(
        s.live.emu().job_prompts("alpha", "job_nochange").unwrap(),
        vec![f.prompt.clone()]
    );
    assert_eq!(s.live.emu().requests(Op::JobMessage, "alpha"), 1);

    // A creation whose answer is lost cannot be looked up (there is no job list): unknown, and
    // never sent again, even after its cooldown.
    let r = rule(
        "lost-create",
        "alpha",
        "create = true",
        TOP3,
        TOP3_PROMPT,
        "cooldown = \"1h\"",
    );
    let f = fired(fire(&engine, &r, &s.tables).await);
    assert_eq!(f.sent, Sent::Unknown);
    assert_eq!(f.job, None);
    let error = f.error.unwrap();
    assert!(
        error.starts_with("create job for project alpha: outcome unknown (connection failed: ")
            && error.ends_with("; read the job to see whether it was applied; not sent again"),
        "{error}"
    );
    s.live.clock.advance(Duration::from_secs(2 * 3600));
    assert!(matches!(
        fire(&engine, &r, &s.tables).await,
        Report::Skipped {
            skip: Skip::SamePrompt { .. },
            ..
        }
    ));
    assert_eq!(s.live.emu().requests(Op::JobCreate, "alpha"), 1);
}

#[tokio::test]
async fn a_timed_out_follow_up_is_not_sent_again() {
    let mut data = small();
    data.faults.ops = vec!["job_message".into()];
    data.faults.latency_ms = 800;
    let s = setup(data).await;
    let settings = ClientSettings {
        base_url: s.live.server.base_url(),
        timeout: Duration::from_millis(200),
        retry: RetryPolicy::default(),
        limits: open_limits(),
        record: None,
    };
    let engine = engine_with(&s, 100, Some(settings));
    let r = rule(
        "slow",
        "alpha",
        "job = \"job_ok\"",
        TOP3,
        TOP3_PROMPT,
        "cooldown = \"1h\"",
    );
    let f = fired(fire(&engine, &r, &s.tables).await);
    assert_eq!(f.sent, Sent::Unknown);
    assert!(
        f.error.as_deref().unwrap().starts_with(
            "follow-up for job job_ok of project alpha: outcome unknown (timed out after 0s)"
        ),
        "{:?}",
        f.error
    );
    // The job is polled all the same (it may have received the follow-up).
    assert_eq!(f.status.as_deref(), Some("completed"));
    // One request left docpipe (each attempt takes a slot of the shared budget); the service
    // dropped it with the connection, so the job never received it.
    let budget = SqliteBudget::open(&state_path(&s.out)).unwrap();
    assert_eq!(budget.used("agent:alpha", s.live.clock.now()), 1);
    s.live.clock.advance(Duration::from_secs(2 * 3600));
    assert!(matches!(
        fire(&engine, &r, &s.tables).await,
        Report::Skipped {
            skip: Skip::SamePrompt { .. },
            ..
        }
    ));
    // Not sent again: no request left docpipe in the last hour (the first one's slot has left
    // the budget's hour; a second attempt would have taken one).
    assert_eq!(budget.used("agent:alpha", s.live.clock.now()), 0);
    let ledger = engine.ledger().all().unwrap();
    assert_eq!(ledger.len(), 1);
}

#[tokio::test]
async fn polling_ends_on_every_terminal_status_and_on_the_timeout() {
    let s = setup(small()).await;
    let engine = engine(&s);
    let hash12 = |f: &docpipe::store::ledger::Firing| f.prompt_hash[..12].to_string();

    // completed without a pull request
    let f = fired(
        fire(
            &engine,
            &rule(
                "nochange",
                "alpha",
                "job = \"job_nochange\"",
                TOP3,
                TOP3_PROMPT,
                "",
            ),
            &s.tables,
        )
        .await,
    );
    assert_eq!(
        (f.status.as_deref(), f.pr_link.as_deref()),
        (Some("completed"), None)
    );
    assert!(
        Report::Fired(f)
            .line()
            .ends_with("-> completed after 7.0 s, no pull request")
    );

    // failed: logged with its reason; not a failure of docpipe's
    let f = fired(
        fire(
            &engine,
            &rule("fails", "beta", "job = \"job_fail\"", TOP3, TOP3_PROMPT, ""),
            &s.tables,
        )
        .await,
    );
    assert_eq!(f.sent, Sent::Sent);
    assert_eq!(f.status.as_deref(), Some("failed"));
    assert_eq!(f.error.as_deref(), Some("the job failed"));
    assert_eq!(f.seconds_to_done, Some(7.0));
    assert!(!Report::Fired(f).failed());

    // archived: the service refuses the follow-up (400), and says why
    let f = fired(
        fire(
            &engine,
            &rule(
                "archived",
                "alpha",
                "job = \"job_archived\"",
                TOP3,
                TOP3_PROMPT,
                "",
            ),
            &s.tables,
        )
        .await,
    );
    assert_eq!(f.sent, Sent::Refused);
    assert_eq!(f.status, None);
    assert_eq!(
        f.error.as_deref(),
        Some(
            "follow-up for job job_archived of project alpha: invalid request (400: Job job_archived is archived)"
        )
    );
    assert!(Report::Fired(f).failed());
    // ... and polling an archived job ends at once
    let client = s.live.client(Some(ADMIN_A), None, open_limits());
    let job = client
        .wait_job(
            "alpha",
            "job_archived",
            docpipe::api::jobs::Polling::default(),
        )
        .await
        .unwrap();
    assert_eq!(job.status_str(), "archived");

    // a job that does not exist: nothing sent, the 404 logged; it is tried again next run
    let missing = rule(
        "missing",
        "alpha",
        "job = \"job_nope\"",
        TOP3,
        TOP3_PROMPT,
        "",
    );
    for _ in 0..2 {
        let f = fired(fire(&engine, &missing, &s.tables).await);
        assert_eq!(f.sent, Sent::NotSent);
        assert_eq!(
            f.error.as_deref(),
            Some(
                "get job for job job_nope of project alpha: not found (404: Job job_nope not found)"
            )
        );
        assert_eq!(
            Report::Fired(f.clone()).line(),
            format!(
                "rule missing (alpha): not sent: follow-up to job job_nope (3 rows, prompt {}); get job for job job_nope of project alpha: not found (404: Job job_nope not found)",
                hash12(&f)
            )
        );
    }

    // the timeout: still active after 3 s of polling (the job runs 5 s)
    let f = fired(
        fire(
            &engine,
            &rule(
                "impatient",
                "alpha",
                "job = \"job_ok\"",
                TOP3,
                TOP3_PROMPT,
                "timeout = \"3s\"",
            ),
            &s.tables,
        )
        .await,
    );
    assert_eq!(f.sent, Sent::Sent);
    assert_eq!(f.status.as_deref(), Some("active"));
    assert_eq!(f.seconds_to_done, None);
    assert_eq!(
        f.error.as_deref(),
        Some(
            "gave up polling after the rule's timeout: get job for job job_ok of project alpha: still active after 3s"
        )
    );

    // Every firing is in the ledger and the outcome log, per project.
    let ledger = engine.ledger().all().unwrap();
    let summary: Vec<(String, &str, Option<String>)> = ledger
        .iter()
        .map(|f| (f.rule.clone(), f.sent.as_str(), f.status.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("nochange".into(), "sent", Some("completed".into())),
            ("fails".into(), "sent", Some("failed".into())),
            ("archived".into(), "refused", None),
            ("missing".into(), "not_sent", None),
            ("missing".into(), "not_sent", None),
            ("impatient".into(), "sent", Some("active".into())),
        ]
    );
    let files = engine.write_log().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(parquet_rows(&files[0]).len(), 5);
    assert_eq!(parquet_rows(&files[1]).len(), 1);
}

#[tokio::test]
async fn the_hourly_limit_is_checked_before_recording_and_counted_with_other_users() {
    let s = setup(small()).await;
    let engine = engine_with(&s, 2, None);
    let mut sent = 0;
    for i in 0..3 {
        let r = rule(
            &format!("r{i}"),
            "alpha",
            "create = true",
            TOP3,
            &format!("rule {i}: {TOP3_PROMPT}"),
            "wait = false",
        );
        match fire(&engine, &r, &s.tables).await {
            Report::Fired(f) => {
                assert_eq!(f.sent, Sent::Sent);
                sent += 1;
            }
            Report::Skipped {
                skip: Skip::HourlyLimit { limit: 2 },
                ..
            } => {}
            other => panic!("{}", other.line()),
        }
    }
    assert_eq!(sent, 2);
    assert_eq!(s.live.emu().requests(Op::JobCreate, "alpha"), 2);
    assert_eq!(engine.ledger().all().unwrap().len(), 2);
}

#[test]
fn a_firing_left_sending_by_a_stopped_process_is_settled_unknown_and_not_sent_again() {
    let dir = tempfile::tempdir().unwrap();
    let r = rule(
        "r",
        "alpha",
        "job = \"j\"",
        "SELECT 1",
        "x",
        "cooldown = \"1m\"",
    );
    let ledger = docpipe::store::ledger::Ledger::open(&state_path(dir.path())).unwrap();
    let t0 = noon();
    let id = ledger
        .begin(r.key(), Some("j"), "x", "h", 1, &[], t0)
        .unwrap()
        .unwrap();
    drop(ledger);
    let budget: Arc<dyn Budget> = Arc::new(SqliteBudget::open(&state_path(dir.path())).unwrap());
    let clock = docpipe::clock::ManualClock::new(t0 + chrono::Duration::hours(2));
    let engine = Engine::open(dir.path(), budget, HashMap::new(), clock).unwrap();
    let all = engine.ledger().all().unwrap();
    assert_eq!((all[0].id, all[0].sent), (id, Sent::Unknown));
    assert_eq!(
        all[0].error.as_deref(),
        Some("interrupted while sending (the process stopped); not sent again")
    );
    assert_eq!(
        engine
            .ledger()
            .skip(r.key(), "h", t0 + chrono::Duration::hours(2))
            .unwrap(),
        Some(Skip::SamePrompt { at: t0 })
    );
}

#[test]
fn a_polled_job_that_ended_is_reported_by_one_of_the_processes_sharing_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let r = rule("r", "alpha", "create = true", "SELECT 1", "x", "");
    let t0 = noon();
    let a = docpipe::store::ledger::Ledger::open(&state_path(dir.path())).unwrap();
    let b = docpipe::store::ledger::Ledger::open(&state_path(dir.path())).unwrap();
    let id = a
        .begin(r.key(), None, "x", "h", 1, &[], t0)
        .unwrap()
        .unwrap();
    a.poll_until(id, t0 + chrono::Duration::hours(1)).unwrap();
    // Both processes looked at the job while it was polled, and both saw it end.
    assert_eq!(a.polling().unwrap().len(), 1);
    assert_eq!(b.polling().unwrap().len(), 1);
    assert!(b.end_polling(id).unwrap());
    assert!(!a.end_polling(id).unwrap());
    assert!(a.polling().unwrap().is_empty());
}

// --- the binary ---------------------------------------------------------------------------------

fn rules_config(live: &Live, dir: &Path, rules: &Path, extra_org: &str) -> std::path::PathBuf {
    let cfg = dir.join("docpipe.toml");
    let text = config(
        &live.server.base_url(),
        &dir.join("out"),
        &format!("[rules]\ndir = \"{}\"\n", rules.display()),
    )
    .replace("id = \"org-a\"\n", &format!("id = \"org-a\"\n{extra_org}"));
    std::fs::write(&cfg, text).unwrap();
    cfg
}

fn write_rule(dir: &Path, name: &str, body: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), body).unwrap();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_and_a_restart_keep_the_cooldown_and_the_hourly_limit() {
    let live = Live::start(small()).await;
    let dir = two_weeks_exported(&live).await;
    let rules = dir.path().join("jobs");
    for i in 0..3 {
        write_rule(
            &rules,
            &format!("r{i}"),
            &format!(
                "enabled = true\nname = \"r{i}\"\nproject = \"alpha\"\ncreate = true\nwait = false\nreview = \"never\"\nwhen = {TOP3:?}\nprompt = \"rule {i}: {{{{ rows[0].path }}}}\"\n"
            ),
        );
    }
    let cfg = rules_config(
        &live,
        dir.path(),
        &rules,
        "agent_per_hour = 2\nheadroom_percent = 0\n",
    );
    let (a, b) = {
        let (c1, c2) = (cfg.clone(), cfg.clone());
        let a = tokio::task::spawn_blocking(move || docpipe(&c1, &["rules", "run"], None));
        let b = tokio::task::spawn_blocking(move || docpipe(&c2, &["rules", "run"], None));
        (a.await.unwrap(), b.await.unwrap())
    };
    let out = format!("{}{}", text(&a.stdout), text(&b.stdout));
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    assert_eq!(live.emu().requests(Op::JobCreate, "alpha"), 2, "{out}");
    assert_eq!(out.matches(": created new job").count(), 2, "{out}");
    // The restart: nothing more is sent.
    let c = docpipe(&cfg, &["rules", "run"], None);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c.stderr));
    let again = text(&c.stdout);
    assert_eq!(
        again.matches("not sent: cooling down until").count(),
        2,
        "{again}"
    );
    assert_eq!(
        again
            .matches(
                "not sent: the project's 2 follow-ups and job creations of the last hour are used"
            )
            .count(),
        1,
        "{again}"
    );
    assert_eq!(live.emu().requests(Op::JobCreate, "alpha"), 2);
    // The outcome log has the two firings.
    let log = dir
        .path()
        .join("out/agent_runs/project=alpha/part-00000.parquet");
    assert_eq!(parquet_rows(&log).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_check_shows_the_prompt_and_sends_nothing() {
    let live = Live::start(small()).await;
    let dir = two_weeks_exported(&live).await;
    let rules = dir.path().join("jobs");
    write_rule(
        &rules,
        "top",
        &format!(
            "enabled = true\nname = \"top\"\nproject = \"alpha\"\njob = \"job_ok\"\nwhen = {TOP3:?}\nprompt = {TOP3_PROMPT:?}\n"
        ),
    );
    let cfg = rules_config(&live, dir.path(), &rules, "");
    let run = docpipe(&cfg, &["rules", "check"], None);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let stdout = text(&run.stdout);
    let expected = top3_from_truth(&live, "alpha");
    assert!(
        stdout.contains("  query: 3 rows (fires at 1 or more)\n"),
        "{stdout}"
    );
    // docpipe's block, then the template's line with the paths quoted.
    let (block, line) = expected.split_once("\n\n").unwrap();
    assert!(
        stdout.contains(&format!("    | {block}\n    | \n    | {line}\n")),
        "{stdout}"
    );
    // Its prompt holds readers' words (paths): under the default review a person sees it first.
    assert!(
        stdout.contains("  would be held for review (its prompt holds readers' words, 0 of them flagged: a person sees them before the agent acts): `docpipe rules pending` would list it\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("1 rules; 0 would send now; nothing sent\n"),
        "{stdout}"
    );
    let stats = live.emu().stats();
    assert!(!stats.contains_key("job_message") && !stats.contains_key("job_get"));
    assert!(!dir.path().join("out/agent_runs").exists());
    // validate agrees
    let run = docpipe(&cfg, &["validate"], None);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert!(text(&run.stdout).contains("1 rules, all valid"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_bad_rule_file_gets_one_clear_line_and_nothing_is_sent() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("jobs");
    let ok = "project = \"alpha\"\njob = \"job_ok\"\n";
    let cases: [(&str, String, &str); 21] = [
        ("a-unknown-field", format!("name = \"a\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"x\"\ncooldwn = \"1h\"\n"),
         "line 6: unknown field `cooldwn`, expected one of `name`, `description`, `project`, `job`, `create`, `when`, `min_rows`, `prompt`, `cooldown`, `wait`, `timeout`, `schedule`"),
        ("b-toml", "name = \"b\"\nproject".to_string(), "line 2: key with no value, expected `=`"),
        ("c-sql", format!("name = \"c\"\n{ok}when = \"SELEC path FROM pages\"\nprompt = \"x\"\n"),
         "when: the query does not parse: sql parser error: Expected: an SQL statement, found: SELEC at Line: 1, Column: 1"),
        ("d-column", format!("name = \"d\"\n{ok}when = \"SELECT nope FROM daily\"\nprompt = \"x\"\n"),
         "when: not found: unable to find column \"nope\" (no column of the query's tables is named so; docs/output.md lists them)"),
        ("e-table", format!("name = \"e\"\n{ok}when = \"SELECT path FROM pagez\"\nprompt = \"x\"\n"),
         "when: table pagez is not a trend table (daily, weekly, pages, search_terms, search_daily, assistant_daily, assistant_categories, unanswered_questions, feedback_pages, visitors_daily, callers_weekly)"),
        ("f-template", format!("name = \"f\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"{{% for r in rows %}}\"\n"),
         "prompt: syntax error: unexpected end of input, expected end of block (in <string>:1)"),
        ("g-undefined", format!("name = \"g\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"{{{{ rows[0].pathz }}}}\"\n"),
         "prompt: undefined value: `rows[0].pathz` is undefined (in <string>:1)"),
        ("h-filter", format!("name = \"h\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"{{{{ rows[0].path | nofilter }}}}\"\n"),
         "prompt: unknown filter: filter nofilter is unknown (in <string>:1)"),
        ("i-project", "name = \"i\"\nproject = \"nope\"\njob = \"j\"\nwhen = \"SELECT 1\"\nprompt = \"x\"\n".to_string(),
         "project nope is not configured (configured: alpha, beta, gamma)"),
        ("j-both", "name = \"j\"\nproject = \"alpha\"\njob = \"j\"\ncreate = true\nwhen = \"SELECT 1\"\nprompt = \"x\"\n".to_string(),
         "give either job or create = true, not both"),
        ("k-neither", "name = \"k\"\nproject = \"alpha\"\nwhen = \"SELECT 1\"\nprompt = \"x\"\n".to_string(),
         "say which job to message (job = \"<id>\") or create = true"),
        ("l-duration", format!("name = \"l\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\ncooldown = \"soon\"\n"),
         "cooldown \"soon\" is not a duration like \"24h\" or \"30m\" (expected number at 0)"),
        ("m-cron", format!("name = \"m\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\nschedule = \"61 * * * *\"\n"),
         "schedule \"61 * * * *\" is not a cron expression of 6 fields, sec min hour day month weekday (Invalid pattern: Pattern must have 6 or 7 fields when seconds are required and years are optional.)"),
        ("n-duplicate", format!("name = \"d\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\n"),
         "name \"d\" is already used by"),
        ("o-min-rows", format!("name = \"o\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\nmin_rows = 0\n"),
         "min_rows 0 must be between 1 and 1000000"),
        // What an attacker's rule file tried: read a local file, overflow the cooldown, ask for
        // a 24 TB allocation, render for minutes.
        ("p-read-file", format!("name = \"p\"\n{ok}when = \"SELECT * FROM read_csv('/etc/passwd')\"\nprompt = \"x\"\n"),
         "when: read_csv(...) is a table function; a rule reads only the trend tables (daily, weekly, pages, search_terms, search_daily, assistant_daily, assistant_categories, unanswered_questions, feedback_pages, visitors_daily, callers_weekly)"),
        ("q-cooldown", format!("name = \"q\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\ncooldown = \"1000000years\"\n"),
         "cooldown \"1000000years\" is longer than 366 days"),
        ("r-min-rows", format!("name = \"r\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\nmin_rows = 1000000000000\n"),
         "min_rows 1000000000000 must be between 1 and 1000000"),
        ("s-fuel", format!("name = \"s\"\n{ok}when = \"SELECT 1\"\nprompt = \"{{% for a in range(100000) %}}{{% for b in range(100000) %}}x{{% endfor %}}{{% endfor %}}\"\n"),
         "prompt: engine ran out of fuel (in <string>:1)"),
        // Text of 100 MB a page (SIGABRT of the whole process at 7b53d4b): refused as it loads.
        ("t-lpad", format!("name = \"t\"\n{ok}when = \"SELECT LPAD(path, 100000000, 'x') AS p FROM pages\"\nprompt = \"x\"\n"),
         "when: LPAD's length 100000000 is more than 1000: a rule's evaluation stays within its memory"),
        ("u-rpad", format!("name = \"u\"\n{ok}when = \"SELECT RPAD(path, total_7d * 100000, 'x') AS p FROM pages\"\nprompt = \"x\"\n"),
         "when: RPAD's length must be a whole number written in the query, at most 1000 (not an expression): a rule's evaluation stays within its memory"),
    ];
    for (file, body, _) in &cases {
        write_rule(&rules, file, body);
    }
    let cfg = rules_config(&live, dir.path(), &rules, "");
    for args in [&["rules", "check"][..], &["rules", "run"], &["validate"]] {
        let run = docpipe(&cfg, args, None);
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&run.stdout).matches("rule ").count(), 0);
        let stderr = text(&run.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), cases.len(), "{stderr}");
        for (file, _, message) in &cases {
            let prefix = format!(
                "error: {}: {message}",
                rules.join(format!("{file}.toml")).display()
            );
            assert_eq!(
                lines.iter().filter(|l| l.starts_with(&prefix)).count(),
                1,
                "{prefix}\n{stderr}"
            );
        }
    }
    assert!(live.emu().stats().is_empty());
    assert!(!dir.path().join("out/agent_runs").exists());
}

#[test]
fn a_job_id_or_pull_request_link_with_terminal_escapes_is_printed_escaped() {
    use docpipe::store::ledger::{Firing, Kind};
    let f = Firing {
        id: 1,
        rule: "r".into(),
        project: "alpha".into(),
        kind: Kind::Create,
        job: Some("job_1\u{1b}[2J\rrule ok".into()),
        fired_at: noon(),
        prompt_hash: "0123456789abcdef".into(),
        prompt: "x".into(),
        rows_matched: 1,
        sent: Sent::Sent,
        status: Some("completed\u{1b}[0m".into()),
        pr_link: Some("https://x/pull/1\n\u{7}".into()),
        seconds_to_done: None,
        error: None,
        trail: Default::default(),
    };
    let line = docpipe::rules::engine::firing_line(&f);
    assert_eq!(
        line,
        "rule r (alpha): created new job job_1\\u{1b}[2J\\u{d}rule ok (1 rows, prompt 0123456789ab) -> completed\\u{1b}[0m, PR https://x/pull/1\\u{a}\\u{7}"
    );
    assert!(!line.chars().any(char::is_control));
}
