//! Projects the service said it does not know (a 404 on their analytics): kept in the state's
//! `settings` so that later runs do not spend the budget on them again, until the project is
//! asked for again (`--retry-unknown`) or the service it was asked of changes.

use super::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

const PREFIX: &str = "unknown_project:";

/// A project the service does not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnknownProject {
    /// The project id, as the config gives it.
    pub project: String,
    /// The service that said so (its base URL).
    pub base_url: String,
    /// Its words.
    pub message: String,
    /// When.
    pub at: DateTime<Utc>,
}

impl Store {
    /// Records that the service at `base_url` does not know `project`.
    pub fn mark_unknown(&self, u: &UnknownProject) -> Result<(), StoreError> {
        let key = format!("{PREFIX}{}", u.project);
        let value = serde_json::to_string(u).unwrap_or_default();
        self.set_setting(&key, &value)
    }

    /// The projects recorded as unknown (an entry that does not read is left out).
    pub fn unknown_projects(&self) -> Result<Vec<UnknownProject>, StoreError> {
        self.settings_json(PREFIX)
    }

    /// Forgets that `project` was unknown (it is asked for again, or it answered).
    pub fn clear_unknown(&self, project: &str) -> Result<(), StoreError> {
        let key = format!("{PREFIX}{project}");
        self.sql.tx(move |tx| {
            tx.exec("DELETE FROM settings WHERE key = ?1", &[key.into()])?;
            Ok(())
        })
    }
}
