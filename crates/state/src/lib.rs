//! Every table of state, in the output folder's SQLite file (`state.sqlite`, opened once per
//! process) or on a PostgreSQL server shared by several daemons (`[state] url`), each table
//! written once against `sql.rs`: every dataset's days written (`windows.rs`), the walks in
//! progress of every dataset (`pages.rs`: their pages in journal files beside the SQLite file,
//! see `journal.rs`, or rows of `walk_pages` on PostgreSQL), the spans and threads fetched
//! (`shaped.rs`), the looks the planner decides from (`freshness.rs`), the backfill queue
//! (`queue.rs`), window claims (`claims.rs`), heartbeats (`daemons.rs`), the hourly spend,
//! windows' failures and rules' last runs the status page shows (`activity.rs`), the projects
//! the service does not know (`unknown.rs`), the rule ledger and the impact of its firings
//! (`ledger.rs`, `impact.rs`); and the rate budget's request log (`budget.rs`, in the same
//! place, or in `budget_db`, which then holds only the budget's tables).

pub mod activity;
pub mod budget;
pub mod claims;
pub mod daemons;
mod freshness;
pub mod impact;
pub mod instants;
pub mod journal;
pub mod keys;
pub mod ledger;
mod pages;
pub mod pg;
mod queue;
pub mod rate;
pub mod reask;
mod shaped;
pub mod sql;
pub mod streams;
pub mod unknown;
mod windows;

pub use budget::SqliteBudget;
pub use freshness::{Look, SpanLook};
pub use pages::WalkKey;
pub use queue::{Queue, Queued};
pub use shaped::ShapedWritten;
pub use windows::{DayRecord, Known, KnownDays, WindowState, WrittenWindow};

use rusqlite::Connection;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The log lines' target: the module they came from before this crate was cut out.
const TARGET: &str = "docpipe::store";

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The output folder cannot be used.
    #[error("output folder {path}: {message}")]
    Folder {
        /// Folder.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Another docpipe holds the folder's lock.
    #[error("output folder {path}: {message}")]
    Busy {
        /// Folder.
        path: String,
        /// Who holds it, and the ways out.
        message: String,
    },
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
    /// A statement failed on SQLite (through the store's common interface, see `sql.rs`).
    #[error("state database {name}: {message}")]
    Sql {
        /// The database file.
        name: String,
        /// What failed.
        message: String,
    },
    /// The shared state database (PostgreSQL) failed.
    #[error(transparent)]
    Shared(#[from] pg::PgError),
}

/// The state database of an output folder.
pub fn state_path(out: &Path) -> PathBuf {
    out.join("state.sqlite")
}

/// How many times this process opened each SQLite file, for the debug log (one open per file
/// per process is the rule: a test reads it there).
static OPENS: Mutex<Option<HashMap<PathBuf, u64>>> = Mutex::new(None);

/// A connection to a SQLite file, shared by every part of the process that uses the file.
#[derive(Debug)]
pub struct Db {
    conn: Mutex<Connection>,
    path: String,
}

impl Db {
    /// Opens (and creates) a database with `schema`, in WAL mode, waiting up to 60 s for other
    /// processes' locks.
    pub fn open(path: &Path, schema: &str) -> Result<Self, StoreError> {
        let err = |source| StoreError::Db {
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
        // Up to 64 MiB of pages kept (SQLite's default is 2 MiB, and the state of 50 projects
        // over a year is 30 MiB: each status read every page of it again from the file).
        conn.pragma_update(None, "cache_size", -65536)
            .map_err(err)?;
        // Query plans fixed when a statement is prepared: without this, SQLite (built with
        // STAT4) may mark a cached statement to be compiled again whenever a parameter's value
        // changes (measured: a tenth of the status page's time at 50 projects x 8 datasets x
        // 365 days went to compiling the same per-project statements again).
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )
        .map_err(err)?;
        conn.execute_batch(schema).map_err(err)?;
        let key = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
        let n = {
            let mut opens = OPENS.lock().unwrap_or_else(|e| e.into_inner());
            let n = opens.get_or_insert_default().entry(key).or_default();
            *n += 1;
            *n
        };
        tracing::debug!(target: TARGET, path = %path.display(), opens = n, "SQLite file opened");
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.display().to_string(),
        })
    }

    /// Adds tables to an open database (`CREATE ... IF NOT EXISTS` statements).
    pub fn ensure(&self, schema: &str) -> Result<(), StoreError> {
        self.with_conn(|c| c.execute_batch(schema))
    }

    /// Runs `f` on the connection, naming the file in its error.
    pub fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn).map_err(|source| StoreError::Db {
            path: self.path.clone(),
            source,
        })
    }

    /// The file.
    pub fn path(&self) -> &str {
        &self.path
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

/// The state of an output folder: one connection to where the state is (the local file or the
/// shared database), shared by the exporter, the backfill queue, the claims, the heartbeats, the
/// rule ledger and (when `budget_db` is this file) the rate budget.
#[derive(Debug)]
pub struct Store {
    /// The local SQLite file (the state itself, or beside a shared database what belongs to
    /// this machine alone: the output mirror's manifest).
    db: Arc<Db>,
    /// Where the state is: the local file, or a database shared by several daemons.
    sql: sql::Sql,
    /// Where the pages of the walks in progress are: journal files in the output folder's
    /// `.walks/` beside the SQLite file, or rows of the shared database.
    pages: Box<dyn pages::PageStore>,
}

/// An exclusive `flock` on the state's file while its schema is brought up to date, released
/// when the returned file closes (SQLite's own locks are `fcntl` locks, which `flock` leaves
/// alone).
fn migration_lock(path: &Path) -> Result<std::fs::File, StoreError> {
    use std::os::fd::AsRawFd;
    let err = |e: std::io::Error| StoreError::Folder {
        path: path.display().to_string(),
        message: format!("cannot lock the state while its schema is brought up to date: {e}"),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(err)?;
    // SAFETY: a descriptor of a file this function holds open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    Ok(file)
}

impl Store {
    /// Opens (and creates) the state database at `path`; the journals go in `.walks/` beside it.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        // One process makes or migrates the state at a time: two opening a new folder at once
        // would race to set its journal mode (`database is locked`) and both find a column
        // missing and add it (`duplicate column name`).
        let _migrating = migration_lock(path)?;
        let db = Arc::new(Db::open(path, SCHEMA)?);
        db.with_conn(windows::one_table)?;
        db.ensure(windows::COVERING)?;
        db.with_conn(pages::one_store)?;
        db.ensure(shaped::SCHEMA)?;
        db.ensure(freshness::SCHEMA)?;
        db.ensure(queue::SCHEMA)?;
        db.ensure(daemons::SCHEMA)?;
        db.ensure(claims::SCHEMA)?;
        db.ensure(activity::SCHEMA)?;
        db.with_conn(|c| ledger::add_columns(c, "window_failures", &activity::FAILURE_COLUMNS))?;
        db.with_conn(|c| queue::add_lease_columns(c))?;
        ledger::Ledger::on(db.clone())?;
        Ok(Self {
            sql: sql::Sql::Lite(db.clone()),
            db,
            pages: Box::new(pages::Journals::new(
                path.parent().unwrap_or(Path::new(".")),
            )),
        })
    }

    /// Opens the state on a database shared by several daemons (`pg`, its schema migrated),
    /// with the local file at `path` for what belongs to this machine alone.
    pub fn open_shared(path: &Path, pg: Arc<pg::Pg>) -> Result<Self, StoreError> {
        let mut store = Self::open(path)?;
        store.sql = sql::Sql::Pg(pg);
        store.pages = Box::new(pages::Rows);
        Ok(store)
    }

    /// Whether the state is on a database several processes share (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        matches!(self.sql, sql::Sql::Pg(_))
    }

    /// Where the state is (for status and messages).
    pub fn sql(&self) -> &sql::Sql {
        &self.sql
    }

    /// The connection, for the budget and the ledger to share.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// The backfill queue, on this store's connection.
    pub fn queue(&self) -> Queue {
        Queue::new(self.sql.clone())
    }

    /// The window claims, on this store's connection.
    pub fn claims(&self) -> claims::Claims {
        claims::Claims::new(self.sql.clone())
    }

    /// The daemons' heartbeats, on this store's connection.
    pub fn daemons(&self) -> daemons::Daemons {
        daemons::Daemons::new(self.sql.clone())
    }

    /// What the status page reads that no other table keeps: the hourly spend, the windows'
    /// troubles, the rules' last runs (recorded from the run's events by [`Store::receive`]).
    pub fn history(&self) -> activity::Activity {
        activity::Activity::new(self.sql.clone())
    }

    /// Records what `event` says into the activity tables, or for an answered key into its
    /// record (a receiver of a run's events). A failure to record is logged: the work goes on.
    pub fn receive(&self, event: &docpipe_catalog::events::Event<'_>) {
        if let docpipe_catalog::events::Event::KeyAnswered {
            org,
            fingerprint,
            at,
            refused,
        } = *event
        {
            if let Err(e) = self.key_answered(org, fingerprint, at, refused) {
                tracing::warn!(target: TARGET,
                    "state: cannot record how the service answered the admin key of organization {org}: {e}"
                );
            }
            return;
        }
        self.history().receive(event);
    }

    /// The rule ledger, on this store's connection.
    pub fn ledger(&self) -> ledger::Ledger {
        ledger::Ledger::on_ready(self.sql.clone())
    }
}

/// The state's activity tables as a receiver of a run's events: what a client hands each
/// analytics request it sends to.
#[derive(Debug, Clone)]
pub struct Recorder(Arc<Folder>);

impl Recorder {
    /// Records into `folder`'s state.
    pub fn new(folder: Arc<Folder>) -> Self {
        Self(folder)
    }
}

impl docpipe_catalog::events::Events for Recorder {
    fn event(&self, event: &docpipe_catalog::events::Event<'_>) {
        self.0.store().receive(event);
    }
}

/// An output folder opened for its state: created, its lock taken (when exporting), temporary
/// files of killed runs swept, and its [`Store`] opened once.
#[derive(Debug)]
pub struct Folder {
    out: PathBuf,
    store: Store,
    _lock: Option<std::fs::File>,
}

impl Folder {
    /// Opens `out` to export into it: creates it, takes its lock (waiting for another docpipe
    /// that holds it), removes temporary files killed runs left, opens the store, and refuses a
    /// folder whose days are another time zone's than `tz`.
    pub async fn open_locked(out: &Path, tz: &str) -> Result<Self, StoreError> {
        Self::open_for_export(out, tz, None, LockWait::Forever).await
    }

    /// [`Folder::open_locked`], with the state on `shared` when given (a database several
    /// daemons share): then no lock (the other daemons write into the folder at the same time,
    /// each window claimed by one of them) and no journals to sweep (the pages are rows).
    pub async fn open_for_export(
        out: &Path,
        tz: &str,
        shared: Option<Arc<pg::Pg>>,
        wait: LockWait,
    ) -> Result<Self, StoreError> {
        let fail = |message: String| StoreError::Folder {
            path: out.display().to_string(),
            message,
        };
        std::fs::create_dir_all(out).map_err(|e| fail(format!("cannot create it: {e}")))?;
        let lock = match shared {
            Some(_) => None,
            None => Some(Self::lock(out, wait).await?),
        };
        // Only the files of processes that ended (the other daemons of this machine write
        // theirs meanwhile).
        let removed = docpipe_catalog::layout::sweep_leftovers(out);
        if removed > 0 {
            tracing::info!(target: TARGET, removed, "removed temporary files of an interrupted run");
        }
        let (store, lock) = match shared {
            Some(pg) => (Store::open_shared(&state_path(out), pg)?, lock),
            None => {
                let store = Store::open(&state_path(out))?;
                let swept = store.sweep_pages()?;
                if swept > 0 {
                    tracing::info!(target: TARGET,
                        removed = swept,
                        "removed walk journals of an interrupted run"
                    );
                }
                (store, lock)
            }
        };
        let recorded = store.claim_timezone(tz)?;
        if recorded != tz {
            return Err(fail(format!(
                "its days are {recorded} days, not {tz}: set export.timezone = {recorded:?} or use another output folder"
            )));
        }
        Ok(Self {
            out: out.to_path_buf(),
            store,
            _lock: lock,
        })
    }

    /// Takes the folder's lock, waiting for another docpipe that holds it as `wait` says; then
    /// writes who holds it (`host:pid`, since when, the command) into the lock file, which the
    /// others read to say so.
    async fn lock(out: &Path, wait: LockWait) -> Result<std::fs::File, StoreError> {
        let fail = |message: String| StoreError::Folder {
            path: out.display().to_string(),
            message,
        };
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(out.join(".lock"))
            .map_err(|e| fail(format!("cannot write in it: {e}")))?;
        // Tried again every 200 ms rather than waited for in a blocking call: the wait ends
        // when the future is dropped (a stop signal), not only when the lock comes free.
        let mut told = false;
        let started = std::time::Instant::now();
        loop {
            match lock.try_lock() {
                Ok(()) => {
                    write_holder(&lock);
                    return Ok(lock);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    // Who holds it, read when it is said (not on every try).
                    let holder = || {
                        std::fs::read_to_string(out.join(".lock"))
                            .ok()
                            .map(|h| h.trim().to_string())
                            .filter(|h| !h.is_empty())
                            .unwrap_or_else(|| "its holder unknown".into())
                    };
                    let limit = match wait {
                        LockWait::Forever => None,
                        LockWait::Up(d) => Some(d),
                    };
                    if limit.is_some_and(|d| started.elapsed() >= d) {
                        let holder = holder();
                        let waited = limit
                            .filter(|d| !d.is_zero())
                            .map_or("not waited".to_string(), |d| {
                                format!("waited {}", docpipe_catalog::text::duration(d))
                            });
                        return Err(StoreError::Busy {
                            path: out.display().to_string(),
                            message: format!(
                                "another docpipe is exporting to it ({holder}); {waited}: let the daemon fetch a range with `docpipe backfill --queue`, stop the other docpipe, or wait with --wait-lock 30m"
                            ),
                        });
                    }
                    if !std::mem::replace(&mut told, true) {
                        tracing::info!(target: TARGET, output = %out.display(), holder = %holder(), "another docpipe is exporting to this folder; waiting for it");
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(fail(format!("cannot lock it: {e}")));
                }
            }
        }
    }

    /// Opens `out` beside a process that may be exporting into it (to read it, queue a backfill
    /// or fire rules): creates it and opens the store (on `shared` when given); no lock, no
    /// sweep.
    pub fn open_shared(out: &Path, shared: Option<Arc<pg::Pg>>) -> Result<Self, StoreError> {
        std::fs::create_dir_all(out).map_err(|e| StoreError::Folder {
            path: out.display().to_string(),
            message: format!("cannot create it: {e}"),
        })?;
        let store = match shared {
            Some(pg) => Store::open_shared(&state_path(out), pg)?,
            None => Store::open(&state_path(out))?,
        };
        Ok(Self {
            out: out.to_path_buf(),
            store,
            _lock: None,
        })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.out
    }

    /// Its store.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// How long to wait for the folder's lock held by another docpipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockWait {
    /// Until it is free (the daemon, the demo).
    Forever,
    /// Up to this long (zero: not at all), then an error naming the holder.
    Up(std::time::Duration),
}

/// Writes who holds the lock into the (locked) lock file: `host:pid since <time> (<command>)`.
fn write_holder(lock: &std::fs::File) {
    use std::io::{Seek, Write};
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host = if host.is_empty() {
        "this machine".into()
    } else {
        host
    };
    // The subcommand (the first argument that names one: an option's value may come first).
    const COMMANDS: [&str; 5] = ["run", "export", "backfill", "demo", "check"];
    let command: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| COMMANDS.contains(&a.as_str()))
        .take(1)
        .collect();
    let line = format!(
        "{host}:{} since {} (docpipe {})\n",
        std::process::id(),
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC"),
        command.first().map_or("", String::as_str)
    );
    let mut f = lock;
    let written = f
        .set_len(0)
        .and_then(|()| f.rewind())
        .and_then(|()| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        tracing::debug!(target: TARGET, "cannot write the lock's holder: {e}");
    }
}
