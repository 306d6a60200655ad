//! Which of a rule's output columns carry readers' words: followed from the parsed query, not
//! from the columns' names. An output column is a reader's when any column its expression
//! reads is one, through renames, `CASE`, `CONCAT`, string and list functions, aggregates,
//! subqueries, `WITH` clauses, derived tables, joins and set operations. The roots are the
//! trend tables' columns, classified once in [`super::readers`]: every column but the
//! service's own is a reader's there. Whatever the analysis cannot follow (a wildcard with
//! options, a table it does not know, an identifier it cannot resolve) counts as a reader's:
//! the analysis may say "reader" too often, never too seldom.

use sqlparser::ast::{
    Expr, Query, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TableAlias, TableFactor,
    TableWithJoins, Visit, Visitor, WildcardAdditionalOptions,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use std::collections::HashMap;
use std::ops::ControlFlow;

/// An output column: its name (lower case; `None` for an unnamed expression) and whether it
/// carries readers' words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The column's name as the query gives it, lower case.
    pub name: Option<String>,
    /// Whether any column its expression reads is a reader's.
    pub reader: bool,
}

/// The trend tables' columns, in order, each with whether it is a reader's.
pub type Base = HashMap<String, Vec<(String, bool)>>;

/// The query's output columns in order, or `None` when the analysis cannot follow it (every
/// output is then a reader's).
pub fn outputs(sql: &str, base: &Base) -> Option<Vec<Output>> {
    let statements = Parser::parse_sql(&GenericDialect {}, sql).ok()?;
    let [sqlparser::ast::Statement::Query(q)] = statements.as_slice() else {
        return None;
    };
    Lineage { base }.query(q, &HashMap::new())
}

/// Whether each of `width` output columns carries readers' words: by position from
/// [`outputs`]; every column when the analysis cannot follow the query or its width differs.
pub fn reader_columns(sql: &str, base: &Base, width: usize) -> Vec<bool> {
    match outputs(sql, base) {
        Some(o) if o.len() == width => o.into_iter().map(|c| c.reader).collect(),
        _ => vec![true; width],
    }
}

type Columns = Vec<(String, bool)>;

/// A relation in a `FROM` clause: its name (alias, else table) and columns.
struct Relation {
    name: String,
    columns: Columns,
}

struct Lineage<'a> {
    base: &'a Base,
}

impl Lineage<'_> {
    fn query(&self, q: &Query, outer: &HashMap<String, Columns>) -> Option<Vec<Output>> {
        let mut ctes = outer.clone();
        if let Some(with) = &q.with {
            for cte in &with.cte_tables {
                let out = self.query(&cte.query, &ctes)?;
                let cols = renamed(named(out)?, &cte.alias)?;
                ctes.insert(cte.alias.name.value.to_lowercase(), cols);
            }
        }
        self.set(&q.body, &ctes)
    }

    fn set(&self, body: &SetExpr, ctes: &HashMap<String, Columns>) -> Option<Vec<Output>> {
        match body {
            SetExpr::Select(s) => {
                let mut scope = Vec::new();
                for twj in &s.from {
                    self.joined(twj, ctes, &mut scope)?;
                }
                let mut out = Vec::new();
                for item in &s.projection {
                    self.item(item, &scope, ctes, &mut out)?;
                }
                Some(out)
            }
            SetExpr::Query(q) => self.query(q, ctes),
            SetExpr::SetOperation { left, right, .. } => {
                let l = self.set(left, ctes)?;
                let r = self.set(right, ctes)?;
                (l.len() == r.len()).then(|| {
                    l.into_iter()
                        .zip(r)
                        .map(|(a, b)| Output {
                            name: a.name,
                            reader: a.reader || b.reader,
                        })
                        .collect()
                })
            }
            SetExpr::Values(v) => {
                let width = v.rows.first().map_or(0, |r| r.content.len());
                let mut out = vec![
                    Output {
                        name: None,
                        reader: false
                    };
                    width
                ];
                for row in &v.rows {
                    for (o, e) in out.iter_mut().zip(&row.content) {
                        o.reader |= self.expr(e, &[], ctes);
                    }
                }
                Some(out)
            }
            _ => None,
        }
    }

    fn joined(
        &self,
        twj: &TableWithJoins,
        ctes: &HashMap<String, Columns>,
        scope: &mut Vec<Relation>,
    ) -> Option<()> {
        self.relation(&twj.relation, ctes, scope)?;
        for j in &twj.joins {
            self.relation(&j.relation, ctes, scope)?;
        }
        Some(())
    }

    fn relation(
        &self,
        factor: &TableFactor,
        ctes: &HashMap<String, Columns>,
        scope: &mut Vec<Relation>,
    ) -> Option<()> {
        match factor {
            TableFactor::Table {
                name, alias, args, ..
            } if args.is_none() => {
                let table = name.to_string().to_lowercase();
                let columns = ctes.get(&table).or_else(|| self.base.get(&table))?.clone();
                let (shown, columns) = match alias {
                    Some(a) => (a.name.value.to_lowercase(), renamed(columns, a)?),
                    None => (table, columns),
                };
                scope.push(Relation {
                    name: shown,
                    columns,
                });
                Some(())
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                let columns = named(self.query(subquery, ctes)?)?;
                let (shown, columns) = match alias {
                    Some(a) => (a.name.value.to_lowercase(), renamed(columns, a)?),
                    None => (String::new(), columns),
                };
                scope.push(Relation {
                    name: shown,
                    columns,
                });
                Some(())
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => self.joined(table_with_joins, ctes, scope),
            _ => None,
        }
    }

    fn item(
        &self,
        item: &SelectItem,
        scope: &[Relation],
        ctes: &HashMap<String, Columns>,
        out: &mut Vec<Output>,
    ) -> Option<()> {
        match item {
            SelectItem::UnnamedExpr(e) => out.push(Output {
                name: match e {
                    Expr::Identifier(i) => Some(i.value.to_lowercase()),
                    Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.to_lowercase()),
                    _ => None,
                },
                reader: self.expr(e, scope, ctes),
            }),
            SelectItem::ExprWithAlias { expr, alias } => out.push(Output {
                name: Some(alias.value.to_lowercase()),
                reader: self.expr(expr, scope, ctes),
            }),
            SelectItem::Wildcard(opts) if plain(opts) => {
                for r in scope {
                    out.extend(r.columns.iter().map(output));
                }
            }
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), opts)
                if plain(opts) =>
            {
                let name = n.to_string().to_lowercase();
                let r = scope.iter().find(|r| r.name == name)?;
                out.extend(r.columns.iter().map(output));
            }
            _ => return None,
        }
        Some(())
    }

    /// Whether an expression reads a reader's column (or anything it cannot resolve).
    fn expr(&self, e: &Expr, scope: &[Relation], ctes: &HashMap<String, Columns>) -> bool {
        let mut t = Taint {
            lineage: self,
            scope,
            ctes,
            reader: false,
        };
        let _ = e.visit(&mut t);
        t.reader
    }
}

/// A wildcard without `EXCLUDE`, `EXCEPT`, `REPLACE`, `RENAME` or `ILIKE`.
fn plain(o: &WildcardAdditionalOptions) -> bool {
    o.opt_ilike.is_none()
        && o.opt_exclude.is_none()
        && o.opt_except.is_none()
        && o.opt_replace.is_none()
        && o.opt_rename.is_none()
}

fn output((name, reader): &(String, bool)) -> Output {
    Output {
        name: Some(name.clone()),
        reader: *reader,
    }
}

/// Outputs as named columns; an unnamed one makes the relation unfollowable (its columns
/// could not be referred to by name).
fn named(out: Vec<Output>) -> Option<Columns> {
    out.into_iter()
        .map(|o| o.name.map(|n| (n, o.reader)))
        .collect()
}

/// Columns renamed by an alias's column list (`t(a, b)`), by position.
fn renamed(mut columns: Columns, alias: &TableAlias) -> Option<Columns> {
    if alias.columns.is_empty() {
        return Some(columns);
    }
    if alias.columns.len() > columns.len() {
        return None;
    }
    for (c, a) in columns.iter_mut().zip(&alias.columns) {
        c.0 = a.name.value.to_lowercase();
    }
    Some(columns)
}

struct Taint<'a> {
    lineage: &'a Lineage<'a>,
    scope: &'a [Relation],
    ctes: &'a HashMap<String, Columns>,
    reader: bool,
}

impl Taint<'_> {
    /// Whether a column reference is a reader's: any relation's column of that name (all of
    /// them, for an unqualified name), or true when none has it.
    fn column(&self, relation: Option<&str>, column: &str) -> bool {
        let mut found = false;
        let mut reader = false;
        for r in self.scope {
            if relation.is_some_and(|n| n != r.name) {
                continue;
            }
            for (c, t) in &r.columns {
                if c == column {
                    found = true;
                    reader |= *t;
                }
            }
        }
        reader || !found
    }
}

impl Visitor for Taint<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        let reader = match e {
            Expr::Identifier(i) => self.column(None, &i.value.to_lowercase()),
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [r, c] => self.column(
                    Some(r.value.to_lowercase().as_str()),
                    &c.value.to_lowercase(),
                ),
                _ => true,
            },
            Expr::Subquery(q) => self
                .lineage
                .query(q, self.ctes)
                .is_none_or(|o| o.iter().any(|c| c.reader)),
            _ => false,
        };
        if reader {
            self.reader = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Base {
        let cols = |c: &[(&str, bool)]| {
            c.iter()
                .map(|(n, r)| (n.to_string(), *r))
                .collect::<Vec<_>>()
        };
        HashMap::from([
            (
                "search_terms".to_string(),
                cols(&[
                    ("project", false),
                    ("search_query", true),
                    ("hits_7d", true),
                    ("top_clicked_page", true),
                ]),
            ),
            (
                "pages".to_string(),
                cols(&[("project", false), ("path", true), ("views_7d", true)]),
            ),
            (
                "daily".to_string(),
                cols(&[("project", false), ("date", true), ("ai", true)]),
            ),
        ])
    }

    fn readers(sql: &str) -> Vec<bool> {
        outputs(sql, &base())
            .unwrap_or_else(|| panic!("{sql}"))
            .into_iter()
            .map(|o| o.reader)
            .collect()
    }

    #[test]
    fn a_readers_column_is_followed_through_every_form() {
        for sql in [
            "SELECT search_query AS status FROM search_terms",
            "SELECT ARRAY_AGG(search_query) AS terms FROM search_terms GROUP BY project",
            "SELECT string_agg(search_query, ', ') AS terms FROM search_terms",
            "SELECT CONCAT('x', search_query) AS t FROM search_terms",
            "SELECT CASE WHEN hits_7d > 5 THEN search_query ELSE 'none' END AS t FROM search_terms",
            "SELECT CASE WHEN search_query LIKE 'a%' THEN 'a' ELSE 'b' END AS t FROM search_terms",
            "SELECT t FROM (SELECT UPPER(search_query) AS t FROM search_terms) AS s",
            "WITH s AS (SELECT search_query AS q FROM search_terms) SELECT q AS project FROM s",
            "WITH s(a) AS (SELECT search_query FROM search_terms) SELECT a FROM s",
            "SELECT p.project || s.search_query AS x FROM pages p JOIN search_terms s ON s.top_clicked_page = p.path",
            "SELECT (SELECT FIRST(search_query) FROM search_terms) AS x",
            "SELECT project FROM daily UNION ALL SELECT search_query FROM search_terms",
            "SELECT nobody_knows AS x FROM daily",
        ] {
            assert_eq!(readers(sql), vec![true], "{sql}");
        }
    }

    #[test]
    fn the_services_columns_and_constants_are_not_readers() {
        assert_eq!(
            readers("SELECT project, 'x' AS c, COUNT(*) AS n FROM search_terms GROUP BY project"),
            vec![false, false, false]
        );
        assert_eq!(
            readers("SELECT s.project AS status, s.search_query FROM search_terms AS s"),
            vec![false, true]
        );
        assert_eq!(
            readers("SELECT * FROM pages"),
            vec![false, true, true],
            "a wildcard takes each column's lineage"
        );
        assert_eq!(
            readers("SELECT p.* FROM pages p JOIN daily d USING (project)"),
            vec![false, true, true]
        );
    }

    #[test]
    fn what_cannot_be_followed_is_a_readers() {
        assert_eq!(outputs("SELECT * EXCLUDE (path) FROM pages", &base()), None);
        assert_eq!(outputs("SELECT * FROM unknown_table", &base()), None);
        assert_eq!(
            reader_columns("SELECT project FROM pages", &base(), 2),
            vec![true, true],
            "a width the analysis did not foresee"
        );
        assert_eq!(
            reader_columns("SELECT project FROM pages", &base(), 1),
            vec![false]
        );
    }
}
