//! Deterministic daily page views: the emulator's ground truth.
//!
//! Each page has a popularity from a long-tailed (Zipf) law, a lifetime (some pages appear late or
//! disappear), and its own AI affinity. A day's expected views follow weekly seasonality and slow
//! growth; the AI share rises over `ai_ramp_days`. Rounding uses a hash of (seed, project, page,
//! day), so the same file always gives the same numbers, and a day's counts do not depend on
//! which range was asked for.

use super::data::Project;
use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Weekday};

const SECTIONS: [&str; 8] = [
    "guides",
    "api-reference",
    "concepts",
    "integrations",
    "quickstart",
    "components",
    "deploy",
    "changelog",
];

const TOPICS: [&str; 40] = [
    "introduction",
    "authentication",
    "rate-limits",
    "pagination",
    "webhooks",
    "errors",
    "sdks",
    "custom-domains",
    "analytics",
    "search",
    "navigation",
    "themes",
    "api-keys",
    "environment-variables",
    "migrations",
    "versioning",
    "caching",
    "localization",
    "accessibility",
    "code-blocks",
    "tables",
    "images",
    "redirects",
    "sitemaps",
    "feedback",
    "assistant",
    "agents",
    "mcp",
    "openapi",
    "snippets",
    "callouts",
    "tabs",
    "cards",
    "accordions",
    "frames",
    "icons",
    "embeds",
    "seo",
    "permissions",
    "billing",
];

/// One page's counts for a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Page path.
    pub path: String,
    /// Human views.
    pub human: u64,
    /// AI views.
    pub ai: u64,
}

impl Row {
    /// human + ai.
    pub fn total(&self) -> u64 {
        self.human + self.ai
    }
}

pub use docpipe_catalog::random::{mix, unit};

/// FNV-1a of a string: the emulator's stable hash of names and ids.
pub fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The path of page `i` (unique per index).
pub fn page_path(i: u32) -> String {
    let s = SECTIONS.len() as u32;
    let t = TOPICS.len() as u32;
    let section = SECTIONS[(i % s) as usize];
    let topic = TOPICS[((i / s) % t) as usize];
    let round = i / (s * t);
    if round == 0 {
        format!("/{section}/{topic}")
    } else {
        format!("/{section}/{topic}-{}", round + 1)
    }
}

/// A human title for a page path: `/guides/rate-limits-2` -> `Rate limits 2`.
pub fn page_title(path: &str) -> String {
    let last = path.rsplit('/').next().unwrap_or(path);
    let words = last.replace('-', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The generator for one project.
#[derive(Debug, Clone)]
pub struct Generator {
    seed: u64,
    start: NaiveDate,
    project: Project,
    /// Zipf weights normalised to sum 1, by page index.
    weights: Vec<f64>,
    paths: Vec<String>,
}

impl Generator {
    /// Precomputes the project's pages.
    pub fn new(seed: u64, start: NaiveDate, project: &Project) -> Self {
        let seed = mix(seed ^ hash_str(&project.id));
        let n = project.pages as usize;
        // Popularity rank is a hashed permutation of the index, so popular pages spread over sections.
        let mut order: Vec<u32> = (0..project.pages).collect();
        order.sort_by_key(|i| mix(seed ^ u64::from(*i)));
        let mut weights = vec![0.0; n];
        for (rank, idx) in order.iter().enumerate() {
            weights[*idx as usize] = 1.0 / (rank as f64 + 1.0).powf(1.05);
        }
        let sum: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= sum);
        let paths = (0..project.pages).map(page_path).collect();
        Self {
            seed,
            start,
            project: project.clone(),
            weights,
            paths,
        }
    }

    /// Page paths by index.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Popularity weight of page `i` (the weights sum to 1).
    pub fn weight(&self, i: usize) -> f64 {
        self.weights[i]
    }

    fn alive(&self, i: u32, day: i64) -> bool {
        let h = mix(self.seed ^ 0xA11CE ^ u64::from(i));
        if unit(h) >= self.project.churn {
            return true;
        }
        // A churning page either appears late or disappears, within the first 400 days.
        let at = (mix(h) % 400) as i64;
        if h & 1 == 0 { day >= at } else { day < at }
    }

    /// Counts of page `i` on `date`; `late` extra waves of late events for recent days.
    pub fn page_day(&self, i: u32, date: NaiveDate, late: u64) -> (u64, u64) {
        let day = (date - self.start).num_days();
        if day < 0 || !self.alive(i, day) {
            return (0, 0);
        }
        let season = match date.weekday() {
            Weekday::Sat => 0.55,
            Weekday::Sun => 0.5,
            _ => 1.0,
        };
        let growth = 1.0 + 0.0008 * day as f64;
        let h = mix(self.seed ^ (u64::from(i) << 24) ^ (day as u64).wrapping_mul(0x9E37));
        let noise = 0.75 + 0.5 * unit(h);
        let expected =
            self.project.daily_views * self.weights[i as usize] * season * growth * noise;
        let mut total = (expected + unit(mix(h ^ 1))).floor() as u64;
        if late > 0 {
            total += (total * late).div_ceil(100);
        }
        if total == 0 {
            return (0, 0);
        }
        let p = &self.project;
        let ramp = (day as f64 / f64::from(p.ai_ramp_days.max(1))).min(1.0);
        let base = p.ai_share_start + (p.ai_share_end - p.ai_share_start) * ramp;
        let affinity = 0.4 + 1.2 * unit(mix(self.seed ^ 0xAF ^ u64::from(i)));
        let share = (base * affinity).clamp(0.0, 0.97);
        let ai = ((total as f64) * share + unit(mix(h ^ 2))).floor() as u64;
        let ai = ai.min(total);
        (total - ai, ai)
    }

    /// Rows with views over the days `from..to` (exclusive), none after `today`; `late(day)` gives
    /// the late-event waves for a day. Rows are in the stable order: most views first, then path.
    pub fn rows(
        &self,
        from: NaiveDate,
        to: NaiveDate,
        today: NaiveDate,
        late: impl Fn(NaiveDate) -> u64,
    ) -> Vec<Row> {
        self.rows_between(midnight(from), midnight(to), today, late)
    }

    /// Rows with views over the minutes `from..to` (UTC, exclusive end): whole days as
    /// [`Generator::page_day`] counts them, and parts of days by the time-of-day curves.
    pub fn rows_between(
        &self,
        from: NaiveDateTime,
        to: NaiveDateTime,
        today: NaiveDate,
        late: impl Fn(NaiveDate) -> u64,
    ) -> Vec<Row> {
        self.rows_changed(from, to, today, late, |_, _| 1.0)
    }

    /// [`Generator::rows_between`] with each page's day counts multiplied by `factor(path,
    /// day)` (what a job's pull request changed), rounded down.
    pub fn rows_changed(
        &self,
        from: NaiveDateTime,
        to: NaiveDateTime,
        today: NaiveDate,
        late: impl Fn(NaiveDate) -> u64,
        factor: impl Fn(&str, NaiveDate) -> f64,
    ) -> Vec<Row> {
        let to = to.min(midnight(today.succ_opt().unwrap_or(today)));
        let from = from.max(midnight(self.start));
        // (day, first minute, end minute) of each day the range touches.
        let mut spans = Vec::new();
        let mut d = from.date();
        while midnight(d) < to {
            let next = d.succ_opt().unwrap_or(d);
            let m0 = if d == from.date() { minute_of(from) } else { 0 };
            let m1 = if to < midnight(next) {
                minute_of(to)
            } else {
                MINUTES
            };
            if m0 < m1 {
                spans.push((d, m0, m1, late(d)));
            }
            if next == d {
                break;
            }
            d = next;
        }
        let mut rows = Vec::new();
        for i in 0..self.project.pages {
            let (mut human, mut ai) = (0, 0);
            for &(d, m0, m1, late) in &spans {
                let (mut h, mut a) = self.page_day(i, d, late);
                let f = factor(&self.paths[i as usize], d);
                if f != 1.0 {
                    h = (h as f64 * f) as u64;
                    a = (a as f64 * f) as u64;
                }
                if (m0, m1) == (0, MINUTES) {
                    human += h;
                    ai += a;
                } else {
                    human += part(h, &HUMAN_BY_HOUR, m0, m1);
                    ai += part(a, &AI_BY_HOUR, m0, m1);
                }
            }
            if human + ai > 0 {
                rows.push(Row {
                    path: self.paths[i as usize].clone(),
                    human,
                    ai,
                });
            }
        }
        rows.sort_by(|a, b| b.total().cmp(&a.total()).then_with(|| a.path.cmp(&b.path)));
        rows
    }
}

/// Minutes in a day.
const MINUTES: u32 = 24 * 60;

/// How people's views spread over the hours of a UTC day: quiet nights, busy afternoons.
const HUMAN_BY_HOUR: [u64; 24] = [
    2, 1, 1, 1, 1, 2, 3, 5, 7, 8, 9, 9, 9, 9, 9, 8, 8, 7, 6, 5, 4, 4, 3, 2,
];

/// AI agents read around the clock.
const AI_BY_HOUR: [u64; 24] = [1; 24];

/// The first minute of a UTC day.
pub fn midnight(d: NaiveDate) -> NaiveDateTime {
    d.and_time(NaiveTime::MIN)
}

/// The minute of the day of `t` (seconds dropped).
fn minute_of(t: NaiveDateTime) -> u32 {
    t.time().num_seconds_from_midnight() / 60
}

/// The curve's weight up to minute `m` of the day (linear within an hour).
fn cumulative(curve: &[u64; 24], m: u32) -> u64 {
    let (h, rest) = ((m / 60) as usize, u64::from(m % 60));
    curve[..h].iter().sum::<u64>() * 60 + curve.get(h).map_or(0, |w| w * rest)
}

/// The views of a day's `count` that fall in its minutes `m0..m1`. The parts of a day's
/// adjacent ranges add up to the whole count exactly.
fn part(count: u64, curve: &[u64; 24], m0: u32, m1: u32) -> u64 {
    let whole = u128::from(cumulative(curve, MINUTES));
    let upto = |m: u32| (u128::from(count) * u128::from(cumulative(curve, m)) / whole) as u64;
    upto(m1) - upto(m0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(pages: u32) -> Project {
        Project {
            id: "p".into(),
            organization: "o".into(),
            pages,
            daily_views: 20_000.0,
            ai_share_start: 0.1,
            ai_share_end: 0.5,
            ai_ramp_days: 100,
            churn: 0.2,
            not_in_plan: Vec::new(),
        }
    }

    #[test]
    fn parts_of_days_add_up_to_the_days() {
        let start = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let g = Generator::new(7, start, &project(300));
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let t = |s: &str| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M").unwrap();
        let today = d("2026-06-01");
        let sum = |rows: &[Row]| -> std::collections::HashMap<String, (u64, u64)> {
            let mut m = std::collections::HashMap::new();
            for r in rows {
                let e = m.entry(r.path.clone()).or_insert((0, 0));
                e.0 += r.human;
                e.1 += r.ai;
            }
            m
        };
        // Two days cut at 07:30 and 23:00 (a UTC+1 day between): the parts add up to the days.
        let whole = g.rows(d("2026-03-02"), d("2026-03-04"), today, |_| 0);
        let mut parts = g.rows_between(t("2026-03-02T00:00"), t("2026-03-02T07:30"), today, |_| 0);
        parts.extend(g.rows_between(t("2026-03-02T07:30"), t("2026-03-03T23:00"), today, |_| 0));
        parts.extend(g.rows_between(t("2026-03-03T23:00"), t("2026-03-04T00:00"), today, |_| 0));
        assert_eq!(sum(&whole), sum(&parts));
        let total = |rows: &[Row]| rows.iter().map(Row::total).sum::<u64>();
        let night =
            total(&g.rows_between(t("2026-03-02T01:00"), t("2026-03-02T04:00"), today, |_| 0));
        let afternoon =
            total(&g.rows_between(t("2026-03-02T13:00"), t("2026-03-02T16:00"), today, |_| 0));
        assert!(
            night * 3 < afternoon,
            "night {night}, afternoon {afternoon}"
        );
        // The share of a day's count in a range: 1/24 of an even curve per hour.
        assert_eq!(part(2400, &AI_BY_HOUR, 60, 120), 100);
        assert_eq!(part(2400, &AI_BY_HOUR, 0, MINUTES), 2400);
    }

    #[test]
    fn paths_are_unique_for_many_pages() {
        let paths: std::collections::HashSet<_> = (0..5000).map(page_path).collect();
        assert_eq!(paths.len(), 5000);
        assert_eq!(page_path(0), "/guides/introduction");
        assert_eq!(page_title("/guides/rate-limits-2"), "Rate limits 2");
    }

    #[test]
    fn same_seed_same_numbers_and_ranges_add_up() {
        let start = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let g = Generator::new(7, start, &project(700));
        let g2 = Generator::new(7, start, &project(700));
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let today = d("2026-06-01");
        let a = g.rows(d("2026-03-02"), d("2026-03-03"), today, |_| 0);
        assert_eq!(a, g2.rows(d("2026-03-02"), d("2026-03-03"), today, |_| 0));
        assert!(
            a.len() > 500,
            "a weekday spans several pages of 250: {}",
            a.len()
        );
        let week: u64 = g
            .rows(d("2026-03-02"), d("2026-03-09"), today, |_| 0)
            .iter()
            .map(Row::total)
            .sum();
        let days: u64 = (2..9)
            .map(|x| {
                g.rows(
                    d(&format!("2026-03-0{x}")),
                    d(&format!("2026-03-{:02}", x + 1)),
                    today,
                    |_| 0,
                )
            })
            .map(|r| r.iter().map(Row::total).sum::<u64>())
            .sum();
        assert_eq!(week, days);
        // Long tail: the top 10% of pages hold most views.
        let total: u64 = a.iter().map(Row::total).sum();
        let top: u64 = a.iter().take(a.len() / 10).map(Row::total).sum();
        assert!(top * 2 > total, "top {top} of {total}");
        // Nothing after today, nothing before the start.
        assert!(
            g.rows(d("2026-06-02"), d("2026-06-05"), today, |_| 0)
                .is_empty()
        );
        assert!(
            g.rows(d("2025-01-01"), d("2026-01-01"), today, |_| 0)
                .is_empty()
        );
    }

    #[test]
    fn ai_share_rises_and_weekends_are_quieter() {
        let start = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let g = Generator::new(1, start, &project(300));
        let d = |s| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let today = d("2026-12-31");
        let share = |from, to| {
            let r = g.rows(d(from), d(to), today, |_| 0);
            let ai: u64 = r.iter().map(|x| x.ai).sum();
            let all: u64 = r.iter().map(Row::total).sum();
            (ai as f64 / all as f64, all)
        };
        let (early, _) = share("2026-01-05", "2026-01-12");
        let (late, _) = share("2026-06-01", "2026-06-08");
        assert!(late > early * 2.0, "{early} -> {late}");
        let (_, sat) = share("2026-06-06", "2026-06-07");
        let (_, wed) = share("2026-06-03", "2026-06-04");
        assert!(sat * 10 < wed * 7, "saturday {sat} wednesday {wed}");
    }
}
