//! What the operator reads: the status page and its token, alerts, the daemon's reload, the
//! progress lines, `check`'s wording and the errors' lines and exit codes.

/// The status page's token: a bearer or its cookie, never shown.
mod health {
    use axum::http::{HeaderMap, HeaderValue, header};
    use docpipe::daemon::health::*;

    #[test]
    fn the_token_is_admitted_as_a_bearer_or_as_its_cookie_and_never_shown() {
        let t = Token::new("s3cret-token-0123456789");
        let h = |k: header::HeaderName, v: &str| {
            let mut m = HeaderMap::new();
            m.insert(k, HeaderValue::from_str(v).unwrap());
            m
        };
        assert!(t.admits(&h(header::AUTHORIZATION, "Bearer s3cret-token-0123456789")));
        assert!(!t.admits(&h(header::AUTHORIZATION, "Bearer s3cret-token-012345678")));
        assert!(!t.admits(&h(header::AUTHORIZATION, "s3cret-token-0123456789")));
        let cookie = format!("a=b; {COOKIE}={}", digest("s3cret-token-0123456789"));
        assert!(t.admits(&h(header::COOKIE, &cookie)));
        assert!(!t.admits(&h(
            header::COOKIE,
            &format!("{COOKIE}=s3cret-token-0123456789")
        )));
        assert!(!t.admits(&HeaderMap::new()));
        assert_eq!(format!("{t:?}"), "Token(..)");
    }
}

/// Alerts: a problem told once an hour, its end told only after it was.
mod alerts {
    use chrono::{DateTime, Utc};
    use docpipe::daemon::alerts::*;

    fn stale(subject: &str) -> Problem {
        Problem {
            what: What::Stale,
            organization: None,
            project: Some(subject.into()),
            dataset: Some("searches".into()),
            line: format!("{subject} searches: stale"),
            recovered: format!("{subject} searches: fresh"),
            since: None,
            subject: subject.into(),
        }
    }

    #[test]
    fn a_problem_is_told_once_an_hour_and_its_end_only_after_it_was_told() {
        let t0: DateTime<Utc> = "2026-11-26T10:00:00Z".parse().unwrap();
        let min = chrono::Duration::minutes;
        let mut a = Alerts::default();
        let kinds = [What::Stale];
        a.observe(&kinds, None, vec![stale("docs")], t0);
        let id = stale("docs").id();
        assert_eq!(a.told(&id), Some(true));
        assert_eq!(a.told_at(&id).unwrap(), t0);
        // Still there: nothing new.
        a.observe(&kinds, None, vec![stale("docs")], t0 + min(5));
        assert_eq!(a.told_at(&id).unwrap(), t0);
        // It ends: its recovery is told.
        a.observe(&kinds, None, Vec::new(), t0 + min(10));
        assert_eq!(a.problems().count(), 0);
        assert_eq!(a.told_at(&id).unwrap(), t0 + min(10));
        // Back within the hour: open, not told, and so its end is not told either.
        a.observe(&kinds, None, vec![stale("docs")], t0 + min(20));
        assert_eq!(a.told(&id), Some(false));
        a.observe(&kinds, None, Vec::new(), t0 + min(30));
        assert_eq!(a.told_at(&id).unwrap(), t0 + min(10));
        // An hour after the last message: told again.
        a.observe(&kinds, None, vec![stale("docs")], t0 + min(75));
        assert_eq!(a.told(&id), Some(true));
        // Another kind's observation leaves it open.
        a.observe(&[What::WindowFailing], None, Vec::new(), t0 + min(80));
        assert_eq!(a.problems().count(), 1);
        // A rule failing, then the rules as a whole: the rule's problem is not taken as ended.
        let rule = Problem {
            what: What::RuleFailing,
            subject: "search-gaps".into(),
            ..stale("docs")
        };
        a.observe(&[What::RuleFailing], Some("search-gaps"), vec![rule], t0);
        a.rules_failed(&anyhow::anyhow!("the ledger is locked"), t0 + min(5));
        let open: Vec<&str> = a.problems().map(|p| p.subject.as_str()).collect();
        assert_eq!(open, ["", "search-gaps", "docs"]);
    }
}

/// The daemon's reload: which rule files changed.
mod reload {
    use docpipe::daemon::reload::*;

    #[test]
    fn the_changes_name_each_file_added_changed_or_removed() {
        let files = |list: &[(&str, u64)]| -> Files {
            list.iter().map(|(p, h)| (p.to_string(), *h)).collect()
        };
        assert_eq!(
            changes(
                &files(&[("/j/a.toml", 1), ("/j/b.toml", 2), ("/j/c.toml", 3)]),
                &files(&[("/j/a.toml", 1), ("/j/b.toml", 9), ("/j/d.toml", 4)])
            ),
            "changed b.toml; added d.toml; removed c.toml"
        );
    }
}

/// The progress lines: a wait told in minutes and the time it ends.
mod progress {
    use chrono::Utc;
    use docpipe::cli::progress::*;
    use std::time::{Duration, Instant};

    use chrono::TimeZone;

    #[test]
    fn a_waits_message_counts_down_as_the_wait_passes() {
        let until = Utc.with_ymd_and_hms(2026, 11, 22, 14, 5, 9).unwrap();
        let c = Countdown {
            scope: "analytics:acme".into(),
            until,
            wait: Duration::from_secs(3595),
            began: Instant::now() - Duration::from_secs(45),
        };
        assert_eq!(
            c.message(),
            "the hour's budget of analytics:acme is used; next request at 14:05:09 UTC, in 59m 10s"
        );
    }

    #[test]
    fn a_wait_reads_as_minutes_and_the_time_it_ends() {
        let until = Utc.with_ymd_and_hms(2026, 11, 22, 14, 5, 9).unwrap();
        assert_eq!(
            wait_message("analytics:acme", Duration::from_secs(1390), until),
            "the hour's budget of analytics:acme is used; next request at 14:05:09 UTC, in 23m 10s"
        );
        assert_eq!(
            wait_message("analytics:acme", Duration::from_secs(42), until),
            "the hour's budget of analytics:acme is used; next request at 14:05:09 UTC, in 42s"
        );
    }
}

/// `check`'s lists read as a choice.
mod check {
    use docpipe::cli::check::*;

    #[test]
    fn names_read_as_a_choice() {
        assert_eq!(any_of(&[]), "");
        assert_eq!(any_of(&["searches"]), "searches");
        assert_eq!(
            any_of(&["visitors", "searches", "feedback"]),
            "visitors, searches or feedback"
        );
    }
}

/// Errors: each cause once, and exit code 2 for the user's input.
mod error {
    use docpipe::error::*;

    #[test]
    fn a_cause_shown_by_its_parent_is_not_repeated_and_user_errors_exit_2() {
        let io = std::io::Error::other("disk on fire");
        let e: anyhow::Error = UserError::from_source(io).into();
        assert_eq!(lines(&e), ["disk on fire"]);
        assert_eq!(exit_code(&e), 2);
        let e = anyhow::Error::from(std::io::Error::other("a\nb")).context("reading x");
        assert_eq!(lines(&e), ["reading x: a", "b"]);
        assert_eq!(exit_code(&e), 1);
    }
}

/// The status page's first screen: what needs a person, at most eight lines.
mod status_health {
    use docpipe::status::health::*;
    use docpipe::status::{Status, html};

    #[test]
    fn the_page_shows_eight_lines_of_what_needs_a_person_and_counts_the_rest() {
        let mut s = Status::nothing_yet(chrono::Utc::now(), "state.sqlite".into());
        s.exported = true;
        s.rules.problems = (0..20).map(|i| format!("r{i}.toml: broken")).collect();
        assert_eq!(needs(&s).len(), 20);
        let page = html::render(&s);
        let section = page
            .split("<section id=\"needs\">")
            .nth(1)
            .and_then(|n| n.split("</section>").next())
            .unwrap();
        assert_eq!(section.matches("<li class=\"bad\">").count(), SHOWN);
        assert!(section.contains("<li class=\"bad\">rule file problem: r7.toml: broken</li>"));
        assert!(!section.contains("r8.toml"));
        assert!(section.ends_with(
            "<li class=\"more\">and 12 more: the projects, backfills and rules below list each</li></ul>"
        ));
    }
}

/// Status: the days missing before the last one covered.
mod status_days {
    use chrono::NaiveDate;
    use docpipe::status::*;

    #[test]
    fn holes_are_the_runs_of_days_missing_before_the_last_one_covered() {
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        let r = |a: &str, b: &str| DayRange {
            from: d(a),
            to: d(b),
        };
        let known = [
            d("2026-03-03"),
            d("2026-03-04"),
            d("2026-03-07"),
            d("2026-03-09"),
        ];
        assert_eq!(
            holes(&known, d("2026-03-01")),
            [
                r("2026-03-01", "2026-03-02"),
                r("2026-03-05", "2026-03-06"),
                r("2026-03-08", "2026-03-08")
            ]
        );
        assert_eq!(holes(&known, d("2026-03-10")), []);
        assert_eq!(holes(&[], d("2026-03-01")), []);
    }
}
