//! The one integration test binary: each module covers one part of docpipe.

mod captures;
mod check;
mod client;
mod common;
mod daemon;
mod daemon_work;
mod datasets;
mod docs;
mod emulator;
mod export;
mod gaps;
mod hostile;
mod house;
mod impact;
mod lake;
mod pg;
mod review;
mod rules;
mod s3;
mod secrets;
mod soak;
mod status;
mod status_page;
mod stream;
mod trends;
mod truth;
