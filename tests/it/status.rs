//! `docpipe status`: what the state database says, after an export and a rule firing.

use crate::common::*;
use docpipe::api::budget::Budget;
use docpipe::config::RawConfig;
use docpipe::store::SqliteBudget;
use docpipe::store::ledger::{Ledger, Sent};

#[tokio::test]
async fn status_reports_days_budgets_and_firings() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let text = config(&live.server.base_url(), &out, "").replace(
        "id = \"beta\"\norganization = \"org-a\"",
        "id = \"beta\"\norganization = \"org-a\"\nstart_date = \"2026-03-10\"",
    );
    let settings = RawConfig::parse(&text, "t.toml")
        .unwrap()
        .validate("t.toml")
        .unwrap();
    let before =
        docpipe::cli::status::describe(&settings, docpipe::clock::ManualClock::new(noon()), 5)
            .await
            .unwrap();
    assert_eq!(
        before,
        format!(
            "nothing exported yet: no state database at {}/state.sqlite\n",
            out.display()
        )
    );
    exported(&live, &out, &[("2026-03-01", "2026-03-15")]).await;
    // Requests of other processes in the shared log, and a firing in the ledger.
    let now = noon();
    let state = out.join("state.sqlite");
    let budget = SqliteBudget::open(&state).unwrap();
    for i in 0..3 {
        budget
            .try_take(
                "analytics:org-a",
                100,
                now - chrono::Duration::minutes(30 + i),
            )
            .unwrap();
    }
    budget
        .try_take("analytics:org-b", 100, now - chrono::Duration::minutes(90))
        .unwrap();
    budget.try_take("agent:alpha", 100, now).unwrap();
    let rule = docpipe::rules::Rule::parse(
        "name = \"r\"\nproject = \"alpha\"\njob = \"job_ok\"\nwhen = \"SELECT 1\"\nprompt = \"x\"\n",
        "r.toml",
        &["alpha".to_string()],
    )
    .unwrap();
    let ledger = Ledger::open(&state).unwrap();
    let id = ledger
        .begin(
            rule.key(),
            Some("job_ok"),
            "x",
            "0123456789abcdef",
            2,
            &[],
            now,
        )
        .unwrap()
        .unwrap();
    let mut firing = ledger.all().unwrap().pop().unwrap();
    assert_eq!(firing.id, id);
    firing.sent = Sent::Sent;
    firing.status = Some("completed".into());
    firing.pr_link = Some("https://github.com/org-a/docs/pull/7".into());
    firing.seconds_to_done = Some(7.0);
    ledger.update(&firing, now).unwrap();

    let store = docpipe::store::Store::open(&state).unwrap();
    store
        .queue()
        .push(
            &["beta".to_string()],
            day("2026-02-01"),
            day("2026-03-02"),
            now,
        )
        .unwrap();
    // Two daemons on this state: one alive, holding the backfill; one cut off 10 minutes ago.
    let (min, sec) = (chrono::Duration::minutes, chrono::Duration::seconds);
    store.queue().claim("box-1:41", now, min(10)).unwrap();
    let daemons = store.daemons();
    daemons
        .beat("box-1:41", now - min(60), now - sec(20))
        .unwrap();
    daemons
        .beat("box-2:77", now - min(180), now - min(10))
        .unwrap();
    daemons.beat("box-3:9", now - min(5), now - min(5)).unwrap();
    daemons.leave("box-3:9").unwrap();
    drop(store);
    let status =
        docpipe::cli::status::describe(&settings, docpipe::clock::ManualClock::new(now), 5)
            .await
            .unwrap();
    let provisional = "4 provisional (2026-03-12, 2026-03-13, 2026-03-14, 2026-03-15)";
    assert_eq!(
        status,
        format!(
            "state: {}
project alpha: 15 days exported (2026-03-01..2026-03-15), last final day 2026-03-11, {provisional}; `export` would fetch 15 days from 2026-02-14
project beta: 15 days exported (2026-03-01..2026-03-15), last final day 2026-03-11, {provisional}; `export` would fetch 0 days from 2026-03-10
project gamma: 15 days exported (2026-03-01..2026-03-15), last final day 2026-03-11, {provisional}; `export` would fetch 15 days from 2026-02-14
export now: 30 windows, about 30 requests, ETA within the current hour's budget
  12 windows looked at recently enough wait for their turn
planner, the next 24 hours:
  organization org-a: the config asks for 4 requests an hour (page_views 3.9), the budget gives 95000: it fits. 15 missing windows will be in within about 1 h.
    requests an hour by dataset: page_views 4.2
    alpha: page_views today <= 1h, days every <= 6h
    beta: page_views today <= 1h, days every <= 6h
  organization org-b: the config asks for 2 requests an hour (page_views 2.0), the budget gives 95000: it fits. 15 missing windows will be in within about 1 h.
    requests an hour by dataset: page_views 2.4
    gamma: page_views today <= 1h, days every <= 6h
backfill queued (1, held by daemon box-1:41): 2026-02-01..2026-03-02 of beta: 28 windows not final yet, about 28 requests, ETA within the current hour's budget
daemon box-1:41: alive (heartbeat 0m ago), started 2026-03-15 11:00:00Z, holds backfill 1
daemon box-2:77: no heartbeat for 10m (stopped without leaving, or cut off), started 2026-03-15 09:00:00Z; what it held is taken over when its lease runs out
budget analytics:org-a: 3 of 95000 requests used in the last hour
budget analytics:org-b: 0 of 95000 requests used in the last hour
budget agent:alpha: 1 of 95 follow-ups and job creations used in the last hour
rules: 1 firings; the last:
  2026-03-15 12:00:00Z rule r (alpha): sent follow-up to job job_ok (2 rows, prompt 0123456789ab) -> completed after 7.0 s, PR https://github.com/org-a/docs/pull/7
",
            state.display()
        )
    );
}
