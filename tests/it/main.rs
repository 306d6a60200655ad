//! The in-process tier: each module covers one part of docpipe, run in this process against
//! the emulator crate (no binary, no server, no browser, no Python): seconds each.
//! `tests/scenarios` holds the tests that start those.

mod catalogue;
mod client;
#[path = "../support/common.rs"]
mod common;
mod config;
mod daemon_work;
mod datasets;
mod docs;
mod emulator;
mod event_stream;
mod export;
mod hostile;
mod operator;
mod review;
mod rules;
mod secrets;
mod soak;
mod stream;
#[path = "../support/mod.rs"]
mod support;
mod trends;
#[path = "../support/truth.rs"]
mod truth;
