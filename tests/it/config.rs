//! The config file read and checked: every error named at once, in the file's order, with its
//! line and field, and no secret in a message.

use chrono::NaiveDate;
use docpipe::api::KeySource;
use docpipe::config::*;
use std::path::Path;

fn parse_error(text: &str) -> String {
    RawConfig::parse(text, "t.toml").unwrap_err().to_string()
}

/// The config `text` read and checked, or its error's text.
fn validated(text: &str) -> Result<Settings, String> {
    RawConfig::parse(text, "t.toml")
        .unwrap()
        .validate("t.toml")
        .map_err(|e| e.to_string())
}

#[test]
fn a_base_url_with_a_path_or_credentials_and_an_output_url_with_credentials_are_refused_without_the_secret()
 {
    let invalid = |base: &str| {
        let text = format!(
            "[service]\nbase_url = \"{base}\"\n[[organizations]]\nid = \"o\"\nadmin_key_env = \"K\"\n[[projects]]\nid = \"p\"\norganization = \"o\"\n"
        );
        validated(&text).unwrap_err()
    };
    assert_eq!(
        invalid("https://api.example.com/v2?x=1"),
        "invalid config t.toml: service.base_url \"https://api.example.com/v2?x=1\" must be the service's address alone, without a path or query (like \"https://api.mintlify.com\"): docpipe adds each operation's path"
    );
    let err = invalid("https://user:s3cr3t@api.example.com");
    assert_eq!(
        err,
        "invalid config t.toml: service.base_url holds credentials (user:password@): write the service's address alone; keys come from the environment"
    );
    let fine = "[service]\nbase_url = \"http://127.0.0.1:8080/\"\n[[organizations]]\nid = \"o\"\nadmin_key_env = \"K\"\n[[projects]]\nid = \"p\"\norganization = \"o\"\n";
    assert!(validated(fine).is_ok());
    let err = Location::parse("s3://AKIDEXAMPLE:s3cr3tKey@bucket/x").unwrap_err();
    assert_eq!(
        err,
        "s3://bucket/…: write the bucket and the prefix only; credentials and options come from the environment"
    );
}

#[test]
fn a_warehouse_without_its_variable_or_with_a_bad_schema_or_connections_is_named() {
    let invalid = |warehouse: &str| {
        let text = format!(
            "[service]\nbase_url = \"http://x\"\n[[organizations]]\nid = \"o\"\nadmin_key_env = \"K\"\n[[projects]]\nid = \"p\"\norganization = \"o\"\n[warehouse]\n{warehouse}"
        );
        validated(&text).map(|s| s.warehouse.map(|w| (w.schema, w.connections)))
    };
    assert_eq!(
        invalid("postgres_url_env = \"W\"\n"),
        Ok(Some(("docpipe".into(), WAREHOUSE_CONNECTIONS)))
    );
    assert_eq!(
        invalid("connections = 4\n"),
        Err("invalid config t.toml: [warehouse] connections needs postgres_url_env (the variable holding the database's URL)".into())
    );
    assert_eq!(
        invalid("postgres_url_env = \"W\"\nconnections = 0\nschema = \"Docs\"\n"),
        Err("invalid config t.toml: 2 problems:\n  [warehouse] schema \"Docs\" must be lowercase letters, digits and _ (at most 63), starting with a letter or _\n  [warehouse] connections = 0 must be from 1 to 16".into())
    );
}

#[test]
fn a_second_table_of_one_name_is_one_error_and_its_fields_are_not_blamed_on_the_table_before() {
    let text = "[service]\nbase_url = \"http://x\"\n[export]\noutput_dir = \"out\"\n[daemon]\nlisten = \"\"\n[export]\nlookback_days = 3\n";
    assert_eq!(
        parse_error(text),
        "invalid config t.toml: line 7: duplicate key"
    );
}

#[test]
fn an_unknown_field_suggests_the_field_it_likely_meant() {
    assert_eq!(
        docpipe::text::did_you_mean(
            "unknown field `lookback_dayz`, expected one of `output_dir`, `lookback_days`"
        ),
        " (did you mean `lookback_days`?)"
    );
    assert_eq!(
        docpipe::text::did_you_mean("unknown field `colour`, expected `dir` or `after_export`"),
        ""
    );
    assert_eq!(docpipe::text::did_you_mean("duplicate key"), "");
}

#[test]
fn every_field_error_is_reported_at_once_in_file_order() {
    let text =
        "[service]\nbase_url = \"http://x\"\ntimeout_secs = \"ten\"\n[export]\nlookback_dayz = 3\n";
    let err = RawConfig::parse(text, "t.toml").unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid config t.toml: 2 problems:\n  line 3 ([service] timeout_secs): invalid type: string \"ten\", expected u64\n  line 5 ([export] lookback_dayz): unknown field `lookback_dayz`, expected one of `output_dir`, `state_dir`, `lookback_days`, `trends_after_export`, `timezone`, `feedback_recheck_days`, `assistant_overlap_days`, `threads_per_run` (did you mean `lookback_days`?)"
    );
    // With the values that do not fit together, after the lines.
    let err = RawConfig::parse(
        "[service]\nbase_url = \"http://x\"\ntimeout_secs = \"ten\"\n[[projects]]\nid = \"a\"\norganization = \"nope\"\n",
        "t.toml",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "invalid config t.toml: 2 problems:\n  line 3 ([service] timeout_secs): invalid type: string \"ten\", expected u64\n  project a names organization nope, which is not configured"
    );
    // A required field given the wrong type is one problem, not two.
    let err = RawConfig::parse("[service]\nbase_url = 5\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "invalid config t.toml: line 2 ([service] base_url): invalid type: integer `5`, expected a string"
    );
}

#[test]
fn a_time_zone_name_close_to_one_gets_a_suggestion() {
    assert_eq!(
        zone_like("europe/berlin"),
        " (did you mean \"Europe/Berlin\"?)"
    );
    assert_eq!(
        zone_like("America/New York"),
        " (did you mean \"America/New_York\"?)"
    );
    assert_eq!(
        zone_like("Europe/Berln"),
        " (did you mean \"Europe/Berlin\"?)"
    );
    assert_eq!(zone_like("Mars/Olympus_Mons"), "");
}

#[test]
fn service_may_be_left_out_and_a_missing_field_blames_no_other_line() {
    let raw = RawConfig::parse(
        "[[organizations]]\nid = \"acme\"\nadmin_key_env = \"K\"\n[[projects]]\nid = \"docs\"\norganization = \"acme\"\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(raw.service.base_url, "https://api.mintlify.com");
    // A project without its organization: that one problem, not its neighbours'.
    assert_eq!(
        parse_error("[[organizations]]\nid = \"acme\"\n[[projects]]\nid = \"docs\"\n"),
        "invalid config t.toml: line 3: missing field `organization`"
    );
}

#[test]
fn a_key_comes_from_one_place_and_alerts_name_a_variable_not_a_url() {
    let org = "[[organizations]]\nid = \"acme\"\n";
    let project = "[[projects]]\nid = \"docs\"\norganization = \"acme\"\n";
    assert_eq!(
        validated(&format!(
            "{org}admin_key_env = \"K\"\nadmin_key_file = \"k\"\n{project}[alerts]\nwebhook_url_env = \"https://hooks.example/T0\"\n"
        ))
        .unwrap_err(),
        "invalid config t.toml: 2 problems:\n  organization acme: admin_key_env and admin_key_file both name the admin key: keep one\n  [alerts] webhook_url_env \"https://hooks.example/T0\" is not an environment variable's name (letters, digits and _): the URL itself goes in the environment, not in the file"
    );
    assert_eq!(
        validated(&format!(
            "{org}{project}[alerts]\npage_url = \"status.example\"\n"
        ))
        .unwrap_err(),
        "invalid config t.toml: 3 problems:\n  project docs: organization acme has no admin_key_env or admin_key_file\n  [alerts] page_url \"status.example\" is not an http:// or https:// address\n  [alerts] page_url needs webhook_url_env (the variable holding the webhook's address)"
    );
    let mut raw = RawConfig::parse(
        &format!("{org}admin_key_file = \"keys/acme.key\"\n{project}[alerts]\nwebhook_url_env = \"HOOK\"\n"),
        "t.toml",
    )
    .unwrap();
    let given = raw.clone();
    raw.rebase(Path::new("/etc/docpipe"), None);
    let s = raw.validate("t.toml").unwrap();
    assert_eq!(
        s.organizations[0].admin_key,
        Some(KeySource::File("/etc/docpipe/keys/acme.key".into()))
    );
    // Under systemd with LoadCredential=, a relative key file is a credential's name.
    let mut raw = given;
    raw.rebase(
        Path::new("/etc/docpipe"),
        Some(Path::new("/run/credentials/docpipe.service")),
    );
    let s = raw.validate("t.toml").unwrap();
    assert_eq!(
        s.organizations[0].admin_key,
        Some(KeySource::File(
            "/run/credentials/docpipe.service/keys/acme.key".into()
        ))
    );
    assert_eq!(s.alerts.unwrap().webhook_url_env, "HOOK");
}

#[test]
fn a_toml_error_names_its_line_and_field() {
    let service = "[service]\nbase_url = \"http://x\"\n";
    assert_eq!(
        parse_error(&format!("{service}timeout_secs = \"ten\"\n")),
        "invalid config t.toml: line 3 ([service] timeout_secs): invalid type: string \"ten\", expected u64"
    );
    assert_eq!(
        parse_error(&format!("{service}base_url = \"http://y\"\n")),
        "invalid config t.toml: line 3 ([service] base_url): duplicate key"
    );
    assert_eq!(
        parse_error(&format!(
            "{service}[[projects]]\nid = \"p\"\norganization = \"a\"\nstart_date = 2026-01-01\n"
        )),
        "invalid config t.toml: 2 problems:\n  line 6 ([[projects]] start_date): invalid type: map, expected a formatted date string (write dates in quotes: start_date = \"2026-01-01\")\n  project p names organization a, which is not configured"
    );
}

#[test]
fn freshness_durations_and_datasets_are_checked_together() {
    let text = "[service]\nbase_url = \"http://x\"\n[freshness]\ntoday = \"soon\"\nrecent = \"8h\"\n\
                [freshness.dataset.views]\ntoday = \"2h\"\n[freshness.dataset.searches]\ntoday = \"30s\"\n";
    let err = validated(text).unwrap_err();
    assert_eq!(
        err,
        "invalid config t.toml: 4 problems:\n  freshness.today \"soon\" is not a duration (expected number at 0; write \"1h\", \"90m\" or \"2h 30m\")\n  freshness: recent (8h) must not be longer than oldest (6h)\n  freshness.dataset.searches.today \"30s\" must be between 1 minute and 31 days\n  freshness.dataset.views: unknown dataset \"views\" (known: page_views, visitors, searches, feedback, feedback_by_page, assistant, caller_stats, threads)"
    );
    let ok = "[service]\nbase_url = \"http://x\"\n[freshness]\ntoday = \"90m\"\n[freshness.dataset.searches]\nrecent = \"3h\"\n[freshness.dataset.feedback]\nfull = \"12h\"\n";
    let s = validated(ok).unwrap();
    let h = chrono::Duration::hours;
    assert_eq!(
        s.freshness.policy("page_views").today,
        chrono::Duration::minutes(90)
    );
    assert_eq!(
        s.freshness.policy("searches"),
        docpipe::planner::Policy {
            today: chrono::Duration::minutes(90),
            recent: h(3),
            oldest: h(6),
            full: h(6)
        }
    );
    assert_eq!(s.freshness.policy("feedback").full, h(12));
}

#[test]
fn days_and_ranges_a_user_could_mean() {
    let d = |s: &str| s.parse::<NaiveDate>().unwrap();
    assert_eq!(check_range(d("2026-01-01"), d("2026-03-01")), Ok(()));
    assert_eq!(
        check_range(d("1999-12-31"), d("2026-03-01")),
        Err(
            "--from 1999-12-31 is out of range: days from 2000-01-01 to 2099-12-31 are accepted"
                .into()
        )
    );
    assert_eq!(
        check_day("project p: start_date", d("2100-01-01")),
        Err("project p: start_date 2100-01-01 is out of range: days from 2000-01-01 to 2099-12-31 are accepted".into())
    );
}
