//! `docpipe run`: the daemon.

use crate::clock;
use crate::config::Settings;

/// Run as a daemon: the incremental export on `[daemon] export_schedule` (and once at start),
/// the trends and the rules without a schedule after each export, each rule's own schedule, and
/// the backfills queued with `docpipe backfill --queue`, between scheduled runs and within the
/// budget. Serves `/healthz` and `/metrics` on `[daemon] listen`. Stops cleanly on Ctrl-C or
/// SIGTERM (exit code 0), also while it waits for the output folder's lock. The rule files are
/// read again before each export and on SIGHUP (the config at start: restart to change it). A
/// failed run is logged and tried again at the next schedule.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the daemon.
pub async fn run(_args: Args, settings: &Settings) -> anyhow::Result<()> {
    // The webhook's variable before anything is opened or written.
    crate::daemon::alerts::Alerts::open(settings).map_err(crate::error::UserError::new)?;
    let hangups = hangups();
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("cannot start the metrics recorder: {e}"))?;
    crate::daemon::run(
        settings.clone(),
        clock::system(),
        Some(metrics),
        super::shutdown_signal(),
        hangups,
    )
    .await
}

/// SIGHUP (a closed terminal, or `systemctl reload`) would end the process: instead each one
/// is handed to the daemon, which reads its rule files again. The config is read at start;
/// restart the daemon to change it.
fn hangups() -> Option<tokio::sync::mpsc::UnboundedReceiver<()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    tracing::info!("SIGHUP: the rule files will be read again");
                    if tx.send(()).is_err() {
                        break;
                    }
                }
            });
            return Some(rx);
        }
    }
    None
}
