//! The config file: raw form (mirrors the TOML) -> validated settings, reporting every problem.

use crate::api::{KeySource, Limits, RetryPolicy};
use chrono::NaiveDate;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors of the config file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No file where the config was looked for.
    #[error(
        "no config at {path}: write one with `docpipe init`, or name yours with `--config FILE`"
    )]
    Missing {
        /// The file looked for, absolute.
        path: String,
    },
    /// Unreadable file.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Not valid TOML for this schema.
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong: one problem, or several, each on its own line ([`listed`]).
        message: String,
    },
    /// Inconsistent values: every problem found.
    #[error("invalid config {path}: {}", listed(problems))]
    Invalid {
        /// The file.
        path: String,
        /// Each problem.
        problems: Vec<String>,
    },
}

/// Problems as an error says them: one on the line, several each on its own line below.
pub fn listed(problems: &[String]) -> String {
    match problems {
        [one] => one.clone(),
        many => format!("{} problems:\n  {}", many.len(), many.join("\n  ")),
    }
}

/// The file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// How to reach the service (the service's own address when left out).
    #[serde(default)]
    pub service: RawService,
    /// Organizations: keys and limits.
    #[serde(default)]
    pub organizations: Vec<RawOrganization>,
    /// Projects to export.
    #[serde(default)]
    pub projects: Vec<RawProject>,
    /// Export settings.
    #[serde(default)]
    pub export: RawExport,
    /// Rule files.
    #[serde(default)]
    pub rules: RawRules,
    /// The daemon (`docpipe run`).
    #[serde(default)]
    pub daemon: RawDaemon,
    /// How often days are looked at again, by age; the backfill's share of the budget.
    #[serde(default)]
    pub freshness: RawFreshness,
    /// Where the state is kept (several daemons share a PostgreSQL database).
    #[serde(default)]
    pub state: RawState,
    /// Where the daemon sends its alerts.
    #[serde(default)]
    pub alerts: RawAlerts,
    /// The PostgreSQL database the lake is loaded into.
    #[serde(default)]
    pub warehouse: RawWarehouse,
    /// The service's analytics event streams docpipe reads (`[[streams]]`).
    #[serde(default)]
    pub streams: Vec<RawStream>,
    /// The agents table (`[agents] file`: yours, read before the shipped one).
    #[serde(default)]
    pub agents: RawAgents,
}

/// `[[streams]]`: where the service writes an organization's event stream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStream {
    /// The bucket's URL (`s3://bucket/prefix`, `gs://`, `az://`) or a local folder.
    pub url: String,
    /// The key prefix the destination was given (beside any in the URL).
    #[serde(default)]
    pub prefix: Option<String>,
    /// The organization that streams (its projects are the only ones the subdomains may name).
    #[serde(default)]
    pub organization: Option<String>,
    /// Each docs subdomain the stream carries, and the project it is.
    #[serde(default)]
    pub subdomains: BTreeMap<String, String>,
}

/// `[agents]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgents {
    /// Your agents file (the shipped table's format), read before the shipped one.
    pub file: Option<PathBuf>,
}

/// A stream to read, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSettings {
    /// Where its objects are (the prefix joined to the URL's).
    pub location: Location,
    /// Each subdomain's project.
    pub subdomains: BTreeMap<String, String>,
}

impl RawStream {
    /// Checks one `[[streams]]` entry (`i` its place) against the organizations and projects.
    fn check(
        &self,
        i: usize,
        orgs: &[Organization],
        projects: &[Project],
        problems: &mut Vec<String>,
    ) -> Option<StreamSettings> {
        let at = format!("[[streams]] {}", i + 1);
        let prefix = self.prefix.as_deref().unwrap_or("").trim_matches('/');
        let joined = if prefix.is_empty() {
            self.url.clone()
        } else {
            format!("{}/{prefix}", self.url.trim_end_matches('/'))
        };
        let location = match Location::parse(&joined) {
            Ok(l) => Some(l),
            Err(e) => {
                problems.push(format!("{at} url: {e}"));
                None
            }
        };
        if let Some(o) = &self.organization
            && !orgs.iter().any(|x| &x.id == o)
        {
            problems.push(format!(
                "{at} organization {o:?} is not among [[organizations]]"
            ));
        }
        if self.subdomains.is_empty() {
            problems.push(format!(
                "{at} subdomains: none given (subdomains = {{ \"<subdomain>\" = \"<project id>\" }})"
            ));
        }
        for (sub, project) in &self.subdomains {
            match projects.iter().find(|p| &p.id == project) {
                None => problems.push(format!(
                    "{at} subdomains.{sub}: project {project:?} is not among [[projects]]"
                )),
                Some(p)
                    if self
                        .organization
                        .as_ref()
                        .is_some_and(|o| o != &p.organization) =>
                {
                    problems.push(format!(
                        "{at} subdomains.{sub}: project {project:?} is not of organization {:?}",
                        self.organization.as_deref().unwrap_or("")
                    ))
                }
                Some(_) => {}
            }
        }
        Some(StreamSettings {
            location: location?,
            subdomains: self.subdomains.clone(),
        })
    }
}

/// `[warehouse]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWarehouse {
    /// The variable holding the database's URL (a secret: it carries the password).
    pub postgres_url_env: Option<String>,
    /// The schema docpipe creates and loads (default `docpipe`).
    pub schema: Option<String>,
    /// Connections that load files side by side (default 2, at most 16).
    pub connections: Option<usize>,
}

/// The warehouse, validated.
#[derive(Debug, Clone)]
pub struct WarehouseSettings {
    /// The variable holding the URL.
    pub url_env: String,
    /// The schema.
    pub schema: String,
    /// Connections that load files side by side.
    pub connections: usize,
}

/// Connections a warehouse load uses by default: the server's side of a binary COPY (its
/// index's upkeep) costs about five times docpipe's, so two connections keep docpipe's side
/// busy on a small server (docs/benchmarks.md, "Warehouse").
pub const WAREHOUSE_CONNECTIONS: usize = 2;

impl RawWarehouse {
    fn check(&self, problems: &mut Vec<String>) -> Option<WarehouseSettings> {
        let schema = self.schema.clone().unwrap_or_else(|| "docpipe".into());
        let plain = !schema.is_empty()
            && schema.len() <= 63
            && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !plain {
            problems.push(format!(
                "[warehouse] schema {schema:?} must be lowercase letters, digits and _ (at most 63), starting with a letter or _"
            ));
        }
        let url_env = url_variable(
            ("[warehouse]", "postgres_url_env", "the database's URL"),
            self.postgres_url_env.as_ref(),
            self.schema
                .is_some()
                .then_some("schema")
                .or(self.connections.is_some().then_some("connections")),
            problems,
        )?;
        let connections = self.connections.unwrap_or(WAREHOUSE_CONNECTIONS);
        if !(1..=16).contains(&connections) {
            problems.push(format!(
                "[warehouse] connections = {connections} must be from 1 to 16"
            ));
        }
        Some(WarehouseSettings {
            url_env,
            schema,
            connections,
        })
    }
}

/// `[alerts]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAlerts {
    /// The variable holding the webhook's URL (a secret: it is never in the file).
    pub webhook_url_env: Option<String>,
    /// The status page's address as the alerts' readers reach it (default: the daemon's
    /// `listen` address).
    pub page_url: Option<String>,
}

/// The daemon's alerts, validated.
#[derive(Debug, Clone)]
pub struct AlertSettings {
    /// The variable holding the webhook's URL.
    pub webhook_url_env: String,
    /// The status page's address, when the config gives one.
    pub page_url: Option<String>,
}

impl RawConfig {
    /// Makes the file's relative paths relative to `dir` (its folder): the output folder (not
    /// a URL), the state folder, the rules folder and a `budget_db` file; a key file's relative
    /// to `credentials` when given (systemd's `$CREDENTIALS_DIRECTORY`, where `LoadCredential=`
    /// puts the keys), else to `dir`.
    pub fn rebase(&mut self, dir: &Path, credentials: Option<&Path>) {
        let join = |p: &Path| {
            if p.is_relative() {
                dir.join(p)
            } else {
                p.to_path_buf()
            }
        };
        if !self.export.output_dir.to_string_lossy().contains("://") {
            self.export.output_dir = join(&self.export.output_dir);
        }
        self.export.state_dir = self.export.state_dir.as_deref().map(join);
        self.rules.dir = join(&self.rules.dir);
        self.agents.file = self.agents.file.as_deref().map(join);
        for st in &mut self.streams {
            if !st.url.contains("://") {
                st.url = join(Path::new(&st.url)).display().to_string();
            }
        }
        let key = |p: &Path| match credentials {
            Some(c) if p.is_relative() => c.join(p),
            _ => join(p),
        };
        for org in &mut self.organizations {
            org.admin_key_file = org.admin_key_file.as_deref().map(key);
            org.assistant_key_file = org.assistant_key_file.as_deref().map(key);
        }
        if let Some(file) = &self.service.budget_db
            && !crate::store::pg::is_url(file)
        {
            self.service.budget_db = Some(join(Path::new(file)).display().to_string());
        }
    }
}

/// `[state]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    /// A `postgres://` URL (the password in `DOCPIPE_STATE_PASSWORD`): every piece of state
    /// goes there, shared by every docpipe that names it (default: the output folder's
    /// `state.sqlite`).
    pub url: Option<String>,
    /// Seconds a window claim lasts without its holder renewing it (a daemon that died holds
    /// its windows that long).
    #[serde(default = "default_lease")]
    pub lease_secs: u64,
}

const fn default_lease() -> u64 {
    120
}

impl Default for RawState {
    fn default() -> Self {
        Self {
            url: None,
            lease_secs: default_lease(),
        }
    }
}

/// `[freshness]` (and `[freshness.dataset.<name>]`): durations such as "1h", "90m", "2h 30m".
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFreshness {
    /// Today's data (and a span's recent days) fetched again after this long (default 1h).
    pub today: Option<String>,
    /// Yesterday probed again after this long, a day n days old after n times this (default 2h).
    pub recent: Option<String>,
    /// ...at most this long (default 6h).
    pub oldest: Option<String>,
    /// A span's full re-check (feedback's 14 days of mutable statuses) after this long
    /// (default 6h).
    pub full: Option<String>,
    /// Percent of each hour's budget kept for missing days while any are pending (default 10).
    pub backfill_share_percent: Option<u32>,
    /// A dataset's own policy (today, recent, oldest), the rest from above.
    #[serde(default)]
    pub dataset: std::collections::BTreeMap<String, RawPolicy>,
}

/// `[freshness.dataset.<name>]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    /// See [`RawFreshness::today`].
    pub today: Option<String>,
    /// See [`RawFreshness::recent`].
    pub recent: Option<String>,
    /// See [`RawFreshness::oldest`].
    pub oldest: Option<String>,
    /// See [`RawFreshness::full`].
    pub full: Option<String>,
}

impl RawFreshness {
    /// Checks the section: every duration, every dataset name, the order of the three.
    fn check(&self, problems: &mut Vec<String>) -> crate::planner::Freshness {
        let default = freshness_policy(
            "freshness",
            &self.today,
            &self.recent,
            &self.oldest,
            &self.full,
            crate::planner::Policy::default(),
            problems,
        );
        let mut by_dataset = Vec::new();
        for (name, raw) in &self.dataset {
            let at = format!("freshness.dataset.{name}");
            match crate::dataset::by_name(name) {
                Some(d) => by_dataset.push((
                    d.name(),
                    freshness_policy(
                        &at,
                        &raw.today,
                        &raw.recent,
                        &raw.oldest,
                        &raw.full,
                        default,
                        problems,
                    ),
                )),
                None => {
                    let known: Vec<&str> = crate::dataset::ALL.iter().map(|d| d.name()).collect();
                    problems.push(format!(
                        "{at}: unknown dataset {name:?} (known: {})",
                        known.join(", ")
                    ));
                }
            }
        }
        let share = self.backfill_share_percent.unwrap_or(10);
        if share > 90 {
            problems.push(format!(
                "freshness.backfill_share_percent {share} must be at most 90"
            ));
        }
        crate::planner::Freshness {
            default,
            by_dataset,
            backfill_share_percent: share.min(90),
        }
    }
}

/// A `[freshness]` interval (`at.name`): between 1 minute and 31 days, else a problem and
/// `default`.
fn interval_setting(
    at: &str,
    name: &str,
    v: &Option<String>,
    default: chrono::Duration,
    problems: &mut Vec<String>,
) -> chrono::Duration {
    let Some(text) = v else {
        return default;
    };
    match humantime::parse_duration(text) {
        Ok(d) if d >= Duration::from_secs(60) && d <= Duration::from_secs(31 * 86_400) => {
            chrono::Duration::from_std(d).unwrap_or(default)
        }
        Ok(_) => {
            problems.push(format!(
                "{at}.{name} {text:?} must be between 1 minute and 31 days"
            ));
            default
        }
        Err(e) => {
            problems.push(format!(
                "{at}.{name} {text:?} is not a duration ({e}; write \"1h\", \"90m\" or \"2h 30m\")"
            ));
            default
        }
    }
}

/// A `[freshness]` policy (the table or one dataset's), its unset intervals from `base`.
fn freshness_policy(
    at: &str,
    today: &Option<String>,
    recent: &Option<String>,
    oldest: &Option<String>,
    full: &Option<String>,
    base: crate::planner::Policy,
    problems: &mut Vec<String>,
) -> crate::planner::Policy {
    let p = crate::planner::Policy {
        today: interval_setting(at, "today", today, base.today, problems),
        recent: interval_setting(at, "recent", recent, base.recent, problems),
        oldest: interval_setting(at, "oldest", oldest, base.oldest, problems),
        full: interval_setting(at, "full", full, base.full, problems),
    };
    // A dataset that sets neither takes both from above: checked there once.
    if p.recent > p.oldest && (at == "freshness" || recent.is_some() || oldest.is_some()) {
        problems.push(format!(
            "{at}: recent ({}) must not be longer than oldest ({})",
            humantime::format_duration(p.recent.to_std().unwrap_or_default()),
            humantime::format_duration(p.oldest.to_std().unwrap_or_default())
        ));
    }
    p
}

/// `[daemon]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDaemon {
    /// Cron schedule of the incremental export (with seconds), UTC.
    #[serde(default = "default_export_schedule")]
    pub export_schedule: String,
    /// Address of `/healthz` and `/metrics` (empty: none).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Seconds a stop signal leaves the run in progress to finish.
    #[serde(default = "default_grace")]
    pub shutdown_grace_secs: u64,
    /// The variable holding the token the status page, `/status.json` and `/metrics` ask
    /// for (required when `listen` is not a loopback address).
    #[serde(default)]
    pub status_token_env: Option<String>,
}

fn default_export_schedule() -> String {
    "0 0 * * * *".to_string()
}
fn default_listen() -> String {
    "127.0.0.1:9464".to_string()
}
const fn default_grace() -> u64 {
    10
}

impl Default for RawDaemon {
    fn default() -> Self {
        Self {
            export_schedule: default_export_schedule(),
            listen: default_listen(),
            shutdown_grace_secs: default_grace(),
            status_token_env: None,
        }
    }
}

/// The daemon's settings, validated.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    /// Cron schedule of the incremental export.
    pub export_schedule: String,
    /// Address of `/healthz` and `/metrics`.
    pub listen: Option<std::net::SocketAddr>,
    /// Time a stop signal leaves the run in progress.
    pub shutdown_grace: Duration,
    /// The variable of the status page's token.
    pub status_token_env: Option<String>,
}

/// `[rules]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRules {
    /// Folder of rule files (`*.toml`).
    #[serde(default = "default_rules_dir")]
    pub dir: PathBuf,
    /// Whether `docpipe export` runs the rules without a schedule after the trends.
    #[serde(default = "default_trends")]
    pub after_export: bool,
    /// How long a firing held for review waits before it expires unsent (default 7d).
    #[serde(default)]
    pub review_expires: Option<String>,
}

fn default_rules_dir() -> PathBuf {
    PathBuf::from("jobs")
}

impl Default for RawRules {
    fn default() -> Self {
        Self {
            dir: default_rules_dir(),
            after_export: default_trends(),
            review_expires: None,
        }
    }
}

/// `[service]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawService {
    /// Base address: the service's own (`https://api.mintlify.com`, the OpenAPI files'
    /// server) by default, or the emulator's `http://127.0.0.1:8080`.
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// Brand word that prefixes keys (`<brand>_`, `<brand>_dsc_`).
    #[serde(default = "default_brand")]
    pub brand: String,
    /// Timeout of one request, in seconds.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Retries after a failed attempt.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// Largest backoff step, in seconds.
    #[serde(default = "default_max_backoff")]
    pub max_backoff_secs: u64,
    /// Where the requests sent are logged, for the rate budgets: a SQLite file, or a
    /// `postgres://` URL (the password in `DOCPIPE_STATE_PASSWORD`); every docpipe process that
    /// names the same one shares them (default: the output folder's `state.sqlite`).
    pub budget_db: Option<String>,
}

fn default_brand() -> String {
    "mint".into()
}

/// The service's address, as its OpenAPI files give it.
pub const SERVICE_URL: &str = "https://api.mintlify.com";

fn default_base_url() -> String {
    SERVICE_URL.into()
}

impl Default for RawService {
    fn default() -> Self {
        Self {
            base_url: default_base_url(),
            brand: default_brand(),
            timeout_secs: default_timeout(),
            max_retries: default_retries(),
            max_backoff_secs: default_max_backoff(),
            budget_db: None,
        }
    }
}
const fn default_timeout() -> u64 {
    30
}
const fn default_retries() -> u32 {
    8
}
const fn default_max_backoff() -> u64 {
    60
}

/// `[[organizations]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOrganization {
    /// Identifier (used for budgets and in logs).
    pub id: String,
    /// Environment variable that holds the admin key (`<brand>_...`).
    pub admin_key_env: Option<String>,
    /// File that holds the admin key, readable by its owner only (instead of `admin_key_env`;
    /// read again at every run and after a 401).
    pub admin_key_file: Option<PathBuf>,
    /// Environment variable that holds the assistant key (`<brand>_dsc_...`).
    pub assistant_key_env: Option<String>,
    /// File that holds the assistant key (instead of `assistant_key_env`).
    pub assistant_key_file: Option<PathBuf>,
    /// Assistant domain of this organization.
    pub assistant_domain: Option<String>,
    /// Analytics requests per hour for the organization (service limit: 100).
    #[serde(default = "crate::api::service_limits::analytics")]
    pub analytics_per_hour: u32,
    /// Follow-ups and job creations per project per hour (service limit: 100).
    #[serde(default = "crate::api::service_limits::agent")]
    pub agent_per_hour: u32,
    /// Assistant messages per hour for the organization (service limit: 10000).
    #[serde(default = "crate::api::service_limits::assistant")]
    pub assistant_per_hour: u32,
    /// Percent of each limit left unused, for other clients of the organization.
    #[serde(default = "default_headroom")]
    pub headroom_percent: u8,
}

const fn default_headroom() -> u8 {
    5
}

/// `[[projects]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProject {
    /// Project id, as in API paths.
    pub id: String,
    /// Organization whose key and budget it uses.
    pub organization: String,
    /// First day `docpipe export` fetches when nothing was exported yet (default: 30 days ago).
    pub start_date: Option<NaiveDate>,
    /// The datasets it exports (default: every one but `threads`).
    pub datasets: Option<Vec<String>>,
    /// The documentation's own host names (`docs.acme.com`): a reader's text that names one
    /// is not flagged as a link when a rule renders it.
    #[serde(default)]
    pub domains: Vec<String>,
}

/// `[export]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExport {
    /// Output folder (Parquet and the state database), or an object store URL (`s3://bucket/
    /// prefix`, `gs://…`, `az://…`).
    #[serde(default = "default_output")]
    pub output_dir: PathBuf,
    /// The local folder of the state and of the tables' working copy: required when
    /// `output_dir` is a URL; by default the output folder.
    pub state_dir: Option<PathBuf>,
    /// Days that may still receive late events: re-fetched on each run, then final.
    #[serde(default = "default_lookback")]
    pub lookback_days: u32,
    /// Whether `docpipe export` aggregates the trends after exporting.
    #[serde(default = "default_trends")]
    pub trends_after_export: bool,
    /// The time zone whose days the windows are (an IANA name such as `Europe/Berlin`).
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// Days of feedback fetched again on every run (statuses change later, with no
    /// modification time).
    #[serde(default = "default_feedback_recheck")]
    pub feedback_recheck_days: u32,
    /// Days of assistant turns fetched again before the last day fetched (late turns, and
    /// categories filled in later).
    #[serde(default = "default_assistant_overlap")]
    pub assistant_overlap_days: u32,
    /// The most assistant threads fetched per project and run (one request each).
    #[serde(default = "default_threads_per_run")]
    pub threads_per_run: u32,
}

const fn default_feedback_recheck() -> u32 {
    14
}
const fn default_assistant_overlap() -> u32 {
    1
}
const fn default_threads_per_run() -> u32 {
    20
}

fn default_output() -> PathBuf {
    PathBuf::from("docpipe-data")
}
const fn default_lookback() -> u32 {
    3
}
const fn default_trends() -> bool {
    true
}
fn default_timezone() -> String {
    "UTC".to_string()
}

impl Default for RawExport {
    fn default() -> Self {
        Self {
            output_dir: default_output(),
            state_dir: None,
            lookback_days: default_lookback(),
            trends_after_export: default_trends(),
            timezone: default_timezone(),
            feedback_recheck_days: default_feedback_recheck(),
            assistant_overlap_days: default_assistant_overlap(),
            threads_per_run: default_threads_per_run(),
        }
    }
}

/// One organization, validated.
#[derive(Debug, Clone)]
pub struct Organization {
    /// Identifier.
    pub id: String,
    /// Where the admin key is read from (`admin_key_env` or `admin_key_file`).
    pub admin_key: Option<KeySource>,
    /// Where the assistant key is read from.
    pub assistant_key: Option<KeySource>,
    /// Assistant domain.
    pub assistant_domain: Option<String>,
    /// Limits.
    pub limits: Limits,
}

/// The earliest day docpipe fetches (the platform's analytics are younger).
pub const FIRST_DAY: NaiveDate = NaiveDate::from_ymd_opt(2000, 1, 1).expect("a date");
/// The latest day docpipe accepts.
pub const LAST_DAY: NaiveDate = NaiveDate::from_ymd_opt(2099, 12, 31).expect("a date");
/// The longest range one backfill may cover (ten years of days).
pub const MAX_RANGE_DAYS: i64 = 3653;

/// Checks a day given by the user (`what` names it in the error).
pub fn check_day(what: &str, day: NaiveDate) -> Result<(), String> {
    if (FIRST_DAY..=LAST_DAY).contains(&day) {
        Ok(())
    } else {
        Err(format!(
            "{what} {day} is out of range: days from {FIRST_DAY} to {LAST_DAY} are accepted"
        ))
    }
}

/// Checks a range of days given by the user: both days in range, in order, at most
/// [`MAX_RANGE_DAYS`] long.
pub fn check_range(from: NaiveDate, to: NaiveDate) -> Result<(), String> {
    check_day("--from", from)?;
    check_day("--to", to)?;
    if from > to {
        return Err(format!("--from {from} is after --to {to}"));
    }
    let days = (to - from).num_days() + 1;
    if days > MAX_RANGE_DAYS {
        return Err(format!(
            "--from {from} --to {to} is {days} days; one backfill covers at most {MAX_RANGE_DAYS} (ten years): split it"
        ));
    }
    Ok(())
}

/// How many days `export` fetches for a project without a `start_date`.
pub const DEFAULT_DAYS: i64 = 30;

/// One project, validated.
#[derive(Debug, Clone)]
pub struct Project {
    /// Identifier.
    pub id: String,
    /// Organization.
    pub organization: String,
    /// First day to export when nothing was exported yet.
    pub start_date: Option<NaiveDate>,
    /// The datasets it exports, in export order.
    pub datasets: Vec<&'static str>,
    /// The documentation's own host names.
    pub domains: Vec<String>,
}

impl Project {
    /// Whether it exports `dataset`.
    pub fn exports(&self, dataset: &str) -> bool {
        self.datasets.contains(&dataset)
    }
}

impl Project {
    /// The first day `export` fetches for this project: its `start_date`, or the last
    /// [`DEFAULT_DAYS`] days up to `today`.
    pub fn first_day(&self, today: NaiveDate) -> NaiveDate {
        self.start_date
            .unwrap_or(today - chrono::Duration::days(DEFAULT_DAYS - 1))
    }
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the settings came from.
    pub origin: String,
    /// The line of each project's `id` in the file (for messages that send the user there).
    pub project_lines: BTreeMap<String, usize>,
    /// Where every response is captured (`--record DIR` of a command; never from the file).
    pub record: Option<std::sync::Arc<crate::api::capture::Recorder>>,
    /// Base address.
    pub base_url: String,
    /// Brand.
    pub brand: String,
    /// Request timeout.
    pub timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
    /// Organizations.
    pub organizations: Vec<Organization>,
    /// Projects.
    pub projects: Vec<Project>,
    /// The local folder: the state, and the tables (their working copy when the output is
    /// elsewhere).
    pub output_dir: PathBuf,
    /// Where the tables go when not in `output_dir` (an object store, or another folder).
    pub output: Option<Location>,
    /// Where the rate budgets' request log lives.
    pub budget_db: BudgetDb,
    /// The shared state database (`[state] url`), if any: every piece of state goes there.
    pub state_url: Option<String>,
    /// How long a window claim lasts without renewal.
    pub window_lease: Duration,
    /// Lateness allowance in days.
    pub lookback_days: u32,
    /// Days of feedback fetched again on every run.
    pub feedback_recheck_days: u32,
    /// Days of assistant turns fetched again before the last one fetched.
    pub assistant_overlap_days: u32,
    /// The most assistant threads fetched per project and run.
    pub threads_per_run: u32,
    /// The time zone of the day windows.
    pub timezone: chrono_tz::Tz,
    /// Run trends after `export`.
    pub trends_after_export: bool,
    /// Folder of rule files.
    pub rules_dir: PathBuf,
    /// Run the unscheduled rules after `export`.
    pub rules_after_export: bool,
    /// How long a held firing waits for review.
    pub review_expires: Duration,
    /// The daemon.
    pub daemon: DaemonSettings,
    /// How often days are looked at again; the backfill's share of the budget.
    pub freshness: crate::planner::Freshness,
    /// Where the daemon sends its alerts (`None`: nowhere).
    pub alerts: Option<AlertSettings>,
    /// The PostgreSQL database the lake is loaded into after each run (`None`: none).
    pub warehouse: Option<WarehouseSettings>,
    /// The service's event streams read after each export.
    pub streams: Vec<StreamSettings>,
    /// Your agents file, read before the shipped table (`[agents] file`).
    pub agents_file: Option<PathBuf>,
}

/// Whether `s` can be an id: letters, digits, `-`, `_` and `.`, but not `.` or `..` (which
/// would be path segments in the service's URLs).
pub(crate) fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl RawService {
    fn check(&self, problems: &mut Vec<String>) {
        let url_ok = (self.base_url.starts_with("http://")
            || self.base_url.starts_with("https://"))
            && reqwest::Url::parse(&self.base_url)
                .is_ok_and(|u| u.host_str().is_some_and(|h| !h.is_empty()));
        let parsed = reqwest::Url::parse(&self.base_url).ok();
        let credentials = parsed
            .as_ref()
            .is_some_and(|u| !u.username().is_empty() || u.password().is_some());
        if credentials {
            // Not the address itself: it carries a secret.
            problems.push(
                "service.base_url holds credentials (user:password@): write the service's address alone; keys come from the environment".into(),
            );
        } else if !url_ok {
            problems.push(format!(
                "service.base_url {:?} must be an http:// or https:// address with a host",
                self.base_url
            ));
        } else if parsed.as_ref().is_some_and(|u| {
            !u.path().trim_end_matches('/').is_empty()
                || u.query().is_some()
                || u.fragment().is_some()
        }) {
            // Every operation's path is the service's own (/v1/analytics/..., /v2/agent/...):
            // a path here would send them all somewhere else.
            problems.push(format!(
                "service.base_url {:?} must be the service's address alone, without a path or query (like \"https://api.mintlify.com\"): docpipe adds each operation's path",
                self.base_url
            ));
        }
        if self.brand.is_empty() || !self.brand.chars().all(|c| c.is_ascii_lowercase()) {
            problems.push(format!(
                "service.brand {:?} must be lowercase letters",
                self.brand
            ));
        }
        if !(1..=600).contains(&self.timeout_secs) {
            problems.push(format!(
                "service.timeout_secs {} must be between 1 and 600",
                self.timeout_secs
            ));
        }
        if self.max_retries > 100 {
            problems.push(format!(
                "service.max_retries {} must be at most 100",
                self.max_retries
            ));
        }
        if !(1..=3600).contains(&self.max_backoff_secs) {
            problems.push(format!(
                "service.max_backoff_secs {} must be between 1 and 3600",
                self.max_backoff_secs
            ));
        }
    }
}

impl RawOrganization {
    fn check(&self, seen: &mut HashSet<String>, problems: &mut Vec<String>) -> Organization {
        let at = format!("organization {}", self.id);
        if !valid_id(&self.id) {
            problems.push(format!(
                "organization id {:?} must be letters, digits, '-', '_' or '.'",
                self.id
            ));
        }
        if !seen.insert(self.id.clone()) {
            problems.push(format!("{at} is listed twice"));
        }
        for (name, v) in [
            ("analytics_per_hour", self.analytics_per_hour),
            ("agent_per_hour", self.agent_per_hour),
            ("assistant_per_hour", self.assistant_per_hour),
        ] {
            if v == 0 {
                problems.push(format!("{at}: {name} must be at least 1"));
            }
        }
        if self.headroom_percent > 90 {
            problems.push(format!(
                "{at}: headroom_percent {} must be at most 90",
                self.headroom_percent
            ));
        }
        let source = |kind: &str,
                      env: &Option<String>,
                      file: &Option<PathBuf>,
                      problems: &mut Vec<String>| {
            match (env, file) {
                (Some(_), Some(_)) => {
                    problems.push(format!(
                        "{at}: {kind}_key_env and {kind}_key_file both name the {kind} key: keep one"
                    ));
                    None
                }
                (Some(var), None) => Some(KeySource::Env(var.clone())),
                (None, Some(path)) => Some(KeySource::File(path.clone())),
                (None, None) => None,
            }
        };
        let admin_key = source("admin", &self.admin_key_env, &self.admin_key_file, problems);
        let assistant_key = source(
            "assistant",
            &self.assistant_key_env,
            &self.assistant_key_file,
            problems,
        );
        if self.assistant_domain.is_some()
            && self.assistant_key_env.is_none()
            && self.assistant_key_file.is_none()
        {
            problems.push(format!(
                "{at}: assistant_domain needs assistant_key_env or assistant_key_file"
            ));
        }
        Organization {
            id: self.id.clone(),
            admin_key,
            assistant_key,
            assistant_domain: self.assistant_domain.clone(),
            limits: Limits {
                analytics_per_hour: self.analytics_per_hour,
                agent_per_hour: self.agent_per_hour,
                assistant_per_hour: self.assistant_per_hour,
                headroom_percent: self.headroom_percent,
            },
        }
    }
}

impl RawProject {
    /// The datasets it names, in export order (the default ones when it names none).
    fn datasets(&self, problems: &mut Vec<String>) -> Vec<&'static str> {
        match &self.datasets {
            None => crate::dataset::default_names(),
            Some(names) => {
                let mut seen = HashSet::new();
                for n in names {
                    if crate::dataset::by_name(n).is_none() {
                        let known: Vec<&str> =
                            crate::dataset::ALL.iter().map(|d| d.name()).collect();
                        problems.push(format!(
                            "project {}: unknown dataset {n:?} (known: {})",
                            self.id,
                            known.join(", ")
                        ));
                    } else if !seen.insert(n.as_str()) {
                        problems.push(format!("project {}: dataset {n} is listed twice", self.id));
                    }
                }
                if names.is_empty() {
                    problems.push(format!(
                        "project {}: datasets is empty; list at least one, or leave it out for the default",
                        self.id
                    ));
                }
                // In export order, whatever the file's.
                crate::dataset::ALL
                    .iter()
                    .map(|d| d.name())
                    .filter(|n| names.iter().any(|m| m == n))
                    .collect()
            }
        }
    }

    fn check(
        &self,
        organizations: &[RawOrganization],
        seen: &mut HashSet<String>,
        problems: &mut Vec<String>,
    ) -> Project {
        if !valid_id(&self.id) {
            problems.push(format!(
                "project id {:?} must be letters, digits, '-', '_' or '.'",
                self.id
            ));
        }
        if !seen.insert(self.id.clone()) {
            problems.push(format!("project {} is listed twice", self.id));
        }
        if let Some(d) = self.start_date
            && let Err(e) = check_day(&format!("project {}: start_date", self.id), d)
        {
            problems.push(e);
        }
        match organizations.iter().find(|o| o.id == self.organization) {
            None => problems.push(format!(
                "project {} names organization {}, which is not configured",
                self.id, self.organization
            )),
            Some(o) if o.admin_key_env.is_none() && o.admin_key_file.is_none() => {
                problems.push(format!(
                    "project {}: organization {} has no admin_key_env or admin_key_file",
                    self.id, o.id
                ))
            }
            Some(_) => {}
        }
        let datasets = self.datasets(problems);
        for d in &self.domains {
            let host = d.trim();
            if host.is_empty()
                || host.contains("://")
                || host.contains('/')
                || !host.contains('.')
                || host.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                problems.push(format!(
                    "project {}: domains: {d:?} is not a host name like \"docs.acme.com\"",
                    self.id
                ));
            }
        }
        Project {
            id: self.id.clone(),
            organization: self.organization.clone(),
            start_date: self.start_date,
            datasets,
            domains: self
                .domains
                .iter()
                .map(|d| d.trim().to_lowercase())
                .collect(),
        }
    }
}

impl RawExport {
    /// Where the output goes and the local folder of the state (the output folder, or
    /// `state_dir`); a problem when a URL has no `state_dir`.
    fn location(&self, problems: &mut Vec<String>) -> (Location, PathBuf) {
        let text = self.output_dir.to_string_lossy();
        let location = match Location::parse(&text) {
            Ok(l) => l,
            Err(e) => {
                problems.push(format!("export.output_dir: {e}"));
                Location::Local(self.output_dir.clone())
            }
        };
        let local = match (&location, &self.state_dir) {
            (_, Some(dir)) => dir.clone(),
            (Location::Local(dir), None) => dir.clone(),
            (Location::Url(url), None) => {
                problems.push(format!(
                    "export.state_dir is required when output_dir is {url}: the local folder of the state and the tables' working copy (--state-dir)"
                ));
                PathBuf::new()
            }
        };
        (location, local)
    }

    /// Checks the section; returns the time zone (UTC when it is not one).
    fn check(&self, problems: &mut Vec<String>) -> chrono_tz::Tz {
        for (name, v, max) in [
            ("feedback_recheck_days", self.feedback_recheck_days, 366),
            ("assistant_overlap_days", self.assistant_overlap_days, 366),
            ("threads_per_run", self.threads_per_run, 1000),
        ] {
            if v > max {
                problems.push(format!("export.{name} {v} must be at most {max}"));
            }
        }
        if self.lookback_days > 366 {
            problems.push(format!(
                "export.lookback_days {} must be at most 366",
                self.lookback_days
            ));
        }
        match self.timezone.parse::<chrono_tz::Tz>() {
            Ok(tz) => tz,
            Err(_) => {
                problems.push(format!(
                    "export.timezone {:?} is not a time zone name (IANA, such as \"UTC\" or \"Europe/Berlin\"){}",
                    self.timezone,
                    zone_like(&self.timezone)
                ));
                chrono_tz::Tz::UTC
            }
        }
    }
}

/// Whether `name` can be an environment variable's name: letters, digits and `_`, not
/// starting with a digit.
fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl RawDaemon {
    /// Checks the section; returns the health address (none when empty or not one).
    fn check(&self, problems: &mut Vec<String>) -> Option<std::net::SocketAddr> {
        if let Err(e) = crate::schedule::parse_schedule(&self.export_schedule) {
            problems.push(format!("daemon.export_schedule: {e}"));
        }
        if self.shutdown_grace_secs > 3600 {
            problems.push(format!(
                "daemon.shutdown_grace_secs {} must be at most 3600",
                self.shutdown_grace_secs
            ));
        }
        if let Some(v) = &self.status_token_env
            && !valid_env_name(v)
        {
            problems.push(format!(
                "daemon.status_token_env {v:?} is not an environment variable's name (letters, digits and _)"
            ));
        }
        if self.listen.is_empty() {
            return None;
        }
        match self.listen.parse::<std::net::SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                problems.push(format!(
                    "daemon.listen {:?} must be an address like 127.0.0.1:9464 (or \"\" for none)",
                    self.listen
                ));
                None
            }
        }
    }
}

/// A TOML error's message with the line it is on and the field it names: `line 5 ([service]
/// timeout_secs): invalid type: ...`.
/// The line of each `id = "..."` under a `[[projects]]` header.
fn project_lines(text: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut in_project = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            in_project = t.starts_with("[[projects]]");
        } else if in_project
            && let Some((k, v)) = t.split_once('=')
            && k.trim() == "id"
        {
            let v = v.split('#').next().unwrap_or("").trim().trim_matches('"');
            out.entry(v.to_string()).or_insert(i + 1);
        }
    }
    out
}

/// " (did you mean \"Europe/Berlin\"?)" for a name close to a time zone's (case aside, a
/// space for `_`, a typo of a few letters), or nothing.
pub fn zone_like(name: &str) -> String {
    let wanted = name.trim().replace(' ', "_").to_lowercase();
    let best = chrono_tz::TZ_VARIANTS
        .iter()
        .map(|tz| {
            let n = tz.name();
            (strsim::damerau_levenshtein(&wanted, &n.to_lowercase()), n)
        })
        .min();
    match best {
        Some((d, n)) if d <= (wanted.chars().count() / 4).max(2) => {
            format!(" (did you mean {n:?}?)")
        }
        _ => String::new(),
    }
}

fn locate(text: &str, span: Option<std::ops::Range<usize>>, message: &str) -> String {
    let Some(span) = span else {
        return message.to_string();
    };
    let start = span.start.min(text.len());
    let before = &text[..start];
    let line_no = before.matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|t| format!("{t} "))
        .unwrap_or_default();
    let field = line
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let hint = if message.contains("datetime") || message.contains("date string") {
        " (write dates in quotes: start_date = \"2026-01-01\")".to_string()
    } else {
        crate::text::did_you_mean(message)
    };
    match field {
        Some(f) => format!("line {line_no} ({table}{f}): {message}{hint}"),
        None => format!("line {line_no}: {message}{hint}"),
    }
}

impl RawConfig {
    /// Parses TOML text; `origin` names it in errors.
    ///
    /// Every error at once, in file order: after each one the line it names is set aside
    /// (commented out, so that the lines keep their numbers) and the text read again.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let mut current = text.to_string();
        let mut found: Vec<(usize, String)> = Vec::new();
        let mut set_aside: Vec<String> = Vec::new();
        let mut rest: Vec<String> = Vec::new();
        for _ in 0..50 {
            let e = match toml::from_str::<RawConfig>(&current) {
                Ok(raw) if found.is_empty() => return Ok(raw),
                // The rest of the file read: what does not fit together in it is said too.
                Ok(raw) => {
                    if let Err(ConfigError::Invalid { problems, .. }) = raw.validate(origin) {
                        rest = problems;
                    }
                    break;
                }
                Err(e) => e,
            };
            let message = locate(&current, e.span(), e.message().trim());
            // A field missing because its wrong line was set aside is not a new problem.
            let consequence = e
                .message()
                .strip_prefix("missing field `")
                .is_some_and(|rest| {
                    set_aside
                        .iter()
                        .any(|f| rest.split('`').next() == Some(f.as_str()))
                });
            if consequence || found.iter().any(|(_, m)| *m == message) {
                break;
            }
            // A missing field names no line of its own: setting one aside would only make
            // errors of its own (a table's fields read under the table before).
            if e.message().starts_with("missing field `") {
                found.push((usize::MAX, message));
                break;
            }
            let Some(span) = e.span() else {
                found.push((usize::MAX, message));
                break;
            };
            let line = current[..span.start.min(current.len())]
                .matches('\n')
                .count();
            found.push((line, message));
            let mut lines: Vec<String> = current.lines().map(str::to_string).collect();
            let Some(l) = lines.get_mut(line) else { break };
            if l.trim_start().starts_with('#') {
                break;
            }
            let header = l.trim_start().starts_with('[');
            if let Some((k, _)) = l.split_once('=') {
                set_aside.push(k.trim().to_string());
            }
            *l = format!("#{l}");
            // A table header set aside takes its fields with it: read under the table before,
            // they would be blamed on it.
            if header {
                for l in lines.iter_mut().skip(line + 1) {
                    if l.trim_start().starts_with('[') {
                        break;
                    }
                    if !l.trim_start().starts_with('#') && !l.trim().is_empty() {
                        *l = format!("#{l}");
                    }
                }
            }
            current = lines.join("\n");
        }
        found.sort_by_key(|(line, _)| *line);
        Err(ConfigError::Parse {
            path: origin.to_string(),
            message: listed(
                &found
                    .into_iter()
                    .map(|(_, m)| m)
                    .chain(rest)
                    .collect::<Vec<_>>(),
            ),
        })
    }

    /// Validates, reporting every problem at once: each section checks itself.
    #[expect(clippy::too_many_lines)]
    pub fn validate(self, origin: &str) -> Result<Settings, ConfigError> {
        let mut problems = Vec::new();
        let s = &self.service;
        s.check(&mut problems);
        let mut orgs = HashSet::new();
        let organizations: Vec<Organization> = self
            .organizations
            .iter()
            .map(|o| o.check(&mut orgs, &mut problems))
            .collect();
        let mut seen = HashSet::new();
        let projects: Vec<Project> = self
            .projects
            .iter()
            .map(|p| p.check(&self.organizations, &mut seen, &mut problems))
            .collect();
        let timezone = self.export.check(&mut problems);
        let (location, local) = self.export.location(&mut problems);
        let d = &self.daemon;
        let listen = d.check(&mut problems);
        let freshness = self.freshness.check(&mut problems);
        if let Some(url) = s
            .budget_db
            .as_deref()
            .filter(|u| crate::store::pg::is_url(u))
            && let Err(m) = crate::store::pg::parse_url(url)
        {
            // Not the URL itself: it may carry the password.
            problems.push(format!("[service] budget_db: {m}"));
        }
        if let Some(url) = &self.state.url {
            if !crate::store::pg::is_url(url) {
                problems.push(
                    "[state] url: not a postgres:// URL (the state of one machine needs no setting: it is the output folder's state.sqlite)"
                        .into(),
                );
            } else if let Err(m) = crate::store::pg::parse_url(url) {
                problems.push(format!("[state] url: {m}"));
            }
        }
        let review_expires = match &self.rules.review_expires {
            None => crate::rules::engine::DEFAULT_REVIEW_EXPIRES,
            Some(text) => match humantime::parse_duration(text.trim()) {
                Ok(d)
                    if d >= Duration::from_secs(3600) && d <= Duration::from_secs(90 * 86_400) =>
                {
                    d
                }
                Ok(_) => {
                    problems.push(format!(
                        "[rules] review_expires {text:?} must be between 1 hour and 90 days"
                    ));
                    crate::rules::engine::DEFAULT_REVIEW_EXPIRES
                }
                Err(e) => {
                    problems.push(format!(
                        "[rules] review_expires {text:?} is not a duration like \"7d\" ({e})"
                    ));
                    crate::rules::engine::DEFAULT_REVIEW_EXPIRES
                }
            },
        };
        let alerts = self.alerts.check(&mut problems);
        let warehouse = self.warehouse.check(&mut problems);
        let checked: Vec<(usize, StreamSettings)> = self
            .streams
            .iter()
            .enumerate()
            .filter_map(|(i, st)| Some((i, st.check(i, &organizations, &projects, &mut problems)?)))
            .collect();
        let mut mapped = BTreeMap::new();
        for (k, (i, st)) in checked.iter().enumerate() {
            if checked[..k].iter().any(|(_, o)| o.location == st.location) {
                problems.push(format!(
                    "[[streams]] {}: {} is named by an earlier stream (one [[streams]] maps all its subdomains)",
                    i + 1,
                    st.location
                ));
            }
            for sub in st.subdomains.keys() {
                if mapped.insert(sub.clone(), ()).is_some() {
                    problems.push(format!("[[streams]] subdomain {sub:?} is mapped twice"));
                }
            }
        }
        if self.state.lease_secs < 10 {
            problems.push(format!(
                "[state] lease_secs: {} is too short (at least 10: the holder renews it every third of it)",
                self.state.lease_secs
            ));
        }
        if !problems.is_empty() {
            return Err(ConfigError::Invalid {
                path: origin.to_string(),
                problems,
            });
        }
        Ok(Settings {
            project_lines: BTreeMap::new(),
            origin: origin.to_string(),
            record: None,
            base_url: s.base_url.trim_end_matches('/').to_string(),
            brand: s.brand.clone(),
            timeout: Duration::from_secs(s.timeout_secs),
            retry: RetryPolicy {
                max_retries: s.max_retries as usize,
                max_delay: Duration::from_secs(s.max_backoff_secs),
                ..RetryPolicy::default()
            },
            organizations,
            projects,
            output: location
                .local()
                .is_none_or(|dir| !same_dir(dir, &local))
                .then_some(location),
            budget_db: match (&s.budget_db, &self.state.url) {
                (None, Some(url)) => BudgetDb::Postgres(url.clone()),
                (None, None) => BudgetDb::File(crate::store::state_path(&local)),
                (Some(url), _) if crate::store::pg::is_url(url) => BudgetDb::Postgres(url.clone()),
                (Some(file), _) => BudgetDb::File(PathBuf::from(file)),
            },
            state_url: self.state.url.clone(),
            window_lease: Duration::from_secs(self.state.lease_secs),
            output_dir: local,
            lookback_days: self.export.lookback_days,
            feedback_recheck_days: self.export.feedback_recheck_days,
            assistant_overlap_days: self.export.assistant_overlap_days,
            threads_per_run: self.export.threads_per_run,
            timezone,
            trends_after_export: self.export.trends_after_export,
            rules_dir: self.rules.dir.clone(),
            rules_after_export: self.rules.after_export,
            review_expires,
            daemon: DaemonSettings {
                export_schedule: d.export_schedule.clone(),
                listen,
                shutdown_grace: Duration::from_secs(d.shutdown_grace_secs),
                status_token_env: d.status_token_env.clone(),
            },
            freshness,
            alerts,
            warehouse,
            streams: checked.into_iter().map(|(_, st)| st).collect(),
            agents_file: self.agents.file.clone(),
        })
    }
}

impl RawAlerts {
    /// Checks the section: the variable's name and the page's address.
    fn check(&self, problems: &mut Vec<String>) -> Option<AlertSettings> {
        if let Some(url) = &self.page_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            problems.push(format!(
                "[alerts] page_url {url:?} is not an http:// or https:// address"
            ));
        }
        let webhook_url_env = url_variable(
            ("[alerts]", "webhook_url_env", "the webhook's address"),
            self.webhook_url_env.as_ref(),
            self.page_url.is_some().then_some("page_url"),
            problems,
        )?;
        Some(AlertSettings {
            webhook_url_env,
            page_url: self.page_url.clone(),
        })
    }
}

/// The variable a section names for a URL that is a secret (`(section, field, what it
/// holds)`): checked as a variable's name (the URL itself is refused); `None` when the section
/// does not name one, a problem then when `needs_it` (a field that means nothing without it)
/// is set.
fn url_variable(
    (section, field, holds): (&str, &str, &str),
    var: Option<&String>,
    needs_it: Option<&str>,
    problems: &mut Vec<String>,
) -> Option<String> {
    let Some(var) = var else {
        if let Some(other) = needs_it {
            problems.push(format!(
                "{section} {other} needs {field} (the variable holding {holds})"
            ));
        }
        return None;
    };
    if !valid_env_name(var) {
        problems.push(format!(
            "{section} {field} {var:?} is not an environment variable's name (letters, digits and _): the URL itself goes in the environment, not in the file"
        ));
    }
    Some(var.clone())
}

impl Settings {
    /// Today, in the time zone of the day windows.
    pub fn today(&self, now: chrono::DateTime<chrono::Utc>) -> NaiveDate {
        now.with_timezone(&self.timezone).date_naive()
    }

    /// Reads, parses and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with(path, &Overrides::default())
    }

    /// Reads a config file, with the command line's `overrides`, and validates it.
    pub fn load_with(path: &Path, overrides: &Overrides) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ConfigError::Missing {
                    path: std::path::absolute(path)
                        .unwrap_or_else(|_| path.to_path_buf())
                        .display()
                        .to_string(),
                }
            } else {
                ConfigError::Read {
                    path: origin.clone(),
                    source,
                }
            }
        })?;
        let mut raw = RawConfig::parse(&text, &origin)?;
        // The file's paths are relative to its folder (whatever folder docpipe runs in); the
        // flags' paths, applied after, to the working directory.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or(Path::new("."));
        let dir = std::fs::canonicalize(dir)
            .or_else(|_| std::path::absolute(dir))
            .unwrap_or_default();
        let credentials = std::env::var_os("CREDENTIALS_DIRECTORY")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from);
        raw.rebase(&dir, credentials.as_deref());
        overrides.apply(&mut raw.export);
        let mut settings = raw.validate(&origin)?;
        settings.project_lines = project_lines(&text);
        Ok(settings)
    }

    /// The output's name: its URL, or the output folder.
    pub fn output_name(&self) -> String {
        match &self.output {
            Some(l) => l.to_string(),
            None => self.output_dir.display().to_string(),
        }
    }
}

/// Where the rate budgets' request log lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetDb {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database (its URL, without a password).
    Postgres(String),
}

/// Where the output goes, as `output_dir` names it.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A local folder.
    Local(PathBuf),
    /// An object store URL (`s3://bucket/prefix`, `gs://…`, `az://…`).
    Url(String),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Url(u) => f.write_str(u),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// The URL schemes an output may have.
const SCHEMES: [&str; 7] = ["s3", "s3a", "gs", "az", "azure", "abfs", "abfss"];

impl Location {
    /// Reads `output_dir`: a URL of a known scheme, or a local path.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once("://") {
            None => Ok(Location::Local(PathBuf::from(s))),
            Some(("file", path)) => Ok(Location::Local(PathBuf::from(path))),
            Some((scheme, rest)) if SCHEMES.contains(&scheme) => {
                let bucket = rest.split('/').next().unwrap_or("");
                if bucket.is_empty() {
                    return Err(format!("{s} names no bucket ({scheme}://bucket/prefix)"));
                }
                if rest.contains('?') || rest.contains('#') || rest.contains('@') {
                    // The bucket as named after any credentials: never the credentials.
                    let bucket = bucket.rsplit('@').next().unwrap_or("");
                    return Err(format!(
                        "{scheme}://{bucket}/…: write the bucket and the prefix only; credentials and options come from the environment"
                    ));
                }
                Ok(Location::Url(s.trim_end_matches('/').to_string()))
            }
            Some((scheme, _)) => Err(format!(
                "unknown scheme {scheme}://: use s3://, gs://, az:// or a local folder"
            )),
        }
    }

    /// The local folder, if it is one.
    pub fn local(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Url(_) => None,
        }
    }
}

/// Whether two folders are one (either may not exist yet).
fn same_dir(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.components().collect());
    norm(a) == norm(b)
}

/// What the command line sets over the config file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--output`: `export.output_dir`.
    pub output: Option<PathBuf>,
    /// `--state-dir`: `export.state_dir`.
    pub state_dir: Option<PathBuf>,
}

impl Overrides {
    /// Sets what was given over `export`.
    pub fn apply(&self, export: &mut RawExport) {
        if let Some(o) = &self.output {
            export.output_dir = o.clone();
        }
        if let Some(d) = &self.state_dir {
            export.state_dir = Some(d.clone());
        }
    }
}

impl Settings {
    /// The configured project ids.
    pub fn project_ids(&self) -> Vec<String> {
        self.projects.iter().map(|p| p.id.clone()).collect()
    }

    /// The follow-ups and job creations per hour docpipe allows itself, per project.
    pub fn agent_limits(&self) -> std::collections::HashMap<String, u32> {
        self.projects
            .iter()
            .filter_map(|p| {
                let l = self.organization(&p.organization)?.limits;
                Some((p.id.clone(), l.effective(l.agent_per_hour)))
            })
            .collect()
    }

    /// An organization by id.
    pub fn organization(&self, id: &str) -> Option<&Organization> {
        self.organizations.iter().find(|o| o.id == id)
    }
}
