//! The datasets docpipe exports, by the names the config, the state and the lake's
//! `day_status` use; the tables each writes name it as their writer (`tables`). How each
//! is fetched and decoded is the extract and write stages' (`docpipe::dataset`).

/// Page views of each page and day, human and AI.
pub const PAGE_VIEWS: &str = "page_views";
/// Unique visitors of each page and day.
pub const VISITORS: &str = "visitors";
/// Search terms of each day.
pub const SEARCHES: &str = "searches";
/// Feedback entries.
pub const FEEDBACK: &str = "feedback";
/// Feedback counts by page.
pub const FEEDBACK_BY_PAGE: &str = "feedback_by_page";
/// The assistant's conversations (questions and answers).
pub const ASSISTANT: &str = "assistant";
/// The assistant's queries by caller.
pub const CALLER_STATS: &str = "caller_stats";
/// The assistant's threads, on demand.
pub const THREADS: &str = "threads";

/// The leading dataset: page views, whose days head a project's status, are served first each
/// run (the trends read them) and whose windows a page-view summary line counts.
pub const LEADING: &str = PAGE_VIEWS;

/// Every dataset, in export order.
pub const ALL: [&str; 8] = [
    PAGE_VIEWS,
    VISITORS,
    SEARCHES,
    FEEDBACK,
    FEEDBACK_BY_PAGE,
    ASSISTANT,
    CALLER_STATS,
    THREADS,
];

/// Whether `name` is a dataset's.
pub fn known(name: &str) -> bool {
    ALL.contains(&name)
}
