//! Agent jobs: create, get, and follow-up messages; jobs end after a configured delay.

use super::data::{JobOutcome, JobSeed, KeyKind, SeedStatus};
use super::{ApiError, Emulator, Limit, Reply, error};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use std::sync::Arc;

/// The model name the emulator reports.
pub const MODEL: &str = "claude-sonnet-4-5";

/// Status of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Running.
    Active,
    /// Finished.
    Completed,
    /// Archived.
    Archived,
    /// Failed.
    Failed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Completed => "completed",
            Status::Archived => "archived",
            Status::Failed => "failed",
        }
    }
}

/// One agent job.
#[derive(Debug, Clone)]
pub struct Job {
    id: String,
    repository: String,
    r#ref: Option<String>,
    status: Status,
    outcome: JobOutcome,
    pr_link: Option<String>,
    created_at: DateTime<Utc>,
    archived_at: Option<DateTime<Utc>>,
    active_since: DateTime<Utc>,
    /// Prompts received, in order (the creation prompt first).
    pub prompts: Vec<String>,
}

impl Job {
    /// A job from the data file, as it stands at `now`.
    pub fn seeded(seed: &JobSeed, now: DateTime<Utc>) -> Self {
        let status = match seed.status {
            SeedStatus::Active => Status::Active,
            SeedStatus::Completed => Status::Completed,
            SeedStatus::Archived => Status::Archived,
            SeedStatus::Failed => Status::Failed,
        };
        Self {
            id: seed.id.clone(),
            repository: seed.repository.clone(),
            r#ref: seed.r#ref.clone(),
            status,
            outcome: seed.outcome,
            pr_link: None,
            created_at: now,
            archived_at: (status == Status::Archived).then_some(now),
            active_since: now,
            prompts: Vec::new(),
        }
    }

    /// Moves an active job to its outcome once its run time has passed; when it ends with a
    /// pull request now, the time it ended and the prompt it worked on.
    fn advance(
        &mut self,
        now: DateTime<Utc>,
        run: chrono::Duration,
        pr_number: u64,
    ) -> Option<(DateTime<Utc>, String)> {
        if self.status != Status::Active || now < self.active_since + run {
            return None;
        }
        match self.outcome {
            JobOutcome::Completed => {
                self.status = Status::Completed;
                self.pr_link = Some(format!(
                    "https://github.com/{}/pull/{pr_number}",
                    self.repository
                ));
                return Some((self.active_since + run, self.prompts.last()?.clone()));
            }
            JobOutcome::NoChanges => self.status = Status::Completed,
            JobOutcome::Failed => self.status = Status::Failed,
        }
        None
    }

    fn to_json(&self) -> Value {
        let ts = |t: &DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
        json!({
            "id": self.id,
            "status": self.status.as_str(),
            "source": { "repository": self.repository, "ref": self.r#ref },
            "model": MODEL,
            "prLink": self.pr_link,
            "createdAt": ts(&self.created_at),
            "archivedAt": self.archived_at.as_ref().map(ts),
        })
    }
}

/// Parses `{"prompt": "..."}` with a non-empty prompt.
fn prompt_of(body: &Bytes) -> Result<String, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("Invalid JSON body: {e}")))?;
    match value.get("prompt") {
        Some(Value::String(p)) if !p.is_empty() => Ok(p.clone()),
        Some(Value::String(_)) => Err(error(
            StatusCode::BAD_REQUEST,
            "prompt must be at least 1 character",
        )),
        Some(_) => Err(error(StatusCode::BAD_REQUEST, "prompt must be a string")),
        None => Err(error(StatusCode::BAD_REQUEST, "prompt is required")),
    }
}

/// Auth, ownership and (for writes) the per-project agent limit.
fn admit(emu: &Emulator, headers: &HeaderMap, project: &str, write: bool) -> Result<(), ApiError> {
    let kinds: &[KeyKind] = if write {
        &[KeyKind::Admin]
    } else {
        &[KeyKind::Admin, KeyKind::ReadOnlyAdmin]
    };
    let org = emu.authorize(headers, kinds)?;
    emu.owned_project(&org, project)?;
    if write {
        emu.take(Limit::Agent, project)?;
    }
    Ok(())
}

impl Emulator {
    /// A new agent job of `project` with its first prompt, active, ending as `outcome` says (or
    /// as the project's first job does): its id and its JSON.
    fn start_job(
        &self,
        project: &str,
        prompt: String,
        outcome: Option<JobOutcome>,
    ) -> (String, Value) {
        let id = self.next_id("job");
        let now = self.now();
        let data = self.data();
        let template = data.jobs.iter().find(|j| j.project == project);
        let org = data
            .projects
            .iter()
            .find(|p| p.id == project)
            .map(|p| p.organization.clone())
            .unwrap_or_default();
        let seed = JobSeed {
            id: id.clone(),
            project: project.to_string(),
            repository: template
                .map(|t| t.repository.clone())
                .unwrap_or_else(|| format!("{org}/{project}")),
            r#ref: template
                .and_then(|t| t.r#ref.clone())
                .or(Some("main".to_string())),
            status: SeedStatus::Active,
            outcome: outcome.or(template.map(|t| t.outcome)).unwrap_or_default(),
        };
        let mut job = Job::seeded(&seed, now);
        job.prompts.push(prompt);
        let body = job.to_json();
        self.lock()
            .jobs
            .insert((project.to_string(), id.clone()), job);
        (id, body)
    }

    /// Each trigger that started a run, in order: project, automation, the run's job (for
    /// tests).
    pub fn triggers(&self) -> Vec<(String, String, String)> {
        self.lock().triggers.clone()
    }

    fn run_time(&self) -> chrono::Duration {
        chrono::Duration::seconds(self.data().limits.job_duration_secs as i64)
    }

    /// A job's current JSON, advancing it first.
    fn job_json(&self, project: &str, id: &str) -> Option<Value> {
        let now = self.now();
        let run = self.run_time();
        let pr = 100 + self.roll_u64() % 900;
        let (json, changed) = {
            let mut inner = self.lock();
            let job = inner.jobs.get_mut(&(project.to_string(), id.to_string()))?;
            let changed = job.advance(now, run, pr);
            (job.to_json(), changed)
        };
        if let Some((ended, prompt)) = changed {
            self.job_changed(project, &prompt, ended);
        }
        Some(json)
    }

    /// The prompts a job has received (for tests).
    pub fn job_prompts(&self, project: &str, id: &str) -> Option<Vec<String>> {
        self.lock()
            .jobs
            .get(&(project.to_string(), id.to_string()))
            .map(|j| j.prompts.clone())
    }
}

/// `POST /v2/agent/{project}/job`.
pub async fn create(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    admit(&emu, &headers, &project, true)?;
    let prompt = prompt_of(&body)?;
    let (_, body) = emu.start_job(&project, prompt, None);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `POST /v1/workflow/{project}/{automation}/trigger`: an active *Custom schedule*
/// automation of the project starts a run, an agent job (202 with `schemaId`, `instanceId`,
/// `jobId`; the job is read with the agent-job operations); 400 for a malformed id, an
/// inactive automation or one of another kind; 404 for one not found or of another project.
pub async fn trigger(
    State(emu): State<Arc<Emulator>>,
    Path((project, automation)): Path<(String, String)>,
    headers: HeaderMap,
) -> Reply {
    admit(&emu, &headers, &project, true)?;
    let well_formed = !automation.is_empty()
        && automation.len() <= 64
        && automation
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !well_formed {
        return Err(error(StatusCode::BAD_REQUEST, "Invalid workflow schema id"));
    }
    let data = emu.data();
    let Some(a) = data
        .automations
        .iter()
        .find(|a| a.id == automation && a.project == project)
    else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("Workflow {automation} not found"),
        ));
    };
    if !a.active {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("Workflow {automation} is not active"),
        ));
    }
    if !a.custom_schedule {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("Workflow {automation} is not a custom schedule workflow"),
        ));
    }
    let outcome = a.outcome;
    let (job, _) = emu.start_job(&project, format!("Run of automation {automation}"), outcome);
    let instance = emu.next_id("run");
    emu.lock()
        .triggers
        .push((project, automation.clone(), job.clone()));
    let body = serde_json::json!({
        "schemaId": automation,
        "instanceId": instance,
        "jobId": job,
    });
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// `GET /v2/agent/{project}/job/{id}`.
pub async fn get_job(
    State(emu): State<Arc<Emulator>>,
    Path((project, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Reply {
    admit(&emu, &headers, &project, false)?;
    match emu.job_json(&project, &id) {
        Some(v) => Ok(Json(v).into_response()),
        None => Err(error(StatusCode::NOT_FOUND, format!("Job {id} not found"))),
    }
}

/// `POST /v2/agent/{project}/job/{id}/message`: a follow-up makes a finished job active again.
pub async fn message(
    State(emu): State<Arc<Emulator>>,
    Path((project, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    admit(&emu, &headers, &project, true)?;
    let prompt = prompt_of(&body)?;
    let now = emu.now();
    let run = emu.run_time();
    let pr = 100 + emu.roll_u64() % 900;
    let (changed, body) = {
        let mut inner = emu.lock();
        let Some(job) = inner.jobs.get_mut(&(project.clone(), id.clone())) else {
            return Err(error(StatusCode::NOT_FOUND, format!("Job {id} not found")));
        };
        // A run that ended before this message keeps what its pull request changed.
        let changed = job.advance(now, run, pr);
        if job.status == Status::Archived {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("Job {id} is archived"),
            ));
        }
        job.status = Status::Active;
        job.pr_link = None;
        job.active_since = now;
        job.prompts.push(prompt);
        (changed, job.to_json())
    };
    if let Some((ended, worked_on)) = changed {
        emu.job_changed(&project, &worked_on, ended);
    }
    Ok(Json(body).into_response())
}
