//! The command line: one file per subcommand; doc comments are the `--help` text.

pub mod agents;
pub mod ask;
pub mod backfill;
pub mod check;
pub mod demo;
pub mod emulate;
pub mod export;
pub mod init;
pub mod progress;
pub mod rules;
pub mod run;
pub mod shell;
pub mod status;
pub mod trends;
pub mod warehouse;

use clap::{Parser, Subcommand};

/// Export documentation page views (human vs AI) to Parquet, aggregate trends,
/// and drive agent-job follow-ups.
///
/// Exit codes: 0 ok, 1 runtime failure, 2 bad input (config, arguments, data or rule files).
#[derive(Debug, Parser)]
#[command(name = "docpipe", version, about, long_about)]
pub struct Cli {
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Less log output (-q warnings and errors only, -qq errors only).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "verbose")]
    pub quiet: u8,
    /// Log format on standard error: plain text, or one JSON object a line.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Config file.
    #[arg(
        long,
        global = true,
        env = "DOCPIPE_CONFIG",
        default_value = "docpipe.toml"
    )]
    pub config: std::path::PathBuf,
    /// Where the tables go, over the config's `output_dir`: a folder, or `s3://bucket/prefix`,
    /// `gs://bucket/prefix`, `az://container/prefix` (credentials from the cloud's environment).
    #[arg(long, global = true)]
    pub output: Option<std::path::PathBuf>,
    /// The local folder of the state and the tables' working copy, over the config's
    /// `state_dir` (required with a URL output; by default the output folder).
    #[arg(long, global = true)]
    pub state_dir: Option<std::path::PathBuf>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// JSON lines (timestamp, level, target, fields).
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve a faithful emulator of the documentation platform's API.
    Emulate(emulate::Args),
    /// Run the main job end to end on the embedded emulator (export, trends, rules).
    Demo(demo::Args),
    /// Fetch a range of days to Parquet, within the rate budget.
    Backfill(backfill::Args),
    /// Fetch what is due (the incremental run a scheduler calls).
    Export(export::Args),
    /// Aggregate human-versus-AI trends from the exported data.
    Trends(trends::Args),
    /// Run as a daemon: scheduled exports, trends and rules; queued backfills; /metrics.
    Run(run::Args),
    /// Agent-job follow-ups from rule files: `rules check` shows, `rules run` sends.
    Rules(rules::Args),
    /// Write a first config for your organization and projects, and an example rule.
    Init(init::Args),
    /// Prove the set-up against the service with the fewest requests (one per dataset).
    Check(check::Args),
    /// Check the config and the rule files without sending anything.
    Validate(rules::ValidateArgs),
    /// What the state database knows: days exported, budgets used, last rule firings.
    Status(status::Args),
    /// Ask the documentation assistant a question and stream the answer.
    Ask(ask::Args),
    /// Load the lake into the PostgreSQL warehouse of `[warehouse]` (`warehouse sync`).
    Warehouse(warehouse::Args),
    /// Name the agents behind user agents, from docpipe's table and yours.
    Agents(agents::Args),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell).
    Completions(shell::CompletionsArgs),
    /// Write the man pages into a folder (the package does; `man docpipe` reads them).
    #[command(hide = true)]
    Manpages(shell::ManpagesArgs),
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let o = crate::config::Overrides {
        output: cli.output,
        state_dir: cli.state_dir,
    };
    let load = |path: &std::path::Path| crate::config::Settings::load_with(path, &o);
    match cli.command {
        Command::Emulate(args) => emulate::run(args).await,
        Command::Demo(args) => demo::run(args, &o).await,
        Command::Backfill(args) => backfill::run(args, &load(&cli.config)?).await,
        Command::Export(args) => export::run(args, &load(&cli.config)?).await,
        Command::Trends(args) => trends::run(args, &load(&cli.config)?).await,
        Command::Run(args) => run::run(args, &load(&cli.config)?).await,
        Command::Rules(args) => rules::run(args, &load(&cli.config)?).await,
        Command::Init(args) => init::run(args, &cli.config),
        Command::Check(args) => check::run(args, &load(&cli.config)?).await,
        Command::Validate(args) => rules::validate(args, &load(&cli.config)?).await,
        Command::Status(args) => status::run(args, &load(&cli.config)?).await,
        Command::Ask(args) => ask::run(args, &load(&cli.config)?).await,
        Command::Warehouse(args) => warehouse::run(args, &load(&cli.config)?).await,
        Command::Agents(args) => agents::run(&args),
        Command::Completions(args) => {
            shell::completions(&args);
            Ok(())
        }
        Command::Manpages(args) => shell::manpages(&args),
    }
}

/// The log filter for `-v`/`-q` counts.
pub fn log_level(verbose: u8, quiet: u8) -> &'static str {
    match (verbose, quiet) {
        (0, 0) => "info",
        (1, _) => "debug",
        (v, _) if v >= 2 => "trace",
        (_, 1) => "warn",
        _ => "error",
    }
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed at the call, not at the first
/// poll, so that a signal that comes before the future is polled is not the default (fatal) one.
/// Call it inside the runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).ok();
        let mut int = signal(SignalKind::interrupt()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! { _ = wait(term.take()) => {}, _ = wait(int.take()) => {} }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
