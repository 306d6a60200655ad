//! The walks in progress: the `walks` table names the walk each journal belongs to, and the
//! journal files (`<out>/.walks/project=<p>/date=<d>.pages`) hold its pages. On a shared
//! database (PostgreSQL) the pages are rows of `walk_pages` instead, so that a walk begun on one
//! machine resumes on another.

use super::journal::{self, StoredPage};
use super::sql::{Sql, SqlError, Tx, Value};
use super::{Appending, JournalEnd, Store, StoreError};
use crate::api::views::ViewsPage;
use crate::layout;
use chrono::NaiveDate;
use std::collections::{HashMap, HashSet};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

impl Store {
    /// The journal file of a window.
    fn journal_path(&self, project: &str, day: NaiveDate) -> PathBuf {
        layout::journal_path(&self.out, project, day)
    }

    fn journal_error(&self, path: &Path, source: std::io::Error) -> StoreError {
        StoreError::Journal {
            path: path.display().to_string(),
            source,
        }
    }

    /// The id of the window's walk in progress, if any.
    fn walk_id(&self, project: &str, day: NaiveDate) -> Result<Option<u64>, StoreError> {
        let p = vec![Value::from(project), day.into()];
        self.sql.read(move |tx| {
            tx.row("SELECT id FROM walks WHERE project = ?1 AND day = ?2", &p)?
                .map(|r| r.int(0).map(|i| i as u64))
                .transpose()
        })
    }

    /// The stored pages' payloads of a window's walk on the shared database, by offset.
    fn shared_pages(&self, project: &str, day: NaiveDate) -> Result<Vec<Vec<u8>>, StoreError> {
        let p = vec![Value::from(project), day.into()];
        let name = self.sql.name().to_string();
        self.sql.read(move |tx| {
            tx.rows(
                "SELECT g.frame FROM walk_pages g JOIN walks w ON w.id = g.walk_id
                 WHERE w.project = ?1 AND w.day = ?2 ORDER BY g.page_offset",
                &p,
            )?
            .iter()
            .map(|r| {
                let b = r.blob(0)?;
                if journal::is_whole(&b) {
                    Ok(b)
                } else {
                    Err(SqlError {
                        message: format!("{name}: a stored page is cut short"),
                        connection: false,
                    })
                }
            })
            .collect()
        })
    }

    /// The bytes of the window's journal, when it belongs to the walk in progress.
    fn journal(&self, project: &str, day: NaiveDate) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        let Some(id) = self.walk_id(project, day)? else {
            return Ok(None);
        };
        let path = self.journal_path(project, day);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.journal_error(&path, e)),
        };
        Ok((journal::read(&bytes).id == Some(id)).then_some((id, bytes)))
    }

    /// Stores a fetched page of an unfinished window: the page at offset 0 starts a new walk
    /// (and journal); a later one is appended to the walk in progress.
    pub fn put_page(
        &self,
        project: &str,
        day: NaiveDate,
        offset: u64,
        page: &ViewsPage,
    ) -> Result<(), StoreError> {
        let key = (project.to_string(), day);
        let frame = journal::frame(offset, page);
        if matches!(self.sql, Sql::Pg(_)) {
            let p = vec![
                Value::from(project),
                day.into(),
                Value::Int(offset as i64),
                journal::payload(&frame).to_vec().into(),
            ];
            return self.sql.tx(move |tx| {
                if offset == 0 {
                    end_walk(tx, &p[0], &p[1])?;
                    tx.exec("INSERT INTO walks (project, day) VALUES (?1, ?2)", &p[..2])?;
                }
                let added = tx.exec(
                    "INSERT INTO walk_pages (walk_id, page_offset, frame)
                     SELECT id, ?3, ?4 FROM walks WHERE project = ?1 AND day = ?2
                     ON CONFLICT (walk_id, page_offset) DO UPDATE SET frame = excluded.frame",
                    &p,
                )?;
                if added == 0 {
                    return Err(SqlError {
                        message: format!(
                            "no walk in progress to add the page at offset {offset} to"
                        ),
                        connection: false,
                    });
                }
                Ok(())
            });
        }
        let path = self.journal_path(project, day);
        let io = |e| self.journal_error(&path, e);
        if offset == 0 {
            let p = vec![Value::from(project), day.into()];
            let id = self.sql.tx(move |tx| {
                end_walk(tx, &p[0], &p[1])?;
                tx.row(
                    "INSERT INTO walks (project, day) VALUES (?1, ?2) RETURNING id",
                    &p,
                )?
                .map_or(Ok(0), |r| r.int(0))
            })? as u64;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            let mut bytes = journal::header(id).to_vec();
            bytes.extend_from_slice(&frame);
            std::fs::write(&path, &bytes).map_err(io)?;
            self.remember(project, day, id, bytes.len() as u64);
            return Ok(());
        }
        let known = self.journal_ends().get(&key).copied();
        let open = match known {
            Some(o) => o,
            None => {
                self.progress(project, day)?;
                self.journal_ends().get(&key).copied().ok_or_else(|| {
                    io(std::io::Error::other(format!(
                        "no walk in progress to add the page at offset {offset} to"
                    )))
                })?
            }
        };
        // The file kept from the previous append stands right after its last frame; a file
        // opened anew is cut to the last whole frame (a frame cut by a kill is overwritten).
        let kept = self
            .appending()
            .take()
            .filter(|a| a.key == key)
            .map(|a| a.file);
        let mut f = match kept {
            Some(f) => f,
            None => {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io)?;
                if f.metadata().map_err(io)?.len() != open.len {
                    f.set_len(open.len).map_err(io)?;
                }
                f.seek(std::io::SeekFrom::Start(open.len)).map_err(io)?;
                f
            }
        };
        // On an error the file is dropped: the next append opens it anew and cuts it.
        f.write_all(&frame).map_err(io)?;
        self.remember(project, day, open.id, open.len + frame.len() as u64);
        *self.appending() = Some(Appending { key, file: f });
        Ok(())
    }

    fn appending(&self) -> std::sync::MutexGuard<'_, Option<Appending>> {
        self.appending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn journal_ends(&self) -> std::sync::MutexGuard<'_, HashMap<(String, NaiveDate), JournalEnd>> {
        self.journal_ends.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stored pages of a window, by offset.
    pub fn pages(&self, project: &str, day: NaiveDate) -> Result<Vec<StoredPage>, StoreError> {
        if matches!(self.sql, Sql::Pg(_)) {
            return self
                .shared_pages(project, day)?
                .iter()
                .map(|f| {
                    journal::page(f).ok_or_else(|| StoreError::Damaged {
                        path: self.sql.name().to_string(),
                        project: project.to_string(),
                        day,
                        offset: journal::peek(f).0,
                    })
                })
                .collect();
        }
        let Some((id, bytes)) = self.journal(project, day)? else {
            return Ok(Vec::new());
        };
        let read = journal::read(&bytes);
        self.remember(project, day, id, read.valid_len);
        read.frames
            .iter()
            .map(|f| {
                journal::page(f).ok_or_else(|| StoreError::Damaged {
                    path: self.journal_path(project, day).display().to_string(),
                    project: project.to_string(),
                    day,
                    offset: journal::peek(f).0,
                })
            })
            .collect()
    }

    /// Offsets of the stored pages of a window, and whether the last one ends it.
    pub fn progress(&self, project: &str, day: NaiveDate) -> Result<(Vec<u64>, bool), StoreError> {
        if matches!(self.sql, Sql::Pg(_)) {
            let frames = self.shared_pages(project, day)?;
            let complete = frames.last().is_some_and(|f| !journal::peek(f).1);
            return Ok((
                frames.iter().map(|f| journal::peek(f).0).collect(),
                complete,
            ));
        }
        let Some((id, bytes)) = self.journal(project, day)? else {
            return Ok((Vec::new(), false));
        };
        let read = journal::read(&bytes);
        let mut offsets = Vec::with_capacity(read.frames.len());
        let mut complete = false;
        for f in &read.frames {
            let (offset, more) = journal::peek(f);
            offsets.push(offset);
            complete = !more;
        }
        self.remember(project, day, id, read.valid_len);
        Ok((offsets, complete))
    }

    /// Notes where the window's journal (of walk `id`) ends, for the next append.
    fn remember(&self, project: &str, day: NaiveDate, id: u64, len: u64) {
        self.forget_file(project, day);
        self.journal_ends()
            .insert((project.to_string(), day), JournalEnd { id, len });
    }

    /// Closes the window's journal if it is kept open.
    fn forget_file(&self, project: &str, day: NaiveDate) {
        let mut a = self.appending();
        if a.as_ref()
            .is_some_and(|a| a.key.0 == project && a.key.1 == day)
        {
            *a = None;
        }
    }

    /// The windows with a walk in progress.
    fn walk_keys(&self) -> Result<Vec<(String, NaiveDate)>, StoreError> {
        let keys: Vec<(String, String)> = self.sql.read(|tx| {
            tx.rows(
                "SELECT project, day FROM walks ORDER BY day DESC, project",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?)))
            .collect()
        })?;
        Ok(keys
            .into_iter()
            .filter_map(|(p, d)| Some((p, d.parse::<NaiveDate>().ok()?)))
            .collect())
    }

    /// The walks in progress: project, day and the offsets stored.
    pub fn walks(&self) -> Result<Vec<(String, NaiveDate, Vec<u64>)>, StoreError> {
        let mut out = Vec::new();
        for (project, day) in self.walk_keys()? {
            let (offsets, _) = self.progress(&project, day)?;
            out.push((project, day, offsets));
        }
        Ok(out)
    }

    /// Removes journal files that belong to no walk in progress (a run killed between recording
    /// a window and removing its journal leaves one). Returns how many.
    pub fn sweep_journals(&self) -> Result<usize, StoreError> {
        if matches!(self.sql, Sql::Pg(_)) {
            return Ok(0);
        }
        let live: HashSet<PathBuf> = self
            .walk_keys()?
            .into_iter()
            .map(|(p, d)| self.journal_path(&p, d))
            .collect();
        let mut removed = 0;
        let Ok(projects) = std::fs::read_dir(self.out.join(layout::WALKS_DIR)) else {
            return Ok(0);
        };
        for p in projects.flatten() {
            let Ok(files) = std::fs::read_dir(p.path()) else {
                continue;
            };
            for f in files.flatten() {
                if !live.contains(&f.path()) && std::fs::remove_file(f.path()).is_ok() {
                    removed += 1;
                }
            }
            self.prune(Some(&p.path()));
        }
        Ok(removed)
    }

    /// Removes a window's journal file, if there is one.
    pub(super) fn remove_journal(&self, project: &str, day: NaiveDate) -> Result<(), StoreError> {
        self.forget_file(project, day);
        self.journal_ends().remove(&(project.to_string(), day));
        let path = self.journal_path(project, day);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.journal_error(&path, e)),
            _ => {
                self.prune(path.parent());
                Ok(())
            }
        }
    }

    /// Removes a project's journal folder, and the journals' folder, when they are empty.
    fn prune(&self, project_dir: Option<&Path>) {
        if let Some(dir) = project_dir {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = std::fs::remove_dir(self.out.join(layout::WALKS_DIR));
    }

    /// Forgets the stored pages of a window (to walk it again).
    pub fn drop_pages(&self, project: &str, day: NaiveDate) -> Result<(), StoreError> {
        let p = [Value::from(project), day.into()];
        self.sql.tx(move |tx| end_walk(tx, &p[0], &p[1]))?;
        self.remove_journal(project, day)
    }
}

/// Ends a window's walk in progress (`project`, `day`): its row, and its pages when the shared
/// database keeps them.
pub(super) fn end_walk(tx: &mut dyn Tx, project: &Value, day: &Value) -> Result<(), SqlError> {
    let p = [project.clone(), day.clone()];
    if tx.postgres() {
        tx.exec(
            "DELETE FROM walk_pages WHERE walk_id IN
               (SELECT id FROM walks WHERE project = ?1 AND day = ?2)",
            &p,
        )?;
    }
    tx.exec("DELETE FROM walks WHERE project = ?1 AND day = ?2", &p)?;
    Ok(())
}
