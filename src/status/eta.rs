//! One ETA per organization, from one model: the windows due now, then each queued backfill's,
//! in the order the runs serve them, at the organization's budget (what is left this hour,
//! then its limit an hour: [`crate::planner::Room::hours_for`]). `status`, `status --json` and
//! the page read it; the plan of `export --dry-run` reckons its windows the same way. It counts
//! the budget alone: the hourly exports' requests for today's data and re-checks (the
//! planner's "requests an hour by dataset") come first, so it is the earliest the windows can
//! be in.

use crate::app::plan_view::PlanView;
use crate::planner::Room;
use chrono::{DateTime, Duration, DurationRound, Utc};
use serde::Serialize;
use std::collections::HashMap;

/// An organization's ETA.
#[derive(Debug, Clone, Serialize)]
pub struct Eta {
    /// Windows to fetch, all parts.
    pub windows: u64,
    /// Requests they are expected to take.
    pub requests: u64,
    /// Hours beyond this one until they are all in (0: within this hour's budget).
    pub hours: u64,
    /// When they are all in: the start of the hour whose budget takes the last of them (now
    /// when it is this one).
    pub done_at: DateTime<Utc>,
    /// What waits for which hour, in serving order.
    pub parts: Vec<EtaPart>,
    /// The datasets of its projects never walked (`dataset project`): their windows are a
    /// guess until a first walk measures them (a daily dataset's 1 request a window, a span's
    /// one page a day), so the ETA is too.
    pub guessed: Vec<String>,
}

/// A part of an organization's ETA: the windows due now, or a queued backfill's.
#[derive(Debug, Clone, Serialize)]
pub struct EtaPart {
    /// `export now`, or `backfill <id>`.
    pub what: String,
    /// Its windows of this organization.
    pub windows: u64,
    /// Their requests.
    pub requests: u64,
    /// Hours beyond this one until its last window is in.
    pub hours: u64,
}

/// What waits, in serving order: the windows due now, then each queued backfill's, each by
/// organization. Counted once for every organization's [`of`].
pub struct Waiting(Vec<(String, ByOrg)>, HashMap<String, Vec<String>>);

/// Windows and requests by organization ([`crate::export::Plan::waiting_by_org`]).
type ByOrg = HashMap<String, (u64, u64)>;

impl Waiting {
    /// The parts of `view`.
    pub fn of(view: &PlanView) -> Self {
        let mut parts = vec![("export now".to_string(), view.due.waiting_by_org())];
        for (q, plan) in &view.queued {
            parts.push((format!("backfill {}", q.id), plan.waiting_by_org()));
        }
        let mut guessed: HashMap<String, Vec<String>> = HashMap::new();
        for (dataset, project) in &view.due.unmeasured {
            if let Some(org) = view.due.org_of.get(project) {
                guessed
                    .entry(org.clone())
                    .or_default()
                    .push(format!("{dataset} {project}"));
            }
        }
        Self(parts, guessed)
    }
}

/// The ETA of `org`, whose budget is `room` now.
pub fn of(waiting: &Waiting, org: &str, room: Room, now: DateTime<Utc>) -> Eta {
    let mut parts = Vec::new();
    let mut need = 0;
    for (i, (what, counts)) in waiting.0.iter().enumerate() {
        let (windows, requests) = counts.get(org).copied().unwrap_or_default();
        // The windows due now are always a part (none is a fact too); a backfill only when
        // it has windows of the organization.
        if i > 0 && windows == 0 {
            continue;
        }
        need += requests;
        parts.push(EtaPart {
            what: what.clone(),
            windows,
            requests,
            hours: room.hours_for(need),
        });
    }
    let hours = parts.iter().map(|p| p.hours).max().unwrap_or(0);
    let hour = now.duration_trunc(Duration::hours(1)).unwrap_or(now);
    Eta {
        windows: parts.iter().map(|p| p.windows).sum(),
        requests: need,
        hours,
        done_at: if hours == 0 {
            now
        } else {
            hour + Duration::hours(hours as i64)
        },
        parts,
        guessed: waiting.1.get(org).cloned().unwrap_or_default(),
    }
}

/// When a part is in, as a person reads it.
pub fn when(hours: u64, now: DateTime<Utc>) -> String {
    if hours == 0 {
        return "within this hour's budget".into();
    }
    let hour = now.duration_trunc(Duration::hours(1)).unwrap_or(now);
    let at = hour + Duration::hours(hours as i64);
    let format = if hours >= 24 {
        "%Y-%m-%d %H:00"
    } else {
        "%H:00"
    };
    format!("in the hour from {} UTC", at.format(format))
}

/// The organization's ETA in one line: how much, at what budget, which part waits for which
/// hour.
pub fn line(o: &super::OrgStatus, now: DateTime<Utc>) -> String {
    let (org, e) = (&o.id, &o.eta);
    let parts: Vec<String> = e
        .parts
        .iter()
        .filter(|p| p.windows > 0)
        .map(|p| format!("{} ({} windows) {}", p.what, p.windows, when(p.hours, now)))
        .collect();
    if parts.is_empty() {
        return format!("ETA {org}: nothing to fetch");
    }
    let guessed = if e.guessed.is_empty() {
        String::new()
    } else {
        format!(
            "; guessed, never walked (the first walk measures them): {}",
            e.guessed.join(", ")
        )
    };
    format!(
        "ETA {org}: {} windows, about {} requests at {} an hour ({} left this hour): {}{guessed}",
        e.windows,
        e.requests,
        o.limit,
        o.room_now,
        parts.join("; ")
    )
}
