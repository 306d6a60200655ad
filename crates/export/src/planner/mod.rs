//! The budget planner: which windows are due (by age: today often, older provisional days less
//! often), in what order (unfinished walks, today's freshness, re-checks, backfill of missing
//! days newest first; projects taking turns) and how many fit the hour's budget (never past it,
//! with a share kept for a pending backfill). Pure: the exporter feeds it the state, the
//! forecast feeds it a simulated state.

pub mod forecast;

use chrono::{DateTime, Duration, Utc};

/// How often a dataset's days are looked at again, by their age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Today (and a span's recent days): fetched again after this long.
    pub today: Duration,
    /// Yesterday: probed again after this long; a day `n` days old after `n` times this...
    pub recent: Duration,
    /// ...but never longer than this.
    pub oldest: Duration,
    /// A span's full re-check (feedback's 14 days of mutable statuses): walked again after
    /// this long.
    pub full: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            today: Duration::hours(1),
            recent: Duration::hours(2),
            oldest: Duration::hours(6),
            full: Duration::hours(6),
        }
    }
}

impl Policy {
    /// The interval between two looks at a day `age` days old (0: today).
    pub fn interval(&self, age: i64) -> Duration {
        if age <= 0 {
            self.today
        } else {
            (self.recent * age.min(10_000) as i32).min(self.oldest)
        }
    }

    /// Whether a window looked at `at` is due again `now`, for an interval: a run on the hour
    /// finds due what the last hourly run fetched a few seconds past it (a tenth of the
    /// interval, at most 10 minutes, of slack).
    pub fn is_due(interval: Duration, at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
        let Some(at) = at else {
            return true;
        };
        let slack = (interval / 10).min(Duration::minutes(10));
        now - at >= interval - slack
    }

    /// How pressing a window due `now` is: how long it is overdue (past its interval), in
    /// steps of 10 minutes (0: just due). Absolute, not relative to the interval: when the
    /// budget is short every dataset and day falls behind by about as much time, rather than
    /// the days looked at rarely falling behind by several of their long intervals. `None`
    /// (never looked at): just due; a day passes the start of the day instead (see
    /// [`DueRule::day`]).
    pub fn urgency(interval: Duration, at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> u32 {
        let Some(at) = at else {
            return JUST_DUE;
        };
        let late = (now - at - interval).num_seconds().max(0);
        ((late + 300) / 600).min(i64::from(u32::MAX)) as u32
    }
}

/// The dataset whose today's windows are served before every other window due.
pub use crate::dataset::LEADING;

/// The urgency of a window just due (see [`Policy::urgency`]).
pub const JUST_DUE: u32 = 0;

/// The planner's settings: a policy for every dataset (each may have its own) and the share
/// of each hour's budget a pending backfill keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freshness {
    /// The policy of datasets without their own.
    pub default: Policy,
    /// Policies by dataset name.
    pub by_dataset: Vec<(&'static str, Policy)>,
    /// Percent of each hour's budget kept for missing days while any are pending (0: none).
    pub backfill_share_percent: u32,
}

impl Default for Freshness {
    fn default() -> Self {
        Self {
            default: Policy::default(),
            by_dataset: Vec::new(),
            backfill_share_percent: 10,
        }
    }
}

impl Freshness {
    /// The policy of a dataset.
    pub fn policy(&self, dataset: &str) -> Policy {
        self.by_dataset
            .iter()
            .find(|(d, _)| *d == dataset)
            .map_or(self.default, |(_, p)| *p)
    }

    /// The requests of an hour's budget of `limit` kept for a pending backfill.
    pub fn backfill_floor(&self, limit: u64) -> u64 {
        if self.backfill_share_percent == 0 {
            0
        } else {
            (limit * u64::from(self.backfill_share_percent))
                .div_ceil(100)
                .max(1)
        }
    }
}

/// The requests a walk of `days` days of a span is expected to take, from its latest walk's
/// `requests` over `walked_days` days (at least 1). A span never walked is guessed at one page
/// a day (the service's largest: 100 feedback rows, 1,000 assistant turns), since it tells no
/// count of rows before they are walked.
pub fn span_estimate(latest: Option<(u64, u64)>, days: u64) -> u64 {
    match latest {
        Some((requests, walked_days)) => {
            (requests * days.max(1)).div_ceil(walked_days.max(1)).max(1)
        }
        None => days.max(1),
    }
}

/// A day as the order's `newness` (larger is newer).
pub fn newness(day: chrono::NaiveDate) -> i64 {
    i64::from(chrono::Datelike::num_days_from_ce(&day))
}

/// Why a window is in a plan, in the order they are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Purpose {
    /// A walk a run left unfinished (its pages are stored).
    Resume,
    /// Today's data (or a span's recent days), due by its `today` interval.
    Fresh,
    /// A provisional day probed again (or settled: looked at a last time, then final), or a
    /// span's full re-check.
    Recheck,
    /// A day never fetched, newest first.
    Backfill,
}

impl Purpose {
    /// Its name in `status` and the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Purpose::Resume => "resume",
            Purpose::Fresh => "today",
            Purpose::Recheck => "recheck",
            Purpose::Backfill => "backfill",
        }
    }

    /// What its walk's requests count as in the metrics: `backfill` or `walk` (a probe's
    /// request is counted as `probe`).
    pub fn request_kind(self) -> &'static str {
        if self == Purpose::Backfill {
            "backfill"
        } else {
            "walk"
        }
    }
}

/// What the planner knows of a day window to decide whether it is due, and what it costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayState {
    /// Days before today (0: today).
    pub age: i64,
    /// Written once at least.
    pub written: bool,
    /// Pages of an unfinished walk stored.
    pub stored: u64,
    /// The stored pages are the whole walk: it is written without a request.
    pub complete: bool,
    /// What is stored has a fingerprint: a re-check probes its first page.
    pub probe_able: bool,
    /// When it was last walked or probed.
    pub checked_at: Option<DateTime<Utc>>,
}

impl DayState {
    /// How pressing the day is when due for `purpose` (see [`Policy::urgency`]; a day never
    /// looked at counts from `day_start`, its first instant), and whether it is a re-check at
    /// its deadline (see [`Candidate::deadline`]).
    fn urge(
        &self,
        policy: &Policy,
        purpose: Purpose,
        day_start: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> (u32, bool) {
        let urgency = Policy::urgency(
            policy.interval(self.age),
            Some(self.checked_at.unwrap_or(day_start)),
            now,
        );
        let deadline = match purpose {
            Purpose::Recheck => Policy::is_due(policy.oldest, self.checked_at, now),
            // Today's data twice its interval old (walked last two runs ago when hourly).
            Purpose::Fresh => Policy::is_due(policy.today * 2, self.checked_at, now),
            _ => false,
        };
        (urgency, deadline)
    }

    /// Why a (non-final) day is due `now`, if it is. A day past the lateness allowance is due
    /// at once: looked at a last time, it is final. An unfinished walk of a day never written
    /// is still a backfill (it goes on within the backfill's share, first of them).
    fn purpose(&self, rule: &DueRule, now: DateTime<Utc>) -> Option<Purpose> {
        let unfinished = self.stored > 0;
        if !self.written {
            return Some(if self.age <= 0 {
                if unfinished {
                    Purpose::Resume
                } else {
                    Purpose::Fresh
                }
            } else {
                Purpose::Backfill
            });
        }
        if unfinished {
            return Some(Purpose::Resume);
        }
        let purpose = if self.age <= 0 {
            Purpose::Fresh
        } else {
            Purpose::Recheck
        };
        if rule.refresh || self.age > i64::from(rule.lookback_days) {
            return Some(purpose);
        }
        Policy::is_due(rule.policy.interval(self.age), self.checked_at, now).then_some(purpose)
    }
}

/// The due rule's settings for one dataset, derived once from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueRule {
    /// How often its days are looked at again.
    pub policy: Policy,
    /// Days after which a day is final (the lateness allowance).
    pub lookback_days: u32,
    /// Every provisional day is due, however recently it was looked at (`--refresh`).
    pub refresh: bool,
}

/// A day window due: why, how pressing, and what it will cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayDue {
    /// Why it is due.
    pub purpose: Purpose,
    /// Its first page is a probe (compared with the stored fingerprint).
    pub probe: bool,
    /// How late it is (see [`Policy::urgency`]).
    pub urgency: u32,
    /// A re-check at its deadline (see [`Candidate::deadline`]).
    pub deadline: bool,
    /// Requests it is expected to take.
    pub cost: u64,
}

/// A span's walk due: its full re-check or its recent days, and how pressing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanDue {
    /// Why it is due: [`Purpose::Recheck`] (the full re-check) or [`Purpose::Fresh`].
    pub purpose: Purpose,
    /// A full re-check (its days back to the re-check's reach), not the recent days alone.
    pub full: bool,
    /// How late it is (see [`Policy::urgency`]).
    pub urgency: u32,
    /// A full re-check at its deadline (it waited the policy's `oldest`).
    pub deadline: bool,
}

impl DueRule {
    /// The one answer to "is this day due now, how urgent, what will it cost", for the
    /// exporter's plans, `status` and the forecast alike. `walk_cost` is what a whole walk of
    /// the day takes (measured on the latest windows, at least 1); `day_start` the day's first
    /// instant in the export's time zone.
    pub fn day(
        &self,
        s: &DayState,
        walk_cost: u64,
        day_start: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<DayDue> {
        let purpose = s.purpose(self, now)?;
        let probe = s.written && s.stored == 0 && s.probe_able;
        let (urgency, deadline) = s.urge(&self.policy, purpose, day_start, now);
        let cost = if s.complete {
            0
        } else if probe && purpose == Purpose::Recheck {
            1
        } else {
            walk_cost.saturating_sub(s.stored).max(1)
        };
        Some(DayDue {
            purpose,
            probe,
            urgency,
            deadline,
            cost,
        })
    }

    /// The one answer to "is this span's walk due now, and which", beside [`DueRule::day`],
    /// for the exporter's plans and the forecast alike: a span walked before (its first walk
    /// is a backfill) re-checks its days back to its reach when it `rechecks` more days than
    /// its recent ones and its full re-check (last at `full_at`) is due, else walks its recent
    /// days when its last walk (`walked_at`) is due again.
    pub fn span(
        &self,
        rechecks: bool,
        full_at: Option<DateTime<Utc>>,
        walked_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<SpanDue> {
        let p = &self.policy;
        if rechecks && (self.refresh || Policy::is_due(p.full, full_at, now)) {
            return Some(SpanDue {
                purpose: Purpose::Recheck,
                full: true,
                urgency: Policy::urgency(p.full, full_at, now),
                deadline: Policy::is_due(p.oldest, full_at, now),
            });
        }
        (self.refresh || Policy::is_due(p.today, walked_at, now)).then(|| SpanDue {
            purpose: Purpose::Fresh,
            full: false,
            urgency: Policy::urgency(p.today, walked_at, now),
            deadline: false,
        })
    }
}

/// One window a plan could carry, as the fitting sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its organization (whose budget it spends).
    pub org: String,
    /// Its project (projects take turns).
    pub project: String,
    /// Its dataset.
    pub dataset: &'static str,
    /// Why it is due.
    pub purpose: Purpose,
    /// Newer first within a purpose and project (a day number, larger is newer).
    pub newness: i64,
    /// Requests it is expected to take.
    pub cost: u64,
    /// How late it is ([`Policy::urgency`]; today's freshness and re-checks only).
    pub urgency: u32,
    /// Some of its pages are stored (a backfill walk under way goes on first).
    pub started: bool,
    /// A re-check that has waited the policy's `oldest` since its last look (a provisional
    /// day's probe, or a span's full re-check of its mutable days): the longest any
    /// provisional day waits, so it goes before the other windows due. For today's data:
    /// twice its `today` interval since its last walk.
    pub deadline: bool,
}

impl Candidate {
    /// Its group in the serving order: unfinished walks; today's page views (what every
    /// report reads first) when twice their interval old; re-checks at their deadline (see
    /// [`Candidate::deadline`]; as late, probes before full walks); today's page views just
    /// due; then the rest of today's freshness and the re-checks together, the latest first (a
    /// window passed over last hour comes before one just due), today's before a re-check as
    /// late; then the backfill, walks under way first. When the budget is short, today's page
    /// views wait one run (two hours old at most when hourly) before a provisional day waits
    /// past its deadline.
    fn group(&self) -> (u8, std::cmp::Reverse<u32>, Purpose, bool) {
        let latest = std::cmp::Reverse(self.urgency);
        match self.purpose {
            Purpose::Resume => (0, std::cmp::Reverse(0), self.purpose, false),
            Purpose::Fresh if self.dataset == LEADING && self.deadline => {
                (1, std::cmp::Reverse(0), self.purpose, false)
            }
            // At their deadline, as late: a day's probe (one request) before a span's full walk.
            Purpose::Recheck if self.deadline => (2, latest, self.purpose, self.cost > 1),
            Purpose::Fresh if self.dataset == LEADING => {
                (3, std::cmp::Reverse(0), self.purpose, false)
            }
            Purpose::Fresh | Purpose::Recheck => (4, latest, self.purpose, false),
            Purpose::Backfill => (5, std::cmp::Reverse(0), self.purpose, !self.started),
        }
    }
}

/// The order to serve candidates in: by group (see [`Candidate::group`]), then projects
/// taking turns (the newest of each project first), then by project name. Returns indices
/// into `c`.
pub fn order(c: &[Candidate]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..c.len()).collect();
    idx.sort_by(|&a, &b| {
        (c[a].group(), &c[a].project, -c[a].newness).cmp(&(
            c[b].group(),
            &c[b].project,
            -c[b].newness,
        ))
    });
    // Each candidate's turn: its rank among its project's candidates of the same group.
    let mut turn = vec![0usize; c.len()];
    let mut last = None;
    let mut n = 0;
    for &i in &idx {
        let key = (c[i].group(), c[i].project.as_str());
        n = if last == Some(key) { n + 1 } else { 0 };
        last = Some(key);
        turn[i] = n;
    }
    idx.sort_by(|&a, &b| {
        (c[a].group(), turn[a], &c[a].project).cmp(&(c[b].group(), turn[b], &c[b].project))
    });
    idx
}

/// What an organization can spend in a run: `limit` an hour, `used` in the last hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// The budget an hour (after headroom).
    pub limit: u64,
    /// Requests sent in the last hour.
    pub used: u64,
}

impl Room {
    /// What is left this hour.
    pub fn left(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    /// Hours beyond this one that `need` requests take at this budget (0: within what is left
    /// this hour): the one reckoning of an ETA, for the plans and `status` alike.
    pub fn hours_for(&self, need: u64) -> u64 {
        need.saturating_sub(self.left()).div_ceil(self.limit.max(1))
    }

    /// The one reckoning of an organization's analytics budget, for the plans, the daemon's
    /// backfill, its gauge, `check`, `status` and the forecast alike: its hourly limit less
    /// its headroom, and what `budget` counts in the hour before `at` (a later instant: what
    /// will still count then).
    pub fn analytics(
        limits: &crate::api::Limits,
        budget: &dyn crate::api::budget::Budget,
        org: &str,
        at: DateTime<Utc>,
    ) -> Self {
        Room {
            limit: u64::from(limits.effective(limits.analytics_per_hour)),
            used: u64::from(budget.used(&crate::api::analytics_scope(org), at)),
        }
    }
}

/// A candidate the fit keeps: its index, and the most requests it may take this run when it
/// is walked in parts (`None`: whole).
pub type Chosen = (usize, Option<u64>);

/// The candidates (in serving order) that fit each organization's room, and the requests
/// each organization may spend on them. Never past the room; while backfill candidates wait,
/// the other purposes leave the backfill floor free (unfinished walks excepted: they finish
/// what was paid for). A candidate that does not fit is passed over; cheaper ones after it
/// may still fit. A backfill window larger than what is left, or any window larger than an
/// hour can ever hold, is walked in parts: the first of them in an organization's run takes
/// what is left, its pages are stored and its walk goes on next run.
pub fn fit(
    c: &[Candidate],
    served: &[usize],
    rooms: &dyn Fn(&str) -> Option<Room>,
    freshness: &Freshness,
) -> (Vec<Chosen>, Vec<(String, u64)>) {
    let mut spent: Vec<(String, u64)> = Vec::new();
    let mut chosen = Vec::new();
    let backfill_waits: std::collections::HashSet<&str> = c
        .iter()
        .filter(|x| x.purpose == Purpose::Backfill)
        .map(|x| x.org.as_str())
        .collect();
    for &i in served {
        let cand = &c[i];
        let Some(room) = rooms(&cand.org) else {
            chosen.push((i, None));
            continue;
        };
        let pos = match spent.iter().position(|(o, _)| *o == cand.org) {
            Some(p) => p,
            None => {
                spent.push((cand.org.clone(), 0));
                spent.len() - 1
            }
        };
        let floor = match cand.purpose {
            Purpose::Fresh | Purpose::Recheck if backfill_waits.contains(cand.org.as_str()) => {
                freshness.backfill_floor(room.limit)
            }
            _ => 0,
        };
        let cap = room.left().saturating_sub(floor);
        let left = cap.saturating_sub(spent[pos].1);
        if cand.cost <= left {
            spent[pos].1 += cand.cost;
            chosen.push((i, None));
        } else if left > 0
            && (cand.purpose == Purpose::Backfill || cand.cost > room.limit.saturating_sub(floor))
        {
            // Walked in parts: it takes what is left, and nothing after it fits.
            spent[pos].1 += left;
            chosen.push((i, Some(left)));
        }
    }
    let allowance = spent
        .into_iter()
        .map(|(o, _)| {
            let left = rooms(&o).map_or(u64::MAX, |r| r.left());
            (o, left)
        })
        .collect();
    (chosen, allowance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(project: &str, purpose: Purpose, newness: i64, cost: u64) -> Candidate {
        Candidate {
            org: "o".into(),
            project: project.into(),
            dataset: "visitors",
            purpose,
            newness,
            cost,
            urgency: JUST_DUE,
            started: false,
            deadline: false,
        }
    }

    #[test]
    fn the_due_rule_says_why_how_urgent_and_what_a_day_costs() {
        let now = "2026-03-15T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let rule = DueRule {
            policy: Policy::default(),
            lookback_days: 3,
            refresh: false,
        };
        let state = |age, written, stored, ago: Option<i64>| DayState {
            age,
            written,
            stored,
            complete: false,
            probe_able: true,
            checked_at: ago.map(|m| now - Duration::minutes(m)),
        };
        let start = |age: i64| {
            "2026-03-15T00:00:00Z".parse::<DateTime<Utc>>().unwrap() - Duration::days(age)
        };
        let due = |s: DayState| rule.day(&s, 5, start(s.age), now);
        let d = |purpose, probe, urgency, deadline, cost| DayDue {
            purpose,
            probe,
            urgency,
            deadline,
            cost,
        };
        // Today never fetched: walked whole, at its deadline, 12 h past its start less its
        // 1 h interval (66 steps of 10 minutes late).
        assert_eq!(
            due(state(0, false, 0, None)),
            Some(d(Purpose::Fresh, false, 66, true, 5))
        );
        // Yesterday looked at 3 h ago (its interval 2 h): a one-request probe.
        assert_eq!(
            due(state(1, true, 0, Some(180))),
            Some(d(Purpose::Recheck, true, 6, false, 1))
        );
        // ... looked at an hour ago: not due.
        assert_eq!(due(state(1, true, 0, Some(60))), None);
        // A walk stopped after 2 pages goes on for the 3 left.
        assert_eq!(
            due(state(1, true, 2, Some(60))),
            Some(d(Purpose::Resume, false, 0, false, 3))
        );
        // Its pages complete: written without a request.
        let complete = DayState {
            complete: true,
            ..state(1, true, 2, Some(60))
        };
        assert_eq!(due(complete).map(|d| d.cost), Some(0));
        // A missing day is a backfill; past the lateness allowance a written day is due at once.
        assert_eq!(
            due(state(5, false, 0, None)).map(|d| d.purpose),
            Some(Purpose::Backfill)
        );
        assert_eq!(
            due(state(4, true, 0, Some(10))).map(|d| d.purpose),
            Some(Purpose::Recheck)
        );
        // --refresh: every provisional day, however recent its look; no fingerprint: walked.
        let refresh = DueRule {
            refresh: true,
            ..rule
        };
        let no_fp = DayState {
            probe_able: false,
            ..state(1, true, 0, Some(10))
        };
        assert_eq!(
            refresh.day(&no_fp, 5, start(1), now),
            Some(d(Purpose::Recheck, false, 0, false, 5))
        );
    }

    #[test]
    fn a_span_rechecks_in_full_when_due_else_walks_its_recent_days() {
        let rule = DueRule {
            policy: Policy::default(),
            lookback_days: 3,
            refresh: false,
        };
        let now = "2026-03-15T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let ago = |h: i64| Some(now - Duration::hours(h));
        let due = |purpose, full, urgency, deadline| SpanDue {
            purpose,
            full,
            urgency,
            deadline,
        };
        // Its full re-check 7 h ago (every 6 h, the oldest 6 h): due, 6 steps late, at its
        // deadline; a span that re-checks no more than its recent days never does it.
        assert_eq!(
            rule.span(true, ago(7), ago(2), now),
            Some(due(Purpose::Recheck, true, 6, true))
        );
        assert_eq!(
            rule.span(false, ago(7), ago(2), now),
            Some(due(Purpose::Fresh, false, 6, false))
        );
        // The full re-check 3 h ago: its recent days, walked 30 minutes ago: nothing.
        assert_eq!(
            rule.span(true, ago(3), Some(now - Duration::minutes(30)), now),
            None
        );
        // Never re-checked in full: due at once.
        assert_eq!(
            rule.span(true, None, ago(2), now),
            Some(due(Purpose::Recheck, true, JUST_DUE, true))
        );
        // --refresh: whatever was done when.
        let refresh = DueRule {
            refresh: true,
            ..rule
        };
        assert_eq!(
            refresh.span(false, ago(0), ago(0), now),
            Some(due(Purpose::Fresh, false, 0, false))
        );
    }

    #[test]
    fn intervals_grow_with_age_up_to_the_oldest() {
        let p = Policy::default();
        let h = Duration::hours;
        assert_eq!(
            [0, 1, 2, 3, 4].map(|a| p.interval(a)),
            [h(1), h(2), h(4), h(6), h(6)]
        );
        let t0 = DateTime::parse_from_rfc3339("2026-03-15T10:00:03Z")
            .unwrap()
            .with_timezone(&Utc);
        // The hourly run on the hour finds due what the last one fetched just past it.
        assert!(Policy::is_due(h(1), Some(t0), t0 + Duration::minutes(59)));
        assert!(!Policy::is_due(h(1), Some(t0), t0 + Duration::minutes(50)));
        assert!(!Policy::is_due(h(2), Some(t0), t0 + Duration::minutes(59)));
        // Urgency: 10-minute steps past the interval.
        assert_eq!(
            Policy::urgency(h(1), Some(t0), t0 + Duration::minutes(59)),
            0
        );
        assert_eq!(Policy::urgency(h(1), Some(t0), t0 + h(2)), 6);
        assert_eq!(Policy::urgency(h(6), Some(t0), t0 + h(7)), 6);
        assert_eq!(Policy::urgency(h(6), Some(t0), t0 + h(9)), 18);
        assert_eq!(Policy::urgency(h(6), None, t0), JUST_DUE);
    }

    #[test]
    fn unfinished_walks_then_today_then_rechecks_then_backfill_projects_taking_turns() {
        let c = vec![
            cand("a", Purpose::Backfill, 5, 8),
            cand("a", Purpose::Backfill, 9, 8),
            cand("b", Purpose::Backfill, 9, 8),
            cand("b", Purpose::Recheck, 8, 1),
            cand("a", Purpose::Fresh, 10, 8),
            cand("b", Purpose::Resume, 3, 2),
        ];
        assert_eq!(order(&c), vec![5, 4, 3, 1, 2, 0]);
    }

    #[test]
    fn the_latest_window_goes_first_and_a_started_backfill_goes_on_first() {
        let mut c = vec![
            cand("a", Purpose::Fresh, 10, 8),
            cand("b", Purpose::Fresh, 10, 8),
            cand("a", Purpose::Recheck, 7, 1),
            cand("a", Purpose::Backfill, 5, 8),
            cand("a", Purpose::Backfill, 3, 30),
        ];
        // b's today walk was passed over an hour ago (6), a's re-check is 2 h late (12); the
        // backfill walk of day 3 is under way.
        c[1].urgency = 6;
        c[2].urgency = 12;
        c[4].started = true;
        assert_eq!(order(&c), vec![2, 1, 0, 4, 3]);
        // Today's page views go before every other window due, however late, but a re-check
        // at its deadline.
        c[0].dataset = LEADING;
        assert_eq!(order(&c), vec![0, 2, 1, 4, 3]);
        // A re-check at its deadline goes before a later window of today.
        c[2].urgency = 0;
        assert_eq!(order(&c), vec![0, 1, 2, 4, 3]);
        c[2].deadline = true;
        // ... and before today's page views just due (an hour old when hourly),
        assert_eq!(order(&c), vec![2, 0, 1, 4, 3]);
        // ... but not before today's page views twice their interval old.
        c[0].deadline = true;
        assert_eq!(order(&c), vec![0, 2, 1, 4, 3]);
    }

    #[test]
    fn a_backfill_window_larger_than_what_is_left_is_walked_in_parts() {
        let c = vec![
            cand("a", Purpose::Fresh, 10, 8),
            cand("a", Purpose::Backfill, 9, 30),
            cand("a", Purpose::Backfill, 8, 2),
        ];
        let f = Freshness::default();
        let room = |_: &str| Some(Room { limit: 20, used: 0 });
        // Today's walk (8), then the 30-request backfill takes the 12 left; the 2-request one
        // does not fit after it.
        let (chosen, _) = fit(&c, &order(&c), &room, &f);
        assert_eq!(chosen, vec![(0, None), (1, Some(12))]);
        // A today's window larger than an hour can hold (less the floor) is walked in parts
        // too; one that would fit whole another hour is passed over.
        let big = vec![
            cand("a", Purpose::Fresh, 10, 25),
            cand("b", Purpose::Fresh, 10, 15),
        ];
        let room = |_: &str| Some(Room { limit: 20, used: 6 });
        let (chosen, _) = fit(&big, &order(&big), &room, &f);
        assert_eq!(chosen, vec![(0, Some(14))]);
    }

    #[test]
    fn the_fit_never_passes_the_room_and_keeps_the_backfill_floor() {
        let c = vec![
            cand("a", Purpose::Fresh, 10, 8),
            cand("b", Purpose::Fresh, 10, 8),
            cand("a", Purpose::Recheck, 9, 1),
            cand("a", Purpose::Backfill, 5, 8),
        ];
        let f = Freshness::default();
        let room = |used| move |_: &str| Some(Room { limit: 20, used });
        // 20 an hour, 2 kept for the backfill: both today walks and the probe (17); the
        // backfill window (8) starts with the 3 left and goes on next run.
        let (chosen, allowance) = fit(&c, &order(&c), &room(0), &f);
        assert_eq!(chosen, vec![(0, None), (1, None), (2, None), (3, Some(3))]);
        assert_eq!(allowance, vec![("o".to_string(), 20)]);
        // 12 used: 8 left, 2 of them kept: no today walk fits, the probe does; the backfill
        // window (8) takes the 7 left, in parts.
        let (chosen, _) = fit(&c, &order(&c), &room(12), &f);
        assert_eq!(chosen, vec![(2, None), (3, Some(7))]);
        // Without a backfill waiting, the floor is not kept.
        let (chosen, _) = fit(&c[..3], &order(&c[..3]), &room(4), &f);
        assert_eq!(chosen, vec![(0, None), (1, None)]);
    }
}
