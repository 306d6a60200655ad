//! Page views: per project and day, every page's views split into human readers and AI agents
//! (`page_views`), and the day's site totals (`site_totals`), fetched by an offset walk.
//! The page decoder (with its fast reader) is `api::views`.

mod walk;

pub use walk::ViewWalk;

use super::parquet::{WriteError, write_batch};
use super::{Dataset, Estimate, Paging, Table, Windowing};
use crate::api::views::{Counts, PAGE_LIMIT, Reject, Rows, ViewRow, ViewsPage};
use crate::layout::{PART, Pending, partition_dir};
use arrow_array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, NaiveDate, Utc};
use docpipe_catalog::{datasets, tables};
use std::collections::HashSet;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// The table of per-page rows.
pub const PAGE_VIEWS: &str = tables::PAGE_VIEWS.name;
/// The table of site totals.
pub const SITE_TOTALS: &str = tables::SITE_TOTALS.name;
/// The table of rows set aside (a count docpipe cannot store faithfully), with their JSON.
pub const REJECTS: &str = tables::REJECTS.name;

/// The page-view dataset.
#[derive(Debug, Clone, Copy)]
pub struct PageViews;

static TABLES: [Table; 3] = [
    super::shape::table(&tables::PAGE_VIEWS, page_views_schema),
    super::shape::table(&tables::SITE_TOTALS, site_totals_schema),
    // Only for the days that had rows set aside.
    super::shape::table(&tables::REJECTS, rejects_schema),
];

impl Dataset for PageViews {
    fn name(&self) -> &'static str {
        datasets::PAGE_VIEWS
    }
    fn endpoint(&self) -> &'static str {
        "/v1/analytics/{project}/views"
    }
    fn paging(&self) -> Paging {
        Paging::Offset { limit: PAGE_LIMIT }
    }
    fn windowing(&self) -> Windowing {
        Windowing::Daily
    }
    fn tables(&self) -> &'static [Table] {
        &TABLES
    }
    fn estimate(&self) -> Estimate {
        Estimate::Pages
    }
    fn names_itself(&self) -> bool {
        true
    }
    fn walker(&'static self) -> crate::dataset::Walker {
        crate::dataset::Walker::Views
    }
    fn written_days(&self, root: &Path, project: &str) -> std::collections::HashSet<NaiveDate> {
        let totals = crate::layout::partition_days(root, SITE_TOTALS, project);
        crate::layout::partition_days(root, PAGE_VIEWS, project)
            .into_iter()
            .filter(|d| totals.contains(d))
            .collect()
    }
}

/// Schema of `rejects`: the page's offset, the row's JSON, why it was set aside.
pub fn rejects_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("page_offset", DataType::Int64, false),
        Field::new("raw", DataType::Utf8, false),
        Field::new("reason", DataType::Utf8, false),
        Field::new("fetched_at", ts_type(), false),
    ]))
}

/// Writes the `rejects` partition of a window (not yet in place): `(page offset, row)`.
pub fn write_rejects(
    root: &Path,
    project: &str,
    day: NaiveDate,
    rejects: &[(u64, &Reject)],
    fetched_at: DateTime<Utc>,
) -> Result<Pending, WriteError> {
    let dir = partition_dir(root, REJECTS, project, day);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            rejects.iter().map(|(o, _)| *o as i64),
        )),
        Arc::new(StringArray::from_iter_values(
            rejects.iter().map(|(_, r)| r.raw.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rejects.iter().map(|(_, r)| r.reason.as_str()),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(vec![micros(fetched_at); rejects.len()])
                .with_timezone("UTC"),
        ),
    ];
    let batch = RecordBatch::try_new(rejects_schema(), cols).map_err(|e| WriteError::Encode {
        path: dir.display().to_string(),
        message: e.to_string(),
    })?;
    write_batch(&dir, &batch)
}

/// Removes a window's `rejects` partition left by an earlier fetch of the day (the new one had
/// none).
pub fn remove_rejects(root: &Path, project: &str, day: NaiveDate) -> Result<(), WriteError> {
    let dir = partition_dir(root, REJECTS, project, day);
    super::parquet::remove_partition(&dir)?;
    // An emptied project folder goes too, and an emptied table folder.
    if let Some(project_dir) = dir.parent() {
        let _ = std::fs::remove_dir(project_dir);
        if let Some(table) = project_dir.parent() {
            let _ = std::fs::remove_dir(table);
        }
    }
    Ok(())
}

/// The rows of a window's pages with each path once (its first row): a path on two pages (the
/// service's order moved during the walk) must not count twice in a reader's sums. `None`
/// when no path repeats.
pub fn first_of_each_path(pages: &[&Rows]) -> Option<Rows> {
    let n: usize = pages.iter().map(|p| p.len()).sum();
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(n, foldhash::fast::RandomState::default());
    if pages
        .iter()
        .flat_map(|p| p.iter())
        .all(|r| seen.insert(r.path))
    {
        return None;
    }
    seen.clear();
    let mut out = Rows::with_capacity(n, pages.iter().map(|p| p.path_bytes().len()).sum());
    for r in pages.iter().flat_map(|p| p.iter()) {
        if seen.insert(r.path) {
            out.push(r.path, r.human, r.ai, r.total);
        }
    }
    Some(out)
}

fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Schema of `page_views`.
pub fn page_views_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("human", DataType::Int64, false),
        Field::new("ai", DataType::Int64, false),
        Field::new("total", DataType::Int64, false),
        Field::new("fetched_at", ts_type(), false),
    ]))
}

/// Schema of `site_totals`.
pub fn site_totals_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("human", DataType::Int64, false),
        Field::new("ai", DataType::Int64, false),
        Field::new("total", DataType::Int64, false),
        Field::new("rows", DataType::Int64, false),
        Field::new("fetched_at", ts_type(), false),
        Field::new("final", DataType::Boolean, false),
        Field::new("unlisted", DataType::Int64, true),
    ]))
}

/// Writes the `page_views` partition of a window (not yet in place) from its pages' rows, in
/// order: each column is copied page by page into one Arrow buffer.
pub fn write_page_views(
    root: &Path,
    project: &str,
    day: NaiveDate,
    pages: &[&Rows],
    fetched_at: DateTime<Utc>,
) -> Result<Pending, WriteError> {
    let dir = partition_dir(root, PAGE_VIEWS, project, day);
    let encode = |message: String| WriteError::Encode {
        path: dir.display().to_string(),
        message,
    };
    let n: usize = pages.iter().map(|p| p.len()).sum();
    let bytes: usize = pages.iter().map(|p| p.path_bytes().len()).sum();
    let mut offsets: Vec<i32> = Vec::with_capacity(n + 1);
    offsets.push(0);
    let mut values: Vec<u8> = Vec::with_capacity(bytes);
    let int = |col: fn(&Rows) -> &[i64]| {
        let mut v = Vec::with_capacity(n);
        for p in pages {
            v.extend_from_slice(col(p));
        }
        Int64Array::from(v)
    };
    for p in pages {
        let base = i32::try_from(values.len()).map_err(|_| encode("paths over 2 GiB".into()))?;
        offsets.extend(p.path_ends().iter().map(|&e| base + e as i32));
        values.extend_from_slice(p.path_bytes().as_bytes());
    }
    let paths = StringArray::try_new(
        arrow_buffer::OffsetBuffer::new(offsets.into()),
        values.into(),
        None,
    )
    .map_err(|e| encode(e.to_string()))?;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(paths),
        Arc::new(int(Rows::human)),
        Arc::new(int(Rows::ai)),
        Arc::new(int(Rows::total)),
        Arc::new(TimestampMicrosecondArray::from(vec![micros(fetched_at); n]).with_timezone("UTC")),
    ];
    let batch =
        RecordBatch::try_new(page_views_schema(), cols).map_err(|e| encode(e.to_string()))?;
    write_batch(&dir, &batch)
}

/// A day's `site_totals` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteTotals {
    /// The service's totals.
    pub totals: Counts,
    /// Rows written.
    pub rows: i64,
    /// Views the totals count beyond the rows (`None`: unknown).
    pub unlisted: Option<i64>,
    /// The day can no longer change.
    pub is_final: bool,
}

/// Writes the `site_totals` partition of a window (not yet in place).
pub fn write_site_totals(
    root: &Path,
    project: &str,
    day: NaiveDate,
    site: &SiteTotals,
    fetched_at: DateTime<Utc>,
) -> Result<Pending, WriteError> {
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![site.totals.human])),
        Arc::new(Int64Array::from(vec![site.totals.ai])),
        Arc::new(Int64Array::from(vec![site.totals.total])),
        Arc::new(Int64Array::from(vec![site.rows])),
        Arc::new(TimestampMicrosecondArray::from(vec![micros(fetched_at)]).with_timezone("UTC")),
        Arc::new(BooleanArray::from(vec![site.is_final])),
        Arc::new(Int64Array::from(vec![site.unlisted])),
    ];
    let dir = partition_dir(root, SITE_TOTALS, project, day);
    let batch =
        RecordBatch::try_new(site_totals_schema(), cols).map_err(|e| WriteError::Encode {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
    write_batch(&dir, &batch)
}

/// A page kept until its window is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPage {
    /// Offset.
    pub offset: u64,
    /// Contents.
    pub page: ViewsPage,
}

/// The bytes before a kept page's rows: offset, `hasMore`, totals, the rows' length.
const KEPT_FIXED: usize = 8 + 1 + 24 + 4;

impl StoredPage {
    /// The page as the walk's page store keeps it: the offset (u64 LE), `hasMore` (u8, and 2
    /// when the page left its totals out), the
    /// totals (3 x i64 LE), the rows' length (u32 LE) and the rows (see [`encode_rows`]), then
    /// the rows set aside: their number (u32 LE), and per row its JSON and reason, each a
    /// length (u32 LE) and UTF-8.
    pub fn keep(&self) -> Vec<u8> {
        let page = &self.page;
        let rows = encode_rows(&page.views);
        let set_aside: usize = page
            .rejects
            .iter()
            .map(|r| 8 + r.raw.len() + r.reason.len())
            .sum();
        let mut out = Vec::with_capacity(KEPT_FIXED + rows.len() + 4 + set_aside);
        out.extend_from_slice(&self.offset.to_le_bytes());
        // Bit 0: hasMore; bit 1: the page left its totals out (zeros follow).
        out.push(u8::from(page.has_more) | (u8::from(page.totals.is_none()) << 1));
        let totals = page.totals.unwrap_or_default();
        for v in [totals.human, totals.ai, totals.total] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        out.extend_from_slice(&rows);
        out.extend_from_slice(&(page.rejects.len() as u32).to_le_bytes());
        for r in &page.rejects {
            for text in [&r.raw, &r.reason] {
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
        out
    }

    /// The inverse of [`StoredPage::keep`]; `None` when the bytes are not a kept page.
    pub fn unkeep(b: &[u8]) -> Option<Self> {
        let fixed = b.get(..KEPT_FIXED)?;
        let int = |i: usize| i64::from_le_bytes(fixed[i..i + 8].try_into().unwrap_or_default());
        let totals = Counts {
            human: int(9),
            ai: int(17),
            total: int(25),
        };
        let rows_len = u32::from_le_bytes(fixed[33..37].try_into().ok()?) as usize;
        let views = decode_rows(b.get(KEPT_FIXED..KEPT_FIXED + rows_len)?)?;
        let mut rest = b.get(KEPT_FIXED + rows_len..)?;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
            rest = tail;
            Some(head)
        };
        let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
        let mut rejects = Vec::new();
        for _ in 0..count {
            let mut text = || -> Option<String> {
                let n = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
                String::from_utf8(take(n)?.to_vec()).ok()
            };
            let raw = text()?;
            let reason = text()?;
            rejects.push(Reject { raw, reason });
        }
        if !rest.is_empty() {
            return None;
        }
        Some(StoredPage {
            offset: u64::from_le_bytes(fixed[..8].try_into().ok()?),
            page: ViewsPage {
                totals: (fixed[8] & 2 == 0).then_some(totals),
                views,
                rejects,
                has_more: fixed[8] & 1 != 0,
            },
        })
    }
}

/// Rows as compact bytes: per row, path length (u32 LE), path, human, ai, total (i64 LE).
pub fn encode_rows(rows: &Rows) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows.len() * 28 + rows.path_bytes().len());
    for r in rows.iter() {
        out.extend_from_slice(&(r.path.len() as u32).to_le_bytes());
        out.extend_from_slice(r.path.as_bytes());
        for v in [r.human, r.ai, r.total] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// The inverse of `encode_rows`; `None` when the bytes are damaged.
pub fn decode_rows(mut b: &[u8]) -> Option<Rows> {
    let mut out = Rows::default();
    while !b.is_empty() {
        let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let path = std::str::from_utf8(b.get(4..4 + n)?).ok()?;
        b = &b[4 + n..];
        let mut v = [0i64; 3];
        for x in &mut v {
            *x = i64::from_le_bytes(b.get(..8)?.try_into().ok()?);
            b = &b[8..];
        }
        out.push(path, v[0], v[1], v[2]);
    }
    Some(out)
}

/// The quality checks of a complete walk: pages contiguous from 0, the same totals on every page,
/// no path twice, and rows that sum to the totals.
pub fn check(pages: &[StoredPage]) -> Result<(), String> {
    for (i, p) in pages.iter().enumerate() {
        if p.offset != i as u64 * u64::from(PAGE_LIMIT) {
            return Err(format!("page at offset {} is out of sequence", p.offset));
        }
    }
    if pages.last().is_none_or(|p| p.page.has_more) {
        return Err("walk incomplete".into());
    }
    // The first page's totals stand (the walk refuses a first page without them); a later
    // page may leave them out.
    let totals = pages[0].page.totals.unwrap_or_default();
    if let Some((p, t)) = pages
        .iter()
        .find_map(|p| p.page.totals.filter(|t| *t != totals).map(|t| (p, t)))
    {
        return Err(format!(
            "totals changed during the walk (offset {}: {} views, offset 0: {})",
            p.offset, t.total, totals.total
        ));
    }
    let rows: usize = pages.iter().map(|p| p.page.views.len()).sum();
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(rows, foldhash::fast::RandomState::default());
    for r in pages.iter().flat_map(|p| p.page.views.iter()) {
        if !seen.insert(r.path) {
            return Err(format!("path {} appears twice", r.path));
        }
    }
    // Summed in 128 bits (no row count overflows them), column by column; a sum past 64 bits
    // is reported with the row that took it there.
    let column = |col: fn(&Rows) -> &[i64]| -> i128 {
        pages
            .iter()
            .map(|p| {
                col(&p.page.views)
                    .iter()
                    .map(|&v| i128::from(v))
                    .sum::<i128>()
            })
            .sum()
    };
    let wide = [column(Rows::human), column(Rows::ai), column(Rows::total)];
    if let Some(i) = wide.iter().position(|&w| i64::try_from(w).is_err()) {
        let (what, col): (&str, fn(&Rows) -> &[i64]) = match i {
            0 => ("human", Rows::human),
            1 => ("ai", Rows::ai),
            _ => ("total", Rows::total),
        };
        let mut sum = 0i64;
        for p in pages {
            for (j, &v) in col(&p.page.views).iter().enumerate() {
                sum = sum.checked_add(v).ok_or_else(|| {
                    format!(
                        "the rows' {what} views overflow a 64-bit count (at path {})",
                        p.page.views.path(j)
                    )
                })?;
            }
        }
    }
    let sum = Counts {
        human: wide[0] as i64,
        ai: wide[1] as i64,
        total: wide[2] as i64,
    };
    // Totals above the rows are views without a listed path (the file never says the rows
    // add up to the site's totals): kept as `unlisted`. Rows above the totals are not.
    let under = sum.human <= totals.human && sum.ai <= totals.ai && sum.total <= totals.total;
    if !under {
        return Err(format!(
            "rows sum to {} human + {} ai = {}, more than the totals say, {} + {} = {}",
            sum.human, sum.ai, sum.total, totals.human, totals.ai, totals.total
        ));
    }
    Ok(())
}

/// The views a walk's totals count beyond its rows (see [`check`]): the first page's total
/// less the rows' totals.
pub fn unlisted(pages: &[StoredPage], rows: &[&Rows]) -> i64 {
    let total = pages
        .first()
        .and_then(|p| p.page.totals)
        .map_or(0, |t| t.total);
    let sum: i128 = rows
        .iter()
        .flat_map(|r| r.total().iter())
        .map(|&v| i128::from(v))
        .sum();
    i64::try_from(i128::from(total) - sum).unwrap_or(0)
}

/// The views a day's totals count beyond the rows of its `page_views` partition (none
/// written: all of them), for a day made final on a probe.
pub fn unlisted_of_partition(
    root: &Path,
    project: &str,
    day: NaiveDate,
    total: i64,
) -> Option<i64> {
    let file = partition_dir(root, PAGE_VIEWS, project, day).join(PART);
    if !file.is_file() {
        return Some(total);
    }
    let rows = read_page_views(&file).ok()?;
    let sum: i64 = rows.iter().map(|r| r.total).sum();
    Some(total - sum)
}

/// A project's day of page views as written, the most viewed page first (the demo's preview).
pub fn most_viewed(root: &Path, project: &str, day: NaiveDate) -> Result<Vec<ViewRow>, String> {
    let mut rows = read_page_views(&partition_dir(root, PAGE_VIEWS, project, day).join(PART))?;
    rows.sort_by(|a, b| b.total.cmp(&a.total).then(a.path.cmp(&b.path)));
    Ok(rows)
}

/// Reads a `page_views` partition back (for the demo's preview and for tests).
pub fn read_page_views(file: &Path) -> Result<Vec<ViewRow>, String> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let f = File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .and_then(|b| b.build())
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        let col = |i: usize| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .cloned()
                .ok_or("not int64")
        };
        let paths = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or("path is not a string")?;
        let (h, a, t) = (col(1)?, col(2)?, col(3)?);
        for i in 0..batch.num_rows() {
            out.push(ViewRow {
                path: paths.value(i).to_string(),
                human: h.value(i),
                ai: a.value(i),
                total: t.value(i),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(n: usize, has_more: bool) -> ViewsPage {
        ViewsPage {
            totals: Some(Counts {
                human: 7,
                ai: 3,
                total: 10,
            }),
            views: (0..n)
                .map(|i| ViewRow {
                    path: format!("/p{i}"),
                    human: i as i64,
                    ai: 1,
                    total: i as i64 + 1,
                })
                .collect(),
            rejects: if n == 2 {
                vec![Reject {
                    raw: r#"{"path":"/x","human":-1}"#.into(),
                    reason: "count -1 is negative".into(),
                }]
            } else {
                Vec::new()
            },
            has_more,
        }
    }

    #[test]
    fn rows_round_trip_through_the_compact_encoding() {
        let rows: Rows = [
            ViewRow {
                path: "/a/é".into(),
                human: 1,
                ai: 2,
                total: 3,
            },
            ViewRow {
                path: String::new(),
                human: i64::MAX,
                ai: 0,
                total: i64::MAX,
            },
        ]
        .into_iter()
        .collect();
        assert_eq!(decode_rows(&encode_rows(&rows)).unwrap(), rows);
        let bytes = encode_rows(&rows);
        assert_eq!(decode_rows(&bytes[..bytes.len() - 1]), None);
    }

    #[test]
    fn a_kept_page_reads_back_whole_and_a_cut_one_not_at_all() {
        for (offset, p) in [
            (0, page(3, true)),
            (250, page(2, false)),
            (500, page(0, false)),
        ] {
            let kept = StoredPage { offset, page: p };
            let bytes = kept.keep();
            assert_eq!(StoredPage::unkeep(&bytes), Some(kept.clone()));
            for cut in 0..bytes.len() {
                assert_eq!(StoredPage::unkeep(&bytes[..cut]), None, "cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(StoredPage::unkeep(&longer), None);
        }
    }
}
