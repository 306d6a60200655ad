//! The journal of a walk in progress (beside a SQLite state, see `pages.rs`): its pages,
//! appended to a file as they arrive, so that a killed run resumes at the next page. A plain
//! append costs a fraction of a SQLite insert of the same bytes (which writes them to the WAL,
//! then to the database, then frees them), and the state database keeps the one fact that must
//! be transactional: which journal belongs to the walk in progress (its id in `walks`).
//!
//! Layout: `DPJ3`, the walk's id (u64 LE), then one frame per page: payload length (u32 LE),
//! CRC-32 of the payload (u32 LE), payload. A payload is the page's number (u64 LE), whether it
//! ended the walk (u8), then the page as its dataset keeps it. A frame cut by a kill fails its
//! length or CRC: the journal ends before it, and the next append overwrites it. A journal of
//! an older layout belongs to no walk: walked again.

const MAGIC: &[u8; 4] = b"DPJ3";
/// Bytes before the first frame.
pub const HEADER: usize = 12;
/// A payload's bytes before the page's own.
const FIXED: usize = 8 + 1;

/// The start of a journal for walk `id`.
pub fn header(id: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(MAGIC);
    h[4..].copy_from_slice(&id.to_le_bytes());
    h
}

/// Page `seq` as a frame.
pub fn frame(seq: u64, last: bool, data: &[u8]) -> Vec<u8> {
    let len = FIXED + data.len();
    let mut out = Vec::with_capacity(8 + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(u8::from(last));
    out.extend_from_slice(data);
    let crc = crc32fast::hash(&out[8..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A whole frame read back.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The page's number in its walk.
    pub seq: u64,
    /// Whether it ended the walk.
    pub last: bool,
    /// The page as its dataset keeps it.
    pub data: &'a [u8],
}

/// A journal read back: the walk it belongs to, its whole frames, and where they end.
#[derive(Debug, Default)]
pub struct Read<'a> {
    /// The walk's id; `None` when the header is missing or damaged.
    pub id: Option<u64>,
    /// The whole frames, in order.
    pub frames: Vec<Frame<'a>>,
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
        frames.push(Frame {
            seq: u64::from_le_bytes(payload[..8].try_into().unwrap_or_default()),
            last: payload[8] != 0,
            data: &payload[FIXED..],
        });
        at += 8 + len;
    }
    Read {
        id: Some(id),
        frames,
        valid_len: at as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_cut_or_damaged_frame_ends_the_journal() {
        let mut bytes = header(42).to_vec();
        bytes.extend(frame(0, false, b"first page"));
        let one = bytes.len() as u64;
        bytes.extend(frame(1, true, b"second"));
        let whole = read(&bytes);
        assert_eq!(whole.id, Some(42));
        assert_eq!(whole.valid_len, bytes.len() as u64);
        assert_eq!(
            whole.frames,
            [
                Frame {
                    seq: 0,
                    last: false,
                    data: b"first page"
                },
                Frame {
                    seq: 1,
                    last: true,
                    data: b"second"
                }
            ]
        );
        // Every cut inside the second frame leaves the first.
        for cut in one as usize..bytes.len() {
            let r = read(&bytes[..cut]);
            assert_eq!((r.frames.len(), r.valid_len), (1, one), "cut at {cut}");
        }
        // A flipped byte fails the CRC.
        let mut damaged = bytes.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert_eq!(read(&damaged).frames.len(), 1);
        // No header, or an older layout's: no journal.
        assert_eq!(read(b"DPJ").id, None);
        assert_eq!(read(b"DPJ2\0\0\0\0\0\0\0\0").id, None);
        assert_eq!(read(b"XXXX00000000").id, None);
    }
}
