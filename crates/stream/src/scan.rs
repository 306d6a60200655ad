//! The stream's common line read without a general parser: `{"eventType": ..., "payload": ...}`
//! whose kept fields are strings without escapes. Whatever is unusual (an escape in a kept
//! field or a key, a `\u` anywhere, a duplicate field, a value of another type, deep nesting)
//! makes it give up (`None`), and serde_json reads the line instead: this reader never accepts
//! what serde_json would refuse, nor reads a field differently (`tests.rs` holds it to that on
//! mutated lines). The values it skips are checked to the JSON grammar, as serde_json checks
//! them.

/// The fields of a payload docpipe keeps, as written (`line::Payload` is made from them).
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

/// What `payload` holds.
pub(crate) enum Found<'a> {
    /// An object, its kept fields read.
    Object(Kept<'a>),
    /// A string: its contents as written (escapes not yet undone).
    Text(&'a [u8]),
    /// `null`.
    Null,
}

/// A line's envelope.
pub(crate) struct Envelope<'a> {
    pub(crate) event_type: Option<&'a str>,
    /// `None`: no `payload` field.
    pub(crate) payload: Option<Found<'a>>,
}

/// The bytes that end a run of a string's plain characters: a quote, a backslash, a control
/// character (which JSON forbids in a string).
const STOPS: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Where the string's contents in `b` from `from` stop: the next quote, backslash or control
/// character, eight bytes at a time (SWAR) and the last few a byte at a time. Strings here are
/// 10 to 120 bytes: a word at a time has no set-up to pay, where a vector search's cost more
/// than it saved (docs/benchmarks.md).
pub(crate) fn stop(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().ok()?);
        // The lowest flag of the three terms is the first stop.
        let found = below(w, 0x20) | equal(w, b'"') | equal(w, b'\\');
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..]
        .iter()
        .position(|&c| STOPS[c as usize])
        .map(|n| i + n)
}

/// A byte in every lane of a word.
const ONES: u64 = 0x0101_0101_0101_0101;

/// Flags (the top bit of its lane) each byte of `w` below `n` (at most 0x80): the lowest flag is
/// exact, and a borrow can flag a byte above a flagged one, never below (SWAR).
const fn below(w: u64, n: u64) -> u64 {
    w.wrapping_sub(ONES * n) & !w & (ONES * 0x80)
}

/// Flags each byte of `w` equal to `c`, as [`below`] does (the lowest exact).
const fn equal(w: u64, c: u8) -> u64 {
    below(w ^ (ONES * c as u64), 1)
}

struct Scan<'a> {
    /// The text (checked as UTF-8 once, whole), and its bytes.
    t: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
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
        stop(self.b, self.i)
    }

    /// A string with no escape (the quote next), as text.
    fn plain(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let end = self.stop()?;
        if self.b[end] != b'"' {
            return None;
        }
        // Between two quotes: a slice of the text on its characters' boundaries.
        let text = self.t.get(self.i..end);
        self.i = end + 1;
        text
    }

    /// A string's contents as written (the quote next), its escapes checked (no `\u`).
    fn string(&mut self) -> Option<&'a [u8]> {
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
            b'"' => self.string().map(|_| ()),
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

    /// An object's members (the brace next): `member` is handed each key (with no escape) with
    /// the scanner at its value, and reads or skips it.
    fn members(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.plain()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A kept field's value: a string with no escape, or `null`.
    fn kept(&mut self, seen: &mut u16, bit: u16) -> Option<Option<&'a str>> {
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
        let mut seen = 0u16;
        self.members(|s, key| {
            let slot = match key {
                "event_id" => (&mut p.event_id, 1),
                "subdomain" => (&mut p.subdomain, 2),
                "session_id" => (&mut p.session_id, 4),
                "created_at" => (&mut p.created_at, 8),
                "event" => (&mut p.event, 16),
                "path" => (&mut p.path, 32),
                "referrer" => (&mut p.referrer, 64),
                "user_agent" => (&mut p.user_agent, 128),
                _ => return s.skip(1),
            };
            *slot.0 = s.kept(&mut seen, slot.1)?;
            Some(())
        })?;
        Some(p)
    }

    fn end(&mut self) -> Option<()> {
        self.ws();
        (self.i == self.b.len()).then_some(())
    }
}

/// A line's envelope, or `None` when this reader gives it to serde_json.
pub(crate) fn envelope(line: &[u8]) -> Option<Envelope<'_>> {
    let t = std::str::from_utf8(line).ok()?;
    let mut s = Scan { t, b: line, i: 0 };
    s.ws();
    let mut env = Envelope {
        event_type: None,
        payload: None,
    };
    let mut seen = 0u16;
    s.members(|s, key| match key {
        "eventType" => {
            env.event_type = s.kept(&mut seen, 1)?;
            Some(())
        }
        "payload" => {
            if seen & 2 != 0 {
                return None;
            }
            seen |= 2;
            env.payload = Some(match s.peek()? {
                b'{' => Found::Object(s.payload()?),
                b'"' => Found::Text(s.string()?),
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

/// The text of a JSON string's `raw` bytes (between its quotes, the line already checked as
/// UTF-8) with its escapes undone into `out`, or `None` for a `\u` escape or a broken one
/// (serde_json decides those). The runs between backslashes are copied eight bytes at a time:
/// a payload string escapes every quote, and a byte at a time this was the largest part of
/// reading such a line (`perf`, docs/benchmarks.md).
pub(crate) fn unescape<'b>(raw: &'b [u8], out: &'b mut Vec<u8>) -> Option<&'b str> {
    let Some(first) = memchr::memchr(b'\\', raw) else {
        return std::str::from_utf8(raw).ok();
    };
    // The text only shrinks: `out` has the room of `raw`, and each word is copied whole (what
    // follows a backslash in it is written over next).
    out.clear();
    out.resize(raw.len(), 0);
    out[..first].copy_from_slice(&raw[..first]);
    let (mut i, mut o) = (first, first);
    while i < raw.len() {
        if raw[i] == b'\\' {
            out[o] = escaped(*raw.get(i + 1)?)?;
            (i, o) = (i + 2, o + 1);
            continue;
        }
        match raw.get(i..i + 8) {
            Some(chunk) => {
                out[o..o + 8].copy_from_slice(chunk);
                let found = equal(u64::from_le_bytes(chunk.try_into().ok()?), b'\\');
                let run = match found {
                    0 => 8,
                    f => (f.trailing_zeros() / 8) as usize,
                };
                (i, o) = (i + run, o + run);
            }
            None => {
                out[o] = raw[i];
                (i, o) = (i + 1, o + 1);
            }
        }
    }
    out.truncate(o);
    std::str::from_utf8(out).ok()
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

/// A payload string's text read as the object it should hold, or `None` (serde_json decides).
pub(crate) fn payload_text(text: &str) -> Option<Kept<'_>> {
    let mut s = Scan {
        t: text,
        b: text.as_bytes(),
        i: 0,
    };
    s.ws();
    let p = s.payload()?;
    s.end()?;
    Some(p)
}
