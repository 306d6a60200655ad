//! The reader of the service's analytics event stream (`../shared/spec/stream.md`): objects of
//! newline-delimited JSON that the service writes to a customer's bucket. A line is decoded in
//! either payload form ([`line`]); its event is kept without personal data (no `ip`, `user_id`
//! or `anon_id`; the session as a keyed hash; the referrer as its host) and deduplicated by its
//! `event_id` ([`batch`]); each project's day is then written as tables, its events classified
//! by the agents table ([`day`]); the stream's counts are set beside the API's ([`coverage`]).
//! Listing and fetching the objects, and the state of what was read, are the binary's.

#![warn(clippy::too_many_lines)]

pub mod batch;
pub mod coverage;
pub mod day;
pub mod line;
pub mod report;
mod scan;

pub use batch::{Batch, Setup, Unread};

#[cfg(test)]
mod tests;
