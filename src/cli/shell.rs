//! What installs docpipe beside its binary, generated from the command line's own definitions
//! (so they never disagree with `--help`): `docpipe completions SHELL` prints a shell's
//! completion script, `docpipe manpages DIR` writes `docpipe.1` and one page per subcommand
//! (`docpipe-rules-check.1`, ...) into DIR, as the Debian package ships them.

use crate::error::UserError;
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// Print the completion script of a shell.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Install it where your shell reads completions, for example:
  docpipe completions bash > ~/.local/share/bash-completion/completions/docpipe
  docpipe completions zsh > ~/.zfunc/_docpipe
  docpipe completions fish > ~/.config/fish/completions/docpipe.fish
The Debian package installs all three."
)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Write the man pages (docpipe.1 and one per subcommand) into a folder.
#[derive(Debug, clap::Args)]
pub struct ManpagesArgs {
    /// The folder (created if missing); its pages of the same names are replaced.
    pub dir: PathBuf,
}

/// Prints `args.shell`'s completion script.
pub fn completions(args: &CompletionsArgs) {
    let mut cmd = super::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "docpipe", &mut out);
    crate::out!("{}", String::from_utf8_lossy(&out));
}

/// Writes every page into `args.dir` and prints their names.
pub fn manpages(args: &ManpagesArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir).map_err(|e| {
        UserError::new(format!(
            "cannot create {}: {e}",
            crate::text::one_line(&args.dir.display().to_string())
        ))
    })?;
    let mut cmd = super::Cli::command();
    cmd.build();
    let pages = pages(&cmd, "docpipe");
    for (name, page) in &pages {
        write_page(&args.dir, name, page)?;
    }
    crate::outln!(
        "{} written into {}",
        crate::text::count(pages.len() as u64, "man page"),
        args.dir.display()
    );
    Ok(())
}

/// The pages of `cmd` (named `name`) and of each of its visible subcommands, depth first.
fn pages(cmd: &clap::Command, name: &str) -> Vec<(String, Vec<u8>)> {
    let mut page = Vec::new();
    let named = cmd
        .clone()
        .name(name.to_string())
        .bin_name(name.replace('-', " "));
    // Rendering into memory cannot fail.
    let _ = clap_mangen::Man::new(named).render(&mut page);
    let mut out = vec![(name.to_string(), page)];
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        out.extend(pages(sub, &format!("{name}-{}", sub.get_name())));
    }
    out
}

fn write_page(dir: &Path, name: &str, page: &[u8]) -> anyhow::Result<()> {
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}
