//! The service's analytics datasets beside page views, as descriptors of the generic walk
//! (`shape.rs`): unique visitors, searches, feedback, feedback by page, assistant turns,
//! assistant threads, assistant caller stats. The README's table list says what each column
//! means; the choices where the OpenAPI file is ambiguous are written beside each descriptor.

use super::shape::{Cell, Column, Kind, Need, RowsAt, Shape, TotalsAt, col, table};
use super::{Paging, Windowing};
use arrow_schema::SchemaRef;
use docpipe_catalog::{datasets, tables};

macro_rules! schema_fns {
    ($($f:ident = $shape:ident . $m:ident;)*) => {
        $(fn $f() -> SchemaRef { $shape.$m() })*
    };
}

schema_fns! {
    visitors_schema = VISITORS.schema;
    site_visitors_schema = VISITORS.totals_schema;
    searches_schema = SEARCHES.schema;
    search_totals_schema = SEARCHES.totals_schema;
    feedback_schema = FEEDBACK.schema;
    by_page_schema = FEEDBACK_BY_PAGE.schema;
    turns_schema = ASSISTANT.schema;
    callers_schema = CALLER_STATS.schema;
    messages_schema = THREAD_MESSAGES.schema;
}

const COUNTS: [Column; 3] = [
    col("human", "human", Kind::Count, Need::Required),
    col("ai", "ai", Kind::Count, Need::Required),
    col("total", "total", Kind::Count, Need::Required),
];

/// Unique visitors per page and site-wide, per day: approximate distinct counts, **not
/// additive** across days or pages, and `total` is deduplicated (it can be less than
/// human + ai). Nothing in docpipe sums them.
pub static VISITORS: Shape = Shape {
    name: datasets::VISITORS,
    endpoint: "/v1/analytics/{project}/visitors",
    paging: Paging::Offset { limit: 250 },
    windowing: Windowing::Daily,
    rows: RowsAt::Array("visitors"),
    columns: &[
        col("path", "path", Kind::Text, Need::Required),
        COUNTS[0],
        COUNTS[1],
        COUNTS[2],
    ],
    key: &["path"],
    totals_at: TotalsAt::Object("totals"),
    totals: &COUNTS,
    sums: &[],
    table: tables::VISITORS.name,
    totals_table: Some(tables::SITE_VISITORS.name),
    day_of: None,
    undated_table: None,
    outside_table: None,
    check_row: None,
    tables: &[
        table(&tables::VISITORS, visitors_schema),
        table(&tables::SITE_VISITORS, site_visitors_schema),
    ],
    flags: &[],
    by_default: true,
};

/// Search terms per day: hits, click-through rate, the most clicked result, the last search.
/// Cursor paging without `hasMore` (the end is a null `nextCursor`); `totalSearches` is the
/// day's exact number of searches, and the hits of all the terms sum to it.
pub static SEARCHES: Shape = Shape {
    name: datasets::SEARCHES,
    endpoint: "/v1/analytics/{project}/searches",
    paging: Paging::Cursor {
        limit: 100,
        has_more: false,
    },
    windowing: Windowing::Daily,
    rows: RowsAt::Array("searches"),
    columns: &[
        col("search_query", "searchQuery", Kind::Text, Need::Required),
        col("hits", "hits", Kind::Count, Need::Required),
        col("ctr", "ctr", Kind::Ratio, Need::Required),
        col(
            "top_clicked_page",
            "topClickedPage",
            Kind::Text,
            Need::Nullable,
        ),
        col(
            "last_searched_at",
            "lastSearchedAt",
            Kind::Time,
            Need::Required,
        ),
    ],
    key: &["search_query"],
    totals_at: TotalsAt::Fields,
    totals: &[col(
        "total_searches",
        "totalSearches",
        Kind::Count,
        Need::Required,
    )],
    sums: &[("hits", "total_searches")],
    table: tables::SEARCHES.name,
    totals_table: Some(tables::SEARCH_TOTALS.name),
    day_of: None,
    undated_table: None,
    outside_table: None,
    check_row: None,
    tables: &[
        table(&tables::SEARCHES, searches_schema),
        table(&tables::SEARCH_TOTALS, search_totals_schema),
    ],
    flags: &[],
    by_default: true,
};

const FEEDBACK_SOURCES: &[&str] = &["code_snippet", "contextual", "agent", "thumbs_only"];
const FEEDBACK_STATUSES: &[&str] = &["pending", "in_progress", "resolved", "dismissed"];

/// The fields a feedback entry must have for its source: the OpenAPI file's three shapes,
/// told apart by `source` (the third is a subset of the others).
fn check_feedback(row: &[Cell]) -> Result<(), String> {
    let source = row[4].text().unwrap_or_default();
    let need: &[(usize, &str)] = match source {
        "contextual" => &[(6, "helpful")],
        "code_snippet" => &[(8, "code")],
        _ => &[],
    };
    for (i, name) in need {
        if row[*i] == Cell::Null {
            return Err(format!("a {source} entry has no `{name}`"));
        }
    }
    Ok(())
}

/// Feedback entries, partitioned by the day of `createdAt` (those without one in
/// `feedback_undated`). Their status changes later with no modification time: a span of recent
/// days is fetched again on every run and its partitions replaced; merged on `id`.
pub static FEEDBACK: Shape = Shape {
    name: datasets::FEEDBACK,
    endpoint: "/v1/analytics/{project}/feedback",
    paging: Paging::Cursor {
        limit: 100,
        has_more: true,
    },
    windowing: Windowing::Span { recheck_days: 14 },
    rows: RowsAt::Array("feedback"),
    columns: &[
        col("id", "id", Kind::Text, Need::Required),
        col("path", "path", Kind::Text, Need::Required),
        col("comment", "comment", Kind::Text, Need::Nullable),
        col("created_at", "createdAt", Kind::Time, Need::Nullable),
        col(
            "source",
            "source",
            Kind::Choice(FEEDBACK_SOURCES),
            Need::Required,
        ),
        col(
            "status",
            "status",
            Kind::Choice(FEEDBACK_STATUSES),
            Need::Required,
        ),
        col("helpful", "helpful", Kind::Flag, Need::Optional),
        col("contact", "contact", Kind::Text, Need::Optional),
        col("code", "code", Kind::Text, Need::Optional),
        col("filename", "filename", Kind::Text, Need::Optional),
        col("lang", "lang", Kind::Text, Need::Optional),
    ],
    key: &["id"],
    totals_at: TotalsAt::None,
    totals: &[],
    sums: &[],
    table: tables::FEEDBACK.name,
    totals_table: None,
    day_of: Some("created_at"),
    undated_table: Some(tables::FEEDBACK_UNDATED.name),
    outside_table: Some(tables::FEEDBACK_OUTSIDE.name),
    check_row: Some(check_feedback),
    tables: &[
        table(&tables::FEEDBACK, feedback_schema),
        table(&tables::FEEDBACK_UNDATED, feedback_schema),
        table(&tables::FEEDBACK_OUTSIDE, feedback_schema),
    ],
    flags: &[],
    by_default: true,
};

/// Feedback counts per page and day. The service says `hasMore` but takes neither cursor nor
/// offset: the first 100 rows (in the service's order, which its file does not state) are all
/// anyone can fetch, and a day with more is written with `cut_off` true on its rows.
pub static FEEDBACK_BY_PAGE: Shape = Shape {
    name: datasets::FEEDBACK_BY_PAGE,
    endpoint: "/v1/analytics/{project}/feedback/by-page",
    paging: Paging::Capped { limit: 100 },
    windowing: Windowing::Daily,
    rows: RowsAt::Array("feedback"),
    columns: &[
        col("path", "path", Kind::Text, Need::Required),
        col("thumbs_up", "thumbsUp", Kind::Count, Need::Required),
        col("thumbs_down", "thumbsDown", Kind::Count, Need::Required),
        col("code", "code", Kind::Count, Need::Required),
        col("total", "total", Kind::Count, Need::Required),
    ],
    key: &["path"],
    totals_at: TotalsAt::None,
    totals: &[],
    sums: &[],
    table: tables::FEEDBACK_BY_PAGE.name,
    totals_table: None,
    day_of: None,
    undated_table: None,
    outside_table: None,
    check_row: None,
    tables: &[table(&tables::FEEDBACK_BY_PAGE, by_page_schema)],
    flags: &["cut_off"],
    by_default: true,
};

/// Assistant conversation turns, one row per turn, partitioned by the day of its `timestamp`.
/// `id` is the conversation (thread) id and repeats across its turns: the key is (id,
/// timestamp). Fetched by a span from the last fetched day less an overlap (late turns and a
/// category filled in later land), merged on the key.
pub static ASSISTANT: Shape = Shape {
    name: datasets::ASSISTANT,
    endpoint: "/v1/analytics/{project}/assistant",
    paging: Paging::Cursor {
        limit: 1000,
        has_more: true,
    },
    windowing: Windowing::Span { recheck_days: 1 },
    rows: RowsAt::Array("conversations"),
    columns: &[
        col("id", "id", Kind::Text, Need::Required),
        col("timestamp", "timestamp", Kind::Time, Need::Required),
        col("query", "query", Kind::Text, Need::Required),
        col("response", "response", Kind::Text, Need::Required),
        col(
            "response_type",
            "responseType",
            Kind::Choice(&["answer", "clarifying_question"]),
            Need::Default("answer"),
        ),
        col("sources", "sources", Kind::Sources, Need::Required),
        col(
            "resolution_status",
            "resolutionStatus",
            Kind::Choice(&["answered", "unanswered"]),
            Need::Required,
        ),
        col(
            "query_category",
            "queryCategory",
            Kind::Text,
            Need::Nullable,
        ),
        col("page_url", "pageUrl", Kind::Text, Need::Nullable),
    ],
    key: &["id", "timestamp"],
    totals_at: TotalsAt::None,
    totals: &[],
    sums: &[],
    table: tables::ASSISTANT_TURNS.name,
    totals_table: None,
    day_of: Some("timestamp"),
    undated_table: None,
    outside_table: Some(tables::ASSISTANT_TURNS_OUTSIDE.name),
    check_row: None,
    tables: &[
        table(&tables::ASSISTANT_TURNS, turns_schema),
        table(&tables::ASSISTANT_TURNS_OUTSIDE, turns_schema),
    ],
    flags: &[],
    by_default: true,
};

/// Assistant queries per day by caller: web, api, other, total. One request per day.
pub static CALLER_STATS: Shape = Shape {
    name: datasets::CALLER_STATS,
    endpoint: "/v1/analytics/{project}/assistant/caller-stats",
    paging: Paging::Single,
    windowing: Windowing::Daily,
    rows: RowsAt::Body,
    columns: &[
        col("web", "web", Kind::Count, Need::Required),
        col("api", "api", Kind::Count, Need::Required),
        col("other", "other", Kind::Count, Need::Required),
        col("total", "total", Kind::Count, Need::Required),
    ],
    key: &[],
    totals_at: TotalsAt::None,
    totals: &[],
    sums: &[],
    table: tables::ASSISTANT_CALLERS.name,
    totals_table: None,
    day_of: None,
    undated_table: None,
    outside_table: None,
    check_row: None,
    tables: &[table(&tables::ASSISTANT_CALLERS, callers_schema)],
    flags: &[],
    by_default: true,
};

/// One assistant thread's messages: one request per thread, so never in bulk. After the turns,
/// the threads of unanswered turns not fetched yet, up to a cap per run.
pub static THREADS: Shape = Shape {
    name: datasets::THREADS,
    endpoint: "/v1/analytics/{project}/assistant/threads/{thread}",
    paging: Paging::Single,
    windowing: Windowing::OnDemand,
    rows: RowsAt::Array("messages"),
    columns: &[
        col("message_id", "id", Kind::Text, Need::Required),
        col(
            "role",
            "role",
            Kind::Choice(&["user", "assistant"]),
            Need::Required,
        ),
        col("content", "content", Kind::Text, Need::Required),
        col("created_at", "createdAt", Kind::Time, Need::Required),
    ],
    key: &["message_id"],
    totals_at: TotalsAt::Fields,
    totals: &[
        col("thread_id", "threadId", Kind::Text, Need::Required),
        col("thread_created_at", "createdAt", Kind::Time, Need::Required),
    ],
    sums: &[],
    table: tables::ASSISTANT_MESSAGES.name,
    totals_table: None,
    day_of: None,
    undated_table: None,
    outside_table: None,
    check_row: None,
    tables: &[table(&tables::ASSISTANT_MESSAGES, messages_schema)],
    flags: &[],
    by_default: false,
};

/// The table `assistant_messages` as written: a thread's fields, then each message's,
/// partitioned by the day the thread was created; merged on (thread_id, message_id).
pub static THREAD_MESSAGES: Shape = Shape {
    name: tables::ASSISTANT_MESSAGES.name,
    endpoint: "",
    paging: Paging::Single,
    windowing: Windowing::OnDemand,
    rows: RowsAt::Body,
    columns: &[
        col("thread_id", "threadId", Kind::Text, Need::Required),
        col(
            "thread_created_at",
            "threadCreatedAt",
            Kind::Time,
            Need::Required,
        ),
        col("message_id", "id", Kind::Text, Need::Required),
        col("role", "role", Kind::Text, Need::Required),
        col("content", "content", Kind::Text, Need::Required),
        col("created_at", "createdAt", Kind::Time, Need::Required),
    ],
    key: &["thread_id", "message_id"],
    totals_at: TotalsAt::None,
    totals: &[],
    sums: &[],
    table: tables::ASSISTANT_MESSAGES.name,
    totals_table: None,
    day_of: Some("thread_created_at"),
    undated_table: None,
    outside_table: None,
    check_row: None,
    tables: &[],
    flags: &[],
    by_default: false,
};
