//! The status page the daemon serves on `/`: one HTML document rendered here, with its style
//! inline and no script (it refreshes itself every minute with a `<meta>`), readable on a
//! laptop and a phone. Every text from the state, the config or the service is escaped.

use super::text::short;
use super::{DatasetStatus, Freshness, Hour, OrgStatus, Status};
use crate::events::RunOutcome;
use std::fmt::Write as _;

/// Escapes text for HTML (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A link only to `http(s)` addresses (a job's pull request comes from the service).
fn link(href: &str) -> String {
    if href.starts_with("https://") || href.starts_with("http://") {
        format!(
            "<a href=\"{}\" rel=\"noreferrer noopener\">{}</a>",
            esc(href),
            esc(href)
        )
    } else {
        esc(href)
    }
}

const STYLE: &str = "
:root{color-scheme:light dark;--fg:#1b1f24;--mute:#5b6570;--bg:#fff;--line:#d8dde3;--fresh:#1a7f37;--late:#9a6700;--stale:#cf222e}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--mute:#9aa5b1;--bg:#0d1117;--line:#30363d;--fresh:#3fb950;--late:#d29922;--stale:#f85149}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1200px;padding:12px 16px 40px;font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .4em;border-bottom:1px solid var(--line);padding-bottom:.2em}h3{font-size:1em;margin:1em 0 .3em}
.mute{color:var(--mute)}
.wrap{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;width:100%;font-size:.92em}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;padding:0 .45em;border-radius:.6em;font-size:.85em;font-weight:600;color:#fff;white-space:nowrap}
.fresh{background:var(--fresh)}.late{background:var(--late)}.stale{background:var(--stale)}.unknown{background:var(--mute)}
.problem{color:var(--stale)}
.short{border-left:4px solid var(--stale);padding:.3em .8em}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:12px}
.card{border:1px solid var(--line);border-radius:8px;padding:8px 12px}
svg.bars{width:100%;height:auto;max-height:180px}
img.chart{width:100%;height:auto;border:1px solid var(--line);border-radius:6px;background:#fff}
.legend span{display:inline-block;margin-right:.8em;font-size:.85em}
.legend i{display:inline-block;width:.8em;height:.8em;margin-right:.25em;vertical-align:-.05em}
.health p{font-size:1.15em;margin:.4em 0;padding:.5em .8em;border-radius:8px;border-left:6px solid var(--fresh)}
.health.warn p{border-left-color:var(--late)}.health.bad p{border-left-color:var(--stale)}
a.ok{color:var(--fresh)}a.warn{color:var(--late);font-weight:600}a.bad{color:var(--stale);font-weight:600}
ul.needs{margin:.2em 0;padding-left:1.2em}li.bad{color:var(--stale)}li.warn{color:var(--late)}
pre{white-space:pre-wrap;overflow-wrap:anywhere}
.charts{display:grid;grid-template-columns:1fr;gap:12px}
";

const COLOURS: [&str; 8] = [
    "#0969da", "#8250df", "#bf3989", "#1a7f37", "#9a6700", "#cf222e", "#57606a", "#0a8a8a",
];

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// The status page.
pub fn render(s: &Status) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"60\">\
         <title>docpipe status</title><style>{STYLE}</style></head><body>\
         <header><h1>docpipe status</h1><p class=\"mute\">docpipe {} &middot; {} &middot; state {}</p></header>",
        esc(s.version),
        s.generated_at.format("%Y-%m-%d %H:%M:%S UTC"),
        esc(&s.state)
    );
    if !s.exported {
        let _ = write!(
            out,
            "<p id=\"nothing\">Nothing exported yet: no state database at {}.</p></body></html>",
            esc(&s.state)
        );
        return out;
    }
    health_section(&mut out, s);
    budget_section(&mut out, s);
    projects_section(&mut out, s);
    backfill_section(&mut out, s);
    if let Some(w) = &s.warehouse {
        let _ = write!(
            out,
            "<section id=\"warehouse\"><h2>Warehouse</h2><p>{}</p></section>",
            esc(&super::text::warehouse_summary(w))
        );
    }
    if !s.streams.is_empty() {
        out.push_str("<section id=\"streams\"><h2>Event streams</h2><ul>");
        for st in &s.streams {
            let _ = write!(out, "<li>{}", esc(&super::text::stream_summary(st)));
            for c in &st.coverage {
                let _ = write!(out, "<br>{}", esc(&super::text::coverage_summary(c)));
            }
            out.push_str("</li>");
        }
        out.push_str("</ul></section>");
    }
    rules_section(&mut out, s);
    trends_section(&mut out, s);
    out.push_str("</body></html>\n");
    out
}

/// The health line and what needs a person, first on the page.
fn health_section(out: &mut String, s: &Status) {
    use super::health::{Tone, needs, parts};
    let parts = parts(s);
    let worst = parts.iter().map(|p| p.tone).max().unwrap_or(Tone::Ok);
    let _ = write!(
        out,
        "<section id=\"health\" class=\"health {}\"><p>",
        worst.class()
    );
    for (i, p) in parts.iter().enumerate() {
        let _ = write!(
            out,
            "{}<a class=\"{}\" href=\"{}\">{}</a>",
            if i == 0 { "" } else { ", " },
            p.tone.class(),
            p.href,
            esc(&p.text)
        );
    }
    out.push_str("</p></section><section id=\"needs\"><h2>Needs a person</h2>");
    let needs = needs(s);
    if needs.is_empty() {
        out.push_str("<p class=\"mute\">Nothing: every dataset exports and nothing waits.</p>");
    } else {
        out.push_str("<ul class=\"needs\">");
        // A few lines, so that the first screen holds them: the rest are in the sections below.
        for (tone, line) in needs.iter().take(super::health::SHOWN) {
            let _ = write!(out, "<li class=\"{}\">{}</li>", tone.class(), esc(line));
        }
        if let Some(more) = needs
            .len()
            .checked_sub(super::health::SHOWN)
            .filter(|n| *n > 0)
        {
            let _ = write!(
                out,
                "<li class=\"more\">and {more} more: the projects, backfills and rules below list each</li>"
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
}

fn budget_section(out: &mut String, s: &Status) {
    out.push_str("<section id=\"budget\"><h2>Budget</h2><div class=\"cards\">");
    for o in &s.organizations {
        let _ = write!(
            out,
            "<div class=\"card org\" data-org=\"{id}\"><h3>{id}</h3>\
             <p><b class=\"room\">{room}</b> of {limit} requests left now \
             ({used} used in the last hour).</p>",
            id = esc(&o.id),
            room = o.room_now,
            limit = o.limit,
            used = o.used_last_hour
        );
        let _ = write!(
            out,
            "<p class=\"eta\">{}</p>",
            esc(&super::eta::line(o, s.generated_at))
        );
        if let Some(at) = o.next_request_at {
            let _ = write!(
                out,
                "<p class=\"next short\">The hour's budget is used: next request at {} UTC.</p>",
                at.format("%H:%M:%S")
            );
        }
        let sent: u64 = o.hours.iter().map(|h| h.total).sum();
        let _ = write!(
            out,
            "<p class=\"mute\">{sent} requests in the last 24 hours{}, by hour:</p>",
            jobs_note(o)
        );
        bars(out, o, "dataset", |h| &h.by_dataset);
        bars(out, o, "purpose", |h| &h.by_purpose);
        if let Some(k) = &o.key {
            let _ = match &k.warning {
                Some(w) => write!(out, "<p class=\"key short\">{}</p>", esc(w)),
                None => write!(
                    out,
                    "<p class=\"key\">The admin key (fingerprint {}) works, first used {} ({} days ago).</p>",
                    esc(&k.fingerprint),
                    k.first_used.format("%Y-%m-%d"),
                    k.age_days
                ),
            };
        }
        if let Some(i) = &o.instants {
            let _ = write!(
                out,
                "<p class=\"instants{}\">The service {} by the instants asked for ({}; check --deep on {}).</p>",
                if i.filters_instants { "" } else { " short" },
                if i.filters_instants {
                    "filters"
                } else {
                    "does not filter"
                },
                esc(&i.detail),
                i.checked_at.format("%Y-%m-%d %H:%M UTC")
            );
        }
        if let Some(f) = &o.forecast {
            let _ = write!(
                out,
                "<p class=\"forecast{}\">{}</p>",
                if f.short { " short" } else { "" },
                esc(&f.paragraph)
            );
        }
        out.push_str("</div>");
    }
    out.push_str("</div></section>");
}

/// A stacked bar chart of the 24 hours, one colour per key (dataset or purpose).
/// `; and 3 agent job requests (not in this budget)` when the organization's jobs sent any.
fn jobs_note(o: &OrgStatus) -> String {
    let jobs = o.jobs_last_24h();
    if jobs == 0 {
        return String::new();
    }
    format!(" (and {jobs} agent job requests, not in this budget)")
}

fn bars(
    out: &mut String,
    o: &OrgStatus,
    by: &str,
    parts: impl Fn(&Hour) -> &std::collections::BTreeMap<String, u64>,
) {
    let mut keys: Vec<&String> = o.hours.iter().flat_map(|h| parts(h).keys()).collect();
    keys.sort();
    keys.dedup();
    let top = o.hours.iter().map(|h| h.total).max().unwrap_or(0).max(1) as f64;
    let (w, h, bar) = (480.0, 120.0, 18.0);
    let _ = write!(
        out,
        "<figure><svg class=\"bars\" data-by=\"{by}\" viewBox=\"0 0 {w} {}\" role=\"img\" aria-label=\"requests per hour by {by}\">",
        h + 16.0
    );
    for (i, hour) in o.hours.iter().enumerate() {
        let x = i as f64 * 20.0 + 1.0;
        let mut y = h;
        for (k, key) in keys.iter().enumerate() {
            let n = parts(hour).get(*key).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let height = n as f64 / top * (h - 4.0);
            y -= height;
            let _ = write!(
                out,
                "<rect x=\"{x}\" y=\"{y:.1}\" width=\"{bar}\" height=\"{height:.1}\" fill=\"{}\"><title>{} {}: {n}</title></rect>",
                colour(k),
                hour.start.format("%H:00"),
                esc(key)
            );
        }
        // Every sixth hour, and the current one (the last bar), labelled under its bar.
        let last = i + 1 == o.hours.len();
        if (i % 6 == 0 && i + 3 < o.hours.len()) || last {
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"currentColor\"{}>{}{}</text>",
                if last { x + bar } else { x },
                h + 13.0,
                if last { " text-anchor=\"end\"" } else { "" },
                hour.start.format("%H:00"),
                if last { " now" } else { "" }
            );
        }
    }
    let _ = write!(
        out,
        "<text x=\"2\" y=\"10\" font-size=\"10\" fill=\"currentColor\">max {top} an hour</text></svg>"
    );
    let _ = write!(
        out,
        "<figcaption class=\"legend\">hours in UTC, the last 24 to now; by {by}: "
    );
    if keys.is_empty() {
        let _ = write!(out, "<span class=\"mute\">no requests by {by}</span>");
    }
    for (k, key) in keys.iter().enumerate() {
        let _ = write!(
            out,
            "<span><i style=\"background:{}\"></i>{}</span>",
            colour(k),
            esc(key)
        );
    }
    out.push_str("</figcaption></figure>");
}

fn freshness_badge(d: &DatasetStatus) -> String {
    let (class, word) = match d.freshness {
        Freshness::Fresh => ("fresh", "fresh"),
        Freshness::Late => ("late", "late"),
        Freshness::Stale => ("stale", "stale"),
        Freshness::Unknown => ("unknown", "never"),
    };
    let age = d
        .staleness_secs
        .map_or("no data yet".to_string(), |s| format!("{} old", short(s)));
    format!(
        "<span class=\"badge {class}\" title=\"target {}\">{word}</span> {age}",
        short(d.target_secs)
    )
}

fn projects_section(out: &mut String, s: &Status) {
    out.push_str(
        "<section id=\"projects\"><h2>Projects</h2><div class=\"wrap\"><table>\
         <thead><tr><th>project</th><th>dataset</th><th>staleness</th><th>final</th>\
         <th>provisional</th><th>missing</th><th>last success</th><th>failed windows</th></tr></thead><tbody>",
    );
    for p in &s.projects {
        if let Some(u) = &p.unknown {
            let _ = write!(
                out,
                "<tr data-project=\"{id}\"><td>{id}</td><td colspan=\"7\" class=\"problem\">unknown to the service at {} ({}, {}): not exported until its id is fixed in the config</td></tr>",
                esc(&u.base_url),
                esc(&u.message),
                u.at.format("%Y-%m-%d %H:%M UTC"),
                id = esc(&p.id)
            );
            continue;
        }
        for d in &p.datasets {
            let missing: i64 = d.missing.iter().map(|r| r.days()).sum();
            let failures = d
                .failures
                .iter()
                .map(|f| {
                    format!(
                        "<div class=\"problem\">{} {}</div>",
                        esc(&f.window),
                        esc(&f.describe())
                    )
                })
                .collect::<String>();
            let _ = write!(
                out,
                "<tr data-project=\"{p}\" data-dataset=\"{d}\"><td>{p}</td><td>{d}</td>\
                 <td class=\"staleness\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
                freshness_badge(d),
                d.days_final,
                d.provisional.len(),
                missing,
                d.last_success.map_or("never".to_string(), |t| t
                    .format("%Y-%m-%d %H:%M")
                    .to_string()),
                if failures.is_empty() {
                    "<span class=\"mute\">none</span>".to_string()
                } else {
                    failures
                },
                p = esc(&p.id),
                d = esc(d.name),
            );
        }
    }
    out.push_str("</tbody></table></div>");
    let e = &s.export_now;
    let _ = write!(
        out,
        "<p id=\"export-now\">Export now: {} windows, about {} requests (the ETA of each organization is in the budget's cards).</p></section>",
        e.windows, e.requests
    );
}

fn backfill_section(out: &mut String, s: &Status) {
    out.push_str("<section id=\"daemons\"><h2>Backfills and daemons</h2>");
    if s.backfills.is_empty() {
        out.push_str("<p>Backfill queue: empty.</p>");
    } else {
        out.push_str("<div class=\"wrap\"><table><thead><tr><th>backfill</th><th>days</th><th>projects</th><th>windows left</th><th>requests</th><th>ETA</th><th>held by</th></tr></thead><tbody>");
        for b in &s.backfills {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}..{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
                b.id,
                b.from,
                b.to,
                if b.projects.is_empty() {
                    "every project".to_string()
                } else {
                    esc(&b.projects.join(", "))
                },
                b.windows,
                b.requests,
                super::eta::when(b.eta_secs / 3600, s.generated_at),
                b.holder.as_deref().map_or("no daemon yet".to_string(), esc)
            );
        }
        out.push_str("</tbody></table></div>");
    }
    if s.daemons.is_empty() {
        out.push_str("<p>Daemons: none running.</p>");
    } else {
        out.push_str("<div class=\"wrap\"><table><thead><tr><th>daemon</th><th>state</th><th>started</th><th>holds</th></tr></thead><tbody>");
        for d in &s.daemons {
            let seen = short((s.generated_at - d.seen_at).num_seconds());
            let _ = write!(
                out,
                "<tr class=\"daemon\"><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td></tr>",
                esc(&d.name),
                if d.alive {
                    format!("<span class=\"badge fresh\">alive</span> heartbeat {seen} ago")
                } else {
                    format!("<span class=\"badge stale\">silent</span> no heartbeat for {seen}")
                },
                d.started_at.format("%Y-%m-%d %H:%M"),
                if d.holds.is_empty() {
                    "nothing".to_string()
                } else {
                    esc(&d.holds.join(", "))
                },
                d.windows_done
                    .map_or(String::new(), |n| format!("; {n} windows done"))
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
}

/// How long a job ran: seconds under a minute, else hours and minutes.
fn ran(secs: f64) -> String {
    if secs < 60.0 {
        format!("{secs:.0} s")
    } else {
        short(secs as i64)
    }
}

/// The flagged readers' values of a firing, as a list (read only).
/// A firing's job cell: the job, or the automation a trigger started, its run and the run's job.
fn job_cell(f: &super::FiringStatus) -> String {
    let job = f.job.as_deref().map_or(String::new(), esc);
    match &f.automation {
        None => job,
        Some(a) => {
            let mut cell = format!("automation {}", esc(a));
            if let Some(run) = &f.run {
                let _ = write!(cell, ", run {}", esc(run));
            }
            if !job.is_empty() {
                let _ = write!(cell, ", job {job}");
            }
            cell
        }
    }
}

fn flag_list(out: &mut String, flags: &[crate::rules::RowFlag]) {
    if flags.is_empty() {
        return;
    }
    out.push_str("<ul class=\"flags\">");
    for f in flags {
        let _ = write!(out, "<li>{}</li>", esc(&f.line()));
    }
    out.push_str("</ul>");
}

#[expect(clippy::too_many_lines)]
fn rules_section(out: &mut String, s: &Status) {
    let r = &s.rules;
    let _ = write!(
        out,
        "<section id=\"rules\"><h2>Rules</h2><p>{} firings in the ledger.</p>",
        r.firings_total
    );
    for p in &r.problems {
        let _ = write!(
            out,
            "<p class=\"problem\">Rule file problem: {}</p>",
            esc(p)
        );
    }
    for run in r.runs.iter().filter(|r| r.outcome == RunOutcome::Failed) {
        let _ = write!(
            out,
            "<p class=\"problem rule-failed\">Rule {} failed {}: {}</p>",
            esc(&run.rule),
            run.at.format("%Y-%m-%d %H:%M UTC"),
            esc(&run.line)
        );
    }
    for w in &r.warnings {
        let _ = write!(
            out,
            "<p class=\"problem rule-warning\">Warning: {}</p>",
            esc(w)
        );
    }
    if !r.pending.is_empty() {
        out.push_str("<h3>Waiting for review</h3><p>Approve or reject on the command line: <code>docpipe rules pending</code>, <code>docpipe rules approve ID [--drop N,M]</code>, <code>docpipe rules reject ID [--rows N,M]</code>.</p>");
        for p in &r.pending {
            let _ = write!(
                out,
                "<div class=\"pending\"><p>Firing {} of rule {} ({}), held {}, expires {}: {} rows; {}</p>",
                p.id,
                esc(&p.rule),
                esc(&p.project),
                p.held_at.format("%Y-%m-%d %H:%M UTC"),
                p.expires_at.format("%Y-%m-%d %H:%M UTC"),
                p.rows,
                esc(&p.why)
            );
            flag_list(out, &p.flags);
            let _ = write!(out, "<pre class=\"prompt\">{}</pre></div>", esc(&p.prompt));
        }
    }
    if !r.previews.is_empty() {
        out.push_str("<h3>Previewed rules (not enabled: nothing sent)</h3>");
        for p in &r.previews {
            let _ = write!(
                out,
                "<div class=\"preview\"><p>Rule {} ({}) would send {} rows, as of {}: {}</p>",
                esc(&p.rule),
                esc(&p.project),
                p.rows,
                p.at.format("%Y-%m-%d %H:%M UTC"),
                esc(&p.reason)
            );
            flag_list(out, &p.flags);
            let _ = write!(out, "<pre class=\"prompt\">{}</pre></div>", esc(&p.prompt));
        }
    }
    if !r.impact.is_empty() {
        out.push_str("<h3>Impact of the agent jobs</h3><div class=\"wrap\"><table class=\"impact\"><thead><tr><th>rule</th><th>project</th><th>firing</th><th>pull request</th><th>keys</th><th>improved</th><th>stayed</th><th>worse</th><th>too little data</th><th>median change</th></tr></thead><tbody>");
        for i in &r.impact {
            let pr = i.pr_link.as_deref().map_or(String::new(), link);
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{pr}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&i.rule),
                esc(&i.project),
                i.firing_id,
                i.keys,
                i.improved,
                i.stayed,
                i.worse,
                i.too_little,
                crate::rules::impact::pct(i.median_change)
            );
        }
        out.push_str("</tbody></table></div>");
    }
    if !r.firings.is_empty() {
        out.push_str("<div class=\"wrap\"><table><thead><tr><th>fired</th><th>rule</th><th>project</th><th>rows</th><th>sent</th><th>job</th><th>status</th><th>ran</th><th>pull request</th></tr></thead><tbody>");
        for f in r.firings.iter().rev() {
            let sent = match f.cooling_down_until {
                Some(t) => format!(
                    "{}, cooling down until {}",
                    esc(f.sent),
                    t.format("%m-%d %H:%M")
                ),
                None => esc(f.sent),
            };
            let _ = write!(
                out,
                "<tr class=\"firing\"><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"job-status\">{}</td><td class=\"n\">{}</td><td class=\"pr\">{}</td></tr>",
                f.fired_at.format("%Y-%m-%d %H:%M"),
                esc(&f.rule),
                esc(&f.project),
                f.rows,
                sent,
                job_cell(f),
                f.job_status
                    .as_deref()
                    .or(f.error.as_deref())
                    .map_or(String::new(), esc),
                f.seconds_to_done.map_or(String::new(), ran),
                f.pr_link.as_deref().map_or(String::new(), link)
            );
        }
        out.push_str("</tbody></table></div>");
    }
    if !r.runs.is_empty() {
        out.push_str("<h3>Last run of each rule</h3><div class=\"wrap\"><table><thead><tr><th>rule</th><th>project</th><th>when</th><th>outcome</th><th>rows</th><th>what happened</th></tr></thead><tbody>");
        for run in &r.runs {
            let _ = write!(
                out,
                "<tr class=\"run\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(&run.rule),
                esc(&run.project),
                run.at.format("%Y-%m-%d %H:%M"),
                run.outcome.as_str(),
                run.rows.map_or(String::new(), |n| n.to_string()),
                esc(&run.line)
            );
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</section>");
}

fn trends_section(out: &mut String, s: &Status) {
    out.push_str("<section id=\"trends\"><h2>Trends and docs gaps</h2>");
    if s.trends.is_empty() {
        out.push_str(
            "<p>No trends computed yet (`docpipe trends`, or the daemon after its export).</p>",
        );
    }
    for t in &s.trends {
        let _ = write!(
            out,
            "<div class=\"project-trends\" data-project=\"{p}\"><h3>{p}</h3><div class=\"charts\">",
            p = esc(&t.project)
        );
        for c in &t.charts {
            let _ = write!(
                out,
                "<div class=\"card\"><img class=\"chart\" loading=\"lazy\" src=\"/{}\" alt=\"{} {}\"></div>",
                esc(c),
                esc(&t.project),
                if c.contains("/gaps-") {
                    "docs gaps by day"
                } else {
                    "views by day, human and AI"
                }
            );
        }
        out.push_str("</div>");
        for g in &t.gaps {
            let _ = write!(
                out,
                "<h3 class=\"gap\" data-table=\"{}\">{}</h3><div class=\"wrap\"><table><thead><tr>",
                g.table,
                esc(g.title)
            );
            for c in &g.columns {
                let _ = write!(out, "<th>{}</th>", esc(c));
            }
            out.push_str("</tr></thead><tbody>");
            for row in &g.rows {
                out.push_str("<tr>");
                for cell in row {
                    let _ = write!(out, "<td>{}</td>", esc(cell));
                }
                out.push_str("</tr>");
            }
            out.push_str("</tbody></table></div>");
        }
        out.push_str("</div>");
    }
    out.push_str("</section>");
}
