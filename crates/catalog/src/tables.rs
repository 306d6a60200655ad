//! Every table of the lake, typed once: its name (its folder under the output, or its file under
//! `trends/`), the columns that identify a row, its Hive partition keys, what a row is, who
//! writes it and the columns of its files with their types. Every other crate names a table
//! through these constants; the lake's description (`_docpipe/manifest.json`, `duckdb.sql`,
//! `dbt_sources.yml`) is generated from them, and the trends read their sources' types here. The
//! writers build their Arrow schemas themselves; a test of the in-process tier
//! (`tests/it/catalogue.rs`) holds each one, and each trend table's frame, to these columns.

use crate::datasets;

/// A Hive partition key of a table, in path order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `project=<id>`.
    Project,
    /// `date=<YYYY-MM-DD>`.
    Date,
}

impl Key {
    /// The column the key becomes in a reader (`project`, `date`).
    pub const fn column(self) -> &'static str {
        match self {
            Key::Project => "project",
            Key::Date => "date",
        }
    }
}

/// A column's type in the lake's files: the Arrow type its writer gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// UTF-8 text.
    Text,
    /// A signed 64-bit integer.
    Int,
    /// A double.
    Float,
    /// A boolean.
    Bool,
    /// A date (days since 1970-01-01).
    Date,
    /// An instant: microseconds since the epoch, in UTC.
    Time,
    /// The pages an answer cited: a list of `{title, url}` ([`SOURCE_FIELDS`], both text).
    Sources,
}

/// The fields of one cited source in a [`Ty::Sources`] column, in order, both text and never
/// null.
pub const SOURCE_FIELDS: [&str; 2] = ["title", "url"];

/// A column of a table's files (the Hive partition keys are not among them: they are the
/// folders').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Whether it may be null (a trend table's columns may all be).
    pub nullable: bool,
}

const fn c(name: &'static str, ty: Ty) -> Column {
    Column {
        name,
        ty,
        nullable: false,
    }
}

const fn n(name: &'static str, ty: Ty) -> Column {
    Column {
        name,
        ty,
        nullable: true,
    }
}

/// Who writes a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The dataset of this name, from the service's pages.
    Dataset(&'static str),
    /// The export, from what its windows wrote (`day_status`).
    Export,
    /// The rules' engine and the impact of what they started.
    Rules,
    /// The trends, from the other tables (files under `trends/`).
    Trends,
    /// The reader of the service's analytics event stream (`[[streams]]`).
    Stream,
}

/// A table of the lake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// Its folder under the output (a trend table: its file `trends/<name>.parquet`).
    pub name: &'static str,
    /// The columns that identify a row (the partition keys among them).
    pub key: &'static [&'static str],
    /// Its Hive partition keys, in path order (none for a trend table).
    pub partitioning: &'static [Key],
    /// What a row is.
    pub row: &'static str,
    /// Who writes it.
    pub writer: Writer,
    /// The columns of its files, in order, as its writer writes them now.
    pub columns: &'static [Column],
}

impl Table {
    /// The dataset that writes it, if a dataset does.
    pub const fn dataset(&self) -> Option<&'static str> {
        match self.writer {
            Writer::Dataset(d) => Some(d),
            _ => None,
        }
    }

    /// Its files under the output, with `<id>` and `<YYYY-MM-DD>` for the partitions.
    pub fn files(&self) -> String {
        if self.writer == Writer::Trends {
            return format!("{TRENDS_FOLDER}/{}.parquet", self.name);
        }
        let mut files = self.name.to_string();
        for k in self.partitioning {
            files += match k {
                Key::Project => "/project=<id>",
                Key::Date => "/date=<YYYY-MM-DD>",
            };
        }
        files + "/part-00000.parquet"
    }
}

// The columns of each table's files, in order (`Table::columns`): a trend table's may all be
// null, as polars writes them.
const PAGE_COUNTS: &[Column] = &[
    c("path", Ty::Text),
    c("human", Ty::Int),
    c("ai", Ty::Int),
    c("total", Ty::Int),
    c("fetched_at", Ty::Time),
];
const SITE_TOTALS_COLUMNS: &[Column] = &[
    c("human", Ty::Int),
    c("ai", Ty::Int),
    c("total", Ty::Int),
    c("rows", Ty::Int),
    c("fetched_at", Ty::Time),
    c("final", Ty::Bool),
    n("unlisted", Ty::Int),
];
const REJECTS_COLUMNS: &[Column] = &[
    c("page_offset", Ty::Int),
    c("raw", Ty::Text),
    c("reason", Ty::Text),
    c("fetched_at", Ty::Time),
];
const SITE_VISITORS_COLUMNS: &[Column] = &[
    c("human", Ty::Int),
    c("ai", Ty::Int),
    c("total", Ty::Int),
    c("rows", Ty::Int),
    c("fetched_at", Ty::Time),
    c("final", Ty::Bool),
];
const SEARCHES_COLUMNS: &[Column] = &[
    c("search_query", Ty::Text),
    c("hits", Ty::Int),
    c("ctr", Ty::Float),
    n("top_clicked_page", Ty::Text),
    c("last_searched_at", Ty::Time),
    c("fetched_at", Ty::Time),
];
const SEARCH_TOTALS_COLUMNS: &[Column] = &[
    c("total_searches", Ty::Int),
    c("rows", Ty::Int),
    c("fetched_at", Ty::Time),
    c("final", Ty::Bool),
];
const FEEDBACK_COLUMNS: &[Column] = &[
    c("id", Ty::Text),
    c("path", Ty::Text),
    n("comment", Ty::Text),
    n("created_at", Ty::Time),
    c("source", Ty::Text),
    c("status", Ty::Text),
    n("helpful", Ty::Bool),
    n("contact", Ty::Text),
    n("code", Ty::Text),
    n("filename", Ty::Text),
    n("lang", Ty::Text),
    c("fetched_at", Ty::Time),
];
const FEEDBACK_BY_PAGE_COLUMNS: &[Column] = &[
    c("path", Ty::Text),
    c("thumbs_up", Ty::Int),
    c("thumbs_down", Ty::Int),
    c("code", Ty::Int),
    c("total", Ty::Int),
    c("cut_off", Ty::Bool),
    c("fetched_at", Ty::Time),
];
const ASSISTANT_TURNS_COLUMNS: &[Column] = &[
    c("id", Ty::Text),
    c("timestamp", Ty::Time),
    c("query", Ty::Text),
    c("response", Ty::Text),
    c("response_type", Ty::Text),
    c("sources", Ty::Sources),
    c("resolution_status", Ty::Text),
    n("query_category", Ty::Text),
    n("page_url", Ty::Text),
    c("fetched_at", Ty::Time),
];
const ASSISTANT_CALLERS_COLUMNS: &[Column] = &[
    c("web", Ty::Int),
    c("api", Ty::Int),
    c("other", Ty::Int),
    c("total", Ty::Int),
    c("fetched_at", Ty::Time),
];
const ASSISTANT_MESSAGES_COLUMNS: &[Column] = &[
    c("thread_id", Ty::Text),
    c("thread_created_at", Ty::Time),
    c("message_id", Ty::Text),
    c("role", Ty::Text),
    c("content", Ty::Text),
    c("created_at", Ty::Time),
    c("fetched_at", Ty::Time),
];
const DAY_STATUS_COLUMNS: &[Column] = &[
    c("dataset", Ty::Text),
    c("date", Ty::Date),
    c("status", Ty::Text),
    c("timezone", Ty::Text),
    n("fetched_at", Ty::Time),
    c("requests", Ty::Int),
    c("rows", Ty::Int),
];
const AGENT_RUNS_COLUMNS: &[Column] = &[
    c("firing_id", Ty::Int),
    c("rule", Ty::Text),
    c("action", Ty::Text),
    n("job", Ty::Text),
    c("fired_at", Ty::Time),
    c("prompt_hash", Ty::Text),
    c("prompt", Ty::Text),
    c("rows_matched", Ty::Int),
    c("sent", Ty::Text),
    n("status", Ty::Text),
    n("pr_link", Ty::Text),
    n("seconds_to_done", Ty::Float),
    n("error", Ty::Text),
    n("flags", Ty::Text),
    n("dropped", Ty::Text),
    n("held_because", Ty::Text),
    n("decided_by", Ty::Text),
    n("decided_at", Ty::Time),
    n("review_note", Ty::Text),
    n("automation", Ty::Text),
    n("schema_id", Ty::Text),
    n("instance_id", Ty::Text),
];
const AGENT_REASKS_COLUMNS: &[Column] = &[
    c("firing_id", Ty::Int),
    c("rule", Ty::Text),
    n("pr_link", Ty::Text),
    c("question", Ty::Text),
    c("attempt", Ty::Int),
    c("due_at", Ty::Time),
    n("asked_at", Ty::Time),
    n("resolution", Ty::Text),
    n("sources", Ty::Text),
    c("cites_named_page", Ty::Bool),
    n("error", Ty::Text),
];
const AGENT_IMPACT_COLUMNS: &[Column] = &[
    c("firing_id", Ty::Int),
    c("rule", Ty::Text),
    n("job", Ty::Text),
    n("job_status", Ty::Text),
    n("pr_link", Ty::Text),
    c("fired_at", Ty::Time),
    c("key", Ty::Text),
    c("metric", Ty::Text),
    c("better", Ty::Text),
    n("before", Ty::Float),
    n("after", Ty::Float),
    n("change", Ty::Float),
    n("relative_change", Ty::Float),
    c("verdict", Ty::Text),
    c("enough_data", Ty::Bool),
    n("rows_before", Ty::Int),
    n("rows_after", Ty::Int),
    c("days_before", Ty::Int),
    c("days_after", Ty::Int),
    c("before_from", Ty::Date),
    c("before_to", Ty::Date),
    c("after_from", Ty::Date),
    c("after_to", Ty::Date),
    c("measured_at", Ty::Time),
];
const DAILY_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("date", Ty::Date),
    n("human", Ty::Int),
    n("ai", Ty::Int),
    n("total", Ty::Int),
    n("ai_share", Ty::Float),
    n("human_7d", Ty::Int),
    n("ai_7d", Ty::Int),
    n("total_7d", Ty::Int),
    n("ai_share_7d", Ty::Float),
    n("human_28d", Ty::Int),
    n("ai_28d", Ty::Int),
    n("total_28d", Ty::Int),
    n("ai_share_28d", Ty::Float),
    n("total_week_before", Ty::Int),
    n("change_vs_week_before", Ty::Float),
    n("complete", Ty::Bool),
    n("provisional", Ty::Bool),
];
const WEEKLY_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("iso_year", Ty::Int),
    n("iso_week", Ty::Int),
    n("week_start", Ty::Date),
    n("days", Ty::Int),
    n("human", Ty::Int),
    n("ai", Ty::Int),
    n("total", Ty::Int),
    n("ai_share", Ty::Float),
    n("total_week_before", Ty::Int),
    n("change_vs_week_before", Ty::Float),
    n("complete", Ty::Bool),
    n("provisional", Ty::Bool),
];
const PAGES_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("path", Ty::Text),
    n("last_day", Ty::Date),
    n("human_7d", Ty::Int),
    n("human_prev_7d", Ty::Int),
    n("ai_7d", Ty::Int),
    n("ai_prev_7d", Ty::Int),
    n("human_28d", Ty::Int),
    n("human_prev_28d", Ty::Int),
    n("ai_28d", Ty::Int),
    n("ai_prev_28d", Ty::Int),
    n("provisional", Ty::Bool),
    n("days_7d", Ty::Int),
    n("days_prev_7d", Ty::Int),
    n("days_28d", Ty::Int),
    n("days_prev_28d", Ty::Int),
    n("total_7d", Ty::Int),
    n("total_prev_7d", Ty::Int),
    n("ai_share_7d", Ty::Float),
    n("ai_share_prev_7d", Ty::Float),
    n("change_7d", Ty::Float),
    n("rank_7d", Ty::Int),
    n("ai_share_rise_7d", Ty::Float),
    n("mover_rank_7d", Ty::Int),
    n("total_28d", Ty::Int),
    n("total_prev_28d", Ty::Int),
    n("ai_share_28d", Ty::Float),
    n("ai_share_prev_28d", Ty::Float),
    n("change_28d", Ty::Float),
    n("rank_28d", Ty::Int),
    n("ai_share_rise_28d", Ty::Float),
    n("mover_rank_28d", Ty::Int),
];
const SEARCH_TERMS_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("search_query", Ty::Text),
    n("last_day", Ty::Date),
    n("hits_7d", Ty::Int),
    n("est_clicks_7d", Ty::Int),
    n("ctr_7d", Ty::Float),
    n("est_unclicked_7d", Ty::Int),
    n("gap_rank_7d", Ty::Int),
    n("hits_28d", Ty::Int),
    n("est_clicks_28d", Ty::Int),
    n("ctr_28d", Ty::Float),
    n("top_clicked_page", Ty::Text),
    n("last_searched_at", Ty::Time),
    n("new_this_week", Ty::Bool),
];
const SEARCH_DAILY_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("date", Ty::Date),
    n("searches", Ty::Int),
    n("est_clicks", Ty::Int),
    n("ctr", Ty::Float),
    n("unclicked_share", Ty::Float),
    n("terms", Ty::Int),
    n("complete", Ty::Bool),
];
const ASSISTANT_DAILY_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("date", Ty::Date),
    n("turns", Ty::Int),
    n("unanswered", Ty::Int),
    n("clarifying", Ty::Int),
    n("complete", Ty::Bool),
    n("unanswered_share", Ty::Float),
    n("clarifying_share", Ty::Float),
];
const ASSISTANT_CATEGORIES_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("date", Ty::Date),
    n("category", Ty::Text),
    n("turns", Ty::Int),
    n("unanswered", Ty::Int),
    n("clarifying", Ty::Int),
    n("complete", Ty::Bool),
    n("unanswered_share", Ty::Float),
    n("clarifying_share", Ty::Float),
];
const UNANSWERED_QUESTIONS_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("rank", Ty::Int),
    n("question", Ty::Text),
    n("latest_wording", Ty::Text),
    n("asks", Ty::Int),
    n("conversations", Ty::Int),
    n("last_asked_at", Ty::Time),
    n("cited_count", Ty::Int),
    n("cited_pages", Ty::Text),
    n("last_day", Ty::Date),
];
const FEEDBACK_PAGES_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("path", Ty::Text),
    n("last_day", Ty::Date),
    n("up_28d", Ty::Int),
    n("down_28d", Ty::Int),
    n("votes_28d", Ty::Int),
    n("down_rate_28d", Ty::Float),
    n("down_rank_28d", Ty::Int),
    n("up_prev_28d", Ty::Int),
    n("down_prev_28d", Ty::Int),
    n("votes_prev_28d", Ty::Int),
    n("down_rate_prev_28d", Ty::Float),
    n("down_rate_rise_28d", Ty::Float),
    n("entries_28d", Ty::Int),
    n("latest_comments", Ty::Text),
];
const VISITORS_DAILY_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("date", Ty::Date),
    n("human_visitors", Ty::Int),
    n("ai_visitors", Ty::Int),
    n("visitors", Ty::Int),
    n("human_views", Ty::Int),
    n("ai_views", Ty::Int),
    n("views", Ty::Int),
    n("views_per_visitor", Ty::Float),
    n("human_views_per_visitor", Ty::Float),
    n("ai_views_per_visitor", Ty::Float),
    n("complete", Ty::Bool),
];
const CALLERS_WEEKLY_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("iso_year", Ty::Int),
    n("iso_week", Ty::Int),
    n("week_start", Ty::Date),
    n("days", Ty::Int),
    n("web", Ty::Int),
    n("api", Ty::Int),
    n("other", Ty::Int),
    n("total", Ty::Int),
    n("web_share", Ty::Float),
    n("api_share", Ty::Float),
    n("other_share", Ty::Float),
    n("complete", Ty::Bool),
];
const AGENT_PAGE_READS_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("path", Ty::Text),
    n("agent", Ty::Text),
    n("operator", Ty::Text),
    n("class", Ty::Text),
    n("surface", Ty::Text),
    n("last_day", Ty::Date),
    n("reads_7d", Ty::Int),
    n("reads_28d", Ty::Int),
];
const AI_OPERATORS_DAILY_COLUMNS: &[Column] = &[
    n("project", Ty::Text),
    n("date", Ty::Date),
    n("operator", Ty::Text),
    n("agent_reads", Ty::Int),
    n("referred_views", Ty::Int),
    n("reads_per_referral", Ty::Float),
    n("complete", Ty::Bool),
];

/// The folder of the trend tables under the output.
pub const TRENDS_FOLDER: &str = "trends";

/// The suffix of a companion table that keeps a dataset's counts with fractions as sent.
pub const FRACTIONS_SUFFIX: &str = "_fractions";

/// The key and row of every `<table>_fractions` companion.
pub const FRACTIONS_KEY: &[&str] = &["project", "date", "key", "column"];

/// What a row of a `<table>_fractions` companion is.
pub const FRACTIONS_ROW: &str = "a count the service sent with a fraction: its row's key, the column, the value as sent, and as written (rounded half away from zero) in the table";

// The stream's tables (`Writer::Stream`).
const EVENTS_COLUMNS: &[Column] = &[
    c("event_id", Ty::Text),
    c("at", Ty::Time),
    c("event", Ty::Text),
    n("path", Ty::Text),
    c("surface", Ty::Text),
    n("user_agent", Ty::Text),
    c("agent", Ty::Text),
    n("operator", Ty::Text),
    c("class", Ty::Text),
    c("agents_version", Ty::Text),
    n("referrer_host", Ty::Text),
    n("session", Ty::Text),
];
const AGENT_DAILY_COLUMNS: &[Column] = &[
    c("agent", Ty::Text),
    n("operator", Ty::Text),
    c("class", Ty::Text),
    c("surface", Ty::Text),
    c("events", Ty::Int),
    c("pages", Ty::Int),
    c("sessions", Ty::Int),
    c("agents_version", Ty::Text),
];
const AGENT_PAGES_COLUMNS: &[Column] = &[
    c("path", Ty::Text),
    c("agent", Ty::Text),
    n("operator", Ty::Text),
    c("class", Ty::Text),
    c("surface", Ty::Text),
    c("events", Ty::Int),
    c("agents_version", Ty::Text),
];
const AI_REFERRALS_COLUMNS: &[Column] = &[
    c("operator", Ty::Text),
    c("referrer_host", Ty::Text),
    c("path", Ty::Text),
    c("views", Ty::Int),
    c("sessions", Ty::Int),
    c("agents_version", Ty::Text),
];
const UNKNOWN_AGENTS_COLUMNS: &[Column] = &[
    c("user_agent", Ty::Text),
    c("agent", Ty::Text),
    c("events", Ty::Int),
    c("pages", Ty::Int),
    c("agents_version", Ty::Text),
];
const STREAM_COVERAGE_COLUMNS: &[Column] = &[
    c("date", Ty::Date),
    c("stream_human", Ty::Int),
    c("stream_ai", Ty::Int),
    n("api_human", Ty::Int),
    n("api_ai", Ty::Int),
    n("human_coverage", Ty::Float),
    n("ai_coverage", Ty::Float),
];

const DAILY: &[Key] = &[Key::Project, Key::Date];
const PER_PROJECT: &[Key] = &[Key::Project];

const fn dataset(
    name: &'static str,
    key: &'static [&'static str],
    partitioning: &'static [Key],
    row: &'static str,
    writer: &'static str,
    columns: &'static [Column],
) -> Table {
    Table {
        name,
        key,
        partitioning,
        row,
        writer: Writer::Dataset(writer),
        columns,
    }
}

const fn trend(
    name: &'static str,
    key: &'static [&'static str],
    row: &'static str,
    columns: &'static [Column],
) -> Table {
    Table {
        name,
        key,
        partitioning: &[],
        row,
        writer: Writer::Trends,
        columns,
    }
}

const fn stream(
    name: &'static str,
    key: &'static [&'static str],
    partitioning: &'static [Key],
    row: &'static str,
    columns: &'static [Column],
) -> Table {
    Table {
        name,
        key,
        partitioning,
        row,
        writer: Writer::Stream,
        columns,
    }
}

/// Views of one page on one day.
pub const PAGE_VIEWS: Table = dataset(
    "page_views",
    &["project", "date", "path"],
    DAILY,
    "views of one page on one day, by human readers and AI agents (total = human + ai); additive over days and pages",
    datasets::PAGE_VIEWS,
    PAGE_COUNTS,
);
/// The site's views of one day.
pub const SITE_TOTALS: Table = dataset(
    "site_totals",
    &["project", "date"],
    DAILY,
    "the site's views of one day as the service totals them; final once the day can no longer change; unlisted = views of no listed page",
    datasets::PAGE_VIEWS,
    SITE_TOTALS_COLUMNS,
);
/// Page-view rows set aside, with their JSON (only for the days that had such rows).
pub const REJECTS: Table = dataset(
    "rejects",
    &["project", "date", "path"],
    DAILY,
    "a page-view row of the service that docpipe cannot store faithfully, kept as sent",
    datasets::PAGE_VIEWS,
    REJECTS_COLUMNS,
);
/// Unique visitors of one page on one day.
pub const VISITORS: Table = dataset(
    "visitors",
    &["project", "date", "path"],
    DAILY,
    "unique visitors of one page on one day: approximate distinct counts, not additive",
    datasets::VISITORS,
    PAGE_COUNTS,
);
/// The site's unique visitors of one day.
pub const SITE_VISITORS: Table = dataset(
    "site_visitors",
    &["project", "date"],
    DAILY,
    "the site's unique visitors of one day",
    datasets::VISITORS,
    SITE_VISITORS_COLUMNS,
);
/// One search term on one day.
pub const SEARCHES: Table = dataset(
    "searches",
    &["project", "date", "search_query"],
    DAILY,
    "one search term on one day: its searches (hits), click-through rate (0 to 1), the result clicked most and the last search",
    datasets::SEARCHES,
    SEARCHES_COLUMNS,
);
/// The day's number of searches.
pub const SEARCH_TOTALS: Table = dataset(
    "search_totals",
    &["project", "date"],
    DAILY,
    "the day's number of searches (the sum of the terms' hits)",
    datasets::SEARCHES,
    SEARCH_TOTALS_COLUMNS,
);
/// One feedback entry.
pub const FEEDBACK: Table = dataset(
    "feedback",
    &["project", "date", "id"],
    DAILY,
    "one feedback entry, on the local day it was made",
    datasets::FEEDBACK,
    FEEDBACK_COLUMNS,
);
/// A feedback entry without a date.
pub const FEEDBACK_UNDATED: Table = dataset(
    "feedback_undated",
    &["project", "id"],
    PER_PROJECT,
    "a feedback entry the service sent without a date",
    datasets::FEEDBACK,
    FEEDBACK_COLUMNS,
);
/// A feedback entry dated outside the days asked for.
pub const FEEDBACK_OUTSIDE: Table = dataset(
    "feedback_outside",
    &["project", "id"],
    PER_PROJECT,
    "a feedback entry dated outside the days asked for",
    datasets::FEEDBACK,
    FEEDBACK_COLUMNS,
);
/// Feedback counts of one page on one day.
pub const FEEDBACK_BY_PAGE: Table = dataset(
    "feedback_by_page",
    &["project", "date", "path"],
    DAILY,
    "feedback counts of one page on one day",
    datasets::FEEDBACK_BY_PAGE,
    FEEDBACK_BY_PAGE_COLUMNS,
);
/// One question to the assistant and its answer.
pub const ASSISTANT_TURNS: Table = dataset(
    "assistant_turns",
    &["project", "date", "id", "timestamp"],
    DAILY,
    "one question to the assistant and its answer, on the local day it was asked",
    datasets::ASSISTANT,
    ASSISTANT_TURNS_COLUMNS,
);
/// A turn dated outside the days asked for.
pub const ASSISTANT_TURNS_OUTSIDE: Table = dataset(
    "assistant_turns_outside",
    &["project", "id", "timestamp"],
    PER_PROJECT,
    "a turn dated outside the days asked for",
    datasets::ASSISTANT,
    ASSISTANT_TURNS_COLUMNS,
);
/// The assistant's queries of one day by caller.
pub const ASSISTANT_CALLERS: Table = dataset(
    "assistant_callers",
    &["project", "date"],
    DAILY,
    "the assistant's queries of one day by caller (web, api, other); additive",
    datasets::CALLER_STATS,
    ASSISTANT_CALLERS_COLUMNS,
);
/// One message of an assistant thread.
pub const ASSISTANT_MESSAGES: Table = dataset(
    "assistant_messages",
    &["project", "date", "thread_id", "message_id"],
    DAILY,
    "one message of an assistant thread docpipe fetched, on the local day the thread began",
    datasets::THREADS,
    ASSISTANT_MESSAGES_COLUMNS,
);
/// What one day of one dataset is.
pub const DAY_STATUS: Table = Table {
    name: "day_status",
    key: &["project", "dataset", "date"],
    partitioning: PER_PROJECT,
    row: "what one day of one dataset is: partial, provisional or final (see statuses)",
    writer: Writer::Export,
    columns: DAY_STATUS_COLUMNS,
};
/// What a `day_status` row says of its day (its `status` column).
pub mod day_status {
    /// The day is not over in the project's time zone, or its data were fetched before it
    /// ended: they cover part of it.
    pub const PARTIAL: &str = "partial";
    /// Over and fetched after its end, within the lateness allowance: it may still change.
    pub const PROVISIONAL: &str = "provisional";
    /// Past the lateness allowance and fetched after it: it can no longer change.
    pub const FINAL: &str = "final";
}

/// One firing of a rule.
pub const AGENT_RUNS: Table = Table {
    name: "agent_runs",
    key: &["project", "firing_id"],
    partitioning: PER_PROJECT,
    row: "one firing of a rule: its prompt, what was sent, the job's outcome",
    writer: Writer::Rules,
    columns: AGENT_RUNS_COLUMNS,
};
/// What one job changed for one key of its firing.
pub const AGENT_IMPACT: Table = Table {
    name: "agent_impact",
    key: &["project", "firing_id", "key"],
    partitioning: PER_PROJECT,
    row: "what one job changed for one key of its firing, once measured",
    writer: Writer::Rules,
    columns: AGENT_IMPACT_COLUMNS,
};

/// One ask of one question of a firing, asked again of the assistant after its pull request.
pub const AGENT_REASKS: Table = Table {
    name: "agent_reasks",
    key: &["project", "firing_id", "question", "attempt"],
    partitioning: PER_PROJECT,
    row: "one ask of a firing's question, asked again of the assistant after the job's pull request: how it answered, the pages it cited",
    writer: Writer::Rules,
    columns: AGENT_REASKS_COLUMNS,
};

/// One day of a project's views.
pub const DAILY_TREND: Table = trend(
    "daily",
    &["project", "date"],
    "one day of a project's views: counts, AI share, 7- and 28-day sums of complete days, change against a week before; complete = false for a day not over (its counts so far)",
    DAILY_COLUMNS,
);
/// One ISO week of a project's views.
pub const WEEKLY_TREND: Table = trend(
    "weekly",
    &["project", "week_start"],
    "one ISO week of a project's views; complete when its 7 days are",
    WEEKLY_COLUMNS,
);
/// One page over the last 7 and 28 complete days.
pub const PAGES_TREND: Table = trend(
    "pages",
    &["project", "path"],
    "one page over the last 7 and 28 complete days and the windows before them, with its rank and AI share rise",
    PAGES_COLUMNS,
);
/// One search term over the last 7 and 28 complete days.
pub const SEARCH_TERMS: Table = trend(
    "search_terms",
    &["project", "search_query"],
    "one search term over the last 7 and 28 complete days; est_ columns are estimated clicks (hits x ctr summed, rounded)",
    SEARCH_TERMS_COLUMNS,
);
/// One day of a project's searches.
pub const SEARCH_DAILY: Table = trend(
    "search_daily",
    &["project", "date"],
    "one day of a project's searches",
    SEARCH_DAILY_COLUMNS,
);
/// One day of a project's assistant turns.
pub const ASSISTANT_DAILY: Table = trend(
    "assistant_daily",
    &["project", "date"],
    "one day of a project's assistant turns",
    ASSISTANT_DAILY_COLUMNS,
);
/// One day of a project's assistant turns in one category.
pub const ASSISTANT_CATEGORIES: Table = trend(
    "assistant_categories",
    &["project", "date", "category"],
    "one day of a project's assistant turns in one category",
    ASSISTANT_CATEGORIES_COLUMNS,
);
/// One unanswered question of the last 7 complete days.
pub const UNANSWERED_QUESTIONS: Table = trend(
    "unanswered_questions",
    &["project", "question"],
    "one unanswered question (normalised text) of the last 7 complete days",
    UNANSWERED_QUESTIONS_COLUMNS,
);
/// One page's feedback over the last 28 complete days.
pub const FEEDBACK_PAGES: Table = trend(
    "feedback_pages",
    &["project", "path"],
    "one page's feedback over the last 28 complete days and the 28 before",
    FEEDBACK_PAGES_COLUMNS,
);
/// One day of a project's unique visitors.
pub const VISITORS_DAILY: Table = trend(
    "visitors_daily",
    &["project", "date"],
    "one day of a project's unique visitors beside its views",
    VISITORS_DAILY_COLUMNS,
);
/// One ISO week of the assistant's callers.
pub const CALLERS_WEEKLY: Table = trend(
    "callers_weekly",
    &["project", "week_start"],
    "one ISO week of the assistant's callers",
    CALLERS_WEEKLY_COLUMNS,
);
/// One page read by one agent on one surface over the stream's last 7 and 28 complete days.
pub const AGENT_PAGE_READS: Table = trend(
    "agent_page_reads",
    &["project", "path", "agent", "surface"],
    "one page read by one agent (not a browser) on one surface over the event stream's last 7 and 28 complete days",
    AGENT_PAGE_READS_COLUMNS,
);
/// One day of one AI product's operator: its agents' reads against the readers it sent.
pub const AI_OPERATORS_DAILY: Table = trend(
    "ai_operators_daily",
    &["project", "date", "operator"],
    "one day of the event stream for one AI operator: its agents' page reads against the human page views its products sent (the crawl-to-referral ratio)",
    AI_OPERATORS_DAILY_COLUMNS,
);

/// The tables' names as constants, for a `match` (a pattern takes a constant, not a field).
pub mod name {
    /// `PAGE_VIEWS`'s name.
    pub const PAGE_VIEWS: &str = super::PAGE_VIEWS.name;
    /// `SITE_TOTALS`'s name.
    pub const SITE_TOTALS: &str = super::SITE_TOTALS.name;
    /// `REJECTS`'s name.
    pub const REJECTS: &str = super::REJECTS.name;
    /// `VISITORS`'s name.
    pub const VISITORS: &str = super::VISITORS.name;
    /// `SITE_VISITORS`'s name.
    pub const SITE_VISITORS: &str = super::SITE_VISITORS.name;
    /// `SEARCHES`'s name.
    pub const SEARCHES: &str = super::SEARCHES.name;
    /// `SEARCH_TOTALS`'s name.
    pub const SEARCH_TOTALS: &str = super::SEARCH_TOTALS.name;
    /// `FEEDBACK`'s name.
    pub const FEEDBACK: &str = super::FEEDBACK.name;
    /// `FEEDBACK_UNDATED`'s name.
    pub const FEEDBACK_UNDATED: &str = super::FEEDBACK_UNDATED.name;
    /// `FEEDBACK_OUTSIDE`'s name.
    pub const FEEDBACK_OUTSIDE: &str = super::FEEDBACK_OUTSIDE.name;
    /// `FEEDBACK_BY_PAGE`'s name.
    pub const FEEDBACK_BY_PAGE: &str = super::FEEDBACK_BY_PAGE.name;
    /// `ASSISTANT_TURNS`'s name.
    pub const ASSISTANT_TURNS: &str = super::ASSISTANT_TURNS.name;
    /// `ASSISTANT_TURNS_OUTSIDE`'s name.
    pub const ASSISTANT_TURNS_OUTSIDE: &str = super::ASSISTANT_TURNS_OUTSIDE.name;
    /// `ASSISTANT_CALLERS`'s name.
    pub const ASSISTANT_CALLERS: &str = super::ASSISTANT_CALLERS.name;
    /// `ASSISTANT_MESSAGES`'s name.
    pub const ASSISTANT_MESSAGES: &str = super::ASSISTANT_MESSAGES.name;
    /// `DAY_STATUS`'s name.
    pub const DAY_STATUS: &str = super::DAY_STATUS.name;
    /// `AGENT_RUNS`'s name.
    pub const AGENT_RUNS: &str = super::AGENT_RUNS.name;
    /// `AGENT_IMPACT`'s name.
    pub const AGENT_IMPACT: &str = super::AGENT_IMPACT.name;
    /// `AGENT_REASKS`'s name.
    pub const AGENT_REASKS: &str = super::AGENT_REASKS.name;
    /// `DAILY_TREND`'s name.
    pub const DAILY_TREND: &str = super::DAILY_TREND.name;
    /// `WEEKLY_TREND`'s name.
    pub const WEEKLY_TREND: &str = super::WEEKLY_TREND.name;
    /// `PAGES_TREND`'s name.
    pub const PAGES_TREND: &str = super::PAGES_TREND.name;
    /// `SEARCH_TERMS`'s name.
    pub const SEARCH_TERMS: &str = super::SEARCH_TERMS.name;
    /// `SEARCH_DAILY`'s name.
    pub const SEARCH_DAILY: &str = super::SEARCH_DAILY.name;
    /// `ASSISTANT_DAILY`'s name.
    pub const ASSISTANT_DAILY: &str = super::ASSISTANT_DAILY.name;
    /// `ASSISTANT_CATEGORIES`'s name.
    pub const ASSISTANT_CATEGORIES: &str = super::ASSISTANT_CATEGORIES.name;
    /// `UNANSWERED_QUESTIONS`'s name.
    pub const UNANSWERED_QUESTIONS: &str = super::UNANSWERED_QUESTIONS.name;
    /// `FEEDBACK_PAGES`'s name.
    pub const FEEDBACK_PAGES: &str = super::FEEDBACK_PAGES.name;
    /// `VISITORS_DAILY`'s name.
    pub const VISITORS_DAILY: &str = super::VISITORS_DAILY.name;
    /// `CALLERS_WEEKLY`'s name.
    pub const CALLERS_WEEKLY: &str = super::CALLERS_WEEKLY.name;
    /// `AGENT_PAGE_READS`'s name.
    pub const AGENT_PAGE_READS: &str = super::AGENT_PAGE_READS.name;
    /// `AI_OPERATORS_DAILY`'s name.
    pub const AI_OPERATORS_DAILY: &str = super::AI_OPERATORS_DAILY.name;
    /// `AGENT_DAILY`'s name.
    pub const AGENT_DAILY: &str = super::AGENT_DAILY.name;
    /// `AGENT_PAGES`'s name.
    pub const AGENT_PAGES: &str = super::AGENT_PAGES.name;
    /// `AI_REFERRALS`'s name.
    pub const AI_REFERRALS: &str = super::AI_REFERRALS.name;
}

/// One event of the analytics stream.
pub const EVENTS: Table = stream(
    "events",
    &["project", "date", "event_id"],
    DAILY,
    "one event of the service's analytics stream, on its local day: no ip, user or visitor id; the referrer as its host, the session as a keyed hash",
    EVENTS_COLUMNS,
);
/// One day's reads by one agent on one surface.
pub const AGENT_DAILY: Table = stream(
    "agent_daily",
    &["project", "date", "agent", "surface"],
    DAILY,
    "one day's page reads (content views, Markdown views, llms.txt, MCP) by one agent on one surface: events, distinct pages and sessions",
    AGENT_DAILY_COLUMNS,
);
/// One page read by one agent on one surface in a day.
pub const AGENT_PAGES: Table = stream(
    "agent_pages",
    &["project", "date", "path", "agent", "surface"],
    DAILY,
    "one page read by one agent (not a browser) on one surface in a day, and how often",
    AGENT_PAGES_COLUMNS,
);
/// Readers an AI product sent to one page in a day.
pub const AI_REFERRALS: Table = stream(
    "ai_referrals",
    &["project", "date", "operator", "referrer_host", "path"],
    DAILY,
    "human page views of one day whose referrer is an AI product (by its operator and host) and the page they landed on",
    AI_REFERRALS_COLUMNS,
);
/// A user agent the agents table does not name.
pub const UNKNOWN_AGENTS: Table = stream(
    "unknown_agents",
    &["project", "date", "user_agent"],
    DAILY,
    "a user agent of one day that the agents table files as unknown, with its events: the rows to add to your agents file",
    UNKNOWN_AGENTS_COLUMNS,
);
/// How much of the API's counts one day of the stream holds.
pub const STREAM_COVERAGE: Table = stream(
    "stream_coverage",
    &["project", "date"],
    PER_PROJECT,
    "one day of a project: the stream's human and agent page views against the API's human and ai counts, and their ratios",
    STREAM_COVERAGE_COLUMNS,
);

/// The stream's tables, in the lake's order.
pub const STREAM: [&Table; 6] = [
    &EVENTS,
    &AGENT_DAILY,
    &AGENT_PAGES,
    &AI_REFERRALS,
    &UNKNOWN_AGENTS,
    &STREAM_COVERAGE,
];

/// The tables the datasets, the export and the rules write, in the lake's order.
pub const WRITTEN: [&Table; 19] = [
    &PAGE_VIEWS,
    &SITE_TOTALS,
    &REJECTS,
    &VISITORS,
    &SITE_VISITORS,
    &SEARCHES,
    &SEARCH_TOTALS,
    &FEEDBACK,
    &FEEDBACK_UNDATED,
    &FEEDBACK_OUTSIDE,
    &FEEDBACK_BY_PAGE,
    &ASSISTANT_TURNS,
    &ASSISTANT_TURNS_OUTSIDE,
    &ASSISTANT_CALLERS,
    &ASSISTANT_MESSAGES,
    &DAY_STATUS,
    &AGENT_RUNS,
    &AGENT_IMPACT,
    &AGENT_REASKS,
];

/// The trend tables: the three of page views first, then the docs gaps', then the event stream's, in
/// the lake's order.
pub const TRENDS: [&Table; 13] = [
    &DAILY_TREND,
    &WEEKLY_TREND,
    &PAGES_TREND,
    &SEARCH_TERMS,
    &SEARCH_DAILY,
    &ASSISTANT_DAILY,
    &ASSISTANT_CATEGORIES,
    &UNANSWERED_QUESTIONS,
    &FEEDBACK_PAGES,
    &VISITORS_DAILY,
    &CALLERS_WEEKLY,
    &AGENT_PAGE_READS,
    &AI_OPERATORS_DAILY,
];

/// A table by its name (a `<table>_fractions` companion is not among them: [`fractions_of`]).
pub fn by_name(name: &str) -> Option<&'static Table> {
    WRITTEN
        .iter()
        .chain(TRENDS.iter())
        .chain(STREAM.iter())
        .find(|t| t.name == name)
        .copied()
}

/// The companion table of `table` that keeps its counts with fractions as sent.
pub fn fractions_of(table: &str) -> String {
    format!("{table}{FRACTIONS_SUFFIX}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_table_has_one_name_a_key_and_a_row() {
        let all: Vec<&Table> = WRITTEN
            .iter()
            .chain(TRENDS.iter())
            .chain(STREAM.iter())
            .copied()
            .collect();
        let names: HashSet<&str> = all.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), 38);
        for t in &all {
            assert!(!t.key.is_empty() && !t.row.is_empty(), "{}", t.name);
            for k in t.partitioning {
                assert!(t.key.contains(&k.column()), "{}: {k:?}", t.name);
            }
            assert_eq!(by_name(t.name), Some(*t));
        }
        assert_eq!(by_name("page_views_fractions"), None);
    }

    #[test]
    fn a_tables_files_are_its_hive_path() {
        assert_eq!(
            PAGE_VIEWS.files(),
            "page_views/project=<id>/date=<YYYY-MM-DD>/part-00000.parquet"
        );
        assert_eq!(
            AGENT_RUNS.files(),
            "agent_runs/project=<id>/part-00000.parquet"
        );
        assert_eq!(SEARCH_TERMS.files(), "trends/search_terms.parquet");
        assert_eq!(fractions_of(SEARCHES.name), "searches_fractions");
        assert_eq!(SEARCHES.dataset(), Some(datasets::SEARCHES));
        assert_eq!(DAY_STATUS.dataset(), None);
    }
}
