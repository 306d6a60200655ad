//! API keys as distinct types whose `Debug` and `Display` never show the secret, and where
//! each is read from: an environment variable, or a file that only its owner may read (read
//! again at every run and after a 401, so that a rotated key needs no restart).

use sha2::{Digest, Sha256};
use std::fmt;
use std::path::Path;

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
    /// The key file may be read by its group or by anyone: refused, as ssh refuses such a
    /// private key.
    #[error(
        "the key file {path} may be read by others (mode {mode:04o}): `chmod 600 {path}`, so that only its owner reads it"
    )]
    Exposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file cannot be read, or holds nothing.
    #[error("the key file {path} {why}: it must hold the {what}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why (`cannot be read: ...`, `is empty`).
        why: String,
        /// Which key.
        what: &'static str,
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
            /// Where it came from (an environment variable's name, a file), for messages.
            source: String,
            /// Where it is read again from (`None`: given as it is, by a test or the demo).
            origin: Option<KeySource>,
            /// The brand its prefix was checked against.
            brand: String,
        }

        impl $name {
            /// Reads the key from `origin`.
            pub fn read(origin: &KeySource, brand: &str) -> Result<Self, KeyError> {
                let text = read(origin, $what)?;
                let mut key = Self::parse(&text, brand, &origin.name())?;
                key.origin = Some(origin.clone());
                Ok(key)
            }

            /// The key where it came from now: `None` when it was given as it is, or the file
            /// or variable still holds the same key.
            pub fn reread(&self) -> Option<Result<Self, KeyError>> {
                let origin = self.origin.as_ref()?;
                match Self::read(origin, &self.brand) {
                    Ok(k) if k.secret == self.secret => None,
                    other => Some(other),
                }
            }

            /// A fingerprint of the key (the first 12 hex digits of its SHA-256), to tell
            /// keys apart in the state without keeping them.
            pub fn fingerprint(&self) -> String {
                fingerprint(&self.secret)
            }

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
            origin: None,
            brand: brand.to_string(),
        })
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
            origin: None,
            brand: brand.to_string(),
        })
    }
}

/// The first 12 hex digits of the SHA-256 of `secret`.
fn fingerprint(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub use docpipe_catalog::key_source::KeySource;

/// The text `source` holds now.
fn read(source: &KeySource, what: &'static str) -> Result<String, KeyError> {
    match source {
        KeySource::Env(var) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(v),
            _ => Err(KeyError::Missing {
                var: var.clone(),
                what,
            }),
        },
        KeySource::File(path) => read_file(path, what),
    }
}

/// A key file's text, refused when its group or others may read it (as ssh refuses a private
/// key); but for a credential systemd handed over (`LoadCredential=`, under
/// `$CREDENTIALS_DIRECTORY`), which only the service's user reads whatever its mode says
/// (systemd grants it through an ACL, which shows as group bits).
fn read_file(path: &Path, what: &'static str) -> Result<String, KeyError> {
    use std::os::unix::fs::PermissionsExt;
    let unreadable = |why: String| KeyError::Unreadable {
        path: path.display().to_string(),
        why,
        what,
    };
    let meta = std::fs::metadata(path).map_err(|e| unreadable(format!("cannot be read: {e}")))?;
    // A FIFO would block for ever, a device never end: only a regular file holds a key.
    if !meta.is_file() {
        return Err(unreadable(
            "is not a regular file (a FIFO, a device or a folder)".to_string(),
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    let credential = std::env::var_os("CREDENTIALS_DIRECTORY")
        .is_some_and(|dir| !dir.is_empty() && path.starts_with(dir));
    if mode & 0o077 != 0 && !credential {
        return Err(KeyError::Exposed {
            path: path.display().to_string(),
            mode,
        });
    }
    // A key is short: a file far longer is not a key file (and is not read whole).
    if meta.len() > 4096 {
        return Err(unreadable(format!(
            "holds {} bytes, more than a key",
            meta.len()
        )));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| unreadable(format!("cannot be read: {e}")))?;
    if text.trim().is_empty() {
        return Err(unreadable("is empty".to_string()));
    }
    Ok(text)
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

    #[test]
    fn a_fifo_or_a_device_is_refused_by_name_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("key.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a path this test made, as a C string that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for path in [fifo.as_path(), Path::new("/dev/zero")] {
            assert_eq!(
                read_file(path, "admin key").unwrap_err().to_string(),
                format!(
                    "the key file {} is not a regular file (a FIFO, a device or a folder): it must hold the admin key",
                    path.display()
                )
            );
        }
    }

    #[test]
    fn a_key_file_is_read_again_and_refused_when_others_may_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.key");
        std::fs::write(&path, "mint_first_secret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let origin = KeySource::File(path.clone());
        let err = AdminKey::read(&origin, "mint").unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "the key file {0} may be read by others (mode 0644): `chmod 600 {0}`, so that only its owner reads it",
                path.display()
            )
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let key = AdminKey::read(&origin, "mint").unwrap();
        assert_eq!(key.source(), path.display().to_string());
        assert_eq!(key.fingerprint().len(), 12);
        assert!(key.reread().is_none(), "the same key");
        std::fs::write(&path, "mint_second_secret").unwrap();
        let second = key.reread().unwrap().unwrap();
        assert_ne!(second.fingerprint(), key.fingerprint());
        assert_eq!(second.expose(), "mint_second_secret");
        std::fs::write(&path, "  \n").unwrap();
        let err = second.reread().unwrap().unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "the key file {} is empty: it must hold the admin API key",
                path.display()
            )
        );
        assert!(!format!("{second:?}").contains("secret"));
    }
}
