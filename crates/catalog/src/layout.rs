//! Where outputs go: Hive partition paths, temporary names, and the atomic write-and-rename
//! every file of the output folder goes through (so a reader never sees a partial file).
//!
//! `<out>/<table>/project=<id>/date=<YYYY-MM-DD>/part-00000.parquet` for daily tables,
//! `<out>/<table>/project=<id>/part-00000.parquet` for per-project ones (`agent_runs`),
//! `<out>/.walks/project=<id>/date=<YYYY-MM-DD>.pages` for the journals of walks in progress.

use chrono::NaiveDate;
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The one file of a partition.
pub const PART: &str = "part-00000.parquet";
/// Prefix of temporary files (left only by a killed process; swept at the next start).
pub const TMP_PREFIX: &str = ".tmp-";
/// The folder of the walks' journals, in the output folder.
pub const WALKS_DIR: &str = ".walks";

/// Escapes a partition value as Hive does: `%XX` for characters that are not safe in a path.
pub fn escape_partition_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        let unsafe_char = c.is_control() || "\"#%'*/:=?\\\u{7f}{[]^".contains(c);
        if unsafe_char {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A partition value as [`escape_partition_value`] wrote it, unescaped (`None`: not one it
/// writes).
pub fn unescape_partition_value(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The projects with a partition folder in any of `tables` of `root`, sorted.
pub fn projects_of(root: &Path, tables: &[&str]) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    for table in tables {
        for e in std::fs::read_dir(root.join(table))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name();
            if let Some(p) = name
                .to_str()
                .and_then(|n| n.strip_prefix("project="))
                .and_then(unescape_partition_value)
            {
                out.insert(p);
            }
        }
    }
    out.into_iter().collect()
}

/// `project=<id>`, escaped.
fn project_segment(project: &str) -> String {
    format!("project={}", escape_partition_value(project))
}

/// `<root>/<table>/project=<id>`: a per-project partition (and the parent of its days).
pub fn project_dir(root: &Path, table: &str, project: &str) -> PathBuf {
    root.join(table).join(project_segment(project))
}

/// `<root>/<table>/project=<id>/date=<YYYY-MM-DD>`: a daily partition.
pub fn partition_dir(root: &Path, table: &str, project: &str, day: NaiveDate) -> PathBuf {
    project_dir(root, table, project).join(format!("date={}", day.format("%Y-%m-%d")))
}

/// The days of `<root>/<table>/project=<id>` that have a partition folder, from one listing
/// of the project's folder (a partition folder holds its file: [`Pending::create`] makes it
/// for the file, and [`sweep_leftovers`] removes one left empty).
pub fn partition_days(root: &Path, table: &str, project: &str) -> HashSet<NaiveDate> {
    let Ok(entries) = std::fs::read_dir(project_dir(root, table, project)) else {
        return HashSet::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|k| k.is_dir()))
        .filter_map(|e| {
            let name = e.file_name();
            crate::calendar::parse_day(name.to_str()?.strip_prefix("date=")?)
        })
        .collect()
}

/// The journal of a walk in progress: `<root>/.walks/project=<id>/<dataset>.<from>.<to>.pages`.
pub fn journal_path(
    root: &Path,
    dataset: &str,
    project: &str,
    from: NaiveDate,
    to: NaiveDate,
) -> PathBuf {
    root.join(WALKS_DIR)
        .join(project_segment(project))
        .join(format!("{dataset}.{from}.{to}.pages"))
}

/// A file being written under a temporary name beside its destination; [`Pending::commit`]
/// renames it into place.
#[derive(Debug)]
pub struct Pending {
    tmp: PathBuf,
    dest: PathBuf,
}

impl Pending {
    /// Creates the destination's folder and a temporary file beside it, named for this process
    /// (so that the sweep of another process leaves it alone while this one lives).
    pub fn create(dest: &Path) -> std::io::Result<(Self, File)> {
        let dir = dest.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!("{TMP_PREFIX}{}-{name}", std::process::id()));
        // Another process's sweep may remove the partition folder while it is still empty.
        let file = match File::create(&tmp) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                File::create(&tmp)?
            }
            done => done?,
        };
        Ok((
            Self {
                tmp,
                dest: dest.to_path_buf(),
            },
            file,
        ))
    }

    /// The destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Renames into place (atomically replacing any previous file) and syncs the folder.
    pub fn commit(self) -> std::io::Result<PathBuf> {
        std::fs::rename(&self.tmp, &self.dest)?;
        if let Some(dir) = self.dest.parent() {
            File::open(dir).and_then(|d| d.sync_all())?;
        }
        Ok(self.dest)
    }

    /// Removes the temporary file.
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Writes `bytes` as `dest` whole: under a temporary name beside it, synced, then renamed into
/// place (the temporary file is removed when writing fails).
pub fn write_whole(dest: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let (pending, mut file) = Pending::create(dest)?;
    let written = std::io::Write::write_all(&mut file, bytes).and_then(|()| file.sync_all());
    drop(file);
    match written {
        Ok(()) => pending.commit(),
        Err(e) => {
            pending.abandon();
            Err(e)
        }
    }
}

/// Whether the process that named a temporary file `.tmp-<pid>-...` is gone.
fn writer_is_gone(name: &str) -> bool {
    name.strip_prefix(TMP_PREFIX)
        .and_then(|rest| rest.split('-').next())
        .and_then(|p| p.parse::<u32>().ok())
        .is_none_or(process_is_gone)
}

/// Whether process `pid` of this machine has ended (never this one).
pub fn process_is_gone(pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = i32::try_from(pid) else {
            return true;
        };
        // SAFETY: kill with signal 0 only checks that the process exists; it sends nothing.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        !alive
    }
    #[cfg(not(unix))]
    true
}

/// Removes the temporary files that killed processes left anywhere in the output folder (every
/// table's partitions, `trends/`, `agent_runs/`); a live process's files are left alone.
/// Returns how many were removed.
pub fn sweep_leftovers(root: &Path) -> usize {
    let mut removed = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut left = 0;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(kind) = e.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if name != WALKS_DIR {
                    stack.push(e.path());
                }
                left += 1;
            } else if name.starts_with(TMP_PREFIX)
                && writer_is_gone(&name)
                && std::fs::remove_file(e.path()).is_ok()
            {
                removed += 1;
            } else {
                left += 1;
            }
        }
        // A day's partition folder left empty (its file deleted, or its write cut off) goes
        // too: the planner takes a partition folder for its file (`partition_days`).
        let partition = dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("date="));
        if partition && left == 0 {
            let _ = std::fs::remove_dir(&dir);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_escaped_like_hive() {
        assert_eq!(escape_partition_value("acme-docs"), "acme-docs");
        assert_eq!(escape_partition_value("a/b=c%"), "a%2Fb%3Dc%25");
        for v in ["acme-docs", "a/b=c%", "p:1 é", ""] {
            assert_eq!(
                unescape_partition_value(&escape_partition_value(v)).as_deref(),
                Some(v)
            );
        }
        assert_eq!(unescape_partition_value("a%2"), None);
        assert_eq!(unescape_partition_value("a%zz"), None);
        let d = NaiveDate::from_ymd_opt(2026, 3, 1).unwrap();
        assert_eq!(
            partition_dir(Path::new("/out"), "page_views", "p:1", d),
            PathBuf::from("/out/page_views/project=p%3A1/date=2026-03-01")
        );
        assert_eq!(
            journal_path(
                Path::new("/out"),
                "searches",
                "p/1",
                d,
                d.succ_opt().unwrap()
            ),
            PathBuf::from("/out/.walks/project=p%2F1/searches.2026-03-01.2026-03-02.pages")
        );
    }

    #[test]
    fn the_sweep_removes_dead_writers_files_in_every_table_and_keeps_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let dead = format!("{TMP_PREFIX}999999999-part-00000.parquet");
        let mine = format!("{TMP_PREFIX}{}-daily.csv", std::process::id());
        for sub in [
            "page_views/project=a/date=2026-03-01",
            "trends",
            "agent_runs/project=a",
        ] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
            std::fs::write(root.join(sub).join(&dead), b"x").unwrap();
        }
        std::fs::write(root.join("trends").join(&mine), b"x").unwrap();
        std::fs::write(root.join("trends").join("daily.csv"), b"x").unwrap();
        assert_eq!(sweep_leftovers(root), 3);
        assert!(root.join("trends").join(&mine).exists());
        assert!(root.join("trends").join("daily.csv").exists());
        let (p, mut f) = Pending::create(&root.join("x/y.csv")).unwrap();
        std::io::Write::write_all(&mut f, b"hello").unwrap();
        assert_eq!(std::fs::read(p.commit().unwrap()).unwrap(), b"hello");
    }

    #[test]
    fn a_partition_folder_left_empty_is_swept_so_that_its_day_is_not_taken_for_written() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let day = |d: &str| d.parse::<NaiveDate>().unwrap();
        let dead = format!("{TMP_PREFIX}999999999-{PART}");
        for (d, file) in [
            ("2026-03-01", PART),
            ("2026-03-02", dead.as_str()),
            ("2026-03-03", PART),
        ] {
            let p = partition_dir(root, "searches", "a", day(d));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join(file), b"x").unwrap();
        }
        // A day whose file a person deleted, and a folder that is not a day's.
        std::fs::remove_file(partition_dir(root, "searches", "a", day("2026-03-03")).join(PART))
            .unwrap();
        std::fs::create_dir_all(project_dir(root, "searches", "a").join("notes")).unwrap();
        let all = partition_days(root, "searches", "a");
        assert_eq!(all.len(), 3);
        assert_eq!(sweep_leftovers(root), 1);
        assert_eq!(
            partition_days(root, "searches", "a"),
            HashSet::from([day("2026-03-01")])
        );
        assert!(project_dir(root, "searches", "a").join("notes").is_dir());
        assert!(partition_days(root, "searches", "nobody").is_empty());
    }
}
