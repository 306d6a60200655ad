//! What a rule's query may read: the trend tables (`daily`, `weekly`, `pages` and the gap
//! tables of [`docpipe_derive::gaps`]) and the tables
//! its own `WITH` clauses name; no table functions (`read_csv`, `read_parquet`, ...), no file,
//! one `SELECT` statement. Checked on the parsed query before polars sees it.

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, JoinConstraint,
    JoinOperator, Query, SetExpr, Statement, TableFactor, TableWithJoins, Value, Visit, Visitor,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use std::collections::HashMap;
use std::ops::ControlFlow;

/// The tables a rule's query can name.
pub const TABLES: [&str; 13] = docpipe_derive::NAMES;

/// The longest text `LPAD` and `RPAD` may make, in characters: the only functions of polars'
/// SQL that make text from a number, so that a rule's evaluation stays within its memory
/// (`LPAD(path, 100000000)` over a table of pages asks for gigabytes).
pub const MAX_PAD: u64 = 1_000;

/// Why a call's size argument is refused, if it is: `LPAD` and `RPAD` take a length written as
/// a whole number in the query, at most [`MAX_PAD`].
fn pad_size(f: &sqlparser::ast::Function) -> Option<String> {
    let name = f.name.to_string().to_lowercase();
    if !matches!(name.as_str(), "lpad" | "rpad") {
        return None;
    }
    let upper = name.to_uppercase();
    let FunctionArguments::List(list) = &f.args else {
        return Some(format!("{upper} takes a text and a length"));
    };
    let length = list.args.get(1).and_then(|a| match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) => match &v.value {
            Value::Number(n, _) => Some(n.clone()),
            _ => None,
        },
        _ => None,
    });
    match length.as_deref().map(str::parse::<u64>) {
        Some(Ok(n)) if n <= MAX_PAD => None,
        Some(_) => Some(format!(
            "{upper}'s length {} is more than {MAX_PAD}: a rule's evaluation stays within its memory",
            length.unwrap_or_default()
        )),
        None => Some(format!(
            "{upper}'s length must be a whole number written in the query, at most {MAX_PAD} (not an expression): a rule's evaluation stays within its memory"
        )),
    }
}

struct Reads {
    ctes: Vec<String>,
    /// The trend tables named, lower case, in the order first named.
    tables: Vec<String>,
}

impl Visitor for Reads {
    type Break = String;

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        if let Expr::Function(f) = expr
            && let Some(why) = pad_size(f)
        {
            return ControlFlow::Break(why);
        }
        ControlFlow::Continue(())
    }

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
                crate::one_line(&other.to_string()),
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

/// What the join bound needs to know of the tables (already filtered to the rule's project).
pub trait Sizes {
    /// The rows of a trend table.
    fn rows(&mut self, table: &str) -> u64;
    /// The most rows that share one value of `column` in `table` (`None`: no such column).
    fn most_per_value(&mut self, table: &str, column: &str) -> Option<u64>;
}

/// An upper bound of the rows the largest join of a query can produce: for each `FROM` list,
/// the product of its relations, each joined table counting by the most rows one value of its
/// join key matches (a `USING` or `ON ... = ...` column of its own), or all its rows when the
/// join names no key of it. Every query (subqueries and `WITH` clauses too) is bounded; the
/// largest bound is returned. Filters are not counted: it is a bound, not an estimate.
pub fn join_bound(sql: &str, sizes: &mut dyn Sizes) -> Result<u64, String> {
    let statements = Parser::parse_sql(&GenericDialect {}, sql)
        .map_err(|e| format!("the query does not parse: {e}"))?;
    let mut b = Bound {
        sizes,
        ctes: HashMap::new(),
        largest: 0,
    };
    for s in &statements {
        let _ = s.visit(&mut b);
    }
    Ok(b.largest)
}

struct Bound<'a> {
    sizes: &'a mut dyn Sizes,
    ctes: HashMap<String, u64>,
    largest: u64,
}

impl Visitor for Bound<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                let n = self.query(&cte.query);
                self.ctes.insert(cte.alias.name.value.to_lowercase(), n);
            }
        }
        let n = self.query(query);
        self.largest = self.largest.max(n);
        ControlFlow::Continue(())
    }
}

impl Bound<'_> {
    fn query(&mut self, q: &Query) -> u64 {
        self.set(&q.body)
    }

    fn set(&mut self, body: &SetExpr) -> u64 {
        match body {
            SetExpr::Select(s) => {
                let mut n: u64 = 1;
                for twj in &s.from {
                    n = n.saturating_mul(self.joined(twj));
                }
                self.largest = self.largest.max(n);
                n
            }
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation { left, right, .. } => {
                self.set(left).saturating_add(self.set(right))
            }
            SetExpr::Values(v) => v.rows.len() as u64,
            _ => 0,
        }
    }

    /// A relation's name (its alias, else its table) and its rows.
    fn relation(&mut self, factor: &TableFactor) -> (Option<String>, Option<String>, u64) {
        match factor {
            TableFactor::Table { name, alias, .. } => {
                let table = name.to_string().to_lowercase();
                let rows = match self.ctes.get(&table) {
                    Some(n) => *n,
                    None => self.sizes.rows(&table),
                };
                let shown = alias
                    .as_ref()
                    .map_or(table.clone(), |a| a.name.value.to_lowercase());
                let real = (!self.ctes.contains_key(&table)).then_some(table);
                (Some(shown), real, rows)
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => (
                alias.as_ref().map(|a| a.name.value.to_lowercase()),
                None,
                self.query(subquery),
            ),
            TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => (
                alias.as_ref().map(|a| a.name.value.to_lowercase()),
                None,
                self.joined(table_with_joins),
            ),
            _ => (None, None, 1),
        }
    }

    /// A chain of joins: the first relation's rows times, for each join, what one row of the
    /// left side may match in the joined relation.
    fn joined(&mut self, twj: &TableWithJoins) -> u64 {
        let (_, _, mut n) = self.relation(&twj.relation);
        for j in &twj.joins {
            let (name, table, rows) = self.relation(&j.relation);
            let keys = match constraint(&j.join_operator) {
                Some(JoinConstraint::Using(cols)) => {
                    cols.iter().map(|c| c.to_string().to_lowercase()).collect()
                }
                Some(JoinConstraint::On(e)) => name
                    .as_deref()
                    .map(|name| own_keys(e, name))
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let per_row = match &table {
                Some(t) => keys
                    .iter()
                    .filter_map(|k| self.sizes.most_per_value(t, k))
                    .min()
                    .unwrap_or(rows),
                None => rows,
            };
            n = n.saturating_mul(per_row.max(1).min(rows.max(1)));
        }
        n
    }
}

/// A join's constraint, whatever its kind.
fn constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c) => Some(c),
        _ => None,
    }
}

/// The columns of relation `name` an `ON` condition sets equal to something (through `AND`).
fn own_keys(e: &Expr, name: &str) -> Vec<String> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut out = own_keys(left, name);
            out.extend(own_keys(right, name));
            out
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => [left, right]
            .into_iter()
            .filter_map(|side| match side.as_ref() {
                Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                    (parts[0].value.eq_ignore_ascii_case(name))
                        .then(|| parts[1].value.to_lowercase())
                }
                _ => None,
            })
            .collect(),
        Expr::Nested(inner) => own_keys(inner, name),
        _ => Vec::new(),
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
            "SELECT LPAD(path, 40, ' ') FROM pages",
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
            (
                "SELECT LPAD(path, 100000000, 'x') AS p FROM pages",
                "LPAD's length 100000000 is more than 1000: a rule's evaluation stays within its memory".to_string(),
            ),
            (
                "SELECT p FROM (SELECT rpad(path, total_7d, 'x') AS p FROM pages) AS t",
                "RPAD's length must be a whole number written in the query, at most 1000 (not an expression): a rule's evaluation stays within its memory".to_string(),
            ),
        ] {
            assert_eq!(check(bad), Err(why), "{bad}");
        }
    }

    struct Fixed;

    impl Sizes for Fixed {
        fn rows(&mut self, table: &str) -> u64 {
            match table {
                "pages" => 14_000,
                "search_terms" => 5_000,
                _ => 10,
            }
        }
        fn most_per_value(&mut self, table: &str, column: &str) -> Option<u64> {
            match (table, column) {
                (_, "project") => Some(self.rows(table)),
                ("pages", "path") => Some(1),
                _ => None,
            }
        }
    }

    #[test]
    fn a_join_is_bounded_by_what_its_key_may_match() {
        let b = |sql: &str| join_bound(sql, &mut Fixed).unwrap();
        assert_eq!(b("SELECT path FROM pages"), 14_000);
        assert_eq!(
            b(
                "SELECT s.search_query FROM search_terms s JOIN pages p ON s.top_clicked_page = p.path"
            ),
            5_000
        );
        assert_eq!(
            b(
                "SELECT 1 FROM pages a JOIN pages b ON a.project = b.project JOIN pages c ON a.project = c.project LIMIT 5"
            ),
            14_000 * 14_000 * 14_000
        );
        assert_eq!(b("SELECT 1 FROM pages a, pages b"), 14_000 * 14_000);
        assert_eq!(
            b("WITH x AS (SELECT 1 FROM pages a CROSS JOIN pages b) SELECT 1 FROM daily"),
            14_000 * 14_000
        );
        assert_eq!(
            b(
                "SELECT 1 FROM daily WHERE 1 IN (SELECT 1 FROM pages a JOIN pages b USING (project))"
            ),
            14_000 * 14_000
        );
    }
}
