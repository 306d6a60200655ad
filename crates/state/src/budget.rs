//! The rate budget shared through a SQLite file: every process that opens the same file counts
//! the same requests. The file is the output folder's `state.sqlite` or `[service] budget_db`,
//! which then holds only these two tables.

use super::{Db, StoreError};
use crate::rate::{Budget, Refusal, window};
use chrono::{DateTime, Utc};
use docpipe_catalog::ratelimit::wait_for_slot;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The log lines' target: the module they came from before this crate was cut out.
const TARGET: &str = "docpipe::store::budget";

/// The budget's tables.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS requests (
    scope TEXT NOT NULL,
    sent_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_by_scope ON requests (scope, sent_at_ms);
CREATE TABLE IF NOT EXISTS request_counts (
    scope TEXT PRIMARY KEY,
    n INTEGER NOT NULL
);
";

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
    db: Arc<Db>,
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
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::on(Arc::new(Db::open(path, SCHEMA)?))
    }

    /// A budget on a connection already open (the output folder's store, when `budget_db` is
    /// its file): adds the budget's tables to it.
    pub fn on(db: Arc<Db>) -> Result<Self, StoreError> {
        db.ensure(SCHEMA)?;
        Ok(Self {
            db,
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
    fn try_take(&self, scope: &str, limit: u32, now: DateTime<Utc>) -> Result<(), Refusal> {
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
        let result = self.db.with_conn(|c| {
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
            Ok(Err(wait)) => Err(Refusal::Wait(wait)),
            // Without the shared log docpipe cannot know what others sent: it sends nothing.
            Err(e) => Err(Refusal::Broken(e.to_string())),
        }
    }

    fn release(&self) {
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        if leases.is_empty() {
            return;
        }
        let result = self.db.with_conn(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            for (scope, l) in leases.iter() {
                hand_back(&tx, scope, *l)?;
            }
            tx.commit()
        });
        match result {
            Ok(()) => leases.clear(),
            // Kept: counted for an hour, on the safe side.
            Err(e) => {
                tracing::warn!(target: TARGET, error = %e, "cannot hand back unused budget slots")
            }
        }
    }

    fn used(&self, scope: &str, now: DateTime<Utc>) -> u32 {
        let horizon = now.timestamp_millis() - window().num_milliseconds();
        self.db
            .with_conn(|c| {
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
        assert_eq!(
            wait,
            Refusal::Wait(window() - chrono::Duration::seconds(10))
        );
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
        assert!(
            matches!(wait, Refusal::Wait(w) if w > chrono::Duration::minutes(59)),
            "{wait:?}"
        );
    }
}
