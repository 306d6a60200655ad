//! The shaped datasets' settings (how a span re-fetches, how many threads a run fetches) and
//! the assistant's threads, fetched after the turns. Their walk is `dataset/shape_walk.rs`.

use super::{ExportError, Exporter, Stops, Summary, WindowOutcome};
use crate::api::Client;
use crate::api::analytics::At;
use crate::dataset::analytics::{THREAD_MESSAGES, THREADS};
use crate::dataset::shape::{Cell, FlaggedRow, Page};
use crate::dataset::writes::Writes;
use crate::dataset::{Dataset, Windowing};
use crate::layout::partition_dir;
use docpipe_catalog::calendar::Settle;
use docpipe_catalog::datasets;
use std::collections::{BTreeMap, HashMap};

/// How the span datasets re-fetch and how many threads a run fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapedSettings {
    /// Feedback days fetched again on every run.
    pub feedback_recheck_days: u32,
    /// Assistant days fetched again before the last one fetched.
    pub assistant_overlap_days: u32,
    /// Threads fetched per project and run.
    pub threads_per_run: u32,
}

impl Default for ShapedSettings {
    fn default() -> Self {
        Self {
            feedback_recheck_days: 14,
            assistant_overlap_days: 1,
            threads_per_run: 20,
        }
    }
}

impl ShapedSettings {
    /// A span dataset's last final day `today`: a day older than the lateness allowance
    /// (`lookback_days`) and than the days its walks re-check is never walked again, so it is
    /// final. `None` for a dataset of daily windows (each window says).
    pub fn settled_through(
        &self,
        dataset: &str,
        today: chrono::NaiveDate,
        lookback_days: u32,
    ) -> Option<chrono::NaiveDate> {
        self.settle(lookback_days).settled_through(dataset, today)
    }

    /// When each span's day is final, with the export's `lookback_days`: what the rules' impact
    /// counts final days by.
    pub fn settle(&self, lookback_days: u32) -> Settle {
        let mut rechecks = [None; datasets::ALL.len()];
        for (at, name) in datasets::ALL.iter().enumerate() {
            rechecks[at] = crate::dataset::by_name(name)
                .filter(|d| matches!(d.windowing(), Windowing::Span { .. }))
                .map(|d| self.recheck(d));
        }
        Settle {
            lookback_days,
            rechecks,
        }
    }

    /// The days a span walks again: its full re-check (feedback's 14 days, the assistant's
    /// overlap).
    pub fn recheck(&self, dataset: &dyn Dataset) -> u32 {
        match (dataset.name(), dataset.windowing()) {
            (datasets::FEEDBACK, _) => self.feedback_recheck_days,
            (datasets::ASSISTANT, _) => self.assistant_overlap_days,
            (_, Windowing::Span { recheck_days }) => recheck_days,
            _ => 0,
        }
    }
}

impl Exporter {
    /// Fetches the threads of the unanswered turns just fetched, per project.
    pub(super) async fn run_threads(
        &self,
        clients: &HashMap<&str, &Client>,
        unanswered: BTreeMap<String, Vec<String>>,
        stops: &mut Stops,
        summary: &mut Summary,
    ) {
        for (project, threads) in unanswered {
            let Some(client) = clients.get(project.as_str()) else {
                continue;
            };
            if stops.reason(&project, client).is_some() {
                continue;
            }
            let fetcher = self.client_for(client, "thread", summary);
            let result = self.fetch_threads(&fetcher, &project, &threads).await;
            match result {
                Ok(outcome) => {
                    self.emit(crate::events::Event::Fetched {
                        dataset: THREADS.name,
                        project: &project,
                    });
                    summary.others.push(outcome)
                }
                Err(e) => {
                    let window = (THREADS.name, project.as_str(), self.today(), None);
                    self.failed(window, client, e, summary, stops);
                }
            }
        }
    }

    /// Fetches the threads of `candidates` not fetched yet, up to the cap, and merges their
    /// messages into `assistant_messages` (partitioned by the day each thread began).
    async fn fetch_threads(
        &self,
        client: &Client,
        project: &str,
        candidates: &[String],
    ) -> Result<WindowOutcome, ExportError> {
        let done = self.state().threads_fetched(project)?;
        let cap = self.shaped.threads_per_run as usize;
        let mut rows_written = 0;
        let today = self.today();
        let mut fetched = 0;
        for thread in candidates.iter().filter(|t| !done.contains(*t)).take(cap) {
            let page = match fetch_thread(client, project, thread).await {
                Ok(p) => p,
                Err(e) if matches!(e.kind, crate::api::ErrorKind::NotFound { .. }) => {
                    tracing::warn!(project, thread = %thread, "thread not found; not asked for again");
                    self.state()
                        .thread_fetched(project, thread, 0, self.clock.now())?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            fetched += 1;
            if page.totals[0].text() != Some(thread.as_str()) {
                return Err(Client::paging_error(
                    THREADS.name,
                    format!("project {project}, thread {thread}"),
                    format!("the answer is thread {:?}", page.totals[0]),
                )
                .into());
            }
            let rows: Vec<Vec<Cell>> = page
                .rows
                .iter()
                .map(|m| {
                    let mut r = page.totals.clone();
                    r.extend(m.iter().cloned());
                    r
                })
                .collect();
            let refs: Vec<FlaggedRow<'_>> = rows.iter().map(|r| (r.as_slice(), &[][..])).collect();
            let cells: Vec<&[Cell]> = refs.iter().map(|r| r.0).collect();
            THREAD_MESSAGES.check(&cells, &[]).map_err(|m| {
                Client::paging_error(
                    THREADS.name,
                    format!("project {project}, thread {thread}"),
                    m,
                )
            })?;
            // Its messages go to the day the thread began.
            let day = page.totals[1]
                .time()
                .map_or(today, |t| t.with_timezone(&self.tz).date_naive());
            let at = self.clock.now();
            let dir = partition_dir(self.output(), THREAD_MESSAGES.table, project, day);
            Writes::all(&self.crash, |writes| {
                writes.merge_into(&THREAD_MESSAGES, &dir, &refs, at)
            })?;
            self.state()
                .thread_fetched(project, thread, rows.len() as i64, at)?;
            rows_written += rows.len() as i64;
        }
        Ok(WindowOutcome {
            rows: rows_written,
            requests: fetched,
            ..WindowOutcome::of(
                THREADS.name,
                project,
                (today, today.succ_opt().unwrap_or(today)),
            )
        })
    }
}

/// One assistant thread's messages.
pub async fn fetch_thread(
    client: &Client,
    project: &str,
    thread: &str,
) -> Result<Page, crate::api::ApiError> {
    client
        .analytics_page(
            THREADS.name,
            THREADS.endpoint,
            project,
            Some(thread),
            None,
            None,
            &At::Start,
            |b| THREADS.decode(b, None),
        )
        .await
}
