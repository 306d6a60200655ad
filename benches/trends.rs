//! Trends benchmark: 2 years x 14,000 paths (10.2 million page rows) of generated Parquet in
//! the exporter's layout, and the same 2 years of every other dataset the trends read
//! (visitors, searches, feedback, assistant turns, caller stats) exported by docpipe from the
//! emulator; times docpipe's trends with the docs gaps (polars) and DuckDB running the page-view
//! aggregations on the same files. Run with `cargo bench --bench trends`; it prints its figures.
//! DuckDB is the Python package the tests use (`pip install -r tests/requirements.txt`).

mod lake;

use chrono::NaiveDate;
use docpipe::dataset::page_views::{write_page_views, write_site_totals};
use docpipe::trends::{Selection, compute, write_tables};
use std::time::Instant;

const DAYS: i64 = 730;
const PATHS: u32 = 14_000;
const KEY: &str = "mint_bench_admin_0001";
/// Pages of the emulated project whose other datasets are exported (the emulator generates a
/// day of visitors per request from its page views: 3,000 took 25 minutes for the daily
/// datasets' 730 days on this machine, 14,000 would take hours).
const EMULATED_PAGES: u32 = 1_000;
/// What the trends read beyond page views, exported from the emulator.
const OTHERS: [&str; 5] = [
    "visitors",
    "searches",
    "feedback",
    "assistant",
    "caller_stats",
];

/// Exports [`OTHERS`] of project `big` over `start..start + DAYS` from the emulator into `out`
/// (no limits: the bench is about the trends, not the budget); the rows each table got.
fn export_others(out: &std::path::Path, start: NaiveDate) -> Vec<(&'static str, u64)> {
    use docpipe::api::budget::MemoryBudget;
    use docpipe::api::{AdminKey, Client, ClientSettings, Limits, RetryPolicy};
    let text = format!(
        "brand = \"mint\"\nstart_date = \"{start}\"\nseed = 23\n\
         [[organizations]]\nid = \"bench\"\nadmin_keys = [\"{KEY}\"]\n\
         [[projects]]\nid = \"big\"\norganization = \"bench\"\npages = {EMULATED_PAGES}\n\
         daily_views = 400000\n\
         [limits]\nanalytics_per_hour = 100000000\n"
    );
    let data = docpipe::emulator::data::DataFile::parse(&text, "bench").unwrap();
    let last = start + chrono::Duration::days(DAYS - 1);
    let clock = docpipe::clock::ManualClock::new(last.and_hms_opt(23, 0, 0).unwrap().and_utc());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let emu = docpipe::emulator::Emulator::new(data, clock.clone());
        let server = docpipe::emulator::Server::start(emu, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let limits = Limits {
            analytics_per_hour: 100_000_000,
            headroom_percent: 0,
            ..Limits::default()
        };
        let settings = ClientSettings {
            base_url: server.base_url(),
            timeout: std::time::Duration::from_secs(60),
            retry: RetryPolicy::default(),
            limits,
            record: None,
        };
        let client = Client::new(
            settings,
            "bench",
            Some(AdminKey::parse(KEY, "mint", "bench").unwrap()),
            None,
            clock.clone(),
            std::sync::Arc::new(MemoryBudget::default()),
        );
        let exporter = docpipe::export::Exporter::open(out, clock.clone(), 3)
            .await
            .unwrap()
            .with_refresh(true);
        let targets = [docpipe::export::Target {
            project: "big".into(),
            client,
            start: Some(start),
            datasets: OTHERS.to_vec(),
        }];
        // A month at a time: the emulator makes every day of a span again for each page it
        // serves, so one walk of two years of feedback or turns would take hours. Each month's
        // plan walks the spans' new days (and their re-checked ones: `with_refresh`).
        let (mut requests, mut windows) = (0, 0);
        let mut to = start;
        while to < last {
            to = (to + chrono::Duration::days(30)).min(last);
            let plan = exporter.plan(&targets, start, to).unwrap();
            let s = exporter.run(&targets, &plan).await;
            assert!(s.failed.is_empty(), "{:?}", s.failed);
            requests += s.requests;
            windows += plan.due.len();
        }
        println!("  exported from the emulator: {requests} requests, {windows} windows");
    });
    let mut rows = Vec::new();
    for name in OTHERS {
        let shape = docpipe::dataset::shape_by_name(name).unwrap();
        let mut n = 0;
        for table in [Some(shape.table), shape.undated_table]
            .into_iter()
            .flatten()
        {
            n += docpipe::dataset::parquet::count_rows(&out.join(table))
                .unwrap()
                .1 as u64;
        }
        rows.push((shape.table, n));
    }
    rows
}

fn main() {
    // `DOCPIPE_BENCH_DIR=folder` keeps the generated and exported files there and reuses them
    // on the next run (the export from the emulator is most of the bench's 5 minutes).
    let dir = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("DOCPIPE_BENCH_DIR").map(std::path::PathBuf::from);
    let out = kept.as_deref().unwrap_or(dir.path());
    let start = NaiveDate::from_ymd_opt(2024, 11, 1).unwrap();
    if out.join("assistant_callers").is_dir() {
        println!("trends benchmark: the files kept in {}", out.display());
    } else {
        generate(out, start);
    }
    measure(out);
}

/// The page views generated in the exporter's layout, and the other datasets exported.
fn generate(out: &std::path::Path, start: NaiveDate) {
    let t0 = Instant::now();
    let paths: Vec<String> = (0..PATHS)
        .map(docpipe::emulator::generate::page_path)
        .collect();
    let at = chrono::Utc::now();
    let mut rows_written = 0usize;
    for d in 0..DAYS {
        let day = start + chrono::Duration::days(d);
        let (rows, totals) = lake::page_views(&paths, d, DAYS, 0);
        write_page_views(out, "big", day, &[&rows], at)
            .unwrap()
            .commit()
            .unwrap();
        let site = docpipe::dataset::page_views::SiteTotals {
            totals,
            rows: rows.len() as i64,
            unlisted: Some(0),
            is_final: d < DAYS - 4,
        };
        write_site_totals(out, "big", day, &site, at)
            .unwrap()
            .commit()
            .unwrap();
        rows_written += rows.len();
    }
    println!(
        "trends benchmark: {rows_written} page rows ({DAYS} days x {PATHS} paths), generated in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    let t0 = Instant::now();
    let others = export_others(out, start);
    println!(
        "  the other datasets, {:.1} s: {}",
        t0.elapsed().as_secs_f64(),
        others
            .iter()
            .map(|(t, n)| format!("{t} {n} rows"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// Times the trends and the docs gaps (and DuckDB on the page-view aggregations).
fn measure(out: &std::path::Path) {
    let t = Instant::now();
    let mut tables = compute(out, &Selection::default()).unwrap();
    let computed = t.elapsed().as_secs_f64();
    let files = write_tables(out, &mut tables).unwrap();
    let total = t.elapsed().as_secs_f64();
    println!(
        "  docpipe trends (polars): {computed:.2} s to compute the trends and the docs gaps; {total:.2} s with writing {} files",
        files.len()
    );
    println!(
        "    rows: daily {}, weekly {}, pages {}",
        tables.daily.height(),
        tables.weekly.height(),
        tables.pages.height()
    );
    for (name, frame) in tables.gaps.named() {
        println!("    {name}: {} rows", frame.height());
    }
    let t = Instant::now();
    let all = Selection::default();
    let partial = docpipe::trends::partial_days(out, &all).unwrap();
    let mut gaps = docpipe::trends::gaps::compute(out, &all, &partial).unwrap();
    println!(
        "  the docs gaps alone: {:.2} s ({} tables)",
        t.elapsed().as_secs_f64(),
        gaps.named().len()
    );

    gap_parts(out);

    let script = format!(
        r#"
import duckdb, time
root = {root:?}
con = duckdb.connect()
t = time.perf_counter()
st = f"read_parquet('{{root}}/site_totals/**/*.parquet', hive_partitioning = true)"
pv = f"read_parquet('{{root}}/page_views/**/*.parquet', hive_partitioning = true)"
daily = con.execute(f"""
WITH d AS (SELECT project, date, human, ai, total, NOT final AS provisional FROM {{st}})
SELECT d.*, d.ai / NULLIF(d.total, 0) AS ai_share,
  sum(d.human) OVER w7 AS human_7d, sum(d.ai) OVER w7 AS ai_7d, sum(d.total) OVER w7 AS total_7d,
  sum(d.human) OVER w28 AS human_28d, sum(d.ai) OVER w28 AS ai_28d, sum(d.total) OVER w28 AS total_28d,
  b.total AS total_week_before
FROM d LEFT JOIN d AS b ON b.project = d.project AND b.date = d.date - INTERVAL 7 DAY
WINDOW w7 AS (PARTITION BY d.project ORDER BY d.date RANGE BETWEEN INTERVAL 6 DAY PRECEDING AND CURRENT ROW),
       w28 AS (PARTITION BY d.project ORDER BY d.date RANGE BETWEEN INTERVAL 27 DAY PRECEDING AND CURRENT ROW)
ORDER BY d.project, d.date""").to_arrow_table()
weekly = con.execute(f"""
SELECT project, date_trunc('week', date) AS week_start, count(*) AS days, sum(human) AS human, sum(ai) AS ai,
  sum(total) AS total, bool_or(NOT final) AS provisional FROM {{st}} GROUP BY ALL ORDER BY ALL""").to_arrow_table()
pages = con.execute(f"""
WITH last AS (SELECT project, max(date) AS last_day FROM {{st}} GROUP BY project),
v AS (SELECT v.project, v.path, v.human, v.ai, datediff('day', v.date, last.last_day) AS age
      FROM {{pv}} v JOIN last USING (project)
      WHERE v.date >= (SELECT min(last_day) FROM last) - INTERVAL 55 DAY),
p AS (SELECT project, path,
  sum(human) FILTER (age < 7) AS human_7d, sum(ai) FILTER (age < 7) AS ai_7d,
  sum(human) FILTER (age >= 7 AND age < 14) AS human_prev_7d, sum(ai) FILTER (age >= 7 AND age < 14) AS ai_prev_7d,
  sum(human) FILTER (age < 28) AS human_28d, sum(ai) FILTER (age < 28) AS ai_28d,
  sum(human) FILTER (age >= 28 AND age < 56) AS human_prev_28d, sum(ai) FILTER (age >= 28 AND age < 56) AS ai_prev_28d
  FROM v WHERE age < 56 GROUP BY project, path)
SELECT *, rank() OVER (PARTITION BY project ORDER BY human_7d + ai_7d DESC) AS rank_7d FROM p""").to_arrow_table()
print(f"  DuckDB, same aggregations on the same files: {{time.perf_counter() - t:.2f}} s (rows: daily {{daily.num_rows}}, weekly {{weekly.num_rows}}, pages {{pages.num_rows}})")
"#,
        root = out.display().to_string()
    );
    match std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
    {
        Ok(o) if o.status.success() => print!("{}", String::from_utf8_lossy(&o.stdout)),
        Ok(o) => println!(
            "  DuckDB: not run ({})",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ),
        Err(e) => println!("  DuckDB: not run ({e})"),
    }
}

/// Where the docs gaps' time goes: each table read whole, then each gap table computed from
/// the frames in memory.
fn gap_parts(out: &std::path::Path) {
    use docpipe::trends::gaps;
    use polars::prelude::{DataFrame, IntoLazy};
    let sel = Selection::default();
    let mut reads = Vec::new();
    let mut read = |table: &'static str| -> DataFrame {
        let t = Instant::now();
        let df = docpipe::trends::scan(out, table, &sel)
            .unwrap()
            .collect()
            .unwrap();
        reads.push(format!("{table} {:.2}", t.elapsed().as_secs_f64()));
        df
    };
    let searches = read("searches");
    let totals = read("search_totals");
    let turns = read("assistant_turns");
    let feedback = read("feedback");
    let visitors = read("site_visitors");
    let views = read("site_totals");
    let callers = read("assistant_callers");
    println!("    reading each table whole (s): {}", reads.join(", "));
    let mut parts = Vec::new();
    let mut time = |name: &str, f: &dyn Fn() -> DataFrame| {
        let t = Instant::now();
        f();
        parts.push(format!("{name} {:.2}", t.elapsed().as_secs_f64()));
    };
    time("search_terms", &|| {
        gaps::search_terms(searches.clone().lazy(), totals.clone().lazy())
            .unwrap()
            .collect()
            .unwrap()
    });
    time("search_daily", &|| {
        gaps::search_daily(searches.clone().lazy(), totals.clone().lazy())
            .collect()
            .unwrap()
    });
    time("assistant_daily", &|| {
        gaps::assistant_daily(turns.clone().lazy())
            .collect()
            .unwrap()
    });
    time("assistant_categories", &|| {
        gaps::assistant_categories(turns.clone().lazy())
            .collect()
            .unwrap()
    });
    time("unanswered_questions", &|| {
        gaps::unanswered_questions(turns.clone().lazy())
            .unwrap()
            .collect()
            .unwrap()
    });
    time("feedback_pages", &|| {
        gaps::feedback_pages(feedback.clone().lazy())
            .unwrap()
            .collect()
            .unwrap()
    });
    time("visitors_daily", &|| {
        gaps::visitors_daily(visitors.clone().lazy(), views.clone().lazy())
            .collect()
            .unwrap()
    });
    time("callers_weekly", &|| {
        gaps::callers_weekly(callers.clone().lazy())
            .collect()
            .unwrap()
    });
    println!("    each gap table from memory (s): {}", parts.join(", "));
}
