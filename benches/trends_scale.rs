//! Trends at scale: `docpipe trends` (the release binary, in a process of its own) on lakes of
//! two years, its wall time and peak resident memory (from the kernel's accounting of the
//! child, `wait4`): one project of 14,000 paths, then 5, 10 and 20 projects of 2,000 paths, and
//! one project of 100,000 paths over 90 days. Every table the trends read is generated straight
//! into the exporter's layout (page views and their site totals, searches and their totals, site
//! visitors, feedback, assistant turns and callers), at volumes in proportion to the paths (a
//! term and a turn a day for every 10 paths, an entry of feedback for every 200: the 14,000-path
//! project has a million turns and a million search terms); the per-path visitors table, which
//! the trends do not read, is left out. Goals (issues 56 and 75): the 20-project lake within
//! 1 GiB and 60 s, time linear in projects; the 14,000-path project within 256 MiB, the
//! 100,000-path one within 1 GiB. Run with `cargo bench --bench trends_scale`; it prints its
//! figures. `DOCPIPE_BENCH_DIR=folder` keeps the generated lakes there and reuses them.

mod lake;

use chrono::{DateTime, NaiveDate, Utc};
use docpipe::dataset::analytics::{ASSISTANT, CALLER_STATS, FEEDBACK, SEARCHES, VISITORS};
use docpipe::dataset::page_views::{SiteTotals, write_page_views, write_site_totals};
use docpipe::dataset::parquet::{commit, write_batch};
use docpipe::dataset::shape::{Cell, FlaggedRow, Shape};
use docpipe::layout::partition_dir;
use docpipe::random::{mix, unit};
use std::path::{Path, PathBuf};
use std::time::Instant;

const DAYS: i64 = 730;
/// The days of the 100,000-path project (a day of its page views is 100,000 rows).
const WIDE_DAYS: i64 = 90;
const GOAL_MIB: f64 = 1024.0;
const GOAL_S: f64 = 60.0;
/// The 14,000-path project's peak (issue 75).
const GOAL_ONE_MIB: f64 = 256.0;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("DOCPIPE_BENCH_DIR").map(PathBuf::from);
    let root = kept.as_deref().unwrap_or(dir.path());
    let start = NaiveDate::from_ymd_opt(2024, 11, 1).unwrap();
    println!(
        "trends at scale: `docpipe trends` on lakes of {DAYS} days ({WIDE_DAYS} for 100,000 paths), each run a process of its own"
    );
    let one = lake(root, "one", &[("big", 14_000)], start, DAYS);
    let projects: Vec<(String, u32)> = (0..20).map(|i| (format!("p{i:02}"), 2_000)).collect();
    let named: Vec<(&str, u32)> = projects.iter().map(|(p, n)| (p.as_str(), *n)).collect();
    let twenty = lake(root, "p20", &named, start, DAYS);
    let five = linked(root, &twenty, "p05", &named[..5]);
    let ten = linked(root, &twenty, "p10", &named[..10]);
    let wide_start = start + chrono::Duration::days(DAYS - WIDE_DAYS);
    let wide = lake(root, "wide", &[("wide", 100_000)], wide_start, WIDE_DAYS);
    let mut rows = Vec::new();
    for (what, lake, projects) in [
        ("1 project x 14,000 paths", &one, &[("big", 14_000)][..]),
        ("5 projects x 2,000 paths", &five, &named[..5]),
        ("10 projects x 2,000 paths", &ten, &named[..10]),
        ("20 projects x 2,000 paths", &twenty, &named[..]),
        ("1 project x 100,000 paths", &wide, &[("wide", 100_000)][..]),
    ] {
        let (wall, peak) = trends(lake, projects);
        println!("  {what:<26} {wall:>6.2} s  peak {peak:>7.1} MiB");
        rows.push((wall, peak));
    }
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    let (wall, peak) = rows[3];
    println!(
        "  20 projects against the goal: {wall:.2} s of {GOAL_S} s, {peak:.1} MiB of {GOAL_MIB} MiB: {}",
        verdict(wall <= GOAL_S && peak <= GOAL_MIB)
    );
    let (_, peak) = rows[0];
    println!(
        "  14,000 paths against the goal: {peak:.1} MiB of {GOAL_ONE_MIB} MiB: {}",
        verdict(peak <= GOAL_ONE_MIB)
    );
    let (_, peak) = rows[4];
    println!(
        "  100,000 paths against the goal: {peak:.1} MiB of {GOAL_MIB} MiB: {}",
        verdict(peak <= GOAL_MIB)
    );
    println!(
        "  time per project: 5 {:.2} s, 10 {:.2} s, 20 {:.2} s",
        rows[1].0 / 5.0,
        rows[2].0 / 10.0,
        rows[3].0 / 20.0
    );
}

// The child is reaped by `wait4` (which gives its peak memory), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
/// Runs `docpipe trends` on `lake` (its config names `projects`): wall seconds and peak
/// resident memory in MiB.
fn trends(lake: &Path, projects: &[(&str, u32)]) -> (f64, f64) {
    let cfg = lake.join("docpipe.toml");
    let mut text = "[service]\nbase_url = \"http://127.0.0.1:9\"\n\
         [[organizations]]\nid = \"bench\"\nadmin_key_env = \"DOCPIPE_BENCH_NO_KEY\"\n"
        .to_string();
    for (p, _) in projects {
        text += &format!("[[projects]]\nid = \"{p}\"\norganization = \"bench\"\n");
    }
    text += &format!("[export]\noutput_dir = \"{}\"\n", lake.display());
    std::fs::write(&cfg, text).unwrap();
    let _ = std::fs::remove_dir_all(lake.join("trends"));
    let t0 = Instant::now();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .arg("--config")
        .arg(&cfg)
        .arg("trends")
        .current_dir(lake)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run docpipe trends");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for the child it reaps.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which nothing else waits for.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = t0.elapsed().as_secs_f64();
    assert_eq!(pid, child.id() as i32, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "docpipe trends failed on {}",
        lake.display()
    );
    (wall, usage.ru_maxrss as f64 / 1024.0)
}

/// A lake of `projects` (name, paths) over `days` days at `root/name`, generated unless it is
/// there already.
fn lake(root: &Path, name: &str, projects: &[(&str, u32)], start: NaiveDate, days: i64) -> PathBuf {
    let out = root.join(name);
    let done = out.join(".generated");
    if done.exists() {
        println!("  lake {name}: kept in {}", out.display());
        return out;
    }
    let t0 = Instant::now();
    let at = Utc::now();
    let mut rows = 0usize;
    for (project, paths) in projects {
        rows += generate(&out, project, *paths, start, days, at);
    }
    std::fs::write(&done, b"").unwrap();
    println!(
        "  lake {name}: {} projects, {rows} rows generated in {:.1} s",
        projects.len(),
        t0.elapsed().as_secs_f64()
    );
    out
}

/// A lake of the first projects of `of`, its files hard links to `of`'s.
fn linked(root: &Path, of: &Path, name: &str, projects: &[(&str, u32)]) -> PathBuf {
    let out = root.join(name);
    let _ = std::fs::remove_dir_all(&out);
    for table in std::fs::read_dir(of).unwrap().flatten() {
        if !table.path().is_dir() || table.file_name() == "trends" {
            continue;
        }
        for (p, _) in projects {
            let from = table.path().join(format!("project={p}"));
            if from.is_dir() {
                link_tree(
                    &from,
                    &out.join(table.file_name()).join(format!("project={p}")),
                );
            }
        }
    }
    out
}

fn link_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            link_tree(&e.path(), &target);
        } else {
            std::fs::hard_link(e.path(), &target).unwrap();
        }
    }
}

/// Writes `rows` of `shape`'s row table for a day of a project.
fn put(
    out: &Path,
    shape: &Shape,
    project: &str,
    day: NaiveDate,
    rows: &[Vec<Cell>],
    at: DateTime<Utc>,
) {
    let flagged: Vec<FlaggedRow<'_>> = rows.iter().map(|r| (r.as_slice(), &[][..])).collect();
    let batch = shape.batch(&flagged, at).unwrap();
    commit(write_batch(&partition_dir(out, shape.table, project, day), &batch).unwrap()).unwrap();
}

/// Writes a totals table's day.
fn put_totals(
    out: &Path,
    shape: &Shape,
    project: &str,
    day: NaiveDate,
    totals: &[Cell],
    rows: i64,
    at: DateTime<Utc>,
) {
    let batch = shape.totals_batch(totals, rows, at, true).unwrap();
    let table = shape.totals_table.unwrap();
    commit(write_batch(&partition_dir(out, table, project, day), &batch).unwrap()).unwrap();
}

/// `days` days of every table the trends read, for one project: the rows written.
fn generate(
    out: &Path,
    project: &str,
    paths: u32,
    start: NaiveDate,
    days: i64,
    at: DateTime<Utc>,
) -> usize {
    let names: Vec<String> = (0..paths)
        .map(docpipe::emulator::generate::page_path)
        .collect();
    let seed = mix(project
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31) ^ u64::from(b)));
    let micros = |day: NaiveDate, i: u64| {
        day.and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc()
            .timestamp_micros()
            + (i as i64 * 7_919_000_000) % 86_400_000_000
    };
    let mut written = 0;
    for d in 0..days {
        let day = start + chrono::Duration::days(d);
        // Page views and the day's totals.
        let (rows, totals) = lake::page_views(&names, d, days, seed);
        let h0 = mix(seed ^ (d as u64) << 24);
        write_page_views(out, project, day, &[&rows], at)
            .unwrap()
            .commit()
            .unwrap();
        let site = SiteTotals {
            totals,
            rows: rows.len() as i64,
            unlisted: Some(0),
            is_final: true,
        };
        write_site_totals(out, project, day, &site, at)
            .unwrap()
            .commit()
            .unwrap();
        written += rows.len();
        // Site visitors: fewer than the views.
        let visitors = [
            Cell::Int(totals.human / 3),
            Cell::Int(totals.ai / 2),
            Cell::Int(totals.human / 3 + totals.ai / 2),
        ];
        put_totals(out, &VISITORS, project, day, &visitors, 0, at);
        // Searches: a term a day for every 10 paths.
        let terms = (paths / 10) as u64;
        let searches: Vec<Vec<Cell>> = (0..terms)
            .map(|i| {
                let h = mix(h0 ^ 0x5ea7 ^ i);
                vec![
                    Cell::Text(format!("term {} {}", i % 400, i / 400)),
                    Cell::Int(1 + (h % 50) as i64),
                    Cell::Float(unit(h)),
                    if h.is_multiple_of(3) {
                        Cell::Null
                    } else {
                        Cell::Text(names[(h % u64::from(paths)) as usize].clone())
                    },
                    Cell::Time(micros(day, i)),
                ]
            })
            .collect();
        let hits: i64 = searches.iter().filter_map(|r| r[1].int()).sum();
        put(out, &SEARCHES, project, day, &searches, at);
        put_totals(
            out,
            &SEARCHES,
            project,
            day,
            &[Cell::Int(hits)],
            terms as i64,
            at,
        );
        written += searches.len();
        // Assistant turns: a turn a day for every 10 paths, a tenth of them unanswered.
        let turns: Vec<Vec<Cell>> = (0..terms)
            .map(|i| {
                let h = mix(h0 ^ 0x7a55 ^ i);
                let page = &names[(h % u64::from(paths)) as usize];
                vec![
                    Cell::Text(format!("thread-{d}-{}", i / 2)),
                    Cell::Time(micros(day, i)),
                    Cell::Text(format!("how do I set up {} on {page}?", i % 60)),
                    Cell::Text("You configure it in the settings file, then restart.".into()),
                    Cell::Text("answer".into()),
                    Cell::Sources(vec![(
                        "Guide".into(),
                        format!("https://docs.example.com{page}"),
                    )]),
                    Cell::Text(
                        if h.is_multiple_of(10) {
                            "unanswered"
                        } else {
                            "answered"
                        }
                        .into(),
                    ),
                    Cell::Text(["setup", "api", "billing", "other"][(h % 4) as usize].into()),
                    Cell::Text(format!("https://docs.example.com{page}")),
                ]
            })
            .collect();
        put(out, &ASSISTANT, project, day, &turns, at);
        written += turns.len();
        // Feedback: an entry a day for every 200 paths.
        let entries = (paths / 200) as u64;
        let feedback: Vec<Vec<Cell>> = (0..entries)
            .map(|i| {
                let h = mix(h0 ^ 0xfeed ^ i);
                vec![
                    Cell::Text(format!("fb-{project}-{d}-{i}")),
                    Cell::Text(names[(h % u64::from(paths)) as usize].clone()),
                    Cell::Text("this page could say more about the limits".into()),
                    Cell::Time(micros(day, i)),
                    Cell::Text("contextual".into()),
                    Cell::Text("pending".into()),
                    Cell::Bool(!h.is_multiple_of(3)),
                    Cell::Null,
                    Cell::Null,
                    Cell::Null,
                    Cell::Null,
                ]
            })
            .collect();
        put(out, &FEEDBACK, project, day, &feedback, at);
        written += feedback.len();
        // Assistant callers.
        let t = terms as i64;
        put(
            out,
            &CALLER_STATS,
            project,
            day,
            &[vec![
                Cell::Int(t * 7 / 10),
                Cell::Int(t / 5),
                Cell::Int(t - t * 7 / 10 - t / 5),
                Cell::Int(t),
            ]],
            at,
        );
        written += 1;
    }
    written
}
