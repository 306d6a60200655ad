//! The one window path every dataset goes through: a probe when the plan says so, the walk
//! (resumed from the pages an interrupted run stored, each page stored as it comes, behind the
//! guards against a service that leads it astray), the check (the window walked again once
//! on a mismatch), the write and the record. What a dataset brings is its [`Walk`]: its
//! decoded page (page views keep their column reader), how a page is fetched, kept and
//! checked, and the partitions it writes. The run loop in `mod.rs` picks the walk.

use super::{Due, ExportError, Exporter, Probed, Spend, Summary};
use crate::api::Client;
use crate::api::analytics::At;
use crate::api::views::{MAX_EMPTY_RUN, MAX_WALK_PAGES};
use crate::dataset::walk::{Sink, Walk};
use crate::events::Event;
use std::collections::HashMap;

/// The pages an interrupted walk kept, with their hashes for the guards.
type Kept<P> = (Vec<P>, Vec<Option<u64>>);

/// The pages of a walk, or `None` when the window's part of this run was spent first.
type Pages<P> = Option<Vec<P>>;

impl Exporter {
    /// What the walks write through.
    pub(super) fn sink(&self) -> Sink<'_> {
        Sink {
            store: self.state(),
            out: self.output(),
            tz: self.tz,
            clock: &self.clock,
            crash: &self.crash,
        }
    }

    /// One window of any dataset: probed first when the plan says so (as stored: recorded as
    /// looked at, made final when settled; changed: its first page stored), then walked,
    /// checked, written and recorded. A window whose data the service sent astray loses its
    /// stored pages, so that the next run fetches it afresh rather than resume into the same
    /// refusal.
    pub(super) async fn window<W: Walk>(
        &self,
        due: &Due,
        w: &mut W,
        client: &Client,
        spend: &Spend,
        org: &str,
        summary: &mut Summary,
    ) -> Result<(), ExportError> {
        let dataset = due.dataset();
        let label = due.purpose.request_kind();
        // The window's requests in this run: its earlier turns' too.
        let before = client.requests_sent() - due.earlier;
        if due.probe {
            let prober = self.client_for(client, "probe", summary);
            let probed = self.refused(w, self.probe(due, w, &prober).await);
            let p = Probed {
                dataset,
                project: &due.project,
                day: due.day,
                becomes_final: due.becomes_final,
                purpose: due.purpose,
                expected: due.expected_requests,
            };
            if !summary.after_probe(&p, probed?, spend, org) {
                return Ok(());
            }
        }
        let walker = self.client_for(client, label, summary);
        let walked = self.walk_checked(due, w, &walker, before).await;
        let walked = self.refused(w, walked);
        let Some((pages, mismatch)) = walked? else {
            tracing::debug!(dataset, project = %due.project, day = %due.day, "walked in parts: the walk goes on next run");
            summary.paused += 1;
            return Ok(());
        };
        let requests = client.requests_sent() - before;
        let written = w.write(&self.sink(), pages, mismatch, requests);
        let written = self.refused(w, written)?;
        let (rows, rejected) = (written.rows, written.rejected);
        // A day of a dataset whose errors name it is named by its day alone.
        let window = if due.dataset.names_itself() {
            written.day.to_string()
        } else {
            format!("{} {}", written.dataset, written.day)
        };
        self.emit(Event::Written {
            dataset,
            project: &due.project,
            window: &window,
            day: (!due.is_span()).then_some(due.day),
            rows,
            rejected,
            requests,
            run_rows: summary.rows() + summary.other_rows() + rows,
            run_requests: summary.tally.analytics(),
        });
        written.log();
        summary.push(written);
        Ok(())
    }

    /// `result`, the walk's stored pages dropped first when it refuses the service's data.
    fn refused<W: Walk, T>(&self, w: &W, result: Result<T, ExportError>) -> Result<T, ExportError> {
        if let Err(e) = &result
            && e.refuses_data()
        {
            self.forget(w)?;
        }
        result
    }

    /// The pages an interrupted walk kept, in order, read one at a time (none: the walk starts
    /// afresh; so do the pages another version of docpipe kept), with their hashes for the
    /// guards (taken before the walk sheds what it does not keep in memory).
    fn stored<W: Walk>(&self, w: &W) -> Result<Kept<W::Page>, ExportError> {
        let (mut pages, mut hashes) = (Vec::new(), Vec::new());
        let read = self.state().each_page(w.key(), |kept| {
            let mut p = w.unkeep(kept).ok_or(Unkept::Foreign)?;
            hashes.push(w.hash(&p));
            w.shed(pages.len(), &mut p);
            pages.push(p);
            Ok(())
        });
        match read {
            Ok(()) => {}
            Err(Unkept::Foreign) => {
                self.forget(w)?;
                return Ok((Vec::new(), Vec::new()));
            }
            Err(Unkept::Store(e)) => return Err(e.into()),
        }
        Ok((pages, hashes))
    }

    /// Keeps page `n` of the walk (page 0 starts it afresh), with whether it ends the walk.
    fn store<W: Walk>(
        &self,
        w: &W,
        n: usize,
        page: &W::Page,
        body: &[u8],
    ) -> Result<(), ExportError> {
        let last = matches!(w.next(std::slice::from_ref(page)), Ok(None));
        self.state()
            .put_page(w.key(), n as u64, last, &w.keep(page, body))?;
        Ok(())
    }

    /// Drops the walk's kept pages.
    fn forget<W: Walk>(&self, w: &W) -> Result<(), ExportError> {
        Ok(self.state().drop_pages(w.key())?)
    }

    /// Fetches a day's first page and compares its fingerprint with the stored one: `None`
    /// when equal (the day stands: recorded as looked at, and final when settled); otherwise
    /// the page is stored as the walk's first and whether the walk is complete is returned.
    async fn probe<W: Walk>(
        &self,
        due: &Due,
        w: &W,
        client: &Client,
    ) -> Result<Option<bool>, ExportError> {
        let (page, body) = w.first_page(client).await?;
        let fingerprint = w.fingerprint(&page);
        let stored = self
            .state()
            .look(due.dataset(), &due.project, due.day)?
            .and_then(|l| l.fingerprint);
        if fingerprint.is_some() && stored == fingerprint {
            if due.becomes_final {
                w.settle(&self.sink(), &page)?;
            }
            self.state().looked(
                due.dataset(),
                &due.project,
                due.day,
                fingerprint.as_deref(),
                self.clock.now(),
            )?;
            tracing::debug!(dataset = due.dataset(), project = %due.project, day = %due.day, "probe: the day is unchanged");
            return Ok(None);
        }
        self.store(w, 0, &page, &body)?;
        self.crash.hit("page stored");
        let pages = [page];
        Ok(Some(matches!(w.next(&pages), Ok(None))))
    }

    /// Walks the window (or resumes it) and checks it, walking it again once on a mismatch:
    /// its pages and the mismatch that persisted (written with a doubt), or `None` when its
    /// part of this run was spent first.
    async fn walk_checked<W: Walk>(
        &self,
        due: &Due,
        w: &mut W,
        client: &Client,
        before: u64,
    ) -> Result<Option<(Vec<W::Page>, Option<String>)>, ExportError> {
        let Some(mut pages) = self.walk(due, w, client, before).await? else {
            return Ok(None);
        };
        let Err(m) = w.check(&self.sink(), &mut pages)? else {
            return Ok(Some((pages, None)));
        };
        tracing::warn!(dataset = due.dataset(), project = %due.project, day = %due.day, "{m}; walking the window again");
        self.forget(w)?;
        let Some(mut pages) = self.walk(due, w, client, before).await? else {
            return Ok(None);
        };
        match w.check(&self.sink(), &mut pages)? {
            Ok(()) => Ok(Some((pages, None))),
            Err(m) => Ok(Some((pages, Some(w.doubt(m)?)))),
        }
    }

    /// The pages of a walk: those an interrupted run stored, then the rest, each stored as it
    /// comes; `None` when the window's part of this run (requests since `before`, see
    /// [`Due::part`]) was spent before its end.
    async fn walk<W: Walk>(
        &self,
        due: &Due,
        w: &W,
        client: &Client,
        before: u64,
    ) -> Result<Pages<W::Page>, ExportError> {
        let (mut pages, hashes) = self.stored(w)?;
        let mut seen: HashMap<u64, usize> = hashes
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|h| (h, i)))
            .collect();
        // The empty pages at the end of the walk so far.
        let mut empty_run = hashes.iter().rev().take_while(|h| h.is_none()).count();
        let part = due.part;
        loop {
            let at = match w.next(&pages) {
                Ok(None) => return Ok(Some(pages)),
                Ok(Some(_)) if part.is_some_and(|part| client.requests_sent() - before >= part) => {
                    return Ok(None);
                }
                Ok(Some(at)) => at,
                // The bound of pages: the window is stuck (tried again at a falling rate).
                Err(detail) if pages.len() as u64 >= MAX_WALK_PAGES => {
                    return Err(w.astray(detail).bound());
                }
                Err(detail) => return Err(w.astray(detail)),
            };
            if empty_run >= MAX_EMPTY_RUN {
                return Err(w.astray(format!(
                    "{empty_run} empty pages in a row say there is more; stopped before {}",
                    match &at {
                        At::Offset(o) => format!("offset {o}"),
                        _ => format!("page {}", pages.len() + 1),
                    }
                )));
            }
            let (page, body) = w.fetch(client, &at).await?;
            let n = pages.len();
            if let Some(h) = w.hash(&page) {
                if let Some(&earlier) = seen.get(&h) {
                    let earlier_at = w.next(&pages[..earlier]).ok().flatten();
                    return Err(w.astray(format!(
                        "page {} repeats page {}: the service ignores the paging",
                        show(&at, n),
                        show(&earlier_at.unwrap_or(At::Start), earlier)
                    )));
                }
                seen.insert(h, n);
                empty_run = 0;
            } else {
                empty_run += 1;
            }
            self.store(w, n, &page, &body)?;
            self.crash.hit("page stored");
            let mut page = page;
            w.shed(n, &mut page);
            pages.push(page);
        }
    }
}

/// Why the kept pages of a walk were not read back.
enum Unkept {
    /// A page kept by another version of docpipe.
    Foreign,
    /// The page store failed.
    Store(crate::store::StoreError),
}

impl From<crate::store::StoreError> for Unkept {
    fn from(e: crate::store::StoreError) -> Self {
        Unkept::Store(e)
    }
}

/// A page's place in a walk, as a message names it: its offset, or its number.
fn show(at: &At, n: usize) -> String {
    match at {
        At::Offset(o) => format!("at offset {o}"),
        _ => (n + 1).to_string(),
    }
}
