//! What the page's first screen says: one line that says whether everything is all right, each
//! part a link to its section and red or amber when not fine, then what needs a person (the
//! page draws them: `html.rs`).

use super::{Freshness, Status};
use crate::events::RunOutcome;

/// The lines of "Needs a person" the page shows (the rest are counted): with the health line
/// above them, they fit a first screen of 800 pixels.
pub const SHOWN: usize = 8;

/// How a part of the health line reads: fine, to look at, or wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tone {
    /// Fine.
    Ok,
    /// To look at.
    Warn,
    /// Wrong: a person acts.
    Bad,
}

impl Tone {
    /// The CSS class the page draws it with.
    pub fn class(self) -> &'static str {
        match self {
            Tone::Ok => "ok",
            Tone::Warn => "warn",
            Tone::Bad => "bad",
        }
    }
}

/// One part of the health line: its words, its section, its tone.
pub(super) struct Part {
    pub(super) text: String,
    pub(super) href: &'static str,
    pub(super) tone: Tone,
}

/// The parts: datasets fresh, failing windows, firings waiting for review, the budget free.
pub(super) fn parts(s: &Status) -> Vec<Part> {
    let datasets: Vec<_> = s.projects.iter().flat_map(|p| &p.datasets).collect();
    let fresh = datasets
        .iter()
        .filter(|d| d.freshness == Freshness::Fresh)
        .count();
    let stale = datasets
        .iter()
        .any(|d| matches!(d.freshness, Freshness::Stale));
    let unknown = s.projects.iter().filter(|p| p.unknown.is_some()).count();
    let failing: usize = datasets.iter().map(|d| d.failures.len()).sum();
    let pending = s.rules.pending.len();
    let free = s
        .organizations
        .iter()
        .map(|o| (u64::from(o.room_now) * 100) / u64::from(o.limit.max(1)))
        .min();
    let mut out = vec![Part {
        text: format!("{fresh} of {} datasets fresh", datasets.len()),
        href: "#projects",
        tone: if stale {
            Tone::Bad
        } else if fresh < datasets.len() {
            Tone::Warn
        } else {
            Tone::Ok
        },
    }];
    if unknown > 0 {
        out.push(Part {
            text: match unknown {
                1 => "1 project unknown to the service".to_string(),
                n => format!("{n} projects unknown to the service"),
            },
            href: "#needs",
            tone: Tone::Bad,
        });
    }
    out.push(Part {
        text: format!("{failing} failing windows"),
        href: "#needs",
        tone: if failing > 0 { Tone::Bad } else { Tone::Ok },
    });
    out.push(Part {
        text: match pending {
            1 => "1 firing waits for review".to_string(),
            n => format!("{n} firings wait for review"),
        },
        href: "#rules",
        tone: if pending > 0 { Tone::Warn } else { Tone::Ok },
    });
    if let Some(free) = free {
        out.push(Part {
            text: format!("budget {free}% free"),
            href: "#budget",
            tone: match free {
                0 => Tone::Bad,
                1..=19 => Tone::Warn,
                _ => Tone::Ok,
            },
        });
    }
    out
}

/// What needs a person, a line each: failed windows, projects the service does not know,
/// refused keys, firings waiting for review, stale data, rules that fail or do not load, a
/// warehouse that fails.
pub fn needs(s: &Status) -> Vec<(Tone, String)> {
    let mut out = Vec::new();
    for p in &s.projects {
        if let Some(u) = &p.unknown {
            out.push((
                Tone::Bad,
                format!(
                    "project {}: unknown to the service ({}); fix its id in the config",
                    p.id, u.message
                ),
            ));
        }
        for d in &p.datasets {
            for f in &d.failures {
                out.push((
                    Tone::Bad,
                    format!("{} {} {}: {}", p.id, d.name, f.window, f.describe()),
                ));
            }
            if d.freshness == Freshness::Stale {
                out.push((
                    Tone::Bad,
                    format!(
                        "{} {}: stale (its target is {})",
                        p.id,
                        d.name,
                        super::text::short(d.target_secs)
                    ),
                ));
            }
        }
    }
    for o in &s.organizations {
        if let Some(w) = o.key.as_ref().and_then(|k| k.warning.as_ref()) {
            out.push((Tone::Bad, format!("key {}: {w}", o.id)));
        }
    }
    for f in &s.rules.pending {
        out.push((
            Tone::Warn,
            format!(
                "firing {} of rule {} ({}) waits for review: {} rows; `docpipe rules pending`, then approve or reject it (expires {})",
                f.id,
                f.rule,
                f.project,
                f.rows,
                f.expires_at.format("%Y-%m-%d %H:%M UTC")
            ),
        ));
    }
    for r in s
        .rules
        .runs
        .iter()
        .filter(|r| r.outcome == RunOutcome::Failed)
    {
        out.push((Tone::Bad, format!("rule {} failed: {}", r.rule, r.line)));
    }
    for p in &s.rules.problems {
        out.push((Tone::Bad, format!("rule file problem: {p}")));
    }
    if let Some(w) = &s.warehouse
        && w.last_load.as_ref().is_some_and(|l| l.failing_runs > 0)
    {
        out.push((Tone::Bad, super::text::warehouse_summary(w)));
    }
    out
}
