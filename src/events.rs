//! What long work reports while it runs, as typed events: each is counted on `/metrics` where
//! it happens (one place for every metric of the export, as Vector's internal events do), and
//! handed to the receiver the caller chose: the command line draws a progress bar from them (the
//! daemon gives none: it logs the run's summary). The layers that do the work draw and print
//! nothing.

use chrono::{DateTime, Utc};
use std::time::Duration;

/// What happened in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A run starts with this many windows to do.
    Planned {
        /// Windows of the plan.
        windows: u64,
    },
    /// A window was written.
    Written {
        /// Its dataset.
        dataset: &'static str,
        /// Its project.
        project: &'a str,
        /// The window as people read it (`2026-03-10`, `feedback 2026-03-01`).
        window: &'a str,
        /// Rows written.
        rows: i64,
        /// Rows set aside in `rejects/`.
        rejected: u64,
        /// Rows written in the run so far, this window's included.
        run_rows: i64,
        /// Requests sent in the run so far.
        run_requests: u64,
    },
    /// A window failed, or was skipped after a failure that stopped its organization.
    Failed {
        /// Its dataset.
        dataset: &'static str,
        /// Its project.
        project: &'a str,
        /// Skipped, not tried.
        skipped: bool,
    },
    /// Analytics requests were sent.
    Spent {
        /// For which dataset.
        dataset: &'static str,
        /// Why: `walk`, `probe`, `backfill` (see `planner::Purpose::request_kind`).
        purpose: &'static str,
        /// How many.
        requests: u64,
    },
    /// The run ended.
    Finished,
}

impl Event<'_> {
    /// Counts the event on `/metrics` (the daemon installs the recorder; elsewhere counting
    /// does nothing).
    pub fn count(&self) {
        match *self {
            Event::Written {
                dataset,
                project,
                rows,
                rejected,
                ..
            } => {
                let labels = [
                    ("project", project.to_string()),
                    ("dataset", dataset.to_string()),
                ];
                metrics::counter!("docpipe_rows_exported_total", &labels)
                    .increment(rows.max(0) as u64);
                metrics::counter!("docpipe_windows_written_total", &labels).increment(1);
                if rejected > 0 {
                    metrics::counter!("docpipe_rows_rejected_total", &labels).increment(rejected);
                }
            }
            Event::Failed {
                dataset,
                project,
                skipped: false,
            } => {
                let labels = [
                    ("project", project.to_string()),
                    ("dataset", dataset.to_string()),
                ];
                metrics::counter!("docpipe_windows_failed_total", &labels).increment(1);
            }
            Event::Spent {
                dataset,
                purpose,
                requests,
            } if requests > 0 => {
                metrics::counter!("docpipe_analytics_requests_total", "dataset" => dataset, "purpose" => purpose)
                    .increment(requests);
            }
            _ => {}
        }
    }
}

/// The receiver of a run's events. Every method does nothing by default.
pub trait Events: Send + Sync + std::fmt::Debug {
    /// Whether these reports are shown as they come (a progress bar): then per-window log lines
    /// are left to the debug level.
    fn draws(&self) -> bool {
        false
    }
    /// Something happened in the run (already counted on `/metrics`).
    fn event(&self, _event: &Event<'_>) {}
    /// Sending waits for the rate budget of `scope` until `until`.
    fn waiting(&self, _scope: &str, _wait: Duration, _until: DateTime<Utc>) {}
    /// The wait for `scope` ended.
    fn waited(&self, _scope: &str) {}
}

/// Reports to no one (the events are still counted).
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Events for Quiet {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_is_counted_once_under_its_series_and_labels() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let written = |rows, rejected| Event::Written {
                dataset: "page_views",
                project: "alpha",
                window: "2026-03-10",
                rows,
                rejected,
                run_rows: 0,
                run_requests: 0,
            };
            written(120, 0).count();
            written(30, 2).count();
            Event::Written {
                dataset: "feedback",
                project: "alpha",
                window: "feedback 2026-03-01",
                rows: 7,
                rejected: 0,
                run_rows: 0,
                run_requests: 0,
            }
            .count();
            let failed = |skipped| Event::Failed {
                dataset: "searches",
                project: "beta",
                skipped,
            };
            failed(false).count();
            failed(true).count();
            for requests in [3, 0, 2] {
                Event::Spent {
                    dataset: "page_views",
                    purpose: "probe",
                    requests,
                }
                .count();
            }
            Event::Planned { windows: 9 }.count();
            Event::Finished.count();
        });
        let mut lines: Vec<String> = handle
            .render()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_string)
            .collect();
        lines.sort();
        assert_eq!(
            lines,
            [
                "docpipe_analytics_requests_total{dataset=\"page_views\",purpose=\"probe\"} 5",
                "docpipe_rows_exported_total{project=\"alpha\",dataset=\"feedback\"} 7",
                "docpipe_rows_exported_total{project=\"alpha\",dataset=\"page_views\"} 150",
                "docpipe_rows_rejected_total{project=\"alpha\",dataset=\"page_views\"} 2",
                "docpipe_windows_failed_total{project=\"beta\",dataset=\"searches\"} 1",
                "docpipe_windows_written_total{project=\"alpha\",dataset=\"feedback\"} 1",
                "docpipe_windows_written_total{project=\"alpha\",dataset=\"page_views\"} 2",
            ]
        );
    }
}
