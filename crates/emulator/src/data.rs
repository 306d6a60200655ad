//! The emulator's data file: organizations, keys, projects, domains, jobs, limits and faults.

use chrono::NaiveDate;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Errors loading or validating a data file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be read.
    #[error("cannot read data file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("invalid data file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The file parses but its contents are inconsistent; every problem is listed.
    #[error("invalid data file {path}: {}", problems.join("; "))]
    Invalid {
        /// The file.
        path: String,
        /// Each problem found.
        problems: Vec<String>,
    },
}

/// The whole data file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataFile {
    /// The service's short brand word that prefixes keys (`<brand>_`, `<brand>_dsc_`).
    #[serde(default = "default_brand")]
    pub brand: String,
    /// First day with page views.
    pub start_date: NaiveDate,
    /// Seed of the deterministic traffic generator.
    #[serde(default)]
    pub seed: u64,
    /// Organizations and their keys.
    #[serde(default)]
    pub organizations: Vec<Organization>,
    /// Documentation projects.
    #[serde(default)]
    pub projects: Vec<Project>,
    /// Assistant domains.
    #[serde(default)]
    pub domains: Vec<Domain>,
    /// Agent jobs that exist from the start.
    #[serde(default)]
    pub jobs: Vec<JobSeed>,
    /// Rate limits.
    #[serde(default)]
    pub limits: Limits,
    /// Injected faults.
    #[serde(default)]
    pub faults: Faults,
    /// What a job's pull request changes.
    #[serde(default)]
    pub impact: ImpactData,
    /// Readers' texts planted among a project's searches, questions or feedback, every day.
    #[serde(default)]
    pub readers: Vec<ReaderText>,
    /// The analytics event stream the emulator writes (none when left out).
    #[serde(default)]
    pub stream: Option<StreamData>,
    /// The automations a trigger may start.
    #[serde(default)]
    pub automations: Vec<Automation>,
}

/// An automation of a project (`[[automations]]`), which the trigger operation starts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Automation {
    /// Its id (the trigger's `workflowSchemaId`).
    pub id: String,
    /// Its project.
    pub project: String,
    /// Whether it is active (an inactive one answers 400).
    #[serde(default = "yes")]
    pub active: bool,
    /// Whether it is a *Custom schedule* automation, the only kind a trigger starts (400 else).
    #[serde(default = "yes")]
    pub custom_schedule: bool,
    /// How its runs end (default: as the project's first job of `[[jobs]]` does).
    #[serde(default)]
    pub outcome: Option<JobOutcome>,
}

const fn yes() -> bool {
    true
}

/// The data file's `[stream]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct StreamData {
    /// The projects streamed (their subdomain: `docs-<id>`).
    #[serde(default)]
    pub projects: Vec<String>,
    /// The share of each page's `ai` views in the stream (1: all; less when server-side
    /// fetches are left out).
    #[serde(default = "one")]
    pub agent_fraction: f64,
    /// Writes bad lines in every object (not JSON, a payload string that is not JSON, an
    /// unknown event, a subdomain no project has) and cuts the day's last object short.
    #[serde(default)]
    pub bad_lines: bool,
}

const fn one() -> f64 {
    1.0
}

/// The most views a day of one project may have in a data file.
pub const MAX_DAILY_VIEWS: f64 = 10_000_000.0;

/// How many years before 2026 a data file's days may start.
pub const MAX_YEARS_SERVED: i32 = 30;

/// The earliest `start_date` a data file may give.
fn earliest_start() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026 - MAX_YEARS_SERVED, 1, 1).unwrap_or_default()
}

impl DataFile {
    /// What it serves, as `docpipe emulate` says at start: each organization with its keys,
    /// projects and assistant domains, the limits and the faults that are on. The keys are the
    /// file's own (test keys, never a real one).
    pub fn served(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let keys = |kind: &str, keys: &[String]| {
            (!keys.is_empty()).then(|| format!("{kind} {}", keys.join(", ")))
        };
        for o in &self.organizations {
            let all: Vec<String> = [
                keys("admin keys", &o.admin_keys),
                keys("read-only admin keys", &o.read_only_admin_keys),
                keys("assistant keys", &o.assistant_keys),
                keys("expired keys", &o.expired_keys),
                keys("user keys", &o.user_keys),
            ]
            .into_iter()
            .flatten()
            .collect();
            let _ = writeln!(out, "organization {}: {}", o.id, all.join("; "));
            for p in self.projects.iter().filter(|p| p.organization == o.id) {
                let lacks = if p.not_in_plan.is_empty() {
                    String::new()
                } else {
                    format!("; not in its plan: {}", p.not_in_plan.join(", "))
                };
                let _ = writeln!(
                    out,
                    "  project {}: {} pages, about {} views a weekday{lacks}",
                    p.id, p.pages, p.daily_views
                );
            }
            for d in self.domains.iter().filter(|d| d.organization == o.id) {
                let _ = writeln!(
                    out,
                    "  assistant domain {}: answers from {}",
                    d.id, d.project
                );
            }
        }
        let l = &self.limits;
        let _ = writeln!(
            out,
            "data from {} (seed {}); limits an hour: {} analytics requests an organization, {} agent-job writes a project, {} assistant messages an organization; jobs run {} s",
            self.start_date,
            self.seed,
            l.analytics_per_hour,
            l.agent_per_hour,
            l.assistant_per_hour,
            l.job_duration_secs
        );
        out
    }
}

/// Where a planted reader's text goes.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReaderKind {
    /// A search term nobody clicks a result of (it ranks as a search gap).
    Search,
    /// An assistant question it cannot answer (an unanswered question).
    Question,
    /// A feedback comment with a thumbs down.
    Feedback,
}

/// A text a reader writes every day: `[[readers]]` in the data file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReaderText {
    /// The project whose readers write it.
    pub project: String,
    /// A search term, a question or a feedback comment.
    pub kind: ReaderKind,
    /// The text, as the reader typed it.
    pub text: String,
    /// How many times a day (searches: hits; questions: one-turn conversations; feedback:
    /// entries), spread evenly over the day.
    #[serde(default = "default_per_day")]
    pub per_day: u32,
}

const fn default_per_day() -> u32 {
    50
}

/// The longest planted text, in bytes.
pub const MAX_READER_TEXT: usize = 200_000;

fn default_brand() -> String {
    "mint".to_string()
}

/// An organization owns projects and domains; keys belong to it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Organization {
    /// Identifier.
    pub id: String,
    /// Admin keys (`<brand>_...`) accepted for analytics and agent jobs.
    #[serde(default)]
    pub admin_keys: Vec<String>,
    /// Admin keys that may only be used for GET requests (a non-GET gets 403).
    #[serde(default)]
    pub read_only_admin_keys: Vec<String>,
    /// Assistant keys (`<brand>_dsc_...`).
    #[serde(default)]
    pub assistant_keys: Vec<String>,
    /// Keys of the third kind (`<brand>_us_...`), valid for no operation served here.
    #[serde(default)]
    pub user_keys: Vec<String>,
    /// Keys that once existed and have expired (401).
    #[serde(default)]
    pub expired_keys: Vec<String>,
}

/// A documentation project and the shape of its traffic.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    /// Identifier, as in API paths.
    pub id: String,
    /// Owning organization.
    pub organization: String,
    /// Number of pages the project has ever had.
    pub pages: u32,
    /// Expected views per weekday over the whole site, before growth.
    pub daily_views: f64,
    /// Site-wide AI share on the start date (0 to 1).
    #[serde(default = "default_ai_start")]
    pub ai_share_start: f64,
    /// Site-wide AI share after `ai_ramp_days` (0 to 1).
    #[serde(default = "default_ai_end")]
    pub ai_share_end: f64,
    /// Days over which the AI share rises from start to end.
    #[serde(default = "default_ramp")]
    pub ai_ramp_days: u32,
    /// Fraction of pages that appear after the start date or disappear before today.
    #[serde(default = "default_churn")]
    pub churn: f64,
    /// Analytics datasets the project's plan lacks (`page_views`, `visitors`, `searches`,
    /// `feedback`, `feedback_by_page`, `assistant`, `caller_stats`, `threads`): a 403.
    #[serde(default)]
    pub not_in_plan: Vec<String>,
}

const fn default_ai_start() -> f64 {
    0.08
}
const fn default_ai_end() -> f64 {
    0.45
}
const fn default_ramp() -> u32 {
    365
}
const fn default_churn() -> f64 {
    0.15
}

/// An assistant domain answers from one project's pages.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    /// Identifier, as in the assistant path.
    pub id: String,
    /// Owning organization.
    pub organization: String,
    /// Project whose pages answer questions.
    pub project: String,
}

/// How an agent job ends after it runs.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// Completed with a pull request.
    #[default]
    Completed,
    /// Completed, no files changed (prLink stays null).
    NoChanges,
    /// Failed.
    Failed,
}

/// Initial status of a seeded job.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SeedStatus {
    /// Running; ends after the job duration.
    Active,
    /// Already completed.
    #[default]
    Completed,
    /// Archived.
    Archived,
    /// Failed.
    Failed,
}

/// An agent job that exists when the emulator starts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSeed {
    /// Identifier.
    pub id: String,
    /// Project.
    pub project: String,
    /// Source repository.
    pub repository: String,
    /// Branch.
    #[serde(default)]
    pub r#ref: Option<String>,
    /// Starting status.
    #[serde(default)]
    pub status: SeedStatus,
    /// How the job ends each time it runs.
    #[serde(default)]
    pub outcome: JobOutcome,
}

/// The data file's `[impact]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImpactData {
    /// Days after the job ended before its change shows (from the start of that day).
    #[serde(default = "default_delay")]
    pub delay_days: u32,
    /// How much better a responding key gets: page views x (1 + change); a term's searches
    /// without a click x (1 - change); a question's unanswered turns answered with this chance.
    #[serde(default = "default_change")]
    pub change: f64,
    /// Every this many keys named (of each kind, in the prompt's order), one responds: the
    /// 1st, the (1 + n)th, ...; 1: all of them; 0: none.
    #[serde(default = "default_every")]
    pub respond_every: u32,
}

const fn default_delay() -> u32 {
    2
}
const fn default_change() -> f64 {
    0.5
}
const fn default_every() -> u32 {
    2
}

impl Default for ImpactData {
    fn default() -> Self {
        Self {
            delay_days: default_delay(),
            change: default_change(),
            respond_every: default_every(),
        }
    }
}

impl ImpactData {
    /// What is wrong with it, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !(0.0..=1.0).contains(&self.change) {
            out.push(format!(
                "impact.change = {}: must be between 0 and 1",
                self.change
            ));
        }
        if self.delay_days > 366 {
            out.push(format!(
                "impact.delay_days = {}: must be at most 366",
                self.delay_days
            ));
        }
        out
    }
}

/// Rate limits, per hour.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Analytics requests per organization per hour, shared by all analytics calls.
    #[serde(default = "docpipe_catalog::service::limits::analytics")]
    pub analytics_per_hour: u32,
    /// Follow-ups and job creations per project per hour.
    #[serde(default = "docpipe_catalog::service::limits::agent")]
    pub agent_per_hour: u32,
    /// Assistant messages per organization per hour.
    #[serde(default = "docpipe_catalog::service::limits::assistant")]
    pub assistant_per_hour: u32,
    /// Seconds an agent job stays active before it ends.
    #[serde(default = "default_job_secs")]
    pub job_duration_secs: u64,
}

const fn default_job_secs() -> u64 {
    3
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            analytics_per_hour: docpipe_catalog::service::limits::analytics(),
            agent_per_hour: docpipe_catalog::service::limits::agent(),
            assistant_per_hour: docpipe_catalog::service::limits::assistant(),
            job_duration_secs: default_job_secs(),
        }
    }
}

/// Order of rows within one page of a page-views response.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum RowOrder {
    /// Most viewed first, then by path.
    #[default]
    Stable,
    /// Shuffled anew for every request (the set of rows in each page stays the same).
    Shuffled,
}

/// Injected faults; all off by default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Seed of the fault dice.
    #[serde(default)]
    pub seed: u64,
    /// Fraction of responses replaced by a 500, 502 or 503.
    #[serde(default)]
    pub error_rate: f64,
    /// Every this many requests, a burst of 429s begins (0: never).
    #[serde(default)]
    pub burst_429_every: u64,
    /// Length of each 429 burst, in requests.
    #[serde(default)]
    pub burst_429_len: u64,
    /// `Retry-After` seconds sent with burst 429s.
    #[serde(default)]
    pub burst_retry_after_secs: u64,
    /// Latency added to every response, in milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// Fraction of response bodies cut off halfway (mid-JSON or mid-stream).
    #[serde(default)]
    pub cut_body_rate: f64,
    /// Fraction of connections closed before a complete response.
    #[serde(default)]
    pub drop_rate: f64,
    /// The most recent N days keep receiving late events.
    #[serde(default)]
    pub late_days: u32,
    /// Seconds of emulator time between two waves of late events.
    #[serde(default = "default_late_every")]
    pub late_every_secs: u64,
    /// Row order within a page.
    #[serde(default)]
    pub row_order: RowOrder,
    /// Human views a day's page-view totals count beyond its rows (views without a listed
    /// path): the totals exceed what the rows add up to, the same on every walk.
    #[serde(default)]
    pub unlisted_views: u64,
    /// The service reads `dateFrom` and `dateTo` as UTC days, not as the instants they name: a
    /// bound within a day takes that whole day (`dateFrom` from its start, `dateTo` to its
    /// end), so a day of another zone, or half a day, is served whole UTC days. `check --deep`
    /// finds it.
    #[serde(default)]
    pub utc_days: bool,
    /// Operations the request faults (latency, 5xx, 429 bursts, cut bodies, drops) hit:
    /// `views`, `job_create`, `job_get`, `job_message`, `assistant`, `visitors`, `searches`,
    /// `feedback`, `feedback_by_page`, `conversations`, `thread`, `caller_stats`; all when empty.
    #[serde(default)]
    pub ops: Vec<String>,
}

/// The operation names `faults.ops` accepts.
pub const FAULT_OPS: [&str; 12] = [
    "views",
    "job_create",
    "job_get",
    "job_message",
    "assistant",
    "visitors",
    "searches",
    "feedback",
    "feedback_by_page",
    "conversations",
    "thread",
    "caller_stats",
];

const fn default_late_every() -> u64 {
    600
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            seed: 0,
            error_rate: 0.0,
            burst_429_every: 0,
            burst_429_len: 0,
            burst_retry_after_secs: 0,
            latency_ms: 0,
            cut_body_rate: 0.0,
            drop_rate: 0.0,
            late_days: 0,
            late_every_secs: default_late_every(),
            row_order: RowOrder::Stable,
            unlisted_views: 0,
            utc_days: false,
            ops: Vec::new(),
        }
    }
}

/// What a key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// Admin key with full rights.
    Admin,
    /// Admin key for GET requests only.
    ReadOnlyAdmin,
    /// Assistant key.
    Assistant,
    /// A user key, valid for none of these operations.
    User,
    /// An expired key.
    Expired,
}

impl DataFile {
    /// Reads, parses and validates a data file.
    pub fn load(path: &Path) -> Result<Self, DataError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| DataError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    /// Parses and validates data file text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, DataError> {
        let data: DataFile = toml::from_str(text).map_err(|e| DataError::Parse {
            path: origin.to_string(),
            message: e.message().to_string(),
        })?;
        data.validate(origin)?;
        Ok(data)
    }

    /// Checks the file's consistency, reporting every problem at once.
    pub fn validate(&self, origin: &str) -> Result<(), DataError> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(DataError::Invalid {
                path: origin.to_string(),
                problems,
            })
        }
    }

    /// Every inconsistency in the file.
    #[expect(clippy::too_many_lines)]
    fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let brand = &self.brand;
        if brand.is_empty() || !brand.chars().all(|c| c.is_ascii_lowercase()) {
            out.push(format!("brand {brand:?} must be lowercase letters"));
        }
        let orgs: HashSet<&str> = self.organizations.iter().map(|o| o.id.as_str()).collect();
        let mut seen_keys = HashSet::new();
        for org in &self.organizations {
            let admin_like = org.admin_keys.iter().chain(&org.read_only_admin_keys);
            for key in admin_like {
                if expected_kind(brand, key) != Some(KeyKind::Admin) {
                    out.push(format!(
                        "admin key in organization {} must start with {brand}_ (not {brand}_dsc_ or {brand}_us_)",
                        org.id
                    ));
                }
            }
            for key in &org.assistant_keys {
                if expected_kind(brand, key) != Some(KeyKind::Assistant) {
                    out.push(format!(
                        "assistant key in organization {} must start with {brand}_dsc_",
                        org.id
                    ));
                }
            }
            for key in &org.user_keys {
                if expected_kind(brand, key) != Some(KeyKind::User) {
                    out.push(format!(
                        "user key in organization {} must start with {brand}_us_",
                        org.id
                    ));
                }
            }
            let all = org
                .admin_keys
                .iter()
                .chain(&org.read_only_admin_keys)
                .chain(&org.assistant_keys)
                .chain(&org.user_keys)
                .chain(&org.expired_keys);
            for key in all {
                if !seen_keys.insert(key.clone()) {
                    out.push(format!("a key of organization {} is listed twice", org.id));
                }
            }
        }
        if self.start_date < earliest_start() {
            out.push(format!(
                "start_date {} is before {}: the emulator serves at most {MAX_YEARS_SERVED} years of days",
                self.start_date,
                earliest_start()
            ));
        }
        if let Some(st) = &self.stream {
            for p in &st.projects {
                if !self.projects.iter().any(|q| &q.id == p) {
                    out.push(format!("stream: project {p} is not among the projects"));
                }
            }
            if !(0.0..=1.0).contains(&st.agent_fraction) {
                out.push("stream: agent_fraction must be between 0 and 1".to_string());
            }
        }
        let mut projects = HashSet::new();
        for p in &self.projects {
            if !projects.insert(p.id.as_str()) {
                out.push(format!("project {} is listed twice", p.id));
            }
            for d in &p.not_in_plan {
                if !docpipe_catalog::datasets::known(d) {
                    out.push(format!(
                        "project {}: not_in_plan names no dataset {d:?}",
                        p.id
                    ));
                }
            }
            if !orgs.contains(p.organization.as_str()) {
                out.push(format!(
                    "project {} names unknown organization {}",
                    p.id, p.organization
                ));
            }
            if p.pages == 0 || p.pages > 1_000_000 {
                out.push(format!(
                    "project {} has pages = {}: must be between 1 and 1000000",
                    p.id, p.pages
                ));
            }
            // Bounded so that a day's sums fit in 64 bits (and a day is generated in seconds).
            if !(p.daily_views.is_finite() && (0.0..=MAX_DAILY_VIEWS).contains(&p.daily_views)) {
                out.push(format!(
                    "project {} has daily_views = {}: must be between 0 and {MAX_DAILY_VIEWS}",
                    p.id, p.daily_views
                ));
            }
            for (name, v) in [
                ("ai_share_start", p.ai_share_start),
                ("ai_share_end", p.ai_share_end),
                ("churn", p.churn),
            ] {
                if !(0.0..=1.0).contains(&v) {
                    out.push(format!(
                        "project {} has {name} = {v}: must be between 0 and 1",
                        p.id
                    ));
                }
            }
        }
        for d in &self.domains {
            if !orgs.contains(d.organization.as_str()) {
                out.push(format!(
                    "domain {} names unknown organization {}",
                    d.id, d.organization
                ));
            }
            if !projects.contains(d.project.as_str()) {
                out.push(format!(
                    "domain {} names unknown project {}",
                    d.id, d.project
                ));
            }
        }
        for j in &self.jobs {
            if !projects.contains(j.project.as_str()) {
                out.push(format!("job {} names unknown project {}", j.id, j.project));
            }
        }
        out.extend(self.impact.problems());
        for (i, r) in self.readers.iter().enumerate() {
            if !projects.contains(r.project.as_str()) {
                out.push(format!("readers[{i}] names unknown project {}", r.project));
            }
            if r.text.trim().is_empty() || r.text.len() > MAX_READER_TEXT {
                out.push(format!(
                    "readers[{i}].text must be 1 to {MAX_READER_TEXT} bytes"
                ));
            }
            if !(1..=10_000).contains(&r.per_day) {
                out.push(format!(
                    "readers[{i}].per_day = {}: must be between 1 and 10000",
                    r.per_day
                ));
            }
        }
        let f = &self.faults;
        for (name, v) in [
            ("error_rate", f.error_rate),
            ("cut_body_rate", f.cut_body_rate),
            ("drop_rate", f.drop_rate),
        ] {
            if !(0.0..=1.0).contains(&v) {
                out.push(format!("faults.{name} = {v}: must be between 0 and 1"));
            }
        }
        if f.late_every_secs == 0 {
            out.push("faults.late_every_secs must be at least 1".to_string());
        }
        for op in &f.ops {
            if !FAULT_OPS.contains(&op.as_str()) {
                out.push(format!(
                    "faults.ops: unknown operation {op:?} (known: {})",
                    FAULT_OPS.join(", ")
                ));
            }
        }
        out
    }

    /// The kind and organization of a key, if the file knows it.
    pub fn key(&self, key: &str) -> Option<(KeyKind, &str)> {
        for org in &self.organizations {
            let lists: [(&Vec<String>, KeyKind); 5] = [
                (&org.admin_keys, KeyKind::Admin),
                (&org.read_only_admin_keys, KeyKind::ReadOnlyAdmin),
                (&org.assistant_keys, KeyKind::Assistant),
                (&org.user_keys, KeyKind::User),
                (&org.expired_keys, KeyKind::Expired),
            ];
            for (list, kind) in lists {
                if list.iter().any(|k| k == key) {
                    return Some((kind, org.id.as_str()));
                }
            }
        }
        None
    }

    /// Projects by id.
    pub fn project_map(&self) -> HashMap<&str, &Project> {
        self.projects.iter().map(|p| (p.id.as_str(), p)).collect()
    }
}

/// The kind a key's prefix says it is, for the given brand.
pub fn expected_kind(brand: &str, key: &str) -> Option<KeyKind> {
    let rest = key.strip_prefix(brand)?.strip_prefix('_')?;
    if rest.starts_with("dsc_") {
        Some(KeyKind::Assistant)
    } else if rest.starts_with("us_") {
        Some(KeyKind::User)
    } else if rest.is_empty() {
        None
    } else {
        Some(KeyKind::Admin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_too_large_and_a_start_too_early_are_refused_by_name() {
        let demo = crate::DEMO_DATA.to_string();
        let huge = regex_free_replace(
            &demo,
            "daily_views = ",
            "daily_views = 9223372036854775807 #",
        );
        let e = DataFile::parse(&huge, "d.toml").unwrap_err().to_string();
        assert!(
            e.contains("has daily_views = 9223372036854776000: must be between 0 and 10000000"),
            "{e}"
        );
        let old = regex_free_replace(&demo, "start_date = ", "start_date = \"1900-01-01\" #");
        let e = DataFile::parse(&old, "d.toml").unwrap_err().to_string();
        assert!(
            e.contains("start_date 1900-01-01 is before 1996-01-01: the emulator serves at most 30 years of days"),
            "{e}"
        );
    }

    /// `text` with the first line starting with `prefix` written as `with` then its old value.
    fn regex_free_replace(text: &str, prefix: &str, with: &str) -> String {
        let mut done = false;
        text.lines()
            .map(|l| {
                if !done && l.starts_with(prefix) {
                    done = true;
                    format!("{with}{}", &l[prefix.len()..])
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
