//! The facts of a run, as typed events, each emitted once where it happens (Vector's internal
//! events are the model) and handed to every receiver, each doing its one thing: [`Event::count`]
//! counts it on `/metrics`, [`Event::log`] logs it, the state's activity tables record it (`Store::receive`: the
//! status page's hourly spend, the windows' troubles, the rules' last runs), the run's summary
//! counts its requests ([`Tally`]: what the summary says it sent), and the receiver the caller
//! chose draws it ([`Events`]: the command line's progress bar; the daemon logs the run's
//! report). The layers that do the work draw, print and record none of it themselves.

use chrono::{DateTime, NaiveDate, Utc};
use std::time::Duration;

/// The log lines' target: the module they came from before the catalogue was a crate of its
/// own, so that a `RUST_LOG=docpipe::events=...` filter and the JSON logs' `target` stay as
/// they were.
const TARGET: &str = "docpipe::events";

/// The "dataset" an agent job's requests are counted under (they read none).
pub const AGENT_JOBS: &str = "agent_jobs";

/// The purpose of an agent job's requests (created, read, followed up): outside the analytics
/// budget.
pub const JOB: &str = "job";

/// How a window's last try went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    /// It failed; the next run tries it again.
    Failed,
    /// Its walk reached the bound of pages the service may lead a walk to: tried again after
    /// a wait that doubles with each such failure in a row.
    Stuck,
    /// Its walk went far beyond its estimate: it walks in turns after the other windows.
    Long,
}

/// What a rule's run came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// It sent its follow-up or created its job.
    Fired,
    /// Its firing waits for a person's review.
    Held,
    /// Not enabled: what it would send was shown, nothing sent.
    Previewed,
    /// Too few rows matched.
    Quiet,
    /// It matched, and did not send (cooling down, its hourly limit, nothing new).
    Skipped,
    /// Its query or its sending failed.
    Failed,
}

impl RunOutcome {
    const ALL: [RunOutcome; 6] = [
        RunOutcome::Fired,
        RunOutcome::Held,
        RunOutcome::Previewed,
        RunOutcome::Quiet,
        RunOutcome::Skipped,
        RunOutcome::Failed,
    ];

    /// Its word (in the state and the status).
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Fired => "fired",
            RunOutcome::Held => "held",
            RunOutcome::Previewed => "previewed",
            RunOutcome::Quiet => "quiet",
            RunOutcome::Skipped => "skipped",
            RunOutcome::Failed => "failed",
        }
    }
}

impl std::str::FromStr for RunOutcome {
    type Err = String;

    /// Its word, as [`RunOutcome::as_str`] writes it.
    fn from_str(word: &str) -> Result<Self, String> {
        RunOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == word)
            .ok_or_else(|| format!("{word:?} is not a rule run's outcome"))
    }
}

impl Trouble {
    /// Its name in the state.
    pub fn name(self) -> &'static str {
        match self {
            Trouble::Failed => "failed",
            Trouble::Stuck => "stuck",
            Trouble::Long => "long",
        }
    }

    /// The trouble of a name in the state (`failed` for one it does not know).
    pub fn of(name: &str) -> Self {
        match name {
            "stuck" => Trouble::Stuck,
            "long" => Trouble::Long,
            _ => Trouble::Failed,
        }
    }
}

/// What went wrong with a window's try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Troubled<'a> {
    /// Its first day.
    pub day: NaiveDate,
    /// The window as people read it (`2026-03-10`, `2026-03-01..2026-03-14`).
    pub window: &'a str,
    /// Why, in one line.
    pub reason: &'a str,
    /// When.
    pub at: DateTime<Utc>,
    /// How.
    pub kind: Trouble,
}

/// What happened in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A run starts with this many windows to do, or goes on with them after its first step.
    Planned {
        /// Windows of the run in all, as known now.
        windows: u64,
        /// Of them, the windows its first step did already.
        done: u64,
    },
    /// A window was written.
    Written {
        /// Its dataset.
        dataset: &'static str,
        /// Its project.
        project: &'a str,
        /// The window as people read it (`2026-03-10`, `feedback 2026-03-01`).
        window: &'a str,
        /// Its day (`None`: a span's walk, whose next window starts on another day).
        day: Option<NaiveDate>,
        /// Rows written.
        rows: i64,
        /// Rows set aside in `rejects/`.
        rejected: u64,
        /// Requests its walk sent.
        requests: u64,
        /// Rows written in the run so far, this window's included.
        run_rows: i64,
        /// Requests sent in the run so far.
        run_requests: u64,
    },
    /// A window failed (`trouble`), or was skipped after a failure that stopped its
    /// organization (`None`: not tried).
    Failed {
        /// Its dataset.
        dataset: &'static str,
        /// Its project.
        project: &'a str,
        /// What went wrong, when it was tried.
        trouble: Option<Troubled<'a>>,
    },
    /// A window walked far beyond its estimate: it yields to the others after each turn.
    Long {
        /// Its dataset.
        dataset: &'static str,
        /// Its project.
        project: &'a str,
        /// How far, since when.
        trouble: Troubled<'a>,
        /// Whether the estimate was a guess: the dataset was never walked for the project
        /// before (its first walk measures it), so going beyond it is no sign of trouble.
        guessed: bool,
    },
    /// Records of a dataset fetched apart from windows (the assistant's threads).
    Fetched {
        /// Its dataset.
        dataset: &'static str,
        /// Its project.
        project: &'a str,
    },
    /// Requests were sent: analytics requests, or an agent job's (purpose `job`, outside the
    /// analytics budget).
    Spent {
        /// The organization whose budget they count in.
        org: &'a str,
        /// When.
        at: DateTime<Utc>,
        /// For which dataset.
        dataset: &'static str,
        /// Why: `walk`, `probe`, `backfill` (see `planner::Purpose::request_kind`), `check`,
        /// `thread`, `job`.
        purpose: &'static str,
        /// How many.
        requests: u64,
    },
    /// A rule ran (fired, held, previewed, quiet, skipped or failed).
    RuleRan {
        /// The rule.
        rule: &'a str,
        /// Its project.
        project: &'a str,
        /// When.
        at: DateTime<Utc>,
        /// What it came to.
        outcome: RunOutcome,
        /// Rows its query matched (none when it could not run).
        rows: Option<i64>,
        /// Its report line (for `failed`, why).
        line: &'a str,
    },
    /// The service answered an organization's admin key: it works (reported once per key and
    /// process), or it was refused (401).
    KeyAnswered {
        /// The organization.
        org: &'a str,
        /// The key's fingerprint (never the key).
        fingerprint: &'a str,
        /// When.
        at: DateTime<Utc>,
        /// The service's words when it refused the key.
        refused: Option<&'a str>,
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
                trouble: Some(_),
            } => {
                let labels = [
                    ("project", project.to_string()),
                    ("dataset", dataset.to_string()),
                ];
                metrics::counter!("docpipe_windows_failed_total", &labels).increment(1);
            }
            Event::Spent {
                purpose: JOB,
                requests,
                ..
            } => {
                metrics::counter!("docpipe_agent_job_requests_total").increment(requests);
            }
            Event::Spent {
                dataset,
                purpose,
                requests,
                ..
            } if requests > 0 => {
                metrics::counter!("docpipe_analytics_requests_total", "dataset" => dataset, "purpose" => purpose)
                    .increment(requests);
            }
            _ => {}
        }
    }
}

impl Event<'_> {
    /// Logs the event, one line (a window written at the debug level while a progress bar
    /// `draws` the run: the bar shows it).
    pub fn log(&self, draws: bool) {
        match *self {
            Event::Written {
                dataset,
                project,
                window,
                rows,
                requests,
                ..
            } => {
                if draws {
                    tracing::debug!(target: TARGET, dataset, project, window, rows, requests, "window written");
                } else {
                    tracing::info!(target: TARGET, dataset, project, window, rows, requests, "window written");
                }
            }
            Event::Failed {
                dataset,
                project,
                trouble: Some(t),
            } => {
                tracing::error!(
                    target: TARGET,
                    dataset,
                    project,
                    window = t.window,
                    "window failed: {}",
                    t.reason
                );
            }
            Event::Long {
                dataset,
                project,
                trouble,
                guessed: true,
            } => {
                // A first walk's estimate is a guess: nothing a user needs to act on.
                tracing::debug!(
                    target: TARGET,
                    dataset,
                    project,
                    window = trouble.window,
                    "{} (a first walk: its estimate was a guess)",
                    trouble.reason
                );
            }
            Event::Long {
                dataset,
                project,
                trouble,
                guessed: false,
            } => {
                tracing::warn!(
                    target: TARGET,
                    dataset,
                    project,
                    window = trouble.window,
                    "{}",
                    trouble.reason
                );
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

/// The requests of a run as its clients send them (their [`Event::Spent`]), by dataset and
/// purpose: what the run's summary says it sent is this receiver's count, the one every other
/// surface receives too.
#[derive(Debug, Default)]
pub struct Tally {
    spent: std::sync::Mutex<std::collections::BTreeMap<(&'static str, &'static str), u64>>,
}

impl Tally {
    /// Requests by dataset and purpose.
    pub fn spent(&self) -> std::collections::BTreeMap<(&'static str, &'static str), u64> {
        self.spent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Analytics requests (an agent job's are not).
    pub fn analytics(&self) -> u64 {
        self.spent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((_, purpose), _)| *purpose != JOB)
            .map(|(_, n)| n)
            .sum()
    }
}

impl Events for Tally {
    fn event(&self, event: &Event<'_>) {
        if let Event::Spent {
            dataset,
            purpose,
            requests,
            ..
        } = *event
            && requests > 0
        {
            *self
                .spent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((dataset, purpose))
                .or_default() += requests;
        }
    }
}

/// Hands each report to every one of its receivers, in order.
#[derive(Debug)]
pub struct Fan(pub Vec<std::sync::Arc<dyn Events>>);

impl Events for Fan {
    fn draws(&self) -> bool {
        self.0.iter().any(|e| e.draws())
    }
    fn event(&self, event: &Event<'_>) {
        for e in &self.0 {
            e.event(event);
        }
    }
    fn waiting(&self, scope: &str, wait: Duration, until: DateTime<Utc>) {
        for e in &self.0 {
            e.waiting(scope, wait, until);
        }
    }
    fn waited(&self, scope: &str) {
        for e in &self.0 {
            e.waited(scope);
        }
    }
}

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
                day: None,
                rows,
                rejected,
                requests: 1,
                run_rows: 0,
                run_requests: 0,
            };
            written(120, 0).count();
            written(30, 2).count();
            Event::Written {
                dataset: "feedback",
                project: "alpha",
                window: "feedback 2026-03-01",
                day: None,
                rows: 7,
                rejected: 0,
                requests: 1,
                run_rows: 0,
                run_requests: 0,
            }
            .count();
            let trouble = Troubled {
                day: NaiveDate::from_ymd_opt(2026, 3, 10).unwrap(),
                window: "2026-03-10",
                reason: "timeout",
                at: DateTime::UNIX_EPOCH,
                kind: Trouble::Failed,
            };
            let failed = |trouble| Event::Failed {
                dataset: "searches",
                project: "beta",
                trouble,
            };
            failed(Some(trouble)).count();
            failed(None).count();
            for requests in [3, 0, 2] {
                Event::Spent {
                    org: "org-a",
                    at: DateTime::UNIX_EPOCH,
                    dataset: "page_views",
                    purpose: "probe",
                    requests,
                }
                .count();
            }
            Event::Planned {
                windows: 9,
                done: 0,
            }
            .count();
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

    #[test]
    fn a_tally_behind_a_fan_counts_each_request_once_and_the_jobs_apart() {
        let (a, b) = (
            std::sync::Arc::new(Tally::default()),
            std::sync::Arc::new(Tally::default()),
        );
        let fan = Fan(vec![a.clone(), b.clone()]);
        let spent = |dataset, purpose, requests| Event::Spent {
            org: "org-a",
            at: DateTime::UNIX_EPOCH,
            dataset,
            purpose,
            requests,
        };
        for e in [
            spent("page_views", "walk", 3),
            spent("page_views", "walk", 2),
            spent("searches", "probe", 1),
            spent("searches", "probe", 0),
            spent(AGENT_JOBS, JOB, 4),
            Event::Finished,
        ] {
            fan.event(&e);
        }
        let want = std::collections::BTreeMap::from([
            ((AGENT_JOBS, JOB), 4),
            (("page_views", "walk"), 5),
            (("searches", "probe"), 1),
        ]);
        assert_eq!(a.spent(), want);
        assert_eq!(b.spent(), want);
        assert_eq!((a.analytics(), b.analytics()), (6, 6));
    }
}
