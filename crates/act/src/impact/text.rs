//! `docpipe rules impact` as text: the model of [`crate::impact::report`], rendered.

use crate::impact::report::{MIN_KEYS, MeasuredFiring, Measures, RuleImpact};
use crate::impact::{MIN_DAYS, Verdict, pct};
use docpipe_catalog::text::one_line;
use docpipe_state::reask::{Reask, Resolution};
use std::collections::HashMap;
use std::fmt::Write as _;

/// The how-to-read line the report starts with.
pub const READING: &str = "a key improved (or got worse) when its metric moved more than the rule's tolerance (10% unless it says) the better (or worse) way, and stayed otherwise; a key counts only with at least 7 final days and the rule's min_count rows (30 unless it says) on each side";

/// The report of `rules` from the ledger, as text, its days counted by `cal` (an engine's
/// `calendar()`).
pub fn text(
    rules: &[crate::Rule],
    ledger: &docpipe_state::ledger::Ledger,
    cal: crate::impact::Calendar,
) -> Result<String, docpipe_state::StoreError> {
    let model = crate::impact::report::report(rules, ledger, cal)?;
    let reading = asked_again(rules, ledger, cal)?;
    Ok(render_with(&model, &reading, cal.tz))
}

/// The immediate reading of each rule whose questions were asked again, by rule and project:
/// per firing, how many of its questions the assistant answers now and how many of those
/// answers cite a page the firing named; then each question's last ask.
fn asked_again(
    rules: &[crate::Rule],
    ledger: &docpipe_state::ledger::Ledger,
    cal: crate::impact::Calendar,
) -> Result<HashMap<(String, String), Vec<String>>, docpipe_state::StoreError> {
    let asks = ledger.reasks()?;
    if asks.is_empty() {
        return Ok(HashMap::new());
    }
    let firings = ledger.all()?;
    let plans = ledger.plans()?;
    let mut out: HashMap<(String, String), Vec<String>> = HashMap::new();
    for f in &firings {
        let mine: Vec<&Reask> = asks.iter().filter(|a| a.firing_id == f.id).collect();
        let Some(rule) = rules
            .iter()
            .find(|r| r.name == f.rule && r.project == f.project)
            .filter(|_| !mine.is_empty())
        else {
            continue;
        };
        // Each question's latest ask that was sent, and whether another is planned.
        let mut last: Vec<&Reask> = Vec::new();
        let mut again = Vec::new();
        for a in &mine {
            if a.asked_at.is_none() {
                again.push(a.due_at);
                continue;
            }
            match last.iter_mut().find(|l| l.question == a.question) {
                Some(l) if l.attempt < a.attempt => *l = a,
                Some(_) => {}
                None => last.push(a),
            }
        }
        let questions = mine
            .iter()
            .map(|a| &a.question)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let answered = last
            .iter()
            .filter(|a| a.resolution == Some(Resolution::Answered))
            .count();
        let citing = last
            .iter()
            .filter(|a| a.resolution == Some(Resolution::Answered) && a.cites_named)
            .count();
        let mut line = format!(
            "  asked again: firing {}: {answered} of {questions} questions answered now, {citing} citing a page the firing named",
            f.id
        );
        if let Some(next) = again.iter().min() {
            let _ = write!(
                line,
                "; {} asked once more on {}",
                again.len(),
                next.with_timezone(&cal.tz).format("%Y-%m-%d %H:%M")
            );
        }
        if let Some(impact) = &rule.impact {
            let (from, to) = crate::impact::days::after_days(f, impact, cal.tz);
            let measured = plans.get(&f.id).is_some_and(|p| p.after.is_some());
            let _ = if measured {
                write!(
                    line,
                    "; the {}-day measure over {from}..{to} is above",
                    impact.days
                )
            } else {
                write!(
                    line,
                    "; the {}-day measure follows once {from}..{to} are final",
                    impact.days
                )
            };
        }
        let lines = out.entry((f.rule.clone(), f.project.clone())).or_default();
        lines.push(line);
        for a in &last {
            lines.push(format!(
                "    {} asked {}: {}",
                crate::readers::quote(&a.question),
                a.asked_at.map_or(String::new(), |t| t
                    .with_timezone(&cal.tz)
                    .format("%Y-%m-%d %H:%M")
                    .to_string()),
                asked_what(a)
            ));
        }
    }
    Ok(out)
}

/// The report, a paragraph per rule; times in `tz`.
pub fn render(rules: &[RuleImpact], tz: chrono_tz::Tz) -> String {
    render_with(rules, &HashMap::new(), tz)
}

/// [`render`], each rule's paragraph ending with its lines of `reading` (by rule and project).
fn render_with(
    rules: &[RuleImpact],
    reading: &HashMap<(String, String), Vec<String>>,
    tz: chrono_tz::Tz,
) -> String {
    let mut out = format!("impact of the agent jobs: {READING}\n");
    for r in rules {
        let _ = write!(out, "\nrule {} ({}): ", r.rule, r.project);
        match &r.measures {
            None => {
                let _ = writeln!(out, "measured by nothing (no [impact] in {})", r.file);
            }
            Some(m) => measures(&mut out, m, tz),
        }
        for line in reading
            .get(&(r.rule.clone(), r.project.clone()))
            .into_iter()
            .flatten()
        {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

fn measures(out: &mut String, m: &Measures, tz: chrono_tz::Tz) {
    let c = m.counts();
    let _ = writeln!(out, "{}", m.impact.describe());
    let _ = writeln!(
        out,
        "  jobs measured: {}; keys: {} improved, {} stayed, {} worse; median change {}",
        m.jobs(),
        c.improved,
        c.stayed,
        c.worse,
        pct(c.median_change)
    );
    for f in &m.firings {
        firing(out, f, tz);
    }
    let listed = |firings: &[(i64, String)]| {
        firings
            .iter()
            .map(|(id, why)| format!("firing {id} ({why})"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !m.waiting.is_empty() {
        let _ = writeln!(out, "  waiting: {}", listed(&m.waiting));
    }
    if !m.not_measured.is_empty() {
        let _ = writeln!(out, "  not measured: {}", listed(&m.not_measured));
    }
    if m.not_measurable > 0 {
        let _ = writeln!(
            out,
            "  not measurable: {} firings recorded no figures before (they fired before the rule had [impact], or before docpipe measured impact)",
            m.not_measurable
        );
    }
    let enough = m.enough();
    if m.keys() > 0 && (enough < MIN_KEYS || c.too_little > 0) {
        let _ = writeln!(
            out,
            "  caveat: {enough} of {} keys have at least {MIN_DAYS} final days and {} rows on each side{}",
            m.keys(),
            m.impact.min_count,
            if enough < MIN_KEYS {
                format!("; fewer than {MIN_KEYS}: too few to say anything yet")
            } else {
                "; the others are not counted".into()
            }
        );
    }
}

/// A measured firing: its days, then a line per key.
fn firing(out: &mut String, f: &MeasuredFiring, tz: chrono_tz::Tz) {
    let _ = writeln!(
        out,
        "  firing {} ({}), job {}, {}; before {}..{} ({} final days), after {}..{} ({} final days):",
        f.firing.id,
        f.firing
            .fired_at
            .with_timezone(&tz)
            .format("%Y-%m-%d %H:%M"),
        one_line(f.firing.job.as_deref().unwrap_or("?")),
        f.firing
            .pr_link
            .as_deref()
            .map_or("no pull request".into(), |p| format!("PR {}", one_line(p))),
        f.before.from,
        f.before.to,
        f.before.days,
        f.after.from,
        f.after.to,
        f.after.days
    );
    let _ = writeln!(
        out,
        "    {:<40} {:>10} {:>10} {:>9} {:>13}  verdict",
        "key", "before", "after", "change", "rows bef/aft"
    );
    for k in &f.keys {
        let num = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.4}"));
        let n = |x: Option<i64>| x.map_or("?".into(), |x| x.to_string());
        let _ = writeln!(
            out,
            "    {:<40} {:>10} {:>10} {:>9} {:>13}  {}{}",
            one_line(&k.key),
            num(k.before),
            num(k.after),
            pct(k.relative()),
            format!("{}/{}", n(k.rows_before), n(k.rows_after)),
            k.verdict,
            if k.enough || k.verdict == Verdict::NoData {
                ""
            } else {
                " (too little data)"
            }
        );
    }
}

/// How an ask went: `answered, citing /a, /b (a page the firing named)`, `not found`, ...
pub fn asked_what(r: &Reask) -> String {
    match (&r.error, r.resolution) {
        (Some(e), _) => format!("failed: {}", one_line(e)),
        (None, Some(Resolution::Answered)) => format!(
            "answered, citing {}{}",
            r.sources.join(", "),
            if r.cites_named {
                " (a page the firing named)"
            } else {
                ""
            }
        ),
        (None, Some(other)) => other.as_str().replace('_', " "),
        (None, None) => "no answer".to_string(),
    }
}
