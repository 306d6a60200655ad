//! What the command line and the daemon share: a [`Context`] opened once per process (settings,
//! clock, the output folder's store, one rate budget, one client per organization), and the
//! pipeline's steps (`export`, `cycle`, `rules`, `plan_view`). It prints nothing: the CLI
//! prints what the steps return, the daemon logs and counts it.

pub mod cycle;
pub mod export;
pub mod lake;
pub mod plan_view;
pub mod rules;
pub mod streams;
pub mod warehouse;

use crate::api::budget::Budget;
use crate::api::{AdminKey, AssistantKey, Client, ClientSettings};
use crate::clock::SharedClock;
use crate::config::{BudgetDb, Organization, Project, Settings};
use crate::error::UserError;
use crate::events::{Events, Quiet};
use crate::export::{Exporter, Target};
use crate::remote::{Mirror, Remote, RemoteError, Synced};
use crate::rules::engine::Engine;
use crate::store::pg::{Pg, PgBudget};
use crate::store::{Folder, LockWait, SqliteBudget, Store, StoreError, state_path};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How the output folder is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// To export into it: its lock is taken (waiting for another exporter), killed runs'
    /// leftovers are swept, and its time zone is checked.
    Export,
    /// As [`Access::Export`], waiting for another exporter's lock up to this long (zero: not
    /// at all), then an error naming the holder (the commands a user or a cron runs).
    ExportWithin(std::time::Duration),
    /// Beside a process that may export into it (status, rules, queueing a backfill).
    Shared,
}

/// Whose admin keys are read from the environment when the context opens (before anything is
/// written): a missing key is a user error then, not a failure of every window later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keys {
    /// None: the clients can plan and read the state, not send.
    None,
    /// The organizations of every configured project.
    All,
    /// The organizations of these projects (each must be configured).
    Of(Vec<String>),
    /// These keys, by organization (the demo's, from the emulator's data).
    Given(BTreeMap<String, AdminKey>),
}

/// Everything a process opens once.
#[derive(Debug)]
pub struct Context {
    /// The validated config.
    pub settings: Settings,
    /// The clock.
    pub clock: SharedClock,
    folder: Arc<Folder>,
    budget: Arc<dyn Budget>,
    /// One client per organization (those without their key read cannot send analytics).
    clients: BTreeMap<String, Client>,
    events: Arc<dyn Events>,
    /// The output elsewhere (a bucket), mirrored from the local folder's working copy.
    mirror: Option<Mirror>,
    /// What the last run that forecast left due (the daemon's), read by the status while fresh.
    ahead: std::sync::Mutex<Option<Arc<plan_view::Ahead>>>,
    /// Assistant keys given as they are (the demo's), by organization, before its config's.
    assistant_keys: BTreeMap<String, AssistantKey>,
}

/// Whether two paths name the same file (which may not exist yet).
fn same_file(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| -> PathBuf {
        match (p.parent(), p.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })
            .map(|d| d.join(name))
            .unwrap_or(p.to_path_buf()),
            _ => p.to_path_buf(),
        }
    };
    norm(a) == norm(b)
}

impl Context {
    /// Opens the context: checks the projects and reads the keys `keys` names (writing nothing
    /// before), opens the output folder as `access` says and its store once, the rate budget
    /// (on the store's connection when `budget_db` is its file) and a client per organization.
    #[expect(clippy::too_many_lines)]
    pub async fn open(
        settings: Settings,
        clock: SharedClock,
        access: Access,
        keys: Keys,
    ) -> anyhow::Result<Self> {
        let wanted: Vec<&str> = match &keys {
            Keys::None | Keys::Given(_) => Vec::new(),
            Keys::All => settings
                .projects
                .iter()
                .map(|p| p.organization.as_str())
                .collect(),
            Keys::Of(projects) => projects
                .iter()
                .map(|p| Ok(configured(&settings, p)?.organization.as_str()))
                .collect::<Result<_, UserError>>()?,
        };
        let mut admin_keys: BTreeMap<String, AdminKey> = match keys {
            Keys::Given(given) => given,
            _ => BTreeMap::new(),
        };
        for org in &settings.organizations {
            if !wanted.contains(&org.id.as_str()) {
                continue;
            }
            if let Some(origin) = &org.admin_key {
                let key = AdminKey::read(origin, &settings.brand)
                    .map_err(|e| UserError::new(format!("organization {}: {e}", org.id)))?;
                admin_keys.insert(org.id.clone(), key);
            }
        }
        let out = settings.output_dir.clone();
        // The bucket first: wrong credentials, a missing bucket or an unreachable endpoint
        // stop the command before anything is written.
        let remote = match &settings.output {
            Some(location) => {
                let remote = Remote::open(location).map_err(RemoteError::into_anyhow)?;
                remote.check().await.map_err(RemoteError::into_anyhow)?;
                Some(remote)
            }
            None => None,
        };
        // A shared database is reached before anything is written here (one connection when
        // the state and the budget name the same one).
        let open = |url: &str| {
            Pg::open(url)
                .map(Arc::new)
                .map_err(|e| UserError::new(e.to_string()))
        };
        let state = settings.state_url.as_deref().map(open).transpose()?;
        let shared = match (&settings.budget_db, &state) {
            (BudgetDb::Postgres(url), Some(pg)) if pg.name() == url => Some(pg.clone()),
            (BudgetDb::Postgres(url), _) => Some(open(url)?),
            (BudgetDb::File(_), _) => None,
        };
        let folder = match access {
            Access::Export => {
                Folder::open_for_export(&out, settings.timezone.name(), state, LockWait::Forever)
                    .await
            }
            Access::ExportWithin(d) => {
                Folder::open_for_export(&out, settings.timezone.name(), state, LockWait::Up(d))
                    .await
            }
            Access::Shared => Folder::open_shared(&out, state),
        }
        .map_err(folder_error)?;
        if access != Access::Shared {
            // Where everything is, absolute: a relative path never surprises in a log.
            let abs = |p: &Path| {
                std::fs::canonicalize(p)
                    .or_else(|_| std::path::absolute(p))
                    .unwrap_or_else(|_| p.to_path_buf())
            };
            // The config is a file, or the demo's embedded one (named as it is); the state is
            // the folder's file, or a database's URL.
            let origin = Path::new(&settings.origin);
            let config = if origin.is_file() {
                abs(origin).display().to_string()
            } else {
                settings.origin.clone()
            };
            let state = match folder.store().sql() {
                crate::store::sql::Sql::Lite(_) => abs(&state_path(&out)).display().to_string(),
                other => other.name().to_string(),
            };
            tracing::info!(
                version = env!("CARGO_PKG_VERSION"),
                config = %config,
                output = %settings.output.as_ref().map_or_else(|| abs(&out).display().to_string(), ToString::to_string),
                state = %state,
                rules = %abs(&settings.rules_dir).display(),
                "docpipe {}",
                env!("CARGO_PKG_VERSION")
            );
        }
        let budget: Arc<dyn Budget> = match &settings.budget_db {
            BudgetDb::Postgres(_) => Arc::new(PgBudget::new(
                shared.expect("opened above for a PostgreSQL budget_db"),
            )),
            BudgetDb::File(file) if same_file(file, &state_path(&out)) => {
                Arc::new(SqliteBudget::on(folder.store().db().clone())?)
            }
            BudgetDb::File(file) => {
                if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        UserError::new(format!(
                            "budget_db folder {}: cannot create it: {e}",
                            dir.display()
                        ))
                    })?;
                }
                Arc::new(SqliteBudget::open(file).map_err(UserError::from_source)?)
            }
        };
        let mirror = remote
            .map(|r| Mirror::new(r, &out, folder.store().db().clone()))
            .transpose()?;
        let folder = Arc::new(folder);
        let recorder: Arc<dyn Events> = Arc::new(crate::store::Recorder::new(folder.clone()));
        let mut clients = BTreeMap::new();
        for org in &settings.organizations {
            let client = Client::new(
                client_settings(&settings, org),
                &org.id,
                admin_keys.remove(&org.id),
                None,
                clock.clone(),
                budget.clone(),
            )
            .recording_into(recorder.clone());
            clients.insert(org.id.clone(), client);
        }
        Ok(Self {
            settings,
            clock,
            folder,
            budget,
            clients,
            events: Arc::new(Quiet),
            mirror,
            ahead: std::sync::Mutex::default(),
            assistant_keys: BTreeMap::new(),
        })
    }

    /// Opens the context beside a process that may export into the folder, with no key: to
    /// read the state (status) or queue work.
    pub async fn shared(settings: Settings, clock: SharedClock) -> anyhow::Result<Self> {
        Self::open(settings, clock, Access::Shared, Keys::None).await
    }

    /// Sends what the steps wrote to the output when it is elsewhere (a bucket); `None` when
    /// the output is the local folder.
    pub async fn push(&self) -> anyhow::Result<Option<Synced>> {
        let Some(m) = &self.mirror else {
            return Ok(None);
        };
        let done = m.push().await.map_err(RemoteError::into_anyhow)?;
        tracing::info!(
            output = m.name(),
            files = done.files,
            bytes = done.bytes,
            deleted = done.deleted,
            "output sent"
        );
        Ok(Some(done))
    }

    /// Fetches what the output has that the working copy lacks (before reading the tables).
    pub async fn pull(&self) -> anyhow::Result<Option<Synced>> {
        let Some(m) = &self.mirror else {
            return Ok(None);
        };
        let done = m.pull().await.map_err(RemoteError::into_anyhow)?;
        tracing::info!(
            output = m.name(),
            files = done.files,
            bytes = done.bytes,
            "output fetched"
        );
        Ok(Some(done))
    }

    /// Reports the exports' progress and the budget waits to `events`.
    pub fn with_events(mut self, events: Arc<dyn Events>) -> Self {
        for c in self.clients.values_mut() {
            *c = c.clone().with_events(events.clone());
        }
        self.events = events;
        self
    }

    /// What is due and what is left now: the last run's while it is fresh (see
    /// [`plan_view::Ahead::fresh`]), else planned and forecast again (reads the state; sends
    /// nothing).
    pub fn ahead(&self) -> anyhow::Result<Arc<plan_view::Ahead>> {
        let last = self.ahead.lock().ok().and_then(|a| a.clone());
        if let Some(a) = last.filter(|a| a.fresh(self)) {
            return Ok(a);
        }
        plan_view::Ahead::now(self).map(Arc::new)
    }

    /// Plans and forecasts what is due now, kept for the status while fresh: after a run.
    pub(crate) fn plan_ahead(&self) -> anyhow::Result<Arc<plan_view::Ahead>> {
        let ahead = Arc::new(plan_view::Ahead::now(self)?);
        if let Ok(mut slot) = self.ahead.lock() {
            *slot = Some(ahead.clone());
        }
        Ok(ahead)
    }

    /// The output folder.
    pub fn output(&self) -> &Path {
        self.folder.path()
    }

    /// The output folder's store.
    pub fn store(&self) -> &Store {
        self.folder.store()
    }

    /// The shared rate budget.
    /// The client of an organization.
    pub fn client(&self, org: &str) -> Option<&Client> {
        self.clients.get(org)
    }

    /// What a person has to do about each organization's admin key (refused after it worked,
    /// or used for 80 days or more), as the state records the service's answers: `key <org>:`
    /// and the line `status` and the page show.
    pub fn key_warnings(&self) -> anyhow::Result<Vec<String>> {
        let now = self.clock.now();
        let records = self.store().key_records()?;
        Ok(self
            .settings
            .organizations
            .iter()
            .filter_map(|o| {
                let k = records.iter().find(|k| k.org == o.id)?;
                Some(format!(
                    "key {}: {}",
                    o.id,
                    k.warning(now, o.admin_key.as_ref())?
                ))
            })
            .collect())
    }

    /// Reads every organization's keys again from their files or variables (a run's start):
    /// a rotated key file needs no restart.
    pub fn reread_keys(&self) {
        for c in self.clients.values() {
            c.reread_keys();
        }
    }

    /// The rate budget every client counts in.
    pub fn budget(&self) -> &Arc<dyn Budget> {
        &self.budget
    }

    /// The selected projects (all when `selected` is empty) with their clients and first days.
    pub fn targets(&self, selected: &[String]) -> Result<Vec<Target>, UserError> {
        let today = self.settings.today(self.clock.now());
        let mut out = Vec::new();
        for p in selected {
            configured(&self.settings, p)?;
        }
        for p in self
            .settings
            .projects
            .iter()
            .filter(|p| selected.is_empty() || selected.contains(&p.id))
        {
            let client = self.clients.get(&p.organization).ok_or_else(|| {
                UserError::new(format!("project {} names an unknown organization", p.id))
            })?;
            out.push(Target {
                project: p.id.clone(),
                client: client.clone(),
                start: Some(p.first_day(today)),
                datasets: p.datasets.clone(),
            });
        }
        Ok(out)
    }

    /// How the span datasets re-fetch and how many threads a run fetches, as the config says.
    pub fn shaped_settings(&self) -> crate::export::ShapedSettings {
        crate::export::ShapedSettings {
            feedback_recheck_days: self.settings.feedback_recheck_days,
            assistant_overlap_days: self.settings.assistant_overlap_days,
            threads_per_run: self.settings.threads_per_run,
        }
    }

    /// The exporter of the output folder (it must have been opened with [`Access::Export`]).
    pub fn exporter(&self) -> Exporter {
        Exporter::new(
            self.folder.clone(),
            self.clock.clone(),
            self.settings.lookback_days,
            self.settings.timezone,
        )
        .with_shaped(self.shaped_settings())
        .with_origins(
            self.settings
                .project_lines
                .iter()
                .map(|(p, line)| (p.clone(), format!("{} line {line}", self.settings.origin)))
                .collect(),
        )
        .with_freshness(self.settings.freshness.clone())
        .with_events(self.events.clone())
        .with_lease(
            chrono::Duration::from_std(self.settings.window_lease)
                .unwrap_or(chrono::Duration::minutes(2)),
        )
    }

    /// The rules' engine: the store's ledger, the shared budget, and a client per project.
    pub fn engine(&self) -> Result<Engine, StoreError> {
        let clients = self
            .settings
            .projects
            .iter()
            .filter_map(|p| Some((p.id.clone(), self.clients.get(&p.organization)?.clone())))
            .collect();
        Ok(Engine::with_ledger(
            self.output(),
            self.store().ledger(),
            self.budget.clone(),
            self.settings.agent_limits(),
            self.clock.clone(),
        )?
        .with_days(
            self.settings.timezone,
            self.shaped_settings().settle(self.settings.lookback_days),
        )
        .with_review_expires(self.settings.review_expires)
        .with_clients(clients)
        .with_askers(self.askers()))
    }

    /// Uses these assistant keys (by organization) instead of reading the config's.
    pub fn with_assistant_keys(mut self, keys: BTreeMap<String, AssistantKey>) -> Self {
        self.assistant_keys = keys;
        self
    }

    /// Where each project's questions are asked again: its organization's assistant (its
    /// domain and key; the asks count in the shared request log's assistant hour), or why not.
    fn askers(&self) -> std::collections::HashMap<String, crate::rules::engine::Asker> {
        use crate::rules::engine::Asker;
        let asker = |org: &Organization| -> Asker {
            let Some(domain) = org.assistant_domain.clone() else {
                return Asker::Missing(format!("organization {} has no assistant_domain", org.id));
            };
            let read = match (self.assistant_keys.get(&org.id), &org.assistant_key) {
                (Some(given), _) => Ok(given.clone()),
                (None, Some(origin)) => AssistantKey::read(origin, &self.settings.brand),
                (None, None) => {
                    return Asker::Missing(format!(
                        "organization {} has no assistant key (assistant_key_env or assistant_key_file)",
                        org.id
                    ));
                }
            };
            match read {
                Ok(key) => Asker::Ready {
                    client: Box::new(Client::new(
                        client_settings(&self.settings, org),
                        &org.id,
                        None,
                        Some(key),
                        self.clock.clone(),
                        self.budget.clone(),
                    )),
                    domain,
                },
                Err(e) => Asker::Missing(format!("organization {}: {e}", org.id)),
            }
        };
        self.settings
            .projects
            .iter()
            .filter_map(|p| {
                Some((
                    p.id.clone(),
                    asker(self.settings.organization(&p.organization)?),
                ))
            })
            .collect()
    }
}

/// The configured project `id`; one that is not configured is the user's error.
pub fn configured<'a>(settings: &'a Settings, id: &str) -> Result<&'a Project, UserError> {
    settings
        .projects
        .iter()
        .find(|p| p.id == id)
        .ok_or_else(|| {
            UserError::new(format!(
                "project {id} is not configured in {}",
                settings.origin
            ))
        })
}

/// A folder that cannot be used is the user's to fix; a database that fails is not.
fn folder_error(e: StoreError) -> anyhow::Error {
    match e {
        e @ StoreError::Folder { .. } => UserError::from_source(e).into(),
        e => e.into(),
    }
}

/// The client settings of an organization.
fn client_settings(settings: &Settings, org: &Organization) -> ClientSettings {
    ClientSettings {
        base_url: settings.base_url.clone(),
        timeout: settings.timeout,
        retry: settings.retry,
        limits: org.limits,
        record: settings.record.clone(),
    }
}

/// A client for an organization's assistant, with its assistant key read from the environment
/// and a budget of its own process (the assistant's limit is per key and generous).
pub fn assistant_client(
    settings: &Settings,
    org: &Organization,
    clock: SharedClock,
) -> anyhow::Result<Client> {
    let key = match &org.assistant_key {
        Some(origin) => Some(
            AssistantKey::read(origin, &settings.brand)
                .map_err(|e| UserError::new(format!("organization {}: {e}", org.id)))?,
        ),
        None => None,
    };
    Ok(Client::new(
        client_settings(settings, org),
        &org.id,
        None,
        key,
        clock,
        Arc::new(crate::api::budget::MemoryBudget::default()),
    ))
}
