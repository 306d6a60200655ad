//! The pages of the walks in progress, every dataset's: kept as they arrive, so that a killed
//! run resumes at the next page, and dropped when the window is written. The `walks` table
//! names each walk in progress (dataset, project, days); where its pages are is one interface,
//! [`PageStore`], with two backends chosen when the store opens:
//! - [`Journals`], beside a SQLite state: one append-only file per walk (`journal.rs`), which
//!   must carry the walk's id; an append costs a fraction of an insert of the same bytes;
//! - [`Rows`], on a shared PostgreSQL state: rows of `walk_pages`, so that a walk begun on one
//!   machine resumes on another.
//!
//! A page is kept as its dataset encodes it (page views their decoded columns, the other
//! datasets the body as sent), with whether it ended the walk.

use super::journal;
use super::sql::{Sql, SqlError, Tx, Value};
use super::{Store, StoreError};
use chrono::NaiveDate;
use docpipe_catalog::layout;
use std::collections::{HashMap, HashSet};
use std::io::{Seek, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A walk: the days `from..to` (exclusive) of a dataset and project.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WalkKey {
    /// Dataset.
    pub dataset: &'static str,
    /// Project.
    pub project: String,
    /// First day.
    pub from: NaiveDate,
    /// The day after the last.
    pub to: NaiveDate,
}

impl WalkKey {
    /// The walk of one day of a daily dataset.
    pub fn day(dataset: &'static str, project: &str, day: NaiveDate) -> Self {
        Self {
            dataset,
            project: project.to_string(),
            from: day,
            to: day.succ_opt().unwrap_or(day),
        }
    }

    fn params(&self) -> Vec<Value> {
        vec![
            Value::from(self.dataset),
            self.project.as_str().into(),
            self.from.into(),
            self.to.into(),
        ]
    }
}

/// The SQLite table of the walks in progress (PostgreSQL's is migration 7, with `walk_pages`).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS walks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    project TEXT NOT NULL,
    from_day TEXT NOT NULL,
    to_day TEXT NOT NULL,
    UNIQUE (dataset, project, from_day, to_day)
);
";

/// Makes the walks of a state file written before every dataset's pages were kept alike (page
/// views' walks by project and day, the other datasets' pages in `record_pages`): those walks
/// are dropped (each is walked again, afresh) and the one table made.
pub(super) fn one_store(c: &mut rusqlite::Connection) -> rusqlite::Result<()> {
    let before = c
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'walks'")?
        .exists([])?
        && !c
            .prepare("SELECT 1 FROM pragma_table_info('walks') WHERE name = 'dataset'")?
            .exists([])?;
    let tx = c.transaction()?;
    if before {
        tx.execute_batch("DROP TABLE walks;")?;
    }
    tx.execute_batch("DROP TABLE IF EXISTS record_pages; DROP TABLE IF EXISTS pages;")?;
    tx.execute_batch(SCHEMA)?;
    tx.commit()
}

/// Where the pages of the walks in progress are kept.
pub(super) trait PageStore: std::fmt::Debug + Send + Sync {
    /// Keeps page `seq` of walk `w`; page 0 starts the walk (its row made by `start` in the
    /// same transaction), a later one is added to the walk in progress.
    fn put(
        &self,
        sql: &Sql,
        w: &WalkKey,
        seq: u64,
        last: bool,
        data: &[u8],
    ) -> Result<(), StoreError>;
    /// Hands the walk's pages that `want` names (by their place, from 0) to `f` in order, one
    /// at a time (none when it is not in progress), until `f` says to stop.
    fn each(
        &self,
        sql: &Sql,
        w: &WalkKey,
        want: &dyn Fn(usize) -> bool,
        f: &mut dyn FnMut(usize, &[u8]) -> ControlFlow<()>,
    ) -> Result<(), StoreError>;
    /// How many pages the walk has, and whether the last one ended it.
    fn progress(&self, sql: &Sql, w: &WalkKey) -> Result<(u64, bool), StoreError>;
    /// Removes what an ended walk (its row deleted) left outside the database.
    fn ended(&self, w: &WalkKey) -> Result<(), StoreError>;
    /// Removes what belongs to no walk in progress (`live`); how many.
    fn sweep(&self, live: &[Walking]) -> Result<usize, StoreError>;
}

/// Starts walk `w`: ends the walks of its dataset and project whose days overlap it (a
/// span's walk replaces the one before), and returns the new walk's id.
fn start(tx: &mut dyn Tx, w: &WalkKey) -> Result<u64, SqlError> {
    let p = w.params();
    end_overlapping(tx, &p)?;
    tx.row(
        "INSERT INTO walks (dataset, project, from_day, to_day) VALUES (?1, ?2, ?3, ?4) RETURNING id",
        &p,
    )?
    .map_or(Ok(0), |r| r.int(0))
    .map(|id| id as u64)
}

fn end_overlapping(tx: &mut dyn Tx, p: &[Value]) -> Result<(), SqlError> {
    tx.exec(
        "DELETE FROM walks WHERE dataset = ?1 AND project = ?2 AND from_day < ?4 AND to_day > ?3",
        p,
    )
    .map(|_| ())
}

/// Ends walk `w` in the caller's transaction (its pages on PostgreSQL go with its row); the
/// caller then calls [`Store::walk_ended`].
pub(super) fn end(tx: &mut dyn Tx, w: &WalkKey) -> Result<(), SqlError> {
    tx.exec(
        "DELETE FROM walks WHERE dataset = ?1 AND project = ?2 AND from_day = ?3 AND to_day = ?4",
        &w.params(),
    )
    .map(|_| ())
}

fn walk_id(sql: &Sql, w: &WalkKey) -> Result<Option<u64>, StoreError> {
    let p = w.params();
    sql.read(move |tx| {
        tx.row(
            "SELECT id FROM walks WHERE dataset = ?1 AND project = ?2 AND from_day = ?3 AND to_day = ?4",
            &p,
        )?
        .map(|r| r.int(0).map(|i| i as u64))
        .transpose()
    })
}

/// A walk in progress as the `walks` table names it: its dataset by name, perhaps one this
/// version does not know (a newer one's walk, never resumed by this one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Walking {
    /// Dataset.
    pub dataset: String,
    /// Project.
    pub project: String,
    /// First day.
    pub from: NaiveDate,
    /// The day after the last.
    pub to: NaiveDate,
}

impl Walking {
    /// The walk as this version keys it, its dataset's name being `dataset`.
    fn key(self, dataset: &'static str) -> WalkKey {
        WalkKey {
            dataset,
            project: self.project,
            from: self.from,
            to: self.to,
        }
    }
}

/// The walks in progress, most recent first, of one dataset and project or of all.
fn walking(sql: &Sql, of: Option<(&str, &str)>) -> Result<Vec<Walking>, StoreError> {
    let p: Vec<Value> = of
        .map(|(d, p)| vec![Value::from(d), Value::from(p)])
        .unwrap_or_default();
    let filter = if of.is_some() {
        "WHERE dataset = ?1 AND project = ?2"
    } else {
        ""
    };
    sql.read(move |tx| {
        tx.rows(
            &format!(
                "SELECT dataset, project, from_day, to_day FROM walks {filter}
                 ORDER BY from_day DESC, dataset, project"
            ),
            &p,
        )?
        .iter()
        .map(|r| {
            Ok(Walking {
                dataset: r.text(0)?,
                project: r.text(1)?,
                from: r.day(2)?,
                to: r.day(3)?,
            })
        })
        .collect()
    })
}

/// The pages of a walk as journal files beside a SQLite state.
#[derive(Debug)]
pub(super) struct Journals {
    /// The output folder (the journals are in its `.walks/`).
    out: PathBuf,
    /// Journals this handle has read or written: their walk's id and the end of their last
    /// frame.
    ends: Mutex<HashMap<WalkKey, JournalEnd>>,
    /// The journal being appended to, kept open from one append to the next (one at a time:
    /// the first pages of many walks do not each hold a file open).
    appending: Mutex<Option<(WalkKey, std::fs::File)>>,
}

#[derive(Debug, Clone, Copy)]
struct JournalEnd {
    id: u64,
    len: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Journals {
    pub(super) fn new(out: &Path) -> Self {
        Self {
            out: out.to_path_buf(),
            ends: Mutex::default(),
            appending: Mutex::default(),
        }
    }

    fn path(&self, w: &WalkKey) -> PathBuf {
        layout::journal_path(&self.out, w.dataset, &w.project, w.from, w.to)
    }

    fn error(&self, path: &Path, source: std::io::Error) -> StoreError {
        StoreError::Journal {
            path: path.display().to_string(),
            source,
        }
    }

    /// Reads the walk's journal frame by frame when it belongs to the walk in progress, each
    /// frame `want` names handed to `f` with its place (`f` may stop the reading), and notes where its whole frames end
    /// for the next append; `false` when there is no such journal.
    fn scan(
        &self,
        sql: &Sql,
        w: &WalkKey,
        want: &dyn Fn(usize) -> bool,
        f: &mut dyn FnMut(usize, journal::Frame<'_>) -> ControlFlow<()>,
    ) -> Result<bool, StoreError> {
        let Some(id) = walk_id(sql, w)? else {
            return Ok(false);
        };
        let path = self.path(w);
        let io = |e| self.error(&path, e);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io(e)),
        };
        let Some((found, mut reader)) =
            journal::Reader::open(std::io::BufReader::new(file)).map_err(io)?
        else {
            return Ok(false);
        };
        if found != id {
            return Ok(false);
        }
        let mut whole = true;
        for n in 0.. {
            if !want(n) {
                whole = false;
                if !reader.skip_frame().map_err(io)? {
                    break;
                }
                continue;
            }
            let Some(frame) = reader.next_frame().map_err(io)? else {
                break;
            };
            if f(n, frame).is_break() {
                whole = false;
                break;
            }
        }
        if whole {
            self.remember(w, id, reader.valid_len());
        }
        Ok(true)
    }

    /// Notes where the walk's journal (of walk `id`) ends, for the next append.
    fn remember(&self, w: &WalkKey, id: u64, len: u64) {
        self.close(w);
        lock(&self.ends).insert(w.clone(), JournalEnd { id, len });
    }

    /// Closes the walk's journal if it is kept open.
    fn close(&self, w: &WalkKey) {
        let mut a = lock(&self.appending);
        if a.as_ref().is_some_and(|(k, _)| k == w) {
            *a = None;
        }
    }

    /// Removes a project's journal folder, and the journals' folder, when they are empty.
    fn prune(&self, project_dir: Option<&Path>) {
        if let Some(dir) = project_dir {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = std::fs::remove_dir(self.out.join(layout::WALKS_DIR));
    }
}

impl PageStore for Journals {
    fn put(
        &self,
        sql: &Sql,
        w: &WalkKey,
        seq: u64,
        last: bool,
        data: &[u8],
    ) -> Result<(), StoreError> {
        let frame = journal::frame(seq, last, data);
        let path = self.path(w);
        let io = |e| self.error(&path, e);
        if seq == 0 {
            let key = w.clone();
            let id = sql.tx(move |tx| start(tx, &key))?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            let mut bytes = journal::header(id).to_vec();
            bytes.extend_from_slice(&frame);
            std::fs::write(&path, &bytes).map_err(io)?;
            self.remember(w, id, bytes.len() as u64);
            return Ok(());
        }
        let known = lock(&self.ends).get(w).copied();
        let open = match known {
            Some(o) => o,
            None => {
                self.progress(sql, w)?;
                lock(&self.ends).get(w).copied().ok_or_else(|| {
                    io(std::io::Error::other(format!(
                        "no walk in progress to add page {} to",
                        seq + 1
                    )))
                })?
            }
        };
        // The file kept from the previous append stands right after its last frame; a file
        // opened anew is cut to the last whole frame (a frame cut by a kill is overwritten).
        let kept = lock(&self.appending)
            .take()
            .filter(|(k, _)| k == w)
            .map(|(_, f)| f);
        let mut f = match kept {
            Some(f) => f,
            None => {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io)?;
                if f.metadata().map_err(io)?.len() != open.len {
                    f.set_len(open.len).map_err(io)?;
                }
                f.seek(std::io::SeekFrom::Start(open.len)).map_err(io)?;
                f
            }
        };
        // On an error the file is dropped: the next append opens it anew and cuts it.
        f.write_all(&frame).map_err(io)?;
        self.remember(w, open.id, open.len + frame.len() as u64);
        *lock(&self.appending) = Some((w.clone(), f));
        Ok(())
    }

    fn each(
        &self,
        sql: &Sql,
        w: &WalkKey,
        want: &dyn Fn(usize) -> bool,
        f: &mut dyn FnMut(usize, &[u8]) -> ControlFlow<()>,
    ) -> Result<(), StoreError> {
        self.scan(sql, w, want, &mut |n, frame| f(n, frame.data))?;
        Ok(())
    }

    fn progress(&self, sql: &Sql, w: &WalkKey) -> Result<(u64, bool), StoreError> {
        let (mut pages, mut last) = (0, false);
        self.scan(sql, w, &|_| true, &mut |_, frame| {
            pages += 1;
            last = frame.last;
            ControlFlow::Continue(())
        })?;
        Ok((pages, last))
    }

    fn ended(&self, w: &WalkKey) -> Result<(), StoreError> {
        self.close(w);
        lock(&self.ends).remove(w);
        let path = self.path(w);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.error(&path, e)),
            _ => {
                self.prune(path.parent());
                Ok(())
            }
        }
    }

    fn sweep(&self, live: &[Walking]) -> Result<usize, StoreError> {
        let live: HashSet<PathBuf> = live
            .iter()
            .map(|w| layout::journal_path(&self.out, &w.dataset, &w.project, w.from, w.to))
            .collect();
        let mut removed = 0;
        let Ok(projects) = std::fs::read_dir(self.out.join(layout::WALKS_DIR)) else {
            return Ok(0);
        };
        for p in projects.flatten() {
            let Ok(files) = std::fs::read_dir(p.path()) else {
                // A file where a project's folder belongs (none of docpipe's).
                if std::fs::remove_file(p.path()).is_ok() {
                    removed += 1;
                }
                continue;
            };
            for f in files.flatten() {
                if !live.contains(&f.path()) && std::fs::remove_file(f.path()).is_ok() {
                    removed += 1;
                }
            }
            self.prune(Some(&p.path()));
        }
        Ok(removed)
    }
}

/// The pages of a walk as rows of `walk_pages` on a shared PostgreSQL state (they go with
/// their walk's row: `ON DELETE CASCADE`).
#[derive(Debug)]
pub(super) struct Rows;

impl PageStore for Rows {
    fn put(
        &self,
        sql: &Sql,
        w: &WalkKey,
        seq: u64,
        last: bool,
        data: &[u8],
    ) -> Result<(), StoreError> {
        let mut p = w.params();
        p.extend([
            Value::Int(seq as i64),
            Value::from(last),
            Value::from(data.to_vec()),
        ]);
        let key = w.clone();
        sql.tx(move |tx| {
            if seq == 0 {
                start(tx, &key)?;
            }
            let added = tx.exec(
                "INSERT INTO walk_pages (walk_id, seq, last, data)
                 SELECT id, ?5, ?6, ?7 FROM walks
                 WHERE dataset = ?1 AND project = ?2 AND from_day = ?3 AND to_day = ?4
                 ON CONFLICT (walk_id, seq) DO UPDATE SET last = excluded.last, data = excluded.data",
                &p,
            )?;
            if added == 0 {
                return Err(SqlError {
                    message: format!("no walk in progress to add page {} to", seq + 1),
                    connection: false,
                });
            }
            Ok(())
        })
    }

    fn each(
        &self,
        sql: &Sql,
        w: &WalkKey,
        want: &dyn Fn(usize) -> bool,
        f: &mut dyn FnMut(usize, &[u8]) -> ControlFlow<()>,
    ) -> Result<(), StoreError> {
        // One page a query: a span's pages together may be far larger than memory allows.
        let p = w.params();
        let seqs: Vec<i64> = sql.read(move |tx| {
            tx.rows(
                "SELECT g.seq FROM walk_pages g JOIN walks w ON w.id = g.walk_id
                 WHERE w.dataset = ?1 AND w.project = ?2 AND w.from_day = ?3 AND w.to_day = ?4
                 ORDER BY g.seq",
                &p,
            )?
            .iter()
            .map(|r| r.int(0))
            .collect()
        })?;
        for (n, seq) in seqs.into_iter().enumerate() {
            if !want(n) {
                continue;
            }
            let mut p = w.params();
            p.push(Value::Int(seq));
            let data = sql.read(move |tx| {
                tx.row(
                    "SELECT g.data FROM walk_pages g JOIN walks w ON w.id = g.walk_id
                     WHERE w.dataset = ?1 AND w.project = ?2 AND w.from_day = ?3 AND w.to_day = ?4
                       AND g.seq = ?5",
                    &p,
                )?
                .map(|r| r.blob(0))
                .transpose()
            })?;
            // A page gone meanwhile: the walk ended under this reader (another daemon wrote it).
            let Some(data) = data else { break };
            if f(n, &data).is_break() {
                break;
            }
        }
        Ok(())
    }

    fn progress(&self, sql: &Sql, w: &WalkKey) -> Result<(u64, bool), StoreError> {
        let p = w.params();
        sql.read(move |tx| {
            let r = tx.row(
                "SELECT count(*), max(CASE WHEN g.last = 1 THEN g.seq END), max(g.seq)
                 FROM walk_pages g JOIN walks w ON w.id = g.walk_id
                 WHERE w.dataset = ?1 AND w.project = ?2 AND w.from_day = ?3 AND w.to_day = ?4",
                &p,
            )?;
            let Some(r) = r else {
                return Ok((0, false));
            };
            let last = r.opt_int(1)?;
            Ok((r.int(0)? as u64, last.is_some() && last == r.opt_int(2)?))
        })
    }

    fn ended(&self, _w: &WalkKey) -> Result<(), StoreError> {
        Ok(())
    }

    fn sweep(&self, _live: &[Walking]) -> Result<usize, StoreError> {
        Ok(0)
    }
}

impl Store {
    /// Keeps page `seq` (from 0) of walk `w`, as its dataset encodes it, and whether it ended
    /// the walk; page 0 starts the walk, replacing any of the same dataset and project whose
    /// days overlap it.
    pub fn put_page(
        &self,
        w: &WalkKey,
        seq: u64,
        last: bool,
        data: &[u8],
    ) -> Result<(), StoreError> {
        self.pages.put(&self.sql, w, seq, last, data)
    }

    /// Hands the kept pages of a walk to `f` in order, one at a time (none when it is not in
    /// progress): a span's pages together may be far larger than memory allows. Stops at the
    /// first error `f` returns, and returns it.
    pub fn each_page<E: From<StoreError>>(
        &self,
        w: &WalkKey,
        mut f: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.some_pages(w, |_| true, |_, data| f(data))
    }

    /// As [`Store::each_page`], the pages `want` names (by their place, from 0) alone, each
    /// handed to `f` with its place; the others are passed over unread.
    pub fn some_pages<E: From<StoreError>>(
        &self,
        w: &WalkKey,
        want: impl Fn(usize) -> bool,
        mut f: impl FnMut(usize, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut failed = None;
        self.pages
            .each(&self.sql, w, &want, &mut |n, data| match f(n, data) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            })?;
        failed.map_or(Ok(()), Err)
    }

    /// How many pages of a walk are kept, and whether the last one ended it.
    pub fn progress(&self, w: &WalkKey) -> Result<(u64, bool), StoreError> {
        self.pages.progress(&self.sql, w)
    }

    /// The walk in progress of a dataset and project that starts latest, if any.
    pub fn walk_in_progress(
        &self,
        dataset: &'static str,
        project: &str,
    ) -> Result<Option<WalkKey>, StoreError> {
        Ok(self.walks_in_progress(dataset, project)?.into_iter().next())
    }

    /// The walks in progress of a dataset and project, the one that starts latest first.
    pub fn walks_in_progress(
        &self,
        dataset: &'static str,
        project: &str,
    ) -> Result<Vec<WalkKey>, StoreError> {
        Ok(walking(&self.sql, Some((dataset, project)))?
            .into_iter()
            .map(|w| w.key(dataset))
            .collect())
    }

    /// Every walk in progress, most recent first, with its pages kept: those of the datasets
    /// `known` names (a name to this version's own; a walk of another is left out).
    pub fn walks(
        &self,
        known: impl Fn(&str) -> Option<&'static str>,
    ) -> Result<Vec<(WalkKey, u64)>, StoreError> {
        let mut out = Vec::new();
        for w in walking(&self.sql, None)? {
            let Some(dataset) = known(&w.dataset) else {
                continue;
            };
            let key = w.key(dataset);
            let (pages, _) = self.progress(&key)?;
            out.push((key, pages));
        }
        Ok(out)
    }

    /// Forgets the kept pages of a walk (to walk it afresh).
    pub fn drop_pages(&self, w: &WalkKey) -> Result<(), StoreError> {
        let key = w.clone();
        self.sql.tx(move |tx| end(tx, &key))?;
        self.pages.ended(w)
    }

    /// What a walk ended in a transaction (see [`end`]) left outside the database removed.
    /// Killed before this, a journal belongs to no walk: ignored, and swept at the next open.
    pub(super) fn walk_ended(&self, w: &WalkKey) -> Result<(), StoreError> {
        self.pages.ended(w)
    }

    /// Removes kept pages that belong to no walk in progress (a run killed between recording a
    /// window and removing its journal leaves one). Returns how many.
    pub fn sweep_pages(&self) -> Result<usize, StoreError> {
        let live = walking(&self.sql, None)?;
        self.pages.sweep(&live)
    }
}
