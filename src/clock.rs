//! Time as an injected dependency: production reads the system clock, tests drive time.

use chrono::{DateTime, Utc};
use std::sync::Arc;

/// A source of the current time. Nothing in docpipe reads the wall clock except through one.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant, UTC.
    fn now(&self) -> DateTime<Utc>;
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

/// Shared helper: a system clock behind an `Arc`.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}
