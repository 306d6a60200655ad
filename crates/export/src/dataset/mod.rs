//! The datasets docpipe exports, one file each: what the service calls it, how it pages, how
//! its windows are cut, the tables it writes and their schemas. The exporter plans and walks
//! windows; a dataset's file says what a window holds and how it becomes record batches.
//!
//! A new dataset is a [`shape::Shape`] descriptor in `analytics.rs` (its columns, key, paging,
//! windowing and tables: `shape.rs` decodes its pages and builds its batches) added to [`ALL`],
//! the one registry; page views (`page_views/`) are the one dataset with a decoder, a walk
//! and batches of their own. `walk.rs` is what every dataset brings to the window path.

pub mod analytics;
pub mod page_views;
pub mod probe;
pub mod shape;
pub mod shape_walk;
mod span;
pub mod walk;
pub mod writes;

// The Parquet writer and the derived tables' writer: the write crate's.
pub use docpipe_write::{derived, parquet};
pub use page_views::ViewWalk;
pub use shape_walk::ShapeWalk;

use crate::store::{Store, StoreError};
use arrow_schema::SchemaRef;
use chrono::NaiveDate;
use std::path::Path;

pub use docpipe_catalog::datasets::LEADING;

/// The leading dataset's windows as the plan's and the summary's first lines name them.
pub const LEADING_NOUN: &str = "page-view";

/// The walk a dataset's windows take.
#[derive(Debug, Clone, Copy)]
pub enum Walker {
    /// Page views' own, with their column reader ([`ViewWalk`]).
    Views,
    /// The generic walk of a dataset its [`shape::Shape`] describes ([`ShapeWalk`]).
    Shaped(&'static shape::Shape),
}

/// How a dataset's pages follow each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    /// `offset` and `limit` query parameters, `hasMore` in each page.
    Offset {
        /// The largest page the service serves.
        limit: u32,
    },
    /// `cursor` and `limit` query parameters, `nextCursor` in each page (null at the end).
    Cursor {
        /// The largest page the service serves.
        limit: u32,
        /// Whether pages also say `hasMore`.
        has_more: bool,
    },
    /// One page of at most `limit` rows: `hasMore` says there were more, but nothing fetches
    /// them.
    Capped {
        /// The largest page the service serves.
        limit: u32,
    },
    /// One response holds everything.
    Single,
}

impl Paging {
    /// The `limit` docpipe sends (the service's largest), if the operation takes one.
    pub fn limit(self) -> Option<u32> {
        match self {
            Paging::Offset { limit } | Paging::Cursor { limit, .. } | Paging::Capped { limit } => {
                Some(limit)
            }
            Paging::Single => None,
        }
    }
}

/// How the planner estimates the requests of a dataset's next window, from the windows written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimate {
    /// The most requests of its latest 7 windows (probes, pages, retries).
    MostRequests,
    /// The pages its latest window's rows fill at its paging's limit: for a dataset whose
    /// probes mostly find nothing to walk, so that its requests say little about a walk.
    Pages,
}

/// What a window of `dataset` and `project` is expected to take, at least one request, as the
/// dataset estimates it (see [`Estimate`]): the pages of its latest window's rows (the fewest a
/// walk takes), or the most requests one of its latest 7 windows took (retries included).
pub fn window_cost(store: &Store, dataset: &dyn Dataset, project: &str) -> Result<u64, StoreError> {
    let name = dataset.name();
    if let (Estimate::Pages, Some(limit)) = (dataset.estimate(), dataset.paging().limit()) {
        let rows = store.latest_rows(name, project)?;
        return Ok(rows.map_or(1, |rows| {
            (rows.max(1) as u64).div_ceil(u64::from(limit.max(1)))
        }));
    }
    let most = store.most_requests(name, project)?;
    Ok(most.map_or(1, |n| n.max(1) as u64))
}

/// How a dataset's data is cut into windows to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Windowing {
    /// One window per project and day (in the export's time zone); a day is re-fetched until
    /// it is past the lateness allowance, then final.
    Daily,
    /// Records by the day of one of their instants: one walk per run over the days from the
    /// last fetched one, less `recheck_days` (records change or arrive late), to today; the
    /// days walked are replaced.
    Span {
        /// Days fetched again on every run, unless the config says otherwise.
        recheck_days: u32,
    },
    /// One request per record, on demand (assistant threads).
    OnDemand,
}

pub use docpipe_catalog::tables::Key;

/// One table a dataset writes.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// Its folder in the output folder.
    pub name: &'static str,
    /// Its columns (the partition keys are not among them).
    pub schema: fn() -> SchemaRef,
    /// Its partition keys.
    pub partition: &'static [Key],
}

/// What describes a dataset.
pub trait Dataset: Send + Sync + std::fmt::Debug {
    /// The name in the config and the state.
    fn name(&self) -> &'static str;
    /// The service's path, with `{project}` for the project id.
    fn endpoint(&self) -> &'static str;
    /// How its pages follow each other.
    fn paging(&self) -> Paging;
    /// How its windows are cut.
    fn windowing(&self) -> Windowing;
    /// The tables it writes.
    fn tables(&self) -> &'static [Table];
    /// Whether a project exports it when the config does not list its datasets.
    fn by_default(&self) -> bool {
        true
    }
    /// The walk its windows take.
    fn walker(&'static self) -> Walker;
    /// Its descriptor for the generic walk; `None` for page views, whose page is their own
    /// (their fast column reader: [`ViewWalk`]).
    fn shape(&'static self) -> Option<&'static shape::Shape> {
        match self.walker() {
            Walker::Shaped(shape) => Some(shape),
            Walker::Views => None,
        }
    }
    /// Whether its errors name it (its own operation), so that a failure of one of its days
    /// needs no label: page views.
    fn names_itself(&self) -> bool {
        false
    }
    /// Whether its counts may come with a fraction: rounded in its dated tables, kept as sent
    /// in a companion table each (`<table>_fractions`). Page views set such rows aside in
    /// `rejects/` instead.
    fn rounds_fractions(&self) -> bool {
        false
    }
    /// How the planner estimates a window's requests (measured by the freshness bench: page
    /// views by their pages, the others by their requests, which gave the fresher data).
    fn estimate(&self) -> Estimate {
        Estimate::MostRequests
    }
    /// The days whose files are in place (a written day whose partition was deleted is
    /// fetched again): its first table's partitions, by default. One listing a table, not a
    /// look a day: the plan (and each `status`) goes over every day of every stream.
    fn written_days(&self, root: &Path, project: &str) -> std::collections::HashSet<NaiveDate> {
        self.tables()
            .first()
            .map(|t| crate::layout::partition_days(root, t.name, project))
            .unwrap_or_default()
    }
}

/// Every dataset docpipe exports, in export order.
pub static ALL: &[&dyn Dataset] = &[
    &page_views::PageViews,
    &analytics::VISITORS,
    &analytics::SEARCHES,
    &analytics::FEEDBACK,
    &analytics::FEEDBACK_BY_PAGE,
    &analytics::ASSISTANT,
    &analytics::CALLER_STATS,
    &analytics::THREADS,
];

/// The dataset that writes table `name`.
pub fn of_table(name: &str) -> Option<&'static dyn Dataset> {
    ALL.iter()
        .find(|d| d.tables().iter().any(|t| t.name == name))
        .copied()
}

/// A dataset's place in export order (`ALL`); an unknown name goes last.
pub fn order(name: &str) -> usize {
    ALL.iter()
        .position(|d| d.name() == name)
        .unwrap_or(ALL.len())
}

/// A dataset by its name.
pub fn by_name(name: &str) -> Option<&'static dyn Dataset> {
    ALL.iter().copied().find(|d| d.name() == name)
}

/// A generic dataset's descriptor by its name.
pub fn shape_by_name(name: &str) -> Option<&'static shape::Shape> {
    by_name(name).and_then(|d| d.shape())
}

/// How a dataset's windows are cut, by its name (one not known: by the day).
pub fn windowing_of(name: &str) -> Windowing {
    by_name(name).map_or(Windowing::Daily, |d| d.windowing())
}

/// A table any dataset writes, by its name.
pub fn table(name: &str) -> Option<&'static Table> {
    ALL.iter().flat_map(|d| d.tables()).find(|t| t.name == name)
}

/// The names of the datasets exported when the config does not say.
pub fn default_names() -> Vec<&'static str> {
    ALL.iter()
        .filter(|d| d.by_default())
        .map(|d| d.name())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dataset_has_a_unique_name_and_table_names() {
        let mut names: Vec<&str> = ALL.iter().map(|d| d.name()).collect();
        names.sort();
        let mut tables: Vec<&str> = ALL
            .iter()
            .flat_map(|d| d.tables().iter().map(|t| t.name))
            .collect();
        let (n, t) = (names.len(), tables.len());
        names.dedup();
        tables.sort();
        tables.dedup();
        assert_eq!((names.len(), tables.len()), (n, t));
        let pv = by_name("page_views").unwrap();
        assert_eq!(pv.endpoint(), "/v1/analytics/{project}/views");
        assert_eq!(pv.paging(), Paging::Offset { limit: 250 });
        assert_eq!(
            pv.tables().iter().map(|t| t.name).collect::<Vec<_>>(),
            ["page_views", "site_totals", "rejects"]
        );
        assert_eq!((pv.tables()[0].schema)().fields().len(), 5);
        assert_eq!(
            default_names(),
            [
                "page_views",
                "visitors",
                "searches",
                "feedback",
                "feedback_by_page",
                "assistant",
                "caller_stats"
            ]
        );
        let turns = (by_name("assistant").unwrap().tables()[0].schema)();
        let names: Vec<&str> = turns.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "id",
                "timestamp",
                "query",
                "response",
                "response_type",
                "sources",
                "resolution_status",
                "query_category",
                "page_url",
                "fetched_at"
            ]
        );
    }
}
