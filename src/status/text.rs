//! `docpipe status` as text: one line per project and dataset, then the plans, the daemons,
//! the budgets and the last firings.

use super::{DatasetStatus, DayRange, ProjectStatus, Status};
use crate::events::RunOutcome;
use chrono::{DateTime, NaiveDate, Utc};
use std::fmt::Write as _;

fn days(list: &[NaiveDate]) -> String {
    list.iter()
        .map(NaiveDate::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A duration in hours and minutes, short.
pub fn short(secs: i64) -> String {
    let m = secs.max(0) / 60;
    match (m / 60, m % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m:02}m"),
    }
}

fn range(r: &DayRange) -> String {
    if r.from == r.to {
        r.from.to_string()
    } else {
        format!("{}..{}", r.from, r.to)
    }
}

fn ranges(list: &[DayRange]) -> String {
    list.iter().map(range).collect::<Vec<_>>().join(", ")
}

/// The status as text.
pub fn render(s: &Status) -> String {
    if !s.exported {
        return format!("nothing exported yet: no state database at {}\n", s.state);
    }
    let mut out = String::new();
    let _ = writeln!(out, "state: {}", s.state);
    for p in &s.projects {
        project_lines(&mut out, p, s.generated_at);
    }
    plan_lines(&mut out, s);
    daemon_lines(&mut out, s);
    for o in &s.organizations {
        let _ = writeln!(
            out,
            "budget analytics:{}: {} of {} requests used in the last hour{}",
            o.id,
            o.used_last_hour,
            o.limit,
            o.next_request_at.map_or(String::new(), |at| {
                let wait = (at - s.generated_at).num_seconds().max(0) as u64;
                format!(
                    "; next request at {} UTC, in {}",
                    at.format("%H:%M:%S"),
                    crate::text::from_now(wait)
                )
            })
        );
        let jobs = o.jobs_last_24h();
        if jobs > 0 {
            let _ = writeln!(
                out,
                "agent jobs {}: {jobs} requests in the last 24 hours (created, read, followed up; not in the analytics budget)",
                o.id
            );
        }
        if let Some(k) = &o.key {
            let _ = match &k.warning {
                Some(w) => writeln!(out, "key {}: {w}", o.id),
                None => writeln!(
                    out,
                    "key {}: the admin key (fingerprint {}) works, first used {} ({} days ago)",
                    o.id,
                    k.fingerprint,
                    k.first_used.format("%Y-%m-%d"),
                    k.age_days
                ),
            };
        }
        if let Some(i) = &o.instants {
            let _ = writeln!(
                out,
                "instants {}: the service {} by the instants asked for ({}; check --deep on {}){}",
                o.id,
                if i.filters_instants {
                    "filters"
                } else {
                    "does not filter"
                },
                i.detail,
                i.checked_at.format("%Y-%m-%d %H:%M UTC"),
                if i.filters_instants {
                    ""
                } else {
                    ": days of a timezone other than UTC are whole UTC days"
                }
            );
        }
    }
    for a in &s.agent_budgets {
        let _ = writeln!(
            out,
            "budget agent:{}: {} of {} follow-ups and job creations used in the last hour",
            a.project, a.used, a.limit
        );
    }
    warehouse_line(&mut out, s);
    stream_lines(&mut out, s);
    rule_lines(&mut out, s);
    out
}

fn project_lines(out: &mut String, p: &ProjectStatus, now: DateTime<Utc>) {
    if let Some(u) = &p.unknown {
        let _ = writeln!(
            out,
            "{}: unknown to the service at {} ({}, {}): not exported until its id is fixed in the config, or `export --retry-unknown`",
            p.id,
            u.base_url,
            u.message,
            u.at.format("%Y-%m-%d %H:%M UTC")
        );
        return;
    }
    let leading = p
        .datasets
        .iter()
        .find(|d| d.name == crate::dataset::LEADING);
    match leading {
        Some(d) => leading_line(out, p, d),
        None => {
            let _ = writeln!(
                out,
                "project {}: nothing exported; `export` would fetch 0 days from {}",
                p.id, p.first_day
            );
        }
    }
    for d in p
        .datasets
        .iter()
        .filter(|d| d.name != crate::dataset::LEADING)
    {
        let _ = writeln!(out, "  {}: {}", d.name, dataset_line(d, now));
    }
    for d in &p.datasets {
        for f in &d.failures {
            let _ = writeln!(out, "  {} {} {}", d.name, f.window, f.describe());
        }
    }
}

/// A project's line, from its leading dataset (page views): the days exported, the last final
/// one, the provisional ones.
fn leading_line(out: &mut String, p: &ProjectStatus, d: &DatasetStatus) {
    let due = d.due_days;
    let start = p.first_day;
    let _ = match (d.first, d.last) {
        (Some(first), Some(last)) => writeln!(
            out,
            "project {}: {} days exported ({first}..{last}), last final day {}, {} provisional{}{}; `export` would fetch {due} days from {start}",
            p.id,
            d.days_exported,
            d.last_final.map_or("none".to_string(), |d| d.to_string()),
            d.provisional.len(),
            if d.provisional.is_empty() {
                String::new()
            } else {
                format!(" ({})", days(&d.provisional))
            },
            if d.mismatches > 0 {
                format!(", {} with a persistent mismatch", d.mismatches)
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

/// A dataset's line beside page views: its days, or its span's reach, or its threads.
fn dataset_line(d: &DatasetStatus, now: DateTime<Utc>) -> String {
    let gaps = if d.missing.is_empty() {
        String::new()
    } else {
        format!(
            "; not covered: {} (filled as the budget allows: see the ETA)",
            ranges(&d.missing)
        )
    };
    match d.windowing {
        "span" => {
            let walks = if d.due_walks.is_empty() {
                match d.walked_at {
                    Some(at) => format!(
                        "nothing (walked {} ago: not due yet)",
                        short((now - at).num_seconds())
                    ),
                    None => "nothing".to_string(),
                }
            } else {
                ranges(&d.due_walks)
            };
            match (d.fetched_through, d.first) {
                (Some(t), Some(a)) => {
                    format!("covered {a}..{t}{gaps}; `export` would walk {walks}")
                }
                (Some(t), None) => format!("fetched through {t}; `export` would walk {walks}"),
                (None, _) => format!("nothing exported; `export` would walk {walks}"),
            }
        }
        "on_demand" => format!("{} threads fetched", d.threads_fetched.unwrap_or(0)),
        _ => match (d.first, d.last) {
            (Some(a), Some(b)) => format!(
                "{} days ({a}..{b}), {} provisional{gaps}; `export` would fetch {} days",
                d.days_exported,
                d.provisional.len(),
                d.due_days
            ),
            _ => format!("nothing exported; `export` would fetch {} days", d.due_days),
        },
    }
}

/// What `export` would do now, the planner's next 24 hours and the backfills queued.
fn plan_lines(out: &mut String, s: &Status) {
    let e = &s.export_now;
    let due: u64 = s.organizations.iter().map(|o| o.eta.parts[0].windows).sum();
    let _ = writeln!(
        out,
        "export now: {} of {due} windows due fit this hour's budget, about {} requests",
        e.windows, e.requests
    );
    if e.waiting_turn > 0 {
        let _ = writeln!(
            out,
            "  {} windows looked at recently enough wait for their turn",
            e.waiting_turn
        );
    }
    for o in &s.organizations {
        let _ = writeln!(out, "{}", super::eta::line(o, s.generated_at));
    }
    let _ = writeln!(out, "planner, the next 24 hours:");
    for f in s.organizations.iter().filter_map(|o| o.forecast.as_ref()) {
        let _ = writeln!(out, "  {}", f.paragraph);
        let spend: Vec<String> = f
            .by_dataset
            .iter()
            .map(|r| format!("{} {:.1}", r.dataset, r.per_hour))
            .collect();
        let _ = writeln!(
            out,
            "    requests an hour by dataset: {}",
            if spend.is_empty() {
                "none".to_string()
            } else {
                spend.join(", ")
            }
        );
        let mut by_project: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for x in &f.staleness {
            by_project.entry(&x.project).or_default().push(format!(
                "{} today <= {}, days every <= {}",
                x.dataset,
                short(x.today_secs),
                short(x.days_every_secs)
            ));
        }
        for (p, parts) in by_project {
            let _ = writeln!(out, "    {p}: {}", parts.join("; "));
        }
    }
    if s.backfills.is_empty() {
        let _ = writeln!(out, "backfill queue: empty");
    }
    for b in &s.backfills {
        let _ = writeln!(
            out,
            "backfill queued ({}{}): {}..{} of {}: {} windows not final yet, about {} requests (in the ETA above)",
            b.id,
            b.holder
                .as_ref()
                .map_or(String::new(), |h| format!(", held by daemon {h}")),
            b.from,
            b.to,
            if b.projects.is_empty() {
                "every project".to_string()
            } else {
                b.projects.join(", ")
            },
            b.windows,
            b.requests
        );
    }
}

/// The daemons: alive or not, what each holds.
fn daemon_lines(out: &mut String, s: &Status) {
    if s.daemons.is_empty() {
        let _ = writeln!(out, "daemons: none running");
    }
    for d in &s.daemons {
        let holds = if d.holds.is_empty() {
            "nothing".to_string()
        } else {
            d.holds.join(", ")
        };
        let seen = short((s.generated_at - d.seen_at).num_seconds());
        let started = d.started_at.format("%Y-%m-%d %H:%M:%SZ");
        let _ = if d.alive {
            writeln!(
                out,
                "daemon {}: alive (heartbeat {seen} ago), started {started}, holds {holds}{}",
                d.name,
                d.windows_done
                    .map_or(String::new(), |n| format!("; {n} windows done"))
            )
        } else {
            writeln!(
                out,
                "daemon {}: no heartbeat for {seen} (stopped without leaving, or cut off), started {started}; what it held is taken over when its lease runs out",
                d.name
            )
        };
    }
}

/// The last rule firings, then the rules that failed.
/// Each event stream and its projects' coverage.
fn stream_lines(out: &mut String, s: &Status) {
    for st in &s.streams {
        let _ = writeln!(out, "{}", stream_summary(st));
        for c in &st.coverage {
            let _ = writeln!(out, "  {}", coverage_summary(c));
        }
    }
}

/// An event stream: what was read of it, one line (the page shows it too).
pub(super) fn stream_summary(st: &super::StreamStatus) -> String {
    let last = st
        .counts
        .last_read_at
        .map_or("nothing read yet".to_string(), |t| {
            format!("last read {}", t.format("%Y-%m-%d %H:%M UTC"))
        });
    let mut line = format!(
        "stream {}: {} objects read, {} events kept, {} read again, {} not read; {last}",
        st.name, st.counts.objects, st.counts.events, st.counts.duplicates, st.counts.unread
    );
    if let Some(u) = &st.counts.last_unread {
        line += &format!(" (last run: {u})");
    }
    line
}

/// A project's stream against the API, one line.
pub(super) fn coverage_summary(c: &super::StreamCoverage) -> String {
    match c.ai_coverage {
        Some(r) => format!(
            "{}: the stream holds {:.1}% of the API's ai views ({} of {}, {} days)",
            c.project,
            100.0 * r,
            c.stream_ai,
            c.api_ai,
            c.days
        ),
        None => format!("{}: no day with the API's ai views yet", c.project),
    }
}

/// The warehouse's last load.
fn warehouse_line(out: &mut String, s: &Status) {
    if let Some(w) = &s.warehouse {
        let _ = writeln!(out, "{}", warehouse_summary(w));
    }
}

/// The warehouse and its last load, one line (the page shows it too).
pub(super) fn warehouse_summary(w: &super::WarehouseStatus) -> String {
    let last = match &w.last_load {
        None => "no load yet (after the next run, or `docpipe warehouse sync`)".to_string(),
        Some(l) => {
            let at = l.at.format("%Y-%m-%d %H:%M UTC");
            let failing = match l.why() {
                Some(why) => format!("; failing {} loads in a row: {why}", l.failing_runs.max(1)),
                None => String::new(),
            };
            match (&l.loaded, &l.error) {
                (Some(d), _) => format!(
                    "last load {at}: {} files ({} rows), {} unchanged{failing}",
                    d.files, d.rows, d.unchanged
                ),
                (None, Some(e)) => format!("last load {at} failed: {e}"),
                (None, None) => format!("last load {at}"),
            }
        }
    };
    format!("warehouse (schema {}, {}): {last}", w.schema, w.url_env)
}

fn rule_lines(out: &mut String, s: &Status) {
    let r = &s.rules;
    if r.firings_total == 0 {
        let _ = writeln!(out, "rules: no firing yet");
    } else {
        let _ = writeln!(out, "rules: {} firings; the last:", r.firings_total);
        for f in &r.firings {
            let _ = writeln!(
                out,
                "  {} {}",
                f.fired_at.format("%Y-%m-%d %H:%M:%SZ"),
                f.line
            );
        }
    }
    for run in r.runs.iter().filter(|r| r.outcome == RunOutcome::Failed) {
        let _ = writeln!(
            out,
            "rule {} failed {}: {}",
            run.rule,
            run.at.format("%Y-%m-%d %H:%M UTC"),
            run.line
        );
    }
    for i in &r.impact {
        let _ = writeln!(out, "impact: {}", i.line());
    }
    for p in &r.pending {
        let _ = writeln!(
            out,
            "waiting for review: firing {} of rule {} ({}), held {}, {} rows, {} flagged; expires {}: docpipe rules pending shows it, approve {} sends it",
            p.id,
            p.rule,
            p.project,
            p.held_at.format("%Y-%m-%d %H:%M UTC"),
            p.rows,
            p.flags.len(),
            p.expires_at.format("%Y-%m-%d %H:%M UTC"),
            p.id
        );
    }
    for p in &r.previews {
        let _ = writeln!(
            out,
            "preview: rule {} ({}) would send {} rows ({} flagged) as of {}: {}",
            p.rule,
            p.project,
            p.rows,
            p.flags.len(),
            p.at.format("%Y-%m-%d %H:%M UTC"),
            p.reason
        );
    }
    for p in &r.problems {
        let _ = writeln!(out, "rule file problem: {p}");
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
}
