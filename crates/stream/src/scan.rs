//! The stream's common line read without a general parser: `{"eventType": ..., "payload": ...}`
//! whose kept fields are strings without escapes. Whatever is unusual (an escape in a kept
//! field or a key, a `\u` anywhere, a duplicate field, a value of another type, deep nesting)
//! makes it give up (`None`), and serde_json reads the line instead: this reader never accepts
//! what serde_json would refuse, nor reads a field differently (`tests.rs` holds it to that on
//! mutated lines). The values it skips are checked to the JSON grammar, as serde_json checks
//! them.

/// The fields of a payload docpipe keeps, as written (`line::Payload` gives them too).
#[derive(Debug, Default)]
pub(crate) struct Kept<'a> {
    pub(crate) event_id: Option<&'a str>,
    pub(crate) subdomain: Option<&'a str>,
    pub(crate) session_id: Option<&'a str>,
    pub(crate) created_at: Option<&'a str>,
    pub(crate) event: Option<&'a str>,
    pub(crate) path: Option<&'a str>,
    pub(crate) referrer: Option<&'a str>,
    pub(crate) user_agent: Option<&'a str>,
}

/// The deepest nesting a skipped value may have here (serde_json refuses past 128).
const MAX_DEPTH: usize = 64;

/// The keys this reader knows: the envelope's two, then the payload's, those it keeps first
/// (a key is its index here; another key is [`OTHER`]).
const KEYS: [&str; 14] = [
    "eventType",
    "payload",
    "event_id",
    "subdomain",
    "session_id",
    "created_at",
    "event",
    "path",
    "referrer",
    "user_agent",
    "user_id",
    "anon_id",
    "ip",
    "properties",
];

/// The keys read, by their index in [`KEYS`].
const EVENT_TYPE: u8 = 0;
const PAYLOAD_KEY: u8 = 1;
const EVENT_ID: u8 = 2;
const SUBDOMAIN: u8 = 3;
const SESSION_ID: u8 = 4;
const CREATED_AT: u8 = 5;
const EVENT: u8 = 6;
const PATH: u8 = 7;
const REFERRER: u8 = 8;
const USER_AGENT: u8 = 9;

/// A key not in [`KEYS`].
const OTHER: u8 = KEYS.len() as u8;

/// Where an object starts, as the key before its first: the envelope, the payload.
const ENVELOPE: u8 = OTHER + 1;
const PAYLOAD: u8 = OTHER + 2;

/// A key as a line writes it, quotes and colon included, as the bytes of a 16-byte word (its
/// first byte lowest) and the mask of the bytes it has.
#[derive(Clone, Copy)]
struct Pattern {
    bytes: u128,
    mask: u128,
    len: usize,
}

/// `"key":`, or inside a payload string `\"key\":`.
const fn pattern(key: &str, esc: bool) -> Pattern {
    let mut text = [0u8; 16];
    let mut len = 0;
    let k = key.as_bytes();
    let mut j = 0;
    while j < k.len() + 2 {
        if esc && (j == 0 || j == k.len() + 1) {
            text[len] = b'\\';
            len += 1;
        }
        text[len] = if j == 0 || j == k.len() + 1 {
            b'"'
        } else {
            k[j - 1]
        };
        len += 1;
        j += 1;
    }
    text[len] = b':';
    len += 1;
    Pattern {
        bytes: u128::from_le_bytes(text),
        mask: u128::MAX >> (128 - 8 * len),
        len,
    }
}

/// Each key's pattern, as a line writes it and inside a payload string.
const PATTERNS: [[Pattern; KEYS.len()]; 2] = {
    let mut out = [[pattern("", false); KEYS.len()]; 2];
    let mut k = 0;
    while k < KEYS.len() {
        out[0][k] = pattern(KEYS[k], false);
        out[1][k] = pattern(KEYS[k], true);
        k += 1;
    }
    out
};

/// The order keys came in lately: after each key (and at each object's start), the key that
/// followed it. The scanner tries that key's bytes first, one compare of a word, and reads the
/// key in full only where it is another (the service writes its fields in one order, which
/// this learns; any order is read, only slower). Kept from line to line.
#[derive(Debug)]
pub(crate) struct Order([std::cell::Cell<u8>; PAYLOAD as usize + 1]);

impl Default for Order {
    fn default() -> Self {
        Self(std::array::from_fn(|_| std::cell::Cell::new(OTHER)))
    }
}

/// What `payload` holds.
pub(crate) enum Found<'a> {
    /// An object, its kept fields read.
    Object(Kept<'a>),
    /// A string: where its contents start in the line, and they as written (escapes not yet
    /// undone).
    Text(usize, &'a [u8]),
    /// `null`.
    Null,
}

/// A line's envelope.
pub(crate) struct Envelope<'a> {
    pub(crate) event_type: Option<&'a str>,
    /// `None`: no `payload` field.
    pub(crate) payload: Option<Found<'a>>,
}

/// Where a text's strings' plain runs stop: a bit for each quote, backslash and control
/// character (which JSON forbids in a string), byte `j` at bit `j % 64` of word `j / 64`. Made
/// once for a line, 16 bytes at a time by vector compares: the scanner then finds each string's
/// end from the bits, where a search of each string cost more than all of the index
/// (docs/benchmarks.md).
#[derive(Debug, Default)]
pub(crate) struct Stops(Vec<u64>);

impl Stops {
    /// The index of `b` (the last word's bits past its end clear).
    pub(crate) fn of(&mut self, b: &[u8]) {
        self.0.clear();
        let (blocks, rest) = b.as_chunks::<64>();
        self.0.extend(blocks.iter().map(block));
        if !rest.is_empty() {
            // A byte that stops nothing fills the rest of the last block.
            let mut last = [b'a'; 64];
            last[..rest.len()].copy_from_slice(rest);
            self.0.push(block(&last));
        }
    }

    /// The first stop at or after `from`.
    pub(crate) fn next(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let mut bits = self.0.get(w)? & (u64::MAX << (from % 64));
        while bits == 0 {
            w += 1;
            bits = *self.0.get(w)?;
        }
        Some(w * 64 + bits.trailing_zeros() as usize)
    }
}

/// The stops of 64 bytes.
fn block(b: &[u8; 64]) -> u64 {
    let (quarters, _) = b.as_chunks::<16>();
    quarters
        .iter()
        .enumerate()
        .fold(0, |m, (k, q)| m | (u64::from(stops16(q)) << (16 * k)))
}

/// The stops of 16 bytes, by SSE2's compares (`safe_arch` wraps them safely).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn stops16(q: &[u8; 16]) -> u16 {
    use safe_arch::{
        bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, min_u8_m128i, move_mask_i8_m128i,
        set_splat_i8_m128i,
    };
    let v = load_unaligned_m128i(q);
    let quote = cmp_eq_mask_i8_m128i(v, set_splat_i8_m128i(b'"' as i8));
    let backslash = cmp_eq_mask_i8_m128i(v, set_splat_i8_m128i(b'\\' as i8));
    // A byte below 0x20 is its own minimum with 0x1f.
    let control = cmp_eq_mask_i8_m128i(min_u8_m128i(v, set_splat_i8_m128i(0x1f)), v);
    move_mask_i8_m128i(bitor_m128i(bitor_m128i(quote, backslash), control)) as u16
}

/// The stops of 16 bytes, a byte at a time (where SSE2 is not).
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn stops16(q: &[u8; 16]) -> u16 {
    q.iter().enumerate().fold(0, |m, (j, &c)| {
        m | (u16::from(c == b'"' || c == b'\\' || c < 0x20) << j)
    })
}

/// A scanner of a text; `ESC`: whether the text is the inside of a payload string read in
/// place, where a string's quotes are escaped (`\"`) and nothing else may be (a mode of the
/// type, so that no step asks it at run time).
struct Scan<'a, 's, const ESC: bool> {
    /// The text (checked as UTF-8 once, whole), and its bytes.
    t: &'a str,
    b: &'a [u8],
    /// The index of the text's stops.
    stops: &'s Stops,
    /// The keys' order lately.
    order: &'s Order,
    i: usize,
}

impl<'a, const ESC: bool> Scan<'a, '_, ESC> {
    fn ws(&mut self) {
        if ESC {
            // Inside a string a tab or a line's end is escaped, and this reads no escape but a
            // quote's; a control character as it is would break the string.
            while let Some(b' ') = self.b.get(self.i) {
                self.i += 1;
            }
            return;
        }
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        self.b[self.i..].starts_with(w).then(|| self.i += w.len())
    }

    /// Where the string's contents from `self.i` stop: the next quote, backslash or control
    /// character.
    fn stop(&self) -> Option<usize> {
        self.stops.next(self.i)
    }

    /// A string with no escape (the quote next), as text.
    #[inline]
    fn plain(&mut self) -> Option<&'a str> {
        // The quote, one byte or an escaped one's two (each a constant compare).
        let quote = |b: &[u8], at: usize, esc: bool| match esc {
            false => (b.get(at) == Some(&b'"')).then_some(1),
            true => (b.get(at..at + 2) == Some(b"\\\"")).then_some(2),
        };
        self.i += quote(self.b, self.i, ESC)?;
        let end = self.stop()?;
        let close = quote(self.b, end, ESC)?;
        // Between two quotes: a slice of the text on its characters' boundaries.
        let text = self.t.get(self.i..end);
        self.i = end + close;
        text
    }

    /// A string's contents as written (the quote next), its escapes checked (no `\u`); inside
    /// a payload string read in place, a string with no escape.
    fn string(&mut self) -> Option<&'a [u8]> {
        if ESC {
            return self.plain().map(str::as_bytes);
        }
        self.eat(b'"')?;
        let start = self.i;
        loop {
            let end = self.stop()?;
            self.i = end + 1;
            match self.b[end] {
                b'"' => return Some(&self.b[start..end]),
                b'\\' => {
                    escaped(self.peek()?)?;
                    self.i += 1;
                }
                _ => return None,
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    /// A number, to JSON's grammar.
    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.eat(b'.').is_some() && self.digits() == 0 {
            return None;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// Any value, checked and passed over.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' if !ESC => {
                // The common string first: no escape, its end the next stop.
                let end = self.stops.next(self.i + 1)?;
                if self.b[end] == b'"' {
                    self.i = end + 1;
                    return Some(());
                }
                self.string().map(|_| ())
            }
            b'\\' if ESC => self.plain().map(|_| ()),
            b'{' => self.items(b'}', depth, true),
            b'[' => self.items(b']', depth, false),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// An object's members or an array's items (the bracket next), each passed over.
    fn items(&mut self, close: u8, depth: usize, keyed: bool) -> Option<()> {
        self.i += 1;
        self.ws();
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            if keyed {
                self.string()?;
                self.ws();
                self.eat(b':')?;
                self.ws();
            }
            self.skip(depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                c if c == close => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object's members (the brace next; `start`: which object): `member` is handed each
    /// key (with no escape) with the scanner at its value, and reads or skips it.
    fn members(
        &mut self,
        start: u8,
        mut member: impl FnMut(&mut Self, u8) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        let mut before = start;
        loop {
            // Spaces between members are passed only where the next byte is not what a line as
            // the service writes it has there (it has none).
            let key = match self.expected(before) {
                Some(key) => key,
                None => {
                    self.ws();
                    let key = self.key()?;
                    self.order.0[usize::from(before)].set(key);
                    key
                }
            };
            self.ws();
            member(self, key)?;
            let next = match self.peek()? {
                c @ (b',' | b'}') => c,
                _ => {
                    self.ws();
                    self.peek()?
                }
            };
            self.i += 1;
            match next {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
            before = key;
        }
    }

    /// The key that followed `before` lately, with its colon, when it is next (then passed).
    fn expected(&mut self, before: u8) -> Option<u8> {
        let key = self.order.0[usize::from(before)].get();
        let p = PATTERNS[usize::from(ESC)].get(usize::from(key))?;
        let word: [u8; 16] = self.b.get(self.i..self.i + 16)?.try_into().ok()?;
        ((u128::from_le_bytes(word) ^ p.bytes) & p.mask == 0).then(|| {
            self.i += p.len;
            key
        })
    }

    /// A key (with no escape) and its colon, read in full: its index in [`KEYS`], or [`OTHER`].
    fn key(&mut self) -> Option<u8> {
        let name = self.plain()?;
        self.ws();
        self.eat(b':')?;
        let key = KEYS.iter().position(|k| *k == name);
        Some(key.map_or(OTHER, |k| k as u8))
    }

    /// A kept field's value: a string with no escape, or `null`.
    fn kept(&mut self, seen: &mut u32, bit: u32) -> Option<Option<&'a str>> {
        if *seen & bit != 0 {
            return None;
        }
        *seen |= bit;
        if self.peek()? == b'n' {
            self.word(b"null")?;
            return Some(None);
        }
        self.plain().map(Some)
    }

    fn payload(&mut self) -> Option<Kept<'a>> {
        let mut p = Kept::default();
        let mut seen = 0u32;
        self.members(PAYLOAD, |s, key| {
            let slot = match key {
                EVENT_ID => &mut p.event_id,
                SUBDOMAIN => &mut p.subdomain,
                SESSION_ID => &mut p.session_id,
                CREATED_AT => &mut p.created_at,
                EVENT => &mut p.event,
                PATH => &mut p.path,
                REFERRER => &mut p.referrer,
                USER_AGENT => &mut p.user_agent,
                _ => return s.skip(1),
            };
            *slot = s.kept(&mut seen, 1 << key)?;
            Some(())
        })?;
        Some(p)
    }

    /// A payload string (the quote next) read as the object it holds where it is, when the
    /// only escapes in it are its strings' quotes (`\"`): nothing copied, and its kept
    /// fields slices of the line. `None` leaves the scanner where it was.
    fn in_place(&mut self) -> Option<Kept<'a>> {
        let mut inner = Scan::<'a, '_, true> {
            t: self.t,
            b: self.b,
            stops: self.stops,
            order: self.order,
            i: self.i + 1,
        };
        inner.ws();
        let kept = inner.payload()?;
        inner.ws();
        (self.b.get(inner.i) == Some(&b'"')).then_some(())?;
        self.i = inner.i + 1;
        Some(kept)
    }

    fn end(&mut self) -> Option<()> {
        self.ws();
        (self.i == self.b.len()).then_some(())
    }
}

/// A line's envelope, or `None` when this reader gives it to serde_json (`stops`: room for the
/// line's index, kept from line to line).
pub(crate) fn envelope<'a>(
    line: &'a [u8],
    stops: &mut Stops,
    order: &Order,
) -> Option<Envelope<'a>> {
    let t = simdutf8::basic::from_utf8(line).ok()?;
    stops.of(line);
    let mut s = Scan::<'a, '_, false> {
        t,
        b: line,
        stops,
        order,
        i: 0,
    };
    s.ws();
    let mut env = Envelope {
        event_type: None,
        payload: None,
    };
    let mut seen = 0u32;
    s.members(ENVELOPE, |s, key| match key {
        EVENT_TYPE => {
            env.event_type = s.kept(&mut seen, 1)?;
            Some(())
        }
        PAYLOAD_KEY => {
            if seen & 2 != 0 {
                return None;
            }
            seen |= 2;
            env.payload = Some(match s.peek()? {
                b'{' => Found::Object(s.payload()?),
                b'"' => match s.in_place() {
                    Some(kept) => Found::Object(kept),
                    None => Found::Text(s.i + 1, s.string()?),
                },
                _ => {
                    s.word(b"null")?;
                    Found::Null
                }
            });
            Some(())
        }
        _ => s.skip(1),
    })?;
    s.end()?;
    Some(env)
}

/// The text of a JSON string's `raw` bytes (between its quotes, in a text already checked as
/// UTF-8 whose index is `stops`, `raw` at `at` in it) with its escapes undone into `out`, or
/// `None` for a `\u` escape or a broken one (serde_json decides those): a payload string with
/// an escape other than its strings' quotes' (`Scan::in_place`). The backslashes are found from
/// the index, and each run between two copied 16 bytes at once where it is that short.
pub(crate) fn unescape<'b>(
    raw: &'b [u8],
    at: usize,
    stops: &Stops,
    out: &'b mut Vec<u8>,
) -> Option<&'b str> {
    // Inside a string the only stops are backslashes (a quote or a control character ended it).
    let backslash = |i: usize| {
        stops
            .next(at + i)
            .map(|p| p - at)
            .filter(|&p| p < raw.len())
    };
    let Some(first) = backslash(0) else {
        return simdutf8::basic::from_utf8(raw).ok();
    };
    // The text only shrinks: `out` has the room of `raw` and 16 bytes more, and a short run is
    // copied 16 bytes whole (what follows it is written over next).
    out.clear();
    out.resize(raw.len() + 16, 0);
    let (mut i, mut o, mut next) = (0, 0, Some(first));
    while let Some(p) = next {
        let run = p - i;
        match raw.get(i..i + 16) {
            Some(word) if run <= 16 => out[o..o + 16].copy_from_slice(word),
            _ => out[o..o + run].copy_from_slice(&raw[i..p]),
        }
        o += run;
        if raw[p] != b'\\' {
            return None;
        }
        out[o] = escaped(*raw.get(p + 1)?)?;
        (i, o) = (p + 2, o + 1);
        next = backslash(i);
    }
    let rest = raw.len() - i;
    out[o..o + rest].copy_from_slice(&raw[i..]);
    out.truncate(o + rest);
    // Undoing escapes of ASCII characters in UTF-8 leaves UTF-8.
    simdutf8::basic::from_utf8(out).ok()
}

/// The byte a one-letter escape stands for (`None`: `\u` or not an escape).
fn escaped(letter: u8) -> Option<u8> {
    Some(match letter {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        _ => return None,
    })
}

/// A payload string's text read as the object it should hold, or `None` (serde_json decides;
/// `stops`: room for the text's index).
pub(crate) fn payload_text<'a>(
    text: &'a str,
    stops: &mut Stops,
    order: &Order,
) -> Option<Kept<'a>> {
    stops.of(text.as_bytes());
    let mut s = Scan::<'a, '_, false> {
        t: text,
        b: text.as_bytes(),
        stops,
        order,
        i: 0,
    };
    s.ws();
    let p = s.payload()?;
    s.end()?;
    Some(p)
}
