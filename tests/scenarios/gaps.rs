//! The docs-gap tables against DuckDB computing the same over the same Parquet.

use crate::common::*;
use docpipe::trends::{Selection, compute, write_tables};

/// DuckDB's own computation of each gap table from the exported tables, compared row by row
/// (floats to 1e-9) with what docpipe wrote; prints `<table> <rows>` per table that matches.
const CHECK: &str = r#"
import duckdb, math, sys
o = sys.argv[1]
def src(t):
    return f"(SELECT * REPLACE (CAST(date AS DATE) AS date) FROM read_parquet('{o}/{t}/**/*.parquet', hive_partitioning = true, hive_types = {{'project': VARCHAR, 'date': VARCHAR}}))"
Q = {}
Q["search_terms"] = (["project", "search_query"], f"""
WITH t AS (SELECT * FROM {src('search_totals')}),
last AS (SELECT project, max(date) AS last_day FROM t GROUP BY ALL),
cov AS (SELECT project, count(*) FILTER (last_day - date < 21 + 7 AND last_day - date >= 7) AS prev
        FROM t JOIN last USING (project) GROUP BY ALL),
s AS (SELECT s.*, last_day, last_day - s.date AS age, s.hits * s.ctr AS clicks
      FROM {src('searches')} s JOIN last USING (project) WHERE last_day - s.date BETWEEN 0 AND 27),
g AS (SELECT project, search_query, any_value(last_day) AS last_day,
        coalesce(sum(hits) FILTER (age < 7), 0) AS hits_7d,
        coalesce(sum(clicks) FILTER (age < 7), 0) AS clicks_7d,
        sum(hits) AS hits_28d, sum(clicks) AS clicks_28d,
        coalesce(sum(hits) FILTER (age >= 7), 0) AS prev_hits,
        arg_max(top_clicked_page, hits * 100000 + (date - DATE '2000-01-01')) FILTER (top_clicked_page IS NOT NULL) AS top_clicked_page,
        max(last_searched_at) AS last_searched_at
      FROM s GROUP BY ALL)
SELECT g.project, search_query, last_day, hits_7d, CAST(round(round(clicks_7d, 6)) AS BIGINT) AS est_clicks_7d,
  CASE WHEN hits_7d > 0 THEN round(round(clicks_7d, 6)) / hits_7d END AS ctr_7d,
  hits_7d - CAST(round(round(clicks_7d, 6)) AS BIGINT) AS est_unclicked_7d,
  CASE WHEN hits_7d > 0 THEN row_number() OVER (PARTITION BY g.project, hits_7d > 0 ORDER BY hits_7d - round(round(clicks_7d, 6)) DESC, hits_7d DESC, search_query) END AS gap_rank_7d,
  hits_28d, CAST(round(round(clicks_28d, 6)) AS BIGINT) AS est_clicks_28d, CASE WHEN hits_28d > 0 THEN round(round(clicks_28d, 6)) / hits_28d END AS ctr_28d,
  top_clicked_page, last_searched_at,
  CASE WHEN prev = 21 THEN hits_7d > 0 AND prev_hits = 0 END AS new_this_week
FROM g JOIN cov USING (project)""")
Q["search_daily"] = (["project", "date"], f"""
WITH c AS (SELECT project, date, sum(hits * ctr) AS clicks, count(*) AS terms FROM {src('searches')} GROUP BY ALL)
SELECT t.project, t.date, total_searches AS searches, CAST(round(round(coalesce(clicks, 0), 6)) AS BIGINT) AS est_clicks,
  CASE WHEN total_searches > 0 THEN round(round(coalesce(clicks, 0), 6)) / total_searches END AS ctr,
  CASE WHEN total_searches > 0 THEN 1 - round(round(coalesce(clicks, 0), 6)) / total_searches END AS unclicked_share,
  coalesce(terms, 0) AS terms
FROM {src('search_totals')} t LEFT JOIN c USING (project, date)""")
turns = lambda by: f"""
SELECT {by}, count(*) AS turns, count(*) FILTER (resolution_status = 'unanswered') AS unanswered,
  count(*) FILTER (response_type = 'clarifying_question') AS clarifying,
  count(*) FILTER (resolution_status = 'unanswered') / count(*) AS unanswered_share,
  count(*) FILTER (response_type = 'clarifying_question') / count(*) AS clarifying_share
FROM (SELECT *, coalesce(query_category, 'uncategorized') AS category FROM {src('assistant_turns')}) GROUP BY ALL"""
Q["assistant_daily"] = (["project", "date"], turns("project, date"))
Q["assistant_categories"] = (["project", "date", "category"], turns("project, date, category"))
Q["unanswered_questions"] = (["project", "question"], f"""
WITH last AS (SELECT project, max(date) AS last_day FROM {src('assistant_turns')} GROUP BY ALL),
u AS (SELECT t.*, last_day, trim(regexp_replace(lower(query), '[^[:alnum:]]+', ' ', 'g')) AS question
      FROM {src('assistant_turns')} t JOIN last USING (project)
      WHERE resolution_status = 'unanswered' AND last_day - t.date BETWEEN 0 AND 6),
c AS (SELECT project, question, s.url AS url, count(*) AS n FROM (SELECT project, question, unnest(sources) AS s FROM u) GROUP BY ALL),
cc AS (SELECT project, question, count(*) AS cited_count,
         array_to_string(list(url ORDER BY n DESC, url)[1:5], ' | ') AS cited_pages FROM c GROUP BY ALL),
g AS (SELECT project, question, any_value(last_day) AS last_day, count(*) AS asks, count(DISTINCT id) AS conversations,
        arg_max(query, (timestamp, query)) AS latest_wording, max(timestamp) AS last_asked_at
      FROM u WHERE question <> '' GROUP BY ALL)
SELECT g.*, coalesce(cited_count, 0) AS cited_count, cited_pages,
  row_number() OVER (PARTITION BY g.project ORDER BY asks DESC, last_asked_at DESC, g.question) AS rank
FROM g LEFT JOIN cc USING (project, question)""")
Q["feedback_pages"] = (["project", "path"], f"""
WITH last AS (SELECT project, max(date) AS last_day FROM {src('feedback')} GROUP BY ALL),
f AS (SELECT f.*, last_day, last_day - f.date AS age FROM {src('feedback')} f JOIN last USING (project)
      WHERE last_day - f.date BETWEEN 0 AND 55),
g AS (SELECT project, path, any_value(last_day) AS last_day,
        count(*) FILTER (helpful AND age < 28) AS up_28d, count(*) FILTER (NOT helpful AND age < 28) AS down_28d,
        count(*) FILTER (helpful AND age >= 28) AS up_prev_28d, count(*) FILTER (NOT helpful AND age >= 28) AS down_prev_28d,
        count(*) FILTER (age < 28) AS entries_28d,
        array_to_string(list(comment ORDER BY created_at DESC) FILTER (age < 28 AND comment IS NOT NULL)[1:5], ' | ') AS latest_comments
      FROM f GROUP BY ALL),
r AS (SELECT *, up_28d + down_28d AS votes_28d, up_prev_28d + down_prev_28d AS votes_prev_28d,
        CASE WHEN up_28d + down_28d > 0 THEN down_28d / (up_28d + down_28d) END AS down_rate_28d,
        CASE WHEN up_prev_28d + down_prev_28d > 0 THEN down_prev_28d / (up_prev_28d + down_prev_28d) END AS down_rate_prev_28d
      FROM g)
SELECT * REPLACE (nullif(latest_comments, '') AS latest_comments),
  CASE WHEN votes_28d >= 5 AND votes_prev_28d >= 5 THEN down_rate_28d - down_rate_prev_28d END AS down_rate_rise_28d,
  CASE WHEN down_28d > 0 THEN row_number() OVER (PARTITION BY project, down_28d > 0 ORDER BY down_28d DESC, down_rate_28d DESC NULLS LAST, path) END AS down_rank_28d
FROM r""")
Q["visitors_daily"] = (["project", "date"], f"""
SELECT v.project, v.date, v.human AS human_visitors, v.ai AS ai_visitors, v.total AS visitors,
  t.human AS human_views, t.ai AS ai_views, t.total AS views,
  CASE WHEN v.total > 0 THEN t.total / v.total END AS views_per_visitor,
  CASE WHEN v.human > 0 THEN t.human / v.human END AS human_views_per_visitor,
  CASE WHEN v.ai > 0 THEN t.ai / v.ai END AS ai_views_per_visitor
FROM {src('site_visitors')} v LEFT JOIN {src('site_totals')} t USING (project, date)""")
Q["callers_weekly"] = (["project", "week_start"], f"""
SELECT project, date_trunc('week', date)::DATE AS week_start, count(*) AS days,
  sum(web) AS web, sum(api) AS api, sum(other) AS other, sum(total) AS total,
  CASE WHEN sum(total) > 0 THEN sum(web) / sum(total) END AS web_share,
  CASE WHEN sum(total) > 0 THEN sum(api) / sum(total) END AS api_share,
  CASE WHEN sum(total) > 0 THEN sum(other) / sum(total) END AS other_share
FROM {src('assistant_callers')} GROUP BY ALL""")
Q["agent_page_reads"] = (["project", "path", "agent", "surface"], f"""
WITH last AS (SELECT project, max(date) - 1 AS last_day FROM {src('agent_daily')} GROUP BY ALL),
p AS (SELECT p.*, last_day, last_day - p.date AS age FROM {src('agent_pages')} p JOIN last USING (project)
      WHERE last_day - p.date BETWEEN 0 AND 27)
SELECT project, path, agent, operator, class, surface, any_value(last_day) AS last_day,
  coalesce(sum(events) FILTER (age < 7), 0) AS reads_7d, sum(events) AS reads_28d
FROM p GROUP BY project, path, agent, operator, class, surface""")
Q["ai_operators_daily"] = (["project", "date", "operator"], f"""
WITH r AS (SELECT project, date, operator, sum(events) AS agent_reads FROM {src('agent_daily')}
           WHERE class <> 'human' AND operator IS NOT NULL GROUP BY ALL),
s AS (SELECT project, date, operator, sum(views) AS referred_views FROM {src('ai_referrals')} GROUP BY ALL),
last AS (SELECT project, max(date) AS stream_last_day FROM {src('agent_daily')} GROUP BY ALL)
SELECT project, date, operator, coalesce(agent_reads, 0) AS agent_reads, coalesce(referred_views, 0) AS referred_views,
  CASE WHEN coalesce(referred_views, 0) > 0 THEN coalesce(agent_reads, 0) / referred_views END AS reads_per_referral,
  date < stream_last_day AS complete
FROM r FULL JOIN s USING (project, date, operator) JOIN last USING (project)""")
def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and b is None
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b
def rows(rel, key):
    # Times as text (Python's time zones need a module the venv does not have).
    cols = rel.columns
    exprs = [f'CAST("{c}" AS VARCHAR) AS "{c}"' if 'TIME ZONE' in str(t) else f'"{c}"' for c, t in zip(cols, rel.types)]
    return cols, {tuple(r[cols.index(k)] for k in key): dict(zip(cols, r)) for r in rel.project(', '.join(exprs)).fetchall()}
bad = 0
for table, (key, sql) in Q.items():
    cols, want = rows(duckdb.sql(sql), key)
    _, got = rows(duckdb.sql(f"SELECT * FROM read_parquet('{o}/trends/{table}.parquet')"), key)
    if set(want) != set(got):
        print(f"{table}: keys differ: only docpipe {sorted(set(got) - set(want))[:3]}, only duckdb {sorted(set(want) - set(got))[:3]}")
        bad += 1
        continue
    diffs = [(k, c, got[k].get(c), w[c]) for k, w in want.items() for c in cols if not same(got[k].get(c, 'MISSING'), w[c])]
    if diffs:
        print(f"{table}: {len(diffs)} values differ, e.g. {diffs[:3]}")
        bad += 1
        continue
    print(f"{table} {len(got)}")
sys.exit(1 if bad else 0)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_gap_table_equals_duckdb_over_the_same_parquet() {
    let mut data = small();
    data.limits.analytics_per_hour = 100_000;
    data.stream = Some(docpipe::emulator::stream::StreamData {
        projects: vec!["alpha".into()],
        agent_fraction: 1.0,
        bad_lines: false,
    });
    let live = Live::start_frozen(data).await;
    let out = tempfile::tempdir().unwrap();
    let mut targets = targets(&live, open_limits());
    targets.truncate(1);
    targets[0].datasets = vec![
        "page_views",
        "visitors",
        "searches",
        "feedback",
        "assistant",
        "caller_stats",
    ];
    targets[0].start = Some(day("2026-02-25"));
    let exporter = docpipe::export::Exporter::open(out.path(), live.clock.clone(), 3)
        .await
        .unwrap();
    let plan = exporter
        .plan(&targets, day("2026-02-25"), day("2026-03-15"))
        .unwrap();
    let summary = exporter.run(&targets, &plan).await;
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    drop(exporter);
    // The event stream of the same days, read into the same lake.
    let stream = tempfile::tempdir().unwrap();
    let days: Vec<_> = day("2026-02-25")
        .iter_days()
        .take_while(|d| *d <= day("2026-03-15"))
        .collect();
    write_stream(live.emu(), stream.path(), &days, &[]);
    let text = format!(
        "{}\n[[streams]]\nurl = \"{}\"\nsubdomains = {{ \"docs-alpha\" = \"alpha\" }}\n",
        config("http://127.0.0.1:9", out.path(), "timezone = \"UTC\""),
        stream.path().display(),
    );
    let settings = docpipe::config::RawConfig::parse(&text, "t.toml")
        .unwrap()
        .validate("t.toml")
        .unwrap();
    read_stream_once(&settings).await;
    let mut tables = compute(out.path(), &Selection::default()).unwrap();
    write_tables(out.path(), &mut tables).unwrap();
    let g = &tables.gaps;
    let run = std::process::Command::new(python())
        .arg("-c")
        .arg(CHECK)
        .arg(out.path())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(
        run.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let want: String = g
        .frames()
        .iter()
        .map(|(name, df)| format!("{name} {}\n", df.height()))
        .collect();
    assert_eq!(printed, want);
    // Real rows, not empty tables: every table has some, and the gaps are there to act on.
    for (name, df) in g.frames() {
        assert!(df.height() > 0, "{name} is empty");
    }
    let ranked = g
        .unanswered_questions
        .column("rank")
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .flatten()
        .count();
    assert_eq!(ranked, g.unanswered_questions.height());
    // Grouping by normalised text joins wordings that differ in case and punctuation.
    let asks: i64 = g
        .unanswered_questions
        .column("asks")
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .flatten()
        .sum();
    assert!(asks > g.unanswered_questions.height() as i64);
    let summary = docpipe::trends::gaps::describe(g);
    assert!(
        summary.contains("alpha searches (7 days to 2026-03-15)"),
        "{summary}"
    );
    assert!(summary.contains("      search gap: \""), "{summary}");
    assert!(summary.contains("      unanswered: \""), "{summary}");
    gap_chart_agrees_with_its_tables(out.path(), g);
}

/// The gaps chart draws what `search_daily` and `assistant_daily` hold: their complete days
/// (today, not over, left out as every table leaves it), each share in percent, on an axis of
/// 0 to 100%; its SVG has a point per day of each line.
fn gap_chart_agrees_with_its_tables(out: &std::path::Path, g: &docpipe::trends::gaps::Gaps) {
    let rows = |df: &polars::prelude::DataFrame, column: &str| {
        let project = df.column("project").unwrap().str().unwrap().clone();
        let date = df
            .column("date")
            .unwrap()
            .date()
            .unwrap()
            .physical()
            .clone();
        let complete = df.column("complete").unwrap().bool().unwrap().clone();
        let share = df.column(column).unwrap().f64().unwrap().clone();
        let epoch = day("1970-01-01");
        (0..df.height())
            .filter(|i| project.get(*i) == Some("alpha") && complete.get(*i) == Some(true))
            .filter_map(|i| {
                let d = epoch + chrono::Duration::days(i64::from(date.get(i)?));
                Some((d, share.get(i)? * 100.0))
            })
            .collect::<Vec<_>>()
    };
    let series = docpipe::trends::chart::gap_series(g).unwrap();
    let alpha = &series["alpha"];
    let unclicked = rows(&g.search_daily, "unclicked_share");
    assert_eq!(alpha.unclicked, unclicked);
    assert_eq!(
        alpha.unanswered,
        rows(&g.assistant_daily, "unanswered_share")
    );
    assert_eq!(
        alpha.clarifying,
        rows(&g.assistant_daily, "clarifying_share")
    );
    assert!(
        alpha
            .unclicked
            .iter()
            .chain(&alpha.unanswered)
            .all(|(_, v)| (0.0..=100.0).contains(v))
    );
    let svg = std::fs::read_to_string(out.join("trends/gaps-alpha.svg")).unwrap();
    let points_of = |stroke: &str| {
        svg.split("<polyline")
            .skip(1)
            .find(|p| p.split("/>").next().unwrap().contains(stroke))
            .and_then(|p| p.split("points=\"").nth(1))
            .map(|p| p.split('"').next().unwrap().split_whitespace().count())
    };
    assert_eq!(points_of("#1F77B4"), Some(unclicked.len()), "{svg}");
    // The y axis ends at 100%.
    let labels: Vec<&str> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split('>').nth(1)?.split('<').next()?.trim()))
        .collect();
    assert!(labels.contains(&"100"), "{labels:?}");
    assert!(
        !labels.iter().any(|l| ["110", "120", "130"].contains(l)),
        "{labels:?}"
    );
}
