//! The output on object storage (`s3://`, `gs://`, `az://`), or in a local folder apart from
//! the state. Every step works in the local folder (`state_dir`) as it does for a local output:
//! it holds the state and a working copy of the tables. The [`Mirror`] puts the copy's files
//! into the bucket after a step writes them (`push`: one PUT per file, so a reader sees the old
//! file or the new one, and a killed upload leaves nothing; the next push sends what is left),
//! and fetches what the bucket has that the copy lacks before a step reads (`pull`). A manifest
//! in the state database remembers what was sent: a file is sent again only when it changed.

use crate::config::Location;
use crate::error::UserError;
use crate::store::Db;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Files sent or fetched at once.
const CONCURRENCY: usize = 8;

/// The largest file sent in one PUT (S3 takes 5 GiB; a partition file is a few MB).
const MAX_PUT: u64 = 5 * 1024 * 1024 * 1024;

/// The manifest: each file of the working copy as it was when last sent or fetched.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS mirror (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    modified INTEGER NOT NULL,
    e_tag TEXT
);
";

/// An output location opened: the store and the prefix the tables go under.
#[derive(Clone)]
pub struct Remote {
    /// What it is to the user: `output`, or `stream` (an event stream read).
    role: &'static str,
    name: String,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The store's own Debug may show its configuration: the name is enough.
        f.debug_struct("Remote").field("name", &self.name).finish()
    }
}

/// A storage failure, in one line without secrets; `user` when the user must fix it (the
/// credentials, the bucket, the endpoint).
#[derive(Debug, thiserror::Error)]
#[error("{role} {name}: {message}")]
pub struct RemoteError {
    /// What the location is to the user: `output`, or `stream`.
    pub role: &'static str,
    /// The output's URL.
    pub name: String,
    /// What went wrong.
    pub message: String,
    /// Whether the user must fix it (exit code 2).
    pub user: bool,
}

impl RemoteError {
    /// As an error of the command: a user error when the user must fix it.
    pub fn into_anyhow(self) -> anyhow::Error {
        if self.user {
            UserError::from_source(self).into()
        } else {
            self.into()
        }
    }
}

/// The values of the environment's credentials, left out of every message.
fn secrets() -> Vec<String> {
    std::env::vars()
        .filter(|(k, v)| {
            let k = k.to_ascii_uppercase();
            v.len() >= 4
                && (k.contains("SECRET")
                    || k.contains("TOKEN")
                    || k.contains("KEY")
                    || k.contains("PASSWORD")
                    || k.ends_with("_SAS")
                    || k.contains("CREDENTIAL"))
        })
        .map(|(_, v)| v)
        .collect()
}

/// `text` with every credential value of the environment replaced.
fn redact(mut text: String) -> String {
    for s in secrets() {
        text = text.replace(&s, "[redacted]");
    }
    text
}

/// The storage's retries: as the API's, a few with backoff, within two minutes.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(15),
            base: 2.0,
        },
        max_retries: 5,
        retry_timeout: Duration::from_secs(120),
    }
}

/// Timeouts: a request stalled for a minute is retried.
fn client_options(allow_http: bool) -> object_store::ClientOptions {
    object_store::ClientOptions::new()
        .with_timeout(Duration::from_secs(60))
        .with_connect_timeout(Duration::from_secs(10))
        .with_allow_http(allow_http)
}

impl Remote {
    /// Opens `location` (a URL, or a local folder apart from the state), with the credentials
    /// and endpoint of the cloud's standard environment.
    pub fn open(location: &Location) -> Result<Self, RemoteError> {
        let name = location.to_string();
        let fail = |message: String, user: bool| RemoteError {
            role: "output",
            name: name.clone(),
            message: redact(message),
            user,
        };
        let (store, prefix): (Arc<dyn ObjectStore>, String) = match location {
            Location::Local(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| fail(format!("cannot create the folder: {e}"), true))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)
                    .map_err(|e| fail(e.to_string(), true))?;
                (Arc::new(fs), String::new())
            }
            Location::Url(url) => {
                let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
                let prefix = rest.split_once('/').map_or("", |(_, p)| p).to_string();
                let built: Result<Arc<dyn ObjectStore>, object_store::Error> = match scheme {
                    "s3" | "s3a" => {
                        let endpoint = std::env::var("AWS_ENDPOINT_URL_S3")
                            .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
                            .or_else(|_| std::env::var("AWS_ENDPOINT"))
                            .unwrap_or_default();
                        object_store::aws::AmazonS3Builder::from_env()
                            .with_url(url)
                            .with_retry(retry())
                            .with_client_options(client_options(endpoint.starts_with("http://")))
                            .build()
                            .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
                    }
                    "gs" => object_store::gcp::GoogleCloudStorageBuilder::from_env()
                        .with_url(url)
                        .with_retry(retry())
                        .with_client_options(client_options(false))
                        .build()
                        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>),
                    _ => object_store::azure::MicrosoftAzureBuilder::from_env()
                        .with_url(url)
                        .with_retry(retry())
                        .with_client_options(client_options(false))
                        .build()
                        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>),
                };
                let store = built.map_err(|e| {
                    fail(
                        format!(
                            "cannot set up the store: {}",
                            source_text(&e).unwrap_or(e.to_string())
                        ),
                        true,
                    )
                })?;
                (store, prefix)
            }
        };
        let prefix = ObjectPath::parse(&prefix)
            .map_err(|e| fail(format!("the prefix is not a valid path: {e}"), true))?;
        Ok(Self {
            role: "output",
            name,
            store,
            prefix,
        })
    }

    /// Opens an event stream's location (`[[streams]] url`): as [`Remote::open`], its errors
    /// naming it a stream.
    pub fn open_stream(location: &Location) -> Result<Self, RemoteError> {
        let mut remote = Self::open(location).map_err(|e| RemoteError {
            role: "stream",
            ..e
        })?;
        remote.role = "stream";
        Ok(remote)
    }

    /// The output's name (its URL).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One line for a storage failure: what the user must fix said as such.
    fn error(&self, doing: &str, e: object_store::Error) -> RemoteError {
        let detail = source_text(&e).unwrap_or_else(|| e.to_string());
        // What the service said, whole (its XML body included), to tell the causes apart.
        let full = chain_text(&e);
        let listing = doing.starts_with("cannot list");
        let (message, user) = match &e {
            object_store::Error::Unauthenticated { .. } => (
                format!(
                    "{doing}: the credentials were refused ({detail}); check the environment's credentials (for S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
                ),
                true,
            ),
            object_store::Error::PermissionDenied { .. } => (
                format!(
                    "{doing}: access denied ({detail}); check the credentials and their rights on the bucket"
                ),
                true,
            ),
            _ if full.contains("NoSuchBucket")
                || full.contains("ContainerNotFound")
                || full.contains("bucket does not exist")
                || (listing
                    && (matches!(e, object_store::Error::NotFound { .. })
                        || full.contains("404 Not Found"))) =>
            {
                (
                    format!("{doing}: the bucket does not exist; create it or fix output_dir"),
                    true,
                )
            }
            _ if full.contains("InvalidAccessKeyId")
                || full.contains("SignatureDoesNotMatch")
                || full.contains("AccessDenied")
                || full.contains("403 Forbidden") =>
            {
                (
                    format!(
                        "{doing}: the credentials were refused; check the environment's credentials (for S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
                    ),
                    true,
                )
            }
            _ if full.contains("error sending request")
                || full.contains("onnect")
                || full.contains("dns error") =>
            {
                (
                    format!(
                        "{doing}: the endpoint cannot be reached ({detail}); check the endpoint (for S3: AWS_ENDPOINT_URL) and the network"
                    ),
                    true,
                )
            }
            _ => (format!("{doing}: {detail}"), false),
        };
        RemoteError {
            role: self.role,
            name: self.name.clone(),
            message: redact(message),
            user,
        }
    }

    /// Checks that the bucket can be listed with the credentials (before anything is written).
    pub async fn check(&self) -> Result<(), RemoteError> {
        self.store
            .list_with_delimiter(Some(&self.prefix))
            .await
            .map(|_| ())
            .map_err(|e| self.error("cannot list the bucket", e))
    }

    /// The objects under the prefix whose names (relative to it) sort after `offset` (every
    /// one when none), in name order.
    pub async fn list_after(&self, offset: Option<&str>) -> Result<Vec<String>, RemoteError> {
        let listed = match offset {
            Some(o) => self
                .store
                .list_with_offset(Some(&self.prefix), &self.key(o)),
            None => self.store.list(Some(&self.prefix)),
        };
        let objects: Vec<object_store::ObjectMeta> = listed
            .try_collect()
            .await
            .map_err(|e| self.error("cannot list the bucket", e))?;
        let skip = self.prefix.parts().count();
        let mut names: Vec<String> = objects
            .into_iter()
            .map(|o| {
                o.location
                    .parts()
                    .skip(skip)
                    .map(|p| p.as_ref().to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .filter(|n| offset.is_none_or(|o| n.as_str() > o))
            .collect();
        names.sort();
        Ok(names)
    }

    /// An object's bytes, as they arrive.
    pub async fn read(
        &self,
        rel: &str,
    ) -> Result<futures::stream::BoxStream<'static, Result<bytes::Bytes, RemoteError>>, RemoteError>
    {
        let got = self
            .store
            .get(&self.key(rel))
            .await
            .map_err(|e| self.error(&format!("cannot fetch {rel}"), e))?;
        let this = self.clone();
        let doing = format!("cannot fetch {rel}");
        Ok(got
            .into_stream()
            .map(move |r| r.map_err(|e| this.error(&doing, e)))
            .boxed())
    }

    fn key(&self, rel: &str) -> ObjectPath {
        rel.split('/')
            .fold(self.prefix.clone(), |p, part| p.clone().join(part))
    }
}

/// Every cause's text, joined.
fn chain_text(e: &object_store::Error) -> String {
    crate::text::causes(e).join("\n")
}

/// The innermost cause's first line (at most 200 characters), without the request's URL
/// details the outer ones repeat.
fn source_text(e: &object_store::Error) -> Option<String> {
    crate::text::causes(e)
        .into_iter()
        .rev()
        .find(|t| !t.trim().is_empty())
        .map(|t| {
            let line = t.lines().next().unwrap_or("").trim();
            let cut: String = line.chars().take(200).collect();
            cut.trim_end_matches(|c: char| c == '<' || c == ':' || c.is_whitespace())
                .to_string()
        })
}

/// A file of the working copy: its size and modification time (with the inode: a file
/// replaced by a rename is another file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp {
    size: u64,
    modified: i64,
}

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    let nanos = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(meta) as i64;
    #[cfg(not(unix))]
    let ino = 0i64;
    Stamp {
        size: meta.len(),
        modified: nanos ^ ino.rotate_left(40),
    }
}

/// The files of the working copy that are output: those in its folders, but for hidden ones
/// (walk journals, temporary files); the state's files at its top stay local.
fn local_files(root: &Path) -> std::io::Result<HashMap<String, Stamp>> {
    let mut out = HashMap::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let meta = entry.metadata()?;
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if meta.is_dir() {
                stack.push((entry.path(), path));
            } else if meta.is_file() && !rel.is_empty() {
                out.insert(path, stamp(&meta));
            }
        }
    }
    Ok(out)
}

/// What a push or a pull did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    /// Files sent (push) or fetched (pull).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Objects deleted (their files were removed from the copy).
    pub deleted: u64,
}

/// The working copy and its output.
#[derive(Debug, Clone)]
pub struct Mirror {
    remote: Remote,
    local: PathBuf,
    db: Arc<Db>,
}

type Manifest = HashMap<String, (Stamp, Option<String>)>;

impl Mirror {
    /// The mirror of the working copy `local` (whose state database is `db`) into `remote`.
    pub fn new(
        remote: Remote,
        local: &Path,
        db: Arc<Db>,
    ) -> Result<Self, crate::store::StoreError> {
        db.ensure(SCHEMA)?;
        Ok(Self {
            remote,
            local: local.to_path_buf(),
            db,
        })
    }

    /// The output's name (its URL).
    pub fn name(&self) -> &str {
        self.remote.name()
    }

    fn manifest(&self) -> Result<Manifest, RemoteError> {
        self.db
            .with_conn(|c| {
                let mut st = c.prepare_cached("SELECT path, size, modified, e_tag FROM mirror")?;
                st.query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        (
                            Stamp {
                                size: r.get::<_, i64>(1)? as u64,
                                modified: r.get(2)?,
                            },
                            r.get::<_, Option<String>>(3)?,
                        ),
                    ))
                })?
                .collect()
            })
            .map_err(|e| self.local_error(e.to_string()))
    }

    fn remember(&self, path: &str, s: Stamp, e_tag: Option<&str>) -> Result<(), RemoteError> {
        self.db
            .with_conn(|c| {
                c.prepare_cached(
                    "INSERT OR REPLACE INTO mirror (path, size, modified, e_tag) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(rusqlite::params![path, s.size as i64, s.modified, e_tag])
                .map(|_| ())
            })
            .map_err(|e| self.local_error(e.to_string()))
    }

    fn forget(&self, path: &str) -> Result<(), RemoteError> {
        self.db
            .with_conn(|c| {
                c.prepare_cached("DELETE FROM mirror WHERE path = ?1")?
                    .execute([path])
                    .map(|_| ())
            })
            .map_err(|e| self.local_error(e.to_string()))
    }

    fn local_error(&self, message: String) -> RemoteError {
        RemoteError {
            role: self.remote.role,
            name: self.remote.name.clone(),
            message: format!("working copy {}: {message}", self.local.display()),
            user: false,
        }
    }

    /// Sends the files of the working copy that changed since they were last sent (each in one
    /// PUT, remembered as soon as it is in), and deletes the objects whose files were removed.
    /// Objects the copy never had (another machine's) are left alone.
    pub async fn push(&self) -> Result<Synced, RemoteError> {
        let files = local_files(&self.local).map_err(|e| self.local_error(e.to_string()))?;
        let manifest = self.manifest()?;
        let mut changed: Vec<(String, Stamp)> = files
            .iter()
            .filter(|(p, s)| manifest.get(*p).is_none_or(|(m, _)| m != *s))
            .map(|(p, s)| (p.clone(), *s))
            .collect();
        changed.sort();
        let mut done = Synced::default();
        let mut sends = futures::stream::iter(changed.into_iter().map(|(rel, s)| async move {
            let bytes = tokio::fs::read(self.local.join(&rel))
                .await
                .map_err(|e| self.local_error(format!("{rel}: {e}")))?;
            if bytes.len() as u64 > MAX_PUT {
                return Err(self.local_error(format!(
                    "{rel}: {} bytes, more than one PUT takes",
                    bytes.len()
                )));
            }
            let n = bytes.len() as u64;
            let put = self
                .remote
                .store
                .put(&self.remote.key(&rel), PutPayload::from(bytes))
                .await
                .map_err(|e| self.remote.error(&format!("cannot send {rel}"), e))?;
            Ok::<_, RemoteError>((rel, s, put.e_tag, n))
        }))
        .buffer_unordered(CONCURRENCY);
        let mut first_error = None;
        let crash_at: Option<u64> = std::env::var("DOCPIPE_CRASH_AT_UPLOAD")
            .ok()
            .and_then(|v| v.parse().ok());
        let mut sent = 0u64;
        while let Some(r) = sends.next().await {
            match r {
                Ok((rel, s, e_tag, n)) => {
                    sent += 1;
                    // Tests of crash safety: killed with uploads in flight, this one sent
                    // and not yet remembered.
                    if crash_at == Some(sent) {
                        eprintln!("upload {sent}: {rel}");
                        std::process::abort();
                    }
                    self.remember(&rel, s, e_tag.as_deref())?;
                    done.files += 1;
                    done.bytes += n;
                }
                // The others in flight finish and are remembered; the next push sends the rest.
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        drop(sends);
        if let Some(e) = first_error {
            return Err(e);
        }
        let mut gone: Vec<&String> = manifest
            .keys()
            .filter(|p| !files.contains_key(*p))
            .collect();
        gone.sort();
        for rel in gone {
            match self.remote.store.delete(&self.remote.key(rel)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.remote.error(&format!("cannot delete {rel}"), e)),
            }
            self.forget(rel)?;
            done.deleted += 1;
        }
        Ok(done)
    }

    /// Fetches the objects the working copy lacks or has older (another machine sent them, or
    /// the copy is new); a file changed here and not yet sent is kept.
    pub async fn pull(&self) -> Result<Synced, RemoteError> {
        let files = local_files(&self.local).map_err(|e| self.local_error(e.to_string()))?;
        let manifest = self.manifest()?;
        let objects: Vec<object_store::ObjectMeta> = self
            .remote
            .store
            .list(Some(&self.remote.prefix))
            .try_collect()
            .await
            .map_err(|e| self.remote.error("cannot list the bucket", e))?;
        let prefix_parts = self.remote.prefix.parts().count();
        let mut wanted = Vec::new();
        for o in objects {
            let rel: Vec<String> = o
                .location
                .parts()
                .skip(prefix_parts)
                .map(|p| p.as_ref().to_string())
                .collect();
            // Only what a push sends: files in folders, none hidden.
            if rel.len() < 2 || rel.iter().any(|p| p.starts_with('.')) {
                continue;
            }
            let rel = rel.join("/");
            let local = files.get(&rel);
            let known = manifest.get(&rel);
            let up_to_date = match (local, known) {
                (Some(l), Some((m, tag))) => {
                    // Changed here since: kept, the next push sends it.
                    l != m || (tag.is_some() && *tag == o.e_tag)
                }
                (Some(_), None) => false,
                (None, _) => false,
            };
            if !up_to_date {
                wanted.push((rel, o));
            }
        }
        let mut done = Synced::default();
        let mut gets = futures::stream::iter(wanted.into_iter().map(|(rel, o)| async move {
            let got = self
                .remote
                .store
                .get(&o.location)
                .await
                .map_err(|e| self.remote.error(&format!("cannot fetch {rel}"), e))?;
            let bytes = got
                .bytes()
                .await
                .map_err(|e| self.remote.error(&format!("cannot fetch {rel}"), e))?;
            Ok::<_, RemoteError>((rel, o.e_tag, bytes))
        }))
        .buffer_unordered(CONCURRENCY);
        while let Some(r) = gets.next().await {
            let (rel, e_tag, bytes) = r?;
            let dest = self.local.join(&rel);
            let write = || -> std::io::Result<Stamp> {
                let path = crate::layout::write_whole(&dest, &bytes)?;
                Ok(stamp(&std::fs::metadata(path)?))
            };
            let s = write().map_err(|e| self.local_error(format!("{rel}: {e}")))?;
            self.remember(&rel, s, e_tag.as_deref())?;
            done.files += 1;
            done.bytes += bytes.len() as u64;
        }
        Ok(done)
    }
}
