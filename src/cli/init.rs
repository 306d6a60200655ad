//! `docpipe init`: a first config for a real account, and a `jobs/` folder with one rule.

use crate::error::UserError;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

/// The service's address (the OpenAPI files' server).
pub const SERVICE_URL: &str = "https://api.mintlify.com";

/// Write a first config (the path of --config, `docpipe.toml` by default) for your organization
/// and projects, with comments, and a `jobs/` folder beside it holding one example rule; then
/// say the next commands. What a flag does not give is asked on a terminal. No key is ever
/// written: the config names the environment variables that hold them.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Your organization's id (the dashboard's URL: app.mintlify.com/<organization>/...).
    #[arg(long)]
    pub org: Option<String>,
    /// A project to export (repeatable; its id as in the dashboard and the analytics URLs).
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// The environment variable that will hold the organization's admin key (default
    /// `DOCPIPE_<ORG>_ADMIN_KEY`).
    #[arg(long)]
    pub key_env: Option<String>,
    /// The output folder (relative paths are relative to the config's folder).
    #[arg(long, default_value = "docpipe-data")]
    pub output_dir: String,
    /// The service's address.
    #[arg(long, default_value = SERVICE_URL)]
    pub base_url: String,
    /// Overwrite an existing config.
    #[arg(long)]
    pub force: bool,
}

/// An id as the config takes it (and, for `init`, at most 100 characters).
fn check_id(what: &str, id: &str) -> Result<(), UserError> {
    if crate::config::valid_id(id) && id.len() <= 100 {
        Ok(())
    } else {
        Err(UserError::new(format!(
            "{what} {id:?} is not an id (letters, digits, '-', '_' and '.')"
        )))
    }
}

/// An environment variable's name.
fn check_env(name: &str) -> Result<(), UserError> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(UserError::new(format!(
            "--key-env {name:?} is not an environment variable name (A-Z, 0-9, _)"
        )))
    }
}

/// Asks on the terminal (`None` off one).
fn ask(question: &str) -> Option<String> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    crate::out!("{question}: ");
    std::io::stdout().flush().ok()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(line.trim().to_string())
}

/// The config's text.
pub fn config_text(org: &str, projects: &[String], key_env: &str, a: &Args) -> String {
    let mut out = format!(
        "# docpipe config written by `docpipe init`. The keys are never in this file: export them in\n\
         # the environment variables named below (the dashboard's Settings > API keys: an admin key,\n\
         # `mint_...`). Paths are relative to this file's folder.\n\
         \n\
         [service]\n\
         base_url = {:?}\n\
         \n\
         [[organizations]]\n\
         id = {org:?}\n\
         admin_key_env = {key_env:?}\n\
         # Or a file only you may read (chmod 600), read again at every run: the service's keys\n\
         # expire after 90 days by default, and a new key in the file needs no restart.\n\
         # admin_key_file = \"/etc/docpipe/{org}-admin.key\"\n\
         # The service allows 100 analytics requests an hour per organization; docpipe keeps 5% for\n\
         # other tools. A first load of every dataset of a project takes hours: queue it for the\n\
         # daemon (`docpipe backfill --queue`), which spreads it over the hours.\n\
         analytics_per_hour = 100\n\
         # For `docpipe ask` (the assistant): its key's variable and your domain.\n\
         # assistant_key_env = \"DOCPIPE_{}_ASSISTANT_KEY\"\n\
         # assistant_domain = {org:?}\n",
        a.base_url,
        env_word(org)
    );
    for p in projects {
        out += &format!(
            "\n[[projects]]\nid = {p:?}\norganization = {org:?}\n\
             # start_date = \"2026-01-01\"   # the first day to export (default: the last 30 days)\n\
             # datasets = {datasets:?}\n",
            datasets = crate::dataset::default_names()
        );
    }
    out += &format!(
        "\n[export]\noutput_dir = {:?}   # or s3://bucket/prefix (then state_dir = a local folder)\n\
         # timezone = \"UTC\"   # whose days the partitions are\n\
         \n[rules]\ndir = \"jobs\"\n\
         \n# The daemon's alerts (a key refused, a project unknown, stale data, a window or rule that\n\
         # keeps failing) as JSON POSTs to a chat webhook whose URL is in this variable:\n\
         # [alerts]\n\
         # webhook_url_env = \"DOCPIPE_ALERT_WEBHOOK\"\n",
        a.output_dir
    );
    out
}

/// `ACME` of `acme`, for variable names.
fn env_word(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The example rule for `project`: the week's top search gaps to a new agent job, previewed
/// (its `enabled = true` commented out): nothing acts before a person turns it on.
pub fn example_rule(project: &str) -> String {
    include_str!("../../jobs/search-gaps.toml")
        .replace("project = \"acme-docs\"", &format!("project = {project:?}"))
        .replace(
            "\nenabled = true\n",
            "\n# enabled = true   # uncomment once `docpipe rules check` shows what you want sent\n",
        )
}

/// Runs `init`, writing the config at `path`.
pub fn run(args: Args, path: &Path) -> anyhow::Result<()> {
    if path.exists() && !args.force {
        return Err(UserError::new(format!(
            "{} exists: pass --force to overwrite it, or --config another path",
            path.display()
        ))
        .into());
    }
    let org = match args.org.clone().or_else(|| ask("organization id")) {
        Some(o) => o,
        None => return Err(UserError::new("init needs --org (or a terminal to ask)").into()),
    };
    check_id("organization", &org)?;
    let mut projects = args.projects.clone();
    if projects.is_empty()
        && let Some(line) = ask("project ids (separated by spaces)")
    {
        projects = line.split_whitespace().map(str::to_string).collect();
    }
    if projects.is_empty() {
        return Err(UserError::new("init needs --project (or a terminal to ask)").into());
    }
    for p in &projects {
        check_id("project", p)?;
    }
    let key_env = args
        .key_env
        .clone()
        .unwrap_or_else(|| format!("DOCPIPE_{}_ADMIN_KEY", env_word(&org)));
    check_env(&key_env)?;
    let text = config_text(&org, &projects, &key_env, &args);
    // The file is checked as docpipe will read it before anything is written.
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| UserError::new(format!("cannot create {}: {e}", dir.display())))?;
    let tmp = dir.join(".docpipe-init.toml.tmp");
    std::fs::write(&tmp, &text)
        .map_err(|e| UserError::new(format!("cannot write in {}: {e}", dir.display())))?;
    if let Err(e) = crate::config::Settings::load(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(UserError::new(format!("the config would not load: {e}")).into());
    }
    std::fs::rename(&tmp, path)
        .map_err(|e| UserError::new(format!("cannot write {}: {e}", path.display())))?;
    let jobs = path.with_file_name("jobs");
    let rule = jobs.join("search-gaps.toml");
    let wrote_rule = if rule.exists() {
        false
    } else {
        std::fs::create_dir_all(&jobs)
            .and_then(|()| std::fs::write(&rule, example_rule(&projects[0])))
            .map_err(|e| UserError::new(format!("cannot write {}: {e}", rule.display())))?;
        true
    };
    crate::outln!("wrote {}", path.display());
    if wrote_rule {
        crate::outln!(
            "wrote {} (an example rule: the week's top search gaps of {} go to a new agent job; previewed: it sends nothing until you uncomment `enabled = true` in it, after `docpipe rules check` shows what it would send; once enabled, each firing that holds readers' words waits for your review: `docpipe rules pending`)",
            rule.display(),
            projects[0]
        );
    }
    let config = if path == Path::new("docpipe.toml") {
        String::new()
    } else {
        format!(" --config {}", path.display())
    };
    crate::outln!(
        "\nnext:\n  export {key_env}=mint_...        # the admin key (dashboard: Settings > API keys)\n  \
         docpipe{config} check                # one request per dataset: proves the keys and ids\n  \
         docpipe{config} backfill --from <first day> --queue   # the first load, for the daemon\n  \
         docpipe{config} run                  # the daemon: exports every hour, drains the queue, fires the rules\n  \
         docpipe{config} rules check          # what each rule would send; enabled = true in its file sends it\n  \
         docpipe{config} rules pending        # firings that hold readers' words wait here for you: approve or reject"
    );
    Ok(())
}
