//! What the in-process tests and the scenarios of `rules` share.

use crate::common::*;
use docpipe::api::budget::Budget;
use docpipe::api::{Client, ClientSettings, Limits};
use docpipe::rules::Rule;
use docpipe::rules::engine::Engine;
use docpipe::store::SqliteBudget;
use docpipe::store::state_path;
use docpipe::trends::Tables;
use std::collections::HashMap;
use std::sync::Arc;

pub const PROJECTS: [&str; 3] = ["alpha", "beta", "gamma"];

/// An enabled rule; `review = "never"` unless `extra` says: these tests are of the sending (a
/// prompt of paths holds readers' words, which the default review holds; review.rs tests it).
pub fn rule(
    name: &str,
    project: &str,
    target: &str,
    when: &str,
    prompt: &str,
    extra: &str,
) -> Rule {
    let review = if extra.contains("review") {
        ""
    } else {
        "review = \"never\"\n"
    };
    let text = format!(
        "enabled = true\nname = {name:?}\nproject = {project:?}\n{target}\nwhen = {when:?}\nprompt = {prompt:?}\n{review}{extra}\n"
    );
    let projects: Vec<String> = PROJECTS.iter().map(|p| p.to_string()).collect();
    Rule::parse(&text, &format!("jobs/{name}.toml"), &projects).unwrap()
}

/// The top pages of the last 7 days: a query with a known answer.
pub const TOP3: &str = "SELECT path, total_7d FROM pages ORDER BY total_7d DESC, path LIMIT 3";

pub const TOP3_PROMPT: &str =
    "Top pages:{% for r in rows %} {{ r.path }}={{ r.total_7d }}{% endfor %}";

/// The same prompt, from the emulator's truth: 7 days to "today" (2026-03-15).
pub fn top3_from_truth(live: &Live, project: &str) -> String {
    let rows = live
        .emu()
        .truth(project, day("2026-03-09"), day("2026-03-16"))
        .unwrap();
    let mut totals: Vec<(u64, String)> = rows
        .iter()
        .map(|r| (r.human + r.ai, r.path.clone()))
        .collect();
    totals.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    // Paths are readers' words: quoted, after docpipe's block.
    let mut out = format!("{}Top pages:", docpipe::rules::readers::PREAMBLE);
    for (t, p) in totals.iter().take(3) {
        out.push_str(&format!(" {}={t}", docpipe::rules::readers::quote(p)));
    }
    out
}

pub struct Setup {
    pub live: Live,
    pub _dir: tempfile::TempDir,
    pub out: std::path::PathBuf,
    pub tables: Tables,
}

/// A folder with `out/`: the test projects exported from 2026-03-01 to "today" (03-15).
pub async fn two_weeks_exported(live: &Live) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    exported(
        live,
        &dir.path().join("out"),
        &[("2026-03-01", "2026-03-15")],
    )
    .await;
    dir
}

/// An engine over the output folder, sending through a client of org-a with `settings`.
pub fn engine_with(s: &Setup, agent_per_hour: u32, settings: Option<ClientSettings>) -> Engine {
    let budget: Arc<dyn Budget> = Arc::new(SqliteBudget::open(&state_path(&s.out)).unwrap());
    let limits = Limits {
        agent_per_hour,
        ..open_limits()
    };
    let mut client = s
        .live
        .client_sharing(Some(ADMIN_A), None, limits, budget.clone());
    if let Some(settings) = settings {
        client = Client::new(
            settings,
            "org-a",
            Some(docpipe::api::AdminKey::parse(ADMIN_A, "mint", "t").unwrap()),
            None,
            s.live.clock.clone(),
            budget.clone(),
        );
    }
    let clients: HashMap<String, Client> = ["alpha", "beta"]
        .iter()
        .map(|p| (p.to_string(), client.clone()))
        .collect();
    let limits = ["alpha", "beta"]
        .iter()
        .map(|p| (p.to_string(), agent_per_hour))
        .collect();
    Engine::open(&s.out, budget, limits, s.live.clock.clone())
        .unwrap()
        .with_clients(clients)
}

pub fn engine(s: &Setup) -> Engine {
    engine_with(s, 100, None)
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
