//! What docpipe knows of each organization's admin key: its fingerprint (never the key), when
//! it first worked, and since when the service refuses it. The service's keys expire after 90
//! days by default, and an expired key answers 401: a key refused after it worked is most
//! likely expired, and one used for 80 days soon will be. Kept in the state's `settings`, one
//! entry per organization, so that `status`, the page, `check` and the daemon's alerts say so.

use super::{Store, StoreError};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

const PREFIX: &str = "admin_key:";

/// How long the service's keys live by default.
pub const KEY_LIFETIME_DAYS: i64 = 90;
/// From which day of a key's use docpipe warns that it will expire.
pub const KEY_WARN_DAYS: i64 = 80;

/// An organization's admin key, as docpipe has seen the service answer it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The organization.
    pub org: String,
    /// The key's fingerprint (the first 12 hex digits of its SHA-256).
    pub fingerprint: String,
    /// When it first worked.
    pub first_used: DateTime<Utc>,
    /// Since when the service refuses it (401), after it worked.
    pub refused_since: Option<DateTime<Utc>>,
    /// The service's words when it refused it.
    pub refused: Option<String>,
}

/// What a person has to do about a key, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyHealth {
    /// Nothing.
    Fine,
    /// Used for [`KEY_WARN_DAYS`] or more: make the next one.
    Old,
    /// The service refuses it after it worked.
    Refused,
}

impl KeyRecord {
    /// Days since it first worked, at `now`.
    pub fn age_days(&self, now: DateTime<Utc>) -> i64 {
        (now - self.first_used).num_days()
    }

    /// What a person has to do about it at `now`.
    pub fn health(&self, now: DateTime<Utc>) -> KeyHealth {
        if self.refused_since.is_some() {
            KeyHealth::Refused
        } else if self.age_days(now) >= KEY_WARN_DAYS {
            KeyHealth::Old
        } else {
            KeyHealth::Fine
        }
    }

    /// The line every surface shows when a person has to act (`None`: nothing to do), naming
    /// where the new key goes (`source`: the config's variable or file).
    pub fn warning(
        &self,
        now: DateTime<Utc>,
        source: Option<&docpipe_catalog::key_source::KeySource>,
    ) -> Option<String> {
        let put = match source {
            Some(docpipe_catalog::key_source::KeySource::File(path)) => format!(
                "write it to {} (read again at every run: no restart)",
                path.display()
            ),
            Some(docpipe_catalog::key_source::KeySource::Env(var)) => format!(
                "put it in {var} and restart docpipe (an admin_key_file is read again at every run)"
            ),
            None => "put it where the config's admin_key_env or admin_key_file says".into(),
        };
        let key = format!(
            "the admin key of organization {} (fingerprint {})",
            self.org, self.fingerprint
        );
        match self.health(now) {
            KeyHealth::Fine => None,
            KeyHealth::Refused => Some(format!(
                "{key} is refused since {}{}; the service's keys expire after {KEY_LIFETIME_DAYS} days by default: make a new one on the API keys page and {put}",
                self.refused_since
                    .unwrap_or(now)
                    .format("%Y-%m-%d %H:%M UTC"),
                self.refused
                    .as_deref()
                    .map(|w| format!(" ({})", docpipe_catalog::text::one_line(w)))
                    .unwrap_or_default(),
            )),
            KeyHealth::Old => Some(format!(
                "{key} was first used on {}, {} days ago; the service's keys expire after {KEY_LIFETIME_DAYS} days by default (made that day, it expires around {}): make a new one on the API keys page and {put}",
                self.first_used.format("%Y-%m-%d"),
                self.age_days(now),
                (self.first_used + Duration::days(KEY_LIFETIME_DAYS)).format("%Y-%m-%d"),
            )),
        }
    }
}

impl Store {
    /// Records how the service answered an organization's admin key: a key that works for the
    /// first time is recorded with its first use (a working key ends its refusal); a key
    /// refused after it worked is refused since `at` (a key never seen working is a wrong key,
    /// which the failing run reports).
    pub fn key_answered(
        &self,
        org: &str,
        fingerprint: &str,
        at: DateTime<Utc>,
        refused: Option<&str>,
    ) -> Result<(), StoreError> {
        let known = self
            .key_records()?
            .into_iter()
            .find(|k| k.org == org && k.fingerprint == fingerprint);
        let record = match (known, refused) {
            (None, None) => KeyRecord {
                org: org.to_string(),
                fingerprint: fingerprint.to_string(),
                first_used: at,
                refused_since: None,
                refused: None,
            },
            (None, Some(_)) => return Ok(()),
            (Some(k), None) if k.refused_since.is_none() => return Ok(()),
            (Some(k), None) => KeyRecord {
                refused_since: None,
                refused: None,
                ..k
            },
            (Some(k), Some(_)) if k.refused_since.is_some() => return Ok(()),
            (Some(k), Some(words)) => KeyRecord {
                refused_since: Some(at),
                refused: Some(docpipe_catalog::text::one_line(words).into_owned()),
                ..k
            },
        };
        let value = serde_json::to_string(&record).unwrap_or_default();
        self.set_setting(&format!("{PREFIX}{org}"), &value)
    }

    /// The admin keys docpipe has seen work, by organization (an entry that does not read is
    /// left out).
    pub fn key_records(&self) -> Result<Vec<KeyRecord>, StoreError> {
        self.settings_json(PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_fine_then_old_from_day_80_and_refused_after_it_worked() {
        let t0: DateTime<Utc> = "2026-09-01T10:00:00Z".parse().unwrap();
        let mut k = KeyRecord {
            org: "acme".into(),
            fingerprint: "0123456789ab".into(),
            first_used: t0,
            refused_since: None,
            refused: None,
        };
        let file = docpipe_catalog::key_source::KeySource::File("/etc/docpipe/acme.key".into());
        assert_eq!(k.warning(t0 + Duration::days(79), Some(&file)), None);
        assert_eq!(
            k.warning(t0 + Duration::days(80), Some(&file)).unwrap(),
            "the admin key of organization acme (fingerprint 0123456789ab) was first used on 2026-09-01, 80 days ago; the service's keys expire after 90 days by default (made that day, it expires around 2026-11-30): make a new one on the API keys page and write it to /etc/docpipe/acme.key (read again at every run: no restart)"
        );
        k.refused_since = Some("2026-11-30T14:00:00Z".parse().unwrap());
        k.refused = Some("API key has expired".into());
        let env = docpipe_catalog::key_source::KeySource::Env("DOCPIPE_ACME_ADMIN_KEY".into());
        assert_eq!(
            k.warning(t0 + Duration::days(90), Some(&env)).unwrap(),
            "the admin key of organization acme (fingerprint 0123456789ab) is refused since 2026-11-30 14:00 UTC (API key has expired); the service's keys expire after 90 days by default: make a new one on the API keys page and put it in DOCPIPE_ACME_ADMIN_KEY and restart docpipe (an admin_key_file is read again at every run)"
        );
        assert_eq!(k.health(t0), KeyHealth::Refused);
    }
}
