//! The plan: every dataset's windows due for the projects of a run, one way for all of them.
//! A daily dataset's day is skipped while final and in place, else asked of its due rule
//! (`planner::DueRule::day`); a span's walk goes on where it stopped, or starts when its
//! re-check or its recent days fall due. Then the windows are put in serving order.

use super::{Due, ExportError, Exporter, Plan, ROOM_LOOKAHEAD, Target};
use crate::dataset::{self, Dataset, Windowing};
use crate::planner::{self, DayState, Policy, Purpose, Room};
use crate::store::WalkKey;
use chrono::NaiveDate;

impl Exporter {
    /// The windows due for `targets` over the days `from..=to` (a project's own start when it
    /// has one), in serving order.
    pub fn plan(
        &self,
        targets: &[Target],
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Plan, ExportError> {
        let mut plan = Plan {
            made_at: self.clock.now(),
            ..Plan::default()
        };
        self.budgets(&mut plan, targets);
        let to = to.min(self.today());
        let unknown = self.state().unknown_projects()?;
        for t in targets {
            // A project the service said it does not know (asked of the same service) is left
            // out until asked for again.
            if let Some(u) = unknown.iter().find(|u| u.project == t.project) {
                if !self.retry_unknown && u.base_url == t.client.settings().base_url {
                    plan.unknown.push((u.clone(), self.origin(&t.project)));
                    continue;
                }
                plan.asked_again.insert(t.project.clone());
            }
            let from = t.start.unwrap_or(from);
            for name in &t.datasets {
                let Some(dataset) = dataset::by_name(name) else {
                    continue;
                };
                match dataset.windowing() {
                    Windowing::Daily => self.plan_days(&mut plan, dataset, t, from, to)?,
                    Windowing::Span { .. } => {
                        if let Some(due) = self.plan_span(dataset, t, targets, from, to)? {
                            plan.due.push(due);
                        } else {
                            plan.fresh += 1;
                        }
                    }
                    Windowing::OnDemand => {}
                }
            }
        }
        // A window stuck on the service's paging waits for its next try (its walk of up to
        // 2,000 pages is not spent again on every run).
        let held_back = self.state().history().held_back(self.clock.now())?;
        plan.due.retain(|d| {
            let stuck = held_back.iter().find(|f| {
                f.dataset == d.dataset()
                    && f.project == d.project
                    && (d.is_span() || f.day == d.day)
            });
            if let Some(f) = stuck {
                plan.stuck.push(f.clone());
            }
            stuck.is_none()
        });
        // What was never walked is estimated at 1 request a window: said beside the estimate.
        for d in &plan.due {
            let key = (d.dataset(), d.project.clone());
            if !plan.unmeasured.contains(&key)
                && self.state().last_written(key.0, &key.1)?.is_none()
            {
                plan.unmeasured.insert(key);
            }
        }
        // Most recent first, projects interleaved, the datasets in export order (that many
        // ties in the serving order are served so), then in serving order.
        let rank = |d: &Due| dataset::order(d.dataset());
        plan.due.sort_by(|a, b| {
            b.day
                .cmp(&a.day)
                .then(a.project.cmp(&b.project))
                .then(rank(a).cmp(&rank(b)))
        });
        plan.sort();
        plan.expected_requests = plan.due.iter().map(|d| d.expected_requests).sum::<u64>();
        tracing::debug!(
            windows = plan.due.len(),
            requests = plan.expected_requests,
            "plan made"
        );
        Ok(plan)
    }

    /// Each organization's budget, used and room, and each project's organization.
    fn budgets(&self, plan: &mut Plan, targets: &[Target]) {
        let now = self.clock.now();
        for t in targets {
            let org = t.client.organization().to_string();
            let (limits, budget) = (&t.client.settings().limits, t.client.budget());
            let room = |at| Room::analytics(limits, budget.as_ref(), &org, at);
            let current = room(now);
            plan.budgets.insert(org.clone(), current);
            plan.rooms.insert(org.clone(), room(now + ROOM_LOOKAHEAD));
            let limit = u32::try_from(current.limit).unwrap_or(u32::MAX);
            let scope = crate::api::analytics_scope(&org);
            plan.frees_at.insert(
                org.clone(),
                crate::api::budget::next_free(budget.as_ref(), &scope, limit, now),
            );
            plan.org_of.insert(t.project.clone(), org);
        }
    }

    /// The days `from..=to` of a daily dataset and project, most recent first: a final day in
    /// place is skipped (a deleted partition is fetched again), the others asked of the
    /// dataset's due rule.
    fn plan_days(
        &self,
        plan: &mut Plan,
        dataset: &'static dyn Dataset,
        t: &Target,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<(), ExportError> {
        let rule = self.due_rule(dataset.name());
        let now = self.clock.now();
        let known = std::sync::Arc::new(self.state().windows(dataset.name(), &t.project)?);
        plan.known
            .insert((dataset.name(), t.project.clone()), known.clone());
        let looks = self.state().looks(dataset.name(), &t.project)?;
        let walking = self.state().walks_in_progress(dataset.name(), &t.project)?;
        let per_window = dataset::window_cost(self.state(), dataset, &t.project)?;
        let written = dataset.written_days(self.output(), &t.project);
        let mut day = to;
        while day >= from {
            // A day the zone skipped has no window (and no partition).
            if crate::calendar::day_exists(day, self.tz) {
                let window = known.get(&day);
                let files = window.is_some() && written.contains(&day);
                if window.is_some_and(|w| w.is_final) && files {
                    plan.skipped_final += 1;
                } else {
                    // A day's walk in progress: one of the few the state listed above.
                    let (stored, complete) = match walking
                        .iter()
                        .find(|w| w.from == day && w.to == day.succ_opt().unwrap_or(day))
                    {
                        Some(w) => self.state().progress(w)?,
                        None => (0, false),
                    };
                    let look = looks.get(&day);
                    let state = DayState {
                        age: (self.today() - day).num_days(),
                        written: files && !window.is_some_and(|w| w.is_final),
                        stored,
                        complete,
                        probe_able: look.is_some_and(|l| l.fingerprint.is_some()),
                        checked_at: look.map(|l| l.checked_at),
                    };
                    let day_start = crate::calendar::local_midnight(day, self.tz).to_utc();
                    match rule.day(&state, per_window, day_start, now) {
                        None => plan.fresh += 1,
                        Some(d) => plan.due.push(Due::day_window(
                            dataset,
                            &t.project,
                            day,
                            self.is_settled(day),
                            &state,
                            d,
                        )),
                    }
                }
            }
            match day.pred_opt() {
                Some(d) => day = d,
                None => break,
            }
        }
        Ok(())
    }

    /// A span dataset's walk for a project: the one under way goes on; else a full re-check
    /// or a walk of the recent days when one is due (`None`: neither is, fresh enough).
    #[expect(clippy::too_many_lines)]
    fn plan_span(
        &self,
        dataset: &'static dyn Dataset,
        t: &Target,
        targets: &[Target],
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<Option<Due>, ExportError> {
        let rule = self.due_rule(dataset.name());
        let policy = rule.policy;
        let now = self.clock.now();
        let end = to.succ_opt().unwrap_or(to);
        let state = self.state().span_state(dataset.name(), &t.project)?;
        let look = state.look;
        let recheck = i64::from(self.shaped.recheck(dataset));
        // The recent walk: from the last day the previous walk reached (today; after midnight
        // yesterday too, so the night's last rows are not missed).
        let recent_days = recheck.min(1);
        let through = state.through;
        let mut urgency = 0;
        // The run's range reaches today: a walk ending at today's end, or begun before
        // midnight at yesterday's, is a look at the recent days.
        let to_today = to == self.today();
        // A walk's first day: `days` before the last one the previous walk reached, not before
        // the range.
        let back =
            |th: NaiveDate, days: i64| (th.min(end) - chrono::Duration::days(days)).max(from);
        let in_progress = self.state().walk_in_progress(dataset.name(), &t.project)?;
        let (walk, purpose, full, recent) = match in_progress {
            // A walk under way goes on: first of the backfill when it is one (a first walk, or
            // a range short of the recent days: walked whole), else first of all; a full
            // re-check when it reaches back as far as a full re-check planned now would (the
            // same start as below).
            Some(w) => {
                let recent = to_today && w.to.succ_opt().unwrap_or(w.to) >= end;
                let covers = through.map_or(from, |th| back(th, recheck));
                let purpose = if through.is_none() || !recent {
                    Purpose::Backfill
                } else {
                    Purpose::Resume
                };
                let full = w.from <= covers;
                (w, purpose, full, recent)
            }
            None => {
                let mut stop = end;
                let (start, purpose, full) = match (t.start, through) {
                    // A backfill's range, or a first walk: walked whole.
                    (None, _) | (_, None) => (from, Purpose::Backfill, true),
                    // Days since the project's first day that no walk covered (a backfill
                    // that began later than `start_date`): walked first, as a backfill.
                    (Some(_), Some(th))
                        if let Some((a, b)) = self.span_hole(dataset, t, from, th)? =>
                    {
                        stop = b;
                        (a, Purpose::Backfill, false)
                    }
                    (Some(_), Some(th)) => {
                        let rechecks = recheck > recent_days;
                        let Some(due) = rule.span(rechecks, look.full_at, look.walked_at, now)
                        else {
                            return Ok(None);
                        };
                        urgency = due.urgency;
                        if due.full {
                            (back(th, recheck), Purpose::Recheck, true)
                        } else {
                            (back(th, recent_days), Purpose::Fresh, false)
                        }
                    }
                };
                let w = WalkKey {
                    dataset: dataset.name(),
                    project: t.project.clone(),
                    from: start.min(to),
                    to: stop,
                };
                (w, purpose, full, to_today && stop == end)
            }
        };
        let (stored_pages, _) = self.state().progress(&walk)?;
        let days = (walk.to - walk.from).num_days().max(1) as u64;
        let latest = self.state().span_cost(dataset.name(), &t.project)?;
        Ok(Some(Due {
            dataset,
            project: walk.project,
            day: walk.from,
            to: walk.to,
            stored_pages,
            becomes_final: false,
            expected_requests: planner::span_estimate(latest, days)
                .saturating_sub(stored_pages)
                .max(1),
            purpose,
            probe: false,
            full,
            recent,
            urgency,
            // A span's full re-check that has waited the policy's `oldest` goes before the
            // windows of today (its provisional days are re-checked at least that often).
            deadline: purpose == Purpose::Recheck
                && full
                && Policy::is_due(policy.oldest, look.full_at, now),
            part: None,
            earlier: 0,
            stagger: if purpose == Purpose::Backfill {
                stagger(dataset, t, targets, policy.full)
            } else {
                chrono::Duration::zero()
            },
        }))
    }
}

impl Exporter {
    /// The first run of days from `from` to `through` (the last day a walk reached) that no
    /// walk of a span dataset covered: `(first, the day after the last)`.
    fn span_hole(
        &self,
        dataset: &dyn Dataset,
        t: &Target,
        from: NaiveDate,
        through: NaiveDate,
    ) -> Result<Option<(NaiveDate, NaiveDate)>, ExportError> {
        let covered = self.state().windows(dataset.name(), &t.project)?;
        Ok(holes(|d| covered.contains_key(&d), from, through)
            .first()
            .map(|r| (r.start, r.end)))
    }
}

impl Plan {
    /// The windows a first run walks before it plans the rest: for each daily dataset and
    /// project never walked, its newest window of a day already over (today's few rows would
    /// say too little of a day), else its newest. What they take is then what the plan of the
    /// rest counts for each of their windows, instead of a guess of one request. `None`: none.
    pub fn measuring(&self, today: NaiveDate) -> Option<Plan> {
        let mut chosen: Vec<(&'static str, &str, NaiveDate)> = Vec::new();
        let rank = |day: NaiveDate| (day < today, day);
        for d in &self.due {
            if d.dataset.windowing() != Windowing::Daily
                || !self.unmeasured.contains(&(d.dataset(), d.project.clone()))
            {
                continue;
            }
            match chosen
                .iter_mut()
                .find(|c| c.0 == d.dataset() && c.1 == d.project)
            {
                Some(c) if rank(d.day) > rank(c.2) => c.2 = d.day,
                Some(_) => {}
                None => chosen.push((d.dataset(), &d.project, d.day)),
            }
        }
        let due: Vec<Due> = self
            .due
            .iter()
            .filter(|d| chosen.contains(&(d.dataset(), d.project.as_str(), d.day)))
            .cloned()
            .collect();
        (!due.is_empty()).then(|| Plan {
            expected_requests: due.iter().map(|d| d.expected_requests).sum(),
            due,
            ..self.clone()
        })
    }
}

/// The runs of days in `from..until` that `covered` lacks, each `first..the day after the
/// last` (the planner fills them; `status` shows them).
pub fn holes(
    covered: impl Fn(NaiveDate) -> bool,
    from: NaiveDate,
    until: NaiveDate,
) -> Vec<std::ops::Range<NaiveDate>> {
    let mut out: Vec<std::ops::Range<NaiveDate>> = Vec::new();
    let mut d = from;
    while d < until {
        let Some(next) = d.succ_opt() else {
            break;
        };
        if !covered(d) {
            match out.last_mut() {
                Some(r) if r.end == d => r.end = next,
                _ => out.push(d..next),
            }
        }
        d = next;
    }
    out
}

/// How early a project's first full re-check of a span comes: `rank / n` of its interval, for
/// the project's rank among the `n` with the dataset, so that the projects' full re-checks (a
/// few dozen requests each) do not all fall due in the same hour.
fn stagger(
    dataset: &dyn Dataset,
    t: &Target,
    targets: &[Target],
    full: chrono::Duration,
) -> chrono::Duration {
    let with = targets
        .iter()
        .filter(|o| o.datasets.contains(&dataset.name()));
    let n = with.clone().count().max(1) as i32;
    let rank = with.take_while(|o| o.project != t.project).count() as i32;
    full * rank / n
}
