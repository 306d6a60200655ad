//! State on PostgreSQL, for processes on several machines: one connection per process, on a
//! thread of its own (the `postgres` client blocks, as SQLite's does, and must not run on the
//! async runtime's thread), opened again when the server comes back; the schema's versioned
//! migrations, applied at start under an advisory lock so that processes starting at once do not
//! race; and the rate budget's request log, taken atomically by any number of processes.

use crate::rate::{Budget, Refusal, window};
use chrono::{DateTime, Utc};
use docpipe_catalog::ratelimit::wait_for_slot;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

/// The log lines' target: the module they came from before this crate was cut out.
const TARGET: &str = "docpipe::store::pg";

/// The environment variable that holds the database's password (never the config file).
pub const PASSWORD_ENV: &str = "DOCPIPE_STATE_PASSWORD";

/// Whether a `budget_db` (or state) setting names a PostgreSQL database.
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// The settings of a database URL, checked: no password in it (the config file is no place
/// for one), no TLS required (docpipe connects without).
pub fn parse_url(url: &str) -> Result<postgres::Config, String> {
    let config: postgres::Config = url
        .parse()
        .map_err(|e: postgres::Error| format!("not a valid URL: {}", describe(&e)))?;
    if config.get_password().is_some() {
        return Err(format!(
            "the URL carries a password: give it in {PASSWORD_ENV} instead"
        ));
    }
    if config.get_ssl_mode() == postgres::config::SslMode::Require {
        return Err(
            "sslmode=require: docpipe connects without TLS (use a private network or \
                    a local TLS proxy)"
                .into(),
        );
    }
    Ok(config)
}

/// A PostgreSQL failure, naming the database (its URL, which carries no password).
#[derive(Debug, Clone, thiserror::Error)]
#[error("state database {name}: {message}")]
pub struct PgError {
    /// The URL.
    pub name: String,
    /// What failed.
    pub message: String,
    /// Whether the connection failed (the server unreachable or gone), rather than a statement:
    /// worth waiting for.
    pub connection: bool,
}

/// The message of a `postgres` error: the server's own, or the chain of causes.
pub fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    docpipe_catalog::text::causes(e)
        .into_iter()
        .fold(String::new(), |text, c| {
            if text.is_empty() {
                c
            } else if text.contains(&c) {
                text
            } else {
                format!("{text}: {c}")
            }
        })
}

type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// The connection's thread's side: the settings and the client while it is open.
struct Session {
    config: postgres::Config,
    client: Option<postgres::Client>,
}

impl Session {
    fn client(&mut self) -> Result<&mut postgres::Client, postgres::Error> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = None;
            self.client = Some(self.config.connect(postgres::NoTls)?);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }
}

/// A connection to a PostgreSQL database, on its own thread, shared by every part of the
/// process that uses the database.
pub struct Pg {
    name: String,
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg").field("name", &self.name).finish()
    }
}

/// The schema, one migration a version: each applied once, in order, in one transaction with
/// its record in `docpipe_migrations`. Never edit one that was released: add the next.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "the rate budget's request log",
        "CREATE TABLE requests (
            scope TEXT NOT NULL,
            sent_at_ms BIGINT NOT NULL
        );
        CREATE INDEX requests_by_scope ON requests (scope, sent_at_ms);
        CREATE TABLE request_counts (
            scope TEXT PRIMARY KEY,
            n BIGINT NOT NULL
        );",
    ),
    (
        2,
        "the backfill queue, claimed with a lease",
        "CREATE TABLE backfill_queue (
            id BIGSERIAL PRIMARY KEY,
            projects TEXT NOT NULL,
            from_day TEXT NOT NULL,
            to_day TEXT NOT NULL,
            queued_at TEXT NOT NULL,
            done_at TEXT,
            holder TEXT,
            lease_until_ms BIGINT
        );",
    ),
    (
        3,
        "the daemons' heartbeats",
        "CREATE TABLE daemons (
            name TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            seen_at_ms BIGINT NOT NULL
        );",
    ),
    (
        4,
        "every other piece of state: windows, walks and their pages, looks, rules, claims",
        "CREATE TABLE windows (
            project TEXT NOT NULL,
            day TEXT NOT NULL,
            final BIGINT NOT NULL DEFAULT 0,
            rows BIGINT,
            human BIGINT,
            ai BIGINT,
            total BIGINT,
            requests BIGINT NOT NULL DEFAULT 0,
            mismatch TEXT,
            done_at TEXT,
            PRIMARY KEY (project, day)
        );
        CREATE TABLE walks (
            id BIGSERIAL PRIMARY KEY,
            project TEXT NOT NULL,
            day TEXT NOT NULL,
            UNIQUE (project, day)
        );
        CREATE TABLE walk_pages (
            walk_id BIGINT NOT NULL,
            page_offset BIGINT NOT NULL,
            frame BYTEA NOT NULL,
            PRIMARY KEY (walk_id, page_offset)
        );
        CREATE TABLE settings (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE record_pages (
            dataset TEXT NOT NULL,
            project TEXT NOT NULL,
            from_day TEXT NOT NULL,
            to_day TEXT NOT NULL,
            seq BIGINT NOT NULL,
            body BYTEA NOT NULL,
            PRIMARY KEY (dataset, project, from_day, seq)
        );
        CREATE TABLE record_windows (
            dataset TEXT NOT NULL,
            project TEXT NOT NULL,
            day TEXT NOT NULL,
            final BIGINT NOT NULL,
            rows BIGINT NOT NULL,
            requests BIGINT NOT NULL,
            done_at TEXT NOT NULL,
            PRIMARY KEY (dataset, project, day)
        );
        CREATE TABLE record_spans (
            dataset TEXT NOT NULL,
            project TEXT NOT NULL,
            through TEXT NOT NULL,
            done_at TEXT NOT NULL,
            PRIMARY KEY (dataset, project)
        );
        CREATE TABLE threads_fetched (
            project TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            messages BIGINT NOT NULL,
            done_at TEXT NOT NULL,
            PRIMARY KEY (project, thread_id)
        );
        CREATE TABLE freshness (
            dataset TEXT NOT NULL,
            project TEXT NOT NULL,
            day TEXT NOT NULL,
            fingerprint TEXT,
            checked_at TEXT NOT NULL,
            changed_at TEXT NOT NULL,
            looks BIGINT NOT NULL DEFAULT 0,
            changes BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (dataset, project, day)
        );
        CREATE TABLE span_looks (
            dataset TEXT NOT NULL,
            project TEXT NOT NULL,
            walked_at TEXT NOT NULL,
            full_at TEXT,
            PRIMARY KEY (dataset, project)
        );
        CREATE TABLE rule_firings (
            id BIGSERIAL PRIMARY KEY,
            rule TEXT NOT NULL,
            project TEXT NOT NULL,
            action TEXT NOT NULL,
            job TEXT,
            fired_at_ms BIGINT NOT NULL,
            prompt_hash TEXT NOT NULL,
            prompt TEXT NOT NULL,
            rows_matched BIGINT NOT NULL,
            sent TEXT NOT NULL,
            status TEXT,
            pr_link TEXT,
            seconds_to_done DOUBLE PRECISION,
            error TEXT,
            updated_at_ms BIGINT NOT NULL,
            poll_until_ms BIGINT
        );
        CREATE INDEX rule_firings_by_rule ON rule_firings (rule, fired_at_ms);
        CREATE TABLE rule_firing_keys (
            firing_id BIGINT NOT NULL,
            key TEXT NOT NULL,
            PRIMARY KEY (firing_id, key)
        );
        CREATE TABLE window_claims (
            key TEXT PRIMARY KEY,
            holder TEXT,
            lease_until_ms BIGINT,
            done_at_ms BIGINT,
            done_by TEXT
        );",
    ),
    (
        5,
        "looks no longer count their changes (nothing read the counts)",
        "ALTER TABLE freshness DROP COLUMN looks, DROP COLUMN changes;",
    ),
    (
        6,
        "the days of every dataset in one table (windows)",
        "ALTER TABLE windows ADD COLUMN dataset TEXT NOT NULL DEFAULT 'page_views';
        ALTER TABLE windows ALTER COLUMN dataset DROP DEFAULT;
        ALTER TABLE windows DROP CONSTRAINT windows_pkey;
        ALTER TABLE windows ADD PRIMARY KEY (dataset, project, day);
        INSERT INTO windows (dataset, project, day, final, rows, requests, done_at)
          SELECT dataset, project, day, final, rows, requests, done_at FROM record_windows;
        DROP TABLE record_windows;",
    ),
    (
        7,
        "every dataset's walks in progress in one table (walks), their pages in walk_pages; \
         the walks in progress before are walked again",
        "DROP TABLE walk_pages;
        DROP TABLE walks;
        DROP TABLE record_pages;
        CREATE TABLE walks (
            id BIGSERIAL PRIMARY KEY,
            dataset TEXT NOT NULL,
            project TEXT NOT NULL,
            from_day TEXT NOT NULL,
            to_day TEXT NOT NULL,
            UNIQUE (dataset, project, from_day, to_day)
        );
        CREATE TABLE walk_pages (
            walk_id BIGINT NOT NULL REFERENCES walks (id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            last BIGINT NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (walk_id, seq)
        );",
    ),
    (
        8,
        "what the status page shows: requests spent by hour, windows' failures, rules' last runs",
        "CREATE TABLE spent (
            hour_ms BIGINT NOT NULL,
            org TEXT NOT NULL,
            dataset TEXT NOT NULL,
            purpose TEXT NOT NULL,
            n BIGINT NOT NULL,
            PRIMARY KEY (hour_ms, org, dataset, purpose)
        );
        CREATE TABLE window_failures (
            dataset TEXT NOT NULL,
            project TEXT NOT NULL,
            day TEXT NOT NULL,
            win TEXT NOT NULL,
            at_ms BIGINT NOT NULL,
            reason TEXT NOT NULL,
            PRIMARY KEY (dataset, project, day)
        );
        CREATE TABLE rule_runs (
            rule TEXT PRIMARY KEY,
            project TEXT NOT NULL,
            at_ms BIGINT NOT NULL,
            outcome TEXT NOT NULL,
            rows_matched BIGINT,
            line TEXT NOT NULL
        );",
    ),
    (
        9,
        "the impact of agent jobs: each firing's plan, and its keys' figures before and after",
        "CREATE TABLE impact_plans (
            firing_id BIGINT PRIMARY KEY,
            definition TEXT NOT NULL,
            before_from TEXT NOT NULL,
            before_to TEXT NOT NULL,
            before_days BIGINT NOT NULL,
            after_from TEXT,
            after_to TEXT,
            after_days BIGINT,
            settled_at_ms BIGINT,
            outcome TEXT
        );
        ALTER TABLE rule_firing_keys ADD COLUMN before_value DOUBLE PRECISION;
        ALTER TABLE rule_firing_keys ADD COLUMN before_rows BIGINT;
        ALTER TABLE rule_firing_keys ADD COLUMN after_value DOUBLE PRECISION;
        ALTER TABLE rule_firing_keys ADD COLUMN after_rows BIGINT;",
    ),
    (
        10,
        "the review of rule firings: previews, held firings and their trail",
        "CREATE TABLE rule_previews (
            rule TEXT NOT NULL,
            project TEXT NOT NULL,
            at_ms BIGINT NOT NULL,
            rows_matched BIGINT NOT NULL,
            prompt TEXT NOT NULL,
            reason TEXT NOT NULL,
            flags TEXT NOT NULL,
            PRIMARY KEY (rule, project)
        );
        ALTER TABLE rule_firings ADD COLUMN flags TEXT;
        ALTER TABLE rule_firings ADD COLUMN dropped TEXT;
        ALTER TABLE rule_firings ADD COLUMN hold TEXT;
        ALTER TABLE rule_firings ADD COLUMN decided_by TEXT;
        ALTER TABLE rule_firings ADD COLUMN decided_at_ms BIGINT;
        ALTER TABLE rule_firings ADD COLUMN note TEXT;
        ALTER TABLE rule_firings ADD COLUMN held_at_ms BIGINT;",
    ),
    (
        11,
        "windows stuck on the service's paging: how, how often, when tried again",
        "ALTER TABLE window_failures ADD COLUMN kind TEXT NOT NULL DEFAULT 'failed';
        ALTER TABLE window_failures ADD COLUMN stuck_tries BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE window_failures ADD COLUMN retry_at_ms BIGINT;",
    ),
    (
        12,
        "when each dataset's and project's days were last written, found in one seek",
        "CREATE INDEX windows_done ON windows (dataset, project, done_at, requests);",
    ),
    (
        13,
        "the review row by row: a held firing's rows, the keys a person rejected",
        "ALTER TABLE rule_firings ADD COLUMN review_rows TEXT;
        ALTER TABLE rule_firing_keys ADD COLUMN rejected BIGINT;",
    ),
    (
        14,
        "rules that start automations: the automation, the run's schema and instance ids",
        "ALTER TABLE rule_firings ADD COLUMN automation TEXT;
        ALTER TABLE rule_firings ADD COLUMN schema_id TEXT;
        ALTER TABLE rule_firings ADD COLUMN instance_id TEXT;",
    ),
    (
        15,
        "the questions of a firing asked again of the assistant after its pull request",
        "CREATE TABLE reasks (
            firing_id BIGINT NOT NULL,
            question TEXT NOT NULL,
            attempt BIGINT NOT NULL,
            due_at_ms BIGINT NOT NULL,
            asked_at_ms BIGINT,
            resolution TEXT,
            sources TEXT,
            cites_named BIGINT,
            error TEXT,
            PRIMARY KEY (firing_id, question, attempt)
        );",
    ),
];

/// The advisory lock key that serializes migrations ("docpipe" in ASCII).
const MIGRATION_LOCK: i64 = 0x0064_6f63_7069_7065;

impl Pg {
    /// Connects to `url` (its password from [`PASSWORD_ENV`]), within 10 seconds, and brings the
    /// schema up to this version.
    pub fn open(url: &str) -> Result<Self, PgError> {
        let fail = |message: String, connection: bool| PgError {
            name: url.to_string(),
            message,
            connection,
        };
        let mut config = parse_url(url).map_err(|m| fail(m, false))?;
        if let Ok(password) = std::env::var(PASSWORD_ENV) {
            config.password(password);
        }
        config.connect_timeout(Duration::from_secs(10));
        config.keepalives_idle(Duration::from_secs(30));
        if config.get_application_name().is_none() {
            config.application_name("docpipe");
        }
        // The state's tables are in `public` unless the URL names a search path: PostgreSQL's
        // default path starts with the schema named as the user, so a warehouse schema of that
        // name (`docpipe` for a user `docpipe`) would otherwise take the state's next tables.
        if config.get_options().is_none() {
            config.options("-c search_path=public");
        }
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("docpipe-pg".into())
            .spawn(move || {
                let mut session = Session {
                    config,
                    client: None,
                };
                while let Ok(job) = rx.recv() {
                    job(&mut session);
                }
            })
            .map_err(|e| fail(format!("cannot start its thread: {e}"), false))?;
        let pg = Self {
            name: url.to_string(),
            jobs: Mutex::new(tx),
        };
        pg.migrate()?;
        Ok(pg)
    }

    /// The URL.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on the connection (connecting first when it is not open), naming the database
    /// in its error.
    pub fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, PgError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |session: &mut Session| {
            let result = match session.client() {
                Ok(client) => f(client).map_err(|e| {
                    let gone = e.as_db_error().is_none() || client.is_closed();
                    (describe(&e), gone)
                }),
                Err(e) => Err((describe(&e), true)),
            };
            if matches!(result, Err((_, true))) {
                session.client = None;
            }
            let _ = reply.send(result);
        });
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(job);
        let result = match sent {
            Ok(()) => answer
                .recv()
                .unwrap_or(Err(("its thread ended".to_string(), false))),
            Err(_) => Err(("its thread ended".to_string(), false)),
        };
        result.map_err(|(message, connection)| PgError {
            name: self.name.clone(),
            message,
            connection,
        })
    }

    /// Applies the migrations this database lacks, under an advisory lock held by one process
    /// at a time: the others wait for it and then find nothing left to do. A database migrated
    /// by a newer docpipe is refused rather than written with an older shape.
    fn migrate(&self) -> Result<(), PgError> {
        let applied = self.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS docpipe_migrations (
                    version INTEGER PRIMARY KEY,
                    name TEXT NOT NULL,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )",
            )?;
            let current: i32 = tx
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM docpipe_migrations",
                    &[],
                )?
                .get(0);
            let newest = MIGRATIONS.last().map_or(0, |m| m.0);
            if current > newest {
                return Ok(Err(current));
            }
            let mut applied = Vec::new();
            for (version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
                tx.batch_execute(sql)?;
                tx.execute(
                    "INSERT INTO docpipe_migrations (version, name) VALUES ($1, $2)",
                    &[version, name],
                )?;
                applied.push(*version);
            }
            tx.commit()?;
            Ok(Ok(applied))
        })?;
        match applied {
            Ok(versions) => {
                if !versions.is_empty() {
                    tracing::info!(target: TARGET, database = %self.name, ?versions, "state database migrated");
                }
                Ok(())
            }
            Err(current) => Err(PgError {
                name: self.name.clone(),
                message: format!(
                    "its schema is version {current}, newer than this docpipe's {}: run a newer docpipe",
                    MIGRATIONS.last().map_or(0, |m| m.0)
                ),
                connection: false,
            }),
        }
    }
}

/// The rate budget on PostgreSQL: every process that names the same database, on any machine,
/// counts the same requests. A scope's row in `request_counts` is locked for the transaction
/// that takes a slot, so concurrent takers queue there and never both take the last slot.
#[derive(Debug)]
pub struct PgBudget {
    pg: std::sync::Arc<Pg>,
}

impl PgBudget {
    /// The budget in `pg`.
    pub fn new(pg: std::sync::Arc<Pg>) -> Self {
        Self { pg }
    }
}

/// How long a process waits before asking an unreachable database again.
pub const RECONNECT_WAIT: chrono::Duration = chrono::Duration::seconds(5);

impl Budget for PgBudget {
    fn try_take(&self, scope: &str, limit: u32, now: DateTime<Utc>) -> Result<(), Refusal> {
        let now_ms = now.timestamp_millis();
        let horizon = now_ms - window().num_milliseconds();
        let owned = scope.to_string();
        let result = self.pg.with(move |c| {
            let scope = owned.as_str();
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO request_counts (scope, n) VALUES ($1, 0) ON CONFLICT (scope) DO NOTHING",
                &[&scope],
            )?;
            let n: i64 = tx
                .query_one(
                    "SELECT n FROM request_counts WHERE scope = $1 FOR UPDATE",
                    &[&scope],
                )?
                .get(0);
            let expired = tx.execute(
                "DELETE FROM requests WHERE scope = $1 AND sent_at_ms <= $2",
                &[&scope, &horizon],
            )? as i64;
            let mut count = (n - expired).max(0);
            let outcome = if count < i64::from(limit) {
                tx.execute(
                    "INSERT INTO requests (scope, sent_at_ms) VALUES ($1, $2)",
                    &[&scope, &now_ms],
                )?;
                count += 1;
                Ok(())
            } else {
                // The request that must leave the window before one more fits.
                let oldest: i64 = tx
                    .query_one(
                        "SELECT sent_at_ms FROM requests WHERE scope = $1
                         ORDER BY sent_at_ms LIMIT 1 OFFSET $2",
                        &[&scope, &(count - i64::from(limit))],
                    )?
                    .get(0);
                Err(wait_for_slot(
                    DateTime::from_timestamp_millis(oldest).into_iter(),
                    1,
                    window(),
                    now,
                )
                .unwrap_or(chrono::Duration::seconds(1)))
            };
            tx.execute(
                "UPDATE request_counts SET n = $2 WHERE scope = $1",
                &[&scope, &count],
            )?;
            tx.commit()?;
            Ok(outcome)
        });
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(wait)) => Err(Refusal::Wait(wait)),
            // The server gone for a while: wait for it rather than send what others may have
            // sent already.
            Err(e) if e.connection => {
                tracing::warn!(target: TARGET, error = %e, "the shared rate budget cannot be read; waiting");
                Err(Refusal::Wait(RECONNECT_WAIT))
            }
            Err(e) => Err(Refusal::Broken(e.to_string())),
        }
    }

    fn used(&self, scope: &str, now: DateTime<Utc>) -> u32 {
        let horizon = now.timestamp_millis() - window().num_milliseconds();
        let scope = scope.to_string();
        self.pg
            .with(move |c| {
                c.query_one(
                    "SELECT COUNT(*) FROM requests WHERE scope = $1 AND sent_at_ms > $2",
                    &[&scope, &horizon],
                )
                .map(|r| r.get::<_, i64>(0))
            })
            .map_or(0, |n| n as u32)
    }
}
