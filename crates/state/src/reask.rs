//! The questions of a firing asked again of the project's assistant once its job ended with a
//! pull request: each question's asks (the first, and one more later when the first found
//! nothing), what the assistant answered, which pages it cited. Written against [`Sql`]: the
//! same statements on SQLite and PostgreSQL (migration 15 in `pg.rs`); SQLite's table is made
//! with the ledger's (`ledger::REASK_SCHEMA`).

use super::StoreError;
use super::ledger::{Ledger, from_ms, ms};
use super::sql::{Row, SqlError, Value};
use chrono::{DateTime, Utc};

/// How the assistant answered a question asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// It answered, citing pages.
    Answered,
    /// It found nothing (its search found no page, or it marked the question not found).
    NotFound,
    /// It asked the reader a question back.
    Clarifying,
}

impl Resolution {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Answered => "answered",
            Resolution::NotFound => "not_found",
            Resolution::Clarifying => "clarifying",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        match word {
            "answered" => Some(Resolution::Answered),
            "not_found" => Some(Resolution::NotFound),
            "clarifying" => Some(Resolution::Clarifying),
            _ => None,
        }
    }
}

/// One ask of one question of a firing.
#[derive(Debug, Clone, PartialEq)]
pub struct Reask {
    /// The firing.
    pub firing_id: i64,
    /// The question (the firing's key).
    pub question: String,
    /// 1 for the first ask, 2 for the one after the first found nothing.
    pub attempt: i64,
    /// When it is due.
    pub due_at: DateTime<Utc>,
    /// When it was asked (none: not yet).
    pub asked_at: Option<DateTime<Utc>>,
    /// How the assistant answered (none: not asked, or the ask failed).
    pub resolution: Option<Resolution>,
    /// The pages the answer cited, in order.
    pub sources: Vec<String>,
    /// Whether one of them is a page the firing named (where its job was asked to answer).
    pub cites_named: bool,
    /// Why the ask failed.
    pub error: Option<String>,
}

fn reask(r: &Row) -> Result<Reask, SqlError> {
    Ok(Reask {
        firing_id: r.int(0)?,
        question: r.text(1)?,
        attempt: r.int(2)?,
        due_at: from_ms(r.int(3)?),
        asked_at: r.opt_int(4)?.map(from_ms),
        resolution: r.opt_text(5)?.as_deref().and_then(Resolution::parse),
        sources: r
            .opt_text(6)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        cites_named: r.opt_int(7)? == Some(1),
        error: r.opt_text(8)?,
    })
}

const COLUMNS: &str =
    "firing_id, question, attempt, due_at_ms, asked_at_ms, resolution, sources, cites_named, error";

impl Ledger {
    /// Plans a firing's first asks, due at `due`, unless it has some already; whether it
    /// planned them.
    pub fn plan_reasks(
        &self,
        firing: i64,
        questions: &[String],
        due: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let questions = questions.to_vec();
        self.sql.tx(move |tx| {
            let has = tx
                .row(
                    "SELECT 1 FROM reasks WHERE firing_id = ?1",
                    &[Value::Int(firing)],
                )?
                .is_some();
            if has {
                return Ok(false);
            }
            for q in &questions {
                tx.exec(
                    "INSERT INTO reasks (firing_id, question, attempt, due_at_ms) VALUES (?1, ?2, 1, ?3)",
                    &[Value::Int(firing), q.as_str().into(), Value::Int(ms(due))],
                )?;
            }
            Ok(true)
        })
    }

    /// The asks due by `now` and not asked yet, oldest first.
    pub fn due_reasks(&self, now: DateTime<Utc>) -> Result<Vec<Reask>, StoreError> {
        let p = vec![Value::Int(ms(now))];
        self.sql.read(move |tx| {
            tx.rows(
                &format!(
                    "SELECT {COLUMNS} FROM reasks WHERE asked_at_ms IS NULL AND due_at_ms <= ?1
                     ORDER BY due_at_ms, firing_id, question, attempt"
                ),
                &p,
            )?
            .iter()
            .map(reask)
            .collect()
        })
    }

    /// Records an ask's answer (or its error) and, when `again` is given, plans the next ask of
    /// the same question then.
    pub fn record_reask(&self, r: &Reask, again: Option<DateTime<Utc>>) -> Result<(), StoreError> {
        let key = (r.firing_id, r.question.clone(), r.attempt);
        let p = vec![
            Value::Int(key.0),
            key.1.as_str().into(),
            Value::Int(key.2),
            r.asked_at.map(ms).into(),
            r.resolution.map(|x| x.as_str().to_string()).into(),
            serde_json::to_string(&r.sources).ok().into(),
            Value::Int(i64::from(r.cites_named)),
            r.error.clone().into(),
        ];
        let next = again.map(|at| {
            vec![
                Value::Int(key.0),
                key.1.as_str().into(),
                Value::Int(key.2 + 1),
                Value::Int(ms(at)),
            ]
        });
        self.sql.tx(move |tx| {
            tx.exec(
                "UPDATE reasks SET asked_at_ms = ?4, resolution = ?5, sources = ?6, cites_named = ?7,
                 error = ?8 WHERE firing_id = ?1 AND question = ?2 AND attempt = ?3",
                &p,
            )?;
            if let Some(next) = &next {
                tx.exec(
                    "INSERT INTO reasks (firing_id, question, attempt, due_at_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (firing_id, question, attempt) DO NOTHING",
                    next,
                )?;
            }
            Ok(())
        })
    }

    /// Every ask of every firing, by firing, question and attempt.
    pub fn reasks(&self) -> Result<Vec<Reask>, StoreError> {
        self.sql.read(move |tx| {
            tx.rows(
                &format!("SELECT {COLUMNS} FROM reasks ORDER BY firing_id, question, attempt"),
                &[],
            )?
            .iter()
            .map(reask)
            .collect()
        })
    }
}
