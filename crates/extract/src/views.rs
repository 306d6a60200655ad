//! Page views: one page, and the offset walk over a window while `hasMore`.

use super::{ApiError, Client, Operation, escape};
use docpipe_catalog::calendar::Window;
pub use docpipe_catalog::views::{Counts, count};
use serde::Deserialize;

/// Rows per page docpipe asks for (the service's maximum).
pub const PAGE_LIMIT: u32 = 250;

/// The most pages one window's walk may take (half a million rows: far more pages than any
/// documentation site has), so that a service that says `hasMore` for ever is walked no
/// further.
pub const MAX_WALK_PAGES: u64 = 2_000;

/// Empty pages in a row that say there is more before a walk is refused: a service that
/// filters rows after paging sends a few; one that sends this many leads nowhere (and a
/// dataset whose totals do not bound its rows has no other bound below [`MAX_WALK_PAGES`]).
pub const MAX_EMPTY_RUN: usize = 10;

/// One page's counts, owned (for tests and for reading a partition back); a fetched page holds
/// its rows in [`Rows`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
pub struct ViewRow {
    /// Page path, as data (never used as a file name).
    pub path: String,
    /// Human views.
    #[serde(deserialize_with = "count")]
    pub human: i64,
    /// AI views.
    #[serde(deserialize_with = "count")]
    pub ai: i64,
    /// human + ai.
    #[serde(deserialize_with = "count")]
    pub total: i64,
}

/// One row of a [`Rows`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRef<'a> {
    /// Page path.
    pub path: &'a str,
    /// Human views.
    pub human: i64,
    /// AI views.
    pub ai: i64,
    /// human + ai.
    pub total: i64,
}

impl RowRef<'_> {
    /// The row, owned.
    pub fn to_owned(&self) -> ViewRow {
        ViewRow {
            path: self.path.to_string(),
            human: self.human,
            ai: self.ai,
            total: self.total,
        }
    }
}

/// Rows column by column: every path in one buffer, so that a page costs a handful of
/// allocations rather than one per row, and the columns go to Arrow as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Rows {
    /// The paths one after another.
    paths: String,
    /// Where each path ends in `paths`.
    ends: Vec<u32>,
    human: Vec<i64>,
    ai: Vec<i64>,
    total: Vec<i64>,
}

impl Rows {
    /// Room for `rows` rows of `path_bytes` path bytes in all.
    pub fn with_capacity(rows: usize, path_bytes: usize) -> Self {
        Self {
            paths: String::with_capacity(path_bytes),
            ends: Vec::with_capacity(rows),
            human: Vec::with_capacity(rows),
            ai: Vec::with_capacity(rows),
            total: Vec::with_capacity(rows),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Adds a row.
    pub fn push(&mut self, path: &str, human: i64, ai: i64, total: i64) {
        self.paths.push_str(path);
        self.end_row(human, ai, total);
    }

    /// Ends a row whose path was just appended to `paths`.
    fn end_row(&mut self, human: i64, ai: i64, total: i64) {
        self.ends.push(self.paths.len() as u32);
        self.human.push(human);
        self.ai.push(ai);
        self.total.push(total);
    }

    /// Where row `i`'s path starts in [`Rows::path_bytes`].
    fn start(&self, i: usize) -> usize {
        if i == 0 { 0 } else { self.ends[i - 1] as usize }
    }

    /// Row `i`'s path.
    pub fn path(&self, i: usize) -> &str {
        &self.paths[self.start(i)..self.ends[i] as usize]
    }

    /// Row `i`.
    pub fn get(&self, i: usize) -> RowRef<'_> {
        RowRef {
            path: self.path(i),
            human: self.human[i],
            ai: self.ai[i],
            total: self.total[i],
        }
    }

    /// The rows in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RowRef<'_>> + Clone + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Every path, one after another (see [`Rows::path_ends`]).
    pub fn path_bytes(&self) -> &str {
        &self.paths
    }

    /// Where each path ends in [`Rows::path_bytes`].
    pub fn path_ends(&self) -> &[u32] {
        &self.ends
    }

    /// The human column.
    pub fn human(&self) -> &[i64] {
        &self.human
    }

    /// The AI column.
    pub fn ai(&self) -> &[i64] {
        &self.ai
    }

    /// The total column.
    pub fn total(&self) -> &[i64] {
        &self.total
    }

    /// The rows, owned.
    pub fn to_vec(&self) -> Vec<ViewRow> {
        self.iter().map(|r| r.to_owned()).collect()
    }
}

impl FromIterator<ViewRow> for Rows {
    fn from_iter<I: IntoIterator<Item = ViewRow>>(iter: I) -> Self {
        let mut rows = Rows::default();
        for r in iter {
            rows.push(&r.path, r.human, r.ai, r.total);
        }
        rows
    }
}

/// A row docpipe cannot store faithfully (a fractional, negative or too large count, a row
/// whose total is not human + ai, a row that is not an object of a string path and counts):
/// kept aside with its JSON and the reason, never in the page's rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reject {
    /// The row as the service sent it (JSON).
    pub raw: String,
    /// Why it was set aside.
    pub reason: String,
}

/// One response of the page views operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewsPage {
    /// Site-wide totals for the range (`None`: the page left them out, or some of them: a
    /// walk takes its first page's).
    pub totals: Option<Counts>,
    /// Per-page rows of this page.
    pub views: Rows,
    /// Rows set aside (see [`Reject`]).
    pub rejects: Vec<Reject>,
    /// Whether rows exist past this page.
    pub has_more: bool,
}

/// A page as serde reads it: the reference decoder, for the pages the fast reader leaves. Its
/// own module so that serde's errors name it `ViewsPage`.
mod reference {
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub struct ViewsPage {
        /// Read as far as it is there (see [`super::totals_of`]).
        #[serde(default)]
        pub totals: Option<SomeCounts>,
        /// Each row on its own: one that does not read is set aside, not the page.
        pub views: Vec<serde_json::Value>,
        #[serde(rename = "hasMore")]
        pub has_more: bool,
    }

    /// Totals as far as they are there; a count that is there is read by the count rule.
    #[derive(Deserialize)]
    pub struct SomeCounts {
        #[serde(default, deserialize_with = "some_count")]
        pub human: Option<i64>,
        #[serde(default, deserialize_with = "some_count")]
        pub ai: Option<i64>,
        #[serde(default, deserialize_with = "some_count")]
        pub total: Option<i64>,
    }

    fn some_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        #[derive(Deserialize)]
        struct C(#[serde(deserialize_with = "super::count")] i64);
        Ok(Option::<C>::deserialize(d)?.map(|c| c.0))
    }
}

/// A row's count, as the `count` rule reads it: a non-negative integer in i64 (an integral
/// float such as `12.0` too).
fn row_count(row: &serde_json::Value, name: &str) -> Result<i64, String> {
    let Some(v) = row.get(name) else {
        return Err(format!("missing field `{name}`"));
    };
    let Some(n) = v.as_number() else {
        return Err(format!("{name} {v} is not a number"));
    };
    integral(n, "count")
}

/// A JSON number as a count: a non-negative integer in i64 (an integral float such as `12.0`
/// too, up to 2^53); `what` names it in the error.
pub fn integral(n: &serde_json::Number, what: &str) -> Result<i64, String> {
    if let Some(i) = n.as_i64() {
        return if i < 0 {
            Err(format!("{what} {i} is negative"))
        } else {
            Ok(i)
        };
    }
    if let Some(u) = n.as_u64() {
        return Err(format!("{what} {u} is too large"));
    }
    match n.as_f64() {
        Some(f)
            if f.is_finite()
                && f.fract() == 0.0
                && (0.0..=9_007_199_254_740_992.0).contains(&f) =>
        {
            Ok(f as i64)
        }
        _ => Err(format!("{what} {n} is not a non-negative integer")),
    }
}

/// A row read from its JSON value, or why it is set aside.
fn row_of(row: &serde_json::Value) -> Result<ViewRow, String> {
    if !row.is_object() {
        return Err("a row is not an object".into());
    }
    let path = match row.get("path") {
        Some(serde_json::Value::String(p)) => p.clone(),
        Some(other) => return Err(format!("path {other} is not a string")),
        None => return Err("missing field `path`".into()),
    };
    Ok(ViewRow {
        path,
        human: row_count(row, "human")?,
        ai: row_count(row, "ai")?,
        total: row_count(row, "total")?,
    })
}

/// The common case of a page, read without serde's machinery: compact or spaced JSON whose
/// objects hold exactly the known fields (in any order), strings without escapes and counts
/// as plain integers. Anything else (an escape, a float such as `12.0`, an unknown or repeated
/// field, a syntax error) gives `None`, and the page goes to the serde decoder, which stays the
/// reference: whatever this accepts, it reads exactly as serde does (a test mutates pages by the
/// thousand and compares both). Measured: a third of the decoding CPU.
mod fast {
    use super::{Counts, Rows, ViewsPage};

    struct Reader<'a> {
        /// The body, known to be UTF-8.
        s: &'a str,
        b: &'a [u8],
        i: usize,
    }

    impl<'a> Reader<'a> {
        /// The next byte after whitespace, not consumed.
        fn peek(&mut self) -> Option<u8> {
            while let Some(&c) = self.b.get(self.i) {
                if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                    return Some(c);
                }
                self.i += 1;
            }
            None
        }

        fn eat(&mut self, c: u8) -> Option<()> {
            (self.peek()? == c).then(|| self.i += 1)
        }

        /// A string without escapes (control characters in it are refused by `page`, once
        /// for all the paths of the page).
        fn string(&mut self) -> Option<&'a str> {
            self.eat(b'"')?;
            let start = self.i;
            let len = memchr::memchr2(b'"', b'\\', &self.b[start..])?;
            if self.b[start + len] != b'"' {
                return None;
            }
            self.i += len + 1;
            self.s.get(start..start + len)
        }

        /// A non-negative integer that fits in i64, without sign, fraction or exponent.
        fn count(&mut self) -> Option<i64> {
            self.peek()?;
            let start = self.i;
            let mut v: i64 = 0;
            while let Some(&c) = self.b.get(self.i).filter(|c| c.is_ascii_digit()) {
                v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
                self.i += 1;
            }
            let digits = self.i - start;
            let leading_zero = digits > 1 && self.b[start] == b'0';
            let more = matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E'));
            (digits > 0 && !leading_zero && !more).then_some(v)
        }

        fn boolean(&mut self) -> Option<bool> {
            self.peek()?;
            for (word, v) in [(&b"true"[..], true), (&b"false"[..], false)] {
                if self.b[self.i..].starts_with(word) {
                    self.i += word.len();
                    return Some(v);
                }
            }
            None
        }

        /// The members of an object, each through `field` (which refuses unknown or repeated
        /// names); the opening brace is already read.
        fn members(&mut self, mut field: impl FnMut(&mut Self, &str) -> Option<()>) -> Option<()> {
            if self.peek()? == b'}' {
                self.i += 1;
                return Some(());
            }
            loop {
                let name = self.string()?;
                self.eat(b':')?;
                field(self, name)?;
                match self.peek()? {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        }

        /// `{"human":..,"ai":..,"total":..}`, in any order.
        fn counts(&mut self) -> Option<[i64; 3]> {
            self.eat(b'{')?;
            let mut v = [None; 3];
            self.members(|r, name| r.count_field(name, &mut v))?;
            Some([v[0]?, v[1]?, v[2]?])
        }

        /// The value of `human`, `ai` or `total` into its slot, which must be empty; `None`
        /// for any other name.
        fn count_field(&mut self, name: &str, v: &mut [Option<i64>; 3]) -> Option<()> {
            let slot = match name {
                "human" => &mut v[0],
                "ai" => &mut v[1],
                "total" => &mut v[2],
                _ => return None,
            };
            slot.is_none().then_some(())?;
            *slot = Some(self.count()?);
            Some(())
        }

        /// The rows array.
        fn rows(&mut self) -> Option<Rows> {
            self.eat(b'[')?;
            let mut rows = Rows::with_capacity(250, 250 * 32);
            if self.peek()? == b']' {
                self.i += 1;
                return Some(rows);
            }
            loop {
                self.eat(b'{')?;
                let (mut path, mut v) = (None, [None; 3]);
                self.members(|r, name| match name {
                    "path" if path.is_none() => {
                        path = Some(r.string()?);
                        Some(())
                    }
                    _ => r.count_field(name, &mut v),
                })?;
                rows.push(path?, v[0]?, v[1]?, v[2]?);
                match self.peek()? {
                    b',' => self.i += 1,
                    b']' => {
                        self.i += 1;
                        return Some(rows);
                    }
                    _ => return None,
                }
            }
        }
    }

    /// The page, or `None` when it is not of the common shape.
    pub fn page(body: &[u8]) -> Option<ViewsPage> {
        let s = std::str::from_utf8(body).ok()?;
        let mut r = Reader { s, b: body, i: 0 };
        r.eat(b'{')?;
        let (mut totals, mut views, mut has_more) = (None, None, None);
        r.members(|r, name| {
            match name {
                "totals" if totals.is_none() => totals = Some(r.counts()?),
                "views" if views.is_none() => views = Some(r.rows()?),
                "hasMore" if has_more.is_none() => has_more = Some(r.boolean()?),
                _ => return None,
            }
            Some(())
        })?;
        if r.peek().is_some() {
            return None;
        }
        // JSON has no raw control characters in strings; the names were matched already.
        let views = views?;
        if views
            .path_bytes()
            .bytes()
            .fold(false, |any, c| any | (c < 0x20))
        {
            return None;
        }
        let [human, ai, total] = totals?;
        Some(ViewsPage {
            totals: Some(Counts { human, ai, total }),
            views,
            rejects: Vec::new(),
            has_more: has_more?,
        })
    }
}

/// A page's totals: `None` when the page leaves them out or null, or leaves out any of
/// `human`, `ai` and `total` (a walk takes its first page's).
fn totals_of(t: Option<reference::SomeCounts>) -> Option<Counts> {
    let t = t?;
    Some(Counts {
        human: t.human?,
        ai: t.ai?,
        total: t.total?,
    })
}

/// Decodes a page with serde; rows that do not read are set aside.
fn from_slice(body: &[u8]) -> Result<ViewsPage, String> {
    let page: reference::ViewsPage =
        serde_json::from_slice(body).map_err(|e| format!("page views body: {e}"))?;
    let mut views = Rows::with_capacity(page.views.len(), page.views.len() * 32);
    let mut rejects = Vec::new();
    for v in &page.views {
        match row_of(v) {
            Ok(r) => views.push(&r.path, r.human, r.ai, r.total),
            Err(reason) => rejects.push(Reject {
                raw: v.to_string(),
                reason,
            }),
        }
    }
    Ok(ViewsPage {
        totals: totals_of(page.totals),
        views,
        rejects,
        has_more: page.has_more,
    })
}

/// Decodes and checks a page: the totals add up, no more rows than asked for. Any string is a
/// path (the spec allows any); a row whose counts cannot be stored faithfully or do not add
/// up is set aside in [`ViewsPage::rejects`], not the page.
pub fn decode_page(body: &[u8], limit: u32) -> Result<ViewsPage, String> {
    let mut page = match fast::page(body) {
        Some(page) => page,
        None => from_slice(body)?,
    };
    if let Some(t) = page.totals
        && t.human.checked_add(t.ai) != Some(t.total)
    {
        return Err(format!(
            "totals: total {} is not human {} + ai {}",
            t.total, t.human, t.ai
        ));
    }
    let rows = page.views.len() + page.rejects.len();
    if rows > limit as usize {
        return Err(format!(
            "{rows} rows in a page, more than the limit {limit}"
        ));
    }
    // The whole page at once; only a page that fails is gone through row by row.
    let v = &page.views;
    let sums_ok = (v.human().iter().zip(v.ai()).zip(v.total())).fold(true, |ok, ((&h, &a), &t)| {
        ok & (h.checked_add(a) == Some(t))
    });
    if sums_ok {
        return Ok(page);
    }
    let mut kept = Rows::with_capacity(v.len(), v.path_bytes().len());
    for r in v.iter() {
        if r.human.checked_add(r.ai) == Some(r.total) {
            kept.push(r.path, r.human, r.ai, r.total);
        } else {
            page.rejects.push(Reject {
                raw: serde_json::json!({"path": r.path, "human": r.human, "ai": r.ai, "total": r.total})
                    .to_string(),
                reason: format!("total {} is not human {} + ai {}", r.total, r.human, r.ai),
            });
        }
    }
    page.views = kept;
    Ok(page)
}

/// A hash of a page's rows, with fixed keys (the same rows always give the same hash).
pub fn rows_hash(rows: &Rows) -> u64 {
    use std::hash::BuildHasher;
    foldhash::quality::FixedState::with_seed(0x0064_6f63_7069_7065).hash_one(rows)
}

impl Client {
    /// One page of page views.
    pub async fn page_views(
        &self,
        project: &str,
        window: Window,
        limit: u32,
        offset: u64,
    ) -> Result<ViewsPage, ApiError> {
        let mut call = self.analytics_call(
            Operation::PageViews,
            format!("project {project} ({})", window.describe()),
            format!("/v1/analytics/{}/views", escape(project)),
            vec![
                ("dateFrom", window.bounds().0),
                ("dateTo", window.bounds().1),
                ("limit", limit.to_string()),
                ("offset", offset.to_string()),
            ],
        );
        call.project = Some(project.to_string());
        self.send_json(&call, |b| decode_page(b, limit)).await
    }
}

/// Where a page-view walk goes after `n` pages of `rows` rows (set aside ones too), the first
/// of them `first` and the last `last`: the offset of the next page, `None` once the last says
/// there is no more, or why the pages lead nowhere: a first page without the totals the day's
/// `site_totals` needs, more rows than the first page's totals allow (`zero_rows`, asked only then, counts the
/// rows without views, which the totals do not count), or a day of more than
/// [`MAX_WALK_PAGES`] pages. An empty page that says there is more is followed like any other.
pub fn next_offset(
    n: usize,
    rows: u64,
    first: Option<&ViewsPage>,
    last: Option<&ViewsPage>,
    zero_rows: impl FnOnce() -> u64,
) -> Result<Option<u64>, String> {
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(Some(0));
    };
    let Some(totals) = first.totals else {
        return Err(
            "the page at offset 0 has no `totals` (or not all of human, ai and total), which the site_totals table needs"
                .into(),
        );
    };
    if !last.has_more {
        return Ok(None);
    }
    let next = n as u64 * u64::from(PAGE_LIMIT);
    // Every row with views has at least one, so rows never outnumber total views. The rows
    // received count, not the offset: a service that filters after paging sends empty pages.
    if rows >= totals.total as u64 && rows >= (totals.total as u64).saturating_add(zero_rows()) {
        return Err(format!(
            "hasMore at offset {next}, but the totals ({}) allow no more rows",
            totals.total
        ));
    }
    if next >= MAX_WALK_PAGES * u64::from(PAGE_LIMIT) {
        return Err(format!(
            "hasMore at offset {next}: a day of more than {MAX_WALK_PAGES} pages ({} rows) is refused",
            MAX_WALK_PAGES * u64::from(PAGE_LIMIT)
        ));
    }
    Ok(Some(next))
}

/// The rows of a page-view page without views (see [`next_offset`]).
pub fn zero_rows(page: &ViewsPage) -> u64 {
    page.views.total().iter().filter(|&&t| t == 0).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random choices for [`random_page_text`].
    struct Gen(u64);

    impl Gen {
        fn roll(&mut self, n: u64) -> u64 {
            self.0 = docpipe_catalog::random::mix(self.0);
            self.0 % n
        }

        fn ws(&mut self) -> &'static str {
            ["", "", "", " ", "\n  ", "\t", "\r\n"][self.roll(7) as usize]
        }

        /// A count, now and then in a form the fast reader leaves to serde.
        fn number(&mut self) -> String {
            let v = match self.roll(8) {
                0 => 0,
                1 => i64::MAX as u64,
                2 => self.roll(1 << 40),
                _ => self.roll(5000),
            };
            match self.roll(80) {
                0 => format!("{v}.0"),
                1 => format!("{v}e0"),
                2 => format!("-{v}"),
                3 => format!("0{v}"),
                4 => "18446744073709551615".into(),
                5 => "99999999999999999999".into(),
                6 => "\"1\"".into(),
                _ => v.to_string(),
            }
        }

        /// An object of `fields` in random order, now and then with an extra, a repeated or a
        /// missing field, or an escape in a name.
        fn object(&mut self, mut fields: Vec<(String, String)>) -> String {
            for i in (1..fields.len()).rev() {
                fields.swap(i, self.roll(i as u64 + 1) as usize);
            }
            if self.roll(15) == 0 {
                fields.push(("extra".into(), "[1,{\"a\":null}]".into()));
            }
            if self.roll(25) == 0 && !fields.is_empty() {
                fields.push(fields[0].clone());
            }
            if self.roll(30) == 0 {
                fields.pop();
            }
            let inner: Vec<String> = fields
                .into_iter()
                .map(|(k, v)| {
                    let k = if self.roll(30) == 0 {
                        k.replacen('a', "\\u0061", 1)
                    } else {
                        k
                    };
                    let (a, b, c, d) = (self.ws(), self.ws(), self.ws(), self.ws());
                    format!("{a}\"{k}\"{b}:{c}{v}{d}")
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }

        fn counts(&mut self, names: &[&str]) -> Vec<(String, String)> {
            names
                .iter()
                .map(|k| (k.to_string(), self.number()))
                .collect()
        }
    }

    /// A page's JSON with random spacing, field order, extra fields, escapes and number forms:
    /// mostly the common shape, often not.
    fn random_page_text(seed: u64) -> String {
        let mut g = Gen(seed);
        let mut rows = Vec::new();
        for i in 0..g.roll(5) {
            let path = match g.roll(12) {
                0 => format!("/caf\\u00e9/{i}"),
                1 => format!("/\\/{i}"),
                2 => format!("/日本/{i}"),
                3 => String::new(),
                _ => format!("/docs/page-{i}"),
            };
            let mut fields = vec![("path".to_string(), format!("\"{path}\""))];
            fields.extend(g.counts(&["human", "ai", "total"]));
            rows.push(g.object(fields));
        }
        let views = format!("[{}{}]", rows.join(","), g.ws());
        let totals = g.counts(&["human", "ai", "total"]);
        let totals = g.object(totals);
        let more = if g.roll(2) == 0 { "true" } else { "false" };
        let page = vec![
            ("totals".to_string(), totals),
            ("views".to_string(), views),
            ("hasMore".to_string(), more.to_string()),
        ];
        let (a, b) = (g.ws(), g.ws());
        format!("{a}{}{b}", g.object(page))
    }

    #[test]
    fn the_fast_reader_reads_every_page_it_accepts_exactly_as_serde_does() {
        use docpipe_catalog::random::mix;
        let (mut fast_read, mut serde_only, mut neither) = (0, 0, 0);
        for seed in 0..20_000u64 {
            let mut text = random_page_text(seed).into_bytes();
            // Now and then, damage: a byte dropped, or one of JSON's own put in.
            let mut h = mix(seed ^ 0xdead);
            if h.is_multiple_of(4) {
                for _ in 0..1 + h % 3 {
                    h = mix(h);
                    let at = (h % (text.len() as u64 + 1)) as usize;
                    let set = b"\"\\{}[],:0-.eE \t\x00\xc3\xff9";
                    let b = set[(h >> 20) as usize % set.len()];
                    if h & (1 << 40) == 0 && at < text.len() {
                        text.remove(at);
                    } else {
                        text.insert(at, b);
                    }
                }
            }
            let reference = from_slice(&text);
            match fast::page(&text) {
                Some(page) => {
                    fast_read += 1;
                    match &reference {
                        Ok(r) => assert_eq!(&page, r, "{}", String::from_utf8_lossy(&text)),
                        Err(e) => panic!(
                            "the fast reader accepted what serde refuses ({e}): {}",
                            String::from_utf8_lossy(&text)
                        ),
                    }
                }
                None if reference.is_ok() => serde_only += 1,
                None => neither += 1,
            }
        }
        // Every kind of case was met, many times.
        assert!(fast_read > 2_000, "{fast_read}");
        assert!(serde_only > 2_000, "{serde_only}");
        assert!(neither > 5_000, "{neither}");
    }

    #[test]
    #[expect(clippy::too_many_lines)]
    fn the_decoder_reads_escapes_spacing_and_unknown_fields_and_words_errors_as_serde_does() {
        let page = decode_page(
            br#" {"extra":[1,{"x":null}],"hasMore":true,"views":[
                {"total":3,"ai":1,"human":2,"path":"\/docs\/caf\u00e9","note":"ignored"},
                {"path":"/b","human":0,"ai":0,"total":0}],
              "totals":{"human":2,"ai":1,"total":3}} "#,
            250,
        )
        .unwrap();
        assert_eq!(
            page.views.to_vec(),
            vec![
                ViewRow {
                    path: "/docs/café".into(),
                    human: 2,
                    ai: 1,
                    total: 3
                },
                ViewRow {
                    path: "/b".into(),
                    human: 0,
                    ai: 0,
                    total: 0
                }
            ]
        );
        assert_eq!(
            (page.views.path_bytes(), page.views.path_ends()),
            ("/docs/café/b", &[11u32, 13][..])
        );
        assert!(page.has_more);
        // A row that does not read is set aside with its JSON and the reason; the page reads.
        let row = |r: &str| {
            format!(r#"{{"totals":{{"human":0,"ai":0,"total":0}},"views":[{r}],"hasMore":false}}"#)
        };
        for (r, reason) in [
            (r#"{"human":0,"ai":0,"total":0}"#, "missing field `path`"),
            (r#"{"path":"/a","ai":0,"total":0}"#, "missing field `human`"),
            (
                r#"{"path":7,"human":0,"ai":0,"total":0}"#,
                "path 7 is not a string",
            ),
            ("[]", "a row is not an object"),
            (
                r#"{"path":"/a","human":"many","ai":0,"total":0}"#,
                "human \"many\" is not a number",
            ),
        ] {
            let page = decode_page(row(r).as_bytes(), 250).unwrap();
            assert_eq!(page.views.len(), 0, "{r}");
            assert_eq!(
                page.rejects,
                [Reject {
                    raw: serde_json::from_str::<serde_json::Value>(r)
                        .unwrap()
                        .to_string(),
                    reason: reason.into()
                }],
                "{r}"
            );
        }
        // A field twice in a row: the last one, as JSON readers take it.
        let page = decode_page(
            row(r#"{"path":"/a","path":"/b","human":0,"human":1,"ai":0,"total":1}"#).as_bytes(),
            250,
        )
        .unwrap();
        assert_eq!((page.views.path(0), page.views.human()), ("/b", &[1][..]));
        let cases = [
            (
                r#"{"totals":{"human":0,"ai":0,"total":0},"views":[],"views":[],"hasMore":false}"#,
                "duplicate field `views`",
            ),
            (
                r#"{"totals":{"human":0,"ai":0,"total":0},"hasMore":false}"#,
                "missing field `views`",
            ),
            (
                r#"{"totals":{"human":0,"ai":0,"total":0},"views":{},"hasMore":false}"#,
                "invalid type: map, expected a sequence",
            ),
            (r#"[]"#, "expected struct ViewsPage with 3 elements"),
            (
                r#"{"totals":{"human":0,"ai":0,"total":0},"views":[],"hasMore":false} x"#,
                "trailing characters",
            ),
        ];
        for (body, want) in cases {
            let err = decode_page(body.as_bytes(), 250).unwrap_err();
            assert!(err.contains(want), "{body}: {err}");
        }
    }

    #[test]
    fn counts_accept_integral_floats_and_refuse_everything_else() {
        let ok = decode_page(
            br#"{"totals":{"human":1.0,"ai":2,"total":3},"views":[],"hasMore":false}"#,
            250,
        )
        .unwrap();
        assert_eq!(
            ok.totals,
            Some(Counts {
                human: 1,
                ai: 2,
                total: 3
            })
        );
        let cases = [
            (
                r#"{"totals":{"human":1.5,"ai":2,"total":3.5},"views":[],"hasMore":false}"#,
                "count 1.5 is not a non-negative integer",
            ),
            (
                r#"{"totals":{"human":-1,"ai":2,"total":1},"views":[],"hasMore":false}"#,
                "count -1 is negative",
            ),
            (
                r#"{"totals":{"human":"1","ai":2,"total":3},"views":[],"hasMore":false}"#,
                "expected a non-negative integer count",
            ),
            (
                r#"{"totals":{"human":18446744073709551615,"ai":0,"total":0},"views":[],"hasMore":false}"#,
                "count 18446744073709551615 is too large",
            ),
            (
                r#"{"totals":{"human":1,"ai":2,"total":4},"views":[],"hasMore":false}"#,
                "totals: total 4 is not human 1 + ai 2",
            ),
            (
                r#"{"totals":{"human":1,"ai":0,"total":1}"#,
                "page views body: EOF while parsing",
            ),
        ];
        for (body, want) in cases {
            let err = decode_page(body.as_bytes(), 250).unwrap_err();
            assert!(err.contains(want), "{body}: {err}");
        }
        // Any string is a path (a control character, nothing at all); a row whose counts do
        // not add up, or cannot be stored, is set aside; the rest of the page reads.
        let mixed = r#"{"totals":{"human":4,"ai":0,"total":4},"views":[{"path":"/a","human":1,"ai":0,"total":1},{"path":"/b","human":1,"ai":0,"total":2},{"path":"/c\u0001","human":1,"ai":0,"total":1},{"path":"","human":0,"ai":0,"total":0},{"path":"/d","human":12.5,"ai":0,"total":12.5},{"path":"/e","human":-1,"ai":0,"total":-1}],"hasMore":false}"#;
        let page = decode_page(mixed.as_bytes(), 250).unwrap();
        assert_eq!(
            page.views.iter().map(|r| r.path).collect::<Vec<_>>(),
            ["/a", "/c\u{1}", ""]
        );
        assert_eq!(
            page.rejects
                .iter()
                .map(|r| (r.raw.as_str(), r.reason.as_str()))
                .collect::<Vec<_>>(),
            [
                (
                    r#"{"ai":0,"human":12.5,"path":"/d","total":12.5}"#,
                    "count 12.5 is not a non-negative integer"
                ),
                (
                    r#"{"ai":0,"human":-1,"path":"/e","total":-1}"#,
                    "count -1 is negative"
                ),
                (
                    r#"{"ai":0,"human":1,"path":"/b","total":2}"#,
                    "total 2 is not human 1 + ai 0"
                ),
            ]
        );
        let two = r#"{"totals":{"human":2,"ai":0,"total":2},"views":[{"path":"/a","human":1,"ai":0,"total":1},{"path":"/b","human":1,"ai":0,"total":1}],"hasMore":false}"#;
        assert_eq!(
            decode_page(two.as_bytes(), 1).unwrap_err(),
            "2 rows in a page, more than the limit 1"
        );
    }
}
