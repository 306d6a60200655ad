//! What the in-process tests and the scenarios of `datasets` share.

use crate::common::*;

pub const ALL_BUT_VIEWS: [&str; 6] = [
    "visitors",
    "searches",
    "feedback",
    "feedback_by_page",
    "assistant",
    "caller_stats",
];

/// The first test project with every dataset.
pub fn all_datasets(live: &Live) -> Vec<docpipe::export::Target> {
    let mut t = targets(live, open_limits());
    t.truncate(1);
    t[0].datasets = std::iter::once("page_views").chain(ALL_BUT_VIEWS).collect();
    t
}
