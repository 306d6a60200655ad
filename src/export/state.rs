//! The exporter's state in SQLite: windows, the walks in progress (their pages are in journal
//! files beside the database, see `journal.rs`), and the log of sent analytics requests that
//! makes the rate budget shared by every process using the database.

use crate::api::budget::{Budget, window};
use crate::api::views::{Counts, Rows, ViewsPage};
use crate::export::journal;
use crate::export::parquet::escape_partition_value;
use crate::ratelimit::wait_for_slot;
use chrono::{DateTime, NaiveDate, Utc};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::collections::{HashMap, HashSet};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// State errors.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// SQLite failed.
    #[error("state database {path}: {source}")]
    Db {
        /// The database file.
        path: String,
        /// Cause.
        source: rusqlite::Error,
    },
    /// A walk's journal cannot be read or written.
    #[error("walk journal {path}: {source}")]
    Journal {
        /// The journal file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A stored page does not decode (the journal was edited or damaged).
    #[error("walk journal {path}: stored page of {project} {day} at offset {offset} is damaged")]
    Damaged {
        /// The database file.
        path: String,
        /// Project.
        project: String,
        /// Day.
        day: NaiveDate,
        /// Offset.
        offset: u64,
    },
}

/// What the state knows of a window.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WindowState {
    /// Never fetched again.
    pub is_final: bool,
    /// Rows written last time.
    pub rows: Option<i64>,
    /// A persistent mismatch, if one was recorded.
    pub mismatch: Option<String>,
}

/// A backfill queued for the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Row id.
    pub id: i64,
    /// Projects (empty: all configured).
    pub projects: Vec<String>,
    /// First day.
    pub from: NaiveDate,
    /// Last day, included.
    pub to: NaiveDate,
}

/// A page kept until its window is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPage {
    /// Offset.
    pub offset: u64,
    /// Contents.
    pub page: ViewsPage,
}

/// A finished window, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// Project.
    pub project: String,
    /// Day.
    pub day: NaiveDate,
    /// Final.
    pub is_final: bool,
    /// Rows.
    pub rows: i64,
    /// Totals.
    pub totals: Counts,
    /// Requests this walk took.
    pub requests: u64,
    /// Mismatch, if any.
    pub mismatch: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// The state database.
#[derive(Debug)]
pub struct State {
    db: Db,
    /// Where the walks' journals are.
    walks_dir: PathBuf,
    /// Journals this handle has read or written: their walk id and the end of their last frame.
    open: Mutex<HashMap<(String, NaiveDate), Open>>,
    /// The journal of the walk being appended to, kept open from one append to the next (one
    /// at a time: the first pages of many windows do not each hold a file open).
    appending: Mutex<Option<Appending>>,
}

#[derive(Debug)]
struct Appending {
    key: (String, NaiveDate),
    file: std::fs::File,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    id: u64,
    len: u64,
}

/// The folder of the walks' journals, beside the state database.
pub const WALKS_DIR: &str = ".walks";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS windows (
    project TEXT NOT NULL,
    day TEXT NOT NULL,
    final INTEGER NOT NULL DEFAULT 0,
    rows INTEGER,
    human INTEGER,
    ai INTEGER,
    total INTEGER,
    requests INTEGER NOT NULL DEFAULT 0,
    mismatch TEXT,
    done_at TEXT,
    PRIMARY KEY (project, day)
);
-- The walk in progress of a window: its journal (see `journal.rs`) must carry this id.
CREATE TABLE IF NOT EXISTS walks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    day TEXT NOT NULL,
    UNIQUE (project, day)
);
-- Pages were kept here before the journals; a walk left in it is walked again.
DROP TABLE IF EXISTS pages;
CREATE TABLE IF NOT EXISTS requests (
    scope TEXT NOT NULL,
    sent_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_by_scope ON requests (scope, sent_at_ms);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS backfill_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    projects TEXT NOT NULL,
    from_day TEXT NOT NULL,
    to_day TEXT NOT NULL,
    queued_at TEXT NOT NULL,
    done_at TEXT
);
CREATE TABLE IF NOT EXISTS request_counts (
    scope TEXT PRIMARY KEY,
    n INTEGER NOT NULL
);
";

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

/// A connection to a state database, shared by the callers of one handle.
#[derive(Debug)]
pub struct Db {
    conn: Mutex<Connection>,
    path: String,
}

impl Db {
    /// Opens (and creates) a state database with `schema`, in WAL mode, waiting up to 60 s for
    /// other processes' locks.
    pub fn open(path: &Path, schema: &str) -> Result<Self, StateError> {
        let err = |source| StateError::Db {
            path: path.display().to_string(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(60))
            .map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        conn.execute_batch(schema).map_err(err)?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.display().to_string(),
        })
    }

    /// Runs `f` on the connection, naming the file in its error.
    pub fn run<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StateError> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn).map_err(|source| StateError::Db {
            path: self.path.clone(),
            source,
        })
    }

    /// The file.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl State {
    /// Opens (and creates) the database, waiting up to 60 s for other processes' locks.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        Ok(Self {
            db: Db::open(path, SCHEMA)?,
            walks_dir: path.parent().unwrap_or(Path::new(".")).join(WALKS_DIR),
            open: Mutex::default(),
            appending: Mutex::default(),
        })
    }

    /// The state of every window of a project that the database knows.
    pub fn windows(
        &self,
        project: &str,
    ) -> Result<std::collections::HashMap<NaiveDate, WindowState>, StateError> {
        self.db.run(|c| {
            let mut st = c.prepare_cached(
                "SELECT day, final, rows, mismatch FROM windows WHERE project = ?1",
            )?;
            let rows = st.query_map(params![project], |r| {
                let day: String = r.get(0)?;
                Ok((
                    day,
                    WindowState {
                        is_final: r.get::<_, i64>(1)? != 0,
                        rows: r.get(2)?,
                        mismatch: r.get(3)?,
                    },
                ))
            })?;
            let mut out = std::collections::HashMap::new();
            for row in rows {
                let (day, ws) = row?;
                if let Ok(d) = NaiveDate::parse_from_str(&day, "%Y-%m-%d") {
                    out.insert(d, ws);
                }
            }
            Ok(out)
        })
    }

    /// The time zone of the folder's days: the one recorded, or `tz` when none is (folders
    /// written before the setting existed are UTC).
    pub fn claim_timezone(&self, tz: &str) -> Result<String, StateError> {
        self.db.run(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let recorded: Option<String> = tx
                .query_row(
                    "SELECT value FROM settings WHERE key = 'timezone'",
                    [],
                    |r| r.get(0),
                )
                .optional()?;
            let zone = match recorded {
                Some(z) => z,
                None => {
                    let any: i64 =
                        tx.query_row("SELECT COUNT(*) FROM windows", [], |r| r.get(0))?;
                    let zone = if any > 0 {
                        "UTC".to_string()
                    } else {
                        tz.to_string()
                    };
                    tx.execute(
                        "INSERT INTO settings (key, value) VALUES ('timezone', ?1)",
                        params![zone],
                    )?;
                    zone
                }
            };
            tx.commit()?;
            Ok(zone)
        })
    }

    /// The journal file of a window.
    fn journal_path(&self, project: &str, day: NaiveDate) -> PathBuf {
        self.walks_dir
            .join(format!("project={}", escape_partition_value(project)))
            .join(format!("date={day}.pages"))
    }

    fn journal_error(&self, path: &Path, source: std::io::Error) -> StateError {
        StateError::Journal {
            path: path.display().to_string(),
            source,
        }
    }

    /// The id of the window's walk in progress, if any.
    fn walk_id(&self, project: &str, day: NaiveDate) -> Result<Option<u64>, StateError> {
        self.db.run(|c| {
            c.prepare_cached("SELECT id FROM walks WHERE project = ?1 AND day = ?2")?
                .query_row(params![project, day.to_string()], |r| r.get::<_, i64>(0))
                .optional()
                .map(|id| id.map(|i| i as u64))
        })
    }

    /// The bytes of the window's journal, when it belongs to the walk in progress.
    fn journal(&self, project: &str, day: NaiveDate) -> Result<Option<(u64, Vec<u8>)>, StateError> {
        let Some(id) = self.walk_id(project, day)? else {
            return Ok(None);
        };
        let path = self.journal_path(project, day);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.journal_error(&path, e)),
        };
        Ok((journal::read(&bytes).id == Some(id)).then_some((id, bytes)))
    }

    /// Stores a fetched page of an unfinished window: the page at offset 0 starts a new walk
    /// (and journal); a later one is appended to the walk in progress.
    pub fn put_page(
        &self,
        project: &str,
        day: NaiveDate,
        offset: u64,
        page: &ViewsPage,
    ) -> Result<(), StateError> {
        let key = (project.to_string(), day);
        let frame = journal::frame(offset, page);
        let path = self.journal_path(project, day);
        let io = |e| self.journal_error(&path, e);
        if offset == 0 {
            let id = self.db.run(|c| {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached("DELETE FROM walks WHERE project = ?1 AND day = ?2")?
                    .execute(params![project, day.to_string()])?;
                tx.prepare_cached("INSERT INTO walks (project, day) VALUES (?1, ?2)")?
                    .execute(params![project, day.to_string()])?;
                let id = tx.last_insert_rowid() as u64;
                tx.commit()?;
                Ok(id)
            })?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            let mut bytes = journal::header(id).to_vec();
            bytes.extend_from_slice(&frame);
            std::fs::write(&path, &bytes).map_err(io)?;
            self.remember(project, day, id, bytes.len() as u64);
            return Ok(());
        }
        let known = self.opened().get(&key).copied();
        let open = match known {
            Some(o) => o,
            None => {
                self.progress(project, day)?;
                self.opened().get(&key).copied().ok_or_else(|| {
                    io(std::io::Error::other(format!(
                        "no walk in progress to add the page at offset {offset} to"
                    )))
                })?
            }
        };
        // The file kept from the previous append stands right after its last frame; a file
        // opened anew is cut to the last whole frame (a frame cut by a kill is overwritten).
        let kept = self
            .appending()
            .take()
            .filter(|a| a.key == key)
            .map(|a| a.file);
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
        self.remember(project, day, open.id, open.len + frame.len() as u64);
        *self.appending() = Some(Appending { key, file: f });
        Ok(())
    }

    fn appending(&self) -> std::sync::MutexGuard<'_, Option<Appending>> {
        self.appending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn opened(&self) -> std::sync::MutexGuard<'_, HashMap<(String, NaiveDate), Open>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stored pages of a window, by offset.
    pub fn pages(&self, project: &str, day: NaiveDate) -> Result<Vec<StoredPage>, StateError> {
        let Some((id, bytes)) = self.journal(project, day)? else {
            return Ok(Vec::new());
        };
        let read = journal::read(&bytes);
        self.remember(project, day, id, read.valid_len);
        read.frames
            .iter()
            .map(|f| {
                journal::page(f).ok_or_else(|| StateError::Damaged {
                    path: self.journal_path(project, day).display().to_string(),
                    project: project.to_string(),
                    day,
                    offset: journal::peek(f).0,
                })
            })
            .collect()
    }

    /// Offsets of the stored pages of a window, and whether the last one ends it.
    pub fn progress(&self, project: &str, day: NaiveDate) -> Result<(Vec<u64>, bool), StateError> {
        let Some((id, bytes)) = self.journal(project, day)? else {
            return Ok((Vec::new(), false));
        };
        let read = journal::read(&bytes);
        let mut offsets = Vec::with_capacity(read.frames.len());
        let mut complete = false;
        for f in &read.frames {
            let (offset, more) = journal::peek(f);
            offsets.push(offset);
            complete = !more;
        }
        self.remember(project, day, id, read.valid_len);
        Ok((offsets, complete))
    }

    /// Notes where the window's journal (of walk `id`) ends, for the next append.
    fn remember(&self, project: &str, day: NaiveDate, id: u64, len: u64) {
        self.forget_file(project, day);
        self.opened()
            .insert((project.to_string(), day), Open { id, len });
    }

    /// Closes the window's journal if it is kept open.
    fn forget_file(&self, project: &str, day: NaiveDate) {
        let mut a = self.appending();
        if a.as_ref()
            .is_some_and(|a| a.key.0 == project && a.key.1 == day)
        {
            *a = None;
        }
    }

    /// The windows with a walk in progress.
    fn walk_keys(&self) -> Result<Vec<(String, NaiveDate)>, StateError> {
        let keys: Vec<(String, String)> = self.db.run(|c| {
            let mut st =
                c.prepare_cached("SELECT project, day FROM walks ORDER BY day DESC, project")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        Ok(keys
            .into_iter()
            .filter_map(|(p, d)| Some((p, d.parse::<NaiveDate>().ok()?)))
            .collect())
    }

    /// The walks in progress: project, day and the offsets stored.
    pub fn walks(&self) -> Result<Vec<(String, NaiveDate, Vec<u64>)>, StateError> {
        let mut out = Vec::new();
        for (project, day) in self.walk_keys()? {
            let (offsets, _) = self.progress(&project, day)?;
            out.push((project, day, offsets));
        }
        Ok(out)
    }

    /// Removes journal files that belong to no walk in progress (a run killed between recording
    /// a window and removing its journal leaves one). Returns how many.
    pub fn sweep_journals(&self) -> Result<usize, StateError> {
        let live: HashSet<PathBuf> = self
            .walk_keys()?
            .into_iter()
            .map(|(p, d)| self.journal_path(&p, d))
            .collect();
        let mut removed = 0;
        let Ok(projects) = std::fs::read_dir(&self.walks_dir) else {
            return Ok(0);
        };
        for p in projects.flatten() {
            let Ok(files) = std::fs::read_dir(p.path()) else {
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

    /// Removes a window's journal file, if there is one.
    fn remove_journal(&self, project: &str, day: NaiveDate) -> Result<(), StateError> {
        self.forget_file(project, day);
        self.opened().remove(&(project.to_string(), day));
        let path = self.journal_path(project, day);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.journal_error(&path, e)),
            _ => {
                self.prune(path.parent());
                Ok(())
            }
        }
    }

    /// Removes a project's journal folder, and the journals' folder, when they are empty.
    fn prune(&self, project_dir: Option<&Path>) {
        if let Some(dir) = project_dir {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = std::fs::remove_dir(&self.walks_dir);
    }

    /// Forgets the stored pages of a window (to walk it again).
    pub fn drop_pages(&self, project: &str, day: NaiveDate) -> Result<(), StateError> {
        self.db.run(|c| {
            c.prepare_cached("DELETE FROM walks WHERE project = ?1 AND day = ?2")?
                .execute(params![project, day.to_string()])?;
            Ok(())
        })?;
        self.remove_journal(project, day)
    }

    /// Records a written window and ends its walk, in one transaction; then removes the journal.
    pub fn finish(&self, done: &Done) -> Result<(), StateError> {
        self.db.run(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.prepare_cached("INSERT OR REPLACE INTO windows (project, day, final, rows, human, ai, total, requests, mismatch, done_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")?.execute(
                params![
                    done.project,
                    done.day.to_string(),
                    done.is_final as i64,
                    done.rows,
                    done.totals.human,
                    done.totals.ai,
                    done.totals.total,
                    done.requests as i64,
                    done.mismatch,
                    done.at.to_rfc3339(),
                ],
            )?;
            tx.prepare_cached("DELETE FROM walks WHERE project = ?1 AND day = ?2")?.execute( params![done.project, done.day.to_string()])?;
            tx.commit()
        })?;
        // Killed before this, the journal belongs to no walk: ignored, and swept at the next open.
        self.remove_journal(&done.project, done.day)
    }

    /// Queues a backfill for the daemon (`projects` empty: all).
    pub fn queue_backfill(
        &self,
        projects: &[String],
        from: NaiveDate,
        to: NaiveDate,
        now: DateTime<Utc>,
    ) -> Result<i64, StateError> {
        self.db.run(|c| {
            c.prepare_cached(
                "INSERT INTO backfill_queue (projects, from_day, to_day, queued_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                projects.join(","),
                from.to_string(),
                to.to_string(),
                now.to_rfc3339()
            ])?;
            Ok(c.last_insert_rowid())
        })
    }

    /// Queued backfills not drained yet, oldest first.
    pub fn queued(&self) -> Result<Vec<Queued>, StateError> {
        self.db.run(|c| {
            let mut st = c.prepare_cached(
                "SELECT id, projects, from_day, to_day FROM backfill_queue WHERE done_at IS NULL ORDER BY id",
            )?;
            let rows = st.query_map([], |r| {
                let projects: String = r.get(1)?;
                let day = |i: usize| -> rusqlite::Result<NaiveDate> {
                    let s: String = r.get(i)?;
                    s.parse().map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
                    })
                };
                Ok(Queued {
                    id: r.get(0)?,
                    projects: projects
                        .split(',')
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect(),
                    from: day(2)?,
                    to: day(3)?,
                })
            })?;
            rows.collect()
        })
    }

    /// Marks a queued backfill drained.
    pub fn queue_done(&self, id: i64, now: DateTime<Utc>) -> Result<(), StateError> {
        self.db.run(|c| {
            c.prepare_cached("UPDATE backfill_queue SET done_at = ?2 WHERE id = ?1")?
                .execute(params![id, now.to_rfc3339()])
                .map(|_| ())
        })
    }

    /// The most recent row count of a project (for estimates), if any.
    pub fn recent_rows(&self, project: &str) -> Result<Option<i64>, StateError> {
        self.db.run(|c| {
            c.prepare_cached("SELECT rows FROM windows WHERE project = ?1 AND rows IS NOT NULL ORDER BY day DESC LIMIT 1")?.query_row(
                params![project],
                |r| r.get(0),
            )
            .optional()
        })
    }
}

/// The rate budget shared through a SQLite database: every process that opens the same file
/// counts the same requests.
///
/// With a large budget, one transaction per request costs more than the request's decoding, so
/// an analytics scope with room for at least 128 more requests takes a *lease*: up to 64 slots
/// (at most 1/64 of the room) recorded at once, stamped [`LEASE_MS`] in the future, and used
/// within that time. A slot used before its stamp leaves the log after the request does, so the
/// count never runs short. Slots not used in time are handed back with the next transaction, and
/// [`Budget::release`] hands back the rest at the end of a run; a killed process leaves at most
/// 63 counted for an hour, on the safe side. Under the service's 100 an hour there is never room
/// for 128: each request is its own transaction.
#[derive(Debug)]
pub struct SqliteBudget {
    state: State,
    leases: Mutex<HashMap<String, Lease>>,
}

/// How long leased slots may be used, and how far ahead they are stamped.
pub const LEASE_MS: i64 = 2_000;

/// Slots taken in one transaction and not used yet.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// Their stamp in the log (lease time + `LEASE_MS`): usable until then.
    at_ms: i64,
    left: i64,
    limit: u32,
}

impl SqliteBudget {
    /// A budget in the database at `path`.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        Ok(Self {
            state: State::open(path)?,
            leases: Mutex::default(),
        })
    }

    /// How many slots to take at once with `room` left under the limit.
    fn lease_size(scope: &str, room: i64) -> i64 {
        if scope.starts_with("analytics:") && room >= 128 {
            (room / 64).min(64)
        } else {
            1
        }
    }
}

/// Hands back the unused slots of `lease`: deletes that many of its rows.
fn hand_back(tx: &rusqlite::Transaction, scope: &str, lease: Lease) -> rusqlite::Result<()> {
    if lease.left <= 0 {
        return Ok(());
    }
    let n = tx
        .prepare_cached(
            "DELETE FROM requests WHERE rowid IN (SELECT rowid FROM requests
             WHERE scope = ?1 AND sent_at_ms = ?2 LIMIT ?3)",
        )?
        .execute(params![scope, lease.at_ms, lease.left])? as i64;
    tx.prepare_cached("UPDATE request_counts SET n = max(n - ?2, 0) WHERE scope = ?1")?
        .execute(params![scope, n])?;
    Ok(())
}

impl Budget for SqliteBudget {
    fn try_take(
        &self,
        scope: &str,
        limit: u32,
        now: DateTime<Utc>,
    ) -> Result<(), chrono::Duration> {
        let now_ms = now.timestamp_millis();
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        let old = leases.remove(scope);
        if let Some(mut l) = old
            && l.left > 0
            && l.limit == limit
            && now_ms <= l.at_ms
        {
            l.left -= 1;
            leases.insert(scope.to_string(), l);
            return Ok(());
        }
        let horizon = now_ms - window().num_milliseconds();
        let result = self.state.db.run(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if let Some(l) = old {
                hand_back(&tx, scope, l)?;
            }
            // The count of live requests is kept beside the log, so that a check costs the same
            // whether the window holds ten requests or ten thousand.
            let stored: Option<i64> = tx.prepare_cached("SELECT n FROM request_counts WHERE scope = ?1")?.query_row( params![scope], |r| r.get(0))
                .optional()?;
            let expired = tx.prepare_cached("DELETE FROM requests WHERE scope = ?1 AND sent_at_ms <= ?2")?.execute(
                params![scope, horizon],
            )? as i64;
            let mut count = match stored {
                Some(n) => (n - expired).max(0),
                None => tx.prepare_cached("SELECT COUNT(*) FROM requests WHERE scope = ?1")?.query_row( params![scope], |r| r.get(0))?,
            };
            let room = i64::from(limit) - count;
            let outcome = if room > 0 {
                let take = Self::lease_size(scope, room);
                let at_ms = if take > 1 { now_ms + LEASE_MS } else { now_ms };
                let mut insert = tx.prepare_cached("INSERT INTO requests (scope, sent_at_ms) VALUES (?1, ?2)")?;
                for _ in 0..take {
                    insert.execute(params![scope, at_ms])?;
                }
                count += take;
                Ok(Lease { at_ms, left: take - 1, limit })
            } else {
                // The request that must leave the window before one more fits.
                let oldest: i64 = tx.prepare_cached("SELECT sent_at_ms FROM requests WHERE scope = ?1 ORDER BY sent_at_ms LIMIT 1 OFFSET ?2")?.query_row(
                    params![scope, count - i64::from(limit)],
                    |r| r.get(0),
                )?;
                Err(wait_for_slot(DateTime::from_timestamp_millis(oldest).into_iter(), 1, window(), now)
                    .unwrap_or(chrono::Duration::seconds(1)))
            };
            tx.prepare_cached("INSERT INTO request_counts (scope, n) VALUES (?1, ?2) ON CONFLICT (scope) DO UPDATE SET n = excluded.n")?.execute(
                params![scope, count],
            )?;
            tx.commit()?;
            Ok(outcome)
        });
        match result {
            Ok(Ok(lease)) => {
                if lease.left > 0 {
                    leases.insert(scope.to_string(), lease);
                }
                Ok(())
            }
            Ok(Err(wait)) => Err(wait),
            Err(e) => {
                // Without the shared log we cannot know what others sent: wait and try again.
                tracing::warn!(error = %e, "rate budget unavailable; waiting");
                Err(chrono::Duration::seconds(5))
            }
        }
    }

    fn release(&self) {
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        if leases.is_empty() {
            return;
        }
        let result = self.state.db.run(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for (scope, l) in leases.iter() {
                hand_back(&tx, scope, *l)?;
            }
            tx.commit()
        });
        match result {
            Ok(()) => leases.clear(),
            // Kept: counted for an hour, on the safe side.
            Err(e) => tracing::warn!(error = %e, "cannot hand back unused budget slots"),
        }
    }

    fn used(&self, scope: &str, now: DateTime<Utc>) -> u32 {
        let horizon = now.timestamp_millis() - window().num_milliseconds();
        self.state
            .db
            .run(|c| {
                c.prepare_cached(
                    "SELECT COUNT(*) FROM requests WHERE scope = ?1 AND sent_at_ms > ?2",
                )?
                .query_row(params![scope, horizon], |r| r.get::<_, i64>(0))
            })
            .map_or(0, |n| n as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_the_compact_encoding() {
        use crate::api::views::ViewRow;
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

    /// Two budgets on one file, and a start time.
    fn two_handles() -> (tempfile::TempDir, SqliteBudget, SqliteBudget, DateTime<Utc>) {
        let dir = tempfile::tempdir().unwrap();
        let a = SqliteBudget::open(&dir.path().join("s.sqlite")).unwrap();
        let b = SqliteBudget::open(&dir.path().join("s.sqlite")).unwrap();
        let t0 = DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z")
            .unwrap()
            .to_utc();
        (dir, a, b, t0)
    }

    #[test]
    fn two_handles_on_one_file_share_the_budget() {
        let (_dir, a, b, t0) = two_handles();
        for i in 0..3 {
            let who: &dyn Budget = if i % 2 == 0 { &a } else { &b };
            assert!(
                who.try_take("analytics:o", 3, t0 + chrono::Duration::seconds(i))
                    .is_ok()
            );
        }
        let wait = b
            .try_take("analytics:o", 3, t0 + chrono::Duration::seconds(10))
            .unwrap_err();
        assert_eq!(wait, window() - chrono::Duration::seconds(10));
        assert_eq!(a.used("analytics:o", t0 + chrono::Duration::seconds(10)), 3);
        assert!(a.try_take("analytics:other", 3, t0).is_ok());
    }

    #[test]
    fn a_large_budget_is_taken_in_leases_that_the_other_handle_counts_and_that_are_handed_back() {
        let (dir, a, b, t0) = two_handles();
        // Room for 1,000: a lease of 1000/64 = 15 slots, counted by the other handle at once.
        a.try_take("analytics:o", 1000, t0).unwrap();
        assert_eq!(b.used("analytics:o", t0), 15);
        for _ in 1..15 {
            a.try_take("analytics:o", 1000, t0).unwrap();
        }
        assert_eq!(b.used("analytics:o", t0), 15);
        // The 16th takes a new lease: 985 / 64 = 15 more.
        a.try_take("analytics:o", 1000, t0).unwrap();
        assert_eq!(b.used("analytics:o", t0), 30);
        // Used in time, the slots stay counted until an hour after their stamp.
        let stamp = t0 + chrono::Duration::milliseconds(LEASE_MS);
        assert_eq!(b.used("analytics:o", stamp + window()), 0);
        assert_eq!(
            b.used(
                "analytics:o",
                stamp + window() - chrono::Duration::milliseconds(1)
            ),
            30
        );
        // The 14 unused slots are handed back.
        a.release();
        assert_eq!(b.used("analytics:o", t0), 16);
        // Too late for its lease: the unused slots go back and a new lease is taken.
        a.try_take("analytics:o", 1000, t0).unwrap();
        let late = stamp + chrono::Duration::milliseconds(1);
        a.try_take("analytics:o", 1000, late).unwrap();
        assert_eq!(b.used("analytics:o", late), 17 + (1000 - 17) / 64);
        // Near the limit, and for other scopes, each request is its own transaction.
        let c = SqliteBudget::open(&dir.path().join("c.sqlite")).unwrap();
        c.try_take("analytics:o", 100, t0).unwrap();
        c.try_take("agent:p", 100_000, t0).unwrap();
        assert_eq!(c.used("analytics:o", t0), 1);
        assert_eq!(c.used("agent:p", t0), 1);
        // Leases never let more than the limit through.
        for i in 0..200 {
            b.try_take("analytics:z", 200, t0 + chrono::Duration::milliseconds(i))
                .unwrap();
        }
        let wait = b
            .try_take("analytics:z", 200, t0 + chrono::Duration::seconds(1))
            .unwrap_err();
        assert!(wait > chrono::Duration::minutes(59), "{wait}");
    }
}
