//! `GET /v1/analytics/{projectId}/views`: offset-paged page views, and the truth endpoint.

use super::data::{KeyKind, RowOrder};
use super::generate::{Row, midnight};
use super::{Emulator, Limit, Reply, invalid};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use chrono::{NaiveDate, NaiveDateTime, Timelike};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// A boundary of a date range, as a UTC instant to the minute: a day is its UTC midnight; a date
/// and time is taken at its offset, or as UTC without one.
fn parse_instant(s: &str) -> Option<NaiveDateTime> {
    let instant = if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        midnight(d)
    } else if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(s) {
        dt.naive_utc()
    } else {
        ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())?
    };
    instant.with_second(0)?.with_nanosecond(0)
}

/// Validated query parameters.
#[derive(Debug)]
pub struct ViewsQuery {
    from: NaiveDateTime,
    to: NaiveDateTime,
    /// `limit`.
    pub limit: usize,
    /// `offset`.
    pub offset: usize,
}

/// The `dateFrom`..`dateTo` range of a query, as UTC instants (problems added to `problems`);
/// with `utc_days`, widened to the whole UTC days its bounds fall in (the fault
/// `faults.utc_days`).
pub fn parse_range(
    q: &HashMap<String, String>,
    start: NaiveDate,
    today: NaiveDate,
    utc_days: bool,
    problems: &mut Vec<String>,
) -> (NaiveDateTime, NaiveDateTime) {
    let mut instant = |name: &str, default: NaiveDate| {
        let default = midnight(default);
        match q.get(name) {
            None => default,
            Some(s) => parse_instant(s).unwrap_or_else(|| {
                problems.push(format!(
                    "{name} must be a date in ISO 8601 or YYYY-MM-DD format"
                ));
                default
            }),
        }
    };
    let mut from = instant("dateFrom", start);
    let to = instant("dateTo", today.succ_opt().unwrap_or(today));
    // Without a dateFrom, the range starts with the data, or is empty when dateTo is before it.
    if !q.contains_key("dateFrom") && from > to {
        from = to;
    }
    if problems.is_empty() && from > to {
        problems.push("dateFrom must not be after dateTo".to_string());
    }
    if utc_days {
        let to_end = if to.time() == chrono::NaiveTime::MIN {
            to
        } else {
            midnight(to.date().succ_opt().unwrap_or(to.date()))
        };
        return (midnight(from.date()), to_end);
    }
    (from, to)
}

/// The parameters of an offset-paged operation (page views, visitors).
pub fn parse_query(
    q: &HashMap<String, String>,
    start: NaiveDate,
    today: NaiveDate,
    utc_days: bool,
) -> Result<ViewsQuery, Vec<String>> {
    let mut problems = Vec::new();
    let mut limit_problems = Vec::new();
    let limit = match q.get("limit").map(|s| s.parse::<i64>()) {
        None => 50,
        Some(Ok(n)) if (1..=250).contains(&n) => n as usize,
        Some(_) => {
            limit_problems.push("limit must be an integer between 1 and 250".to_string());
            50
        }
    };
    let offset = match q.get("offset").map(|s| s.parse::<i64>()) {
        None => 0,
        Some(Ok(n)) if n >= 0 => n as usize,
        Some(_) => {
            limit_problems.push("offset must be an integer of at least 0".to_string());
            0
        }
    };
    let (from, to) = parse_range(q, start, today, utc_days, &mut problems);
    problems.extend(limit_problems);
    if problems.is_empty() {
        Ok(ViewsQuery {
            from,
            to,
            limit,
            offset,
        })
    } else {
        Err(problems)
    }
}

fn row_json(r: &Row) -> Value {
    json!({ "path": r.path, "human": r.human, "ai": r.ai, "total": r.total() })
}

/// The totals of a range's rows, and `unlisted` human views more (a service that counts views
/// without a listed path; none in a range without views).
fn totals_json(rows: &[Row], unlisted: u64) -> Value {
    let human: u64 = rows.iter().map(|r| r.human).sum();
    let ai: u64 = rows.iter().map(|r| r.ai).sum();
    let human = if rows.is_empty() {
        human
    } else {
        human + unlisted
    };
    json!({ "human": human, "ai": ai, "total": human + ai })
}

/// The page views handler.
pub async fn views(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    headers: HeaderMap,
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> Reply {
    let org = emu.authorize(&headers, &[KeyKind::Admin, KeyKind::ReadOnlyAdmin])?;
    emu.take(Limit::Analytics, &org)?;
    let Ok(Query(q)) = query else {
        return Err(invalid(&["query string is not valid".to_string()]));
    };
    let q = parse_query(
        &q,
        emu.data().start_date,
        emu.today(),
        emu.data().faults.utc_days,
    )
    .map_err(|p| invalid(&p))?;
    emu.owned_project(&org, &project)?;
    emu.in_plan(&project, docpipe_catalog::datasets::PAGE_VIEWS)?;
    let Some(rows) = emu.truth_between(&project, q.from, q.to) else {
        return Err(not_found());
    };
    let end = q.offset.saturating_add(q.limit).min(rows.len());
    let page = if q.offset < rows.len() {
        &rows[q.offset..end]
    } else {
        &[]
    };
    let mut views: Vec<Value> = page.iter().map(row_json).collect();
    if emu.data().faults.row_order == RowOrder::Shuffled {
        // Fisher-Yates with the fault dice: the page's set of rows stays, its order does not.
        for i in (1..views.len()).rev() {
            let j = (emu.roll_u64() % (i as u64 + 1)) as usize;
            views.swap(i, j);
        }
    }
    let has_more = q.offset.saturating_add(q.limit) < rows.len();
    Ok(
        Json(json!({ "totals": totals_json(&rows, emu.data().faults.unlisted_views), "views": views, "hasMore": has_more }))
            .into_response(),
    )
}

pub fn not_found() -> super::ApiError {
    super::error(axum::http::StatusCode::NOT_FOUND, "Project not found")
}

/// `GET /_emulator/truth/{project}?dateFrom&dateTo`: every row of the range, no paging, no auth.
pub async fn truth(
    State(emu): State<Arc<Emulator>>,
    Path(project): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Reply {
    let q = parse_query(&q, emu.data().start_date, emu.today(), false).map_err(|p| invalid(&p))?;
    let rows = emu
        .truth_between(&project, q.from, q.to)
        .ok_or_else(not_found)?;
    let views: Vec<Value> = rows.iter().map(row_json).collect();
    Ok(
        Json(json!({ "totals": totals_json(&rows, emu.data().faults.unlisted_views), "views": views, "hasMore": false }))
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse_as_utc_instants_to_the_minute() {
        let t = |s| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M").unwrap();
        assert_eq!(parse_instant("2026-03-01"), Some(t("2026-03-01T00:00")));
        assert_eq!(
            parse_instant("2026-03-01T00:00:00Z"),
            Some(t("2026-03-01T00:00"))
        );
        assert_eq!(
            parse_instant("2026-03-01T00:00:00+01:00"),
            Some(t("2026-02-28T23:00"))
        );
        assert_eq!(
            parse_instant("2026-03-01T10:00:59+05:30"),
            Some(t("2026-03-01T04:30"))
        );
        assert_eq!(
            parse_instant("2026-03-01T12:30"),
            Some(t("2026-03-01T12:30"))
        );
        assert_eq!(parse_instant("March 1"), None);
        let d = |s| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
        let q: HashMap<String, String> =
            [("dateTo".to_string(), "2026-03-01T06:00:00Z".to_string())]
                .into_iter()
                .collect();
        let parsed = parse_query(&q, d("2026-01-01"), d("2026-06-01"), false).unwrap();
        assert_eq!(
            (parsed.from, parsed.to),
            (t("2026-01-01T00:00"), t("2026-03-01T06:00"))
        );
    }
}
