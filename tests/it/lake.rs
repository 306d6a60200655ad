//! The lake says what each day is: `day_status`, kept by each run, on a manual clock in a time
//! zone that changed its clocks two days before.

use crate::common::*;
use docpipe::api::AdminKey;
use docpipe::app::cycle::{self, Options};
use docpipe::app::{Access, Context, Keys};
use std::collections::BTreeMap;
use std::time::Duration;

fn keys() -> Keys {
    let key = |k: &str| AdminKey::parse(k, "mint", "test").unwrap();
    Keys::Given(BTreeMap::from([
        ("org-a".to_string(), key(ADMIN_A)),
        ("org-b".to_string(), key(ADMIN_B)),
    ]))
}

/// `day_status` of a project: (dataset, date, status) of each row, and each row's time zone.
fn statuses(out: &std::path::Path, project: &str) -> Vec<(String, String, String)> {
    let file = out.join(format!("day_status/project={project}/part-00000.parquet"));
    parquet_rows(&file)
        .iter()
        .map(|row| {
            let get = |name: &str| {
                row.split(',')
                    .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                    .unwrap()
                    .trim_matches('"')
                    .to_string()
            };
            assert_eq!(get("timezone"), "America/Los_Angeles", "{row}");
            (get("dataset"), get("date"), get("status"))
        })
        .collect()
}

/// The statuses of one dataset, by date.
fn of(rows: &[(String, String, String)], dataset: &str) -> Vec<(String, String)> {
    rows.iter()
        .filter(|r| r.0 == dataset)
        .map(|r| (r.1.clone(), r.2.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn day_status_says_which_days_are_partial_provisional_and_final_across_the_clock_change() {
    // 10:00 in Los Angeles on 2026-03-10; its clocks went forward on 2026-03-08.
    let now: chrono::DateTime<chrono::Utc> = "2026-03-10T17:00:00Z".parse().unwrap();
    let live = Live::start_at(small(), now).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = TestConfig {
        datasets: String::new(),
        start: Some(day("2026-03-04")),
        extra: "timezone = \"America/Los_Angeles\"\nlookback_days = 3\n".into(),
        ..TestConfig::new(&live.server.base_url(), &out)
    }
    .write(&dir.path().join("docpipe.toml"));
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let ctx = Context::open(settings, live.clock.clone(), Access::Export, keys())
        .await
        .unwrap();
    let targets = ctx.targets(&[]).unwrap();
    let run = || async {
        let exporter = ctx.exporter();
        let plan = docpipe::app::export::plan_due(&ctx, &exporter, &targets).unwrap();
        cycle::run(
            &ctx,
            &exporter,
            &targets,
            &plan,
            Options::export_only(false),
        )
        .await
    };
    let report = run().await;
    assert!(
        report.summary.failed.is_empty(),
        "{:?}",
        report.summary.failed
    );
    assert_eq!(report.day_status.as_ref().unwrap().len(), 3);
    let day_of = |d: &str, s: &str| (d.to_string(), s.to_string());
    let rows = statuses(&out, "alpha");
    // Today is not over; the three days within the lateness allowance may change; older ones
    // cannot.
    assert_eq!(
        of(&rows, "page_views"),
        [
            day_of("2026-03-04", "final"),
            day_of("2026-03-05", "final"),
            day_of("2026-03-06", "final"),
            day_of("2026-03-07", "provisional"),
            day_of("2026-03-08", "provisional"),
            day_of("2026-03-09", "provisional"),
            day_of("2026-03-10", "partial"),
        ]
    );
    // Every dataset's today is partial, none of its other days is.
    for (dataset, date, status) in &rows {
        assert_eq!(
            status == "partial",
            date == "2026-03-10",
            "{dataset} {date} {status}"
        );
    }
    // Nothing written a minute later: the files stay as they are.
    let before = std::fs::metadata(out.join("day_status/project=alpha/part-00000.parquet"))
        .unwrap()
        .modified()
        .unwrap();
    live.clock.advance(Duration::from_secs(60));
    let exporter = ctx.exporter();
    let empty = docpipe::export::Plan::default();
    // A run with nothing to fetch.
    let idle = || {
        cycle::run(
            &ctx,
            &exporter,
            &targets,
            &empty,
            Options::export_only(false),
        )
    };
    let report = idle().await;
    assert_eq!(report.day_status.unwrap(), Vec::<std::path::PathBuf>::new());
    let after = std::fs::metadata(out.join("day_status/project=alpha/part-00000.parquet"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(after, before);
    // Half past midnight, before any fetch: yesterday is over but its data were fetched at
    // 10:00, so it is still partial; "is yesterday complete?" answers no.
    live.clock.advance(Duration::from_secs(14 * 3600 + 29 * 60));
    let report = idle().await;
    assert_eq!(report.day_status.unwrap().len(), 3);
    let rows = statuses(&out, "alpha");
    assert_eq!(
        of(&rows, "page_views")[5..],
        [
            day_of("2026-03-09", "provisional"),
            day_of("2026-03-10", "partial")
        ]
    );
    let complete = |out: &std::path::Path| {
        run_python(
            "import duckdb, sys\nprint(duckdb.sql(open(sys.argv[1]).read().replace('<output>', sys.argv[2])).fetchall())",
            &[dir.path().join("query.sql").as_os_str(), out.as_os_str()],
        )
    };
    // The query docs/output.md gives, as it is written there.
    let docs = std::fs::read_to_string(root().join("docs/output.md")).unwrap();
    let query = docs
        .split("```sql\n-- is yesterday complete")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("docs/output.md gives the query");
    std::fs::write(
        dir.path().join("query.sql"),
        format!("-- is yesterday complete{query}").replace("'P'", "'alpha'"),
    )
    .unwrap();
    assert_eq!(complete(&out).trim(), "[(False, 0, 7)]");
    // The run of the new day fetches yesterday again, after its end: complete.
    let report = run().await;
    assert!(
        report.summary.failed.is_empty(),
        "{:?}",
        report.summary.failed
    );
    let rows = statuses(&out, "alpha");
    assert_eq!(
        of(&rows, "page_views")[6..],
        [
            day_of("2026-03-10", "provisional"),
            day_of("2026-03-11", "partial")
        ]
    );
    assert_eq!(complete(&out).trim(), "[(True, 7, 7)]");
}
