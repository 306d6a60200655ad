//! The daemons sharing a state: each writes a heartbeat while it runs, so that `docpipe status`
//! shows which are alive and what each holds. Written against [`Sql`]: the same statements on
//! SQLite and PostgreSQL.

use super::StoreError;
use super::sql::{Sql, Value};
use chrono::{DateTime, Duration, Utc};

/// SQLite's table (PostgreSQL's is migration 3 in `pg.rs`).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS daemons (
    name TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    seen_at_ms INTEGER NOT NULL
);
";

/// How often a daemon writes its heartbeat.
pub const HEARTBEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// A daemon not seen for this long is taken for gone (three heartbeats missed).
pub fn gone_after() -> Duration {
    Duration::seconds(3 * HEARTBEAT_EVERY.as_secs() as i64)
}

/// A daemon as its last heartbeat left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its name (`host:pid`).
    pub name: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub seen_at: DateTime<Utc>,
}

impl Seen {
    /// Whether it was seen recently enough to be running.
    pub fn alive(&self, now: DateTime<Utc>) -> bool {
        now - self.seen_at < gone_after()
    }
}

/// The heartbeats, in the state database.
#[derive(Debug, Clone)]
pub struct Daemons {
    sql: Sql,
}

impl Daemons {
    /// The heartbeats in `sql`.
    pub fn new(sql: Sql) -> Self {
        Self { sql }
    }

    /// Records that `name`, started at `started`, is running `now`.
    pub fn beat(
        &self,
        name: &str,
        started: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let values = vec![
            Value::from(name),
            started.to_rfc3339().into(),
            Value::Int(now.timestamp_millis()),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO daemons (name, started_at, seen_at_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE
                 SET started_at = excluded.started_at, seen_at_ms = excluded.seen_at_ms",
                &values,
            )
            .map(|_| ())
        })
    }

    /// Removes `name` (a daemon stopping cleanly).
    pub fn leave(&self, name: &str) -> Result<(), StoreError> {
        let values = vec![Value::from(name)];
        self.sql.tx(move |tx| {
            tx.exec("DELETE FROM daemons WHERE name = ?1", &values)
                .map(|_| ())
        })
    }

    /// Every daemon that wrote a heartbeat and did not leave, by name.
    pub fn all(&self) -> Result<Vec<Seen>, StoreError> {
        self.sql.read(|tx| {
            tx.rows(
                "SELECT name, started_at, seen_at_ms FROM daemons ORDER BY name",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(Seen {
                    name: r.text(0)?,
                    started_at: r.time(1)?,
                    seen_at: DateTime::from_timestamp_millis(r.int(2)?).unwrap_or_default(),
                })
            })
            .collect()
        })
    }
}

/// This process's name among those sharing the state (a daemon's, a window claim's holder):
/// the machine and the process.
pub fn this_process() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// Whether `holder` (a [`this_process`] name) is a process of this machine that has ended: what
/// it held is free at once, without waiting for its lease (a killed command run again).
pub fn gone(holder: &str) -> bool {
    let Some((host, pid)) = holder.rsplit_once(':') else {
        return false;
    };
    let me = this_process();
    let my_host = me.rsplit_once(':').map_or("", |(h, _)| h);
    host == my_host
        && pid
            .parse::<u32>()
            .is_ok_and(docpipe_catalog::layout::process_is_gone)
}
