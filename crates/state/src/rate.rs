//! "May I send now?": rate budgets checked before every request, so that docpipe's own traffic
//! never causes a 429. A budget is a sliding-window log per scope (`analytics:<org>`,
//! `agent:<project>`, `assistant:<org>`).

use chrono::{DateTime, Utc};
use docpipe_catalog::clock::SharedClock;
use docpipe_catalog::events::Events;
use docpipe_catalog::ratelimit::SlidingWindow;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The log lines' target: the module they came from before this crate was cut out.
const TARGET: &str = "docpipe::api::budget";

/// The window the service counts in, plus a margin for the time a request takes to arrive: the
/// service starts counting a request when it receives it, a little after we send it.
pub fn window() -> chrono::Duration {
    chrono::Duration::hours(1) + chrono::Duration::seconds(5)
}

/// Why a budget gave no slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The window is full: one fits after this long.
    Wait(chrono::Duration),
    /// The budget's store failed (a full disk, a damaged file): nothing can be sent safely.
    Broken(String),
}

/// A store of sent-request times, shared by whoever uses the same scopes.
pub trait Budget: Send + Sync + std::fmt::Debug {
    /// Records a request in `scope` at `now` if fewer than `limit` were sent in the window;
    /// otherwise says how long until one fits, or that the store failed.
    fn try_take(&self, scope: &str, limit: u32, now: DateTime<Utc>) -> Result<(), Refusal>;

    /// Requests counted in `scope`'s window at `now` (a later instant too: those that will
    /// still count then; asking forgets nothing).
    fn used(&self, scope: &str, now: DateTime<Utc>) -> u32;

    /// Hands back slots taken ahead and not used (by a budget that takes several at once);
    /// called at the end of a run.
    fn release(&self) {}
}

/// A budget within one process.
#[derive(Debug, Default)]
pub struct MemoryBudget {
    windows: Mutex<HashMap<String, SlidingWindow>>,
}

impl Budget for MemoryBudget {
    fn try_take(&self, scope: &str, limit: u32, now: DateTime<Utc>) -> Result<(), Refusal> {
        let mut map = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let w = map
            .entry(scope.to_string())
            .or_insert_with(|| SlidingWindow::new(limit, window()));
        if w.limit() != limit {
            *w = SlidingWindow::new(limit, window());
        }
        w.try_acquire(now).map_err(Refusal::Wait)
    }

    fn used(&self, scope: &str, now: DateTime<Utc>) -> u32 {
        let map = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        map.get(scope).map_or(0, |w| w.count_at(now))
    }
}

/// The first instant, to the second, at which `scope` has room under `limit` again: the end of
/// the window's oldest request that must leave it (asking takes nothing).
pub fn next_free(
    budget: &dyn Budget,
    scope: &str,
    limit: u32,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    if budget.used(scope, now) < limit {
        return now;
    }
    // Whole seconds from the next one on: the same answer whichever instant of a second asks.
    let now = chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now);
    let (mut lo, mut hi) = (0i64, window().num_seconds().max(1) + 1);
    // The count only falls as time passes: the first second it is under the limit.
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if budget.used(scope, now + chrono::Duration::seconds(mid)) < limit {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    now + chrono::Duration::seconds(hi)
}

/// Waits until `scope` has room under `limit`, then takes a slot. Returns the time waited, or
/// the failure of the budget's store (then nothing may be sent).
pub async fn acquire(
    budget: &dyn Budget,
    clock: &SharedClock,
    scope: &str,
    limit: u32,
    events: &dyn Events,
) -> Result<Duration, String> {
    let mut waited = Duration::ZERO;
    loop {
        match budget.try_take(scope, limit, clock.now()) {
            Ok(()) => return Ok(waited),
            Err(Refusal::Broken(why)) => return Err(why),
            Err(Refusal::Wait(wait)) => {
                let wait = wait
                    .to_std()
                    .unwrap_or(Duration::from_secs(1))
                    .max(Duration::from_millis(10));
                let until = clock.now()
                    + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::zero());
                tracing::info!(target: TARGET,
                    scope,
                    wait_secs = wait.as_secs(),
                    "{}",
                    docpipe_catalog::text::budget_wait(scope, wait, until)
                );
                events.waiting(scope, wait, until);
                clock.sleep(wait).await;
                events.waited(scope);
                waited += wait;
            }
        }
    }
}
