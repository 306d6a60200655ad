//! Deterministic truth of the analytics datasets beside page views, generated per project and
//! UTC day from the same seed and pages as the views, so that they hang together: visitors
//! follow each page's views, searches' top clicked pages are pages of the site, feedback is on
//! the site's pages and its status moves on with time, assistant turns belong to threads with
//! ULIDs (about one in six unanswered, categories assigned a day later), caller stats count the
//! turns. Nothing dated after the emulator's now is visible: today's data grows as time passes.

use super::generate::{Row, hash_str, mix, page_title, unit};
use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A ULID of `ms` (48 bits) and 80 bits of `rand`.
pub fn ulid(ms: u64, rand: u128) -> String {
    let v: u128 = (u128::from(ms & ((1 << 48) - 1)) << 80) | (rand & ((1u128 << 80) - 1));
    (0..26)
        .rev()
        .map(|i| CROCKFORD[((v >> (i * 5)) & 31) as usize] as char)
        .collect()
}

/// The value of a ULID, if `s` is one (26 Crockford characters, the first at most 7).
pub fn parse_ulid(s: &str) -> Option<u128> {
    if s.len() != 26 {
        return None;
    }
    let mut v: u128 = 0;
    for (i, c) in s.bytes().enumerate() {
        let d = CROCKFORD
            .iter()
            .position(|&x| x == c.to_ascii_uppercase())? as u128;
        if i == 0 && d > 7 {
            return None;
        }
        v = (v << 5) | d;
    }
    Some(v)
}

/// The dice of one thing of one day of one project.
fn dice(seed: u64, project: &str, day: NaiveDate, what: u64, i: u64) -> u64 {
    mix(seed
        ^ hash_str(project)
        ^ (day.num_days_from_ce() as u64).wrapping_mul(0x9E37_79B9)
        ^ what.wrapping_mul(0xA5A5)
        ^ i.wrapping_mul(0x1_0000_0001))
}

fn midnight(day: NaiveDate) -> DateTime<Utc> {
    day.and_time(chrono::NaiveTime::MIN).and_utc()
}

/// An instant `secs` into `day`.
fn at(day: NaiveDate, secs: u64) -> DateTime<Utc> {
    midnight(day) + Duration::seconds((secs % 86_400) as i64)
}

/// The unique visitors of a page with `human` and `ai` views on one day: fewer people than
/// views, and some (one in ten of the smaller side) seen as both.
pub fn visitors_of(human: u64, ai: u64, h: u64) -> (u64, u64, u64) {
    let hv = if human == 0 {
        0
    } else {
        (human * (55 + h % 20)).div_ceil(100)
    };
    let av = if ai == 0 {
        0
    } else {
        (ai * (35 + (h >> 8) % 20)).div_ceil(100)
    };
    let both = hv.min(av) * ((h >> 16) % 11) / 100;
    (hv, av, hv + av - both)
}

/// Visitors over several days: people come back, so fewer than the days' sum (never summed).
pub fn over_days(sum: u64, max: u64, days: u64) -> u64 {
    if days <= 1 {
        sum
    } else {
        max + (sum - max) * 7 / 10
    }
}

/// A page's visitors: path, human, AI, total.
pub type VisitorRow = (String, u64, u64, u64);

/// The visitors rows of one day's views rows, and the site's totals.
pub fn day_visitors(
    seed: u64,
    project: &str,
    day: NaiveDate,
    views: &[Row],
) -> (Vec<VisitorRow>, (u64, u64, u64)) {
    let mut rows = Vec::with_capacity(views.len());
    for r in views {
        let h = dice(seed, project, day, 1, hash_str(&r.path));
        let (hv, av, t) = visitors_of(r.human, r.ai, h);
        rows.push((r.path.clone(), hv, av, t));
    }
    let hs: u64 = rows.iter().map(|r| r.1).sum();
    let ais: u64 = rows.iter().map(|r| r.2).sum();
    // A person reads a few pages a day: the site counts each once.
    let (sh, sa) = (hs.div_ceil(3), ais.div_ceil(2));
    let both = sh.min(sa) / 20;
    (rows, (sh, sa, sh + sa - both))
}

/// The seconds of `part` (of a day's `0..86_400`) already past at `now`, if any.
fn seconds_seen(
    day: NaiveDate,
    part: std::ops::Range<u64>,
    now: DateTime<Utc>,
) -> Option<(u64, u64)> {
    let start = midnight(day);
    if start > now {
        return None;
    }
    let elapsed = ((now - start).num_seconds().clamp(0, 86_400)) as u64;
    let (from, to) = (part.start.min(86_400), part.end.min(elapsed));
    (from < to).then_some((from, to))
}

/// One search term of a day.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// The term.
    pub query: String,
    /// Searches.
    pub hits: u64,
    /// Clicks per search.
    pub ctr: f64,
    /// The most clicked page.
    pub top: Option<String>,
    /// The last search.
    pub last: DateTime<Utc>,
}

const TEMPLATES: [&str; 6] = [
    "{}",
    "{} example",
    "how to {}",
    "{} api",
    "{} error",
    "configure {}",
];

/// The search terms of the seconds `part` (of `0..86_400`) of a day, as they stand at `now`:
/// a term's searches run from its first second to the end of the day, evenly, so that the
/// parts of a day add up to the day.
pub fn day_searches(
    seed: u64,
    project: &str,
    day: NaiveDate,
    part: std::ops::Range<u64>,
    paths: &[String],
    daily_views: f64,
    now: DateTime<Utc>,
) -> Vec<Search> {
    let Some((from, to)) = seconds_seen(day, part, now) else {
        return Vec::new();
    };
    let n = ((daily_views / 40.0) as u64).clamp(5, 400);
    let mut out = Vec::new();
    // The day's terms, whether this part of the day has searches of them or not: a term drawn
    // twice is the first draw's in every part, so that the parts of a day add up to it.
    let mut drawn = std::collections::HashSet::new();
    for i in 0..n {
        let h = dice(seed, project, day, 2, i);
        // A vocabulary of topics and phrasings; the day's terms are drawn from it.
        let word = super::generate::page_path((h % 320) as u32);
        let topic = word.rsplit('/').next().unwrap_or("docs").replace('-', " ");
        let query = TEMPLATES[((h >> 12) % 6) as usize].replace("{}", &topic);
        if !drawn.insert(query.clone()) {
            continue;
        }
        let base = (200.0 / (i as f64 + 1.0)).ceil() as u64 + (h >> 20) % 5;
        // Searches spread over the day from the term's first one: today has only those made
        // so far, a part of the day those made in it.
        let secs = (h >> 30) % 86_400;
        let upto = |t: u64| {
            if t <= secs {
                0
            } else {
                (base * t).div_ceil(86_400).max(1)
            }
        };
        let hits = upto(to) - upto(from);
        if hits == 0 {
            continue;
        }
        let clicked = (h >> 40) % 100 >= 15;
        let ctr = if clicked {
            ((h >> 48) % 90) as f64 / 100.0 + 0.05
        } else {
            0.0
        };
        let top = clicked.then(|| {
            paths
                .iter()
                .find(|p| p.ends_with(&topic.replace(' ', "-")))
                .cloned()
                .unwrap_or_else(|| {
                    paths[(h % paths.len().max(1) as u64) as usize % paths.len().max(1)].clone()
                })
        });
        let last = at(
            day,
            secs.max(to.saturating_sub(1 + (h >> 8) % 3600))
                .clamp(from, to - 1),
        );
        out.push(Search {
            query,
            hits,
            ctr,
            top,
            last: last.min(now),
        });
    }
    out
}

/// The terms of several days merged: hits summed, ctr weighted by hits, the top page of the
/// day with most hits, the last search the latest; most hits first, then the term.
pub fn merge_searches(days: Vec<Vec<Search>>) -> Vec<Search> {
    let mut by: std::collections::HashMap<String, (Search, u64, f64)> =
        std::collections::HashMap::new();
    for day in days {
        for s in day {
            match by.get_mut(&s.query) {
                None => {
                    let best = s.hits;
                    let clicks = s.ctr * s.hits as f64;
                    by.insert(s.query.clone(), (s, best, clicks));
                }
                Some((m, best, clicks)) => {
                    *clicks += s.ctr * s.hits as f64;
                    if s.hits > *best {
                        *best = s.hits;
                        m.top = s.top.clone();
                    }
                    m.hits += s.hits;
                    m.last = m.last.max(s.last);
                }
            }
        }
    }
    let mut out: Vec<Search> = by
        .into_values()
        .map(|(mut s, _, clicks)| {
            s.ctr = ((clicks / s.hits.max(1) as f64) * 10_000.0).round() / 10_000.0;
            s
        })
        .collect();
    out.sort_by(|a, b| b.hits.cmp(&a.hits).then_with(|| a.query.cmp(&b.query)));
    out
}

/// One feedback entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Feedback {
    /// Id.
    pub id: String,
    /// Page.
    pub path: String,
    /// Comment.
    pub comment: Option<String>,
    /// When it was made (the service lost it for a few: `shown_at` is then null).
    pub made: DateTime<Utc>,
    /// Whether `createdAt` is shown.
    pub dated: bool,
    /// Source.
    pub source: &'static str,
    /// Status at the time asked.
    pub status: &'static str,
    /// Helpful (contextual).
    pub helpful: bool,
    /// Contact (contextual).
    pub contact: Option<String>,
    /// Code snippet fields.
    pub code: Option<(String, Option<String>, Option<String>)>,
}

/// The feedback entries made on a day, with their status at `now` (none after `now`).
pub fn day_feedback(
    seed: u64,
    project: &str,
    day: NaiveDate,
    paths: &[String],
    daily_views: f64,
    now: DateTime<Utc>,
) -> Vec<Feedback> {
    let n = ((daily_views / 150.0) as u64).clamp(2, 300);
    let mut out = Vec::new();
    for i in 0..n {
        let h = dice(seed, project, day, 3, i);
        let made = at(day, h % 86_400);
        if made > now {
            continue;
        }
        // Its own draw: `h`'s high bits place the entry's other traits.
        let r = unit(mix(h ^ 0x0053_4f55_5243_4545));
        let source = if r < 0.5 {
            "contextual"
        } else if r < 0.8 {
            "thumbs_only"
        } else if r < 0.95 {
            "code_snippet"
        } else {
            "agent"
        };
        // Its review moves on: pending, then in progress, then resolved or dismissed.
        let age = (now - made).num_hours();
        let (t1, t2) = (6 + (h >> 10) % 60, 72 + (h >> 20) % 200);
        let status = if age < t1 as i64 {
            "pending"
        } else if age < t2 as i64 {
            "in_progress"
        } else if (h >> 30).is_multiple_of(4) {
            "dismissed"
        } else {
            "resolved"
        };
        let path =
            paths[((h >> 34) % paths.len().max(1) as u64) as usize % paths.len().max(1)].clone();
        let comment = match source {
            "thumbs_only" => None,
            _ if (h >> 40).is_multiple_of(3) => None,
            _ => Some(format!(
                "The {} page {}",
                page_title(&path),
                [
                    "is unclear",
                    "helped a lot",
                    "has a broken example",
                    "misses a step"
                ][((h >> 42) % 4) as usize]
            )),
        };
        let code = (source == "code_snippet").then(|| {
            (
                format!("curl -s https://api.example.com{path}"),
                (h >> 44)
                    .is_multiple_of(2)
                    .then(|| "example.sh".to_string()),
                (!(h >> 45).is_multiple_of(3)).then(|| "bash".to_string()),
            )
        });
        out.push(Feedback {
            id: format!("fb_{:016x}", mix(h ^ 0xFEED)),
            path,
            comment,
            made,
            dated: !(h >> 50).is_multiple_of(25),
            source,
            status,
            helpful: (h >> 52) % 10 < 7,
            contact: (h >> 56)
                .is_multiple_of(5)
                .then(|| format!("reader{}@example.com", (h >> 24) % 1000)),
            code,
        });
    }
    out
}

/// One assistant turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The thread's ULID (the conversation id).
    pub id: String,
    /// When the user asked.
    pub at: DateTime<Utc>,
    /// The question.
    pub query: String,
    /// The answer.
    pub response: String,
    /// `answer` or `clarifying_question`; `None`: the field is left out (meaning `answer`).
    pub response_type: Option<&'static str>,
    /// Cited pages: (title, url).
    pub sources: Vec<(String, String)>,
    /// Answered or not.
    pub answered: bool,
    /// Category, assigned a day after the turn.
    pub category: Option<String>,
    /// Where it was asked.
    pub page_url: Option<String>,
    /// web, api or other.
    pub caller: &'static str,
}

/// One thread: its ULID, its start, its turns.
#[derive(Debug, Clone, PartialEq)]
pub struct Thread {
    /// ULID.
    pub id: String,
    /// Start.
    pub created: DateTime<Utc>,
    /// Turns, in order (all of them, also those after now).
    pub turns: Vec<Turn>,
}

const CATEGORIES: [&str; 5] = [
    "getting-started",
    "api",
    "troubleshooting",
    "configuration",
    "billing",
];

/// The threads started on a day (with every turn; callers filter by `now`).
pub fn day_threads(
    seed: u64,
    project: &str,
    day: NaiveDate,
    paths: &[String],
    daily_views: f64,
    now: DateTime<Utc>,
) -> Vec<Thread> {
    let n = ((daily_views / 200.0) as u64).clamp(2, 500);
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let h = dice(seed, project, day, 4, i);
        let created = at(day, h % 86_400);
        let id = ulid(
            created.timestamp_millis() as u64,
            u128::from(mix(h)) << 16 | u128::from(i),
        );
        let turns_n = 1 + (h >> 20) % 4;
        let mut t = created;
        let mut turns = Vec::new();
        for k in 0..turns_n {
            let g = mix(h ^ (k + 1));
            if k > 0 {
                t += Duration::seconds(30 + (g % 400) as i64);
            }
            let path = &paths[(g >> 8) as usize % paths.len().max(1)];
            let topic = page_title(path).to_lowercase();
            let answered = (g >> 16) % 100 >= 16;
            let clarifying = answered && (g >> 24) % 100 < 8;
            let response_type = if clarifying {
                Some("clarifying_question")
            } else if (g >> 28).is_multiple_of(5) {
                None
            } else {
                Some("answer")
            };
            let sources = turn_sources(project, g, (answered, clarifying), path, paths);
            let response = if !answered {
                format!("I could not find anything about {topic} in the documentation.")
            } else if clarifying {
                format!("Do you mean {topic} in the API or in the dashboard?")
            } else {
                format!("To set up {topic}, open the settings and follow the guide.")
            };
            turns.push(Turn {
                id: id.clone(),
                at: t,
                // The same question in other words: case and punctuation vary.
                query: question(g, &topic),
                response,
                response_type,
                sources,
                answered,
                category: (now - t >= Duration::days(1))
                    .then(|| CATEGORIES[((g >> 44) % 5) as usize].to_string()),
                page_url: (!(g >> 48).is_multiple_of(10))
                    .then(|| format!("https://docs.{project}.example.com{path}")),
                caller: match (g >> 52) % 10 {
                    0..=6 => "web",
                    7 | 8 => "api",
                    _ => "other",
                },
            });
        }
        out.push(Thread { id, created, turns });
    }
    out
}

/// The pages a turn cites: an unanswered turn may cite what it found nearby (not enough to
/// answer), a clarifying question nothing.
fn turn_sources(
    project: &str,
    g: u64,
    (answered, clarifying): (bool, bool),
    path: &str,
    paths: &[String],
) -> Vec<(String, String)> {
    let cited = match (answered, clarifying) {
        (true, false) => (g >> 32) % 4,
        (false, _) => (g >> 32) % 3,
        (true, true) => 0,
    };
    if cited > 0 {
        (0..cited)
            .map(|j| {
                let p = if j == 0 && !answered {
                    path
                } else {
                    &paths[((g >> 36) as usize + j as usize * 7) % paths.len().max(1)]
                };
                (
                    page_title(p),
                    format!("https://docs.{project}.example.com{p}"),
                )
            })
            .collect()
    } else {
        Vec::new()
    }
}

/// A reader's question about `topic`, in one of four wordings; case and punctuation vary (the
/// same question in other words).
fn question(g: u64, topic: &str) -> String {
    let q = format!(
        "{} {topic}?",
        ["How do I use", "Why does", "Where is", "Can I change"][((g >> 40) % 4) as usize]
    );
    match (g >> 58) % 4 {
        1 => q.to_lowercase(),
        2 => q.trim_end_matches('?').to_string(),
        3 => q.replace(' ', "  ").replace('?', " ?"),
        _ => q,
    }
}

/// The texts planted by the data file's `[[readers]]` of one kind, for one project.
fn planted<'a>(
    readers: &'a [super::data::ReaderText],
    project: &'a str,
    kind: super::data::ReaderKind,
) -> impl Iterator<Item = (usize, &'a super::data::ReaderText)> {
    readers
        .iter()
        .enumerate()
        .filter(move |(_, r)| r.project == project && r.kind == kind)
}

/// The planted search terms of the seconds `part` of a day, as they stand at `now`: `per_day`
/// searches spread evenly over the day, none clicked.
pub fn planted_searches(
    readers: &[super::data::ReaderText],
    project: &str,
    day: NaiveDate,
    part: std::ops::Range<u64>,
    now: DateTime<Utc>,
) -> Vec<Search> {
    let Some((from, to)) = seconds_seen(day, part, now) else {
        return Vec::new();
    };
    planted(readers, project, super::data::ReaderKind::Search)
        .filter_map(|(_, r)| {
            let per = u64::from(r.per_day);
            let upto = |t: u64| (per * t).div_ceil(86_400);
            let hits = upto(to) - upto(from);
            (hits > 0).then(|| Search {
                query: r.text.clone(),
                hits,
                ctr: 0.0,
                top: None,
                last: at(day, to - 1).min(now),
            })
        })
        .collect()
}

/// The threads of a day's planted questions: `per_day` conversations of one unanswered turn,
/// evenly spread (with every turn; callers filter by `now`).
pub fn planted_threads(
    seed: u64,
    readers: &[super::data::ReaderText],
    project: &str,
    day: NaiveDate,
    now: DateTime<Utc>,
) -> Vec<Thread> {
    let mut out = Vec::new();
    for (k, r) in planted(readers, project, super::data::ReaderKind::Question) {
        let per = u64::from(r.per_day);
        for i in 0..per {
            let h = dice(seed, project, day, 7, (k as u64) << 32 | i);
            let t = at(day, (i * 86_400 / per + h % 60) % 86_400);
            let id = ulid(t.timestamp_millis() as u64, u128::from(h) << 16 | 0xBEEF);
            out.push(Thread {
                id: id.clone(),
                created: t,
                turns: vec![Turn {
                    id,
                    at: t,
                    query: r.text.clone(),
                    response: "I could not find anything about that in the documentation."
                        .to_string(),
                    response_type: Some("answer"),
                    sources: Vec::new(),
                    answered: false,
                    category: (now - t >= Duration::days(1))
                        .then(|| CATEGORIES[(h % 5) as usize].to_string()),
                    page_url: None,
                    caller: "web",
                }],
            });
        }
    }
    out
}

/// A day's planted feedback comments: `per_day` entries with a thumbs down, on the project's
/// pages, evenly spread (none after `now`).
pub fn planted_feedback(
    seed: u64,
    readers: &[super::data::ReaderText],
    project: &str,
    day: NaiveDate,
    paths: &[String],
    now: DateTime<Utc>,
) -> Vec<Feedback> {
    let mut out = Vec::new();
    for (k, r) in planted(readers, project, super::data::ReaderKind::Feedback) {
        let per = u64::from(r.per_day);
        for i in 0..per {
            let h = dice(seed, project, day, 8, (k as u64) << 32 | i);
            let made = at(day, (i * 86_400 / per + h % 60) % 86_400);
            if made > now {
                continue;
            }
            out.push(Feedback {
                id: format!("fb_{:016x}", mix(h ^ 0x0052_4541_4445_5253)),
                // Each planted text on a page of its own (while there are pages enough).
                path: paths[(k * 7 + 3) % paths.len().max(1)].clone(),
                comment: Some(r.text.clone()),
                made,
                dated: true,
                source: "contextual",
                status: "pending",
                helpful: false,
                contact: None,
                code: None,
            });
        }
    }
    out
}
