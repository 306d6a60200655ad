//! A sliding-window request log: "at most N requests in any window of length W".
//!
//! Used by the emulator to enforce the service's limits and by the client to stay under them.
//! A GCRA limiter (such as `governor`) with a burst of N lets up to about 2N requests through in
//! one sliding hour, so it cannot promise "never more than N in any hour"; this log can.

use chrono::{DateTime, Duration, Utc};
use std::collections::VecDeque;

/// The timestamps of accepted requests within the last window.
#[derive(Debug, Clone)]
pub struct SlidingWindow {
    limit: u32,
    window: Duration,
    sent: VecDeque<DateTime<Utc>>,
}

impl SlidingWindow {
    /// A window allowing `limit` requests per `window`.
    pub fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window,
            sent: VecDeque::new(),
        }
    }

    /// The configured limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    fn expire(&mut self, now: DateTime<Utc>) {
        while let Some(first) = self.sent.front() {
            if *first + self.window <= now {
                self.sent.pop_front();
            } else {
                break;
            }
        }
    }

    /// Requests counted in the window ending at `now`.
    pub fn used(&mut self, now: DateTime<Utc>) -> u32 {
        self.expire(now);
        self.sent.len() as u32
    }

    /// Requests that will still count at `at` (a later instant too), without forgetting any.
    pub fn count_at(&self, at: DateTime<Utc>) -> u32 {
        self.sent.iter().filter(|t| **t + self.window > at).count() as u32
    }

    /// Takes one slot if there is one; otherwise returns how long until one frees up.
    pub fn try_acquire(&mut self, now: DateTime<Utc>) -> Result<(), Duration> {
        match wait_for_slot(self.sent.iter().copied(), self.limit, self.window, now) {
            None => {
                self.expire(now);
                self.sent.push_back(now);
                Ok(())
            }
            Some(wait) => Err(wait),
        }
    }
}

/// Given the send times of past requests (oldest first), how long from `now` until one more
/// request fits under `limit` per `window`; `None` when it fits now.
pub fn wait_for_slot(
    sent: impl Iterator<Item = DateTime<Utc>>,
    limit: u32,
    window: Duration,
    now: DateTime<Utc>,
) -> Option<Duration> {
    let live: Vec<DateTime<Utc>> = sent.filter(|t| *t + window > now).collect();
    if (live.len() as u64) < u64::from(limit) {
        return None;
    }
    if limit == 0 {
        return Some(window);
    }
    // The request that must expire before one more fits.
    let idx = live.len() - limit as usize;
    Some(live[idx] + window - now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_exactly_limit_then_reports_wait_until_oldest_expires() {
        let t0 = DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let mut w = SlidingWindow::new(3, Duration::hours(1));
        for i in 0..3 {
            assert!(w.try_acquire(t0 + Duration::minutes(i * 10)).is_ok());
        }
        let wait = w.try_acquire(t0 + Duration::minutes(30)).unwrap_err();
        assert_eq!(wait, Duration::minutes(30));
        assert!(w.try_acquire(t0 + Duration::minutes(60)).is_ok());
        assert_eq!(w.used(t0 + Duration::minutes(60)), 3);
    }
}
