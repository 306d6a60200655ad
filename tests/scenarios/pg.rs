//! State and warehouse on PostgreSQL, on a real server (`pg_server`).

use crate::common::*;
use crate::pg_server::free_port;
pub use crate::pg_server::{PASSWORD, Postgres};
use docpipe::api::budget::{Budget, Refusal, window};
use docpipe::clock::Clock;
use docpipe::store::SqliteBudget;
use docpipe::store::daemons::Daemons;
use docpipe::store::pg::{PASSWORD_ENV, Pg, PgBudget, RECONNECT_WAIT};
use docpipe::store::sql::Sql;
use docpipe::store::{Queue, Queued};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z")
        .unwrap()
        .to_utc()
}

/// The same rules for every shared budget: two handles count the same requests, the one past
/// the limit waits until the oldest leaves the hour, and 8 threads on two handles taking at
/// the same instant never get more than the limit through.
fn shared_budget_rules(a: Arc<dyn Budget>, b: Arc<dyn Budget>) {
    for i in 0..3 {
        let who = if i % 2 == 0 { &a } else { &b };
        who.try_take("analytics:o", 3, t0() + chrono::Duration::seconds(i))
            .unwrap();
    }
    assert_eq!(
        b.try_take("analytics:o", 3, t0() + chrono::Duration::seconds(10)),
        Err(Refusal::Wait(window() - chrono::Duration::seconds(10)))
    );
    assert_eq!(
        a.used("analytics:o", t0() + chrono::Duration::seconds(10)),
        3
    );
    assert_eq!(a.used("analytics:o", t0() + window()), 2);
    b.try_take("analytics:o", 3, t0() + window()).unwrap();
    a.try_take("analytics:other", 3, t0()).unwrap();
    assert_eq!(b.used("analytics:other", t0()), 1);
    let taken: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let who = if i % 2 == 0 { a.clone() } else { b.clone() };
                s.spawn(move || {
                    (0..20)
                        .filter(|_| who.try_take("analytics:race", 50, t0()).is_ok())
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(taken, 50, "160 attempts at a limit of 50");
    assert_eq!(a.used("analytics:race", t0()), 50);
}

#[test]
fn a_budget_on_postgres_follows_the_same_rules_as_one_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("budget.sqlite");
    shared_budget_rules(
        Arc::new(SqliteBudget::open(&file).unwrap()),
        Arc::new(SqliteBudget::open(&file).unwrap()),
    );
    let server = Postgres::start();
    shared_budget_rules(
        Arc::new(PgBudget::new(Arc::new(server.open()))),
        Arc::new(PgBudget::new(Arc::new(server.open()))),
    );
    assert_eq!(
        server.psql("SELECT n FROM request_counts WHERE scope = 'analytics:race'"),
        "50"
    );
}

#[test]
fn processes_starting_at_once_migrate_the_schema_once_and_a_newer_schema_is_refused() {
    let server = Postgres::start();
    server.open();
    let opened: Vec<Result<Pg, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| Pg::open(&server.url()).map_err(|e| e.to_string())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(opened.iter().all(Result::is_ok), "{opened:?}");
    assert_eq!(
        server.psql("SELECT version || ' ' || name FROM docpipe_migrations ORDER BY version"),
        "1 the rate budget's request log\n2 the backfill queue, claimed with a lease\n3 the daemons' heartbeats\n4 every other piece of state: windows, walks and their pages, looks, rules, claims\n5 looks no longer count their changes (nothing read the counts)\n6 the days of every dataset in one table (windows)\n7 every dataset's walks in progress in one table (walks), their pages in walk_pages; the walks in progress before are walked again\n8 what the status page shows: requests spent by hour, windows' failures, rules' last runs\n9 the impact of agent jobs: each firing's plan, and its keys' figures before and after\n10 the review of rule firings: previews, held firings and their trail\n11 windows stuck on the service's paging: how, how often, when tried again\n12 when each dataset's and project's days were last written, found in one seek\n13 the review row by row: a held firing's rows, the keys a person rejected\n14 rules that start automations: the automation, the run's schema and instance ids\n15 the questions of a firing asked again of the assistant after its pull request"
    );
    server.psql("INSERT INTO docpipe_migrations (version, name) VALUES (99, 'from the future')");
    let err = Pg::open(&server.url()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "state database {}: its schema is version 99, newer than this docpipe's 15: run a newer docpipe",
            server.url()
        )
    );
}

#[test]
fn a_database_gone_for_a_while_makes_the_budget_wait_then_go_on() {
    let mut server = Postgres::start();
    let budget = PgBudget::new(Arc::new(server.open()));
    budget.try_take("analytics:o", 3, t0()).unwrap();
    server.stop();
    assert_eq!(
        budget.try_take("analytics:o", 3, t0()),
        Err(Refusal::Wait(RECONNECT_WAIT))
    );
    assert_eq!(
        budget.used("analytics:o", t0()),
        0,
        "unknown while it is gone"
    );
    server.resume();
    // Reconnected: the request sent before is still counted, nothing was lost or doubled.
    budget.try_take("analytics:o", 3, t0()).unwrap();
    assert_eq!(budget.used("analytics:o", t0()), 2);
}

/// A config whose budget is in `server`'s database, writing to `out`.
fn config_with(base_url: &str, out: &Path, budget_db: &str) -> PathBuf {
    let path = out.with_extension("toml");
    let text = config(base_url, out, "").replace(
        "[service]",
        &format!("[service]\nbudget_db = \"{budget_db}\""),
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_with_different_outputs_share_one_budget_on_postgres() {
    let server = Postgres::start();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        config_with(
            &live.server.base_url(),
            &dir.path().join("a"),
            &server.url(),
        ),
        config_with(
            &live.server.base_url(),
            &dir.path().join("b"),
            &server.url(),
        ),
    );
    let run = docpipe_command(
        &a,
        &["backfill", "--from", "2026-03-06", "--to", "2026-03-10"],
    )
    .args(["--project", "alpha"])
    .env(PASSWORD_ENV, PASSWORD)
    .output()
    .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // alpha has 3 pages a day: 15 requests, logged in the database, which the other process's
    // plan counts.
    assert_eq!(server.psql("SELECT COUNT(*) FROM requests"), "15");
    let plan = docpipe_command(
        &b,
        &["backfill", "--from", "2026-03-06", "--to", "2026-03-10"],
    )
    .arg("--dry-run")
    .env(PASSWORD_ENV, PASSWORD)
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&plan.stdout).to_string();
    assert!(
        text.contains("budget of org-a: 95000 requests/hour, 15 used in the last hour"),
        "{text}"
    );
    assert!(
        !sqlite_tables(&dir.path().join("a/state.sqlite")).contains(&"requests".to_string()),
        "the output's state holds no request log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_budget_db_that_cannot_be_used_is_one_line_exit_2_with_no_secret() {
    let server = Postgres::start();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["backfill", "--from", "2026-03-06", "--to", "2026-03-06"];
    // A password in the URL: refused as a config error, the password not repeated.
    let with_password = server
        .url()
        .replace("docpipe@", &format!("docpipe:{PASSWORD}@"));
    let cfg = config_with(
        &live.server.base_url(),
        &dir.path().join("p"),
        &with_password,
    );
    let out = docpipe_command(&cfg, &args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("budget_db") && err.contains(&format!("give it in {PASSWORD_ENV} instead")),
        "{err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");
    // A wrong password, then an unreachable server: one line each, nothing written.
    let cfg = config_with(
        &live.server.base_url(),
        &dir.path().join("w"),
        &server.url(),
    );
    let out = docpipe_command(&cfg, &args)
        .env(PASSWORD_ENV, "not-the-password-4410")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "error: state database {}: FATAL: password authentication failed for user \"docpipe\"",
            server.url()
        )
    );
    assert!(!dir.path().join("w/state.sqlite").exists());
    let gone = format!("postgres://docpipe@127.0.0.1:{}/postgres", free_port());
    let cfg = config_with(&live.server.base_url(), &dir.path().join("u"), &gone);
    let out = docpipe_command(&cfg, &args)
        .env(PASSWORD_ENV, PASSWORD)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("error: state database {gone}: ")) && err.contains("onnect"),
        "{err}"
    );
    assert!(!dir.path().join("u/state.sqlite").exists());
}

fn day(s: &str) -> chrono::NaiveDate {
    s.parse().unwrap()
}

/// The same rules for every backfill queue: a daemon claims the oldest range nobody holds and
/// keeps it while its lease runs (claiming again renews it), another gets the next one, a dead
/// holder's range is taken over when its lease has run out, a released one at once, a drained
/// one never again; and 6 daemons claiming at once never hold one range together.
fn queue_rules(a: Queue, b: Queue) {
    let lease = chrono::Duration::minutes(10);
    let first = a
        .push(&[], day("2026-01-01"), day("2026-01-31"), t0())
        .unwrap();
    let second = b
        .push(&["beta".into()], day("2026-02-01"), day("2026-02-10"), t0())
        .unwrap();
    assert!(second > first);
    let held = a.claim("one", t0(), lease).unwrap().unwrap();
    assert_eq!(
        held,
        Queued {
            id: first,
            projects: vec![],
            from: day("2026-01-01"),
            to: day("2026-01-31"),
            holder: Some("one".into()),
        }
    );
    let other = b.claim("two", t0(), lease).unwrap().unwrap();
    assert_eq!(
        (other.id, other.projects.clone()),
        (second, vec!["beta".to_string()])
    );
    assert_eq!(b.claim("three", t0(), lease).unwrap(), None);
    // "one" renews its lease at every step; "two" dies.
    let later = t0() + chrono::Duration::minutes(8);
    assert_eq!(a.claim("one", later, lease).unwrap().unwrap().id, first);
    let expired = t0() + chrono::Duration::minutes(11);
    assert_eq!(
        b.claim("three", expired, lease).unwrap().unwrap().id,
        second
    );
    let pending = a.pending(expired).unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|q| (q.id, q.holder.clone()))
            .collect::<Vec<_>>(),
        vec![(first, Some("one".into())), (second, Some("three".into()))]
    );
    a.done(first, expired).unwrap();
    b.release("three").unwrap();
    assert_eq!(a.claim("one", expired, lease).unwrap().unwrap().id, second);
    a.done(second, expired).unwrap();
    assert_eq!(a.claim("one", expired, lease).unwrap(), None);
    assert!(b.pending(expired).unwrap().is_empty());

    // 6 daemons, 3 ranges, all claiming at the same instant: 3 get one each, 3 get none.
    let ranges: Vec<i64> = (1..=3)
        .map(|m| {
            let from = day(&format!("2025-0{m}-01"));
            a.push(&[], from, from, t0()).unwrap()
        })
        .collect();
    let got: Vec<Option<i64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let q = if i % 2 == 0 { a.clone() } else { b.clone() };
                s.spawn(move || {
                    q.claim(&format!("daemon-{i}"), expired, lease)
                        .unwrap()
                        .map(|q| q.id)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ids: Vec<i64> = got.iter().flatten().copied().collect();
    ids.sort();
    assert_eq!(ids, ranges, "{got:?}");
}

#[test]
fn a_backfill_queue_on_postgres_follows_the_same_rules_as_one_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.sqlite");
    let store = |_: ()| docpipe::store::Store::open(&file).unwrap().queue();
    queue_rules(store(()), store(()));
    let server = Postgres::start();
    queue_rules(
        Queue::new(Sql::Pg(Arc::new(server.open()))),
        Queue::new(Sql::Pg(Arc::new(server.open()))),
    );
    assert_eq!(
        server.psql("SELECT count(*), count(done_at) FROM backfill_queue"),
        "5|2"
    );
}

/// The same heartbeats on every state: a beat records a daemon or moves its time on, a daemon
/// not seen for three heartbeats is gone, one that leaves is no longer listed.
fn heartbeat_rules(a: Daemons, b: Daemons) {
    let started = t0();
    a.beat("box-1:41", started, t0()).unwrap();
    b.beat("box-2:77", started, t0()).unwrap();
    a.beat("box-1:41", started, t0() + chrono::Duration::seconds(90))
        .unwrap();
    let now = t0() + chrono::Duration::seconds(100);
    let all = b.all().unwrap();
    assert_eq!(
        all.iter()
            .map(|d| (d.name.as_str(), d.alive(now), d.seen_at))
            .collect::<Vec<_>>(),
        vec![
            ("box-1:41", true, t0() + chrono::Duration::seconds(90)),
            ("box-2:77", false, t0()),
        ]
    );
    assert_eq!(all[0].started_at, started);
    b.leave("box-2:77").unwrap();
    assert_eq!(a.all().unwrap().len(), 1);
}

#[test]
fn heartbeats_on_postgres_follow_the_same_rules_as_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.sqlite");
    let store = |_: ()| docpipe::store::Store::open(&file).unwrap().daemons();
    heartbeat_rules(store(()), store(()));
    let server = Postgres::start();
    heartbeat_rules(
        Daemons::new(Sql::Pg(Arc::new(server.open()))),
        Daemons::new(Sql::Pg(Arc::new(server.open()))),
    );
    assert_eq!(server.psql("SELECT name FROM daemons"), "box-1:41");
}

/// `[state] url` naming `server`'s database (appended to a config's `[export]` table).
fn state_on(server: &Postgres) -> String {
    format!("[state]\nurl = \"{}\"\nlease_secs = 10", server.url())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dataset_exported_with_its_state_on_postgres_killed_at_random_moments_equals_one_on_sqlite()
 {
    let server = Postgres::start();
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let (ref_out, out) = (dir.path().join("ref"), dir.path().join("shared"));
    let (ref_cfg, cfg) = (dir.path().join("ref.toml"), dir.path().join("shared.toml"));
    std::fs::write(&ref_cfg, config_all(&live.server.base_url(), &ref_out, "")).unwrap();
    std::fs::write(
        &cfg,
        config_all(&live.server.base_url(), &out, &state_on(&server)),
    )
    .unwrap();
    let range = ["backfill", "--from", "2026-03-08", "--to", "2026-03-10"];
    let reference = docpipe(&ref_cfg, &range, None);
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    // Killed among the walks' pages (rows of walk_pages here, every dataset's),
    // renames and state commits; each run resumes what the last one left in the database.
    let mut crashed = 0;
    for n in [31, 9, 25, 14, 7, 20] {
        let run = docpipe_command(&cfg, &range)
            .env("DOCPIPE_CRASH_AT", n.to_string())
            .env(PASSWORD_ENV, PASSWORD)
            .output()
            .unwrap();
        if run.status.success() {
            break;
        }
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        assert!(err.contains(&format!("crash point {n}:")), "{err}");
        crashed += 1;
    }
    assert!(crashed >= 4, "only {crashed} runs were killed");
    let last = docpipe_command(&cfg, &range)
        .env(PASSWORD_ENV, PASSWORD)
        .output()
        .unwrap();
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    assert_eq!(dataset(&out), dataset(&ref_out));
    // The state is in the database: 3 days of page views for 3 projects, no walk left; the
    // folder's own file holds none of it.
    assert_eq!(
        server.psql("SELECT COUNT(*) FROM windows WHERE dataset = 'page_views'"),
        "9"
    );
    assert_eq!(
        server.psql("SELECT COUNT(*) FROM walks") + &server.psql("SELECT COUNT(*) FROM walk_pages"),
        "00"
    );
    // The killed runs' claims were taken over at once (their processes gone from this
    // machine), and the last run gave back every claim it took.
    assert_eq!(
        server.psql("SELECT COUNT(*) FROM window_claims WHERE holder IS NOT NULL"),
        "0"
    );
    let local = rusqlite::Connection::open(out.join("state.sqlite")).unwrap();
    let n: i64 = local
        .query_row("SELECT COUNT(*) FROM windows", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    assert!(!out.join(".walks").exists());
    // `status` reads the same state.
    let status = docpipe_command(&cfg, &["status"])
        .env(PASSWORD_ENV, PASSWORD)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.status.success(), "{text}");
    assert!(text.contains(&server.url()), "{text}");
}

#[test]
fn a_state_url_that_is_not_postgres_or_carries_a_password_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (state, says) in [
        (
            "url = \"mysql://db/docpipe\"",
            "[state] url: not a postgres:// URL",
        ),
        (
            "url = \"postgres://docpipe:hunter2-secret@127.0.0.1:1/db\"",
            "[state] url: the URL carries a password: give it in DOCPIPE_STATE_PASSWORD instead",
        ),
        ("lease_secs = 3", "[state] lease_secs: 3 is too short"),
    ] {
        let cfg = dir.path().join("c.toml");
        std::fs::write(
            &cfg,
            config(
                "http://127.0.0.1:1",
                &dir.path().join("out"),
                &format!("[state]\n{state}"),
            ),
        )
        .unwrap();
        let out = docpipe(&cfg, &["status"], None);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        assert!(!dir.path().join("out").exists(), "{err}");
    }
}

/// The same impact records on every state: a firing's plan and its keys' figures before, then
/// after; read back as written, a key with no figure as none.
fn impact_rules(ledger: docpipe::store::ledger::Ledger) {
    use docpipe::store::impact::{Days, Figure};
    use docpipe::store::ledger::{Kind, RuleKey};
    let rule = RuleKey {
        name: "views",
        project: "alpha",
        cooldown: std::time::Duration::from_secs(60),
        kind: Kind::FollowUp,
        keyed: true,
    };
    let keys = ["/a".to_string(), "/b".to_string()];
    let id = ledger
        .begin(rule, Some("job_ok"), "p", "h", 2, &keys, t0())
        .unwrap()
        .unwrap();
    let days = |from: &str, to: &str, n| Days {
        from: day(from),
        to: day(to),
        days: n,
    };
    let fig = |v: Option<f64>, n| Figure {
        value: v,
        rows: Some(n),
    };
    ledger
        .record_before(
            id,
            "{\"x\":1}",
            days("2026-03-05", "2026-03-11", 7),
            &[
                ("/a".into(), fig(Some(120.0), 120)),
                ("/b".into(), fig(None, 0)),
            ],
        )
        .unwrap();
    assert!(ledger.plans().unwrap()[&id].after.is_none());
    ledger
        .record_after(
            id,
            docpipe::store::impact::After::Measured(
                days("2026-03-18", "2026-03-24", 7),
                &[
                    ("/a".into(), fig(Some(180.5), 180)),
                    ("/b".into(), fig(Some(3.0), 3)),
                ],
            ),
            t0(),
        )
        .unwrap();
    let plan = ledger.plans().unwrap()[&id].clone();
    assert_eq!(
        (
            plan.definition.as_str(),
            plan.before,
            plan.after,
            plan.settled.clone()
        ),
        (
            "{\"x\":1}",
            days("2026-03-05", "2026-03-11", 7),
            Some(days("2026-03-18", "2026-03-24", 7)),
            Some(docpipe::store::impact::Settled::Measured)
        )
    );
    assert_eq!(plan.settled_at, Some(t0()));
    let figures = &ledger.key_figures().unwrap()[&id];
    assert_eq!(
        figures
            .iter()
            .map(|k| (k.key.as_str(), k.before.clone(), k.after.clone()))
            .collect::<Vec<_>>(),
        vec![
            (
                "/a",
                Some(fig(Some(120.0), 120)),
                Some(fig(Some(180.5), 180))
            ),
            ("/b", Some(fig(None, 0)), Some(fig(Some(3.0), 3))),
        ]
    );
    // No windows written yet: no final day.
    assert!(
        ledger
            .final_days("page_views", "alpha", None)
            .unwrap()
            .is_empty()
    );
    // A trigger's firing: its automation recorded first, the run's ids once answered.
    use docpipe::store::ledger::{NewFiring, Run, Sent, Trail};
    let trigger = RuleKey {
        name: "run",
        kind: Kind::Trigger,
        keyed: false,
        ..rule
    };
    let id = ledger
        .record(NewFiring {
            rule: trigger,
            job: None,
            automation: Some("wf_a"),
            prompt: "record",
            hash: "h2",
            rows_matched: 1,
            keys: &[],
            now: t0(),
            state: Sent::Sending,
            trail: Trail::default(),
        })
        .unwrap()
        .unwrap();
    let mut f = ledger.firing(id).unwrap().unwrap();
    let run = |schema: Option<&str>, instance: Option<&str>| Run {
        automation: "wf_a".into(),
        schema_id: schema.map(Into::into),
        instance_id: instance.map(Into::into),
    };
    assert_eq!(
        (f.kind, f.run.clone()),
        (Kind::Trigger, Some(run(None, None)))
    );
    (f.sent, f.job) = (Sent::Sent, Some("job_9".into()));
    f.run = Some(run(Some("wf_a"), Some("run_1")));
    ledger.update(&f, t0()).unwrap();
    assert_eq!(ledger.firing(id).unwrap().unwrap(), f);
    // Its questions asked again: planned once, one of them asked once more two days on.
    use docpipe::store::reask::Resolution;
    let questions = ["q1".to_string(), "q2".to_string()];
    assert!(ledger.plan_reasks(id, &questions, t0()).unwrap());
    assert!(!ledger.plan_reasks(id, &questions[..1], t0()).unwrap());
    let due = ledger.due_reasks(t0()).unwrap();
    assert_eq!(due.len(), 2);
    let mut a = due[0].clone();
    (a.asked_at, a.resolution) = (Some(t0()), Some(Resolution::NotFound));
    let two_days = t0() + chrono::Duration::days(2);
    ledger.record_reask(&a, Some(two_days)).unwrap();
    let mut b = due[1].clone();
    (b.asked_at, b.resolution) = (Some(t0()), Some(Resolution::Answered));
    (b.sources, b.cites_named) = (vec!["/a".into(), "/b".into()], true);
    ledger.record_reask(&b, None).unwrap();
    assert!(ledger.due_reasks(t0()).unwrap().is_empty());
    let later = ledger.due_reasks(two_days).unwrap();
    assert_eq!(
        later
            .iter()
            .map(|r| (r.question.as_str(), r.attempt, r.due_at))
            .collect::<Vec<_>>(),
        [("q1", 2, two_days)]
    );
    assert_eq!(ledger.reasks().unwrap(), vec![a, later[0].clone(), b]);
}

#[test]
fn the_impact_of_a_firing_on_postgres_is_kept_as_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    impact_rules(
        docpipe::store::Store::open(&dir.path().join("state.sqlite"))
            .unwrap()
            .ledger(),
    );
    let server = Postgres::start();
    let shared = docpipe::store::Store::open_shared(
        &dir.path().join("local.sqlite"),
        Arc::new(server.open()),
    )
    .unwrap();
    impact_rules(shared.ledger());
    assert_eq!(
        server.psql("SELECT count(*), count(after_value) FROM rule_firing_keys"),
        "2|2"
    );
}

/// A server, the emulator at 100,000 requests an hour, and a config of `datasets` (a
/// project's line) whose state is on that server, made by a first `status`.
async fn a_config_on_postgres(
    datasets: &str,
) -> (Postgres, Live, tempfile::TempDir, std::path::PathBuf) {
    let server = Postgres::start();
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        config_of(
            &live.server.base_url(),
            &dir.path().join("out"),
            &state_on(&server),
            datasets,
        ),
    )
    .unwrap();
    let first = docpipe_command(&cfg, &["status"])
        .env(PASSWORD_ENV, PASSWORD)
        .output()
        .unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    (server, live, dir, cfg)
}

/// Alpha's feedback claimed by `other-host:1` until `until` (ms), then a backfill of
/// 2026-03-08..=2026-03-10: its output (it succeeded).
fn backfill_beside_a_holder(server: &Postgres, cfg: &Path, until: i64) -> String {
    server.psql(&format!(
        "INSERT INTO window_claims (key, holder, lease_until_ms) VALUES ('feedback/alpha', 'other-host:1', {until})"
    ));
    let run = docpipe_command(
        cfg,
        &["backfill", "--from", "2026-03-08", "--to", "2026-03-10"],
    )
    .env(PASSWORD_ENV, PASSWORD)
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_span_another_process_holds_is_named_in_the_summary_as_not_done() {
    // A daemon elsewhere holding alpha's feedback for years.
    let (server, _live, dir, cfg) =
        a_config_on_postgres(r#"datasets = ["page_views", "feedback"]"#).await;
    let until = t0().timestamp_millis() + 3_600_000 * 24 * 365 * 10;
    let stdout = backfill_beside_a_holder(&server, &cfg, until);
    assert!(
        stdout.contains("  1 window not walked by this run, another process still held them after 10 s: feedback alpha 2026-03-08..2026-03-10 (held by other-host:1); they are not done by this run: run it again once that process is done (docpipe status shows what is covered)\n"),
        "{stdout}"
    );
    assert!(!dir.path().join("out/feedback/project=alpha").exists());
    assert!(dir.path().join("out/feedback/project=beta").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_span_another_process_lets_go_of_is_walked_after_it_and_named() {
    let (server, _live, dir, cfg) = a_config_on_postgres(r#"datasets = ["feedback"]"#).await;
    // Another process holds alpha's feedback and dies: its lease runs out in 4 s (the run's
    // clock is the system's), before this run stops waiting (10 s, `lease_secs`).
    let until = chrono::Utc::now().timestamp_millis() + 4_000;
    let stdout = backfill_beside_a_holder(&server, &cfg, until);
    assert!(
        stdout.contains("  1 window another process held at first, walked by this run after it let go: feedback alpha 2026-03-08..2026-03-10 (held by other-host:1)\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("not walked by this run"), "{stdout}");
    for p in ["alpha", "beta", "gamma"] {
        for d in ["2026-03-08", "2026-03-09", "2026-03-10"] {
            assert!(
                dir.path()
                    .join(format!(
                        "out/feedback/project={p}/date={d}/part-00000.parquet"
                    ))
                    .exists(),
                "{p} {d}"
            );
        }
    }
    assert_eq!(
        server.psql("SELECT holder IS NULL FROM window_claims WHERE key = 'feedback/alpha'"),
        "t"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_backfills_at_once_on_one_postgres_leave_every_day_as_one_alone() {
    let server = Postgres::start();
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    // Slow answers, so that the two runs' walks overlap.
    data.faults.latency_ms = 20;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let (ref_out, out) = (dir.path().join("ref"), dir.path().join("shared"));
    let (ref_cfg, cfg) = (dir.path().join("ref.toml"), dir.path().join("shared.toml"));
    std::fs::write(&ref_cfg, config_all(&live.server.base_url(), &ref_out, "")).unwrap();
    std::fs::write(
        &cfg,
        config_all(&live.server.base_url(), &out, &state_on(&server)),
    )
    .unwrap();
    let reference = docpipe(
        &ref_cfg,
        &["backfill", "--from", "2026-03-01", "--to", "2026-03-14"],
        None,
    );
    assert!(reference.status.success());
    let first = docpipe_command(&cfg, &["status"])
        .env(PASSWORD_ENV, PASSWORD)
        .output()
        .unwrap();
    assert!(first.status.success());
    let start = |from: &str, to: &str| {
        docpipe_command(&cfg, &["backfill", "--from", from, "--to", to])
            .env(PASSWORD_ENV, PASSWORD)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (
        start("2026-03-01", "2026-03-10"),
        start("2026-03-05", "2026-03-14"),
    );
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let mut named = 0;
    for run in [&a, &b] {
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(!stdout.contains("not walked by this run"), "{stdout}");
        named += stdout
            .lines()
            .filter(|l| {
                l.contains("windows done by another process")
                    || l.contains("walked by this run after it let go")
            })
            .count();
    }
    // Each day of every dataset as one backfill of them all alone left it.
    assert_eq!(dataset(&out), dataset(&ref_out));
    // The runs met (days 5 to 10 are both's): what one left to the other is named.
    assert!(named > 0);
    assert_eq!(
        server.psql("SELECT COUNT(*) FROM window_claims WHERE holder IS NOT NULL"),
        "0"
    );
}

/// Rows of each lake table (its Parquet files under `out`), by table name.
fn lake_rows(out: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut rows = std::collections::BTreeMap::new();
    for f in files_below(out) {
        let path = f.to_string_lossy().to_string();
        if !path.ends_with(".parquet")
            || path.starts_with("_docpipe")
            || path.starts_with("rejects")
        {
            continue;
        }
        let table = match path.strip_prefix("trends/") {
            Some(t) => t.trim_end_matches(".parquet").to_string(),
            None => path.split('/').next().unwrap().to_string(),
        };
        *rows.entry(table).or_default() += parquet_rows(&out.join(&f)).len();
    }
    rows
}

/// Rows of each table of `schema` in the warehouse.
fn warehouse_rows(
    server: &Postgres,
    schema: &str,
    tables: &std::collections::BTreeMap<String, usize>,
) -> std::collections::BTreeMap<String, usize> {
    tables
        .keys()
        .map(|t| {
            let n = server.psql(&format!("SELECT count(*) FROM \"{schema}\".\"{t}\""));
            (t.clone(), n.parse().unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_is_loaded_into_the_warehouse_a_day_at_a_time_without_duplicates() {
    let mut server = Postgres::start();
    // Room for two exports of every dataset within the emulator's hour.
    let mut data = small();
    data.limits.analytics_per_hour = 10_000;
    // The event stream's tables go with the others: beta's last three days.
    data.stream = Some(docpipe::emulator::stream::StreamData {
        projects: vec!["beta".into()],
        agent_fraction: 1.0,
        bad_lines: false,
    });
    let live = Live::start_at(data, chrono::Utc::now()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let stream = dir.path().join("stream");
    let today = chrono::Utc::now().date_naive();
    for d in (today - chrono::Duration::days(3)).iter_days().take(3) {
        for o in docpipe::emulator::stream::day(live.emu(), d).0 {
            docpipe::layout::write_whole(&stream.join(&o.name), &o.bytes).unwrap();
        }
    }
    let with_schema = |schema: &str| {
        TestConfig {
            datasets: String::new(),
            start: Some(chrono::Utc::now().date_naive() - chrono::Duration::days(3)),
            extra: format!(
                "[warehouse]\npostgres_url_env = \"DOCPIPE_IT_WAREHOUSE\"\nschema = \"{schema}\"\n\n[[streams]]\nurl = {:?}\nsubdomains = {{ \"docs-beta\" = \"beta\" }}\n",
                stream.display().to_string()
            ),
            ..TestConfig::new(&live.server.base_url(), &out)
        }
        .write(&dir.path().join(format!("{schema}.toml")))
    };
    let url = format!(
        "postgres://docpipe:{PASSWORD}@127.0.0.1:{}/postgres",
        server.port
    );
    let run = |cfg: &Path, args: &[&str], url: &str| {
        let out = docpipe_command(cfg, args)
            .env("DOCPIPE_IT_WAREHOUSE", url)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let cfg = with_schema("docs");
    let (code, stdout, stderr) = run(&cfg, &["export"], &url);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let lake = lake_rows(&out);
    assert!(lake.len() >= 20, "{lake:?}");
    assert!(
        lake["page_views"] > 0 && lake["assistant_turns"] > 0,
        "{lake:?}"
    );
    for t in docpipe::tables::STREAM {
        assert!(
            lake.get(t.name).is_some_and(|n| *n > 0),
            "{}: {lake:?}",
            t.name
        );
    }
    assert_eq!(warehouse_rows(&server, "docs", &lake), lake);
    let files: usize = server
        .psql("SELECT count(*) FROM docs._docpipe_files")
        .parse()
        .unwrap();
    let line = stdout
        .lines()
        .find(|l| l.starts_with("warehouse (schema docs): "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(
        line,
        format!(
            "warehouse (schema docs): {files} files loaded ({} rows), 0 unchanged",
            lake.values().sum::<usize>()
        )
    );
    // The types as documented, the keys as the lake's.
    assert_eq!(
        server.psql(
            "SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_schema = 'docs' AND table_name = 'page_views'"
        ),
        "project text, date date, path text, human bigint, ai bigint, total bigint, fetched_at timestamp with time zone"
    );
    // The lake's key as a unique index, its text columns hashed (a key of any length).
    assert_eq!(
        server.psql(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'docs' AND tablename = 'page_views'"
        ),
        "CREATE UNIQUE INDEX page_views_docpipe_key ON docs.page_views USING btree (md5(project), date, md5(path))"
    );
    // The provisional days fetched again: their partitions replace theirs, no row twice.
    let (code, stdout, stderr) = run(&cfg, &["export", "--refresh"], &url);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let again = lake_rows(&out);
    assert_eq!(warehouse_rows(&server, "docs", &again), again);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("warehouse (schema docs): ") && !l.contains(": 0 files loaded")),
        "{stdout}"
    );
    // status shows the last load; its JSON is valid.
    let (_, status, _) = run(&cfg, &["status"], &url);
    assert!(
        status.contains("warehouse (schema docs, DOCPIPE_IT_WAREHOUSE): last load "),
        "{status}"
    );
    let (_, json, _) = run(&cfg, &["status", "--json"], &url);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    crate::status::assert_valid_status(&json, dir.path());
    assert_eq!(json["warehouse"]["schema"], "docs");
    // A warehouse added to the lake: filled from the files already there, nothing asked.
    let asked = live.emu().stats().values().map(|s| s.requests).sum::<u64>();
    let fresh = with_schema("fresh");
    let (code, stdout, stderr) = run(&fresh, &["warehouse", "sync"], &url);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(warehouse_rows(&server, "fresh", &again), again);
    assert_eq!(
        live.emu().stats().values().map(|s| s.requests).sum::<u64>(),
        asked
    );
    let (_, stdout, _) = run(&fresh, &["warehouse", "sync"], &url);
    assert!(stdout.contains(": 0 files loaded (0 rows), "), "{stdout}");
    // Bad input: one line each, exit 2 for the command; the export's own outputs unharmed.
    server.psql("CREATE SCHEMA theirs; CREATE TABLE theirs.t (x int)");
    let theirs = with_schema("theirs");
    let (code, _, stderr) = run(&theirs, &["warehouse", "sync"], &url);
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr.trim(),
        "error: warehouse: schema theirs exists and docpipe did not create it (it has no _docpipe table): name another in [warehouse] schema; docpipe never writes into a schema it does not own"
    );
    assert_eq!(server.psql("SELECT count(*) FROM theirs.t"), "0");
    let (code, _, stderr) = run(
        &cfg,
        &["warehouse", "sync"],
        &format!("postgres://127.0.0.1:{}/postgres", server.port),
    );
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr.trim(),
        "error: warehouse: the URL in DOCPIPE_IT_WAREHOUSE names no user (postgres://user:password@host:5432/database)"
    );
    let closed = ClosedPort::new();
    let away = format!("postgres://docpipe:{PASSWORD}@{}/postgres", closed.addr);
    let before = dataset(&out);
    let (code, stdout, stderr) = run(&cfg, &["export", "--refresh"], &away);
    assert_eq!(
        code,
        Some(0),
        "the export itself succeeds: {stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("warehouse: cannot connect to the database of DOCPIPE_IT_WAREHOUSE: "),
        "{stdout}"
    );
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    assert_eq!(dataset(&out).len(), before.len());
    // The server stopped in the middle of a load: what was committed is whole, the rest is
    // loaded by the next one.
    let cut = with_schema("cut");
    let mut sync = docpipe_command(&cut, &["warehouse", "sync"])
        .env("DOCPIPE_IT_WAREHOUSE", &url)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    loop {
        let n = Command::new(server.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
            .args(["-U", "docpipe", "-d", "postgres", "-At", "-c"])
            .arg("SELECT count(*) FROM cut._docpipe_files")
            .env("PGPASSWORD", PASSWORD)
            .output()
            .unwrap();
        let loaded: u64 = String::from_utf8_lossy(&n.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        if loaded >= 3 {
            break;
        }
        assert!(
            sync.try_wait().unwrap().is_none() && started.elapsed().as_secs() < 60,
            "the load ended before it could be cut"
        );
    }
    server.stop();
    let cut_off = sync.wait_with_output().unwrap();
    // A runtime failure (exit 1): each file the cut connection could not load is named.
    assert_eq!(cut_off.status.code(), Some(1), "{cut_off:?}");
    // (A connection opened after the stop says so first, at WARN.)
    assert!(
        String::from_utf8_lossy(&cut_off.stderr)
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("error: warehouse: ")),
        "{cut_off:?}"
    );
    server.resume();
    let recorded: usize = server
        .psql("SELECT coalesce(sum(rows_loaded), 0) FROM cut._docpipe_files")
        .parse()
        .unwrap();
    let present: usize = again
        .keys()
        .filter(|t| server.psql(&format!("SELECT to_regclass('cut.\"{t}\"') IS NOT NULL")) == "t")
        .map(|t| {
            server
                .psql(&format!("SELECT count(*) FROM cut.\"{t}\""))
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(present, recorded, "rows of files not recorded as loaded");
    assert!(recorded < again.values().sum::<usize>());
    let (code, stdout, stderr) = run(&cut, &["warehouse", "sync"], &url);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(warehouse_rows(&server, "cut", &again), again);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_loads_the_warehouse_after_each_run_with_its_state_on_postgres_on_the_same_server_or_another()
 {
    let (same, other) = (Postgres::start(), Postgres::start());
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let var = "DOCPIPE_IT_WAREHOUSE_DAEMON";
    let url = |s: &Postgres| {
        format!(
            "postgres://docpipe:{PASSWORD}@127.0.0.1:{}/postgres",
            s.port
        )
    };
    // SAFETY: this test alone reads its variable; every test sets the same password.
    unsafe {
        std::env::set_var(var, url(&same));
        std::env::set_var(PASSWORD_ENV, PASSWORD);
    }
    let cfg = TestConfig {
        datasets: String::new(),
        start: Some(live.clock.now().date_naive() - chrono::Duration::days(2)),
        extra: format!(
            "{}\n[warehouse]\npostgres_url_env = \"{var}\"\n",
            state_on(&same)
        ),
        ..TestConfig::new(&live.server.base_url(), &out)
    }
    .write(&dir.path().join("docpipe.toml"));
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let key = |k: &str| docpipe::api::AdminKey::parse(k, "mint", "test").unwrap();
    let keys = docpipe::app::Keys::Given(std::collections::BTreeMap::from([
        ("org-a".to_string(), key(ADMIN_A)),
        ("org-b".to_string(), key(ADMIN_B)),
    ]));
    let ctx = docpipe::app::Context::open(
        settings,
        live.clock.clone(),
        docpipe::app::Access::Export,
        keys,
    )
    .await
    .unwrap();
    let mut daemon = docpipe::daemon::Daemon::open(ctx, Vec::new()).unwrap();
    let tick = Some(&docpipe::daemon::Tick::Export);
    // The first run loads every table; the state's tables stay in their own schema.
    assert_eq!(daemon.work(tick).await, docpipe::daemon::Step::Worked);
    let lake = lake_rows(&out);
    assert!(lake.len() >= 20 && lake["page_views"] > 0, "{lake:?}");
    assert_eq!(warehouse_rows(&same, "docpipe", &lake), lake);
    let tables_of = |server: &Postgres, schema: &str| {
        server.psql(&format!(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = '{schema}'"
        ))
    };
    assert_eq!(tables_of(&same, "docpipe"), (lake.len() + 2).to_string());
    assert_eq!(
        same.psql("SELECT to_regclass('public.window_claims') IS NOT NULL"),
        "t"
    );
    // An hour later the provisional days are fetched again and loaded again, no row twice.
    let loaded = |server: &Postgres| -> u64 {
        server
            .psql("SELECT coalesce(sum(rows_loaded), 0) FROM docpipe._docpipe_files")
            .parse()
            .unwrap()
    };
    let times = same
        .psql("SELECT string_agg(loaded_at::text, ',' ORDER BY file) FROM docpipe._docpipe_files");
    live.clock.advance(std::time::Duration::from_secs(3600));
    assert_eq!(daemon.work(tick).await, docpipe::daemon::Step::Worked);
    let again = lake_rows(&out);
    assert_eq!(warehouse_rows(&same, "docpipe", &again), again);
    assert_ne!(
        same.psql(
            "SELECT string_agg(loaded_at::text, ',' ORDER BY file) FROM docpipe._docpipe_files"
        ),
        times
    );
    assert_eq!(loaded(&same), again.values().sum::<usize>() as u64);
    // status (whose state is on the first server) shows the daemon's last load.
    let status = docpipe_command(&cfg, &["status"]).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(
        status.contains(&format!("warehouse (schema docpipe, {var}): last load ")),
        "{status}"
    );
    // The warehouse on another server: filled from the lake, the state still on the first.
    let sync = docpipe_command(&cfg, &["warehouse", "sync"])
        .env(var, url(&other))
        .output()
        .unwrap();
    assert_eq!(sync.status.code(), Some(0), "{sync:?}");
    assert_eq!(warehouse_rows(&other, "docpipe", &again), again);
    assert_eq!(loaded(&other), loaded(&same));
    assert_eq!(
        other.psql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_nul_or_long_term_loads_and_a_file_that_fails_costs_its_partition_alone() {
    use docpipe::emulator::data::{ReaderKind, ReaderText};
    let server = Postgres::start();
    let mut data = small();
    data.limits.analytics_per_hour = 10_000;
    for text in ["webhooks\u{0}then more".to_string(), "x".repeat(8000)] {
        data.readers.push(ReaderText {
            project: "alpha".into(),
            kind: ReaderKind::Search,
            text,
            per_day: 50,
        });
    }
    let live = Live::start_at(data, chrono::Utc::now()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let var = "DOCPIPE_IT_WAREHOUSE_NUL";
    let url = format!(
        "postgres://docpipe:{PASSWORD}@127.0.0.1:{}/postgres",
        server.port
    );
    let cfg = TestConfig {
        datasets: String::new(),
        start: Some(chrono::Utc::now().date_naive() - chrono::Duration::days(2)),
        extra: format!("[warehouse]\npostgres_url_env = \"{var}\"\nschema = \"docs\"\n"),
        ..TestConfig::new(&live.server.base_url(), &out)
    }
    .write(&dir.path().join("docpipe.toml"));
    let run = |args: &[&str]| {
        let out = docpipe_command(&cfg, args).env(var, &url).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stdout, stderr) = run(&["export"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    // Every partition loaded, the counts equal the lake's; the NULs said and replaced.
    let lake = lake_rows(&out);
    assert_eq!(warehouse_rows(&server, "docs", &lake), lake);
    let nuls: usize = server
        .psql("SELECT count(*) FROM docs.searches WHERE search_query = E'webhooks\\uFFFDthen more'")
        .parse()
        .unwrap();
    assert!(nuls > 0, "the term with U+0000 is loaded, replaced");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("warehouse (schema docs): "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let replaced: usize = line
        .split(" U+0000 in text written as U+FFFD (PostgreSQL's text cannot hold it)")
        .next()
        .and_then(|l| l.rsplit(", ").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(replaced >= nuls, "{line}: {nuls} rows of searches hold one");
    assert_eq!(
        server.psql("SELECT max(length(search_query)) FROM docs.searches"),
        "8000"
    );

    // Someone changed a column's type: that table's files fail, named, the others load; three
    // loads in a row make the warehouse a problem of the daemon's alerts.
    server.psql("ALTER TABLE docs.page_views ALTER COLUMN human TYPE integer");
    server.psql("DELETE FROM docs._docpipe_files WHERE tbl = 'searches'");
    let pages = lake["page_views"];
    let page_files: usize = server
        .psql("SELECT count(*) FROM docs._docpipe_files WHERE tbl = 'page_views'")
        .parse()
        .unwrap();
    for n in 1..=3 {
        let (code, stdout, stderr) = run(&["warehouse", "sync"]);
        assert_eq!(code, Some(1), "{stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!(
                "{page_files} files not loaded, the first page_views/"
            )),
            "{stderr}"
        );
        assert!(
            stderr.contains(": table page_views: column human is integer in the warehouse, bigint in the lake: change it back, or drop the table and docpipe loads it again"),
            "{stderr}"
        );
        let (_, status, _) = run(&["status"]);
        assert!(
            status.contains(&format!("; failing {n} loads in a row: {page_files} files not loaded (each retried by the next load), the first page_views/")),
            "{status}"
        );
    }
    // The searches were loaded again all the same, and the page views kept theirs.
    assert_eq!(warehouse_rows(&server, "docs", &lake), lake);
    assert_eq!(
        server.psql("SELECT count(*) FROM docs.page_views"),
        pages.to_string()
    );
    let (_, json, _) = run(&["status", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["warehouse"]["last_load"]["failing_runs"], 3);
    crate::status::assert_valid_status(&json, dir.path());
    // The alert reads the same fact.
    // SAFETY: this test alone reads its variable; every test sets the same password.
    unsafe {
        std::env::set_var(var, &url);
        std::env::set_var(PASSWORD_ENV, PASSWORD);
    }
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let ctx = docpipe::app::Context::open(
        settings,
        live.clock.clone(),
        docpipe::app::Access::Shared,
        docpipe::app::Keys::None,
    )
    .await
    .unwrap();
    let mut alerts = docpipe::daemon::alerts::Alerts::default();
    alerts.warehouse(&ctx);
    let problems: Vec<String> = alerts.problems().map(|p| p.line.clone()).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(&format!(
            "warehouse (schema docs): 3 loads in a row failed: {page_files} files not loaded"
        )),
        "{problems:?}"
    );
    // And the series a Prometheus rule watches, as the daemon's /metrics renders it.
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let metrics = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let series = |alerts: &docpipe::daemon::alerts::Alerts| {
        docpipe::daemon::gauges::problems(&ctx, &[], alerts);
        metrics
            .render()
            .lines()
            .find(|l| l.starts_with("docpipe_warehouse_failing{"))
            .map(str::to_string)
    };
    assert_eq!(
        series(&alerts).as_deref(),
        Some("docpipe_warehouse_failing{schema=\"docs\"} 1")
    );
    // Mended: the next load loads every file, and the problem ends.
    server.psql("ALTER TABLE docs.page_views ALTER COLUMN human TYPE bigint");
    let (code, stdout, stderr) = run(&["warehouse", "sync"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    alerts.warehouse(&ctx);
    assert_eq!(alerts.problems().count(), 0);
    assert_eq!(
        series(&alerts).as_deref(),
        Some("docpipe_warehouse_failing{schema=\"docs\"} 0")
    );
    // Two syncs of one new schema at once, four times: the second waits for the first (the
    // schema's lock), neither fails, and the warehouse holds the lake once.
    for pair in 0..4 {
        let schema = format!("twice{pair}");
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("schema = \"docs\"", &format!("schema = \"{schema}\""));
        let twin = dir.path().join(format!("{schema}.toml"));
        std::fs::write(&twin, text).unwrap();
        let sync = || {
            let mut c = docpipe_command(&twin, &["warehouse", "sync"]);
            c.env(var, &url);
            c
        };
        for out in two_at_once(sync) {
            assert_eq!(out.status.code(), Some(0), "{pair}: {out:?}");
        }
        assert_eq!(warehouse_rows(&server, &schema, &lake), lake, "{pair}");
    }
}
