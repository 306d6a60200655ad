//! The data stream parser on any bytes, fed in two pieces split where the first byte says: it
//! returns events or an error, never panics, and gives the same result however the bytes are cut.
#![no_main]

use docpipe::api::stream::Parser;
use libfuzzer_sys::fuzz_target;

fn parse(pieces: &[&[u8]]) -> Result<usize, String> {
    let mut p = Parser::new();
    let mut n = 0;
    for piece in pieces {
        n += p.feed(piece).map_err(|e| e.to_string())?.len();
    }
    n += p.finish().map_err(|e| e.to_string())?.len();
    Ok(n)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut) % (body.len() + 1);
    let whole = parse(&[body]);
    let split = parse(&[&body[..at], &body[at..]]);
    assert_eq!(whole, split, "cut at {at}");
});
