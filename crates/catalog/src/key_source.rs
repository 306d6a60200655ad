//! Where a key is read from: the config says it, the client reads it, the state names it in
//! the key's warning.

use std::path::PathBuf;

/// Where a key is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// An environment variable (`admin_key_env`).
    Env(String),
    /// A file only its owner may read (`admin_key_file`).
    File(PathBuf),
}

impl KeySource {
    /// How messages name it: the variable, or the file's path.
    pub fn name(&self) -> String {
        match self {
            KeySource::Env(var) => var.clone(),
            KeySource::File(path) => path.display().to_string(),
        }
    }
}
