//! Window claims: before it walks a window, a process claims it for a lease, so that several
//! daemons sharing one state database never walk the same window at the same time; the claim
//! records when the window was last done, so that a daemon whose plan is older than that does
//! not walk it again. A holder that dies stops renewing; its claims run out and another daemon
//! takes the windows over (resuming their walks from the stored pages). Written against
//! [`Sql`]: the same statements on SQLite and PostgreSQL (where the claim's row is locked while
//! it is decided).

use super::StoreError;
use super::sql::{Sql, Value};
use chrono::{DateTime, Duration, Utc};

/// SQLite's table (PostgreSQL's is in migration 4 in `pg.rs`).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS window_claims (
    key TEXT PRIMARY KEY,
    holder TEXT,
    lease_until_ms INTEGER,
    done_at_ms INTEGER,
    done_by TEXT
);
";

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The window is the caller's until its lease runs out.
    Taken,
    /// Another process holds it.
    Held(String),
    /// Another process (named) did it after the caller's plan was made.
    DoneSince(DateTime<Utc>, String),
}

/// The claims, in the state database.
#[derive(Debug, Clone)]
pub struct Claims {
    sql: Sql,
}

impl Claims {
    /// The claims in `sql` (its table made by the store's schema or migrations).
    pub fn new(sql: Sql) -> Self {
        Self { sql }
    }

    /// Claims window `key` for `holder` from `now` for `lease`, unless another holder's lease
    /// runs (and it is not a process of this machine that has ended) or the window was done
    /// after `planned_at` (`None`: taken however recently it was done; claiming one's own
    /// renews it).
    pub fn take(
        &self,
        key: &str,
        holder: &str,
        now: DateTime<Utc>,
        lease: Duration,
        planned_at: Option<DateTime<Utc>>,
    ) -> Result<Claim, StoreError> {
        let now_ms = now.timestamp_millis();
        let p = vec![
            Value::from(key),
            holder.into(),
            Value::Int(now_ms + lease.num_milliseconds()),
        ];
        let planned_ms = planned_at.map(|p| p.timestamp_millis());
        let me = holder.to_string();
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO window_claims (key) VALUES (?1) ON CONFLICT (key) DO NOTHING",
                &p[..1],
            )?;
            let lock = if tx.postgres() { " FOR UPDATE" } else { "" };
            let Some(row) = tx.row(
                &format!(
                    "SELECT holder, lease_until_ms, done_at_ms, done_by FROM window_claims WHERE key = ?1{lock}"
                ),
                &p[..1],
            )?
            else {
                return Ok(Claim::Held(String::new()));
            };
            let (other, until, done) = (row.opt_text(0)?, row.opt_int(1)?, row.opt_int(2)?);
            let by = row.opt_text(3)?.unwrap_or_default();
            if let Some(other) = other.filter(|o| *o != me)
                && until.is_some_and(|u| u > now_ms)
                && !super::daemons::gone(&other)
            {
                return Ok(Claim::Held(other));
            }
            if let Some(done) = done.filter(|&d| planned_ms.is_some_and(|p| d > p)) {
                return Ok(Claim::DoneSince(
                    DateTime::from_timestamp_millis(done).unwrap_or_default(),
                    by,
                ));
            }
            tx.exec(
                "UPDATE window_claims SET holder = ?2, lease_until_ms = ?3 WHERE key = ?1",
                &p,
            )?;
            Ok(Claim::Taken)
        })
    }

    /// Renews every claim `holder` holds, for `lease` from `now`; how many.
    pub fn renew(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<u64, StoreError> {
        let p = vec![
            Value::from(holder),
            Value::Int((now + lease).timestamp_millis()),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE window_claims SET lease_until_ms = ?2 WHERE holder = ?1",
                &p,
            )
        })
    }

    /// Ends `holder`'s claim of `key`: done at `done` (it was walked and written), or given
    /// back as it was (`None`: it failed or was deferred, for anyone to take at once).
    pub fn end(
        &self,
        key: &str,
        holder: &str,
        done: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let p = vec![
            Value::from(key),
            holder.into(),
            done.map(|d| d.timestamp_millis()).into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE window_claims SET holder = NULL, lease_until_ms = NULL,
                   done_at_ms = COALESCE(?3, done_at_ms),
                   done_by = CASE WHEN ?3 IS NULL THEN done_by ELSE ?2 END
                 WHERE key = ?1 AND holder = ?2",
                &p,
            )
            .map(|_| ())
        })
    }

    /// Gives back every claim of `holder` (a process stopping).
    pub fn release(&self, holder: &str) -> Result<(), StoreError> {
        let p = vec![Value::from(holder)];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE window_claims SET holder = NULL, lease_until_ms = NULL WHERE holder = ?1",
                &p,
            )
            .map(|_| ())
        })
    }

    /// The windows held at `now`: key and holder, by key.
    pub fn held(&self, now: DateTime<Utc>) -> Result<Vec<(String, String)>, StoreError> {
        let p = vec![Value::Int(now.timestamp_millis())];
        self.sql.read(move |tx| {
            tx.rows(
                "SELECT key, holder FROM window_claims
                 WHERE holder IS NOT NULL AND lease_until_ms > ?1 ORDER BY key",
                &p,
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?)))
            .collect()
        })
    }
}

impl Claims {
    /// Who last did window `key`, if anyone did.
    pub fn done_by_of(&self, key: &str) -> Result<Option<String>, StoreError> {
        let p = vec![Value::from(key)];
        self.sql.read(move |tx| {
            tx.row("SELECT done_by FROM window_claims WHERE key = ?1", &p)?
                .map(|r| r.opt_text(0))
                .transpose()
                .map(Option::flatten)
        })
    }

    /// How many windows each holder did, by holder.
    pub fn done_by(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.sql.read(|tx| {
            tx.rows(
                "SELECT done_by, COUNT(*) FROM window_claims WHERE done_by IS NOT NULL
                 GROUP BY done_by ORDER BY done_by",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.int(1)?)))
            .collect()
        })
    }
}
