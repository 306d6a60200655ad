//! What a person reads of the impact: each rule's latest measured firing counted (the trends'
//! summary, the status page), and the model of `docpipe rules impact` (rendered in
//! `cli/impact.rs`, as `status/` renders its own).

use super::Impact;
use super::Verdict;
use super::days::{Calendar, Due, due, polled};
use super::table::{Row, rows};
use crate::Rule;
use chrono::{DateTime, Utc};
use docpipe_state::StoreError;
use docpipe_state::impact::{Days, Plan, Settled};
use docpipe_state::ledger::{Firing, Ledger};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Keys with enough data a rule needs before its counts say anything.
pub const MIN_KEYS: usize = 3;

/// The median of some numbers (none of none).
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// Measured keys (of one rule, or one firing), counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Of those with enough data: improved.
    pub improved: usize,
    /// Stayed.
    pub stayed: usize,
    /// Got worse.
    pub worse: usize,
    /// Keys with too little data (or none) to say.
    pub too_little: usize,
    /// The median relative change of the keys with enough data.
    pub median_change: Option<f64>,
}

/// Counts rows (of one rule, or one firing).
pub fn count(rows: &[&Row]) -> Counts {
    let mut c = Counts::default();
    let mut changes = Vec::new();
    for r in rows {
        match (r.enough, r.verdict) {
            (false, _) | (_, Verdict::NoData) => c.too_little += 1,
            (true, v) => {
                if let Some(x) = r.relative() {
                    changes.push(x);
                }
                match v {
                    Verdict::Improved => c.improved += 1,
                    Verdict::Stayed => c.stayed += 1,
                    _ => c.worse += 1,
                }
            }
        }
    }
    c.median_change = median(changes);
    c
}

/// One firing's measured keys, counted.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FiringImpact {
    /// The rule.
    pub rule: String,
    /// Its project.
    pub project: String,
    /// The firing.
    pub firing_id: i64,
    /// The job's pull request.
    pub pr_link: Option<String>,
    /// When it was measured.
    pub measured_at: DateTime<Utc>,
    /// Keys measured.
    pub keys: usize,
    /// Of those with enough data: improved.
    pub improved: usize,
    /// Stayed.
    pub stayed: usize,
    /// Got worse.
    pub worse: usize,
    /// Keys with too little data (or none) to say.
    pub too_little: usize,
    /// The median relative change of the keys with enough data.
    pub median_change: Option<f64>,
}

/// Each rule's latest measured firing, counted (for the trends' summary and the status page).
pub fn latest(rows: &[Row]) -> Vec<FiringImpact> {
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    for r in rows {
        let e = last.entry(r.rule.as_str()).or_insert(r.firing_id);
        *e = (*e).max(r.firing_id);
    }
    last.into_iter()
        .filter_map(|(rule, id)| {
            let of: Vec<&Row> = rows
                .iter()
                .filter(|r| r.rule == rule && r.firing_id == id)
                .collect();
            let first = of.first()?;
            let c = count(&of);
            Some(FiringImpact {
                rule: rule.to_string(),
                project: first.project.clone(),
                firing_id: id,
                pr_link: first.pr_link.clone(),
                measured_at: first.measured_at,
                keys: of.len(),
                improved: c.improved,
                stayed: c.stayed,
                worse: c.worse,
                too_little: c.too_little,
                median_change: c.median_change,
            })
        })
        .collect()
}

/// `+12.3%` (or `n/a`).
pub fn pct(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |x| format!("{:+.1}%", x * 100.0))
}

impl FiringImpact {
    /// One line: `rule R (p), firing 3 (PR <link>): 5 keys: 2 improved, 3 stayed, 0 worse;
    /// median change +12.0%`.
    pub fn line(&self) -> String {
        let pr = self
            .pr_link
            .as_deref()
            .map(|p| format!(" (PR {})", docpipe_catalog::text::one_line(p)))
            .unwrap_or_default();
        let mut line = format!(
            "rule {} ({}), firing {}{pr}: {} keys: {} improved, {} stayed, {} worse; median change {}",
            self.rule,
            self.project,
            self.firing_id,
            self.keys,
            self.improved,
            self.stayed,
            self.worse,
            pct(self.median_change)
        );
        if self.too_little > 0 {
            line.push_str(&format!(
                ", {} with too little data to say",
                self.too_little
            ));
        }
        line
    }
}

/// A measured firing of a rule, with its keys.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredFiring {
    /// The firing.
    pub firing: Firing,
    /// The days before.
    pub before: Days,
    /// The days after.
    pub after: Days,
    /// Its keys, measured.
    pub keys: Vec<Row>,
}

/// What the impact of a rule with `[impact]` is so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Measures {
    /// Its `[impact]`.
    pub impact: Impact,
    /// Each measured firing.
    pub firings: Vec<MeasuredFiring>,
    /// Firings waiting to be measured, and what for.
    pub waiting: Vec<(i64, String)>,
    /// Firings that never will be, and why.
    pub not_measured: Vec<(i64, String)>,
    /// Firings that recorded no figures before (older than the rule's `[impact]`).
    pub not_measurable: usize,
}

impl Measures {
    /// Jobs measured.
    pub fn jobs(&self) -> usize {
        self.firings.len()
    }

    /// Every measured key of the rule, counted.
    pub fn counts(&self) -> Counts {
        let keys: Vec<&Row> = self.firings.iter().flat_map(|f| &f.keys).collect();
        count(&keys)
    }

    /// Keys measured.
    pub fn keys(&self) -> usize {
        self.firings.iter().map(|f| f.keys.len()).sum()
    }

    /// Keys with enough data each side.
    pub fn enough(&self) -> usize {
        self.keys() - self.counts().too_little
    }
}

/// One rule in `docpipe rules impact`.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleImpact {
    /// The rule's name.
    pub rule: String,
    /// Its project.
    pub project: String,
    /// Its file.
    pub file: String,
    /// What is measured (none: the rule has no `[impact]`).
    pub measures: Option<Measures>,
}

/// What the report reads of the ledger, once for every rule.
struct Read {
    rows: Vec<Row>,
    plans: HashMap<i64, Plan>,
    firings: Vec<Firing>,
    polled: HashSet<i64>,
}

/// The model of `docpipe rules impact`: per rule, the jobs measured, the keys that improved,
/// stayed and got worse, each measured firing's keys, what waits and what never will be
/// measured.
pub fn report(
    rules: &[Rule],
    ledger: &Ledger,
    cal: Calendar,
) -> Result<Vec<RuleImpact>, StoreError> {
    let read = Read {
        rows: rows(ledger)?,
        plans: ledger.plans()?,
        firings: ledger.all()?,
        polled: polled(ledger)?,
    };
    rules
        .iter()
        .map(|rule| {
            Ok(RuleImpact {
                rule: rule.name.clone(),
                project: rule.project.clone(),
                file: rule.file.clone(),
                measures: match &rule.impact {
                    Some(impact) => Some(measures(&read, rule, impact, ledger, cal)?),
                    None => None,
                },
            })
        })
        .collect()
}

/// A rule's firings, each where it stands: measured (with its keys), waiting, never to be
/// measured, or older than its `[impact]`.
fn measures(
    read: &Read,
    rule: &Rule,
    impact: &Impact,
    ledger: &Ledger,
    cal: Calendar,
) -> Result<Measures, StoreError> {
    let mut m = Measures {
        impact: impact.clone(),
        firings: Vec::new(),
        waiting: Vec::new(),
        not_measured: Vec::new(),
        not_measurable: 0,
    };
    let mine = read
        .firings
        .iter()
        .filter(|f| f.rule == rule.name && f.project == rule.project);
    for f in mine {
        let Some(plan) = read.plans.get(&f.id) else {
            m.not_measurable += 1;
            continue;
        };
        match (&plan.settled, plan.after) {
            (Some(Settled::NotMeasured(why)), _) => m.not_measured.push((f.id, why.clone())),
            (_, Some(after)) => m.firings.push(MeasuredFiring {
                firing: f.clone(),
                before: plan.before,
                after,
                keys: read
                    .rows
                    .iter()
                    .filter(|r| r.firing_id == f.id)
                    .cloned()
                    .collect(),
            }),
            (None, None) => {
                let Ok(then) = serde_json::from_str::<Impact>(&plan.definition) else {
                    continue;
                };
                let finals = cal.final_days(ledger, then.dataset(), &f.project)?;
                let polled = read.polled.contains(&f.id);
                if let Due::Wait(why) = due(f, plan, &then, &finals, polled, cal.tz) {
                    m.waiting.push((f.id, why));
                }
            }
            (Some(Settled::Measured), None) => {}
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::measure_due;
    use crate::impact::tests::rule;
    use chrono::NaiveDate;
    use docpipe_state::impact::KeyFigures;

    #[test]
    fn a_ledger_written_before_the_impact_keeps_working_and_is_not_measurable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        // The ledger as docpipe wrote it before: no impact columns, no plans.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE rule_firings (id INTEGER PRIMARY KEY AUTOINCREMENT, rule TEXT NOT NULL,
             project TEXT NOT NULL, action TEXT NOT NULL, job TEXT, fired_at_ms INTEGER NOT NULL,
             prompt_hash TEXT NOT NULL, prompt TEXT NOT NULL, rows_matched INTEGER NOT NULL,
             sent TEXT NOT NULL, status TEXT, pr_link TEXT, seconds_to_done REAL, error TEXT,
             updated_at_ms INTEGER NOT NULL, poll_until_ms INTEGER);
             CREATE TABLE rule_firing_keys (firing_id INTEGER NOT NULL, key TEXT NOT NULL,
             PRIMARY KEY (firing_id, key));
             INSERT INTO rule_firings VALUES (1, 'r', 'p', 'follow_up', 'j', 0, 'h', 'prompt', 3,
             'sent', 'completed', 'https://github.com/o/r/pull/1', 5.0, NULL, 0, NULL);
             INSERT INTO rule_firing_keys VALUES (1, 'webhooks');",
        )
        .unwrap();
        drop(c);
        let ledger = Ledger::open(&path).unwrap();
        let figures = ledger.key_figures().unwrap();
        assert_eq!(
            figures[&1],
            vec![KeyFigures {
                key: "webhooks".into(),
                before: None,
                after: None
            }]
        );
        assert!(ledger.plans().unwrap().is_empty());
        let r = rule("[impact]\nmetric = \"ctr_7d\"\ncount = \"hits_7d\"\nbetter = \"higher\"\n")
            .unwrap();
        // The key cooldown still reads the old keys.
        let sent = ledger
            .sent_keys("r", "p", DateTime::<Utc>::MIN_UTC)
            .unwrap();
        assert!(sent.contains("webhooks"));
        let cal = Calendar {
            tz: chrono_tz::UTC,
            today: NaiveDate::from_ymd_opt(2026, 3, 1).unwrap(),
            settle: docpipe_catalog::calendar::Settle {
                lookback_days: 3,
                ..Default::default()
            },
        };
        let m = measure_due(dir.path(), &ledger, cal, Utc::now()).unwrap();
        assert_eq!((m.measured, m.given_up.len()), (0, 0));
        let model = report(std::slice::from_ref(&r), &ledger, cal).unwrap();
        let m = model[0].measures.as_ref().unwrap();
        assert_eq!(
            (m.jobs(), m.keys(), m.counts(), m.not_measurable),
            (0, 0, Counts::default(), 1)
        );
        assert!(m.firings.is_empty() && m.waiting.is_empty() && m.not_measured.is_empty());
        let text = crate::impact::text::render(&model, chrono_tz::UTC);
        assert!(
            text.ends_with("  jobs measured: 0; keys: 0 improved, 0 stayed, 0 worse; median change n/a\n  not measurable: 1 firings recorded no figures before (they fired before the rule had [impact], or before docpipe measured impact)\n"),
            "{text}"
        );
        let mut none = r.clone();
        none.impact = None;
        let model = report(&[none], &ledger, cal).unwrap();
        assert_eq!(model[0].measures, None);
        let text = crate::impact::text::render(&model, chrono_tz::UTC);
        assert!(
            text.ends_with("\nrule r (p): measured by nothing (no [impact] in jobs/r.toml)\n"),
            "{text}"
        );
    }
}
