//! The analytics operations beside page views, with the OpenAPI file's parameters, limits,
//! validation errors, paging and shapes: visitors (offset), searches (cursor, no `hasMore`),
//! feedback (cursor), feedback by page (`hasMore` and no way to page), assistant conversations
//! (ULID cursor), threads, caller stats. And `/_emulator/truth/{project}/{dataset}`: the whole
//! truth of a range, unpaged, for tests.
//!
//! A range covers the instants in it, for every operation: visitors count each span of 24
//! hours from its start (a local day is one), searches the parts of days in it, feedback and
//! turns those made in it. Choices where the OpenAPI file is silent: feedback by page counts
//! contextual entries' `helpful` as thumbs up/down and every entry in `total`; the conversation
//! `id` is the thread's ULID, repeated by each turn; caller stats' `total` is web + api + other.

use super::analytics::{not_found, parse_query, parse_range};
use super::data::KeyKind;
use super::generate::{hash_str, midnight};
use super::records::{self, Feedback, Search, Thread, parse_ulid, ulid};
use super::{Emulator, Limit, Reply, invalid};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use docpipe_catalog::datasets;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

type Q = Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>;

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A `limit` typed `number` in the OpenAPI file: an integral number within `1..=max`.
fn number_limit(
    q: &HashMap<String, String>,
    max: u64,
    default: u64,
    problems: &mut Vec<String>,
) -> usize {
    match q.get("limit").map(|s| s.parse::<f64>()) {
        None => default as usize,
        Some(Ok(n)) if n.fract() == 0.0 && n >= 1.0 && n <= max as f64 => n as usize,
        Some(_) => {
            problems.push(format!("limit must be a number between 1 and {max}"));
            default as usize
        }
    }
}

/// The UTC days an instant range touches.
fn days_touched(from: NaiveDateTime, to: NaiveDateTime) -> Vec<NaiveDate> {
    let mut out = Vec::new();
    let mut d = from.date();
    while midnight(d) < to && out.len() < 4000 {
        out.push(d);
        d = match d.succ_opt() {
            Some(n) => n,
            None => break,
        };
    }
    out
}

/// A range cut into spans of 24 hours from its start (the last one shorter): the "days" an
/// aggregate of the range counts, as an event store would for any instants (a local day is
/// one span, of 23 or 25 hours across a clock change).
fn spans_of(from: NaiveDateTime, to: NaiveDateTime) -> Vec<(NaiveDateTime, NaiveDateTime)> {
    let mut out = Vec::new();
    let mut a = from;
    // A 25-hour local day is one span, not a day and an hour.
    while a < to && out.len() < 4000 {
        let b = if to - a <= chrono::Duration::hours(25) {
            to
        } else {
            a + chrono::Duration::hours(24)
        };
        out.push((a, b));
        a = b;
    }
    out
}

/// The parts of UTC days a range holds: each day and its seconds in the range.
fn day_parts(from: NaiveDateTime, to: NaiveDateTime) -> Vec<(NaiveDate, std::ops::Range<u64>)> {
    days_touched(from, to)
        .into_iter()
        .map(|d| {
            let start = midnight(d);
            let secs = |t: NaiveDateTime| (t - start).num_seconds().clamp(0, 86_400) as u64;
            (d, secs(from)..secs(to))
        })
        .filter(|(_, r)| r.start < r.end)
        .collect()
}

/// A request's common part: key, budget, query, project.
struct Req {
    project: String,
    q: HashMap<String, String>,
    from: NaiveDateTime,
    to: NaiveDateTime,
    problems: Vec<String>,
}

fn begin(
    emu: &Emulator,
    dataset: &str,
    project: String,
    headers: &HeaderMap,
    query: Q,
) -> Result<Req, super::ApiError> {
    let org = emu.authorize(headers, &[KeyKind::Admin, KeyKind::ReadOnlyAdmin])?;
    emu.take(Limit::Analytics, &org)?;
    let Ok(Query(q)) = query else {
        return Err(invalid(&["query string is not valid".to_string()]));
    };
    let mut problems = Vec::new();
    let (from, to) = parse_range(
        &q,
        emu.data().start_date,
        emu.today(),
        emu.data().faults.utc_days,
        &mut problems,
    );
    emu.owned_project(&org, &project)?;
    emu.in_plan(&project, dataset)?;
    Ok(Req {
        project,
        q,
        from,
        to,
        problems,
    })
}

fn finish(r: &Req) -> Result<(), super::ApiError> {
    if r.problems.is_empty() {
        Ok(())
    } else {
        Err(invalid(&r.problems))
    }
}

/// A signature of what a cursor was made for, so that one of another range is refused.
fn signature(r: &Req, what: &str) -> u64 {
    let mut keys: Vec<(&String, &String)> =
        r.q.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "cursor" | "limit"))
            .collect();
    keys.sort();
    let text = format!("{what}|{}|{keys:?}", r.project);
    hash_str(&text) & 0xFFFF_FFFF_FFFF
}

/// An opaque offset cursor (searches: an aggregate has no stable key order to resume after):
/// the next offset and the signature of the query.
fn make_cursor(r: &Req, what: &str, offset: usize) -> String {
    format!("{what}{offset:x}.{:x}", signature(r, what))
}

/// The offset of an offset cursor, or the problem.
fn read_cursor(r: &Req, what: &str) -> Result<usize, String> {
    let Some(c) = r.q.get("cursor") else {
        return Ok(0);
    };
    let sig = signature(r, what);
    c.strip_prefix(what)
        .and_then(|rest| rest.split_once('.'))
        .and_then(|(o, s)| {
            Some((
                usize::from_str_radix(o, 16).ok()?,
                u64::from_str_radix(s, 16).ok()?,
            ))
        })
        .and_then(|(o, s)| (s == sig).then_some(o))
        .ok_or_else(|| "cursor is not valid for this query".to_string())
}

/// A record's place in a keyset walk: its instant (ms) and its id.
type Place<'a> = (i64, &'a str);

fn hash80(id: &str) -> u128 {
    let h = hash_str(id);
    (u128::from(h) << 16) | u128::from(h >> 48)
}

/// A keyset cursor (feedback, conversations): a ULID of the last row's instant and a hash of its
/// id. The next page starts after that row wherever it now stands, so that rows arriving during
/// a walk (newest first) neither repeat nor push others out of it.
fn keyset_cursor((ms, id): Place<'_>) -> String {
    ulid(ms.max(0) as u64, hash80(id))
}

/// Where the page after a keyset cursor starts in `all` (newest first).
fn keyset_offset<T>(cursor: &str, all: &[T], place: fn(&T) -> Place<'_>) -> Option<usize> {
    let v = parse_ulid(cursor)?;
    let (ms, h) = ((v >> 80) as i64, v & ((1u128 << 80) - 1));
    let found = all.iter().position(|t| {
        let (m, id) = place(t);
        m == ms && hash80(id) & ((1u128 << 80) - 1) == h
    });
    Some(match found {
        Some(i) => i + 1,
        // The row is gone: what is older than it.
        None => all
            .iter()
            .position(|t| place(t).0 < ms)
            .unwrap_or(all.len()),
    })
}

/// The `limit` of a keyset-paged request and its cursor, checked with the rest of its
/// parameters (`bad` is the message for a cursor that is not one).
fn keyset_params(
    r: &mut Req,
    max: u64,
    default: u64,
    bad: &str,
) -> Result<(usize, Option<String>), super::ApiError> {
    let limit = number_limit(&r.q, max, default, &mut r.problems);
    let cursor = r.q.get("cursor").cloned();
    if cursor.as_deref().is_some_and(|c| parse_ulid(c).is_none()) {
        r.problems.push(bad.to_string());
    }
    finish(r)?;
    Ok((limit, cursor))
}

/// One page of `all` after `cursor` as JSON, and the cursor of the next (null at the end).
fn keyset_page<T>(
    all: &[T],
    (limit, cursor): (usize, Option<String>),
    place: fn(&T) -> Place<'_>,
    to_json: fn(&T) -> Value,
) -> (Vec<Value>, Option<String>) {
    let offset = cursor
        .and_then(|c| keyset_offset(&c, all, place))
        .unwrap_or(0);
    let (rows, more) = page(all, offset, limit);
    let next = more
        .then(|| rows.last().map(|t| keyset_cursor(place(t))))
        .flatten();
    (rows.iter().map(to_json).collect(), next)
}

/// The `limit` (within `1..=max`) and the cursor's offset of a cursor-paged request, checked
/// with the rest of its parameters.
fn cursor_params(
    r: &mut Req,
    what: &str,
    max: u64,
    default: u64,
) -> Result<(usize, usize), super::ApiError> {
    let limit = number_limit(&r.q, max, default, &mut r.problems);
    let offset = read_cursor(r, what).unwrap_or_else(|p| {
        r.problems.push(p);
        0
    });
    finish(r)?;
    Ok((limit, offset))
}

/// One page of `all` as JSON and the cursor of the next (null at the end).
fn cursor_page<T>(
    r: &Req,
    what: &str,
    all: &[T],
    (limit, offset): (usize, usize),
    to_json: fn(&T) -> Value,
) -> (Vec<Value>, Option<String>) {
    let (rows, more) = page(all, offset, limit);
    let next = more.then(|| make_cursor(r, what, offset + limit));
    (rows.iter().map(to_json).collect(), next)
}

fn page<T>(all: &[T], offset: usize, limit: usize) -> (&[T], bool) {
    let start = offset.min(all.len());
    let end = offset.saturating_add(limit).min(all.len());
    (&all[start..end], end < all.len())
}

fn project_of<'a>(emu: &'a Emulator, project: &str) -> Option<(&'a [String], f64, u64)> {
    let g = emu.generator(project)?;
    let p = emu.data().projects.iter().find(|p| p.id == project)?;
    Some((g.paths(), p.daily_views, emu.data().seed))
}

// ---- visitors ----

/// Visitors of a range: per page and site-wide; a range of several days counts people who came
/// back once (not the days' sum).
pub fn visitors_truth(
    emu: &Emulator,
    project: &str,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Option<(Vec<Value>, Value)> {
    let (_, _, seed) = project_of(emu, project)?;
    let days = spans_of(from, to);
    let mut per: HashMap<String, [u64; 6]> = HashMap::new();
    let mut site = [0u64; 6];
    for (start, end) in &days {
        let views = emu.truth_between(project, *start, *end)?;
        let (rows, (h, a, t)) = records::day_visitors(seed, project, start.date(), &views);
        for (path, hv, av, tv) in rows {
            let e = per.entry(path).or_default();
            for (i, v) in [hv, av, tv].into_iter().enumerate() {
                e[i] += v;
                e[i + 3] = e[i + 3].max(v);
            }
        }
        for (i, v) in [h, a, t].into_iter().enumerate() {
            site[i] += v;
            site[i + 3] = site[i + 3].max(v);
        }
    }
    let n = days.len() as u64;
    let mut rows: Vec<(String, u64, u64, u64)> = per
        .into_iter()
        .map(|(p, e)| {
            let (h, a) = (
                records::over_days(e[0], e[3], n),
                records::over_days(e[1], e[4], n),
            );
            let t = records::over_days(e[2], e[5], n).min(h + a);
            (p, h, a, t)
        })
        .collect();
    rows.sort_by(|x, y| y.3.cmp(&x.3).then_with(|| x.0.cmp(&y.0)));
    let (h, a) = (
        records::over_days(site[0], site[3], n),
        records::over_days(site[1], site[4], n),
    );
    let t = records::over_days(site[2], site[5], n).min(h + a);
    let rows = rows.into_iter().map(|(path, human, ai, total)| json!({"path": path, "human": human, "ai": ai, "total": total})).collect();
    Some((rows, json!({"human": h, "ai": a, "total": t})))
}

/// `GET /v1/analytics/{projectId}/visitors`.
pub async fn visitors(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    query: Q,
) -> Reply {
    let r = begin(&emu, datasets::VISITORS, project, &headers, query)?;
    // The same parameters as page views, checked the same way.
    let q = parse_query(
        &r.q,
        emu.data().start_date,
        emu.today(),
        emu.data().faults.utc_days,
    )
    .map_err(|p| invalid(&p))?;
    let (offset, limit) = (q.offset, q.limit);
    let (rows, totals) = visitors_truth(&emu, &r.project, r.from, r.to).ok_or_else(not_found)?;
    let (rows, has_more) = page(&rows, offset, limit);
    Ok(Json(json!({"totals": totals, "visitors": rows, "hasMore": has_more})).into_response())
}

// ---- searches ----

fn searches_truth(
    emu: &Emulator,
    project: &str,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Option<Vec<Search>> {
    let (paths, views, seed) = project_of(emu, project)?;
    let now = emu.now();
    let changes = emu.effects(project);
    let days = day_parts(from, to)
        .into_iter()
        .map(|(d, part)| {
            let mut day = records::day_searches(seed, project, d, part.clone(), paths, views, now);
            day.extend(records::planted_searches(
                &emu.data().readers,
                project,
                d,
                part,
                now,
            ));
            super::effects::change_searches(&changes, d, &mut day);
            day
        })
        .collect();
    Some(records::merge_searches(days))
}

fn search_json(s: &Search) -> Value {
    json!({"searchQuery": s.query, "hits": s.hits, "ctr": s.ctr, "topClickedPage": s.top, "lastSearchedAt": ts(s.last)})
}

/// `GET /v1/analytics/{projectId}/searches`.
pub async fn searches(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    query: Q,
) -> Reply {
    let mut r = begin(&emu, datasets::SEARCHES, project, &headers, query)?;
    let at = cursor_params(&mut r, "s", 100, 50)?;
    let all = searches_truth(&emu, &r.project, r.from, r.to).ok_or_else(not_found)?;
    let total: u64 = all.iter().map(|s| s.hits).sum();
    let (rows, next) = cursor_page(&r, "s", &all, at, search_json);
    Ok(Json(json!({"searches": rows, "totalSearches": total, "nextCursor": next})).into_response())
}

// ---- feedback ----

const SOURCES: [&str; 4] = ["code_snippet", "contextual", "agent", "thumbs_only"];
const STATUSES: [&str; 4] = ["pending", "in_progress", "resolved", "dismissed"];

/// Feedback made in the range (newest first), filtered by source and statuses.
fn feedback_truth(
    emu: &Emulator,
    project: &str,
    from: NaiveDateTime,
    to: NaiveDateTime,
    source: Option<&str>,
    statuses: Option<&[String]>,
) -> Option<Vec<Feedback>> {
    let (paths, views, seed) = project_of(emu, project)?;
    let now = emu.now();
    let (from, to) = (from.and_utc(), to.and_utc());
    let mut out: Vec<Feedback> = days_touched(from.naive_utc(), to.naive_utc())
        .into_iter()
        .flat_map(|d| {
            let mut day = records::day_feedback(seed, project, d, paths, views, now);
            day.extend(records::planted_feedback(
                seed,
                &emu.data().readers,
                project,
                d,
                paths,
                now,
            ));
            day
        })
        .filter(|f| f.made >= from && f.made < to)
        .filter(|f| source.is_none_or(|s| f.source == s))
        .filter(|f| statuses.is_none_or(|st| st.iter().any(|s| s == f.status)))
        .collect();
    out.sort_by(|a, b| b.made.cmp(&a.made).then_with(|| a.id.cmp(&b.id)));
    Some(out)
}

fn feedback_json(f: &Feedback) -> Value {
    let mut v = json!({
        "id": f.id, "path": f.path, "comment": f.comment,
        "createdAt": f.dated.then(|| ts(f.made)), "source": f.source, "status": f.status,
    });
    match f.source {
        "contextual" => {
            v["helpful"] = json!(f.helpful);
            v["contact"] = json!(f.contact);
        }
        "code_snippet" => {
            if let Some((code, filename, lang)) = &f.code {
                v["code"] = json!(code);
                v["filename"] = json!(filename);
                v["lang"] = json!(lang);
            }
        }
        _ => {}
    }
    v
}

/// The `source` and `status` filters, checked.
fn filters(r: &mut Req) -> (Option<String>, Option<Vec<String>>) {
    let source = r.q.get("source").cloned();
    if let Some(s) = &source
        && !SOURCES.contains(&s.as_str())
    {
        r.problems
            .push(format!("source must be one of {}", SOURCES.join(", ")));
    }
    let statuses: Option<Vec<String>> =
        r.q.get("status")
            .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    if let Some(st) = &statuses
        && let Some(bad) = st.iter().find(|s| !STATUSES.contains(&s.as_str()))
    {
        r.problems.push(format!(
            "status {bad:?} must be one of {}",
            STATUSES.join(", ")
        ));
    }
    (source, statuses)
}

/// `GET /v1/analytics/{projectId}/feedback`.
pub async fn feedback(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    query: Q,
) -> Reply {
    let mut r = begin(&emu, datasets::FEEDBACK, project, &headers, query)?;
    let (source, statuses) = filters(&mut r);
    let at = keyset_params(&mut r, 100, 50, "cursor is not valid for this query")?;
    let all = feedback_truth(
        &emu,
        &r.project,
        r.from,
        r.to,
        source.as_deref(),
        statuses.as_deref(),
    )
    .ok_or_else(not_found)?;
    let (rows, next) = keyset_page(
        &all,
        at,
        |f| (f.made.timestamp_millis(), &f.id),
        feedback_json,
    );
    let more = next.is_some();
    Ok(Json(json!({"feedback": rows, "nextCursor": next, "hasMore": more})).into_response())
}

fn by_page_truth(all: &[Feedback]) -> Vec<Value> {
    let mut per: HashMap<&str, [u64; 4]> = HashMap::new();
    for f in all {
        let e = per.entry(&f.path).or_default();
        match f.source {
            "contextual" if f.helpful => e[0] += 1,
            "contextual" => e[1] += 1,
            "code_snippet" => e[2] += 1,
            _ => {}
        }
        e[3] += 1;
    }
    let mut rows: Vec<(&str, [u64; 4])> = per.into_iter().collect();
    rows.sort_by(|a, b| b.1[3].cmp(&a.1[3]).then_with(|| a.0.cmp(b.0)));
    rows.into_iter()
        .map(|(p, c)| json!({"path": p, "thumbsUp": c[0], "thumbsDown": c[1], "code": c[2], "total": c[3]}))
        .collect()
}

/// `GET /v1/analytics/{projectId}/feedback/by-page`.
pub async fn feedback_by_page(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    query: Q,
) -> Reply {
    let mut r = begin(&emu, datasets::FEEDBACK_BY_PAGE, project, &headers, query)?;
    let limit = number_limit(&r.q, 100, 10, &mut r.problems);
    let (source, statuses) = filters(&mut r);
    finish(&r)?;
    let all = feedback_truth(
        &emu,
        &r.project,
        r.from,
        r.to,
        source.as_deref(),
        statuses.as_deref(),
    )
    .ok_or_else(not_found)?;
    let rows = by_page_truth(&all);
    let (rows, more) = page(&rows, 0, limit);
    Ok(Json(json!({"feedback": rows, "hasMore": more})).into_response())
}

// ---- assistant ----

/// The threads started on a day: generated, and those of the planted questions.
fn day_threads(emu: &Emulator, project: &str, day: NaiveDate, now: DateTime<Utc>) -> Vec<Thread> {
    let Some((paths, views, seed)) = project_of(emu, project) else {
        return Vec::new();
    };
    let mut out = records::day_threads(seed, project, day, paths, views, now);
    out.extend(records::planted_threads(
        seed,
        &emu.data().readers,
        project,
        day,
        now,
    ));
    out
}

/// Threads with a turn in the range, and the turns in it (newest first), as of now.
fn turns_truth(
    emu: &Emulator,
    project: &str,
    from: NaiveDateTime,
    to: NaiveDateTime,
) -> Option<Vec<records::Turn>> {
    project_of(emu, project)?;
    let now = emu.now();
    let (from, to) = (from.and_utc(), to.and_utc());
    // A thread's turns may run past midnight: the day before is looked at too.
    let start = from.date_naive().pred_opt()?;
    let mut turns: Vec<records::Turn> = days_touched(midnight(start), to.naive_utc())
        .into_iter()
        .flat_map(|d| day_threads(emu, project, d, now))
        .flat_map(|t| t.turns)
        .filter(|t| t.at >= from && t.at < to && t.at <= now)
        .collect();
    super::effects::change_turns(&emu.effects(project), &mut turns);
    turns.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.id.cmp(&b.id)));
    Some(turns)
}

impl Emulator {
    /// Whether the assistant's turns of the last 28 days left `question` (in any case or
    /// punctuation) unanswered, as the analytics show them now: the v1 assistant does not
    /// answer it either, until a job's change answers it.
    pub fn unanswered_lately(&self, project: &str, question: &str) -> bool {
        let now = self.now().naive_utc();
        let asked = super::effects::normalised(question);
        turns_truth(self, project, now - chrono::Duration::days(28), now).is_some_and(|turns| {
            turns
                .iter()
                .any(|t| !t.answered && super::effects::normalised(&t.query) == asked)
        })
    }
}

fn turn_json(t: &records::Turn) -> Value {
    let mut v = json!({
        "id": t.id, "timestamp": ts(t.at), "query": t.query, "response": t.response,
        "sources": t.sources.iter().map(|(title, url)| json!({"title": title, "url": url})).collect::<Vec<_>>(),
        "resolutionStatus": if t.answered { "answered" } else { "unanswered" },
        "queryCategory": t.category, "pageUrl": t.page_url,
    });
    if let Some(rt) = t.response_type {
        v["responseType"] = json!(rt);
    }
    v
}

/// `GET /v1/analytics/{projectId}/assistant`.
pub async fn conversations(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    query: Q,
) -> Reply {
    let mut r = begin(&emu, datasets::ASSISTANT, project, &headers, query)?;
    let at = keyset_params(&mut r, 1000, 100, "cursor must be a ULID")?;
    let all = turns_truth(&emu, &r.project, r.from, r.to).ok_or_else(not_found)?;
    let (rows, next) = keyset_page(&all, at, |t| (t.at.timestamp_millis(), &t.id), turn_json);
    let more = next.is_some();
    Ok(Json(json!({"conversations": rows, "nextCursor": next, "hasMore": more})).into_response())
}

/// A thread by its ULID, as of now.
fn find_thread(emu: &Emulator, project: &str, id: &str) -> Option<Thread> {
    let v = parse_ulid(id)?;
    let ms = (v >> 80) as i64;
    let created = DateTime::from_timestamp_millis(ms)?;
    project_of(emu, project)?;
    let now = emu.now();
    if created > now {
        return None;
    }
    let mut t = day_threads(emu, project, created.date_naive(), now)
        .into_iter()
        .find(|t| t.id == id)?;
    t.turns.retain(|x| x.at <= now);
    super::effects::change_turns(&emu.effects(project), &mut t.turns);
    Some(t)
}

fn thread_json(t: &Thread) -> Value {
    let mut messages = Vec::new();
    for (i, turn) in t.turns.iter().enumerate() {
        let ms = turn.at.timestamp_millis() as u64;
        let answered_at = turn.at + chrono::Duration::seconds(4);
        messages.push(json!({"id": ulid(ms, (i as u128) << 1), "role": "user", "content": turn.query, "createdAt": ts(turn.at)}));
        messages.push(json!({"id": ulid(ms + 4000, ((i as u128) << 1) | 1), "role": "assistant", "content": turn.response, "createdAt": ts(answered_at)}));
    }
    json!({"threadId": t.id, "createdAt": ts(t.created), "messages": messages})
}

/// `GET /v1/analytics/{projectId}/assistant/threads/{threadId}`.
pub async fn thread(
    State(emu): State<Arc<Emulator>>,
    Path((project, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Reply {
    let org = emu.authorize(&headers, &[KeyKind::Admin, KeyKind::ReadOnlyAdmin])?;
    emu.take(Limit::Analytics, &org)?;
    emu.owned_project(&org, &project)?;
    emu.in_plan(&project, "threads")?;
    if parse_ulid(&id).is_none() {
        return Err(super::error(StatusCode::BAD_REQUEST, "Invalid thread ID"));
    }
    let body = emu
        .asked_thread(&project, &id)
        .or_else(|| find_thread(&emu, &project, &id).map(|t| thread_json(&t)))
        .ok_or_else(|| super::error(StatusCode::NOT_FOUND, "Thread not found"))?;
    Ok(Json(body).into_response())
}

fn caller_truth(turns: &[records::Turn]) -> Value {
    let count = |c: &str| turns.iter().filter(|t| t.caller == c).count();
    let (web, api, other) = (count("web"), count("api"), count("other"));
    json!({"web": web, "api": api, "other": other, "total": web + api + other})
}

/// `GET /v1/analytics/{projectId}/assistant/caller-stats`.
pub async fn caller_stats(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    query: Q,
) -> Reply {
    let r = begin(&emu, datasets::CALLER_STATS, project, &headers, query)?;
    finish(&r)?;
    let turns = turns_truth(&emu, &r.project, r.from, r.to).ok_or_else(not_found)?;
    Ok(Json(caller_truth(&turns)).into_response())
}

/// `GET /_emulator/truth/{project}/{dataset}?dateFrom&dateTo[&thread]`: a dataset's whole truth
/// for a range, unpaged, no key, no budget (tests compare exports with it).
pub async fn truth(
    State(emu): State<Arc<Emulator>>,
    Path((project, dataset)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    let mut problems = Vec::new();
    let (from, to) = parse_range(&q, emu.data().start_date, emu.today(), false, &mut problems);
    if !problems.is_empty() {
        return Err(invalid(&problems));
    }
    let p = project.as_str();
    let body = match dataset.as_str() {
        datasets::VISITORS => visitors_truth(&emu, p, from, to).map(|(rows, totals)| json!({"totals": totals, "visitors": rows, "hasMore": false})),
        datasets::SEARCHES => searches_truth(&emu, p, from, to).map(|all| {
            let total: u64 = all.iter().map(|s| s.hits).sum();
            json!({"searches": all.iter().map(search_json).collect::<Vec<_>>(), "totalSearches": total, "nextCursor": null})
        }),
        datasets::FEEDBACK => feedback_truth(&emu, p, from, to, None, None).map(|all| json!({"feedback": all.iter().map(feedback_json).collect::<Vec<_>>(), "nextCursor": null, "hasMore": false})),
        datasets::FEEDBACK_BY_PAGE => feedback_truth(&emu, p, from, to, None, None).map(|all| json!({"feedback": by_page_truth(&all), "hasMore": false})),
        datasets::ASSISTANT => turns_truth(&emu, p, from, to).map(|all| json!({"conversations": all.iter().map(turn_json).collect::<Vec<_>>(), "nextCursor": null, "hasMore": false})),
        datasets::CALLER_STATS => turns_truth(&emu, p, from, to).map(|all| caller_truth(&all)),
        datasets::THREADS => q.get("thread").and_then(|id| find_thread(&emu, p, id)).map(|t| thread_json(&t)),
        _ => None,
    };
    body.map(|b| Json(b).into_response()).ok_or_else(not_found)
}
