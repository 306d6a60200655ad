//! Output on object storage, against a real S3-compatible server (moto's, from the test
//! tools' virtual environment, started here on a free loopback port).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

/// A moto S3 server on `127.0.0.1` that checks credentials, stopped when dropped.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// The access key id of its one user.
    pub access: String,
    /// Its secret.
    pub secret: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts the server (its program is beside the tests' Python) and waits until it answers.
    pub fn start() -> Self {
        let python = python();
        let server = python.with_file_name("moto_server");
        assert!(
            server.exists(),
            "{} not found: run .ci/run, which installs the test tools (tests/requirements.txt)",
            server.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Credentials are checked after the first 3 requests: those make the user and its key.
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let endpoint = format!("http://127.0.0.1:{port}");
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "moto_server did not start on port {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let mut moto = Self {
            child,
            endpoint,
            access: "unset".into(),
            secret: "unset".into(),
        };
        let key = moto.python(
            r#"
import boto3, json, os
iam = boto3.client('iam', endpoint_url=os.environ['AWS_ENDPOINT_URL'])
iam.create_user(UserName='docpipe')
iam.put_user_policy(UserName='docpipe', PolicyName='all', PolicyDocument=json.dumps(
    {'Version': '2012-10-17', 'Statement': [{'Effect': 'Allow', 'Action': '*', 'Resource': '*'}]}))
k = iam.create_access_key(UserName='docpipe')['AccessKey']
print(k['AccessKeyId'], k['SecretAccessKey'])
"#,
        );
        let (access, secret) = key.trim().split_once(' ').unwrap();
        moto.access = access.to_string();
        moto.secret = secret.to_string();
        moto
    }

    /// The environment a client of this server is given.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", self.access.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret.clone()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
        ]
    }

    /// Runs a Python script with boto3 and pyarrow pointed at the server; its stdout.
    pub fn python(&self, script: &str) -> String {
        let out = Command::new(python())
            .arg("-c")
            .arg(script)
            .envs(self.env())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Creates a bucket.
    pub fn bucket(&self, name: &str) {
        self.python(&format!(
            "import boto3, os\nboto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL']).create_bucket(Bucket={name:?})"
        ));
    }

    /// Downloads every object under `s3://bucket/prefix/` into `dir` (keys below the prefix).
    pub fn download(&self, bucket: &str, prefix: &str, dir: &Path) -> Vec<String> {
        let listed = self.python(&format!(
            r#"
import boto3, os
s3 = boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL'])
root = {root:?}
keys = []
for page in s3.get_paginator('list_objects_v2').paginate(Bucket={bucket:?}, Prefix={prefix:?} + '/'):
    for o in page.get('Contents', []):
        rel = o['Key'][len({prefix:?}) + 1:]
        keys.append(rel)
        dest = os.path.join(root, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        s3.download_file({bucket:?}, o['Key'], dest)
print('\n'.join(sorted(keys)))
"#,
            root = dir.display().to_string()
        ));
        listed.lines().map(str::to_string).collect()
    }
}

/// Runs the binary with the test keys and `env`.
fn docpipe_env(cfg: &Path, args: &[&str], env: &[(&str, String)], crash: Option<u64>) -> Output {
    let mut cmd = docpipe_command(cfg, args);
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    if let Some(n) = crash {
        cmd.env("DOCPIPE_CRASH_AT_UPLOAD", n.to_string());
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A config of the test projects writing to `output` with the state in `state`.
fn s3_config(dir: &Path, live: &Live, output: &str, state: &Path, datasets: &str) -> PathBuf {
    let cfg = dir.join("docpipe.toml");
    let body = config_of(
        &live.server.base_url(),
        Path::new(output),
        &format!(
            "state_dir = {:?}\ntrends_after_export = true",
            state.display().to_string()
        ),
        datasets,
    );
    std::fs::write(&cfg, body).unwrap();
    cfg
}

const RANGE: [&str; 5] = ["backfill", "--from", "2026-03-06", "--to", "2026-03-10"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_to_a_bucket_is_read_back_by_pyarrow_as_the_truth_and_trends_and_rules_run_there()
{
    let live = Live::start_frozen(small()).await;
    let moto = Moto::start();
    moto.bucket("docs");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let cfg = s3_config(dir.path(), &live, "s3://docs/exports", &state, "");
    let env = moto.env();
    let run = docpipe_env(&cfg, &RANGE, &env, None);
    assert!(run.status.success(), "{}", text(&run));
    let out = text(&run);
    assert!(out.contains("output: s3://docs/exports"), "{out}");
    assert!(!out.contains(&moto.secret), "{out}");
    // pyarrow's S3 filesystem reads the page views from the bucket: each day's sums are the
    // emulator's truth.
    let sums = moto.python(
        r#"
import os, pyarrow.dataset as ds, pyarrow.fs as pafs, pyarrow.compute as pc
fs = pafs.S3FileSystem(endpoint_override=os.environ['AWS_ENDPOINT_URL'], scheme='http', region='us-east-1')
t = ds.dataset('docs/exports/page_views', filesystem=fs, format='parquet', partitioning='hive').to_table()
g = t.group_by(['project', 'date']).aggregate([('human', 'sum'), ('ai', 'sum'), ('path', 'count')])
for r in sorted(g.to_pylist(), key=lambda r: (r['project'], str(r['date']))):
    print(r['project'], r['date'], r['human_sum'], r['ai_sum'], r['path_count'])
"#,
    );
    let mut want = Vec::new();
    for p in ["alpha", "beta", "gamma"] {
        let mut d = day("2026-03-06");
        while d <= day("2026-03-10") {
            let rows = crate::truth::true_views(live.emu(), p, d);
            let (h, a): (i64, i64) = rows.iter().fold((0, 0), |(h, a), r| (h + r.1, a + r.2));
            want.push(format!("{p} {d} {h} {a} {}", rows.len()));
            d = d.succ_opt().unwrap();
        }
    }
    assert_eq!(sums.lines().collect::<Vec<_>>(), want);
    // `trends` writes the trend tables and sends them.
    let trends = docpipe_env(&cfg, &["trends"], &env, None);
    assert!(trends.status.success(), "{}", text(&trends));
    // The bucket holds what the working copy holds, byte for byte: tables and trends.
    let fetched = dir.path().join("fetched");
    let keys = moto.download("docs", "exports", &fetched);
    assert!(
        keys.iter().any(|k| k.starts_with("trends/daily.parquet")),
        "{keys:?}"
    );
    assert!(keys.iter().any(|k| k.starts_with("searches/")), "{keys:?}");
    assert!(
        !keys
            .iter()
            .any(|k| k.contains("state.sqlite") || k.contains(".tmp-") || k.contains(".walks")),
        "{keys:?}"
    );
    for k in &keys {
        assert_eq!(
            std::fs::read(fetched.join(k)).unwrap(),
            std::fs::read(state.join(k)).unwrap(),
            "{k}"
        );
    }
    // A new machine: an empty state folder, `trends` and `rules check` read the bucket.
    let fresh = dir.path().join("fresh");
    let cfg2 = {
        let d = dir.path().join("second");
        std::fs::create_dir_all(&d).unwrap();
        s3_config(&d, &live, "s3://docs/exports", &fresh, "")
    };
    let trends = docpipe_env(&cfg2, &["trends"], &env, None);
    assert!(trends.status.success(), "{}", text(&trends));
    assert!(text(&trends).contains("alpha"), "{}", text(&trends));
    let pulled = files_below(&fresh.join("page_views")).len();
    assert_eq!(pulled, 15, "5 days x 3 projects fetched");
    let rules = dir.path().join("second").join("jobs");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("top.toml"),
        "enabled = true\nname = \"top\"\nproject = \"alpha\"\njob = \"job_ok\"\nwait = false\n\
         when = \"SELECT date, total FROM daily WHERE project = 'alpha' ORDER BY date DESC LIMIT 1\"\n\
         prompt = \"{{ rows[0].total }}\"\n",
    )
    .unwrap();
    let check = docpipe_env(&cfg2, &["rules", "check"], &env, None);
    assert!(check.status.success(), "{}", text(&check));
    assert!(
        text(&check).contains("1 would send now"),
        "{}",
        text(&check)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_an_upload_a_rerun_leaves_the_bucket_equal_to_an_uninterrupted_run() {
    let live = Live::start_frozen(small()).await;
    let moto = Moto::start();
    moto.bucket("docs");
    let env = moto.env();
    let dir = tempfile::tempdir().unwrap();
    let datasets = r#"datasets = ["page_views", "searches"]"#;
    // The reference: a local export of the same range.
    let ref_dir = dir.path().join("ref");
    std::fs::create_dir_all(&ref_dir).unwrap();
    let ref_cfg = ref_dir.join("docpipe.toml");
    std::fs::write(
        &ref_cfg,
        config_of(
            &live.server.base_url(),
            &ref_dir.join("out"),
            "trends_after_export = false",
            datasets,
        ),
    )
    .unwrap();
    let run = docpipe_env(&ref_cfg, &RANGE, &[], None);
    assert!(run.status.success(), "{}", text(&run));
    let state = dir.path().join("state");
    let cfg = dir.path().join("docpipe.toml");
    std::fs::write(
        &cfg,
        config_of(
            &live.server.base_url(),
            Path::new("s3://docs/crashy"),
            &format!(
                "state_dir = {:?}\ntrends_after_export = false",
                state.display().to_string()
            ),
            datasets,
        ),
    )
    .unwrap();
    // Killed while the 5th file is sent (others in flight), then while the 3rd is.
    for n in [5, 3] {
        let killed = docpipe_env(&cfg, &RANGE, &env, Some(n));
        assert!(!killed.status.success());
        assert!(
            text(&killed).contains(&format!("upload {n}:")),
            "{}",
            text(&killed)
        );
    }
    let rerun = docpipe_env(&cfg, &RANGE, &env, None);
    assert!(rerun.status.success(), "{}", text(&rerun));
    let fetched = dir.path().join("fetched");
    let keys = moto.download("docs", "crashy", &fetched);
    // Two tables of page views and two of searches a day, a day_status a project, and the
    // lake's three files describing it.
    assert_eq!(keys.len(), 2 * 5 * 3 + 5 * 3 + 5 * 3 + 3 + 3, "{keys:?}");
    assert_eq!(dataset(&fetched), dataset(&ref_dir.join("out")));
    // Nothing left to send.
    let again = docpipe_env(&cfg, &RANGE, &env, None);
    assert!(again.status.success(), "{}", text(&again));
    let moved = moto.download("docs", "crashy", &dir.path().join("again"));
    assert_eq!(moved, keys);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_a_missing_bucket_and_an_unreachable_endpoint_are_one_line_and_exit_2() {
    let live = Live::start_frozen(small()).await;
    let moto = Moto::start();
    moto.bucket("docs");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let closed = ClosedPort::new();
    type Env = Vec<(&'static str, String)>;
    let cases: Vec<(&str, Env, &str)> = vec![
        (
            "s3://docs/x",
            moto.env()
                .into_iter()
                .map(|(k, v)| match k {
                    "AWS_SECRET_ACCESS_KEY" => (k, "wrong-secret-value-0002".to_string()),
                    "AWS_ACCESS_KEY_ID" => (k, "AKIWRONGKEY0002".to_string()),
                    _ => (k, v),
                })
                .collect(),
            "credentials were refused",
        ),
        (
            "s3://no-such-bucket/x",
            moto.env(),
            "the bucket does not exist",
        ),
        (
            "s3://docs/x",
            moto.env()
                .into_iter()
                .map(|(k, v)| match k {
                    "AWS_ENDPOINT_URL" => (k, format!("http://{}", closed.addr)),
                    _ => (k, v),
                })
                .collect(),
            "the endpoint cannot be reached",
        ),
    ];
    for (output, env, want) in cases {
        let cfg = s3_config(dir.path(), &live, output, &state, "");
        let run = docpipe_env(&cfg, &RANGE, &env, None);
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        assert_eq!(run.status.code(), Some(2), "{output}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains(want), "{output}: {err}");
        assert!(lines[0].contains(output), "{err}");
        for (_, v) in &env {
            if v.contains("secret") || *v == moto.secret {
                assert!(!err.contains(v.as_str()), "{err}");
            }
        }
        assert!(
            !state.exists(),
            "nothing written: {:?}",
            files_below(&state)
        );
    }
    // A URL without a state folder is a config error.
    let cfg = dir.path().join("nostate.toml");
    std::fs::write(
        &cfg,
        config_of(&live.server.base_url(), Path::new("s3://docs/x"), "", ""),
    )
    .unwrap();
    let run = docpipe_env(&cfg, &RANGE, &moto.env(), None);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&run.stderr)
            .contains("export.state_dir is required when output_dir is s3://docs/x"),
        "{}",
        text(&run)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_exports_aggregates_and_fires_its_rules_into_a_bucket() {
    let moto = Moto::start();
    moto.bucket("demo");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let run = Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .current_dir(dir.path())
        .args(["--output", "s3://demo/run", "--state-dir"])
        .arg(&state)
        .arg("demo")
        .env("RUST_LOG", "warn")
        .envs(moto.env())
        .output()
        .unwrap();
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    assert!(out.contains("output: s3://demo/run"), "{out}");
    assert!(
        out.contains("read_parquet('s3://demo/run/page_views/**/*.parquet'"),
        "{out}"
    );
    assert!(!out.contains(&moto.secret), "{out}");
    // The bucket holds the working copy byte for byte: every table, the trends, the firings.
    let fetched = dir.path().join("fetched");
    let keys = moto.download("demo", "run", &fetched);
    for table in [
        "page_views/",
        "searches/",
        "assistant_turns/",
        "trends/daily.parquet",
        "trends/gaps-acme-docs.png",
        "agent_runs/",
    ] {
        assert!(
            keys.iter().any(|k| k.starts_with(table)),
            "{table}: {keys:?}"
        );
    }
    let mut local: Vec<String> = files_below(&state)
        .into_iter()
        .map(|f| f.to_string_lossy().into_owned())
        .filter(|f| f.contains('/') && !f.starts_with('.') && !f.contains("/."))
        .collect();
    local.sort();
    assert_eq!(keys, local);
    for k in &keys {
        assert_eq!(
            std::fs::read(fetched.join(k)).unwrap(),
            std::fs::read(state.join(k)).unwrap(),
            "{k}"
        );
    }
    // The demo's data holds every shape the OpenAPI file allows: each feedback source, each of
    // their columns filled at least once, code feedback counted by page.
    let rows = |table: &str| -> Vec<serde_json::Map<String, serde_json::Value>> {
        keys.iter()
            .filter(|k| k.starts_with(&format!("{table}/")) && k.ends_with(".parquet"))
            .flat_map(|k| crate::truth::parquet_json(&fetched.join(k)))
            .collect()
    };
    let feedback = [rows("feedback"), rows("feedback_undated")].concat();
    let mut sources: Vec<&str> = feedback
        .iter()
        .map(|r| r["source"].as_str().unwrap())
        .collect();
    sources.sort();
    sources.dedup();
    assert_eq!(
        sources,
        ["agent", "code_snippet", "contextual", "thumbs_only"]
    );
    for column in [
        "comment",
        "created_at",
        "helpful",
        "contact",
        "code",
        "filename",
        "lang",
    ] {
        assert!(
            feedback.iter().any(|r| !r[column].is_null()),
            "feedback.{column} is never filled"
        );
    }
    assert!(
        rows("feedback_by_page")
            .iter()
            .any(|r| r["code"].as_i64().unwrap() > 0),
        "no code feedback by page"
    );
    // The summary compares complete days: each project's 7 days end on the last day the lake's
    // day_status says is complete, and its views are the lake's sum over those 7 days.
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains(" (to ") && l.contains(" views ("))
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    for line in lines {
        let (project, rest) = line.trim().split_once(" (to ").unwrap();
        let (last, rest) = rest.split_once("): ").unwrap();
        let views: i64 = rest.split_once(" views").unwrap().0.parse().unwrap();
        let lake = run_python(
            "import duckdb, sys\n\
             o, p, d = sys.argv[1:4]\n\
             h = \"hive_partitioning = true, hive_types = {'project': VARCHAR, 'date': DATE}\"\n\
             print(duckdb.sql(f\"SELECT sum(total) FROM read_parquet('{o}/site_totals/**/*.parquet', {h}) WHERE project = '{p}' AND date BETWEEN DATE '{d}' - 6 AND DATE '{d}'\").fetchall()[0][0])\n\
             print(duckdb.sql(f\"SELECT string_agg(DISTINCT status, ',' ORDER BY status) FROM read_parquet('{o}/day_status/**/*.parquet', hive_partitioning = true) WHERE project = '{p}' AND dataset = 'page_views' AND date > DATE '{d}'\").fetchall()[0][0])\n\
             print(duckdb.sql(f\"SELECT status FROM read_parquet('{o}/day_status/**/*.parquet', hive_partitioning = true) WHERE project = '{p}' AND dataset = 'page_views' AND date = DATE '{d}'\").fetchall()[0][0])",
            &[fetched.as_os_str(), project.as_ref(), last.as_ref()],
        );
        let lake: Vec<&str> = lake.lines().collect();
        assert_eq!(lake[0].parse::<i64>().unwrap(), views, "{line}");
        assert_eq!(lake[1], "partial", "{line}: the days after it");
        assert_ne!(lake[2], "partial", "{line}: its last day");
    }
    // The lake's description in the bucket reads the bucket.
    let views = std::fs::read_to_string(fetched.join("_docpipe/duckdb.sql")).unwrap();
    assert!(
        views.contains("CREATE OR REPLACE VIEW \"page_views\" AS SELECT * FROM read_parquet('s3://demo/run/page_views/**/*.parquet', hive_partitioning = true, hive_types = {'project': VARCHAR, 'date': DATE});\n"),
        "{views}"
    );
    assert!(
        views.contains("CREATE OR REPLACE VIEW \"daily\" AS SELECT * FROM read_parquet('s3://demo/run/trends/daily.parquet');\n"),
        "{views}"
    );
    // Counts are whole wherever a person reads them: the summary, the prompts sent, the
    // status page's docs gaps.
    let mut read = vec![out.clone()];
    read.extend(rows("agent_runs").iter().map(|r| r["prompt"].to_string()));
    for top in docpipe::trends::gaps::top_rows(&fetched, 5)
        .into_values()
        .flatten()
    {
        read.extend(top.rows.iter().map(|r| r.join(" ")));
    }
    assert!(read.len() > 20, "{read:?}");
    for text in &read {
        assert_eq!(fractional_counts(text), Vec::<String>::new(), "{text}");
    }
}

/// The numbers with a fraction in `text` that count something (`207.6 searches`), each with its
/// noun; shares (`40.2%`), rates and durations (`3.4 s`) are not counts.
fn fractional_counts(text: &str) -> Vec<String> {
    const NOUNS: [&str; 12] = [
        "views",
        "searches",
        "clicks",
        "turns",
        "requests",
        "rows",
        "visitors",
        "asks",
        "votes",
        "entries",
        "without",
        "unanswered",
    ];
    let mut words: Vec<&str> = text.split_whitespace().collect();
    words.push("");
    words
        .windows(3)
        .filter(|w| w[2] != "per")
        .filter(|w| {
            let n = w[0].trim_start_matches(['(', '"', ':']);
            n.split_once('.').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.chars().all(|c| c.is_ascii_digit())
                    && b.chars().all(|c| c.is_ascii_digit())
            }) && NOUNS.contains(&w[1].trim_end_matches([',', ')', ';', '.']))
        })
        .map(|w| w[..2].join(" "))
        .collect()
}

#[test]
fn a_fractional_count_is_found_and_shares_and_durations_are_not() {
    assert_eq!(
        fractional_counts(
            "- term: 96 searches, 207.6 without a click (40.2%); 3.4 s, 3.42 views per visitor, 2.5 views."
        ),
        ["207.6 without", "2.5 views."]
    );
}

/// Every `agent_daily` row of a lake (as `stream_reads` gives them), and the number of rows of
/// its `events` table.
fn stream_tables(out: &Path) -> (Reads, u64) {
    let (_, events) = docpipe::write::parquet::count_rows(&out.join("events")).unwrap();
    (stream_reads(out), events as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_of_stream_in_a_bucket_killed_at_ten_moments_equals_the_emulators_truth() {
    use docpipe::emulator::stream::{StreamData, day as stream_day};
    let today = chrono::Utc::now().date_naive();
    let mut data = small();
    data.start_date = today - chrono::Duration::days(30);
    // The month's page views in one run, without waiting for the next hour's budget.
    data.limits.analytics_per_hour = 100_000;
    data.stream = Some(StreamData {
        projects: vec!["beta".into(), "gamma".into()],
        agent_fraction: 1.0,
        bad_lines: false,
    });
    let live = Live::start_at(data, chrono::Utc::now()).await;
    let moto = Moto::start();
    moto.bucket("events");
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("objects");
    // The month's objects, as the service writes them; the truth counted as they were made.
    let (mut reads, mut events, mut repeated) = (std::collections::BTreeMap::new(), 0, 0);
    for d in data_days(today) {
        let (made, truth) = stream_day(live.emu(), d);
        for o in made {
            let path = objects.join(&o.name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &o.bytes).unwrap();
        }
        for (k, v) in truth.reads {
            *reads.entry(k).or_insert(0u64) += v;
        }
        events += truth.events;
        repeated += truth.repeated;
    }
    let sent = moto.python(&format!(
        r#"
import boto3, os
s3 = boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL'])
root = {root:?}
n = 0
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        s3.upload_file(p, 'events', 'stream/' + os.path.relpath(p, root))
        n += 1
print(n)
"#,
        root = objects.display().to_string()
    ));
    assert_eq!(sent.trim(), "720");
    let cfg = dir.path().join("docpipe.toml");
    let out = dir.path().join("out");
    let body = format!(
        "{}\n[[streams]]\nurl = \"s3://events\"\nprefix = \"stream\"\nsubdomains = {{ \"docs-beta\" = \"beta\", \"docs-gamma\" = \"gamma\" }}\n",
        config(
            &live.server.base_url(),
            &out,
            "timezone = \"UTC\"\ntrends_after_export = false"
        )
    );
    std::fs::write(&cfg, body).unwrap();
    let mut env = moto.env();
    // A flush every 1,500 events: the kills fall between flushes, within them, and after the
    // objects are marked read.
    env.push(("DOCPIPE_STREAM_FLUSH", "1500".to_string()));
    let mut moments = std::collections::BTreeSet::new();
    // Whether the run killed at crash point `n` was killed after its objects were marked read.
    let kill = |n: u32| {
        let mut cmd = docpipe_command(&cfg, &["export"]);
        cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        cmd.env("DOCPIPE_CRASH_AT_STREAM", n.to_string());
        let killed = cmd.output().unwrap();
        assert!(!killed.status.success(), "{}", text(&killed));
        let said = text(&killed);
        assert!(
            said.contains(&format!("crash point {n}: a stream's")),
            "{said}"
        );
        said.contains("objects marked read")
    };
    for n in [2, 7, 3, 11, 5, 16, 1, 9, 23, 4] {
        moments.insert(kill(n));
    }
    // Killed after the marking too: where the crash points fall depends on how many days a
    // flush touches, which changes with the date; the points from the first on find it.
    let mut n = 1;
    while !moments.contains(&true) && n <= 12 {
        moments.insert(kill(n));
        n += 1;
    }
    // Killed both before the objects were marked read and after.
    assert_eq!(moments.len(), 2);
    let last = docpipe_env(&cfg, &["export"], &env, None);
    assert!(last.status.success(), "{}", text(&last));
    assert_eq!(stream_tables(&out), (reads, events));
    // Every object read once: nothing left, nothing added.
    let again = docpipe_env(&cfg, &["export"], &env, None);
    let said = text(&again);
    assert!(
        said.contains(
            "stream s3://events/stream: 0 objects, 0 events new, 0 read again, 0 days written"
        ),
        "{said}"
    );
    assert!(repeated > 0);
}

/// The days the month's stream covers: from the data's start to yesterday.
fn data_days(today: chrono::NaiveDate) -> Vec<chrono::NaiveDate> {
    (today - chrono::Duration::days(30))
        .iter_days()
        .take_while(|d| *d < today)
        .collect()
}
