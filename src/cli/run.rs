//! `docpipe run`: the daemon.

use crate::clock;
use crate::config::Settings;

/// Run as a daemon: the incremental export on `[daemon] export_schedule` (and once at start),
/// the trends and the rules without a schedule after each export, each rule's own schedule, and
/// the backfills queued with `docpipe backfill --queue`, between scheduled runs and within the
/// budget. Serves `/healthz` and `/metrics` on `[daemon] listen`. Stops cleanly on Ctrl-C or
/// SIGTERM (exit code 0), also while it waits for the output folder's lock; SIGHUP is logged and
/// ignored (restart to reload the config). A failed run is logged and tried again at the next
/// schedule.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the daemon.
pub async fn run(_args: Args, settings: &Settings) -> anyhow::Result<()> {
    ignore_hangups();
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("cannot start the metrics recorder: {e}"))?;
    crate::daemon::run(
        settings.clone(),
        clock::system(),
        Some(metrics),
        super::shutdown_signal(),
    )
    .await
}

/// SIGHUP (a closed terminal, or `systemctl reload`) would end the process: it is logged and
/// ignored instead. The config is read at start; restart the daemon to change it.
fn ignore_hangups() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    tracing::warn!(
                        "SIGHUP ignored: the config is read at start; restart docpipe to reload it"
                    );
                }
            });
        }
    }
}
