//! One project's day of the stream as tables: its events read back from the lake, the new ones
//! added (an id already there is a duplicate), each classified by the agents table, and the
//! day's `events`, `agent_daily`, `agent_pages`, `ai_referrals` and `unknown_agents` partitions
//! written, each in place when it returns.

use crate::batch::{Ev, Strings};
use crate::line::{push_hex64, push_uuid, uuid_text};
use arrow_array::{Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use chrono::NaiveDate;
use docpipe_agents::{Agents, Class, Surface, Who, surface, unmasked};
use docpipe_catalog::layout::{PART, partition_dir};
use docpipe_catalog::tables;
use docpipe_write::coded::NONE;
use docpipe_write::derived::Columns;
use docpipe_write::parquet::{WriteError, read_file, remove_partition};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Whether an event is a read of a page (what `agent_daily` counts).
pub fn is_read(event: &str) -> bool {
    event == "docs.content.view"
        || event == "docs.content.md.view"
        || event.starts_with("docs.mcp.")
}

/// Who read, classified once per user agent, and what, once per event and path.
pub struct Classifier<'a> {
    agents: &'a Agents,
    /// The [`Strings`] the index caches are of.
    strings: u64,
    who: Vec<Who>,
    /// By the texts' index (the caches of an event are places in a list, not look-ups in a
    /// map; `None`: not yet known): who each user agent is, the surface each event name and
    /// each path says alone.
    by_agent: Vec<Option<u32>>,
    by_event: Vec<Option<Surface>>,
    by_path: Vec<Option<Surface>>,
    by_who_surface: HashMap<(u32, Surface), u32, foldhash::fast::RandomState>,
}

/// An event's surface from what its name and its path each say alone (the name with no path,
/// the path with no name: `surface` reads them in this order of precedence): the same as
/// `surface(name, path)`, each part found once per text.
pub(crate) fn combined(by_event: Surface, by_path: Surface) -> Surface {
    match (by_path, by_event) {
        (Surface::LlmsTxt, _) => Surface::LlmsTxt,
        (Surface::Markdown, _) | (_, Surface::Markdown) => Surface::Markdown,
        (Surface::Mcp, _) | (_, Surface::Mcp) => Surface::Mcp,
        (p, _) => p,
    }
}

/// The value cached at `i` in `list`, found by `find` the first time (the list grows to hold
/// `i`).
fn cached<T: Copy>(list: &mut Vec<Option<T>>, i: u32, find: impl FnOnce() -> T) -> T {
    let i = i as usize;
    if i >= list.len() {
        list.resize(i + 1, None);
    }
    *list[i].get_or_insert_with(find)
}

impl<'a> Classifier<'a> {
    /// A classifier over `agents` (its caches start empty).
    pub fn new(agents: &'a Agents) -> Self {
        Self {
            agents,
            strings: 0,
            who: Vec::new(),
            by_agent: Vec::new(),
            by_event: Vec::new(),
            by_path: Vec::new(),
            by_who_surface: HashMap::default(),
        }
    }

    /// Who read `ev` (an index into [`Self::who`]) and on what surface.
    pub fn read(&mut self, strings: &Strings, ev: &Ev) -> (u32, Surface) {
        if strings.id() != self.strings {
            // Indexes of another table of texts: the caches by index do not hold.
            self.strings = strings.id();
            self.by_agent.clear();
            self.by_event.clear();
            self.by_path.clear();
        }
        let text = |i: u32| strings.get(i).unwrap_or("");
        let by_event = cached(&mut self.by_event, ev.event, || surface(text(ev.event), ""));
        let by_path = cached(&mut self.by_path, ev.path, || surface("", text(ev.path)));
        let s = combined(by_event, by_path);
        let known = self.by_agent.get(ev.user_agent as usize).copied().flatten();
        let named = match known {
            Some(w) => w,
            None => {
                let w = self.push(self.agents.who(text(ev.user_agent)));
                cached(&mut self.by_agent, ev.user_agent, || w)
            }
        };
        if !s.is_for_agents() || self.who[named as usize].class != Class::Human {
            return (named, s);
        }
        if let Some(&w) = self.by_who_surface.get(&(named, s)) {
            return (w, s);
        }
        let w = self.push(unmasked(self.who[named as usize].clone(), s));
        self.by_who_surface.insert((named, s), w);
        (w, s)
    }

    fn push(&mut self, who: Who) -> u32 {
        if let Some(i) = self.who.iter().position(|w| *w == who) {
            return i as u32;
        }
        self.who.push(who);
        (self.who.len() - 1) as u32
    }

    /// Who each index is.
    pub fn who(&self, i: u32) -> &Who {
        &self.who[i as usize]
    }

    /// The table's version.
    pub fn version(&self) -> &str {
        self.agents.version()
    }

    /// The operator of the AI product at a referrer's host.
    pub fn referrer(&self, host: &str) -> Option<&str> {
        self.agents.referrer(host)
    }
}

/// A project's day: where its tables go.
#[derive(Debug, Clone, Copy)]
pub struct Day<'a> {
    /// The output folder.
    pub out: &'a Path,
    /// The project.
    pub project: &'a str,
    /// The local day.
    pub date: NaiveDate,
}

impl Day<'_> {
    fn dir(&self, table: &str) -> PathBuf {
        partition_dir(self.out, table, self.project, self.date)
    }
}

/// What writing a day came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Events new to the lake.
    pub added: u64,
    /// Events read again: an id the day held already, in the lake or earlier among the new.
    pub duplicates: u64,
    /// The day's events now.
    pub events: u64,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// The day's events in the lake (none when it has no partition), their texts in `strings`.
pub fn read_events(day: &Day<'_>, strings: &mut Strings) -> Result<Vec<Ev>, WriteError> {
    let file = day.dir(tables::EVENTS.name).join(PART);
    if !file.is_file() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for batch in read_file(&file)? {
        events_of(&batch, strings, &mut out).map_err(|message| WriteError::Encode {
            path: file.display().to_string(),
            message,
        })?;
    }
    Ok(out)
}

/// A column of a file read back, as the Arrow array docpipe writes it (`T`), or one line saying
/// it is not there.
pub(crate) fn column<'b, T: 'static>(batch: &'b RecordBatch, name: &str) -> Result<&'b T, String> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| format!("no column {name} of the type docpipe writes"))
}

fn text<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b StringArray, String> {
    column(batch, name)
}

fn opt(a: &StringArray, i: usize) -> Option<&str> {
    (!a.is_null(i)).then(|| a.value(i))
}

fn events_of(batch: &RecordBatch, strings: &mut Strings, out: &mut Vec<Ev>) -> Result<(), String> {
    let ids = text(batch, "event_id")?;
    let at = column::<TimestampMicrosecondArray>(batch, "at")?;
    let (event, path, ua) = (
        text(batch, "event")?,
        text(batch, "path")?,
        text(batch, "user_agent")?,
    );
    let (referrer, session) = (text(batch, "referrer_host")?, text(batch, "session")?);
    for i in 0..batch.num_rows() {
        let (id, uuid) = crate::line::id_bits(ids.value(i));
        let uuid = uuid && uuid_text(id) == ids.value(i);
        out.push(Ev {
            id,
            at: at.value(i),
            session: opt(session, i)
                .and_then(|s| u64::from_str_radix(s, 16).ok())
                .unwrap_or(0),
            raw_id: if uuid {
                0
            } else {
                strings.of(Some(ids.value(i)))
            },
            event: strings.of(Some(event.value(i))),
            path: strings.of(opt(path, i)),
            user_agent: strings.of(opt(ua, i)),
            referrer: strings.of(opt(referrer, i)),
        });
    }
    Ok(())
}

/// Adds `new` to the day's events in the lake and writes the day's tables again.
pub fn write_day(
    day: &Day<'_>,
    strings: &mut Strings,
    new: &[Ev],
    classify: &mut Classifier<'_>,
) -> Result<Written, WriteError> {
    let mut events = read_events(day, strings)?;
    let mut written = Written::default();
    add_new(&mut events, new, &mut written);
    if written.added == 0 && !new.is_empty() {
        return Ok(written);
    }
    written.events = events.len() as u64;
    let reads: Vec<(u32, Surface)> = events.iter().map(|e| classify.read(strings, e)).collect();
    let sessions = Sessions::of(&events);
    let order = order(&events);
    let read = Read {
        events: &events,
        reads: &reads,
        sessions: &sessions,
        order: &order,
    };
    let rows = Rows::of(read, strings, classify);
    written.files = rows.write(day, read, strings, classify)?;
    Ok(written)
}

/// Adds to the day's events (the lake's) each of `new` whose id the day does not hold yet, and
/// counts the others as read again. The day's ids are found through a table of their places in
/// `events`, 4 bytes each and given their room at once (never grown): it stays in the cache
/// where a table of the ids themselves, 16 bytes each, did not.
fn add_new(events: &mut Vec<Ev>, new: &[Ev], written: &mut Written) {
    let state = foldhash::fast::RandomState::default();
    let hash = |id: u128| std::hash::BuildHasher::hash_one(&state, id);
    let mut had = hashbrown::HashTable::<u32>::with_capacity(events.len() + new.len());
    for (i, e) in (0u32..).zip(events.iter()) {
        had.insert_unique(hash(e.id), i, |&j| hash(events[j as usize].id));
    }
    // Room for the new events at once (grown a push at a time, the day was copied at each
    // doubling: 5.5 million instructions of 234 writing the bench's 50,000).
    events.reserve(new.len());
    for e in new {
        let h = hash(e.id);
        if had.find(h, |&j| events[j as usize].id == e.id).is_some() {
            written.duplicates += 1;
        } else {
            written.added += 1;
            // A day's places fit 4 bytes, as `order`'s do.
            had.insert_unique(h, events.len() as u32, |&j| hash(events[j as usize].id));
            events.push(*e);
        }
    }
}

/// A day's events as read: each one's reader and surface and its session's code, and the
/// order they are written in.
#[derive(Clone, Copy)]
struct Read<'e> {
    events: &'e [Ev],
    reads: &'e [(u32, Surface)],
    sessions: &'e Sessions,
    order: &'e [u32],
}

/// The places of `events` in order of time, then id ((time, id) is unique: ids are
/// deduplicated): the order the `events` table is written in, its rows gathered through it
/// (the events are not moved into that order: nothing else needs it). Each key is the time
/// after the day's first and the place packed into one number (8 bytes a key where a pair took
/// 16) when the day's span and count fit, as they do for any day's events.
pub(crate) fn order(events: &[Ev]) -> Vec<u32> {
    let bits = usize::BITS - events.len().leading_zeros();
    let first = events.iter().map(|e| e.at).min().unwrap_or_default();
    let last = events.iter().map(|e| e.at).max().unwrap_or_default();
    let span = (i128::from(last) - i128::from(first)) as u128;
    // The places in order of time, and where each run of one time ends.
    let (mut places, ends): (Vec<u32>, Vec<usize>) =
        if bits > 0 && bits < 64 && span >> (64 - bits) == 0 {
            let mut keys: Vec<u64> = (0u64..)
                .zip(events)
                .map(|(i, e)| ((e.at - first) as u64) << bits | i)
                .collect();
            radsort::sort(&mut keys);
            let mask = (1u64 << bits) - 1;
            (
                keys.iter().map(|&k| (k & mask) as u32).collect(),
                run_ends(&keys, |k| k >> bits),
            )
        } else {
            let mut keys: Vec<(i64, u32)> = (0u32..).zip(events).map(|(i, e)| (e.at, i)).collect();
            keys.sort_unstable();
            (
                keys.iter().map(|&(_, i)| i).collect(),
                run_ends(&keys, |k| k.0),
            )
        };
    let mut start = 0;
    for end in ends {
        if end - start > 1 {
            places[start..end].sort_unstable_by_key(|&i| events[i as usize].id);
        }
        start = end;
    }
    places
}

/// Where each run of equal times in `keys` ends (its last key's place, plus one).
fn run_ends<K, T: PartialEq>(keys: &[K], time: impl Fn(&K) -> T) -> Vec<usize> {
    let mut ends: Vec<usize> = (1..keys.len())
        .filter(|&j| time(&keys[j]) != time(&keys[j - 1]))
        .collect();
    if !keys.is_empty() {
        ends.push(keys.len());
    }
    ends
}

/// The day's derived rows.
struct Rows {
    daily: Vec<AgentDay>,
    pages: Vec<AgentPage>,
    referrals: Vec<Referral>,
    unknown: Vec<UnknownAgent>,
}

struct AgentDay {
    who: u32,
    surface: Surface,
    events: i64,
    pages: i64,
    sessions: i64,
}

struct AgentPage {
    path: u32,
    who: u32,
    surface: Surface,
    events: i64,
}

struct Referral {
    operator: String,
    host: u32,
    path: u32,
    views: i64,
    sessions: i64,
}

struct UnknownAgent {
    user_agent: u32,
    who: u32,
    events: i64,
    pages: i64,
}

type Acc = (i64, BTreeSet<u32>, BTreeSet<u64>);

fn add(acc: &mut Acc, path: u32, session: u64) {
    acc.0 += 1;
    if path != 0 {
        acc.1.insert(path);
    }
    if session != 0 {
        acc.2.insert(session);
    }
}

/// Each key of `rows` in order, with its rows, its distinct pages and its distinct sessions
/// (0 is none, not counted), each count from the sorted (key, page) and (key, session) pairs
/// ([`sorted_pairs`]; a sort by tuples cost four times as much).
pub(crate) fn tally(rows: &[(u64, u32, u64)]) -> Vec<(u64, i64, i64, i64)> {
    let mut out: Vec<(u64, i64, i64, i64)> = Vec::new();
    let pages = rows.iter().map(|&(k, p, _)| (k, u64::from(p)));
    sorted_pairs(pages, |(k, page), repeat| {
        if out.last().is_none_or(|o| o.0 != k) {
            out.push((k, 0, 0, 0));
        }
        if let Some(o) = out.last_mut() {
            o.1 += 1;
            o.2 += i64::from(page != 0 && !repeat);
        }
    });
    let mut at = 0;
    sorted_pairs(
        rows.iter().map(|&(k, _, s)| (k, s)),
        |(k, session), repeat| {
            while out[at].0 != k {
                at += 1;
            }
            if session != 0 && !repeat {
                out[at].3 += 1;
            }
        },
    );
    out
}

/// `pairs` in order, each handed to `each` with whether it repeats the one before. They are
/// sorted packed into one number each by a radix sort: of 8 bytes when both halves fit in 32
/// bits (as a day's readers and surfaces, pages and numbered sessions do), else of 16.
fn sorted_pairs(
    pairs: impl Iterator<Item = (u64, u64)> + Clone,
    each: impl FnMut((u64, u64), bool),
) {
    fn walk<K: radsort::Key + Ord + Copy>(
        mut packed: Vec<K>,
        split: impl Fn(K) -> (u64, u64),
        mut each: impl FnMut((u64, u64), bool),
    ) {
        radsort::sort(&mut packed);
        for (j, &n) in packed.iter().enumerate() {
            each(split(n), j > 0 && packed[j - 1] == n);
        }
    }
    if pairs.clone().all(|(k, v)| (k | v) >> 32 == 0) {
        let packed = pairs.map(|(k, v)| k << 32 | v).collect();
        walk(packed, |n: u64| (n >> 32, n & 0xffff_ffff), each);
    } else {
        let packed = pairs
            .map(|(k, v)| u128::from(k) << 64 | u128::from(v))
            .collect();
        walk(packed, |n: u128| ((n >> 64) as u64, n as u64), each);
    }
}

/// Each distinct value of `rows` in order, with how many times it comes.
pub(crate) fn runs<K: radsort::Key + Ord + Copy>(mut rows: Vec<K>) -> Vec<(K, i64)> {
    radsort::sort(&mut rows);
    let mut out: Vec<(K, i64)> = Vec::new();
    for k in rows {
        match out.last_mut() {
            Some(o) if o.0 == k => o.1 += 1,
            _ => out.push((k, 1)),
        }
    }
    out
}

/// Who read and on what surface, packed into one number that sorts as the pair does.
fn read_key(who: u32, surface: Surface) -> u64 {
    u64::from(who) << 8 | u64::from(surface.index())
}

/// The pair [`read_key`] packed.
fn of_read_key(key: u64) -> (u32, Surface) {
    let surface = Surface::ALL[usize::from(key as u8) % Surface::ALL.len()];
    ((key >> 8) as u32, surface)
}

fn count<T>(s: &BTreeSet<T>) -> i64 {
    s.len() as i64
}

impl Rows {
    fn of(read: Read<'_>, strings: &Strings, c: &Classifier<'_>) -> Self {
        let (events, reads, sessions) = (read.events, read.reads, read.sessions);
        // The two tables with a row per read are counted from sorted lists (a set per key
        // cost more than the rest of the day); the rare ones from ordered maps.
        let mut daily: Vec<(u64, u32, u64)> = Vec::with_capacity(events.len());
        let mut pages: Vec<u128> = Vec::new();
        let mut referrals: BTreeMap<(String, u32, u32), Acc> = BTreeMap::new();
        let mut unknown: BTreeMap<(u32, u32), Acc> = BTreeMap::new();
        let mut operators: HashMap<u32, Option<&str>, foldhash::fast::RandomState> =
            HashMap::default();
        for ((e, &(who, surface)), &session) in events.iter().zip(reads).zip(&sessions.codes) {
            if !is_read(strings.get(e.event).unwrap_or("")) {
                continue;
            }
            let key = read_key(who, surface);
            let session = Sessions::number(session);
            daily.push((key, e.path, session));
            let class = c.who(who).class;
            if class != Class::Human && e.path != 0 {
                pages.push(u128::from(e.path) << 64 | u128::from(key));
            }
            if class == Class::Unknown && c.who(who).agent != docpipe_agents::MASKED {
                add(unknown.entry((e.user_agent, who)).or_default(), e.path, 0);
            }
            if class != Class::Human || e.path == 0 || e.referrer == 0 {
                continue;
            }
            // A host's operator found once (a day's referrers are few).
            let operator = *operators
                .entry(e.referrer)
                .or_insert_with(|| strings.get(e.referrer).and_then(|h| c.referrer(h)));
            if let Some(op) = operator {
                let key = (op.to_string(), e.referrer, e.path);
                add(referrals.entry(key).or_default(), e.path, session);
            }
        }
        Self {
            daily: tally(&daily)
                .into_iter()
                .map(|(key, events, pages, sessions)| {
                    let (who, surface) = of_read_key(key);
                    AgentDay {
                        who,
                        surface,
                        events,
                        pages,
                        sessions,
                    }
                })
                .collect(),
            pages: runs(pages)
                .into_iter()
                .map(|(key, events)| {
                    let (who, surface) = of_read_key(key as u64);
                    AgentPage {
                        path: (key >> 64) as u32,
                        who,
                        surface,
                        events,
                    }
                })
                .collect(),
            referrals: referrals
                .into_iter()
                .map(|((operator, host, path), (n, _, s))| Referral {
                    operator,
                    host,
                    path,
                    views: n,
                    sessions: count(&s),
                })
                .collect(),
            unknown: unknown
                .into_iter()
                .map(|((user_agent, who), (n, p, _))| UnknownAgent {
                    user_agent,
                    who,
                    events: n,
                    pages: count(&p),
                })
                .collect(),
        }
    }

    fn write(
        &self,
        day: &Day<'_>,
        read: Read<'_>,
        s: &Strings,
        c: &Classifier<'_>,
    ) -> Result<Vec<PathBuf>, WriteError> {
        let version = c.version();
        let op = |w: u32| Some(c.who(w).operator.as_str()).filter(|o| !o.is_empty());
        let mut files = vec![write_events(day, read, s, c)?];
        // Who read and the surface are written from their codes, as in `events`.
        let agent = |w: u32| Some(c.who(w).agent.as_str());
        let operator = |w: u32| if op(w).is_some() { w } else { NONE };
        let class = |w: u32| Some(c.who(w).class.as_str());
        let surface = |i: u32| Surface::ALL.get(i as usize).map(|s| s.as_str());
        let t = &tables::AGENT_DAILY;
        files.extend(put(day, t.name, &self.daily, |cols| {
            cols.coded("agent", false, agent, |r| r.who)
                .coded("operator", true, op, |r| operator(r.who))
                .coded("class", false, class, |r| r.who)
                .coded("surface", false, surface, |r| u32::from(r.surface.index()))
                .int("events", false, |r| Some(r.events))
                .int("pages", false, |r| Some(r.pages))
                .int("sessions", false, |r| Some(r.sessions))
                .coded("agents_version", false, move |_| Some(version), |_| 0)
        })?);
        files.extend(put(day, tables::AGENT_PAGES.name, &self.pages, |cols| {
            cols.coded("path", false, |i| s.get(i), |r| r.path)
                .coded("agent", false, agent, |r| r.who)
                .coded("operator", true, op, |r| operator(r.who))
                .coded("class", false, class, |r| r.who)
                .coded("surface", false, surface, |r| u32::from(r.surface.index()))
                .int("events", false, |r| Some(r.events))
                .coded("agents_version", false, move |_| Some(version), |_| 0)
        })?);
        files.extend(put(
            day,
            tables::AI_REFERRALS.name,
            &self.referrals,
            |cols| {
                cols.text("operator", false, |r| Some(r.operator.as_str()))
                    .text("referrer_host", false, |r| s.get(r.host))
                    .text("path", false, |r| s.get(r.path))
                    .int("views", false, |r| Some(r.views))
                    .int("sessions", false, |r| Some(r.sessions))
                    .text("agents_version", false, |_| Some(version))
            },
        )?);
        files.extend(put(
            day,
            tables::UNKNOWN_AGENTS.name,
            &self.unknown,
            |cols| {
                cols.text("user_agent", false, |r| {
                    Some(s.get(r.user_agent).unwrap_or(""))
                })
                .text("agent", false, |r| Some(c.who(r.who).agent.as_str()))
                .int("events", false, |r| Some(r.events))
                .int("pages", false, |r| Some(r.pages))
                .text("agents_version", false, |_| Some(version))
            },
        )?);
        Ok(files)
    }
}

/// Writes `rows` as the day's partition of `table`, or removes it when there are none.
fn put<'r, R>(
    day: &Day<'_>,
    table: &str,
    rows: &'r [R],
    columns: impl Fn(Columns<'r, R>) -> Columns<'r, R>,
) -> Result<Option<PathBuf>, WriteError> {
    let dir = day.dir(table);
    if rows.is_empty() {
        remove_partition(&dir)?;
        return Ok(None);
    }
    Columns::write_chunked(&dir, rows, CHUNK, columns).map(Some)
}

/// The rows of the `events` table made into arrays and encoded at a time (its memory is a
/// chunk's, whatever the day's size).
const CHUNK: usize = 8_192;

fn write_events(
    day: &Day<'_>,
    read: Read<'_>,
    s: &Strings,
    c: &Classifier<'_>,
) -> Result<PathBuf, WriteError> {
    let rows: Vec<(&Ev, u32, Surface, u32)> = read
        .order
        .iter()
        .map(|&i| {
            let i = i as usize;
            let (w, sf) = read.reads[i];
            (&read.events[i], w, sf, read.sessions.codes[i])
        })
        .collect();
    let sessions = read.sessions;
    let version = c.version();
    let dir = day.dir(tables::EVENTS.name);
    // The texts of few values are written from their codes: an interned text's index, who read,
    // the surface (docpipe_write::coded).
    let code = |i: u32| if i == 0 { NONE } else { i };
    let text = |i: u32| s.get(i);
    let surface = |i: u32| Surface::ALL.get(i as usize).map(|s| s.as_str());
    let agent = |w: u32| Some(c.who(w).agent.as_str());
    let operator = |w: u32| Some(c.who(w).operator.as_str());
    let class = |w: u32| Some(c.who(w).class.as_str());
    Columns::write_chunked(&dir, &rows, CHUNK, |cols| {
        cols.text_written("event_id", false, 36, |r, out| {
            match s.get(r.0.raw_id) {
                Some(raw) => out.extend_from_slice(raw.as_bytes()),
                None => push_uuid(r.0.id, out),
            }
            true
        })
        .micros("at", false, |r| Some(r.0.at))
        .coded("event", false, text, |r| code(r.0.event))
        .coded("path", true, text, |r| code(r.0.path))
        .coded("surface", false, surface, |r| u32::from(r.2.index()))
        .coded("user_agent", true, text, |r| code(r.0.user_agent))
        .coded("agent", false, agent, |r| r.1)
        .coded("operator", true, operator, |r| {
            if c.who(r.1).operator.is_empty() {
                NONE
            } else {
                r.1
            }
        })
        .coded("class", false, class, |r| r.1)
        .coded("agents_version", false, move |_| Some(version), |_| 0)
        .coded("referrer_host", true, text, |r| code(r.0.referrer))
        .coded("session", true, |k| sessions.text(k), |r| r.3)
    })
}

/// A day's sessions, each once: each event's session as a code (`NONE`: none), and the codes'
/// texts (each hash's 16 hex digits, the code's at 16 times it). A session reads a few pages,
/// so `events` writes its text once, in the dictionary, and its rows carry its key; the day's
/// tallies count sessions by their codes (docs/benchmarks.md).
struct Sessions {
    codes: Vec<u32>,
    hex: String,
}

impl Sessions {
    fn of(events: &[Ev]) -> Self {
        let mut of: HashMap<u64, u32, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(events.len(), Default::default());
        let mut hex = Vec::new();
        let codes = events
            .iter()
            .map(|e| {
                if e.session == 0 {
                    return NONE;
                }
                let next = (hex.len() / 16) as u32;
                *of.entry(e.session).or_insert_with(|| {
                    push_hex64(e.session, &mut hex);
                    next
                })
            })
            .collect();
        // Hex digits are ASCII: the text is always UTF-8.
        let hex = String::from_utf8(hex).unwrap_or_default();
        Self { codes, hex }
    }

    /// Session `code` as its number in the day, from 1 (0: none): counted as its hash would
    /// be, and packed smaller.
    fn number(code: u32) -> u64 {
        if code == NONE { 0 } else { u64::from(code) + 1 }
    }

    /// The text of session `code`.
    fn text(&self, code: u32) -> Option<&str> {
        let at = 16 * code as usize;
        self.hex.get(at..at + 16)
    }
}

/// The number of a day's reads: by humans and by agents (not a browser, on a page's HTML or
/// Markdown), from its `agent_daily` partition (`None`: the day has none).
pub fn reads_of(day: &Day<'_>) -> Result<Option<(i64, i64)>, WriteError> {
    let file = day.dir(tables::AGENT_DAILY.name).join(PART);
    if !file.is_file() {
        return Ok(None);
    }
    let (mut human, mut ai) = (0, 0);
    for b in read_file(&file)? {
        let bad = |m: String| WriteError::Encode {
            path: file.display().to_string(),
            message: m,
        };
        let (class, surface) = (
            text(&b, "class").map_err(bad)?,
            text(&b, "surface").map_err(bad)?,
        );
        let events = column::<Int64Array>(&b, "events").map_err(bad)?;
        for i in 0..b.num_rows() {
            if !matches!(surface.value(i), "html" | "markdown") {
                continue;
            }
            if class.value(i) == Class::Human.as_str() {
                human += events.value(i);
            } else {
                ai += events.value(i);
            }
        }
    }
    Ok(Some((human, ai)))
}
