//! The plan and the summary of a run, as text for people.

use super::{Due, OtherWindow, Plan, Summary};
use crate::dataset::{LEADING, LEADING_NOUN};
use std::collections::BTreeMap;

/// Prints a plan for people.
pub fn describe_plan(plan: &Plan) -> String {
    let mut out = String::new();
    // The plan's first line counts page views apart: the word the user knows them by.
    let (views, others): (Vec<&Due>, Vec<&Due>) =
        plan.due.iter().partition(|d| d.dataset() == LEADING);
    let provisional = views.iter().filter(|d| !d.becomes_final).count();
    let resumed = |due: &[&Due]| due.iter().filter(|d| d.stored_pages > 0).count();
    let probes = plan.due.iter().filter(|d| d.probe).count();
    out += &format!(
        "plan: {} {LEADING_NOUN} windows due ({} provisional, {} resumed), {} windows of other datasets ({} resumed), {probes} of them probed first, {} skipped as final, {} as looked at recently, about {} analytics requests\n",
        views.len(),
        provisional,
        resumed(&views),
        others.len(),
        resumed(&others),
        plan.skipped_final,
        plan.fresh,
        plan.expected_requests
    );
    for (u, origin) in &plan.unknown {
        out += &format!(
            "  {}: not planned: the service said it does not know this project ({}, {}); fix its id in {}, or pass --retry-unknown\n",
            u.project,
            crate::text::one_line(&u.message),
            u.at.format("%Y-%m-%d %H:%M UTC"),
            origin
        );
    }
    if plan.deferred > 0 {
        out += &format!(
            "  {} windows due do not fit this hour's budget: left for the next run (oldest missing days last)\n",
            plan.deferred
        );
    }
    let mut by_project: BTreeMap<&str, Vec<&Due>> = BTreeMap::new();
    for d in &views {
        by_project.entry(&d.project).or_default().push(d);
    }
    for (p, due) in by_project {
        let first = due.iter().map(|d| d.day).min().unwrap_or_default();
        let last = due.iter().map(|d| d.day).max().unwrap_or_default();
        let req: u64 = due.iter().map(|d| d.expected_requests).sum();
        out += &format!(
            "  {p}: {} windows {first}..{last}, about {req} requests\n",
            due.len()
        );
    }
    out += &other_datasets_lines(&others);
    out += &stuck_line(plan);
    out += &guessed_lines(plan);
    for (org, room) in &plan.budgets {
        out += &format!(
            "  budget of {org}: {} requests/hour, {} used in the last hour\n",
            room.limit, room.used
        );
    }
    out += &format!(
        "  ETA: {}\n",
        crate::text::eta(plan.eta().as_secs(), plan.made_at)
    );
    out
}

/// Windows another process had, consecutive days of a dataset, project and process as one
/// range: `feedback alpha 2026-03-08..2026-03-10 (held by host:12)`.
fn others(windows: &[OtherWindow], verb: &str) -> String {
    let mut sorted: Vec<&OtherWindow> = windows.iter().collect();
    sorted.sort_by(|a, b| {
        (a.dataset, &a.project, &a.by, a.from).cmp(&(b.dataset, &b.project, &b.by, b.from))
    });
    let mut runs: Vec<OtherWindow> = Vec::new();
    for w in sorted {
        match runs.last_mut() {
            Some(r)
                if (r.dataset, &r.project, &r.by, r.to)
                    == (w.dataset, &w.project, &w.by, w.from) =>
            {
                r.to = w.to;
            }
            _ => runs.push(w.clone()),
        }
    }
    let parts: Vec<String> = runs
        .iter()
        .map(|r| {
            let last = r.to.pred_opt().unwrap_or(r.to);
            let days = if last > r.from {
                format!("{}..{last}", r.from)
            } else {
                r.from.to_string()
            };
            let by = if r.by.is_empty() {
                "another process"
            } else {
                &r.by
            };
            format!("{} {} {days} ({verb} {by})", r.dataset, r.project)
        })
        .collect();
    parts.join(", ")
}

/// Prints a summary for people.
pub fn describe_summary(s: &Summary) -> String {
    let finals = s.windows.iter().filter(|w| w.is_final).count();
    let mut out = format!(
        "exported {} ({} final, {} provisional), {} rows, {} in all (the plan expected about {}); {} already final {} skipped\n",
        crate::text::count(s.windows.len() as u64, &format!("{LEADING_NOUN} window")),
        finals,
        s.windows.len() - finals,
        s.rows(),
        crate::text::count(s.requests, "analytics request"),
        s.expected,
        crate::text::count(s.skipped_final, "window"),
        if s.skipped_final == 1 { "was" } else { "were" }
    );
    // Why windows wait: in the run's one line when it sent nothing, else a line of its own.
    let waits: Vec<String> = s
        .budget_used
        .iter()
        .map(|b| {
            format!(
                "{} for the budget of {} (its {} requests of the hour are used); next request at {}",
                match b.windows {
                    1 => "1 window waits".to_string(),
                    n => format!("{n} windows wait"),
                },
                b.org,
                b.room.limit,
                b.next.format("%H:%M UTC")
            )
        })
        .collect();
    if s.requests == 0 && !waits.is_empty() {
        out.pop();
        out += &format!("; nothing sent: {}\n", waits.join("; "));
    } else {
        for w in &waits {
            out += &format!("  {w}\n");
        }
    }
    out += &other_lines(&s.others);
    if !s.checked.is_empty() || s.deferred > 0 {
        let finals = s.checked.iter().filter(|c| c.is_final).count();
        out += &format!(
            "  {} days probed and found unchanged ({finals} of them now final); {} windows deferred to the next run\n",
            s.checked.len(),
            s.deferred
        );
    }
    out += &other_process_lines(s);
    if !s.spent.is_empty() {
        let parts: Vec<String> = s
            .spent
            .iter()
            .map(|((d, p), n)| format!("{d} {p} {n}"))
            .collect();
        out += &format!("  requests by dataset and purpose: {}\n", parts.join(", "));
    }
    for w in s.windows.iter().filter(|w| w.rejected > 0) {
        out += &format!(
            "  rejected in {} {}: {} rows set aside in rejects/ (counts docpipe cannot store faithfully); the day stays provisional\n",
            w.project, w.day, w.rejected
        );
    }
    for w in s
        .windows
        .iter()
        .filter(|w| w.unlisted != 0 && w.mismatch.is_none())
    {
        out += &format!(
            "  unlisted in {} {}: the service's totals count {} views without a listed path (kept in site_totals.unlisted)\n",
            w.project, w.day, w.unlisted
        );
    }
    for w in s.windows.iter().filter(|w| w.mismatch.is_some()) {
        out += &format!(
            "  mismatch in {} {}: {}\n",
            w.project,
            w.day,
            w.mismatch.as_deref().unwrap_or_default()
        );
    }
    out += &failure_lines(&s.failed);
    out
}

/// The failures of a run, one line per cause: the windows a rejected key or an unreachable
/// service stopped are counted with the failure that stopped them (the same cause, shared).
fn failure_lines(failed: &[crate::Failure]) -> String {
    let mut out = String::new();
    let mut causes: Vec<(String, Vec<&crate::Failure>)> = Vec::new();
    for f in failed {
        let cause = f.cause.to_string();
        match causes.iter_mut().find(|(c, _)| *c == cause) {
            Some((_, windows)) => windows.push(f),
            None => causes.push((cause, vec![f])),
        }
    }
    for (cause, windows) in causes {
        match windows.as_slice() {
            [f] => out += &format!("  failed {} {}: {f}\n", f.project, f.day),
            _ => {
                // Each project's own count: the cause names the first project it stopped.
                let mut by_project: Vec<(&str, usize)> = Vec::new();
                for f in &windows {
                    match by_project.iter_mut().find(|(p, _)| *p == f.project) {
                        Some((_, n)) => *n += 1,
                        None => by_project.push((&f.project, 1)),
                    }
                }
                let projects: Vec<String> =
                    by_project.iter().map(|(p, n)| format!("{p} {n}")).collect();
                out += &format!(
                    "  {} windows failed ({}): {cause}\n",
                    windows.len(),
                    projects.join(", ")
                );
            }
        }
    }
    out
}

/// A line per dataset beside page views: its windows and their requests.
fn other_datasets_lines(others: &[&Due]) -> String {
    let mut by_dataset: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for d in others {
        let e = by_dataset.entry(d.dataset()).or_default();
        e.0 += 1;
        e.1 += d.expected_requests;
    }
    by_dataset
        .into_iter()
        .map(|(name, (windows, req))| {
            format!(
                "  {name}: {}, about {}\n",
                crate::text::count(windows, "window"),
                crate::text::count(req, "request")
            )
        })
        .collect()
}

/// The plan's windows stuck on the service's paging, with the time of their next try.
fn stuck_line(plan: &Plan) -> String {
    if plan.stuck.is_empty() {
        return String::new();
    }
    let stuck: Vec<String> = plan
        .stuck
        .iter()
        .map(|f| {
            format!(
                "{} {} {} (tried again after {})",
                f.dataset,
                f.project,
                f.window,
                f.retry_at.map_or(String::new(), |r| r
                    .format("%Y-%m-%d %H:%M UTC")
                    .to_string())
            )
        })
        .collect();
    format!(
        "  {} stuck on the service's paging, not tried before their time: {}\n",
        crate::text::count(stuck.len() as u64, "window"),
        stuck.join(", ")
    )
}

/// One line per dataset of the windows of the other datasets written.
fn other_lines(windows: &[crate::WindowOutcome]) -> String {
    let mut out = String::new();
    let mut by_dataset: BTreeMap<&str, (usize, i64, u64, usize, u64)> = BTreeMap::new();
    for r in windows {
        let e = by_dataset.entry(r.dataset).or_default();
        e.0 += 1;
        e.1 += r.rows;
        e.2 += r.requests;
        e.3 += usize::from(r.cut_off);
        e.4 += r.outside;
    }
    for (name, (windows, rows, requests, cut, outside)) in by_dataset {
        let cut = if cut > 0 {
            format!(", {cut} days cut off at the 100 rows the service serves")
        } else {
            String::new()
        };
        let outside = match crate::dataset::shape_by_name(name).and_then(|s| s.outside_table) {
            Some(table) if outside > 0 => {
                format!(", {outside} rows dated outside the days asked for set aside in {table}")
            }
            _ => String::new(),
        };
        out += &format!(
            "  {name}: {}, {}, {}{cut}{outside}\n",
            crate::text::count(windows as u64, "window"),
            crate::text::count(rows.max(0) as u64, "row"),
            crate::text::count(requests, "request")
        );
    }
    out + &unknown_lines(windows) + &fraction_lines(windows)
}

/// One line per dataset with counts the service sent with a fraction.
fn fraction_lines(windows: &[crate::WindowOutcome]) -> String {
    let mut by: BTreeMap<&str, Vec<&crate::dataset::shape::Fraction>> = BTreeMap::new();
    for r in windows {
        by.entry(r.dataset).or_default().extend(&r.fractions);
    }
    let mut out = String::new();
    for (dataset, fractions) in by {
        let Some(first) = fractions.first() else {
            continue;
        };
        // A fraction comes from a shaped dataset only (page views set such rows aside).
        let Some(table) = crate::dataset::shape_by_name(dataset).map(|s| s.table) else {
            continue;
        };
        let n = fractions.len();
        let s = if n == 1 { "" } else { "s" };
        out += &format!(
            "  {dataset}: {n} count{s} sent with a fraction, rounded in {table} and kept as sent in {}: {} {} of {} (written {})\n",
            crate::dataset::shape_walk::fractions_table(table),
            first.column,
            first.sent,
            crate::text::one_line(&first.key.chars().take(80).collect::<String>()),
            first.written
        );
    }
    out
}

/// One line per dataset and column with values docpipe does not know, kept as they are:
/// "feedback: 1 row with a status docpipe does not know: archived (kept as it is)".
fn unknown_lines(windows: &[crate::WindowOutcome]) -> String {
    let mut by: BTreeMap<(&str, &str), Vec<(String, u64)>> = BTreeMap::new();
    for r in windows {
        for (column, values) in &r.unknown {
            let all = by.entry((r.dataset, column)).or_default();
            for (v, n) in values {
                match all.iter_mut().find(|(x, _)| x == v) {
                    Some((_, m)) => *m += n,
                    None => all.push((v.clone(), *n)),
                }
            }
        }
    }
    let mut out = String::new();
    for ((dataset, column), values) in by {
        let rows: u64 = values.iter().map(|(_, n)| n).sum();
        // Readers' words at worst, and up to 256 KiB each: a few, each cut to 60 characters.
        let mut shown: Vec<String> = values
            .iter()
            .take(5)
            .map(|(v, n)| {
                let cut: String = v.chars().take(60).collect();
                let more = if cut.len() < v.len() { "..." } else { "" };
                format!("{:?}{more} ({n})", crate::text::one_line(&cut))
            })
            .collect();
        if values.len() > 5 {
            shown.push(format!("{} more", values.len() - 5));
        }
        let s = if rows == 1 { "" } else { "s" };
        out += &format!(
            "  {dataset}: {rows} row{s} with a {column} docpipe does not know, kept as sent: {}\n",
            shown.join(", ")
        );
    }
    out
}

/// What other processes sharing the state had of this run's windows: done, let go, still held.
fn other_process_lines(s: &Summary) -> String {
    let mut out = String::new();
    if !s.done_by_others.is_empty() {
        out += &format!(
            "  {} done by another process since this run's plan, not walked again: {}\n",
            crate::text::count(s.done_by_others.len() as u64, "window"),
            others(&s.done_by_others, "by")
        );
    }
    if !s.walked_after_others.is_empty() {
        out += &format!(
            "  {} another process held at first, walked by this run after it let go: {}\n",
            crate::text::count(s.walked_after_others.len() as u64, "window"),
            others(&s.walked_after_others, "held by")
        );
    }
    if !s.left_to_others.is_empty() {
        out += &format!(
            "  {} not walked by this run, another process still held them after {} s: {}; they are not done by this run: run it again once that process is done (docpipe status shows what is covered)\n",
            crate::text::count(s.left_to_others.len() as u64, "window"),
            s.waited.as_secs(),
            others(&s.left_to_others, "held by")
        );
    }
    out
}

/// Which estimates of the plan were measured first, and which are guesses, by dataset and
/// project: the ETA is no better than them.
fn guessed_lines(plan: &Plan) -> String {
    let names = |pairs: &mut dyn Iterator<Item = &(&'static str, String)>| {
        pairs
            .map(|(d, p)| format!("{d} {p}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    let (measured, requests) = &plan.measured;
    if !measured.is_empty() {
        out += &format!(
            "  measured first, walked before this plan: the newest day of each never walked ({requests} requests, counted in it): {}\n",
            names(&mut measured.iter())
        );
    }
    let (daily, spans): (Vec<_>, Vec<_>) = plan
        .unmeasured
        .iter()
        .partition(|(d, _)| crate::dataset::windowing_of(d) == crate::dataset::Windowing::Daily);
    if !daily.is_empty() {
        out += &format!(
            "  guessed, never walked: 1 request a window (the first walk measures them; the run may take more): {}\n",
            names(&mut daily.into_iter())
        );
    }
    if !spans.is_empty() {
        out += &format!(
            "  guessed, never walked: one page a day of their span (the service tells no count of rows before a walk): {}\n",
            names(&mut spans.into_iter())
        );
    }
    out
}
