//! `docpipe check`: the fewest requests that prove a set-up works against the real service.

use crate::api::assistant::{AskRequest, Message};
use crate::api::{ApiError, Client, ErrorKind};
use crate::app::{Access, Context};
use crate::calendar::{Part, Window};
use crate::config::Settings;
use crate::dataset::probe;
use crate::error::UserError;
use crate::rules::Action;
use std::collections::{BTreeMap, BTreeSet};

mod halves;

/// Prove the set-up with the fewest requests: for each configured project, one request per
/// dataset it exports (yesterday's first page), one read of each agent job a rule names, and
/// one question to each assistant only with --assistant. Says first how many requests of the
/// hour's budget it will use, then prints project, dataset, and `works` or the exact problem.
/// Exit code 0 when everything works, 2 when something does not.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these projects (repeatable; default: all configured).
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// The day to ask for (default: yesterday, in the config's time zone).
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub day: Option<chrono::NaiveDate>,
    /// Say what would be sent, and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also ask each organization's assistant one question (its `assistant_domain`, with its
    /// assistant key): one request of the assistant's own limit each.
    #[arg(long)]
    pub assistant: bool,
    /// Write every response into DIR, one file per response, keys removed (`docpipe emulate
    /// --replay DIR` serves them): what a bug report attaches.
    #[arg(long, value_name = "DIR")]
    pub record: Option<std::path::PathBuf>,
    /// Also learn whether the service filters by the instants asked for, which the days of a
    /// timezone other than UTC depend on: for one offset-paged and one cursor-paged dataset
    /// per organization, the day whole and in its two halves (3 analytics requests each,
    /// announced first). The state remembers the answer; `status` shows it.
    #[arg(long)]
    pub deep: bool,
    /// Check the `[[streams]]` instead: each one's objects counted and the newest read (what
    /// it holds, the agents seen), nothing written or marked read, no request to the API.
    #[arg(long)]
    pub stream: bool,
}

/// What one line of the table proves.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Probe {
    /// Yesterday's first page of a dataset of a project.
    Dataset {
        project: String,
        dataset: &'static str,
    },
    /// One thread of yesterday's assistant turns (sent only when there is one).
    Thread { project: String },
    /// The agent job a rule follows up.
    Job { project: String, job: String },
    /// An automation a rule triggers: nothing is sent (no operation reads an automation, and a
    /// trigger starts a run), so check says it cannot tell.
    Automation { project: String, automation: String },
    /// Whether the organization's admin key may write agent jobs: a follow-up to a job that
    /// cannot exist (404: it may; 401 or 403: it may not).
    Write { org: String, project: String },
    /// One question to an organization's assistant.
    Assistant { org: String, domain: String },
    /// A rule file that does not load (nothing to send).
    RuleFile(String),
    /// The day of a dataset against its two halves (`--deep`).
    Halves {
        org: String,
        project: String,
        dataset: &'static str,
    },
    /// `--deep` for an organization none of whose projects exports a dataset it compares.
    NoHalves { org: String },
}

/// The requests a check sent, by kind: `14 requests sent: 12 analytics, 2 agent-job`.
fn sent_line(sent: &BTreeMap<&'static str, u64>) -> String {
    let all: u64 = sent.values().sum();
    let kinds: Vec<String> = ["analytics", "agent-job", "assistant"]
        .iter()
        .filter_map(|k| sent.get(k).filter(|n| **n > 0).map(|n| format!("{n} {k}")))
        .collect();
    format!("{all} requests sent: {}", kinds.join(", "))
}

impl Probe {
    /// The requests it is sure to send (a thread's depends on the day's turns).
    fn requests(&self) -> usize {
        match self {
            Probe::Halves { .. } => halves::REQUESTS,
            Probe::Thread { .. }
            | Probe::RuleFile(_)
            | Probe::NoHalves { .. }
            | Probe::Automation { .. } => 0,
            _ => 1,
        }
    }

    /// The kind of requests it sends, as the summary counts them.
    fn kind(&self) -> &'static str {
        match self {
            Probe::Job { .. } | Probe::Write { .. } => "agent-job",
            Probe::Assistant { .. } => "assistant",
            _ => "analytics",
        }
    }

    fn columns(&self) -> (String, String) {
        match self {
            Probe::Dataset { project, dataset } => (project.clone(), dataset.to_string()),
            Probe::Thread { project } => (project.clone(), probe::threads().to_string()),
            Probe::Job { project, job } => (project.clone(), format!("job {job}")),
            Probe::Automation {
                project,
                automation,
            } => (project.clone(), format!("automation {automation}")),
            Probe::Write { project, .. } => (project.clone(), "agent jobs (write)".into()),
            Probe::Assistant { org, domain } => (org.clone(), format!("assistant {domain}")),
            Probe::RuleFile(_) => ("-".into(), "rules".into()),
            Probe::Halves {
                project, dataset, ..
            } => (project.clone(), format!("{dataset} (halves)")),
            Probe::NoHalves { org } => (org.clone(), "instants (--deep)".into()),
        }
    }
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    /// It works; what it saw.
    Works(String),
    /// It works for this config, with something to know.
    Note(String),
    /// The exact problem.
    Problem(String),
    /// Not sent, and why (not a problem of its own).
    NotSent(String),
}

/// The probes of `projects` (all when empty), in the order they are sent.
fn probes(
    settings: &Settings,
    projects: &[String],
    assistant: bool,
    deep: bool,
) -> Result<Vec<Probe>, UserError> {
    for p in projects {
        crate::app::configured(settings, p)?;
    }
    let selected: Vec<&crate::config::Project> = settings
        .projects
        .iter()
        .filter(|p| projects.is_empty() || projects.contains(&p.id))
        .collect();
    let mut out = Vec::new();
    for p in &selected {
        let mut datasets = p.datasets.clone();
        datasets.sort_by_key(|d| crate::dataset::order(d));
        for d in datasets {
            out.push(if probe::reads_threads(d) {
                Probe::Thread {
                    project: p.id.clone(),
                }
            } else {
                Probe::Dataset {
                    project: p.id.clone(),
                    dataset: d,
                }
            });
        }
    }
    if deep {
        out.extend(deep_probes(&selected));
    }
    if settings.rules_dir.is_dir() {
        let loaded = crate::app::rules::load(&settings.rules_dir, settings, &[])?;
        // A rule file's problem is the set-up's too; the service is checked all the same.
        out.extend(loaded.problems.into_iter().map(Probe::RuleFile));
        out.extend(rule_probes(&loaded.rules, &selected));
    }
    if assistant {
        let orgs: BTreeSet<&str> = selected.iter().map(|p| p.organization.as_str()).collect();
        for org in &settings.organizations {
            if let (true, Some(domain)) = (orgs.contains(org.id.as_str()), &org.assistant_domain) {
                out.push(Probe::Assistant {
                    org: org.id.clone(),
                    domain: domain.clone(),
                });
            }
        }
        if !out.iter().any(|p| matches!(p, Probe::Assistant { .. })) {
            return Err(UserError::new(
                "--assistant: no organization of these projects has an assistant_domain",
            ));
        }
    }
    Ok(out)
}

/// The probes of the rules' targets on `selected`: each job a rule follows up, each automation
/// a rule triggers, one write probe per organization a rule acts for.
fn rule_probes(rules: &[crate::rules::Rule], selected: &[&crate::config::Project]) -> Vec<Probe> {
    let mut out = Vec::new();
    let acted: BTreeSet<(bool, String, String)> = rules
        .iter()
        .filter(|r| selected.iter().any(|p| p.id == r.project))
        .filter_map(|r| match &r.action {
            Action::FollowUp(job) => Some((false, r.project.clone(), job.clone())),
            Action::Trigger(a) => Some((true, r.project.clone(), a.clone())),
            Action::Create => None,
        })
        .collect();
    out.extend(acted.into_iter().map(|(trigger, project, id)| {
        if trigger {
            Probe::Automation {
                project,
                automation: id,
            }
        } else {
            Probe::Job { project, job: id }
        }
    }));
    // One write probe per organization a rule would act for, on the first such project.
    let mut orgs: BTreeSet<&str> = BTreeSet::new();
    for r in rules {
        let Some(p) = selected.iter().find(|p| p.id == r.project) else {
            continue;
        };
        if orgs.insert(p.organization.as_str()) {
            out.push(Probe::Write {
                org: p.organization.clone(),
                project: p.id.clone(),
            });
        }
    }
    out
}

/// The probes of `--deep`: for each organization of `selected`, the datasets whose day is
/// compared with its halves.
fn deep_probes(selected: &[&crate::config::Project]) -> Vec<Probe> {
    let orgs: BTreeSet<&str> = selected.iter().map(|p| p.organization.as_str()).collect();
    let mut out = Vec::new();
    for org in orgs {
        let picks = halves::picks(selected, org);
        if picks.is_empty() {
            out.push(Probe::NoHalves { org: org.into() });
        }
        out.extend(picks.into_iter().map(|(project, dataset)| Probe::Halves {
            org: org.into(),
            project,
            dataset,
        }));
    }
    out
}

/// Names as a choice: `a`, `a or b`, `a, b or c`.
pub fn any_of(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The organization of a probe.
fn org_of<'s>(settings: &'s Settings, probe: &Probe) -> &'s str {
    let project = match probe {
        Probe::Dataset { project, .. }
        | Probe::Thread { project }
        | Probe::Job { project, .. }
        | Probe::Automation { project, .. }
        | Probe::Write { project, .. } => project,
        Probe::Assistant { org, .. } | Probe::Halves { org, .. } | Probe::NoHalves { org } => {
            return settings.organization(org).map_or("", |o| &o.id);
        }
        Probe::RuleFile(_) => return "",
    };
    settings
        .projects
        .iter()
        .find(|p| &p.id == project)
        .map_or("", |p| p.organization.as_str())
}

/// The announcement: how many requests, of which budget; or why they do not fit this hour's.
fn announce(
    settings: &Settings,
    ctx: &Context,
    probes: &[Probe],
    day: chrono::NaiveDate,
) -> anyhow::Result<String> {
    let now = ctx.clock.now();
    let mut parts = Vec::new();
    for org in &settings.organizations {
        let n: usize = probes
            .iter()
            .filter(|p| p.kind() == "analytics" && org_of(settings, p) == org.id)
            .map(Probe::requests)
            .sum();
        if n == 0 {
            continue;
        }
        let Some(client) = ctx.client(&org.id) else {
            continue;
        };
        let limits = client.settings().limits;
        let budget = crate::planner::Room::analytics(&limits, ctx.budget().as_ref(), &org.id, now);
        let (used, room) = (budget.used, budget.left() as usize);
        if n > room {
            anyhow::bail!(
                "check needs {n} analytics requests of organization {}, and only {room} are left of this hour's budget: run it again later (`docpipe status` shows the budget)",
                org.id
            );
        }
        parts.push(format!(
            "{} {n} of the {} analytics requests docpipe takes of its hour's {} ({used} used in the last hour)",
            org.id,
            budget.limit,
            limits.analytics_per_hour
        ));
    }
    let count = |f: fn(&Probe) -> bool| probes.iter().filter(|p| f(p)).count();
    let threads = count(|p| matches!(p, Probe::Thread { .. }));
    if threads > 0 {
        parts.push(format!(
            "up to {threads} more for a thread of the day's assistant turns"
        ));
    }
    let jobs = count(|p| matches!(p, Probe::Job { .. }));
    if jobs > 0 {
        parts.push(plural(jobs, "agent-job read"));
    }
    let writes = count(|p| matches!(p, Probe::Write { .. }));
    if writes > 0 {
        parts.push(format!(
            "{} (a follow-up to a job that cannot exist: 404 means the key may write; one of the project's {} agent uses an hour)",
            plural(writes, "agent-job write probe"),
            crate::api::service_limits::agent()
        ));
    }
    let asks = count(|p| matches!(p, Probe::Assistant { .. }));
    if asks > 0 {
        parts.push(plural(asks, "assistant question"));
    }
    let halves = count(|p| matches!(p, Probe::Halves { .. }));
    if halves > 0 {
        parts.push(format!(
            "--deep: {} of them for {} (the day whole and in its two halves, to learn whether the service filters by the instants asked for)",
            halves * halves::REQUESTS,
            plural(halves, "dataset")
        ));
    }
    let sure: usize = probes.iter().map(Probe::requests).sum();
    Ok(format!(
        "check: {sure} requests for {day}: {}",
        parts.join("; ")
    ))
}

/// The problem an error shows: a response of another shape says so, the rest in their words.
fn problem(e: &ApiError) -> String {
    match &e.kind {
        ErrorKind::Malformed(m) | ErrorKind::Paging(m) => format!("shape differs: {m}"),
        kind => kind.to_string(),
    }
}

/// Whether an error stops the rest of an organization (its key) or of a project.
fn stops(e: &ApiError) -> Option<bool> {
    match e.kind {
        ErrorKind::BadKey { .. } => Some(true),
        ErrorKind::UnknownProject { .. } => Some(false),
        _ => None,
    }
}

/// Sends one probe (a thread needs the id `thread` of a turn).
#[expect(clippy::too_many_lines)]
async fn send(
    client: &Client,
    settings: &Settings,
    probe: &Probe,
    window: Window,
    thread: Option<&str>,
) -> Result<(Found, Learned), ApiError> {
    match probe {
        Probe::Dataset { project, dataset } => {
            let page = probe::first_page(client, dataset, project, window).await?;
            if let Some(m) = page.differs {
                return Ok((
                    Found::Problem(format!("shape differs: {m}")),
                    Learned::Nothing,
                ));
            }
            Ok((
                Found::Works(rows_seen(page.rows, page.more, window.from)),
                page.thread.map_or(Learned::Nothing, Learned::Thread),
            ))
        }
        Probe::Thread { project } => {
            let Some(thread) = thread else {
                return Ok((
                    Found::NotSent(format!(
                        "no assistant turn on {} to read the thread of",
                        window.from
                    )),
                    Learned::Nothing,
                ));
            };
            let page = crate::export::fetch_thread(client, project, thread).await?;
            Ok((
                Found::Works(format!("works: a thread of {} messages", page.rows.len())),
                Learned::Nothing,
            ))
        }
        Probe::Job { project, job } => {
            let j = client.get_job(project, job).await?;
            Ok((
                Found::Works(format!(
                    "works: job {}",
                    crate::text::one_line(j.status_str())
                )),
                Learned::Nothing,
            ))
        }
        Probe::Write { org, project } => {
            Ok((write_probe(client, org, project).await, Learned::Nothing))
        }
        Probe::RuleFile(problem) => Ok((Found::Problem(problem.clone()), Learned::Nothing)),
        Probe::Automation { .. } => Ok((
            Found::NotSent(
                "cannot tell without starting a run: the service has no operation that reads an automation; the first firing's answer says (400: not active or not a Custom schedule automation; 404: not in this project)".into(),
            ),
            Learned::Nothing,
        )),
        Probe::NoHalves { org } => Ok((
            Found::NotSent(format!(
                "no project of organization {org} exports {}, the datasets --deep compares",
                any_of(&crate::dataset::probe::HALVES.concat())
            )),
            Learned::Nothing,
        )),
        Probe::Halves {
            project, dataset, ..
        } => {
            let compared = halves::compare(client, project, dataset, window).await?;
            let found = match compared.adds_up() {
                Some(true) => Found::Works(format!(
                    "works: {} on {}: the service filters by the instants asked for",
                    compared.sum_line(),
                    window.from
                )),
                Some(false) if settings.timezone == chrono_tz::UTC => Found::Note(format!(
                    "{} on {}: {}",
                    compared.sum_line(),
                    window.from,
                    halves::meaning(settings)
                )),
                Some(false) => Found::Problem(format!(
                    "{} on {}: {}",
                    compared.sum_line(),
                    window.from,
                    halves::meaning(settings)
                )),
                None => Found::Note(compared.sum_line()),
            };
            Ok((found, Learned::Halves(compared)))
        }
        Probe::Assistant { org, domain } => {
            let org = settings
                .organization(org)
                .expect("a configured organization");
            let assistant = crate::app::assistant_client(settings, org, client.clock().clone())
                .map_err(|e| ApiError {
                    operation: crate::api::Operation::AssistantMessage,
                    target: format!("domain {domain}"),
                    kind: ErrorKind::NotSent {
                        message: e.to_string(),
                    },
                })?;
            let now = client.clock().now();
            let request = AskRequest {
                fp: "docpipe-check".into(),
                messages: vec![Message::user_at(
                    &format!("m{}", now.timestamp_millis()),
                    "What is this documentation about?",
                    now,
                )],
                thread_id: None,
                thread_key: None,
                retrieval_page_size: 1,
                current_path: None,
            };
            let mut answer = assistant.ask(domain, &request).await?;
            let mut chars = 0;
            while let Some(event) = answer.next().await {
                if let crate::api::stream::Event::Text { text } = event? {
                    chars += text.chars().count();
                }
            }
            Ok((
                Found::Works(format!("works: answered in {chars} characters")),
                Learned::Nothing,
            ))
        }
    }
}

/// What a probe learned that later ones, or the state, use.
#[derive(Debug)]
enum Learned {
    Nothing,
    /// The id of one of the day's assistant turns: the thread probe reads its thread.
    Thread(String),
    /// The day of a dataset and its halves.
    Halves(halves::Compared),
}

/// The job id the write probe follows up: no job of the service is named so.
pub const NO_SUCH_JOB: &str = "docpipe-check-no-such-job-0000";

/// Whether the admin key may write agent jobs, proved without creating anything: a follow-up
/// to a job that cannot exist. 404 reads as "may write" on the assumption that the service
/// checks the key's scope before it looks the job up (docs/service.md); 401 or 403 as "may
/// not". The answer is printed as the service gave it.
async fn write_probe(client: &Client, org: &str, project: &str) -> Found {
    let prompt = "docpipe check: this follow-up names a job that does not exist, to learn whether the key may write agent jobs; it changes nothing";
    match client.follow_up(project, NO_SUCH_JOB, prompt).await {
        Ok(_) => Found::Works(format!(
            "works: the admin key of organization {org} may write agent jobs (the service accepted a follow-up to job {NO_SUCH_JOB})"
        )),
        Err(e) => match &e.kind {
            ErrorKind::NotFound { message } | ErrorKind::UnknownProject { message, .. } => {
                Found::Works(format!(
                    "works: the admin key of organization {org} may write agent jobs (a follow-up to a job that cannot exist got 404: {})",
                    crate::text::one_line(message)
                ))
            }
            ErrorKind::Forbidden { message } => Found::Problem(format!(
                "the admin key of organization {org} cannot write agent jobs (403: {}): the rules cannot create jobs or send follow-ups; use an admin key with write access",
                crate::text::one_line(message)
            )),
            ErrorKind::BadKey { message, .. } => Found::Problem(format!(
                "the admin key of organization {org} cannot write agent jobs ({}): the rules cannot create jobs or send follow-ups",
                crate::text::one_line(message)
            )),
            _ => Found::Problem(format!(
                "cannot tell whether the admin key of organization {org} may write agent jobs: {}",
                problem(&e)
            )),
        },
    }
}

/// `1 thing`, `2 things`.
fn plural(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

fn rows_seen(rows: usize, more: bool, day: chrono::NaiveDate) -> String {
    let rows = plural(rows, "row");
    if more {
        format!("works: {rows} on the first page of {day} (more on later pages)")
    } else {
        format!("works: {rows} on {day}")
    }
}

/// Runs `check`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    if args.stream {
        let ctx = crate::app::Context::open(
            settings.clone(),
            crate::clock::system(),
            Access::Shared,
            crate::app::Keys::None,
        )
        .await?;
        for line in crate::app::streams::check(&ctx).await? {
            crate::outln!("{line}");
        }
        return Ok(());
    }
    let probes = probes(settings, &args.projects, args.assistant, args.deep)?;
    let ctx = super::export::open(
        settings,
        &args.projects,
        args.record.as_deref(),
        Access::Shared,
    )
    .await?;
    let day = match args.day {
        Some(d) => {
            crate::config::check_day("--day", d).map_err(UserError::new)?;
            d
        }
        None => settings.today(ctx.clock.now()) - chrono::Duration::days(1),
    };
    crate::outln!("{}", announce(settings, &ctx, &probes, day)?);
    if args.dry_run {
        let rows: Vec<_> = probes
            .iter()
            .map(|p| {
                let (project, what) = p.columns();
                (project, what, Found::NotSent("dry run".into()))
            })
            .collect();
        crate::out!("{}", table(&rows));
        return Ok(());
    }
    let window = Window {
        from: day,
        to: day + chrono::Duration::days(1),
        tz: settings.timezone,
        part: Part::Whole,
    };
    // The context's settings: with the recorder of `--record`, which the assistant's client
    // records into too.
    let Sent {
        rows,
        sent,
        compared,
    } = send_all(&ctx.settings, &ctx, &probes, window).await;
    // The budget's leased slots not used are handed back: the hour counts what check sent.
    ctx.budget().release();
    crate::out!("{}", table(&rows));
    for line in halves::record(&ctx, &compared, day)? {
        crate::outln!("{line}");
    }
    for line in ctx.key_warnings()? {
        crate::outln!("{line}");
    }
    let problems = rows
        .iter()
        .filter(|(_, _, f)| matches!(f, Found::Problem(_)))
        .count();
    if problems > 0 {
        return Err(UserError::new(format!(
            "{problems} of {} checks found a problem ({})",
            rows.len(),
            sent_line(&sent)
        ))
        .into());
    }
    crate::outln!("all {} checks work ({})", rows.len(), sent_line(&sent));
    Ok(())
}

/// Sends every probe, in order: the rows of the table, and the requests sent. An
/// organization whose key was refused, a project the service does not know: the rest of
/// theirs is not sent.
async fn send_all(
    settings: &Settings,
    ctx: &crate::app::Context,
    probes: &[Probe],
    window: Window,
) -> Sent {
    let mut out = Sent::default();
    let (mut dead_orgs, mut dead_projects) = (BTreeSet::new(), BTreeSet::new());
    let mut threads: std::collections::BTreeMap<String, String> = Default::default();
    for p in probes {
        let (project, what) = p.columns();
        if let Probe::RuleFile(problem) = p {
            out.rows
                .push((project, what, Found::Problem(problem.clone())));
            continue;
        }
        let org = org_of(settings, p).to_string();
        let Some(client) = ctx.client(&org) else {
            out.rows.push((
                project,
                what,
                Found::Problem(format!("no organization {org} configured")),
            ));
            continue;
        };
        let found = if dead_orgs.contains(&org) {
            Found::NotSent(format!("the key of organization {org} was refused"))
        } else if dead_projects.contains(&project) {
            Found::NotSent("the project is unknown to the service".into())
        } else {
            let before = client.requests_sent();
            // Its analytics requests count in the state's hourly spend (the status page's
            // chart) as every run's do, under the purpose `check`, where the client sends them.
            let result = send(
                &client.for_purpose("check"),
                settings,
                p,
                window,
                threads.get(&project).map(String::as_str),
            )
            .await;
            let n = client.requests_sent() - before;
            *out.sent.entry(p.kind()).or_default() += n;
            match result {
                Ok((found, learned)) => {
                    match learned {
                        Learned::Thread(t) => {
                            threads.insert(project.clone(), t);
                        }
                        Learned::Halves(c) => out.compared.push((org.clone(), p.columns().1, c)),
                        Learned::Nothing => {}
                    }
                    found
                }
                Err(e) => {
                    match stops(&e) {
                        Some(true) => {
                            dead_orgs.insert(org.clone());
                        }
                        Some(false) => {
                            dead_projects.insert(project.clone());
                        }
                        None => {}
                    }
                    Found::Problem(problem(&e))
                }
            }
        };
        out.rows.push((project, what, found));
    }
    out
}

/// What [`send_all`] found.
#[derive(Debug, Default)]
struct Sent {
    /// The table's rows: project, what, what was found.
    rows: Vec<(String, String, Found)>,
    /// Requests sent, by kind.
    sent: BTreeMap<&'static str, u64>,
    /// The comparisons of `--deep`: organization, what was compared, what it counted.
    compared: Vec<(String, String, halves::Compared)>,
}

/// The table: project, dataset, result.
fn table(rows: &[(String, String, Found)]) -> String {
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(7);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(7);
    let mut out = format!("{:<w0$}  {:<w1$}  RESULT\n", "PROJECT", "DATASET");
    for (project, what, found) in rows {
        let result = match found {
            Found::Works(s) => s.clone(),
            Found::Note(s) => format!("NOTE: {s}"),
            Found::Problem(s) => format!("PROBLEM: {s}"),
            Found::NotSent(s) => format!("not sent: {s}"),
        };
        out.push_str(&format!("{project:<w0$}  {what:<w1$}  {result}\n"));
    }
    out
}
