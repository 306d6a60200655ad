//! The rule loader on any text: a rule or one line naming the file, never a panic.
#![no_main]

use docpipe::rules::Rule;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let projects = ["acme-docs".to_string(), "p".to_string()];
    if let Err(e) = Rule::parse(text, "jobs/fuzz.toml", &projects) {
        let line = e.to_string();
        assert!(line.starts_with("jobs/fuzz.toml: "), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }
});
