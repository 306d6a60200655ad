//! Freshness benchmark (simulated time): the daemon's hourly planning and export, 14 days of
//! runs on a manual clock, against the emulator at the service's real limit (100 analytics
//! requests an hour per organization, 5% headroom: 95). One organization, four projects of
//! 2,000 pages, late events reaching the last 3 days in hourly waves, a week to back-fill at
//! the start. Each scenario runs with the planner (probes, re-checks by age, the plan fitted to
//! the hour's budget) and with the old policy (every provisional day and span walked again in
//! full on every run, waiting for the budget when it runs out), side by side.
//!
//! It prints requests per run and per hour, staleness (p50, p95, max) of today's data and of
//! the provisional days per dataset, sampled just before each hourly run (the worst moment of
//! each hour) once the back-fill is done, whether every final day equals the emulator's truth,
//! and requests the service refused over its limit. Run with `cargo bench --bench freshness`.

#[path = "../tests/support/common.rs"]
mod common;
#[path = "../tests/support/truth.rs"]
mod truth;

use chrono::{DateTime, Duration, NaiveDate, Timelike, Utc};
use docpipe::api::budget::{Budget, MemoryBudget};
use docpipe::api::{AdminKey, Client, ClientSettings, Limits, RetryPolicy};
use docpipe::clock::{Clock, ManualClock};
use docpipe::dataset::Windowing;
use docpipe::emulator::Emulator;
use docpipe::emulator::data::DataFile;
use docpipe::export::{Exporter, Plan, Target};
use docpipe::planner::{Freshness, Policy, Purpose};
use std::collections::BTreeMap;
use std::sync::Arc;

const PROJECTS: usize = 4;
const PAGES: u32 = 2_000;
const SIM_DAYS: i64 = 14;
const BACKFILL_DAYS: i64 = 7;
const LOOKBACK: u32 = 3;
const KEY: &str = "mint_bench_admin_0001";
/// The first simulated hour: midnight of this day.
const SIM_START: &str = "2026-06-01";

fn data() -> DataFile {
    let mut text = format!(
        "brand = \"mint\"\nstart_date = \"2026-01-01\"\nseed = 17\n\
         [[organizations]]\nid = \"bench\"\nadmin_keys = [\"{KEY}\"]\n"
    );
    for p in 0..PROJECTS {
        // Enough views that every page has some every day: 8 pages of 250 rows a day.
        text += &format!(
            "[[projects]]\nid = \"docs-{p}\"\norganization = \"bench\"\npages = {PAGES}\n\
             daily_views = 400000\nchurn = 0.0\n"
        );
    }
    text += "[limits]\nanalytics_per_hour = 100\n[faults]\nlate_days = 3\nlate_every_secs = 3600\n";
    DataFile::parse(&text, "bench").unwrap()
}

fn sim_start() -> DateTime<Utc> {
    NaiveDate::parse_from_str(SIM_START, "%Y-%m-%d")
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
}

/// Figures of one scenario.
#[derive(Default)]
struct Figures {
    runs: u64,
    requests: u64,
    per_run: Vec<u64>,
    steady_per_run: Vec<u64>,
    backfill_done_hour: Option<u64>,
    overran: u64,
    failed: u64,
    /// (dataset, "today" | "provisional") → staleness samples in hours.
    stale: BTreeMap<(&'static str, &'static str), Vec<f64>>,
    /// Days the service holds that a project never exported (steady state).
    final_days: u64,
    final_mismatch: Vec<String>,
    refused_over_limit: u64,
    spent: BTreeMap<(&'static str, &'static str), u64>,
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

fn mean(v: &[u64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<u64>() as f64 / v.len() as f64
}

fn hours(d: Duration) -> f64 {
    d.num_seconds() as f64 / 3600.0
}

/// Staleness of each project and dataset just before a run.
fn sample(exporter: &Exporter, datasets: &[&'static str], now: DateTime<Utc>, f: &mut Figures) {
    let today = now.date_naive();
    let store = exporter.state();
    for p in 0..PROJECTS {
        let project = format!("docs-{p}");
        for &name in datasets {
            if let Some(s) = exporter.staleness(name, &project, now).unwrap() {
                f.stale.entry((name, "today")).or_default().push(hours(s));
            }
            let windowing =
                docpipe::dataset::shape_by_name(name).map_or(Windowing::Daily, |s| s.windowing);
            match windowing {
                Windowing::Daily => {
                    for age in 1..=i64::from(LOOKBACK) {
                        let day = today - Duration::days(age);
                        let look = store.look(name, &project, day).unwrap();
                        let at = look.map_or(sim_start(), |l| l.checked_at);
                        f.stale
                            .entry((name, "provisional"))
                            .or_default()
                            .push(hours(now - at));
                    }
                }
                Windowing::Span { recheck_days } => {
                    // The provisional days of a span are its re-checked days: feedback's full
                    // re-check, the assistant's recent walk.
                    let look = store.span_state(name, &project).unwrap().look;
                    let at = if recheck_days > 1 || name == "feedback" {
                        look.full_at
                    } else {
                        look.walked_at
                    };
                    f.stale
                        .entry((name, "provisional"))
                        .or_default()
                        .push(hours(now - at.unwrap_or(sim_start())));
                }
                Windowing::OnDemand => {}
            }
        }
    }
}

async fn scenario(datasets: &[&'static str], old: bool, freshness: Freshness) -> Figures {
    let clock = ManualClock::new(sim_start());
    let emu = Emulator::new(data(), clock.clone());
    let server = docpipe::emulator::Server::start(emu, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = Exporter::open(&out, clock.clone(), LOOKBACK)
        .await
        .unwrap()
        .with_refresh(old)
        .with_freshness(freshness);
    let budget: Arc<dyn Budget> = Arc::new(MemoryBudget::default());
    let settings = ClientSettings {
        base_url: server.base_url(),
        timeout: std::time::Duration::from_secs(30),
        retry: RetryPolicy::default(),
        limits: Limits::default(),
        record: None,
    };
    let client = Client::new(
        settings,
        "bench",
        Some(AdminKey::parse(KEY, "mint", "bench").unwrap()),
        None,
        clock.clone(),
        budget,
    );
    let first = sim_start().date_naive() - Duration::days(BACKFILL_DAYS);
    let targets: Vec<Target> = (0..PROJECTS)
        .map(|p| Target {
            project: format!("docs-{p}"),
            client: client.clone(),
            start: Some(first),
            datasets: datasets.to_vec(),
        })
        .collect();
    let end = sim_start() + Duration::days(SIM_DAYS);
    let mut f = Figures::default();
    let mut tick = sim_start();
    while tick < end {
        if clock.now() < tick {
            clock.advance((tick - clock.now()).to_std().unwrap());
        }
        let now = clock.now();
        let hour = (now - sim_start()).num_hours() as u64;
        if f.backfill_done_hour.is_some() {
            sample(&exporter, datasets, now, &mut f);
        }
        let today = now.date_naive();
        let mut plan: Plan = exporter.plan(&targets, today, today).unwrap();
        let backfill_left = plan.due.iter().any(|d| d.purpose == Purpose::Backfill);
        if old {
            // The old policy: every window due is walked whole, no probe, no fit.
            plan.due.iter_mut().for_each(|d| d.probe = false);
        } else {
            plan.fit(exporter.freshness());
        }
        // The one client sends every request of the run (retries included).
        let before = client.requests_sent();
        let summary = exporter.run(&targets, &plan).await;
        let sent = client.requests_sent() - before;
        f.runs += 1;
        f.requests += sent;
        f.per_run.push(sent);
        f.failed += summary.failed.len() as u64;
        for (k, n) in &summary.spent {
            *f.spent.entry(*k).or_default() += n;
        }
        if f.backfill_done_hour.is_some() {
            f.steady_per_run.push(sent);
        } else if !backfill_left {
            f.backfill_done_hour = Some(hour);
        }
        // The next run: the next hour on the clock after this one ended.
        let after = clock.now();
        let next = after
            .with_minute(0)
            .and_then(|t| t.with_second(0))
            .and_then(|t| t.with_nanosecond(0))
            .unwrap()
            + Duration::hours(1);
        if next > tick + Duration::hours(1) {
            f.overran += 1;
        }
        tick = next;
    }
    // Every final day equals the truth: page views row for row, the other daily datasets and
    // their totals, and the spans' rows of days past their re-check.
    let today = clock.now().date_naive();
    let final_to = today - Duration::days(i64::from(LOOKBACK) + 1);
    for p in 0..PROJECTS {
        let project = format!("docs-{p}");
        if datasets.contains(&"page_views") {
            let mut d = first;
            while d <= final_to {
                let got = truth::exported_views(&out, &project, d).unwrap_or_default();
                f.final_days += 1;
                if got != truth::true_views(&server.emulator, &project, d) {
                    f.final_mismatch.push(format!("page_views {project} {d}"));
                }
                d = d.succ_opt().unwrap();
            }
        }
        if datasets.len() > 1 {
            let (base, out, project) = (server.base_url(), out.clone(), project.clone());
            let spans_to = today - Duration::days(15);
            let checked = tokio::spawn(async move {
                truth::assert_equals_truth(
                    &base,
                    &out,
                    &project,
                    first,
                    final_to,
                    spans_to,
                    chrono_tz::UTC,
                )
                .await
            })
            .await;
            match checked {
                Ok(_) => f.final_days += 4 * ((final_to - first).num_days() as u64 + 1),
                Err(e) => {
                    let msg = e
                        .try_into_panic()
                        .ok()
                        .and_then(|p| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    f.final_mismatch
                        .push(msg.lines().next().unwrap_or("").to_string());
                }
            }
        }
    }
    f.refused_over_limit = server
        .emulator
        .refused_over_limit()
        .get("analytics")
        .copied()
        .unwrap_or(0);
    f
}

fn stale_line(name: &str, new: &Figures, old: &Figures, dataset: &'static str, what: &'static str) {
    let fig = |f: &Figures| match f.stale.get(&(dataset, what)) {
        Some(v) => format!(
            "{:>5.1} {:>5.1} {:>5.1}",
            percentile(v, 50.0),
            percentile(v, 95.0),
            percentile(v, 100.0)
        ),
        None => format!("{:>17}", "-"),
    };
    println!("  {name:<30} {}   | {}", fig(new), fig(old));
}

/// The columns of the planner beside the old policy.
const PLANNER_OLD: (&str, &str) = ("planner", "old policy");

fn report(
    title: &str,
    labels: (&str, &str),
    datasets: &[&'static str],
    new: &Figures,
    old: &Figures,
) {
    println!("\n== {title} ==");
    println!("{:<32} {:>17}   | {:>17}", "", labels.0, labels.1);
    let line = |what: &str, a: String, b: String| println!("  {what:<30} {a:>17}   | {b:>17}");
    let sim_hours = (SIM_DAYS * 24) as f64;
    line("runs", new.runs.to_string(), old.runs.to_string());
    line(
        "runs past their hour",
        new.overran.to_string(),
        old.overran.to_string(),
    );
    line(
        "requests in all",
        new.requests.to_string(),
        old.requests.to_string(),
    );
    line(
        "requests per hour, mean",
        format!("{:.1}", new.requests as f64 / sim_hours),
        format!("{:.1}", old.requests as f64 / sim_hours),
    );
    line(
        "requests per run, max",
        new.per_run.iter().max().unwrap_or(&0).to_string(),
        old.per_run.iter().max().unwrap_or(&0).to_string(),
    );
    line(
        "steady runs: requests mean",
        format!("{:.1}", mean(&new.steady_per_run)),
        format!("{:.1}", mean(&old.steady_per_run)),
    );
    line(
        "steady runs: requests max",
        new.steady_per_run.iter().max().unwrap_or(&0).to_string(),
        old.steady_per_run.iter().max().unwrap_or(&0).to_string(),
    );
    let done = |f: &Figures| {
        f.backfill_done_hour
            .map_or("never".to_string(), |h| format!("hour {h}"))
    };
    line("back-fill done", done(new), done(old));
    line(
        "windows failed",
        new.failed.to_string(),
        old.failed.to_string(),
    );
    line(
        "refused over the limit",
        new.refused_over_limit.to_string(),
        old.refused_over_limit.to_string(),
    );
    let eq = |f: &Figures| {
        if f.final_mismatch.is_empty() {
            format!("all {} equal", f.final_days)
        } else {
            format!("{} differ", f.final_mismatch.len())
        }
    };
    line("final days vs truth", eq(new), eq(old));
    for (who, f) in [(labels.0, new), (labels.1, old)] {
        for m in f.final_mismatch.iter().take(4) {
            println!("    {who}: differs: {m}");
        }
    }
    println!(
        "  staleness, hours (p50 p95 max), before each hourly run once the back-fill is done:"
    );
    for &d in datasets {
        stale_line(&format!("{d}: today"), new, old, d, "today");
        stale_line(
            &format!("{d}: provisional days"),
            new,
            old,
            d,
            "provisional",
        );
    }
    println!("  the {}'s requests by dataset and purpose:", labels.0);
    for ((d, p), n) in &new.spent {
        println!("    {d:<18} {p:<9} {n:>6}");
    }
}

fn main() {
    docpipe::alloc::tune();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let pv = ["page_views"];
    let pv_new = rt.block_on(scenario(&pv, false, Freshness::default()));
    let pv_old = rt.block_on(scenario(&pv, true, Freshness::default()));
    report("page views alone", PLANNER_OLD, &pv, &pv_new, &pv_old);
    // Every dataset a project exports by default (all but threads).
    let all = docpipe::dataset::default_names();
    let all_new = rt.block_on(scenario(&all, false, Freshness::default()));
    let all_old = rt.block_on(scenario(&all, true, Freshness::default()));
    report(
        "every dataset (all but threads)",
        PLANNER_OLD,
        &all,
        &all_new,
        &all_old,
    );
    // What feedback's full 14-day re-check every 6 h (the default) costs the rest, beside the
    // default before it, 24 h.
    let daily = Policy {
        full: Duration::hours(24),
        ..Policy::default()
    };
    let all_daily = rt.block_on(scenario(
        &all,
        false,
        Freshness {
            by_dataset: vec![("feedback", daily)],
            ..Freshness::default()
        },
    ));
    report(
        "every dataset, feedback's full re-check every 6 h (the default) beside every 24 h",
        ("full 6 h", "full 24 h"),
        &all,
        &all_new,
        &all_daily,
    );
    println!(
        "\n{PROJECTS} projects of {PAGES} pages, {SIM_DAYS} simulated days of hourly runs, \
         {BACKFILL_DAYS} days to back-fill, lookback {LOOKBACK} days; {:.0} s of wall time",
        started.elapsed().as_secs_f64()
    );
}
