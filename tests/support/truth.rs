//! Exported tables against the emulator's truth: every table of a project, row for row and
//! total for total (shared by the dataset tests and the freshness bench). The truth is the
//! emulator's own records, and the exported files are read with the parquet crate: what a
//! column of a table is called at the service is written here ([`Spec`], from the service's
//! documentation), never taken from docpipe's descriptors or read through its decoders, so that
//! a descriptor that maps a field to the wrong column fails here.
// Both tiers include this file; each uses part of it.
#![allow(dead_code)]

use crate::common::files_below;
use chrono::NaiveDate;
use docpipe_catalog::tables;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A Parquet file's rows as JSON objects keyed by column name (`fetched_at` left out).
pub fn parquet_json(file: &std::path::Path) -> Vec<serde_json::Map<String, Value>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    fn conv(f: &Field) -> Value {
        match f {
            Field::Null => Value::Null,
            Field::Bool(b) => json!(b),
            Field::Long(v) => json!(v),
            Field::Double(v) => json!(v),
            Field::Str(s) => json!(s),
            Field::TimestampMicros(us) => json!(
                chrono::DateTime::from_timestamp_micros(*us)
                    .unwrap()
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ),
            Field::ListInternal(l) => Value::Array(l.elements().iter().map(conv).collect()),
            Field::Group(g) => Value::Object(
                g.get_column_iter()
                    .map(|(k, v)| (k.clone(), conv(v)))
                    .collect(),
            ),
            other => json!(other.to_string()),
        }
    }
    let reader = SerializedFileReader::new(std::fs::File::open(file).unwrap()).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .filter(|(n, _)| n.as_str() != "fetched_at")
                .map(|(n, v)| (n.clone(), conv(v)))
                .collect()
        })
        .collect()
}

/// A dataset as the service documents it: its tables, where its rows are in a response, each
/// column with the field it comes from (and the value the service's documentation gives when
/// the field is left out), its totals.
pub struct Spec {
    /// The dataset's name.
    pub name: &'static str,
    /// Its table of rows.
    pub table: &'static str,
    /// Its table of each day's totals.
    pub totals_table: Option<&'static str>,
    /// Its table of rows without a date.
    pub undated_table: Option<&'static str>,
    /// The array of rows in a response (`None`: the body is the one row).
    pub rows: Option<&'static str>,
    /// Each column: its name, the service's field, the field's documented default.
    pub columns: &'static [(&'static str, &'static str, Option<&'static str>)],
    /// The object the totals are in (`None`: the body's fields).
    pub totals_in: Option<&'static str>,
    /// Each total: its column and the service's field.
    pub totals: &'static [(&'static str, &'static str)],
    /// The column whose instant's local day is a row's partition.
    pub day_of: Option<&'static str>,
}

const COUNTS: [(&str, &str, Option<&str>); 3] = [
    ("human", "human", None),
    ("ai", "ai", None),
    ("total", "total", None),
];

pub const VISITORS: Spec = Spec {
    name: "visitors",
    table: tables::VISITORS.name,
    totals_table: Some(tables::SITE_VISITORS.name),
    undated_table: None,
    rows: Some("visitors"),
    columns: &[("path", "path", None), COUNTS[0], COUNTS[1], COUNTS[2]],
    totals_in: Some("totals"),
    totals: &[("human", "human"), ("ai", "ai"), ("total", "total")],
    day_of: None,
};

pub const SEARCHES: Spec = Spec {
    name: "searches",
    table: tables::SEARCHES.name,
    totals_table: Some(tables::SEARCH_TOTALS.name),
    undated_table: None,
    rows: Some("searches"),
    columns: &[
        ("search_query", "searchQuery", None),
        ("hits", "hits", None),
        ("ctr", "ctr", None),
        ("top_clicked_page", "topClickedPage", None),
        ("last_searched_at", "lastSearchedAt", None),
    ],
    totals_in: None,
    totals: &[("total_searches", "totalSearches")],
    day_of: None,
};

pub const FEEDBACK: Spec = Spec {
    name: "feedback",
    table: tables::FEEDBACK.name,
    totals_table: None,
    undated_table: Some(tables::FEEDBACK_UNDATED.name),
    rows: Some("feedback"),
    columns: &[
        ("id", "id", None),
        ("path", "path", None),
        ("comment", "comment", None),
        ("created_at", "createdAt", None),
        ("source", "source", None),
        ("status", "status", None),
        ("helpful", "helpful", None),
        ("contact", "contact", None),
        ("code", "code", None),
        ("filename", "filename", None),
        ("lang", "lang", None),
    ],
    totals_in: None,
    totals: &[],
    day_of: Some("created_at"),
};

pub const FEEDBACK_BY_PAGE: Spec = Spec {
    name: "feedback_by_page",
    table: tables::FEEDBACK_BY_PAGE.name,
    totals_table: None,
    undated_table: None,
    rows: Some("feedback"),
    columns: &[
        ("path", "path", None),
        ("thumbs_up", "thumbsUp", None),
        ("thumbs_down", "thumbsDown", None),
        ("code", "code", None),
        ("total", "total", None),
    ],
    totals_in: None,
    totals: &[],
    day_of: None,
};

pub const ASSISTANT: Spec = Spec {
    name: "assistant",
    table: tables::ASSISTANT_TURNS.name,
    totals_table: None,
    undated_table: None,
    rows: Some("conversations"),
    columns: &[
        ("id", "id", None),
        ("timestamp", "timestamp", None),
        ("query", "query", None),
        ("response", "response", None),
        ("response_type", "responseType", Some("answer")),
        ("sources", "sources", None),
        ("resolution_status", "resolutionStatus", None),
        ("query_category", "queryCategory", None),
        ("page_url", "pageUrl", None),
    ],
    totals_in: None,
    totals: &[],
    day_of: Some("timestamp"),
};

pub const CALLER_STATS: Spec = Spec {
    name: "caller_stats",
    table: tables::ASSISTANT_CALLERS.name,
    totals_table: None,
    undated_table: None,
    rows: None,
    columns: &[
        ("web", "web", None),
        ("api", "api", None),
        ("other", "other", None),
        ("total", "total", None),
    ],
    totals_in: None,
    totals: &[],
    day_of: None,
};

/// An exported row in the service's JSON names, as canonical text.
pub fn as_service(spec: &Spec, row: &serde_json::Map<String, Value>) -> String {
    let mut out = serde_json::Map::new();
    for (column, field, _) in spec.columns {
        out.insert(
            field.to_string(),
            row.get(*column).cloned().unwrap_or(Value::Null),
        );
    }
    Value::Object(out).to_string()
}

/// A row of the truth, with the documented default where the service leaves a field out.
pub fn truth_row(spec: &Spec, row: &Value) -> String {
    let mut out = serde_json::Map::new();
    for (_, field, default) in spec.columns {
        let v = match (row.get(*field), default) {
            (Some(v), _) => v.clone(),
            (None, Some(d)) => json!(d),
            (None, None) => Value::Null,
        };
        out.insert(field.to_string(), v);
    }
    Value::Object(out).to_string()
}

/// A day's exported page views as sorted (path, human, ai); an error when its file cannot be
/// read.
pub fn exported_views(
    out: &std::path::Path,
    project: &str,
    day: NaiveDate,
) -> Result<Vec<(String, i64, i64)>, String> {
    let file = docpipe::layout::partition_dir(out, tables::PAGE_VIEWS.name, project, day)
        .join(docpipe::layout::PART);
    if !file.is_file() {
        return Err(format!("{} is not written", file.display()));
    }
    let mut rows: Vec<_> = parquet_json(&file)
        .into_iter()
        .map(|r| {
            let n = |c: &str| r[c].as_i64().unwrap();
            (r["path"].as_str().unwrap().to_string(), n("human"), n("ai"))
        })
        .collect();
    rows.sort();
    Ok(rows)
}

/// The emulator's page views of a project's day now, as [`exported_views`] gives them.
pub fn true_views(
    emu: &docpipe::emulator::Emulator,
    project: &str,
    day: NaiveDate,
) -> Vec<(String, i64, i64)> {
    let mut rows: Vec<_> = emu
        .truth(project, day, day.succ_opt().unwrap())
        .unwrap()
        .iter()
        .map(|r| (r.path.clone(), r.human as i64, r.ai as i64))
        .collect();
    rows.sort();
    rows
}

/// Panics unless both hold the same rows, naming the first rows only one side has.
pub fn assert_same(got: Vec<String>, want: Vec<String>, what: &str) {
    let (got, want) = (sorted(got), sorted(want));
    if got == want {
        return;
    }
    let only = |a: &[String], b: &[String]| -> Vec<String> {
        a.iter()
            .filter(|r| !b.contains(r))
            .take(2)
            .cloned()
            .collect()
    };
    panic!(
        "{what}: {} rows exported, {} in the truth; only exported: {:?}; only in the truth: {:?}",
        got.len(),
        want.len(),
        only(&got, &want),
        only(&want, &got)
    );
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

pub fn rows_of(
    out: &std::path::Path,
    table: &str,
    project: &str,
) -> BTreeMap<NaiveDate, Vec<serde_json::Map<String, Value>>> {
    let mut by = BTreeMap::new();
    let dir = out.join(table).join(format!("project={project}"));
    for f in files_below(&dir) {
        let Some(d) = f
            .parent()
            .and_then(|p| p.to_str())
            .and_then(|p| p.strip_prefix("date="))
        else {
            continue;
        };
        by.insert(d.parse().unwrap(), parquet_json(&dir.join(&f)));
    }
    by
}

/// The emulator's truth of a project's dataset over `from..to`.
pub async fn truth_of(
    base_url: &str,
    project: &str,
    dataset: &str,
    from: NaiveDate,
    to: NaiveDate,
) -> Value {
    truth_in(base_url, project, dataset, from, to, chrono_tz::UTC).await
}

/// The emulator's truth of a project's dataset over the days `from..to` of `tz` (from its
/// midnight on `from` to its midnight on `to`, the instants docpipe sends).
pub async fn truth_in(
    base_url: &str,
    project: &str,
    dataset: &str,
    from: NaiveDate,
    to: NaiveDate,
    tz: chrono_tz::Tz,
) -> Value {
    let w = docpipe::calendar::Window {
        from,
        to,
        tz,
        part: docpipe::calendar::Part::Whole,
    };
    let (a, b) = (
        docpipe::api::escape(&w.bound(from)),
        docpipe::api::escape(&w.bound(to)),
    );
    let url = format!("{base_url}/_emulator/truth/{project}/{dataset}?dateFrom={a}&dateTo={b}");
    crate::common::get_json(url).await
}

/// Checks every exported table of `project` against the emulator's truth: the daily
/// datasets' days `from..=to`, the spans' rows of the days `from..=spans_to` (all of them, the
/// undated too, when `spans_to` is `to`). Returns the rows compared per dataset.
/// Each local day of `tz` against the truth of its instants.
pub async fn assert_equals_truth(
    base_url: &str,
    out: &std::path::Path,
    project: &str,
    from: NaiveDate,
    to: NaiveDate,
    spans_to: NaiveDate,
    tz: chrono_tz::Tz,
) -> BTreeMap<&'static str, usize> {
    let local_day = |at: &str| {
        chrono::DateTime::parse_from_rfc3339(at)
            .unwrap()
            .with_timezone(&tz)
            .date_naive()
    };
    let mut counts = BTreeMap::new();
    let end = to.succ_opt().unwrap();
    // Daily datasets: each day's rows and totals.
    for shape in [&VISITORS, &SEARCHES, &FEEDBACK_BY_PAGE, &CALLER_STATS] {
        let exported = rows_of(out, shape.table, project);
        let totals = shape.totals_table.map(|t| rows_of(out, t, project));
        let mut d = from;
        while d <= to {
            let truth = truth_in(base_url, project, shape.name, d, d.succ_opt().unwrap(), tz).await;
            let want: Vec<String> = match shape.rows {
                None => vec![truth_row(shape, &truth)],
                Some(f) => {
                    let all: Vec<Value> = truth[f].as_array().unwrap().clone();
                    // The service serves the first 100 rows of feedback by page.
                    let n = if shape.name == "feedback_by_page" {
                        all.len().min(100)
                    } else {
                        all.len()
                    };
                    all[..n].iter().map(|r| truth_row(shape, r)).collect()
                }
            };
            let got: Vec<String> = exported
                .get(&d)
                .unwrap_or_else(|| panic!("{} {d} not written", shape.name))
                .iter()
                .map(|r| as_service(shape, r))
                .collect();
            assert_same(got, want.clone(), &format!("{} {d}", shape.name));
            *counts.entry(shape.name).or_default() += want.len();
            if shape.name == "feedback_by_page" {
                let cut = truth["feedback"].as_array().unwrap().len() > 100;
                assert!(
                    exported[&d].iter().all(|r| r["cut_off"] == json!(cut)),
                    "{d}"
                );
            }
            if let Some(t) = &totals {
                let row = &t[&d][0];
                for (column, field) in shape.totals {
                    let v = match shape.totals_in {
                        Some(f) => truth[f][field].clone(),
                        None => truth[field].clone(),
                    };
                    assert_eq!(row[*column], v, "{} totals {d}", shape.name);
                }
                assert_eq!(row["rows"], json!(want.len()), "{d}");
            }
            d = d.succ_opt().unwrap();
        }
    }
    // Span datasets: every row of the range once, in the partition of its day (or undated).
    for shape in [&FEEDBACK, &ASSISTANT] {
        let truth = truth_in(base_url, project, shape.name, from, end, tz).await;
        let field = shape.rows.unwrap();
        let whole = spans_to >= to;
        let day_field = shape
            .columns
            .iter()
            .find(|c| Some(c.0) == shape.day_of)
            .unwrap()
            .1;
        let want: Vec<String> = truth[field]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| match r[day_field].as_str() {
                Some(at) => local_day(at) <= spans_to,
                None => whole,
            })
            .map(|r| truth_row(shape, r))
            .collect();
        let mut got = Vec::new();
        for (d, rows) in rows_of(out, shape.table, project) {
            if d > spans_to {
                continue;
            }
            assert!((from..=to).contains(&d), "{} partition {d}", shape.name);
            for r in &rows {
                let at = r[shape.day_of.unwrap()].as_str().unwrap();
                assert_eq!(
                    local_day(at),
                    d,
                    "{} row in the wrong partition",
                    shape.name
                );
                got.push(as_service(shape, r));
            }
        }
        if let Some(t) = shape.undated_table {
            let f = out
                .join(t)
                .join(format!("project={project}"))
                .join("part-00000.parquet");
            if whole && f.exists() {
                let undated = parquet_json(&f);
                assert!(!undated.is_empty());
                got.extend(undated.iter().map(|r| as_service(shape, r)));
            }
        }
        let n = got.len();
        assert_same(got, want, shape.name);
        counts.insert(shape.name, n);
    }
    counts
}
