//! Trends against values computed independently from the emulator's truth.

use crate::common::*;
use chrono::NaiveDate;
use docpipe::trends::{Selection, compute, summarize};
use polars::prelude::*;
use std::collections::BTreeMap;

const PROJECTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// (human, ai) of a project's exported days, from the emulator's truth.
fn truth(live: &Live, project: &str, days: &[NaiveDate]) -> BTreeMap<NaiveDate, (i64, i64)> {
    days.iter()
        .map(|d| {
            let rows = live
                .emu()
                .truth(project, *d, d.succ_opt().unwrap())
                .unwrap();
            (
                *d,
                (
                    rows.iter().map(|r| r.human as i64).sum(),
                    rows.iter().map(|r| r.ai as i64).sum(),
                ),
            )
        })
        .collect()
}

fn days(from: &str, to: &str) -> Vec<NaiveDate> {
    let mut out = Vec::new();
    let mut d = day(from);
    while d <= day(to) {
        out.push(d);
        d = d.succ_opt().unwrap();
    }
    out
}

fn i64_at(df: &DataFrame, name: &str, i: usize) -> Option<i64> {
    df.column(name).unwrap().i64().unwrap().get(i)
}

fn f64_at(df: &DataFrame, name: &str, i: usize) -> Option<f64> {
    df.column(name).unwrap().f64().unwrap().get(i)
}

#[tokio::test]
async fn daily_weekly_and_summary_equal_an_independent_computation() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    // 02-27 and 02-28 are before the data starts (exported, no views); 03-05 is never exported.
    exported(
        &live,
        out.path(),
        &[("2026-02-27", "2026-03-04"), ("2026-03-06", "2026-03-15")],
    )
    .await;
    let mut exported_days = days("2026-02-27", "2026-03-15");
    exported_days.retain(|d| *d != day("2026-03-05"));
    let tables = compute(out.path(), &Selection::default()).unwrap();
    let daily = &tables.daily;
    assert_eq!(daily.height(), 3 * exported_days.len());
    let projects = daily.column("project").unwrap().str().unwrap().clone();
    let dates = daily
        .column("date")
        .unwrap()
        .cast(&DataType::Int32)
        .unwrap();
    let dates = dates.i32().unwrap().clone();
    let provisional = daily.column("provisional").unwrap().bool().unwrap().clone();
    let epoch = day("1970-01-01");
    let truths: BTreeMap<&str, _> = PROJECTS
        .iter()
        .map(|p| (*p, truth(&live, p, &exported_days)))
        .collect();
    let share = |a: i64, t: i64| (t > 0).then(|| a as f64 / t as f64);
    for i in 0..daily.height() {
        let p = projects.get(i).unwrap();
        let d = epoch + chrono::Duration::days(i64::from(dates.get(i).unwrap()));
        let t = &truths[p];
        let (h, a) = t[&d];
        assert_eq!(
            (
                i64_at(daily, "human", i),
                i64_at(daily, "ai", i),
                i64_at(daily, "total", i)
            ),
            (Some(h), Some(a), Some(h + a)),
            "{p} {d}"
        );
        assert_eq!(f64_at(daily, "ai_share", i), share(a, h + a), "{p} {d}");
        for (n, name) in [(7, "7d"), (28, "28d")] {
            let (sh, sa) = t
                .iter()
                .filter(|(x, _)| **x <= d && (d - **x).num_days() < n)
                .fold((0, 0), |(x, y), (_, (h, a))| (x + h, y + a));
            assert_eq!(
                i64_at(daily, &format!("total_{name}"), i),
                Some(sh + sa),
                "{p} {d} {name}"
            );
            assert_eq!(
                i64_at(daily, &format!("ai_{name}"), i),
                Some(sa),
                "{p} {d} {name}"
            );
            assert_eq!(
                f64_at(daily, &format!("ai_share_{name}"), i),
                share(sa, sh + sa),
                "{p} {d} {name}"
            );
        }
        let before = t.get(&(d - chrono::Duration::days(7))).map(|(h, a)| h + a);
        assert_eq!(i64_at(daily, "total_week_before", i), before, "{p} {d}");
        let change = before
            .filter(|b| *b > 0)
            .map(|b| (h + a) as f64 / b as f64 - 1.0);
        assert_eq!(f64_at(daily, "change_vs_week_before", i), change, "{p} {d}");
        assert_eq!(provisional.get(i), Some(d >= day("2026-03-12")), "{p} {d}");
    }
    // Days before the data starts are exported zeros with a null share, never a division error.
    let zero = (0..daily.height())
        .find(|i| i64_at(daily, "total", *i) == Some(0))
        .expect("a zero day");
    assert_eq!(f64_at(daily, "ai_share", zero), None);

    // Weekly: alpha's ISO week 10 (Monday 03-02 to Sunday 03-08) without the unexported 03-05.
    let weekly = &tables.weekly;
    let wp = weekly.column("project").unwrap().str().unwrap().clone();
    let ws = weekly
        .column("week_start")
        .unwrap()
        .cast(&DataType::Int32)
        .unwrap();
    let ws = ws.i32().unwrap().clone();
    let monday = (day("2026-03-02") - epoch).num_days() as i32;
    let i = (0..weekly.height())
        .find(|i| wp.get(*i) == Some("alpha") && ws.get(*i) == Some(monday))
        .unwrap();
    let week: Vec<(i64, i64)> = days("2026-03-02", "2026-03-08")
        .iter()
        .filter_map(|d| truths["alpha"].get(d).copied())
        .collect();
    let (h, a) = week.iter().fold((0, 0), |(x, y), (h, a)| (x + h, y + a));
    assert_eq!(
        (
            i64_at(weekly, "days", i),
            i64_at(weekly, "total", i),
            i64_at(weekly, "ai", i)
        ),
        (Some(6), Some(h + a), Some(a))
    );
    assert_eq!(
        weekly
            .column("iso_week")
            .unwrap()
            .cast(&DataType::Int64)
            .unwrap()
            .i64()
            .unwrap()
            .get(i),
        Some(10)
    );
    assert_eq!(
        f64_at(weekly, "change_vs_week_before", i),
        None,
        "an incomplete week has no change"
    );
    // The next week (03-09 to 03-15) is complete but its predecessor is not: no change either.
    let next = (0..weekly.height())
        .find(|i| wp.get(*i) == Some("alpha") && ws.get(*i) == Some(monday + 7))
        .unwrap();
    assert_eq!(
        (
            i64_at(weekly, "days", next),
            f64_at(weekly, "change_vs_week_before", next)
        ),
        (Some(7), None)
    );

    // The summary: last 7 days (03-09..03-15) against the 7 before (03-02..03-08, one missing).
    let s = summarize(&tables).unwrap();
    let alpha = s.iter().find(|s| s.project == "alpha").unwrap();
    let sum = |from, to| {
        days(from, to)
            .iter()
            .filter_map(|d| truths["alpha"].get(d))
            .fold((0, 0), |(t, x), (h, a)| (t + h + a, x + a))
    };
    let (now, before) = (
        sum("2026-03-09", "2026-03-15"),
        sum("2026-03-02", "2026-03-08"),
    );
    assert_eq!(alpha.last_day, day("2026-03-15"));
    assert_eq!(alpha.total, (now.0, before.0));
    assert_eq!(
        alpha.ai_share,
        (share(now.1, now.0), share(before.1, before.0))
    );
    assert_eq!(
        (alpha.provisional_days, alpha.missing_days.clone()),
        (4, vec![day("2026-03-05")])
    );
    let text = docpipe::trends::describe(&s);
    assert!(
        text.contains(", 4 provisional days, not exported: 2026-03-05\n"),
        "{text}"
    );
    // A week with a day missing gives no week-on-week change.
    assert!(
        text.contains(&format!(
            "  alpha (to 2026-03-15): {} views (no change: the two weeks are not both exported), AI share",
            now.0
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_selection_prunes_projects_and_days() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    exported(&live, out.path(), &[("2026-03-01", "2026-03-10")]).await;
    let sel = Selection {
        projects: vec!["beta".into()],
        from: Some(day("2026-03-03")),
        to: Some(day("2026-03-06")),
    };
    let t = compute(out.path(), &sel).unwrap();
    assert_eq!(t.daily.height(), 4);
    let ps = t.daily.column("project").unwrap().str().unwrap().clone();
    assert!((0..4).all(|i| ps.get(i) == Some("beta")));
    let empty = tempfile::tempdir().unwrap();
    let e = compute(empty.path(), &Selection::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "no exported data in {}: run `docpipe export` or `docpipe backfill` first",
            empty.path().display()
        )
    );
}

#[tokio::test]
async fn an_output_folder_with_glob_characters_reads_only_its_own_partitions() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("out[1]*?");
    exported(&live, &odd, &[("2026-03-01", "2026-03-02")]).await;
    // A folder the pattern `out[1]*?` would match, with other days.
    exported(
        &live,
        &dir.path().join("out1ab"),
        &[("2026-03-05", "2026-03-09")],
    )
    .await;
    let t = compute(&odd, &Selection::default()).unwrap();
    assert_eq!(t.daily.height(), 3 * 2);
    let dates = t.daily.column("date").unwrap().date().unwrap().clone();
    let first = day("2026-03-01")
        .signed_duration_since(day("1970-01-01"))
        .num_days() as i32;
    assert!(
        (0..6).all(|i| (first..=first + 1).contains(&dates.phys.get(i).unwrap())),
        "{}",
        t.daily
    );
    assert_eq!(t.pages.column("project").unwrap().n_unique().unwrap(), 3);
}

#[tokio::test]
async fn the_page_table_and_its_movers_equal_an_independent_computation() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    exported(&live, out.path(), &[("2026-03-01", "2026-03-15")]).await;
    let tables = compute(out.path(), &Selection::default()).unwrap();
    let pages = &tables.pages;
    // Summed a day at a time (a large site's parts), the table is the same (polars off the
    // test's runtime, as `compute` runs it).
    let (whole, in_parts) = std::thread::scope(|s| {
        s.spawn(|| {
            let sel = Selection::default();
            let partial = docpipe::trends::partial_days(out.path(), &sel).unwrap();
            let at_once = |rows| {
                docpipe::trends::pages_in_parts(out.path(), &sel, &partial, rows)
                    .unwrap()
                    .collect()
                    .unwrap()
            };
            (at_once(1_000_000), at_once(1))
        })
        .join()
        .unwrap()
    });
    assert_eq!(
        (in_parts.height(), whole.height()),
        (pages.height(), pages.height())
    );
    assert!(in_parts.equals_missing(&whole), "{in_parts} != {whole}");
    let project = pages.column("project").unwrap().str().unwrap().clone();
    let path = pages.column("path").unwrap().str().unwrap().clone();
    let u32_at = |name: &str, i: usize| {
        pages
            .column(name)
            .unwrap()
            .cast(&DataType::UInt32)
            .unwrap()
            .u32()
            .unwrap()
            .get(i)
    };
    for p in ["beta", "gamma"] {
        // Per path: (human, ai) over 03-09..03-15 and over 03-02..03-08, from the truth.
        let mut want: BTreeMap<String, [i64; 4]> = BTreeMap::new();
        for (from, to, at) in [
            ("2026-03-09", "2026-03-15", 0),
            ("2026-03-02", "2026-03-08", 2),
        ] {
            for d in days(from, to) {
                for r in live
                    .emu()
                    .truth(p, d, d.succ_opt().unwrap())
                    .unwrap()
                    .iter()
                {
                    let e = want.entry(r.path.clone()).or_default();
                    e[at] += r.human as i64;
                    e[at + 1] += r.ai as i64;
                }
            }
        }
        let rows: Vec<usize> = (0..pages.height())
            .filter(|i| project.get(*i) == Some(p))
            .collect();
        let mut best_total = (0, String::new());
        let mut best_rise: Option<(f64, String)> = None;
        for &i in &rows {
            let path = path.get(i).unwrap().to_string();
            let w = want.remove(&path).unwrap_or_default();
            let got = [
                i64_at(pages, "human_7d", i),
                i64_at(pages, "ai_7d", i),
                i64_at(pages, "human_prev_7d", i),
                i64_at(pages, "ai_prev_7d", i),
            ];
            assert_eq!(got.map(|x| x.unwrap()), w, "{p} {path}");
            let (now, before) = (w[0] + w[1], w[2] + w[3]);
            let change = (before > 0).then(|| now as f64 / before as f64 - 1.0);
            assert_eq!(f64_at(pages, "change_7d", i), change, "{p} {path}");
            assert_eq!(
                f64_at(pages, "change_28d", i),
                None,
                "the 28-day windows are incomplete"
            );
            if now > best_total.0 {
                best_total = (now, path.clone());
            }
            if now >= 20 && before >= 20 {
                let rise = w[1] as f64 / now as f64 - w[3] as f64 / before as f64;
                if best_rise.as_ref().is_none_or(|(r, _)| rise > *r) {
                    best_rise = Some((rise, path.clone()));
                }
            } else {
                assert_eq!(
                    u32_at("mover_rank_7d", i),
                    None,
                    "{p} {path} has too few views to move"
                );
            }
        }
        assert!(
            want.values().all(|w| w.iter().all(|x| *x == 0)),
            "every page with views is in the table"
        );
        let rank1 = |name: &str| {
            rows.iter()
                .find(|i| u32_at(name, **i) == Some(1))
                .map(|i| path.get(*i).unwrap().to_string())
        };
        assert_eq!(rank1("rank_7d"), Some(best_total.1), "{p}");
        assert_eq!(rank1("mover_rank_7d"), best_rise.map(|b| b.1), "{p}");
    }
    let s = summarize(&tables).unwrap();
    let beta = s.iter().find(|s| s.project == "beta").unwrap();
    assert!(beta.movers.len() <= 3);
}

#[tokio::test]
async fn a_chart_per_project_is_written_as_png_and_svg() {
    let live = Live::start(small()).await;
    let out = tempfile::tempdir().unwrap();
    exported(&live, out.path(), &[("2026-03-01", "2026-03-15")]).await;
    let mut tables = compute(out.path(), &Selection::default()).unwrap();
    let files = docpipe::trends::write_tables(out.path(), &mut tables).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "daily.parquet",
            "daily.csv",
            "weekly.parquet",
            "weekly.csv",
            "pages.parquet",
            "pages.csv",
            "search_terms.parquet",
            "search_terms.csv",
            "search_daily.parquet",
            "search_daily.csv",
            "assistant_daily.parquet",
            "assistant_daily.csv",
            "assistant_categories.parquet",
            "assistant_categories.csv",
            "unanswered_questions.parquet",
            "unanswered_questions.csv",
            "feedback_pages.parquet",
            "feedback_pages.csv",
            "visitors_daily.parquet",
            "visitors_daily.csv",
            "callers_weekly.parquet",
            "callers_weekly.csv",
            "agent_page_reads.parquet",
            "agent_page_reads.csv",
            "ai_operators_daily.parquet",
            "ai_operators_daily.csv",
            "chart-alpha.png",
            "chart-alpha.svg",
            "chart-beta.png",
            "chart-beta.svg",
            "chart-gamma.png",
            "chart-gamma.svg",
        ]
    );
    let png = std::fs::read(out.path().join("trends/chart-alpha.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), docpipe::trends::chart::SIZE);
    let svg = std::fs::read_to_string(out.path().join("trends/chart-alpha.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    for text in [
        "alpha: page views per day, human and AI",
        "AI share, 7 days (right axis)",
        "provisional (may still change)",
    ] {
        assert!(svg.contains(text), "{text}");
    }
    // The series behind the chart: 15 days of alpha; the 7-day averages only from the 7th day
    // (an average of fewer days is not drawn).
    let series = docpipe::trends::chart::series(&tables.daily).unwrap();
    let (_, alpha) = series.iter().find(|(p, _)| p == "alpha").unwrap();
    assert_eq!(alpha.days.len(), 15);
    let last7: f64 = alpha.human[8..].iter().sum::<f64>() / 7.0;
    assert!((alpha.human_avg[14].unwrap() - last7).abs() < 1e-9);
    assert_eq!(
        alpha
            .human_avg
            .iter()
            .map(Option::is_some)
            .collect::<Vec<_>>(),
        [[false; 6].as_slice(), &[true; 9]].concat()
    );
    assert_eq!(alpha.share.iter().take(6).flatten().count(), 0);
    assert_eq!(alpha.provisional.iter().filter(|p| **p).count(), 4);
}
