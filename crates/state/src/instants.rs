//! What `check --deep` learned of an organization's service: whether it filters by the
//! instants `dateFrom` and `dateTo` name (a day's two halves add up to the day), which days of
//! a zone other than UTC depend on. Kept in the state's `settings`, one entry per
//! organization, so that `status` shows it and exports in such a zone warn.

use super::{Store, StoreError};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

const PREFIX: &str = "instants:";

/// The finding of one `check --deep` for an organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstantsFinding {
    /// The organization.
    pub org: String,
    /// The service asked (its base URL).
    pub base_url: String,
    /// Whether the halves added up to the day for every dataset compared.
    pub filters_instants: bool,
    /// The day compared.
    pub day: NaiveDate,
    /// What was compared: `page_views 120 = 52 + 68; searches 40 ≠ 40 + 40`.
    pub detail: String,
    /// When.
    pub at: DateTime<Utc>,
}

impl Store {
    /// Records what `check --deep` learned of an organization's service.
    pub fn record_instants(&self, f: &InstantsFinding) -> Result<(), StoreError> {
        let value = serde_json::to_string(f).unwrap_or_default();
        self.set_setting(&format!("{PREFIX}{}", f.org), &value)
    }

    /// What `check --deep` learned, by organization (an entry that does not read is left out).
    pub fn instants_findings(&self) -> Result<Vec<InstantsFinding>, StoreError> {
        self.settings_json(PREFIX)
    }
}
