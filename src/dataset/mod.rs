//! The datasets docpipe exports, one file each: what the service calls it, how it pages, how
//! its windows are cut, the tables it writes and their schemas. The exporter plans and walks
//! windows; a dataset's file says what a window holds and how it becomes record batches.
//!
//! A new dataset is a new file here with a [`Dataset`] descriptor added to [`ALL`], plus its
//! page decoder and batch builder (see `page_views.rs` for the shape).

pub mod page_views;
pub mod parquet;

use arrow_schema::SchemaRef;

/// How a dataset's pages follow each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    /// `offset` and `limit` query parameters, `hasMore` in each page.
    Offset {
        /// The largest page the service serves.
        limit: u32,
    },
    /// A cursor from each page passed back in the next request.
    Cursor {
        /// The query parameter that carries it.
        param: &'static str,
        /// The field of the page that holds the next one.
        next_field: &'static str,
    },
    /// One response holds everything.
    Single,
}

/// How a dataset's data is cut into windows to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Windowing {
    /// One window per project and day (in the export's time zone); a day is re-fetched until
    /// it is past the lateness allowance, then final.
    Daily,
    /// New records since the last one fetched.
    Incremental,
    /// The whole state, replaced on each fetch.
    Snapshot,
}

/// A partition key of a table, in path order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `project=<id>`.
    Project,
    /// `date=<YYYY-MM-DD>`.
    Date,
}

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
pub trait Dataset: Send + Sync {
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
}

/// Every dataset docpipe exports.
pub static ALL: &[&dyn Dataset] = &[&page_views::PageViews];

/// A dataset by its name.
pub fn by_name(name: &str) -> Option<&'static dyn Dataset> {
    ALL.iter().copied().find(|d| d.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dataset_has_a_unique_name_and_table_names() {
        let mut names: Vec<&str> = ALL.iter().map(|d| d.name()).collect();
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
    }
}
