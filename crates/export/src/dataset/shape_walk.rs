//! What the datasets described by a [`Shape`] bring to the window path (`export/window.rs`):
//! their page (decoded by the shape, its body kept in the state), paging by offset, cursor or a
//! single request with its guards (a cursor that repeats, an empty page that says there is
//! more), their checks (a row sent twice alike written once, a key twice refused), and their
//! partitions (a day, or a span's days), written atomically.

use super::analytics::ASSISTANT;
use super::parquet::WriteError;
use super::shape::{Cell, FlaggedRow, Page, Shape};
use super::span::{self, Building, SpanIndex};
use super::walk::{ExportError, FirstPage, Sink, Walk, WindowOutcome};
use super::writes::{Writes, encode_error, target};
use super::{Paging, Windowing};
use crate::api::Client;
use crate::api::analytics::At;
use crate::api::views::MAX_WALK_PAGES;
use crate::calendar::Window;
use crate::layout::partition_dir;
use crate::store::{ShapedWritten, WalkKey};
use chrono::{DateTime, Utc};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

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
    docpipe_catalog::tables::fractions_of(table)
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
    /// A span's last final day today (the exporter's `ShapedSettings::settled_through`).
    pub settled: Option<chrono::NaiveDate>,
    /// A span's walk that reaches the recent days (a look at them when it ends).
    pub recent: bool,
    /// A span's full re-check (every re-checked day), not only the recent days.
    pub full: bool,
    /// How much earlier a span's first full re-check falls due (the projects' apart).
    pub stagger: chrono::Duration,
    /// The unanswered turns of the assistant windows written, by project, for their threads
    /// (`None`: the project does not export them).
    pub unanswered: Option<&'a mut BTreeMap<String, Vec<String>>>,
    /// A span's walk so far: what its check needs of the pages' rows (see `span.rs`).
    pub(crate) building: std::sync::Mutex<Building>,
    /// A span's walk checked: what its write reads back.
    pub(crate) index: Option<SpanIndex>,
}

impl ShapeWalk<'_> {
    /// Whether the walk is a span's (its rows read back from the page store, see `span.rs`).
    fn is_span(&self) -> bool {
        matches!(self.shape.windowing, Windowing::Span { .. })
    }

    /// Whether the threads of its unanswered turns are wanted.
    fn threads(&self) -> bool {
        self.unanswered.is_some() && self.shape.name == ASSISTANT.name
    }
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

    fn shed(&self, n: usize, page: &mut Page) {
        if self.is_span() {
            let threads = self.threads();
            let mut b = self.building.lock().unwrap_or_else(|e| e.into_inner());
            b.add(self.shape, (&self.walk, self.window.tz), n, page, threads);
            page.rows = Vec::new();
        }
    }

    fn check(
        &mut self,
        sink: &Sink<'_>,
        pages: &mut Vec<Page>,
    ) -> Result<Result<(), String>, ExportError> {
        let (shape, project) = (self.shape, &self.walk.project);
        if !self.is_span() {
            let mut rows: Vec<&mut Vec<Vec<Cell>>> =
                pages.iter_mut().map(|p| &mut p.rows).collect();
            let repeats = shape.drop_exact_repeats(&mut rows);
            if repeats > 0 {
                tracing::debug!(dataset = shape.name, %project, repeats, "rows sent twice, written once");
            }
            return Ok(shape.check_walk(pages));
        }
        // The pages' totals (their rows are in the page store), then the rows read back.
        self.index = None;
        if let Err(m) = shape.check_walk(pages) {
            return Ok(Err(m));
        }
        let building = std::mem::take(self.building.get_mut().unwrap_or_else(|e| e.into_inner()));
        let threads = self.threads();
        let index = match building.finish(shape, sink, &self.walk, pages.len(), threads)? {
            Ok(index) => index,
            Err(m) => return Ok(Err(m)),
        };
        if index.repeats > 0 {
            tracing::debug!(dataset = shape.name, %project, repeats = index.repeats, "rows sent twice, written once");
        }
        self.index = Some(index);
        Ok(Ok(()))
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
        let (days, counted) = if self.is_span() {
            let index = self.index.take().ok_or_else(|| {
                self.astray("a span written before its pages were checked".into())
            })?;
            let span = span::write(sink, shape, walk, &index, at)?;
            if let Some(unanswered) = self.unanswered.as_deref_mut() {
                let list = unanswered.entry(d.project.clone()).or_default();
                let listed: HashSet<String> = list.iter().cloned().collect();
                list.extend(index.unanswered.into_iter().filter(|t| !listed.contains(t)));
            }
            let rows = span.days.iter().map(|(_, n)| n).sum::<i64>() + span.undated as i64;
            (
                span.days,
                (rows, span.outside, span.unknown, span.fractions),
            )
        } else {
            let mut rows: Vec<Vec<Cell>> = pages.into_iter().flat_map(|p| p.rows).collect();
            let fractions = shape.whole_counts(&mut rows, &mut totals);
            let day = Day {
                rows: &rows,
                totals: &totals,
                fractions: &fractions,
                cut_off,
                is_final,
            };
            sink.write_day(shape, walk, &day, at)?;
            let unknown = shape.unknown_values(rows.iter().map(Vec::as_slice));
            let n = rows.len() as i64;
            (vec![(d.from, n)], (n, 0, unknown, fractions))
        };
        let (rows, outside, unknown, fractions) = counted;
        sink.crash.hit("before state commit");
        sink.store.finish_shaped(&ShapedWritten {
            walk,
            days: &days,
            is_final,
            settled: self.settled,
            requests,
            span: self.is_span(),
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
        Ok(WindowOutcome {
            rows,
            requests,
            is_final,
            cut_off,
            outside,
            unknown,
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
            Ok::<(), WriteError>(())
        })?;
        if day.fractions.is_empty() {
            // The day fetched again holds whole counts: its earlier fractions are gone.
            crate::dataset::parquet::remove_partition(&fdir)?;
        }
        Ok(())
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
