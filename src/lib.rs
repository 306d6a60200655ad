//! docpipe: export documentation analytics (page views split into human readers and AI agents)
//! to Parquet, aggregate trends, and drive agent-job follow-ups. The modules, from the top:

// The house's gate: a function of more than 80 lines (`clippy.toml`) is refused; the ones
// longer today carry an `#[expect]` each, so the count can only fall.
#![warn(clippy::too_many_lines)]

pub use docpipe_agents as agents; // who read a page, as data: user agents named, their class and surface
pub use docpipe_catalog::{
    calendar, clock, events, layout, random, ratelimit, schedule, tables, text,
};
pub use docpipe_derive as trends; // polars aggregation over the lake: trends, docs gaps, charts
pub use docpipe_emulator as emulator; // a faithful stand-in of the service, as an axum Router
pub use docpipe_export as export; // plan and run windows: walk, check, write, record
pub use docpipe_export::dataset; // one file per dataset: endpoint, paging, windowing, tables, batches; a window's first page (check's probe)
pub use docpipe_export::planner; // which windows are due, in what order, within the budget; the forecast
pub use docpipe_extract as api; // the typed client: one file per operation, retry and rate budget
pub use docpipe_extract::tls; // rustls on ring, installed once
pub use docpipe_state as store; // every table of state (SQLite, PostgreSQL), the walk journals, the budget's log
pub use docpipe_stream as stream; // the service's analytics event stream: lines decoded, events kept without personal data, a day's tables
pub use docpipe_write as write; // Parquet partitions and the derived tables' writer

pub mod alloc; // the allocator's tuning
pub mod app; // what cli and daemon share: a Context opened once, and the one run (cycle.rs) with its steps, the lake's description and its load into a warehouse
pub mod cli; // one file per subcommand: arguments and printing
pub mod config; // the config file: raw form -> validated settings (data only)
pub mod daemon; // schedules, the work loop, health and metrics, shutdown
pub mod error; // the user-error type and the exit codes
pub mod remote; // the output on object storage: the working copy mirrored to a bucket
pub use docpipe_act as rules; // rule files -> conditions -> prompts -> follow-ups -> outcome log; impact/: what each job changed

pub mod status; // what the pipeline is doing, as one model: text, JSON and the daemon's page

/// `print!` for what a command prints: a reader that went away (a closed pipe, as in `docpipe
/// status | head`) ends the process quietly with exit code 0, as a Unix tool does, where
/// `print!` would panic.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::text::stdout(format_args!($($t)*)) };
}

/// `println!` for what a command prints (see [`out!`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::text::stdout(format_args!("\n")) };
    ($($t:tt)*) => { $crate::text::stdout(format_args!("{}\n", format_args!($($t)*))) };
}
