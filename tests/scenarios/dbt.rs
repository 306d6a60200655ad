//! The dbt package in `dbt/`: docpipe's trend and gap tables as models, built as
//! docs/output.md says on the demo's lake with DuckDB and on PostgreSQL from the warehouse
//! docpipe loads; each model equals docpipe's own table row for row (the same keys, counts
//! exact, shares within 1e-9: `dbt_compare.py`).

use crate::common::*;
use crate::pg_server::{PASSWORD, Postgres};
use std::ffi::OsStr;
use std::path::Path;

/// Each model and its key.
const MODELS: [&str; 7] = [
    "daily:project,date",
    "weekly:project,week_start",
    "pages:project,path",
    "search_terms:project,search_query",
    "unanswered_questions:project,question",
    "feedback_pages:project,path",
    "callers_weekly:project,week_start",
];

/// The package copied into `to` (a user's checkout would do; the tests' copy keeps dbt's
/// `target/` and database out of the repository).
fn copy_package(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            copy_package(&path, &to.join(name));
        } else {
            std::fs::copy(&path, to.join(name)).unwrap();
        }
    }
}

/// `dbt <args>` in `package`, with `env`; its standard output (the test fails when dbt does).
fn dbt(package: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> String {
    let mut cmd = std::process::Command::new(python().with_file_name("dbt"));
    cmd.args(args)
        .args(["--profiles-dir", "."])
        .current_dir(package)
        .env("DBT_SEND_ANONYMOUS_USAGE_STATS", "false");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = cmd.output().expect("dbt runs (bash .ci/run installs it)");
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(run.status.success(), "dbt {args:?}: {stdout}");
    stdout
}

/// What `dbt_compare.py` says of each model at `models` (a DuckDB file, or a URL and a
/// schema).
fn compared(models: &[&OsStr], lake: &Path) -> Vec<String> {
    let mut args: Vec<&OsStr> = models.to_vec();
    args.push(lake.as_os_str());
    args.extend(MODELS.iter().map(OsStr::new));
    run_python(include_str!("dbt_compare.py"), &args)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_dbt_package_builds_docpipes_trends_on_the_demos_lake_and_on_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .current_dir(dir.path())
        .args(["demo", "--output"])
        .arg(&lake)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let package = dir.path().join("dbt");
    copy_package(&Path::new(env!("CARGO_MANIFEST_DIR")).join("dbt"), &package);

    // DuckDB, as the docs say: DOCPIPE_LAKE=<the lake> dbt build --profiles-dir <the package>.
    let on_lake = [("DOCPIPE_LAKE", lake.as_os_str())];
    let built = dbt(&package, &["build"], &on_lake);
    assert!(built.contains("PASS=7 WARN=0 ERROR=0 SKIP=0"), "{built}");
    let fresh = dbt(&package, &["source", "freshness"], &on_lake);
    for t in ["site_totals", "page_views"] {
        assert!(
            fresh.contains(&format!("PASS freshness of docpipe.{t}")),
            "{fresh}"
        );
    }
    assert!(
        !fresh.contains("WARN") && !fresh.contains("ERROR"),
        "{fresh}"
    );
    let want: Vec<String> = [
        "daily",
        "weekly",
        "pages",
        "search_terms",
        "unanswered_questions",
        "feedback_pages",
        "callers_weekly",
    ]
    .iter()
    .map(|t| {
        let rows = parquet_rows(&lake.join(format!("trends/{t}.parquet"))).len();
        assert!(rows > 0, "{t}");
        format!("{t} {rows} equal")
    })
    .collect();
    let duckdb = package.join("docpipe_trends.duckdb");
    assert_eq!(compared(&[duckdb.as_os_str()], &lake), want);

    // PostgreSQL: the lake loaded by docpipe's warehouse, the same models built there.
    let server = Postgres::start();
    let cfg = dir.path().join("warehouse.toml");
    std::fs::write(
        &cfg,
        format!(
            "[service]\nbase_url = \"http://127.0.0.1:9\"\n[export]\noutput_dir = {:?}\n\
             [[organizations]]\nid = \"acme\"\nadmin_key_env = \"DOCPIPE_IT_ADMIN_A\"\n\
             [[organizations]]\nid = \"globex\"\nadmin_key_env = \"DOCPIPE_IT_ADMIN_B\"\n\
             [[projects]]\nid = \"acme-docs\"\norganization = \"acme\"\n\
             [[projects]]\nid = \"acme-api\"\norganization = \"acme\"\n\
             [[projects]]\nid = \"globex-help\"\norganization = \"globex\"\n\
             [warehouse]\npostgres_url_env = \"DOCPIPE_IT_WAREHOUSE\"\n",
            lake.display().to_string()
        ),
    )
    .unwrap();
    let url = format!(
        "postgres://docpipe:{PASSWORD}@127.0.0.1:{}/postgres",
        server.port
    );
    let synced = docpipe_command(&cfg, &["warehouse", "sync"])
        .env("DOCPIPE_IT_WAREHOUSE", &url)
        .output()
        .unwrap();
    assert!(
        synced.status.success(),
        "{}",
        String::from_utf8_lossy(&synced.stderr)
    );
    let port = server.port.to_string();
    let on_pg = [
        ("PGHOST", OsStr::new("127.0.0.1")),
        ("PGPORT", OsStr::new(&port)),
        ("PGUSER", OsStr::new("docpipe")),
        ("PGPASSWORD", OsStr::new(PASSWORD)),
        ("PGDATABASE", OsStr::new("postgres")),
        ("DOCPIPE_DBT_SCHEMA", OsStr::new("docpipe_trends")),
    ];
    let built = dbt(&package, &["build", "--target", "postgres"], &on_pg);
    assert!(built.contains("PASS=7 WARN=0 ERROR=0 SKIP=0"), "{built}");
    let fresh = dbt(
        &package,
        &["source", "freshness", "--target", "postgres"],
        &on_pg,
    );
    assert!(
        !fresh.contains("WARN") && !fresh.contains("ERROR"),
        "{fresh}"
    );
    let at = [OsStr::new(&url), OsStr::new("docpipe_trends")];
    assert_eq!(compared(&at, &lake), want);
}
