//! The events read since the last flush, held compactly: each text once (an interner), each
//! event a few numbers, grouped by project and local day; and what could not be read, counted.

use crate::line::{self, Bad, Fields};
use chrono::NaiveDate;
use std::collections::{BTreeMap, HashMap};

/// The longest line read; a longer one is counted, its bytes not held.
pub const MAX_LINE: usize = 1 << 20;

const TOO_LONG: &str = "a line over 1 MiB";

/// The event categories the service publishes (a name outside them is counted as unknown).
pub const CATEGORIES: [&str; 11] = [
    "docs.content.",
    "docs.navigation.",
    "docs.search.",
    "docs.code_block.",
    "docs.api_playground.",
    "docs.feedback.",
    "docs.assistant.",
    "docs.autopilot.",
    "docs.context_menu.",
    "docs.mcp.",
    "docs.component.",
];

/// Each text once: index 0 is "none".
#[derive(Debug)]
pub struct Strings {
    /// Which table this is (an index means a text in this one only).
    id: u64,
    index: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    texts: Vec<Box<str>>,
}

impl Default for Strings {
    fn default() -> Self {
        Self::new()
    }
}

impl Strings {
    /// An empty table (index 0: none).
    pub fn new() -> Self {
        static TABLES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            id: TABLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            index: HashMap::default(),
            texts: vec!["".into()],
        }
    }

    /// Which table this is: what a cache of its indexes is valid for.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The index of `text` (0 for none).
    pub fn of(&mut self, text: Option<&str>) -> u32 {
        let Some(t) = text else { return 0 };
        if let Some(&i) = self.index.get(t) {
            return i;
        }
        let i = self.texts.len() as u32;
        self.texts.push(t.into());
        self.index.insert(t.into(), i);
        i
    }

    /// The text at `i` (`None` for 0).
    pub fn get(&self, i: u32) -> Option<&str> {
        (i != 0).then(|| &*self.texts[i as usize])
    }

    /// How many texts it holds.
    pub fn len(&self) -> usize {
        self.texts.len() - 1
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One event, its texts as indexes into [`Strings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    /// The event id's bits (a UUID's, else a hash of its text).
    pub id: u128,
    /// When, in microseconds since the epoch.
    pub at: i64,
    /// The hashed session (0: none).
    pub session: u64,
    /// The id's text when it is not a UUID (0: the UUID's canonical text).
    pub raw_id: u32,
    /// The event's name.
    pub event: u32,
    /// The path.
    pub path: u32,
    /// The user agent.
    pub user_agent: u32,
    /// The referrer's host.
    pub referrer: u32,
}

/// What could not be read, counted, each kind with where it was first seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unread {
    /// Lines not read, by why, with the first one's place (`object: line N`).
    pub bad: BTreeMap<&'static str, (u64, String)>,
    /// Events of a name outside the published categories, by name.
    pub unknown_events: BTreeMap<String, u64>,
    /// Events of a subdomain no project maps, by subdomain.
    pub unknown_subdomains: BTreeMap<String, u64>,
}

impl Unread {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Unread) {
        for (k, (n, at)) in &other.bad {
            let e = self.bad.entry(k).or_insert((0, at.clone()));
            e.0 += n;
        }
        for (k, n) in &other.unknown_events {
            *self.unknown_events.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &other.unknown_subdomains {
            *self.unknown_subdomains.entry(k.clone()).or_default() += n;
        }
    }

    /// Lines or events not read, in all.
    pub fn total(&self) -> u64 {
        self.bad.values().map(|(n, _)| n).sum::<u64>()
            + self.unknown_events.values().sum::<u64>()
            + self.unknown_subdomains.values().sum::<u64>()
    }

    /// One line saying what was not read (`None`: everything was).
    pub fn line(&self) -> Option<String> {
        let mut parts: Vec<String> = self
            .bad
            .iter()
            .map(|(k, (n, at))| format!("{n} {k} (first: {at})"))
            .collect();
        let named = |what: &str, m: &BTreeMap<String, u64>| {
            let n: u64 = m.values().sum();
            let names: Vec<String> = m
                .iter()
                .take(3)
                .map(|(k, n)| format!("{} ×{n}", shown(k)))
                .collect();
            let more = if m.len() > 3 { ", ..." } else { "" };
            format!("{n} of {what} ({}{more})", names.join(", "))
        };
        if !self.unknown_events.is_empty() {
            parts.push(named("an unknown event", &self.unknown_events));
        }
        if !self.unknown_subdomains.is_empty() {
            parts.push(named(
                "a subdomain no project maps",
                &self.unknown_subdomains,
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A stranger's text as a message shows it: escaped, at most 40 characters.
pub fn shown(s: &str) -> String {
    let mut t: String = s
        .chars()
        .take(40)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if s.chars().count() > 40 {
        t.push('…');
    }
    t
}

/// How the events are read: which subdomain is which project, the days' time zone, the key of
/// the sessions' hash.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The projects, in order.
    pub projects: Vec<String>,
    /// Each subdomain's project (an index into `projects`; looked up for every event, so by a
    /// fast hash: the std one was 3% of reading an event).
    pub subdomains: HashMap<String, u16, foldhash::fast::RandomState>,
    /// The time zone of the days.
    pub tz: chrono_tz::Tz,
    /// The sessions' hash key (kept in the state: sessions can be counted, not traced).
    pub session_key: (u64, u64),
}

/// The events read since the last flush (an event read again is held again: a day's events are
/// deduplicated by id where the day is written, against the lake's too, in a table of the day's
/// ids only; a table of the batch's, 4 MB for 200,000 events, missed the cache at each event).
#[derive(Debug, Default)]
pub struct Batch {
    /// Their texts.
    pub strings: Strings,
    /// By project (an index into the setup's) and local day.
    pub days: BTreeMap<(u16, NaiveDate), Vec<Ev>>,
    /// Events held.
    pub events: u64,
    /// What was not read.
    pub unread: Unread,
    /// Lines read (good or not).
    pub lines: u64,
    hour: Hour,
    /// Where a payload string's text is undone, line after line.
    scratch: line::Scratch,
}

/// The time zone's offset over the UTC hours events fell in lately, each when it held the
/// whole hour: an event's local day without a look-up in the zone's table.
#[derive(Debug)]
pub(crate) struct Hour {
    /// By hour (since the epoch) modulo their number: the zone, the hour and its offset in
    /// seconds (`None`: it changed within the hour).
    slots: Box<[Option<HourOffset>; 64]>,
    /// The last local day made, by its number (since the epoch): the next event's, mostly.
    last: Option<(i64, NaiveDate)>,
}

/// A zone, an hour since the epoch, and the zone's offset over all of it in seconds.
type HourOffset = (chrono_tz::Tz, i64, Option<i64>);

impl Default for Hour {
    fn default() -> Self {
        Self {
            slots: Box::new([None; 64]),
            last: None,
        }
    }
}

impl Hour {
    const MICROS: i64 = 3_600_000_000;

    pub(crate) fn day(&mut self, tz: chrono_tz::Tz, micros: i64) -> Option<NaiveDate> {
        use chrono::{Offset, TimeZone};
        let hour = micros.div_euclid(Self::MICROS);
        let slot = &mut self.slots[hour.rem_euclid(64) as usize];
        let offset = match *slot {
            Some((z, h, off)) if z == tz && h == hour => off,
            _ => {
                let at = |m: i64| {
                    chrono::DateTime::from_timestamp_micros(m).map(|t| {
                        i64::from(
                            tz.offset_from_utc_datetime(&t.naive_utc())
                                .fix()
                                .local_minus_utc(),
                        )
                    })
                };
                let (a, b) = (at(hour * Self::MICROS), at((hour + 1) * Self::MICROS - 1));
                let off = a.filter(|a| Some(*a) == b);
                *slot = Some((tz, hour, off));
                off
            }
        };
        match offset {
            Some(off) => {
                let days = (micros + off * 1_000_000).div_euclid(86_400 * 1_000_000);
                match self.last {
                    Some((d, date)) if d == days => Some(date),
                    _ => {
                        let date = NaiveDate::from_num_days_from_ce_opt(
                            i32::try_from(days + 719_163).ok()?,
                        )?;
                        self.last = Some((days, date));
                        Some(date)
                    }
                }
            }
            None => tz.timestamp_micros(micros).single().map(|t| t.date_naive()),
        }
    }
}

impl Batch {
    /// Counts line `n` of `object` as too long to read (its bytes were not held).
    pub fn too_long(&mut self, object: &str, n: u64) {
        self.lines += 1;
        self.count_bad(TOO_LONG, object, n);
    }

    fn count_bad(&mut self, why: &'static str, object: &str, n: u64) {
        let e = self
            .unread
            .bad
            .entry(why)
            .or_insert((0, format!("{}: line {n}", shown(object))));
        e.0 += 1;
    }

    /// Reads one line of `object` (its number `n`, from 1).
    pub fn line(&mut self, setup: &Setup, text: &[u8], object: &str, n: u64) {
        self.lines += 1;
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let kept = if text.len() > MAX_LINE {
            Err(Kept::Bad(TOO_LONG))
        } else {
            let mut scratch = std::mem::take(&mut self.scratch);
            let kept = match line::decode_in(text, &mut scratch, |f| self.keep(setup, f)) {
                Ok(k) => k,
                Err(bad) => Err(Kept::Bad(bad_name(bad))),
            };
            self.scratch = scratch;
            kept
        };
        match kept {
            Ok(()) => {}
            Err(Kept::Bad(why)) => self.count_bad(why, object, n),
            Err(Kept::UnknownEvent(name)) => {
                *self.unread.unknown_events.entry(name).or_default() += 1;
            }
            Err(Kept::UnknownSubdomain(name)) => {
                *self.unread.unknown_subdomains.entry(name).or_default() += 1;
            }
        }
    }

    fn keep(&mut self, setup: &Setup, f: &Fields<'_>) -> Result<(), Kept> {
        if !CATEGORIES.iter().any(|c| f.event.starts_with(c)) {
            return Err(Kept::UnknownEvent(f.event.chars().take(128).collect()));
        }
        let Some(&project) = setup.subdomains.get(f.subdomain) else {
            return Err(Kept::UnknownSubdomain(
                f.subdomain.chars().take(128).collect(),
            ));
        };
        let (id, uuid) = line::id_bits(f.event_id);
        let day = self
            .hour
            .day(setup.tz, f.at_micros)
            .ok_or(Kept::Bad("no readable created_at"))?;
        let ev = Ev {
            id,
            at: f.at_micros,
            session: f
                .session_id
                .map_or(0, |s| session_hash(setup.session_key, s)),
            raw_id: if uuid {
                0
            } else {
                self.strings.of(Some(f.event_id))
            },
            event: self.strings.of(Some(f.event)),
            path: self.strings.of(f.path),
            user_agent: self.strings.of(f.user_agent),
            referrer: self.strings.of(f.referrer.and_then(line::referrer_host)),
        };
        self.days.entry((project, day)).or_default().push(ev);
        self.events += 1;
        Ok(())
    }
}

enum Kept {
    Bad(&'static str),
    UnknownEvent(String),
    UnknownSubdomain(String),
}

const fn bad_name(b: Bad) -> &'static str {
    b.as_str()
}

/// A session id's keyed hash (never 0).
pub fn session_hash(key: (u64, u64), session: &str) -> u64 {
    use siphasher::sip::SipHasher13;
    use std::hash::Hasher;
    let mut h = SipHasher13::new_with_keys(key.0, key.1);
    h.write(session.as_bytes());
    h.finish().max(1)
}
