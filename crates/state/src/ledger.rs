//! The ledger of rule firings, in the output folder's state database: a firing is recorded
//! (`sending`) in the same transaction that checks the cooldown and the prompt hash, before
//! anything is sent, so that no process, restart or timeout can send it twice.

use super::sql::{Row, Sql, SqlError, Tx, Value};
use super::{Db, StoreError};
use chrono::{DateTime, Utc};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The ledger's table.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rule_firings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    rule TEXT NOT NULL,
    project TEXT NOT NULL,
    action TEXT NOT NULL,
    job TEXT,
    fired_at_ms INTEGER NOT NULL,
    prompt_hash TEXT NOT NULL,
    prompt TEXT NOT NULL,
    rows_matched INTEGER NOT NULL,
    sent TEXT NOT NULL,
    status TEXT,
    pr_link TEXT,
    seconds_to_done REAL,
    error TEXT,
    updated_at_ms INTEGER NOT NULL,
    -- While set, the job is polled (one look per polling step) until it ends or until then.
    poll_until_ms INTEGER
);
CREATE INDEX IF NOT EXISTS rule_firings_by_rule ON rule_firings (rule, fired_at_ms);
-- What a firing of a rule with a `key` sent: one row per gap (search term, question, page).
CREATE TABLE IF NOT EXISTS rule_firing_keys (
    firing_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (firing_id, key)
);
";

/// What the impact of a firing needs (the store's impact module reads it): its plan; the key
/// columns are added by [`add_key_columns`].
const IMPACT_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS impact_plans (
    firing_id INTEGER PRIMARY KEY,
    definition TEXT NOT NULL,
    before_from TEXT NOT NULL,
    before_to TEXT NOT NULL,
    before_days INTEGER NOT NULL,
    after_from TEXT,
    after_to TEXT,
    after_days INTEGER,
    settled_at_ms INTEGER,
    outcome TEXT
);
";

/// The questions of a firing asked again (see the `reask` module; PostgreSQL's table is
/// migration 15).
const REASK_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS reasks (
    firing_id INTEGER NOT NULL,
    question TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    due_at_ms INTEGER NOT NULL,
    asked_at_ms INTEGER,
    resolution TEXT,
    sources TEXT,
    cites_named INTEGER,
    error TEXT,
    PRIMARY KEY (firing_id, question, attempt)
);
";

/// The review of a rule's firings: the latest preview of each rule that is not enabled.
const REVIEW_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rule_previews (
    rule TEXT NOT NULL,
    project TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    rows_matched INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    reason TEXT NOT NULL,
    flags TEXT NOT NULL,
    PRIMARY KEY (rule, project)
);
";

/// The columns `rule_firings` gained with the review (nullable: firings recorded before have
/// none): the flagged and dropped rows (JSON), why the firing waited, who decided and when,
/// the reviewer's note, when it was held, and the rows it was rendered from (JSON: the template
/// and the values, so that `rules approve --drop` renders it again without some rows).
pub const TRAIL_COLUMNS: [(&str, &str); 8] = [
    ("flags", "TEXT"),
    ("dropped", "TEXT"),
    ("hold", "TEXT"),
    ("decided_by", "TEXT"),
    ("decided_at_ms", "INTEGER"),
    ("note", "TEXT"),
    ("held_at_ms", "INTEGER"),
    ("review_rows", "TEXT"),
];

/// The columns `rule_firings` gained with the automation trigger (nullable: only a trigger's
/// firing has them): the automation the rule names, and the run's `schemaId` and `instanceId`
/// as the service answered (its `jobId` is the firing's `job`).
pub const RUN_COLUMNS: [(&str, &str); 3] = [
    ("automation", "TEXT"),
    ("schema_id", "TEXT"),
    ("instance_id", "TEXT"),
];

/// The columns `rule_firing_keys` gained with the impact (nullable: the keys of firings
/// recorded before hold none), and with the review row by row: `rejected` is 1 for a key whose
/// row a person rejected (it cools down; the others of a rejected firing do not).
const KEY_COLUMNS: [(&str, &str); 5] = [
    ("before_value", "REAL"),
    ("before_rows", "INTEGER"),
    ("after_value", "REAL"),
    ("after_rows", "INTEGER"),
    ("rejected", "INTEGER"),
];

/// Adds `columns` to a SQLite table written before them.
pub(super) fn add_columns(
    c: &rusqlite::Connection,
    table: &str,
    columns: &[(&str, &str)],
) -> rusqlite::Result<()> {
    for (name, ty) in columns {
        let has = c
            .prepare(&format!(
                "SELECT 1 FROM pragma_table_info('{table}') WHERE name = '{name}'"
            ))?
            .exists([])?;
        if !has {
            c.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {name} {ty}"))?;
        }
    }
    Ok(())
}

/// What a firing sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A follow-up to a job.
    FollowUp,
    /// A job creation.
    Create,
    /// An automation's run started (its instructions are its own: no prompt is sent).
    Trigger,
}

impl Kind {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::FollowUp => "follow_up",
            Kind::Create => "create",
            Kind::Trigger => "trigger",
        }
    }

    /// The kind of a stored word (`follow_up` for any word it does not know).
    pub fn parse(word: &str) -> Self {
        match word {
            "create" => Kind::Create,
            "trigger" => Kind::Trigger,
            _ => Kind::FollowUp,
        }
    }
}

/// Whether a firing's prompt reached the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Recorded, being sent (a firing left so by a stopped process counts as maybe sent).
    Sending,
    /// The service accepted it.
    Sent,
    /// It may have reached the service; it is not sent again.
    Unknown,
    /// The service refused it (4xx): nothing happened.
    Refused,
    /// It did not reach the service.
    NotSent,
    /// It waits for a person's review (`rules approve` sends it, `rules reject` drops it).
    Held,
    /// A person rejected it: nothing was sent; its rule and keys cool down as if sent.
    Rejected,
    /// Nobody reviewed it within `[rules] review_expires`: nothing was sent.
    Expired,
}

impl Sent {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Sent::Sending => "sending",
            Sent::Sent => "sent",
            Sent::Unknown => "unknown",
            Sent::Refused => "refused",
            Sent::NotSent => "not_sent",
            Sent::Held => "held",
            Sent::Rejected => "rejected",
            Sent::Expired => "expired",
        }
    }

    fn parse(s: &str) -> Sent {
        match s {
            "sent" => Sent::Sent,
            "sending" => Sent::Sending,
            "refused" => Sent::Refused,
            "not_sent" => Sent::NotSent,
            "held" => Sent::Held,
            "rejected" => Sent::Rejected,
            "expired" => Sent::Expired,
            _ => Sent::Unknown,
        }
    }

    /// Whether the prompt may have reached the service (so it starts the cooldown).
    pub fn maybe_delivered(self) -> bool {
        matches!(self, Sent::Sending | Sent::Sent | Sent::Unknown)
    }
}

/// The firings that count for the same-prompt check: those that may have reached the service,
/// those waiting for review and those a person rejected (the same rows are not held again).
const DELIVERED: &str = "('sending', 'sent', 'unknown', 'held', 'rejected')";

/// The firings that start the cooldown of a rule with a `key`: those that may have reached the
/// service and those waiting for review (a held firing does not block its rule: the next
/// firing leaves the held keys out). A rejection cools down the rejected rows' keys alone.
const COOLING_KEYED: &str = "('sending', 'sent', 'unknown', 'held')";

/// The firings that start the cooldown of a rule without a `key` (its rows cannot be told
/// apart, so a rejection cools the rule down); a held one makes it wait for the review.
const COOLING_KEYLESS: &str = "('sending', 'sent', 'unknown', 'rejected')";

/// The keys left out of a rule's next prompts (within its `key_cooldown`): those of firings
/// that may have reached the service or wait for review, and the keys of rows a person
/// rejected.
const KEY_LEFT_OUT: &str = "(f.sent IN ('sending', 'sent', 'unknown', 'held') OR k.rejected = 1)";

/// One firing.
#[derive(Debug, Clone, PartialEq)]
pub struct Firing {
    /// Row id.
    pub id: i64,
    /// Rule name.
    pub rule: String,
    /// Project.
    pub project: String,
    /// Follow-up or creation.
    pub kind: Kind,
    /// The job messaged or created (none when a creation failed).
    pub job: Option<String>,
    /// When it fired.
    pub fired_at: DateTime<Utc>,
    /// SHA-256 of the prompt.
    pub prompt_hash: String,
    /// The prompt.
    pub prompt: String,
    /// Rows the query matched.
    pub rows_matched: i64,
    /// Whether it was sent.
    pub sent: Sent,
    /// The job's last status seen.
    pub status: Option<String>,
    /// Pull request link.
    pub pr_link: Option<String>,
    /// Seconds from sending until the job ended.
    pub seconds_to_done: Option<f64>,
    /// What went wrong.
    pub error: Option<String>,
    /// Its review: flagged and dropped rows, why it waited, who decided.
    pub trail: Trail,
    /// The automation run it started (a trigger's firing).
    pub run: Option<Run>,
}

/// An automation run a trigger started: the automation the rule names, and what the service
/// answered (none while unanswered, or when it refused).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    /// The automation's id (the trigger's `workflowSchemaId`).
    pub automation: String,
    /// The answer's `schemaId`.
    pub schema_id: Option<String>,
    /// The answer's `instanceId`: the run.
    pub instance_id: Option<String>,
}

/// What a firing's review left: so that a pull request can be traced to the rows and the
/// readers' words behind it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trail {
    /// The flagged readers' values of its rows, as JSON (an array; none before the review).
    pub flags: Option<String>,
    /// The rows left out as flagged, as JSON.
    pub dropped: Option<String>,
    /// Why it waited for review (none: it did not).
    pub hold: Option<String>,
    /// Who approved or rejected it.
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The reviewer's note (`reject --why`).
    pub note: Option<String>,
    /// When it was held (its `fired_at` is when it was sent, once approved).
    pub held_at: Option<DateTime<Utc>>,
    /// The rows it was rendered from, as JSON (a held firing's; see `rules::HeldRows`).
    pub rows: Option<String>,
}

/// A rule's latest preview: what it would have sent, had it been enabled.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// Rule.
    pub rule: String,
    /// Project.
    pub project: String,
    /// When it was evaluated.
    pub at: DateTime<Utc>,
    /// Rows it would send.
    pub rows: i64,
    /// The prompt it would send.
    pub prompt: String,
    /// Why it was not sent, and what would have happened.
    pub reason: String,
    /// Its flagged readers' values, as JSON.
    pub flags: String,
}

/// Why `rules approve` or `rules reject` did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Decided {
    /// No such firing.
    #[error("no firing {0} in the ledger (docpipe rules pending lists those waiting)")]
    Unknown(i64),
    /// Rows named that it cannot drop or reject.
    #[error("firing {id}: {why}")]
    Rows {
        /// The firing.
        id: i64,
        /// Why.
        why: String,
    },
    /// It does not wait for review: what happened to it.
    #[error("firing {id} is not waiting for review: it was {state}")]
    Already {
        /// The firing.
        id: i64,
        /// What became of it.
        state: String,
    },
}

/// Why a rule that matched did not fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// It fired at `last`; quiet until `until`.
    CoolingDown {
        /// Last firing.
        last: DateTime<Utc>,
        /// End of the cooldown.
        until: DateTime<Utc>,
    },
    /// This exact prompt was sent at `at`.
    SamePrompt {
        /// When.
        at: DateTime<Utc>,
    },
    /// The project's follow-ups and job creations for this hour are used up.
    HourlyLimit {
        /// The limit docpipe keeps to.
        limit: u32,
    },
    /// A firing of the rule waits for review: it does not fire again until that is decided.
    AwaitingReview {
        /// The held firing.
        id: i64,
        /// When it was held.
        since: DateTime<Utc>,
    },
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = |t: &DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%SZ").to_string();
        match self {
            Skip::CoolingDown { last, until } => {
                write!(f, "cooling down until {} (fired {})", t(until), t(last))
            }
            Skip::SamePrompt { at } => {
                write!(f, "the same prompt was already sent {} (same rows)", t(at))
            }
            Skip::HourlyLimit { limit } => write!(
                f,
                "the project's {limit} follow-ups and job creations of the last hour are used; it fires on a later run"
            ),
            Skip::AwaitingReview { id, since } => write!(
                f,
                "firing {id} of {} waits for review (docpipe rules approve {id}, or reject {id})",
                t(since)
            ),
        }
    }
}

/// A firing to record.
#[derive(Debug, Clone)]
pub struct NewFiring<'a> {
    /// The rule.
    pub rule: RuleKey<'a>,
    /// The job messaged (none: a creation or a trigger).
    pub job: Option<&'a str>,
    /// The automation a trigger starts.
    pub automation: Option<&'a str>,
    /// The prompt (a trigger's: docpipe's record of its rows, never sent).
    pub prompt: &'a str,
    /// Its hash.
    pub hash: &'a str,
    /// Rows it sends.
    pub rows_matched: usize,
    /// The keys of its rows.
    pub keys: &'a [String],
    /// Now.
    pub now: DateTime<Utc>,
    /// `Sending`, or `Held` for review.
    pub state: Sent,
    /// Flags, dropped rows, why it is held.
    pub trail: Trail,
}

/// A held firing as a person approved it without some of its rows.
#[derive(Debug, Clone)]
pub struct Edit {
    /// The prompt rendered again without the dropped rows.
    pub prompt: String,
    /// Its hash.
    pub hash: String,
    /// The rows it sends.
    pub rows: i64,
    /// The dropped rows' keys (they cool down as rejected).
    pub dropped_keys: Vec<String>,
}

/// What became of a firing that is not waiting for review, in words.
fn decided(f: &Firing) -> String {
    let t = |t: &DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%SZ").to_string();
    let by = match (&f.trail.decided_by, &f.trail.decided_at) {
        (Some(b), Some(at)) => format!(" by {b} at {}", t(at)),
        _ => String::new(),
    };
    match f.sent {
        Sent::Rejected => format!("rejected{by}"),
        Sent::Expired => "expired: nobody reviewed it in time, and nothing was sent".to_string(),
        Sent::Held => "held".to_string(),
        // Approved, then the process stopped between the ledger and the request: say what is
        // known, and how a person sends it again.
        s @ (Sent::Sending | Sent::Unknown) if f.trail.decided_by.is_some() => format!(
            "approved{by}, but its send was cut off: it may not have reached the service (look at the agent jobs of project {}); docpipe rules approve {} --retry sends it again{}",
            f.project,
            f.id,
            if s == Sent::Sending {
                ", once an hour has passed without a docpipe sending it"
            } else {
                ""
            }
        ),
        s if f.trail.decided_by.is_some() => {
            format!("approved{by} and {} (sent once, never again)", s.as_str())
        }
        s => format!("{} at {} without review", s.as_str(), t(&f.fired_at)),
    }
}

/// What a firing is: the rule's name, its project and cooldown, and what it sends.
#[derive(Debug, Clone, Copy)]
pub struct RuleKey<'a> {
    /// The rule's name.
    pub name: &'a str,
    /// Its project.
    pub project: &'a str,
    /// The time it stays quiet after firing.
    pub cooldown: Duration,
    /// What it sends.
    pub kind: Kind,
    /// Whether the rule has a `key` (its rows are told apart: a held firing does not block it).
    pub keyed: bool,
}

/// The ledger.
#[derive(Debug)]
pub struct Ledger {
    pub(super) sql: Sql,
}

pub(super) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(super) fn from_ms(v: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(v).unwrap_or_default()
}

/// Why a rule (`name`, its `cooldown`, whether it has a key) should not fire now.
fn skip_for(
    tx: &mut dyn Tx,
    (name, cooldown, keyed): (&str, Duration, bool),
    hash: &str,
    now: DateTime<Utc>,
) -> Result<Option<Skip>, SqlError> {
    if !keyed {
        let held = tx.row(
            "SELECT id, fired_at_ms FROM rule_firings WHERE rule = ?1 AND sent = 'held' ORDER BY id LIMIT 1",
            &[name.into()],
        )?;
        if let Some(r) = held {
            return Ok(Some(Skip::AwaitingReview {
                id: r.int(0)?,
                since: from_ms(r.int(1)?),
            }));
        }
    }
    let cooling = if keyed {
        COOLING_KEYED
    } else {
        COOLING_KEYLESS
    };
    let last = tx
        .row(
            &format!(
                "SELECT max(fired_at_ms) FROM rule_firings WHERE rule = ?1 AND sent IN {cooling}"
            ),
            &[name.into()],
        )?
        .map_or(Ok(None), |r| r.opt_int(0))?;
    if let Some(last) = last.map(from_ms) {
        let until = chrono::Duration::from_std(cooldown)
            .ok()
            .and_then(|d| last.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        if now < until {
            return Ok(Some(Skip::CoolingDown { last, until }));
        }
    }
    let same = tx
        .row(
            &format!(
                "SELECT max(fired_at_ms) FROM rule_firings WHERE rule = ?1 AND prompt_hash = ?2 AND sent IN {DELIVERED}"
            ),
            &[name.into(), hash.into()],
        )?
        .map_or(Ok(None), |r| r.opt_int(0))?;
    Ok(same.map(|at| Skip::SamePrompt { at: from_ms(at) }))
}

/// The advisory lock that serializes firings of one rule on PostgreSQL (two daemons checking
/// the cooldown at once must not both find it free): the rule's name hashed.
fn rule_lock(name: &str) -> i64 {
    let h = crc32fast::hash(name.as_bytes());
    0x0064_7000_0000_0000 | i64::from(h)
}

impl Ledger {
    /// Opens the ledger in a state database (created if needed): for tools and tests; a
    /// process that has the output folder's [`Store`](super::Store) uses [`Store::ledger`](super::Store::ledger).
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::on(Arc::new(Db::open(path, "")?))
    }

    /// The ledger on a connection whose tables [`Ledger::on`] made.
    pub(super) fn on_ready(sql: Sql) -> Self {
        Self { sql }
    }

    /// The ledger on an open connection (adds its tables, and the polling and impact columns
    /// to a ledger written before they existed).
    pub fn on(db: Arc<Db>) -> Result<Self, StoreError> {
        db.ensure(SCHEMA)?;
        db.ensure(IMPACT_SCHEMA)?;
        db.ensure(REVIEW_SCHEMA)?;
        db.ensure(REASK_SCHEMA)?;
        db.with_conn(|c| add_columns(c, "rule_firing_keys", &KEY_COLUMNS))?;
        db.with_conn(|c| add_columns(c, "rule_firings", &TRAIL_COLUMNS))?;
        db.with_conn(|c| add_columns(c, "rule_firings", &RUN_COLUMNS))?;
        db.with_conn(|c| {
            let has: bool = c
                .prepare(
                    "SELECT 1 FROM pragma_table_info('rule_firings') WHERE name = 'poll_until_ms'",
                )?
                .exists([])?;
            if !has {
                c.execute_batch("ALTER TABLE rule_firings ADD COLUMN poll_until_ms INTEGER")?;
            }
            Ok(())
        })?;
        Ok(Self { sql: Sql::Lite(db) })
    }

    /// Records what `event` says into the activity tables (a rule's run), on the ledger's
    /// connection.
    pub fn receive(&self, event: &docpipe_catalog::events::Event<'_>) {
        super::activity::Activity::new(self.sql.clone()).receive(event);
    }

    /// Why the rule should not fire now, if it should not: its cooldown runs, or the same
    /// prompt was sent.
    pub fn skip(
        &self,
        rule: RuleKey<'_>,
        hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Skip>, StoreError> {
        let (name, hash) = (rule.name.to_string(), hash.to_string());
        let (cooldown, keyed) = (rule.cooldown, rule.keyed);
        self.sql
            .read(move |tx| skip_for(tx, (&name, cooldown, keyed), &hash, now))
    }

    /// Records a firing as `sending` unless it should be skipped, in one transaction (the
    /// check and the record taken together: no two processes both fire); its id.
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        &self,
        rule: RuleKey<'_>,
        job: Option<&str>,
        prompt: &str,
        hash: &str,
        rows_matched: usize,
        keys: &[String],
        now: DateTime<Utc>,
    ) -> Result<Result<i64, Skip>, StoreError> {
        self.record(NewFiring {
            rule,
            job,
            automation: None,
            prompt,
            hash,
            rows_matched,
            keys,
            now,
            state: Sent::Sending,
            trail: Trail::default(),
        })
    }

    /// Records a firing (`sending`, or `held` for review) unless it should be skipped, in one
    /// transaction (the check and the record taken together: no two processes both fire);
    /// its id.
    pub fn record(&self, new: NewFiring<'_>) -> Result<Result<i64, Skip>, StoreError> {
        let rule = new.rule;
        let (name, hash) = (rule.name.to_string(), new.hash.to_string());
        let (cooldown, keyed) = (rule.cooldown, rule.keyed);
        let now = new.now;
        let t = &new.trail;
        let p = vec![
            Value::from(rule.name),
            rule.project.into(),
            new.job.into(),
            Value::Int(ms(now)),
            hash.as_str().into(),
            new.prompt.into(),
            Value::Int(new.rows_matched as i64),
            rule.kind.as_str().into(),
            new.state.as_str().into(),
            t.flags.clone().into(),
            t.dropped.clone().into(),
            t.hold.clone().into(),
            t.held_at.map(ms).into(),
            t.rows.clone().into(),
            new.automation.into(),
        ];
        let keys = new.keys.to_vec();
        self.sql.tx(move |tx| {
            if tx.postgres() {
                tx.exec(
                    "SELECT pg_advisory_xact_lock(?1)",
                    &[Value::Int(rule_lock(&name))],
                )?;
            }
            if let Some(skip) = skip_for(tx, (&name, cooldown, keyed), &hash, now)? {
                return Ok(Err(skip));
            }
            let id = tx
                .row(
                    "INSERT INTO rule_firings (rule, project, job, fired_at_ms, prompt_hash, prompt, rows_matched, sent, updated_at_ms, action, flags, dropped, hold, held_at_ms, review_rows, automation)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?9, ?4, ?8, ?10, ?11, ?12, ?13, ?14, ?15) RETURNING id",
                    &p,
                )?
                .map_or(Ok(0), |r| r.int(0))?;
            for k in &keys {
                tx.exec(
                    "INSERT INTO rule_firing_keys (firing_id, key) VALUES (?1, ?2)
                     ON CONFLICT (firing_id, key) DO NOTHING",
                    &[Value::Int(id), k.as_str().into()],
                )?;
            }
            Ok(Ok(id))
        })
    }

    /// Takes a held firing for sending (`sending`, sent from now on, approved by `by`): the one
    /// caller that takes it gets it; any other is told what became of it.
    pub fn approve(
        &self,
        id: i64,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<Firing, Decided>, StoreError> {
        self.approve_edited(id, by, now, None)
    }

    /// [`Ledger::approve`], sending `edit`'s prompt instead of the held one (the held firing's
    /// rows less those a person dropped; the dropped rows' keys cool down as rejected), in the
    /// same transaction.
    pub fn approve_edited(
        &self,
        id: i64,
        by: &str,
        now: DateTime<Utc>,
        edit: Option<Edit>,
    ) -> Result<Result<Firing, Decided>, StoreError> {
        let Some(edit) = edit else {
            let p = vec![Value::Int(id), by.into(), Value::Int(ms(now))];
            return self.decide(
                id,
                "UPDATE rule_firings SET sent = 'sending', decided_by = ?2, decided_at_ms = ?3,
                 fired_at_ms = ?3, updated_at_ms = ?3 WHERE id = ?1 AND sent = 'held'",
                p,
                Vec::new(),
            );
        };
        let p = vec![
            Value::Int(id),
            by.into(),
            Value::Int(ms(now)),
            edit.prompt.into(),
            edit.hash.into(),
            Value::Int(edit.rows),
        ];
        self.decide(
            id,
            "UPDATE rule_firings SET sent = 'sending', decided_by = ?2, decided_at_ms = ?3,
             fired_at_ms = ?3, updated_at_ms = ?3, prompt = ?4, prompt_hash = ?5,
             rows_matched = ?6 WHERE id = ?1 AND sent = 'held'",
            p,
            edit.dropped_keys,
        )
    }

    /// Moves a held firing on by `update` (one statement on `?1 = id` that only takes a held
    /// one): the firing for the one caller that moved it, what became of it for any other.
    fn decide(
        &self,
        id: i64,
        update: &'static str,
        params: Vec<Value>,
        rejected_keys: Vec<String>,
    ) -> Result<Result<Firing, Decided>, StoreError> {
        let taken = self.sql.tx(move |tx| {
            let taken = tx.exec(update, &params)?;
            if taken == 1 {
                for k in &rejected_keys {
                    tx.exec(
                        "UPDATE rule_firing_keys SET rejected = 1 WHERE firing_id = ?1 AND key = ?2",
                        &[Value::Int(id), k.as_str().into()],
                    )?;
                }
            }
            Ok(taken)
        })?;
        Ok(match self.firing(id)? {
            None => Err(Decided::Unknown(id)),
            Some(f) if taken == 1 => Ok(f),
            Some(f) => Err(Decided::Already {
                id,
                state: decided(&f),
            }),
        })
    }

    /// Rejects a held firing: nothing is sent. The keys of `rows` (its rejected rows' keys; none:
    /// every key it holds) cool down for the rule's `key_cooldown`; its other keys may be sent
    /// by the rule's next firing. A rule without a key cools down as if it had fired.
    pub fn reject(
        &self,
        id: i64,
        by: &str,
        why: Option<&str>,
        rows: Option<Vec<String>>,
        now: DateTime<Utc>,
    ) -> Result<Result<Firing, Decided>, StoreError> {
        let keys = match rows {
            Some(k) => k,
            None => self.firing_keys(id)?,
        };
        let p = vec![Value::Int(id), by.into(), Value::Int(ms(now)), why.into()];
        self.decide(
            id,
            "UPDATE rule_firings SET sent = 'rejected', decided_by = ?2, decided_at_ms = ?3,
             note = ?4, updated_at_ms = ?3 WHERE id = ?1 AND sent = 'held'",
            p,
            keys,
        )
    }

    /// Takes an approved firing whose send was cut off (`unknown`: its process stopped between
    /// the ledger and the request) for sending again, as `by` asked: the one caller that takes
    /// it gets it.
    pub fn retry(
        &self,
        id: i64,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<Firing, Decided>, StoreError> {
        let p = vec![Value::Int(id), by.into(), Value::Int(ms(now))];
        self.decide(
            id,
            "UPDATE rule_firings SET sent = 'sending', decided_by = ?2, decided_at_ms = ?3,
             fired_at_ms = ?3, updated_at_ms = ?3, error = NULL
             WHERE id = ?1 AND sent = 'unknown' AND decided_by IS NOT NULL",
            p,
            Vec::new(),
        )
    }

    /// An approved firing the hour's limit stopped before it left: it waits for review again.
    pub fn hold_again(&self, id: i64) -> Result<(), StoreError> {
        let p = vec![Value::Int(id)];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE rule_firings SET sent = 'held', decided_by = NULL, decided_at_ms = NULL,
                 fired_at_ms = COALESCE(held_at_ms, fired_at_ms) WHERE id = ?1 AND sent = 'sending'",
                &p,
            )
            .map(|_| ())
        })
    }

    /// The keys a firing holds.
    pub fn firing_keys(&self, id: i64) -> Result<Vec<String>, StoreError> {
        let p = vec![Value::Int(id)];
        self.sql.read(move |tx| {
            tx.rows(
                "SELECT key FROM rule_firing_keys WHERE firing_id = ?1 ORDER BY key",
                &p,
            )?
            .iter()
            .map(|r| r.text(0))
            .collect()
        })
    }

    /// Held firings older than `before` expire (nothing sent); the ids that did.
    pub fn expire(
        &self,
        before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<i64>, StoreError> {
        let p = vec![Value::Int(ms(before)), Value::Int(ms(now))];
        self.sql.tx(move |tx| {
            tx.rows(
                "UPDATE rule_firings SET sent = 'expired', updated_at_ms = ?2,
                 note = 'nobody reviewed it in time: not sent'
                 WHERE sent = 'held' AND fired_at_ms < ?1 RETURNING id",
                &p,
            )?
            .iter()
            .map(|r| r.int(0))
            .collect()
        })
    }

    /// The firings waiting for review, oldest first.
    pub fn pending(&self) -> Result<Vec<Firing>, StoreError> {
        Ok(self
            .select("WHERE sent = 'held'", |_| Ok(()))?
            .into_iter()
            .map(|(f, ())| f)
            .collect())
    }

    /// One firing.
    pub fn firing(&self, id: i64) -> Result<Option<Firing>, StoreError> {
        let found = self.select_with("WHERE id = ?1", vec![Value::Int(id)], |_| Ok(()))?;
        Ok(found.into_iter().map(|(f, ())| f).find(|f| f.id == id))
    }

    /// Keeps a rule's latest preview (one per rule and project).
    pub fn preview(&self, p: &Preview) -> Result<(), StoreError> {
        let v = vec![
            Value::from(p.rule.as_str()),
            p.project.as_str().into(),
            Value::Int(ms(p.at)),
            Value::Int(p.rows),
            p.prompt.as_str().into(),
            p.reason.as_str().into(),
            p.flags.as_str().into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "INSERT INTO rule_previews (rule, project, at_ms, rows_matched, prompt, reason, flags)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (rule, project) DO UPDATE SET at_ms = excluded.at_ms,
                 rows_matched = excluded.rows_matched, prompt = excluded.prompt,
                 reason = excluded.reason, flags = excluded.flags",
                &v,
            )
            .map(|_| ())
        })
    }

    /// Forgets a rule's preview (it is enabled now, or no longer fires).
    pub fn forget_preview(&self, rule: &str, project: &str) -> Result<(), StoreError> {
        let v = vec![Value::from(rule), project.into()];
        self.sql.tx(move |tx| {
            tx.exec(
                "DELETE FROM rule_previews WHERE rule = ?1 AND project = ?2",
                &v,
            )
            .map(|_| ())
        })
    }

    /// Every rule's latest preview, by rule.
    pub fn previews(&self) -> Result<Vec<Preview>, StoreError> {
        self.sql.read(move |tx| {
            tx.rows(
                "SELECT rule, project, at_ms, rows_matched, prompt, reason, flags
                 FROM rule_previews ORDER BY rule, project",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(Preview {
                    rule: r.text(0)?,
                    project: r.text(1)?,
                    at: from_ms(r.int(2)?),
                    rows: r.int(3)?,
                    prompt: r.text(4)?,
                    reason: r.text(5)?,
                    flags: r.text(6)?,
                })
            })
            .collect()
        })
    }

    /// Stores a firing's outcome so far.
    pub fn update(&self, f: &Firing, now: DateTime<Utc>) -> Result<(), StoreError> {
        let p = vec![
            Value::Int(f.id),
            f.job.clone().into(),
            f.sent.as_str().into(),
            f.status.clone().into(),
            f.pr_link.clone().into(),
            f.seconds_to_done.into(),
            f.error.clone().into(),
            Value::Int(ms(now)),
            f.trail.flags.clone().into(),
            f.trail.dropped.clone().into(),
            f.trail.hold.clone().into(),
            f.run.as_ref().and_then(|r| r.schema_id.clone()).into(),
            f.run.as_ref().and_then(|r| r.instance_id.clone()).into(),
        ];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE rule_firings SET job = ?2, sent = ?3, status = ?4, pr_link = ?5,
                 seconds_to_done = ?6, error = ?7, updated_at_ms = ?8, flags = ?9, dropped = ?10,
                 hold = ?11, schema_id = ?12, instance_id = ?13 WHERE id = ?1",
                &p,
            )
            .map(|_| ())
        })
    }

    /// Forgets a firing that surely did not leave this process (and the keys it held).
    pub fn discard(&self, id: i64) -> Result<(), StoreError> {
        self.sql.tx(move |tx| {
            let p = [Value::Int(id)];
            let gone = tx.exec(
                "DELETE FROM rule_firings WHERE id = ?1 AND sent = 'sending'",
                &p,
            )?;
            if gone > 0 {
                tx.exec("DELETE FROM rule_firing_keys WHERE firing_id = ?1", &p)?;
                tx.exec("DELETE FROM impact_plans WHERE firing_id = ?1", &p)?;
            }
            Ok(())
        })
    }

    /// The keys (gaps) a rule's firings for a project sent (or may have sent), hold for review,
    /// or had rejected by a person, since `since`.
    pub fn sent_keys(
        &self,
        rule: &str,
        project: &str,
        since: DateTime<Utc>,
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        let p = vec![Value::from(rule), project.into(), Value::Int(ms(since))];
        self.sql.read(move |tx| {
            tx.rows(
                &format!(
                    "SELECT k.key FROM rule_firing_keys k JOIN rule_firings f ON f.id = k.firing_id
                     WHERE f.rule = ?1 AND f.project = ?2 AND {KEY_LEFT_OUT} AND f.fired_at_ms >= ?3"
                ),
                &p,
            )?
            .iter()
            .map(|r| r.text(0))
            .collect()
        })
    }

    /// Firings left `sending` since before `before` by a process that stopped: their outcome is
    /// unknown, and they are never sent again.
    pub fn settle_abandoned(
        &self,
        before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        let p = vec![Value::Int(ms(before)), Value::Int(ms(now))];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE rule_firings SET sent = 'unknown',
                 error = 'interrupted while sending (the process stopped); not sent again',
                 updated_at_ms = ?2 WHERE sent = 'sending' AND updated_at_ms < ?1",
                &p,
            )
            .map(|n| n as usize)
        })
    }

    /// Marks a firing's job to be polled until it ends or until `until`.
    pub fn poll_until(&self, id: i64, until: DateTime<Utc>) -> Result<(), StoreError> {
        let p = vec![Value::Int(id), Value::Int(ms(until))];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE rule_firings SET poll_until_ms = ?2 WHERE id = ?1",
                &p,
            )
            .map(|_| ())
        })
    }

    /// Ends the polling of a firing's job; `true` for the one caller that ended it (processes
    /// sharing the ledger may look at the same job: only one of them reports its end).
    pub fn end_polling(&self, id: i64) -> Result<bool, StoreError> {
        let p = vec![Value::Int(id)];
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE rule_firings SET poll_until_ms = NULL \
                 WHERE id = ?1 AND poll_until_ms IS NOT NULL",
                &p,
            )
            .map(|n| n == 1)
        })
    }

    /// The firings whose jobs are being polled, oldest first, with the time polling gives up.
    pub fn polling(&self) -> Result<Vec<(Firing, DateTime<Utc>)>, StoreError> {
        self.select("WHERE poll_until_ms IS NOT NULL", |r| {
            Ok(from_ms(r.int(14)?))
        })
    }

    /// Every firing, oldest first.
    pub fn all(&self) -> Result<Vec<Firing>, StoreError> {
        Ok(self
            .select("", |_| Ok(()))?
            .into_iter()
            .map(|(f, ())| f)
            .collect())
    }

    fn select<T: Send + 'static>(
        &self,
        filter: &'static str,
        extra: impl Fn(&Row) -> Result<T, SqlError> + Send + 'static,
    ) -> Result<Vec<(Firing, T)>, StoreError> {
        self.select_with(filter, Vec::new(), extra)
    }

    fn select_with<T: Send + 'static>(
        &self,
        filter: &'static str,
        params: Vec<Value>,
        extra: impl Fn(&Row) -> Result<T, SqlError> + Send + 'static,
    ) -> Result<Vec<(Firing, T)>, StoreError> {
        self.sql.read(move |tx| {
            tx.rows(
                &format!(
                    "SELECT id, rule, project, job, fired_at_ms, prompt_hash, prompt, rows_matched,
                     sent, status, pr_link, seconds_to_done, error, action, poll_until_ms,
                     flags, dropped, hold, decided_by, decided_at_ms, note, held_at_ms, review_rows,
                     automation, schema_id, instance_id
                     FROM rule_firings {filter} ORDER BY id"
                ),
                &params,
            )?
            .iter()
            .map(|r| {
                let f = Firing {
                    id: r.int(0)?,
                    rule: r.text(1)?,
                    project: r.text(2)?,
                    kind: Kind::parse(&r.text(13)?),
                    job: r.opt_text(3)?,
                    fired_at: from_ms(r.int(4)?),
                    prompt_hash: r.text(5)?,
                    prompt: r.text(6)?,
                    rows_matched: r.int(7)?,
                    sent: Sent::parse(&r.text(8)?),
                    status: r.opt_text(9)?,
                    pr_link: r.opt_text(10)?,
                    seconds_to_done: r.opt_real(11)?,
                    error: r.opt_text(12)?,
                    trail: Trail {
                        flags: r.opt_text(15)?,
                        dropped: r.opt_text(16)?,
                        hold: r.opt_text(17)?,
                        decided_by: r.opt_text(18)?,
                        decided_at: r.opt_int(19)?.map(from_ms),
                        note: r.opt_text(20)?,
                        held_at: r.opt_int(21)?.map(from_ms),
                        rows: r.opt_text(22)?,
                    },
                    run: match r.opt_text(23)? {
                        Some(automation) => Some(Run {
                            automation,
                            schema_id: r.opt_text(24)?,
                            instance_id: r.opt_text(25)?,
                        }),
                        None => None,
                    },
                };
                Ok((f, extra(r)?))
            })
            .collect()
        })
    }
}
