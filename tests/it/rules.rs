//! Rules against the emulator: what fires, what is sent (exactly once), what is polled and
//! logged, and what a bad rule file gets.

use crate::common::*;
use crate::support::rules::*;
use docpipe::api::budget::Budget;
use docpipe::api::{ClientSettings, RetryPolicy};
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
use std::sync::Arc;
use std::time::Duration;

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
            "rows_matched=3,sent=\"sent\",status=\"completed\",pr_link=\"{pr}\",seconds_to_done=7.0,error=null,flags=null,dropped=null,held_because=null,decided_by=null,decided_at=null,review_note=null,automation=null,schema_id=null,instance_id=null"
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
        run: None,
    };
    let line = docpipe::rules::engine::firing_line(&f);
    assert_eq!(
        line,
        "rule r (alpha): created new job job_1\\u{1b}[2J\\u{d}rule ok (1 rows, prompt 0123456789ab) -> completed\\u{1b}[0m, PR https://x/pull/1\\u{a}\\u{7}"
    );
    assert!(!line.chars().any(char::is_control));
}

/// A rule with `trigger`: a rule file without a prompt; once its rows pass it starts one run of
/// the automation (the emulator sees exactly that trigger, and the run's job receives no word of
/// docpipe's), is not held for review though its rows are readers' paths, follows the run's job
/// to its pull request, and cools down as a job's rule does; the ledger and `agent_runs` hold
/// the run's ids. A 400 and a 404 are each their own line and fail that rule alone.
#[tokio::test]
async fn a_rule_that_triggers_starts_one_run_follows_its_job_and_a_refusal_fails_that_rule_alone() {
    use docpipe::store::ledger::Kind;
    let mut data = small();
    let paused = docpipe::emulator::data::Automation {
        active: false,
        ..automation("wf_paused", "alpha")
    };
    data.automations = vec![automation("wf_refresh", "alpha"), paused];
    let s = setup(data).await;
    let engine = engine(&s);
    let projects: Vec<String> = PROJECTS.iter().map(|p| p.to_string()).collect();
    let trigger = |name: &str, id: &str| {
        let text = format!(
            "enabled = true\nname = {name:?}\nproject = \"alpha\"\ntrigger = {id:?}\nwhen = {TOP3:?}\n"
        );
        Rule::parse(&text, &format!("jobs/{name}.toml"), &projects).unwrap()
    };
    // The refusals first: each fails its own rule, and the next rule still starts its run.
    let paused = fire(&engine, &trigger("paused", "wf_paused"), &s.tables).await;
    let gone = fire(&engine, &trigger("gone", "wf_gone"), &s.tables).await;
    let refresh = trigger("refresh", "wf_refresh");
    let f = fired(fire(&engine, &refresh, &s.tables).await);
    let refused: Vec<(bool, String)> = [paused, gone]
        .into_iter()
        .map(|r| (r.failed(), r.line()))
        .collect();
    let record_hash = &f.prompt_hash[..12];
    assert_eq!(
        refused,
        [
            (
                true,
                format!(
                    "rule paused (alpha): refused by the service: automation wf_paused (3 rows, record {record_hash}); trigger for automation wf_paused of project alpha: invalid request (400: Workflow wf_paused is not active)"
                )
            ),
            (
                true,
                format!(
                    "rule gone (alpha): refused by the service: automation wf_gone (3 rows, record {record_hash}); trigger for automation wf_gone of project alpha: not found (404: Workflow wf_gone not found)"
                )
            ),
        ]
    );
    // The run: one trigger seen, its job the firing's, followed to its end.
    let triggers = s.live.emu().triggers();
    assert_eq!(triggers.len(), 1);
    let (project, id, job) = triggers[0].clone();
    assert_eq!((project.as_str(), id.as_str()), ("alpha", "wf_refresh"));
    assert_eq!(s.live.emu().requests(Op::Trigger, "alpha"), 3);
    assert_eq!(
        (f.kind, f.sent, f.job.as_deref(), f.trail.hold.as_deref()),
        (Kind::Trigger, Sent::Sent, Some(job.as_str()), None)
    );
    let run = f.run.clone().unwrap();
    assert_eq!(
        (run.automation.as_str(), run.schema_id.as_deref()),
        ("wf_refresh", Some("wf_refresh"))
    );
    let instance = run.instance_id.unwrap();
    assert!(instance.starts_with("run_"), "{instance}");
    assert_eq!(
        s.live.emu().job_prompts("alpha", &job).unwrap(),
        ["Run of automation wf_refresh"]
    );
    assert_eq!(s.live.emu().requests(Op::JobCreate, "alpha"), 0);
    assert_eq!(s.live.emu().requests(Op::JobMessage, "alpha"), 0);
    let pr = f.pr_link.clone().unwrap();
    assert_eq!(
        Report::Fired(f.clone()).line(),
        format!(
            "rule refresh (alpha): started automation wf_refresh as run {instance}, job {job} (3 rows, record {record_hash}) -> completed after 7.0 s, PR {pr}"
        )
    );
    // The record: the rows, numbered, as the ledger keeps them (never sent).
    let truth = top3_from_truth(&s.live, "alpha");
    let mut expected = "Rows that started the automation (nothing of them was sent):\n".to_string();
    let top = truth.trim_start_matches(docpipe::rules::readers::PREAMBLE);
    for (i, pair) in top.trim_start_matches("Top pages: ").split(' ').enumerate() {
        let (path, total) = pair.rsplit_once('=').unwrap();
        expected.push_str(&format!(
            "{}. {{\"path\": {path}, \"total_7d\": {total}}}\n",
            i + 1
        ));
    }
    assert_eq!(f.prompt, expected);
    // Cooldown as for jobs: at once, cooling down; after it, the same rows are not run again.
    match fire(&engine, &refresh, &s.tables).await {
        Report::Skipped {
            skip: Skip::CoolingDown { last, .. },
            ..
        } => assert_eq!(last, f.fired_at),
        other => panic!("{}", other.line()),
    }
    s.live.clock.advance(Duration::from_secs(25 * 3600));
    match fire(&engine, &refresh, &s.tables).await {
        Report::Skipped {
            skip: Skip::SamePrompt { at },
            ..
        } => assert_eq!(at, f.fired_at),
        other => panic!("{}", other.line()),
    }
    assert_eq!(s.live.emu().triggers().len(), 1);
    // The ledger and the outcome log hold the run's ids.
    let kept = engine.ledger().all().unwrap();
    assert_eq!(kept.len(), 3);
    assert_eq!(kept[2], f);
    let rows = parquet_rows(&engine.write_log().unwrap()[0]);
    assert_eq!(rows.len(), 3);
    assert!(
        rows[2].starts_with(&format!(
            "firing_id=3,rule=\"refresh\",action=\"trigger\",job=\"{job}\","
        )),
        "{}",
        rows[2]
    );
    assert!(
        rows[2].ends_with(&format!(
            "review_note=null,automation=\"wf_refresh\",schema_id=\"wf_refresh\",instance_id=\"{instance}\""
        )),
        "{}",
        rows[2]
    );
    assert!(
        rows[0]
            .ends_with("review_note=null,automation=\"wf_paused\",schema_id=null,instance_id=null"),
        "{}",
        rows[0]
    );
}

/// Asking again: after a job with a pull request, the project's assistant receives exactly the
/// firing's questions (its keys, at most `reask_max`: 5 by default), as `docpipe ask` sends
/// them; each record is what the emulator answered; a question it still cannot answer is asked
/// once more two days later on the manual clock (the pull request's change in force by then
/// for the questions it answers), then left; a job without a pull request is not asked about;
/// the assistant key is in no log line and no record.
#[tokio::test]
async fn a_questions_rule_asks_its_questions_again_after_the_pull_request_once_more_then_leaves_them()
 {
    use docpipe::rules::engine::Asker;
    use docpipe::store::reask::Resolution;
    let (capture, _guard) = Capture::start();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    export_alpha(&live, &out, "2026-03-01", "2026-03-15").await;
    let tables = compute(&out, &Selection::default()).unwrap();
    let s = Setup {
        live,
        _dir: dir,
        out,
        tables,
    };
    let assistant = s.live.client(None, Some(ASSIST_A), open_limits());
    let engine = engine(&s).with_askers(HashMap::from([(
        "alpha".to_string(),
        Asker::Ready {
            client: Box::new(assistant),
            domain: "alpha-docs".into(),
        },
    )]));
    let questions = |name: &str, job: &str| {
        rule(
            name,
            "alpha",
            &format!("job = {job:?}"),
            "SELECT question, latest_wording, cited_pages FROM unanswered_questions ORDER BY rank LIMIT 7",
            "{% for r in rows %}- {{ r.latest_wording }}: it cited {{ r.cited_pages }}\n{% endfor %}",
            "key = \"question\"",
        )
    };
    let r = questions("questions", "job_ok");
    assert_eq!(
        r.reask,
        Some(docpipe::rules::Reask {
            max: 5,
            again: Duration::from_secs(2 * 86_400)
        })
    );
    let f = fired(fire(&engine, &r, &s.tables).await);
    assert_eq!(f.rows_matched, 7);
    assert!(f.pr_link.is_some());
    let keys = engine.ledger().firing_keys(f.id).unwrap();
    let asked_of = |from: usize| -> Vec<String> {
        let asked = s.live.emu().asked();
        assert!(asked.iter().all(|(d, _)| d == "alpha-docs"), "{asked:?}");
        asked[from..].iter().map(|(_, q)| q.clone()).collect()
    };
    // Right after the pull request: the first five questions, none answered yet (the change
    // is in force from two days after the job ended).
    let first = engine.reask(std::slice::from_ref(&r)).await.unwrap();
    assert_eq!(first.planned, 1);
    assert_eq!(asked_of(0), keys[..5]);
    let quoted = |k: &str| docpipe::rules::readers::quote(k);
    assert_eq!(
        first.lines,
        keys[..5]
            .iter()
            .map(|k| format!(
                "firing {} (rule questions, alpha): asked again {}: not found",
                f.id,
                quoted(k)
            ))
            .collect::<Vec<_>>()
    );
    // Two days on: asked once more; the emulator answers those the job's change answers,
    // citing first the page the prompt named with the question.
    s.live.clock.advance(Duration::from_secs(2 * 86_400 + 60));
    let second = engine.reask(std::slice::from_ref(&r)).await.unwrap();
    assert_eq!(asked_of(5), keys[..5]);
    let today = docpipe::clock::Clock::now(s.live.clock.as_ref()).date_naive();
    let records = engine.ledger().reasks().unwrap();
    assert_eq!(records.len(), 10);
    let (mut answered, mut citing) = (0, 0);
    for (k, line) in keys[..5].iter().zip(&second.lines) {
        let rec = records
            .iter()
            .find(|x| &x.question == k && x.attempt == 2)
            .unwrap();
        match s.live.emu().answering("alpha", k, today) {
            Some(change) => {
                answered += 1;
                assert_eq!(rec.resolution, Some(Resolution::Answered), "{k}");
                // The page the prompt named with the question first, when it named one.
                if let Some(page) = &change.page {
                    assert_eq!(&rec.sources[0], page);
                    assert!(rec.cites_named);
                }
                let named = rec
                    .sources
                    .iter()
                    .any(|p| docpipe::rules::engine::names_page(&f.prompt, p));
                assert_eq!(rec.cites_named, named);
                citing += usize::from(named);
                assert_eq!(
                    *line,
                    format!(
                        "firing {} (rule questions, alpha): asked again {} (2nd time): answered, citing {}{}",
                        f.id,
                        quoted(k),
                        rec.sources.join(", "),
                        if named {
                            " (a page the firing named)"
                        } else {
                            ""
                        }
                    )
                );
            }
            None => {
                assert_eq!(rec.resolution, Some(Resolution::NotFound), "{k}");
                assert!(line.ends_with(" (2nd time): not found"), "{line}");
            }
        }
    }
    // Every other text the prompt quoted responds (the data file's respond_every = 2).
    assert!(answered > 0 && answered < 5, "{answered}");
    // The lake's table: the ten asks, as the ledger has them.
    assert_eq!(
        second.files,
        vec![s.out.join("agent_reasks/project=alpha/part-00000.parquet")]
    );
    let rows = parquet_rows(&second.files[0]);
    assert_eq!(rows.len(), 10);
    let first_ask = &records[0];
    assert_eq!(
        rows[0],
        format!(
            "firing_id={},rule=\"questions\",pr_link=\"{}\",question={},attempt=1,due_at={},asked_at={},resolution=\"not_found\",sources=\"[]\",cites_named_page=false,error=null",
            f.id,
            f.pr_link.as_deref().unwrap(),
            serde_json::to_string(&first_ask.question).unwrap(),
            first_ask.due_at.format("%Y-%m-%d %H:%M:%S%.6f +00:00"),
            first_ask
                .asked_at
                .unwrap()
                .format("%Y-%m-%d %H:%M:%S%.6f +00:00"),
        )
    );
    // Then left: nothing more is asked, however long after.
    s.live.clock.advance(Duration::from_secs(5 * 86_400));
    let third = engine.reask(std::slice::from_ref(&r)).await.unwrap();
    assert_eq!((third.planned, third.lines.len()), (0, 0));
    assert_eq!(s.live.emu().asked().len(), 10);
    // The reading beside the 7-day one.
    let text = docpipe::rules::impact::text::text(
        std::slice::from_ref(&r),
        engine.ledger(),
        engine.calendar(),
    )
    .unwrap();
    assert!(
        text.contains(&format!(
            "\n  asked again: firing {}: {answered} of 5 questions answered now, {citing} citing a page the firing named\n",
            f.id
        )),
        "{text}"
    );
    // A job that ends without a pull request: its questions are not asked again.
    let nopr = questions("nopr", "job_nochange");
    let g = fired(fire(&engine, &nopr, &s.tables).await);
    assert!(g.pr_link.is_none());
    let none = engine.reask(&[r, nopr]).await.unwrap();
    assert_eq!((none.planned, none.lines.len()), (0, 0));
    assert_eq!(s.live.emu().asked().len(), 10);
    // The assistant key: in no log line, no record.
    let logs = capture.text();
    assert!(logs.contains("asked again"), "{logs}");
    assert!(!logs.contains(ASSIST_A));
    assert!(records.iter().all(|r| r.error.is_none()));
}
