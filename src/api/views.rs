//! Page views: one page, and the offset walk over a window while `hasMore`.

use super::{ApiError, Call, Client, ErrorKind, Operation, escape};
use chrono::{NaiveDate, TimeZone};
use chrono_tz::Tz;
use futures::Stream;
use reqwest::Method;
use serde::{Deserialize, Deserializer, de};

/// Rows per page docpipe asks for (the service's maximum).
pub const PAGE_LIMIT: u32 = 250;

/// Longest page path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 2048;

/// A count: a non-negative integer that fits in i64; an integral float such as `12.0` is accepted.
fn count<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct V;
    impl de::Visitor<'_> for V {
        type Value = i64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a non-negative integer count")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom(format!("count {v} is too large")))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            if v < 0 {
                Err(E::custom(format!("count {v} is negative")))
            } else {
                Ok(v)
            }
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            // 2^53: beyond it a float no longer holds every integer.
            if v.is_finite() && v.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&v) {
                Ok(v as i64)
            } else {
                Err(E::custom(format!(
                    "count {v} is not a non-negative integer"
                )))
            }
        }
    }
    d.deserialize_any(V)
}

/// Human, AI and total counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub struct Counts {
    /// Human views.
    #[serde(deserialize_with = "count")]
    pub human: i64,
    /// AI views.
    #[serde(deserialize_with = "count")]
    pub ai: i64,
    /// human + ai.
    #[serde(deserialize_with = "count")]
    pub total: i64,
}

/// One page's counts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ViewRow {
    /// Page path, as data (never used as a file name).
    pub path: String,
    /// Human views.
    #[serde(deserialize_with = "count")]
    pub human: i64,
    /// AI views.
    #[serde(deserialize_with = "count")]
    pub ai: i64,
    /// human + ai.
    #[serde(deserialize_with = "count")]
    pub total: i64,
}

/// One response of the page views operation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ViewsPage {
    /// Site-wide totals for the range.
    pub totals: Counts,
    /// Per-page rows of this page.
    pub views: Vec<ViewRow>,
    /// Whether rows exist past this page.
    #[serde(rename = "hasMore")]
    pub has_more: bool,
}

/// A path as an error shows it: its first 100 characters.
fn shown(path: &str) -> String {
    match path.char_indices().nth(100) {
        Some((i, _)) => format!("{}...", &path[..i]),
        None => path.to_string(),
    }
}

/// Whether `s` holds a control character (`char::is_control`: U+0000-U+001F, U+007F-U+009F),
/// read from its UTF-8 bytes: U+0080-U+009F are `C2 80`-`C2 9F`.
fn has_control(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        c < 0x20
            || c == 0x7f
            || (c == 0xc2 && b.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)))
    })
}

/// Decodes and checks a page: counts add up, paths are sane, no more rows than asked for.
pub fn decode_page(body: &[u8], limit: u32) -> Result<ViewsPage, String> {
    let page: ViewsPage =
        serde_json::from_slice(body).map_err(|e| format!("page views body: {e}"))?;
    let t = page.totals;
    if t.human.checked_add(t.ai) != Some(t.total) {
        return Err(format!(
            "totals: total {} is not human {} + ai {}",
            t.total, t.human, t.ai
        ));
    }
    if page.views.len() > limit as usize {
        return Err(format!(
            "{} rows in a page, more than the limit {limit}",
            page.views.len()
        ));
    }
    for r in &page.views {
        if r.path.is_empty() || r.path.len() > MAX_PATH_BYTES {
            return Err(format!(
                "a row has a path of {} bytes (1 to {MAX_PATH_BYTES} allowed)",
                r.path.len()
            ));
        }
        if has_control(&r.path) {
            return Err(format!(
                "row path {:?} contains control characters",
                shown(&r.path)
            ));
        }
        if r.human.checked_add(r.ai) != Some(r.total) {
            return Err(format!(
                "row {}: total {} is not human {} + ai {}",
                r.path, r.total, r.human, r.ai
            ));
        }
    }
    Ok(page)
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
/// midnight when its clocks go forward.
pub fn local_midnight(day: NaiveDate, tz: Tz) -> chrono::DateTime<Tz> {
    let midnight = day.and_time(chrono::NaiveTime::MIN);
    // A gap is at most a few hours; a day of steps is a bound that is never reached.
    (0..96)
        .find_map(|step| {
            let t = midnight + chrono::Duration::minutes(15 * step);
            tz.from_local_datetime(&t).earliest()
        })
        .unwrap_or_else(|| tz.from_utc_datetime(&midnight))
}

/// A page fetched during a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Offset it was fetched at.
    pub offset: u64,
    /// Its contents.
    pub page: ViewsPage,
}

impl Client {
    /// One page of page views.
    pub async fn page_views(
        &self,
        project: &str,
        window: Window,
        limit: u32,
        offset: u64,
    ) -> Result<ViewsPage, ApiError> {
        let limits = self.settings().limits;
        let call = Call {
            operation: Operation::PageViews,
            target: format!("project {project} ({} to {})", window.from, window.to),
            method: Method::GET,
            path: format!("/v1/analytics/{}/views", escape(project)),
            query: vec![
                ("dateFrom", window.bound(window.from)),
                ("dateTo", window.bound(window.to)),
                ("limit", limit.to_string()),
                ("offset", offset.to_string()),
            ],
            body: None,
            budget: Some((
                self.analytics_scope(),
                limits.effective(limits.analytics_per_hour),
            )),
            admin: true,
            wait_for_budget: true,
        };
        self.send_json(&call, |b| decode_page(b, limit)).await
    }

    /// Walks a window from `start_offset` with `limit=250` while `hasMore`, yielding each page.
    /// Ends with an error instead of looping when the service misbehaves: an empty page that
    /// claims more, a page that repeats the previous one, or more rows than the totals allow.
    pub fn walk<'a>(
        &'a self,
        project: &'a str,
        window: Window,
        start_offset: u64,
    ) -> impl Stream<Item = Result<Fetched, ApiError>> + 'a {
        struct State {
            offset: u64,
            done: bool,
            previous: Option<Vec<ViewRow>>,
            zero_rows: u64,
        }
        let init = State {
            offset: start_offset,
            done: false,
            previous: None,
            zero_rows: 0,
        };
        futures::stream::try_unfold(init, move |mut st| async move {
            if st.done {
                return Ok(None);
            }
            let page = self
                .page_views(project, window, PAGE_LIMIT, st.offset)
                .await?;
            let fail = |detail: String| ApiError {
                operation: Operation::PageViews,
                target: format!("project {project} ({} to {})", window.from, window.to),
                kind: ErrorKind::Paging(detail),
            };
            if page.views.is_empty() && page.has_more {
                return Err(fail(format!(
                    "empty page at offset {} says hasMore",
                    st.offset
                )));
            }
            if st
                .previous
                .as_ref()
                .is_some_and(|p| !p.is_empty() && *p == page.views)
            {
                return Err(fail(format!(
                    "page at offset {} repeats the previous page: the service ignores offset",
                    st.offset
                )));
            }
            st.zero_rows += page.views.iter().filter(|r| r.total == 0).count() as u64;
            let next = st.offset + u64::from(PAGE_LIMIT);
            // Every row with views has at least one, so rows never outnumber total views.
            if page.has_more && next >= (page.totals.total as u64).saturating_add(st.zero_rows) {
                return Err(fail(format!(
                    "hasMore at offset {next}, but the totals ({}) allow no more rows",
                    page.totals.total
                )));
            }
            let fetched = Fetched {
                offset: st.offset,
                page,
            };
            st.done = !fetched.page.has_more;
            st.offset = next;
            st.previous = Some(fetched.page.views.clone());
            Ok(Some((fetched, st)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_found_from_the_bytes_exactly_as_char_is_control_finds_them() {
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            for s in [format!("{c}"), format!("/a{c}b"), format!("é{c}")] {
                assert_eq!(has_control(&s), s.chars().any(char::is_control), "{:?}", c);
            }
        }
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
        // Santiago skips midnight when its clocks go forward: the day starts at 01:00.
        assert_eq!(
            local_midnight(d("2026-09-06"), chrono_tz::America::Santiago).to_rfc3339(),
            "2026-09-06T01:00:00-03:00"
        );
    }

    #[test]
    fn counts_accept_integral_floats_and_refuse_everything_else() {
        let ok = decode_page(
            br#"{"totals":{"human":1.0,"ai":2,"total":3},"views":[],"hasMore":false}"#,
            250,
        )
        .unwrap();
        assert_eq!(
            ok.totals,
            Counts {
                human: 1,
                ai: 2,
                total: 3
            }
        );
        let cases = [
            (
                r#"{"totals":{"human":1.5,"ai":2,"total":3.5},"views":[],"hasMore":false}"#,
                "count 1.5 is not a non-negative integer",
            ),
            (
                r#"{"totals":{"human":-1,"ai":2,"total":1},"views":[],"hasMore":false}"#,
                "count -1 is negative",
            ),
            (
                r#"{"totals":{"human":"1","ai":2,"total":3},"views":[],"hasMore":false}"#,
                "expected a non-negative integer count",
            ),
            (
                r#"{"totals":{"human":18446744073709551615,"ai":0,"total":0},"views":[],"hasMore":false}"#,
                "count 18446744073709551615 is too large",
            ),
            (
                r#"{"totals":{"human":1,"ai":2,"total":4},"views":[],"hasMore":false}"#,
                "totals: total 4 is not human 1 + ai 2",
            ),
            (
                r#"{"totals":{"human":0,"ai":0,"total":0},"views":[{"path":"/a\u0000","human":0,"ai":0,"total":0}],"hasMore":false}"#,
                "contains control characters",
            ),
            (
                r#"{"totals":{"human":1,"ai":0,"total":1},"views":[{"path":"/a","human":1,"ai":0,"total":2}],"hasMore":false}"#,
                "row /a: total 2 is not human 1 + ai 0",
            ),
            (
                r#"{"totals":{"human":1,"ai":0,"total":1}"#,
                "page views body: EOF while parsing",
            ),
        ];
        for (body, want) in cases {
            let err = decode_page(body.as_bytes(), 250).unwrap_err();
            assert!(err.contains(want), "{body}: {err}");
        }
        let two = r#"{"totals":{"human":2,"ai":0,"total":2},"views":[{"path":"/a","human":1,"ai":0,"total":1},{"path":"/b","human":1,"ai":0,"total":1}],"hasMore":false}"#;
        assert_eq!(
            decode_page(two.as_bytes(), 1).unwrap_err(),
            "2 rows in a page, more than the limit 1"
        );
    }
}
