//! `docpipe status`: what the state database knows, per project, and what the planner would do
//! now, as text or as JSON; reads only, needs no key. The model is [`crate::status`].

use crate::clock::{self, SharedClock};
use crate::config::Settings;

/// Print, from the state database, per project: the days exported, the last final day, the
/// provisional days, the days `export` would fetch now; the backfills queued for the daemon; the
/// requests used in the last hour per budget; and the last rule firings. Sends nothing.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many of the last rule firings to show.
    #[arg(long, default_value_t = 5)]
    pub firings: usize,
    /// Print the status as one JSON document (its schema: docs/status.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// The status text at the clock's now.
pub async fn describe(
    settings: &Settings,
    clock: SharedClock,
    firings: usize,
) -> anyhow::Result<String> {
    let status = crate::status::read(settings, clock, firings).await?;
    Ok(crate::status::text::render(&status))
}

/// Runs `status`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let status = crate::status::read(settings, clock::system(), args.firings).await?;
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        crate::out!("{}", crate::status::text::render(&status));
    }
    Ok(())
}
