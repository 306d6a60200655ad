//! The client's one error type: what happened, in a user's terms, naming the operation and target.

use std::time::Duration;

/// An operation of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// GET page views.
    PageViews,
    /// POST create agent job.
    CreateJob,
    /// GET agent job.
    GetJob,
    /// POST follow-up message.
    FollowUp,
    /// POST assistant message.
    AssistantMessage,
    /// POST an automation's trigger.
    TriggerAutomation,
    /// GET of another analytics dataset (its name).
    Analytics(&'static str),
}

impl Operation {
    /// A short name for logs and errors.
    pub fn name(self) -> &'static str {
        match self {
            Operation::PageViews => "page views",
            Operation::CreateJob => "create job",
            Operation::GetJob => "get job",
            Operation::FollowUp => "follow-up",
            Operation::AssistantMessage => "assistant message",
            Operation::TriggerAutomation => "trigger",
            Operation::Analytics(name) => name,
        }
    }

    /// The analytics dataset it reads, if it reads one.
    pub fn dataset(self) -> Option<&'static str> {
        match self {
            Operation::PageViews => Some(docpipe_catalog::datasets::PAGE_VIEWS),
            Operation::Analytics(name) => Some(name),
            _ => None,
        }
    }

    /// Whether it is an agent job's (created, read, followed up, or started by an
    /// automation's trigger): counted as purpose `job`, outside the analytics budget.
    pub fn is_job(self) -> bool {
        matches!(
            self,
            Operation::CreateJob
                | Operation::GetJob
                | Operation::FollowUp
                | Operation::TriggerAutomation
        )
    }

    /// Whether sending it twice is harmless.
    pub fn idempotent(self) -> bool {
        !matches!(
            self,
            Operation::CreateJob | Operation::FollowUp | Operation::TriggerAutomation
        )
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// 401 (or no key to send).
    #[error(
        "the service refused the {key} key of organization {organization} ({message}); check the key in {source_name}"
    )]
    BadKey {
        /// `admin` or `assistant`.
        key: &'static str,
        /// The organization whose key it is (boxed, as the next: the errors stay small).
        organization: Box<str>,
        /// Where the key came from: its environment variable's name (or "its environment
        /// variable" when none was read).
        source_name: Box<str>,
        /// `401: ` and the service's words, or why nothing was sent.
        message: String,
    },
    /// 404 of an operation on a project: the service does not know the project.
    #[error("project '{project}' is unknown to the service (404: {message})")]
    UnknownProject {
        /// The project id as the config gives it.
        project: String,
        /// The service's words.
        message: String,
    },
    /// 403.
    #[error(
        "forbidden (403: {message}); the key may be of the wrong kind, read-only, outside its IP allow-list, or the plan lacks this feature"
    )]
    Forbidden {
        /// The service's message.
        message: String,
    },
    /// 404.
    #[error("not found (404: {message})")]
    NotFound {
        /// The service's message.
        message: String,
    },
    /// 400.
    #[error("invalid request (400: {message})")]
    Invalid {
        /// The service's message and details.
        message: String,
    },
    /// A check made before sending failed: nothing was sent.
    #[error("not sent: {message}")]
    NotSent {
        /// What is wrong.
        message: String,
    },
    /// 429.
    #[error("rate limited (429){}", match (.retry_after, .next_slot) {
        (Some(d), _) => format!(", retry after {}s", d.as_secs()),
        (None, Some(d)) => format!(" without Retry-After; the hour's next slot is in {}s", d.as_secs()),
        (None, None) => String::new(),
    })]
    RateLimited {
        /// The service's `Retry-After`.
        retry_after: Option<Duration>,
        /// Without `Retry-After`: until the hour's next slot of the call's budget, as far as
        /// docpipe can tell (the wait it takes instead of a quick retry).
        next_slot: Option<Duration>,
    },
    /// 408.
    #[error("the service timed out the request (408)")]
    RequestTimeout,
    /// 5xx.
    #[error("server error ({status}: {message})")]
    Server {
        /// Status code.
        status: u16,
        /// The service's message.
        message: String,
    },
    /// Another status.
    #[error("unexpected status {status}: {message}")]
    Unexpected {
        /// Status code.
        status: u16,
        /// Body text.
        message: String,
    },
    /// No answer in time.
    #[error("timed out after {}s", .0.as_secs())]
    Timeout(Duration),
    /// The connection could not be made: the request certainly did not reach the service.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The connection failed after the request was sent.
    #[error("connection failed: {0}")]
    Connection(String),
    /// The body is not what the service documents.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// A state-changing request may or may not have been applied.
    #[error("outcome unknown ({0}); read the job to see whether it was applied")]
    OutcomeUnknown(String),
    /// Paging did not end as it should.
    #[error("paging stopped: {0}")]
    Paging(String),
    /// A polled job did not finish in time.
    #[error("still {status} after {}s", .waited.as_secs())]
    WaitTimeout {
        /// Last status seen.
        status: String,
        /// Time waited.
        waited: Duration,
    },
    /// docpipe's own budget for this operation is used up: nothing was sent.
    #[error("the limit of {limit} per hour is used up (next slot in {}s); not sent", .wait.as_secs())]
    LimitReached {
        /// The limit docpipe keeps to.
        limit: u32,
        /// Until a slot frees.
        wait: Duration,
    },
    /// The rate budget's store failed: nothing was sent (sending without it could go over the
    /// service's limits).
    #[error("rate budget unavailable, nothing sent: {0}")]
    Budget(String),
    /// The assistant's stream reported an error or could not be parsed.
    #[error("stream: {0}")]
    Stream(String),
}

/// A client error: operation, target (project, job or domain) and what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation} for {target}: {kind}")]
pub struct ApiError {
    /// The operation.
    pub operation: Operation,
    /// What it was for: `project acme-docs`, `job job_1 of project acme-docs`, `domain acme`.
    pub target: String,
    /// What happened.
    pub kind: ErrorKind,
}

impl ApiError {
    /// Whether a retry may succeed (the backoff decides when).
    pub fn retryable(&self) -> bool {
        use ErrorKind::*;
        match &self.kind {
            RateLimited { .. } | Connect(_) => true,
            RequestTimeout | Server { .. } | Timeout(_) | Connection(_) | Malformed(_) => {
                self.operation.idempotent()
            }
            _ => false,
        }
    }

    /// The wait the service asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            ErrorKind::RateLimited {
                retry_after,
                next_slot,
            } => retry_after.or(next_slot),
            _ => None,
        }
    }
}
