//! Deterministic daily page views: the emulator's ground truth.
//!
//! Each page has a popularity from a long-tailed (Zipf) law, a lifetime (some pages appear late or
//! disappear), and its own AI affinity. A day's expected views follow weekly seasonality and slow
//! growth; the AI share rises over `ai_ramp_days`. Rounding uses a hash of (seed, project, page,
//! day), so the same file always gives the same numbers, and a day's counts do not depend on
//! which range was asked for.

use super::data::Project;
use chrono::{Datelike, NaiveDate, Weekday};

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

pub use crate::random::{mix, unit};

fn hash_str(s: &str) -> u64 {
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
            total += (total * late).div_ceil(20);
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
        let last = to.min(today.succ_opt().unwrap_or(today));
        let mut rows = Vec::new();
        for i in 0..self.project.pages {
            let (mut human, mut ai) = (0, 0);
            let mut d = from.max(self.start);
            while d < last {
                let (h, a) = self.page_day(i, d, late(d));
                human += h;
                ai += a;
                d = d.succ_opt().unwrap_or(last);
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
        }
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
