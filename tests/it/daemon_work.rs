//! The daemon's work in process, on the emulator's manual clock: what its schedules would ask
//! for is called as ticks (`Daemon::work`), and time moves only when the test moves it: no
//! wall-clock schedule, no wait. (`daemon.rs` runs the binary for what only it has: signals,
//! the port, the process's lock.)

use crate::common::*;
use crate::support::daemon_work::*;
use docpipe::clock::{Clock, ManualClock};
use docpipe::daemon::{Daemon, Step, Tick};
use docpipe::emulator::{Emulator, Op};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A daemon in process on `live`'s emulator with no rules: page views of the test projects
/// from `start`, `per_hour` requests an hour, its folder in `dir`.
async fn plain_daemon(live: &Live, dir: &Path, start: &str, per_hour: u64) -> Daemon {
    let config = daemon_config(&live.server.base_url(), dir, day(start), per_hour);
    daemon(settings(&config, dir), live.clock.clone(), keys(), None).await
}

/// Requests the emulator served for page views of org-a's projects so far.
fn org_a_views(live: &Live) -> u64 {
    let stats = live.emu().stats();
    let views = &stats["views"];
    ["alpha", "beta"]
        .iter()
        .map(|p| views.by_project.get(*p).copied().unwrap_or(0))
        .sum()
}

#[tokio::test(flavor = "current_thread")]
async fn the_first_export_goes_before_a_queued_backfill_which_drains_within_each_hours_budget() {
    let seen = Seen::capture();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = after_and_timed_rules(dir.path(), "0 0 6 * * *");
    let mut config = daemon_config(
        &live.server.base_url(),
        dir.path(),
        day("2026-03-14"),
        LIMIT,
    );
    config.extra = format!("[rules]\ndir = \"{}\"", rules.display());
    let mut d = daemon(
        settings(&config, dir.path()),
        live.clock.clone(),
        keys(),
        Some(&rules),
    )
    .await;
    // Two weeks of every project, queued before the daemon starts.
    let id = d
        .context()
        .store()
        .queue()
        .push(&[], day("2026-03-01"), day("2026-03-14"), live.clock.now())
        .unwrap();
    assert_eq!(id, 1);
    let out = dir.path().join("out");
    let site_days = |project: &str| {
        std::fs::read_dir(out.join(format!("site_totals/project={project}")))
            .map(|d| d.count())
            .unwrap_or(0)
    };

    // The first export: yesterday and today of every project, then the unscheduled rule over
    // the trends it computed; the scheduled rule waits for its tick.
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(site_days(p), 2, "{p}");
    }
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        ["after: 2026-03-15"]
    );
    assert_eq!(
        live.emu().job_prompts("alpha", "job_nochange").unwrap(),
        Vec::<String>::new()
    );
    // One request a page of 250 rows (an empty day takes one too).
    let pages = |p: &str, date: &str| {
        let rows = live
            .emu()
            .truth(p, day(date), day(date).succ_opt().unwrap())
            .unwrap()
            .len();
        rows.div_ceil(250).max(1) as u64
    };
    let walked: u64 = ["alpha", "beta"]
        .iter()
        .flat_map(|p| ["2026-03-14", "2026-03-15"].map(|d| pages(p, d)))
        .sum();
    assert_eq!(org_a_views(&live), walked);

    // The backfill, a window a step, until org-a's hour has no room left beside the next
    // export's reserve; then an hour passes, the schedule's export runs, the backfill goes on.
    let mut hour_start = 0;
    let (mut steps, mut hours) = (0, 0);
    loop {
        steps += 1;
        assert!(steps < 500, "the backfill never ends");
        match d.work(None).await {
            Step::Worked => {}
            Step::Idle => break,
            Step::Wait(wait) => {
                assert_eq!(wait, Duration::from_secs(60));
                // Within the hour (the manual clock did not move): at most the budget.
                let spent = org_a_views(&live) - hour_start;
                assert!(spent <= LIMIT, "hour {hours}: {spent} requests");
                hours += 1;
                assert!(hours < 6, "the backfill takes more than 6 hours");
                live.clock.advance(Duration::from_secs(3600));
                hour_start = org_a_views(&live);
                assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
            }
        }
    }
    assert!(org_a_views(&live) - hour_start <= LIMIT);
    // Two weeks of alpha and beta do not fit one hour's budget: the backfill waited for the next.
    let backfill: u64 = ["alpha", "beta"]
        .iter()
        .flat_map(|p| (1..=13).map(move |d| (p, format!("2026-03-{d:02}"))))
        .map(|(p, d)| pages(p, &d))
        .sum();
    assert!(backfill > LIMIT, "{backfill}");
    assert!(
        hours >= backfill.div_ceil(LIMIT) - 1,
        "{hours} hours for {backfill} requests"
    );
    // The queue is drained and every backfilled day equals the emulator's truth.
    assert!(
        d.context()
            .store()
            .queue()
            .pending(live.clock.now())
            .unwrap()
            .is_empty()
    );
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(site_days(p), 15, "{p}: 2026-03-01..2026-03-15");
        for date in ["2026-03-01", "2026-03-07", "2026-03-14"] {
            let truth = live
                .emu()
                .truth(p, day(date), day(date).succ_opt().unwrap())
                .unwrap();
            let file = out.join(format!(
                "page_views/project={p}/date={date}/part-00000.parquet"
            ));
            assert_eq!(parquet_rows(&file).len(), truth.len(), "{p} {date}");
        }
    }
    let stats = live.emu().stats();
    assert_eq!(stats["views"].by_status.get(&429), None);

    // The scheduled rule on its tick; the unscheduled one fired once (same prompt since).
    assert_eq!(
        d.work(Some(&Tick::Rule("timed".into()))).await,
        Step::Worked
    );
    let today = live.clock.now().date_naive();
    assert_eq!(
        live.emu().job_prompts("alpha", "job_nochange").unwrap(),
        [format!("timed: {today}")]
    );
    assert_eq!(
        live.emu().job_prompts("alpha", "job_ok").unwrap(),
        ["after: 2026-03-15"]
    );
    // What `/metrics` says of it: the runs, the rules, the queue, each project's last success
    // (the last export's time) and the days it will look at again.
    let exports = 1.0 + hours as f64;
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}"),
        exports
    );
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"backfill\",result=\"ok\"}"),
        1.0
    );
    assert_eq!(seen.metric("docpipe_backfills_queued"), 0.0);
    for rule in ["after", "timed"] {
        assert_eq!(
            seen.metric(&format!(
                "docpipe_rule_firings_total{{rule=\"{rule}\",sent=\"sent\"}}"
            )),
            1.0,
            "{rule}"
        );
    }
    let last_export = live.clock.now().timestamp() as f64;
    // The projects start yesterday: yesterday and today, not final within the lookback.
    let pending_days = 2.0;
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(
            seen.metric(&format!(
                "docpipe_last_export_success_timestamp_seconds{{project=\"{p}\"}}"
            )),
            last_export,
            "{p}"
        );
        assert_eq!(
            seen.metric(&format!("docpipe_windows_pending{{project=\"{p}\"}}")),
            pending_days,
            "{p}"
        );
    }
    assert_eq!(seen.count(&["backfill done"]), 1);
    d.leave();
}

#[tokio::test(flavor = "current_thread")]
async fn a_service_down_for_a_while_loses_nothing_and_is_reported_once_per_run() {
    let seen = Seen::capture();
    let clock = ManualClock::new(noon());
    // Down: connections to the address are refused (and no other server can take the port).
    let port = ClosedPort::new();
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(&port.base_url(), dir.path(), day("2026-03-13"), 100);
    let mut d = daemon(settings(&config, dir.path()), clock.clone(), keys(), None).await;
    for _ in 0..2 {
        assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
        clock.advance(Duration::from_secs(3600));
    }
    let failed = "docpipe_runs_total{kind=\"export\",result=\"failed\"}";
    assert_eq!(seen.metric(failed), 2.0);
    // Once per organization per run, not once per window.
    for org in ["org-a", "org-b"] {
        let skipped = format!("the rest of this run for organization {org} is skipped");
        assert_eq!(seen.count(&[" ERROR ", &skipped]), 2, "{:#?}", seen.lines());
    }
    // The service comes back: the next run fetches everything.
    let server = port.open(Emulator::new(small(), clock.clone()));
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}"),
        1.0
    );
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(
            site_days(&dir.path().join("out"), p),
            3,
            "{p}: 2026-03-13..15"
        );
    }
    d.leave();
    server.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_rejected_key_is_reported_once_per_run_and_the_daemon_goes_on() {
    let seen = Seen::capture();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = daemon_config(&live.server.base_url(), dir.path(), day("2026-03-10"), 100);
    // org-a's key has the right shape; the service does not know it.
    let keys = keys_with("mint_test_admin_unknown");
    let mut d = daemon(
        settings(&config, dir.path()),
        live.clock.clone(),
        keys,
        None,
    )
    .await;
    for _ in 0..2 {
        assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
        live.clock.advance(Duration::from_secs(3600));
    }
    // One error per run, and one line of the run's summary (alpha and beta: 12 windows, one
    // cause).
    let rejected = "the service refused the admin key of organization org-a (401: Invalid API key)";
    assert_eq!(seen.count(&[" ERROR ", rejected]), 2, "{:#?}", seen.lines());
    assert_eq!(seen.count(&[" WARN ", rejected]), 2, "{:#?}", seen.lines());
    assert_eq!(
        seen.count(&[
            "export:   12 windows failed (alpha 6, beta 6): page views for project alpha"
        ]),
        2
    );
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"export\",result=\"failed\"}"),
        2.0
    );
    // org-b's project was exported all the same: 6 days; org-a's asked once a run.
    let out = dir.path().join("out");
    assert_eq!(site_days(&out, "gamma"), 6);
    assert_eq!(site_days(&out, "alpha"), 0);
    assert_eq!(
        live.emu().requests(Op::Views, "alpha") + live.emu().requests(Op::Views, "beta"),
        2
    );
    d.leave();
}

#[tokio::test(flavor = "current_thread")]
async fn a_key_refused_in_the_middle_of_a_run_is_one_line_for_its_organization() {
    let seen = Seen::capture();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    // Every default dataset: many windows of org-a in flight at once.
    let config = TestConfig {
        datasets: String::new(),
        ..daemon_config(&live.server.base_url(), dir.path(), day("2026-03-12"), 1000)
    };
    let mut d = daemon(
        settings(&config, dir.path()),
        live.clock.clone(),
        keys(),
        None,
    )
    .await;
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    assert_eq!(seen.count(&[" ERROR "]), 0, "{:#?}", seen.lines());
    // The key worked; the service expires it; the next run's windows of org-a all meet a 401.
    assert!(live.emu().expire_key(ADMIN_A));
    live.clock.advance(Duration::from_secs(3600));
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    let errors: Vec<String> = seen
        .lines()
        .into_iter()
        .filter(|l| l.contains(" ERROR "))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains(
            "the service refused the admin key of organization org-a (401: API key has expired); check the key in test; the rest of this run for organization org-a is skipped"
        ),
        "{errors:#?}"
    );
    d.leave();
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_that_sends_nothing_says_whose_budget_is_used_and_when_it_frees_in_its_line() {
    let seen = Seen::capture();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    // 5 requests an hour per organization: the first run uses them, the next sends nothing.
    let mut d = plain_daemon(&live, dir.path(), "2026-03-10", 5).await;
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    live.clock.advance(Duration::from_secs(60));
    let before = seen.lines().len();
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    let lines: Vec<String> = seen.lines()[before..]
        .iter()
        .filter(|l| l.contains(" export: "))
        .cloned()
        .collect();
    assert!(
        lines[0].ends_with(
            "export: exported 0 page-view windows (0 final, 0 provisional), 0 rows, 0 analytics requests in all (the plan expected about 0); 1 window already final was skipped; nothing sent: 10 windows wait for the budget of org-a (its 5 requests of the hour are used); next request at 13:00 UTC; 1 window waits for the budget of org-b (its 5 requests of the hour are used); next request at 13:00 UTC"
        ),
        "{lines:#?}"
    );
    d.leave();
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_job_of_ten_minutes_delays_no_export_and_its_polling_resumes_after_a_restart() {
    let seen = Seen::capture();
    let mut data = small();
    data.limits.job_duration_secs = 600;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    // A rule after each export that waits for its job (the default), for up to 30 minutes.
    std::fs::write(
        rules.join("watch.toml"),
        "name = \"watch\"\nproject = \"alpha\"\njob = \"job_ok\"\n\
         when = \"SELECT date FROM daily ORDER BY date DESC LIMIT 1\"\n\
         prompt = \"watch: {{ rows[0].date }}\"\nenabled = true\n",
    )
    .unwrap();
    let mut config = daemon_config(&live.server.base_url(), dir.path(), day("2026-03-14"), 100);
    config.extra = format!("[rules]\ndir = \"{}\"", rules.display());
    let settings = settings(&config, dir.path());
    let mut d = daemon(settings.clone(), live.clock.clone(), keys(), Some(&rules)).await;
    // The job runs for 10 minutes of the service's clock; the exports go on, and the job is
    // looked at between them.
    let looks = || live.emu().requests(Op::JobGet, "alpha");
    for _ in 0..3 {
        assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
        live.clock.advance(Duration::from_secs(60));
        // A poll step looks at the job once.
        let before = looks();
        assert_eq!(d.work(Some(&Tick::Poll)).await, Step::Worked);
        assert_eq!(looks(), before + 1);
    }
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}"),
        3.0
    );
    assert_eq!(
        seen.metric("docpipe_rule_firings_total{rule=\"watch\",sent=\"sent\"}"),
        1.0
    );
    let state = dir.path().join("out/state.sqlite");
    let ledger = docpipe::store::ledger::Ledger::open(&state).unwrap();
    let polling = ledger.polling().unwrap();
    assert_eq!(polling.len(), 1, "the job is still being polled");
    assert_eq!(polling[0].0.status.as_deref(), Some("active"));
    d.leave();
    drop(d);

    // A new daemon takes the polling over from the ledger; the job ends; it is recorded.
    let mut d = daemon(settings, live.clock.clone(), keys(), Some(&rules)).await;
    live.clock.advance(Duration::from_secs(601));
    assert_eq!(d.work(Some(&Tick::Poll)).await, Step::Worked);
    assert_eq!(
        seen.metric("docpipe_job_outcomes_total{rule=\"watch\",status=\"completed\"}"),
        1.0
    );
    assert!(ledger.polling().unwrap().is_empty());
    let all = ledger.all().unwrap();
    assert_eq!(all.len(), 1, "sent once: {all:?}");
    assert_eq!(all[0].status.as_deref(), Some("completed"));
    assert!(
        all[0]
            .pr_link
            .as_deref()
            .is_some_and(|l| l.starts_with("https://github.com/")),
        "{all:?}"
    );
    assert_eq!(live.emu().job_prompts("alpha", "job_ok").unwrap().len(), 1);
    let runs = parquet_rows(
        &dir.path()
            .join("out/agent_runs/project=alpha/part-00000.parquet"),
    );
    assert_eq!(runs.len(), 1);
    assert!(runs[0].contains("status=\"completed\""), "{runs:?}");
    d.leave();
}

fn site_days(out: &Path, project: &str) -> usize {
    std::fs::read_dir(out.join(format!("site_totals/project={project}")))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "current_thread")]
async fn a_firing_held_for_review_waits_for_a_person_and_the_daemon_goes_on() {
    let seen = Seen::capture();
    let hook = Hook::start().await;
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    // Every firing waits for review.
    std::fs::write(
        rules.join("watch.toml"),
        latest_day_rule("watch", "job_ok", "review = \"always\""),
    )
    .unwrap();
    let mut config = daemon_config(&live.server.base_url(), dir.path(), day("2026-03-14"), 100);
    config.extra = format!("[rules]\ndir = \"{}\"", rules.display());
    let settings = settings(&config, dir.path());
    let mut d = daemon(settings, live.clock.clone(), keys(), Some(&rules))
        .await
        .alerting(alerts_to(&hook));
    for _ in 0..3 {
        assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
        live.clock.advance(Duration::from_secs(3600));
    }
    // A person is told once, while it waits: the rule, the rows, the command.
    let told = hook.wait_for("review_pending", 1).await;
    assert_eq!(told.len(), 1, "{told:#?}");
    assert_eq!(told[0]["state"], "problem");
    assert_eq!(told[0]["project"], "alpha");
    assert_eq!(
        told[0]["text"],
        "docpipe alert: firing 1 of rule watch (alpha) waits for review with 1 rows: docpipe rules pending shows it, docpipe rules approve 1 sends it (since 2026-03-15 12:00 UTC); status: http://status.example/"
    );
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}"),
        3.0
    );
    assert_eq!(
        seen.metric("docpipe_rule_firings_total{rule=\"watch\",sent=\"held\"}"),
        1.0,
        "held once; the later runs wait for the review"
    );
    assert_eq!(seen.metric("docpipe_rule_firings_pending"), 1.0);
    assert_eq!(live.emu().requests(Op::JobMessage, "alpha"), 0);
    assert_eq!(live.emu().requests(Op::JobGet, "alpha"), 0);
    let ledger =
        docpipe::store::ledger::Ledger::open(&dir.path().join("out/state.sqlite")).unwrap();
    let pending = ledger.pending().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0].trail.hold.as_deref(),
        Some("the rule's review is \"always\"")
    );
    // Rejected by a person: the problem ends with its message at the next run.
    ledger
        .reject(pending[0].id, "bob", None, None, live.clock.now())
        .unwrap()
        .unwrap();
    d.work(Some(&Tick::Export)).await;
    let all = hook.wait_for("review_pending", 2).await;
    assert_eq!(all[1]["state"], "recovered");
    assert_eq!(
        all[1]["text"],
        "docpipe recovered: firing 1 of rule watch (alpha) no longer waits for review (a problem since 2026-03-15 12:00 UTC); status: http://status.example/"
    );
}

/// A service whose page views of alpha's 2026-03-10 never end (one new row a page, `hasMore`
/// always, totals that allow them); every other day of every project is two rows on one page.
/// Counts the requests of the endless day and of the others.
async fn endless_day_service() -> (String, Arc<Mutex<(u64, u64)>>) {
    use axum::extract::{Path, Query};
    let counts = Arc::new(Mutex::new((0u64, 0u64)));
    let seen = counts.clone();
    let views = move |Path(project): Path<String>,
                      Query(q): Query<std::collections::HashMap<String, String>>| {
        let seen = seen.clone();
        async move {
            let offset: u64 = q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
            let from = q.get("dateFrom").cloned().unwrap_or_default();
            let row = |i: u64| serde_json::json!({"path": format!("/p{i}"), "human": 1, "ai": 0, "total": 1});
            if project == "alpha" && from.starts_with("2026-03-10") {
                seen.lock().unwrap().0 += 1;
                let total = 1_000_000_000;
                axum::Json(
                    serde_json::json!({"totals": {"human": total, "ai": 0, "total": total}, "views": [row(offset)], "hasMore": true}),
                )
            } else {
                seen.lock().unwrap().1 += 1;
                axum::Json(
                    serde_json::json!({"totals": {"human": 2, "ai": 0, "total": 2}, "views": [row(0), row(1)], "hasMore": false}),
                )
            }
        }
    };
    let app = axum::Router::new().route("/v1/analytics/{project}/views", axum::routing::get(views));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), counts)
}

#[tokio::test(flavor = "current_thread")]
async fn an_endless_day_yields_the_budget_to_the_other_days_and_is_reported_stuck() {
    const PER_HOUR: u64 = 40;
    let (base, counts) = endless_day_service().await;
    let clock = ManualClock::new(noon());
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig {
        datasets: r#"datasets = ["page_views"]"#.into(),
        ..daemon_config(&base, dir.path(), day("2026-03-08"), PER_HOUR)
    };
    let settings = settings(&config, dir.path());
    let mut d = daemon(settings.clone(), clock.clone(), keys(), None).await;
    let out = dir.path().join("out");
    let written = |p: &str, date: &str| {
        out.join(format!(
            "page_views/project={p}/date={date}/part-00000.parquet"
        ))
        .exists()
    };
    let requests = || {
        let c = counts.lock().unwrap();
        c.0 + c.1
    };
    // The first hour: alpha's and beta's 8 days and gamma's (another organization). The
    // endless day walks its turn, yields, and takes what is left after every other day.
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    let mut d8 = day("2026-03-08");
    while d8 <= day("2026-03-15") {
        for p in ["alpha", "beta", "gamma"] {
            let date = d8.to_string();
            assert_eq!(
                written(p, &date),
                !(p == "alpha" && date == "2026-03-10"),
                "{p} {date}"
            );
        }
        d8 = d8.succ_opt().unwrap();
    }
    // org-a spent its hour: 15 other days (one request each) and the rest on the endless day.
    let (endless, others) = *counts.lock().unwrap();
    assert_eq!(others, 15 + 8);
    assert_eq!(endless, PER_HOUR - 15);
    let status = docpipe::status::read(&settings, clock.clone(), 10)
        .await
        .unwrap();
    let text = docpipe::status::text::render(&status);
    assert!(
        text.contains(&format!("  page_views 2026-03-10 walking in turns since 2026-03-15 12:00 UTC: {endless} pages walked, far beyond the 1 expected: it walks in turns after the other windows (a walk of more than 2000 pages fails)\n")),
        "{text}"
    );
    assert!(
        text.contains("Not counted: 1 window stuck on the service's paging: page_views alpha 2026-03-10 (walking in turns after the other windows)."),
        "{text}"
    );
    // Hour after hour (the daemon's export step alone, as its hourly schedule runs it): today
    // is looked at each hour, the endless day takes the rest, never more than the budget;
    // after its 2,000th page it is stuck, and waits a day.
    let ctx = d.context();
    let exporter = ctx.exporter();
    let targets = ctx.targets(&[]).unwrap();
    let export = || async {
        let plan = docpipe::app::export::plan_fitted(ctx, &exporter, &targets, false).unwrap();
        exporter.run(&targets, &plan).await
    };
    let mut hours = 0;
    let stuck_at = loop {
        hours += 1;
        assert!(hours < 80, "the endless day never failed");
        clock.advance(Duration::from_secs(3600));
        let before = requests();
        let endless_before = counts.lock().unwrap().0;
        let s = export().await;
        assert!(
            s.requests <= PER_HOUR + 8,
            "hour {hours}: {} requests",
            s.requests
        );
        assert_eq!(requests() - before, s.requests);
        let now = clock.now().date_naive();
        let today = s.windows.iter().filter(|w| w.day == now).count()
            + s.checked.iter().filter(|c| c.day == now).count();
        assert_eq!(today, 3, "hour {hours}: today {now} not looked at");
        let failures = ctx.store().history().failures().unwrap();
        if let Some(f) = failures
            .iter()
            .find(|f| f.kind == docpipe::store::activity::Trouble::Stuck)
        {
            assert_eq!(counts.lock().unwrap().0, 2000);
            assert_eq!(f.stuck_tries, 1);
            assert_eq!(f.retry_at, Some(clock.now() + chrono::Duration::hours(24)));
            break clock.now();
        }
        assert!(
            counts.lock().unwrap().0 > endless_before,
            "hour {hours}: the endless day starved"
        );
    };
    let status = docpipe::status::read(&settings, clock.clone(), 10)
        .await
        .unwrap();
    let text = docpipe::status::text::render(&status);
    let retry = (stuck_at + chrono::Duration::hours(24)).format("%Y-%m-%d %H:%M UTC");
    assert!(
        text.contains(&format!("  page_views 2026-03-10 stuck since {}: page views for project alpha (2026-03-10 to 2026-03-11): paging stopped: hasMore at offset 500000: a day of more than 2000 pages (500000 rows) is refused; 1 walks in a row reached the bound, tried again after {retry}\n", stuck_at.format("%Y-%m-%d %H:%M UTC"))),
        "{text}"
    );
    assert!(
        text.contains(&format!("Not counted: 1 window stuck on the service's paging: page_views alpha 2026-03-10 (tried again after {retry}).")),
        "{text}"
    );
    // The next hours leave it out (the plan says why); a day later it is walked again.
    for _ in 0..23 {
        clock.advance(Duration::from_secs(3600));
        let plan = docpipe::app::export::plan_fitted(ctx, &exporter, &targets, false).unwrap();
        assert_eq!(plan.stuck.len(), 1);
        let described = docpipe::export::describe_plan(&plan);
        assert!(
            described.contains(&format!("  1 window stuck on the service's paging, not tried before their time: page_views alpha 2026-03-10 (tried again after {retry})\n")),
            "{described}"
        );
        exporter.run(&targets, &plan).await;
        assert_eq!(counts.lock().unwrap().0, 2000);
    }
    clock.advance(Duration::from_secs(3600));
    export().await;
    assert!(counts.lock().unwrap().0 > 2000);
}

/// Every file below `out` but the state's, with its size and time of change.
fn written_files(out: &Path) -> BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime)> {
    files_below(out)
        .into_iter()
        .filter(|f| !f.to_string_lossy().starts_with("state.sqlite"))
        .map(|f| {
            let m = std::fs::metadata(out.join(&f)).unwrap();
            (f, (m.len(), m.modified().unwrap()))
        })
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn an_export_that_writes_no_window_recomputes_no_trend_and_writes_no_file() {
    let seen = Seen::capture();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut d = plain_daemon(&live, dir.path(), "2026-03-13", 1000).await;
    let out = dir.path().join("out");
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    assert!(out.join("trends").exists());
    let before = written_files(&out);
    // A minute later nothing is due: no window written, the same trends.
    live.clock.advance(Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    assert_eq!(written_files(&out), before);
    assert_eq!(
        seen.count(&[
            "trends not computed again: no window written since the last ones (",
            "), the same day"
        ]),
        1
    );
    // An hour later today has new views, walked: the trends follow.
    live.clock.advance(Duration::from_secs(3600));
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    assert_ne!(written_files(&out), before);
    assert_eq!(seen.count(&["trends not computed again"]), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn a_dataset_stale_beyond_twice_its_target_alerts_once_and_once_more_when_it_recovers() {
    let seen = Seen::capture();
    let hook = Hook::start().await;
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut d = plain_daemon(&live, dir.path(), "2026-03-13", 100)
        .await
        .alerting(alerts_to(&hook));
    let hour = Duration::from_secs(3600);
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    assert!(d.problems().is_empty(), "{:?}", d.problems());
    // The service is down for three hours: after two, the data are late; after three, stale.
    live.emu().set_outage(true);
    for _ in 0..2 {
        live.clock.advance(hour);
        d.work(Some(&Tick::Export)).await;
        assert!(
            !d.problems()
                .iter()
                .any(|p| p.what == docpipe::daemon::alerts::What::Stale),
            "late, not stale yet: {:?}",
            d.problems()
        );
    }
    live.clock.advance(hour);
    d.work(Some(&Tick::Export)).await;
    let stale = hook.wait_for("stale", 3).await;
    for (m, project, org) in [
        (&stale[0], "alpha", "org-a"),
        (&stale[1], "beta", "org-a"),
        (&stale[2], "gamma", "org-b"),
    ] {
        assert_eq!(m["state"], "problem");
        assert_eq!(m["project"], project);
        assert_eq!(m["organization"], org);
        assert_eq!(m["dataset"], "page_views");
        assert_eq!(m["since"], "2026-03-15T14:00:00Z");
        assert_eq!(m["page"], "http://status.example/");
        assert_eq!(
            m["text"],
            format!(
                "docpipe alert: {project} page_views: its newest data were taken 3h 00m ago, more than twice its freshness target of 1h 00m (since 2026-03-15 14:00 UTC); status: http://status.example/"
            )
        );
    }
    // Today's window failed three runs in a row: a problem of its own, one per project.
    let failing = hook.wait_for("window_failing", 3).await;
    assert!(
        failing[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("docpipe alert: alpha page_views 2026-03-15: failed 3 runs in a row: "),
        "{failing:#?}"
    );
    assert_eq!(
        seen.metric("docpipe_windows_failing{project=\"alpha\",dataset=\"page_views\"}"),
        1.0
    );
    assert_eq!(
        seen.metric("docpipe_freshness_target_seconds{project=\"alpha\",dataset=\"page_views\"}"),
        3600.0
    );
    // Half an hour on, still down: the problems are open, nothing is sent again.
    live.clock.advance(hour / 2);
    d.work(Some(&Tick::Export)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hook.of("stale").len(), 3);
    // The service is back: one recovery per problem.
    live.emu().set_outage(false);
    live.clock.advance(hour / 2);
    d.work(Some(&Tick::Export)).await;
    let stale = hook.wait_for("stale", 6).await;
    assert_eq!(stale.len(), 6, "{stale:#?}");
    assert_eq!(stale[3]["state"], "recovered");
    assert_eq!(
        stale[3]["text"],
        "docpipe recovered: alpha page_views: within twice its freshness target again (a problem since 2026-03-15 14:00 UTC); status: http://status.example/"
    );
    // Yesterday's windows, tried every run while they failed, reached three at 15:30: each
    // problem has its recovery.
    let begun = hook
        .of("window_failing")
        .iter()
        .filter(|m| m["state"] == "problem")
        .count();
    assert_eq!(begun, 6, "{:#?}", hook.of("window_failing"));
    let all = hook.wait_for("window_failing", 12).await;
    assert!(
        all[6..].iter().all(|m| m["state"] == "recovered"
            && m["text"]
                .as_str()
                .unwrap()
                .contains(": fetched again (a problem since")),
        "{all:#?}"
    );
    assert!(d.problems().is_empty(), "{:?}", d.problems());
    assert_eq!(
        seen.metric("docpipe_windows_failing{project=\"alpha\",dataset=\"page_views\"}"),
        0.0
    );
    d.leave();
}

#[tokio::test(flavor = "current_thread")]
async fn a_webhook_that_fails_is_tried_three_times_and_logged_and_nothing_else_stops() {
    let seen = Seen::capture();
    let hook = Hook::start().await;
    hook.failing
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let mut alerts = alerts_to(&hook);
    alerts.rules_failed(&anyhow::anyhow!("the ledger is locked"), noon());
    // Tries at 0, 1 and 3 s.
    for _ in 0..60 {
        if seen.count(&[" WARN ", "alert not sent after 3 tries"]) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(hook.hits.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(
        seen.count(&[
            " WARN ",
            "alert not sent after 3 tries (the webhook answered 500 Internal Server Error; the webhook of DOCPIPE_IT_HOOK): docpipe alert: the rules could not run: the ledger is locked (since 2026-03-15 12:00 UTC); status: http://status.example/"
        ]),
        1,
        "{:#?}",
        seen.lines()
    );
    assert!(
        !seen.lines().iter().any(|l| l.contains(&hook.url)),
        "the URL is a secret"
    );
    assert!(hook.got.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "current_thread")]
async fn an_unknown_project_stays_a_problem_while_the_state_remembers_its_404() {
    let hook = Hook::start().await;
    let mut data = small();
    data.projects.retain(|p| p.id != "gamma");
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let mut d = plain_daemon(&live, dir.path(), "2026-03-14", 100)
        .await
        .alerting(alerts_to(&hook));
    let unknown = |d: &Daemon| {
        d.problems()
            .iter()
            .filter(|p| p.what == docpipe::daemon::alerts::What::ProjectUnknown)
            .map(|p| p.subject.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    let told = hook.wait_for("project_unknown", 1).await;
    assert_eq!(told[0]["state"], "problem");
    assert_eq!(
        told[0]["text"],
        "docpipe alert: project 'gamma' is unknown to the service (404: Project not found): check the project's id in the config (its analytics URL shows it) (since 2026-03-15 12:00 UTC); status: http://status.example/"
    );
    // The later runs leave gamma out (no 404 to meet): the problem stays open, nothing more
    // is told, as long as the state remembers the 404 (`status` says the same).
    for _ in 0..2 {
        live.clock.advance(Duration::from_secs(3600));
        assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
        assert_eq!(unknown(&d), ["gamma"]);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(hook.of("project_unknown").len(), 1, "no recovery told");
    assert_eq!(
        docpipe::store::Store::open(&dir.path().join("out/state.sqlite"))
            .unwrap()
            .unknown_projects()
            .unwrap()
            .len(),
        1
    );
    d.leave();
}

#[tokio::test(flavor = "current_thread")]
async fn the_status_reads_what_the_daemons_last_run_planned_while_it_is_fresh() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut d = plain_daemon(&live, dir.path(), "2026-03-13", 1000).await;
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    let ran_at = live.clock.now();
    // The run planned what is left after it: the status takes that plan, not a new one.
    let first = d.context().ahead().unwrap();
    assert_eq!(first.at, ran_at);
    assert_eq!(first.view.due.made_at, ran_at);
    assert_eq!(first.forecast.len(), 2);
    live.clock.advance(Duration::from_secs(119));
    let status = docpipe::status::collect(d.context(), 10).unwrap();
    assert!(Arc::ptr_eq(&first, &d.context().ahead().unwrap()));
    assert_eq!(status.organizations.len(), 2);
    // Two minutes after the run, a status plans again (and keeps nothing: the next one too).
    live.clock.advance(Duration::from_secs(1));
    let again = d.context().ahead().unwrap();
    assert!(!Arc::ptr_eq(&first, &again));
    assert_eq!(again.at, ran_at + chrono::Duration::seconds(120));
    assert!(!Arc::ptr_eq(&again, &d.context().ahead().unwrap()));
    // The next run's plan is the status's again.
    live.clock.advance(Duration::from_secs(3600));
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    let next = d.context().ahead().unwrap();
    assert_eq!(next.at, live.clock.now());
    assert!(Arc::ptr_eq(&next, &d.context().ahead().unwrap()));
    d.leave();
}
