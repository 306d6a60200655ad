//! A run's reading of the service's analytics event streams (`[[streams]]`): each stream's
//! objects not read yet are listed and read as they arrive (memory bounded by a line and the
//! events held before a flush), their events written into each project's days
//! (`docpipe_stream`), and only then the objects marked read in the state: a killed run reads
//! again what it had not marked, and the events' ids make a second reading add nothing. When
//! the agents table's version changed, every day of the stream is classified again first.

use super::Context;
use crate::config::StreamSettings;
use crate::remote::Remote;
use chrono::{NaiveDate, Utc};
use docpipe_agents::Agents;
use docpipe_catalog::layout::partition_days;
use docpipe_catalog::tables;
use docpipe_state::streams::StreamState;
use docpipe_stream::coverage::{Covered, write_coverage};
use docpipe_stream::day::{Classifier, Day, write_day};
use docpipe_stream::{Batch, Setup, Unread};
use futures::StreamExt;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The log lines' target.
const TARGET: &str = "docpipe::streams";

/// Events held before they are written (about 64 bytes each).
pub const FLUSH_EVENTS: u64 = 200_000;

/// The events held before a flush: [`FLUSH_EVENTS`], or `DOCPIPE_STREAM_FLUSH` (the tests of
/// crash safety flush often, so that a kill falls between flushes).
fn flush_events() -> u64 {
    std::env::var("DOCPIPE_STREAM_FLUSH")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(FLUSH_EVENTS)
}

/// What a run read of one stream.
#[derive(Debug, Default)]
pub struct StreamRun {
    /// The stream (its URL or folder).
    pub name: String,
    /// Objects read whole.
    pub objects: u64,
    /// Lines read.
    pub lines: u64,
    /// Events new to the lake.
    pub added: u64,
    /// Events read again (the same `event_id`, in two objects or runs).
    pub duplicates: u64,
    /// What could not be read.
    pub unread: Unread,
    /// The project days written.
    pub days: BTreeSet<(String, NaiveDate)>,
    /// The files written.
    pub files: Vec<PathBuf>,
    /// Why the stream stopped before its end (what was read before is kept).
    pub error: Option<String>,
}

/// What a run did with the streams.
#[derive(Debug, Default)]
pub struct StreamsRun {
    /// Each stream's reading.
    pub runs: Vec<StreamRun>,
    /// Each project's coverage, after the run (projects with stream days only).
    pub coverage: Vec<(String, Vec<Covered>)>,
    /// Days classified again because the agents table changed.
    pub reclassified: usize,
    /// The agents table's version.
    pub agents_version: String,
}

/// The agents table: the shipped one, with `[agents] file` read before it.
pub fn agents(ctx: &Context) -> Result<Agents, String> {
    match &ctx.settings.agents_file {
        None => Ok(Agents::shipped()),
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("[agents] file {}: {e}", f.display()))?;
            Agents::with_user(&text, &f.display().to_string()).map_err(|e| e.to_string())
        }
    }
}

/// How a stream's lines are read: its subdomains' projects, the days' zone, the sessions' key.
fn setup(ctx: &Context, stream: &StreamSettings, key: (u64, u64)) -> Setup {
    let projects = ctx.settings.project_ids();
    let subdomains = stream
        .subdomains
        .iter()
        .filter_map(|(sub, p)| {
            let i = projects.iter().position(|x| x == p)?;
            Some((sub.clone(), i as u16))
        })
        .collect();
    Setup {
        projects,
        subdomains,
        tz: ctx.settings.timezone,
        session_key: key,
    }
}

/// Reads every stream of the config (`None`: there are none).
pub async fn read(ctx: &Context) -> Option<Result<StreamsRun, String>> {
    if ctx.settings.streams.is_empty() {
        return None;
    }
    Some(read_all(ctx).await)
}

async fn read_all(ctx: &Context) -> Result<StreamsRun, String> {
    let agents = agents(ctx)?;
    let store = ctx.store();
    let key = store.session_key().map_err(|e| e.to_string())?;
    let out = ctx.output().to_path_buf();
    let mut classify = Classifier::new(&agents);
    let mut run = StreamsRun {
        agents_version: agents.version().to_string(),
        ..StreamsRun::default()
    };
    let version = store.stream_agents_version().map_err(|e| e.to_string())?;
    if version.as_deref() != Some(agents.version()) {
        run.reclassified = reclassify(&out, &ctx.settings.project_ids(), &mut classify)?;
        store
            .set_stream_agents_version(agents.version())
            .map_err(|e| e.to_string())?;
    }
    for stream in &ctx.settings.streams {
        let setup = setup(ctx, stream, key);
        run.runs
            .push(read_stream(ctx, stream, &setup, &mut classify).await);
    }
    // Every run: the API's counts of a day may have come since the stream's (the export
    // writes `site_totals` on its own schedule), so the file is never left behind them.
    for project in ctx.settings.project_ids() {
        let (rows, _) = write_coverage(&out, &project).map_err(|e| e.to_string())?;
        if !rows.is_empty() {
            run.coverage.push((project, rows));
        }
    }
    Ok(run)
}

/// Classifies every day of the stream again (the agents table changed): the number of days.
fn reclassify(
    out: &Path,
    projects: &[String],
    classify: &mut Classifier<'_>,
) -> Result<usize, String> {
    let mut n = 0;
    for project in projects {
        let mut days: Vec<NaiveDate> = partition_days(out, tables::EVENTS.name, project)
            .into_iter()
            .collect();
        days.sort();
        for date in days {
            let mut strings = docpipe_stream::batch::Strings::new();
            let day = Day { out, project, date };
            write_day(&day, &mut strings, &[], classify).map_err(|e| e.to_string())?;
            n += 1;
        }
    }
    Ok(n)
}

/// Reads one stream's objects not read yet; marks them read once their events are written.
async fn read_stream(
    ctx: &Context,
    stream: &StreamSettings,
    setup: &Setup,
    classify: &mut Classifier<'_>,
) -> StreamRun {
    let name = stream.location.to_string();
    let mut run = StreamRun {
        name: name.clone(),
        ..StreamRun::default()
    };
    let store = ctx.store();
    let mut state = match store.stream_state(&name) {
        Ok(s) => s,
        Err(e) => {
            run.error = Some(e.to_string());
            return run;
        }
    };
    let listed = match Remote::open_stream(&stream.location) {
        Ok(remote) => match remote.list_after(state.list_after()).await {
            Ok(names) => Ok((remote, names)),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    let (remote, names) = match listed {
        Ok(l) => l,
        Err(e) => {
            run.error = Some(e);
            return run;
        }
    };
    let todo: Vec<String> = names.into_iter().filter(|n| !state.was_read(n)).collect();
    let mut reading = Reading {
        out: ctx.output(),
        setup,
        batch: Batch::default(),
        done: Vec::new(),
        crash: crate::dataset::walk::CrashPoints::from_var("DOCPIPE_CRASH_AT_STREAM"),
    };
    let flush_at = flush_events();
    for object in todo {
        if let Err(e) = reading.object(&remote, &object).await {
            run.error = Some(e);
            break;
        }
        reading.done.push(object);
        if reading.batch.events >= flush_at
            && let Err(e) = reading.flush(classify, &mut run, &mut state, store)
        {
            run.error = Some(e);
            return run;
        }
    }
    if let Err(e) = reading.flush(classify, &mut run, &mut state, store) {
        run.error = Some(e);
    }
    run
}

/// One stream's objects being read: the events held, the objects read whole since the last
/// flush.
struct Reading<'a> {
    out: &'a Path,
    setup: &'a Setup,
    batch: Batch,
    done: Vec<String>,
    /// The tests' crash points: after each day written, after the objects are marked read.
    crash: crate::dataset::walk::CrashPoints,
}

impl Reading<'_> {
    /// Reads one object's lines into the batch as its bytes arrive.
    async fn object(&mut self, remote: &Remote, object: &str) -> Result<(), String> {
        let mut bytes = remote.read(object).await.map_err(|e| e.to_string())?;
        let mut line: Vec<u8> = Vec::new();
        let mut n = 0u64;
        let mut too_long = false;
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|e| e.to_string())?;
            let mut rest = &chunk[..];
            while let Some(end) = rest.iter().position(|b| *b == b'\n') {
                n += 1;
                if too_long {
                    self.batch.too_long(object, n);
                } else {
                    line.extend_from_slice(&rest[..end]);
                    self.batch.line(self.setup, &line, object, n);
                }
                line.clear();
                too_long = false;
                rest = &rest[end + 1..];
            }
            if !too_long {
                line.extend_from_slice(rest);
                if line.len() > docpipe_stream::batch::MAX_LINE {
                    // The rest of this line is skipped, not held.
                    too_long = true;
                    line = Vec::new();
                }
            }
        }
        if too_long {
            self.batch.too_long(object, n + 1);
        } else if !line.is_empty() {
            self.batch.line(self.setup, &line, object, n + 1);
        }
        Ok(())
    }

    /// Writes the events held into their days, then marks the objects read whole.
    fn flush(
        &mut self,
        classify: &mut Classifier<'_>,
        run: &mut StreamRun,
        state: &mut StreamState,
        store: &crate::store::Store,
    ) -> Result<(), String> {
        let mut batch = std::mem::take(&mut self.batch);
        let (mut added, mut again) = (0, 0);
        for ((p, date), events) in std::mem::take(&mut batch.days) {
            let project = &self.setup.projects[usize::from(p)];
            let day = Day {
                out: self.out,
                project,
                date,
            };
            let w = write_day(&day, &mut batch.strings, &events, classify)
                .map_err(|e| e.to_string())?;
            added += w.added;
            again += w.duplicates;
            self.crash
                .hit("a stream's day written, its objects not yet marked read");
            run.files.extend(w.files);
            if w.added > 0 {
                run.days.insert((project.clone(), date));
            }
        }
        run.added += added;
        run.duplicates += again;
        run.lines += batch.lines;
        run.unread.add(&batch.unread);
        let done = std::mem::take(&mut self.done);
        if done.is_empty() && batch.events == 0 {
            return Ok(());
        }
        run.objects += done.len() as u64;
        state.counts.objects += done.len() as u64;
        state.counts.events += added;
        state.counts.duplicates += again;
        state.counts.unread += batch.unread.total();
        state.counts.last_unread = run.unread.line();
        state.counts.last_read_at = Some(Utc::now());
        state.mark_read(done);
        store.set_stream_state(state).map_err(|e| e.to_string())?;
        self.crash.hit("a stream's objects marked read");
        tracing::info!(target: TARGET, stream = %run.name, objects = run.objects, added = run.added, "stream read");
        Ok(())
    }
}

/// What a run's reading of the streams says: a line per stream, one per project's coverage of
/// the days it wrote.
pub fn lines(run: &Result<StreamsRun, String>) -> Vec<String> {
    let run = match run {
        Ok(r) => r,
        Err(e) => return vec![format!("streams: not read: {e}")],
    };
    let mut out = Vec::new();
    if run.reclassified > 0 {
        out.push(format!(
            "streams: {} days classified again with agents table {}",
            run.reclassified, run.agents_version
        ));
    }
    for r in &run.runs {
        let mut line = format!(
            "stream {}: {} objects, {} events new, {} read again, {} days written",
            r.name,
            r.objects,
            r.added,
            r.duplicates,
            r.days.len()
        );
        if let Some(u) = r.unread.line() {
            line += &format!("; not read: {u}");
        }
        if let Some(e) = &r.error {
            line += &format!("; stopped: {e}");
        }
        out.push(line);
    }
    for (project, rows) in &run.coverage {
        let (mut stream, mut api) = (0, 0);
        for c in rows.iter().filter(|c| c.api_ai.is_some()) {
            stream += c.stream_ai;
            api += c.api_ai.unwrap_or(0);
        }
        if api > 0 {
            out.push(format!(
                "  {project}: the stream holds {:.1}% of the API's ai views ({stream} of {api}, {} days)",
                100.0 * stream as f64 / api as f64,
                rows.iter().filter(|c| c.api_ai.is_some()).count()
            ));
        }
    }
    out
}

/// `check --stream`: for each stream, its objects counted and the newest read (nothing
/// written, nothing marked read): its events by category, the agents seen, what could not be
/// read; then each project's coverage as the lake has it.
pub async fn check(ctx: &Context) -> anyhow::Result<Vec<String>> {
    if ctx.settings.streams.is_empty() {
        return Err(crate::error::UserError::new(
            "no [[streams]] in the config: docs/streams.md says how to add one",
        )
        .into());
    }
    let agents = agents(ctx).map_err(crate::error::UserError::new)?;
    let mut out = Vec::new();
    for stream in &ctx.settings.streams {
        let remote = Remote::open_stream(&stream.location).map_err(|e| e.into_anyhow())?;
        let names = remote.list_after(None).await.map_err(|e| e.into_anyhow())?;
        let Some(newest) = names.last() else {
            out.push(format!(
                "stream {}: no object yet (the service writes none until a category and a deployment are selected)",
                stream.location
            ));
            continue;
        };
        let setup = setup(ctx, stream, (0, 0));
        let mut reading = Reading {
            out: ctx.output(),
            setup: &setup,
            batch: Batch::default(),
            done: Vec::new(),
            crash: crate::dataset::walk::CrashPoints::default(),
        };
        reading
            .object(&remote, newest)
            .await
            .map_err(anyhow::Error::msg)?;
        out.push(newest_line(
            stream,
            names.len(),
            newest,
            &reading.batch,
            &agents,
        ));
        for p in stream.subdomains.values() {
            if let Some((days, s, a)) = docpipe_stream::coverage::summed(ctx.output(), p)?
                && a > 0
            {
                out.push(format!(
                    "  {p}: the stream holds {:.1}% of the API's ai views ({s} of {a}, {days} days)",
                    100.0 * s as f64 / a as f64
                ));
            }
        }
    }
    Ok(out)
}

/// What the newest object holds, one line.
fn newest_line(
    stream: &StreamSettings,
    objects: usize,
    newest: &str,
    batch: &Batch,
    agents: &Agents,
) -> String {
    let mut classify = Classifier::new(agents);
    let mut categories: std::collections::BTreeMap<String, i64> = Default::default();
    let mut seen: std::collections::BTreeMap<String, i64> = Default::default();
    for events in batch.days.values() {
        for e in events {
            let name = batch.strings.get(e.event).unwrap_or("");
            let category: String = name.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
            *categories.entry(category).or_default() += 1;
            let (who, _) = classify.read(&batch.strings, e);
            let who = classify.who(who);
            let key = format!(
                "{} ({})",
                docpipe_stream::batch::shown(&who.agent),
                who.class
            );
            *seen.entry(key).or_default() += 1;
        }
    }
    let list = |m: &std::collections::BTreeMap<String, i64>| {
        docpipe_stream::report::top(m, 8)
            .into_iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!(
        "stream {}: {objects} objects; the newest, {}: {} lines, {} events ({}); readers: {}",
        stream.location,
        docpipe_stream::batch::shown(newest),
        batch.lines,
        batch.events,
        list(&categories),
        list(&seen)
    );
    if let Some(u) = batch.unread.line() {
        line += &format!("; not read: {u}");
    }
    line
}
