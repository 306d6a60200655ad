//! What an agent job's pull request changes: from `delay_days` after the job ended with one,
//! the pages, search terms and questions its prompt named answer better (views rise, clicks
//! rise, the assistant answers), by the data file's `[impact]` `change`; only every
//! `respond_every`-th key named of each kind responds (the first, the third, ...), so that
//! the others show what no change looks like.

use super::Emulator;
use super::records::{Search, Turn};
use chrono::{DateTime, NaiveDate, Utc};

/// What a key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A page path.
    Page(String),
    /// A quoted text: a search term, or a question (normalised).
    Quoted(String),
}

/// One change in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    /// Project.
    pub project: String,
    /// The key.
    pub key: Named,
    /// First day changed.
    pub from: NaiveDate,
    /// By how much.
    pub change: f64,
    /// A question's page: the first page the prompt named after it on its line
    /// ([`page_named_after`]), where the job put the answer; the assistant cites it once the
    /// change is in force.
    pub page: Option<String>,
}

/// A question's text as the trends group it: lower case, every run of what is not a letter
/// or a digit one space, trimmed.
pub fn normalised(text: &str) -> String {
    let lower = text.to_lowercase();
    let spaced: String = lower
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The keys a prompt names, in order, each once: the project's page paths it holds as words
/// or as quoted texts, and its other quoted texts (JSON string literals, as docpipe quotes
/// readers' words, or plain double quotes).
pub fn named(prompt: &str, paths: &[String]) -> Vec<Named> {
    let mut out: Vec<Named> = Vec::new();
    let mut push = |k: Named| {
        if !out.contains(&k) {
            out.push(k);
        }
    };
    let words = |part: &str, push: &mut dyn FnMut(Named)| {
        for word in part.split_whitespace() {
            let w = word.trim_end_matches([':', ',', '.', ';', ')']);
            if w.starts_with('/') && paths.iter().any(|p| p == w) {
                push(Named::Page(w.to_string()));
            }
        }
    };
    let mut rest = prompt;
    while let Some(open) = rest.find('"') {
        words(&rest[..open], &mut push);
        let after = &rest[open + 1..];
        // The closing quote: the first one no backslash escapes.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else {
            rest = after;
            break;
        };
        let literal = &after[..end];
        let text = serde_json::from_str::<String>(&format!("\"{literal}\""))
            .unwrap_or_else(|_| literal.to_string());
        if paths.contains(&text) {
            push(Named::Page(text));
        } else if !text.trim().is_empty() {
            push(Named::Quoted(text));
        }
        rest = &after[end + 1..];
    }
    words(rest, &mut push);
    out
}

/// The first page of the project the prompt names on the line of quoted text `quoted` after
/// it (a path, or a URL whose path is one): where the job was told the answer goes.
pub fn page_named_after(prompt: &str, quoted: &str, paths: &[String]) -> Option<String> {
    let literal = serde_json::to_string(quoted).ok()?;
    let at = prompt
        .find(&literal)
        .map(|i| i + literal.len())
        .or_else(|| prompt.find(quoted).map(|i| i + quoted.len()))?;
    let line = prompt[at..].lines().next().unwrap_or("");
    line.split(|c: char| c.is_whitespace() || matches!(c, '"' | ',' | '|' | ';' | '(' | ')'))
        .map(|w| w.trim_end_matches(['.', ':']))
        .map(|w| match w.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
            None => w,
        })
        .find(|w| w.starts_with('/') && paths.iter().any(|p| p == w))
        .map(str::to_string)
}

/// The keys of `named` that respond: every `every`-th of each kind, from the first.
pub fn responding(named: Vec<Named>, every: u32) -> Vec<Named> {
    if every == 0 {
        return Vec::new();
    }
    let (mut pages, mut quoted) = (0u32, 0u32);
    named
        .into_iter()
        .filter(|k| {
            let n = match k {
                Named::Page(_) => &mut pages,
                Named::Quoted(_) => &mut quoted,
            };
            *n += 1;
            (*n - 1).is_multiple_of(every)
        })
        .collect()
}

impl Emulator {
    /// Records the changes of a job that ended with a pull request at `ended`, for what its
    /// prompt named.
    pub(super) fn job_changed(&self, project: &str, prompt: &str, ended: DateTime<Utc>) {
        let impact = &self.data().impact;
        let Some(g) = self.generator(project) else {
            return;
        };
        let from = ended.date_naive() + chrono::Duration::days(i64::from(impact.delay_days));
        let keys = responding(named(prompt, g.paths()), impact.respond_every);
        let effects: Vec<Effect> = keys
            .into_iter()
            .map(|key| Effect {
                project: project.to_string(),
                page: match &key {
                    Named::Quoted(q) => page_named_after(prompt, q, g.paths()),
                    Named::Page(_) => None,
                },
                key,
                from,
                change: impact.change,
            })
            .collect();
        self.lock().effects.extend(effects);
    }

    /// The change in force on `day` that answers `question` now (the same question in other
    /// case or punctuation), if a job's pull request made one.
    pub fn answering(&self, project: &str, question: &str, day: NaiveDate) -> Option<Effect> {
        let asked = normalised(question);
        self.effects(project)
            .into_iter()
            .find(|e| e.from <= day && matches!(&e.key, Named::Quoted(q) if normalised(q) == asked))
    }

    /// The changes in force for a project.
    pub fn effects(&self, project: &str) -> Vec<Effect> {
        self.lock()
            .effects
            .iter()
            .filter(|e| e.project == project)
            .cloned()
            .collect()
    }

    /// The number of changes recorded: part of the page rows' cache key, so that rows computed
    /// before a change came are not served after it.
    pub(super) fn effect_count(&self) -> u64 {
        self.lock().effects.len() as u64
    }
}

/// Page `path`'s views on `day` multiplied by its change, when one is in force.
pub fn page_factor(effects: &[Effect], path: &str, day: NaiveDate) -> f64 {
    effects
        .iter()
        .filter(|e| e.from <= day && matches!(&e.key, Named::Page(p) if p == path))
        .fold(1.0, |f, e| f * (1.0 + e.change))
}

/// A day's search terms with the changes in force: a named term's searches without a click
/// shrink by its change.
pub fn change_searches(effects: &[Effect], day: NaiveDate, searches: &mut [Search]) {
    for s in searches {
        for e in effects {
            if e.from <= day && matches!(&e.key, Named::Quoted(q) if *q == s.query) {
                s.ctr = ((s.ctr + (1.0 - s.ctr) * e.change) * 10_000.0).round() / 10_000.0;
            }
        }
    }
}

/// Turns with the changes in force: an unanswered turn of a named question is answered with
/// the change's chance (the same turn always the same way).
pub fn change_turns(effects: &[Effect], turns: &mut [Turn]) {
    if effects.is_empty() {
        return;
    }
    for t in turns.iter_mut().filter(|t| !t.answered) {
        let day = t.at.date_naive();
        let question = normalised(&t.query);
        for e in effects {
            let named = matches!(&e.key, Named::Quoted(q) if normalised(q) == question);
            if !named || e.from > day {
                continue;
            }
            let roll = super::generate::unit(super::generate::mix(
                super::generate::hash_str(&t.id) ^ t.at.timestamp_millis() as u64,
            ));
            if roll < e.change {
                t.answered = true;
                t.response = format!(
                    "The documentation now answers this: see {}.",
                    t.sources
                        .first()
                        .map_or("the guide", |(title, _)| title.as_str())
                );
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_names_pages_and_quoted_texts_and_every_other_responds() {
        let paths = vec!["/guides/webhooks".to_string(), "/api/errors".to_string()];
        let prompt = "Pages:\n- /guides/webhooks: 70% of 400 views\n- /api/errors, and /nope\n\
                      - \"webhooks example\": 12 searches\n- \"How do I use errors?\": asked 3 times\n\
                      - \"third\"";
        let n = named(prompt, &paths);
        assert_eq!(
            n,
            vec![
                Named::Page("/guides/webhooks".into()),
                Named::Page("/api/errors".into()),
                Named::Quoted("webhooks example".into()),
                Named::Quoted("How do I use errors?".into()),
                Named::Quoted("third".into()),
            ]
        );
        assert_eq!(
            responding(n.clone(), 2),
            vec![
                Named::Page("/guides/webhooks".into()),
                Named::Quoted("webhooks example".into()),
                Named::Quoted("third".into()),
            ]
        );
        assert_eq!(responding(n.clone(), 1), n);
        assert!(responding(n, 0).is_empty());
        assert_eq!(
            normalised("  How do I use  Webhooks ?"),
            "how do i use webhooks"
        );
    }
}
