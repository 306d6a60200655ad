//! What the datasets described by a [`Shape`] bring to the window path (`export/window.rs`):
//! their page (decoded by the shape, its body kept in the state), paging by offset, cursor or a
//! single request with its guards (a cursor that repeats, an empty page that says there is
//! more), their checks (a row sent twice alike written once, a key twice refused), and their
//! partitions (a day, or a span's days), written atomically.

use super::analytics::ASSISTANT;
use super::parquet::{self as pq, WriteError};
use super::shape::{Cell, FlaggedRow, Page, Shape};
use super::walk::{CrashPoints, ExportError, FirstPage, Sink, Walk, WindowOutcome};
use super::{Paging, Windowing};
use crate::api::Client;
use crate::api::analytics::At;
use crate::api::views::MAX_WALK_PAGES;
use crate::calendar::Window;
use crate::layout::{PART, Pending, partition_dir, project_dir};
use crate::store::{ShapedWritten, WalkKey};
use arrow_array::{Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use chrono::{DateTime, NaiveDate, Utc};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A day of a daily dataset to write.
pub(crate) struct Day<'a> {
    rows: &'a [Vec<Cell>],
    totals: &'a [Cell],
    fractions: &'a [crate::dataset::shape::Fraction],
    cut_off: bool,
    is_final: bool,
}

/// The companion table of `table` that keeps the counts sent with a fraction.
pub fn fractions_table(table: &str) -> String {
    format!("{table}_fractions")
}

/// The companion table's columns.
pub fn fractions_schema() -> arrow_schema::SchemaRef {
    use arrow_schema::{DataType, Field, Schema};
    std::sync::Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("column", DataType::Utf8, false),
        Field::new("sent", DataType::Float64, false),
        Field::new("written", DataType::Int64, false),
        Field::new("fetched_at", crate::dataset::shape::ts_type(), false),
    ]))
}

/// The companion table's batch: per count, the row's key, the column, the value as sent and as
/// written, and when.
pub(crate) fn fractions_batch(
    fractions: &[crate::dataset::shape::Fraction],
    at: DateTime<Utc>,
) -> Result<arrow_array::RecordBatch, String> {
    use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
    let schema = fractions_schema();
    let cols: Vec<ArrayRef> = vec![
        std::sync::Arc::new(
            fractions
                .iter()
                .map(|f| Some(f.key.as_str()))
                .collect::<StringArray>(),
        ),
        std::sync::Arc::new(
            fractions
                .iter()
                .map(|f| Some(f.column))
                .collect::<StringArray>(),
        ),
        std::sync::Arc::new(fractions.iter().map(|f| f.sent).collect::<Float64Array>()),
        std::sync::Arc::new(fractions.iter().map(|f| f.written).collect::<Int64Array>()),
        crate::dataset::shape::times(fractions.len(), at),
    ];
    arrow_array::RecordBatch::try_new(schema, cols).map_err(|e| e.to_string())
}

pub(crate) fn encode_error(dir: &Path, message: String) -> WriteError {
    WriteError::Encode {
        path: dir.display().to_string(),
        message,
    }
}

/// The batches of a written partition, if there is one.
pub(crate) fn read_partition(dir: &Path) -> Result<Option<RecordBatch>, WriteError> {
    let file = dir.join(PART);
    let f = match std::fs::File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(WriteError::Io {
                path: file.display().to_string(),
                source: e,
            });
        }
    };
    let bad = |e: String| encode_error(dir, format!("cannot read the partition to merge: {e}"));
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .and_then(|b| b.build())
        .map_err(|e| bad(e.to_string()))?;
    let schema = arrow_array::RecordBatchReader::schema(&reader);
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| bad(e.to_string()))?;
    arrow_select::concat::concat_batches(&schema, &batches)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The keys of a written batch's rows, as [`Shape::key_of`] makes them (text and instant keys).
pub(crate) fn batch_keys(shape: &Shape, batch: &RecordBatch) -> Vec<String> {
    let mut keys = vec![String::new(); batch.num_rows()];
    for (n, k) in shape.key.iter().enumerate() {
        let Some(col) = batch.column_by_name(k) else {
            continue;
        };
        for (i, key) in keys.iter_mut().enumerate() {
            if n > 0 {
                key.push('\u{1f}');
            }
            if col.is_null(i) {
                key.push('\u{0}');
            } else if let Some(s) = col.as_any().downcast_ref::<StringArray>() {
                key.push_str(s.value(i));
            } else if let Some(t) = col.as_any().downcast_ref::<TimestampMicrosecondArray>() {
                key.push_str(&t.value(i).to_string());
            }
        }
    }
    keys
}

/// `existing` with the rows whose key is in `new` left out, then `new`: a merge on the key.
pub(crate) fn merge(
    shape: &Shape,
    existing: RecordBatch,
    new: RecordBatch,
    dir: &Path,
) -> Result<RecordBatch, WriteError> {
    let replaced: HashSet<String> = batch_keys(shape, &new).into_iter().collect();
    let keep: arrow_array::BooleanArray = batch_keys(shape, &existing)
        .iter()
        .map(|k| Some(!replaced.contains(k)))
        .collect();
    let bad = |e: arrow_schema::ArrowError| encode_error(dir, e.to_string());
    let kept = arrow_select::filter::filter_record_batch(&existing, &keep).map_err(bad)?;
    if kept.schema() != new.schema() {
        return Err(encode_error(
            dir,
            "the partition to merge into has another schema; move it away and export again".into(),
        ));
    }
    arrow_select::concat::concat_batches(&new.schema(), &[kept, new]).map_err(bad)
}

/// The partitions a window writes, not yet in place; committed together.
#[derive(Default)]
pub(crate) struct Writes {
    pending: Vec<Pending>,
    removals: Vec<PathBuf>,
}

impl Writes {
    /// Writes the partitions `build` adds under temporary names, then renames them all into
    /// place (and removes the ones it named); on an error none is put in place.
    pub(crate) fn all(
        crash: &CrashPoints,
        build: impl FnOnce(&mut Writes) -> Result<(), WriteError>,
    ) -> Result<(), WriteError> {
        let mut writes = Writes::default();
        if let Err(e) = build(&mut writes) {
            for p in writes.pending {
                p.abandon();
            }
            return Err(e);
        }
        crash.hit("before rename");
        for p in writes.pending {
            pq::commit(p)?;
        }
        for d in writes.removals {
            pq::remove_partition(&d)?;
        }
        Ok(())
    }

    pub(crate) fn add(&mut self, dir: &Path, batch: &RecordBatch) -> Result<(), WriteError> {
        self.pending.push(pq::write_batch(dir, batch)?);
        Ok(())
    }

    /// Adds the partition at `dir` as it was (read back, if there is one) merged on the key
    /// with `rows`.
    pub(crate) fn merge_into(
        &mut self,
        shape: &Shape,
        dir: &Path,
        rows: &[FlaggedRow<'_>],
        at: DateTime<Utc>,
    ) -> Result<(), WriteError> {
        let new = shape.batch(rows, at).map_err(|e| encode_error(dir, e))?;
        let merged = match read_partition(dir)? {
            Some(old) => merge(shape, old, new, dir)?,
            None => new,
        };
        self.add(dir, &merged)
    }
}

/// The walk of a window of a dataset described by a [`Shape`].
pub struct ShapeWalk<'a> {
    /// Its dataset.
    pub shape: &'static Shape,
    /// The walk, as the state keys its stored pages.
    pub walk: WalkKey,
    /// Its days, as the service is asked for them.
    pub window: Window,
    /// Whether its days are final once written (past the lateness allowance).
    pub becomes_final: bool,
    /// A span's walk that reaches the recent days (a look at them when it ends).
    pub recent: bool,
    /// A span's full re-check (every re-checked day), not only the recent days.
    pub full: bool,
    /// How much earlier a span's first full re-check falls due (the projects' apart).
    pub stagger: chrono::Duration,
    /// The unanswered turns of the assistant windows written, by project, for their threads
    /// (`None`: the project does not export them).
    pub unanswered: Option<&'a mut BTreeMap<String, Vec<String>>>,
}

/// Where the next request starts, `None` when the walk is complete; an error when the
/// pages so far lead nowhere (the guards).
pub(crate) fn next_at(pages: &[Page], shape: &Shape) -> Result<Option<At>, String> {
    let Some(last) = pages.last() else {
        return Ok(Some(match shape.paging {
            Paging::Offset { .. } => At::Offset(0),
            _ => At::Start,
        }));
    };
    let n = pages.len() as u64;
    match shape.paging {
        Paging::Single | Paging::Capped { .. } => Ok(None),
        Paging::Offset { limit } => {
            if last.has_more != Some(true) {
                return Ok(None);
            }
            // An empty page that says there is more is followed (a service that filters rows
            // after paging sends one): the bound is the number of pages, not their rows.
            if n >= MAX_WALK_PAGES {
                return Err(format!(
                    "hasMore after {n} pages: a window of more than {MAX_WALK_PAGES} pages is refused"
                ));
            }
            Ok(Some(At::Offset(n * u64::from(limit))))
        }
        Paging::Cursor { .. } => {
            let cursor = match (&last.next_cursor, last.has_more) {
                (None, Some(true)) => {
                    return Err("hasMore is true but nextCursor is null".into());
                }
                (None, _) | (Some(_), Some(false)) => return Ok(None),
                (Some(c), _) => c,
            };
            // An empty page with a next cursor is followed (a service that scans by time under
            // a cursor sends one): the bounds are a cursor seen before and the number of pages.
            if pages[..pages.len() - 1]
                .iter()
                .any(|p| p.next_cursor.as_ref() == Some(cursor))
            {
                return Err(format!(
                    "cursor {} repeats after page {n}: the service's paging loops",
                    crate::text::one_line(cursor)
                ));
            }
            if n >= MAX_WALK_PAGES {
                return Err(format!(
                    "a next cursor after {n} pages: a window of more than {MAX_WALK_PAGES} pages is refused"
                ));
            }
            Ok(Some(At::Cursor(cursor.clone())))
        }
    }
}

/// Drops rows that repeat an earlier row exactly (same key, same values): a page boundary
/// that moved during the walk sends some twice, and one copy is the truth. Returns how many.
/// A key twice with other values is left for [`Shape::check_walk`] to refuse.
pub(crate) fn drop_exact_repeats(pages: &mut [Page], shape: &Shape) -> usize {
    let mut seen: HashMap<String, (usize, usize)> = HashMap::new();
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    for (p, page) in pages.iter().enumerate() {
        for (i, row) in page.rows.iter().enumerate() {
            match seen.entry(shape.key_of(row)) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert((p, i));
                }
                std::collections::hash_map::Entry::Occupied(o) => {
                    let (fp, fi) = *o.get();
                    if pages[fp].rows[fi] == *row {
                        repeats.push((p, i));
                    }
                }
            }
        }
    }
    for &(p, i) in repeats.iter().rev() {
        pages[p].rows.remove(i);
    }
    repeats.len()
}

impl Walk for ShapeWalk<'_> {
    type Page = Page;

    fn key(&self) -> &WalkKey {
        &self.walk
    }

    fn keep<'p>(&self, _page: &'p Page, body: &'p [u8]) -> Cow<'p, [u8]> {
        Cow::Borrowed(body)
    }

    fn unkeep(&self, kept: &[u8]) -> Option<Page> {
        self.shape.decode(kept, self.shape.paging.limit()).ok()
    }

    fn next(&self, pages: &[Page]) -> Result<Option<At>, String> {
        next_at(pages, self.shape)
    }

    async fn fetch(&self, client: &Client, at: &At) -> Result<(Page, Vec<u8>), ExportError> {
        Ok(fetch_page(client, self.shape, &self.walk.project, self.window, at).await?)
    }

    fn glance(&self, first: &Page) -> FirstPage {
        let id = self.shape.columns.iter().position(|c| c.name == "id");
        let thread = match (self.shape.name == ASSISTANT.name, id, first.rows.first()) {
            (true, Some(i), Some(row)) => match &row[i] {
                Cell::Text(t) => Some(t.clone()),
                _ => None,
            },
            _ => None,
        };
        FirstPage {
            rows: first.rows.len(),
            more: first.has_more.unwrap_or(first.next_cursor.is_some()),
            differs: self.shape.check_first_page(first).err(),
            thread,
        }
    }

    fn hash(&self, page: &Page) -> Option<u64> {
        (!page.rows.is_empty()).then(|| page_hash(self.shape, page))
    }

    fn astray(&self, detail: String) -> ExportError {
        Client::paging_error(self.shape.name, target(&self.walk), detail).into()
    }

    fn fingerprint(&self, first: &Page) -> Option<String> {
        Some(fingerprint(self.shape, first))
    }

    fn settle(&self, sink: &Sink<'_>, first: &Page) -> Result<(), ExportError> {
        let (shape, d) = (self.shape, &self.walk);
        let rows = sink.store.finalize_day(shape.name, &d.project, d.from)?;
        if let Some(table) = shape.totals_table {
            let tdir = partition_dir(sink.out, table, &d.project, d.from);
            let t = shape
                .totals_batch(&first.totals, rows, sink.now(), true)
                .map_err(|e| encode_error(&tdir, e))?;
            Writes::all(sink.crash, |writes| writes.add(&tdir, &t))?;
        }
        Ok(())
    }

    fn check(&self, pages: &mut Vec<Page>) -> Result<(), String> {
        let repeats = drop_exact_repeats(pages, self.shape);
        if repeats > 0 {
            tracing::debug!(dataset = self.shape.name, project = %self.walk.project, repeats, "rows sent twice, written once");
        }
        self.shape.check_walk(pages)
    }

    fn doubt(&self, mismatch: String) -> Result<String, ExportError> {
        Err(self.astray(format!("{mismatch}, twice in a row")))
    }

    fn write(
        &mut self,
        sink: &Sink<'_>,
        pages: Vec<Page>,
        _mismatch: Option<String>,
        requests: u64,
    ) -> Result<WindowOutcome, ExportError> {
        let shape = self.shape;
        let (walk, d) = (&self.walk, &self.walk);
        let at = sink.now();
        let first_fingerprint = pages.first().map(|p| fingerprint(shape, p));
        let cut_off = matches!(shape.paging, Paging::Capped { .. })
            && pages.last().and_then(|p| p.has_more) == Some(true);
        // A day cut off is as complete as the service lets it be: final by its age alone.
        let is_final = self.becomes_final;
        // The first page's totals stand (a later page may leave them out).
        let mut totals = pages.first().map(|p| p.totals.clone()).unwrap_or_default();
        let mut rows: Vec<Vec<Cell>> = pages.into_iter().flat_map(|p| p.rows).collect();
        let fractions = shape.whole_counts(&mut rows, &mut totals);
        let (days, outside) = match shape.windowing {
            Windowing::Span { .. } => sink.write_span(shape, walk, &rows, at)?,
            _ => {
                let day = Day {
                    rows: &rows,
                    totals: &totals,
                    fractions: &fractions,
                    cut_off,
                    is_final,
                };
                sink.write_day(shape, walk, &day, at)?;
                (vec![(d.from, rows.len() as i64)], 0)
            }
        };
        sink.crash.hit("before state commit");
        sink.store.finish_shaped(&ShapedWritten {
            walk,
            days: &days,
            is_final,
            requests,
            span: matches!(shape.windowing, Windowing::Span { .. }),
            at,
        })?;
        match shape.windowing {
            // A look at the recent days only when the walk reached them (a backfill's range
            // of older days is not one; a walk begun before midnight is); a full re-check when
            // it covered the re-checked days (or every day there is, for a project younger
            // than them).
            Windowing::Span { .. } if self.recent => {
                sink.store
                    .span_walked(shape.name, &d.project, self.full, at, self.stagger)?;
            }
            Windowing::Span { .. } => {}
            _ => {
                sink.store.looked(
                    shape.name,
                    &d.project,
                    d.from,
                    first_fingerprint.as_deref(),
                    at,
                )?;
            }
        }
        if let Some(unanswered) = self
            .unanswered
            .as_deref_mut()
            .filter(|_| shape.name == ASSISTANT.name)
        {
            let status = ASSISTANT.index("resolution_status").unwrap_or(0);
            let id = ASSISTANT.index("id").unwrap_or(0);
            let list = unanswered.entry(d.project.clone()).or_default();
            for r in &rows {
                if r[status].text() == Some("unanswered")
                    && let Some(t) = r[id].text()
                    && !list.iter().any(|x| x == t)
                {
                    list.push(t.to_string());
                }
            }
        }
        Ok(WindowOutcome {
            rows: rows.len() as i64 - outside as i64,
            requests,
            is_final,
            cut_off,
            outside,
            unknown: shape.unknown_values(rows.iter().map(Vec::as_slice)),
            fractions,
            ..WindowOutcome::of(shape.name, &d.project, (d.from, d.to))
        })
    }
}

impl Sink<'_> {
    /// Writes a daily window: its row partition (empty too: the day was fetched) and its
    /// totals partition.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_day(
        &self,
        shape: &Shape,
        w: &WalkKey,
        day: &Day<'_>,
        at: DateTime<Utc>,
    ) -> Result<(), ExportError> {
        let out = self.out;
        let dir = partition_dir(out, shape.table, &w.project, w.from);
        let flags = vec![day.cut_off; shape.flags.len()];
        let refs: Vec<FlaggedRow<'_>> = day
            .rows
            .iter()
            .map(|r| (r.as_slice(), flags.as_slice()))
            .collect();
        let batch = shape.batch(&refs, at).map_err(|e| encode_error(&dir, e))?;
        let fdir = partition_dir(out, &fractions_table(shape.table), &w.project, w.from);
        Writes::all(self.crash, |writes| {
            writes.add(&dir, &batch)?;
            if let Some(table) = shape.totals_table {
                let tdir = partition_dir(out, table, &w.project, w.from);
                let t = shape
                    .totals_batch(day.totals, day.rows.len() as i64, at, day.is_final)
                    .map_err(|e| encode_error(&tdir, e))?;
                writes.add(&tdir, &t)?;
            }
            if !day.fractions.is_empty() {
                let f = fractions_batch(day.fractions, at).map_err(|e| encode_error(&fdir, e))?;
                writes.add(&fdir, &f)?;
            }
            Ok(())
        })?;
        if day.fractions.is_empty() {
            // The day fetched again holds whole counts: its earlier fractions are gone.
            crate::dataset::parquet::remove_partition(&fdir)?;
        }
        Ok(())
    }

    /// Writes a span: every day of it replaced by its rows (a day without rows loses its
    /// partition), rows without a day merged on the key into the undated table, rows dated
    /// outside the span (the service filters on another instant) merged on the key into the
    /// outside table; returns the rows of each day and how many were set aside outside.
    pub(crate) fn write_span(
        &self,
        shape: &Shape,
        w: &WalkKey,
        rows: &[Vec<Cell>],
        at: DateTime<Utc>,
    ) -> Result<(Vec<(NaiveDate, i64)>, u64), ExportError> {
        let mut by_day: BTreeMap<Option<NaiveDate>, Vec<FlaggedRow<'_>>> = BTreeMap::new();
        let mut outside: Vec<FlaggedRow<'_>> = Vec::new();
        for r in rows {
            let day = shape.day_of(r, self.tz);
            if let Some(d) = day
                && !(w.from..w.to).contains(&d)
            {
                if shape.outside_table.is_some() {
                    outside.push((r.as_slice(), &[]));
                    continue;
                }
                return Err(Client::paging_error(
                    shape.name,
                    target(w),
                    format!(
                        "{} is dated {d}, outside the days asked for",
                        shape.show_key(r)
                    ),
                )
                .into());
            }
            if day.is_none() && shape.undated_table.is_none() {
                return Err(Client::paging_error(
                    shape.name,
                    target(w),
                    format!("{} has no date", shape.show_key(r)),
                )
                .into());
            }
            by_day.entry(day).or_default().push((r.as_slice(), &[]));
        }
        let out = self.out;
        let mut days = Vec::new();
        Writes::all(self.crash, |writes| {
            let mut d = w.from;
            while d < w.to {
                let dir = partition_dir(out, shape.table, &w.project, d);
                match by_day.get(&Some(d)) {
                    Some(rows) => {
                        let batch = shape.batch(rows, at).map_err(|e| encode_error(&dir, e))?;
                        writes.add(&dir, &batch)?;
                        days.push((d, rows.len() as i64));
                    }
                    None => {
                        writes.removals.push(dir);
                        days.push((d, 0));
                    }
                }
                match d.succ_opt() {
                    Some(n) => d = n,
                    None => break,
                }
            }
            if let (Some(rows), Some(table)) = (by_day.get(&None), shape.undated_table) {
                writes.merge_into(shape, &project_dir(out, table, &w.project), rows, at)?;
            }
            if let (false, Some(table)) = (outside.is_empty(), shape.outside_table) {
                writes.merge_into(shape, &project_dir(out, table, &w.project), &outside, at)?;
            }
            Ok(())
        })?;
        if !outside.is_empty() {
            tracing::warn!(
                dataset = shape.name,
                project = %w.project,
                from = %w.from,
                to = %w.to,
                rows = outside.len(),
                "rows dated outside the days asked for, set aside in {}",
                shape.outside_table.unwrap_or_default()
            );
        }
        Ok((days, outside.len() as u64))
    }
}

/// What a probe compares: a page's totals, or (a dataset without totals, fetched in one page)
/// its rows.
pub(crate) fn fingerprint(shape: &Shape, page: &Page) -> String {
    if shape.totals.is_empty() {
        use std::hash::{BuildHasher, Hasher};
        let mut h = foldhash::quality::FixedState::with_seed(0x6673_7072).build_hasher();
        h.write(format!("{:?}{:?}", page.rows, page.has_more).as_bytes());
        format!("rows:{:016x}", h.finish())
    } else {
        format!("{:?}", page.totals)
    }
}

pub(crate) fn target(w: &WalkKey) -> String {
    format!("project {} ({} to {})", w.project, w.from, w.to)
}

/// A page's identity for the guard against a service that ignores the paging: its rows' keys.
pub(crate) fn page_hash(shape: &Shape, p: &Page) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::quality::FixedState::with_seed(0x6473_6574).build_hasher();
    for r in &p.rows {
        h.write(shape.key_of(r).as_bytes());
        h.write_u8(0x1e);
    }
    h.finish()
}

/// One page of a walk, decoded, with its body as sent (to store).
pub(crate) async fn fetch_page(
    client: &Client,
    shape: &'static Shape,
    project: &str,
    window: Window,
    at: &At,
) -> Result<(Page, Vec<u8>), crate::api::ApiError> {
    let limit = shape.paging.limit();
    client
        .analytics_page(
            shape.name,
            shape.endpoint,
            project,
            None,
            Some(window),
            limit,
            at,
            |b| {
                shape
                    .decode(b, limit)
                    .map(|p| (p, b.to_vec()))
                    .map_err(|e| format!("{}: {e}", at.page_name()))
            },
        )
        .await
}
