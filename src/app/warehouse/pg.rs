//! The lake loaded into PostgreSQL for the BI tools that read a database (`[warehouse]`): one
//! table per lake table in a schema docpipe creates and owns, each Parquet file loaded in one
//! transaction (its partition's rows deleted, the file's rows sent by binary COPY, the file
//! recorded as loaded), so that a reader never sees half a day or a day twice. What is loaded is
//! recorded in the schema itself (`_docpipe_files`): a load that fails or is cut off is
//! retried by the next one, and a warehouse added to an existing lake is filled from the files
//! already there (`docpipe warehouse sync`), without a request to the service.

use super::copy;
use crate::app::lake::{Column, Table};
use crate::config::WarehouseSettings;
use chrono::{DateTime, NaiveDate, Utc};
use docpipe_catalog::tables;
use postgres::types::{ToSql, Type};
use std::path::{Path, PathBuf};

/// The version of the schema docpipe creates (its `_docpipe` table says which it is).
pub const SCHEMA_VERSION: i64 = 1;

/// What went wrong, in one line (never the URL: it may carry the password).
#[derive(Debug, Clone, thiserror::Error)]
#[error("warehouse: {0}")]
pub struct WarehouseError(pub String);

fn pg(what: &str, e: &postgres::Error) -> WarehouseError {
    WarehouseError(format!("{what}: {}", crate::store::pg::describe(e)))
}

/// What a load did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Loaded {
    /// Files loaded (each replacing its partition).
    pub files: u64,
    /// Rows sent.
    pub rows: u64,
    /// Partitions removed (their file is gone from the lake).
    pub removed: u64,
    /// Files found unchanged since their load.
    pub unchanged: u64,
    /// Text cells' U+0000 written as U+FFFD (PostgreSQL's text cannot hold it).
    #[serde(default)]
    pub nuls_replaced: u64,
    /// Files that failed, each costing its partition alone (retried by the next load).
    #[serde(default)]
    pub failed: Vec<FailedFile>,
}

impl Loaded {
    /// Adds what another part of the load did.
    fn absorb(&mut self, other: Loaded) {
        self.files += other.files;
        self.rows += other.rows;
        self.removed += other.removed;
        self.unchanged += other.unchanged;
        self.nuls_replaced += other.nuls_replaced;
        self.failed.extend(other.failed);
    }
}

/// A file the load could not load, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FailedFile {
    /// Its path in the lake.
    pub file: String,
    /// Why, in one line.
    pub error: String,
}

/// A connection to the warehouse's schema.
pub struct Warehouse {
    client: postgres::Client,
    /// How to open more connections (a load's side-by-side ones).
    config: postgres::Config,
    schema: String,
    /// Where the URL came from (its variable), for messages.
    source: String,
    /// Connections that load files side by side.
    connections: usize,
}

impl std::fmt::Debug for Warehouse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Warehouse({}, schema {})", self.source, self.schema)
    }
}

/// `"name"`, quoted as an identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `"schema"."name"`.
fn qualified(schema: &str, name: &str) -> String {
    format!("{}.{}", ident(schema), ident(name))
}

impl Warehouse {
    /// Connects to the database the variable `settings.url_env` names (a URL with a user, and
    /// its password if the server asks for one).
    pub fn connect(settings: &WarehouseSettings) -> Result<Self, WarehouseError> {
        let var = &settings.url_env;
        let url = match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => v,
            _ => {
                return Err(WarehouseError(format!(
                    "environment variable {var} is not set: it must hold the database's URL (postgres://user:password@host:5432/database)"
                )));
            }
        };
        let config: postgres::Config = url.trim().parse().map_err(|_| {
            WarehouseError(format!(
                "{var} does not hold a PostgreSQL URL (postgres://user:password@host:5432/database)"
            ))
        })?;
        if config.get_user().is_none() {
            return Err(WarehouseError(format!(
                "the URL in {var} names no user (postgres://user:password@host:5432/database)"
            )));
        }
        let client = config
            .connect(postgres::NoTls)
            .map_err(|e| pg(&format!("cannot connect to the database of {var}"), &e))?;
        Ok(Self {
            client,
            config,
            schema: settings.schema.clone(),
            source: var.clone(),
            connections: settings.connections.max(1),
        })
    }

    /// `"schema"."name"`.
    fn table(&self, name: &str) -> String {
        qualified(&self.schema, name)
    }

    /// Creates the schema (and its version table) when it does not exist; refuses one docpipe
    /// did not create, or of a later version.
    /// Takes the schema's advisory lock for this connection's life (its end releases it): two
    /// loads of one schema at once would both create its tables and record its files; the
    /// second waits for the first, and says so.
    fn lock_schema(&mut self) -> Result<(), WarehouseError> {
        let key = 0x0064_7700_0000_0000 | i64::from(crc32fast::hash(self.schema.as_bytes()));
        let free: bool = self
            .client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .map_err(|e| pg("cannot take the schema's lock", &e))?
            .get(0);
        if !free {
            tracing::warn!(
                schema = %self.schema,
                "another load of this schema is under way: this one waits for it"
            );
            self.client
                .execute("SELECT pg_advisory_lock($1)", &[&key])
                .map_err(|e| pg("cannot take the schema's lock", &e))?;
        }
        Ok(())
    }

    fn own_schema(&mut self) -> Result<(), WarehouseError> {
        let schema = self.schema.clone();
        let exists = self
            .client
            .query_opt(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = $1",
                &[&schema],
            )
            .map_err(|e| pg("cannot read the schemas", &e))?
            .is_some();
        let version_table = self.table("_docpipe");
        let files = self.table("_docpipe_files");
        if !exists {
            let mut tx = self
                .client
                .transaction()
                .map_err(|e| pg("cannot begin", &e))?;
            tx.batch_execute(&format!(
                "CREATE SCHEMA {s};
                 CREATE TABLE {version_table} (version bigint NOT NULL, created_by text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
                 INSERT INTO {version_table} (version, created_by) VALUES ({SCHEMA_VERSION}, 'docpipe');
                 CREATE TABLE {files} (file text PRIMARY KEY, tbl text NOT NULL, bytes bigint NOT NULL, modified_ns bigint NOT NULL, rows_loaded bigint NOT NULL, loaded_at timestamptz NOT NULL DEFAULT now());",
                s = ident(&schema),
            ))
            .map_err(|e| pg(&format!("cannot create schema {schema}"), &e))?;
            return tx.commit().map_err(|e| pg("cannot commit", &e));
        }
        let owned = self
            .client
            .query_opt(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = '_docpipe'",
                &[&schema],
            )
            .map_err(|e| pg("cannot read the tables", &e))?
            .is_some();
        if !owned {
            return Err(WarehouseError(format!(
                "schema {schema} exists and docpipe did not create it (it has no _docpipe table): name another in [warehouse] schema; docpipe never writes into a schema it does not own"
            )));
        }
        let version: i64 = self
            .client
            .query_one(&format!("SELECT max(version) FROM {version_table}"), &[])
            .and_then(|r| r.try_get::<_, Option<i64>>(0))
            .map_err(|e| pg("cannot read the schema's version", &e))?
            .unwrap_or(0);
        if version > SCHEMA_VERSION {
            return Err(WarehouseError(format!(
                "schema {schema} is of version {version}, newer than this docpipe's {SCHEMA_VERSION}: run the docpipe that made it"
            )));
        }
        Ok(())
    }

    /// Creates the table of `t` when missing, and adds the columns it lacks; a column whose
    /// type someone changed is named (its table is not loaded until it is mended).
    fn own_table(&mut self, t: &Table) -> Result<(), WarehouseError> {
        let name = self.table(&t.name);
        let found: Vec<(String, String)> = self
            .client
            .query(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2",
                &[&self.schema, &t.name],
            )
            .map_err(|e| pg(&format!("cannot read table {}", t.name), &e))?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        for (column, has) in &found {
            let Some(c) = t.columns.iter().find(|c| &c.name == column) else {
                continue;
            };
            let want = column_type(c);
            if information_type(want) != has {
                return Err(WarehouseError(format!(
                    "table {}: column {column} is {has} in the warehouse, {want} in the lake: change it back, or drop the table and docpipe loads it again",
                    t.name
                )));
            }
        }
        let existing: Vec<String> = found.into_iter().map(|(c, _)| c).collect();
        if existing.is_empty() {
            let columns: Vec<String> = t
                .columns
                .iter()
                .map(|c| {
                    format!(
                        "{} {}{}",
                        ident(&c.name),
                        column_type(c),
                        if c.nullable { "" } else { " NOT NULL" }
                    )
                })
                .collect();
            self.client
                .batch_execute(&format!("CREATE TABLE {name} ({})", columns.join(", ")))
                .map_err(|e| pg(&format!("cannot create table {}", t.name), &e))?;
            return self.own_key(t);
        }
        for c in t.columns.iter().filter(|c| !existing.contains(&c.name)) {
            self.client
                .batch_execute(&format!(
                    "ALTER TABLE {name} ADD COLUMN {} {}",
                    ident(&c.name),
                    column_type(c)
                ))
                .map_err(|e| pg(&format!("cannot add column {} to {}", c.name, t.name), &e))?;
        }
        self.own_key(t)
    }

    /// The table's key as a unique index whose text columns are hashed (`md5(...)`), so that a
    /// key holds a text of any length (a btree entry holds at most 2704 bytes); a key
    /// constraint of an earlier docpipe on the raw text is replaced by it.
    fn own_key(&mut self, t: &Table) -> Result<(), WarehouseError> {
        let Some(columns) = key_columns(t) else {
            return Ok(());
        };
        let index = format!("{}_docpipe_key", t.name);
        let has: bool = self
            .client
            .query_one(
                "SELECT count(*) > 0 FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
                &[&self.schema, &index],
            )
            .map_err(|e| pg(&format!("cannot read the indexes of {}", t.name), &e))?
            .get(0);
        if has {
            return Ok(());
        }
        let name = self.table(&t.name);
        let keys: Vec<String> = self
            .client
            .query(
                "SELECT c.conname FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
                 JOIN pg_namespace n ON n.oid = r.relnamespace
                 WHERE n.nspname = $1 AND r.relname = $2 AND c.contype IN ('p', 'u')",
                &[&self.schema, &t.name],
            )
            .map_err(|e| pg(&format!("cannot read the keys of {}", t.name), &e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut sql = String::new();
        for k in keys {
            sql.push_str(&format!(
                "ALTER TABLE {name} DROP CONSTRAINT {};",
                ident(&k)
            ));
        }
        sql.push_str(&format!(
            "CREATE UNIQUE INDEX {} ON {name} ({});",
            ident(&index),
            columns.join(", ")
        ));
        self.client
            .batch_execute(&sql)
            .map_err(|e| pg(&format!("cannot make the key of {}", t.name), &e))
    }

    /// Loads what the lake at `out` has that the warehouse lacks, for `projects`: each table's
    /// files loaded since they last changed, the partitions of files gone removed.
    pub fn sync(&mut self, out: &Path, projects: &[String]) -> Result<Loaded, WarehouseError> {
        self.lock_schema()?;
        self.own_schema()?;
        let tables = crate::app::lake::tables(out).map_err(WarehouseError)?;
        let loaded = self.loaded_files()?;
        let mut done = Loaded::default();
        let mut seen = std::collections::HashSet::new();
        let mut todo = Vec::new();
        for t in &tables {
            // A table that cannot be made ready costs its files, not the load.
            let ready = self.own_table(t);
            for part in partitions(out, t, projects) {
                let rel = part
                    .file
                    .strip_prefix(out)
                    .unwrap_or(&part.file)
                    .display()
                    .to_string();
                seen.insert(rel.clone());
                if let Err(e) = &ready {
                    done.failed.push(FailedFile {
                        file: rel,
                        error: e.0.clone(),
                    });
                    continue;
                }
                let (bytes, modified) = stamp(&part.file)?;
                if loaded
                    .iter()
                    .any(|l| l.0 == rel && l.1 == bytes && l.2 == modified)
                {
                    done.unchanged += 1;
                    continue;
                }
                todo.push(File {
                    table: t,
                    part,
                    rel,
                    bytes,
                    modified,
                });
            }
        }
        done.absorb(self.load_all(&todo));
        for (rel, _, _, table) in loaded.iter().filter(|l| !seen.contains(&l.0)) {
            if let Some(t) = tables.iter().find(|t| &t.name == table)
                && let Some(part) = partition_of(t, rel)
            {
                let (name, files) = (self.table(&t.name), self.table("_docpipe_files"));
                let mut tx = self
                    .client
                    .transaction()
                    .map_err(|e| pg("cannot begin", &e))?;
                delete_partition(&mut tx, &name, &part)?;
                tx.execute(&format!("DELETE FROM {files} WHERE file = $1"), &[rel])
                    .map_err(|e| pg("cannot forget a file", &e))?;
                tx.commit().map_err(|e| pg("cannot commit", &e))?;
                done.removed += 1;
            }
        }
        Ok(done)
    }

    /// The files loaded: (file, bytes, modified_ns, table).
    fn loaded_files(&mut self) -> Result<Vec<(String, i64, i64, String)>, WarehouseError> {
        Ok(self
            .client
            .query(
                &format!(
                    "SELECT file, bytes, modified_ns, tbl FROM {}",
                    self.table("_docpipe_files")
                ),
                &[],
            )
            .map_err(|e| pg("cannot read the files loaded", &e))?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect())
    }

    /// Loads `todo`, each file in its own transaction, over up to `connections` connections
    /// side by side (this one and more opened for the load). A file that fails costs its
    /// partition alone (its transaction rolled back; the next load retries it) and the others
    /// load; an extra connection that cannot be opened leaves its share to the others.
    fn load_all(&mut self, todo: &[File<'_>]) -> Loaded {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let schema = self.schema.as_str();
        let work = |client: &mut postgres::Client| -> Loaded {
            let mut done = Loaded::default();
            while let Some(file) = todo.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
            {
                match load(client, schema, file) {
                    Ok((rows, nuls)) => {
                        done.files += 1;
                        done.rows += rows;
                        done.nuls_replaced += nuls;
                    }
                    Err(e) => done.failed.push(FailedFile {
                        file: file.rel.clone(),
                        error: e.0,
                    }),
                }
            }
            done
        };
        let extra = self.connections.min(todo.len()).saturating_sub(1);
        let config = &self.config;
        let source = &self.source;
        let client = &mut self.client;
        let results: Vec<Loaded> = std::thread::scope(|scope| {
            let others: Vec<_> = (0..extra)
                .map(|_| {
                    scope.spawn(|| match config.connect(postgres::NoTls) {
                        Ok(mut client) => work(&mut client),
                        Err(e) => {
                            let e = pg(&format!("cannot connect to the database of {source}"), &e);
                            tracing::warn!("{e}: the other connections load its files");
                            Loaded::default()
                        }
                    })
                })
                .collect();
            let mut all = vec![work(client)];
            all.extend(others.into_iter().map(|h| h.join().unwrap_or_default()));
            all
        });
        let mut done = Loaded::default();
        for r in results {
            done.absorb(r);
        }
        done.failed.sort_by(|a, b| a.file.cmp(&b.file));
        done
    }
}

/// A file to load.
struct File<'a> {
    table: &'a Table,
    part: Partition,
    /// Its path relative to the lake.
    rel: String,
    bytes: i64,
    modified: i64,
}

/// Loads one file in one transaction: its partition's rows deleted, its rows copied, the
/// file recorded. The rows sent, and the U+0000 replaced in their text.
fn load(
    client: &mut postgres::Client,
    schema: &str,
    file: &File<'_>,
) -> Result<(u64, u64), WarehouseError> {
    let File {
        table: t,
        part,
        rel,
        bytes,
        modified,
    } = file;
    let batches = read_parquet(&part.file)?;
    let name = qualified(schema, &t.name);
    let files = qualified(schema, "_docpipe_files");
    let mut tx = client.transaction().map_err(|e| pg("cannot begin", &e))?;
    delete_partition(&mut tx, &name, part)?;
    let mut rows = 0u64;
    let mut nuls = 0u64;
    if let Some(first) = batches.first() {
        let fixed = partition_values(part);
        let mut names: Vec<String> = fixed.iter().map(|f| f.0.to_string()).collect();
        let mut types: Vec<Type> = fixed.iter().map(|f| f.1.clone()).collect();
        for f in first.schema().fields() {
            let ty = copy::pg_type(f.data_type()).ok_or_else(|| {
                WarehouseError(format!(
                    "{}: column {} of type {} has no PostgreSQL type in docpipe",
                    part.file.display(),
                    f.name(),
                    f.data_type()
                ))
            })?;
            names.push(f.name().clone());
            types.push(ty);
        }
        let quoted: Vec<String> = names.iter().map(|n| ident(n)).collect();
        let sink = tx
            .copy_in(&format!(
                "COPY {name} ({}) FROM STDIN BINARY",
                quoted.join(", ")
            ))
            .map_err(|e| pg(&format!("cannot load {rel}"), &e))?;
        let mut writer = postgres::binary_copy::BinaryCopyInWriter::new(sink, &types);
        for batch in &batches {
            for i in 0..batch.num_rows() {
                let cells: Vec<copy::Cell> = batch
                    .columns()
                    .iter()
                    .map(|a| copy::cell(a, i, &mut nuls))
                    .collect();
                let refs: Vec<&(dyn ToSql + Sync)> = fixed
                    .iter()
                    .map(|f| &f.2)
                    .chain(&cells)
                    .map(|c| c as &(dyn ToSql + Sync))
                    .collect();
                writer
                    .write(&refs)
                    .map_err(|e| pg(&format!("cannot load {rel}"), &e))?;
                rows += 1;
            }
        }
        writer
            .finish()
            .map_err(|e| pg(&format!("cannot load {rel}"), &e))?;
    }
    tx.execute(
            &format!(
                "INSERT INTO {files} (file, tbl, bytes, modified_ns, rows_loaded) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (file) DO UPDATE SET bytes = excluded.bytes, modified_ns = excluded.modified_ns,
                 rows_loaded = excluded.rows_loaded, loaded_at = now()"
            ),
            &[&rel, &t.name, &bytes, &modified, &(rows as i64)],
        )
        .map_err(|e| pg("cannot record the file loaded", &e))?;
    tx.commit()
        .map_err(|e| pg(&format!("cannot commit {rel}"), &e))?;
    Ok((rows, nuls))
}

/// The partition's values (Hive keeps them in the path), which go ahead of the file's columns.
fn partition_values(part: &Partition) -> Vec<(&'static str, Type, copy::Cell)> {
    let mut fixed = Vec::new();
    if let Some(p) = &part.project {
        fixed.push(("project", Type::TEXT, copy::Cell::Text(p.clone())));
    }
    if let Some(d) = part.date {
        let days = (d - NaiveDate::from_ymd_opt(1970, 1, 1).expect("a date")).num_days();
        let days = copy::Cell::Date(i32::try_from(days).unwrap_or(0));
        fixed.push(("date", Type::DATE, days));
    }
    fixed
}

/// A column's PostgreSQL type, from the manifest's name of its type.
fn column_type(c: &Column) -> &'static str {
    match c.dtype.as_str() {
        "string" => "text",
        "int64" => "bigint",
        "double" => "double precision",
        "boolean" => "boolean",
        "date" => "date",
        t if t.starts_with("timestamp") => "timestamptz",
        _ => "jsonb",
    }
}

/// The expressions of a table's unique key: its key columns, a text one as `md5(column)`;
/// none for the tables without a key (rows set aside, fractions).
fn key_columns(t: &Table) -> Option<Vec<String>> {
    if t.key.is_empty()
        || t.name == tables::REJECTS.name
        || t.name.ends_with(tables::FRACTIONS_SUFFIX)
    {
        return None;
    }
    Some(
        t.key
            .iter()
            .map(|k| {
                let text = t
                    .columns
                    .iter()
                    .any(|c| c.name == *k && column_type(c) == "text");
                if text {
                    format!("md5({})", ident(k))
                } else {
                    ident(k)
                }
            })
            .collect(),
    )
}

/// How `information_schema.columns` names a type docpipe creates.
fn information_type(created: &str) -> &str {
    match created {
        "timestamptz" => "timestamp with time zone",
        other => other,
    }
}

/// One file of a table, and the partition it is.
#[derive(Debug, Clone)]
struct Partition {
    file: PathBuf,
    project: Option<String>,
    date: Option<NaiveDate>,
}

/// The files of table `t` under `out`, for `projects`.
fn partitions(out: &Path, t: &Table, projects: &[String]) -> Vec<Partition> {
    let file_name = t
        .files
        .rsplit('/')
        .next()
        .unwrap_or("part-00000.parquet")
        .to_string();
    if t.partitioning.is_empty() {
        let file = out.join(&t.files);
        return if file.is_file() {
            vec![Partition {
                file,
                project: None,
                date: None,
            }]
        } else {
            Vec::new()
        };
    }
    let mut all = Vec::new();
    for p in projects {
        let dir = crate::layout::project_dir(out, &t.name, p);
        if !t.partitioning.contains(&"date") {
            let file = dir.join(&file_name);
            if file.is_file() {
                all.push(Partition {
                    file,
                    project: Some(p.clone()),
                    date: None,
                });
            }
            continue;
        }
        let mut days: Vec<NaiveDate> = crate::layout::partition_days(out, &t.name, p)
            .into_iter()
            .collect();
        days.sort();
        for d in days {
            let file = crate::layout::partition_dir(out, &t.name, p, d).join(&file_name);
            if file.is_file() {
                all.push(Partition {
                    file,
                    project: Some(p.clone()),
                    date: Some(d),
                });
            }
        }
    }
    all
}

/// The partition a file recorded as loaded was (its path relative to the lake).
fn partition_of(t: &Table, rel: &str) -> Option<Partition> {
    let mut project = None;
    let mut date = None;
    for seg in rel.split('/') {
        if let Some(p) = seg.strip_prefix("project=") {
            project = Some(p.to_string());
        } else if let Some(d) = seg.strip_prefix("date=") {
            date = NaiveDate::parse_from_str(d, "%Y-%m-%d").ok();
        }
    }
    let whole = t.partitioning.is_empty();
    (whole || project.is_some()).then(|| Partition {
        file: PathBuf::from(rel),
        project,
        date,
    })
}

/// Deletes the rows of a partition (a whole table for an unpartitioned one).
fn delete_partition(
    tx: &mut postgres::Transaction<'_>,
    table: &str,
    part: &Partition,
) -> Result<(), WarehouseError> {
    let done = match (&part.project, part.date) {
        (Some(p), Some(d)) => {
            let day = d.format("%Y-%m-%d").to_string();
            tx.execute(
                &format!("DELETE FROM {table} WHERE project = $1 AND date = $2::text::date"),
                &[p, &day],
            )
        }
        (Some(p), None) => tx.execute(&format!("DELETE FROM {table} WHERE project = $1"), &[p]),
        _ => tx.execute(&format!("DELETE FROM {table}"), &[]),
    };
    done.map(|_| ())
        .map_err(|e| pg(&format!("cannot clear {table}"), &e))
}

/// A file's size and modification time (nanoseconds): what says it changed.
fn stamp(file: &Path) -> Result<(i64, i64), WarehouseError> {
    let meta =
        std::fs::metadata(file).map_err(|e| WarehouseError(format!("{}: {e}", file.display())))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    Ok((i64::try_from(meta.len()).unwrap_or(i64::MAX), modified))
}

/// A Parquet file's batches.
fn read_parquet(file: &Path) -> Result<Vec<arrow_array::RecordBatch>, WarehouseError> {
    let f = std::fs::File::open(file)
        .map_err(|e| WarehouseError(format!("{}: {e}", file.display())))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .and_then(parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::build)
        .map_err(|e| WarehouseError(format!("{}: {e}", file.display())))?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| WarehouseError(format!("{}: {e}", file.display())))
}

/// The last load, as the state keeps it (`status` shows it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LastLoad {
    /// When it ended.
    pub at: DateTime<Utc>,
    /// What it did, when it worked.
    pub loaded: Option<Loaded>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Loads in a row, this one included, that failed or left a file unloaded (0: it loaded
    /// everything); at [`FAILING_LOADS`] the daemon alerts (`warehouse_failing`).
    #[serde(default)]
    pub failing_runs: u32,
}

/// Loads in a row that fail before the warehouse is a problem a person is told of.
pub const FAILING_LOADS: u32 = 3;

impl LastLoad {
    /// Whether it failed or left a file unloaded.
    pub fn failed(&self) -> bool {
        self.error.is_some() || self.loaded.as_ref().is_some_and(|l| !l.failed.is_empty())
    }

    /// Why it failed, in one line: the error, or the files it could not load and the first's
    /// reason.
    pub fn why(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        let failed = &self.loaded.as_ref()?.failed;
        let first = failed.first()?;
        Some(format!(
            "{} files not loaded (each retried by the next load), the first {}: {}",
            failed.len(),
            first.file,
            first.error
        ))
    }
}
