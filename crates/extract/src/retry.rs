//! How long to wait before a retry: capped exponential backoff with full jitter, overridden by
//! the service's `Retry-After`. (Whether to retry is `ApiError::retryable`.)

use backon::ExponentialBuilder;
use docpipe_catalog::random::Dice;
use std::time::Duration;

/// Retry settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// First backoff step.
    pub min_delay: Duration,
    /// Largest backoff step.
    pub max_delay: Duration,
    /// Retries after the first attempt.
    pub max_retries: usize,
    /// A `Retry-After` longer than this ends the retries.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
            max_retries: 8,
            max_retry_after: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    /// The exponential schedule (jitter is applied in `delay`).
    pub fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .with_max_times(self.max_retries)
    }

    /// The wait before the next attempt: `Retry-After` when the service sent one (and it is not
    /// longer than `max_retry_after`), else full jitter over the exponential step; `None` ends
    /// the retries.
    pub fn delay(
        &self,
        step: Option<Duration>,
        retry_after: Option<Duration>,
        dice: &Dice,
    ) -> Option<Duration> {
        let step = step?;
        match retry_after {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(step.mul_f64(dice.next())),
        }
    }
}

/// Parses `Retry-After`: delay-seconds or an HTTP date (relative to `now`).
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        let now = httpdate::parse_http_date("Sun, 01 Mar 2026 10:00:00 GMT").unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 01 Mar 2026 10:01:30 GMT", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            parse_retry_after("Sun, 01 Mar 2026 09:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn full_jitter_stays_within_the_step_and_retry_after_wins() {
        let p = RetryPolicy::default();
        let dice = Dice::seeded(3);
        let step = Duration::from_secs(8);
        let waits: Vec<Duration> = (0..200)
            .map(|_| p.delay(Some(step), None, &dice).unwrap())
            .collect();
        assert!(waits.iter().all(|w| *w < step));
        assert!(
            waits.iter().any(|w| *w < Duration::from_secs(1))
                && waits.iter().any(|w| *w > Duration::from_secs(7))
        );
        assert_eq!(
            p.delay(Some(step), Some(Duration::from_secs(30)), &dice),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            p.delay(Some(step), Some(Duration::from_secs(7200)), &dice),
            None
        );
        assert_eq!(p.delay(None, Some(Duration::from_secs(1)), &dice), None);
    }
}
