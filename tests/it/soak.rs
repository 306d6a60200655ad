//! Proof under faults: a backfill of the demo data through every fault at once, and a crash loop
//! of kill -9 at random moments. The 90-day soak is `#[ignore]`d (`cargo test --release --test it
//! soak -- --ignored`); the suite runs the same soak over 12 days.

use crate::common::*;
use docpipe::dataset::page_views::{PAGE_VIEWS, read_page_views};
use docpipe::emulator::data::{DataFile, RowOrder};
use docpipe::export::Exporter;
use docpipe::layout::{PART, partition_dir};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The demo data, every fault on.
fn hostile_demo() -> DataFile {
    let mut data = DataFile::parse(docpipe::emulator::DEMO_DATA, "demo").unwrap();
    data.faults.error_rate = 0.2;
    data.faults.burst_429_every = 13;
    data.faults.burst_429_len = 3;
    data.faults.burst_retry_after_secs = 7;
    data.faults.cut_body_rate = 0.1;
    data.faults.drop_rate = 0.05;
    data.faults.row_order = RowOrder::Shuffled;
    data.faults.late_days = 2;
    // Late waves come when the test says (below, while the backfill runs), not with the clock.
    data.faults.late_every_secs = 1_000_000_000;
    data.faults.seed = 90;
    data
}

/// Clients of the demo organizations with the service's real limit (100 an hour, 5% headroom),
/// sharing one budget.
fn demo_targets(live: &Live) -> Vec<docpipe::export::Target> {
    use docpipe::api::*;
    let budget: Arc<dyn budget::Budget> = Arc::new(budget::MemoryBudget::default());
    let limits = docpipe::api::Limits::default();
    let mut out = Vec::new();
    for (org, key, projects) in [
        (
            "acme",
            "mint_demo_admin_acme_0001",
            &["acme-docs", "acme-api"][..],
        ),
        (
            "globex",
            "mint_demo_admin_globex_0001",
            &["globex-help"][..],
        ),
    ] {
        let settings = ClientSettings {
            base_url: live.server.base_url(),
            timeout: std::time::Duration::from_secs(10),
            retry: RetryPolicy {
                max_retries: 10,
                ..RetryPolicy::default()
            },
            limits,
            record: None,
        };
        let client = Client::new(
            settings,
            org,
            Some(AdminKey::parse(key, "mint", "t").unwrap()),
            None,
            live.clock.clone(),
            budget.clone(),
        );
        for p in projects {
            out.push(docpipe::export::Target {
                project: p.to_string(),
                client: client.clone(),
                start: None,
                datasets: vec!["page_views"],
            });
        }
    }
    out
}

async fn soak(days: i64) {
    let live = Live::start(hostile_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let today = noon().date_naive();
    let from = today - chrono::Duration::days(days - 1);
    let targets = demo_targets(&live);
    let exporter = Exporter::open(out, live.clock.clone(), 3).await.unwrap();
    // Late events keep arriving while the backfill runs.
    let running = Arc::new(AtomicBool::new(true));
    let waves = {
        let (emu, running) = (live.emu().clone(), running.clone());
        tokio::spawn(async move {
            while running.load(Ordering::Relaxed) {
                emu.add_late_wave();
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
        })
    };
    let plan = exporter.plan(&targets, from, today).unwrap();
    let summary = exporter.run(&targets, &plan).await;
    running.store(false, Ordering::Relaxed);
    waves.await.unwrap();
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    // The late days changed under the walk; six hours later the next run looks at the
    // provisional days again: each is probed, and walked when it changed.
    live.clock.advance(std::time::Duration::from_secs(6 * 3600));
    let again = exporter
        .run(&targets, &exporter.plan(&targets, from, today).unwrap())
        .await;
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    assert_eq!(
        again.windows.len() + again.checked.len(),
        3 * 4,
        "the 4 provisional days of 3 projects"
    );
    assert!(again.windows.len() >= 3, "today at least changed");
    // Every day equals the truth: the same rows, no path twice, the same sums.
    let mut d = from;
    while d <= today {
        for t in &targets {
            let truth = live
                .emu()
                .truth(&t.project, d, d.succ_opt().unwrap())
                .unwrap();
            let rows =
                read_page_views(&partition_dir(out, PAGE_VIEWS, &t.project, d).join(PART)).unwrap();
            let paths: HashSet<&str> = rows.iter().map(|r| r.path.as_str()).collect();
            assert_eq!(paths.len(), rows.len(), "{} {d}: a path twice", t.project);
            let mut got: Vec<_> = rows
                .iter()
                .map(|r| (r.path.clone(), r.human, r.ai))
                .collect();
            let mut want: Vec<_> = truth
                .iter()
                .map(|r| (r.path.clone(), r.human as i64, r.ai as i64))
                .collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{} {d}", t.project);
        }
        d = d.succ_opt().unwrap();
    }
    // The faults happened, and docpipe never went over the limit.
    let stats = live.emu().stats();
    let views = &stats["views"];
    assert!(
        views.by_status.keys().any(|s| *s >= 500),
        "{:?}",
        views.by_status
    );
    assert!(views.by_status.contains_key(&429));
    assert_eq!(live.emu().refused_over_limit().get("analytics"), None);
    let status = |f: &dyn Fn(u16) -> bool| -> u64 {
        views
            .by_status
            .iter()
            .filter(|(s, _)| f(**s))
            .map(|(_, n)| n)
            .sum()
    };
    println!(
        "soak of {days} days: {} windows, {} rows; {} requests served ({} 200, {} 5xx, {} 429, {} dropped); {:.1} h of emulated time",
        summary.windows.len(),
        summary.rows(),
        views.requests,
        status(&|s| s == 200),
        status(&|s| s >= 500),
        status(&|s| s == 429),
        status(&|s| s == 0),
        live.slept() as f64 / 3600.0
    );
}

#[tokio::test]
async fn a_12_day_backfill_through_every_fault_equals_the_truth_within_the_budget() {
    soak(12).await;
}

#[tokio::test]
#[ignore = "long: the 90-day soak (run with --release -- --ignored)"]
async fn a_90_day_backfill_through_every_fault_equals_the_truth_within_the_budget() {
    soak(90).await;
}
