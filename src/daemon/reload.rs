//! The daemon's rule files, read again at each export tick and on SIGHUP (`Daemon::reload_rules`
//! in work.rs): a rule file added, changed or removed takes effect without a restart, and says
//! so in the log. A file that no longer loads keeps the rule it held before (and `status` flags
//! it, as it flags any). What is here: the listing, what changed, the schedules.

use crate::rules::Rule;
use std::collections::BTreeMap;
use std::path::Path;

/// The rule files of a folder (`*.toml`, as the rules' loader reads them), by path, with a
/// hash of their bytes.
pub type Files = BTreeMap<String, u64>;

/// The rule files of `dir` now (none when it is not a folder).
pub fn rule_files(dir: &Path) -> Files {
    use std::hash::BuildHasher;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Files::new();
    };
    let hasher = foldhash::quality::FixedState::with_seed(0x72756c65);
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_default();
            (p.display().to_string(), hasher.hash_one(&bytes))
        })
        .collect()
}

/// What changed between two listings: `added a.toml; changed b.toml; removed c.toml`.
pub fn changes(before: &Files, now: &Files) -> String {
    let name = |p: &String| {
        Path::new(p)
            .file_name()
            .map_or(p.clone(), |n| n.to_string_lossy().into_owned())
    };
    let mut out = Vec::new();
    for (p, h) in now {
        match before.get(p) {
            None => out.push(format!("added {}", name(p))),
            Some(b) if b != h => out.push(format!("changed {}", name(p))),
            Some(_) => {}
        }
    }
    for p in before.keys().filter(|p| !now.contains_key(*p)) {
        out.push(format!("removed {}", name(p)));
    }
    out.join("; ")
}

/// The scheduled rules, by name and schedule: what the scheduler holds.
pub(super) fn schedules(rules: &[Rule]) -> Vec<(String, String)> {
    rules
        .iter()
        .filter_map(|r| r.schedule.clone().map(|s| (r.name.clone(), s)))
        .collect()
}
