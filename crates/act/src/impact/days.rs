//! The impact's days: the calendar (the output folder's time zone, today, the days that no
//! longer change), and the rule that says whether a firing's days after are due.

use super::Impact;
use chrono::NaiveDate;
use docpipe_state::StoreError;
use docpipe_state::impact::Plan;
use docpipe_state::ledger::{Firing, Ledger, Sent};

/// `day` moved by `days` (itself when out of range).
pub fn shift(day: NaiveDate, days: i64) -> NaiveDate {
    day.checked_add_signed(chrono::Duration::days(days))
        .unwrap_or(day)
}

/// How the impact counts days: the output folder's time zone, today in it, and the days after
/// which a day no longer changes (the export's lookback).
#[derive(Debug, Clone, Copy)]
pub struct Calendar {
    /// The time zone.
    pub tz: chrono_tz::Tz,
    /// Today.
    pub today: NaiveDate,
    /// When a span's day is final.
    pub settle: docpipe_catalog::calendar::Settle,
}

impl Calendar {
    /// The final days of a dataset and project.
    pub(super) fn final_days(
        &self,
        ledger: &Ledger,
        dataset: &str,
        project: &str,
    ) -> Result<Vec<NaiveDate>, StoreError> {
        let settled = self.settle.settled_through(dataset, self.today);
        ledger.final_days(dataset, project, settled)
    }
}

/// The days `from..=to` that are in `finals`.
pub(super) fn final_count(finals: &[NaiveDate], from: NaiveDate, to: NaiveDate) -> i64 {
    finals.iter().filter(|d| **d >= from && **d <= to).count() as i64
}

/// What a plan waits for, or why it will never be measured, or the days to measure.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Due {
    Wait(String),
    Never(String),
    Measure(NaiveDate, NaiveDate),
}

/// Whether a firing's job ended in a way its plan measures, and the days after if so;
/// `polled` says whether its job is still being polled.
pub(super) fn due(
    f: &Firing,
    plan: &Plan,
    impact: &Impact,
    finals: &[NaiveDate],
    polled: bool,
    tz: chrono_tz::Tz,
) -> Due {
    if plan.before.days == 0 {
        return Due::Never("no final day before the firing to compare with".into());
    }
    if !matches!(f.sent, Sent::Sent | Sent::Unknown) {
        return Due::Never(format!("the follow-up was {}", f.sent.as_str()));
    }
    let status = f.status.as_deref().unwrap_or("");
    if !docpipe_extract::jobs::JobStatus::from_word(status).is_terminal() {
        // Polling ends when the job ends, when the rule's timeout passes, or when the job
        // cannot be read: a job not seen to end after that never will be.
        return if polled {
            Due::Wait("the job is running".into())
        } else {
            Due::Never(
                "docpipe stopped polling the job before it ended (the rule's timeout passed, or the job could not be read)".into(),
            )
        };
    }
    if f.pr_link.is_none() && !impact.without_pull_request {
        let how = if status == "completed" {
            "the job ended without a pull request"
        } else {
            &format!("the job {status}")
        };
        return Due::Never(format!(
            "{how} (without_pull_request = true in its [impact] measures it)"
        ));
    }
    let (from, to) = after_days(f, impact, tz);
    if final_count(finals, from, to) < impact.days {
        return Due::Wait(format!("the days {from}..{to} are not all final yet"));
    }
    Due::Measure(from, to)
}

/// The days after a firing whose job ended: from the day after its end plus the rule's wait,
/// the rule's number of days.
pub(crate) fn after_days(f: &Firing, impact: &Impact, tz: chrono_tz::Tz) -> (NaiveDate, NaiveDate) {
    let end = f.fired_at
        + chrono::Duration::milliseconds((f.seconds_to_done.unwrap_or(0.0) * 1000.0) as i64)
        + chrono::Duration::seconds(impact.wait_secs.min(i64::MAX as u64) as i64);
    let from = shift(end.with_timezone(&tz).date_naive(), 1);
    (from, shift(from, impact.days - 1))
}

/// The firings whose jobs are being polled.
pub(super) fn polled(ledger: &Ledger) -> Result<std::collections::HashSet<i64>, StoreError> {
    Ok(ledger.polling()?.into_iter().map(|(f, _)| f.id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::tests::rule;
    use chrono::Utc;
    use docpipe_state::impact::Days;

    #[test]
    fn a_job_whose_polling_ended_before_it_did_is_never_measured() {
        let day = NaiveDate::from_ymd_opt(2026, 3, 1).unwrap();
        let impact =
            rule("[impact]\nmetric = \"ctr_7d\"\ncount = \"hits_7d\"\nbetter = \"higher\"\n")
                .unwrap()
                .impact
                .unwrap();
        let plan = Plan {
            firing_id: 1,
            definition: String::new(),
            before: Days {
                from: day,
                to: day,
                days: 7,
            },
            after: None,
            settled_at: None,
            settled: None,
        };
        let firing = Firing {
            id: 1,
            rule: "r".into(),
            project: "p".into(),
            kind: docpipe_state::ledger::Kind::FollowUp,
            job: Some("j".into()),
            fired_at: Utc::now(),
            prompt_hash: "h".into(),
            prompt: "p".into(),
            rows_matched: 1,
            sent: Sent::Sent,
            status: Some("active".into()),
            pr_link: None,
            seconds_to_done: None,
            error: Some("polling: job j of project p: 500".into()),
            trail: Default::default(),
            run: None,
        };
        let due = |polled| due(&firing, &plan, &impact, &[], polled, chrono_tz::UTC);
        assert_eq!(due(true), Due::Wait("the job is running".into()));
        assert_eq!(
            due(false),
            Due::Never("docpipe stopped polling the job before it ended (the rule's timeout passed, or the job could not be read)".into())
        );
    }
}
