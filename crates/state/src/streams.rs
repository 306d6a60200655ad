//! What was read of each analytics event stream, in the state's `settings`: the names of the
//! objects read lately (an object is read once; one that lands late, named before the newest,
//! is still found), the counts of a stream's life, and the key the sessions are hashed with
//! (made once, kept here and nowhere else: sessions can be counted, not traced).

use super::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

const PREFIX: &str = "stream:";
const SESSION_KEY: &str = "stream_session_key";
const AGENTS_VERSION: &str = "stream_agents_version";

/// The most object names kept: an object that lands this many objects late is still read.
pub const KEPT_NAMES: usize = 4096;

/// A stream's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamState {
    /// The stream (its URL or folder).
    pub name: String,
    /// The names of the newest objects read, in order (at most [`KEPT_NAMES`]); every object
    /// named before the first is read.
    pub read: Vec<String>,
    /// What was read of it in all (stored beside the names, flat).
    #[serde(flatten)]
    pub counts: StreamCounts,
}

/// What was read of a stream in all (what `status` shows of it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamCounts {
    /// Objects read in all.
    pub objects: u64,
    /// Events kept in all (new to the lake).
    pub events: u64,
    /// Events read again (the same `event_id`).
    pub duplicates: u64,
    /// Lines or events not read in all.
    pub unread: u64,
    /// The last run's line on what it could not read.
    pub last_unread: Option<String>,
    /// When an object was last read.
    pub last_read_at: Option<DateTime<Utc>>,
}

impl StreamState {
    /// Whether `name` was read (kept, or named before every kept name when they are full).
    pub fn was_read(&self, name: &str) -> bool {
        self.read.binary_search_by(|n| n.as_str().cmp(name)).is_ok()
            || (self.read.len() >= KEPT_NAMES
                && self.read.first().is_some_and(|f| name < f.as_str()))
    }

    /// Where the next listing starts: after the oldest name kept (none: from the start).
    pub fn list_after(&self) -> Option<&str> {
        if self.read.len() >= KEPT_NAMES {
            self.read.first().map(String::as_str)
        } else {
            None
        }
    }

    /// Marks `names` read, keeping the newest [`KEPT_NAMES`].
    pub fn mark_read(&mut self, names: impl IntoIterator<Item = String>) {
        self.read.extend(names);
        self.read.sort();
        self.read.dedup();
        let over = self.read.len().saturating_sub(KEPT_NAMES);
        self.read.drain(..over);
    }
}

impl Store {
    /// The state of the stream `name` (a new one when none is kept).
    pub fn stream_state(&self, name: &str) -> Result<StreamState, StoreError> {
        let all: Vec<StreamState> = self.settings_json(PREFIX)?;
        Ok(all
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| StreamState {
                name: name.to_string(),
                ..StreamState::default()
            }))
    }

    /// Every stream's state.
    pub fn stream_states(&self) -> Result<Vec<StreamState>, StoreError> {
        self.settings_json(PREFIX)
    }

    /// Keeps a stream's state.
    pub fn set_stream_state(&self, s: &StreamState) -> Result<(), StoreError> {
        let value = serde_json::to_string(s).unwrap_or_default();
        self.set_setting(&format!("{PREFIX}{}", s.name), &value)
    }

    /// The key the sessions are hashed with, made on first use.
    pub fn session_key(&self) -> Result<(u64, u64), StoreError> {
        let parse = |v: &str| -> Option<(u64, u64)> {
            let (a, b) = v.split_once(':')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        };
        if let Some(k) = self.setting(SESSION_KEY)?.as_deref().and_then(parse) {
            return Ok(k);
        }
        use std::hash::BuildHasher;
        // The process's hash keys come from the system's random source.
        let draw = |n: u64| std::collections::hash_map::RandomState::new().hash_one(n);
        let key = (draw(1), draw(2));
        let value = format!("{:016x}:{:016x}", key.0, key.1);
        // Another process may have made one at the same moment: the first kept wins.
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                &[SESSION_KEY.into(), value.into()],
            )?;
            Ok(())
        })?;
        Ok(self
            .setting(SESSION_KEY)?
            .as_deref()
            .and_then(parse)
            .unwrap_or(key))
    }

    /// The agents table's version the stream's tables were last classified with.
    pub fn stream_agents_version(&self) -> Result<Option<String>, StoreError> {
        self.setting(AGENTS_VERSION)
    }

    /// Records the agents table's version the stream's tables are classified with.
    pub fn set_stream_agents_version(&self, version: &str) -> Result<(), StoreError> {
        self.set_setting(AGENTS_VERSION, version)
    }
}
