//! The backfill queue: ranges `docpipe backfill --queue` left for the daemons. A daemon claims
//! the oldest range nobody holds, with a lease it renews at every step; when its holder dies the
//! lease runs out and another daemon takes the range over. Written against [`Sql`]: the same
//! statements on SQLite and PostgreSQL (which skips rows another transaction has locked).

use super::StoreError;
use super::sql::{Row, Sql, SqlError, Tx, Value};
use chrono::{DateTime, Duration, NaiveDate, Utc};

/// SQLite's table (PostgreSQL's is migration 2 in `pg.rs`); the lease's columns are added to a
/// file made before them (see [`add_lease_columns`]).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS backfill_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    projects TEXT NOT NULL,
    from_day TEXT NOT NULL,
    to_day TEXT NOT NULL,
    queued_at TEXT NOT NULL,
    done_at TEXT,
    holder TEXT,
    lease_until_ms INTEGER
);
";

/// Adds the lease's columns to a SQLite queue made before them.
pub(super) fn add_lease_columns(c: &rusqlite::Connection) -> rusqlite::Result<()> {
    let mut st = c.prepare("SELECT name FROM pragma_table_info('backfill_queue')")?;
    let names = st
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    for (name, ty) in [("holder", "TEXT"), ("lease_until_ms", "INTEGER")] {
        if !names.iter().any(|n| n == name) {
            c.execute_batch(&format!(
                "ALTER TABLE backfill_queue ADD COLUMN {name} {ty}"
            ))?;
        }
    }
    Ok(())
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
    /// The daemon that holds it, while its lease runs.
    pub holder: Option<String>,
}

const COLUMNS: &str = "id, projects, from_day, to_day, holder, lease_until_ms";

fn queued(r: &Row, now_ms: i64) -> Result<Queued, SqlError> {
    let projects = r.text(1)?;
    let lease = r.opt_int(5)?;
    Ok(Queued {
        id: r.int(0)?,
        projects: projects
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
        from: r.day(2)?,
        to: r.day(3)?,
        holder: r.opt_text(4)?.filter(|_| lease.is_some_and(|l| l > now_ms)),
    })
}

/// The queue, in the state database.
#[derive(Debug, Clone)]
pub struct Queue {
    sql: Sql,
}

impl Queue {
    /// The queue in `sql` (its table made by the store's schema or migrations).
    pub fn new(sql: Sql) -> Self {
        Self { sql }
    }

    /// Queues a backfill (`projects` empty: all); its id.
    pub fn push(
        &self,
        projects: &[String],
        from: NaiveDate,
        to: NaiveDate,
        now: DateTime<Utc>,
    ) -> Result<i64, StoreError> {
        let values = vec![
            Value::from(projects.join(",")),
            from.into(),
            to.into(),
            now.to_rfc3339().into(),
        ];
        self.sql.tx(move |tx| {
            tx.row(
                "INSERT INTO backfill_queue (projects, from_day, to_day, queued_at)
                 VALUES (?1, ?2, ?3, ?4) RETURNING id",
                &values,
            )?
            .map_or(Ok(0), |r| r.int(0))
        })
    }

    /// Queued backfills not drained yet, oldest first, with their holders.
    pub fn pending(&self, now: DateTime<Utc>) -> Result<Vec<Queued>, StoreError> {
        let now_ms = now.timestamp_millis();
        self.sql.read(move |tx| {
            tx.rows(
                &format!("SELECT {COLUMNS} FROM backfill_queue WHERE done_at IS NULL ORDER BY id"),
                &[],
            )?
            .iter()
            .map(|r| queued(r, now_ms))
            .collect()
        })
    }

    /// Claims for `holder` the oldest queued backfill that is its own or that nobody's lease
    /// holds, for `lease` from `now` (claiming its own again renews the lease); `None` when
    /// every range is drained or held by another.
    pub fn claim(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<Queued>, StoreError> {
        let now_ms = now.timestamp_millis();
        let until = now_ms + lease.num_milliseconds();
        let holder = holder.to_string();
        self.sql.tx(move |tx| claim(tx, &holder, now_ms, until))
    }

    /// Marks a queued backfill drained.
    pub fn done(&self, id: i64, now: DateTime<Utc>) -> Result<(), StoreError> {
        let values = vec![Value::Int(id), now.to_rfc3339().into()];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE backfill_queue SET done_at = ?2, holder = NULL, lease_until_ms = NULL
                 WHERE id = ?1",
                &values,
            )
            .map(|_| ())
        })
    }

    /// Gives back what `holder` holds (a daemon stopping), for another to take at once.
    pub fn release(&self, holder: &str) -> Result<(), StoreError> {
        let values = vec![Value::from(holder)];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE backfill_queue SET holder = NULL, lease_until_ms = NULL
                 WHERE holder = ?1 AND done_at IS NULL",
                &values,
            )
            .map(|_| ())
        })
    }
}

fn claim(
    tx: &mut dyn Tx,
    holder: &str,
    now_ms: i64,
    until: i64,
) -> Result<Option<Queued>, SqlError> {
    // PostgreSQL: rows another daemon's transaction is claiming are skipped, not waited for.
    // SQLite: the transaction holds the file's write lock, so claims take turns anyway.
    let skip = if tx.postgres() {
        " FOR UPDATE SKIP LOCKED"
    } else {
        ""
    };
    let row = tx.row(
        &format!(
            "SELECT id FROM backfill_queue
             WHERE done_at IS NULL
               AND (holder IS NULL OR holder = ?1 OR lease_until_ms IS NULL OR lease_until_ms <= ?2)
             ORDER BY CASE WHEN holder = ?1 THEN 0 ELSE 1 END, id LIMIT 1{skip}"
        ),
        &[holder.into(), Value::Int(now_ms)],
    )?;
    let Some(row) = row else {
        return Ok(None);
    };
    let id = row.int(0)?;
    let claimed = tx.row(
        &format!(
            "UPDATE backfill_queue SET holder = ?2, lease_until_ms = ?3 WHERE id = ?1
             RETURNING {COLUMNS}"
        ),
        &[Value::Int(id), holder.into(), Value::Int(until)],
    )?;
    claimed.map(|r| queued(&r, now_ms)).transpose()
}
