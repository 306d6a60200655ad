//! What the planner will do over the next hours, without sending anything: hourly runs
//! simulated with the same due rule, order and fit as the real ones, on the costs the state
//! measured (a probed day is assumed unchanged: a changed one costs its walk). Gives, per
//! organization, the requests an hour by dataset, the staleness each project and dataset will
//! have, when the missing days will be in, and, when the config asks for more than the budget
//! gives, the shortfall and what would fit.

use super::{Candidate, DueRule, Freshness, Policy, Purpose, Room, fit, newness, order};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The hours simulated: the next day's runs (when missing windows are in is the status's one
/// ETA, not the forecast's).
const HORIZON_HOURS: i64 = 24;

/// One project's dataset as the simulation sees it.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Organization.
    pub org: String,
    /// Project.
    pub project: String,
    /// Dataset.
    pub dataset: &'static str,
    /// Its policy.
    pub policy: Policy,
    /// Requests a day's walk (a span's: its recent days') takes.
    pub walk_cost: u64,
    /// Its windows.
    pub windows: Windows,
    /// Its windows left out of `windows` because they are stuck (their walk reached the bound
    /// of pages, or walks far beyond its estimate), as people read them:
    /// `page_views alpha 2026-03-08 (tried again after ...)`.
    pub stuck: Vec<String>,
}

/// The windows of a stream.
#[derive(Debug, Clone)]
pub enum Windows {
    /// Day windows: the days not final yet with when each was last looked at (`None`: never
    /// written), and the lateness allowance.
    Days {
        /// Not final days, from the project's first day to today.
        days: BTreeMap<NaiveDate, Option<DateTime<Utc>>>,
        /// Lateness allowance.
        lookback_days: u32,
    },
    /// A span walked whole: when its recent days and its full re-check were last walked.
    Span {
        /// Last walk.
        walked_at: Option<DateTime<Utc>>,
        /// Last full re-check (`None` for a span without one).
        full: Option<(Option<DateTime<Utc>>, u64)>,
    },
}

/// The forecast of one organization.
#[derive(Debug, Clone, PartialEq)]
pub struct OrgForecast {
    /// Organization.
    pub org: String,
    /// Its budget an hour.
    pub limit: u64,
    /// What the config asks for an hour in steady state (backfill aside).
    pub demand: f64,
    /// Requests an hour by dataset over the next 24 hours (simulated).
    pub by_dataset: Vec<(&'static str, f64)>,
    /// Per project and dataset: the most today's data will be stale, and the longest a
    /// provisional day will wait between two looks, over the next 24 hours.
    pub staleness: Vec<(String, &'static str, Duration, Duration)>,
    /// The demand by dataset, steady state.
    pub demand_by_dataset: Vec<(&'static str, f64)>,
    /// The `today` interval of the datasets (hours).
    pub today_hours: f64,
    /// The windows left out of the forecast because they are stuck (see [`Stream::stuck`]).
    pub stuck: Vec<String>,
}

fn hours(d: Duration) -> f64 {
    d.num_seconds().max(1) as f64 / 3600.0
}

/// The steady demand of a stream, requests an hour: today walked every `today` interval, each
/// provisional day probed every interval of its age, each day looked at once more when it
/// settles.
fn demand(s: &Stream, today_scale: f64) -> f64 {
    let p = &s.policy;
    let today = s.walk_cost as f64 / (hours(p.today) * today_scale);
    match &s.windows {
        Windows::Days { lookback_days, .. } => {
            let probes: f64 = (1..=i64::from(*lookback_days))
                .map(|age| 1.0 / hours(p.interval(age)))
                .sum();
            today + probes + 1.0 / 24.0
        }
        Windows::Span { full, .. } => {
            today + full.map_or(0.0, |(_, cost)| cost as f64 / hours(p.full))
        }
    }
}

/// A simulated candidate: which stream, which day (spans: none; `Some(true)` a full re-check).
#[derive(Debug, Clone, Copy)]
enum Slot {
    Day(usize, NaiveDate),
    Span(usize, bool),
}

/// A slot as the key of the requests spent on it in parts: (stream, day, full re-check).
type PartKey = (usize, Option<NaiveDate>, bool);

impl Slot {
    fn key(self) -> PartKey {
        match self {
            Slot::Day(si, day) => (si, Some(day), false),
            Slot::Span(si, is_full) => (si, None, is_full),
        }
    }
}

/// Simulates hourly runs from `now`; `rooms` gives each organization's budget an hour and
/// what it used in the last hour (the first run's room).
pub fn forecast(
    streams: &[Stream],
    rooms: &BTreeMap<String, Room>,
    freshness: &Freshness,
    tz: Tz,
    now: DateTime<Utc>,
) -> Vec<OrgForecast> {
    let mut sim = Sim::new(streams, tz);
    for hour in 0..HORIZON_HOURS {
        let t = now + Duration::hours(hour);
        let (cands, slots) = sim.candidates(t);
        let room = |org: &str| {
            rooms.get(org).map(|r| Room {
                limit: r.limit,
                used: if hour == 0 { r.used } else { 0 },
            })
        };
        let (chosen, _) = fit(&cands, &order(&cands), &room, freshness);
        sim.serve(&cands, &slots, chosen, t);
    }
    sim.report(rooms)
}

/// The forecast's simulation: the streams as the hours served leave them, and what it saw.
struct Sim {
    streams: Vec<Stream>,
    tz: Tz,
    /// Requests spent in the first 24 hours, by organization and dataset.
    spent: BTreeMap<(String, &'static str), u64>,
    /// The worst staleness in the first 24 hours, by project and dataset: today's data, the
    /// provisional days'.
    worst: BTreeMap<(String, &'static str), (Duration, Duration)>,
    /// Requests already spent on windows walked in parts, by slot.
    progress: BTreeMap<PartKey, u64>,
}

impl Sim {
    fn new(streams: &[Stream], tz: Tz) -> Self {
        let streams = streams.to_vec();
        Self {
            streams,
            tz,
            spent: BTreeMap::new(),
            worst: BTreeMap::new(),
            progress: BTreeMap::new(),
        }
    }

    /// The windows due at `t`, with the slot each is of (noting the staleness seen).
    fn candidates(&mut self, t: DateTime<Utc>) -> (Vec<Candidate>, Vec<Slot>) {
        let mut cands = Vec::new();
        let mut slots = Vec::new();
        let today = t.with_timezone(&self.tz).date_naive();
        for i in 0..self.streams.len() {
            if matches!(self.streams[i].windows, Windows::Days { .. }) {
                self.day_candidates(i, t, today, &mut cands, &mut slots);
            } else {
                self.span_candidates(i, t, today, &mut cands, &mut slots);
            }
        }
        (cands, slots)
    }

    /// The days of stream `i` due at `t` (today's added when it is new).
    fn day_candidates(
        &mut self,
        i: usize,
        t: DateTime<Utc>,
        today: NaiveDate,
        cands: &mut Vec<Candidate>,
        slots: &mut Vec<Slot>,
    ) {
        let tz = self.tz;
        let s = &mut self.streams[i];
        let Windows::Days {
            days,
            lookback_days,
        } = &mut s.windows
        else {
            return;
        };
        days.entry(today).or_insert(None);
        let rule = DueRule {
            policy: s.policy,
            lookback_days: *lookback_days,
            refresh: false,
        };
        for (&day, &at) in days.iter() {
            let age = (today - day).num_days();
            let since = at.map_or(Duration::zero(), |a| t - a);
            let w = self
                .worst
                .entry((s.project.clone(), s.dataset))
                .or_default();
            if age == 0 {
                let midnight = t - Duration::seconds(i64::from(
                    t.with_timezone(&tz).time().num_seconds_from_midnight(),
                ));
                let since = at.map_or(t - midnight, |a| t - a.max(midnight));
                w.0 = w.0.max(since);
            } else if at.is_some() && age <= i64::from(*lookback_days) {
                w.1 = w.1.max(since);
            }
            let done = self
                .progress
                .get(&Slot::Day(i, day).key())
                .copied()
                .unwrap_or(0);
            // A day written has its fingerprint: a re-check is a probe.
            let state = super::DayState {
                age,
                written: at.is_some(),
                stored: 0,
                complete: false,
                probe_able: true,
                checked_at: at,
            };
            let day_start = crate::calendar::local_midnight(day, tz).to_utc();
            // Walked in parts: the parts already spent are not spent again.
            if let Some(d) = rule.day(&state, s.walk_cost.saturating_sub(done), day_start, t) {
                cands.push(Candidate {
                    org: s.org.clone(),
                    project: s.project.clone(),
                    dataset: s.dataset,
                    purpose: d.purpose,
                    newness: newness(day),
                    cost: d.cost,
                    urgency: d.urgency,
                    started: done > 0,
                    deadline: d.deadline,
                });
                slots.push(Slot::Day(i, day));
            }
        }
    }

    /// The walk of span stream `i` due at `t`, if one is: its first, its full re-check, or
    /// its recent days.
    fn span_candidates(
        &self,
        i: usize,
        t: DateTime<Utc>,
        today: NaiveDate,
        cands: &mut Vec<Candidate>,
        slots: &mut Vec<Slot>,
    ) {
        let s = &self.streams[i];
        let Windows::Span { walked_at, full } = &s.windows else {
            return;
        };
        let rule = DueRule {
            policy: s.policy,
            lookback_days: 0,
            refresh: false,
        };
        let (purpose, cost, is_full, urgency, deadline) = match walked_at {
            None => (
                Purpose::Backfill,
                s.walk_cost,
                false,
                Policy::urgency(s.policy.today, None, t),
                false,
            ),
            Some(w) => {
                let full_at = full.as_ref().and_then(|(f, _)| *f);
                let Some(due) = rule.span(full.is_some(), full_at, Some(*w), t) else {
                    return;
                };
                let cost = match (due.full, full) {
                    (true, Some((_, cost))) => *cost,
                    _ => s.walk_cost,
                };
                (due.purpose, cost, due.full, due.urgency, due.deadline)
            }
        };
        let done = self
            .progress
            .get(&Slot::Span(i, is_full).key())
            .copied()
            .unwrap_or(0);
        cands.push(Candidate {
            org: s.org.clone(),
            project: s.project.clone(),
            dataset: s.dataset,
            purpose,
            newness: newness(today),
            cost: cost.saturating_sub(done).max(1),
            urgency,
            started: done > 0,
            deadline,
        });
        slots.push(Slot::Span(i, is_full));
    }

    /// Serves the windows `chosen` (with their parts) at `t`: a whole one is looked at (a day
    /// past the allowance is final), a part is remembered for the next hour.
    fn serve(
        &mut self,
        cands: &[Candidate],
        slots: &[Slot],
        chosen: Vec<(usize, Option<u64>)>,
        t: DateTime<Utc>,
    ) {
        let today = t.with_timezone(&self.tz).date_naive();
        for (i, part) in chosen {
            let key = slots[i].key();
            let s = &self.streams[key.0];
            *self.spent.entry((s.org.clone(), s.dataset)).or_default() +=
                part.unwrap_or(cands[i].cost);
            if let Some(part) = part {
                // Walked in parts: its walk goes on next run.
                *self.progress.entry(key).or_default() += part;
                continue;
            }
            self.progress.remove(&key);
            match slots[i] {
                Slot::Day(si, day) => {
                    if let Windows::Days {
                        days,
                        lookback_days,
                    } = &mut self.streams[si].windows
                    {
                        // Past the allowance, a day looked at is final.
                        if (today - day).num_days() > i64::from(*lookback_days) {
                            days.remove(&day);
                        } else {
                            days.insert(day, Some(t));
                        }
                    }
                }
                Slot::Span(si, is_full) => {
                    if let Windows::Span { walked_at, full } = &mut self.streams[si].windows {
                        *walked_at = Some(t);
                        if let Some((f, _)) = full
                            && (is_full || f.is_none())
                        {
                            *f = Some(t);
                        }
                    }
                }
            }
        }
    }

    /// Each organization's forecast from what the simulation saw.
    fn report(&self, rooms: &BTreeMap<String, Room>) -> Vec<OrgForecast> {
        rooms
            .iter()
            .map(|(org, r)| {
                let mine: Vec<&Stream> = self.streams.iter().filter(|s| s.org == *org).collect();
                let mut by_demand: BTreeMap<&'static str, f64> = BTreeMap::new();
                for s in &mine {
                    *by_demand.entry(s.dataset).or_default() += demand(s, 1.0);
                }
                OrgForecast {
                    org: org.clone(),
                    limit: r.limit,
                    demand: by_demand.values().sum(),
                    by_dataset: self
                        .spent
                        .iter()
                        .filter(|((o, _), _)| o == org)
                        .map(|((_, d), n)| (*d, *n as f64 / 24.0))
                        .collect(),
                    staleness: self
                        .worst
                        .iter()
                        .filter(|((p, _), _)| mine.iter().any(|s| s.project == *p))
                        .map(|((p, d), (a, b))| (p.clone(), *d, *a, *b))
                        .collect(),
                    demand_by_dataset: by_demand.into_iter().collect(),
                    today_hours: mine.first().map_or(1.0, |s| hours(s.policy.today)),
                    stuck: mine.iter().flat_map(|s| s.stuck.iter().cloned()).collect(),
                }
            })
            .collect()
    }
}

use chrono::Timelike as _;

/// Whole hours (at least 1) of a duration, for messages.
fn h(d: Duration) -> String {
    let m = d.num_minutes();
    if m < 60 {
        format!("{m} min")
    } else if m % 60 == 0 {
        format!("{} h", m / 60)
    } else {
        format!("{:.1} h", m as f64 / 60.0)
    }
}

impl OrgForecast {
    /// Whether the config asks for more than the budget gives.
    pub fn short(&self) -> bool {
        self.demand > self.limit as f64 + 1e-9
    }

    /// When short, what would fit: the `today` interval that makes the demand fit, or the one
    /// dataset whose removal does (the smallest such). `streams` are this organization's.
    pub fn what_fits(&self, streams: &[Stream]) -> String {
        let mine: Vec<&Stream> = streams.iter().filter(|s| s.org == self.org).collect();
        let limit = self.limit as f64;
        let mut options = Vec::new();
        if let Some(k) =
            (2..=24).find(|k| mine.iter().map(|s| demand(s, f64::from(*k))).sum::<f64>() <= limit)
        {
            // Whole minutes, spelled as the config reads them ("40m", "2h 30m").
            let every = Duration::minutes((self.today_hours * f64::from(k) * 60.0).ceil() as i64);
            options.push(format!(
                "today's data every {} (freshness.today = \"{}\")",
                h(every),
                humantime::format_duration(every.to_std().unwrap_or_default())
            ));
        }
        let mut drops: Vec<(&'static str, f64)> = self
            .demand_by_dataset
            .iter()
            .filter(|(name, d)| *name != super::LEADING && self.demand - d <= limit)
            .copied()
            .collect();
        drops.sort_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((d, _)) = drops.first() {
            options.push(format!("drop {d}"));
        }
        if options.is_empty() {
            "fewer projects or datasets in this organization".to_string()
        } else {
            options.join(", or ")
        }
    }

    /// The paragraph `status` prints and `run` logs at start: the budget, what the config asks
    /// for, what will happen, and (when short) what would fit.
    pub fn paragraph(&self, streams: &[Stream]) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            "organization {}: the config asks for {:.0} requests an hour ({}), the budget gives {}",
            self.org,
            self.demand.ceil(),
            self.demand_by_dataset
                .iter()
                .map(|(d, n)| format!("{d} {n:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            self.limit
        );
        if self.short() {
            let stale = self
                .staleness
                .iter()
                .max_by_key(|s| s.2.max(s.3))
                .map(|(p, d, a, b)| {
                    format!(
                        "{d} of {p}: today up to {} stale, provisional days looked at every {}",
                        h(*a),
                        h(*b)
                    )
                })
                .unwrap_or_default();
            let _ = write!(
                out,
                ". It cannot be met: needs {:.0}/h, has {}/h. What will happen instead: unfinished walks and today's data first, re-checks after, so data goes staler than asked (worst: {stale}). To fit: {}.",
                self.demand.ceil(),
                self.limit,
                self.what_fits(streams)
            );
        } else {
            out.push_str(": it fits.");
        }
        if !self.stuck.is_empty() {
            let _ = write!(
                out,
                " Not counted: {} stuck on the service's paging: {}.",
                crate::text::count(self.stuck.len() as u64, "window"),
                self.stuck.join(", ")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    /// Four projects of 2,000 pages (8 requests a day walk), page views only, 3 days of
    /// lateness, every day written an hour ago.
    fn four(dataset: &'static str, walk: u64) -> Vec<Stream> {
        let now = at("2026-03-15T12:00:00Z");
        let day = |s: &str| s.parse::<NaiveDate>().unwrap();
        (0..4)
            .map(|i| Stream {
                org: "o".into(),
                project: format!("p{i}"),
                dataset,
                policy: Policy::default(),
                walk_cost: walk,
                stuck: Vec::new(),
                windows: Windows::Days {
                    days: ["2026-03-12", "2026-03-13", "2026-03-14", "2026-03-15"]
                        .iter()
                        .map(|d| (day(d), Some(now - Duration::hours(1))))
                        .collect(),
                    lookback_days: 3,
                },
            })
            .collect()
    }

    #[test]
    fn page_views_of_four_big_projects_fit_and_visitors_too_do_not() {
        let now = at("2026-03-15T12:00:00Z");
        let rooms: BTreeMap<String, Room> = [("o".to_string(), Room { limit: 95, used: 0 })].into();
        let views = four("page_views", 8);
        let f = forecast(&views, &rooms, &Freshness::default(), Tz::UTC, now);
        // 4 x (8 + 1/2 + 1/4 + 1/6 + 1/24) = 35.8 an hour.
        assert_eq!(format!("{:.1}", f[0].demand), "35.8");
        assert!(!f[0].short());
        let mut both = views.clone();
        both.extend(four("visitors", 8));
        both.extend(four("searches", 9));
        let f = forecast(&both, &rooms, &Freshness::default(), Tz::UTC, now);
        assert!(f[0].short());
        assert_eq!(
            f[0].what_fits(&both),
            "today's data every 2 h (freshness.today = \"2h\"), or drop visitors"
        );
        let p = f[0].paragraph(&both);
        assert!(p.starts_with("organization o: the config asks for 112 requests an hour (page_views 35.8, searches 39.8, visitors 35.8), the budget gives 95. It cannot be met: needs 112/h, has 95/h."), "{p}");
    }

    #[test]
    fn a_today_interval_under_an_hour_is_suggested_as_the_config_spells_it() {
        let now = at("2026-03-15T12:00:00Z");
        let rooms: BTreeMap<String, Room> = [("o".to_string(), Room { limit: 95, used: 0 })].into();
        let policy = Policy {
            today: Duration::minutes(10),
            ..Policy::default()
        };
        let freshness = Freshness {
            default: policy,
            ..Freshness::default()
        };
        let streams: Vec<Stream> = four("page_views", 2)
            .into_iter()
            .map(|s| Stream { policy, ..s })
            .collect();
        let f = forecast(&streams, &rooms, &freshness, Tz::UTC, now);
        // 4 x (2 x 6 + 1/2 + 1/4 + 1/6 + 1/24) = 51.8 an hour: fits. Three such datasets do not.
        assert_eq!(format!("{:.1}", f[0].demand), "51.8");
        let mut three = streams.clone();
        for d in ["visitors", "searches"] {
            three.extend(streams.iter().map(|s| Stream {
                dataset: d,
                ..s.clone()
            }));
        }
        let f = forecast(&three, &rooms, &freshness, Tz::UTC, now);
        // Every 20 min: 4 x 3 x (2 x 3 + 0.96) = 83.5 an hour.
        assert_eq!(
            f[0].what_fits(&three),
            "today's data every 20 min (freshness.today = \"20m\")"
        );
    }
}
