//! The lake says what each day is: `day_status`, kept by each run, on a manual clock in a time
//! zone that changed its clocks two days before.

use crate::common::*;
use docpipe::api::AdminKey;
use docpipe::app::cycle::{self, Intent, Options, Outcome};
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

/// The emulator and a context at 10:00 in Los Angeles on 2026-03-10 (its clocks went forward
/// on 2026-03-08), the projects' `datasets` line given, exporting from `start`; the output is
/// the folder's `out`.
async fn in_los_angeles(datasets: String, start: &str) -> (Live, tempfile::TempDir, Context) {
    let now: chrono::DateTime<chrono::Utc> = "2026-03-10T17:00:00Z".parse().unwrap();
    let live = Live::start_at(small(), now).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = TestConfig {
        datasets,
        start: Some(day(start)),
        extra: "timezone = \"America/Los_Angeles\"\nlookback_days = 3\n".into(),
        ..TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
    }
    .write(&dir.path().join("docpipe.toml"));
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let ctx = Context::open(settings, live.clock.clone(), Access::Export, keys())
        .await
        .unwrap();
    (live, dir, ctx)
}

/// Runs `intent` over `targets` as the front doors do; the run's report.
async fn ran(
    ctx: &Context,
    targets: &[docpipe::export::Target],
    intent: Intent<'_>,
    opts: Options<'_>,
) -> cycle::Report {
    let exporter = ctx.exporter();
    match cycle::run(ctx, &exporter, targets, intent, opts)
        .await
        .unwrap()
    {
        Outcome::Ran(report) => *report,
        other => panic!("the run did not run: {other:?}"),
    }
}

/// Exports what is due for `targets` (the day status and the lake's description after it, no
/// trends), as `export` does; every window written.
async fn export_due(ctx: &Context, targets: &[docpipe::export::Target]) -> cycle::Report {
    let report = ran(ctx, targets, Intent::Due, Options::export_only(false)).await;
    assert!(
        report.summary.failed.is_empty(),
        "{:?}",
        report.summary.failed
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn day_status_says_which_days_are_partial_provisional_and_final_across_the_clock_change() {
    let (live, dir, ctx) = in_los_angeles(String::new(), "2026-03-04").await;
    let out = dir.path().join("out");
    let targets = ctx.targets(&[]).unwrap();
    let run = || ran(&ctx, &targets, Intent::Due, Options::export_only(false));
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
    // A run with nothing to fetch: no target.
    let idle = || ran(&ctx, &[], Intent::Due, Options::export_only(false));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trends_compare_complete_days_and_today_is_only_so_far() {
    // 14 complete days before today (2026-02-24..2026-03-09), and today.
    let datasets = "datasets = [\"page_views\", \"searches\", \"assistant\"]\n";
    let (_live, dir, ctx) = in_los_angeles(datasets.into(), "2026-02-24").await;
    let out = dir.path().join("out");
    let targets = ctx.targets(&["alpha".to_string()]).unwrap();
    let opts = Options {
        trends: cycle::When::Always,
        ..Options::export_only(false)
    };
    let report = ran(&ctx, &targets, Intent::Due, opts).await;
    assert!(
        report.summary.failed.is_empty(),
        "{:?}",
        report.summary.failed
    );
    // day_status: today partial, the 3 days of the lateness allowance provisional, the older
    // ones final.
    let statuses = of(&statuses(&out, "alpha"), "page_views");
    let status = |d: &str| statuses.iter().find(|s| s.0 == d).unwrap().1.clone();
    assert_eq!(statuses.len(), 15);
    assert_eq!(
        [
            "2026-02-24",
            "2026-03-06",
            "2026-03-07",
            "2026-03-09",
            "2026-03-10"
        ]
        .map(status),
        ["final", "final", "provisional", "provisional", "partial"]
    );
    let cycle::TrendsRun::Computed(trends, _) = &report.trends else {
        panic!("trends not computed: {:?}", report.trends);
    };
    // The lake's own sums, by DuckDB: the 7 complete days before today, the 7 before them,
    // today so far; and today's row of trends/daily.
    let lake = run_python(
        "import duckdb, sys\n\
         o = sys.argv[1]\n\
         t = f\"read_parquet('{o}/site_totals/**/*.parquet', hive_partitioning = true, hive_types = {{'project': VARCHAR, 'date': DATE}})\"\n\
         print(duckdb.sql(f\"SELECT sum(total) FILTER (date BETWEEN DATE '2026-03-03' AND DATE '2026-03-09'), sum(total) FILTER (date BETWEEN DATE '2026-02-24' AND DATE '2026-03-02'), sum(total) FILTER (date = DATE '2026-03-10'), sum(ai) FILTER (date BETWEEN DATE '2026-03-03' AND DATE '2026-03-09') FROM {t} WHERE project = 'alpha'\").fetchall())\n\
         print(duckdb.sql(f\"SELECT date, complete, total_7d, change_vs_week_before FROM '{o}/trends/daily.parquet' WHERE project = 'alpha' AND date >= DATE '2026-03-09' ORDER BY date\").fetchall())\n\
         print(duckdb.sql(f\"SELECT date, complete FROM '{o}/trends/search_daily.parquet' WHERE project = 'alpha' AND NOT complete\").fetchall())\n\
         print(duckdb.sql(f\"SELECT DISTINCT last_day FROM '{o}/trends/search_terms.parquet' WHERE project = 'alpha'\").fetchall())",
        &[out.as_os_str()],
    );
    let lines: Vec<&str> = lake.lines().collect();
    let sums: Vec<i64> = lines[0]
        .trim_matches(|c| "[()]".contains(c))
        .split(", ")
        .map(|v| v.parse().unwrap())
        .collect();
    let (now7, before7, today, ai7) = (sums[0], sums[1], sums[2], sums[3]);
    assert!(now7 > 0 && before7 > 0 && today > 0, "{lake}");
    let summaries = docpipe::trends::summarize(&trends.tables).unwrap();
    let alpha = summaries.iter().find(|s| s.project == "alpha").unwrap();
    assert_eq!(alpha.last_day, day("2026-03-09"));
    assert_eq!(alpha.total, (now7, before7));
    assert_eq!(alpha.so_far, Some((day("2026-03-10"), today)));
    assert_eq!(alpha.missing_days, Vec::<chrono::NaiveDate>::new());
    let change = (now7 as f64 / before7 as f64 - 1.0) * 100.0;
    let share = ai7 as f64 / now7 as f64 * 100.0;
    let described = docpipe::trends::describe(&summaries);
    assert!(
        described.contains(&format!(
            "\n  alpha (to 2026-03-09): {now7} views ({change:+.1}%), AI share {share:.1}% (was "
        )),
        "{described}"
    );
    assert!(
        described.contains(&format!("; 2026-03-10 is not over: {today} views so far\n")),
        "{described}"
    );
    // Yesterday is whole and compared; today is marked, with no 7-day sum and no change.
    let daily: Vec<&str> = lines[1].split("), (").collect();
    assert_eq!(daily.len(), 2, "{lake}");
    assert!(daily[0].contains("2026, 3, 9), True, "), "{lake}");
    assert!(
        daily[1].ends_with("2026, 3, 10), False, None, None)]"),
        "{lake}"
    );
    assert_eq!(lines[2], "[(datetime.date(2026, 3, 10), False)]");
    // The search terms' windows end at the last complete day.
    assert_eq!(lines[3], "[(datetime.date(2026, 3, 9),)]");
    // The charts draw the complete days the tables compare: today is left out of every line.
    let series = docpipe::trends::chart::series(&trends.tables.daily).unwrap();
    let (_, a) = series.iter().find(|(p, _)| p == "alpha").unwrap();
    assert_eq!(
        (a.days.first().copied(), a.days.last().copied()),
        (Some(day("2026-02-24")), Some(day("2026-03-09")))
    );
    let gaps = docpipe::trends::chart::gap_series(&trends.tables.gaps).unwrap();
    let g = &gaps["alpha"];
    for line in [&g.unclicked, &g.unanswered] {
        assert_eq!(line.last().map(|p| p.0), Some(day("2026-03-09")));
    }
    the_lake_describes_itself(&out);
}

/// DuckDB runs `_docpipe/duckdb.sql` from the output folder, each view counts what its files
/// hold and has the manifest's columns and types; `dbt_sources.yml` names every table; and
/// docs/output.md lists each trend table's columns and types as the manifest does.
fn the_lake_describes_itself(out: &std::path::Path) {
    let checked = run_python(
        r#"
import duckdb, glob, json, os, sys, yaml
os.chdir(sys.argv[1])
con = duckdb.connect()
con.execute(open('_docpipe/duckdb.sql').read())
m = json.load(open('_docpipe/manifest.json'))
duck = {'string': 'VARCHAR', 'int64': 'BIGINT', 'double': 'DOUBLE', 'boolean': 'BOOLEAN',
        'date': 'DATE', 'timestamp[us, UTC]': 'TIMESTAMP WITH TIME ZONE'}
for t in m['tables']:
    n = con.sql(f'SELECT count(*) FROM "{t["name"]}"').fetchall()[0][0]
    files = glob.glob(t['files'].replace('<id>', '*').replace('<YYYY-MM-DD>', '*'))
    direct = sum(con.sql(f"SELECT count(*) FROM read_parquet('{f}')").fetchall()[0][0] for f in files)
    got = sorted((c[0], c[1]) for c in con.sql(f'DESCRIBE "{t["name"]}"').fetchall())
    want = sorted((c['name'], duck.get(c['type'], c['type'])) for c in t['columns'])
    other = [w for w, g in zip(want, got) if w != g and not w[1].startswith(('list', 'struct'))]
    print(t['name'], n == direct and len(got) == len(want) and not other, n > 0, len(files) > 0)
dbt = yaml.safe_load(open('_docpipe/dbt_sources.yml'))
src = dbt['sources'][0]
print(dbt['version'], src['name'], [t['name'] for t in src['tables']] == [t['name'] for t in m['tables']],
      sorted({t.get('loaded_at_field') for t in src['tables']} - {None}),
      src['tables'][0]['freshness'])
"#,
        &[out.as_os_str()],
    );
    let mut lines: Vec<&str> = checked.lines().collect();
    let dbt = lines.pop().unwrap();
    assert_eq!(
        dbt,
        "2 docpipe True ['fetched_at'] {'warn_after': {'count': 120, 'period': 'minute'}, 'error_after': {'count': 360, 'period': 'minute'}}"
    );
    let tables: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    let raw = [
        "page_views",
        "site_totals",
        "searches",
        "search_totals",
        "assistant_turns",
        "day_status",
    ];
    assert_eq!(
        tables,
        [&raw[..], &docpipe::trends::NAMES[..]].concat(),
        "{checked}"
    );
    for line in &lines {
        let empty_ok = [
            "feedback_pages",
            "visitors_daily",
            "callers_weekly",
            "agent_page_reads",
            "ai_operators_daily",
        ]
        .iter()
        .any(|t| line.starts_with(&format!("{t} ")));
        let want = if empty_ok {
            "True False True"
        } else {
            "True True True"
        };
        assert!(line.ends_with(want), "{line}");
    }
    // docs/output.md lists each trend table's columns with their types, as the files have them.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("_docpipe/manifest.json")).unwrap())
            .unwrap();
    let docs = std::fs::read_to_string(root().join("docs/output.md")).unwrap();
    let mut missing = String::new();
    for t in manifest["tables"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        if !t["files"].as_str().unwrap().starts_with("trends/") {
            continue;
        }
        let columns: Vec<String> = t["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c["name"].as_str().unwrap(),
                    c["type"].as_str().unwrap()
                )
            })
            .collect();
        let row = format!("| `{name}` | {} |", columns.join(", "));
        if !docs.contains(&row) {
            missing += &format!("{row}\n");
        }
    }
    assert_eq!(missing, "", "docs/output.md lacks these rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_and_assistant_days_become_final_once_no_walk_reads_them_again() {
    // 2026-02-09..2026-03-10 in Los Angeles: 30 days; a lookback of 3, feedback re-checked 14
    // days back, the assistant 1.
    let datasets = "datasets = [\"feedback\", \"assistant\"]\n";
    let (live, dir, ctx) = in_los_angeles(datasets.into(), "2026-02-09").await;
    let out = dir.path().join("out");
    let targets = ctx.targets(&["alpha".to_string()]).unwrap();
    let run = || export_due(&ctx, &targets);
    let finals = |rows: &[(String, String, String)], dataset: &str| {
        let days = of(rows, dataset);
        let last = days.iter().rfind(|d| d.1 == "final").map(|d| d.0.clone());
        (days.iter().filter(|d| d.1 == "final").count(), last)
    };
    // What `status --json` says of alpha's datasets: (days final, the last final day).
    let status = || async {
        let model = docpipe::status::read(&ctx.settings, live.clock.clone(), 5)
            .await
            .unwrap();
        let json = serde_json::to_value(&model).unwrap();
        let alpha = json["projects"][0]["datasets"].as_array().unwrap().clone();
        alpha
            .iter()
            .map(|d| {
                (
                    d["name"].as_str().unwrap().to_string(),
                    d["days_final"].as_u64().unwrap(),
                    d["last_final"].as_str().map(str::to_string),
                )
            })
            .collect::<Vec<_>>()
    };
    // day_status and `status --json` agree on each dataset's final days and the last of them.
    let (out, status, finals) = (&out, &status, &finals);
    let agree = |want: [(&'static str, u64, &'static str); 2]| async move {
        let rows = statuses(out, "alpha");
        let want: Vec<(String, u64, Option<String>)> = want
            .iter()
            .map(|(d, n, last)| (d.to_string(), *n, Some(last.to_string())))
            .collect();
        let lake: Vec<_> = want
            .iter()
            .map(|(d, ..)| {
                let (n, last) = finals(&rows, d);
                (d.clone(), n as u64, last)
            })
            .collect();
        assert_eq!(lake, want);
        assert_eq!(status().await, want);
    };
    run().await;
    // Feedback: final when older than its 14 days re-checked (2026-02-09..2026-02-23);
    // the assistant: older than the lookback of 3 (2026-02-09..2026-03-06).
    agree([
        ("feedback", 15, "2026-02-23"),
        ("assistant", 26, "2026-03-06"),
    ])
    .await;
    // A day later, the next run's walks read the recent days only: one more day final each.
    live.clock.advance(Duration::from_secs(86_400));
    run().await;
    agree([
        ("feedback", 16, "2026-02-24"),
        ("assistant", 27, "2026-03-07"),
    ])
    .await;
}

/// `dbt` of the test tools' virtual environment, beside its Python.
fn dbt() -> std::path::PathBuf {
    python().with_file_name("dbt")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dbt_reads_the_lake_from_a_project_in_another_folder_and_from_a_copy_by_its_variable() {
    let now = chrono::Utc::now();
    let live = Live::start_at(small(), now).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = TestConfig {
        start: Some(now.date_naive() - chrono::Duration::days(3)),
        ..TestConfig::new(&live.server.base_url(), &out)
    }
    .write(&dir.path().join("docpipe.toml"));
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let ctx = Context::open(settings, live.clock.clone(), Access::Export, keys())
        .await
        .unwrap();
    export_due(&ctx, &ctx.targets(&[]).unwrap()).await;
    drop(ctx);
    // A dbt project of its own, in another folder: the lake's sources copied into its models.
    let project = dir.path().join("analytics");
    std::fs::create_dir_all(project.join("models")).unwrap();
    std::fs::write(
        project.join("dbt_project.yml"),
        "name: analytics\nversion: '1.0'\nprofile: analytics\nconfig-version: 2\n",
    )
    .unwrap();
    std::fs::write(
        project.join("profiles.yml"),
        "analytics:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: analytics.duckdb\n",
    )
    .unwrap();
    std::fs::copy(
        out.join("_docpipe/dbt_sources.yml"),
        project.join("models/docpipe.yml"),
    )
    .unwrap();
    std::fs::write(
        project.join("models/views_by_project.sql"),
        "{{ config(materialized='table') }}\nSELECT project, count(*) AS days, sum(total) AS views FROM {{ source('docpipe', 'site_totals') }} GROUP BY project",
    )
    .unwrap();
    let dbt = |args: &[&str], lake: Option<&std::path::Path>| {
        let mut cmd = std::process::Command::new(dbt());
        cmd.args(args)
            .args(["--profiles-dir", "."])
            .current_dir(&project)
            .env("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
            .env_remove("DOCPIPE_LAKE");
        if let Some(lake) = lake {
            cmd.env("DOCPIPE_LAKE", lake);
        }
        let run = cmd.output().expect("dbt runs (bash .ci/run installs it)");
        let stdout = String::from_utf8_lossy(&run.stdout).to_string();
        assert!(run.status.success(), "dbt {args:?}: {stdout}");
        stdout
    };
    // The views per project the model counted, and the lake's own, by DuckDB.
    let counted = || {
        run_python(
            "import duckdb, sys\n\
             a = duckdb.connect(sys.argv[1], read_only=True).sql('SELECT project, days, views FROM views_by_project ORDER BY project').fetchall()\n\
             b = duckdb.sql(f\"SELECT project, count(*), sum(total) FROM read_parquet('{sys.argv[2]}/site_totals/**/*.parquet', hive_partitioning = true) GROUP BY project ORDER BY project\").fetchall()\n\
             print(a == b, len(a), sum(r[2] for r in a) > 0)",
            &[
                project.join("analytics.duckdb").as_os_str(),
                out.as_os_str(),
            ],
        )
    };
    let ran = dbt(&["run"], None);
    assert!(ran.contains("Completed successfully"), "{ran}");
    assert_eq!(counted().trim(), "True 3 True");
    let fresh = dbt(&["source", "freshness"], None);
    assert!(
        fresh.contains("PASS freshness of docpipe.site_totals"),
        "{fresh}"
    );
    assert!(
        !fresh.contains("WARN") && !fresh.contains("ERROR"),
        "{fresh}"
    );
    // The lake moved (a copy, another mount): DOCPIPE_LAKE says where, the sources follow.
    let moved = dir.path().join("moved");
    std::fs::rename(&out, &moved).unwrap();
    let ran = dbt(&["run"], Some(&moved));
    assert!(ran.contains("Completed successfully"), "{ran}");
    std::fs::rename(&moved, &out).unwrap();
    assert_eq!(counted().trim(), "True 3 True");
}
