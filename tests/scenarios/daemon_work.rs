//! The scenario half of `tests/it/daemon_work.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;
use crate::support::daemon_work::*;
use docpipe::clock::Clock;
use docpipe::daemon::{Step, Tick};
use docpipe::emulator::Op;
use std::path::Path;
use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn a_queued_backfill_of_every_dataset_drains_one_window_a_step_to_what_the_cli_writes() {
    let seen = Seen::capture();
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig {
        datasets: String::new(),
        ..daemon_config(
            &live.server.base_url(),
            dir.path(),
            day("2026-03-15"),
            100_000,
        )
    };
    let mut d = daemon(
        settings(&config, dir.path()),
        live.clock.clone(),
        keys(),
        None,
    )
    .await;
    let (from, to) = ("2026-03-09", "2026-03-10");
    d.context()
        .store()
        .queue()
        .push(&[], day(from), day(to), live.clock.now())
        .unwrap();
    let mut steps = 0;
    while d.work(None).await == Step::Worked {
        steps += 1;
        assert!(steps < 100, "the backfill never ends");
    }
    // Each step took one window: 6 page-view windows, 4 daily datasets x 6, 2 spans x 3; and
    // the step that found the range done.
    let windows = 6 + 4 * 6 + 2 * 3;
    assert_eq!(seen.count(&["backfill window written"]), windows);
    assert_eq!(steps, windows + 1);
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"backfill\",result=\"ok\"}"),
        1.0
    );
    d.leave();
    // The same files as the command line's backfill of the range.
    let ref_dir = dir.path().join("ref");
    std::fs::create_dir_all(&ref_dir).unwrap();
    let ref_cfg = TestConfig {
        datasets: String::new(),
        ..TestConfig::new(&live.server.base_url(), &ref_dir.join("out"))
    }
    .write(&ref_dir.join("c.toml"));
    // The binary asks the emulator, which serves on this test's thread: that thread waits
    // for it without blocking.
    let run = tokio::task::spawn_blocking(move || {
        docpipe(&ref_cfg, &["backfill", "--from", from, "--to", to], None)
    })
    .await
    .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let of_range = |out: &Path| -> Vec<_> {
        dataset(out)
            .into_iter()
            .filter(|(f, _)| {
                let f = f.to_string_lossy();
                f.contains("date=2026-03-09")
                    || f.contains("date=2026-03-10")
                    || f.contains("feedback_undated")
            })
            .collect()
    };
    let got = of_range(&dir.path().join("out"));
    // 8 daily tables and the 2 span tables, for 3 projects and 2 days (and any undated feedback).
    assert!(
        got.len() >= 10 * 3 * 2,
        "{:?}",
        got.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    assert_eq!(got, of_range(&ref_dir.join("out")));
}

#[tokio::test(flavor = "current_thread")]
async fn a_rule_query_that_would_join_without_bound_fails_its_rule_and_the_daemon_goes_on() {
    let seen = Seen::capture();
    let hook = Hook::start().await;
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    let cross = "SELECT a.path FROM pages a JOIN pages b ON a.project = b.project JOIN pages c ON a.project = c.project LIMIT 5";
    std::fs::write(
        rules.join("cross.toml"),
        format!(
            "enabled = true\nname = \"pages-cross\"\nproject = \"alpha\"\njob = \"job_ok\"\nwait = false\nwhen = {cross:?}\nprompt = \"{{{{ rows | length }}}}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(rules.join("ok.toml"), latest_day_rule("ok", "job_ok", "")).unwrap();
    let mut config = daemon_config(&live.server.base_url(), dir.path(), day("2026-03-14"), 100);
    config.extra = format!("[rules]\ndir = \"{}\"", rules.display());
    let settings = settings(&config, dir.path());
    let mut d = daemon(settings, live.clock.clone(), keys(), Some(&rules))
        .await
        .alerting(alerts_to(&hook));
    for _ in 0..2 {
        assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
        live.clock.advance(Duration::from_secs(3600));
    }
    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"export\",result=\"ok\"}"),
        2.0
    );
    assert_eq!(
        hook.wait_for("rule_failing", 1).await[0]["state"],
        "problem"
    );
    assert_eq!(
        seen.metric("docpipe_rule_failing{rule=\"pages-cross\"}"),
        1.0
    );

    assert_eq!(
        seen.metric("docpipe_runs_total{kind=\"rules\",result=\"failed\"}"),
        2.0
    );
    // The other rule sent its follow-up; the cross join's rule failed with its line.
    assert_eq!(live.emu().requests(Op::JobMessage, "alpha"), 1);
    let out = dir.path().join("out");
    let tables = docpipe::trends::compute(&out, &docpipe::trends::Selection::default()).unwrap();
    let (loaded, _) = docpipe::rules::load_dir(
        &rules,
        &["alpha".to_string(), "beta".to_string(), "gamma".to_string()],
    )
    .unwrap();
    let cross_rule = loaded.iter().find(|r| r.name == "pages-cross").unwrap();
    let err = docpipe::rules::evaluate(std::slice::from_ref(cross_rule), &tables, None)
        .pop()
        .unwrap()
        .unwrap_err();
    assert!(
        err.message.starts_with("when: the query's joins may produce up to ")
            && err.message.ends_with(" rows, more than 5000000; join on a key of the rows (a path, a search term), not on the project alone"),
        "{}",
        err.message
    );
    let cfg = dir.path().join("docpipe.toml");
    let status = |cfg: &Path| {
        let o = docpipe(cfg, &["status"], None);
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    assert!(
        status(&cfg).contains("rule pages-cross failed "),
        "{}",
        status(&cfg)
    );
    // Its file deleted: the rule is gone at the next reload, and so is its problem, told; the
    // status no longer says it fails.
    std::fs::remove_file(rules.join("cross.toml")).unwrap();
    d.reload_rules(false);
    assert_eq!(d.work(Some(&Tick::Export)).await, Step::Worked);
    let told = hook.wait_for("rule_failing", 2).await;
    assert_eq!(told[1]["state"], "recovered");
    assert_eq!(
        told[1]["text"],
        "docpipe recovered: rule pages-cross is no longer in the rules folder: its problem ends with it (a problem since 2026-03-15 12:00 UTC); status: http://status.example/"
    );
    assert_eq!(
        seen.metric("docpipe_rule_failing{rule=\"pages-cross\"}"),
        0.0
    );
    assert!(!status(&cfg).contains("pages-cross"), "{}", status(&cfg));
}
