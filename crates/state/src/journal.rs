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

/// A journal read frame by frame from the start (nothing but the frame at hand kept in
/// memory: a span's journal may hold a million rows).
pub struct Reader<R> {
    r: R,
    /// Bytes up to the end of the last whole frame read.
    at: u64,
    /// The payload of the frame at hand.
    buf: Vec<u8>,
    /// A cut or damaged frame was met: the journal ends before it.
    ended: bool,
}

/// Fills `buf` from `r`: false when `r` ends first.
fn fill(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

impl<R: std::io::Read> Reader<R> {
    /// Reads the header: the walk's id and the reader of its frames; `None` when the header is
    /// missing or damaged (an older layout's journal belongs to no walk).
    pub fn open(mut r: R) -> std::io::Result<Option<(u64, Self)>> {
        let mut h = [0u8; HEADER];
        if !fill(&mut r, &mut h)? || &h[..4] != MAGIC {
            return Ok(None);
        }
        let id = u64::from_le_bytes(h[4..].try_into().unwrap_or_default());
        let reader = Self {
            r,
            at: HEADER as u64,
            buf: Vec::new(),
            ended: false,
        };
        Ok(Some((id, reader)))
    }

    /// The next frame's payload length and CRC; `None` at the end (or once the journal ended).
    fn head(&mut self) -> std::io::Result<Option<(u32, u32)>> {
        let mut head = [0u8; 8];
        if self.ended || !fill(&mut self.r, &mut head)? {
            self.ended = true;
            return Ok(None);
        }
        Ok(Some((
            u32::from_le_bytes([head[0], head[1], head[2], head[3]]),
            u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
        )))
    }

    /// The next whole frame; `None` at the end, or at the first cut or damaged frame (the
    /// journal ends before it).
    pub fn next_frame(&mut self) -> std::io::Result<Option<Frame<'_>>> {
        let Some((len, crc)) = self.head()? else {
            return Ok(None);
        };
        let len = len as usize;
        self.buf.clear();
        // Read through `take`: a damaged length allocates no more than the file holds.
        let mut payload = <&mut R as std::io::Read>::take(&mut self.r, len as u64);
        std::io::Read::read_to_end(&mut payload, &mut self.buf)?;
        if len < FIXED || self.buf.len() < len || crc32fast::hash(&self.buf) != crc {
            self.ended = true;
            return Ok(None);
        }
        self.at += 8 + len as u64;
        let p = &self.buf;
        Ok(Some(Frame {
            seq: u64::from_le_bytes(p[..8].try_into().unwrap_or_default()),
            last: p[8] != 0,
            data: &p[FIXED..],
        }))
    }

    /// Passes over the next frame unread (its page not wanted: a walk read back in parts);
    /// `false` at the end. Its checksum is not checked: a frame read whole once is whole.
    pub fn skip_frame(&mut self) -> std::io::Result<bool>
    where
        R: std::io::Seek,
    {
        let Some((len, _)) = self.head()? else {
            return Ok(false);
        };
        self.r.seek(std::io::SeekFrom::Current(i64::from(len)))?;
        self.at += 8 + u64::from(len);
        Ok(true)
    }

    /// Bytes up to the end of the last whole frame read.
    pub fn valid_len(&self) -> u64 {
        self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A journal's id, its whole frames (number, last, page) and where they end.
    type Whole = (u64, Vec<(u64, bool, Vec<u8>)>, u64);

    /// Every whole frame of `bytes`, owned, with where they end; `None`: no journal.
    fn read(bytes: &[u8]) -> Option<Whole> {
        let (id, mut r) = Reader::open(std::io::Cursor::new(bytes)).unwrap()?;
        let mut frames = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            frames.push((f.seq, f.last, f.data.to_vec()));
        }
        Some((id, frames, r.valid_len()))
    }

    #[test]
    fn frames_round_trip_and_a_cut_or_damaged_frame_ends_the_journal() {
        let mut bytes = header(42).to_vec();
        bytes.extend(frame(0, false, b"first page"));
        let one = bytes.len() as u64;
        bytes.extend(frame(1, true, b"second"));
        let (id, frames, len) = read(&bytes).unwrap();
        assert_eq!((id, len), (42, bytes.len() as u64));
        assert_eq!(
            frames,
            [
                (0, false, b"first page".to_vec()),
                (1, true, b"second".to_vec())
            ]
        );
        // Every cut inside the second frame leaves the first.
        for cut in one as usize..bytes.len() {
            let (_, frames, len) = read(&bytes[..cut]).unwrap();
            assert_eq!((frames.len(), len), (1, one), "cut at {cut}");
        }
        // A flipped byte fails the CRC.
        let mut damaged = bytes.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert_eq!(read(&damaged).unwrap().1.len(), 1);
        // A damaged length larger than the file ends it, allocating nothing of that size.
        let mut long = header(7).to_vec();
        long.extend(frame(0, true, b"x"));
        long[HEADER..HEADER + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(read(&long).unwrap().1.len(), 0);
        // A frame passed over unread, then the next one read.
        let (_, mut r) = Reader::open(std::io::Cursor::new(&bytes)).unwrap().unwrap();
        assert!(r.skip_frame().unwrap());
        let second = r.next_frame().unwrap().unwrap();
        assert_eq!((second.seq, second.data), (1, &b"second"[..]));
        assert!(!r.skip_frame().unwrap());
        // No header, or an older layout's: no journal.
        assert!(read(b"DPJ").is_none());
        assert!(read(b"DPJ2\0\0\0\0\0\0\0\0").is_none());
        assert!(read(b"XXXX00000000").is_none());
    }
}
