//! The daemon's alerts: the problems a person has to act on, found in each run's report (a key
//! the service refuses, a project it does not know, a dataset stale beyond twice its
//! `[freshness]` target, a window that keeps failing, a rule that fails), each sent once to the
//! webhook `[alerts] webhook_url_env` names when it begins (at most one message per problem an
//! hour) and once when it ends. A webhook that fails is retried and logged, never fatal: the
//! work goes on.

use crate::app::Context;
use crate::app::cycle::{Report, RulesRun};
use crate::app::rules::Fired;
use crate::rules::Rule;
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Runs in a row a window fails before it is a problem.
pub const FAILING_RUNS: u32 = 3;

/// The least time between two messages of one problem.
const QUIET: chrono::Duration = chrono::Duration::hours(1);

/// What kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum What {
    /// The service refuses an organization's admin key.
    KeyRefused,
    /// The service does not know a project.
    ProjectUnknown,
    /// A dataset's newest data are older than twice its freshness target.
    Stale,
    /// A window failed [`FAILING_RUNS`] runs in a row.
    WindowFailing,
    /// A rule failed.
    RuleFailing,
    /// A firing waits for a person's review (one problem per firing, while it waits).
    ReviewPending,
    /// The warehouse's load failed, or left a file unloaded, [`FAILING_LOADS`] loads in a row.
    ///
    /// [`FAILING_LOADS`]: crate::app::warehouse::FAILING_LOADS
    WarehouseFailing,
}

/// A problem a person has to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Its kind.
    pub what: What,
    /// The organization it concerns.
    pub organization: Option<String>,
    /// The project.
    pub project: Option<String>,
    /// The dataset.
    pub dataset: Option<String>,
    /// What a person reads: the problem and what to do, one line.
    pub line: String,
    /// The line of its end.
    pub recovered: String,
    /// Since when, when the report knows better than "now" (a key refused since...).
    pub since: Option<DateTime<Utc>>,
    /// What tells it apart from the others of its kind (a window's days, a rule's name).
    pub subject: String,
}

impl Problem {
    /// What tells it apart: its kind and subject.
    pub fn id(&self) -> String {
        format!("{:?}:{}", self.what, self.subject)
    }
}

/// An alert as the webhook receives it: `text` for a chat webhook to show as it is, and the
/// fields for a program.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    /// The whole message, one line.
    pub text: String,
    /// `problem` or `recovered`.
    pub state: &'static str,
    /// The problem's kind.
    pub what: What,
    /// Its organization.
    pub organization: Option<String>,
    /// Its project.
    pub project: Option<String>,
    /// Its dataset.
    pub dataset: Option<String>,
    /// Since when.
    pub since: DateTime<Utc>,
    /// The status page's address.
    pub page: Option<String>,
}

/// Where alerts go: the webhook's address (a secret, never logged) and the status page's.
#[derive(Clone)]
pub struct Webhook {
    url: String,
    /// Where its address came from (its variable), for messages.
    source: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Webhook({})", self.source)
    }
}

impl Webhook {
    /// The webhook at `url` (named `source` in messages, never by its address).
    pub fn new(url: &str, source: &str) -> Result<Self, String> {
        let parsed =
            reqwest::Url::parse(url).map_err(|_| format!("{source} does not hold a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("{source} does not hold an http:// or https:// URL"));
        }
        crate::tls::install();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("docpipe/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            url: url.to_string(),
            source: source.to_string(),
            http,
        })
    }

    /// Posts `message` in the background, tried 3 times (1 s, then 2 s apart); a failure is
    /// logged (naming the variable, never the address).
    fn send(&self, message: Message) {
        let hook = self.clone();
        tokio::spawn(async move {
            let mut wait = Duration::from_secs(1);
            for attempt in 1..=3 {
                let sent = hook.http.post(&hook.url).json(&message).send().await;
                let why = match sent {
                    Ok(r) if r.status().is_success() => {
                        tracing::info!(what = ?message.what, state = message.state, "alert sent: {}", message.text);
                        return;
                    }
                    Ok(r) => format!("the webhook answered {}", r.status()),
                    Err(e) if e.is_timeout() => "the webhook did not answer in 10 s".to_string(),
                    Err(_) => "the webhook cannot be reached".to_string(),
                };
                if attempt == 3 {
                    tracing::warn!(
                        "alert not sent after 3 tries ({why}; the webhook of {}): {}",
                        hook.source,
                        message.text
                    );
                    return;
                }
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        });
    }
}

/// A problem begun and not ended.
#[derive(Debug, Clone)]
struct Open {
    problem: Problem,
    since: DateTime<Utc>,
    /// Whether its message went (a recovery is sent only after one).
    told: bool,
}

/// The problems open and the messages sent.
#[derive(Debug, Default)]
pub struct Alerts {
    hook: Option<Webhook>,
    page: Option<String>,
    open: BTreeMap<String, Open>,
    /// When each problem's last message went.
    told_at: HashMap<String, DateTime<Utc>>,
    /// Runs in a row each window failed: (dataset, project, first day).
    failing: HashMap<(&'static str, String, NaiveDate), u32>,
}

impl Alerts {
    /// The alerts `[alerts]` of `settings` asks for: the webhook from its variable (an error
    /// when the variable is unset or no URL), the page's address from `page_url` or the
    /// daemon's `listen` address. Without `[alerts]`, problems are tracked (for `/metrics`)
    /// and sent nowhere.
    pub fn open(settings: &crate::config::Settings) -> Result<Self, String> {
        let Some(a) = &settings.alerts else {
            return Ok(Self::default());
        };
        let url = match std::env::var(&a.webhook_url_env) {
            Ok(v) if !v.trim().is_empty() => v,
            _ => {
                return Err(format!(
                    "[alerts] environment variable {} is not set: it must hold the webhook's URL",
                    a.webhook_url_env
                ));
            }
        };
        let hook =
            Webhook::new(url.trim(), &a.webhook_url_env).map_err(|e| format!("[alerts] {e}"))?;
        let page = a
            .page_url
            .clone()
            .or_else(|| settings.daemon.listen.map(|addr| format!("http://{addr}/")));
        Ok(Self::to(hook, page))
    }

    /// Alerts sent to `hook`, naming `page` as the status page.
    pub fn to(hook: Webhook, page: Option<String>) -> Self {
        Self {
            hook: Some(hook),
            page,
            ..Self::default()
        }
    }

    /// The problems open now.
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.open.values().map(|o| &o.problem)
    }

    /// Whether the open problem `id`'s message went (`None`: it is not open).
    pub fn told(&self, id: &str) -> Option<bool> {
        self.open.get(id).map(|o| o.told)
    }

    /// When problem `id`'s last message went.
    pub fn told_at(&self, id: &str) -> Option<DateTime<Utc>> {
        self.told_at.get(id).copied()
    }

    /// After an export: its problems (keys, projects, staleness, windows, the rules run after
    /// it) replace those of the last export.
    pub fn exported(&mut self, ctx: &Context, report: &Report, rules: &[Rule]) {
        let now = ctx.clock.now();
        let found = self.export_problems(ctx, report);
        match &report.rules {
            RulesRun::Fired(fired) => self.rules_ran(rules, fired, now),
            RulesRun::Failed(e) => self.rules_failed(e, now),
            _ => {}
        }
        self.observe(
            &[What::ProjectUnknown, What::Stale, What::WindowFailing],
            None,
            found,
            now,
        );
    }

    /// After any work: the keys the state records as refused after they worked (by this
    /// daemon, another, or a `check`), each a problem until a key of the organization works.
    pub fn keys(&mut self, ctx: &Context) {
        let now = ctx.clock.now();
        let records = match ctx.store().key_records() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("alerts: cannot read the keys' records: {e}");
                return;
            }
        };
        let found = ctx
            .settings
            .organizations
            .iter()
            .filter_map(|o| {
                let k = records
                    .iter()
                    .find(|k| k.org == o.id && k.refused_since.is_some())?;
                Some(Problem {
                    what: What::KeyRefused,
                    organization: Some(o.id.clone()),
                    project: None,
                    dataset: None,
                    line: k.warning(now, o.admin_key.as_ref())?,
                    recovered: format!("the admin key of organization {} works again", o.id),
                    since: k.refused_since,
                    subject: o.id.clone(),
                })
            })
            .collect();
        self.observe(&[What::KeyRefused], None, found, now);
    }

    /// After any work: each firing the ledger holds for review is a problem until a person
    /// approves or rejects it, or it expires. Its line names the rule, the rows and the
    /// command, never a reader's words.
    pub fn reviews(&mut self, ctx: &Context) {
        let now = ctx.clock.now();
        let held = match ctx.store().ledger().pending() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("alerts: cannot read the firings held for review: {e}");
                return;
            }
        };
        let found = held.iter().map(review_pending).collect();
        self.observe(&[What::ReviewPending], None, found, now);
    }

    /// After any work: the warehouse's last load, as the state records it (the fact `status`
    /// reads), failing [`crate::app::warehouse::FAILING_LOADS`] loads in a row or not.
    pub fn warehouse(&mut self, ctx: &Context) {
        let Some(w) = &ctx.settings.warehouse else {
            return;
        };
        let found = crate::app::warehouse::last_load(ctx)
            .filter(|l| l.failing_runs >= crate::app::warehouse::FAILING_LOADS)
            .and_then(|l| {
                Some(Problem {
                    what: What::WarehouseFailing,
                    organization: None,
                    project: None,
                    dataset: None,
                    line: format!(
                        "warehouse (schema {}): {} loads in a row failed: {}",
                        w.schema,
                        l.failing_runs,
                        crate::text::one_line(&l.why()?)
                    ),
                    recovered: format!("warehouse (schema {}): a load loaded every file", w.schema),
                    since: None,
                    subject: w.schema.clone(),
                })
            });
        self.observe(
            &[What::WarehouseFailing],
            None,
            found.into_iter().collect(),
            ctx.clock.now(),
        );
    }

    /// The rules loaded now (after a reload): a rule's problem whose rule is gone (its file
    /// deleted, or renamed) ends, with its message.
    pub fn rules_loaded(&mut self, rules: &[Rule], now: DateTime<Utc>) {
        let mut gone = Vec::new();
        for o in self.open.values_mut().filter(|o| {
            o.problem.what == What::RuleFailing
                && !o.problem.subject.is_empty()
                && !rules.iter().any(|r| r.name == o.problem.subject)
        }) {
            o.problem.recovered = format!(
                "rule {} is no longer in the rules folder: its problem ends with it",
                o.problem.subject
            );
            gone.push(o.problem.subject.clone());
        }
        for name in gone {
            self.observe(&[What::RuleFailing], Some(&name), Vec::new(), now);
        }
    }

    /// After a set of firings: each rule that ran failed or not.
    pub fn rules_ran(&mut self, rules: &[Rule], fired: &Fired, now: DateTime<Utc>) {
        for (rule, r) in rules.iter().zip(&fired.reports) {
            let found = r.failed().then(|| rule_failing(rule, &r.line()));
            self.observe(
                &[What::RuleFailing],
                Some(&rule.name),
                found.into_iter().collect(),
                now,
            );
        }
        // The rules ran: a failure of the whole set ended.
        self.observe(&[What::RuleFailing], Some(""), Vec::new(), now);
    }

    /// The rules could not run at all.
    pub fn rules_failed(&mut self, e: &anyhow::Error, now: DateTime<Utc>) {
        self.observe(&[What::RuleFailing], Some(""), vec![rules_broken(e)], now);
    }

    /// `found` are the problems of `kinds` now (of `subject` only, when given): the new ones
    /// begin (a message unless one went in the last hour), the open ones not found end (a
    /// message when theirs went).
    pub fn observe(
        &mut self,
        kinds: &[What],
        subject: Option<&str>,
        found: Vec<Problem>,
        now: DateTime<Utc>,
    ) {
        let ids: Vec<String> = found.iter().map(Problem::id).collect();
        let ended: Vec<String> = self
            .open
            .iter()
            .filter(|(id, o)| {
                kinds.contains(&o.problem.what)
                    && subject.is_none_or(|s| o.problem.subject == s)
                    && !ids.contains(id)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            let Some(o) = self.open.remove(&id) else {
                continue;
            };
            tracing::info!(what = ?o.problem.what, "recovered: {}", o.problem.recovered);
            if o.told {
                self.tell(&o.problem, "recovered", o.since, now);
            }
        }
        for p in found {
            let id = p.id();
            if let Some(o) = self.open.get_mut(&id) {
                o.problem = p;
                continue;
            }
            let since = p.since.unwrap_or(now);
            let quiet = self.told_at.get(&id).is_some_and(|at| now - *at < QUIET);
            tracing::warn!(what = ?p.what, "alert: {}", p.line);
            if !quiet {
                self.tell(&p, "problem", since, now);
            }
            self.open.insert(
                id,
                Open {
                    problem: p,
                    since,
                    told: !quiet,
                },
            );
        }
    }

    /// Sends one message (when there is a webhook).
    fn tell(&mut self, p: &Problem, state: &'static str, since: DateTime<Utc>, now: DateTime<Utc>) {
        self.told_at.insert(p.id(), now);
        let Some(hook) = &self.hook else {
            return;
        };
        let page = self
            .page
            .as_ref()
            .map(|p| format!("; status: {p}"))
            .unwrap_or_default();
        let at = since.format("%Y-%m-%d %H:%M UTC").to_string();
        let text = match state {
            // A line that says since when already (a key refused since ...) says it once.
            "problem" if p.line.contains(&format!("since {at}")) => {
                format!("docpipe alert: {}{page}", p.line)
            }
            "problem" => format!("docpipe alert: {} (since {at}){page}", p.line),
            _ => format!(
                "docpipe recovered: {} (a problem since {}){page}",
                p.recovered,
                since.format("%Y-%m-%d %H:%M UTC")
            ),
        };
        hook.send(Message {
            text,
            state,
            what: p.what,
            organization: p.organization.clone(),
            project: p.project.clone(),
            dataset: p.dataset.clone(),
            since,
            page: self.page.clone(),
        });
    }

    /// The problems an export's report shows.
    fn export_problems(&mut self, ctx: &Context, report: &Report) -> Vec<Problem> {
        let now = ctx.clock.now();
        let mut found = unknown_projects(ctx);
        for (project, dataset, stale) in &report.staleness {
            let target = ctx.settings.freshness.policy(dataset).today;
            if crate::status::Freshness::of(Some(*stale), target) == crate::status::Freshness::Stale
            {
                found.push(Problem {
                    what: What::Stale,
                    organization: organization_of(ctx, project),
                    project: Some(project.clone()),
                    dataset: Some((*dataset).to_string()),
                    line: format!(
                        "{project} {dataset}: its newest data were taken {} ago, more than twice its freshness target of {}",
                        crate::text::from_now(stale.num_seconds().max(0) as u64),
                        crate::text::from_now(target.num_seconds().max(0) as u64)
                    ),
                    recovered: format!(
                        "{project} {dataset}: within twice its freshness target again"
                    ),
                    since: Some(now - *stale + target * 2),
                    subject: format!("{project}/{dataset}"),
                });
            }
        }
        found.extend(self.failing_windows(ctx, report));
        found
    }

    /// Counts each window's failures in a row (a window written or probed starts again at 0): those
    /// at [`FAILING_RUNS`] or more.
    fn failing_windows(&mut self, ctx: &Context, report: &Report) -> Vec<Problem> {
        let s = &report.summary;
        for (dataset, project, day) in s.settled() {
            self.failing.remove(&(dataset, project.to_string(), day));
        }
        let mut found = Vec::new();
        for f in s.failed.iter().filter(|f| !f.skipped) {
            let runs = self
                .failing
                .entry((f.dataset, f.project.clone(), f.day))
                .or_default();
            *runs += 1;
            if *runs >= FAILING_RUNS {
                let window = format!("{} {} {}", f.project, f.dataset, f.days());
                found.push(Problem {
                    what: What::WindowFailing,
                    organization: organization_of(ctx, &f.project),
                    project: Some(f.project.clone()),
                    dataset: Some(f.dataset.to_string()),
                    line: format!(
                        "{window}: failed {runs} runs in a row: {}",
                        crate::text::one_line(&f.cause.to_string())
                    ),
                    recovered: format!("{window}: fetched again"),
                    since: None,
                    subject: window_subject(f.dataset, &f.project, f.day),
                });
            }
        }
        // A window failing that this run did not try stays a problem.
        let still: Vec<String> = self
            .failing
            .iter()
            .filter(|(_, runs)| **runs >= FAILING_RUNS)
            .map(|((dataset, project, day), _)| window_subject(dataset, project, *day))
            .filter(|s| !found.iter().any(|p| &p.subject == s))
            .collect();
        found.extend(
            self.open
                .values()
                .filter(|o| {
                    o.problem.what == What::WindowFailing && still.contains(&o.problem.subject)
                })
                .map(|o| o.problem.clone()),
        );
        found
    }
}

/// What tells a failing window apart: its project, dataset and first day.
fn window_subject(dataset: &str, project: &str, day: NaiveDate) -> String {
    format!("{project}/{dataset}/{day}")
}

/// The organization of a configured project.
fn organization_of(ctx: &Context, project: &str) -> Option<String> {
    ctx.settings
        .projects
        .iter()
        .find(|p| p.id == project)
        .map(|p| p.organization.clone())
}

/// The configured projects the state remembers the service does not know (its 404, the fact
/// `status` reads): a problem until the project answers, is asked for again, or leaves the
/// config; not only in the run that met the 404 (later runs leave the project out).
fn unknown_projects(ctx: &Context) -> Vec<Problem> {
    let known = match ctx.store().unknown_projects() {
        Ok(k) => k,
        Err(e) => {
            tracing::warn!("alerts: cannot read the projects the service does not know: {e}");
            return Vec::new();
        }
    };
    known
        .into_iter()
        .filter(|u| ctx.settings.projects.iter().any(|p| p.id == u.project))
        .map(|u| Problem {
            what: What::ProjectUnknown,
            organization: organization_of(ctx, &u.project),
            line: format!(
                "project '{}' is unknown to the service ({}): check the project's id in the config (its analytics URL shows it)",
                u.project,
                crate::text::one_line(&u.message)
            ),
            recovered: format!("the service knows project {} again", u.project),
            since: Some(u.at),
            subject: u.project.clone(),
            project: Some(u.project),
            dataset: None,
        })
        .collect()
}

/// A firing held for review.
fn review_pending(f: &crate::store::ledger::Firing) -> Problem {
    Problem {
        what: What::ReviewPending,
        organization: None,
        project: Some(f.project.clone()),
        dataset: None,
        line: format!(
            "firing {} of rule {} ({}) waits for review with {} rows: docpipe rules pending shows it, docpipe rules approve {} sends it",
            f.id, f.rule, f.project, f.rows_matched, f.id
        ),
        recovered: format!(
            "firing {} of rule {} ({}) no longer waits for review",
            f.id, f.rule, f.project
        ),
        since: Some(f.trail.held_at.unwrap_or(f.fired_at)),
        subject: f.id.to_string(),
    }
}

/// A rule whose firing failed.
fn rule_failing(rule: &Rule, line: &str) -> Problem {
    Problem {
        what: What::RuleFailing,
        organization: None,
        project: Some(rule.project.clone()),
        dataset: None,
        line: format!(
            "rule {} ({}) failed: {}",
            rule.name,
            rule.project,
            cut(&crate::text::one_line(line), 200)
        ),
        recovered: format!("rule {} ({}) ran without failing", rule.name, rule.project),
        since: None,
        subject: rule.name.clone(),
    }
}

/// `text` cut at `max` characters, with an ellipsis: an alert is read in a chat, whole there
/// (`docpipe status` and the log keep the full line).
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The rules could not run at all.
fn rules_broken(e: &anyhow::Error) -> Problem {
    Problem {
        what: What::RuleFailing,
        organization: None,
        project: None,
        dataset: None,
        line: format!(
            "the rules could not run: {}",
            crate::error::lines(e).join(" ")
        ),
        recovered: "the rules run again".into(),
        since: None,
        subject: String::new(),
    }
}
