//! `docpipe warehouse sync`: loads into the warehouse what the lake has that it lacks, from
//! the Parquet files already there, without a request to the service.

use crate::app::{Access, Context, Keys};
use crate::config::Settings;
use crate::error::UserError;

/// `docpipe warehouse`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

/// What to do with the warehouse.
#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Load what the lake has that the warehouse lacks (the files written or changed since
    /// their last load), each file in one transaction.
    Sync,
}

/// Runs `warehouse sync`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let Sub::Sync = args.command;
    let Some(w) = settings.warehouse.clone() else {
        return Err(UserError::new(format!(
            "{} has no [warehouse]: name the variable holding the database's URL in [warehouse] postgres_url_env",
            settings.origin
        ))
        .into());
    };
    let ctx = Context::open(
        settings.clone(),
        crate::clock::system(),
        Access::Shared,
        Keys::None,
    )
    .await?;
    match crate::app::warehouse::sync(&ctx)
        .await
        .expect("the config has a warehouse")
    {
        Ok(l) => {
            let first = l.failed.first().cloned();
            let failed = l.failed.len();
            crate::outln!("{}", crate::app::warehouse::line(&w.schema, &Ok(l)));
            match first {
                // A file that failed is a runtime failure (exit 1); the others are loaded.
                Some(f) => Err(anyhow::anyhow!(
                    "warehouse: {failed} files not loaded, the first {}: {}; the next load retries them",
                    f.file,
                    f.error
                )),
                None => Ok(()),
            }
        }
        Err(e) => Err(UserError::new(e).into()),
    }
}
