//! The lake describes itself: `<output>/_docpipe/` (a folder Spark, Hive and Trino readers skip:
//! its name starts with `_`) holds `manifest.json` (docpipe's version, each table with its
//! columns, types, key and what a row is, each project's time zone, what each day status
//! means), `duckdb.sql` (a view per table over its files) and `dbt_sources.yml` (each table a
//! dbt source with its freshness). A run rewrites them when it wrote any table.

use super::Context;
use crate::config::Location;
use crate::dataset::Key;
use arrow_schema::{DataType as Arrow, SchemaRef, TimeUnit};
use docpipe_catalog::tables;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The folder under the output.
pub const FOLDER: &str = "_docpipe";

/// A column of a table.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its type (`string`, `int64`, `double`, `boolean`, `date`, `timestamp[us, UTC]`,
    /// `list<...>`, `struct<...>`).
    #[serde(rename = "type")]
    pub dtype: String,
    /// Whether it may be null.
    pub nullable: bool,
}

/// A table of the lake.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    /// Its name (a rule query's name for a trend table).
    pub name: String,
    /// The dataset that writes it (none: docpipe's own tables and the trends).
    pub dataset: Option<&'static str>,
    /// Its files under the output, with `<id>` and `<YYYY-MM-DD>` for the partitions.
    pub files: String,
    /// Its Hive partition keys, in path order.
    pub partitioning: Vec<&'static str>,
    /// The columns that identify a row.
    pub key: Vec<&'static str>,
    /// What a row is.
    pub row: &'static str,
    /// Its columns, the partition keys first.
    pub columns: Vec<Column>,
}

impl Table {
    /// Whether a dbt source can judge it fresh by `fetched_at`.
    fn fetched_at(&self) -> bool {
        self.columns.iter().any(|c| c.name == "fetched_at")
    }
}

/// The manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// docpipe's version that wrote it.
    pub docpipe: &'static str,
    /// Each project and its time zone (the days of every table are local days there).
    pub projects: Vec<ProjectZone>,
    /// What each `day_status.status` means.
    pub statuses: [Status; 3],
    /// The tables in the lake.
    pub tables: Vec<Table>,
}

/// A day status and what it means.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `partial`, `provisional` or `final`.
    pub status: &'static str,
    /// What it means.
    pub means: &'static str,
}

/// A project's time zone.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectZone {
    /// Its id.
    pub project: String,
    /// Its IANA time zone.
    pub timezone: String,
}

/// An Arrow type as the manifest names it.
pub fn type_name(t: &Arrow) -> String {
    match t {
        Arrow::Utf8 | Arrow::LargeUtf8 | Arrow::Utf8View => "string".into(),
        Arrow::Int64 => "int64".into(),
        Arrow::Float64 => "double".into(),
        Arrow::Boolean => "boolean".into(),
        Arrow::Date32 => "date".into(),
        Arrow::Timestamp(TimeUnit::Microsecond, Some(tz)) => format!("timestamp[us, {tz}]"),
        Arrow::List(f) | Arrow::LargeList(f) => format!("list<{}>", type_name(f.data_type())),
        Arrow::Struct(fields) => {
            let inner: Vec<String> = fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), type_name(f.data_type())))
                .collect();
            format!("struct<{}>", inner.join(", "))
        }
        other => other.to_string().to_lowercase(),
    }
}

fn columns_of(schema: &SchemaRef, partitioning: &[&'static str]) -> Vec<Column> {
    let keys = partitioning.iter().map(|k| Column {
        name: (*k).to_string(),
        dtype: if *k == "date" { "date" } else { "string" }.into(),
        nullable: false,
    });
    keys.chain(schema.fields().iter().map(|f| Column {
        name: f.name().clone(),
        dtype: type_name(f.data_type()),
        nullable: f.is_nullable(),
    }))
    .collect()
}

fn row_of(name: &str) -> (Vec<&'static str>, &'static str) {
    if name.ends_with(tables::FRACTIONS_SUFFIX) {
        return (tables::FRACTIONS_KEY.to_vec(), tables::FRACTIONS_ROW);
    }
    tables::by_name(name).map_or((Vec::new(), ""), |t| (t.key.to_vec(), t.row))
}

/// The Arrow schema of columns the catalogue types (the stream's tables: their writer builds
/// them from the same declarations, `tests/it/catalogue.rs` holds the two equal).
fn catalogued(columns: &[tables::Column]) -> SchemaRef {
    use tables::Ty;
    let fields: Vec<arrow_schema::Field> = columns
        .iter()
        .map(|c| {
            let dtype = match c.ty {
                Ty::Text => Arrow::Utf8,
                Ty::Int => Arrow::Int64,
                Ty::Float => Arrow::Float64,
                Ty::Bool => Arrow::Boolean,
                Ty::Date => Arrow::Date32,
                Ty::Time => Arrow::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                Ty::Sources => Arrow::Utf8,
            };
            arrow_schema::Field::new(c.name, dtype, c.nullable)
        })
        .collect();
    std::sync::Arc::new(arrow_schema::Schema::new(fields))
}

/// A table partitioned by `partitioning` under its folder.
fn partitioned(
    name: &str,
    dataset: Option<&'static str>,
    schema: SchemaRef,
    partitioning: Vec<&'static str>,
) -> Table {
    let mut files = name.to_string();
    for k in &partitioning {
        files += match *k {
            "project" => "/project=<id>",
            _ => "/date=<YYYY-MM-DD>",
        };
    }
    files += "/part-00000.parquet";
    let (key, row) = row_of(name);
    Table {
        name: name.to_string(),
        dataset,
        files,
        columns: columns_of(&schema, &partitioning),
        partitioning,
        key,
        row,
    }
}

/// Every table docpipe writes that is in the output folder `out`, in a fixed order.
pub fn tables(out: &Path) -> Result<Vec<Table>, String> {
    let mut all = Vec::new();
    for d in crate::dataset::ALL {
        for t in d.tables() {
            let keys = t
                .partition
                .iter()
                .map(|k| match k {
                    Key::Project => "project",
                    Key::Date => "date",
                })
                .collect();
            all.push(partitioned(t.name, Some(d.name()), (t.schema)(), keys));
            if d.rounds_fractions() && t.partition.contains(&Key::Date) {
                let companion = crate::export::fractions_table(t.name);
                let keys = vec!["project", "date"];
                let schema = crate::export::fractions_schema();
                all.push(partitioned(&companion, Some(d.name()), schema, keys));
            }
        }
    }
    let own: [(&str, SchemaRef); 4] = [
        (
            crate::export::DAY_STATUS,
            crate::export::day_status_schema(),
        ),
        (
            crate::rules::engine::AGENT_RUNS,
            crate::rules::engine::agent_runs_schema(),
        ),
        (
            crate::rules::impact::AGENT_IMPACT,
            crate::rules::impact::schema(),
        ),
        (
            crate::rules::engine::AGENT_REASKS,
            crate::rules::engine::agent_reasks_schema(),
        ),
    ];
    for (name, schema) in own {
        all.push(partitioned(name, None, schema, vec!["project"]));
    }
    for t in tables::STREAM {
        let keys = t.partitioning.iter().map(|k| k.column()).collect();
        all.push(partitioned(t.name, None, catalogued(t.columns), keys));
    }
    all.retain(|t| out.join(&t.name).is_dir());
    if out.join("trends").is_dir() {
        let trends = crate::trends::empty_tables().map_err(|e| e.to_string())?;
        for (name, df) in trends.frames() {
            if !out.join(format!("trends/{name}.parquet")).is_file() {
                continue;
            }
            let batch = crate::trends::arrow::batch(df).map_err(|e| e.to_string())?;
            let (key, row) = row_of(name);
            all.push(Table {
                name: name.to_string(),
                dataset: None,
                files: format!("trends/{name}.parquet"),
                partitioning: Vec::new(),
                key,
                row,
                columns: columns_of(&batch.schema(), &[]),
            });
        }
    }
    Ok(all)
}

/// The manifest of the output folder `out`.
pub fn manifest(ctx: &Context, out: &Path) -> Result<Manifest, String> {
    use crate::export::{FINAL, PARTIAL, PROVISIONAL};
    let tz = ctx.settings.timezone.name().to_string();
    Ok(Manifest {
        docpipe: env!("CARGO_PKG_VERSION"),
        projects: ctx
            .settings
            .project_ids()
            .into_iter()
            .map(|project| ProjectZone {
                project,
                timezone: tz.clone(),
            })
            .collect(),
        statuses: [
            Status {
                status: PARTIAL,
                means: "the day is not over in the project's time zone, or its data were fetched before it ended: they cover part of it",
            },
            Status {
                status: PROVISIONAL,
                means: "the day is over and was fetched after its end; within the lateness allowance it may still change",
            },
            Status {
                status: FINAL,
                means: "past the lateness allowance and fetched after it: it can no longer change",
            },
        ],
        tables: tables(out)?,
    })
}

/// Where a table's files are for DuckDB: relative to the output folder, or under the bucket's
/// URL.
fn glob(base: Option<&str>, t: &Table) -> String {
    let files = if t.partitioning.is_empty() {
        t.files.clone()
    } else {
        format!("{}/**/*.parquet", t.name)
    };
    match base {
        Some(url) => format!("{}/{files}", url.trim_end_matches('/')),
        None => files,
    }
}

/// DuckDB's read of a table's files: with Hive partitioning when it has partitions, and their
/// types (`date` a DATE) when `typed`.
fn read_parquet(base: Option<&str>, t: &Table, typed: bool) -> String {
    let files = sql_text(&glob(base, t));
    if t.partitioning.is_empty() {
        return format!("read_parquet({files})");
    }
    if !typed {
        return format!("read_parquet({files}, hive_partitioning = true)");
    }
    let types: Vec<String> = t
        .partitioning
        .iter()
        .map(|k| {
            let ty = if *k == "date" { "DATE" } else { "VARCHAR" };
            format!("'{k}': {ty}")
        })
        .collect();
    format!(
        "read_parquet({files}, hive_partitioning = true, hive_types = {{{}}})",
        types.join(", ")
    )
}

/// A string as an SQL literal.
fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `duckdb.sql`: a view per table, `date` a DATE.
pub fn duckdb_sql(m: &Manifest, base: Option<&str>) -> String {
    let mut out = format!(
        "-- docpipe {}: a view per table of this lake. Run it from the output folder:\n\
         --   duckdb -init _docpipe/duckdb.sql     (or, in DuckDB: .read _docpipe/duckdb.sql)\n",
        m.docpipe
    );
    for t in &m.tables {
        let source = read_parquet(base, t, true);
        out += &format!(
            "-- {}\nCREATE OR REPLACE VIEW \"{}\" AS SELECT * FROM {source};\n",
            crate::text::one_line(t.row),
            t.name
        );
    }
    out
}

/// A string as a YAML scalar (JSON's quoting is YAML's).
fn yaml_text(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The variable that points `dbt_sources.yml`'s locations at another copy of the lake.
pub const LAKE_VAR: &str = "DOCPIPE_LAKE";

/// `dbt_sources.yml`: the lake as one dbt source, each table with its columns (their types in
/// `data_type`) at an absolute location; the tables with `fetched_at` with a freshness from
/// `[freshness]`.
pub fn dbt_sources(ctx: &Context, m: &Manifest, base: Option<&str>) -> String {
    // Absolute, so that a dbt project anywhere reads it; `DOCPIPE_LAKE` points it elsewhere.
    let root = base.map_or_else(
        || {
            let out = ctx.output();
            std::path::absolute(out)
                .unwrap_or_else(|_| out.to_path_buf())
                .display()
                .to_string()
        },
        str::to_string,
    );
    let jinja = root.replace('\\', "\\\\").replace('"', "\\\"");
    let lake = format!("{{{{ env_var(\"{LAKE_VAR}\", \"{jinja}\") }}}}");
    let mut out = format!(
        "# docpipe {}: the lake as a dbt source (dbt-duckdb reads each table at its external_location).\n\
         # The locations are absolute: the lake at {root}, or at ${LAKE_VAR} when it is set (a copy,\n\
         # another mount). Copy this file into a dbt project's models/ folder.\n\
         version: 2\nsources:\n  - name: docpipe\n    description: {}\n    tables:\n",
        m.docpipe,
        yaml_text("Documentation analytics exported by docpipe")
    );
    for t in &m.tables {
        out += &format!(
            "      - name: {}\n        description: {}\n",
            t.name,
            yaml_text(t.row)
        );
        let location = read_parquet(Some(&lake), t, false);
        let key: Vec<String> = t.key.iter().map(|k| yaml_text(k)).collect();
        out += &format!(
            "        meta:\n          external_location: {}\n          key: [{}]\n",
            yaml_text(&location),
            key.join(", ")
        );
        if t.fetched_at() {
            let today = t
                .dataset
                .map_or(ctx.settings.freshness.default.today, |d| {
                    ctx.settings.freshness.policy(d).today
                })
                .num_minutes()
                .max(1);
            out += &format!(
                "        loaded_at_field: fetched_at\n        freshness:\n          warn_after: {{count: {}, period: minute}}\n          error_after: {{count: {}, period: minute}}\n",
                2 * today,
                6 * today
            );
        }
        out += "        columns:\n";
        for c in &t.columns {
            out += &format!(
                "          - name: {}\n            data_type: {}\n",
                yaml_text(&c.name),
                yaml_text(&c.dtype)
            );
        }
    }
    out
}

/// Writes `text` as `path` whole (renamed into place).
fn write(path: &Path, text: &str) -> Result<PathBuf, String> {
    crate::layout::write_whole(path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Rewrites `_docpipe/` in the output folder; returns its files.
pub fn describe(ctx: &Context) -> Result<Vec<PathBuf>, String> {
    let out = ctx.output();
    let m = manifest(ctx, out)?;
    let base = match &ctx.settings.output {
        Some(Location::Url(u)) => Some(u.as_str()),
        _ => None,
    };
    let dir = out.join(FOLDER);
    let json = serde_json::to_string_pretty(&m).map_err(|e| e.to_string())?;
    Ok(vec![
        write(&dir.join("manifest.json"), &(json + "\n"))?,
        write(&dir.join("duckdb.sql"), &duckdb_sql(&m, base))?,
        write(&dir.join("dbt_sources.yml"), &dbt_sources(ctx, &m, base))?,
    ])
}
