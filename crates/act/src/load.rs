//! Rule files read: one rule per file, each parsed alone (one bad file does not hide the
//! others).

use super::rule::*;
use std::collections::HashMap;
use std::path::Path;

/// Rules from named texts (file name, content), each checked; names must be unique. Returns the
/// valid rules and a problem per invalid file.
pub fn parse_all(files: &[(String, String)], projects: &[String]) -> (Vec<Rule>, Vec<RuleError>) {
    let mut rules = Vec::new();
    let mut problems = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for (file, text) in files {
        match Rule::parse(text, file, projects) {
            Ok(rule) => {
                if let Some(first) = names.get(&rule.name) {
                    problems.push(RuleError {
                        file: file.clone(),
                        message: format!("name {:?} is already used by {first}", rule.name),
                    });
                } else {
                    names.insert(rule.name.clone(), file.clone());
                    rules.push(rule);
                }
            }
            Err(e) => problems.push(e),
        }
    }
    (rules, problems)
}

/// Loads and checks every `*.toml` file of a folder (other files are left alone), in name
/// order: the valid rules, and a problem per file that is not one.
pub fn load_dir(dir: &Path, projects: &[String]) -> Result<(Vec<Rule>, Vec<RuleError>), RuleError> {
    let entries = std::fs::read_dir(dir).map_err(|e| RuleError {
        file: dir.display().to_string(),
        message: format!("cannot read the rules folder: {e}"),
    })?;
    let mut paths: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for p in paths {
        let file = p.display().to_string();
        match std::fs::read(&p).map(String::from_utf8) {
            Ok(Ok(text)) => files.push((file, text)),
            Ok(Err(_)) => problems.push(RuleError {
                file,
                message: "not UTF-8 text".into(),
            }),
            Err(e) => problems.push(RuleError {
                file,
                message: format!("cannot read: {e}"),
            }),
        }
    }
    let (rules, more) = parse_all(&files, projects);
    problems.extend(more);
    Ok((rules, problems))
}
