//! `docpipe status`: what the state database knows, per project; reads only, needs no key.

use super::UserError;
use crate::api::budget::Budget;
use crate::clock;
use crate::config::Settings;
use crate::export::state::{SqliteBudget, State};
use crate::export::state_path;
use crate::rules::engine::firing_line;
use crate::rules::ledger::Ledger;
use chrono::{Duration, NaiveDate};
use std::fmt::Write as _;

/// Print, from the state database, per project: the days exported, the last final day, the
/// provisional days, the days `export` would fetch now; the backfills queued for the daemon; the
/// requests used in the last hour per budget; and the last rule firings. Sends nothing.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many of the last rule firings to show.
    #[arg(long, default_value_t = 5)]
    pub firings: usize,
}

fn days(list: &[NaiveDate]) -> String {
    list.iter()
        .map(NaiveDate::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The status text at `now`.
pub fn describe(
    settings: &Settings,
    now: chrono::DateTime<chrono::Utc>,
    firings: usize,
) -> Result<String, UserError> {
    let state_file = state_path(&settings.output_dir);
    let mut out = String::new();
    if !state_file.exists() {
        return Ok(format!(
            "nothing exported yet: no state database at {}\n",
            state_file.display()
        ));
    }
    let err = |e: crate::export::state::StateError| UserError(e.to_string());
    let state = State::open(&state_file).map_err(err)?;
    let today = settings.today(now);
    let _ = writeln!(out, "state: {}", state_file.display());
    for p in &settings.projects {
        let windows = state.windows(&p.id).map_err(err)?;
        let mut known: Vec<NaiveDate> = windows.keys().copied().collect();
        known.sort();
        let start = p.start_date.unwrap_or(today - Duration::days(29));
        let mut due = 0;
        let mut d = start;
        while d <= today {
            if !windows.get(&d).is_some_and(|w| w.is_final) {
                due += 1;
            }
            d += Duration::days(1);
        }
        let last_final = known.iter().rev().find(|d| windows[*d].is_final);
        let provisional: Vec<NaiveDate> = known
            .iter()
            .filter(|d| !windows[*d].is_final)
            .copied()
            .collect();
        let mismatches = windows.values().filter(|w| w.mismatch.is_some()).count();
        let _ = match (known.first(), known.last()) {
            (Some(first), Some(last)) => writeln!(
                out,
                "project {}: {} days exported ({first}..{last}), last final day {}, {} provisional{}{}; `export` would fetch {due} days from {start}",
                p.id,
                known.len(),
                last_final.map_or("none".to_string(), ToString::to_string),
                provisional.len(),
                if provisional.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", days(&provisional))
                },
                if mismatches > 0 {
                    format!(", {mismatches} with a persistent mismatch")
                } else {
                    String::new()
                },
            ),
            _ => writeln!(
                out,
                "project {}: nothing exported; `export` would fetch {due} days from {start}",
                p.id
            ),
        };
    }
    let queued = state.queued().map_err(err)?;
    if queued.is_empty() {
        let _ = writeln!(out, "backfill queue: empty");
    }
    for q in &queued {
        let mut windows = 0u64;
        let mut requests = 0u64;
        for p in settings
            .projects
            .iter()
            .filter(|p| q.projects.is_empty() || q.projects.contains(&p.id))
        {
            let known = state.windows(&p.id).map_err(err)?;
            let per_window = state
                .recent_rows(&p.id)
                .map_err(err)?
                .map_or(1, |rows| (rows.max(0) as u64).div_ceil(250).max(1));
            let mut d = q.from;
            while d <= q.to {
                if !known.get(&d).is_some_and(|w| w.is_final) {
                    windows += 1;
                    requests += per_window;
                }
                d += Duration::days(1);
            }
        }
        let slowest = settings
            .organizations
            .iter()
            .map(|o| o.limits.effective(o.limits.analytics_per_hour))
            .min()
            .unwrap_or(1);
        let _ = writeln!(
            out,
            "backfill queued ({}): {}..{} of {}: {windows} windows not final yet, about {requests} requests (at least {} h at {slowest} an hour)",
            q.id,
            q.from,
            q.to,
            if q.projects.is_empty() {
                "every project".to_string()
            } else {
                q.projects.join(", ")
            },
            requests.div_ceil(u64::from(slowest.max(1)))
        );
    }
    if settings.budget_db.exists() {
        let budget = SqliteBudget::open(&settings.budget_db).map_err(err)?;
        for o in &settings.organizations {
            let scope = format!("analytics:{}", o.id);
            let _ = writeln!(
                out,
                "budget {scope}: {} of {} requests used in the last hour",
                budget.used(&scope, now),
                o.limits.effective(o.limits.analytics_per_hour)
            );
        }
        let limits = settings.agent_limits();
        for p in &settings.projects {
            let scope = format!("agent:{}", p.id);
            let used = budget.used(&scope, now);
            if used > 0 {
                let _ = writeln!(
                    out,
                    "budget {scope}: {used} of {} follow-ups and job creations used in the last hour",
                    limits.get(&p.id).copied().unwrap_or(0)
                );
            }
        }
    }
    let all = Ledger::open(&state_file).map_err(err)?.all().map_err(err)?;
    if all.is_empty() {
        let _ = writeln!(out, "rules: no firing yet");
    } else {
        let _ = writeln!(out, "rules: {} firings; the last:", all.len());
        for f in all.iter().rev().take(firings).rev() {
            let _ = writeln!(
                out,
                "  {} {}",
                f.fired_at.format("%Y-%m-%d %H:%M:%SZ"),
                firing_line(f)
            );
        }
    }
    Ok(out)
}

/// Runs `status`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    print!(
        "{}",
        describe(settings, clock::system().now(), args.firings)?
    );
    Ok(())
}
