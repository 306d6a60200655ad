//! What page views bring to the window path (their [`Walk`]): their page (rows in columns, read by their own
//! fast reader), kept in the walk journal; offset paging and its guards; the checks of a day
//! (pages contiguous, a path once, rows that sum to the totals); a persistent mismatch written
//! with a doubt rather than refused; and their partitions (`page_views`, `site_totals`, the
//! rows set aside in `rejects/`).

use super::{self as page_views, PAGE_VIEWS, StoredPage};
use crate::api::Client;
use crate::api::analytics::At;
use crate::api::error::{ApiError, ErrorKind, Operation};
use crate::api::views::{self, Counts, PAGE_LIMIT, Rows};
use crate::calendar::Window;
use crate::dataset::parquet as pq;
use crate::dataset::walk::{ExportError, FirstPage, Sink, Walk, WindowOutcome};
use crate::store::{WalkKey, WrittenWindow};
use chrono::{DateTime, Utc};
use std::borrow::Cow;

/// What a probe compares for page views: the day's totals.
fn view_fingerprint(t: &Counts) -> String {
    format!("{}/{}/{}", t.human, t.ai, t.total)
}

/// The walk of a page-view day.
pub struct ViewWalk {
    /// The day, as the page store keys its pages.
    pub key: WalkKey,
    /// The day, as the service is asked for it.
    pub window: Window,
    /// Whether the day is final once written (past the lateness allowance).
    pub becomes_final: bool,
}

impl Walk for ViewWalk {
    type Page = StoredPage;

    fn key(&self) -> &WalkKey {
        &self.key
    }

    fn keep<'p>(&self, page: &'p StoredPage, _body: &'p [u8]) -> Cow<'p, [u8]> {
        Cow::Owned(page.keep())
    }

    fn unkeep(&self, kept: &[u8]) -> Option<StoredPage> {
        StoredPage::unkeep(kept)
    }

    fn next(&self, pages: &[StoredPage]) -> Result<Option<At>, String> {
        let zero_rows = || pages.iter().map(|p| views::zero_rows(&p.page)).sum();
        let (first, last) = (pages.first(), pages.last());
        let rows = pages
            .iter()
            .map(|p| (p.page.views.len() + p.page.rejects.len()) as u64)
            .sum();
        views::next_offset(
            pages.len(),
            rows,
            first.map(|p| &p.page),
            last.map(|p| &p.page),
            zero_rows,
        )
        .map(|o| o.map(At::Offset))
    }

    async fn fetch(&self, client: &Client, at: &At) -> Result<(StoredPage, Vec<u8>), ExportError> {
        let offset = match at {
            At::Offset(o) => *o,
            _ => 0,
        };
        let page = client
            .page_views(&self.key.project, self.window, PAGE_LIMIT, offset)
            .await?;
        Ok((StoredPage { offset, page }, Vec::new()))
    }

    fn glance(&self, first: &StoredPage) -> FirstPage {
        FirstPage {
            rows: first.page.views.len(),
            more: first.page.has_more,
            differs: self.next(std::slice::from_ref(first)).err(),
            thread: None,
        }
    }

    fn hash(&self, page: &StoredPage) -> Option<u64> {
        (!page.page.views.is_empty()).then(|| views::rows_hash(&page.page.views))
    }

    fn astray(&self, detail: String) -> ExportError {
        ApiError {
            operation: Operation::PageViews,
            target: format!(
                "project {} ({} to {})",
                self.key.project, self.window.from, self.window.to
            ),
            kind: ErrorKind::Paging(detail),
        }
        .into()
    }

    fn fingerprint(&self, first: &StoredPage) -> Option<String> {
        // A day with rows set aside is walked again, never left as stored.
        let totals = first
            .page
            .totals
            .filter(|_| first.page.rejects.is_empty())?;
        Some(view_fingerprint(&totals))
    }

    fn settle(&self, sink: &Sink<'_>, first: &StoredPage) -> Result<(), ExportError> {
        let (project, day) = (&self.key.project, self.key.from);
        // Settled only when its fingerprint, made of its totals, matched.
        let Some(totals) = first.page.totals else {
            return Ok(());
        };
        let rows = sink.store.finalize_day(PAGE_VIEWS, project, day)?;
        let unlisted = page_views::unlisted_of_partition(sink.out, project, day, totals.total);
        let site = page_views::SiteTotals {
            totals,
            rows,
            unlisted,
            is_final: true,
        };
        let site = page_views::write_site_totals(sink.out, project, day, &site, sink.now())?;
        pq::commit(site)?;
        Ok(())
    }

    fn check(
        &mut self,
        _sink: &Sink<'_>,
        pages: &mut Vec<StoredPage>,
    ) -> Result<Result<(), String>, ExportError> {
        Ok(page_views::check(pages))
    }

    fn doubt(&self, mismatch: String) -> Result<String, ExportError> {
        Ok(mismatch)
    }

    fn write(
        &mut self,
        sink: &Sink<'_>,
        pages: Vec<StoredPage>,
        mismatch: Option<String>,
        requests: u64,
    ) -> Result<WindowOutcome, ExportError> {
        let (project, day) = (&self.key.project, self.key.from);
        let at: DateTime<Utc> = sink.now();
        let mut rows: Vec<&Rows> = pages.iter().map(|p| &p.page.views).collect();
        // A path appears once in the output, whatever the service sent (the check found it,
        // so only a window with a mismatch can have one twice).
        let deduplicated = mismatch
            .as_ref()
            .and_then(|_| page_views::first_of_each_path(&rows));
        if let Some(d) = &deduplicated {
            rows = vec![d];
        }
        let rejects: Vec<(u64, &crate::api::views::Reject)> = pages
            .iter()
            .flat_map(|p| p.page.rejects.iter().map(|r| (p.offset, r)))
            .collect();
        // The first page's totals stand (the walk refused a first page without them).
        let totals = pages
            .first()
            .and_then(|p| p.page.totals)
            .unwrap_or_default();
        // A day with rows set aside stays provisional: fetched again on the next run.
        let is_final = self.becomes_final && mismatch.is_none() && rejects.is_empty();
        let n = rows.iter().map(|r| r.len() as i64).sum();
        let unlisted = page_views::unlisted(&pages, &rows);
        let site = page_views::SiteTotals {
            totals,
            rows: n,
            unlisted: Some(unlisted),
            is_final,
        };
        write_day(sink, (project, day), &rows, &rejects, &site, at)?;
        sink.crash.hit("before state commit");
        sink.store.finish(&WrittenWindow {
            dataset: PAGE_VIEWS,
            project: project.clone(),
            day,
            is_final,
            rows: n,
            totals,
            requests,
            mismatch: mismatch.clone(),
            at,
        })?;
        // A day written with a doubt (a mismatch, rows set aside) is walked, not probed, next.
        let clean = mismatch.is_none() && rejects.is_empty();
        let fingerprint = view_fingerprint(&totals);
        sink.store.looked(
            PAGE_VIEWS,
            project,
            day,
            clean.then_some(fingerprint.as_str()),
            at,
        )?;
        Ok(WindowOutcome {
            rows: n,
            requests,
            is_final,
            totals,
            mismatch,
            rejected: rejects.len() as u64,
            unlisted,
            ..WindowOutcome::of(PAGE_VIEWS, project, (day, self.key.to))
        })
    }
}

/// Writes a day's partitions (its rows set aside, its page views, its site totals), each to
/// a temporary file, then renames them into place.
fn write_day(
    sink: &Sink<'_>,
    (project, day): (&str, chrono::NaiveDate),
    rows: &[&Rows],
    rejects: &[(u64, &crate::api::views::Reject)],
    site: &page_views::SiteTotals,
    at: DateTime<Utc>,
) -> Result<(), ExportError> {
    let out = sink.out;
    let set_aside = if rejects.is_empty() {
        page_views::remove_rejects(out, project, day)?;
        None
    } else {
        Some(page_views::write_rejects(out, project, day, rejects, at)?)
    };
    let views = page_views::write_page_views(out, project, day, rows, at)?;
    let site = match page_views::write_site_totals(out, project, day, site, at) {
        Ok(s) => s,
        Err(e) => {
            views.abandon();
            return Err(e.into());
        }
    };
    sink.crash.hit("before rename");
    if let Some(r) = set_aside {
        pq::commit(r)?;
    }
    pq::commit(views)?;
    pq::commit(site)?;
    Ok(())
}
