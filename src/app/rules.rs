//! The rules steps: load a folder, evaluate every rule over the trend tables, fire them.

use crate::config::Settings;
use crate::error::UserError;
use crate::rules::engine::{Engine, LogError, Report};
use crate::rules::{Evaluation, Rule, evaluate, load_dir};
use crate::store::StoreError;
use crate::trends::{Selection, Tables, TrendsError, compute, empty_tables};
use std::path::{Path, PathBuf};

/// The rules of a folder, and the problems found so far (one line each, naming the file).
#[derive(Debug)]
pub struct Loaded {
    /// Valid rules (the selected ones).
    pub rules: Vec<Rule>,
    /// Problems.
    pub problems: Vec<String>,
}

/// Loads the rules of `dir`, keeping the named ones (all when `names` is empty); each rule
/// knows its project's own domains, and a rule file that does not say `enabled` is announced
/// once (it is previewed).
pub fn load(dir: &Path, settings: &Settings, names: &[String]) -> Result<Loaded, UserError> {
    let projects = settings.project_ids();
    if !dir.is_dir() {
        return Err(UserError::new(format!(
            "rules folder {} does not exist (set [rules] dir in the config, or pass --dir)",
            dir.display()
        )));
    }
    let (mut rules, problems) = load_dir(dir, &projects).map_err(UserError::from_source)?;
    with_settings(&mut rules, settings);
    for n in names {
        if !rules.iter().any(|r| &r.name == n) && problems.is_empty() {
            let known: Vec<_> = rules.iter().map(|r| r.name.as_str()).collect();
            return Err(UserError::new(format!(
                "no rule named {n} in {} (rules: {})",
                dir.display(),
                known.join(", ")
            )));
        }
    }
    Ok(Loaded {
        rules: rules
            .into_iter()
            .filter(|r| names.is_empty() || names.contains(&r.name))
            .collect(),
        problems: problems.iter().map(ToString::to_string).collect(),
    })
}

/// Whether this process has not yet said anything of `file` (the status page loads the rules
/// on every request: its line comes once).
fn first_time(file: &str) -> bool {
    static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    SAID.lock()
        .map(|mut said| said.insert(file.to_string()))
        .unwrap_or(true)
}

/// Gives each rule its project's own domains, and says once per rule file without `enabled`
/// (once a process) that it is previewed.
pub fn with_settings(rules: &mut [Rule], settings: &Settings) {
    for r in rules.iter_mut() {
        if let Some(p) = settings.projects.iter().find(|p| p.id == r.project) {
            r.domains = p.domains.clone();
        }
        if !r.enabled_given && first_time(&r.file) {
            tracing::info!(
                "rule {} ({}) does not say `enabled`: it is previewed and sends nothing until the file says enabled = true (rule files of earlier docpipes sent without it)",
                r.name,
                r.file
            );
        }
    }
}

/// The trend tables of the output folder, and whether anything was exported; empty tables
/// (real columns, no rows) when nothing was, so that the queries can still be checked.
pub fn tables(out: &Path) -> Result<(Tables, bool), TrendsError> {
    match compute(out, &Selection::default()) {
        Ok(t) => Ok((t, true)),
        Err(TrendsError::NoData(_)) => Ok((empty_tables()?, false)),
        Err(e) => Err(e),
    }
}

/// Evaluates every rule (with the ledger's memory of the keys sent, when given): any problem,
/// in a file or in an evaluation, stops everything before anything is sent, with one line per
/// problem.
pub fn evaluate_all(
    loaded: &Loaded,
    tables: &Tables,
    memory: Option<crate::rules::Memory<'_>>,
) -> Result<Vec<Evaluation>, UserError> {
    let mut evals = Vec::new();
    let mut problems = loaded.problems.clone();
    for r in evaluate(&loaded.rules, tables, memory) {
        match r {
            Ok(e) => evals.push(e),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if problems.is_empty() {
        Ok(evals)
    } else {
        Err(UserError::new(problems.join("\n")))
    }
}

/// Evaluates every rule for sending: a file that does not load stops everything before
/// anything is sent (one line per problem), but a rule whose evaluation fails on the data (a
/// query that fails, a prompt too large) fails alone, reported as broken by [`fire_all`], and
/// the others go on.
pub fn evaluate_each(
    loaded: &Loaded,
    tables: &Tables,
    memory: Option<crate::rules::Memory<'_>>,
) -> Result<Vec<Result<Evaluation, crate::rules::RuleError>>, UserError> {
    if !loaded.problems.is_empty() {
        // Every problem at once, the files' and the evaluations': this is an error.
        evaluate_all(loaded, tables, memory)?;
    }
    Ok(evaluate(&loaded.rules, tables, memory))
}

/// Whether firing waits for the jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Each rule that says `wait` polls its job until it ends, all at once (the command line).
    AsRulesSay,
    /// Nothing waits: the jobs are polled by [`Engine::poll_step`] (the daemon).
    Never,
}

/// What firing a set of rules did.
#[derive(Debug, Default)]
pub struct Fired {
    /// One report per rule, in order.
    pub reports: Vec<Report>,
    /// The outcome log's files, rewritten when something fired.
    pub log: Vec<PathBuf>,
    /// What the impact measurement did after the firings.
    pub impact: crate::rules::impact::Measured,
    /// The questions asked again of the assistant after the firings.
    pub reasked: crate::rules::engine::Reasked,
    /// Held firings that expired unreviewed before the rules ran (nothing was sent).
    pub expired: Vec<i64>,
    /// Firings waiting for review after the run.
    pub pending: usize,
}

/// Fires each evaluated rule in order (an evaluation that failed is reported as broken), then
/// rewrites the outcome log when anything fired.
pub async fn fire_all(
    engine: &Engine,
    rules: &[Rule],
    evals: Vec<Result<Evaluation, crate::rules::RuleError>>,
    wait: Wait,
) -> Result<Fired, FireError> {
    let expired = engine.expire_reviews()?;
    let mut reports = Vec::new();
    for (rule, eval) in rules.iter().zip(evals) {
        reports.push(match eval {
            Ok(e) => engine.fire_nowait(rule, &e).await?,
            Err(e) => Report::Broken(e),
        });
    }
    if wait == Wait::AsRulesSay {
        let mut fired: Vec<_> = rules.iter().zip(reports.iter_mut()).collect();
        engine.wait_for(&mut fired).await?;
    }
    for (rule, report) in rules.iter().zip(&reports) {
        let run = report.run(rule, engine.now());
        engine.ledger().receive(&crate::events::Event::RuleRan {
            rule: &run.rule,
            project: &run.project,
            at: run.at,
            outcome: run.outcome,
            rows: run.rows,
            line: &run.line,
        });
    }
    let log = if !expired.is_empty()
        || reports
            .iter()
            .any(|r| matches!(r, Report::Fired(_) | Report::Held(_)))
    {
        engine.write_log()?
    } else {
        Vec::new()
    };
    let impact = engine.measure_impact()?;
    let reasked = engine.reask(rules).await?;
    let pending = engine.ledger().pending()?.len();
    Ok(Fired {
        reports,
        log,
        impact,
        reasked,
        expired,
        pending,
    })
}

/// Errors of firing.
#[derive(Debug, thiserror::Error)]
pub enum FireError {
    /// The ledger.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The outcome log.
    #[error("cannot write the outcome log: {0}")]
    Log(#[from] LogError),
    /// Measuring the impact.
    #[error("cannot measure the impact of the agent jobs: {0}")]
    Impact(#[from] crate::rules::impact::ImpactError),
}
