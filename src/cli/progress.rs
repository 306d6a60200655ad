//! The progress bar of the command running now, if it shows one: it draws the exporter's
//! [`Events`]; log lines are drawn above it (not through it), and a wait for the rate budget
//! shows in it until the wait ends.

use crate::events::{Event, Events};
use chrono::{DateTime, Utc};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// The run's windows planned and done so far (drawn or not), for the line a signal's stop
/// prints.
static PLANNED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static DONE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The windows of the run in progress not done yet, of those planned (none before a plan).
pub fn left() -> Option<(u64, u64)> {
    use std::sync::atomic::Ordering::Relaxed;
    let planned = PLANNED.load(Relaxed);
    (planned > 0).then(|| (planned.saturating_sub(DONE.load(Relaxed)), planned))
}

fn active() -> Option<ProgressBar> {
    ACTIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .filter(|b| !b.is_hidden())
}

/// Makes `bar` the one that log lines and budget waits go to, until [`hide`].
pub fn show(bar: &ProgressBar) {
    *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
}

/// No bar any more: log lines go straight to standard error.
pub fn hide() {
    *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Standard error, with the bar (if any) cleared while a log line is written.
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match active() {
            Some(bar) => bar.suspend(|| std::io::stderr().write(buf)),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The writer the log subscriber makes for each line.
pub fn log_writer() -> LogWriter {
    LogWriter
}

/// The message a budget wait shows in the bar.
pub fn wait_message(scope: &str, wait: Duration, until: DateTime<Utc>) -> String {
    crate::text::budget_wait(scope, wait, until)
}

/// A budget wait being drawn: its message counts down at each draw of the bar.
#[derive(Debug, Clone)]
pub struct Countdown {
    /// The budget waited for.
    pub scope: String,
    /// When the wait ends.
    pub until: DateTime<Utc>,
    /// How long the wait is.
    pub wait: Duration,
    /// When it began.
    pub began: Instant,
}

impl Countdown {
    /// The wait's message now: the time left as the wait's own sleep counts it.
    pub fn message(&self) -> String {
        let left = self.wait.saturating_sub(self.began.elapsed());
        // Whole seconds, rounded up: "in 1s" until the wait ends, never "in 0s" before.
        let left = Duration::from_secs(left.as_millis().div_ceil(1000) as u64);
        wait_message(&self.scope, left, self.until)
    }
}

/// A progress bar on standard error when it is a terminal (else nothing is drawn).
#[derive(Debug)]
pub struct Bar {
    bar: ProgressBar,
    /// The message to show again when a budget wait ends.
    before_wait: Mutex<Option<String>>,
    /// The budget wait being drawn (the template's `{countdown}`).
    countdown: Arc<Mutex<Option<Countdown>>>,
}

impl Bar {
    /// A bar if standard error is a terminal; a hidden one otherwise.
    pub fn on_terminal() -> Self {
        use std::io::IsTerminal;
        let countdown: Arc<Mutex<Option<Countdown>>> = Arc::default();
        let bar = if std::io::stderr().is_terminal() {
            let drawn = countdown.clone();
            ProgressBar::new(0).with_style(
                ProgressStyle::with_template(
                    "{spinner} {bar:30} {pos}/{len} windows  {msg}{countdown}",
                )
                .map(|s| {
                    s.with_key(
                        "countdown",
                        move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                            let c = drawn.lock().unwrap_or_else(|e| e.into_inner()).clone();
                            if let Some(c) = c {
                                let _ = w.write_str(&c.message());
                            }
                        },
                    )
                })
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            )
        } else {
            ProgressBar::hidden()
        };
        Self {
            bar,
            before_wait: Mutex::new(None),
            countdown,
        }
    }
}

impl Events for Bar {
    fn draws(&self) -> bool {
        !self.bar.is_hidden()
    }

    fn event(&self, event: &Event<'_>) {
        match *event {
            Event::Planned { windows, done } => {
                PLANNED.store(windows, std::sync::atomic::Ordering::Relaxed);
                DONE.store(done, std::sync::atomic::Ordering::Relaxed);
                self.bar.set_length(windows);
                self.bar.set_position(done);
                if !self.bar.is_hidden() {
                    show(&self.bar);
                    // The spinner turns during a budget wait too.
                    self.bar.enable_steady_tick(Duration::from_millis(250));
                }
            }
            Event::Written {
                project,
                window,
                run_rows,
                run_requests,
                ..
            } => {
                DONE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.bar.inc(1);
                self.bar.set_message(format!(
                    "{run_rows} rows, {run_requests} requests; last {project} {window}"
                ));
            }
            Event::Failed { .. } => {
                DONE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.bar.inc(1);
            }
            Event::Finished => {
                self.bar.finish_and_clear();
                hide();
            }
            Event::Spent { .. }
            | Event::Long { .. }
            | Event::Fetched { .. }
            | Event::RuleRan { .. }
            | Event::KeyAnswered { .. } => {}
        }
    }

    fn waiting(&self, scope: &str, wait: Duration, until: DateTime<Utc>) {
        if self.bar.is_hidden() {
            return;
        }
        let mut before = self.before_wait.lock().unwrap_or_else(|e| e.into_inner());
        before.get_or_insert_with(|| self.bar.message());
        // The message is the countdown's, drawn afresh at each tick of the bar.
        *self.countdown.lock().unwrap_or_else(|e| e.into_inner()) = Some(Countdown {
            scope: scope.to_string(),
            until,
            wait,
            began: Instant::now(),
        });
        self.bar.set_message("");
    }

    fn waited(&self, _scope: &str) {
        *self.countdown.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let before = self
            .before_wait
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(m) = before {
            self.bar.set_message(m);
        }
    }
}
