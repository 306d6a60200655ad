//! A span's walk (feedback, assistant turns: one walk over many days) checked and written
//! from its stored pages, a page at a time, so that its memory is bounded by a page and a
//! group of days, not by the span: a first backfill of a busy assistant over a year is a
//! million turns. The walk keeps no rows in memory ([`super::walk::Walk::shed`]); the pages
//! are in the page store, read back twice:
//! 1. as each page comes (or is read back when a walk resumes), [`Building`]: every row's key
//!    and content hashed (16 bytes a row), each page's days noted, the rows of each day
//!    counted; at the check, the hashes sorted, so that a key sent twice with other values is
//!    found as the whole walk's check finds it (the rows of the keys found twice read back and
//!    checked exactly);
//! 2. the write ([`write`]): the days in groups of at most [`GROUP_ROWS`] rows (a day at
//!    least), each group's rows read back from the pages that hold them (the service's order
//!    is not guaranteed: a page may hold any day), its partitions written under temporary
//!    names; all renamed into place together at the end, as before. Rows without a day or
//!    dated outside the span are read first, so that a refusal writes nothing.

use super::shape::{Cell, FlaggedRow, Page, Shape};
use super::walk::{ExportError, Sink};
use super::writes::{Writes, encode_error, target};
use crate::api::Client;
use crate::layout::{partition_dir, project_dir};
use crate::store::WalkKey;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasher, Hasher};

/// Rows read back into memory at once when a span is written (a day's rows at least).
pub const GROUP_ROWS: u64 = 8_192;

/// Where a stored page's rows fall.
#[derive(Debug, Clone, Copy)]
struct PageDays {
    /// The first and last day of its rows dated inside the span.
    dated: Option<(NaiveDate, NaiveDate)>,
    /// Whether it has a row without a day, or dated outside the span.
    odd: bool,
}

/// What the check of a span's walk learnt of its stored pages, for its write.
#[derive(Debug)]
pub(crate) struct SpanIndex {
    /// Each stored page's days.
    pages: Vec<PageDays>,
    /// Rows per day inside the span (rows sent twice alike counted twice).
    per_day: BTreeMap<NaiveDate, u64>,
    /// Rows sent twice alike (one copy written).
    pub repeats: usize,
    /// The threads of the unanswered turns, in the order the service sent them (assistant).
    pub unanswered: Vec<String>,
    /// Rows read back at once when written: [`GROUP_ROWS`] (fewer in tests).
    group_rows: u64,
}

/// A span written: the rows of each of its days, the rows without a day, the rows set aside
/// outside it, the values docpipe did not expect and the fractions sent.
pub(crate) struct SpanWritten {
    pub days: Vec<(NaiveDate, i64)>,
    pub undated: u64,
    pub outside: u64,
    pub unknown: Vec<(&'static str, Vec<(String, u64)>)>,
    pub fractions: Vec<super::shape::Fraction>,
}

fn key_hash(shape: &Shape, row: &[Cell]) -> u64 {
    let mut h = foldhash::quality::FixedState::with_seed(0x7370_616e).build_hasher();
    h.write(shape.key_of(row).as_bytes());
    h.finish()
}

fn row_hash(row: &[Cell]) -> u64 {
    let mut h = foldhash::quality::FixedState::with_seed(0x726f_7773).build_hasher();
    for c in row {
        match c {
            Cell::Null => h.write_u8(0),
            Cell::Text(s) => {
                h.write_u8(1);
                h.write(s.as_bytes());
                h.write_u8(0xff);
            }
            Cell::Int(i) => {
                h.write_u8(2);
                h.write_i64(*i);
            }
            Cell::Float(f) => {
                h.write_u8(3);
                h.write_u64(f.to_bits());
            }
            Cell::Bool(b) => {
                h.write_u8(4);
                h.write_u8(u8::from(*b));
            }
            Cell::Time(t) => {
                h.write_u8(5);
                h.write_i64(*t);
            }
            Cell::Sources(s) => {
                h.write_u8(6);
                h.write_usize(s.len());
                for (title, url) in s {
                    h.write(title.as_bytes());
                    h.write_u8(0xff);
                    h.write(url.as_bytes());
                    h.write_u8(0xff);
                }
            }
        }
    }
    h.finish()
}

/// A stored page decoded again (it was decoded when it came: one that no longer decodes was
/// kept by another docpipe, or damaged).
fn decode(shape: &Shape, w: &WalkKey, n: usize, data: &[u8]) -> Result<Page, ExportError> {
    shape.decode(data, shape.paging.limit()).map_err(|e| {
        Client::paging_error(
            shape.name,
            target(w),
            format!("stored page {} no longer decodes: {e}", n + 1),
        )
        .into()
    })
}

/// A span's index taken page by page as the walk sheds its pages' rows (so that the check
/// need not read them back), from page 0 on: a walk begun again starts it again.
#[derive(Debug, Default)]
pub(crate) struct Building {
    /// Every row's key and content hashed.
    hashes: Vec<(u64, u64)>,
    pages: Vec<PageDays>,
    per_day: BTreeMap<NaiveDate, u64>,
    unanswered: Vec<String>,
    listed: HashSet<String>,
    /// A page came out of order: the index is read from the page store instead.
    astray: bool,
}

impl Building {
    /// Takes page `n` of walk `w` into account (`threads`: list the unanswered turns' threads).
    pub(crate) fn add(
        &mut self,
        shape: &Shape,
        (w, tz): (&WalkKey, chrono_tz::Tz),
        n: usize,
        page: &Page,
        threads: bool,
    ) {
        if n == 0 {
            *self = Building::default();
        }
        if n != self.pages.len() {
            self.astray = true;
            return;
        }
        let (status, id) = (
            shape.index("resolution_status"),
            shape.index("id").filter(|_| threads),
        );
        let mut days = PageDays {
            dated: None,
            odd: false,
        };
        for r in &page.rows {
            self.hashes.push((key_hash(shape, r), row_hash(r)));
            match shape.day_of(r, tz) {
                Some(d) if (w.from..w.to).contains(&d) => {
                    days.dated = Some(match days.dated {
                        Some((a, b)) => (a.min(d), b.max(d)),
                        None => (d, d),
                    });
                    *self.per_day.entry(d).or_default() += 1;
                }
                _ => days.odd = true,
            }
            if let (Some(s), Some(i)) = (status, id)
                && r[s].text() == Some("unanswered")
                && let Some(t) = r[i].text()
                && self.listed.insert(t.to_string())
            {
                self.unanswered.push(t.to_string());
            }
        }
        self.pages.push(days);
    }

    /// The index of a walk of `expected` pages, or the mismatch found (a key sent twice with
    /// other values, as [`Shape::check`] names it): the rows of the keys found twice are read
    /// back and checked as the whole walk is.
    pub(crate) fn finish(
        mut self,
        shape: &Shape,
        sink: &Sink<'_>,
        w: &WalkKey,
        expected: usize,
        threads: bool,
    ) -> Result<Result<SpanIndex, String>, ExportError> {
        if self.astray || self.pages.len() != expected {
            self = Building::default();
            sink.store.each_page(w, |data| {
                let n = self.pages.len();
                self.add(shape, (w, sink.tz), n, &decode(shape, w, n, data)?, threads);
                Ok::<(), ExportError>(())
            })?;
        }
        if self.pages.len() != expected {
            return Err(Client::paging_error(
                shape.name,
                target(w),
                format!(
                    "{} pages walked but {} kept: the page store changed under the walk",
                    expected,
                    self.pages.len()
                ),
            )
            .into());
        }
        let mut index = SpanIndex {
            pages: self.pages,
            per_day: self.per_day,
            repeats: 0,
            unanswered: self.unanswered,
            group_rows: GROUP_ROWS,
        };
        let mut hashes = self.hashes;
        hashes.sort_unstable();
        let mut twice: HashSet<u64> = HashSet::new();
        for group in hashes.chunk_by(|a, b| a.0 == b.0) {
            let distinct = 1 + group.windows(2).filter(|p| p[0].1 != p[1].1).count();
            index.repeats += group.len() - distinct;
            if distinct > 1 {
                twice.insert(group[0].0);
            }
        }
        drop(hashes);
        if twice.is_empty() {
            return Ok(Ok(index));
        }
        let mut rows: Vec<Vec<Cell>> = Vec::new();
        sink.store.some_pages(
            w,
            |_| true,
            |n, data| {
                let page = decode(shape, w, n, data)?;
                rows.extend(
                    page.rows
                        .into_iter()
                        .filter(|r| twice.contains(&key_hash(shape, r))),
                );
                Ok::<(), ExportError>(())
            },
        )?;
        shape.drop_exact_repeats(&mut [&mut rows]);
        let refs: Vec<&[Cell]> = rows.iter().map(Vec::as_slice).collect();
        Ok(shape.check(&refs, &[]).map(|()| index))
    }
}

/// The rows, without flags.
fn flagged(rows: &[Vec<Cell>]) -> Vec<FlaggedRow<'_>> {
    rows.iter().map(|r| (r.as_slice(), &[][..])).collect()
}

/// The span's days in groups of at most [`SpanIndex::group_rows`] rows (a day at least), in
/// order.
fn groups(index: &SpanIndex, w: &WalkKey) -> Vec<(NaiveDate, NaiveDate)> {
    let mut out: Vec<(NaiveDate, NaiveDate)> = Vec::new();
    let mut rows = 0;
    for d in w.from.iter_days().take_while(|d| *d < w.to) {
        let n = index.per_day.get(&d).copied().unwrap_or(0);
        match out.last_mut() {
            Some((_, last)) if rows + n <= index.group_rows => {
                *last = d;
                rows += n;
            }
            _ => {
                out.push((d, d));
                rows = n;
            }
        }
    }
    out
}

/// A span's rows without a day, and those dated outside it.
type Odd = (Vec<Vec<Cell>>, Vec<Vec<Cell>>);

/// The rows of a span without a day, and those dated outside it, in the order sent; an error
/// for the first of them its dataset has no table for.
fn odd_rows(
    sink: &Sink<'_>,
    shape: &Shape,
    w: &WalkKey,
    index: &SpanIndex,
) -> Result<Odd, ExportError> {
    let (mut undated, mut outside): Odd = (Vec::new(), Vec::new());
    sink.store.some_pages(
        w,
        |n| index.pages.get(n).is_some_and(|p| p.odd),
        |n, data| {
            for r in decode(shape, w, n, data)?.rows {
                match shape.day_of(&r, sink.tz) {
                    Some(d) if (w.from..w.to).contains(&d) => {}
                    Some(d) if shape.outside_table.is_none() => {
                        return Err(Client::paging_error(
                            shape.name,
                            target(w),
                            format!(
                                "{} is dated {d}, outside the days asked for",
                                shape.show_key(&r)
                            ),
                        )
                        .into());
                    }
                    Some(_) => outside.push(r),
                    None if shape.undated_table.is_none() => {
                        return Err(Client::paging_error(
                            shape.name,
                            target(w),
                            format!("{} has no date", shape.show_key(&r)),
                        )
                        .into());
                    }
                    None => undated.push(r),
                }
            }
            Ok::<(), ExportError>(())
        },
    )?;
    Ok((undated, outside))
}

/// What a span's rows held that its outcome reports: the values docpipe did not expect and
/// the counts sent with a fraction.
#[derive(Default)]
struct Found {
    unknown: Vec<(&'static str, Vec<(String, u64)>)>,
    fractions: Vec<super::shape::Fraction>,
}

impl Found {
    /// Rows read back, made ready to write: one copy of each row sent twice alike, whole
    /// counts; what they hold noted.
    fn settle(&mut self, shape: &Shape, rows: &mut Vec<Vec<Cell>>) {
        shape.drop_exact_repeats(&mut [rows]);
        self.fractions.extend(shape.whole_counts(rows, &mut []));
        shape.add_unknown_values(&mut self.unknown, rows.iter().map(Vec::as_slice));
    }
}

/// Writes the partitions of the days `first..=last` of a span from the stored pages that hold
/// them (under temporary names, in `writes`), their rows per day added to `days`.
#[allow(clippy::too_many_arguments)]
fn write_group(
    sink: &Sink<'_>,
    shape: &Shape,
    w: &WalkKey,
    index: &SpanIndex,
    (first, last): (NaiveDate, NaiveDate),
    writes: &mut Writes,
    (days, found): (&mut Vec<(NaiveDate, i64)>, &mut Found),
    at: DateTime<Utc>,
) -> Result<(), ExportError> {
    let out = sink.out;
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let holds = |p: &PageDays| p.dated.is_some_and(|(a, b)| a <= last && b >= first);
    sink.store.some_pages(
        w,
        |n| index.pages.get(n).is_some_and(holds),
        |n, data| {
            rows.extend(decode(shape, w, n, data)?.rows.into_iter().filter(|r| {
                shape
                    .day_of(r, sink.tz)
                    .is_some_and(|d| (first..=last).contains(&d))
            }));
            Ok::<(), ExportError>(())
        },
    )?;
    found.settle(shape, &mut rows);
    let mut by_day: BTreeMap<NaiveDate, Vec<FlaggedRow<'_>>> = BTreeMap::new();
    for r in &rows {
        if let Some(d) = shape.day_of(r, sink.tz) {
            by_day.entry(d).or_default().push((r.as_slice(), &[]));
        }
    }
    for d in first.iter_days().take_while(|d| *d <= last) {
        let dir = partition_dir(out, shape.table, &w.project, d);
        match by_day.get(&d) {
            Some(rows) => {
                let batch = shape.batch(rows, at).map_err(|e| encode_error(&dir, e))?;
                writes.add(&dir, &batch)?;
                days.push((d, rows.len() as i64));
            }
            None => {
                writes.remove(dir);
                days.push((d, 0));
            }
        }
    }
    Ok(())
}

/// Writes a span from its stored pages: every day of it replaced by its rows (a day without
/// rows loses its partition), rows without a day merged on the key into the undated table,
/// rows dated outside the span (the service filters on another instant) merged on the key
/// into the outside table; all put in place together, or none.
pub(crate) fn write(
    sink: &Sink<'_>,
    shape: &Shape,
    w: &WalkKey,
    index: &SpanIndex,
    at: DateTime<Utc>,
) -> Result<SpanWritten, ExportError> {
    let mut found = Found::default();
    // Rows without a day, or outside the span, first: a refusal writes nothing.
    let (mut undated, mut outside) = odd_rows(sink, shape, w, index)?;
    for rows in [&mut undated, &mut outside] {
        found.settle(shape, rows);
    }
    let out = sink.out;
    let mut days = Vec::new();
    Writes::all(sink.crash, |writes| {
        for group in groups(index, w) {
            write_group(
                sink,
                shape,
                w,
                index,
                group,
                writes,
                (&mut days, &mut found),
                at,
            )?;
        }
        if let (false, Some(table)) = (undated.is_empty(), shape.undated_table) {
            let dir = project_dir(out, table, &w.project);
            writes.merge_into(shape, &dir, &flagged(&undated), at)?;
        }
        if let (false, Some(table)) = (outside.is_empty(), shape.outside_table) {
            let dir = project_dir(out, table, &w.project);
            writes.merge_into(shape, &dir, &flagged(&outside), at)?;
        }
        Ok::<(), ExportError>(())
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
    Ok(SpanWritten {
        days,
        undated: undated.len() as u64,
        outside: outside.len() as u64,
        unknown: found.unknown,
        fractions: found.fractions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::analytics::ASSISTANT;
    use crate::dataset::walk::CrashPoints;
    use crate::dataset::writes::read_partition;
    use arrow_array::{Array, StringArray};

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, d).unwrap()
    }

    /// An assistant page of `(thread, day, hour, status)` turns.
    fn page(turns: &[(&str, u32, u32, &str)], next: Option<&str>) -> Vec<u8> {
        let rows: Vec<serde_json::Value> = turns
            .iter()
            .map(|(id, d, h, status)| {
                serde_json::json!({
                    "id": id,
                    "timestamp": format!("2026-03-{d:02}T{h:02}:00:00Z"),
                    "query": format!("question of {id}"),
                    "response": "an answer",
                    "sources": [],
                    "resolutionStatus": status,
                    "queryCategory": null,
                    "pageUrl": null,
                })
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "conversations": rows,
            "nextCursor": next,
            "hasMore": next.is_some(),
        }))
        .unwrap()
    }

    /// The ids of a written partition's rows, in order.
    fn ids(dir: &std::path::Path) -> Vec<String> {
        let Some(b) = read_partition(dir).unwrap() else {
            return Vec::new();
        };
        let col = b.column_by_name("id").unwrap();
        let s = col.as_any().downcast_ref::<StringArray>().unwrap();
        (0..s.len()).map(|i| s.value(i).to_string()).collect()
    }

    /// Runs `f` with a sink over a fresh output folder, and the walk of 1-4 March.
    fn with_sink(f: impl FnOnce(&Sink<'_>, &WalkKey)) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let store = crate::store::Store::open(&crate::store::state_path(out)).unwrap();
        let clock = crate::clock::system();
        let crash = CrashPoints::default();
        let sink = Sink {
            store: &store,
            out,
            tz: chrono_tz::UTC,
            clock: &clock,
            crash: &crash,
        };
        let w = WalkKey {
            dataset: ASSISTANT.name,
            project: "docs".into(),
            from: day(1),
            to: day(5),
        };
        f(&sink, &w);
    }

    #[test]
    fn a_span_in_any_order_is_written_from_its_stored_pages_group_by_group_as_a_whole() {
        with_sink(|sink, w| {
            let (store, out, w) = (sink.store, sink.out, w.clone());
            // The days out of order across pages; `t3` sent twice alike (across a page boundary);
            // `t9` dated after the span; no turn on the 3rd (an old partition there goes).
            let pages = [
                page(
                    &[
                        ("t1", 4, 10, "answered"),
                        ("t2", 1, 9, "unanswered"),
                        ("t3", 2, 8, "answered"),
                    ],
                    Some("c1"),
                ),
                page(
                    &[
                        ("t3", 2, 8, "answered"),
                        ("t4", 4, 1, "unanswered"),
                        ("t9", 6, 1, "answered"),
                    ],
                    Some("c2"),
                ),
                page(
                    &[
                        ("t5", 1, 23, "answered"),
                        ("t2", 2, 0, "unanswered"),
                        ("t6", 4, 12, "answered"),
                    ],
                    None,
                ),
            ];
            for (n, body) in pages.iter().enumerate() {
                store
                    .put_page(&w, n as u64, n == pages.len() - 1, body)
                    .unwrap();
            }
            let stale = partition_dir(out, ASSISTANT.table, "docs", day(3));
            crate::dataset::parquet::commit(
                crate::dataset::parquet::write_batch(
                    &stale,
                    &ASSISTANT.batch(&[], Utc::now()).unwrap(),
                )
                .unwrap(),
            )
            .unwrap();
            let mut index = Building::default()
                .finish(&ASSISTANT, sink, &w, 3, true)
                .unwrap()
                .unwrap();
            assert_eq!(index.repeats, 1);
            assert_eq!(index.unanswered, ["t2", "t4"]);
            // Two rows a group: each day alone (the 2nd has 3 rows with the repeat, the 4th 3: over
            // the budget, but a group is a day at least; the empty 3rd cannot join a full group).
            index.group_rows = 2;
            assert_eq!(
                groups(&index, &w),
                [
                    (day(1), day(1)),
                    (day(2), day(2)),
                    (day(3), day(3)),
                    (day(4), day(4))
                ]
            );
            let written = write(sink, &ASSISTANT, &w, &index, Utc::now()).unwrap();
            assert_eq!(
                written.days,
                [(day(1), 2), (day(2), 2), (day(3), 0), (day(4), 3)]
            );
            assert_eq!((written.undated, written.outside), (0, 1));
            let part = |d| ids(&partition_dir(out, ASSISTANT.table, "docs", d));
            assert_eq!(part(day(1)), ["t2", "t5"]);
            assert_eq!(part(day(2)), ["t3", "t2"]);
            assert!(!stale.exists());
            assert_eq!(part(day(4)), ["t1", "t4", "t6"]);
            assert_eq!(
                ids(&project_dir(out, "assistant_turns_outside", "docs")),
                ["t9"]
            );
        });
    }

    #[test]
    fn a_key_twice_with_other_values_or_a_page_lost_is_refused() {
        with_sink(|sink, w| {
            let store = sink.store;
            // The same key twice with other values is the whole walk's mismatch.
            let w2 = WalkKey {
                from: day(10),
                to: day(12),
                ..w.clone()
            };
            store
                .put_page(
                    &w2,
                    0,
                    false,
                    &page(
                        &[("a", 10, 1, "answered"), ("b", 11, 2, "answered")],
                        Some("x"),
                    ),
                )
                .unwrap();
            store
                .put_page(&w2, 1, true, &page(&[("a", 10, 1, "unanswered")], None))
                .unwrap();
            let found = Building::default()
                .finish(&ASSISTANT, sink, &w2, 2, false)
                .unwrap();
            assert_eq!(
                found.unwrap_err(),
                "id \"a\", timestamp 2026-03-10T01:00:00+00:00 appears twice"
            );
            // Pages lost under the walk are refused, not written short.
            let lost = Building::default()
                .finish(&ASSISTANT, sink, &w2, 3, false)
                .unwrap_err();
            assert!(
                lost.to_string()
                    .contains("3 pages walked but 2 kept: the page store changed under the walk"),
                "{lost}"
            );
        });
    }
}
