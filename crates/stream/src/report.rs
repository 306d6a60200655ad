//! A week of one project's stream, as a person reads it first: the agents that read most, the
//! surfaces they read, the readers AI products sent back, and the user agents not named.

use crate::day::Day;
use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use chrono::NaiveDate;
use docpipe_catalog::layout::PART;
use docpipe_catalog::tables;
use docpipe_write::parquet::{WriteError, read_file};
use std::collections::BTreeMap;
use std::path::Path;

/// What a project's stream says over some days.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Week {
    /// `(agent, class) -> (reads, pages summed over the days)`, agents only (no browser).
    pub agents: BTreeMap<(String, String), i64>,
    /// `surface -> reads by agents`.
    pub surfaces: BTreeMap<String, i64>,
    /// `operator -> reads by its agents`.
    pub operators: BTreeMap<String, i64>,
    /// `operator -> human views sent`.
    pub referrals: BTreeMap<String, i64>,
    /// `user agent -> events` of the agents the table does not name.
    pub unknown: BTreeMap<String, i64>,
    /// Human page views.
    pub human: i64,
}

fn col<'b, T: 'static>(b: &'b RecordBatch, name: &str) -> Option<&'b T> {
    crate::day::column(b, name).ok()
}

fn each(
    day: &Day<'_>,
    table: &str,
    mut f: impl FnMut(&RecordBatch, usize),
) -> Result<(), WriteError> {
    let file =
        docpipe_catalog::layout::partition_dir(day.out, table, day.project, day.date).join(PART);
    if !file.is_file() {
        return Ok(());
    }
    for b in read_file(&file)? {
        for i in 0..b.num_rows() {
            f(&b, i);
        }
    }
    Ok(())
}

/// The project's stream over `from..=to`.
pub fn week(out: &Path, project: &str, from: NaiveDate, to: NaiveDate) -> Result<Week, WriteError> {
    let mut w = Week::default();
    for date in from.iter_days().take_while(|d| *d <= to) {
        let day = Day { out, project, date };
        each(&day, tables::AGENT_DAILY.name, |b, i| {
            let (Some(agent), Some(class), Some(surface), Some(events), Some(operator)) = (
                col::<StringArray>(b, "agent"),
                col::<StringArray>(b, "class"),
                col::<StringArray>(b, "surface"),
                col::<Int64Array>(b, "events"),
                col::<StringArray>(b, "operator"),
            ) else {
                return;
            };
            let n = events.value(i);
            if class.value(i) == "human" {
                w.human += n;
                return;
            }
            let key = (agent.value(i).to_string(), class.value(i).to_string());
            *w.agents.entry(key).or_default() += n;
            *w.surfaces.entry(surface.value(i).to_string()).or_default() += n;
            if !operator.is_null(i) {
                *w.operators
                    .entry(operator.value(i).to_string())
                    .or_default() += n;
            }
        })?;
        each(&day, tables::AI_REFERRALS.name, |b, i| {
            if let (Some(op), Some(views)) = (
                col::<StringArray>(b, "operator"),
                col::<Int64Array>(b, "views"),
            ) {
                *w.referrals.entry(op.value(i).to_string()).or_default() += views.value(i);
            }
        })?;
        each(&day, tables::UNKNOWN_AGENTS.name, |b, i| {
            if let (Some(ua), Some(events)) = (
                col::<StringArray>(b, "user_agent"),
                col::<Int64Array>(b, "events"),
            ) {
                *w.unknown.entry(ua.value(i).to_string()).or_default() += events.value(i);
            }
        })?;
    }
    Ok(w)
}

/// The `n` largest of a count map, largest first (ties by key).
pub fn top<K: Clone + Ord>(m: &BTreeMap<K, i64>, n: usize) -> Vec<(K, i64)> {
    let mut v: Vec<(K, i64)> = m.iter().map(|(k, c)| (k.clone(), *c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

impl Week {
    /// The week as a few lines for a terminal (strangers' texts escaped and cut).
    pub fn lines(&self, project: &str) -> Vec<String> {
        let agents: i64 = self.agents.values().sum();
        let mut out = vec![format!(
            "  {project}: {agents} reads by agents, {} human page views",
            self.human
        )];
        let joined = |v: Vec<String>| v.join(", ");
        out.push(format!(
            "    top agents: {}",
            joined(
                top(&self.agents, 5)
                    .into_iter()
                    .map(|((a, c), n)| format!("{} ({c}) {n}", crate::batch::shown(&a)))
                    .collect()
            )
        ));
        out.push(format!(
            "    surfaces: {}",
            joined(
                top(&self.surfaces, 5)
                    .into_iter()
                    .map(|(s, n)| format!("{s} {n}"))
                    .collect()
            )
        ));
        let sent: i64 = self.referrals.values().sum();
        out.push(format!(
            "    readers sent by AI products: {sent}{}",
            if sent > 0 {
                format!(
                    " ({})",
                    joined(
                        top(&self.referrals, 5)
                            .into_iter()
                            .map(|(o, n)| format!("{o} {n}"))
                            .collect()
                    )
                )
            } else {
                String::new()
            }
        ));
        let ratios: Vec<String> = top(&self.referrals, 5)
            .into_iter()
            .filter_map(|(op, sent)| {
                let reads = *self.operators.get(&op)?;
                (sent > 0).then(|| format!("{op} {:.1}", reads as f64 / sent as f64))
            })
            .collect();
        if !ratios.is_empty() {
            out.push(format!(
                "    agent reads per reader sent back: {}",
                joined(ratios)
            ));
        }
        if !self.unknown.is_empty() {
            out.push(format!(
                "    user agents not named (add them to your agents file): {}",
                joined(
                    top(&self.unknown, 3)
                        .into_iter()
                        .map(|(u, n)| format!("{} {n}", crate::batch::shown(&u)))
                        .collect()
                )
            ));
        }
        out
    }
}
