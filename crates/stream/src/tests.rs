use crate::batch::{Batch, Ev, Setup, Strings, session_hash};
use crate::day::Classifier;
use crate::line::{Bad, decode, id_bits, referrer_host, uuid_text};
use docpipe_agents::Agents;
use std::collections::HashMap;

const OBJECT: &str = r#"{"event_id":"6f1c2a4e-0b7d-4c2a-9e1f-3a5b7c9d1e2f","subdomain":"acme","user_id":"u-1","anon_id":"a-1","session_id":"s-1","created_at":"2026-11-27T10:00:00.250Z","event":"docs.content.view","path":"/guides/a","referrer":"https://www.perplexity.ai/search?q=x","user_agent":"Mozilla/5.0 (compatible; GPTBot/1.2)","ip":"203.0.113.9","properties":{"title":"A"}}"#;

fn fields(line: &str) -> Result<String, Bad> {
    decode(line.as_bytes(), |f| {
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
    })
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
fn a_batch_drops_a_repeated_id_and_counts_what_it_cannot_place() {
    let setup = Setup {
        projects: vec!["p".into()],
        subdomains: HashMap::from([("acme".to_string(), 0)]),
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
    assert_eq!((b.events, b.duplicates, b.lines), (1, 1, 5));
    // 10:00 UTC is 05:00 in New York: the same day.
    let days: Vec<_> = b.days.keys().map(|(p, d)| (*p, d.to_string())).collect();
    assert_eq!(days, [(0, "2026-11-27".to_string())]);
    assert_eq!(
        b.unread.line().unwrap(),
        "1 of an unknown event (custom.thing ×1); 1 of a subdomain no project maps (other ×1)"
    );
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
