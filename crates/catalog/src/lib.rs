//! docpipe's catalogue: the vocabulary every stage shares and none owns. What the lake holds
//! and where (its tables typed once, the Hive layout, the calendar of local days), the
//! datasets by name, what the service promises on both sides of the wire (its limits, the
//! capture format the client records and the emulator replays), the facts a run emits, and the
//! small injected primitives (time, seeded randomness, sliding-window arithmetic, text made
//! safe to print). It depends on no other crate of docpipe's; every other crate may import it.

// The house's gate: a function of more than 80 lines (`clippy.toml`) is refused.
#![warn(clippy::too_many_lines)]

pub mod calendar; // days of a time zone, where they start, the window a request asks for
pub mod capture; // the service's answers as recorded and replayed
pub mod clock; // time, injected
pub mod datasets; // the datasets by name
pub mod events; // a run's facts, emitted once: counted on /metrics, recorded in the state, drawn by the CLI
pub mod key_source; // where a key is read from: a variable or a file
pub mod layout; // where outputs go: Hive paths, temporary names, atomic replace
pub mod random; // seeded randomness
pub mod ratelimit; // sliding-window arithmetic
pub mod schedule; // cron schedules, checked as the daemon's scheduler reads them
pub mod service; // the service's documented limits
pub mod tables; // every table of the lake, typed once
pub mod text; // service text made safe to print
pub mod views; // a page's views as the service counts them
