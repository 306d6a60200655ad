//! `docpipe rules impact` as text: the model of [`crate::impact::report`], rendered.

use crate::impact::report::{MIN_KEYS, MeasuredFiring, Measures, RuleImpact};
use crate::impact::{MIN_DAYS, Verdict, pct};
use docpipe_catalog::text::one_line;
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
    Ok(render(&model, cal.tz))
}

/// The report, a paragraph per rule; times in `tz`.
pub fn render(rules: &[RuleImpact], tz: chrono_tz::Tz) -> String {
    let mut out = format!("impact of the agent jobs: {READING}\n");
    for r in rules {
        let _ = write!(out, "\nrule {} ({}): ", r.rule, r.project);
        match &r.measures {
            None => {
                let _ = writeln!(out, "measured by nothing (no [impact] in {})", r.file);
            }
            Some(m) => measures(&mut out, m, tz),
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
