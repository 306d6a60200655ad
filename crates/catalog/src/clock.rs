//! Time as an injected dependency: production reads the system clock, tests drive time.

use chrono::{DateTime, Utc};
use std::sync::Arc;

/// A boxed future of a sleep.
pub type Sleep = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A source of the current time, and of waits measured in it. Nothing in docpipe reads the wall
/// clock or sleeps except through one.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant, UTC.
    fn now(&self) -> DateTime<Utc>;

    /// Waits `d` of this clock's time.
    fn sleep(&self, d: std::time::Duration) -> Sleep {
        Box::pin(tokio::time::sleep(d))
    }
}

/// Shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that starts at a fixed instant and moves with tokio's clock, so that with
/// `tokio::time::pause()` every `sleep` advances it exactly and instantly.
#[derive(Debug, Clone)]
pub struct TokioClock {
    start: DateTime<Utc>,
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock that reads `start` now and advances with `tokio::time::Instant`.
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        Self {
            start,
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = tokio::time::Instant::now().duration_since(self.origin);
        self.start + chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::zero())
    }
}

/// A clock that moves only when told to, or when someone sleeps on it: a sleep advances it at
/// once. Tests use it with real sockets, where tokio's paused time would fire I/O timeouts.
/// Sleeps of concurrent tasks add up, as if they ran one after the other.
#[derive(Debug)]
pub struct ManualClock {
    now: std::sync::Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: DateTime<Utc>) -> Arc<Self> {
        Arc::new(Self {
            now: std::sync::Mutex::new(start),
        })
    }

    /// Moves the clock forward.
    pub fn advance(&self, d: std::time::Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now += chrono::Duration::from_std(d).unwrap_or(chrono::Duration::zero());
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sleep(&self, d: std::time::Duration) -> Sleep {
        self.advance(d);
        Box::pin(tokio::task::yield_now())
    }
}

/// Shared helper: a system clock behind an `Arc`.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}
