//! A window that was not written, as a value: which window, whether it failed or was skipped
//! after an earlier failure, and the typed cause. Callers decide on the cause's kind (a retry
//! after the state database failed, one summary line per cause), never on its text.

use super::ExportError;
use crate::store::StoreError;
use chrono::NaiveDate;
use std::sync::Arc;

/// A window not written in a run.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The dataset (`page_views`, `feedback`, ..., `threads`).
    pub dataset: &'static str,
    /// The project.
    pub project: String,
    /// The window's first day (for the threads: the run's today).
    pub day: NaiveDate,
    /// The day after a generic window's last (its days are `day..to`); `None` for a page-view
    /// day and the threads, whose messages name no range.
    pub to: Option<NaiveDate>,
    /// Not tried: an earlier failure (`cause`) stopped the run, its organization or its
    /// project.
    pub skipped: bool,
    /// What failed (shared by the windows it stopped).
    pub cause: Arc<ExportError>,
}

/// A window's days as people read them (see [`Failure::days`]): the status page's record of a
/// window's trouble is keyed by them, whoever writes it.
pub(super) fn days_of(day: NaiveDate, to: Option<NaiveDate>) -> String {
    match to {
        Some(to) => format!("{day}..{}", to.pred_opt().unwrap_or(to)),
        None => day.to_string(),
    }
}

/// A window as a failure names it: dataset, project, first day, and a generic window's end.
pub(super) type WindowId<'a> = (&'static str, &'a str, NaiveDate, Option<NaiveDate>);

impl Failure {
    /// The failure of `window` (`skipped`: not tried, because of `cause`).
    pub(super) fn of(window: WindowId<'_>, skipped: bool, cause: Arc<ExportError>) -> Self {
        let (dataset, project, day, to) = window;
        Self {
            dataset,
            project: project.to_string(),
            day,
            to,
            skipped,
            cause,
        }
    }

    /// Whether the state database failed (SQLite or a shared PostgreSQL away for a while): not
    /// the window's fault, worth trying again after a wait.
    pub fn is_state_database(&self) -> bool {
        matches!(
            *self.cause,
            ExportError::State(
                StoreError::Db { .. } | StoreError::Sql { .. } | StoreError::Shared(_)
            )
        )
    }

    /// Whether running again alone cannot help: the service refused the key, does not know the
    /// project, or the plan lacks the dataset (a 403), and a person has to change that first.
    pub fn needs_a_fix(&self) -> bool {
        use crate::api::ErrorKind;
        matches!(
            &*self.cause,
            ExportError::Api(a) if matches!(
                a.kind,
                ErrorKind::BadKey { .. } | ErrorKind::UnknownProject { .. } | ErrorKind::Forbidden { .. }
            )
        )
    }

    /// The window's days as people read them: `2026-03-10`, or `2026-03-01..2026-03-14`
    /// (the last day included).
    pub fn days(&self) -> String {
        days_of(self.day, self.to)
    }

    /// The window as the summary names it: nothing for a page-view day (its messages name the
    /// project and day), the dataset and its days otherwise.
    fn label(&self) -> Option<String> {
        match self.to {
            Some(to) => Some(format!("{} {}..{}", self.dataset, self.day, to)),
            None if crate::dataset::by_name(self.dataset).is_some_and(|d| d.names_itself()) => None,
            None => Some(self.dataset.to_string()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(label) = self.label() {
            write!(f, "{label}: ")?;
        }
        if self.skipped {
            write!(f, "skipped: ")?;
        }
        write!(f, "{}", self.cause)
    }
}
