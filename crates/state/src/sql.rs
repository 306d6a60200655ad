//! One way to speak to the state database, whichever it is: SQLite (one machine, the default) or
//! PostgreSQL (several machines). A part of the store written against [`Sql`] runs on both, with
//! the same statements: `?1`-style parameters (rewritten to `$1` for PostgreSQL), integers as
//! 64-bit (`BIGINT` there), days and times as text, and every statement of a call in one
//! transaction.

use super::StoreError;
use super::pg::{Pg, PgError};
use super::{Db, StoreError as E};
use chrono::NaiveDate;
use std::sync::Arc;

/// A value bound to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// NULL.
    Null,
    /// An integer (booleans are 0 and 1).
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text (days and times as ISO 8601).
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<NaiveDate> for Value {
    fn from(v: NaiveDate) -> Self {
        Value::Text(v.to_string())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A row read, its columns in the statement's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

/// A column that is not what the reader expects (a damaged or hand-edited database).
fn wrong(i: usize, what: &str, v: &Value) -> SqlError {
    SqlError {
        message: format!("column {i} is not {what}: {v:?}"),
        connection: false,
    }
}

impl Row {
    fn at(&self, i: usize) -> &Value {
        self.0.get(i).unwrap_or(&Value::Null)
    }

    /// An integer column.
    pub fn int(&self, i: usize) -> Result<i64, SqlError> {
        match self.at(i) {
            Value::Int(v) => Ok(*v),
            v => Err(wrong(i, "an integer", v)),
        }
    }

    /// An integer column that may be NULL.
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>, SqlError> {
        match self.at(i) {
            Value::Null => Ok(None),
            _ => self.int(i).map(Some),
        }
    }

    /// A text column.
    pub fn text(&self, i: usize) -> Result<String, SqlError> {
        match self.at(i) {
            Value::Text(v) => Ok(v.clone()),
            v => Err(wrong(i, "text", v)),
        }
    }

    /// A text column, borrowed.
    pub fn str(&self, i: usize) -> Result<&str, SqlError> {
        match self.at(i) {
            Value::Text(v) => Ok(v),
            v => Err(wrong(i, "text", v)),
        }
    }

    /// A text column that may be NULL.
    pub fn opt_text(&self, i: usize) -> Result<Option<String>, SqlError> {
        match self.at(i) {
            Value::Null => Ok(None),
            _ => self.text(i).map(Some),
        }
    }

    /// A floating-point column that may be NULL (an integer one is read as a float).
    pub fn opt_real(&self, i: usize) -> Result<Option<f64>, SqlError> {
        match self.at(i) {
            Value::Null => Ok(None),
            Value::Real(v) => Ok(Some(*v)),
            Value::Int(v) => Ok(Some(*v as f64)),
            v => Err(wrong(i, "a number", v)),
        }
    }

    /// A bytes column.
    pub fn blob(&self, i: usize) -> Result<Vec<u8>, SqlError> {
        match self.at(i) {
            Value::Blob(v) => Ok(v.clone()),
            v => Err(wrong(i, "bytes", v)),
        }
    }

    /// A time column (RFC 3339 text).
    pub fn time(&self, i: usize) -> Result<chrono::DateTime<chrono::Utc>, SqlError> {
        let v = self.text(i)?;
        chrono::DateTime::parse_from_rfc3339(&v)
            .map(|t| t.to_utc())
            .map_err(|_| wrong(i, "a time", &Value::Text(v)))
    }

    /// A day column.
    pub fn day(&self, i: usize) -> Result<NaiveDate, SqlError> {
        let v = self.str(i)?;
        docpipe_catalog::calendar::parse_day(v).ok_or_else(|| wrong(i, "a day", self.at(i)))
    }
}

/// A statement that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    /// What failed.
    pub message: String,
    /// The connection failed (the server gone), not the statement: worth waiting for.
    pub connection: bool,
}

impl From<rusqlite::Error> for SqlError {
    fn from(e: rusqlite::Error) -> Self {
        SqlError {
            message: e.to_string(),
            connection: false,
        }
    }
}

/// The statements of one call, in one transaction (see [`Sql::tx`]).
pub trait Tx {
    /// Runs a statement; the rows it changed.
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError>;
    /// Runs a query; its rows.
    fn rows(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, SqlError>;
    /// Which database this is (for the few statements the two spell differently).
    fn postgres(&self) -> bool;

    /// The query's first row, if any.
    fn row(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>, SqlError> {
        Ok(self.rows(sql, params)?.into_iter().next())
    }

    /// Runs a query, handing `f` its rows one at a time, in one [`Row`] filled again for each
    /// (on SQLite nothing is allocated a row once the first is read: the reads of every day
    /// of every dataset and project go this way).
    fn each(
        &mut self,
        sql: &str,
        params: &[Value],
        f: &mut dyn FnMut(&Row) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        for r in self.rows(sql, params)? {
            f(&r)?;
        }
        Ok(())
    }
}

struct Lite<'a>(rusqlite::Transaction<'a>);

impl Tx for Lite<'_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        let mut st = self.0.prepare_cached(sql)?;
        Ok(st.execute(rusqlite::params_from_iter(params.iter().map(lite_value)))? as u64)
    }

    fn rows(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, SqlError> {
        let mut out = Vec::new();
        self.each(sql, params, &mut |r| {
            out.push(r.clone());
            Ok(())
        })?;
        Ok(out)
    }

    fn each(
        &mut self,
        sql: &str,
        params: &[Value],
        f: &mut dyn FnMut(&Row) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        let mut st = self.0.prepare_cached(sql)?;
        let n = st.column_count();
        let mut rows = st.query(rusqlite::params_from_iter(params.iter().map(lite_value)))?;
        let mut row = Row(vec![Value::Null; n]);
        while let Some(r) = rows.next()? {
            for (i, v) in row.0.iter_mut().enumerate() {
                refill(v, r.get_ref(i)?);
            }
            f(&row)?;
        }
        Ok(())
    }

    fn postgres(&self) -> bool {
        false
    }
}

/// Puts a column read into `v`, in place: text and bytes in the space `v` already holds.
fn refill(v: &mut Value, from: rusqlite::types::ValueRef<'_>) {
    use rusqlite::types::ValueRef as R;
    match (v, from) {
        (Value::Text(s), R::Text(t)) => {
            s.clear();
            s.push_str(&String::from_utf8_lossy(t));
        }
        (Value::Blob(b), R::Blob(t)) => {
            b.clear();
            b.extend_from_slice(t);
        }
        (v, from) => *v = lite_read(from),
    }
}

/// A column read, as a [`Value`].
fn lite_read(v: rusqlite::types::ValueRef<'_>) -> Value {
    match v {
        rusqlite::types::ValueRef::Null => Value::Null,
        rusqlite::types::ValueRef::Integer(v) => Value::Int(v),
        rusqlite::types::ValueRef::Real(v) => Value::Real(v),
        rusqlite::types::ValueRef::Text(v) => Value::Text(String::from_utf8_lossy(v).into_owned()),
        rusqlite::types::ValueRef::Blob(v) => Value::Blob(v.to_vec()),
    }
}

fn lite_value(v: &Value) -> rusqlite::types::Value {
    match v {
        Value::Null => rusqlite::types::Value::Null,
        Value::Int(v) => rusqlite::types::Value::Integer(*v),
        Value::Real(v) => rusqlite::types::Value::Real(*v),
        Value::Text(v) => rusqlite::types::Value::Text(v.clone()),
        Value::Blob(v) => rusqlite::types::Value::Blob(v.clone()),
    }
}

/// `?1`-style parameters as PostgreSQL's `$1` (the statements carry no `?` in literals).
fn pg_statement(sql: &str) -> String {
    sql.replace('?', "$")
}

impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match self {
            Value::Null => Ok(postgres::types::IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                Type::BOOL => (*v != 0).to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Value::Real(v) => match *ty {
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Value::Text(v) => v.to_sql(ty, out),
            Value::Blob(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

struct Remote<'a>(postgres::Transaction<'a>);

fn pg_err(e: postgres::Error) -> SqlError {
    SqlError {
        connection: e.as_db_error().is_none(),
        message: super::pg::describe(&e),
    }
}

impl Tx for Remote<'_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn postgres::types::ToSql + Sync))
            .collect();
        self.0.execute(&pg_statement(sql), &params).map_err(pg_err)
    }

    fn rows(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, SqlError> {
        use postgres::types::Type;
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let rows = self.0.query(&pg_statement(sql), &params).map_err(pg_err)?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| {
                        let ty = r.columns()[i].type_().clone();
                        let v = match ty {
                            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Int),
                            Type::INT4 => r
                                .try_get::<_, Option<i32>>(i)?
                                .map(|v| Value::Int(v.into())),
                            Type::INT2 => r
                                .try_get::<_, Option<i16>>(i)?
                                .map(|v| Value::Int(v.into())),
                            Type::BOOL => r
                                .try_get::<_, Option<bool>>(i)?
                                .map(|v| Value::Int(v.into())),
                            Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
                            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Value::Real),
                            Type::FLOAT4 => r
                                .try_get::<_, Option<f32>>(i)?
                                .map(|v| Value::Real(v.into())),
                            _ => r.try_get::<_, Option<String>>(i)?.map(Value::Text),
                        };
                        Ok(v.unwrap_or(Value::Null))
                    })
                    .collect::<Result<Vec<Value>, postgres::Error>>()
                    .map(Row)
                    .map_err(pg_err)
            })
            .collect()
    }

    fn postgres(&self) -> bool {
        true
    }
}

/// The state database: SQLite's file or a PostgreSQL server.
#[derive(Debug, Clone)]
pub enum Sql {
    /// The output folder's (or `budget_db`'s) SQLite file.
    Lite(Arc<Db>),
    /// A PostgreSQL database several processes share.
    Pg(Arc<Pg>),
}

impl Sql {
    /// Runs `f` in one transaction (SQLite's taken for writing at once, so that concurrent
    /// writers queue instead of failing), committed when it returns `Ok`, rolled back otherwise.
    pub fn tx<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> Result<T, SqlError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run(rusqlite::TransactionBehavior::Immediate, f)
    }

    /// Runs `f`, which only reads, in one transaction: on SQLite without the write lock (a
    /// reader never holds up the exporter's writes).
    pub fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Tx) -> Result<T, SqlError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run(rusqlite::TransactionBehavior::Deferred, f)
    }

    fn run<T: Send + 'static>(
        &self,
        behavior: rusqlite::TransactionBehavior,
        f: impl FnOnce(&mut dyn Tx) -> Result<T, SqlError> + Send + 'static,
    ) -> Result<T, StoreError> {
        match self {
            Sql::Lite(db) => {
                let mut failed = None;
                let result = db.with_conn(|c| {
                    let tx = c.transaction_with_behavior(behavior)?;
                    let mut tx = Lite(tx);
                    match f(&mut tx) {
                        Ok(v) => {
                            tx.0.commit()?;
                            Ok(Some(v))
                        }
                        Err(e) => {
                            failed = Some(e);
                            Ok(None)
                        }
                    }
                })?;
                match (result, failed) {
                    (Some(v), _) => Ok(v),
                    (None, e) => Err(E::Sql {
                        name: db.path().to_string(),
                        message: e.map_or_else(String::new, |e| e.message),
                    }),
                }
            }
            Sql::Pg(pg) => {
                let result = pg.with(move |c| {
                    let tx = c.transaction()?;
                    let mut tx = Remote(tx);
                    Ok(match f(&mut tx) {
                        Ok(v) => {
                            tx.0.commit()
                                .map(|()| Ok(v))
                                .unwrap_or_else(|e| Err(pg_err(e)))
                        }
                        Err(e) => Err(e),
                    })
                });
                match result {
                    Ok(Ok(v)) => Ok(v),
                    Ok(Err(e)) => Err(E::Shared(PgError {
                        name: pg.name().to_string(),
                        message: e.message,
                        connection: e.connection,
                    })),
                    Err(e) => Err(E::Shared(e)),
                }
            }
        }
    }

    /// Which database, for messages and `status`.
    pub fn name(&self) -> &str {
        match self {
            Sql::Lite(db) => db.path(),
            Sql::Pg(pg) => pg.name(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hands_the_rows_that_rows_returns_one_buffer_refilled() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(
            Db::open(
                &dir.path().join("s.sqlite"),
                "CREATE TABLE t (n INTEGER, s TEXT, b BLOB, r REAL);
                 INSERT INTO t VALUES (1, 'a much longer text first', x'0102', 1.5);
                 INSERT INTO t VALUES (NULL, 'short', NULL, NULL);
                 INSERT INTO t VALUES (3, NULL, x'03', 2.0);
                 INSERT INTO t VALUES (4, 'after a null', x'', 4);",
            )
            .unwrap(),
        );
        let sql = Sql::Lite(db);
        let (all, seen) = sql
            .read(|tx| {
                let q = "SELECT n, s, b, r FROM t ORDER BY rowid";
                let all = tx.rows(q, &[])?;
                let mut seen = Vec::new();
                tx.each(q, &[], &mut |r| {
                    seen.push(r.clone());
                    Ok(())
                })?;
                Ok((all, seen))
            })
            .unwrap();
        assert_eq!(seen, all);
        assert_eq!(
            seen,
            vec![
                Row(vec![
                    Value::Int(1),
                    "a much longer text first".into(),
                    Value::Blob(vec![1, 2]),
                    Value::Real(1.5)
                ]),
                Row(vec![Value::Null, "short".into(), Value::Null, Value::Null]),
                Row(vec![
                    Value::Int(3),
                    Value::Null,
                    Value::Blob(vec![3]),
                    Value::Real(2.0)
                ]),
                Row(vec![
                    Value::Int(4),
                    "after a null".into(),
                    Value::Blob(vec![]),
                    // A REAL column keeps an integer as a float.
                    Value::Real(4.0)
                ]),
            ]
        );
        // An error of the callback stops the query and is the query's.
        let err = sql
            .read(|tx| {
                let mut n = 0;
                tx.each("SELECT n FROM t", &[], &mut |_| {
                    n += 1;
                    if n == 2 {
                        return Err(SqlError {
                            message: "stop at the second".into(),
                            connection: false,
                        });
                    }
                    Ok(())
                })?;
                Ok(n)
            })
            .unwrap_err();
        assert!(err.to_string().ends_with("stop at the second"), "{err}");
    }
}
