//! API keys as distinct types whose `Debug` and `Display` never show the secret.

use std::fmt;

/// Why a key was refused locally.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The environment variable is not set or empty.
    #[error("environment variable {var} is not set: it must hold the {what}")]
    Missing {
        /// Variable name.
        var: String,
        /// Which key.
        what: &'static str,
    },
    /// The key does not have the prefix of its kind.
    #[error(
        "the key in {source_name} is not {what}: it must start with {expected} (it starts with {seen})"
    )]
    WrongKind {
        /// Where the key came from.
        source_name: String,
        /// Which key was wanted.
        what: &'static str,
        /// The expected prefix.
        expected: String,
        /// The prefix seen (the brand part only, never the secret).
        seen: String,
    },
    /// The key holds characters no key has (control characters, spaces): it could not be
    /// sent in a header.
    #[error(
        "the key in {source_name} holds a control character or a space: a key is printable text (check how it was pasted)"
    )]
    Unprintable {
        /// Where the key came from.
        source_name: String,
    },
}

/// The visible, non-secret part of a key: its prefix up to the last underscore-separated kind.
fn prefix_of(key: &str, brand: &str) -> String {
    for p in [
        format!("{brand}_dsc_"),
        format!("{brand}_us_"),
        format!("{brand}_"),
    ] {
        if key.starts_with(&p) {
            return p;
        }
    }
    "an unknown prefix".to_string()
}

macro_rules! key_type {
    ($name:ident, $what:literal) => {
        #[doc = concat!("An ", $what, ".")]
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name {
            secret: String,
            prefix: String,
            /// Where it came from (an environment variable's name), for messages.
            source: String,
        }

        impl $name {
            /// Where it came from: the environment variable (or what the caller named).
            pub fn source(&self) -> &str {
                &self.source
            }

            /// The header value `Bearer <key>`.
            pub(crate) fn bearer(&self) -> String {
                format!("Bearer {}", self.secret)
            }

            /// The secret itself, for redacting it from text that came from elsewhere.
            pub(crate) fn expose(&self) -> &str {
                &self.secret
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({}***)", stringify!($name), self.prefix)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}***", self.prefix)
            }
        }
    };
}

key_type!(AdminKey, "admin API key");
key_type!(AssistantKey, "assistant API key");

/// The secret and its visible prefix, if `key` is of the kind whose prefix is `want`.
fn checked(
    key: &str,
    brand: &str,
    want: &str,
    what: &'static str,
    expected: String,
    source_name: &str,
) -> Result<(String, String), KeyError> {
    let key = key.trim();
    if key.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(KeyError::Unprintable {
            source_name: source_name.to_string(),
        });
    }
    let prefix = prefix_of(key, brand);
    if prefix != want || key.len() <= prefix.len() {
        return Err(KeyError::WrongKind {
            source_name: source_name.to_string(),
            what,
            expected,
            seen: prefix,
        });
    }
    Ok((key.to_string(), prefix))
}

impl AdminKey {
    /// An admin key: `<brand>_...` but neither `<brand>_dsc_...` nor `<brand>_us_...`.
    pub fn parse(key: &str, brand: &str, source_name: &str) -> Result<Self, KeyError> {
        let expected = format!("{brand}_ (not {brand}_dsc_ or {brand}_us_)");
        let (secret, prefix) = checked(
            key,
            brand,
            &format!("{brand}_"),
            "an admin API key",
            expected,
            source_name,
        )?;
        Ok(Self {
            secret,
            prefix,
            source: source_name.to_string(),
        })
    }

    /// Reads an admin key from an environment variable.
    pub fn from_env(var: &str, brand: &str) -> Result<Self, KeyError> {
        Self::parse(&read_env(var, "admin API key")?, brand, var)
    }
}

impl AssistantKey {
    /// An assistant key: `<brand>_dsc_...`.
    pub fn parse(key: &str, brand: &str, source_name: &str) -> Result<Self, KeyError> {
        let want = format!("{brand}_dsc_");
        let (secret, prefix) = checked(
            key,
            brand,
            &want,
            "an assistant API key",
            want.clone(),
            source_name,
        )?;
        Ok(Self {
            secret,
            prefix,
            source: source_name.to_string(),
        })
    }

    /// Reads an assistant key from an environment variable.
    pub fn from_env(var: &str, brand: &str) -> Result<Self, KeyError> {
        Self::parse(&read_env(var, "assistant API key")?, brand, var)
    }
}

fn read_env(var: &str, what: &'static str) -> Result<String, KeyError> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(KeyError::Missing {
            var: var.to_string(),
            what,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_by_prefix_and_never_printed() {
        let admin = AdminKey::parse("mint_abc123secret", "mint", "K").unwrap();
        assert_eq!(format!("{admin:?}"), "AdminKey(mint_***)");
        assert_eq!(admin.to_string(), "mint_***");
        let err = AdminKey::parse("mint_dsc_abc123secret", "mint", "K")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "the key in K is not an admin API key: it must start with mint_ (not mint_dsc_ or mint_us_) (it starts with mint_dsc_)"
        );
        assert!(!err.contains("abc123secret"));
        assert!(AdminKey::parse("mint_us_abc", "mint", "K").is_err());
        assert!(AdminKey::parse("mint_", "mint", "K").is_err());
        assert!(AdminKey::parse("acme_abc", "mint", "K").is_err());
        let a = AssistantKey::parse("mint_dsc_xyzsecret", "mint", "K").unwrap();
        assert_eq!(
            format!("{a:?} {a}"),
            "AssistantKey(mint_dsc_***) mint_dsc_***"
        );
        assert!(AssistantKey::parse("mint_xyz", "mint", "K").is_err());
    }
}
