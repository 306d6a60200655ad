//! The docpipe binary: parse the command line, run the library, map errors to exit codes.

#![warn(clippy::too_many_lines)]

use clap::Parser;
use docpipe::cli::{self, Cli};
use std::process::ExitCode;

fn main() -> ExitCode {
    docpipe::alloc::tune();
    docpipe::tls::install();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // Other crates' logs (the scheduler's, the HTTP stack's) at warn unless RUST_LOG says.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let level = cli::log_level(cli.verbose, cli.quiet);
        let others = if level == "error" { "error" } else { "warn" };
        tracing_subscriber::EnvFilter::new(format!("{others},docpipe={level}"))
    });
    // Colour only on a terminal, and never with NO_COLOR set (https://no-color.org).
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(docpipe::cli::progress::log_writer);
    match cli.log_format {
        cli::LogFormat::Text => logs.init(),
        cli::LogFormat::Json => logs.json().init(),
    }
    // The emulator serves many connections at once; everything else is sequential work, which a
    // single-threaded runtime does with far fewer wake-ups (measured: 5.9 -> 3.9 us of CPU per
    // exported row).
    let runtime = if matches!(cli.command, cli::Command::Emulate(_)) {
        tokio::runtime::Runtime::new()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // The daemon and the emulator stop on a signal by themselves (gracefully); any other
    // command stops where it is (what it wrote stays whole: a rerun resumes) and says so.
    let handles_signals = matches!(cli.command, cli::Command::Run(_) | cli::Command::Emulate(_));
    let backfill = matches!(cli.command, cli::Command::Backfill(_));
    let result = runtime.block_on(async {
        if handles_signals {
            return Some(cli::run(cli).await);
        }
        let signal = cli::shutdown_signal();
        tokio::select! {
            r = cli::run(cli) => Some(r),
            () = signal => None,
        }
    });
    let Some(result) = result else {
        eprintln!("error: {}", stopped_line(backfill));
        return ExitCode::from(130);
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line per problem (a rules folder can have several).
            for line in docpipe::error::lines(&e) {
                // An indented line belongs to the problem list of the line before.
                if line.starts_with("  ") {
                    eprintln!("{line}");
                } else {
                    eprintln!("error: {line}");
                }
            }
            ExitCode::from(docpipe::error::exit_code(&e))
        }
    }
}

/// What a command stopped by a signal says: what is left of its run and how to go on.
fn stopped_line(backfill: bool) -> String {
    let left = match cli::progress::left() {
        Some((left, planned)) => format!(" with {left} of {planned} windows left"),
        None => String::new(),
    };
    let on = if backfill {
        "run the same command again to go on from there, or add --queue to leave the rest to the daemon"
    } else {
        "run the same command again to go on from there"
    };
    format!("stopped by a signal{left}; what was written stays whole: {on}")
}
