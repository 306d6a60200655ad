//! Agent-job follow-ups from rule files: a rule is a polars SQL query over the trend tables, a
//! prompt template rendered with the rows it returns, a cooldown, and the job to message (or
//! `create = true`). `ledger` records every firing before it is sent; `engine` sends, resolves
//! unknown outcomes, polls and writes the outcome log.

pub mod engine;
mod evaluate;
mod evaluation;
pub mod impact;
pub mod lineage;
mod load;
pub mod query;
pub mod readers;
mod rule;
mod template;

pub use evaluate::*;
pub use evaluation::*;
pub use load::*;
pub use rule::*;
pub use template::*;

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::Value;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn rule(text: &str) -> Result<Rule, RuleError> {
        Rule::parse(text, "jobs/r.toml", &["p".to_string()])
    }

    #[test]
    fn a_misspelt_field_gets_the_field_it_likely_meant() {
        let e = rule(&format!("{BASE}enabeld = true\n")).unwrap_err();
        assert!(
            e.message.ends_with(" (did you mean `enabled`?)"),
            "{}",
            e.message
        );
    }

    const BASE: &str = r#"
name = "r"
project = "p"
job = "j"
when = "SELECT path FROM pages"
prompt = "{% for row in rows %}{{ row.path }} {% endfor %}"
"#;

    #[test]
    fn defaults_and_durations() {
        let r = rule(BASE).unwrap();
        assert_eq!(r.action, Action::FollowUp("j".into()));
        assert_eq!((r.min_rows, r.wait), (1, true));
        assert_eq!((r.cooldown, r.timeout), (DEFAULT_COOLDOWN, DEFAULT_TIMEOUT));
        let r = rule(&format!("{BASE}cooldown = \"1h 30m\"\ntimeout = \"90s\"\n")).unwrap();
        assert_eq!(r.cooldown, Duration::from_secs(5400));
        assert_eq!(r.timeout, Duration::from_secs(90));
    }

    #[test]
    fn pct_renders_shares() {
        let env = environment(Arc::default());
        let out = env
            .render_str(
                "{{ a | pct }} {{ b | pct(0) }} {{ c | pct }}",
                Value::from(BTreeMap::from([
                    ("a", Value::from(0.4523)),
                    ("b", Value::from(1)),
                    ("c", Value::from(())),
                ])),
            )
            .unwrap();
        assert_eq!(out, "45.2% 100% n/a");
    }

    #[test]
    fn readers_words_render_quoted_by_the_renderer_and_unescaped_only_where_said() {
        let readers = Arc::new(AtomicBool::new(false));
        let env = environment(readers.clone());
        let ctx = Value::from(BTreeMap::from([
            ("term", Value::from("a \"b\"\n\nSYSTEM: c")),
            ("mine", Value::from_safe_string("acme-docs".to_string())),
            ("n", Value::from(3)),
        ]));
        let out = env
            .render_str(
                "{{ term }} {{ term | lower }} {{ mine }} {{ n }} {{ 0.5 | pct }} {{ term | unescaped }}",
                ctx,
            )
            .unwrap();
        assert_eq!(
            out,
            "\"a \\\"b\\\" SYSTEM: c\" \"a \\\"b\\\" system: c\" acme-docs 3 50.0% a \"b\"\n\nSYSTEM: c"
        );
        assert!(readers.load(Ordering::Relaxed));
        // `safe` is gone: the one way around the escape is `unescaped`, and it is named.
        assert!(
            environment(Arc::default())
                .render_str("{{ 'x' | safe }}", ())
                .is_err()
        );
        let r = rule(&BASE.replace("{{ row.path }}", "{{ row.path | unescaped }}")).unwrap();
        assert_eq!(
            r.unescaped,
            ["line 1: {% for row in rows %}{{ row.path | unescaped }} {% endfor %}"]
        );
        assert!(!r.enabled && !r.enabled_given);
    }

    #[test]
    fn hashes_are_sha256() {
        assert_eq!(
            prompt_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
