//! The analytics operations beside page views: one GET, its budget and retries, decoded by the
//! caller's function (the datasets' descriptors decode; this layer knows no dataset).

use super::{ApiError, Call, Client, ErrorKind, Operation, escape};
use docpipe_catalog::calendar::Window;
use reqwest::Method;

/// Where a request of a walk starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// No paging parameter (a single response, or the first page of a cursor walk).
    Start,
    /// `offset=N`.
    Offset(u64),
    /// `cursor=C`.
    Cursor(String),
}

impl At {
    /// The page it asks for, as a message names it: `the first page`, `the page at offset 250`,
    /// `the page at cursor "k1"`.
    pub fn page_name(&self) -> String {
        match self {
            At::Start => "the first page".to_string(),
            At::Offset(o) => format!("the page at offset {o}"),
            At::Cursor(c) if c.chars().count() > 40 => {
                let start: String = c.chars().take(40).collect();
                format!("the page at cursor {start:?}...")
            }
            At::Cursor(c) => format!("the page at cursor {c:?}"),
        }
    }
}

impl Client {
    /// GETs one page of the analytics operation `name` at `path_template` (`{project}` and
    /// `{thread}` filled, escaped), for `window` when given, with `limit` when given; decodes the
    /// body with `decode`, which also gets the body's bytes to keep.
    #[allow(clippy::too_many_arguments)]
    pub async fn analytics_page<T>(
        &self,
        name: &'static str,
        path_template: &str,
        project: &str,
        thread: Option<&str>,
        window: Option<Window>,
        limit: Option<u32>,
        at: &At,
        decode: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, ApiError> {
        let mut path = path_template.replace("{project}", &escape(project));
        if let Some(t) = thread {
            path = path.replace("{thread}", &escape(t));
        }
        let mut query = Vec::new();
        let target = match (window, thread) {
            (_, Some(t)) => format!("project {project}, thread {t}"),
            (Some(w), None) => {
                let (from, to) = w.bounds();
                query.push(("dateFrom", from));
                query.push(("dateTo", to));
                format!("project {project} ({})", w.describe())
            }
            (None, None) => format!("project {project}"),
        };
        if let Some(l) = limit {
            query.push(("limit", l.to_string()));
        }
        match at {
            At::Start => {}
            At::Offset(o) => query.push(("offset", o.to_string())),
            At::Cursor(c) => query.push(("cursor", c.clone())),
        }
        let mut call = self.analytics_call(Operation::Analytics(name), target, path, query);
        // A thread's 404 is the thread's.
        call.project = thread.is_none().then(|| project.to_string());
        self.send_json(&call, decode).await
    }

    /// An analytics GET: admin key, counted against the organization's analytics budget
    /// (waiting for room in it).
    pub(crate) fn analytics_call(
        &self,
        operation: Operation,
        target: String,
        path: String,
        query: Vec<(&'static str, String)>,
    ) -> Call {
        let limits = self.settings().limits;
        Call {
            operation,
            target,
            method: Method::GET,
            path,
            query,
            body: None,
            budget: Some((
                self.analytics_scope(),
                limits.effective(limits.analytics_per_hour),
            )),
            admin: true,
            wait_for_budget: true,
            streams: false,
            project: None,
        }
    }

    /// The error of a walk the service led astray (a cursor that loops, a row twice...).
    pub fn paging_error(name: &'static str, target: String, detail: String) -> ApiError {
        ApiError {
            operation: Operation::Analytics(name),
            target,
            kind: ErrorKind::Paging(detail),
        }
    }
}
