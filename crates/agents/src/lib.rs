//! Who read a page, as data: a user agent named as a program (its agent, who runs it, and its
//! class: a training crawler, a search indexer, an assistant fetching for a person, a coding
//! agent, a browser, or a program docpipe cannot name), and the surface it read (the HTML page,
//! its Markdown, `llms.txt`, the MCP server, or the site's infrastructure). The table is a file:
//! `sample_data/agents.toml` is built in, and a user's file of the same format is read before it
//! with no rebuild (docs/agents.md). Every row docpipe classifies keeps the table's version.
//!
//! A user agent is text a stranger wrote: it is matched, never interpreted, and the name an
//! unknown one is given is cut to [`MAX_NAME`] characters of one line.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde::Deserialize;
use std::fmt;

/// The table docpipe ships.
pub const SHIPPED: &str = include_str!("../../../sample_data/agents.toml");

/// The longest name docpipe gives an agent it cannot name (its user agent's product token).
pub const MAX_NAME: usize = 64;

/// The agent of a browser's user agent.
pub const BROWSER: &str = "browser";

/// The agent of a Markdown, `llms.txt` or MCP read under a browser's user agent: the service
/// counts such reads as agents', never as humans' (a coding agent may send a browser's user
/// agent).
pub const MASKED: &str = "unnamed agent (a browser's user agent)";

/// What kind of reader an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// A crawler gathering text to train models.
    Training,
    /// An indexer for a search or answer engine.
    Search,
    /// Fetching a page for a person, now.
    Assistant,
    /// A coding agent at work.
    Coding,
    /// A browser.
    Human,
    /// A program docpipe cannot name.
    Unknown,
}

impl Class {
    /// Its name in the lake.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Training => "training",
            Class::Search => "search",
            Class::Assistant => "assistant",
            Class::Coding => "coding",
            Class::Human => "human",
            Class::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Surface {
    /// A page as HTML.
    Html,
    /// A page's Markdown (`docs.content.md.view`, or a path ending in `.md`).
    Markdown,
    /// `/llms.txt` or `/llms-full.txt`.
    LlmsTxt,
    /// The MCP server (an event named `docs.mcp.*`, or a path under `/mcp`: the service does
    /// not publish its MCP tool call's event name).
    Mcp,
    /// `robots.txt`, a sitemap, an asset: the site's plumbing, kept apart from reading.
    Infrastructure,
}

impl Surface {
    /// Every surface, in the order of [`Surface::index`].
    pub const ALL: [Surface; 5] = [
        Surface::Html,
        Surface::Markdown,
        Surface::LlmsTxt,
        Surface::Mcp,
        Surface::Infrastructure,
    ];

    /// Its place in [`Surface::ALL`] (a key packed into a number sorts by it).
    pub const fn index(self) -> u8 {
        self as u8
    }

    /// Its name in the lake.
    pub const fn as_str(self) -> &'static str {
        match self {
            Surface::Html => "html",
            Surface::Markdown => "markdown",
            Surface::LlmsTxt => "llms_txt",
            Surface::Mcp => "mcp",
            Surface::Infrastructure => "infrastructure",
        }
    }

    /// Whether only a program reads it this way (the service counts such reads as agents').
    pub const fn is_for_agents(self) -> bool {
        matches!(self, Surface::Markdown | Surface::LlmsTxt | Surface::Mcp)
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a user agent is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Who {
    /// The agent (`GPTBot`), [`BROWSER`], [`MASKED`], or an unknown program's product token.
    pub agent: String,
    /// Who runs it (`OpenAI`); empty when nobody is known.
    pub operator: String,
    /// Its class.
    pub class: Class,
}

/// One read: who, and what.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Read {
    /// Who read.
    pub who: Who,
    /// What was read.
    pub surface: Surface,
}

/// A table that cannot be read: one line naming the file and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct AgentsError {
    /// The file.
    pub file: String,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: String,
    #[serde(default)]
    agents: Vec<Row>,
    #[serde(default)]
    generic: Generic,
    #[serde(default)]
    referrers: Vec<Referrer>,
}

/// The AI products an operator runs, by the hosts a reader comes from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Referrer {
    operator: String,
    hosts: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    agent: String,
    operator: String,
    class: Class,
    patterns: Vec<String>,
}

impl Row {
    /// Who the row names.
    fn who(&self) -> Who {
        Who {
            agent: self.agent.clone(),
            operator: self.operator.clone(),
            class: self.class,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Generic {
    #[serde(default)]
    bots: Vec<String>,
    #[serde(default)]
    programs: Vec<String>,
    #[serde(default)]
    browsers: Vec<String>,
}

/// A table of agents, ready to classify.
#[derive(Debug, Clone)]
pub struct Agents {
    version: String,
    rows: Vec<Row>,
    /// Every row's patterns, and the row each is of.
    named: AhoCorasick,
    row_of: Vec<usize>,
    bots: Matcher,
    programs: Matcher,
    browsers: Matcher,
    /// Each AI product's host and its operator, yours first.
    referrers: Vec<(String, String)>,
}

/// Patterns without rows: which one a user agent contains.
#[derive(Debug, Clone)]
struct Matcher {
    ac: AhoCorasick,
    patterns: Vec<String>,
}

impl Matcher {
    fn new(patterns: Vec<String>) -> Result<Self, String> {
        Ok(Self {
            ac: automaton(&patterns)?,
            patterns,
        })
    }

    /// The first of its patterns (in its order) the text contains.
    fn first(&self, text: &str) -> Option<&str> {
        self.ac
            .find_overlapping_iter(text)
            .map(|m| m.pattern().as_usize())
            .min()
            .map(|i| self.patterns[i].as_str())
    }
}

fn automaton(patterns: &[String]) -> Result<AhoCorasick, String> {
    AhoCorasickBuilder::new()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .build(patterns)
        .map_err(|e| format!("the patterns cannot be matched: {e}"))
}

impl Agents {
    /// The table docpipe ships.
    pub fn shipped() -> Self {
        // The shipped file is part of the build; a test reads it.
        Self::from_files(parse(SHIPPED, "the shipped agents table").unwrap(), None)
            .expect("the shipped agents table is valid")
    }

    /// The shipped table with a user's file (its text, and its name for errors) read before
    /// it: a row of the user's with the same agent as a shipped one replaces it, the others are
    /// tried first; its generic patterns are tried before the shipped ones.
    pub fn with_user(text: &str, file: &str) -> Result<Self, AgentsError> {
        let shipped = parse(SHIPPED, "the shipped agents table").expect("valid");
        let user = parse(text, file)?;
        Self::from_files(shipped, Some(user)).map_err(|message| AgentsError {
            file: file.to_string(),
            message,
        })
    }

    fn from_files(shipped: File, user: Option<File>) -> Result<Self, String> {
        let mut referrers = Vec::new();
        for r in user
            .iter()
            .flat_map(|u| &u.referrers)
            .chain(&shipped.referrers)
        {
            for h in &r.hosts {
                referrers.push((h.to_ascii_lowercase(), r.operator.clone()));
            }
        }
        let (version, rows, generic) = match user {
            None => (shipped.version, shipped.agents, shipped.generic),
            Some(user) => {
                let mut rows = user.agents.clone();
                rows.extend(
                    shipped
                        .agents
                        .into_iter()
                        .filter(|s| !user.agents.iter().any(|u| u.agent == s.agent)),
                );
                let join = |mine: Vec<String>, theirs: Vec<String>| [mine, theirs].concat();
                let generic = Generic {
                    bots: join(user.generic.bots, shipped.generic.bots),
                    programs: join(user.generic.programs, shipped.generic.programs),
                    browsers: join(user.generic.browsers, shipped.generic.browsers),
                };
                (
                    format!("{}+{}", shipped.version, user.version),
                    rows,
                    generic,
                )
            }
        };
        let mut patterns = Vec::new();
        let mut row_of = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            for p in &row.patterns {
                patterns.push(p.clone());
                row_of.push(i);
            }
        }
        Ok(Self {
            version,
            named: automaton(&patterns)?,
            row_of,
            rows,
            bots: Matcher::new(generic.bots)?,
            programs: Matcher::new(generic.programs)?,
            browsers: Matcher::new(generic.browsers)?,
            referrers,
        })
    }

    /// The operator of the AI product at `host` (a referrer's host: `chatgpt.com`, or a
    /// subdomain of a listed host), if it is one.
    pub fn referrer(&self, host: &str) -> Option<&str> {
        self.referrers
            .iter()
            .find(|(h, _)| {
                host.eq_ignore_ascii_case(h)
                    || (host.len() > h.len()
                        && host.as_bytes()[host.len() - h.len() - 1] == b'.'
                        && host[host.len() - h.len()..].eq_ignore_ascii_case(h))
            })
            .map(|(_, o)| o.as_str())
    }

    /// The table's version, as every row it classifies keeps it: the shipped file's, then
    /// `+` and the user's file's when one is read.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The agents it names, in the order they are tried.
    pub fn named(&self) -> impl Iterator<Item = Who> + '_ {
        self.rows.iter().map(Row::who)
    }

    /// Who a user agent is: the first row (in order) with a pattern it contains, else the
    /// generic rules (a bot, then a program, then a browser), else an unknown program.
    pub fn who(&self, user_agent: &str) -> Who {
        let row = self
            .named
            .find_overlapping_iter(user_agent)
            .map(|m| self.row_of[m.pattern().as_usize()])
            .min();
        if let Some(r) = row {
            return self.rows[r].who();
        }
        let unknown = |agent: String| Who {
            agent,
            operator: String::new(),
            class: Class::Unknown,
        };
        if let Some(word) = self.bots.first(user_agent) {
            return unknown(product(user_agent, Some(word)));
        }
        if let Some(word) = self.programs.first(user_agent) {
            return unknown(product(user_agent, Some(word)));
        }
        if self.browsers.first(user_agent).is_some() {
            return Who {
                agent: BROWSER.to_string(),
                operator: String::new(),
                class: Class::Human,
            };
        }
        unknown(product(user_agent, None))
    }

    /// One read: who (a browser's user agent reading what only programs read is an unnamed
    /// agent) and what.
    pub fn read(&self, user_agent: &str, event: &str, path: &str) -> Read {
        let surface = surface(event, path);
        Read {
            who: unmasked(self.who(user_agent), surface),
            surface,
        }
    }
}

/// Who read `surface`, knowing who the user agent names: a browser's user agent reading what
/// only programs read is an unnamed agent ([`MASKED`]).
pub fn unmasked(who: Who, surface: Surface) -> Who {
    if who.class == Class::Human && surface.is_for_agents() {
        return Who {
            agent: MASKED.to_string(),
            operator: String::new(),
            class: Class::Unknown,
        };
    }
    who
}

/// Parses and checks a table's text.
fn parse(text: &str, file: &str) -> Result<File, AgentsError> {
    let error = |message: String| AgentsError {
        file: file.to_string(),
        message,
    };
    let f: File = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| format!("line {}: ", text[..s.start].matches('\n').count() + 1))
            .unwrap_or_default();
        error(format!("{at}{}", e.message().lines().next().unwrap_or("")))
    })?;
    check_name("version", &f.version, 32).map_err(error)?;
    if !f
        .version
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(error(format!(
            "version {:?}: letters, digits, '.', '_' and '-' only",
            f.version
        )));
    }
    for (i, row) in f.agents.iter().enumerate() {
        let at = |m: String| error(format!("agents[{i}] ({}): {m}", row.agent.escape_debug()));
        check_name("agent", &row.agent, MAX_NAME).map_err(at)?;
        check_name("operator", &row.operator, MAX_NAME).map_err(at)?;
        if row.patterns.is_empty() {
            return Err(at("patterns: none given".into()));
        }
        for p in &row.patterns {
            check_pattern(p).map_err(at)?;
        }
    }
    for (i, r) in f.referrers.iter().enumerate() {
        let at = |m: String| {
            error(format!(
                "referrers[{i}] ({}): {m}",
                r.operator.escape_debug()
            ))
        };
        check_name("operator", &r.operator, MAX_NAME).map_err(at)?;
        if r.hosts.is_empty() {
            return Err(at("hosts: none given".into()));
        }
        for h in &r.hosts {
            if h.len() < 4
                || !h.contains('.')
                || !h
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.".contains(c))
            {
                return Err(at(format!(
                    "host {:?}: a host name such as chatgpt.com",
                    h.escape_debug().to_string()
                )));
            }
        }
    }
    for p in f
        .generic
        .bots
        .iter()
        .chain(&f.generic.programs)
        .chain(&f.generic.browsers)
    {
        check_pattern(p).map_err(|m| error(format!("generic: {m}")))?;
    }
    Ok(f)
}

fn check_name(what: &str, s: &str, max: usize) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if s.chars().count() > max || s.chars().any(char::is_control) {
        return Err(format!(
            "{what} {:?}: at most {max} characters of one line",
            s.escape_debug().to_string()
        ));
    }
    Ok(())
}

/// A pattern of fewer than three characters would match nearly every user agent.
fn check_pattern(p: &str) -> Result<(), String> {
    if p.chars().count() < 3 || p.chars().any(char::is_control) {
        return Err(format!(
            "pattern {:?}: at least three characters of one line",
            p.escape_debug().to_string()
        ));
    }
    Ok(())
}

/// The name of a program docpipe cannot name: the product token of its user agent that holds
/// `word` (the generic pattern it matched), else its first, without its version; a link or the
/// `Mozilla/5.0 (compatible; ...)` preamble never names it.
fn product(user_agent: &str, word: Option<&str>) -> String {
    let tokens: Vec<&str> = user_agent
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '(' | ')' | ','))
        .filter(|t| {
            let l = t.to_ascii_lowercase();
            !t.is_empty()
                && !t.starts_with('+')
                && !l.starts_with("http")
                && !l.starts_with("mozilla/")
                && l != "compatible"
        })
        .collect();
    let holds =
        |t: &str| word.is_some_and(|w| t.to_ascii_lowercase().contains(&w.to_ascii_lowercase()));
    let token = tokens
        .iter()
        .find(|t| holds(t))
        .or(tokens.first())
        .map_or("", |t| t.split('/').next().unwrap_or(t));
    let name: String = token
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME)
        .collect();
    if name.is_empty() {
        "(no user agent)".to_string()
    } else {
        name
    }
}

/// What a read of `path` by `event` is of: `llms.txt`, Markdown, the MCP server, the site's
/// plumbing, or an HTML page.
pub fn surface(event: &str, path: &str) -> Surface {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let lower = path.to_ascii_lowercase();
    let file = lower.rsplit('/').next().unwrap_or(&lower);
    if file == "llms.txt" || file == "llms-full.txt" {
        return Surface::LlmsTxt;
    }
    if event == "docs.content.md.view" || file.ends_with(".md") {
        return Surface::Markdown;
    }
    if event.starts_with("docs.mcp.") || lower == "/mcp" || lower.starts_with("/mcp/") {
        return Surface::Mcp;
    }
    const PLUMBING: [&str; 13] = [
        ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".css", ".js", ".woff", ".woff2",
        ".ttf", ".map",
    ];
    if file == "robots.txt"
        || (file.starts_with("sitemap") && file.ends_with(".xml"))
        || lower.starts_with("/_next/")
        || lower.starts_with("/_mintlify/")
        || PLUMBING.iter().any(|ext| file.ends_with(ext))
    {
        return Surface::Infrastructure;
    }
    Surface::Html
}

#[cfg(test)]
mod tests;
