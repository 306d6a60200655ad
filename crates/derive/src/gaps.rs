//! Where the documentation fails its readers, from the datasets beside page views: search terms
//! searched and not clicked, questions the assistant could not answer, pages readers mark
//! unhelpful, unique visitors beside views, and where the assistant's traffic comes from.
//!
//! Each table reads its dataset's Parquet lazily; a dataset never exported gives an empty
//! table with the same columns (what rule queries are checked against). Windows end at the
//! project's last exported day of the dataset (`last_day`), as the page table's do.

use super::{TrendsError, aged, last_day, named, pct, share};
use docpipe_catalog::datasets;
use docpipe_catalog::tables::{self, name};
use polars::prelude::*;
use std::path::Path;

/// Votes (thumbs up or down) a page needs in both 28-day windows for its rate's rise to count.
pub const MIN_VOTES: i64 = 5;
/// Cited pages listed per unanswered question, and comments per page.
pub const LIST_MAX: usize = 5;
/// What joins the items of a listed column (cited pages, comments).
pub const SEPARATOR: &str = " | ";

/// The gap tables.
#[derive(Debug, Clone)]
pub struct Gaps {
    /// Per project and search term, the last 7 and 28 days.
    pub search_terms: DataFrame,
    /// Per project and day: searches, clicks, click-through rate.
    pub search_daily: DataFrame,
    /// Per project and day: assistant turns, unanswered and clarifying shares.
    pub assistant_daily: DataFrame,
    /// The same per category.
    pub assistant_categories: DataFrame,
    /// The last 7 days' unanswered questions, grouped by normalised text.
    pub unanswered_questions: DataFrame,
    /// Per project and page: thumbs-down rate over 28 days, the 28 before, latest comments.
    pub feedback_pages: DataFrame,
    /// Per project and day: unique visitors beside views.
    pub visitors_daily: DataFrame,
    /// Per project and ISO week: assistant callers.
    pub callers_weekly: DataFrame,
    /// Per project, page, agent and surface: the event stream's reads over 7 and 28 days.
    pub agent_page_reads: DataFrame,
    /// Per project, day and AI operator: its agents' reads against the readers it sent.
    pub ai_operators_daily: DataFrame,
}

/// The gap tables' names, in the order they are written (`trends/<name>.parquet`), the order
/// of [`Gaps::frames`].
pub const NAMES: [&str; 10] = [
    name::SEARCH_TERMS,
    name::SEARCH_DAILY,
    name::ASSISTANT_DAILY,
    name::ASSISTANT_CATEGORIES,
    name::UNANSWERED_QUESTIONS,
    name::FEEDBACK_PAGES,
    name::VISITORS_DAILY,
    name::CALLERS_WEEKLY,
    name::AGENT_PAGE_READS,
    name::AI_OPERATORS_DAILY,
];

impl Gaps {
    /// The tables with their names, in the order they are written.
    pub fn named(&mut self) -> [(&'static str, &mut DataFrame); 10] {
        let frames = [
            &mut self.search_terms,
            &mut self.search_daily,
            &mut self.assistant_daily,
            &mut self.assistant_categories,
            &mut self.unanswered_questions,
            &mut self.feedback_pages,
            &mut self.visitors_daily,
            &mut self.callers_weekly,
            &mut self.agent_page_reads,
            &mut self.ai_operators_daily,
        ];
        let mut frames = frames.into_iter();
        NAMES.map(|name| (name, frames.next().expect("one frame per name")))
    }

    /// The tables by name, for rule queries.
    pub fn frames(&self) -> [(&'static str, &DataFrame); 10] {
        let frames = [
            &self.search_terms,
            &self.search_daily,
            &self.assistant_daily,
            &self.assistant_categories,
            &self.unanswered_questions,
            &self.feedback_pages,
            &self.visitors_daily,
            &self.callers_weekly,
            &self.agent_page_reads,
            &self.ai_operators_daily,
        ];
        let mut frames = frames.into_iter();
        NAMES.map(|name| (name, frames.next().expect("one frame per name")))
    }
}

/// The columns of an exported table the gaps read, with their types as the catalogue gives
/// them.
fn columns(table: &str) -> Vec<(&'static str, DataType)> {
    let read: &[&'static str] = match table {
        name::SEARCHES => &[
            "search_query",
            "hits",
            "ctr",
            "top_clicked_page",
            "last_searched_at",
        ],
        name::SEARCH_TOTALS => &["total_searches"],
        name::ASSISTANT_TURNS => &[
            "id",
            "timestamp",
            "query",
            "response_type",
            "sources",
            "resolution_status",
            "query_category",
        ],
        name::FEEDBACK => &["path", "comment", "created_at", "source", "helpful"],
        name::ASSISTANT_CALLERS => &["web", "api", "other", "total"],
        name::AGENT_DAILY => &["operator", "class", "events"],
        name::AGENT_PAGES => &["path", "agent", "operator", "class", "surface", "events"],
        name::AI_REFERRALS => &["operator", "views"],
        // site_visitors, site_totals
        _ => &["human", "ai", "total"],
    };
    let columns = tables::by_name(table).map_or(&[][..], |t| t.columns);
    read.iter()
        .map(|&name| {
            let column = columns
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("{table}.{name}: not a column docpipe writes"));
            (name, super::polars_type(column.ty))
        })
        .collect()
}

/// A table's columns the gaps read, with `project` and `date`, pruned to the selection; an
/// empty frame of the same columns when the table was never exported.
fn source(
    out: Option<&Path>,
    table: &str,
    sel: &super::Selection,
) -> Result<LazyFrame, TrendsError> {
    let cols = columns(table);
    if let Some(out) = out.filter(|o| o.join(table).is_dir()) {
        let mut wanted = vec![col("project"), col("date")];
        wanted.extend(cols.iter().map(|(c, _)| col(*c)));
        return Ok(super::scan(out, table, sel)?.select(wanted));
    }
    let mut schema = Schema::default();
    schema.insert("project".into(), DataType::String);
    schema.insert("date".into(), DataType::Date);
    for (name, dtype) in cols {
        schema.insert(name.into(), dtype);
    }
    Ok(DataFrame::empty_with_schema(&schema).lazy())
}

/// A 1-based rank within each project after sorting by `by` (the frame's order breaks no
/// ties: `by` ends with a unique column), for the rows where `eligible` holds; null elsewhere.
fn ranked(
    lf: LazyFrame,
    by: &[&str],
    descending: &[bool],
    eligible: Expr,
    name: &str,
) -> PolarsResult<LazyFrame> {
    let mut keys = vec!["project"];
    keys.extend(by);
    let mut desc = vec![false];
    desc.extend(descending);
    // Eligible rows first, so that their running count is their rank.
    Ok(lf
        .with_column(eligible.alias("_eligible"))
        .sort_by_exprs(
            std::iter::once(col("_eligible").not())
                .chain(keys.iter().map(|k| col(*k)))
                .collect::<Vec<_>>(),
            SortMultipleOptions::default()
                .with_order_descending_multi(
                    std::iter::once(false)
                        .chain(desc.iter().copied())
                        .collect::<Vec<_>>(),
                )
                .with_nulls_last(true),
        )
        .with_column(
            when(col("_eligible"))
                .then(
                    col("_eligible")
                        .cast(DataType::UInt32)
                        .cum_sum(false)
                        .over([col("project")])?,
                )
                .otherwise(lit(Null {}))
                .alias(name),
        )
        .drop(by_name(["_eligible"], true, false)))
}

/// A search row's clicks: its hits times its click-through rate.
fn clicks() -> Expr {
    (col("hits").cast(DataType::Float64) * col("ctr")).alias("clicks")
}

/// A sum of estimated clicks as the whole number of clicks it estimates (rounded half away
/// from zero): the service gives each term's hits and click-through rate, not its clicks, so
/// clicks are hits x ctr summed, and a count is whole wherever a person reads it.
///
/// The sum is taken to a millionth first: sums of hits x ctr in another order (another reader's)
/// differ in the last bits, and must round alike at a half.
fn estimate(clicks: Expr) -> Expr {
    clicks
        .round(6, RoundMode::HalfAwayFromZero)
        .round(0, RoundMode::HalfAwayFromZero)
        .cast(DataType::Int64)
}

/// Search terms per project over the last 7 and 28 complete days: hits, estimated clicks
/// ([`estimate`]; the click-through rate is re-weighted by hits, never averaged, and is the
/// share of those whole clicks, so that a rate of 0 and 0 clicks are one fact), the page
/// clicked most (on the day the term had most hits), the last search; `est_unclicked_7d`
/// (searches without a click) and `gap_rank_7d` (1: the term searched most without a click); `new_this_week`
/// (searched in the last 7 days and not in the 21 before; null unless those were exported).
pub fn search_terms(searches: LazyFrame, totals: LazyFrame) -> PolarsResult<LazyFrame> {
    let last = last_day(totals.clone());
    let coverage = coverage_7_21(totals, last.clone());
    let w7 = col("age").lt(lit(7));
    let terms = aged(searches, last, 28)
        .with_column(clicks())
        .group_by([col("project"), col("search_query")])
        .agg([
            col("last_day").first(),
            col("hits").filter(w7.clone()).sum().alias("hits_7d"),
            col("clicks").filter(w7.clone()).sum().alias("clicks_7d"),
            col("hits").sum().alias("hits_28d"),
            col("clicks").sum().alias("clicks_28d"),
            col("hits")
                .filter(w7.clone().not())
                .sum()
                .alias("hits_prev_21d"),
            col("top_clicked_page")
                .sort_by(
                    [col("hits"), col("date")],
                    SortMultipleOptions::default().with_order_descending(true),
                )
                .drop_nulls()
                .first()
                .alias("top_clicked_page"),
            col("last_searched_at").max(),
        ])
        .join(
            coverage,
            [col("project")],
            [col("project")],
            JoinArgs::new(JoinType::Left),
        )
        .with_columns([
            estimate(col("clicks_7d")).alias("est_clicks_7d"),
            estimate(col("clicks_28d")).alias("est_clicks_28d"),
            (col("hits_7d") - estimate(col("clicks_7d"))).alias("est_unclicked_7d"),
            when(col("days_prev_21d").eq(lit(21i64)))
                .then(
                    col("hits_7d")
                        .gt(lit(0))
                        .and(col("hits_prev_21d").eq(lit(0))),
                )
                .otherwise(lit(Null {}))
                .alias("new_this_week"),
        ])
        // The rate of the whole clicks: `ctr_7d = 0` exactly when `est_clicks_7d = 0` (one
        // definition of "no clicks", docs/commands.md).
        .with_columns([
            share("est_clicks_7d", "hits_7d").alias("ctr_7d"),
            share("est_clicks_28d", "hits_28d").alias("ctr_28d"),
        ]);
    Ok(ranked(
        terms,
        &["est_unclicked_7d", "hits_7d", "search_query"],
        &[true, true, false],
        col("hits_7d").gt(lit(0)),
        "gap_rank_7d",
    )?
    .select(named(&[
        "project",
        "search_query",
        "last_day",
        "hits_7d",
        "est_clicks_7d",
        "ctr_7d",
        "est_unclicked_7d",
        "gap_rank_7d",
        "hits_28d",
        "est_clicks_28d",
        "ctr_28d",
        "top_clicked_page",
        "last_searched_at",
        "new_this_week",
    ]))
    .sort(
        ["project", "gap_rank_7d", "search_query"],
        SortMultipleOptions::default().with_nulls_last(true),
    ))
}

/// Days exported per project in the last 7 days and the 21 before (`days_7d`,
/// `days_prev_21d`), to the project's last day: a week is new only against 21 days there.
fn coverage_7_21(totals: LazyFrame, last: LazyFrame) -> LazyFrame {
    aged(totals, last, 28).group_by([col("project")]).agg([
        col("date")
            .filter(col("age").lt(lit(7)))
            .count()
            .cast(DataType::Int64)
            .alias("days_7d"),
        col("date")
            .filter(col("age").gt_eq(lit(7)))
            .count()
            .cast(DataType::Int64)
            .alias("days_prev_21d"),
    ])
}

/// Searches per project and day: the day's searches (`totalSearches`), clicks (hits x ctr
/// summed over its terms, whole), click-through rate (of those whole clicks), the share
/// without a click, and terms.
pub fn search_daily(searches: LazyFrame, totals: LazyFrame) -> LazyFrame {
    let clicks = searches
        .with_column(clicks())
        .group_by([col("project"), col("date")])
        .agg([
            col("clicks").sum(),
            col("search_query")
                .count()
                .cast(DataType::Int64)
                .alias("terms"),
        ]);
    let on = [col("project"), col("date")];
    totals
        .select([
            col("project"),
            col("date"),
            col("total_searches").alias("searches"),
            col("complete"),
        ])
        .join(clicks, on.clone(), on, JoinArgs::new(JoinType::Left))
        .with_columns([
            col("clicks").fill_null(lit(0.0)),
            col("terms").fill_null(lit(0i64)),
        ])
        .with_column(estimate(col("clicks")).alias("est_clicks"))
        .with_column(share("est_clicks", "searches").alias("ctr"))
        .with_column((lit(1.0) - col("ctr")).alias("unclicked_share"))
        .select([
            col("project"),
            col("date"),
            col("searches"),
            col("est_clicks"),
            col("ctr"),
            col("unclicked_share"),
            col("terms"),
            col("complete"),
        ])
        .sort(["project", "date"], SortMultipleOptions::default())
}

/// Assistant turns per project and day: turns, unanswered and clarifying questions, shares
/// (the day's categories added up: [`daily_of_categories`]).
pub fn assistant_daily(turns: LazyFrame) -> LazyFrame {
    daily_of_categories(assistant_categories(turns))
}

/// The same per category (`uncategorized` until the service assigns one, about a day later).
pub fn assistant_categories(turns: LazyFrame) -> LazyFrame {
    turns
        .with_column(
            col("query_category")
                .fill_null(lit("uncategorized"))
                .alias("category"),
        )
        .group_by([col("project"), col("date"), col("category")])
        .agg([
            len().cast(DataType::Int64).alias("turns"),
            col("resolution_status")
                .eq(lit("unanswered"))
                .sum()
                .cast(DataType::Int64)
                .alias("unanswered"),
            col("response_type")
                .eq(lit("clarifying_question"))
                .sum()
                .cast(DataType::Int64)
                .alias("clarifying"),
            col("complete").all(true),
        ])
        .with_columns(turn_shares())
        .sort(
            ["project", "date", "category"],
            SortMultipleOptions::default(),
        )
}

/// `assistant_daily` from `assistant_categories`' rows: a day's counts are its categories'
/// counts added up (each turn has one category), the shares of those.
fn daily_of_categories(categories: LazyFrame) -> LazyFrame {
    categories
        .group_by([col("project"), col("date")])
        .agg([
            col("turns").sum(),
            col("unanswered").sum(),
            col("clarifying").sum(),
            col("complete").all(true),
        ])
        .with_columns(turn_shares())
        .sort(["project", "date"], SortMultipleOptions::default())
}

/// The unanswered and clarifying shares of the turns.
fn turn_shares() -> [Expr; 2] {
    [
        share("unanswered", "turns").alias("unanswered_share"),
        share("clarifying", "turns").alias("clarifying_share"),
    ]
}

/// A question's text for grouping: lower case, every run of what is not a letter or a digit
/// one space, trimmed ("How do I use webhooks?" and "how do i use  Webhooks" are one).
pub fn normalised(e: Expr) -> Expr {
    e.str()
        .to_lowercase()
        .str()
        .replace_all(lit(r"[^\p{L}\p{N}]+"), lit(" "), false)
        .str()
        .strip_chars(lit(" "))
}

/// The last 7 days' unanswered questions per project (to its last day with turns), grouped by
/// [`normalised`] text: how often asked, in how many conversations, the latest wording, when
/// last asked, and the pages the assistant cited for them (most cited first, up to
/// [`LIST_MAX`], joined by [`SEPARATOR`]); `rank` 1 for the most asked.
pub fn unanswered_questions(turns: LazyFrame) -> PolarsResult<LazyFrame> {
    let last = last_day(turns.clone());
    let asked = aged(turns, last, 7)
        .filter(col("resolution_status").eq(lit("unanswered")))
        .with_column(normalised(col("query")).alias("question"))
        .filter(col("question").neq(lit("")));
    let key = [col("project"), col("question")];
    let cited = asked
        .clone()
        .select([col("project"), col("question"), col("sources")])
        .explode(
            by_name(["sources"], true, false),
            ExplodeOptions {
                empty_as_null: false,
                keep_nulls: false,
            },
        )
        .with_column(col("sources").struct_().field_by_name("url").alias("url"))
        .filter(col("url").is_not_null())
        .group_by([col("project"), col("question"), col("url")])
        .agg([len().alias("n")])
        .sort_by_exprs(
            [col("n"), col("url")],
            SortMultipleOptions::default().with_order_descending_multi([true, false]),
        )
        .group_by_stable(key.clone())
        .agg([
            len().cast(DataType::Int64).alias("cited_count"),
            col("url")
                .head(Some(LIST_MAX))
                .str()
                .join(SEPARATOR, true)
                .alias("cited_pages"),
        ]);
    let grouped = asked
        .group_by(key.clone())
        .agg([
            col("last_day").first(),
            len().cast(DataType::Int64).alias("asks"),
            col("id")
                .n_unique()
                .cast(DataType::Int64)
                .alias("conversations"),
            col("query")
                .sort_by(
                    [col("timestamp"), col("query")],
                    SortMultipleOptions::default().with_order_descending(true),
                )
                .first()
                .alias("latest_wording"),
            col("timestamp").max().alias("last_asked_at"),
        ])
        .join(cited, key.clone(), key, JoinArgs::new(JoinType::Left))
        .with_column(col("cited_count").fill_null(lit(0i64)));
    Ok(ranked(
        grouped,
        &["asks", "last_asked_at", "question"],
        &[true, true, false],
        lit(true),
        "rank",
    )?
    .select(named(&[
        "project",
        "rank",
        "question",
        "latest_wording",
        "asks",
        "conversations",
        "last_asked_at",
        "cited_count",
        "cited_pages",
        "last_day",
    ]))
    .sort(["project", "rank"], SortMultipleOptions::default()))
}

/// Feedback per project and page over the last 28 days (to the project's last day with
/// feedback) and the 28 before: thumbs up and down (contextual entries' `helpful`), the
/// thumbs-down rate (of the votes), its rise (null unless both windows have [`MIN_VOTES`]
/// votes), entries, the latest comments (up to [`LIST_MAX`], newest first); `down_rank_28d`
/// 1 for the page with most thumbs down (then the highest rate). Undated entries
/// (`feedback_undated`) have no day to fall in a window and are left out.
pub fn feedback_pages(feedback: LazyFrame) -> PolarsResult<LazyFrame> {
    let last = last_day(feedback.clone());
    let rows = aged(feedback, last, 56);
    let cur = col("age").lt(lit(28));
    let vote = |helpful: bool, window: Expr| {
        col("helpful")
            .eq(lit(helpful))
            .and(window)
            .sum()
            .cast(DataType::Int64)
    };
    let pages = rows
        .group_by([col("project"), col("path")])
        .agg([
            col("last_day").first(),
            vote(true, cur.clone()).alias("up_28d"),
            vote(false, cur.clone()).alias("down_28d"),
            vote(true, cur.clone().not()).alias("up_prev_28d"),
            vote(false, cur.clone().not()).alias("down_prev_28d"),
            cur.clone().sum().cast(DataType::Int64).alias("entries_28d"),
            latest_comments(cur.clone()),
        ])
        .with_columns([
            (col("up_28d") + col("down_28d")).alias("votes_28d"),
            (col("up_prev_28d") + col("down_prev_28d")).alias("votes_prev_28d"),
        ])
        .with_columns([
            share("down_28d", "votes_28d").alias("down_rate_28d"),
            share("down_prev_28d", "votes_prev_28d").alias("down_rate_prev_28d"),
        ])
        .with_column(
            when(
                col("votes_28d")
                    .gt_eq(lit(MIN_VOTES))
                    .and(col("votes_prev_28d").gt_eq(lit(MIN_VOTES))),
            )
            .then(col("down_rate_28d") - col("down_rate_prev_28d"))
            .otherwise(lit(Null {}))
            .alias("down_rate_rise_28d"),
        )
        .with_column(
            when(col("latest_comments").eq(lit("")))
                .then(lit(Null {}))
                .otherwise(col("latest_comments"))
                .alias("latest_comments"),
        );
    Ok(ranked(
        pages,
        &["down_28d", "down_rate_28d", "path"],
        &[true, true, false],
        col("down_28d").gt(lit(0)),
        "down_rank_28d",
    )?
    .select(named(&[
        "project",
        "path",
        "last_day",
        "up_28d",
        "down_28d",
        "votes_28d",
        "down_rate_28d",
        "down_rank_28d",
        "up_prev_28d",
        "down_prev_28d",
        "votes_prev_28d",
        "down_rate_prev_28d",
        "down_rate_rise_28d",
        "entries_28d",
        "latest_comments",
    ]))
    .sort(
        ["project", "down_rank_28d", "path"],
        SortMultipleOptions::default().with_nulls_last(true),
    ))
}

/// The latest comments of the entries `window` keeps (up to [`LIST_MAX`], newest first), as
/// one text.
fn latest_comments(window: Expr) -> Expr {
    let kept = window.and(col("comment").is_not_null());
    col("comment")
        .filter(kept.clone())
        .sort_by(
            [col("created_at").filter(kept)],
            SortMultipleOptions::default().with_order_descending(true),
        )
        .head(Some(LIST_MAX))
        .str()
        .join(SEPARATOR, true)
        .alias("latest_comments")
}

/// Unique visitors per project and day (approximate distinct counts: never summed across days
/// or pages, and `visitors` can be less than human + AI), beside the day's views and views per
/// visitor.
pub fn visitors_daily(visitors: LazyFrame, views: LazyFrame) -> LazyFrame {
    let on = [col("project"), col("date")];
    visitors
        .select([
            col("project"),
            col("date"),
            col("human").alias("human_visitors"),
            col("ai").alias("ai_visitors"),
            col("total").alias("visitors"),
            col("complete"),
        ])
        .join(
            views.select([
                col("project"),
                col("date"),
                col("human").alias("human_views"),
                col("ai").alias("ai_views"),
                col("total").alias("views"),
                col("complete").alias("views_complete"),
            ]),
            on.clone(),
            on,
            JoinArgs::new(JoinType::Left),
        )
        .with_columns([
            share("views", "visitors").alias("views_per_visitor"),
            share("human_views", "human_visitors").alias("human_views_per_visitor"),
            share("ai_views", "ai_visitors").alias("ai_views_per_visitor"),
            col("complete")
                .and(col("views_complete").fill_null(lit(true)))
                .alias("complete"),
        ])
        .select(named(&[
            "project",
            "date",
            "human_visitors",
            "ai_visitors",
            "visitors",
            "human_views",
            "ai_views",
            "views",
            "views_per_visitor",
            "human_views_per_visitor",
            "ai_views_per_visitor",
            "complete",
        ]))
        .sort(["project", "date"], SortMultipleOptions::default())
}

/// Assistant queries per project and ISO week by caller (counts, additive over days): web,
/// API, other, total, each one's share of the total, and the days of the week exported.
pub fn callers_weekly(callers: LazyFrame) -> LazyFrame {
    super::by_iso_week(
        callers,
        vec![
            col("web").sum(),
            col("api").sum(),
            col("other").sum(),
            col("total").sum(),
            col("complete").all(true),
        ],
    )
    .with_columns([
        col("complete")
            .and(col("days").eq(lit(7i64)))
            .alias("complete"),
        share("web", "total").alias("web_share"),
        share("api", "total").alias("api_share"),
        share("other", "total").alias("other_share"),
    ])
    .select(named(&[
        "project",
        "iso_year",
        "iso_week",
        "week_start",
        "days",
        "web",
        "api",
        "other",
        "total",
        "web_share",
        "api_share",
        "other_share",
        "complete",
    ]))
    .sort(["project", "week_start"], SortMultipleOptions::default())
}

/// Every gap table of an output folder (empty tables for datasets never exported).
/// `partial`: the days not complete ([`super::partial_days`]): the windows leave them out, the
/// daily tables mark them `complete = false`.
pub fn compute(
    out: &Path,
    sel: &super::Selection,
    partial: &DataFrame,
) -> Result<Gaps, TrendsError> {
    compute_in(Some(out), sel, partial)
}

/// The gap tables of an output folder with nothing exported: no rows, the real columns.
pub fn empty() -> Result<Gaps, TrendsError> {
    compute_in(
        None,
        &super::Selection::default(),
        &super::no_partial_days(),
    )
}

/// The dataset whose `day_status` says whether a table's day is complete: the one that writes
/// it (the leading dataset's for a table none writes).
fn dataset_of(table: &str) -> &'static str {
    tables::by_name(table)
        .and_then(|t| t.dataset())
        .unwrap_or(datasets::LEADING)
}

/// The dataset whose final days a trend table's days are: its first source's (the base
/// tables': `site_totals`').
pub fn dataset_of_trend(trend: &str) -> &'static str {
    dataset_of(match trend {
        name::SEARCH_TERMS | name::SEARCH_DAILY => name::SEARCHES,
        name::ASSISTANT_DAILY | name::ASSISTANT_CATEGORIES | name::UNANSWERED_QUESTIONS => {
            name::ASSISTANT_TURNS
        }
        name::FEEDBACK_PAGES => name::FEEDBACK,
        name::VISITORS_DAILY => name::SITE_VISITORS,
        name::CALLERS_WEEKLY => name::ASSISTANT_CALLERS,
        name::AGENT_PAGE_READS => name::AGENT_PAGES,
        name::AI_OPERATORS_DAILY => name::AGENT_DAILY,
        _ => name::SITE_TOTALS,
    })
}

/// The tables a gap table is computed from, by name in the output folder.
pub(crate) const SOURCES: [&str; 10] = [
    name::SEARCHES,
    name::SEARCH_TOTALS,
    name::ASSISTANT_TURNS,
    name::FEEDBACK,
    name::SITE_VISITORS,
    name::SITE_TOTALS,
    name::ASSISTANT_CALLERS,
    name::AGENT_DAILY,
    name::AGENT_PAGES,
    name::AI_REFERRALS,
];

/// The gap table `name`'s query over its sources (`rows` gives a source table's rows, with
/// `complete`): one table alone, as an agent job's impact reads it. The trends compute them all
/// in [`compute_in`], where two or three tables share a source's read.
fn query(name: &str, rows: &Rows<'_>) -> Result<LazyFrame, TrendsError> {
    // A table over the last days reads only them: `recent` prunes the older partitions.
    let last = |table: &str, within: i32| {
        let rows = whole(rows(table)?);
        Ok::<_, TrendsError>(recent(rows.clone(), rows, within)?)
    };
    Ok(match name {
        name::SEARCH_TERMS => {
            let totals = whole(rows(name::SEARCH_TOTALS)?);
            search_terms(
                recent(whole(rows(name::SEARCHES)?), totals.clone(), 28)?,
                recent(totals.clone(), totals, 28)?,
            )?
        }
        name::SEARCH_DAILY => search_daily(rows(name::SEARCHES)?, rows(name::SEARCH_TOTALS)?),
        name::ASSISTANT_DAILY => assistant_daily(rows(name::ASSISTANT_TURNS)?),
        name::ASSISTANT_CATEGORIES => assistant_categories(rows(name::ASSISTANT_TURNS)?),
        name::UNANSWERED_QUESTIONS => unanswered_questions(last(name::ASSISTANT_TURNS, 7)?)?,
        name::FEEDBACK_PAGES => feedback_pages(last(name::FEEDBACK, 56)?)?,
        name::VISITORS_DAILY => {
            visitors_daily(rows(name::SITE_VISITORS)?, rows(name::SITE_TOTALS)?)
        }
        name::CALLERS_WEEKLY => callers_weekly(rows(name::ASSISTANT_CALLERS)?),
        name::AGENT_PAGE_READS => {
            super::reading::agent_page_reads(rows(name::AGENT_PAGES)?, rows(name::AGENT_DAILY)?)
        }
        name::AI_OPERATORS_DAILY => {
            super::reading::ai_operators_daily(rows(name::AGENT_DAILY)?, rows(name::AI_REFERRALS)?)?
        }
        other => {
            return Err(
                PolarsError::ComputeError(format!("{other} is not a gap table").into()).into(),
            );
        }
    })
}

/// `rows` from `within` days before the earliest of the projects' last days in `days` (a frame
/// with `project` and `date`): the days a window of `within` days to each project's last day
/// can reach (its query keeps each project's own), so that a scan reads no older partition.
fn recent(rows: LazyFrame, days: LazyFrame, within: i32) -> PolarsResult<LazyFrame> {
    let last = super::last_day(days).collect()?;
    let earliest = last
        .column("last_day")?
        .cast(&DataType::Int32)?
        .i32()?
        .min();
    Ok(match earliest {
        Some(day) => rows.filter(
            col("date").gt_eq(
                lit(day - (within - 1))
                    .cast(DataType::Int32)
                    .cast(DataType::Date),
            ),
        ),
        None => rows,
    })
}

/// A source table's rows, marked `complete` or not.
fn completed_source(
    out: Option<&Path>,
    table: &str,
    sel: &super::Selection,
    partial: &DataFrame,
) -> Result<LazyFrame, TrendsError> {
    Ok(super::completed(
        source(out, table, sel)?,
        partial,
        dataset_of(table),
    ))
}

/// One gap table of an output folder, computed from its own sources alone (what an agent
/// job's impact measures).
pub fn table(
    out: &Path,
    name: &str,
    sel: &super::Selection,
    partial: &DataFrame,
) -> Result<DataFrame, TrendsError> {
    // Only the sources the query reads are scanned.
    let rows = |t: &str| completed_source(Some(out), t, sel, partial);
    Ok(query(name, &rows)?.collect()?)
}

fn compute_in(
    out: Option<&Path>,
    sel: &super::Selection,
    partial: &DataFrame,
) -> Result<Gaps, TrendsError> {
    // Each source table is scanned once for the tables over every day (only the columns they
    // read), and the tables over the last days scan only those days' partitions (`recent`),
    // their last day taken from what is already read; one side after the other. The memory is
    // a source's few columns at a time, not every source whole at once (a million turns and a
    // million search terms held together took 1 GiB; `cargo bench --bench trends_scale`).
    let lazy = |t: &str| completed_source(out, t, sel, partial);
    let [search_terms, search_daily, feedback_pages, callers_weekly] = searches_side(&lazy)?;
    let [
        assistant_daily,
        assistant_categories,
        unanswered_questions,
        visitors_daily,
        agent_page_reads,
        ai_operators_daily,
    ] = turns_side(&lazy)?;
    Ok(Gaps {
        search_terms,
        search_daily,
        assistant_daily,
        assistant_categories,
        unanswered_questions,
        feedback_pages,
        visitors_daily,
        callers_weekly,
        agent_page_reads,
        ai_operators_daily,
    })
}

/// A source table's rows as [`completed_source`] gives them.
type Rows<'a> = dyn Fn(&str) -> Result<LazyFrame, TrendsError> + 'a;

/// The rows of complete days.
fn whole(rows: LazyFrame) -> LazyFrame {
    rows.filter(col("complete"))
}

/// `search_terms` (the last 28 days' searches), `search_daily`, `feedback_pages` and
/// `callers_weekly`.
fn searches_side(lazy: &Rows<'_>) -> Result<[DataFrame; 4], TrendsError> {
    let totals = lazy(name::SEARCH_TOTALS)?.collect()?.lazy();
    let last_28 = recent(whole(lazy(name::SEARCHES)?), whole(totals.clone()), 28)?;
    Ok([
        search_terms(last_28, whole(totals.clone()))?.collect()?,
        streamed(search_daily(lazy(name::SEARCHES)?, totals))?,
        feedback_pages(whole(lazy(name::FEEDBACK)?))?.collect()?,
        callers_weekly(lazy(name::ASSISTANT_CALLERS)?).collect()?,
    ])
}

/// `assistant_daily`, `assistant_categories` (every turn, a few columns of it),
/// `unanswered_questions` (the last 7 days' turns whole), `visitors_daily` and the stream's
/// two tables.
fn turns_side(lazy: &Rows<'_>) -> Result<[DataFrame; 6], TrendsError> {
    // The turns counted per day and category as they are read (polars' streaming engine: a
    // million turns never held, only their few hundred counts per day), the day's counts from
    // those.
    let categories = streamed(assistant_categories(lazy(name::ASSISTANT_TURNS)?))?;
    let last_7 = recent(
        whole(lazy(name::ASSISTANT_TURNS)?),
        whole(categories.clone().lazy()),
        7,
    )?;
    Ok([
        daily_of_categories(categories.clone().lazy()).collect()?,
        categories,
        unanswered_questions(last_7)?.collect()?,
        visitors_daily(lazy(name::SITE_VISITORS)?, lazy(name::SITE_TOTALS)?).collect()?,
        super::reading::agent_page_reads(lazy(name::AGENT_PAGES)?, lazy(name::AGENT_DAILY)?)
            .collect()?,
        super::reading::ai_operators_daily(lazy(name::AGENT_DAILY)?, lazy(name::AI_REFERRALS)?)?
            .collect()?,
    ])
}

/// `lf` collected by polars' streaming engine: a source read a part at a time, never whole
/// (for the aggregations over every row of a large source).
fn streamed(lf: LazyFrame) -> PolarsResult<DataFrame> {
    // A query of one sink (a lazy frame's) gives one frame: `unwrap_single` cannot fail here.
    Ok(lf.collect_with_engine(Engine::Streaming)?.unwrap_single())
}

/// A cell as text for the terminal (strings escaped onto one line, floats to 1 decimal).
fn text(df: &DataFrame, column: &str, i: usize) -> String {
    match df.column(column).and_then(|c| c.get(i)) {
        Ok(AnyValue::String(s)) => docpipe_catalog::text::one_line(s).into_owned(),
        Ok(AnyValue::StringOwned(s)) => docpipe_catalog::text::one_line(s.as_str()).into_owned(),
        Ok(AnyValue::Float64(x)) => format!("{x:.1}"),
        Ok(AnyValue::Null) | Err(_) => "n/a".into(),
        Ok(v) => v.to_string(),
    }
}

fn number(df: &DataFrame, column: &str, i: usize) -> Option<f64> {
    df.column(column)
        .and_then(|c| c.get(i))
        .ok()
        .and_then(|v| v.extract::<f64>())
}

/// The rows of `df` of a project, in the frame's order.
fn rows_of(df: &DataFrame, project: &str) -> Vec<usize> {
    let Ok(p) = df.column("project").and_then(|c| c.str().cloned()) else {
        return Vec::new();
    };
    (0..df.height())
        .filter(|i| p.get(*i) == Some(project))
        .collect()
}

/// The rows of a daily table for a project whose day is complete, in order.
fn complete_rows_of(df: &DataFrame, project: &str) -> Vec<usize> {
    let complete = df.column("complete").and_then(|c| c.bool().cloned()).ok();
    rows_of(df, project)
        .into_iter()
        .filter(|i| complete.as_ref().is_none_or(|c| c.get(*i).unwrap_or(true)))
        .collect()
}

/// A gap table's first rows for a project, as text.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TopRows {
    /// The table (`search_terms`, `unanswered_questions`, `feedback_pages`).
    pub table: &'static str,
    /// What its rows say.
    pub title: &'static str,
    /// The columns shown.
    pub columns: Vec<&'static str>,
    /// The rows, best first.
    pub rows: Vec<Vec<String>>,
}

/// The gaps the status shows: per table, the rank column that orders its rows (none: the
/// table's order) and the columns shown.
const TOP: [(&str, &str, Option<&str>, [&str; 3]); 3] = [
    (
        name::SEARCH_TERMS,
        "searches without a click (7 days)",
        Some("gap_rank_7d"),
        ["search_query", "hits_7d", "est_unclicked_7d"],
    ),
    (
        name::UNANSWERED_QUESTIONS,
        "questions the assistant could not answer (7 days)",
        None,
        ["latest_wording", "asks", "cited_pages"],
    ),
    (
        name::FEEDBACK_PAGES,
        "pages with the most thumbs down (28 days)",
        Some("down_rank_28d"),
        ["path", "down_28d", "votes_28d"],
    ),
];

/// Per project, the first `n` rows of the gap tables `docpipe trends` last wrote in
/// `trends/` (a table not written, or not readable, is left out).
pub fn top_rows(out: &Path, n: usize) -> std::collections::BTreeMap<String, Vec<TopRows>> {
    let mut by_project: std::collections::BTreeMap<String, Vec<TopRows>> = Default::default();
    for (table, title, rank, columns) in TOP {
        let path = out.join("trends").join(format!("{table}.parquet"));
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        let Ok(df) = ParquetReader::new(file).finish() else {
            continue;
        };
        let Ok(p) = df.column("project").and_then(|c| c.str().cloned()) else {
            continue;
        };
        let projects: std::collections::BTreeSet<&str> = p.iter().flatten().collect();
        for project in projects {
            let project = project.to_string();
            let mut rows = rows_of(&df, &project);
            if let Some(rank) = rank {
                rows.retain(|i| number(&df, rank, *i).is_some());
                rows.sort_by(|a, b| {
                    number(&df, rank, *a)
                        .partial_cmp(&number(&df, rank, *b))
                        .unwrap_or(std::cmp::Ordering::Equal)
                });
            }
            if rows.is_empty() {
                continue;
            }
            let rows = rows
                .into_iter()
                .take(n)
                .map(|i| columns.iter().map(|c| text(&df, c, i)).collect())
                .collect();
            by_project.entry(project).or_default().push(TopRows {
                table,
                title,
                columns: columns.to_vec(),
                rows,
            });
        }
    }
    by_project
}

/// The terminal summary of the gap tables: a short section per dataset and project.
#[expect(clippy::too_many_lines)]
pub fn describe(g: &Gaps) -> String {
    let mut projects = std::collections::BTreeSet::new();
    for (_, df) in g.frames() {
        if let Ok(p) = df.column("project").and_then(|c| c.str().cloned()) {
            projects.extend(p.iter().flatten().map(str::to_string));
        }
    }
    let mut out = String::new();
    if projects.is_empty() {
        return out;
    }
    out += "docs gaps and the other datasets:\n";
    for p in &projects {
        let t = &g.search_terms;
        let terms = rows_of(t, p);
        let days = complete_rows_of(&g.search_daily, p);
        if let Some(&last) = days.last() {
            let recent: Vec<usize> = days.iter().rev().take(7).copied().collect();
            let sum = |c: &str| -> f64 {
                recent
                    .iter()
                    .filter_map(|i| number(&g.search_daily, c, *i))
                    .sum()
            };
            let (searches, clicks) = (sum("searches"), sum("est_clicks"));
            out += &format!(
                "  {p} searches (7 days to {}): {searches:.0} searches, click-through {}",
                text(&g.search_daily, "date", last),
                pct((searches > 0.0).then(|| clicks / searches))
            );
            let new = terms
                .iter()
                .filter(|i| {
                    matches!(
                        t.column("new_this_week").and_then(|c| c.get(**i)),
                        Ok(AnyValue::Boolean(true))
                    )
                })
                .count();
            out += &format!(", {new} new terms this week\n");
            for &i in terms
                .iter()
                .filter(|i| number(t, "gap_rank_7d", **i).is_some())
                .take(3)
            {
                out += &format!(
                    "      search gap: \"{}\" {} searches, {} without a click\n",
                    text(t, "search_query", i),
                    text(t, "hits_7d", i),
                    number(t, "est_unclicked_7d", i).map_or("n/a".into(), |v| format!("{v:.0}"))
                );
            }
        }
        let a = &g.assistant_daily;
        let days = complete_rows_of(a, p);
        if !days.is_empty() {
            let recent: Vec<usize> = days.iter().rev().take(7).copied().collect();
            let sum = |c: &str| -> f64 { recent.iter().filter_map(|i| number(a, c, *i)).sum() };
            let turns = sum("turns");
            let share = |c: &str| pct((turns > 0.0).then(|| sum(c) / turns));
            out += &format!(
                "  {p} assistant (last 7 days with turns): {turns:.0} turns, {} unanswered, {} clarifying questions\n",
                share("unanswered"),
                share("clarifying")
            );
            let q = &g.unanswered_questions;
            for &i in rows_of(q, p).iter().take(3) {
                out += &format!(
                    "      unanswered: \"{}\" asked {} times\n",
                    text(q, "latest_wording", i),
                    text(q, "asks", i)
                );
            }
        }
        let f = &g.feedback_pages;
        let pages: Vec<usize> = rows_of(f, p)
            .into_iter()
            .filter(|i| number(f, "down_rank_28d", *i).is_some())
            .take(3)
            .collect();
        if !pages.is_empty() {
            let listed: Vec<String> = pages
                .iter()
                .map(|&i| {
                    format!(
                        "{} {} of {} votes",
                        text(f, "path", i),
                        text(f, "down_28d", i),
                        text(f, "votes_28d", i)
                    )
                })
                .collect();
            out += &format!(
                "  {p} feedback (28 days): most thumbs down: {}\n",
                listed.join(", ")
            );
        }
        let v = &g.visitors_daily;
        if let Some(&i) = complete_rows_of(v, p).last() {
            out += &format!(
                "  {p} visitors ({}): {} human, {} AI (unique, never summed across days); {} views per visitor\n",
                text(v, "date", i),
                text(v, "human_visitors", i),
                text(v, "ai_visitors", i),
                number(v, "views_per_visitor", i).map_or("n/a".into(), |x| format!("{x:.2}"))
            );
        }
        let c = &g.callers_weekly;
        if let Some(&i) = rows_of(c, p).last() {
            out += &format!(
                "  {p} assistant callers (week of {}, {} days): web {}, API {}, other {}\n",
                text(c, "week_start", i),
                text(c, "days", i),
                pct(number(c, "web_share", i)),
                pct(number(c, "api_share", i)),
                pct(number(c, "other_share", i))
            );
        }
    }
    out
}
