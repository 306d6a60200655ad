//! `docpipe agents`: the table of the agents that read documentation (docpipe's, and a file of
//! yours read before it), and what it makes of user agents you give it: the way to try a row
//! before the stream's tables carry it (docs/agents.md).

use crate::agents::{Agents, Who};
use crate::error::UserError;
use crate::text::one_line;
use std::path::PathBuf;

/// Name the agents behind user agents, from docpipe's table and yours.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  docpipe agents                                  # the table, in the order it is tried
  docpipe agents 'Claude-User (claude-code/1.0.83; +https://support.anthropic.com/)'
  docpipe agents --file my-agents.toml 'NewAgentBot/2.1'
  docpipe agents --event docs.content.md.view 'Mozilla/5.0 (Macintosh) Safari/605.1.15'")]
pub struct Args {
    /// A table of your own (the format of docpipe's `sample_data/agents.toml`), read before
    /// docpipe's: a row with the same agent replaces docpipe's, the others are tried first.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// The stream's event of each read, for its surface.
    #[arg(long, default_value = "docs.content.view")]
    pub event: String,
    /// The path of each read, for its surface.
    #[arg(long, default_value = "/")]
    pub path: String,
    /// User agents to name; none prints the table.
    pub user_agents: Vec<String>,
}

/// Prints the table, or what it makes of each user agent given.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let agents = match &args.file {
        None => Agents::shipped(),
        Some(file) => {
            let shown = one_line(&file.display().to_string()).into_owned();
            let text = std::fs::read_to_string(file)
                .map_err(|e| UserError::new(format!("cannot read {shown}: {e}")))?;
            Agents::with_user(&text, &shown).map_err(|e| UserError::new(e.to_string()))?
        }
    };
    if args.user_agents.is_empty() {
        crate::out!("{}", table(&agents));
        return Ok(());
    }
    for ua in &args.user_agents {
        let read = agents.read(ua, &args.event, &args.path);
        crate::outln!(
            "{ua:?}: {}, reading {} (table {})",
            described(&read.who),
            read.surface,
            agents.version()
        );
    }
    Ok(())
}

/// `GPTBot (OpenAI), training`.
fn described(w: &Who) -> String {
    let operator = if w.operator.is_empty() {
        String::new()
    } else {
        format!(" ({})", w.operator)
    };
    format!("{}{operator}, {}", w.agent, w.class)
}

/// The table as text: its version, then its agents in the order they are tried.
fn table(agents: &Agents) -> String {
    let named: Vec<Who> = agents.named().collect();
    let mut out = format!(
        "agents table {}: {}, tried in this order (the first whose pattern a user agent contains names it)\n",
        agents.version(),
        crate::text::count(named.len() as u64, "named agent")
    );
    for w in &named {
        out += &format!(
            "  {:<22} {:<14} {}\n",
            w.agent,
            w.operator,
            w.class.as_str()
        );
    }
    out += "then: a user agent that says it is a bot, or an HTTP program (curl, axios, ...), is unknown, named by its product token; a browser is human, unless it reads Markdown, llms.txt or MCP (an unnamed agent)\n";
    out
}
