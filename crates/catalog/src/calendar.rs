//! The calendar: days of a time zone, where they start (a zone may skip midnight, or a whole
//! day), and the window of days a request asks for. A leaf: the API, the planner, the export
//! and the lake's `day_status` count days by it.

use crate::datasets;
use chrono::{NaiveDate, TimeZone};
use chrono_tz::Tz;

/// When a span dataset's day is final: a day older than the export's lateness allowance
/// (`lookback_days`) and than the days its walks re-check is never walked again. The export
/// builds it from its settings and the datasets' windowing (`ShapedSettings::settle`); the
/// rules' impact counts final days by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settle {
    /// The export's `lookback_days`.
    pub lookback_days: u32,
    /// The days each span dataset's walks re-check, by its place in [`datasets::ALL`] (`None`:
    /// a dataset of daily windows, whose every window says whether its day is final).
    pub rechecks: [Option<u32>; datasets::ALL.len()],
}

impl Settle {
    /// A span dataset's last final day `today` (`None` for a dataset of daily windows).
    pub fn settled_through(&self, dataset: &str, today: NaiveDate) -> Option<NaiveDate> {
        let at = datasets::ALL.iter().position(|d| *d == dataset)?;
        let settle = self.rechecks[at]?.max(self.lookback_days);
        today.checked_sub_days(chrono::Days::new(u64::from(settle) + 1))
    }
}

/// A day window `[from, to)`: days of a time zone, UTC unless said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    /// First day.
    pub from: NaiveDate,
    /// Exclusive end.
    pub to: NaiveDate,
    /// The time zone whose midnights bound the days.
    pub tz: Tz,
    /// The whole window, or one half of a one-day window (`check --deep`).
    pub part: Part,
}

/// The part of a one-day window a query asks for: `check --deep` compares a day with its two
/// halves, to learn whether the service filters by the instants asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Part {
    /// From the first day's start to the end's.
    #[default]
    Whole,
    /// From the day's start to its middle instant.
    FirstHalf,
    /// From the day's middle instant to its end.
    SecondHalf,
}

impl Window {
    /// The one-day window of `day`, in UTC.
    pub fn day(day: NaiveDate) -> Self {
        Self::local_day(day, Tz::UTC)
    }

    /// The one-day window of `day` in `tz`: from its midnight to the next (23 or 25 hours on
    /// the days clocks change).
    pub fn local_day(day: NaiveDate, tz: Tz) -> Self {
        Self {
            from: day,
            to: day.succ_opt().unwrap_or(day),
            tz,
            part: Part::Whole,
        }
    }

    /// The window's `[dateFrom, dateTo)` as the query sends them: [`Window::bound`] of its
    /// days, and for a half, the day's middle instant (half way between its midnights, in
    /// the zone's offset at that instant) in place of the bound it moves.
    pub fn bounds(&self) -> (String, String) {
        let middle = || {
            let (start, end) = (
                local_midnight(self.from, self.tz),
                local_midnight(self.to, self.tz),
            );
            (start + (end - start) / 2).to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
        };
        match self.part {
            Part::Whole => (self.bound(self.from), self.bound(self.to)),
            Part::FirstHalf => (self.bound(self.from), middle()),
            Part::SecondHalf => (middle(), self.bound(self.to)),
        }
    }

    /// The window as a request's target names it: `2026-03-29 to 2026-03-30`, or `the first
    /// half of 2026-03-29`.
    pub fn describe(&self) -> String {
        match self.part {
            Part::Whole => format!("{} to {}", self.from, self.to),
            Part::FirstHalf => format!("the first half of {}", self.from),
            Part::SecondHalf => format!("the second half of {}", self.from),
        }
    }

    /// A bound as the query sends it: `YYYY-MM-DD` when the day starts at UTC midnight (always,
    /// in UTC), otherwise the local midnight in ISO 8601 with its offset
    /// (`2026-03-29T00:00:00+01:00`).
    pub fn bound(&self, day: NaiveDate) -> String {
        let start = local_midnight(day, self.tz);
        if start.naive_utc() == day.and_time(chrono::NaiveTime::MIN) {
            return day.format("%Y-%m-%d").to_string();
        }
        start.to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
    }
}

/// The first instant of `day` in `tz`: midnight, or the end of the gap where a zone skips
/// midnight when its clocks go forward (the next day's midnight, where a zone skipped the
/// whole day: Pacific/Apia's 2011-12-30).
pub fn local_midnight(day: NaiveDate, tz: Tz) -> chrono::DateTime<Tz> {
    let midnight = day.and_time(chrono::NaiveTime::MIN);
    // A gap is at most a day; two days of steps is a bound that is never reached.
    (0..192)
        .find_map(|step| {
            let t = midnight + chrono::Duration::minutes(15 * step);
            tz.from_local_datetime(&t).earliest()
        })
        .unwrap_or_else(|| tz.from_utc_datetime(&midnight))
}

/// Whether `day` exists in `tz` (a zone that moved across the date line skipped one).
pub fn day_exists(day: NaiveDate, tz: Tz) -> bool {
    if tz == Tz::UTC {
        return true;
    }
    day.succ_opt()
        .is_some_and(|next| local_midnight(day, tz) < local_midnight(next, tz))
}

/// A day written `YYYY-MM-DD`, read without chrono's general parser (a status reads hundreds of
/// thousands of them from the state); any other form as chrono reads it.
pub fn parse_day(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return s.parse().ok();
    }
    let num = |r: std::ops::Range<usize>| {
        b[r].iter().try_fold(0u32, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    NaiveDate::from_ymd_opt(i32::try_from(num(0..4)?).ok()?, num(5..7)?, num(8..10)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_reads_as_chrono_reads_it() {
        for s in [
            "2026-03-01",
            "2024-02-29",
            "2026-02-29",
            "2026-13-01",
            "2026-00-10",
            "2026-1-01",
            "20x6-03-01",
            "+2026-03-01",
            "",
        ] {
            assert_eq!(parse_day(s), s.parse().ok(), "{s:?}");
        }
    }

    #[test]
    fn a_day_a_zone_skipped_does_not_exist_and_the_day_before_lasts_24_hours() {
        let apia: Tz = "Pacific/Apia".parse().unwrap();
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        let w = Window::local_day(d("2011-12-29"), apia);
        assert_eq!(
            (w.bound(w.from), w.bound(w.to)),
            (
                "2011-12-29T00:00:00-10:00".to_string(),
                "2011-12-31T00:00:00+14:00".to_string()
            )
        );
        assert_eq!(
            local_midnight(d("2011-12-30"), apia) - local_midnight(d("2011-12-29"), apia),
            chrono::Duration::hours(24)
        );
        assert!(day_exists(d("2011-12-29"), apia));
        assert!(!day_exists(d("2011-12-30"), apia));
        assert!(day_exists(d("2011-12-31"), apia));
        assert!(day_exists(
            d("2026-03-29"),
            "Europe/Berlin".parse().unwrap()
        ));
    }

    #[test]
    fn window_bounds_are_dates_in_utc_and_local_midnights_elsewhere() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let utc = Window::day(d("2026-03-29"));
        assert_eq!(
            (utc.bound(utc.from), utc.bound(utc.to)),
            ("2026-03-29".into(), "2026-03-30".into())
        );
        // The day Berlin's clocks go forward: 23 hours.
        let berlin = Window::local_day(d("2026-03-29"), chrono_tz::Europe::Berlin);
        assert_eq!(berlin.bound(berlin.from), "2026-03-29T00:00:00+01:00");
        assert_eq!(berlin.bound(berlin.to), "2026-03-30T00:00:00+02:00");
        let london = Window::local_day(d("2026-03-29"), chrono_tz::Europe::London);
        assert_eq!(london.bound(london.from), "2026-03-29");
        assert_eq!(london.bound(london.to), "2026-03-30T00:00:00+01:00");
        let kolkata = Window::local_day(d("2026-11-01"), chrono_tz::Asia::Kolkata);
        assert_eq!(kolkata.bound(kolkata.from), "2026-11-01T00:00:00+05:30");
        // Halves meet at the middle instant: noon, or 11:30 local time on Berlin's 23-hour day.
        let half = |w: Window, part| Window { part, ..w }.bounds();
        assert_eq!(
            half(utc, Part::FirstHalf),
            ("2026-03-29".into(), "2026-03-29T12:00:00+00:00".into())
        );
        assert_eq!(
            half(berlin, Part::SecondHalf),
            (
                "2026-03-29T12:30:00+02:00".into(),
                "2026-03-30T00:00:00+02:00".into()
            )
        );
        // Santiago skips midnight when its clocks go forward: the day starts at 01:00.
        assert_eq!(
            local_midnight(d("2026-09-06"), chrono_tz::America::Santiago).to_rfc3339(),
            "2026-09-06T01:00:00-03:00"
        );
    }
}
