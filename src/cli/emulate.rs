//! `docpipe emulate`: serve the emulator on an address until Ctrl-C or SIGTERM.

use crate::clock;
use crate::emulator::data::{DataFile, RowOrder};
use crate::emulator::{Emulator, Server};
use crate::error::UserError;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Fault and limit overrides, on top of the data file's `[faults]` and `[limits]`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FaultArgs {
    /// Fraction of responses replaced by 500, 502 or 503 (0 to 1).
    #[arg(long)]
    pub error_rate: Option<f64>,
    /// Every N requests a burst of 429s begins.
    #[arg(long)]
    pub burst_429_every: Option<u64>,
    /// Requests per 429 burst.
    #[arg(long)]
    pub burst_429_len: Option<u64>,
    /// Retry-After seconds sent with burst 429s.
    #[arg(long)]
    pub burst_retry_after_secs: Option<u64>,
    /// Milliseconds of latency added to every response.
    #[arg(long)]
    pub latency_ms: Option<u64>,
    /// Fraction of bodies cut off halfway (0 to 1).
    #[arg(long)]
    pub cut_body_rate: Option<f64>,
    /// Fraction of connections closed without a complete response (0 to 1).
    #[arg(long)]
    pub drop_rate: Option<f64>,
    /// The most recent N days keep receiving late events.
    #[arg(long)]
    pub late_days: Option<u32>,
    /// Seconds between waves of late events.
    #[arg(long)]
    pub late_every_secs: Option<u64>,
    /// Order of rows within a page.
    #[arg(long, value_enum)]
    pub row_order: Option<RowOrder>,
    /// Human views each day's page-view totals count beyond its rows (views without a listed
    /// path).
    #[arg(long)]
    pub unlisted_views: Option<u64>,
    /// Read `dateFrom` and `dateTo` as UTC days, not instants (a service that does not filter
    /// by the instants asked for; `check --deep` finds it).
    #[arg(long)]
    pub utc_days: bool,
    /// Seed of the fault dice.
    #[arg(long)]
    pub fault_seed: Option<u64>,
    /// Only these operations get the request faults (views, job_create, job_get, job_message,
    /// assistant; comma-separated; default all).
    #[arg(long, value_delimiter = ',')]
    pub fault_ops: Vec<String>,
    /// Analytics requests per organization per hour.
    #[arg(long)]
    pub analytics_per_hour: Option<u32>,
    /// Follow-ups and job creations per project per hour.
    #[arg(long)]
    pub agent_per_hour: Option<u32>,
    /// Seconds an agent job runs before it ends.
    #[arg(long)]
    pub job_duration_secs: Option<u64>,
}

impl FaultArgs {
    /// Applies the overrides to a data file.
    pub fn apply(&self, data: &mut DataFile) {
        let f = &mut data.faults;
        macro_rules! set {
            ($($src:ident => $dst:expr),* $(,)?) => { $( if let Some(v) = self.$src { $dst = v; } )* };
        }
        set!(error_rate => f.error_rate, burst_429_every => f.burst_429_every, burst_429_len => f.burst_429_len,
             burst_retry_after_secs => f.burst_retry_after_secs, latency_ms => f.latency_ms,
             cut_body_rate => f.cut_body_rate, drop_rate => f.drop_rate, late_days => f.late_days,
             late_every_secs => f.late_every_secs, row_order => f.row_order, fault_seed => f.seed,
             unlisted_views => f.unlisted_views);
        if self.utc_days {
            f.utc_days = true;
        }
        if !self.fault_ops.is_empty() {
            f.ops = self.fault_ops.clone();
        }
        let l = &mut data.limits;
        set!(analytics_per_hour => l.analytics_per_hour, agent_per_hour => l.agent_per_hour,
             job_duration_secs => l.job_duration_secs);
    }
}

/// Serve a faithful emulator of the service: page views, agent jobs and the v1 assistant, with
/// the service's keys, limits and errors, and injectable faults. Stats at `GET /_emulator/stats`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Data file (TOML); the embedded demo data (sample_data/demo.toml) when absent.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Fault and limit overrides.
    #[command(flatten)]
    pub faults: FaultArgs,
    /// Serve the captures of DIR (written by `--record DIR`) instead of the emulator.
    #[arg(long, value_name = "DIR", conflicts_with = "data")]
    pub replay: Option<PathBuf>,
}

/// Loads a data file (or the embedded demo) and applies the overrides, validating the result.
pub fn load_data(
    path: Option<&std::path::Path>,
    faults: &FaultArgs,
) -> Result<DataFile, UserError> {
    let text = match path {
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| UserError::new(format!("cannot read data file {}: {e}", p.display())))?,
        None => crate::emulator::DEMO_DATA.to_string(),
    };
    let origin = path.map_or("embedded demo data".to_string(), |p| {
        p.display().to_string()
    });
    let mut data = DataFile::parse(&text, &origin).map_err(UserError::from_source)?;
    faults.apply(&mut data);
    // The overrides obey the same rules as the file.
    data.validate(&origin).map_err(UserError::from_source)?;
    Ok(data)
}

/// Runs the emulator until interrupted.
pub async fn run(args: Args) -> anyhow::Result<()> {
    if let Some(dir) = &args.replay {
        let replay = crate::emulator::replay::Replay::load(dir).map_err(UserError::new)?;
        let server = crate::emulator::replay::start(replay, args.addr)
            .await
            .map_err(|e| UserError::new(format!("cannot listen on {}: {e}", args.addr)))?;
        // A service keeps running when nobody reads its standard output.
        let _ = crate::text::try_stdout(format_args!(
            "replaying {} on {}",
            dir.display(),
            server.base_url()
        ));
        crate::cli::shutdown_signal().await;
        server.stop().await;
        return Ok(());
    }
    let data = load_data(args.data.as_deref(), &args.faults)?;
    let emulator = Emulator::new(data, clock::system());
    let server = Server::start(emulator, args.addr)
        .await
        .map_err(|e| UserError::new(format!("cannot listen on {}: {e}", args.addr)))?;
    tracing::info!(addr = %server.addr, "emulator listening; stats at /_emulator/stats");
    // A service keeps running when nobody reads its standard output.
    let _ = crate::text::try_stdout(format_args!(
        "emulator listening on {}\n{}",
        server.base_url(),
        server.emulator.data().served().trim_end()
    ));
    crate::cli::shutdown_signal().await;
    server.stop().await;
    Ok(())
}
