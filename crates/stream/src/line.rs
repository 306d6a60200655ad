//! One line of a stream object: `{"eventType": ..., "payload": ...}`, where `payload` is an
//! object or a JSON-encoded string of one. Only the fields docpipe keeps are read: `ip`,
//! `user_id`, `anon_id` and `properties` are skipped by the parser and never held.

use crate::scan::Found;
use chrono::Datelike;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// The fields of one event that docpipe reads, borrowed from the line where no escape forced a
/// copy.
#[derive(Debug, Default, Deserialize)]
pub struct Payload<'a> {
    /// The documented deduplication key.
    #[serde(borrow, default)]
    pub event_id: Option<Cow<'a, str>>,
    /// The docs' subdomain (which project).
    #[serde(borrow, default)]
    pub subdomain: Option<Cow<'a, str>>,
    /// The session (kept only as a keyed hash).
    #[serde(borrow, default)]
    pub session_id: Option<Cow<'a, str>>,
    /// When (ISO 8601).
    #[serde(borrow, default)]
    pub created_at: Option<Cow<'a, str>>,
    /// The event's name (the line's `eventType` wins).
    #[serde(borrow, default)]
    pub event: Option<Cow<'a, str>>,
    /// The page's path.
    #[serde(borrow, default)]
    pub path: Option<Cow<'a, str>>,
    /// Where the reader came from (kept only as its host).
    #[serde(borrow, default)]
    pub referrer: Option<Cow<'a, str>>,
    /// The reader's user agent.
    #[serde(borrow, default)]
    pub user_agent: Option<Cow<'a, str>>,
}

impl Payload<'_> {
    /// Its fields as the fast reader gives them (borrowed from it).
    fn kept(&self) -> crate::scan::Kept<'_> {
        crate::scan::Kept {
            event_id: self.event_id.as_deref(),
            subdomain: self.subdomain.as_deref(),
            session_id: self.session_id.as_deref(),
            created_at: self.created_at.as_deref(),
            event: self.event.as_deref(),
            path: self.path.as_deref(),
            referrer: self.referrer.as_deref(),
            user_agent: self.user_agent.as_deref(),
        }
    }
}

/// `payload`: an object, or a string that should hold one.
enum PayloadField<'a> {
    Object(Payload<'a>),
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for PayloadField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = PayloadField<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object or a JSON-encoded string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(PayloadField::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(PayloadField::Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(PayloadField::Text(Cow::Owned(v)))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Self::Value, M::Error> {
                Payload::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(PayloadField::Object)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "eventType", borrow, default)]
    event_type: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    payload: Option<PayloadField<'a>>,
}

/// Why a line was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bad {
    /// The line is not a JSON object of the stream's shape (a truncated object's last line).
    NotJson,
    /// `payload` is a string that is not a JSON object.
    PayloadNotJson,
    /// No `payload`.
    NoPayload,
    /// No event name (`eventType` nor `payload.event`).
    NoEvent,
    /// No `event_id`.
    NoEventId,
    /// No `subdomain`.
    NoSubdomain,
    /// No `created_at`, or one that is not an ISO 8601 instant.
    BadTime,
}

impl Bad {
    /// What it is, in a few words.
    pub const fn as_str(self) -> &'static str {
        match self {
            Bad::NotJson => "not JSON",
            Bad::PayloadNotJson => "a payload string that is not JSON",
            Bad::NoPayload => "no payload",
            Bad::NoEvent => "no event name",
            Bad::NoEventId => "no event_id",
            Bad::NoSubdomain => "no subdomain",
            Bad::BadTime => "no readable created_at",
        }
    }
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event's fields, checked: what a reader of the line is handed.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    /// The event's name.
    pub event: &'a str,
    /// Its id.
    pub event_id: &'a str,
    /// Its subdomain.
    pub subdomain: &'a str,
    /// When, in microseconds since the epoch (UTC).
    pub at_micros: i64,
    /// Its session, if any.
    pub session_id: Option<&'a str>,
    /// Its path, if any.
    pub path: Option<&'a str>,
    /// Its referrer, if any.
    pub referrer: Option<&'a str>,
    /// Its user agent, if any.
    pub user_agent: Option<&'a str>,
}

/// Reads one line and hands its fields to `f` (they borrow from the line, or from the payload
/// string's decoded text).
pub fn decode<R>(line: &[u8], f: impl FnOnce(&Fields<'_>) -> R) -> Result<R, Bad> {
    decode_in(line, &mut Scratch::default(), f)
}

/// What a reader of many lines keeps from line to line (no allocation a line): the room a
/// payload string's text is undone into, the indexes of the line's and the text's stops, and
/// the order its keys came in.
#[derive(Debug, Default)]
pub struct Scratch {
    text: Vec<u8>,
    line: crate::scan::Stops,
    payload: crate::scan::Stops,
    order: crate::scan::Order,
    date: LastDate,
}

/// [`decode`] in `scratch`.
pub fn decode_in<R>(
    line: &[u8],
    scratch: &mut Scratch,
    f: impl FnOnce(&Fields<'_>) -> R,
) -> Result<R, Bad> {
    // The common line without a general parser; serde_json reads whatever it gives up on.
    if let Some(env) = crate::scan::envelope(line, &mut scratch.line, &scratch.order) {
        match env.payload {
            None | Some(Found::Null) => return Err(Bad::NoPayload),
            Some(Found::Object(p)) => {
                return checked(env.event_type, &p, &mut scratch.date).map(|x| f(&x));
            }
            Some(Found::Text(at, raw)) => {
                let text = crate::scan::unescape(raw, at, &scratch.line, &mut scratch.text);
                let stops = &mut scratch.payload;
                if let Some(p) =
                    text.and_then(|t| crate::scan::payload_text(t, stops, &scratch.order))
                {
                    return checked(env.event_type, &p, &mut scratch.date).map(|x| f(&x));
                }
            }
        }
    }
    decode_parsed(line, f)
}

/// [`decode`] by serde_json alone (what the fast reader is held to).
pub fn decode_parsed<R>(line: &[u8], f: impl FnOnce(&Fields<'_>) -> R) -> Result<R, Bad> {
    let env: Envelope<'_> = serde_json::from_slice(line).map_err(|_| Bad::NotJson)?;
    match env.payload {
        None => Err(Bad::NoPayload),
        Some(PayloadField::Object(p)) => checked(
            env.event_type.as_deref(),
            &p.kept(),
            &mut LastDate::default(),
        )
        .map(|x| f(&x)),
        Some(PayloadField::Text(text)) => {
            let p: Payload<'_> = serde_json::from_str(&text).map_err(|_| Bad::PayloadNotJson)?;
            checked(
                env.event_type.as_deref(),
                &p.kept(),
                &mut LastDate::default(),
            )
            .map(|x| f(&x))
        }
    }
}

fn some(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.is_empty())
}

fn checked<'a>(
    event_type: Option<&'a str>,
    p: &crate::scan::Kept<'a>,
    date: &mut LastDate,
) -> Result<Fields<'a>, Bad> {
    let event = event_type
        .filter(|s| !s.is_empty())
        .or(some(p.event))
        .ok_or(Bad::NoEvent)?;
    let event_id = some(p.event_id).ok_or(Bad::NoEventId)?;
    let subdomain = some(p.subdomain).ok_or(Bad::NoSubdomain)?;
    let at_micros = some(p.created_at)
        .and_then(|t| parse_time_in(t, date))
        .ok_or(Bad::BadTime)?;
    Ok(Fields {
        event,
        event_id,
        subdomain,
        at_micros,
        session_id: some(p.session_id),
        path: some(p.path),
        referrer: some(p.referrer),
        user_agent: some(p.user_agent),
    })
}

/// An ISO 8601 instant (`2026-11-27T10:00:00Z`, with fractions or an offset; without a zone it
/// is UTC), in microseconds since the epoch.
pub fn parse_time(s: &str) -> Option<i64> {
    parse_time_in(s, &mut LastDate::default())
}

/// The date of the last instant read in the service's shape, and its day's number since the
/// epoch: the next instant's date, mostly, known again by one compare of its ten bytes.
#[derive(Debug, Default, Clone, Copy)]
pub struct LastDate(Option<([u8; 10], i64)>);

/// [`parse_time`], the date read again from `last` when it is the last one's.
pub fn parse_time_in(s: &str, last: &mut LastDate) -> Option<i64> {
    if let Some(t) = utc_time(s.as_bytes(), last) {
        return Some(t);
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp_micros());
    }
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f"))
        .ok()?;
    Some(naive.and_utc().timestamp_micros())
}

/// The service's own shape, read without a general parser: `YYYY-MM-DDTHH:MM:SS`, up to six
/// digits of fraction, `Z` (anything else: `None`, and the general parser reads it).
fn utc_time(b: &[u8], last: &mut LastDate) -> Option<i64> {
    let (head, rest) = (b.get(..19)?, b.get(19..)?);
    let rest = rest.strip_suffix(b"Z")?;
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        head[r].iter().try_fold(0i64, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let date: [u8; 10] = head[..10].try_into().ok()?;
    let days = match last.0 {
        Some((d, n)) if d == date => n,
        _ => {
            if head[4] != b'-' || head[7] != b'-' {
                return None;
            }
            let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
            if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
                return None;
            }
            let day = chrono::NaiveDate::from_ymd_opt(y as i32, m as u32, d as u32)?;
            let n = i64::from(day.num_days_from_ce()) - 719_163;
            last.0 = Some((date, n));
            n
        }
    };
    if head[10] != b'T' || head[13] != b':' || head[16] != b':' {
        return None;
    }
    let (hh, mm, ss) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let micros = match rest {
        [] => 0,
        [b'.', frac @ ..]
            if !frac.is_empty() && frac.len() <= 9 && frac.iter().all(u8::is_ascii_digit) =>
        {
            let mut v = 0i64;
            for i in 0..6 {
                v = v * 10 + frac.get(i).map_or(0, |c| i64::from(c - b'0'));
            }
            v
        }
        _ => return None,
    };
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1_000_000) + micros)
}

/// The host of a referrer URL (`https://chatgpt.com/c/...` -> `chatgpt.com`), with no `www.`;
/// `None` for what is not an absolute http(s) URL.
pub fn referrer_host(referrer: &str) -> Option<&str> {
    let rest = referrer
        .strip_prefix("https://")
        .or_else(|| referrer.strip_prefix("http://"))?;
    // The authority ends at the first `/`, `?` or `#`; the host starts after its last `@` and
    // ends at its first `:` after that. One pass over the authority's bytes (a few dozen
    // bytes: a search a delimiter, each a call, cost three times as much); the delimiters
    // are ASCII, so the byte places are the characters' boundaries.
    let b = rest.as_bytes();
    let (mut start, mut colon, mut end) = (0, None, b.len());
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'/' | b'?' | b'#' => {
                end = i;
                break;
            }
            b'@' => (start, colon) = (i + 1, None),
            b':' if colon.is_none() => colon = Some(i),
            _ => {}
        }
    }
    let host = &rest[start..colon.unwrap_or(end)];
    let host = host.strip_prefix("www.").unwrap_or(host);
    (!host.is_empty() && host.len() <= 253).then_some(host)
}

/// An event id as 128 bits: a UUID's own, else a keyed hash of the text.
pub fn id_bits(event_id: &str) -> (u128, bool) {
    if let Some(u) = uuid_bits(event_id) {
        return (u, true);
    }
    use siphasher::sip128::{Hasher128, SipHasher13};
    use std::hash::Hasher;
    let mut h = SipHasher13::new_with_keys(0x646f_6370_6970_6531, 0x6576_656e_745f_6964);
    h.write(event_id.as_bytes());
    (h.finish128().as_u128(), false)
}

/// A UUID's 128 bits (`8-4-4-4-12` hex digits, either case), or `None`.
pub(crate) fn uuid_bits(s: &str) -> Option<u128> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    return uuid_bits_sse2(s);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    uuid_bits_words(s)
}

/// [`uuid_bits`] with its 32 digits gathered into two vectors of 16 and read 16 at a time by
/// SSE2's compares (eight at a time in a word took 237 instructions an id, a digit at a time
/// from a table 324).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn uuid_bits_sse2(s: &str) -> Option<u128> {
    let b: &[u8; 36] = s.as_bytes().try_into().ok()?;
    if [b[8], b[13], b[18], b[23]] != [b'-'; 4] {
        return None;
    }
    let (mut hi, mut lo) = ([0u8; 16], [0u8; 16]);
    hi[..8].copy_from_slice(&b[..8]);
    hi[8..12].copy_from_slice(&b[9..13]);
    hi[12..].copy_from_slice(&b[14..18]);
    lo[..4].copy_from_slice(&b[19..23]);
    lo[4..].copy_from_slice(&b[24..]);
    let (hi, lo) = (hex16_bytes(&hi)?, hex16_bytes(&lo)?);
    Some(u128::from_be_bytes(
        safe_arch::pack_i16_to_u8_m128i(hi, lo).into(),
    ))
}

/// Sixteen hex digits (either case) as eight 16-bit lanes each holding the byte of two digits
/// (the first the high nibble); `None` when a byte is not a digit.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn hex16_bytes(digits: &[u8; 16]) -> Option<safe_arch::m128i> {
    use safe_arch::{
        bitand_m128i, bitor_m128i, cmp_gt_mask_i8_m128i, cmp_lt_mask_i8_m128i,
        load_unaligned_m128i, move_mask_i8_m128i, set_splat_i8_m128i, set_splat_i16_m128i,
        shl_imm_u16_m128i, shr_imm_u16_m128i,
    };
    let splat = |c: u8| set_splat_i8_m128i(c as i8);
    // Between two bounds as signed bytes: a byte of 0x80 or over is negative, so in none.
    let within = |v, lo: u8, hi: u8| {
        bitand_m128i(
            cmp_gt_mask_i8_m128i(v, splat(lo - 1)),
            cmp_lt_mask_i8_m128i(v, splat(hi + 1)),
        )
    };
    let v = load_unaligned_m128i(digits);
    let digit = within(v, b'0', b'9');
    // A letter of either case is one of `a` to `f` with its case bit set.
    let letter = within(bitor_m128i(v, splat(0x20)), b'a', b'f');
    if move_mask_i8_m128i(bitor_m128i(digit, letter)) != 0xffff {
        return None;
    }
    let nibbles =
        safe_arch::add_i8_m128i(bitand_m128i(v, splat(0x0f)), bitand_m128i(letter, splat(9)));
    // Each lane's low byte is the first digit of a pair, its high byte the second.
    let high = bitand_m128i(shl_imm_u16_m128i::<4>(nibbles), set_splat_i16_m128i(0xf0));
    Some(bitor_m128i(high, shr_imm_u16_m128i::<8>(nibbles)))
}

/// [`uuid_bits`] eight digits at a time, where SSE2 is not (and in the tests): each group's
/// bytes checked as digits or letters and made nibbles in one word (SWAR).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
pub(crate) fn uuid_bits_words(s: &str) -> Option<u128> {
    let b: &[u8; 36] = s.as_bytes().try_into().ok()?;
    if [b[8], b[13], b[18], b[23]] != [b'-'; 4] {
        return None;
    }
    let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let eight = |lo: usize, hi: usize| u64::from(word(lo)) | u64::from(word(hi)) << 32;
    let groups = [eight(0, 4), eight(9, 14), eight(19, 24), eight(28, 32)];
    groups
        .into_iter()
        .try_fold(0u128, |v, g| Some(v << 32 | u128::from(read_hex8(g)?)))
}

/// The value of eight hex digits (either case) given as a word's bytes, the first digit in the
/// lowest byte; `None` when a byte is not one.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn read_hex8(w: u64) -> Option<u32> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    if w & HIGH != 0 {
        return None;
    }
    // Below 0x80 a byte plus at most 0x50 carries into no other byte: its top bit says whether
    // it reached a bound.
    let within = |x: u64, lo: u64, hi: u64| (x + ONES * (0x80 - lo)) & !(x + ONES * (0x7f - hi));
    let digit = within(w, 0x30, 0x39) & HIGH;
    // A letter of either case is one of `a` to `f` with its case bit set.
    let letter = within(w | (ONES * 0x20), 0x61, 0x66) & HIGH;
    if digit | letter != HIGH {
        return None;
    }
    let nibbles = (w & (ONES * 0x0f)) + (letter >> 7) * 9;
    // Pairs of nibbles into bytes, bytes into 16 bits, then into 32, the first digit highest.
    const BYTES: u64 = 0x00ff_00ff_00ff_00ff;
    const HALVES: u64 = 0x0000_ffff_0000_ffff;
    let pairs = (nibbles & BYTES) << 4 | (nibbles >> 8) & BYTES;
    let quads = (pairs & HALVES) << 8 | (pairs >> 16) & HALVES;
    Some(((quads & 0xffff_ffff) << 16 | quads >> 32) as u32)
}

/// A UUID's canonical text (lower case, hyphenated).
pub fn uuid_text(v: u128) -> String {
    let mut out = Vec::with_capacity(36);
    push_uuid(v, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Appends a UUID's canonical text (`8-4-4-4-12` lowercase hex digits) to `out`.
pub fn push_uuid(v: u128, out: &mut Vec<u8>) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    let digits = hex32_sse2(v);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    let digits = hex32_words(v);
    let mut text = [b'-'; 36];
    text[..8].copy_from_slice(&digits[..8]);
    text[9..13].copy_from_slice(&digits[8..12]);
    text[14..18].copy_from_slice(&digits[12..16]);
    text[19..23].copy_from_slice(&digits[16..20]);
    text[24..].copy_from_slice(&digits[20..]);
    out.extend_from_slice(&text);
}

/// `v`'s 32 lowercase hex digits, 16 at a time by SSE2: each byte's two nibbles spread into
/// two bytes, and made digits all at once (eight at a time in a word took 118 instructions an
/// id).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn hex32_sse2(v: u128) -> [u8; 32] {
    use safe_arch::{
        add_i8_m128i, bitand_m128i, cmp_gt_mask_i8_m128i, load_unaligned_m128i, set_splat_i8_m128i,
        shr_imm_u16_m128i, unpack_high_i8_m128i, unpack_low_i8_m128i,
    };
    let bytes = load_unaligned_m128i(&v.to_be_bytes());
    let low = set_splat_i8_m128i(0x0f);
    let high = bitand_m128i(shr_imm_u16_m128i::<4>(bytes), low);
    let digits = |nibbles| {
        // A nibble over 9 is a letter: `a` is 39 past `0` + 10.
        let letters = bitand_m128i(
            cmp_gt_mask_i8_m128i(nibbles, set_splat_i8_m128i(9)),
            set_splat_i8_m128i(39),
        );
        let text: [u8; 16] = add_i8_m128i(
            add_i8_m128i(nibbles, set_splat_i8_m128i(b'0' as i8)),
            letters,
        )
        .into();
        text
    };
    // The high nibble of each byte first.
    let first = digits(unpack_low_i8_m128i(high, bitand_m128i(bytes, low)));
    let second = digits(unpack_high_i8_m128i(high, bitand_m128i(bytes, low)));
    let mut out = [0; 32];
    out[..16].copy_from_slice(&first);
    out[16..].copy_from_slice(&second);
    out
}

/// `v`'s 32 lowercase hex digits, eight at a time in a word (where SSE2 is not, and in the
/// tests).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
pub(crate) fn hex32_words(v: u128) -> [u8; 32] {
    let mut out = [0; 32];
    out[..16].copy_from_slice(&hex16((v >> 64) as u64));
    out[16..].copy_from_slice(&hex16(v as u64));
    out
}

/// Appends `v` as 16 lowercase hex digits to `out` (`format!("{v:016x}")` without allocating).
pub fn push_hex64(v: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&hex16(v));
}

/// `v`'s 16 lowercase hex digits, eight at a time: each word's nibbles spread one a byte, then
/// made digits all at once (SWAR; a byte at a time this was most of writing an event's id).
fn hex16(v: u64) -> [u8; 16] {
    let mut out = [0; 16];
    out[..8].copy_from_slice(&hex8((v >> 32) as u32));
    out[8..].copy_from_slice(&hex8(v as u32));
    out
}

/// `v`'s 8 lowercase hex digits.
fn hex8(v: u32) -> [u8; 8] {
    const LOW: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut x = u64::from(v);
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    x = (x | x << 4) & LOW;
    // Byte k holds nibble k from the lowest: the text starts with the highest.
    let x = x.swap_bytes();
    // A nibble of 10 or more carries into its byte's bit 4: those become letters.
    let letters = ((x + 6 * ONES) >> 4) & ONES;
    (x + u64::from(b'0') * ONES + letters * u64::from(b'a' - b'0' - 10)).to_le_bytes()
}
