//! The page decoder on any bytes: an error, or a page whose counts add up, with at most the
//! limit of rows and sane paths. Never a panic.
#![no_main]

use docpipe::api::views::decode_page;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(page) = decode_page(data, 250) {
        let t = page.totals;
        assert!(t.human >= 0 && t.ai >= 0 && t.human + t.ai == t.total);
        assert!(page.views.len() <= 250);
        for r in page.views.iter() {
            assert!(r.human >= 0 && r.ai >= 0 && r.human + r.ai == r.total);
            assert!(!r.path.is_empty() && r.path.len() <= 2048);
            assert!(!r.path.chars().any(char::is_control));
        }
    }
});
