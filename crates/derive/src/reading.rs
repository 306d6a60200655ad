//! The event stream's trend tables: which agents read which pages over the last 7 and 28
//! complete days (`agent_page_reads`), and each AI operator's reads against the readers its
//! products sent (`ai_operators_daily`, the crawl-to-referral ratio).
//!
//! A stream day is complete once a later day has events: objects land in order, so the
//! project's last day in `agent_daily` may still be filling, and every day before it is done
//! (a late object of an earlier day still adds to it, as it would to any export).

use super::share;
use polars::prelude::*;

/// The last complete stream day of each project (`last_day`): the day before its last day
/// with events.
fn last_complete(agent_daily: LazyFrame) -> LazyFrame {
    super::last_day(agent_daily)
        .with_column(super::plus_days(col("last_day"), -1).alias("last_day"))
}

/// Per project, page, agent and surface: the agent's reads of the page over the last 7 and 28
/// complete days of the stream, most read first (`agent_pages` holds no browser's reads).
pub fn agent_page_reads(agent_pages: LazyFrame, agent_daily: LazyFrame) -> LazyFrame {
    let rows = super::aged(agent_pages, last_complete(agent_daily), 28);
    rows.group_by([
        col("project"),
        col("path"),
        col("agent"),
        col("operator"),
        col("class"),
        col("surface"),
    ])
    .agg([
        col("last_day").first(),
        col("events")
            .filter(col("age").lt(lit(7)))
            .sum()
            .cast(DataType::Int64)
            .alias("reads_7d"),
        col("events").sum().cast(DataType::Int64).alias("reads_28d"),
    ])
    .sort_by_exprs(
        [
            col("project"),
            col("reads_28d"),
            col("path"),
            col("agent"),
            col("surface"),
        ],
        SortMultipleOptions::default()
            .with_order_descending_multi([false, true, false, false, false])
            .with_maintain_order(true),
    )
    .select(super::named(&[
        "project",
        "path",
        "agent",
        "operator",
        "class",
        "surface",
        "last_day",
        "reads_7d",
        "reads_28d",
    ]))
}

/// Per project, day and AI operator: the page reads of its agents (every surface, as
/// `agent_daily` counts them), the human page views its products sent (`ai_referrals`), and
/// reads per referred view (null on a day it sent none); `complete` is false on the stream's
/// last day, which may still be filling.
pub fn ai_operators_daily(
    agent_daily: LazyFrame,
    ai_referrals: LazyFrame,
) -> PolarsResult<LazyFrame> {
    let keys = || [col("project"), col("date"), col("operator")];
    let reads = agent_daily
        .clone()
        .filter(
            col("class")
                .neq(lit("human"))
                .and(col("operator").is_not_null()),
        )
        .select([
            col("project"),
            col("date"),
            col("operator"),
            col("events").cast(DataType::Int64).alias("agent_reads"),
            lit(0i64).cast(DataType::Int64).alias("referred_views"),
        ]);
    let sent = ai_referrals.select([
        col("project"),
        col("date"),
        col("operator"),
        lit(0i64).cast(DataType::Int64).alias("agent_reads"),
        col("views").cast(DataType::Int64).alias("referred_views"),
    ]);
    let last = last_complete(agent_daily);
    Ok(concat([reads, sent], UnionArgs::default())?
        .group_by(keys())
        .agg([col("agent_reads").sum(), col("referred_views").sum()])
        .join(
            last,
            [col("project")],
            [col("project")],
            JoinArgs::new(JoinType::Left),
        )
        .with_columns([
            share("agent_reads", "referred_views").alias("reads_per_referral"),
            col("date").lt_eq(col("last_day")).alias("complete"),
        ])
        .sort_by_exprs(
            keys(),
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .select(super::named(&[
            "project",
            "date",
            "operator",
            "agent_reads",
            "referred_views",
            "reads_per_referral",
            "complete",
        ])))
}
