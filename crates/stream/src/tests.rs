use crate::batch::{Batch, Ev, Setup, Strings, session_hash};
use crate::day::Classifier;
use crate::line::{Bad, decode, id_bits, referrer_host, uuid_text};
use docpipe_agents::Agents;

const OBJECT: &str = r#"{"event_id":"6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1e2f","subdomain":"acme","user_id":"u-1","anon_id":"a-1","session_id":"s-1","created_at":"2026-11-27T10:00:00.250Z","event":"docs.content.view","path":"/guides/a","referrer":"https://www.perplexity.ai/search?q=x","user_agent":"Mozilla/5.0 (compatible; GPTBot/1.2)","ip":"203.0.113.9","properties":{"title":"A"}}"#;

/// A line's fields, as text.
fn show(f: &crate::line::Fields<'_>) -> String {
    format!(
        "{} {} {} {} {:?} {:?} {:?} {:?}",
        f.event,
        f.event_id,
        f.subdomain,
        f.at_micros,
        f.session_id,
        f.path,
        f.referrer,
        f.user_agent
    )
}

fn fields(line: &str) -> Result<String, Bad> {
    decode(line.as_bytes(), show)
}

#[test]
fn both_payload_forms_give_the_same_fields_and_the_rest_is_skipped() {
    let object = format!(r#"{{"eventType":"docs.content.view","payload":{OBJECT}}}"#);
    let string = format!(
        r#"{{"eventType":"docs.content.view","payload":{}}}"#,
        serde_json::Value::String(OBJECT.replace(r#"{"title":"A"}"#, r#""{\"title\":\"A\"}""#))
    );
    let want = r#"docs.content.view 6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1e2f acme 1795773600250000 Some("s-1") Some("/guides/a") Some("https://www.perplexity.ai/search?q=x") Some("Mozilla/5.0 (compatible; GPTBot/1.2)")"#;
    assert_eq!(fields(&object).unwrap(), want);
    assert_eq!(fields(&string).unwrap(), want);
}

#[test]
fn each_bad_line_says_why() {
    let cases = [
        ("not json {", Bad::NotJson),
        (
            r#"{"eventType":"docs.content.view","payload":"{oops"}"#,
            Bad::PayloadNotJson,
        ),
        (r#"{"eventType":"docs.content.view"}"#, Bad::NoPayload),
        (
            r#"{"eventType":"docs.content.view","payload":null}"#,
            Bad::NoPayload,
        ),
        (
            r#"{"payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z"}}"#,
            Bad::NoEvent,
        ),
        (
            r#"{"eventType":"e","payload":{"subdomain":"a","created_at":"2026-11-27T10:00:00Z"}}"#,
            Bad::NoEventId,
        ),
        (
            r#"{"eventType":"e","payload":{"event_id":"x","created_at":"2026-11-27T10:00:00Z"}}"#,
            Bad::NoSubdomain,
        ),
        (
            r#"{"eventType":"e","payload":{"event_id":"x","subdomain":"a","created_at":"yesterday"}}"#,
            Bad::BadTime,
        ),
        (
            r#"{"eventType":"e","payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z","path":7}}"#,
            Bad::NotJson,
        ),
    ];
    for (line, want) in cases {
        assert_eq!(fields(line).unwrap_err(), want, "{line}");
    }
    // The service's shape and others agree; a day that does not exist is not read.
    use crate::line::parse_time;
    for (a, b) in [
        ("2026-11-27T10:00:00Z", "2026-11-27T10:00:00+00:00"),
        ("2026-11-27T10:00:00.5Z", "2026-11-27T11:00:00.500+01:00"),
        (
            "1969-12-31T23:59:59.123456Z",
            "1969-12-31T23:59:59.123456+00:00",
        ),
        (
            "2024-02-29T00:00:00.000000001Z",
            "2024-02-29T00:00:00+00:00",
        ),
    ] {
        assert_eq!(parse_time(a), parse_time(b), "{a}");
        assert!(parse_time(a).is_some());
    }
    assert_eq!(parse_time("2026-02-30T00:00:00Z"), None);
    assert_eq!(parse_time("2026-11-27T24:00:00Z"), None);
    // Without a zone, UTC; the payload's event name when the line has none.
    let naive = r#"{"payload":{"event":"docs.search.query","event_id":"x","subdomain":"a","created_at":"2026-11-27 10:00:00"}}"#;
    assert!(
        fields(naive)
            .unwrap()
            .starts_with("docs.search.query x a 1795773600000000 ")
    );
}

#[test]
fn the_services_instants_are_read_as_chrono_reads_them_every_day_of_the_calendars_edges() {
    use crate::line::{LastDate, parse_time, parse_time_in};
    // Every day of years around the calendar's edges (a 400th year, a 100th, a leap year, the
    // first and the last of four digits), and the 29th to 32nd of every month, each read as
    // chrono reads it: the same instant, or none where it says there is no such day; and read
    // again after the day's first second, its date known from the last instant's.
    let (mut days, mut last) = (0, LastDate::default());
    for y in [
        0, 1, 1600, 1899, 1900, 1969, 1970, 2000, 2023, 2024, 2100, 9999,
    ] {
        for m in 1..=12 {
            for d in 1..=32 {
                let text = format!("{y:04}-{m:02}-{d:02}T23:59:58.25Z");
                let by_chrono = chrono::NaiveDate::from_ymd_opt(y, m, d).map(|day| {
                    let at = day.and_hms_milli_opt(23, 59, 58, 250).unwrap();
                    at.and_utc().timestamp_micros()
                });
                assert_eq!(parse_time(&text), by_chrono, "{text}");
                let first = format!("{y:04}-{m:02}-{d:02}T00:00:01Z");
                let second = parse_time_in(&first, &mut last);
                assert_eq!(second.map(|t| t + 86_397_250_000), by_chrono, "{first}");
                assert_eq!(parse_time_in(&text, &mut last), by_chrono, "{text}");
                days += usize::from(by_chrono.is_some());
            }
        }
    }
    assert_eq!(days, 8 * 365 + 4 * 366);
    for bad in [
        "2026-1a-27T10:00:00Z",
        "2026-11-27T10:0/:00Z",
        "2026-11-27T10:00:00.Z",
    ] {
        assert_eq!(parse_time(bad), None, "{bad}");
        assert!(parse_time_in("2026-11-27T10:00:00Z", &mut last).is_some());
        assert_eq!(parse_time_in(bad, &mut last), None, "{bad}");
    }
}

#[test]
fn a_referrer_is_kept_as_its_host_and_an_id_as_its_bits() {
    assert_eq!(
        referrer_host("https://www.perplexity.ai/search?q=x"),
        Some("perplexity.ai")
    );
    assert_eq!(
        referrer_host("http://user:pw@chatgpt.com:443/c/1"),
        Some("chatgpt.com")
    );
    assert_eq!(referrer_host("android-app://com.google"), None);
    assert_eq!(referrer_host("https:///x"), None);
    let (bits, uuid) = id_bits("6F1C2A4E-0B7D-4C2A-9E1F-3A5B7C9D1E2F");
    assert!(uuid);
    assert_eq!(uuid_text(bits), "6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1e2f");
    assert_eq!(id_bits("evt-1"), id_bits("evt-1"));
    assert!(!id_bits("evt-1").1);
    assert_ne!(id_bits("evt-1").0, id_bits("evt-2").0);
    assert_ne!(session_hash((1, 2), "s"), session_hash((1, 3), "s"));
}

#[test]
fn a_referrers_host_is_found_by_bytes_as_the_character_splits_found_it() {
    // The reading by character patterns, as it was.
    fn by_chars(referrer: &str) -> Option<&str> {
        let rest = referrer
            .strip_prefix("https://")
            .or_else(|| referrer.strip_prefix("http://"))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        let host = host.split(':').next().unwrap_or("");
        let host = host.strip_prefix("www.").unwrap_or(host);
        (!host.is_empty() && host.len() <= 253).then_some(host)
    }
    let parts = [
        "",
        "www.",
        "u:p@",
        "a@b@",
        "é",
        "chatgpt.com",
        ":443",
        "/",
        "?q=1",
        "#x",
        "@",
        ":",
        "/c/@x:1",
    ];
    let mut checked = 0;
    for scheme in ["https://", "http://", "ftp://", ""] {
        for a in parts {
            for b in parts {
                for c in parts {
                    let r = format!("{scheme}{a}{b}{c}");
                    assert_eq!(referrer_host(&r), by_chars(&r), "{r:?}");
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 4 * 13 * 13 * 13);
    let long = format!("https://{}.com/", "a".repeat(250));
    assert_eq!(referrer_host(&long), None);
}

#[test]
fn a_repeated_id_is_held_until_its_day_is_written_once_and_what_cannot_be_placed_is_counted() {
    let setup = Setup {
        projects: vec!["p".into()],
        subdomains: [("acme".to_string(), 0)].into_iter().collect(),
        tz: chrono_tz::Tz::America__New_York,
        session_key: (1, 2),
    };
    let mut b = Batch::default();
    let line = format!(r#"{{"eventType":"docs.content.view","payload":{OBJECT}}}"#);
    b.line(&setup, line.as_bytes(), "o", 1);
    b.line(&setup, line.as_bytes(), "o", 2);
    b.line(&setup, line.replace("acme", "other").as_bytes(), "o", 3);
    b.line(
        &setup,
        line.replace("docs.content.view", "custom.thing").as_bytes(),
        "o",
        4,
    );
    b.line(&setup, b"   ", "o", 5);
    assert_eq!((b.events, b.lines), (2, 5));
    // 10:00 UTC is 05:00 in New York: the same day.
    let days: Vec<_> = b.days.keys().map(|(p, d)| (*p, d.to_string())).collect();
    assert_eq!(days, [(0, "2026-11-27".to_string())]);
    assert_eq!(
        b.unread.line().unwrap(),
        "1 of an unknown event (custom.thing ×1); 1 of a subdomain no project maps (other ×1)"
    );
    // Written, the day holds the id once; written again, it holds it already.
    let out = tempfile::tempdir().unwrap();
    let agents = Agents::shipped();
    let mut classify = Classifier::new(&agents);
    let ((_, date), events) = b.days.pop_first().unwrap();
    let day = crate::day::Day {
        out: out.path(),
        project: "p",
        date,
    };
    let counts = |w: crate::day::Written| {
        let tables: Vec<String> = w
            .files
            .iter()
            .map(|f| f.strip_prefix(out.path()).unwrap().display().to_string())
            .collect();
        (w.added, w.duplicates, w.events, tables.join(" "))
    };
    let first = crate::day::write_day(&day, &mut b.strings, &events, &mut classify).unwrap();
    let tables = ["events", "agent_daily", "agent_pages"]
        .map(|t| format!("{t}/project=p/date=2026-11-27/part-00000.parquet"));
    assert_eq!(counts(first), (1, 1, 1, tables.join(" ")));
    let again = crate::day::write_day(&day, &mut b.strings, &events, &mut classify).unwrap();
    assert_eq!(counts(again), (0, 2, 0, String::new()));
}

#[test]
fn a_surface_from_its_events_name_and_its_path_apart_is_the_surface_of_both() {
    use docpipe_agents::surface;
    let events = [
        "docs.content.view",
        "docs.content.md.view",
        "docs.mcp.tool_call",
        "docs.search.query",
        "",
    ];
    let paths = [
        "/guides/a",
        "/llms.txt",
        "/docs/LLMS-FULL.TXT#x",
        "/guides/a.md",
        "/A.MD?x=1",
        "/mcp",
        "/mcp/tools",
        "/robots.txt",
        "/sitemap-0.xml",
        "/_next/app.js",
        "/logo.svg",
        "",
    ];
    let mut seen = std::collections::BTreeSet::new();
    for e in events {
        for p in paths {
            let both = surface(e, p);
            let apart = crate::day::combined(surface(e, ""), surface("", p));
            assert_eq!(apart, both, "{e} {p}");
            seen.insert(both);
        }
    }
    assert_eq!(seen.len(), 5);
}

#[test]
fn the_classifiers_caches_hold_for_one_table_of_texts_only() {
    let agents = Agents::shipped();
    let mut c = Classifier::new(&agents);
    let ev = |s: &mut Strings, ua: &str| Ev {
        id: 1,
        at: 0,
        session: 0,
        raw_id: 0,
        event: s.of(Some("docs.content.view")),
        path: s.of(Some("/a")),
        user_agent: s.of(Some(ua)),
        referrer: 0,
    };
    let (mut one, mut two) = (Strings::new(), Strings::new());
    let a = ev(&mut one, "GPTBot/1.2");
    let b = ev(&mut two, "Cursor/1.7");
    // The same indexes in two tables, two agents.
    assert_eq!((a.user_agent, b.user_agent), (3, 3));
    let (wa, _) = c.read(&one, &a);
    let (wb, _) = c.read(&two, &b);
    assert_eq!(
        (c.who(wa).agent.as_str(), c.who(wb).agent.as_str()),
        ("GPTBot", "Cursor")
    );
}

/// What a decoder made of a line, as text (the fast one in `scratch`, which keeps the order
/// of the keys it read lately).
fn read_by(line: &[u8], fast: Option<&mut crate::line::Scratch>) -> String {
    let r = if let Some(scratch) = fast {
        crate::line::decode_in(line, scratch, show)
    } else {
        crate::line::decode_parsed(line, show)
    };
    format!("{r:?}")
}

#[test]
fn the_fast_reader_reads_every_line_as_serde_json_does_mutated_lines_included() {
    let string_form = |payload: &str| {
        format!(
            r#"{{"eventType":"docs.content.view","payload":{}}}"#,
            serde_json::Value::String(payload.to_string())
        )
    };
    let mut lines: Vec<String> = vec![
        format!(r#"{{"eventType":"docs.content.view","payload":{OBJECT}}}"#),
        string_form(OBJECT),
        format!(" \t{{ \"payload\" : {OBJECT} , \"eventType\" : null }}\r\n "),
        r#"{"eventType":"e","payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z","path":"/p\"q","n":[1,-0.5,2e9,true,false,null,{"a":[]}]}}"#.into(),
        r#"{"eventType":"e","payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z","p\u0061th":"/a"}}"#.into(),
        r#"{"eventType":"e","payload":{"event_id":"x","event_id":"y","subdomain":"a","created_at":"2026-11-27T10:00:00Z"}}"#.into(),
        r#"{"eventType":"e","eventType":"f","payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z"}}"#.into(),
        r#"{"eventType":"e","payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z","x":"\ud800"}}"#.into(),
        r#"{"eventType":"e","payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z","path":5}}"#.into(),
        r#"{"eventType":"e","payload":["x","a"]}"#.into(),
        r#"["e",{"event_id":"x"}]"#.into(),
        r#"{"eventType":"e","payload":7}"#.into(),
        string_form(r#"{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z","user_agent":"Mozilla/5.0 \"quoted\" é \u00e9"}"#),
        string_form(r#"  {"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z"}  "#),
        string_form(r#"{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z"} x"#),
        // Escapes other than the strings' quotes in a payload string: a line's end, a slash.
        string_form("{\n\"event_id\":\"x\",\n\"subdomain\":\"a\",\"created_at\":\"2026-11-27T10:00:00Z\"}"),
        r#"{"eventType":"e","payload":"{\"event_id\":\"x\",\"subdomain\":\"a\",\"created_at\":\"2026-11-27T10:00:00Z\",\"path\":\"\/a\"}"}"#.into(),
    ];
    let mut deep = String::from(
        r#"{"eventType":"e","payload":{"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z","d":"#,
    );
    deep.push_str(&"[".repeat(100));
    deep.push_str(&"]".repeat(100));
    deep.push_str("}}");
    lines.push(deep);
    for n in [
        "0", "-0", "01", "1.", "1.5e", "1e+5", "-", "1E-2", "2.50", "+1", ".5", "tru", "nul",
        "true", "false",
    ] {
        lines.push(format!(
            r#"{{"eventType":"e","payload":{{"v":{n},"event_id":"x","subdomain":"a","created_at":"2026-11-27T10:00:00Z"}}}}"#
        ));
    }
    // Every line, then each with one byte taken out, put in or replaced, at every place.
    let tricky: &[u8] = b"\"\\{}[],:0-.eu \t\n\x01\x0b\xff\xc3nt/";
    let (mut checked, mut fast) = (0, 0);
    for line in [&lines[0], &lines[1], &lines[2], &lines[13]] {
        assert!(read_fast(line.as_bytes()), "{line}");
    }
    // One reader for all the lines: the order of keys it learns from one line is tried on the
    // next, mutated or not.
    let mut scratch = crate::line::Scratch::default();
    let mut check = |line: &[u8]| {
        fast += usize::from(read_fast(line));
        assert_eq!(
            read_by(line, Some(&mut scratch)),
            read_by(line, None),
            "{}",
            String::from_utf8_lossy(line)
        );
        checked += 1;
    };
    for line in &lines {
        let b = line.as_bytes();
        check(b);
        for i in 0..b.len() {
            let mut cut = b.to_vec();
            cut.remove(i);
            check(&cut);
            let c = tricky[i % tricky.len()];
            let mut put = b.to_vec();
            put.insert(i, c);
            check(&put);
            let mut swapped = b.to_vec();
            swapped[i] = tricky[(i * 7 + 3) % tricky.len()];
            check(&swapped);
        }
    }
    assert!(checked > 10_000, "{checked}");
    // Many mutations stay with the fast reader (it reads them, or says why not): the rest are
    // broken JSON or escapes, which serde_json reads.
    assert!(fast * 4 > checked, "{fast} of {checked}");
}

/// Whether the fast reader reads a line to the end (serde_json is not asked).
fn read_fast(line: &[u8]) -> bool {
    let (mut stops, order) = (crate::scan::Stops::default(), crate::scan::Order::default());
    match crate::scan::envelope(line, &mut stops, &order).map(|e| e.payload) {
        Some(Some(crate::scan::Found::Text(at, raw))) => {
            crate::scan::unescape(raw, at, &stops, &mut Vec::new())
                .and_then(|t| {
                    crate::scan::payload_text(t, &mut crate::scan::Stops::default(), &order)
                })
                .is_some()
        }
        Some(_) => true,
        None => false,
    }
}

#[test]
fn the_local_day_from_the_hours_offset_equals_the_zones_own_across_its_changes() {
    use chrono::TimeZone;
    // Paris and New York change by an hour, Lord Howe by half of one (at 15:30 UTC in
    // October), Kathmandu by a quarter at its local midnight (1986), Kolkata never; the minutes
    // of two days around each change, in order and then back and forth.
    let cases = [
        (chrono_tz::Europe::Paris, "2026-03-28T12:00:00Z"),
        (chrono_tz::Europe::Paris, "2026-10-24T12:00:00Z"),
        (chrono_tz::America::New_York, "2026-11-01T00:00:00Z"),
        (chrono_tz::Australia::Lord_Howe, "2026-04-04T00:00:00Z"),
        (chrono_tz::Australia::Lord_Howe, "2026-10-03T00:00:00Z"),
        (chrono_tz::Asia::Kathmandu, "1985-12-31T00:00:00Z"),
        (chrono_tz::Asia::Kolkata, "2026-11-27T00:00:00Z"),
    ];
    let mut checked = 0;
    for (tz, from) in cases {
        let start = chrono::DateTime::parse_from_rfc3339(from)
            .unwrap()
            .timestamp_micros();
        let mut hour = crate::batch::Hour::default();
        for step in 0..(2 * 24 * 60) {
            let m = start + step * 60_000_000 + (step % 7) * 1_000_000;
            let back = start + ((step * 37) % (2 * 24 * 60)) * 60_000_000;
            for micros in [m, back, m - 1] {
                let want = tz.timestamp_micros(micros).single().map(|t| t.date_naive());
                assert_eq!(hour.day(tz, micros), want, "{tz} {micros}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 7 * 2 * 24 * 60 * 3);
}

#[test]
fn a_days_reads_are_tallied_as_ordered_sets_would_count_them() {
    use std::collections::{BTreeMap, BTreeSet};
    // 5,000 reads over 7 keys, 40 pages and 90 sessions, some without a page or a session.
    let rows: Vec<(u64, u32, u64)> = (0..5_000u64)
        .map(|i| {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7;
            (
                (h % 7) << 40,
                ((h >> 8) % 41) as u32,
                ((h >> 20) % 91) << 50,
            )
        })
        .collect();
    let mut want: BTreeMap<u64, (i64, BTreeSet<u32>, BTreeSet<u64>)> = BTreeMap::new();
    for &(k, path, session) in &rows {
        let e = want.entry(k).or_default();
        e.0 += 1;
        if path != 0 {
            e.1.insert(path);
        }
        if session != 0 {
            e.2.insert(session);
        }
    }
    let want: Vec<(u64, i64, i64, i64)> = want
        .into_iter()
        .map(|(k, (n, p, s))| (k, n, p.len() as i64, s.len() as i64))
        .collect();
    assert_eq!(crate::day::tally(&rows), want);
    assert_eq!(want.len(), 7);
    // Keys of 32 bits or fewer (packed with their pages into 8 bytes): the same counts.
    let small: Vec<(u64, u32, u64)> = rows.iter().map(|&(k, p, s)| (k >> 40, p, s)).collect();
    let shifted: Vec<(u64, i64, i64, i64)> = want
        .iter()
        .map(|&(k, n, p, s)| (k >> 40, n, p, s))
        .collect();
    assert_eq!(crate::day::tally(&small), shifted);
    // And sessions of 32 bits or fewer too (a day's numbered sessions: pairs of 8 bytes).
    let tiny: Vec<(u64, u32, u64)> = small.iter().map(|&(k, p, s)| (k, p, s >> 50)).collect();
    assert!(tiny.iter().any(|r| r.2 != 0) && tiny.iter().any(|r| r.2 == 0));
    assert_eq!(crate::day::tally(&tiny), shifted);
    let mut counted: BTreeMap<(u64, u32), i64> = BTreeMap::new();
    for &(k, path, _) in &rows {
        *counted.entry((k, path)).or_default() += 1;
    }
    let keys: Vec<(u64, u32)> = rows.iter().map(|&(k, p, _)| (k, p)).collect();
    assert_eq!(
        crate::day::runs(keys),
        counted.into_iter().collect::<Vec<_>>()
    );
}

#[test]
fn a_days_events_are_written_in_order_of_time_then_id_as_a_sort_of_whole_events_puts_them() {
    // 3,000 events over 200 times (many of one time), ids in no order, some from the lake; the
    // times a microsecond apart (packed with their places) and 4e16 apart (too far to pack).
    for scale in [1, 40_000_000_000_000_000] {
        let events: Vec<Ev> = (0..3_000u64)
            .map(|i| {
                let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                Ev {
                    id: u128::from(h) << 64 | u128::from(i),
                    at: (((h >> 40) % 200) as i64 - 100) * scale,
                    session: i,
                    raw_id: 0,
                    event: 1,
                    path: (i % 7) as u32,
                    user_agent: 2,
                    referrer: 0,
                }
            })
            .collect();
        let mut want = events.clone();
        want.sort_unstable_by_key(|e| (e.at, e.id));
        let order = crate::day::order(&events);
        let got: Vec<Ev> = order.iter().map(|&i| events[i as usize]).collect();
        assert_eq!(got, want);
        assert_eq!(got.first().map(|e| e.at), Some(-100 * scale));
        assert_eq!(got.last().map(|e| e.at), Some(99 * scale));
    }
    assert!(crate::day::order(&[]).is_empty());
}

#[test]
fn a_uuids_bits_are_read_as_digit_by_digit_reading_reads_them_every_byte_at_every_place() {
    // The reading by `char::to_digit`, a digit at a time.
    fn by_digit(s: &str) -> Option<u128> {
        let b = s.as_bytes();
        if b.len() != 36 {
            return None;
        }
        let mut v: u128 = 0;
        for (i, &c) in b.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != b'-' {
                    return None;
                }
                continue;
            }
            v = (v << 4) | u128::from((c as char).to_digit(16)?);
        }
        Some(v)
    }
    let base = "6f1C2a4e-0b7d-4c2a-9E1f-3a5b7c9d1e2f";
    // The reader this machine uses, and the one of eight digits a word kept where SSE2 is not.
    let readers: [fn(&str) -> Option<u128>; 2] =
        [crate::line::uuid_bits, crate::line::uuid_bits_words];
    let mut checked = 0;
    for read in readers {
        for place in 0..36 {
            for byte in 0..=127u8 {
                let mut b = base.as_bytes().to_vec();
                b[place] = byte;
                let s = String::from_utf8(b).unwrap();
                assert_eq!(read(&s), by_digit(&s), "{s:?}");
                checked += 1;
            }
        }
        for s in [
            "",
            "6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1e2",
            "6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1e2fa",
            "6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1eé",
            "6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1é",
        ] {
            assert_eq!(read(s), None, "{s:?}");
        }
        assert_eq!(read(base), Some(0x6f1c_2a4e_0b7d_4c2a_9e1f_3a5b_7c9d_1e2f));
    }
    assert_eq!(checked, 2 * 36 * 128);
}

#[test]
fn an_ids_and_a_sessions_texts_are_written_as_the_formatter_writes_them() {
    // Every digit at every place (on a ground of zeros and of f's), and a few whole values.
    let digits = (0..32).flat_map(|place| {
        (0..16u128).flat_map(move |d| [d << (4 * place), !(0xf << (4 * place)) | d << (4 * place)])
    });
    let mut checked = 0;
    for v in [
        0u128,
        1,
        u128::MAX,
        0x6f1c_2a4e_0b7d_4c2a_9e1f_3a5b_7c9d_1e2f,
    ]
    .into_iter()
    .chain(digits)
    {
        checked += 1;
        let hex = format!("{v:032x}");
        let want = format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        assert_eq!(uuid_text(v), want);
        // The writer of eight digits a word, kept where SSE2 is not, writes them alike.
        assert_eq!(crate::line::hex32_words(v), hex.as_bytes());
        let (mut out, session) = (b"x".to_vec(), v as u64);
        crate::line::push_hex64(session, &mut out);
        assert_eq!(out, format!("x{session:016x}").into_bytes());
    }
    assert_eq!(checked, 4 + 32 * 16 * 2);
}

#[test]
fn a_payload_strings_escapes_are_undone_as_serde_json_undoes_them() {
    // Runs shorter than, equal to and longer than a word between escapes, escapes at either
    // end and side by side, every one-letter escape, and text beyond ASCII.
    let texts = [
        r#"{\"a\":\"b\"}"#,
        r#"\"12345678\"123456789\"1234567\""#,
        r#"\\\/\b\f\n\r\t\"x"#,
        r#"plain, no escape at all"#,
        r#"é🙂\"ünïcödé over eight bytes\"é"#,
        r#"x\""#,
        r#"\"abcdefgh"#,
    ];
    // The text alone, and within a line's string (its index made of the line).
    let undone = |t: &str| {
        let mut stops = crate::scan::Stops::default();
        stops.of(t.as_bytes());
        let alone =
            crate::scan::unescape(t.as_bytes(), 0, &stops, &mut Vec::new()).map(String::from);
        let line = format!("{{\"a\":\"{t}\"}}");
        stops.of(line.as_bytes());
        let raw = &line.as_bytes()[6..line.len() - 2];
        let within = crate::scan::unescape(raw, 6, &stops, &mut Vec::new()).map(String::from);
        assert_eq!(alone, within, "{t}");
        alone
    };
    for t in texts {
        let want: String = serde_json::from_str(&format!("\"{t}\"")).unwrap();
        assert_eq!(undone(t).as_deref(), Some(want.as_str()), "{t}");
    }
    // serde_json decides the rest: a \u escape, an unknown one, a backslash at the end.
    for t in [r#"caf\u00e9 \"x\""#, r#"abcdefgh\q"#, r#"abcdefgh\"#] {
        assert_eq!(undone(t), None, "{t}");
    }
}

#[test]
fn a_strings_end_is_found_from_the_index_where_a_byte_at_a_time_finds_it() {
    // Every byte value at each place of texts across the index's 16-byte compares and 64-bit
    // words, searched from each of the places around it, with the plain bytes ASCII and not.
    let by_byte = |b: &[u8], from: usize| {
        b[from..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
            .map(|n| from + n)
    };
    let mut stops = crate::scan::Stops::default();
    let mut checked = 0;
    for filler in [b'a', 0xc3, 0x7f, 0x20, 0x21, 0x5d] {
        for len in [1, 2, 15, 16, 17, 63, 64, 65, 130] {
            for at in (0..len).filter(|a| a % 7 == 0 || a % 16 < 2 || a % 64 > 61) {
                for c in 0..=255u8 {
                    let mut b = vec![filler; len];
                    b[at] = c;
                    stops.of(&b);
                    for from in [0, at.saturating_sub(1), at, at + 1, len] {
                        assert_eq!(stops.next(from), by_byte(&b, from), "{b:?} from {from}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 791_040);
}
