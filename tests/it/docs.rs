//! The documentation stays true: every config field is in the reference, every relative link
//! of the README and `docs/` resolves (file and heading), and the README stays a front door.

use crate::common::*;

/// The fields a config section accepts, as the loader's error for an unknown one lists them.
fn fields_of(section: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    let text = match section {
        "" => "zz_unknown = 1\n[service]\nbase_url = \"http://x\"\n".to_string(),
        "[service]" => "[service]\nbase_url = \"http://x\"\nzz_unknown = 1\n".to_string(),
        s => format!("[service]\nbase_url = \"http://x\"\n{s}\nzz_unknown = 1\n"),
    };
    std::fs::write(&file, text).unwrap();
    let err = docpipe::config::Settings::load(&file)
        .unwrap_err()
        .to_string();
    named_fields(&err, section)
}

/// The fields an unknown-field error lists: "expected one of `a`, `b`", "expected `a` or `b`",
/// "expected `a`", on the unknown field's line (a missing `id` of the table may follow on a
/// line of its own).
fn named_fields(err: &str, section: &str) -> Vec<String> {
    let list = err
        .split("expected ")
        .nth(1)
        .and_then(|l| l.lines().next())
        .unwrap_or_else(|| panic!("{section}: {err}"));
    list.trim_start_matches("one of ")
        .split(", ")
        .flat_map(|f| f.split(" or "))
        .map(|f| f.trim().trim_matches('`').to_string())
        .collect()
}

#[test]
fn every_config_field_is_in_the_reference() {
    let reference = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let mut missing = Vec::new();
    for section in [
        "",
        "[service]",
        "[[organizations]]",
        "[[projects]]",
        "[export]",
        "[rules]",
        "[daemon]",
        "[freshness]",
        "[freshness.dataset.searches]",
        "[state]",
        "[alerts]",
        "[warehouse]",
    ] {
        let fields = fields_of(section);
        assert!(!fields.is_empty(), "{section}");
        for f in fields {
            let named = reference.contains(&format!("`{f}`"))
                || reference.contains(&format!("\n{f} ="))
                || reference.contains(&format!("\n# {f} ="))
                || reference.contains(&format!("[{f}]"))
                || reference.contains(&format!("[[{f}]]"));
            if !named {
                missing.push(format!("{section} {f}"));
            }
        }
    }
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "fields missing in docs/config.md"
    );
}

/// A heading's anchor as GitHub makes it.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_resolves_to_a_file_and_a_heading() {
    let mut files = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for part in text.split("](").skip(1) {
            let Some(target) = part.split(')').next() else {
                continue;
            };
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !dest.is_file() {
                broken.push(format!("{}: {target} (no file)", file.display()));
                continue;
            }
            if let Some(a) = anchor {
                let dest_text = std::fs::read_to_string(&dest).unwrap();
                if !anchors(&dest_text).iter().any(|x| x == a) {
                    broken.push(format!("{}: {target} (no heading)", file.display()));
                }
            }
        }
    }
    assert_eq!(broken, Vec::<String>::new());
    assert!(checked >= 10, "{checked} links checked");
}

#[test]
fn the_readme_is_a_front_door_of_at_most_1500_words_with_the_two_commands() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let words = readme.split_whitespace().count();
    assert!(words <= 1500, "{words} words: reference belongs in docs/");
    assert!(readme.contains("cargo run --locked -- demo\n"));
    assert!(readme.contains("bash .ci/run\n"));
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.contains("cargo test --locked"), "{ci}");
}

/// The fields of a section of the emulator's data file, as its reader names them when it
/// meets one it does not know.
fn data_fields_of(section: &str) -> Vec<String> {
    let text = match section {
        "" => "start_date = \"2026-01-01\"\nzz_unknown = 1\n".to_string(),
        s => format!("start_date = \"2026-01-01\"\n{s}\nzz_unknown = 1\n"),
    };
    let err = docpipe::emulator::data::DataFile::parse(&text, "d.toml")
        .unwrap_err()
        .to_string();
    named_fields(&err, section)
}

#[test]
fn every_field_of_the_emulators_data_file_is_in_docs_service_md() {
    let reference = std::fs::read_to_string(root().join("docs/service.md")).unwrap();
    let mut missing = Vec::new();
    for section in [
        "",
        "[[organizations]]",
        "[[projects]]",
        "[[domains]]",
        "[[jobs]]",
        "[limits]",
        "[faults]",
        "[impact]",
        "[[readers]]",
        "[stream]",
        "[[automations]]",
    ] {
        let fields = data_fields_of(section);
        assert!(fields.len() > 2, "{section}: {fields:?}");
        for f in fields {
            let named = [format!("`{f}`"), format!("`[{f}]`"), format!("`[[{f}]]`")]
                .iter()
                .any(|n| reference.contains(n.as_str()));
            if !named {
                missing.push(format!("{section} {f}"));
            }
        }
    }
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "fields missing in docs/service.md"
    );
}
