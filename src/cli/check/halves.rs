//! `check --deep`: whether the service filters by the instants `dateFrom` and `dateTo` name,
//! the premise of every day in a zone other than UTC. For one offset-paged and one
//! cursor-paged dataset of an organization, the day is asked whole and in its two halves
//! (three requests each): halves that do not add up to the day mean the service does not.

use crate::api::{ApiError, Client};
use crate::calendar::{Part, Window};
use crate::config::{Project, Settings};
use crate::dataset::probe::{self, HALVES};

/// The requests one comparison sends: the day, its first half, its second half.
pub const REQUESTS: usize = 3;

/// The datasets compared for `org`: `(project, dataset)`, the offset-paged one first; empty
/// when no project of `selected` in `org` exports one of them.
pub fn picks(selected: &[&Project], org: &str) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for choices in HALVES {
        let found = choices.iter().find_map(|d| {
            selected
                .iter()
                .find(|p| p.organization == org && p.datasets.iter().any(|x| x == d))
                .map(|p| (p.id.clone(), *d))
        });
        out.extend(found);
    }
    out
}

/// What the day and its halves counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compared {
    /// The counts of the day, its first half and its second half, and what they count.
    Counts {
        /// What the counts are: `views`, `searches`, `rows`.
        unit: &'static str,
        /// The day, the first half, the second.
        counts: [i64; 3],
    },
    /// Nothing to learn from this day, and why.
    Inconclusive(String),
}

impl Compared {
    /// Whether the halves add up to the day (`None`: nothing learned).
    pub fn adds_up(&self) -> Option<bool> {
        match self {
            Compared::Counts {
                counts: [d, a, b], ..
            } if *d > 0 || *a > 0 || *b > 0 => Some(a + b == *d),
            _ => None,
        }
    }

    /// `120 views = 52 + 68`, `40 searches, but 40 + 40 in its halves`.
    pub fn sum_line(&self) -> String {
        match self {
            Compared::Counts {
                unit,
                counts: [d, a, b],
            } => {
                if a + b == *d {
                    format!("{d} {unit} = {a} + {b} in its halves")
                } else {
                    format!("{d} {unit}, but {a} + {b} in its halves")
                }
            }
            Compared::Inconclusive(why) => why.clone(),
        }
    }
}

/// Asks `dataset` of `project` for `day` whole and in halves.
pub async fn compare(
    client: &Client,
    project: &str,
    dataset: &str,
    day: Window,
) -> Result<Compared, ApiError> {
    let mut counts = [0i64; 3];
    let mut unit = "rows";
    let mut why = None;
    // All three are asked (the requests announced), whatever the first answers.
    for (i, part) in [Part::Whole, Part::FirstHalf, Part::SecondHalf]
        .into_iter()
        .enumerate()
    {
        let window = Window { part, ..day };
        match probe::count(client, project, dataset, window).await? {
            Ok((u, n)) => {
                unit = u;
                counts[i] = n;
            }
            Err(w) => why = why.or(Some(w)),
        }
    }
    if let Some(why) = why {
        return Ok(Compared::Inconclusive(why));
    }
    if counts == [0, 0, 0] {
        return Ok(Compared::Inconclusive(format!(
            "inconclusive: no {unit} on {} to compare",
            day.from
        )));
    }
    Ok(Compared::Counts { unit, counts })
}

/// What a comparison that does not add up means, for this config: a problem where days are
/// another zone's, a note where they are UTC's.
pub fn meaning(settings: &Settings) -> String {
    if settings.timezone == chrono_tz::UTC {
        "the service does not filter by the instants asked for; this config's UTC days are whole days and not affected, but a timezone other than UTC would get whole UTC days, not that zone's".into()
    } else {
        format!(
            "the service does not filter by the instants asked for: a day of timezone {} is not that zone's day but the whole UTC days its bounds fall on; exports warn until a check --deep finds otherwise",
            settings.timezone
        )
    }
}

/// Records what the comparisons of each organization learned in the state (an organization
/// whose comparisons were all inconclusive keeps what the state knew): the lines that say so.
pub fn record(
    ctx: &crate::app::Context,
    compared: &[(String, String, Compared)],
    day: chrono::NaiveDate,
) -> anyhow::Result<Vec<String>> {
    let orgs: std::collections::BTreeSet<&str> =
        compared.iter().map(|(o, _, _)| o.as_str()).collect();
    let mut lines = Vec::new();
    for org in orgs {
        let mine: Vec<&(String, String, Compared)> =
            compared.iter().filter(|(o, _, _)| o == org).collect();
        let learned: Vec<bool> = mine.iter().filter_map(|(_, _, c)| c.adds_up()).collect();
        if learned.is_empty() {
            lines.push(format!(
                "instants: organization {org}: nothing learned on {day} (no counts to compare); the state keeps what it knew"
            ));
            continue;
        }
        let filters = learned.iter().all(|x| *x);
        let detail = mine
            .iter()
            .map(|(_, what, c)| format!("{what}: {}", c.sum_line()))
            .collect::<Vec<_>>()
            .join("; ");
        ctx.store()
            .record_instants(&crate::store::instants::InstantsFinding {
                org: org.to_string(),
                base_url: ctx.settings.base_url.clone(),
                filters_instants: filters,
                day,
                detail,
                at: ctx.clock.now(),
            })?;
        lines.push(format!(
            "instants: organization {org}: the service {} by the instants asked for (kept in the state; `docpipe status` shows it)",
            if filters { "filters" } else { "does not filter" }
        ));
    }
    Ok(lines)
}
