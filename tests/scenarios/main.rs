//! The scenario tier: the tests that start docpipe's binary, PostgreSQL, the S3-compatible
//! server, Chromium or the Python readers. `tests/it` holds the in-process ones.

mod agents;
mod captures;
mod check;
mod client;
#[path = "../support/common.rs"]
mod common;
mod daemon;
mod daemon_work;
mod datasets;
mod dbt;
mod docs;
mod emulator;
mod export;
mod gaps;
mod house;
mod impact;
mod install;
mod lake;
mod pg;
mod pg_server;
mod review;
mod rules;
mod s3;
mod soak;
mod status;
mod status_page;
#[path = "../support/mod.rs"]
mod support;
#[path = "../support/truth.rs"]
mod truth;
