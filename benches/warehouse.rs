//! Warehouse load benchmark: the export bench's page views (14,000 paths × 80 days, 1.12
//! million rows, one Parquet file a day as the export writes them) loaded into a PostgreSQL
//! server started here on 127.0.0.1 (Debian's programs, found as the tests find them), first by
//! docpipe's load (binary COPY, one transaction a file, over one connection and over the
//! default two side by side), then the same rows, read from the same
//! files, by multi-row INSERT (1,000 rows a statement, one transaction a file) for comparison.
//! Then an hourly run's load when one day changed: docpipe's own CPU and the server's. Run with
//! `cargo bench --bench warehouse`; the goal: 200,000 rows a second or more for COPY.

#[path = "../tests/scenarios/pg_server.rs"]
#[allow(dead_code)] // what only the tests use (psql, the state's connection)
mod pg_server;

use docpipe::api::views::Rows;
use docpipe::app::warehouse::{Warehouse, copy};
use docpipe::config::{WAREHOUSE_CONNECTIONS, WarehouseSettings};
use postgres::types::ToSql;
use std::path::{Path, PathBuf};
use std::time::Instant;

const PATHS: usize = 14_000;
const DAYS: i64 = 80;
const PROJECT: &str = "big";
/// Rows in one INSERT statement (7 parameters a row, within PostgreSQL's 65,535).
const INSERT_ROWS: usize = 1_000;
const URL_ENV: &str = "DOCPIPE_BENCH_WAREHOUSE";

/// CPU seconds (user + system) of a process, from /proc/<pid>/stat.
fn cpu_of(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    let after = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

/// The server's CPU: every process of the cluster, the postmaster's children that live and
/// (its `cutime` and `cstime`) those that ended.
fn server_cpu(postmaster: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{postmaster}/stat")).expect("/proc stat");
    let after = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let mut total = (f[13].parse::<f64>().unwrap() + f[14].parse::<f64>().unwrap()) / 100.0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{name}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split_whitespace().nth(1).unwrap().parse().unwrap();
        if name == postmaster.to_string() || ppid == postmaster {
            total += cpu_of(&name);
        }
    }
    total
}

/// The export bench's page views, written to `out` as the export writes them.
fn lake(out: &Path, today: chrono::NaiveDate) -> Vec<PathBuf> {
    let at = chrono::Utc::now();
    (0..DAYS)
        .map(|i| write_day(out, today - chrono::Duration::days(i), i, at))
        .collect()
}

fn write_day(
    out: &Path,
    day: chrono::NaiveDate,
    seed: i64,
    at: chrono::DateTime<chrono::Utc>,
) -> PathBuf {
    let mut rows = Rows::default();
    for p in 0..PATHS {
        let human = ((p as i64 * 7919 + seed * 31) % 500) + 1;
        let ai = (p as i64 * 104_729 + seed) % 90;
        rows.push(
            &format!("/docs/section-{}/page-{p}", p % 40),
            human,
            ai,
            human + ai,
        );
    }
    docpipe::dataset::page_views::write_page_views(out, PROJECT, day, &[&rows], at)
        .unwrap()
        .commit()
        .unwrap()
}

/// The same files' rows by multi-row INSERT into `schema.page_views`, one transaction a file.
fn insert_all(client: &mut postgres::Client, files: &[PathBuf], schema: &str) -> u64 {
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {schema}; CREATE TABLE {schema}.page_views (project text NOT NULL, date date NOT NULL, path text NOT NULL, human bigint NOT NULL, ai bigint NOT NULL, total bigint NOT NULL, fetched_at timestamptz NOT NULL, PRIMARY KEY (project, date, path))"
        ))
        .unwrap();
    let mut rows = 0u64;
    for file in files {
        let day = file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_start_matches("date=")
            .to_string();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(file).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let mut tx = client.transaction().unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let cells: Vec<Vec<copy::Cell>> = (0..batch.num_rows())
                .map(|i| {
                    let mut nuls = 0;
                    batch
                        .columns()
                        .iter()
                        .map(|a| copy::cell(a, i, &mut nuls))
                        .collect()
                })
                .collect();
            for chunk in cells.chunks(INSERT_ROWS) {
                let mut sql = format!(
                    "INSERT INTO {schema}.page_views (project, date, path, human, ai, total, fetched_at) VALUES "
                );
                let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
                for (r, row) in chunk.iter().enumerate() {
                    let n = r * 5;
                    if r > 0 {
                        sql.push(',');
                    }
                    sql.push_str(&format!(
                        "('{PROJECT}', '{day}', ${}, ${}, ${}, ${}, ${})",
                        n + 1,
                        n + 2,
                        n + 3,
                        n + 4,
                        n + 5
                    ));
                    params.extend(row.iter().map(|c| c as &(dyn ToSql + Sync)));
                }
                tx.execute(&sql, &params).unwrap();
                rows += chunk.len() as u64;
            }
        }
        tx.commit().unwrap();
    }
    rows
}

/// Rows of `schema.page_views`.
fn count(client: &mut postgres::Client, schema: &str) -> i64 {
    client
        .query_one(&format!("SELECT count(*) FROM {schema}.page_views"), &[])
        .unwrap()
        .get(0)
}

fn main() {
    let server = pg_server::Postgres::start();
    let url = format!(
        "postgres://docpipe:{}@127.0.0.1:{}/postgres",
        pg_server::PASSWORD,
        server.port
    );
    // SAFETY: set before any thread of this process reads the environment.
    unsafe { std::env::set_var(URL_ENV, &url) };
    let postmaster = server.pid();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let today = chrono::Utc::now().date_naive();
    let started = Instant::now();
    let files = lake(&out, today);
    println!(
        "lake: {} page-view rows in {} files written in {:.1} s",
        PATHS as i64 * DAYS,
        files.len(),
        started.elapsed().as_secs_f64()
    );
    let projects = vec![PROJECT.to_string()];
    let connect = |schema: &str, connections: usize| {
        Warehouse::connect(&WarehouseSettings {
            url_env: URL_ENV.into(),
            schema: schema.into(),
            connections,
        })
        .unwrap()
    };

    // docpipe's load: binary COPY, over one connection, then over the default two.
    for (schema, connections) in [("one", 1), ("docpipe", WAREHOUSE_CONNECTIONS)] {
        let mut warehouse = connect(schema, connections);
        let (cpu, srv, wall) = (cpu_of("self"), server_cpu(postmaster), Instant::now());
        let loaded = warehouse.sync(&out, &projects).unwrap();
        let (wall, cpu, srv) = (
            wall.elapsed().as_secs_f64(),
            cpu_of("self") - cpu,
            server_cpu(postmaster) - srv,
        );
        assert_eq!(loaded.rows, PATHS as u64 * DAYS as u64);
        println!(
            "binary COPY (docpipe's load, {connections} connection(s)): {} rows in {} files, {wall:.2} s: {:.0} rows/s (goal 200,000); docpipe CPU {cpu:.2} s ({:.2} µs a row), server CPU {srv:.2} s",
            loaded.rows,
            loaded.files,
            loaded.rows as f64 / wall,
            cpu * 1e6 / loaded.rows as f64
        );
    }
    let mut warehouse = connect("docpipe", WAREHOUSE_CONNECTIONS);

    // The same rows by multi-row INSERT.
    let mut client: postgres::Client = url
        .parse::<postgres::Config>()
        .unwrap()
        .connect(postgres::NoTls)
        .unwrap();
    let (cpu, srv, wall) = (cpu_of("self"), server_cpu(postmaster), Instant::now());
    let rows = insert_all(&mut client, &files, "by_insert");
    let (wall, cpu, srv) = (
        wall.elapsed().as_secs_f64(),
        cpu_of("self") - cpu,
        server_cpu(postmaster) - srv,
    );
    println!(
        "multi-row INSERT ({INSERT_ROWS} rows a statement): {rows} rows, {wall:.2} s: {:.0} rows/s; docpipe CPU {cpu:.2} s, server CPU {srv:.2} s",
        rows as f64 / wall
    );
    assert_eq!(
        count(&mut client, "docpipe"),
        count(&mut client, "by_insert")
    );

    // An hourly run: nothing changed, then one day (today's, fetched again) changed.
    let (cpu, srv, wall) = (cpu_of("self"), server_cpu(postmaster), Instant::now());
    let idle = warehouse.sync(&out, &projects).unwrap();
    println!(
        "hourly load, nothing changed: {} files unchanged, {:.1} ms; docpipe CPU {:.0} ms, server CPU {:.0} ms",
        idle.unchanged,
        wall.elapsed().as_secs_f64() * 1e3,
        (cpu_of("self") - cpu) * 1e3,
        (server_cpu(postmaster) - srv) * 1e3
    );
    write_day(&out, today, 1_000, chrono::Utc::now());
    let (cpu, srv, wall) = (cpu_of("self"), server_cpu(postmaster), Instant::now());
    let one = warehouse.sync(&out, &projects).unwrap();
    assert_eq!((one.files, one.rows), (1, PATHS as u64));
    println!(
        "hourly load, one day changed: {} file ({} rows) loaded, {} unchanged, {:.1} ms; docpipe CPU {:.0} ms, server CPU {:.0} ms",
        one.files,
        one.rows,
        one.unchanged,
        wall.elapsed().as_secs_f64() * 1e3,
        (cpu_of("self") - cpu) * 1e3,
        (server_cpu(postmaster) - srv) * 1e3
    );
    assert_eq!(count(&mut client, "docpipe"), PATHS as i64 * DAYS);
}
