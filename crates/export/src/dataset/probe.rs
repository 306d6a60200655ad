//! A dataset's first page, as `docpipe check` probes it: one request at the largest page the
//! service serves, decoded as the export decodes it and checked as a walk's first page is (the
//! totals its tables need; the sums too when it is the only page). Which dataset pages how, and
//! which one gives the id a thread probe reads, is known here, not by the command.

use super::analytics::THREADS;
use super::page_views::PAGE_VIEWS;
use super::shape::{Cell, Page, Shape};
use super::shape_walk::fetch_page;
pub use super::walk::FirstPage;
use super::walk::{ExportError, Walk};
use super::{ShapeWalk, ViewWalk, Walker};
use crate::api::analytics::At;
use crate::api::views::PAGE_LIMIT;
use crate::api::{ApiError, Client, ErrorKind, Operation};
use crate::calendar::{Part, Window};
use crate::store::WalkKey;
use docpipe_catalog::datasets;

/// Whether `dataset` is read a thread at a time (probed with a turn's id, not a window).
pub fn reads_threads(dataset: &str) -> bool {
    dataset == THREADS.name
}

/// The dataset read a thread at a time.
pub fn threads() -> &'static str {
    THREADS.name
}

/// The first page of `dataset`'s window of `project`, as its walk fetches and checks it.
pub async fn first_page(
    client: &Client,
    dataset: &str,
    project: &str,
    window: Window,
) -> Result<FirstPage, ApiError> {
    let Some(d) = super::by_name(dataset) else {
        return Err(ApiError {
            operation: Operation::Analytics("an unknown dataset"),
            target: format!("{dataset} of project {project}"),
            kind: ErrorKind::NotSent {
                message: format!("{dataset} is not a dataset docpipe reads by the window"),
            },
        });
    };
    let walk = WalkKey {
        dataset: d.name(),
        project: project.to_string(),
        from: window.from,
        to: window.to,
    };
    match d.walker() {
        Walker::Views => {
            let w = ViewWalk {
                key: walk,
                window,
                becomes_final: false,
            };
            glance(&w, client).await
        }
        Walker::Shaped(shape) => {
            let w = ShapeWalk {
                shape,
                walk,
                window,
                becomes_final: false,
                settled: None,
                recent: false,
                full: false,
                stagger: chrono::Duration::zero(),
                unanswered: None,
                building: Default::default(),
                index: None,
            };
            glance(&w, client).await
        }
    }
}

/// What a walk's first page shows.
async fn glance<W: Walk>(w: &W, client: &Client) -> Result<FirstPage, ApiError> {
    match w.first_page(client).await {
        Ok((page, _)) => Ok(w.glance(&page)),
        Err(ExportError::Api(e) | ExportError::Bound(e)) => Err(*e),
        Err(e) => Err(ApiError {
            operation: Operation::Analytics("a first page"),
            target: w.key().project.clone(),
            kind: ErrorKind::NotSent {
                message: e.to_string(),
            },
        }),
    }
}

/// The offset-paged dataset compared: page views (their totals add up; visitors' do not).
const OFFSET: &[&str] = &[PAGE_VIEWS];

/// The cursor-paged datasets compared, the first an organization exports: searches (the
/// day's `totalSearches` adds up), else the rows of assistant turns or feedback on one page.
const CURSOR: &[&str] = &[datasets::SEARCHES, datasets::ASSISTANT, datasets::FEEDBACK];

/// The datasets `check --deep` compares by halves of a day, in turn: one offset-paged, then
/// one cursor-paged, the first an organization exports of each list.
pub const HALVES: [&[&str]; 2] = [OFFSET, CURSOR];

/// The count of a window, as `check --deep` compares a day with its halves: what it counts
/// and how many, or why it cannot be compared.
pub async fn count(
    client: &Client,
    project: &str,
    dataset: &str,
    window: Window,
) -> Result<Result<(&'static str, i64), String>, ApiError> {
    if dataset == PAGE_VIEWS {
        let page = client.page_views(project, window, PAGE_LIMIT, 0).await?;
        return Ok(match page.totals {
            Some(t) => Ok(("views", t.total)),
            None => Err(format!(
                "inconclusive: the page views of {} came without totals",
                part_name(window)
            )),
        });
    }
    let Some(shape) = super::shape_by_name(dataset) else {
        return Ok(Err(format!(
            "inconclusive: {dataset} is not a dataset compared by halves"
        )));
    };
    let (page, _) = fetch_page(client, shape, project, window, &At::Start).await?;
    // A total that adds up (the searches' `totalSearches`), else the rows of a page that is
    // the whole window.
    if let Some((_, total)) = shape.sums.first() {
        let at = shape.totals.iter().position(|c| c.name == *total);
        return Ok(match at.and_then(|i| page.totals.get(i)) {
            Some(Cell::Int(n)) => Ok((shape.name, *n)),
            _ => Err(format!(
                "inconclusive: the {} of {} came without {total}",
                shape.name,
                part_name(window)
            )),
        });
    }
    if page.has_more.unwrap_or(page.next_cursor.is_some()) {
        return Ok(Err(format!(
            "inconclusive: {} has more than one page of {} (more than {} rows)",
            part_name(window),
            shape.name,
            limit_of(shape)
        )));
    }
    Ok(Ok(("rows", page.rows.len() as i64)))
}

/// `2026-03-14`, `the first half of 2026-03-14`.
fn part_name(window: Window) -> String {
    match window.part {
        Part::Whole => window.from.to_string(),
        _ => window.describe(),
    }
}

/// The rows of the largest page of a dataset.
fn limit_of(shape: &Shape) -> u32 {
    shape.paging.limit().unwrap_or(0)
}

impl Shape {
    /// What the first page of a walk must have: the totals its table needs; the sums of a walk
    /// of one page too (the sums of a longer walk wait for its last page).
    pub fn check_first_page(&self, page: &Page) -> Result<(), String> {
        let more = page.has_more.unwrap_or(false) || page.next_cursor.is_some();
        if more {
            self.first_totals(page)
        } else {
            self.check_walk(std::slice::from_ref(page))
        }
    }

    /// The first page's totals hold what the totals table needs.
    fn first_totals(&self, first: &Page) -> Result<(), String> {
        match self.missing_total(&first.totals) {
            Some((field, table)) => Err(format!(
                "page 1 has no `{field}`, which the {table} table needs"
            )),
            None => Ok(()),
        }
    }

    /// The checks of a complete walk: the first page's totals hold what the output needs, no
    /// later page's contradict them (a later page may leave some or all out), each key once,
    /// sums (of the totals there are).
    pub fn check_walk(&self, pages: &[Page]) -> Result<(), String> {
        let totals = pages.first().map(|p| p.totals.as_slice()).unwrap_or(&[]);
        if let Some(first) = pages.first() {
            self.first_totals(first)?;
        }
        let differs = |p: &Page| {
            p.totals
                .iter()
                .zip(totals)
                .any(|(a, b)| *a != Cell::Null && *b != Cell::Null && a != b)
        };
        if let Some((i, _)) = pages.iter().enumerate().find(|(_, p)| differs(p)) {
            return Err(format!(
                "the day totals changed during the walk (page {})",
                i + 1
            ));
        }
        let rows: Vec<&[Cell]> = pages
            .iter()
            .flat_map(|p| p.rows.iter().map(Vec::as_slice))
            .collect();
        self.check(&rows, totals)
    }
}
