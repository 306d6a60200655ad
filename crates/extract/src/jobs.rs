//! Agent jobs: create, get, follow-up, and `wait` until the job ends.

use super::{ApiError, Call, Client, ErrorKind, Operation, escape};
use bytes::Bytes;
use reqwest::Method;
use serde::Deserialize;
use std::time::Duration;

/// A job's status; an unknown word is kept, not refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    /// Running.
    Active,
    /// Finished successfully.
    Completed,
    /// Archived.
    Archived,
    /// Failed.
    Failed,
    /// A status this client does not know.
    Other(String),
}

impl JobStatus {
    /// Whether polling stops here.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Archived | JobStatus::Failed
        )
    }

    /// The status a word of the service's names (an unknown word is kept).
    pub fn from_word(s: &str) -> Self {
        match s {
            "active" => JobStatus::Active,
            "completed" => JobStatus::Completed,
            "archived" => JobStatus::Archived,
            "failed" => JobStatus::Failed,
            _ => JobStatus::Other(s.to_string()),
        }
    }

    /// The service's word.
    pub fn as_str(&self) -> &str {
        match self {
            JobStatus::Active => "active",
            JobStatus::Completed => "completed",
            JobStatus::Archived => "archived",
            JobStatus::Failed => "failed",
            JobStatus::Other(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for JobStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(JobStatus::from_word(&String::deserialize(d)?))
    }
}

/// The job's source repository.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Source {
    /// Repository.
    #[serde(default)]
    pub repository: Option<String>,
    /// Branch or other reference.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
}

/// An agent job, decoded defensively: the service marks no field required.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Job {
    /// Identifier.
    #[serde(default)]
    pub id: Option<String>,
    /// Status.
    #[serde(default)]
    pub status: Option<JobStatus>,
    /// Source repository.
    #[serde(default)]
    pub source: Option<Source>,
    /// Model.
    #[serde(default)]
    pub model: Option<String>,
    /// Pull request link.
    #[serde(default, rename = "prLink")]
    pub pr_link: Option<String>,
    /// Creation time.
    #[serde(default, rename = "createdAt")]
    pub created_at: Option<String>,
    /// Archive time.
    #[serde(default, rename = "archivedAt")]
    pub archived_at: Option<String>,
}

impl Job {
    /// The status word, `unknown` when absent.
    pub fn status_str(&self) -> &str {
        self.status.as_ref().map_or("unknown", JobStatus::as_str)
    }

    /// Whether the job has ended.
    pub fn is_terminal(&self) -> bool {
        self.status.as_ref().is_some_and(JobStatus::is_terminal)
    }
}

fn decode_job(body: &[u8]) -> Result<Job, String> {
    serde_json::from_slice(body).map_err(|e| format!("job body: {e}"))
}

/// What an automation's trigger started (`202`): the automation, the run, and its agent job
/// (the premise, which docs/service.md states: the job is read with the agent-job operations).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Triggered {
    /// The automation (`schemaId`).
    #[serde(rename = "schemaId")]
    pub schema_id: String,
    /// The run (`instanceId`).
    #[serde(rename = "instanceId")]
    pub instance_id: String,
    /// The run's agent job (`jobId`), when the service gives one.
    #[serde(rename = "jobId", default)]
    pub job_id: Option<String>,
}

fn decode_triggered(body: &[u8]) -> Result<Triggered, String> {
    serde_json::from_slice(body).map_err(|e| format!("trigger body: {e}"))
}

/// Polling schedule of `wait`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Polling {
    /// First wait.
    pub first: Duration,
    /// Largest wait.
    pub max: Duration,
    /// Give up after this long.
    pub timeout: Duration,
}

impl Default for Polling {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(30),
            timeout: Duration::from_secs(1800),
        }
    }
}

impl Client {
    fn job_call(
        &self,
        operation: Operation,
        project: &str,
        job: Option<&str>,
        prompt: Option<&str>,
    ) -> Call {
        let limits = self.settings().limits;
        let (method, path, target) = match (operation, job) {
            (Operation::CreateJob, _) => (
                Method::POST,
                format!("/v2/agent/{}/job", escape(project)),
                format!("project {project}"),
            ),
            (Operation::TriggerAutomation, Some(id)) => (
                Method::POST,
                format!("/v1/workflow/{}/{}/trigger", escape(project), escape(id)),
                format!("automation {id} of project {project}"),
            ),
            (Operation::FollowUp, Some(id)) => (
                Method::POST,
                format!("/v2/agent/{}/job/{}/message", escape(project), escape(id)),
                format!("job {id} of project {project}"),
            ),
            (_, id) => {
                let id = id.unwrap_or_default();
                (
                    Method::GET,
                    format!("/v2/agent/{}/job/{}", escape(project), escape(id)),
                    format!("job {id} of project {project}"),
                )
            }
        };
        let writes = method == Method::POST;
        Call {
            operation,
            target,
            method,
            path,
            query: Vec::new(),
            body: prompt.map(|p| Bytes::from(serde_json::json!({ "prompt": p }).to_string())),
            budget: writes.then(|| {
                (
                    format!("agent:{project}"),
                    limits.effective(limits.agent_per_hour),
                )
            }),
            admin: true,
            // A follow-up waits for no one: when the hour's follow-ups are used up, the caller
            // hears so at once and decides (the rules try again on a later run).
            wait_for_budget: !writes,
            streams: false,
            project: None,
        }
    }

    fn empty_prompt(&self, call: &Call) -> ApiError {
        ApiError {
            operation: call.operation,
            target: call.target.clone(),
            kind: ErrorKind::NotSent {
                message: "prompt must be at least 1 character".into(),
            },
        }
    }

    /// Creates a job with a prompt. Not idempotent: retried only when it surely did not arrive.
    pub async fn create_job(&self, project: &str, prompt: &str) -> Result<Job, ApiError> {
        let call = self.job_call(Operation::CreateJob, project, None, Some(prompt));
        if prompt.is_empty() {
            return Err(self.empty_prompt(&call));
        }
        self.send_json(&call, decode_job).await
    }

    /// Starts a run of an automation of `project` (an active *Custom schedule* one). Not
    /// idempotent: retried only when it surely did not arrive.
    pub async fn trigger(&self, project: &str, automation: &str) -> Result<Triggered, ApiError> {
        let call = self.job_call(
            Operation::TriggerAutomation,
            project,
            Some(automation),
            None,
        );
        self.send_json(&call, decode_triggered).await
    }

    /// Reads a job.
    pub async fn get_job(&self, project: &str, job: &str) -> Result<Job, ApiError> {
        let call = self.job_call(Operation::GetJob, project, Some(job), None);
        self.send_json(&call, decode_job).await
    }

    /// Sends a follow-up instruction. Not idempotent: retried only when it surely did not arrive;
    /// otherwise an `OutcomeUnknown` error tells the caller to read the job.
    pub async fn follow_up(&self, project: &str, job: &str, prompt: &str) -> Result<Job, ApiError> {
        let call = self.job_call(Operation::FollowUp, project, Some(job), Some(prompt));
        if prompt.is_empty() {
            return Err(self.empty_prompt(&call));
        }
        self.send_json(&call, decode_job).await
    }

    /// Polls a job with capped backoff until it is completed, archived or failed, or the
    /// timeout passes (`WaitTimeout`). Errors of `get_job` end the wait.
    pub async fn wait_job(
        &self,
        project: &str,
        job: &str,
        polling: Polling,
    ) -> Result<Job, ApiError> {
        let start = self.clock().now();
        let mut delay = polling.first;
        loop {
            let current = self.get_job(project, job).await?;
            if current.is_terminal() {
                return Ok(current);
            }
            let waited = (self.clock().now() - start).to_std().unwrap_or_default();
            if waited >= polling.timeout {
                return Err(ApiError {
                    operation: Operation::GetJob,
                    target: format!("job {job} of project {project}"),
                    kind: ErrorKind::WaitTimeout {
                        status: current.status_str().to_string(),
                        waited,
                    },
                });
            }
            self.clock()
                .sleep(delay.min(polling.timeout - waited))
                .await;
            delay = (delay * 2).min(polling.max);
        }
    }
}
