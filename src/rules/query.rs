//! What a rule's query may read: the trend tables (`daily`, `weekly`, `pages` and the gap
//! tables of [`crate::trends::gaps`]) and the tables
//! its own `WITH` clauses name; no table functions (`read_csv`, `read_parquet`, ...), no file,
//! one `SELECT` statement. Checked on the parsed query before polars sees it.

use sqlparser::ast::{Query, Statement, TableFactor, Visit, Visitor};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use std::ops::ControlFlow;

/// The tables a rule's query can name.
pub const TABLES: [&str; 11] = crate::trends::NAMES;

struct Reads {
    ctes: Vec<String>,
    /// The trend tables named, lower case, in the order first named.
    tables: Vec<String>,
}

impl Visitor for Reads {
    type Break = String;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.push(cte.alias.name.value.to_lowercase());
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        match factor {
            TableFactor::Table { name, args, .. } => {
                let shown = name.to_string();
                if args.is_some() {
                    return ControlFlow::Break(format!(
                        "{shown}(...) is a table function; a rule reads only the trend tables ({})",
                        TABLES.join(", ")
                    ));
                }
                let plain = shown.to_lowercase();
                if !TABLES.contains(&plain.as_str()) && !self.ctes.contains(&plain) {
                    return ControlFlow::Break(format!(
                        "table {shown} is not a trend table ({})",
                        TABLES.join(", ")
                    ));
                }
                if !self.ctes.contains(&plain) && !self.tables.contains(&plain) {
                    self.tables.push(plain);
                }
                ControlFlow::Continue(())
            }
            TableFactor::Derived { .. } | TableFactor::NestedJoin { .. } => {
                ControlFlow::Continue(())
            }
            other => ControlFlow::Break(format!(
                "{} is not allowed; a rule reads only the trend tables ({})",
                crate::rules::one_line(&other.to_string()),
                TABLES.join(", ")
            )),
        }
    }
}

/// Checks that `sql` is one query that reads only the trend tables; the error says why not.
pub fn check(sql: &str) -> Result<(), String> {
    tables(sql).map(|_| ())
}

/// The trend tables `sql` reads (lower case, in the order first named), once [`check`]ed.
pub fn tables(sql: &str) -> Result<Vec<String>, String> {
    let statements = Parser::parse_sql(&GenericDialect {}, sql)
        .map_err(|e| format!("the query does not parse: {e}"))?;
    let [statement] = statements.as_slice() else {
        return Err(format!(
            "give one SELECT query, not {} statements",
            statements.len()
        ));
    };
    if !matches!(statement, Statement::Query(_)) {
        return Err("give a SELECT query".into());
    }
    let mut reads = Reads {
        ctes: Vec::new(),
        tables: Vec::new(),
    };
    match statement.visit(&mut reads) {
        ControlFlow::Continue(()) => Ok(reads.tables),
        ControlFlow::Break(why) => Err(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_trend_tables_are_read() {
        for ok in [
            "SELECT * FROM daily",
            "SELECT d.date FROM daily d JOIN weekly w ON d.project = w.project",
            "WITH t AS (SELECT * FROM pages) SELECT * FROM t WHERE rank_7d <= 5",
            "SELECT * FROM (SELECT * FROM daily) AS x",
            "SELECT 1",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            tables("WITH t AS (SELECT * FROM Pages) SELECT * FROM t JOIN daily d ON 1 = 1"),
            Ok(vec!["pages".to_string(), "daily".to_string()])
        );
        let tf = format!("a rule reads only the trend tables ({})", TABLES.join(", "));
        for (bad, why) in [
            (
                "SELECT * FROM read_csv('/etc/keys.env')",
                format!("read_csv(...) is a table function; {tf}"),
            ),
            (
                "SELECT * FROM daily, read_parquet('/x.parquet')",
                format!("read_parquet(...) is a table function; {tf}"),
            ),
            (
                "WITH read_csv AS (SELECT 1) SELECT * FROM read_csv('/etc/passwd')",
                format!("read_csv(...) is a table function; {tf}"),
            ),
            (
                "SELECT * FROM daily WHERE date IN (SELECT date FROM read_ndjson('/x'))",
                format!("read_ndjson(...) is a table function; {tf}"),
            ),
            (
                "SELECT * FROM secrets",
                format!("table secrets is not a trend table ({})", TABLES.join(", ")),
            ),
            (
                "CREATE TABLE x AS SELECT * FROM read_csv('/etc/passwd')",
                "give a SELECT query".to_string(),
            ),
            (
                "SELECT 1; SELECT 2",
                "give one SELECT query, not 2 statements".to_string(),
            ),
        ] {
            assert_eq!(check(bad), Err(why), "{bad}");
        }
    }
}
