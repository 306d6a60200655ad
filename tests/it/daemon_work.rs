//! The daemon's work in process, on the emulator's manual clock: what its schedules would ask
//! for is called as ticks (`Daemon::work`), and time moves only when the test moves it: no
//! wall-clock schedule, no wait. (`daemon.rs` runs the binary for what only it has: signals,
//! the port, the process's lock.)

use crate::common::*;
use docpipe::api::AdminKey;
use docpipe::app::{Access, Context, Keys};
use docpipe::clock::Clock;
use docpipe::daemon::{Daemon, Step, Tick};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The test projects from `start`, 30 analytics requests an hour per organization (no
/// headroom: a two weeks' backfill takes hours), no retries, and the rules of `rules`.
fn daemon_settings(
    base_url: &str,
    dir: &Path,
    start: &str,
    rules: &Path,
) -> docpipe::config::Settings {
    let extra = format!("[rules]\ndir = \"{}\"", rules.display());
    let text = config(base_url, &dir.join("out"), &extra)
        .replace("max_retries = 3", "max_retries = 0")
        .replace(
            "analytics_per_hour = 100000",
            &format!("analytics_per_hour = {LIMIT}\nheadroom_percent = 0"),
        )
        .replace(
            "organization = \"org-a\"\n",
            &format!("organization = \"org-a\"\nstart_date = \"{start}\"\n"),
        )
        .replace(
            "organization = \"org-b\"\n",
            &format!("organization = \"org-b\"\nstart_date = \"{start}\"\n"),
        );
    let cfg = dir.join("docpipe.toml");
    std::fs::write(&cfg, text).unwrap();
    docpipe::config::Settings::load(&cfg).unwrap()
}

/// Analytics requests an hour per organization.
const LIMIT: u64 = 30;

fn keys() -> Keys {
    let key = |k: &str| AdminKey::parse(k, "mint", "test").unwrap();
    Keys::Given(BTreeMap::from([
        ("org-a".to_string(), key(ADMIN_A)),
        ("org-b".to_string(), key(ADMIN_B)),
    ]))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_export_goes_before_a_queued_backfill_which_drains_within_each_hours_budget() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = after_and_timed_rules(dir.path(), "0 0 6 * * *");
    let settings = daemon_settings(&live.server.base_url(), dir.path(), "2026-03-14", &rules);
    let ids = settings.project_ids();
    let ctx = Context::open(settings, live.clock.clone(), Access::Export, keys())
        .await
        .unwrap();
    // Two weeks of every project, queued before the daemon starts.
    let id = ctx
        .store()
        .queue()
        .push(&[], day("2026-03-01"), day("2026-03-14"), live.clock.now())
        .unwrap();
    assert_eq!(id, 1);
    let loaded = docpipe::app::rules::load(&rules, &ids, &[]).unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let mut d = Daemon::open(ctx, loaded.rules).unwrap();
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
    d.leave();
}
