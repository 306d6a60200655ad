//! The exporter against the emulator: truth, requests, budget, faults, late data, resume, readers.

use crate::common::*;
use crate::support::export::*;
use chrono::NaiveDate;
use docpipe::api::Limits;
use docpipe::dataset::page_views::{PAGE_VIEWS, SITE_TOTALS, read_page_views};
use docpipe::emulator::Op;
use docpipe::emulator::data::{DataFile, RowOrder};
use docpipe::export::{Exporter, Summary};
use docpipe::layout::{PART, partition_dir};
use std::path::Path;

const PROJECTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// Asserts that every day of `from..=to` in the output equals the emulator's truth now.
fn assert_equals_truth(live: &Live, out: &Path, from: &str, to: &str) {
    let mut d = day(from);
    while d <= day(to) {
        for p in PROJECTS {
            let want = crate::truth::true_views(live.emu(), p, d);
            let got = crate::truth::exported_views(out, p, d).unwrap();
            assert_eq!(got, want, "{p} {d}");
            let totals = parquet_rows(&partition_dir(out, SITE_TOTALS, p, d).join(PART));
            let (h, a) = (
                want.iter().map(|r| r.1).sum::<i64>(),
                want.iter().map(|r| r.2).sum::<i64>(),
            );
            assert!(
                totals[0].starts_with(&format!(
                    "human={h},ai={a},total={},rows={}",
                    h + a,
                    want.len()
                )),
                "{p} {d}: {totals:?}"
            );
        }
        d = d.succ_opt().unwrap();
    }
}

#[tokio::test]
async fn a_backfill_equals_the_truth_with_the_minimum_requests_and_a_rerun_sends_none() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    let s = export(&live, out.path(), open_limits(), "2026-03-01", "2026-03-15").await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_equals_truth(&live, out.path(), "2026-03-01", "2026-03-15");
    let mut expected = 0;
    for w in &s.windows {
        let want = (w.rows as u64).div_ceil(250).max(1);
        assert_eq!(w.requests, want, "{} {}", w.project, w.day);
        expected += want;
    }
    assert_eq!(s.windows.len(), 45);
    assert_eq!(s.requests, expected);
    let served: u64 = PROJECTS
        .iter()
        .map(|p| live.emu().requests(Op::Views, p))
        .sum();
    assert_eq!(served, expected);
    // Days older than the lateness allowance (3 days before 2026-03-15) are final.
    assert_eq!(s.windows.iter().filter(|w| w.is_final).count(), 3 * 11);
    // Right after, every provisional day was just looked at: a second run sends nothing.
    let again = export(&live, out.path(), open_limits(), "2026-03-01", "2026-03-15").await;
    assert_eq!(
        (again.skipped_final, again.windows.len(), again.requests),
        (33, 0, 0)
    );
    // Six hours later, today (grown since) is walked again; each provisional day is probed
    // with one request, finds its totals unchanged and is left as it is.
    live.clock.advance(std::time::Duration::from_secs(6 * 3600));
    let before: u64 = PROJECTS
        .iter()
        .map(|p| live.emu().requests(Op::Views, p))
        .sum();
    let again = export(&live, out.path(), open_limits(), "2026-03-01", "2026-03-15").await;
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    assert_eq!(again.windows.len(), 3);
    assert!(again.windows.iter().all(|w| w.day == day("2026-03-15")));
    assert_eq!(again.checked.len(), 9);
    assert!(
        again
            .checked
            .iter()
            .all(|c| c.day >= day("2026-03-12") && !c.is_final)
    );
    let today_requests: u64 = again.windows.iter().map(|w| w.requests).sum();
    assert_eq!(again.requests, today_requests + 9);
    assert_eq!(again.spent[&("page_views", "probe")], 3 + 9);
    let after: u64 = PROJECTS
        .iter()
        .map(|p| live.emu().requests(Op::Views, p))
        .sum();
    assert_eq!(after - before, again.requests);
    assert_equals_truth(&live, out.path(), "2026-03-01", "2026-03-15");
    // A run over final days only sends nothing at all.
    let before: u64 = PROJECTS
        .iter()
        .map(|p| live.emu().requests(Op::Views, p))
        .sum();
    let none = export(&live, out.path(), open_limits(), "2026-03-01", "2026-03-11").await;
    assert_eq!(
        (none.windows.len(), none.requests, none.skipped_final),
        (0, 0, 33)
    );
    assert_eq!(
        PROJECTS
            .iter()
            .map(|p| live.emu().requests(Op::Views, p))
            .sum::<u64>(),
        before
    );
    // A final day whose partition was deleted is fetched again, and only it.
    std::fs::remove_dir_all(partition_dir(
        out.path(),
        PAGE_VIEWS,
        "beta",
        day("2026-03-05"),
    ))
    .unwrap();
    let refetched = export(&live, out.path(), open_limits(), "2026-03-01", "2026-03-11").await;
    assert_eq!(
        refetched
            .windows
            .iter()
            .map(|w| (w.project.as_str(), w.day, w.is_final))
            .collect::<Vec<_>>(),
        [("beta", day("2026-03-05"), true)]
    );
    assert_eq!(refetched.skipped_final, 32);
    assert_equals_truth(&live, out.path(), "2026-03-01", "2026-03-15");
}

#[tokio::test]
async fn faults_and_late_events_still_give_the_truth() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    data.faults.error_rate = 0.2;
    data.faults.cut_body_rate = 0.1;
    data.faults.drop_rate = 0.05;
    data.faults.burst_429_every = 9;
    data.faults.burst_429_len = 2;
    data.faults.burst_retry_after_secs = 2;
    data.faults.row_order = RowOrder::Shuffled;
    data.faults.late_days = 2;
    data.faults.late_every_secs = 100_000_000;
    data.faults.seed = 7;
    let live = Live::start(data).await;
    let out = tempfile::tempdir().unwrap();
    let s = export(&live, out.path(), open_limits(), "2026-03-05", "2026-03-15").await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert!(s.windows.iter().all(|w| w.mismatch.is_none()));
    // The summary counts every request sent, the failed attempts too: what the service saw.
    assert_eq!(s.requests, live.emu().stats()["views"].requests);
    assert_eq!(
        s.windows.iter().map(|w| w.requests).sum::<u64>(),
        s.requests
    );
    assert_equals_truth(&live, out.path(), "2026-03-05", "2026-03-15");
    let stats = live.emu().stats();
    assert!(
        stats["views"].by_status.keys().any(|s| *s >= 500)
            && stats["views"].by_status.contains_key(&429)
    );
    // Late events arrive for the last two days; six hours later the next run probes the
    // provisional days and replaces exactly those that changed (and today).
    let old_file = partition_dir(out.path(), PAGE_VIEWS, "alpha", day("2026-03-10")).join(PART);
    let old_bytes = std::fs::read(&old_file).unwrap();
    let kept = partition_dir(out.path(), PAGE_VIEWS, "alpha", day("2026-03-12")).join(PART);
    let kept_bytes = std::fs::read(&kept).unwrap();
    live.emu().add_late_wave();
    live.clock.advance(std::time::Duration::from_secs(6 * 3600));
    let s = export(&live, out.path(), open_limits(), "2026-03-05", "2026-03-15").await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let mut written: Vec<(String, NaiveDate)> = s
        .windows
        .iter()
        .map(|w| (w.project.clone(), w.day))
        .collect();
    written.sort();
    let want: Vec<(String, NaiveDate)> = PROJECTS
        .iter()
        .flat_map(|p| ["2026-03-14", "2026-03-15"].map(|d| (p.to_string(), day(d))))
        .collect();
    assert_eq!(written, want, "the days the wave reached, and today");
    assert_eq!(
        s.checked.len(),
        6,
        "03-12 and 03-13 of 3 projects, unchanged"
    );
    assert_equals_truth(&live, out.path(), "2026-03-05", "2026-03-15");
    assert_eq!(
        std::fs::read(&old_file).unwrap(),
        old_bytes,
        "a final day is never touched again"
    );
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        kept_bytes,
        "a day probed unchanged is not written"
    );
}

#[tokio::test]
async fn a_backfill_waits_for_the_budget_instead_of_causing_429s() {
    let mut data = small();
    data.limits.analytics_per_hour = 10;
    let live = Live::start(data).await;
    let out = tempfile::tempdir().unwrap();
    let limits = Limits {
        analytics_per_hour: 10,
        headroom_percent: 0,
        ..open_limits()
    };
    let s = export(&live, out.path(), limits, "2026-03-06", "2026-03-10").await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_equals_truth(&live, out.path(), "2026-03-06", "2026-03-10");
    // org-a: alpha 3 pages + beta 1 page per day, 5 days = 20 requests at 10/hour.
    assert_eq!(live.emu().stats()["views"].by_status.get(&429), None);
    assert_eq!(s.requests, 25);
    assert_eq!(live.slept(), 3605, "one wait for the window to slide");
}

#[tokio::test]
async fn the_plan_is_known_before_sending_and_a_dry_run_sends_nothing() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    export(&live, out.path(), open_limits(), "2026-03-14", "2026-03-14").await;
    let exporter = Exporter::open(out.path(), live.clock.clone(), 3)
        .await
        .unwrap();
    let t = targets(
        &live,
        Limits {
            analytics_per_hour: 10,
            headroom_percent: 0,
            ..open_limits()
        },
    );
    let plan = exporter
        .plan(&t, day("2026-03-01"), day("2026-03-20"))
        .unwrap();
    // Up to today (03-15): 15 days x 3 projects but the 14th, just looked at (provisional, it
    // waits for its turn: 2 hours for yesterday).
    assert_eq!(plan.due.len(), 42);
    assert_eq!(plan.fresh, 3);
    assert_eq!(
        (plan.due[0].day, plan.due[41].day),
        (day("2026-03-15"), day("2026-03-01"))
    );
    // alpha's last known day had 3 pages; beta and gamma 1.
    assert_eq!(plan.expected_requests, 14 * 3 + 14 + 14);
    assert_eq!(
        plan.budgets["org-a"],
        docpipe::planner::Room { limit: 10, used: 0 }
    );
    let text = docpipe::export::describe_plan(&plan);
    assert!(text.starts_with("plan: 42 page-view windows due (9 provisional, 0 resumed), 0 windows of other datasets (0 resumed), 0 of them probed first, 0 skipped as final, 3 as looked at recently, about 70 analytics requests\n"), "{text}");
    // org-a needs 56 requests at 10 an hour: 10 now, 46 in the next five hours.
    assert!(text.contains("ETA: about 5 h at the budget"), "{text}");
}

#[test]
fn quality_checks_catch_what_a_moving_walk_produces() {
    use docpipe::api::views::{Counts, ViewRow, ViewsPage};
    use docpipe::dataset::page_views::StoredPage;
    use docpipe::dataset::page_views::check;
    let row = |p: &str, h| ViewRow {
        path: p.into(),
        human: h,
        ai: 0,
        total: h,
    };
    let page = |offset, views: Vec<ViewRow>, total, more| StoredPage {
        offset,
        page: ViewsPage {
            totals: Some(Counts {
                human: total,
                ai: 0,
                total,
            }),
            views: views.into_iter().collect(),
            rejects: Vec::new(),
            has_more: more,
        },
    };
    assert_eq!(check(&[page(0, vec![row("/a", 1)], 1, false)]), Ok(()));
    // Two rows of 9.2e18 views: the sum is reported as an overflow, not wrapped to "-4".
    assert_eq!(
        check(&[page(
            0,
            vec![row("/a", i64::MAX - 1), row("/b", i64::MAX - 1)],
            -4,
            false
        )]),
        Err("the rows' human views overflow a 64-bit count (at path /b)".into())
    );
    // Totals above the rows are unlisted views (kept), rows above the totals are refused.
    assert_eq!(check(&[page(0, vec![row("/a", 1)], 2, false)]), Ok(()));
    assert_eq!(
        check(&[page(0, vec![row("/a", 3)], 2, false)]),
        Err("rows sum to 3 human + 0 ai = 3, more than the totals say, 2 + 0 = 2".into())
    );
    assert_eq!(
        check(&[
            page(0, vec![row("/a", 1)], 2, true),
            page(250, vec![row("/a", 1)], 2, false)
        ]),
        Err("path /a appears twice".into())
    );
    assert_eq!(
        check(&[
            page(0, vec![row("/a", 1)], 2, true),
            page(250, vec![row("/b", 1)], 3, false)
        ]),
        Err("totals changed during the walk (offset 250: 3 views, offset 0: 2)".into())
    );
    assert_eq!(
        check(&[page(250, vec![], 0, false)]),
        Err("page at offset 250 is out of sequence".into())
    );
}

#[tokio::test]
async fn a_second_exporter_waits_for_the_folders_lock() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    let first = Exporter::open(out.path(), live.clock.clone(), 3)
        .await
        .unwrap();
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(out.path().join(".lock"))
        .unwrap();
    assert!(matches!(
        lock.try_lock(),
        Err(std::fs::TryLockError::WouldBlock)
    ));
    drop(first);
    assert!(lock.try_lock().is_ok());
}

#[test]
fn demo_data_exports_nothing_it_should_not() {
    // The demo project is large enough that a day spans several pages of 250 rows.
    let demo = DataFile::parse(docpipe::emulator::DEMO_DATA, "demo").unwrap();
    assert!(demo.projects.iter().any(|p| p.pages >= 600));
}

/// `(path, human, ai)`.
type Counted = (String, i64, i64);

/// The rows of `project` in the Parquet partition of `d`, and the emulator's truth over
/// `from..to` (UTC instants), both as sorted `(path, human, ai)`.
fn partition_and_truth(
    live: &Live,
    out: &Path,
    project: &str,
    d: chrono::NaiveDate,
    from: chrono::NaiveDateTime,
    to: chrono::NaiveDateTime,
) -> (Vec<Counted>, Vec<Counted>) {
    let mut got: Vec<_> = read_page_views(&partition_dir(out, PAGE_VIEWS, project, d).join(PART))
        .unwrap()
        .into_iter()
        .map(|r| (r.path, r.human, r.ai))
        .collect();
    got.sort();
    let mut want: Vec<_> = live
        .emu()
        .truth_between(project, from, to)
        .unwrap()
        .iter()
        .map(|r| (r.path.clone(), r.human as i64, r.ai as i64))
        .collect();
    want.sort();
    (got, want)
}

#[tokio::test]
async fn days_of_a_time_zone_run_from_its_midnights_and_a_folder_keeps_its_zone() {
    use docpipe::calendar::local_midnight;
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    let ny = chrono_tz::America::New_York;
    let exporter = Exporter::open_in(out.path(), live.clock.clone(), 3, ny)
        .await
        .unwrap();
    let t = targets(&live, open_limits());
    // New York's clocks go forward on 2026-03-08: that day has 23 hours.
    let plan = exporter
        .plan(&t, day("2026-03-06"), day("2026-03-09"))
        .unwrap();
    let s = exporter.run(&t, &plan).await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_eq!(s.windows.len(), 12);
    let utc = |d: chrono::NaiveDate| local_midnight(d, ny).naive_utc();
    for p in PROJECTS {
        for d in ["2026-03-06", "2026-03-07", "2026-03-08", "2026-03-09"] {
            let d = day(d);
            let (got, want) =
                partition_and_truth(&live, out.path(), p, d, utc(d), utc(d.succ_opt().unwrap()));
            assert!(!got.is_empty());
            assert_eq!(got, want, "{p} {d}");
        }
    }
    assert_eq!(
        (
            utc(day("2026-03-08")).to_string(),
            utc(day("2026-03-09")).to_string()
        ),
        (
            "2026-03-08 05:00:00".to_string(),
            "2026-03-09 04:00:00".to_string()
        )
    );
    // The New York day is not the UTC day.
    let (got, utc_day) = partition_and_truth(
        &live,
        out.path(),
        "alpha",
        day("2026-03-08"),
        day("2026-03-08").and_hms_opt(0, 0, 0).unwrap(),
        day("2026-03-09").and_hms_opt(0, 0, 0).unwrap(),
    );
    assert_ne!(got, utc_day);
    drop(exporter);
    // Once a folder holds New York days, opening it for UTC days is refused.
    let err = Exporter::open(out.path(), live.clock.clone(), 3)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "output folder {}: its days are America/New_York days, not UTC: set export.timezone = \"America/New_York\" or use another output folder",
            out.path().display()
        )
    );
}

#[tokio::test]
async fn today_and_a_backfill_share_a_tight_budget_hour_after_hour_and_a_window_too_big_for_what_is_left_is_walked_in_parts()
 {
    // 10 requests an hour; alpha's 15 days of page views (3 requests a day) and feedback to
    // fetch. The emulator is frozen: the truth stays put while the hours pass.
    let live = Live::start_frozen(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = Exporter::open(&out, live.clock.clone(), 3).await.unwrap();
    let limits = Limits {
        analytics_per_hour: 10,
        headroom_percent: 0,
        ..open_limits()
    };
    let mut targets = targets(&live, limits);
    targets.truncate(1);
    targets[0].start = Some(day("2026-03-01"));
    targets[0].datasets = vec!["page_views", "feedback"];
    let today = day("2026-03-15");
    let mut done_at = None;
    let mut paused = 0;
    for hour in 0..11u64 {
        let mut plan = exporter.plan(&targets, today, today).unwrap();
        let backfill_left = plan
            .due
            .iter()
            .any(|d| d.purpose == docpipe::planner::Purpose::Backfill);
        if !backfill_left && done_at.is_none() {
            done_at = Some(hour);
        }
        plan.fit(exporter.freshness());
        let s = exporter.run(&targets, &plan).await;
        assert!(s.failed.is_empty(), "{:?}", s.failed);
        // Never past the hour's budget.
        assert!(s.requests <= 10, "hour {hour}: {} requests", s.requests);
        // Today's page views looked at every hour (walked, or probed and unchanged).
        let looked = s.windows.iter().any(|w| w.day == today)
            || s.checked
                .iter()
                .any(|c| c.dataset == PAGE_VIEWS && c.day == today);
        assert!(looked, "hour {hour}: today was not looked at");
        // While days are missing, every hour spends some of its budget on them.
        let backfill: u64 = s
            .spent
            .iter()
            .filter(|((_, p), _)| *p == "backfill")
            .map(|(_, n)| n)
            .sum();
        if backfill_left {
            assert!(backfill >= 1, "hour {hour}: the backfill starved");
        }
        paused += s.paused;
        live.clock.advance(std::time::Duration::from_secs(3600));
    }
    assert_eq!(live.emu().refused_over_limit().get("analytics"), None);
    // The 7 requests left after the first hour's today walk (3) hold two days and a part of
    // a third: windows were walked in parts and went on the next hour.
    assert!(paused >= 1, "no window was walked in parts");
    let done_at = done_at.expect("the backfill finished within 11 hours");
    assert!(
        done_at >= 6,
        "45 requests of page views alone need 6 hours: {done_at}"
    );
    // Everything equals the truth: every day's page views, every feedback entry once.
    let mut d = day("2026-03-01");
    while d <= today {
        let got = crate::truth::exported_views(&out, "alpha", d).unwrap();
        assert_eq!(got, crate::truth::true_views(live.emu(), "alpha", d), "{d}");
        d = d.succ_opt().unwrap();
    }
    let truth = crate::truth::truth_of(
        &live.server.base_url(),
        "alpha",
        "feedback",
        day("2026-03-01"),
        day("2026-03-16"),
    )
    .await;
    let dated: usize = crate::truth::rows_of(&out, "feedback", "alpha")
        .values()
        .map(Vec::len)
        .sum();
    let undated = docpipe::dataset::analytics::FEEDBACK.undated_table.unwrap();
    let undated = crate::truth::parquet_json(
        &out.join(undated)
            .join("project=alpha")
            .join("part-00000.parquet"),
    )
    .len();
    assert_eq!(dated + undated, truth["feedback"].as_array().unwrap().len());
}

#[tokio::test]
async fn a_full_feedback_recheck_walked_in_parts_across_midnight_counts_as_done() {
    // Feedback's 14-day re-check, walked a few requests an hour from 22:00: it ends after
    // midnight, and counts as the full re-check (the next hour walks the recent days only).
    let live = Live::start_frozen(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = Exporter::open(&out, live.clock.clone(), 3).await.unwrap();
    let mut targets = targets(&live, open_limits());
    targets.truncate(1);
    targets[0].start = Some(day("2026-03-01"));
    targets[0].datasets = vec!["feedback"];
    let spans = |plan: &docpipe::export::Plan| {
        plan.due
            .iter()
            .map(|d| (d.day, d.to, d.purpose))
            .collect::<Vec<_>>()
    };
    let today = day("2026-03-15");
    let plan = exporter.plan(&targets, today, today).unwrap();
    let s = exporter.run(&targets, &plan).await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let whole = s.requests;
    assert!(whole >= 4, "the walk takes {whole} requests");
    // 22:00 the next day: the full re-check is due; 2 requests an hour.
    let hour = std::time::Duration::from_secs(3600);
    live.clock.advance(hour * 34);
    let tight = Limits {
        analytics_per_hour: 2,
        headroom_percent: 0,
        ..open_limits()
    };
    let mut targets = crate::common::targets(&live, tight);
    targets.truncate(1);
    targets[0].start = Some(day("2026-03-01"));
    targets[0].datasets = vec!["feedback"];
    let today = day("2026-03-16");
    let plan = exporter.plan(&targets, today, today).unwrap();
    use docpipe::clock::Clock;
    use docpipe::planner::Purpose;
    assert_eq!(
        spans(&plan),
        [(day("2026-03-02"), day("2026-03-17"), Purpose::Recheck)]
    );
    let mut hours = 0;
    let mut paused = 0;
    loop {
        let today = live.clock.now().date_naive();
        let mut plan = exporter.plan(&targets, today, today).unwrap();
        if hours > 0 {
            // The walk under way goes on, after midnight too.
            assert_eq!(plan.due.len(), 1);
            assert_eq!(plan.due[0].day, day("2026-03-02"), "hour {hours}");
            assert!(plan.due[0].full, "hour {hours}");
        }
        plan.fit(exporter.freshness());
        let s = exporter.run(&targets, &plan).await;
        assert!(s.failed.is_empty(), "{:?}", s.failed);
        assert!(s.requests <= 2, "hour {hours}: {} requests", s.requests);
        hours += 1;
        live.clock.advance(hour);
        if s.paused == 0 {
            break;
        }
        paused += s.paused;
        assert!(hours < 20, "the walk never ended");
    }
    assert!(
        hours >= 3,
        "the walk ended after midnight: {hours} hours ({paused} pauses)"
    );
    // Done at 01:00 or later on 03-17: the next plan walks the recent days only.
    let today = day("2026-03-17");
    assert_eq!(live.clock.now().date_naive(), today);
    let plan = exporter.plan(&targets, today, today).unwrap();
    assert_eq!(
        spans(&plan),
        [(day("2026-03-16"), day("2026-03-18"), Purpose::Fresh)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projects_first_full_feedback_rechecks_are_staggered_across_the_interval() {
    // Three projects walk feedback for the first time in the same run: their next full
    // re-checks fall due 0, 2 and 4 hours apart (k/3 of the 6-hour interval early), not in the
    // same hour.
    use docpipe::clock::Clock;
    let live = Live::start_frozen(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let exporter = Exporter::open(&dir.path().join("out"), live.clock.clone(), 3)
        .await
        .unwrap();
    let mut targets = targets(&live, open_limits());
    for t in &mut targets {
        t.start = Some(day("2026-03-01"));
        t.datasets = vec!["feedback"];
    }
    let today = day("2026-03-15");
    let plan = exporter.plan(&targets, today, today).unwrap();
    let s = exporter.run(&targets, &plan).await;
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let now = live.clock.now();
    let full: Vec<(String, i64)> = targets
        .iter()
        .map(|t| {
            let look = exporter
                .state()
                .span_state("feedback", &t.project)
                .unwrap()
                .look;
            assert_eq!(look.walked_at, Some(now), "{}", t.project);
            (
                t.project.clone(),
                (now - look.full_at.unwrap()).num_minutes(),
            )
        })
        .collect();
    assert_eq!(
        full,
        [
            ("alpha".to_string(), 0),
            ("beta".to_string(), 120),
            ("gamma".to_string(), 240)
        ]
    );
    // 2 hours later, gamma's full re-check is due (6 h counted from 4 h before its walk),
    // the others' recent walks only.
    live.clock.advance(std::time::Duration::from_secs(2 * 3600));
    let plan = exporter.plan(&targets, today, today).unwrap();
    let full_due: Vec<&str> = plan
        .due
        .iter()
        .filter(|d| d.full)
        .map(|d| d.project.as_str())
        .collect();
    assert_eq!(full_due, ["gamma"]);
}

/// Exports alpha's page views of 2026-03-01..=03-14 from an emulator whose totals count
/// `unlisted` views beyond the rows, then again six hours later; the requests of each run and
/// each day's `site_totals` row (`total`, `unlisted`, `final`).
async fn with_unlisted(unlisted: u64) -> ([u64; 2], Vec<(i64, Option<i64>, bool)>, Summary) {
    let mut data = small();
    data.faults.unlisted_views = unlisted;
    let live = Live::start_frozen(data).await;
    let out = tempfile::tempdir().unwrap();
    let exporter = Exporter::open(out.path(), live.clock.clone(), 3)
        .await
        .unwrap();
    let mut t = targets(&live, open_limits());
    t.truncate(1);
    let mut requests = [0; 2];
    let mut first = None;
    for (i, r) in requests.iter_mut().enumerate() {
        let plan = exporter
            .plan(&t, day("2026-03-01"), day("2026-03-14"))
            .unwrap();
        let s = exporter.run(&t, &plan).await;
        assert!(s.failed.is_empty(), "{:?}", s.failed);
        *r = s.requests;
        if i == 0 {
            first = Some(s);
        }
        live.clock.advance(std::time::Duration::from_secs(6 * 3600));
    }
    let mut rows = Vec::new();
    let mut d = day("2026-03-01");
    while d <= day("2026-03-14") {
        let f = partition_dir(out.path(), SITE_TOTALS, "alpha", d).join(PART);
        let row = &crate::truth::parquet_json(&f)[0];
        rows.push((
            row["total"].as_i64().unwrap(),
            row["unlisted"].as_i64(),
            row["final"].as_bool().unwrap(),
        ));
        d = d.succ_opt().unwrap();
    }
    (requests, rows, first.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totals_above_the_rows_are_kept_as_unlisted_and_cost_what_a_normal_day_costs() {
    let (normal_requests, normal, _) = with_unlisted(0).await;
    let (requests, days, summary) = with_unlisted(7).await;
    // The same requests as a day whose rows add up: no walk again, no walk every run.
    assert_eq!(requests, normal_requests);
    assert_eq!(days.len(), 14);
    for ((total, unlisted, is_final), (n_total, n_unlisted, n_final)) in days.iter().zip(&normal) {
        assert_eq!(
            (*total, *unlisted, *is_final),
            (n_total + 7, Some(7), *n_final)
        );
        assert_eq!(*n_unlisted, Some(0));
    }
    // Finalised by age like any day, and no mismatch.
    assert!(days.iter().filter(|d| d.2).count() >= 10, "{days:?}");
    assert!(
        summary
            .windows
            .iter()
            .all(|w| w.mismatch.is_none() && w.unlisted == 7)
    );
    let report = docpipe::export::describe_summary(&summary);
    assert!(
        report.contains("  unlisted in alpha 2026-03-01: the service's totals count 7 views without a listed path (kept in site_totals.unlisted)\n"),
        "{report}"
    );
}
