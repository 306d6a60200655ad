//! The daemon (`docpipe run`): the incremental export on a cron schedule (then the trends and
//! the rules without a schedule), each rule's own schedule, the polling of agent jobs, a queue
//! of backfills drained between scheduled runs within the budget, the status page, `/healthz`
//! and `/metrics`,
//! and a clean stop.
//!
//! One task does all the work, one piece at a time: scheduled runs never overlap, and a scheduled
//! run waiting in the channel goes before the next backfill window. No piece waits for an agent
//! job: a fired rule's job is looked at once per polling step, between the other work.

pub mod alerts;
pub mod gauges;
pub mod health;
pub mod reload;
mod work;

use crate::app::rules::load;
use crate::app::{Access, Context, Keys};
use crate::clock::SharedClock;
use crate::config::Settings;
use crate::error::UserError;
use crate::store::daemons::HEARTBEAT_EVERY;
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_cron_scheduler::{Job, JobScheduler};
pub use work::{Daemon, Step, Tick};

pub use health::{Shared as StatusContext, router as health_router, serve as serve_status};

/// How often the jobs of fired rules are looked at (one `get_job` each).
pub const POLL_EVERY: Duration = Duration::from_secs(5);

/// What `start` sets up for `serve`.
struct Started {
    daemon: Daemon,
    scheduler: JobScheduler,
    ticks: mpsc::UnboundedReceiver<Tick>,
    /// Where the ticks are sent: a scheduler made again for changed rules sends there too.
    tx: mpsc::UnboundedSender<Tick>,
    server: Option<tokio::task::JoinHandle<()>>,
    /// Writes this daemon's heartbeat every [`HEARTBEAT_EVERY`].
    beats: tokio::task::JoinHandle<()>,
    /// Tells the health server to stop.
    stopped: watch::Sender<bool>,
}

/// Opens the context, loads the rules, starts the health server and the schedules.
async fn start(
    settings: Settings,
    clock: SharedClock,
    metrics: Option<PrometheusHandle>,
) -> anyhow::Result<Started> {
    let mut rules = Vec::new();
    if settings.rules_dir.is_dir() {
        let loaded = load(&settings.rules_dir, &settings, &[])?;
        if !loaded.problems.is_empty() {
            return Err(UserError::new(loaded.problems.join("\n")).into());
        }
        rules = loaded.rules;
    }
    let (stopped, mut stop_rx) = watch::channel(false);
    let shared = health::Shared::default();
    let server = match settings.daemon.listen {
        Some(addr) => {
            let token = health::token(&settings, addr)?;
            let stop = async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            };
            let app = health::router(
                metrics,
                settings.clone(),
                clock.clone(),
                shared.clone(),
                token,
            );
            let (bound, task) = health::serve(addr, app, stop)
                .await
                .map_err(|e| UserError::new(format!("daemon.listen {addr}: cannot listen: {e}")))?;
            tracing::info!("status page on http://{bound}/ (and /status.json, /metrics, /healthz)");
            // A service keeps running when nobody reads its standard output.
            let _ = crate::text::try_stdout(format_args!("listening on http://{bound}"));
            Some(task)
        }
        None => None,
    };
    let ctx = std::sync::Arc::new(Context::open(settings, clock, Access::Export, Keys::All).await?);
    let _ = shared.set(ctx.clone());
    // What the budget allows, said once at start: a config that asks for more is not an error,
    // but the user must know what happens instead.
    let ahead = ctx.plan_ahead()?;
    for (short, paragraph) in ahead.paragraphs() {
        if short {
            tracing::warn!("{paragraph}");
        } else {
            tracing::info!("{paragraph}");
        }
    }
    let (tx, ticks) = mpsc::unbounded_channel::<Tick>();
    let scheduler = schedules(&ctx.settings.daemon.export_schedule, &rules, &tx).await?;
    scheduler.start().await?;
    let next = crate::schedule::parse_schedule(&ctx.settings.daemon.export_schedule)
        .ok()
        .and_then(|c| c.find_next_occurrence(&ctx.clock.now(), false).ok())
        .map_or_else(
            || "none".to_string(),
            |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        );
    tracing::info!(
        export_schedule = %ctx.settings.daemon.export_schedule,
        rules = rules.len(),
        "docpipe daemon started: an export now, then on the schedule (the next at {next})"
    );
    // The first export at once: what is due now should not wait for the schedule; and the jobs
    // a stopped daemon was polling are looked at again.
    let _ = tx.send(Tick::Export);
    let _ = tx.send(Tick::Poll);
    let daemon = Daemon::open(ctx, rules)?;
    let beats = heartbeats(&daemon);
    Ok(Started {
        daemon,
        scheduler,
        beats,
        ticks,
        tx,
        server,
        stopped,
    })
}

/// The scheduler of the daemon's ticks: the export's schedule, each rule's, and (with rules)
/// the polling of jobs; each sends its tick on `tx`.
async fn schedules(
    export: &str,
    rules: &[crate::rules::Rule],
    tx: &mpsc::UnboundedSender<Tick>,
) -> anyhow::Result<JobScheduler> {
    let scheduler = JobScheduler::new().await?;
    let mut schedules = vec![(export.to_string(), Tick::Export)];
    for r in rules {
        if let Some(s) = &r.schedule {
            schedules.push((s.clone(), Tick::Rule(r.name.clone())));
        }
    }
    for (schedule, tick) in schedules {
        let tx = tx.clone();
        let job = Job::new_async(schedule.as_str(), move |_, _| {
            let _ = tx.send(tick.clone());
            Box::pin(async {})
        })
        .map_err(|e| UserError::new(format!("schedule {schedule:?}: {e}")))?;
        scheduler.add(job).await?;
    }
    if !rules.is_empty() {
        let tx = tx.clone();
        let every = POLL_EVERY;
        scheduler
            .add(Job::new_repeated_async(every, move |_, _| {
                let _ = tx.send(Tick::Poll);
                Box::pin(async {})
            })?)
            .await?;
    }
    Ok(scheduler)
}

/// The daemon's heartbeat in the state, every [`HEARTBEAT_EVERY`], from a task.
fn heartbeats(daemon: &Daemon) -> tokio::task::JoinHandle<()> {
    let daemons = daemon.context().store().daemons();
    let clock = daemon.context().clock.clone();
    let me = daemon.name().to_string();
    let started = clock.now();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(HEARTBEAT_EVERY);
        loop {
            every.tick().await;
            if let Err(e) = daemons.beat(&me, started, clock.now()) {
                tracing::warn!("heartbeat: {e}");
            }
        }
    })
}

/// Runs the daemon until `stop` resolves; then lets the work in progress finish for the grace
/// period (or abandons it: the state stays consistent and the next start resumes) and returns.
pub async fn run(
    settings: Settings,
    clock: SharedClock,
    metrics: Option<PrometheusHandle>,
    stop: impl Future<Output = ()>,
    hangups: Option<mpsc::UnboundedReceiver<()>>,
) -> anyhow::Result<()> {
    let grace = settings.daemon.shutdown_grace;
    let mut stop = std::pin::pin!(stop);
    // Starting can wait for the folder's lock (another daemon holds it): a stop signal ends the
    // wait too.
    let started = tokio::select! {
        started = start(settings, clock, metrics) => started?,
        _ = &mut stop => {
            tracing::info!("stopped before starting (the output folder's lock was not free)");
            return Ok(());
        }
    };
    let Started {
        mut daemon,
        mut scheduler,
        ticks: mut rx,
        tx,
        server,
        beats,
        stopped,
    } = started;
    // A SIGHUP (also one that came while waiting for the lock) reads the rule files again.
    if let Some(mut hangups) = hangups {
        let tx = tx.clone();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                if tx.send(Tick::Reload).is_err() {
                    break;
                }
            }
        });
    }
    let mut backfill_wait = Duration::ZERO;
    // Ticks that arrived while work ran, each once: an export that took longer than its
    // schedule's period is followed by one export, not by one per missed tick.
    let mut pending: std::collections::VecDeque<Tick> = Default::default();
    let mut last_was_tick = false;
    loop {
        while let Ok(t) = rx.try_recv() {
            if !pending.contains(&t) {
                pending.push_back(t);
            }
        }
        // A tick waiting goes first, but when ticks come back to back (runs longer than their
        // schedule's period), one backfill window goes between two of them: no starvation.
        let backfill_turn = backfill_wait.is_zero() && last_was_tick;
        let next = match pending.pop_front() {
            Some(t) if !backfill_turn => Some(t),
            Some(t) => {
                pending.push_front(t);
                None
            }
            None => tokio::select! {
                biased;
                _ = &mut stop => break,
                tick = rx.recv() => tick,
                _ = tokio::time::sleep(backfill_wait) => None,
            },
        };
        // The rule files are looked at again before each export, and on a SIGHUP.
        if let Some(t @ (Tick::Export | Tick::Reload)) = &next {
            if daemon.reload_rules(*t == Tick::Reload) {
                scheduler = reschedule(scheduler, &daemon, &tx).await;
            }
            if *t == Tick::Reload {
                continue;
            }
        }
        let Some(step) = work_or_stop(&mut daemon, next.as_ref(), &mut stop, grace).await else {
            break;
        };
        // A polling step is not a scheduled run: it does not take a backfill window's turn.
        last_was_tick = next.as_ref().is_some_and(|t| *t != Tick::Poll);
        backfill_wait = match step {
            Step::Worked => Duration::ZERO,
            Step::Wait(d) => d,
            // Nothing queued: look again now and then (a `backfill --queue` may add some).
            Step::Idle => Duration::from_secs(5),
        };
    }
    // What this daemon held is another's to take at once, not when its lease runs out.
    beats.abort();
    daemon.leave();
    let _ = scheduler.shutdown().await;
    let _ = stopped.send(true);
    if let Some(s) = server {
        let _ = tokio::time::timeout(Duration::from_secs(5), s).await;
    }
    tracing::info!("docpipe daemon stopped");
    Ok(())
}

/// The scheduler made again for the daemon's rules (their schedules changed): the new one
/// started before the old one stops; when it cannot be made, the old one goes on.
async fn reschedule(
    old: JobScheduler,
    daemon: &Daemon,
    tx: &mpsc::UnboundedSender<Tick>,
) -> JobScheduler {
    let export = daemon.context().settings.daemon.export_schedule.clone();
    let new = match schedules(&export, &daemon.rules, tx).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("the rules' schedules cannot be changed: {e}; the old ones go on");
            return old;
        }
    };
    if let Err(e) = new.start().await {
        tracing::error!("the rules' schedules cannot be started: {e}; the old ones go on");
        return old;
    }
    let mut old = old;
    let _ = old.shutdown().await;
    tracing::info!("the rules' schedules changed: the scheduler was made again");
    new
}

/// One step of the daemon's work; `None` when a stop signal came meanwhile (the step in
/// progress then has `grace` to finish, and is abandoned after it: what was fetched is kept).
async fn work_or_stop(
    daemon: &mut Daemon,
    next: Option<&Tick>,
    stop: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    grace: Duration,
) -> Option<Step> {
    let work = daemon.work(next);
    let mut work = std::pin::pin!(work);
    tokio::select! {
        step = &mut work => return Some(step),
        _ = stop.as_mut() => {}
    }
    tracing::info!(
        grace_secs = grace.as_secs(),
        "stopping: the run in progress has the grace period to finish"
    );
    if tokio::time::timeout(grace, &mut work).await.is_err() {
        tracing::warn!(
            "stopping: the run in progress was abandoned; what was fetched is kept, and the next start resumes"
        );
    }
    None
}
