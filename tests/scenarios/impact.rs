//! The impact of agent jobs, in process on the emulator's manual clock: a firing records its
//! keys' figures before; nothing is measured while the job runs or while the days after are
//! provisional; once they are final the figures equal a computation over the emulator's truth,
//! key by key; a job without a pull request is reported as such and measured only when the
//! rule asks.

use crate::common::*;
use chrono::{Duration, NaiveDate};
use docpipe::api::AdminKey;
use docpipe::api::jobs::Polling;
use docpipe::app::cycle::{After, Options, TrendsRun, When};
use docpipe::app::rules::{Wait, evaluate_all, fire_all, load};
use docpipe::app::{Access, Context, Keys};
use docpipe::rules::engine::{Engine, Report};
use docpipe::rules::impact::{self, Verdict};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

const RULE: &str = r#"
name = "views"
project = "alpha"
enabled = true
# The sending and the measure are tested here; the review in review.rs.
review = "never"
job = "job_ok"
when = "SELECT path, total_7d FROM pages ORDER BY rank_7d LIMIT 4"
prompt = """
{% for row in rows %}- {{ row.path }}: {{ row.total_7d }} views
{% endfor %}"""
cooldown = "30d"
timeout = "10m"

[impact]
key = "path"
metric = "total_7d"
count = "total_7d"
better = "higher"
days = 7
wait = "2d"
min_count = 50
tolerance = 0.2
"#;

/// A rule on `job` (a job without pull requests) with `[impact]`, measured anyway when `asks`.
fn no_pr_rule(name: &str, asks: bool) -> String {
    RULE.replace("name = \"views\"", &format!("name = \"{name}\""))
        .replace("job_ok", "job_nochange")
        .replace("LIMIT 4", "LIMIT 2")
        + if asks {
            "without_pull_request = true\n"
        } else {
            ""
        }
}

/// A rule that starts an automation, measured as a job's rule is (the run's job has a pull
/// request; the emulator's automation changes no page, so its keys stay).
fn trigger_rule() -> String {
    let impact = &RULE[RULE.find("[impact]").unwrap()..];
    format!(
        "name = \"refresh\"\nproject = \"alpha\"\nenabled = true\ntrigger = \"wf_refresh\"\nwhen = \"SELECT path, total_7d FROM pages ORDER BY rank_7d LIMIT 2 OFFSET 4\"\ncooldown = \"30d\"\ntimeout = \"10m\"\n\n{impact}"
    )
}

fn keys() -> Keys {
    let key = |k: &str| AdminKey::parse(k, "mint", "test").unwrap();
    Keys::Given(BTreeMap::from([
        ("org-a".to_string(), key(ADMIN_A)),
        ("org-b".to_string(), key(ADMIN_B)),
    ]))
}

/// Exports what is due now and computes the trend tables.
async fn export(ctx: &Context) -> docpipe::trends::Tables {
    let targets = ctx.targets(&[]).unwrap();
    let exporter = ctx.exporter();
    let opts = Options {
        trends: When::Always,
        rules: After::Nothing,
        wait: Wait::Never,
        push: false,
        announce: None,
        ahead: false,
        measure: true,
    };
    let intent = docpipe::app::cycle::Intent::Due;
    let outcome = docpipe::app::cycle::run(ctx, &exporter, &targets, intent, opts);
    let docpipe::app::cycle::Outcome::Ran(report) = outcome.await.unwrap() else {
        panic!("the export did not run");
    };
    assert!(
        report.summary.failed.is_empty(),
        "{:?}",
        report.summary.failed
    );
    match report.trends {
        TrendsRun::Computed(t, _) => t.tables,
        other => panic!("no trends: {other:?}"),
    }
}

fn engine(ctx: &Context) -> Engine {
    ctx.engine().unwrap().with_polling(Polling {
        first: std::time::Duration::from_secs(1),
        max: std::time::Duration::from_secs(1),
        ..Polling::default()
    })
}

/// The context of `config` (written into `dir`) with the rule files `rules` in `dir/jobs`,
/// exported and fired once as the daemon fires (its jobs left running): the context, the
/// rules, the engine and the firings' ids in report order.
async fn fired_once(
    live: &Live,
    dir: &Path,
    rules: &[(&str, String)],
    config: TestConfig,
) -> (Context, docpipe::app::rules::Loaded, Engine, Vec<i64>) {
    let rules_dir = dir.join("jobs");
    std::fs::create_dir_all(&rules_dir).unwrap();
    for (name, text) in rules {
        std::fs::write(rules_dir.join(name), text).unwrap();
    }
    let cfg = config.write(&dir.join("docpipe.toml"));
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let given = settings.clone();
    let ctx = Context::open(settings, live.clock.clone(), Access::Export, keys())
        .await
        .unwrap();
    let loaded = load(&rules_dir, &given, &[]).unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let tables = export(&ctx).await;
    let e = engine(&ctx);
    let evals = evaluate_all(&loaded, &tables, Some(e.memory())).unwrap();
    let fired = fire_all(
        &e,
        &loaded.rules,
        evals.into_iter().map(Ok).collect(),
        Wait::Never,
    )
    .await
    .unwrap();
    let ids: Vec<i64> = fired
        .reports
        .iter()
        .map(|r| match r {
            Report::Fired(f) => f.id,
            other => panic!("{}", other.line()),
        })
        .collect();
    assert_eq!(fired.impact.measured, 0);
    (ctx, loaded, e, ids)
}

/// A page's views over `from..=to` as the emulator counts them now.
fn truth(live: &Live, path: &str, from: NaiveDate, to: NaiveDate) -> i64 {
    let mut total = 0;
    let mut d = from;
    while d <= to {
        let rows = live.emu().truth("alpha", d, d.succ_opt().unwrap()).unwrap();
        total += rows
            .iter()
            .filter(|r| r.path == path)
            .map(|r| r.total() as i64)
            .sum::<i64>();
        d = d.succ_opt().unwrap();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_a_pull_request_is_measured_key_by_key_once_the_days_after_are_final() {
    let mut data = small();
    data.automations = vec![automation("wf_refresh", "alpha")];
    let live = Live::start(data).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = [
        ("views.toml", RULE.to_string()),
        ("nopr.toml", no_pr_rule("nopr", false)),
        ("nopr-asks.toml", no_pr_rule("nopr-asks", true)),
        ("refresh.toml", trigger_rule()),
    ];
    let config = TestConfig {
        start: Some(day("2026-03-01")),
        ..TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
    };
    // 2026-03-15 12:00: the rules fire; the jobs are left running (the daemon's way).
    let (ctx, loaded, e, ids) = fired_once(&live, dir.path(), &rules, config).await;
    let out = ctx.output().to_path_buf();
    let (nopr_asks, nopr, refresh, views) = (ids[0], ids[1], ids[2], ids[3]);
    // The figures before: the 7 final days up to the last (the lookback is 3 days).
    let plans = e.ledger().plans().unwrap();
    let plan = &plans[&views];
    assert_eq!(
        (plan.before.from, plan.before.to, plan.before.days),
        (day("2026-03-05"), day("2026-03-11"), 7)
    );
    let keys = e.ledger().key_figures().unwrap()[&views].clone();
    assert_eq!(keys.len(), 4);
    for k in &keys {
        let want = truth(&live, &k.key, day("2026-03-05"), day("2026-03-11"));
        let before = k.before.clone().unwrap();
        assert_eq!(before.value, Some(want as f64), "{}", k.key);
        assert_eq!(before.rows, Some(want), "{}", k.key);
        assert!(k.after.is_none());
    }
    let report =
        docpipe::rules::impact::text::text(&loaded.rules, e.ledger(), e.calendar()).unwrap();
    assert!(
        report.contains(&format!("waiting: firing {views} (the job is running)")),
        "{report}"
    );

    // The jobs end (job_ok with a pull request); the days after are not final yet.
    live.clock.advance(std::time::Duration::from_secs(10));
    let ended = e.poll_step().await.unwrap();
    assert_eq!(ended.len(), 4);
    let m = e.measure_impact().unwrap();
    assert_eq!(m.measured, 0);
    let given: HashMap<i64, String> = m.given_up.into_iter().collect();
    assert_eq!(
        given.get(&nopr).map(String::as_str),
        Some(
            "the job ended without a pull request (without_pull_request = true in its [impact] measures it)"
        )
    );
    assert_eq!(given.len(), 1, "{given:?}");
    // The days after: from the day after the end plus 2 days, 7 of them.
    let (from, to) = (day("2026-03-18"), day("2026-03-24"));
    for step in [6, 6] {
        live.clock.advance(Duration::days(step).to_std().unwrap());
        export(&ctx).await;
        let m = e.measure_impact().unwrap();
        assert_eq!(m.measured, 0, "{}", live.clock_now());
        assert!(!out.join("agent_impact").exists());
    }
    let report =
        docpipe::rules::impact::text::text(&loaded.rules, e.ledger(), e.calendar()).unwrap();
    assert!(
        report.contains(&format!(
            "waiting: firing {views} (the days {from}..{to} are not all final yet)"
        )),
        "{report}"
    );
    // 2026-03-28 12:00: 03-24 is past the lookback and written again: final.
    live.clock.advance(Duration::days(1).to_std().unwrap());
    export(&ctx).await;
    let m = e.measure_impact().unwrap();
    assert_eq!(m.measured, 3);
    assert_eq!(
        m.files,
        vec![out.join("agent_impact/project=alpha/part-00000.parquet")]
    );
    let rows = impact::read(&out).unwrap();
    let mine: Vec<_> = rows.iter().filter(|r| r.firing_id == views).collect();
    assert_eq!(mine.len(), 4);
    // The prompt named the four pages in rank order: the first and third changed (x1.5 from
    // 2026-03-17), the second and fourth did not.
    let firing = e
        .ledger()
        .all()
        .unwrap()
        .into_iter()
        .find(|f| f.id == views)
        .unwrap();
    let named: Vec<String> = firing
        .prompt
        .lines()
        .filter_map(|l| {
            let quoted = l.strip_prefix("- ")?.split(':').next()?;
            serde_json::from_str::<String>(quoted).ok()
        })
        .collect();
    assert_eq!(named.len(), 4);
    for r in &mine {
        let before = truth(&live, &r.key, day("2026-03-05"), day("2026-03-11"));
        let after = truth(&live, &r.key, from, to);
        assert_eq!(r.before, Some(before as f64), "{}", r.key);
        assert_eq!(r.after, Some(after as f64), "{}", r.key);
        assert_eq!((r.rows_before, r.rows_after), (Some(before), Some(after)));
        assert_eq!((r.days_before.days, r.days_after.days), (7, 7));
        assert_eq!((r.days_after.from, r.days_after.to), (from, to));
        assert!(
            r.pr_link
                .as_deref()
                .unwrap()
                .starts_with("https://github.com/org-a/docs/pull/")
        );
        let responded = [0, 2].contains(&named.iter().position(|n| *n == r.key).unwrap());
        let want = if responded {
            Verdict::Improved
        } else {
            Verdict::Stayed
        };
        assert_eq!(r.verdict, want, "{} {before} -> {after}", r.key);
        assert!(r.enough);
    }
    // The job without a pull request is measured when its rule asks, and not otherwise.
    assert_eq!(rows.iter().filter(|r| r.firing_id == nopr_asks).count(), 2);
    assert_eq!(rows.iter().filter(|r| r.firing_id == nopr).count(), 0);
    // The automation's run: measured as a job, each of its two keys the same days each side.
    let run: Vec<_> = rows.iter().filter(|r| r.firing_id == refresh).collect();
    assert_eq!(run.len(), 2);
    for r in &run {
        let before = truth(&live, &r.key, day("2026-03-05"), day("2026-03-11"));
        let after = truth(&live, &r.key, from, to);
        assert_eq!(
            (r.before, r.after),
            (Some(before as f64), Some(after as f64))
        );
        assert_eq!(r.verdict, Verdict::Stayed, "{} {before} -> {after}", r.key);
    }
    let report =
        docpipe::rules::impact::text::text(&loaded.rules, e.ledger(), e.calendar()).unwrap();
    assert!(
        report.contains(&format!("rule nopr (alpha): total_7d per path in pages, higher is better, 7 days each side, from 2 days after the job ended\n  jobs measured: 0; keys: 0 improved, 0 stayed, 0 worse; median change n/a\n  not measured: firing {nopr} (the job ended without a pull request (without_pull_request = true in its [impact] measures it))\n")),
        "{report}"
    );
    assert!(
        report.contains("rule views (alpha): total_7d per path in pages, higher is better, 7 days each side, from 2 days after the job ended\n  jobs measured: 1; keys: 2 improved, 2 stayed, 0 worse; median change "),
        "{report}"
    );
    check_parquet_with_python(&out, 8);
}

/// The file read by pyarrow: its columns and a row count.
fn check_parquet_with_python(out: &Path, rows: usize) {
    let got = run_python(
        "import sys, pyarrow.parquet as pq\n\
         t = pq.read_table(sys.argv[1])\n\
         print(t.num_rows, ','.join(t.column_names))\n",
        &[out
            .join("agent_impact/project=alpha/part-00000.parquet")
            .as_os_str()],
    );
    assert_eq!(
        got.trim(),
        format!(
            "{rows} firing_id,rule,job,job_status,pr_link,fired_at,key,metric,better,before,after,change,relative_change,verdict,enough_data,rows_before,rows_after,days_before,days_after,before_from,before_to,after_from,after_to,measured_at"
        )
    );
}

impl Live {
    fn clock_now(&self) -> chrono::DateTime<chrono::Utc> {
        docpipe::clock::Clock::now(self.clock.as_ref())
    }
}

/// A rule on feedback, measured by pages' thumbs down.
const FEEDBACK_RULE: &str = r#"
name = "thumbs"
project = "alpha"
enabled = true
review = "never"
job = "job_ok"
when = "SELECT path, down_28d FROM feedback_pages ORDER BY down_rank_28d LIMIT 3"
prompt = """
{% for row in rows %}- {{ row.path }}: {{ row.down_28d }} thumbs down
{% endfor %}"""
cooldown = "30d"
timeout = "10m"

[impact]
key = "path"
metric = "down_28d"
count = "votes_28d"
better = "lower"
days = 7
wait = "1d"
min_count = 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feedback_rule_is_measured_once_its_days_after_are_final_as_status_counts_them() {
    let now: chrono::DateTime<chrono::Utc> = "2026-04-05T12:00:00Z".parse().unwrap();
    let live = Live::start_at(small(), now).await;
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig {
        start: Some(day("2026-03-01")),
        datasets: "datasets = [\"page_views\", \"feedback\"]".into(),
        ..TestConfig::new(&live.server.base_url(), &dir.path().join("out"))
    };
    let rules = [("thumbs.toml", FEEDBACK_RULE.to_string())];
    let (ctx, loaded, e, ids) = fired_once(&live, dir.path(), &rules, config).await;
    let id = ids[0];
    // Before: the 7 days up to the last final one, older than feedback's 14 days re-checked.
    let plan = &e.ledger().plans().unwrap()[&id];
    assert_eq!(
        (plan.before.from, plan.before.to, plan.before.days),
        (day("2026-03-15"), day("2026-03-21"), 7)
    );
    live.clock.advance(std::time::Duration::from_secs(10));
    assert_eq!(e.poll_step().await.unwrap().len(), 1);
    // After: 2026-04-07..2026-04-13, final once older than 14 days: on 2026-04-28.
    for step in [6, 6, 6, 4] {
        live.clock.advance(Duration::days(step).to_std().unwrap());
        export(&ctx).await;
        assert_eq!(
            e.measure_impact().unwrap().measured,
            0,
            "{}",
            live.clock_now()
        );
    }
    let report =
        docpipe::rules::impact::text::text(&loaded.rules, e.ledger(), e.calendar()).unwrap();
    assert!(
        report.contains(&format!(
            "waiting: firing {id} (the days 2026-04-07..2026-04-13 are not all final yet)"
        )),
        "{report}"
    );
    live.clock.advance(Duration::days(1).to_std().unwrap());
    export(&ctx).await;
    let m = e.measure_impact().unwrap();
    assert_eq!(m.measured, 1);
    let rows = impact::read(ctx.output()).unwrap();
    assert_eq!(rows.len(), 3);
    for r in &rows {
        assert_eq!(
            (r.days_before.days, r.days_after.from, r.days_after.to),
            (7, day("2026-04-07"), day("2026-04-13"))
        );
    }
    // The days status counts final are the days the impact waited for.
    let model = docpipe::status::read(&ctx.settings, live.clock.clone(), 5)
        .await
        .unwrap();
    let json = serde_json::to_value(&model).unwrap();
    let feedback = json["projects"][0]["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "feedback")
        .unwrap();
    assert_eq!(feedback["last_final"], "2026-04-13");
}
