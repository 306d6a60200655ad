//! The journal of a window's walk: the pages fetched so far, appended to a file as they arrive,
//! so that a killed run resumes at the next offset. A plain append costs a fraction of a SQLite
//! insert of the same bytes (which writes them to the WAL, then to the database, then frees
//! them), and the state database keeps the one fact that must be transactional: which journal
//! belongs to the walk in progress (its id in the `walks` table).
//!
//! Layout: `DPJ1`, the walk's id (u64 LE), then one frame per page: payload length (u32 LE),
//! CRC-32 of the payload (u32 LE), payload. A payload is the offset (u64), `hasMore` (u8), the
//! totals (3 x i64), the rows' length (u32) and the rows (see [`encode_rows`]), then the rows set
//! aside: their number (u32), and per row its JSON and reason, each a length (u32) and UTF-8.
//! A frame cut by a kill fails its length or CRC: the journal ends before it, and the next
//! append overwrites it. A journal of an older layout (`DPJ1`) belongs to no walk: walked again.

use crate::api::views::Rows;
use crate::api::views::{Counts, Reject, ViewsPage};

/// A page kept until its window is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPage {
    /// Offset.
    pub offset: u64,
    /// Contents.
    pub page: ViewsPage,
}

/// Rows as compact bytes: per row, path length (u32 LE), path, human, ai, total (i64 LE).
pub fn encode_rows(rows: &Rows) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows.len() * 28 + rows.path_bytes().len());
    for r in rows.iter() {
        out.extend_from_slice(&(r.path.len() as u32).to_le_bytes());
        out.extend_from_slice(r.path.as_bytes());
        for v in [r.human, r.ai, r.total] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// The inverse of `encode_rows`; `None` when the bytes are damaged.
pub fn decode_rows(mut b: &[u8]) -> Option<Rows> {
    let mut out = Rows::default();
    while !b.is_empty() {
        let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let path = std::str::from_utf8(b.get(4..4 + n)?).ok()?;
        b = &b[4 + n..];
        let mut v = [0i64; 3];
        for x in &mut v {
            *x = i64::from_le_bytes(b.get(..8)?.try_into().ok()?);
            b = &b[8..];
        }
        out.push(path, v[0], v[1], v[2]);
    }
    Some(out)
}

const MAGIC: &[u8; 4] = b"DPJ2";
/// Bytes before the first frame.
pub const HEADER: usize = 12;
const FIXED: usize = 8 + 1 + 24 + 4;

/// The start of a journal for walk `id`.
pub fn header(id: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(MAGIC);
    h[4..].copy_from_slice(&id.to_le_bytes());
    h
}

/// One page as a frame.
pub fn frame(offset: u64, page: &ViewsPage) -> Vec<u8> {
    let rows = encode_rows(&page.views);
    let set_aside: usize = page
        .rejects
        .iter()
        .map(|r| 8 + r.raw.len() + r.reason.len())
        .sum();
    let mut payload = Vec::with_capacity(FIXED + rows.len() + 4 + set_aside);
    payload.extend_from_slice(&offset.to_le_bytes());
    payload.push(u8::from(page.has_more));
    for v in [page.totals.human, page.totals.ai, page.totals.total] {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    payload.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    payload.extend_from_slice(&rows);
    payload.extend_from_slice(&(page.rejects.len() as u32).to_le_bytes());
    for r in &page.rejects {
        for text in [&r.raw, &r.reason] {
            payload.extend_from_slice(&(text.len() as u32).to_le_bytes());
            payload.extend_from_slice(text.as_bytes());
        }
    }
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// A journal read back: the walk it belongs to, its whole frames, and where they end.
#[derive(Debug, Default)]
pub struct Read<'a> {
    /// The walk's id; `None` when the header is missing or damaged.
    pub id: Option<u64>,
    /// Payloads of the whole frames, in order.
    pub frames: Vec<&'a [u8]>,
    /// Bytes up to the end of the last whole frame.
    pub valid_len: u64,
}

/// Splits a journal into its whole frames; stops at the first cut or damaged one.
pub fn read(bytes: &[u8]) -> Read<'_> {
    if bytes.len() < HEADER || &bytes[..4] != MAGIC {
        return Read::default();
    }
    let id = u64::from_le_bytes(bytes[4..HEADER].try_into().unwrap_or_default());
    let mut frames = Vec::new();
    let mut at = HEADER;
    while let Some(head) = bytes.get(at..at + 8) {
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let Some(payload) = bytes.get(at + 8..at + 8 + len) else {
            break;
        };
        if len < FIXED || crc32fast::hash(payload) != crc {
            break;
        }
        frames.push(payload);
        at += 8 + len;
    }
    Read {
        id: Some(id),
        frames,
        valid_len: at as u64,
    }
}

/// A frame's payload alone (as the shared database keeps a page: the database checks its
/// bytes, so it needs no length and CRC of its own).
pub fn payload(frame: &[u8]) -> &[u8] {
    frame.get(8..).unwrap_or_default()
}

/// Whether a payload read back is long enough to be one (`peek` reads its first bytes).
pub fn is_whole(payload: &[u8]) -> bool {
    payload.len() >= FIXED
}

/// A frame's offset and `hasMore`, without decoding its rows.
pub fn peek(payload: &[u8]) -> (u64, bool) {
    let offset = u64::from_le_bytes(payload[..8].try_into().unwrap_or_default());
    (offset, payload[8] != 0)
}

/// A frame's page; `None` when its rows do not decode.
pub fn page(payload: &[u8]) -> Option<StoredPage> {
    let (offset, has_more) = peek(payload);
    let int = |i: usize| i64::from_le_bytes(payload[i..i + 8].try_into().unwrap_or_default());
    let totals = Counts {
        human: int(9),
        ai: int(17),
        total: int(25),
    };
    let rows_len = u32::from_le_bytes(payload[33..37].try_into().ok()?) as usize;
    let views = decode_rows(payload.get(FIXED..FIXED + rows_len)?)?;
    let mut rest = payload.get(FIXED + rows_len..)?;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
        rest = tail;
        Some(head)
    };
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let mut rejects = Vec::new();
    for _ in 0..count {
        let mut text = || -> Option<String> {
            let n = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
            String::from_utf8(take(n)?.to_vec()).ok()
        };
        let raw = text()?;
        let reason = text()?;
        rejects.push(Reject { raw, reason });
    }
    Some(StoredPage {
        offset,
        page: ViewsPage {
            totals,
            views,
            rejects,
            has_more,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::views::ViewRow;

    fn page(n: usize, has_more: bool) -> ViewsPage {
        ViewsPage {
            totals: Counts {
                human: 7,
                ai: 3,
                total: 10,
            },
            views: (0..n)
                .map(|i| ViewRow {
                    path: format!("/p{i}"),
                    human: i as i64,
                    ai: 1,
                    total: i as i64 + 1,
                })
                .collect(),
            rejects: if n == 2 {
                vec![Reject {
                    raw: r#"{"path":"/x","human":-1}"#.into(),
                    reason: "count -1 is negative".into(),
                }]
            } else {
                Vec::new()
            },
            has_more,
        }
    }

    #[test]
    fn rows_round_trip_through_the_compact_encoding() {
        use crate::api::views::ViewRow;
        let rows: Rows = [
            ViewRow {
                path: "/a/é".into(),
                human: 1,
                ai: 2,
                total: 3,
            },
            ViewRow {
                path: String::new(),
                human: i64::MAX,
                ai: 0,
                total: i64::MAX,
            },
        ]
        .into_iter()
        .collect();
        assert_eq!(decode_rows(&encode_rows(&rows)).unwrap(), rows);
        let bytes = encode_rows(&rows);
        assert_eq!(decode_rows(&bytes[..bytes.len() - 1]), None);
    }

    #[test]
    fn frames_round_trip_and_a_cut_or_damaged_frame_ends_the_journal() {
        let mut bytes = header(42).to_vec();
        bytes.extend(frame(0, &page(3, true)));
        let one = bytes.len() as u64;
        bytes.extend(frame(250, &page(2, false)));
        let whole = read(&bytes);
        assert_eq!(whole.id, Some(42));
        assert_eq!(whole.valid_len, bytes.len() as u64);
        let pages: Vec<StoredPage> = whole
            .frames
            .iter()
            .map(|f| super::page(f).unwrap())
            .collect();
        assert_eq!(pages[0].page, page(3, true));
        assert_eq!((pages[1].offset, pages[1].page.has_more), (250, false));
        assert_eq!(pages[1].page, page(2, false), "the rows set aside too");
        // Every cut inside the second frame leaves the first.
        for cut in one as usize..bytes.len() {
            let r = read(&bytes[..cut]);
            assert_eq!((r.frames.len(), r.valid_len), (1, one), "cut at {cut}");
        }
        // A flipped byte fails the CRC.
        let mut damaged = bytes.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert_eq!(read(&damaged).frames.len(), 1);
        // No header, no journal.
        assert_eq!(read(b"DPJ").id, None);
        assert_eq!(read(b"XXXX00000000").id, None);
    }
}
