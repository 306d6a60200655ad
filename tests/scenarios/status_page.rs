//! The status page on the daemon's port, as people open it: the daemon binary on the emulator,
//! the page in Debian's Chromium headless (its DOM and screenshots at a laptop's and a
//! phone's size), `/status.json` against the schema, and the token on an address other than
//! loopback.

use crate::common::*;
use crate::status::assert_valid_status;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's Chromium (`.ci/run` installs it when missing): `DOCPIPE_TEST_CHROMIUM`, else
/// `/usr/bin/chromium`.
fn chromium() -> PathBuf {
    std::env::var_os("DOCPIPE_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into())
}

/// Chromium headless with the flags this machine's closed network needs, a profile of its own.
fn browser(profile: &Path) -> Command {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// Runs the browser with `args` on `url`; its standard output.
fn open(profile: &Path, args: &[String], url: &str) -> Vec<u8> {
    let out = browser(profile).args(args).arg(url).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A daemon started from its binary; its address.
struct Running {
    child: Child,
    addr: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(cfg: &Path, envs: &[(&str, &str)]) -> Running {
    let mut cmd = docpipe_command(cfg, &["run"]);
    cmd.env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .replace("0.0.0.0", "127.0.0.1");
    Running { child, addr }
}

/// The config: alpha, beta and gamma from 3 days ago, the daemon on `listen`, a rule on alpha
/// after each export (its job ends with a pull request), `extra` in `[daemon]`.
fn config(live: &Live, dir: &Path, listen: &str, extra: &str) -> PathBuf {
    // alpha's last day, to job_ok, whose end the daemon polls for.
    let rules = dir.join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("top.toml"),
        "enabled = true\nname = \"top\"\nproject = \"alpha\"\njob = \"job_ok\"\n\
         when = \"SELECT date, total FROM daily ORDER BY date DESC LIMIT 1\"\n\
         prompt = \"Views on {{ rows[0].date }}: {{ rows[0].total }}\"\n",
    )
    .unwrap();
    TestConfig {
        max_retries: 0,
        start: Some(chrono::Utc::now().date_naive() - chrono::Duration::days(3)),
        extra: format!(
            "[rules]\ndir = \"{}\"\n[daemon]\nexport_schedule = \"0 0 0 1 1 *\"\nlisten = \"{listen}\"\nshutdown_grace_secs = 0\n{extra}",
            rules.display()
        ),
        ..TestConfig::new(&live.server.base_url(), &dir.join("out"))
    }
    .write(&dir.join("docpipe.toml"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_in_a_real_browser_shows_each_section_staleness_and_the_pr_link() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&live, dir.path(), "127.0.0.1:0", "");
    let daemon = start(&cfg, &[]);
    let status = format!("http://{}/status.json", daemon.addr);
    // The export at start, the rule after it, its job polled until it ends (the emulator's
    // clock moved past the job's run time).
    let started = Instant::now();
    let doc = loop {
        live.clock.advance(Duration::from_secs(600));
        let doc = get_json(&status).await;
        if doc["rules"]["firings"][0]["pr_link"].is_string() {
            break doc;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no pull request after 60 s: {doc:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_valid_status(&doc, dir.path());
    let pr = doc["rules"]["firings"][0]["pr_link"]
        .as_str()
        .unwrap()
        .to_string();
    let alpha = &doc["projects"][0]["datasets"][0];
    assert_eq!(
        (&alpha["name"], &alpha["freshness"], &alpha["days_exported"]),
        (
            &serde_json::json!("page_views"),
            &serde_json::json!("fresh"),
            &serde_json::json!(4)
        )
    );
    // The requests spent are in this hour's bar (or the one before, when the run crossed the
    // hour: the clock is the machine's): as many as the windows' walks took.
    let hours = doc["organizations"][0]["hours"].as_array().unwrap();
    let n = |h: &serde_json::Value, k: &str| h[k].as_u64().unwrap_or(0);
    let total = n(&hours[22], "total") + n(&hours[23], "total");
    let views =
        n(&hours[22]["by_dataset"], "page_views") + n(&hours[23]["by_dataset"], "page_views");
    assert!(total > 0, "{:?}", &hours[22..]);
    assert_eq!(views, total, "{:?}", &hours[22..]);

    // The page in Chromium: its DOM after rendering.
    let profile = tempfile::tempdir().unwrap();
    let page = format!("http://{}/", daemon.addr);
    let dom = String::from_utf8(open(profile.path(), &["--dump-dom".into()], &page)).unwrap();
    for section in ["budget", "projects", "daemons", "rules", "trends"] {
        assert!(
            dom.contains(&format!("<section id=\"{section}\">")),
            "no section {section} in {dom}"
        );
    }
    // Alpha's page views: fresh, against the default target of one hour.
    let row = dom
        .split("<tr data-project=\"alpha\" data-dataset=\"page_views\">")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap();
    assert!(
        row.contains("<span class=\"badge fresh\" title=\"target 1h\">fresh</span>"),
        "{row}"
    );
    assert!(
        dom.contains(&format!(
            "<td class=\"pr\"><a href=\"{pr}\" rel=\"noreferrer noopener\">{pr}</a></td>"
        )),
        "no link to {pr} in {dom}"
    );
    assert!(
        dom.contains("<td class=\"job-status\">completed</td>"),
        "{dom}"
    );
    assert!(
        dom.contains("<svg class=\"bars\" data-by=\"purpose\""),
        "{dom}"
    );
    assert!(!dom.contains("<script"), "{dom}");
    // The series the Grafana dashboard draws are on this daemon's /metrics.
    let metrics = crate::common::http_get(format!("http://{}/metrics", daemon.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        "docpipe_budget_remaining{",
        "docpipe_analytics_requests_total{",
        "docpipe_staleness_seconds{",
        "docpipe_rule_firings_total{",
        "docpipe_job_outcomes_total{",
    ] {
        assert!(metrics.contains(series), "no {series} in {metrics}");
    }

    // Screenshots at a laptop's and a phone's size: not blank (many colours, ink on most rows).
    for (w, h) in [(1280, 800), (390, 844)] {
        let png = dir.path().join(format!("status-{w}x{h}.png"));
        open(
            profile.path(),
            &[
                format!("--screenshot={}", png.display()),
                format!("--window-size={w},{h}"),
            ],
            &page,
        );
        let (size, colours, inked_rows) = picture(&png);
        assert_eq!(size, (w, h));
        assert!(colours >= 8, "{w}x{h}: {colours} colours");
        assert!(
            inked_rows * 3 >= h as usize,
            "{w}x{h}: only {inked_rows} rows of {h} have anything on them"
        );
    }
}

/// A PNG's size, how many colours it has, and how many of its rows are not one colour.
fn picture(path: &Path) -> ((u32, u32), usize, usize) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let line = info.line_size;
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0;
    for y in 0..info.height as usize {
        let row = &buf[y * line..y * line + info.width as usize * px];
        let first = &row[..px];
        if row.chunks(px).any(|p| p != first) {
            inked += 1;
        }
        for p in row.chunks(px).step_by(7) {
            colours.insert(p.to_vec());
        }
    }
    ((info.width, info.height), colours.len(), inked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_address_other_than_loopback_the_page_needs_its_token() {
    let live = Live::start(small()).await;
    let dir = tempfile::tempdir().unwrap();
    // Without a token: refused at start, exit 2, one line.
    let cfg = config(&live, dir.path(), "0.0.0.0:0", "");
    let out = docpipe_command(&cfg, &["run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: daemon.listen 0.0.0.0:0 is not a loopback address: set [daemon] status_token_env to the variable of a token (the status page shows project ids and readers' text), or listen on 127.0.0.1\n"
    );
    assert!(!dir.path().join("out/state.sqlite").exists());
    // A token named but not set is refused too.
    let cfg = config(
        &live,
        dir.path(),
        "0.0.0.0:0",
        "status_token_env = \"DOCPIPE_IT_STATUS_TOKEN\"",
    );
    let out = docpipe_command(&cfg, &["run"]).output().unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string()),
        (
            Some(2),
            "error: daemon.status_token_env: DOCPIPE_IT_STATUS_TOKEN is not set (the status page's token)\n".to_string()
        )
    );
    // With one.
    let token = "tok-3f9a1c77e2b845d0";
    let daemon = start(&cfg, &[("DOCPIPE_IT_STATUS_TOKEN", token)]);
    let base = format!("http://{}", daemon.addr);
    docpipe::tls::install();
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for path in ["/", "/status.json", "/metrics", "/trends/chart-alpha.svg"] {
        let r = plain.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let body = r.text().await.unwrap();
        assert!(
            !body.contains("alpha") && !body.contains(token),
            "{path}: {body}"
        );
    }
    let wrong = plain
        .get(format!("{base}/"))
        .bearer_auth("tok-3f9a1c77e2b845d1")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(
        plain
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "ok\n"
    );
    let page = plain
        .get(format!("{base}/"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("data-project=\"alpha\""), "{html}");
    assert!(!html.contains(token));
    // The cookie of /login: the token's digest, not the token.
    let login = plain
        .get(format!("{base}/login?token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("docpipe_status=") && !cookie.contains(token),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    let with_cookie = plain
        .get(format!("{base}/status.json"))
        .header("cookie", pair)
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status(), 200);
    let doc: serde_json::Value = with_cookie.json().await.unwrap();
    assert_eq!(doc["schema"], "docpipe-status/1");
    assert_eq!(
        plain
            .get(format!("{base}/login?token=nope"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
}

/// The series docpipe's code declares: the names in `metrics::counter!`, `gauge!` and
/// `histogram!` calls under `src/` and each crate's `crates/*/src/`.
fn declared_series() -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let crates = std::fs::read_dir(root().join("crates")).unwrap().flatten();
    let sources: Vec<_> = std::iter::once(root().join("src"))
        .chain(crates.map(|c| c.path().join("src")))
        .collect();
    for file in sources
        .iter()
        .flat_map(|src| files_below(src).into_iter().map(|f| src.join(f)))
    {
        let text = std::fs::read_to_string(file).unwrap();
        for macro_ in ["counter!(", "gauge!(", "histogram!("] {
            for (at, _) in text.match_indices(macro_) {
                let rest = text[at + macro_.len()..].trim_start();
                if let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) {
                    names.insert(name.to_string());
                }
            }
        }
    }
    names
}

/// The `docpipe_*` names in a PromQL expression.
fn series_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("docpipe_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        out.push(name);
    }
    out
}

#[test]
fn the_grafana_dashboard_queries_only_series_docpipe_exports() {
    let declared = declared_series();
    assert!(
        declared.contains("docpipe_staleness_seconds") && declared.len() >= 15,
        "{declared:?}"
    );
    let dash: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root().join("sample_data/grafana/docpipe.json")).unwrap(),
    )
    .unwrap();
    let mut queried = std::collections::BTreeSet::new();
    for panel in dash["panels"].as_array().unwrap() {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{} queries nothing", panel["title"]);
        for t in targets {
            let expr = t["expr"].as_str().unwrap();
            let names = series_in(expr);
            assert!(!names.is_empty(), "{}: {expr}", panel["title"]);
            queried.extend(names);
        }
    }
    let unknown: Vec<_> = queried.difference(&declared).collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries series docpipe does not export: {unknown:?}"
    );
    // What the issue asks the dashboard to show.
    for needed in [
        "docpipe_budget_remaining",
        "docpipe_analytics_requests_total",
        "docpipe_staleness_seconds",
        "docpipe_windows_failed_total",
        "docpipe_rule_firings_total",
        "docpipe_job_outcomes_total",
    ] {
        assert!(
            queried.contains(needed),
            "the dashboard does not show {needed}"
        );
    }
    // A name the code does not declare is caught (the check can fail).
    assert_eq!(
        series_in("rate(docpipe_nope_total[5m]) / docpipe_budget_remaining"),
        ["docpipe_nope_total", "docpipe_budget_remaining"]
    );
    assert!(!declared.contains("docpipe_nope_total"));
}

#[test]
fn the_prometheus_alerts_watch_the_daemons_alert_conditions_over_declared_series() {
    let declared = declared_series();
    let file = root().join("sample_data/prometheus/alerts.yml");
    // Read by a real YAML reader: each rule's name and expression.
    let rules = run_python(
        "import json, sys, yaml\n\
         doc = yaml.safe_load(open(sys.argv[1]))\n\
         print(json.dumps([[r['alert'], r['expr']] for g in doc['groups'] for r in g['rules']]))",
        &[file.as_os_str()],
    );
    let rules: Vec<(String, String)> = serde_json::from_str(rules.trim()).unwrap();
    let names: Vec<&str> = rules.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "DocpipeKeyRefused",
            "DocpipeProjectUnknown",
            "DocpipeStale",
            "DocpipeWindowFailing",
            "DocpipeRuleFailing",
            "DocpipeWarehouseFailing"
        ]
    );
    let mut queried = std::collections::BTreeSet::new();
    for (name, expr) in &rules {
        let series = series_in(expr);
        assert!(!series.is_empty(), "{name}: {expr}");
        queried.extend(series);
    }
    let unknown: Vec<_> = queried.difference(&declared).collect();
    assert!(
        unknown.is_empty(),
        "the alerts watch series docpipe does not export: {unknown:?}"
    );
    // The webhook's conditions, one series each.
    for needed in [
        "docpipe_key_refused",
        "docpipe_project_unknown",
        "docpipe_staleness_seconds",
        "docpipe_freshness_target_seconds",
        "docpipe_windows_failing",
        "docpipe_rule_failing",
        "docpipe_warehouse_failing",
    ] {
        assert!(queried.contains(needed), "no alert watches {needed}");
    }
}

/// Whether the picture at `path` has a pixel of colour `rgb` (within 12 of each channel).
fn has_colour(path: &Path, rgb: (u8, u8, u8)) -> bool {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let near = |a: u8, b: u8| a.abs_diff(b) <= 12;
    buf[..info.buffer_size()]
        .chunks(px)
        .any(|p| near(p[0], rgb.0) && near(p[1], rgb.1) && near(p[2], rgb.2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_opens_with_its_health_line_and_every_open_problem_in_the_first_screen() {
    let live = Live::start_at(small(), chrono::Utc::now()).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&live, dir.path(), "127.0.0.1:0", "");
    // A rule whose prompt holds readers' words (paths): held for a person. A project the
    // service does not know.
    std::fs::write(
        dir.path().join("jobs/paths.toml"),
        "enabled = true\nname = \"paths\"\nproject = \"alpha\"\njob = \"job_ok\"\n\
         when = \"SELECT path FROM pages ORDER BY rank_7d LIMIT 2\"\n\
         prompt = \"{% for row in rows %}- {{ row.path }}\\n{% endfor %}\"\n",
    )
    .unwrap();
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text +=
        "\n[[projects]]\nid = \"ghost\"\norganization = \"org-a\"\ndatasets = [\"page_views\"]\n";
    std::fs::write(&cfg, text).unwrap();
    let daemon = start(&cfg, &[]);
    let status = format!("http://{}/status.json", daemon.addr);
    let started = Instant::now();
    loop {
        live.clock.advance(Duration::from_secs(600));
        let doc = get_json(&status).await;
        let ghost = doc["projects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == "ghost" && p["unknown"].is_object());
        if ghost
            && doc["rules"]["pending"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
        {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{doc:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let profile = tempfile::tempdir().unwrap();
    let page = format!("http://{}/", daemon.addr);
    let dom = String::from_utf8(open(profile.path(), &["--dump-dom".into()], &page)).unwrap();
    // The health line first, then what needs a person, then the rest.
    let order: Vec<usize> = [
        "<section id=\"health\"",
        "<section id=\"needs\"",
        "<section id=\"budget\"",
    ]
    .iter()
    .map(|s| dom.find(s).unwrap_or_else(|| panic!("no {s} in {dom}")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    let health = dom.split("<section id=\"health\"").nth(1).unwrap();
    let health = health.split("</section>").next().unwrap();
    assert!(health.starts_with(" class=\"health bad\"><p>"), "{health}");
    for part in [
        "<a class=\"ok\" href=\"#projects\">3 of 3 datasets fresh</a>",
        "<a class=\"bad\" href=\"#needs\">1 project unknown to the service</a>",
        "<a class=\"ok\" href=\"#needs\">0 failing windows</a>",
        "<a class=\"warn\" href=\"#rules\">1 firing waits for review</a>",
    ] {
        assert!(health.contains(part), "{part} not in {health}");
    }
    let needs = dom.split("<section id=\"needs\"").nth(1).unwrap();
    let needs = needs.split("</section>").next().unwrap();
    assert!(
        needs.contains("<li class=\"bad\">project ghost: unknown to the service (404: "),
        "{needs}"
    );
    assert!(
        needs.contains("<li class=\"warn\">firing 1 of rule paths (alpha) waits for review: 2 rows; `docpipe rules pending`, then approve or reject it (expires "),
        "{needs}"
    );
    // In Chromium at 1280x800, the first screen holds them: the problems' red and the review's
    // amber are drawn in it. The screenshots stay in the test's output folder.
    let shots = root().join("target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("status-health-1280x800.png");
    open(
        profile.path(),
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1280,800".to_string(),
        ],
        &page,
    );
    println!("screenshot: {}", png.display());
    assert!(
        has_colour(&png, (0xcf, 0x22, 0x2e)),
        "no red in the first screen"
    );
    assert!(
        has_colour(&png, (0x9a, 0x67, 0x00)),
        "no amber in the first screen"
    );
}
