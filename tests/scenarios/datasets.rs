//! The scenario half of `tests/it/datasets.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;
use crate::support::datasets::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_moments_a_backfill_of_every_dataset_resumes_to_the_same_result() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let (ref_out, out) = (dir.path().join("ref"), dir.path().join("crashy"));
    let (ref_cfg, cfg) = (dir.path().join("ref.toml"), dir.path().join("crashy.toml"));
    std::fs::write(&ref_cfg, config_all(&live.server.base_url(), &ref_out, "")).unwrap();
    std::fs::write(&cfg, config_all(&live.server.base_url(), &out, "")).unwrap();
    let range = ["backfill", "--from", "2026-03-08", "--to", "2026-03-10"];
    let reference = docpipe(&ref_cfg, &range, None);
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    // Crash points counted from the start of each run (a window done is skipped by the next):
    // they fall among page-view journals, the other datasets' stored pages, renames and state
    // commits.
    let mut crashed = 0;
    for n in [57, 12, 31, 9, 25, 14, 40, 7, 20, 5, 33, 11] {
        let run = docpipe(&cfg, &range, Some(n));
        if run.status.success() {
            break;
        }
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        assert!(err.contains(&format!("crash point {n}:")), "{err}");
        crashed += 1;
    }
    assert!(crashed >= 6, "only {crashed} runs were killed");
    let last = docpipe(&cfg, &range, None);
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    let got = dataset(&out);
    let tables: std::collections::BTreeSet<String> = got
        .iter()
        .map(|(f, _)| f.iter().next().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        tables.into_iter().collect::<Vec<_>>(),
        [
            "assistant_callers",
            "assistant_turns",
            "feedback",
            "feedback_by_page",
            "feedback_undated",
            "page_views",
            "search_totals",
            "searches",
            "site_totals",
            "site_visitors",
            "visitors"
        ]
    );
    assert_eq!(got, dataset(&ref_out));
    assert!(
        files_below(&out)
            .iter()
            .all(|f| !f.to_string_lossy().contains(".tmp-"))
    );
    let conn = rusqlite::Connection::open(out.join("state.sqlite")).unwrap();
    let pages: i64 = conn
        .query_row("SELECT count(*) FROM walks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(pages, 0, "no walk is left in progress");
    // `status` has a line for each of a project's datasets.
    let today = chrono::Utc::now().date_naive();
    let start = today - chrono::Duration::days(29);
    let status = docpipe(&cfg, &["status"], None);
    let text = String::from_utf8_lossy(&status.stdout).to_string();
    if chrono::Utc::now().date_naive() != today {
        return; // the day changed during the run
    }
    let alpha: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("project alpha:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let daily = "2 days (2026-03-08..2026-03-10), 0 provisional; `export` would fetch 30 days";
    assert_eq!(
        alpha,
        [
            format!("  visitors: {}", daily.replace("2 days", "3 days")),
            format!("  searches: {}", daily.replace("2 days", "3 days")),
            format!(
                "  feedback: covered 2026-03-08..2026-03-10; `export` would walk {start}..{today}"
            ),
            format!("  feedback_by_page: {}", daily.replace("2 days", "3 days")),
            format!(
                "  assistant: covered 2026-03-08..2026-03-10; `export` would walk {start}..{today}"
            ),
            format!("  caller_stats: {}", daily.replace("2 days", "3 days")),
        ],
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_polars_and_pandas_read_every_table_with_its_types() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let exporter = docpipe::export::Exporter::open(&out, live.clock.clone(), 3)
        .await
        .unwrap();
    let mut targets = all_datasets(&live);
    targets[0].datasets.push("threads");
    let plan = exporter
        .plan(&targets, day("2026-03-12"), day("2026-03-14"))
        .unwrap();
    assert!(exporter.run(&targets, &plan).await.failed.is_empty());
    let tables = [
        "page_views",
        "site_totals",
        "visitors",
        "site_visitors",
        "searches",
        "search_totals",
        "feedback",
        "feedback_undated",
        "feedback_by_page",
        "assistant_turns",
        "assistant_callers",
        "assistant_messages",
    ];
    let mut want = String::new();
    for t in tables {
        let (_, rows) = docpipe::dataset::parquet::count_rows(&out.join(t)).unwrap();
        assert!(rows > 0, "{t}");
        want += &format!("{t} {rows} {rows} {rows}\n");
    }
    want += "types VARCHAR TIMESTAMP WITH TIME ZONE STRUCT(title VARCHAR, url VARCHAR)[] BIGINT DOUBLE BOOLEAN DATE\n";
    want += "polars String Datetime(time_unit='us', time_zone='UTC') List(Struct({'title': String, 'url': String})) Int64 Float64 Boolean Date\n";
    want += "pandas str datetime64[us, UTC] object int64 float64 bool\n";
    let script = format!(
        r#"
import duckdb, polars as pl, pandas as pd
root = {root:?}
for t in {tables:?}:
    glob = f"{{root}}/{{t}}/**/*.parquet"
    d = duckdb.sql(f"SELECT count(*) FROM read_parquet('{{glob}}', hive_partitioning = true)").fetchall()[0][0]
    p = pl.scan_parquet(glob, hive_partitioning=True).select(pl.len()).collect().item()
    n = len(pd.read_parquet(f"{{root}}/{{t}}"))
    print(t, d, p, n)
def duck(t):
    return {{r[0]: r[1] for r in duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{{root}}/{{t}}/**/*.parquet', hive_partitioning = true)").fetchall()}}
turns, searches, fb = duck("assistant_turns"), duck("searches"), duck("feedback")
print("types", turns["query"], turns["timestamp"], turns["sources"], searches["hits"], searches["ctr"], fb["helpful"], turns["date"])
def pol(t):
    return pl.scan_parquet(f"{{root}}/{{t}}/**/*.parquet", hive_partitioning=True).collect_schema()
turns, searches, fb = pol("assistant_turns"), pol("searches"), pol("feedback")
print("polars", turns["query"], repr(turns["timestamp"]), turns["sources"], searches["hits"], searches["ctr"], fb["helpful"], turns["date"])
turns, searches = pd.read_parquet(f"{{root}}/assistant_turns"), pd.read_parquet(f"{{root}}/searches")
print("pandas", turns["query"].dtype, turns["timestamp"].dtype, turns["sources"].dtype, searches["hits"].dtype, searches["ctr"].dtype, pd.read_parquet(f"{{root}}/site_totals")["final"].dtype)
"#,
        root = out.display().to_string(),
        tables = tables,
    );
    assert_eq!(run_python(&script, &[]), want);
}

#[test]
fn a_config_naming_an_unknown_dataset_or_a_span_too_long_is_refused_with_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    let text = config_all("http://127.0.0.1:9", &dir.path().join("out"), "feedback_recheck_days = 400\nthreads_per_run = 5000")
        .replacen("organization = \"org-a\"\n", "organization = \"org-a\"\ndatasets = [\"page_views\", \"pageviews\", \"visitors\", \"visitors\"]\n", 1)
        .replacen("id = \"gamma\"\norganization = \"org-b\"\n", "id = \"gamma\"\norganization = \"org-b\"\ndatasets = []\n", 1);
    std::fs::write(&cfg, text).unwrap();
    let run = docpipe(&cfg, &["export", "--dry-run"], None);
    let err = String::from_utf8_lossy(&run.stderr).to_string();
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: invalid config {}: 5 problems:\n  project alpha: unknown dataset \"pageviews\" (known: page_views, visitors, searches, feedback, feedback_by_page, assistant, caller_stats, threads)\n  project alpha: dataset visitors is listed twice\n  project gamma: datasets is empty; list at least one, or leave it out for the default\n  export.feedback_recheck_days 400 must be at most 366\n  export.threads_per_run 5000 must be at most 1000",
            cfg.display()
        )
    );
    assert!(!dir.path().join("out").exists());
}
