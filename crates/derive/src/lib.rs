//! Human-versus-AI trends with polars: daily and weekly tables over the exported partitions,
//! written as Parquet and CSV, and a terminal summary.
//!
//! The daily table is built from `site_totals`, which holds each exported day's exact totals: a
//! day exported with no views is a row of zeros, a day never exported is absent.

pub mod arrow;
pub mod chart;
pub mod gaps;
pub mod reading;

use chrono::NaiveDate;
use docpipe_catalog::datasets::LEADING;
use docpipe_catalog::layout::Pending;
use docpipe_catalog::tables::{
    self,
    name::{self, PAGE_VIEWS, SITE_TOTALS},
};
use polars::prelude::*;
use std::path::{Path, PathBuf};

/// The target of the trends' log lines, as before they had a crate of their own (a `RUST_LOG`
/// filter names it).
const TARGET: &str = "docpipe::trends";

/// Trend errors.
#[derive(Debug, thiserror::Error)]
pub enum TrendsError {
    /// Nothing exported yet.
    #[error("no exported data in {0}: run `docpipe export` or `docpipe backfill` first")]
    NoData(String),
    /// polars failed.
    #[error("trends: {0}")]
    Polars(#[from] PolarsError),
    /// Writing the tables.
    #[error("cannot write {path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// What to aggregate.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these projects (all when empty).
    pub projects: Vec<String>,
    /// First day.
    pub from: Option<NaiveDate>,
    /// Last day, included.
    pub to: Option<NaiveDate>,
}

/// The computed tables.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Per project and exported day.
    pub daily: DataFrame,
    /// Per project and ISO week.
    pub weekly: DataFrame,
    /// Per project and page, over the last 7 and 28 days and the windows before them.
    pub pages: DataFrame,
    /// The docs gaps and the other datasets' tables (see [`gaps`]).
    pub gaps: gaps::Gaps,
}

/// The page-view trend tables' names, in the order they are written.
pub const BASE_NAMES: [&str; 3] = [name::DAILY_TREND, name::WEEKLY_TREND, name::PAGES_TREND];

/// Every trend table's name (`trends/<name>.parquet`), the names a rule's query reads them by:
/// the page-view tables, then the gap tables.
pub const NAMES: [&str; BASE_NAMES.len() + gaps::NAMES.len()] = {
    let mut out = [""; BASE_NAMES.len() + gaps::NAMES.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = if i < BASE_NAMES.len() {
            BASE_NAMES[i]
        } else {
            gaps::NAMES[i - BASE_NAMES.len()]
        };
        i += 1;
    }
    out
};

impl Tables {
    /// `more`'s rows added below each table's (a later project's).
    fn stack(&mut self, mut more: Tables) -> PolarsResult<()> {
        for ((_, df), (_, extra)) in self.named().into_iter().zip(more.named()) {
            df.vstack_mut(extra)?;
        }
        Ok(())
    }

    /// The tables in one set of types ([`arrow::typed`]).
    fn typed(mut self) -> PolarsResult<Self> {
        for (_, df) in self.named() {
            *df = arrow::typed(std::mem::take(df))?;
        }
        Ok(self)
    }

    /// Every table by name, in [`NAMES`] order (the order they are written).
    fn named(&mut self) -> Vec<(&'static str, &mut DataFrame)> {
        let Tables {
            daily,
            weekly,
            pages,
            gaps,
        } = self;
        BASE_NAMES
            .into_iter()
            .zip([daily, weekly, pages])
            .chain(gaps.named())
            .collect()
    }

    /// Every table by name, in [`NAMES`] order (what a rule's query reads).
    pub fn frames(&self) -> Vec<(&'static str, &DataFrame)> {
        let base = [&self.daily, &self.weekly, &self.pages];
        BASE_NAMES
            .into_iter()
            .zip(base)
            .chain(self.gaps.frames())
            .collect()
    }
}

/// Views a page needs in both windows to count as a mover (fewer make shares noise).
pub const MOVER_MIN_VIEWS: i64 = 20;

/// A column's type in polars, as the catalogue types it.
pub fn polars_type(ty: tables::Ty) -> DataType {
    use tables::Ty;
    match ty {
        Ty::Text => DataType::String,
        Ty::Int => DataType::Int64,
        Ty::Float => DataType::Float64,
        Ty::Bool => DataType::Boolean,
        Ty::Date => DataType::Date,
        Ty::Time => DataType::Datetime(TimeUnit::Microseconds, Some(TimeZone::UTC)),
        Ty::Sources => DataType::List(Box::new(DataType::Struct(
            tables::SOURCE_FIELDS
                .iter()
                .map(|f| Field::new((*f).into(), DataType::String))
                .collect(),
        ))),
    }
}

/// The columns of a table whose files differ by version (`None`: the files' own): the table's
/// columns as docpipe writes them now (the catalogue's), in polars' types. `site_totals` is the
/// one such table: it gained `unlisted`.
fn file_schema(table: &str) -> Option<SchemaRef> {
    let table = (table == SITE_TOTALS).then_some(&tables::SITE_TOTALS)?;
    let fields = table
        .columns
        .iter()
        .map(|c| Field::new(c.name.into(), polars_type(c.ty)));
    Some(Arc::new(Schema::from_iter(fields)))
}

/// Lazily scans a table's Hive partitions, with `project` a string and `date` a date whatever
/// the values look like, pruned to the selection.
pub fn scan(out: &Path, table: &str, sel: &Selection) -> Result<LazyFrame, TrendsError> {
    let root = out.join(table);
    if !root.is_dir() {
        return Err(TrendsError::NoData(out.display().to_string()));
    }
    if let Some(lf) = scan_project(out, table, sel)? {
        return Ok(lf);
    }
    let args = table_args(
        table,
        [
            Field::new("project".into(), DataType::String),
            Field::new("date".into(), DataType::Date),
        ],
    );
    // The table's folder itself, not a glob built from it: polars walks a folder it is given,
    // and a user's path with glob characters (`out[1]`) must not match other folders.
    let lf = of_projects(
        LazyFrame::scan_parquet(PlRefPath::try_from_path(&root)?, args)?,
        sel,
    );
    Ok(of_days(lf, sel))
}

/// How a table's files are scanned: its partitions' `hive` columns typed as given, its columns
/// as docpipe writes them now.
fn table_args<const N: usize>(table: &str, hive: [Field; N]) -> ScanArgsParquet {
    ScanArgsParquet {
        hive_options: HiveOptions {
            schema: Some(Arc::new(Schema::from_iter(hive))),
            ..HiveOptions::new_enabled()
        },
        // A column added later (site_totals' `unlisted`): the files written before it read
        // as null there, whichever file comes first.
        schema: file_schema(table),
        allow_missing_columns: true,
        ..Default::default()
    }
}

/// A table's rows of the selection's one project, its folder scanned alone (`None`: the
/// selection names another number of projects, or the project has no folder there): a scan of
/// the table's root lists every project's files, which made the trends of many projects, a
/// project at a time, grow with the square of the projects.
fn scan_project(
    out: &Path,
    table: &str,
    sel: &Selection,
) -> Result<Option<LazyFrame>, TrendsError> {
    let [project] = sel.projects.as_slice() else {
        return Ok(None);
    };
    let dir = docpipe_catalog::layout::project_dir(out, table, project);
    if !dir.is_dir() {
        return Ok(None);
    }
    let args = table_args(table, [Field::new("date".into(), DataType::Date)]);
    let mut lf = LazyFrame::scan_parquet(PlRefPath::try_from_path(&dir)?, args)?;
    // The columns in the order of a scan of the whole table: the file's, then `project` and
    // `date` (its partitions').
    let mut columns: Vec<Expr> = lf
        .collect_schema()?
        .iter_names()
        .filter(|n| n.as_str() != "date" && n.as_str() != "project")
        .map(|n| col(n.clone()))
        .collect();
    columns.extend([lit(project.as_str()).alias("project"), col("date")]);
    Ok(Some(of_days(lf.select(columns), sel)))
}

/// The rows of the selection's days.
fn of_days(mut lf: LazyFrame, sel: &Selection) -> LazyFrame {
    if let Some(from) = sel.from {
        lf = lf.filter(col("date").gt_eq(lit(from)));
    }
    if let Some(to) = sel.to {
        lf = lf.filter(col("date").lt_eq(lit(to)));
    }
    lf
}

/// The rows of the selection's projects (all when it names none).
fn of_projects(lf: LazyFrame, sel: &Selection) -> LazyFrame {
    let any = sel
        .projects
        .iter()
        .map(|p| col("project").eq(lit(p.as_str())))
        .reduce(|a, b| a.or(b));
    match any {
        Some(any) => lf.filter(any),
        None => lf,
    }
}

/// No partial day: [`partial_days`]' columns, no row.
pub fn no_partial_days() -> DataFrame {
    DataFrame::empty_with_schema(&Schema::from_iter([
        Field::new("project".into(), DataType::String),
        Field::new("dataset".into(), DataType::String),
        Field::new("date".into(), DataType::Date),
    ]))
}

/// The days the lake's `day_status` says are partial (not over in the project's time zone, or
/// fetched before they ended), per `project`, `dataset` and `date`: none when the lake has no
/// `day_status` (written before it existed: every day counts as complete).
pub fn partial_days(out: &Path, sel: &Selection) -> Result<DataFrame, TrendsError> {
    use docpipe_catalog::tables::{day_status::PARTIAL, name::DAY_STATUS};
    let root = out.join(DAY_STATUS);
    if !root.is_dir() {
        return Ok(no_partial_days());
    }
    let args = ScanArgsParquet {
        hive_options: HiveOptions {
            schema: Some(Arc::new(Schema::from_iter([Field::new(
                "project".into(),
                DataType::String,
            )]))),
            ..HiveOptions::new_enabled()
        },
        ..Default::default()
    };
    let lf = of_projects(
        LazyFrame::scan_parquet(PlRefPath::try_from_path(&root)?, args)?
            .filter(col("status").eq(lit(PARTIAL))),
        sel,
    );
    Ok(lf
        .select([col("project"), col("dataset"), col("date")])
        .collect()?)
}

/// The most partial days [`completed`] tests one by one (a few days a project are not over);
/// past it, a join.
const PARTIAL_TESTED: usize = 256;

/// `rows` (with `project` and `date`) with `complete`: false on the days `partial` (see
/// [`partial_days`]) names for `dataset`, true on the others. The partial days are a handful
/// (the days not over): tested as one expression, not joined, since a join copies every row of
/// the source (a million turns, twice).
pub fn completed(rows: LazyFrame, partial: &DataFrame, dataset: &str) -> LazyFrame {
    if let Some(days) = partial_pairs(partial, dataset).filter(|d| d.len() <= PARTIAL_TESTED) {
        let any = days
            .into_iter()
            .map(|(project, day)| {
                col("project")
                    .eq(lit(project))
                    .and(col("date").eq(lit(day).cast(DataType::Date)))
            })
            .reduce(|a, b| a.or(b));
        let complete = any.map_or(lit(true), |any| any.not());
        return rows.with_column(complete.alias("complete"));
    }
    let partial = partial
        .clone()
        .lazy()
        .filter(col("dataset").eq(lit(dataset)))
        .select([col("project"), col("date"), lit(false).alias("complete")]);
    let on = [col("project"), col("date")];
    rows.join(partial, on.clone(), on, JoinArgs::new(JoinType::Left))
        .with_column(col("complete").fill_null(lit(true)))
}

/// The `(project, day)` of `partial`'s days of `dataset`, each day as days since 1970 (`None`:
/// a column not as [`partial_days`] gives it).
fn partial_pairs(partial: &DataFrame, dataset: &str) -> Option<Vec<(String, i32)>> {
    let projects = partial.column("project").ok()?.str().ok()?.clone();
    let datasets = partial.column("dataset").ok()?.str().ok()?.clone();
    let days = partial
        .column("date")
        .ok()?
        .cast(&DataType::Int32)
        .ok()?
        .i32()
        .ok()?
        .clone();
    let mut out = Vec::new();
    for ((p, d), day) in projects.iter().zip(datasets.iter()).zip(days.iter()) {
        if let (Some(p), Some(dataset_of_day), Some(day)) = (p, d, day)
            && dataset_of_day == dataset
        {
            out.push((p.to_string(), day));
        }
    }
    Some(out)
}

/// `c`, null on a row whose day is not complete (a figure that would compare part of a day).
fn if_complete(c: &str) -> Expr {
    when(col("complete"))
        .then(col(c))
        .otherwise(lit(Null {}))
        .alias(c)
}

/// The project's last day in `days` (a frame with `project` and `date`) as `last_day`.
pub(crate) fn last_day(days: LazyFrame) -> LazyFrame {
    days.group_by([col("project")])
        .agg([col("date").max().alias("last_day")])
}

/// `rows` with `last_day` and `age` (days before `last_day`), keeping ages `0..within`.
pub(crate) fn aged(rows: LazyFrame, last: LazyFrame, within: i32) -> LazyFrame {
    rows.join(
        last,
        [col("project")],
        [col("project")],
        JoinArgs::new(JoinType::Inner),
    )
    .with_column(
        (col("last_day").cast(DataType::Int32) - col("date").cast(DataType::Int32)).alias("age"),
    )
    .filter(col("age").gt_eq(lit(0)).and(col("age").lt(lit(within))))
}

/// The columns named, in this order (a table's columns as it is written).
pub(crate) fn named(names: &[&str]) -> Vec<Expr> {
    names.iter().map(|n| col(*n)).collect()
}

/// `a / b` as a float, null where `b` is zero (or null).
pub(crate) fn share(a: &str, b: &str) -> Expr {
    when(col(b).gt(lit(0)))
        .then(col(a).cast(DataType::Float64) / col(b).cast(DataType::Float64))
        .otherwise(lit(Null {}))
}

/// `now / before - 1`, null where `before` is zero or absent.
fn change(now: &str, before: &str) -> Expr {
    when(col(before).gt(lit(0)))
        .then(col(now).cast(DataType::Float64) / col(before).cast(DataType::Float64) - lit(1.0))
        .otherwise(lit(Null {}))
}

/// A date shifted by whole days.
pub(crate) fn plus_days(e: Expr, days: i32) -> Expr {
    (e.cast(DataType::Int32) + lit(days)).cast(DataType::Date)
}

/// A calendar-day rolling sum within each project over complete days (the frame is sorted by
/// project and date; a day not complete counts as nothing).
fn rolling(c: &str, days: u32, name: &str) -> PolarsResult<Expr> {
    let options = RollingOptionsDynamicWindow {
        window_size: polars::prelude::Duration::parse(&format!("{days}d")),
        min_periods: 1,
        closed_window: ClosedWindow::Right,
        fn_params: None,
    };
    Ok(when(col("complete"))
        .then(col(c))
        .otherwise(lit(0i64))
        .rolling_sum_by(col("date"), options)
        .over([col("project")])?
        .alias(name))
}

/// The daily table: counts, AI share, 7- and 28-day rolling sums and shares (over calendar days:
/// a day never exported counts as nothing), change against the same weekday a week before; a
/// day that is not complete (today) has its counts so far, `complete = false`, and no sums or
/// change.
pub fn daily(out: &Path, sel: &Selection, partial: &DataFrame) -> Result<LazyFrame, TrendsError> {
    daily_of(completed(scan(out, SITE_TOTALS, sel)?, partial, LEADING))
}

/// The windowed and compared columns of the daily table (null on a day not complete).
const DAILY_WINDOWS: [&str; 10] = [
    "human_7d",
    "ai_7d",
    "total_7d",
    "ai_share_7d",
    "human_28d",
    "ai_28d",
    "total_28d",
    "ai_share_28d",
    "total_week_before",
    "change_vs_week_before",
];

/// The daily table over a `site_totals` frame (with `project`, `date` and `complete`).
fn daily_of(site_totals: LazyFrame) -> Result<LazyFrame, TrendsError> {
    let base = site_totals
        .select([
            col("project"),
            col("date"),
            col("human"),
            col("ai"),
            col("total"),
            col("complete"),
            col("final").not().alias("provisional"),
        ])
        .sort(["project", "date"], SortMultipleOptions::default());
    let week_before = base.clone().filter(col("complete")).select([
        col("project"),
        plus_days(col("date"), 7).alias("date"),
        col("total").alias("total_week_before"),
    ]);
    let on = [col("project"), col("date")];
    Ok(base
        .with_columns([
            rolling("human", 7, "human_7d")?,
            rolling("ai", 7, "ai_7d")?,
            rolling("total", 7, "total_7d")?,
            rolling("human", 28, "human_28d")?,
            rolling("ai", 28, "ai_28d")?,
            rolling("total", 28, "total_28d")?,
        ])
        .join(week_before, on.clone(), on, JoinArgs::new(JoinType::Left))
        .with_columns([
            share("ai", "total").alias("ai_share"),
            share("ai_7d", "total_7d").alias("ai_share_7d"),
            share("ai_28d", "total_28d").alias("ai_share_28d"),
            change("total", "total_week_before").alias("change_vs_week_before"),
        ])
        .with_columns(DAILY_WINDOWS.map(if_complete))
        .select([
            col("project"),
            col("date"),
            col("human"),
            col("ai"),
            col("total"),
            col("ai_share"),
            col("human_7d"),
            col("ai_7d"),
            col("total_7d"),
            col("ai_share_7d"),
            col("human_28d"),
            col("ai_28d"),
            col("total_28d"),
            col("ai_share_28d"),
            col("total_week_before"),
            col("change_vs_week_before"),
            col("complete"),
            col("provisional"),
        ])
        .sort(["project", "date"], SortMultipleOptions::default()))
}

/// Per project and ISO week of `date`: `week_start` (its Monday), `iso_year`, `iso_week`,
/// `days` (the days of the week in the frame) and `aggs`.
pub(crate) fn by_iso_week(days: LazyFrame, aggs: Vec<Expr>) -> LazyFrame {
    let monday = col("date").cast(DataType::Int32)
        - (col("date").dt().weekday().cast(DataType::Int32) - lit(1));
    let mut all = vec![
        col("date").dt().iso_year().first().alias("iso_year"),
        col("date").dt().week().first().alias("iso_week"),
        col("date").count().cast(DataType::Int64).alias("days"),
    ];
    all.extend(aggs);
    days.with_column(monday.cast(DataType::Date).alias("week_start"))
        .group_by([col("project"), col("week_start")])
        .agg(all)
}

/// The weekly table: per project and ISO week, the same measures, `complete` when its 7 days
/// were exported whole, and change against the week before (null unless both are complete).
pub fn weekly(daily: LazyFrame) -> LazyFrame {
    let weeks = by_iso_week(
        daily,
        vec![
            col("human").sum(),
            col("ai").sum(),
            col("total").sum(),
            col("complete").all(true),
            col("provisional").any(true),
        ],
    )
    .with_column(
        col("complete")
            .and(col("days").eq(lit(7i64)))
            .alias("complete"),
    );
    let before = weeks.clone().select([
        col("project"),
        plus_days(col("week_start"), 7).alias("week_start"),
        col("total").alias("total_week_before"),
        col("complete").alias("complete_week_before"),
    ]);
    let on = [col("project"), col("week_start")];
    let full = col("complete").and(col("complete_week_before").fill_null(lit(false)));
    weeks
        .join(before, on.clone(), on, JoinArgs::new(JoinType::Left))
        .with_columns([
            share("ai", "total").alias("ai_share"),
            when(full)
                .then(change("total", "total_week_before"))
                .otherwise(lit(Null {}))
                .alias("change_vs_week_before"),
        ])
        .select([
            col("project"),
            col("iso_year"),
            col("iso_week"),
            col("week_start"),
            col("days"),
            col("human"),
            col("ai"),
            col("total"),
            col("ai_share"),
            col("total_week_before"),
            col("change_vs_week_before"),
            col("complete"),
            col("provisional"),
        ])
        .sort(["project", "week_start"], SortMultipleOptions::default())
}

/// The page table: per project and page, over the last 7 and 28 complete days up to the
/// project's last complete day and the windows of the same length before them: human, AI, total, AI share, the
/// change in views and in AI share, the rank by views, and the movers (pages whose AI share rose
/// most, among pages with at least `MOVER_MIN_VIEWS` views in both windows). Changes and movers
/// are null unless both windows were exported in full (`days_7d`, `days_prev_7d`, ...).
pub fn pages(out: &Path, sel: &Selection, partial: &DataFrame) -> Result<LazyFrame, TrendsError> {
    pages_in_parts(out, sel, partial, PAGE_ROWS_AT_ONCE)
}

/// [`pages`], summing the page views about `rows_at_once` rows at a time (a day at least): the
/// same table whatever the parts (the tests hold it to that with a day a part).
pub fn pages_in_parts(
    out: &Path,
    sel: &Selection,
    partial: &DataFrame,
    rows_at_once: i64,
) -> Result<LazyFrame, TrendsError> {
    pages_of(
        completed(scan(out, SITE_TOTALS, sel)?, partial, LEADING),
        completed(scan(out, PAGE_VIEWS, sel)?, partial, LEADING),
        rows_at_once,
    )
}

/// The page table over the frames of `site_totals` and of the pages' rows (with `project`,
/// `date` and `complete`: the days not complete are left out).
fn pages_of(
    site_totals: LazyFrame,
    rows: LazyFrame,
    rows_at_once: i64,
) -> Result<LazyFrame, TrendsError> {
    let rows = rows.filter(col("complete"));
    // The days summed at once: as many as hold about `rows_at_once` rows of the busiest day.
    let busiest = site_totals
        .clone()
        .filter(col("complete"))
        .group_by([col("date")])
        .agg([col("rows").sum()])
        .select([col("rows").max()])
        .collect()?;
    let busiest = busiest.column("rows")?.cast(&DataType::Int64)?;
    let at_once = (rows_at_once / busiest.i64()?.max().unwrap_or(1).max(1)).clamp(1, 56);
    let at_once = i32::try_from(at_once).unwrap_or(56);
    let days = site_totals.filter(col("complete")).select([
        col("project"),
        col("date"),
        col("final").not().alias("provisional"),
    ]);
    // The last day of each project, first: the page rows older than 56 days before the earliest
    // of them are never read (partition pruning on date).
    let last = days
        .clone()
        .group_by([col("project")])
        .agg([col("date").max().alias("last_day")])
        .collect()?;
    let lasts = last.column("last_day")?.cast(&DataType::Int32)?;
    // No complete day: no week to sum.
    let (earliest, latest) = match (lasts.i32()?.min(), lasts.i32()?.max()) {
        (Some(a), Some(b)) => (a, b),
        _ => (1, 0),
    };
    let last = last.lazy();
    let by_project = [col("project")];
    let coverage = coverage(days.clone(), last.clone());
    // Each page's sums, some days at a time: the 56 days of a large site (100,000 pages: 5.6
    // million rows) are never held at once, the sums by page of `at_once` days are, and they add
    // up. A site of a few thousand pages sums its 56 days at once (each part is one more scan).
    let mut weeks: Option<DataFrame> = None;
    let mut from = earliest - 55;
    while from <= latest {
        let to = from + at_once - 1;
        let week = rows
            .clone()
            .filter(col("date").gt_eq(day_lit(from)))
            .filter(col("date").lt_eq(day_lit(to)));
        let sums = page_sums(week, last.clone(), days.clone());
        // Each part added to the sums so far at once: a page's row at most twice, whatever
        // the number of parts.
        weeks = Some(match weeks {
            Some(all) => concat([all.lazy(), sums], UnionArgs::default())?
                .group_by([col("project"), col("path")])
                .agg(added_sums())
                .collect()?,
            None => sums.collect()?,
        });
        from = to + 1;
    }
    let weeks = weeks.map_or_else(|| empty_pages().map(DataFrame::lazy), |w| Ok(w.lazy()))?;
    // In path order: the ranks' ties go by path (an ordinal rank follows the rows' order), so
    // that a rank is the same whoever computes it (the dbt models too).
    let mut lf = weeks
        .group_by([col("project"), col("path")])
        .agg(added_sums())
        .join(
            coverage,
            by_project.clone(),
            by_project,
            JoinArgs::new(JoinType::Left),
        )
        .sort(["project", "path"], SortMultipleOptions::default());
    for w in [7, 28] {
        lf = with_changes(lf, w)?;
    }
    Ok(lf.sort(["project", "rank_7d"], SortMultipleOptions::default()))
}

/// The page-view rows the page table sums at once, at most (see [`pages_of`]): a site of 4,000
/// pages sums its 56 days at once, one of 14,000 in four parts (190 MiB peak for the whole
/// trends instead of 320 with a million rows), one of 100,000 a part of two days (`cargo bench
/// --bench trends_scale`).
const PAGE_ROWS_AT_ONCE: i64 = 250_000;

/// A day (days since 1970) as a date literal.
fn day_lit(day: i32) -> Expr {
    lit(day).cast(DataType::Date)
}

/// The pages' window sums ([`window_sums`]) of `rows` (some days of the page views), with each
/// row's age to its project's `last` day and the day's provisional mark from `days`.
fn page_sums(rows: LazyFrame, last: LazyFrame, days: LazyFrame) -> LazyFrame {
    let by_project = [col("project")];
    let by_day = [col("project"), col("date")];
    rows.join(
        last,
        by_project.clone(),
        by_project,
        JoinArgs::new(JoinType::Inner),
    )
    .join(days, by_day.clone(), by_day, JoinArgs::new(JoinType::Left))
    .with_column(age())
    .filter(col("age").lt(lit(56)))
    .group_by([col("project"), col("path")])
    .agg(window_sums())
}

/// [`window_sums`] of parts added up: the sums summed, `provisional` if any part's is.
fn added_sums() -> Vec<Expr> {
    let mut aggs = vec![col("last_day").first()];
    for w in [7, 28] {
        for c in ["human", "ai"] {
            aggs.push(col(format!("{c}_{w}d")).sum());
            aggs.push(col(format!("{c}_prev_{w}d")).sum());
        }
    }
    aggs.push(col("provisional").any(true));
    aggs
}

/// No page's sums: [`page_sums`]' columns, no row.
fn empty_pages() -> PolarsResult<DataFrame> {
    let rows = DataFrame::empty_with_schema(&Schema::from_iter([
        Field::new("project".into(), DataType::String),
        Field::new("path".into(), DataType::String),
        Field::new("date".into(), DataType::Date),
        Field::new("human".into(), DataType::Int64),
        Field::new("ai".into(), DataType::Int64),
    ]));
    let last = DataFrame::empty_with_schema(&Schema::from_iter([
        Field::new("project".into(), DataType::String),
        Field::new("last_day".into(), DataType::Date),
    ]));
    let days = DataFrame::empty_with_schema(&Schema::from_iter([
        Field::new("project".into(), DataType::String),
        Field::new("date".into(), DataType::Date),
        Field::new("provisional".into(), DataType::Boolean),
    ]));
    page_sums(rows.lazy(), last.lazy(), days.lazy()).collect()
}

/// A row's days before its project's last day.
fn age() -> Expr {
    (col("last_day").cast(DataType::Int32) - col("date").cast(DataType::Int32)).alias("age")
}

/// Days exported in each window and the one before it, per project (`days_7d`,
/// `days_prev_7d`, ...): a comparison needs both windows complete.
fn coverage(days: LazyFrame, last: LazyFrame) -> LazyFrame {
    let mut covered = Vec::new();
    for w in [7, 28] {
        let prev = col("age").gt_eq(lit(w)).and(col("age").lt(lit(2 * w)));
        covered.push(
            col("date")
                .filter(col("age").lt(lit(w)))
                .count()
                .cast(DataType::Int64)
                .alias(format!("days_{w}d")),
        );
        covered.push(
            col("date")
                .filter(prev)
                .count()
                .cast(DataType::Int64)
                .alias(format!("days_prev_{w}d")),
        );
    }
    days.join(
        last,
        [col("project")],
        [col("project")],
        JoinArgs::new(JoinType::Inner),
    )
    .with_column(age())
    .group_by([col("project")])
    .agg(covered)
}

/// A page's human and AI views in each window and the one before it, and whether its last 7
/// days hold a provisional one.
fn window_sums() -> Vec<Expr> {
    let mut aggs = vec![col("last_day").first()];
    for w in [7, 28] {
        let cur = col("age").lt(lit(w));
        let prev = col("age").gt_eq(lit(w)).and(col("age").lt(lit(2 * w)));
        for c in ["human", "ai"] {
            aggs.push(col(c).filter(cur.clone()).sum().alias(format!("{c}_{w}d")));
            aggs.push(
                col(c)
                    .filter(prev.clone())
                    .sum()
                    .alias(format!("{c}_prev_{w}d")),
            );
        }
    }
    aggs.push(
        col("provisional")
            .filter(col("age").lt(lit(7)))
            .any(true)
            .alias("provisional"),
    );
    aggs
}

/// A window's totals, AI shares, change (both windows complete), rank by views, and the rise
/// of the AI share with its rank (both windows complete and busy enough); ties rank in the
/// frame's order.
fn with_changes(lf: LazyFrame, w: i64) -> Result<LazyFrame, TrendsError> {
    let desc = RankOptions {
        method: RankMethod::Ordinal,
        descending: true,
    };
    let (t, tp) = (format!("total_{w}d"), format!("total_prev_{w}d"));
    let lf = lf.with_columns([
        (col(format!("human_{w}d")) + col(format!("ai_{w}d"))).alias(&t),
        (col(format!("human_prev_{w}d")) + col(format!("ai_prev_{w}d"))).alias(&tp),
    ]);
    let complete = col(format!("days_{w}d"))
        .eq(lit(w))
        .and(col(format!("days_prev_{w}d")).eq(lit(w)));
    let lf = lf.with_columns([
        share(&format!("ai_{w}d"), &t).alias(format!("ai_share_{w}d")),
        share(&format!("ai_prev_{w}d"), &tp).alias(format!("ai_share_prev_{w}d")),
        when(complete.clone())
            .then(change(&t, &tp))
            .otherwise(lit(Null {}))
            .alias(format!("change_{w}d")),
        col(&t)
            .rank(desc, None)
            .over([col("project")])?
            .alias(format!("rank_{w}d")),
    ]);
    let eligible = complete
        .and(col(&t).gt_eq(lit(MOVER_MIN_VIEWS)))
        .and(col(&tp).gt_eq(lit(MOVER_MIN_VIEWS)));
    let rise = col(format!("ai_share_{w}d")) - col(format!("ai_share_prev_{w}d"));
    Ok(lf
        .with_column(
            when(eligible)
                .then(rise)
                .otherwise(lit(Null {}))
                .alias(format!("ai_share_rise_{w}d")),
        )
        .with_column(
            col(format!("ai_share_rise_{w}d"))
                .rank(desc, None)
                .over([col("project")])?
                .alias(format!("mover_rank_{w}d")),
        ))
}

/// One trend table of `name` alone, computed from its own sources (what an agent job's impact
/// measures: the rule's table over the days before or after), in the tables' one set of types.
/// polars runs on a thread of its own, so that this is callable from anywhere.
pub fn table(out: &Path, name: &str, sel: &Selection) -> Result<DataFrame, TrendsError> {
    tracing::debug!(target: TARGET, output = %out.display(), table = name, "one trend table computed");
    std::thread::scope(|s| {
        joined(
            s.spawn(|| -> Result<DataFrame, TrendsError> {
                let partial = partial_days(out, sel)?;
                let df = match name {
                    name::DAILY_TREND => daily(out, sel, &partial)?.collect()?,
                    name::WEEKLY_TREND => weekly(daily(out, sel, &partial)?).collect()?,
                    name::PAGES_TREND => pages(out, sel, &partial)?.collect()?,
                    gap => gaps::table(out, gap, sel, &partial)?,
                };
                Ok(arrow::typed(df)?)
            }),
            "the trend table's computation",
        )
    })
}

/// Computes the tables. polars blocks in place, which a single-threaded tokio runtime forbids,
/// so the work runs on a thread of its own: callable from anywhere.
pub fn compute(out: &Path, sel: &Selection) -> Result<Tables, TrendsError> {
    tracing::debug!(target: TARGET, output = %out.display(), "trend tables computed");
    std::thread::scope(|s| joined(s.spawn(|| compute_here(out, sel)), "the trends computation"))
}

/// A scoped thread's result; a thread that panicked gives a polars compute error saying that
/// `what` panicked.
pub(crate) fn joined<T, E: From<PolarsError>>(
    thread: std::thread::ScopedJoinHandle<'_, Result<T, E>>,
    what: &str,
) -> Result<T, E> {
    thread.join().unwrap_or_else(|_| {
        Err(PolarsError::ComputeError(format!("{what} panicked").into()).into())
    })
}

/// The tables of an output folder with nothing exported: no rows, the real columns and types
/// (what rule queries are checked against before there is data).
pub fn empty_tables() -> Result<Tables, TrendsError> {
    std::thread::scope(|s| joined(s.spawn(empty_here), "the trends computation"))
}

fn empty_here() -> Result<Tables, TrendsError> {
    let frame = |fields: Vec<(&str, DataType)>| {
        let mut schema = Schema::default();
        for (name, dtype) in fields {
            schema.insert(name.into(), dtype);
        }
        DataFrame::empty_with_schema(&schema).lazy()
    };
    let at = DataType::Datetime(TimeUnit::Microseconds, Some(TimeZone::UTC));
    let keys = || [("project", DataType::String), ("date", DataType::Date)];
    let counts = || {
        [
            ("human", DataType::Int64),
            ("ai", DataType::Int64),
            ("total", DataType::Int64),
        ]
    };
    let mut site: Vec<_> = counts().into_iter().collect();
    site.extend([
        ("rows", DataType::Int64),
        ("fetched_at", at.clone()),
        ("final", DataType::Boolean),
        ("complete", DataType::Boolean),
    ]);
    site.extend(keys());
    let mut views = vec![("path", DataType::String)];
    views.extend(counts());
    views.extend([("fetched_at", at), ("complete", DataType::Boolean)]);
    views.extend(keys());
    let daily = daily_of(frame(site.clone()))?.collect()?;
    let weekly = weekly(daily.clone().lazy()).collect()?;
    let pages = pages_of(frame(site), frame(views), PAGE_ROWS_AT_ONCE)?.collect()?;
    Ok(Tables {
        daily,
        weekly,
        pages,
        gaps: gaps::empty()?,
    }
    .typed()?)
}

/// The tables the trends read, by name in the output folder.
fn sources() -> Vec<&'static str> {
    let mut tables = vec![SITE_TOTALS, PAGE_VIEWS];
    tables.extend(gaps::SOURCES);
    tables
}

fn compute_here(out: &Path, sel: &Selection) -> Result<Tables, TrendsError> {
    // A project at a time: every table is per project (sorted by project first), and the
    // memory grows with the largest project, not with the lake (measured: `cargo bench
    // --bench trends_scale`). The projects in order, so the tables stacked are in order too.
    let mut projects = docpipe_catalog::layout::projects_of(out, &sources());
    if !sel.projects.is_empty() {
        projects.retain(|p| sel.projects.contains(p));
    }
    let mut stacked: Option<Tables> = None;
    for project in projects {
        let one = Selection {
            projects: vec![project],
            ..sel.clone()
        };
        let tables = compute_of(out, &one)?;
        match &mut stacked {
            None => stacked = Some(tables),
            Some(all) => all.stack(tables)?,
        }
    }
    match stacked {
        Some(mut t) if t.daily.height() > 0 => {
            for (_, df) in t.named() {
                df.rechunk_mut();
            }
            Ok(t)
        }
        _ => Err(TrendsError::NoData(out.display().to_string())),
    }
}

/// The tables of the selection's projects, computed at once.
fn compute_of(out: &Path, sel: &Selection) -> Result<Tables, TrendsError> {
    // The docs gaps (many small files) are read while the page-view tables are computed.
    let partial = partial_days(out, sel)?;
    std::thread::scope(|s| {
        let gaps = s.spawn(|| gaps::compute(out, sel, &partial));
        let daily = daily(out, sel, &partial)?.collect()?;
        let weekly = weekly(daily.clone().lazy()).collect()?;
        let pages = pages(out, sel, &partial)?.collect()?;
        let gaps = joined(gaps, "the docs gaps computation")?;
        Ok(Tables {
            daily,
            weekly,
            pages,
            gaps,
        }
        .typed()?)
    })
}

/// Writes a frame as Parquet (in the raw tables' types: [`arrow`]) or CSV under a temporary
/// name, then renames it into place.
fn write(df: &mut DataFrame, path: &Path) -> Result<(), TrendsError> {
    let io = |source| TrendsError::Io {
        path: path.display().to_string(),
        source,
    };
    if path.extension().is_none_or(|e| e != "csv") {
        return arrow::write_parquet(df, path)?
            .commit()
            .map(|_| ())
            .map_err(io);
    }
    let (pending, file) = Pending::create(path).map_err(io)?;
    match CsvWriter::new(file).include_header(true).finish(df) {
        Ok(()) => pending.commit().map(|_| ()).map_err(io),
        Err(e) => {
            pending.abandon();
            Err(e.into())
        }
    }
}

/// Writes `trends/{daily,weekly,pages}.{parquet,csv}`, the gap tables beside them, and the
/// charts; returns the files.
pub fn write_tables(out: &Path, tables: &mut Tables) -> Result<Vec<PathBuf>, TrendsError> {
    let dir = out.join("trends");
    std::fs::create_dir_all(&dir).map_err(|source| TrendsError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let mut written = Vec::new();
    for (name, df) in tables.named() {
        for ext in ["parquet", "csv"] {
            let path = dir.join(format!("{name}.{ext}"));
            write(df, &path)?;
            written.push(path);
        }
    }
    written.extend(chart::write_charts(out, &tables.daily)?);
    written.extend(chart::write_gap_charts(out, &tables.gaps)?);
    Ok(written)
}

/// One project's last 7 days against the 7 before.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectSummary {
    /// Project.
    pub project: String,
    /// Last complete day in the data (the day the 7 days end).
    pub last_day: NaiveDate,
    /// A day after it that is not complete (today, in the project's time zone) and its views
    /// so far: never inside the 7 days.
    pub so_far: Option<(NaiveDate, i64)>,
    /// Views in the last 7 days and the 7 before.
    pub total: (i64, i64),
    /// AI share in the last 7 days and the 7 before (None without views).
    pub ai_share: (Option<f64>, Option<f64>),
    /// Provisional days among the last 7.
    pub provisional_days: usize,
    /// Days of the 14 that were never exported.
    pub missing_days: Vec<NaiveDate>,
    /// Pages whose AI share rose most over the last 7 days.
    pub movers: Vec<Mover>,
}

/// A page whose AI share rose.
#[derive(Debug, Clone, PartialEq)]
pub struct Mover {
    /// 1 for the largest rise.
    pub rank: u32,
    /// Page path.
    pub path: String,
    /// AI share in the 7 days before.
    pub before: f64,
    /// AI share in the last 7 days.
    pub now: f64,
}

/// The top three movers of each project from the page table.
fn movers(pages: &DataFrame) -> Result<std::collections::HashMap<String, Vec<Mover>>, TrendsError> {
    let project = pages.column("project")?.str()?.clone();
    let path = pages.column("path")?.str()?.clone();
    let rank = pages.column("mover_rank_7d")?.cast(&DataType::UInt32)?;
    let rank = rank.u32()?;
    let before = pages.column("ai_share_prev_7d")?.f64()?.clone();
    let now = pages.column("ai_share_7d")?.f64()?.clone();
    let mut out: std::collections::HashMap<String, Vec<Mover>> = Default::default();
    for i in 0..pages.height() {
        if let (Some(p), Some(path), Some(r), Some(b), Some(n)) = (
            project.get(i),
            path.get(i),
            rank.get(i),
            before.get(i),
            now.get(i),
        ) && r <= 3
        {
            let mover = Mover {
                rank: r,
                path: path.to_string(),
                before: b,
                now: n,
            };
            out.entry(p.to_string()).or_default().push(mover);
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|m| m.rank);
    }
    Ok(out)
}

/// Summarises the tables per project.
pub fn summarize(tables: &Tables) -> Result<Vec<ProjectSummary>, TrendsError> {
    let mut top = movers(&tables.pages)?;
    let daily = &tables.daily;
    let projects = daily.column("project")?.str()?.clone();
    let dates = daily.column("date")?.cast(&DataType::Int32)?;
    let dates = dates.i32()?;
    let total = daily.column("total")?.i64()?.clone();
    let ai = daily.column("ai")?.i64()?.clone();
    let provisional = daily.column("provisional")?.bool()?.clone();
    let complete = daily.column("complete")?.bool()?.clone();
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let mut by_project: std::collections::BTreeMap<String, Vec<(NaiveDate, i64, i64, bool)>> =
        Default::default();
    let mut so_far: std::collections::BTreeMap<String, (NaiveDate, i64)> = Default::default();
    for i in 0..daily.height() {
        let (Some(p), Some(d)) = (projects.get(i), dates.get(i)) else {
            continue;
        };
        let day = epoch + chrono::Duration::days(i64::from(d));
        if !complete.get(i).unwrap_or(true) {
            let latest = so_far.entry(p.to_string()).or_insert((day, 0));
            if day >= latest.0 {
                *latest = (day, total.get(i).unwrap_or(0));
            }
            continue;
        }
        by_project.entry(p.to_string()).or_default().push((
            day,
            total.get(i).unwrap_or(0),
            ai.get(i).unwrap_or(0),
            provisional.get(i).unwrap_or(false),
        ));
    }
    let mut out = Vec::new();
    for (project, days) in by_project {
        let Some(last_day) = days.iter().map(|d| d.0).max() else {
            continue;
        };
        let span = |from: i64, to: i64| {
            days.iter().filter(move |d| {
                let age = (last_day - d.0).num_days();
                (from..=to).contains(&age)
            })
        };
        let sums = |from, to| span(from, to).fold((0i64, 0i64), |(t, a), d| (t + d.1, a + d.2));
        let ((t_now, a_now), (t_before, a_before)) = (sums(0, 6), sums(7, 13));
        let share = |a: i64, t: i64| (t > 0).then(|| a as f64 / t as f64);
        out.push(ProjectSummary {
            last_day,
            so_far: so_far.remove(&project).filter(|d| d.0 > last_day),
            total: (t_now, t_before),
            ai_share: (share(a_now, t_now), share(a_before, t_before)),
            provisional_days: span(0, 6).filter(|d| d.3).count(),
            missing_days: (0..14)
                .rev()
                .map(|age| last_day - chrono::Duration::days(age))
                .filter(|d| !days.iter().any(|x| x.0 == *d))
                .collect(),
            movers: top.remove(&project).unwrap_or_default(),
            project,
        });
    }
    Ok(out)
}

/// A share as a percentage with one decimal, `n/a` without one.
pub(crate) fn pct(share: Option<f64>) -> String {
    share.map_or("n/a".to_string(), |v| format!("{:.1}%", v * 100.0))
}

/// The terminal summary.
pub fn describe(summaries: &[ProjectSummary]) -> String {
    let mut out = String::from("trends: the last 7 complete days against the 7 before\n");
    for s in summaries {
        // A change only between two complete weeks (a first run's week of one day against
        // nothing says nothing).
        let change = if !s.missing_days.is_empty() {
            "no change: the two weeks are not both exported".to_string()
        } else if s.total.1 > 0 {
            format!(
                "{:+.1}%",
                (s.total.0 as f64 / s.total.1 as f64 - 1.0) * 100.0
            )
        } else {
            "n/a".to_string()
        };
        out += &format!(
            "  {} (to {}): {} views ({change}), AI share {} (was {})",
            s.project,
            s.last_day,
            s.total.0,
            pct(s.ai_share.0),
            pct(s.ai_share.1)
        );
        if s.provisional_days > 0 {
            out += &format!(", {} provisional days", s.provisional_days);
        }
        if !s.missing_days.is_empty() {
            let days: Vec<String> = s.missing_days.iter().map(|d| d.to_string()).collect();
            out += &format!(", not exported: {}", days.join(", "));
        }
        if let Some((day, views)) = s.so_far {
            out += &format!("; {day} is not over: {views} views so far");
        }
        out.push('\n');
        for m in &s.movers {
            let (before, now) = (m.before * 100.0, m.now * 100.0);
            out += &format!(
                "      AI share rising: {} {before:.1}% -> {now:.1}%\n",
                docpipe_catalog::text::one_line(&m.path)
            );
        }
    }
    out
}
