//! What the in-process tests and the scenarios of `review` share.

use docpipe::emulator::data::{DataFile, ReaderKind, ReaderText};
use docpipe::rules::Rule;

/// `data` with every text planted on alpha as a search, a question and a feedback comment.
pub fn planted(mut data: DataFile, texts: &[(String, bool)]) -> DataFile {
    for (text, _) in texts {
        for (kind, per_day) in [
            (ReaderKind::Search, 3000),
            (ReaderKind::Question, 20),
            (ReaderKind::Feedback, 5),
        ] {
            data.readers.push(ReaderText {
                project: "alpha".into(),
                kind,
                text: text.clone(),
                per_day,
            });
        }
    }
    data
}

/// An enabled rule of alpha that creates a job without waiting for it.
pub fn rule(name: &str, when: &str, prompt: &str, extra: &str) -> Rule {
    let text = format!(
        "enabled = true\nname = {name:?}\nproject = \"alpha\"\ncreate = true\nwait = false\nwhen = {when:?}\nprompt = {prompt:?}\n{extra}\n"
    );
    let projects = ["alpha", "beta", "gamma"].map(String::from);
    Rule::parse(&text, &format!("jobs/{name}.toml"), &projects).unwrap()
}
