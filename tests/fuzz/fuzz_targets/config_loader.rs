//! The config loader on any text: settings or an error naming the problem, never a panic.
#![no_main]

use docpipe::config::RawConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match RawConfig::parse(text, "fuzz.toml") {
        Ok(raw) => {
            if let Err(e) = raw.validate("fuzz.toml") {
                assert!(e.to_string().starts_with("invalid config fuzz.toml: "));
            }
        }
        Err(e) => assert!(e.to_string().starts_with("invalid config fuzz.toml: ")),
    }
});
