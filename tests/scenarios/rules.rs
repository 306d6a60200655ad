//! The scenario half of `tests/it/rules.rs` (its module says what they prove): the tests
//! that start the binary or a reader.

use crate::common::*;
use crate::support::rules::*;
use docpipe::emulator::Op;
use std::path::Path;

// --- the binary ---------------------------------------------------------------------------------
fn rules_config(live: &Live, dir: &Path, rules: &Path, extra_org: &str) -> std::path::PathBuf {
    let cfg = dir.join("docpipe.toml");
    let text = config(
        &live.server.base_url(),
        &dir.join("out"),
        &format!("[rules]\ndir = \"{}\"\n", rules.display()),
    )
    .replace("id = \"org-a\"\n", &format!("id = \"org-a\"\n{extra_org}"));
    std::fs::write(&cfg, text).unwrap();
    cfg
}

fn write_rule(dir: &Path, name: &str, body: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), body).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_and_a_restart_keep_the_cooldown_and_the_hourly_limit() {
    let live = Live::start(small()).await;
    let dir = two_weeks_exported(&live).await;
    let rules = dir.path().join("jobs");
    for i in 0..3 {
        write_rule(
            &rules,
            &format!("r{i}"),
            &format!(
                "enabled = true\nname = \"r{i}\"\nproject = \"alpha\"\ncreate = true\nwait = false\nreview = \"never\"\nwhen = {TOP3:?}\nprompt = \"rule {i}: {{{{ rows[0].path }}}}\"\n"
            ),
        );
    }
    let cfg = rules_config(
        &live,
        dir.path(),
        &rules,
        "agent_per_hour = 2\nheadroom_percent = 0\n",
    );
    let (a, b) = {
        let (c1, c2) = (cfg.clone(), cfg.clone());
        let a = tokio::task::spawn_blocking(move || docpipe(&c1, &["rules", "run"], None));
        let b = tokio::task::spawn_blocking(move || docpipe(&c2, &["rules", "run"], None));
        (a.await.unwrap(), b.await.unwrap())
    };
    let out = format!("{}{}", text(&a.stdout), text(&b.stdout));
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    assert_eq!(live.emu().requests(Op::JobCreate, "alpha"), 2, "{out}");
    assert_eq!(out.matches(": created new job").count(), 2, "{out}");
    // The restart: nothing more is sent.
    let c = docpipe(&cfg, &["rules", "run"], None);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c.stderr));
    let again = text(&c.stdout);
    assert_eq!(
        again.matches("not sent: cooling down until").count(),
        2,
        "{again}"
    );
    assert_eq!(
        again
            .matches(
                "not sent: the project's 2 follow-ups and job creations of the last hour are used"
            )
            .count(),
        1,
        "{again}"
    );
    assert_eq!(live.emu().requests(Op::JobCreate, "alpha"), 2);
    // The outcome log has the two firings.
    let log = dir
        .path()
        .join("out/agent_runs/project=alpha/part-00000.parquet");
    assert_eq!(parquet_rows(&log).len(), 2);
}

/// A rule that starts an automation, as a new user meets it: `rules check` shows the record it
/// keeps (no prompt, no review) and starts nothing; `rules run` starts one run; `status`, its
/// JSON and the page show the automation, the run and its job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_that_triggers_is_checked_run_and_shown_by_status_and_the_page() {
    let mut data = small();
    data.automations = vec![automation("wf_refresh", "alpha")];
    let live = Live::start(data).await;
    let dir = two_weeks_exported(&live).await;
    let rules = dir.path().join("jobs");
    write_rule(
        &rules,
        "refresh",
        &format!(
            "enabled = true\nname = \"refresh\"\nproject = \"alpha\"\ntrigger = \"wf_refresh\"\nwait = false\nwhen = {TOP3:?}\n"
        ),
    );
    let cfg = rules_config(&live, dir.path(), &rules, "");
    let check = docpipe(&cfg, &["rules", "check"], None);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    let stdout = text(&check.stdout);
    let file = rules.join("refresh.toml");
    assert!(
        stdout.starts_with(&format!(
            "rule refresh ({}): enabled, project alpha, a run of automation wf_refresh, no review (a trigger sends no readers' words), cooldown 1 day, after each export, does not poll\n  query: 3 rows (fires at 1 or more)\n",
            file.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("; a trigger sends none of it, so it waits for no review):\n    | Rows that started the automation (nothing of them was sent):\n    | 1. {\"path\": "),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "  would start a run of automation wf_refresh now\n1 rules; 1 would send now; nothing sent\n"
        ),
        "{stdout}"
    );
    assert!(live.emu().triggers().is_empty());
    let run = docpipe(&cfg, &["rules", "run"], None);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let triggers = live.emu().triggers();
    assert_eq!(triggers.len(), 1);
    let job = &triggers[0].2;
    let json: serde_json::Value =
        serde_json::from_slice(&docpipe(&cfg, &["status", "--json"], None).stdout).unwrap();
    let firing = &json["rules"]["firings"][0];
    assert_eq!(
        (&firing["kind"], &firing["automation"], &firing["job"]),
        (
            &serde_json::json!("trigger"),
            &serde_json::json!("wf_refresh"),
            &serde_json::json!(job)
        )
    );
    let instance = firing["run"].as_str().unwrap().to_string();
    assert!(instance.starts_with("run_"), "{firing}");
    let started = format!(
        "rule refresh (alpha): started automation wf_refresh as run {instance}, job {job} (3 rows, record "
    );
    assert!(
        text(&run.stdout).contains(&started),
        "{}",
        text(&run.stdout)
    );
    let status = text(&docpipe(&cfg, &["status"], None).stdout);
    assert!(status.contains(&started), "{status}");
    let settings = docpipe::config::Settings::load(&cfg).unwrap();
    let s = docpipe::status::read(&settings, live.clock.clone(), 5)
        .await
        .unwrap();
    let page = docpipe::status::html::render(&s);
    assert!(
        page.contains(&format!(
            "<td>automation wf_refresh, run {instance}, job {job}</td>"
        )),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_check_shows_the_prompt_and_sends_nothing() {
    let live = Live::start(small()).await;
    let dir = two_weeks_exported(&live).await;
    let rules = dir.path().join("jobs");
    write_rule(
        &rules,
        "top",
        &format!(
            "enabled = true\nname = \"top\"\nproject = \"alpha\"\njob = \"job_ok\"\nwhen = {TOP3:?}\nprompt = {TOP3_PROMPT:?}\n"
        ),
    );
    let cfg = rules_config(&live, dir.path(), &rules, "");
    let run = docpipe(&cfg, &["rules", "check"], None);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let stdout = text(&run.stdout);
    let expected = top3_from_truth(&live, "alpha");
    assert!(
        stdout.contains("  query: 3 rows (fires at 1 or more)\n"),
        "{stdout}"
    );
    // docpipe's block, then the template's line with the paths quoted.
    let (block, line) = expected.split_once("\n\n").unwrap();
    assert!(
        stdout.contains(&format!("    | {block}\n    | \n    | {line}\n")),
        "{stdout}"
    );
    // Its prompt holds readers' words (paths): under the default review a person sees it first.
    assert!(
        stdout.contains("  would be held for review (its prompt holds readers' words, 0 of them flagged: a person sees them before the agent acts): `docpipe rules pending` would list it\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("1 rules; 0 would send now; nothing sent\n"),
        "{stdout}"
    );
    let stats = live.emu().stats();
    assert!(!stats.contains_key("job_message") && !stats.contains_key("job_get"));
    assert!(!dir.path().join("out/agent_runs").exists());
    // validate agrees
    let run = docpipe(&cfg, &["validate"], None);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert!(text(&run.stdout).contains("1 rules, all valid"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_bad_rule_file_gets_one_clear_line_and_nothing_is_sent() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("jobs");
    let ok = "project = \"alpha\"\njob = \"job_ok\"\n";
    let cases: [(&str, String, &str); 25] = [
        ("a-unknown-field", format!("name = \"a\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"x\"\ncooldwn = \"1h\"\n"),
         "line 6: unknown field `cooldwn`, expected one of `name`, `description`, `project`, `job`, `create`, `trigger`, `when`, `min_rows`, `prompt`, `cooldown`, `wait`, `timeout`, `schedule`"),
        ("b-toml", "name = \"b\"\nproject".to_string(), "line 2: key with no value, expected `=`"),
        ("c-sql", format!("name = \"c\"\n{ok}when = \"SELEC path FROM pages\"\nprompt = \"x\"\n"),
         "when: the query does not parse: sql parser error: Expected: an SQL statement, found: SELEC at Line: 1, Column: 1"),
        ("d-column", format!("name = \"d\"\n{ok}when = \"SELECT nope FROM daily\"\nprompt = \"x\"\n"),
         "when: not found: unable to find column \"nope\" (no column of the query's tables is named so; docs/output.md lists them)"),
        ("e-table", format!("name = \"e\"\n{ok}when = \"SELECT path FROM pagez\"\nprompt = \"x\"\n"),
         "when: table pagez is not a trend table (daily, weekly, pages, search_terms, search_daily, assistant_daily, assistant_categories, unanswered_questions, feedback_pages, visitors_daily, callers_weekly, agent_page_reads, ai_operators_daily)"),
        ("f-template", format!("name = \"f\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"{{% for r in rows %}}\"\n"),
         "prompt: syntax error: unexpected end of input, expected end of block (in <string>:1)"),
        ("g-undefined", format!("name = \"g\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"{{{{ rows[0].pathz }}}}\"\n"),
         "prompt: undefined value: `rows[0].pathz` is undefined (in <string>:1)"),
        ("h-filter", format!("name = \"h\"\n{ok}when = \"SELECT path FROM pages\"\nprompt = \"{{{{ rows[0].path | nofilter }}}}\"\n"),
         "prompt: unknown filter: filter nofilter is unknown (in <string>:1)"),
        ("i-project", "name = \"i\"\nproject = \"nope\"\njob = \"j\"\nwhen = \"SELECT 1\"\nprompt = \"x\"\n".to_string(),
         "project nope is not configured (configured: alpha, beta, gamma)"),
        ("j-both", "name = \"j\"\nproject = \"alpha\"\njob = \"j\"\ncreate = true\nwhen = \"SELECT 1\"\nprompt = \"x\"\n".to_string(),
         "give one of job, create = true or trigger, not several"),
        ("k-neither", "name = \"k\"\nproject = \"alpha\"\nwhen = \"SELECT 1\"\nprompt = \"x\"\n".to_string(),
         "say which job to message (job = \"<id>\"), create = true, or which automation to start (trigger = \"<id>\")"),
        ("l-duration", format!("name = \"l\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\ncooldown = \"soon\"\n"),
         "cooldown \"soon\" is not a duration like \"24h\" or \"30m\" (expected number at 0)"),
        ("m-cron", format!("name = \"m\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\nschedule = \"61 * * * *\"\n"),
         "schedule \"61 * * * *\" is not a cron expression of 6 fields, sec min hour day month weekday (Invalid pattern: Pattern must have 6 or 7 fields when seconds are required and years are optional.)"),
        ("n-duplicate", format!("name = \"d\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\n"),
         "name \"d\" is already used by"),
        ("o-min-rows", format!("name = \"o\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\nmin_rows = 0\n"),
         "min_rows 0 must be between 1 and 1000000"),
        // What an attacker's rule file tried: read a local file, overflow the cooldown, ask for
        // a 24 TB allocation, render for minutes.
        ("p-read-file", format!("name = \"p\"\n{ok}when = \"SELECT * FROM read_csv('/etc/passwd')\"\nprompt = \"x\"\n"),
         "when: read_csv(...) is a table function; a rule reads only the trend tables (daily, weekly, pages, search_terms, search_daily, assistant_daily, assistant_categories, unanswered_questions, feedback_pages, visitors_daily, callers_weekly, agent_page_reads, ai_operators_daily)"),
        ("q-cooldown", format!("name = \"q\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\ncooldown = \"1000000years\"\n"),
         "cooldown \"1000000years\" is longer than 366 days"),
        ("r-min-rows", format!("name = \"r\"\n{ok}when = \"SELECT 1\"\nprompt = \"x\"\nmin_rows = 1000000000000\n"),
         "min_rows 1000000000000 must be between 1 and 1000000"),
        ("s-fuel", format!("name = \"s\"\n{ok}when = \"SELECT 1\"\nprompt = \"{{% for a in range(100000) %}}{{% for b in range(100000) %}}x{{% endfor %}}{{% endfor %}}\"\n"),
         "prompt: engine ran out of fuel (in <string>:1)"),
        // Text of 100 MB a page (SIGABRT of the whole process at 7b53d4b): refused as it loads.
        ("t-lpad", format!("name = \"t\"\n{ok}when = \"SELECT LPAD(path, 100000000, 'x') AS p FROM pages\"\nprompt = \"x\"\n"),
         "when: LPAD's length 100000000 is more than 1000: a rule's evaluation stays within its memory"),
        ("u-rpad", format!("name = \"u\"\n{ok}when = \"SELECT RPAD(path, total_7d * 100000, 'x') AS p FROM pages\"\nprompt = \"x\"\n"),
         "when: RPAD's length must be a whole number written in the query, at most 1000 (not an expression): a rule's evaluation stays within its memory"),
        // A trigger: an id that is not one, a prompt it would not send, a review it never waits for.
        ("v-trigger-id", "name = \"v\"\nproject = \"alpha\"\ntrigger = \"wf/../x\"\nwhen = \"SELECT 1\"\n".to_string(),
         "trigger \"wf/../x\" is not an automation id (1 to 100 letters, digits, - or _)"),
        ("w-trigger-prompt", "name = \"w\"\nproject = \"alpha\"\ntrigger = \"wf_refresh\"\nwhen = \"SELECT 1\"\nprompt = \"x\"\n".to_string(),
         "a trigger sends no prompt (the automation has its own instructions): remove prompt"),
        ("x-trigger-review", "name = \"x\"\nproject = \"alpha\"\ntrigger = \"wf_refresh\"\nwhen = \"SELECT 1\"\nreview = \"always\"\n".to_string(),
         "a trigger sends no readers' words, so nothing of it waits for review: remove review and flagged"),
        ("y-no-prompt", format!("name = \"y\"\n{ok}when = \"SELECT 1\"\n"),
         "prompt is missing: what the job is told (prompt = \"...\")"),
    ];
    for (file, body, _) in &cases {
        write_rule(&rules, file, body);
    }
    let cfg = rules_config(&live, dir.path(), &rules, "");
    for args in [&["rules", "check"][..], &["rules", "run"], &["validate"]] {
        let run = docpipe(&cfg, args, None);
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&run.stdout).matches("rule ").count(), 0);
        let stderr = text(&run.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), cases.len(), "{stderr}");
        for (file, _, message) in &cases {
            let prefix = format!(
                "error: {}: {message}",
                rules.join(format!("{file}.toml")).display()
            );
            assert_eq!(
                lines.iter().filter(|l| l.starts_with(&prefix)).count(),
                1,
                "{prefix}\n{stderr}"
            );
        }
    }
    assert!(live.emu().stats().is_empty());
    assert!(!dir.path().join("out/agent_runs").exists());
}

/// The demo's simulated week shows the loop's two new ends: its trigger rule starts
/// globex-help's automation each week, and the impact table reads the questions asked again:
/// the automation's run changes nothing (none of its questions is answered, at either ask),
/// while the job that was sent the unanswered questions makes some of them answered by the
/// week after, each citing a page its prompt named.
#[test]
fn the_demos_week_starts_an_automation_and_reads_the_questions_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .current_dir(dir.path())
        .args(["demo", "--weeks", "1", "--output"])
        .arg(dir.path().join("out"))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    // The first plan's estimate holds (within a quarter of what the run sends): the newest
    // day of each daily dataset is walked first and the rest counted from it; the spans are
    // the guesses it names.
    let number_before = |line: &str, what: &str| -> u64 {
        let (before, _) = line.split_once(what).unwrap();
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let plan = stdout.lines().find(|l| l.starts_with("plan: ")).unwrap();
    let planned = number_before(plan, " analytics requests");
    let exported = stdout.lines().find(|l| l.starts_with("exported ")).unwrap();
    let sent = number_before(exported, " analytics requests in all");
    assert!(
        exported.ends_with(&format!(
            " in all (the plan expected about {planned}); 0 windows already final were skipped"
        )),
        "{exported}"
    );
    assert!(sent.abs_diff(planned) * 4 <= sent, "{plan}\n{exported}");
    assert!(
        stdout.contains(
            "\n  measured first, walked before this plan: the newest day of each never walked ("
        ),
        "{stdout}"
    );
    assert!(stdout.contains(" requests, counted in it): caller_stats acme-api, caller_stats acme-docs, caller_stats globex-help, feedback_by_page acme-api, feedback_by_page acme-docs, feedback_by_page globex-help, page_views acme-api, page_views acme-docs, page_views globex-help, searches acme-api, searches acme-docs, searches globex-help, visitors acme-api, visitors acme-docs, visitors globex-help\n"), "{stdout}");
    assert!(stdout.contains("\n  guessed, never walked: one page a day of their span (the service tells no count of rows before a walk): assistant acme-api, assistant acme-docs, assistant globex-help, feedback acme-api, feedback acme-docs, feedback globex-help\n"), "{stdout}");
    assert_eq!(
        stdout
            .matches("rule help-questions-run (globex-help): started automation wf_help_questions as run run_")
            .count(),
        2,
        "{stdout}"
    );
    // The impact table's paragraphs, by rule.
    let table = &stdout[stdout.find("impact of the agent jobs: ").unwrap()..];
    let paragraph = |rule: &str| -> Vec<&str> {
        let at = table.find(&format!("\nrule {rule} ")).unwrap();
        table[at + 1..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter(|l| l.starts_with("  asked again: firing "))
            .collect()
    };
    let counts = |line: &str| -> (usize, usize, usize) {
        let (_, rest) = line.split_once(": ").unwrap();
        let (_, rest) = rest.split_once(": ").unwrap();
        let n: Vec<usize> = rest
            .split([' ', ','])
            .filter_map(|w| w.parse().ok())
            .collect();
        (n[0], n[1], n[2])
    };
    let automation = paragraph("help-questions-run");
    assert_eq!(automation.len(), 2, "{table}");
    assert!(
        automation.iter().all(|l| counts(l) == (0, 5, 0)),
        "{automation:?}"
    );
    // Its first firing's questions were asked twice (the second time the week after).
    assert!(
        !automation[0].contains("asked once more"),
        "{}",
        automation[0]
    );
    let questions = paragraph("unanswered-questions");
    assert_eq!(questions.len(), 2, "{table}");
    let (answered, of, citing) = counts(questions[0]);
    assert_eq!(of, 5);
    assert!(answered >= 1 && citing == answered, "{}", questions[0]);
    assert!(
        questions[0].contains("; the 7-day measure follows once "),
        "{}",
        questions[0]
    );
}
