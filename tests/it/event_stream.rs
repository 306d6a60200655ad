//! The analytics event stream, read from a folder the emulator writes its objects into: every
//! `agent_daily` row against the emulator's own counts, duplicates counted once, late objects
//! read, bad lines counted and named, no personal data in any file, a user's agents file, and
//! the stream's coverage of the API's counts.

use crate::common::*;
use arrow_array::{Array, StringArray};
use chrono::NaiveDate;
use docpipe::app::streams::StreamsRun;
use docpipe::app::{Access, Context, Keys};
use docpipe::config::RawConfig;
use docpipe::emulator::Emulator;
use docpipe::emulator::stream::StreamData;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The small data with beta and gamma streamed.
fn streamed(agent_fraction: f64, bad_lines: bool) -> Arc<Emulator> {
    let mut data = streamed_data();
    if let Some(s) = data.stream.as_mut() {
        (s.agent_fraction, s.bad_lines) = (agent_fraction, bad_lines);
    }
    emulator(data)
}

/// The small data with beta and gamma streamed, every agent view in the stream.
fn streamed_data() -> docpipe::emulator::data::DataFile {
    let mut data = small();
    data.stream = Some(StreamData {
        projects: vec!["beta".into(), "gamma".into()],
        agent_fraction: 1.0,
        bad_lines: false,
    });
    data
}

/// The days the stream covers in these tests: the first two weeks of the small data.
fn days() -> Vec<NaiveDate> {
    day("2026-03-01")
        .iter_days()
        .take_while(|d| *d < day("2026-03-15"))
        .collect()
}

fn settings(out: &Path, stream: &Path, extra: &str) -> docpipe::config::Settings {
    let text = format!(
        "{}\n[[streams]]\nurl = \"{}\"\nsubdomains = {{ \"docs-beta\" = \"beta\", \"docs-gamma\" = \"gamma\" }}\n{extra}",
        config("http://127.0.0.1:9", out, "timezone = \"UTC\""),
        stream.display(),
    );
    RawConfig::parse(&text, "t.toml")
        .unwrap()
        .validate("t.toml")
        .unwrap()
}

#[tokio::test]
async fn two_weeks_of_stream_equal_the_emulators_truth_late_objects_and_duplicates_once() {
    let emu = streamed(1.0, false);
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Each day's 13:00 object of the first week lands late, after the first read.
    let truth = write_stream(&emu, stream.path(), &days()[..7], &["T130000Z.jsonl"]);
    let s = settings(out.path(), stream.path(), "");
    let first = read_stream_once(&s).await;
    assert_eq!(first.runs.len(), 1);
    let late = write_stream(&emu, stream.path(), &days()[..7], &[]);
    let rest = write_stream(&emu, stream.path(), &days()[7..], &[]);
    let second = read_stream_once(&s).await;
    let third = read_stream_once(&s).await;
    let mut want = late.reads.clone();
    for (k, v) in &rest.reads {
        *want.entry(k.clone()).or_default() += v;
    }
    assert_eq!(stream_reads(out.path()), want);
    let objects = |r: &StreamsRun| r.runs.iter().map(|x| x.objects).collect::<Vec<_>>();
    assert_eq!(objects(&first), [7 * 23]);
    assert_eq!(objects(&second), [7 + 7 * 24]);
    assert_eq!(objects(&third), [0]);
    let sum = |f: fn(&docpipe::app::streams::StreamRun) -> u64| -> u64 {
        [&first, &second, &third]
            .iter()
            .flat_map(|r| r.runs.iter().map(f))
            .sum()
    };
    assert_eq!(sum(|x| x.added), late.events + rest.events);
    assert_eq!(sum(|x| x.duplicates), late.repeated + rest.repeated);
    assert_eq!(truth.repeated, late.repeated);
    let mut referrals = BTreeMap::new();
    for (file, project) in partitions(out.path(), "ai_referrals") {
        for b in docpipe::write::parquet::read_file(&file).unwrap() {
            let views = int_col(&b, "views");
            let (host, path) = (text_col(&b, "referrer_host"), text_col(&b, "path"));
            for i in 0..b.num_rows() {
                let key = (
                    project.clone(),
                    host.value(i).to_string(),
                    path.value(i).to_string(),
                );
                *referrals.entry(key).or_default() += views.value(i) as u64;
            }
        }
    }
    let mut want_referrals = late.referrals.clone();
    for (k, v) in &rest.referrals {
        *want_referrals.entry(k.clone()).or_default() += v;
    }
    assert_eq!(referrals, want_referrals);
}

/// Every text value of every Parquet file below `out`, and every other file's bytes as text.
fn everything_written(out: &Path) -> String {
    let mut all = String::new();
    for rel in files_below(out) {
        let f = out.join(&rel);
        if f.extension().is_some_and(|e| e == "parquet") {
            for b in docpipe::write::parquet::read_file(&f).unwrap() {
                for c in b.columns() {
                    if let Some(s) = c.as_any().downcast_ref::<StringArray>() {
                        for v in s.iter().flatten() {
                            all.push_str(v);
                            all.push('\n');
                        }
                    }
                }
            }
        } else {
            all.push_str(&String::from_utf8_lossy(&std::fs::read(&f).unwrap()));
        }
    }
    all
}

#[tokio::test]
async fn no_ip_user_or_visitor_id_is_written_and_sessions_are_keyed_hashes() {
    let emu = streamed(1.0, false);
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_stream(&emu, stream.path(), &days()[..2], &[]);
    let sent = everything_written(stream.path());
    // The stream carries them (so the test can fail) ...
    for marker in ["\"ip\"", "203.0.113.", "user-", "anon-", "sess-"] {
        assert!(sent.contains(marker), "{marker}");
    }
    let s = settings(out.path(), stream.path(), "");
    assert_eq!(read_stream_once(&s).await.runs[0].objects, 48);
    // ... and nothing docpipe wrote does: the tables, the state, the lake's description.
    let written = everything_written(out.path());
    assert!(written.contains("docs.content.md.view"));
    for marker in ["203.0.113.", "user-", "anon-", "sess-"] {
        assert!(!written.contains(marker), "{marker} in the output");
    }
    // Sessions are 16 hex digits of a key kept in the state: another state, another hash.
    let other = tempfile::tempdir().unwrap();
    read_stream_once(&settings(other.path(), stream.path(), "")).await;
    let sessions = |out: &Path| -> Vec<String> {
        let (file, _) = &partitions(out, "events")[0];
        let b = &docpipe::write::parquet::read_file(file).unwrap()[0];
        text_col(b, "session")
            .iter()
            .flatten()
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (sessions(out.path()), sessions(other.path()));
    assert_eq!(a.len(), b.len());
    assert!(
        a.iter()
            .all(|s| s.len() == 16 && s.chars().all(|c| c.is_ascii_hexdigit()))
    );
    assert!(a.iter().zip(&b).all(|(x, y)| x != y));
}

#[tokio::test]
async fn bad_lines_are_counted_and_named_and_the_rest_of_each_object_is_read() {
    let emu = streamed(1.0, true);
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let truth = write_stream(&emu, stream.path(), &days()[..2], &[]);
    let s = settings(out.path(), stream.path(), "");
    let run = read_stream_once(&s).await;
    let r = &run.runs[0];
    assert_eq!(r.objects, 48);
    assert_eq!(stream_reads(out.path()), truth.reads);
    assert_eq!(r.added, truth.events);
    // The first bad lines come after the first object's events (and the next one's first,
    // repeated).
    let first =
        std::fs::read_to_string(stream.path().join("2026/03/01/20260301T000000Z.jsonl")).unwrap();
    let at = first.lines().position(|l| l == "not json {").unwrap() + 1;
    let place = |n: usize| format!("2026/03/01/20260301T000000Z.jsonl: line {n}");
    let bad: Vec<(&str, u64, String)> = r
        .unread
        .bad
        .iter()
        .map(|(k, (n, at))| (*k, *n, at.clone()))
        .collect();
    assert_eq!(
        bad,
        [
            ("a payload string that is not JSON", 48, place(at + 1)),
            ("not JSON", 50, place(at)),
        ]
    );
    assert_eq!(
        r.unread.unknown_events,
        BTreeMap::from([("docs.experiment.viewed".to_string(), 48)])
    );
    assert_eq!(
        r.unread.unknown_subdomains,
        BTreeMap::from([("docs-nobody".to_string(), 48)])
    );
    assert_eq!(r.unread.total(), truth.bad);
    assert_eq!(
        docpipe::app::streams::lines(&Ok(run))[0],
        format!(
            "stream {}: 48 objects, {} events new, {} read again, 4 days written; not read: 48 a payload string that is not JSON (first: {}); 50 not JSON (first: {}); 48 of an unknown event (docs.experiment.viewed ×48); 48 of a subdomain no project maps (docs-nobody ×48)",
            stream.path().display(),
            truth.events,
            truth.repeated,
            place(at + 1),
            place(at)
        )
    );
}

#[tokio::test]
async fn a_users_agents_file_reclassifies_every_day_on_the_next_run_with_its_version() {
    let emu = streamed(1.0, false);
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let truth = write_stream(&emu, stream.path(), &days()[..3], &[]);
    let project = truth
        .reads
        .keys()
        .find(|k| k.1 == "NovaCrawlBot")
        .map(|k| k.0.clone())
        .unwrap();
    let nova = |class: &str| {
        (
            project.clone(),
            "NovaCrawlBot".to_string(),
            class.to_string(),
            "html".to_string(),
        )
    };
    let first = read_stream_once(&settings(out.path(), stream.path(), "")).await;
    assert_eq!(first.agents_version, "2026-11-28");
    let unknown = stream_reads(out.path())[&nova("unknown")];
    assert_eq!(unknown, truth.reads[&nova("unknown")]);
    let file = out.path().join("agents.toml");
    std::fs::write(
        &file,
        "version = \"test-1\"\n[[agents]]\nagent = \"NovaCrawlBot\"\noperator = \"Nova\"\nclass = \"training\"\npatterns = [\"NovaCrawlBot\"]\n",
    )
    .unwrap();
    let extra = format!("[agents]\nfile = \"{}\"\n", file.display());
    let second = read_stream_once(&settings(out.path(), stream.path(), &extra)).await;
    assert_eq!((second.reclassified, second.runs[0].objects), (6, 0));
    assert_eq!(second.agents_version, "2026-11-28+test-1");
    let rows = stream_reads(out.path());
    assert_eq!(rows.get(&nova("unknown")), None);
    assert_eq!(
        rows.get(&nova("training")),
        Some(&unknown),
        "{:?}",
        rows.keys()
            .filter(|k| k.1.contains("Nova"))
            .collect::<Vec<_>>()
    );
    let versions: std::collections::BTreeSet<String> = partitions(out.path(), "agent_daily")
        .iter()
        .flat_map(|(f, _)| {
            docpipe::write::parquet::read_file(f)
                .unwrap()
                .into_iter()
                .flat_map(|b| {
                    text_col(&b, "agents_version")
                        .iter()
                        .flatten()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
        })
        .collect();
    assert_eq!(versions, ["2026-11-28+test-1".to_string()].into());
    // The same table again: nothing to classify.
    let third = read_stream_once(&settings(out.path(), stream.path(), &extra)).await;
    assert_eq!(third.reclassified, 0);
}

#[tokio::test]
async fn coverage_says_the_share_of_the_apis_ai_views_the_stream_holds() {
    let mut data = small();
    data.stream = Some(StreamData {
        projects: vec!["beta".into(), "gamma".into()],
        agent_fraction: 0.5,
        bad_lines: false,
    });
    let live = Live::start(data).await;
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The stream read before the API's days are exported: no day to set it beside yet.
    write_stream(live.emu(), stream.path(), &days()[..7], &[]);
    let s = settings(out.path(), stream.path(), "");
    let before = read_stream_once(&s).await;
    assert_eq!(
        before.coverage[0]
            .1
            .iter()
            .filter(|c| c.api_ai.is_some())
            .count(),
        0
    );
    assert_eq!(
        docpipe::stream::coverage::summed(out.path(), "beta").unwrap(),
        Some((0, 0, 0))
    );
    // The export comes after: the next run, with no object new, sets the file beside it.
    exported(&live, out.path(), &[("2026-03-01", "2026-03-07")]).await;
    let run = read_stream_once(&s).await;
    assert_eq!(run.runs[0].objects, 0);
    let (project, rows) = &run.coverage[0];
    assert_eq!(project, "beta");
    assert_eq!(rows.len(), 7);
    for c in rows {
        let truth = live
            .emu()
            .truth("beta", c.date, c.date.succ_opt().unwrap())
            .unwrap();
        let api_ai: u64 = truth.iter().map(|r| r.ai).sum();
        let half: u64 = truth.iter().map(|r| r.ai / 2).sum();
        let human: u64 = truth.iter().map(|r| r.human).sum();
        assert_eq!(
            (c.api_ai, c.stream_ai, c.api_human, c.stream_human),
            (
                Some(api_ai as i64),
                half as i64,
                Some(human as i64),
                human as i64
            ),
            "{}",
            c.date
        );
        assert_eq!(c.human_coverage(), Some(1.0));
    }
    let (stream_ai, api_ai) = rows
        .iter()
        .fold((0, 0), |(s, a), c| (s + c.stream_ai, a + c.api_ai.unwrap()));
    let line = docpipe::app::streams::lines(&Ok(run))
        .into_iter()
        .find(|l| l.starts_with("  beta"))
        .unwrap();
    assert_eq!(
        line,
        format!(
            "  beta: the stream holds {:.1}% of the API's ai views ({stream_ai} of {api_ai}, 7 days)",
            100.0 * stream_ai as f64 / api_ai as f64
        )
    );
    assert!(stream_ai * 2 <= api_ai && stream_ai > 0);
    let file = out
        .path()
        .join("stream_coverage/project=beta/part-00000.parquet");
    assert_eq!(
        docpipe::write::parquet::read_file(&file).unwrap()[0].num_rows(),
        7
    );
    // status says it, in text, JSON and on the page.
    let ctx = Context::open(s, docpipe::clock::system(), Access::Shared, Keys::None)
        .await
        .unwrap();
    let status = docpipe::status::collect(&ctx, 10).unwrap();
    let text = docpipe::status::text::render(&status);
    let st = &status.streams[0];
    assert_eq!(
        (
            st.counts.objects,
            st.counts.unread,
            st.counts.last_unread.as_deref()
        ),
        (7 * 24, 0, None)
    );
    assert!(
        text.contains(&format!(
            "stream {}: 168 objects read, {} events kept, {} read again, 0 not read; last read ",
            stream.path().display(),
            st.counts.events,
            st.counts.duplicates
        )),
        "{text}"
    );
    assert!(text.contains(&format!("\n{line}\n")), "{text}");
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["streams"][0]["coverage"][0]["stream_ai"], stream_ai);
    assert_eq!(json["streams"][0]["coverage"][0]["days"], 7);
    assert!(
        docpipe::status::html::render(&status).contains(&docpipe::status::html::esc(&line[2..]))
    );
}

#[tokio::test]
async fn each_stream_table_has_the_catalogues_columns() {
    let emu = streamed(1.0, false);
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_stream(&emu, stream.path(), &days()[..2], &[]);
    read_stream_once(&settings(out.path(), stream.path(), "")).await;
    for t in docpipe::tables::STREAM {
        assert!(out.path().join(t.name).is_dir(), "{}", t.name);
        let (file, _) = partitions(out.path(), t.name).into_iter().next().unwrap();
        let batch = &docpipe::write::parquet::read_file(&file).unwrap()[0];
        let got: Vec<(String, String, bool)> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().to_string(), f.is_nullable()))
            .collect();
        let want: Vec<(String, String, bool)> = t
            .columns
            .iter()
            .map(|c| {
                let ty = match c.ty {
                    docpipe::tables::Ty::Text => "Utf8",
                    docpipe::tables::Ty::Int => "Int64",
                    docpipe::tables::Ty::Float => "Float64",
                    docpipe::tables::Ty::Date => "Date32",
                    docpipe::tables::Ty::Time => "Timestamp(µs, \"UTC\")",
                    other => panic!("{other:?}"),
                };
                (c.name.to_string(), ty.to_string(), c.nullable)
            })
            .collect();
        assert_eq!(got, want, "{}", t.name);
    }
}

#[tokio::test]
async fn check_stream_reads_the_newest_object_and_writes_nothing() {
    let emu = streamed(1.0, false);
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_stream(&emu, stream.path(), &days()[..1], &[]);
    let s = settings(out.path(), stream.path(), "");
    let ctx = Context::open(s, docpipe::clock::system(), Access::Shared, Keys::None)
        .await
        .unwrap();
    let lines = docpipe::app::streams::check(&ctx).await.unwrap();
    let newest = "2026/03/01/20260301T230000Z.jsonl";
    let text = std::fs::read_to_string(stream.path().join(newest)).unwrap();
    let n = text.lines().count();
    let count = |category: &str| {
        text.lines()
            .filter(|l| l.starts_with(&format!("{{\"eventType\":\"{category}.")))
            .count()
    };
    let (content, search) = (count("docs.content"), count("docs.search"));
    assert_eq!(content + search, n);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with(&format!(
            "stream {}: 24 objects; the newest, {newest}: {n} lines, {n} events (docs.content {content}, docs.search {search}); readers: browser (human) ",
            stream.path().display()
        )),
        "{}",
        lines[0]
    );
    // Nothing written, nothing marked read.
    assert!(!out.path().join("events").exists());
    assert_eq!(
        ctx.store()
            .stream_state(&stream.path().display().to_string())
            .unwrap()
            .counts
            .objects,
        0
    );
    // No stream configured: one line, a user error.
    let bare = RawConfig::parse(&config("http://127.0.0.1:9", out.path(), ""), "t.toml")
        .unwrap()
        .validate("t.toml")
        .unwrap();
    let ctx = Context::open(bare, docpipe::clock::system(), Access::Shared, Keys::None)
        .await
        .unwrap();
    let e = docpipe::app::streams::check(&ctx).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "no [[streams]] in the config: docs/streams.md says how to add one"
    );
    assert!(e.downcast_ref::<docpipe::error::UserError>().is_some());
}

#[test]
fn a_stream_entry_that_cannot_be_read_is_named_in_the_configs_problems() {
    let out = tempfile::tempdir().unwrap();
    let text = format!(
        "{}\n[[streams]]\nurl = \"ftp://x\"\nsubdomains = {{ \"a\" = \"nowhere\" }}\n\n[[streams]]\nurl = \"s3://b\"\norganization = \"org-b\"\nsubdomains = {{ \"docs-beta\" = \"beta\" }}\n\n[[streams]]\nurl = \"s3://b\"\nsubdomains = {{}}\n",
        config("http://127.0.0.1:9", out.path(), "")
    );
    let e = RawConfig::parse(&text, "t.toml")
        .unwrap()
        .validate("t.toml")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "invalid config t.toml: 5 problems:\n  [[streams]] 1 url: unknown scheme ftp://: use s3://, gs://, az:// or a local folder\n  [[streams]] 1 subdomains.a: project \"nowhere\" is not among [[projects]]\n  [[streams]] 2 subdomains.docs-beta: project \"beta\" is not of organization \"org-b\"\n  [[streams]] 3 subdomains: none given (subdomains = { \"<subdomain>\" = \"<project id>\" })\n  [[streams]] 3: s3://b is named by an earlier stream (one [[streams]] maps all its subdomains)"
    );
}

#[tokio::test]
async fn the_week_a_person_reads_first_adds_up_to_the_truth() {
    let emu = streamed(1.0, false);
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let truth = write_stream(&emu, stream.path(), &days()[..7], &[]);
    read_stream_once(&settings(out.path(), stream.path(), "")).await;
    let week = docpipe::stream::report::week(out.path(), "beta", days()[0], days()[6]).unwrap();
    let mut agents = BTreeMap::new();
    let mut operators: BTreeMap<String, i64> = BTreeMap::new();
    let mut human = 0;
    let operator = |agent: &str| match agent {
        "GPTBot" | "ChatGPT-User" | "OAI-SearchBot" => Some("OpenAI"),
        "ClaudeBot" | "claude-code" | "Claude-User" => Some("Anthropic"),
        "PerplexityBot" => Some("Perplexity"),
        "Cursor" => Some("Anysphere"),
        _ => None,
    };
    for ((p, agent, class, _), n) in &truth.reads {
        if p != "beta" {
            continue;
        }
        if class == "human" {
            human += *n as i64;
            continue;
        }
        *agents.entry((agent.clone(), class.clone())).or_insert(0) += *n as i64;
        if let Some(op) = operator(agent) {
            *operators.entry(op.to_string()).or_default() += *n as i64;
        }
    }
    let mut referrals: BTreeMap<String, i64> = BTreeMap::new();
    for ((p, host, _), n) in &truth.referrals {
        if p == "beta" {
            let op = match host.as_str() {
                "chatgpt.com" => "OpenAI",
                "perplexity.ai" => "Perplexity",
                _ => "Anthropic",
            };
            *referrals.entry(op.to_string()).or_default() += *n as i64;
        }
    }
    assert_eq!(
        (&week.agents, &week.operators, &week.referrals, week.human),
        (&agents, &operators, &referrals, human)
    );
    let lines = week.lines("beta");
    let ratio = |op: &str| operators[op] as f64 / referrals[op] as f64;
    let line = lines
        .iter()
        .find(|l| l.starts_with("    agent reads per reader sent back: "))
        .unwrap();
    for op in referrals.keys() {
        assert!(line.contains(&format!("{op} {:.1}", ratio(op))), "{line}");
    }
}

/// A rule over the stream's trends (`jobs/agent-only-markdown.toml` for beta, and two
/// queries of its own), evaluated: what it reads adds up to the emulator's truth, and which
/// of its outputs are readers' words follows the columns' lineage, not their names.
#[tokio::test]
async fn rules_read_the_streams_trends_and_a_path_or_an_agents_name_stays_a_readers_words() {
    // Beta read almost only by agents: some of its pages no person reaches.
    let mut data = streamed_data();
    let beta = data.projects.iter_mut().find(|p| p.id == "beta").unwrap();
    (beta.ai_share_start, beta.ai_share_end) = (0.995, 0.995);
    let live = Live::start(data).await;
    let (out, stream) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // 2026-03-01 to 03-13 are complete (a later day has events); 03-14 may still be filling.
    let complete = write_stream(live.emu(), stream.path(), &days()[..13], &[]);
    let last = write_stream(live.emu(), stream.path(), &days()[13..], &[]);
    exported(&live, out.path(), &[("2026-03-01", "2026-03-14")]).await;
    read_stream_once(&settings(out.path(), stream.path(), "")).await;
    let tables =
        docpipe::trends::compute(out.path(), &docpipe::trends::Selection::default()).unwrap();
    let g = &tables.gaps;
    // agent_page_reads: 28 days to 03-13 hold the 13 complete days, every agent's reads of a
    // page (no browser's), by agent, class and surface as the truth counts them.
    let reads = &g.agent_page_reads;
    let col = |df: &polars::prelude::DataFrame, c: &str| df.column(c).unwrap().clone();
    let mut got: BTreeMap<(String, String, String, String), u64> = BTreeMap::new();
    for i in 0..reads.height() {
        let text = |c: &str| col(reads, c).str().unwrap().get(i).unwrap().to_string();
        let n = col(reads, "reads_28d").i64().unwrap().get(i).unwrap();
        let key = (
            text("project"),
            text("agent"),
            text("class"),
            text("surface"),
        );
        *got.entry(key).or_default() += n as u64;
    }
    let want: BTreeMap<_, _> = complete
        .reads
        .iter()
        .filter(|(k, _)| k.2 != "human")
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert_eq!(got, want);
    // ai_operators_daily: every referred view of the 14 days, each day's ratio its reads over
    // its views, and the last day not complete.
    let ops = &g.ai_operators_daily;
    let views: i64 = col(ops, "referred_views")
        .i64()
        .unwrap()
        .iter()
        .flatten()
        .sum();
    let sent: u64 = complete
        .referrals
        .values()
        .chain(last.referrals.values())
        .sum();
    assert_eq!(views as u64, sent);
    for i in 0..ops.height() {
        let n = |c: &str| col(ops, c).i64().unwrap().get(i).unwrap();
        let ratio = col(ops, "reads_per_referral").f64().unwrap().get(i);
        let want =
            (n("referred_views") > 0).then(|| n("agent_reads") as f64 / n("referred_views") as f64);
        assert_eq!(ratio, want);
        let date = col(ops, "date")
            .date()
            .unwrap()
            .as_date_iter()
            .nth(i)
            .unwrap()
            .unwrap();
        let complete = col(ops, "complete").bool().unwrap().get(i).unwrap();
        assert_eq!(complete, date < day("2026-03-14"), "{date}");
    }
    // The example rule and two queries: the outputs that carry readers' words.
    let projects = ["alpha", "beta", "gamma"].map(String::from);
    let example = std::fs::read_to_string(root().join("jobs/agent-only-markdown.toml"))
        .unwrap()
        .replace("project = \"acme-api\"", "project = \"beta\"");
    let query = |sql: &str| {
        format!(
            "name = \"q\"\nproject = \"beta\"\njob = \"job_docs_refresh\"\nwhen = \"\"\"\n{sql}\n\"\"\"\nprompt = \"{{{{ rows | length }}}}\"\n"
        )
    };
    let rules: Vec<_> = [
        example,
        query("SELECT operator, SUM(agent_reads) AS reads, SUM(referred_views) AS sent FROM ai_operators_daily GROUP BY operator ORDER BY operator"),
        query("SELECT agent AS who, SUM(reads_28d) AS reads FROM agent_page_reads WHERE class = 'unknown' GROUP BY agent ORDER BY who"),
    ]
    .iter()
    .map(|t| docpipe::rules::Rule::parse(t, "r.toml", &projects).unwrap())
    .collect();
    let evals: Vec<_> = docpipe::rules::evaluate(&rules, &tables, None)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let readers: Vec<Vec<String>> = evals.iter().map(|e| e.reader_columns.clone()).collect();
    assert_eq!(
        readers,
        [vec!["path".to_string()], vec![], vec!["who".to_string()]]
    );
    // The operators' query: one row per operator of the agents table that read or sent.
    let operators = &evals[1].rows;
    let names: Vec<String> = col(operators, "operator")
        .str()
        .unwrap()
        .iter()
        .flatten()
        .map(String::from)
        .collect();
    assert_eq!(names, ["Anthropic", "Anysphere", "OpenAI", "Perplexity"]);
    // The example rule: beta's pages read as Markdown to 03-13 (from the lake's agent_pages)
    // that no person viewed to 03-14 (the emulator's truth), most read first, 10 at most.
    let mut md: BTreeMap<String, (i64, std::collections::BTreeSet<String>)> = BTreeMap::new();
    for (file, project) in partitions(out.path(), "agent_pages") {
        if project != "beta" || file.to_string_lossy().contains("date=2026-03-14") {
            continue;
        }
        for b in docpipe::write::parquet::read_file(&file).unwrap() {
            let (path, agent, surface) = (
                text_col(&b, "path"),
                text_col(&b, "agent"),
                text_col(&b, "surface"),
            );
            let events = int_col(&b, "events");
            for i in 0..b.num_rows() {
                if surface.value(i) != "markdown" {
                    continue;
                }
                let page = path.value(i).strip_suffix(".md").unwrap_or(path.value(i));
                let e = md.entry(page.to_string()).or_default();
                e.0 += events.value(i);
                e.1.insert(agent.value(i).to_string());
            }
        }
    }
    let truth = live
        .emu()
        .truth("beta", day("2026-03-01"), day("2026-03-15"))
        .unwrap();
    let mut human: BTreeMap<&str, u64> = BTreeMap::new();
    for r in truth.iter() {
        *human.entry(r.path.as_str()).or_default() += r.human;
    }
    let mut want: Vec<(String, i64, i64)> = md
        .into_iter()
        .filter(|(page, _)| human.get(page.as_str()).copied().unwrap_or(0) == 0)
        .map(|(page, (reads, agents))| (page, reads, agents.len() as i64))
        .collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    want.truncate(10);
    let rows = &evals[0].rows;
    let got: Vec<(String, i64, i64)> = (0..rows.height())
        .map(|i| {
            (
                col(rows, "path").str().unwrap().get(i).unwrap().to_string(),
                col(rows, "markdown_reads_28d")
                    .i64()
                    .unwrap()
                    .get(i)
                    .unwrap(),
                col(rows, "agents")
                    .cast(&polars::prelude::DataType::Int64)
                    .unwrap()
                    .i64()
                    .unwrap()
                    .get(i)
                    .unwrap(),
            )
        })
        .collect();
    assert!(!want.is_empty(), "beta has pages only agents read");
    assert_eq!(got, want);
}
