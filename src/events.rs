//! What long work reports while it runs: the command line draws a progress bar from it, the
//! daemon counts it; the layers that do the work draw and print nothing.

use chrono::{DateTime, Utc};
use std::time::Duration;

/// The receiver of progress reports. Every method does nothing by default.
pub trait Events: Send + Sync + std::fmt::Debug {
    /// Whether these reports are shown as they come (a progress bar): then per-window log lines
    /// are left to the debug level.
    fn draws(&self) -> bool {
        false
    }
    /// A run starts with this many windows to do.
    fn planned(&self, _windows: u64) {}
    /// A window was written: rows and requests of the run so far, and which window.
    fn window_written(&self, _rows: i64, _requests: u64, _project: &str, _day: &str) {}
    /// A window failed or was skipped.
    fn window_failed(&self) {}
    /// The run ended.
    fn finished(&self) {}
    /// Sending waits for the rate budget of `scope` until `until`.
    fn waiting(&self, _scope: &str, _wait: Duration, _until: DateTime<Utc>) {}
    /// The wait for `scope` ended.
    fn waited(&self, _scope: &str) {}
}

/// Reports to no one.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Events for Quiet {}
