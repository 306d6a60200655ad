//! What reading the event stream costs: 1,000,000 events (30 days of one project, 2,000 pages,
//! a third of the payloads as JSON-encoded strings, a mix of browsers and agents like a docs
//! site's) decoded, deduplicated, held, and written as the days' five tables every 200,000
//! events (as `docpipe`'s reader flushes), on one thread. The lines are made 2,000 at a time
//! (0.9 MB held, as a reader holds a part of an object) and the clock (the process's CPU clock,
//! to the nanosecond) runs only while docpipe reads them: the figures are docpipe's own work.
//! Prints the CPU time per event and the process's peak resident memory, with glibc's malloc
//! set as `docpipe` sets it.
//!
//!   cargo bench -p docpipe-stream --bench read
//!
//! The lake goes to a temporary folder (`TMPDIR`): on an ext4 disk without a journal (as this
//! machine's) the kernel passes over the inodes deleted in the last minutes when it makes a file,
//! and each run deletes 534 at its end, so that back-to-back runs pay more and more;
//! `TMPDIR=/dev/shm` leaves that out (docs/benchmarks.md).
//!
//! With `DOCPIPE_BENCH_WRITE_ONLY=1` it reads 50,000 events and writes their days once, nothing
//! else: run under `valgrind --tool=callgrind --collect-atstart=no
//! '--toggle-collect=*write_day*'`, it counts the instructions of writing, the same on every run
//! (this machine's clocks move 20 to 40% between runs; docs/benchmarks.md).

use docpipe_agents::Agents;
use docpipe_stream::batch::{Batch, Setup};
use docpipe_stream::day::{Classifier, Day, write_day};

const EVENTS: u64 = 1_000_000;
const FLUSH: u64 = 200_000;
const CHUNK: u64 = 2_000;
const HOT_ROUNDS: u64 = 50;

const USER_AGENTS: [&str; 8] = [
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ChatGPT-User/1.0; +https://openai.com/bot",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
    "Claude-User (claude-code/1.0.83; +https://support.anthropic.com/)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
    "python-requests/2.32.3",
    "Cursor/1.7 (darwin arm64)",
];

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Event `i` as the service writes a line (`out` cleared first).
fn line(i: u64, out: &mut String) {
    use std::fmt::Write;
    out.clear();
    let h = mix(i);
    // A version 4 UUID's random bits (the service's ids are UUIDs; the emulator's are random).
    let r = mix(i ^ 0x9e37_79b9_7f4a_7c15);
    let day = 1 + (i * 30 / EVENTS);
    let second = h % 86_400;
    let ua = USER_AGENTS[(h >> 8) as usize % USER_AGENTS.len()];
    let event = if h.is_multiple_of(5) {
        "docs.content.md.view"
    } else {
        "docs.content.view"
    };
    let referrer = if h.is_multiple_of(40) {
        "https://chatgpt.com/"
    } else {
        "https://www.google.com/"
    };
    let payload = format!(
        r#"{{"event_id":"{:08x}-{:04x}-4{:03x}-{:x}{:03x}-{:012x}","subdomain":"acme","user_id":"u-{}","anon_id":"a-{}","session_id":"s-{}","created_at":"2026-11-{day:02}T{:02}:{:02}:{:02}.000Z","event":"{event}","path":"/guides/page-{}","referrer":"{referrer}","user_agent":"{ua}","ip":"203.0.113.{}","properties":{{"title":"Page"}}}}"#,
        (h >> 32) as u32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        8 + (r >> 62),
        (r >> 48) & 0xfff,
        r & 0xffff_ffff_ffff,
        h % 5000,
        h % 7000,
        h % 9000,
        second / 3600,
        second / 60 % 60,
        second % 60,
        (h >> 20) % 2000,
        h % 250
    );
    if h % 3 == 1 {
        let quoted = serde_json::Value::String(payload).to_string();
        let _ = write!(out, r#"{{"eventType":"{event}","payload":{quoted}}}"#);
    } else {
        let _ = write!(out, r#"{{"eventType":"{event}","payload":{payload}}}"#);
    }
}

/// The process's CPU time, in seconds (`CLOCK_PROCESS_CPUTIME_ID`: to the nanosecond).
fn cpu() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Lines `from..from + CHUNK` (at most to [`EVENTS`]) into `lines`, made off the clock.
fn chunk(from: u64, lines: &mut Vec<String>) {
    let to = (from + CHUNK).min(EVENTS);
    lines.resize_with((to - from) as usize, String::new);
    for (i, text) in (from..to).zip(lines.iter_mut()) {
        line(i, text);
    }
}

/// The process's peak resident memory, in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The kind of filesystem `dir` is on, as far as the bench tells them apart (ext4's passing over
/// recently deleted inodes is in the figure on one, not on tmpfs: docs/benchmarks.md).
fn filesystem(dir: &std::path::Path) -> &'static str {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return "unknown";
    };
    // SAFETY: statfs reads a NUL-terminated path and writes the struct it is given.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return "unknown";
    }
    match st.f_type as u64 {
        0xEF53 => "ext2, 3 or 4",
        0x0102_1994 => "tmpfs",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        _ => "another filesystem",
    }
}

/// The bytes of every file under `dir`.
fn bytes_under(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        total += if path.is_dir() {
            bytes_under(&path)
        } else {
            entry.metadata().map_or(0, |m| m.len())
        };
    }
    total
}

/// The first `events` events read and held (not written).
fn hold(setup: &Setup, events: u64, lines: &mut Vec<String>) -> Batch {
    let mut held = Batch::default();
    for from in (0..events).step_by(CHUNK as usize) {
        chunk(from, lines);
        for (i, text) in (from..).zip(lines.iter()) {
            held.line(setup, text.as_bytes(), "bench", i + 1);
        }
    }
    held
}

/// The days of `held` written under `out`.
fn write_held(out: &std::path::Path, held: &mut Batch, classify: &mut Classifier<'_>) {
    for ((_, date), events) in &held.days {
        let day = Day {
            out,
            project: "acme-docs",
            date: *date,
        };
        write_day(&day, &mut held.strings, events, classify).expect("written");
    }
}

/// glibc's malloc set as `docpipe` sets it at start-up (src/alloc.rs: freed memory kept for the
/// next window), so that the peak is the one the reader's process would reach.
fn tune() {
    // SAFETY: mallopt only sets malloc parameters; it is called before any other thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TOP_PAD, 16 << 20);
    }
}

fn main() {
    tune();
    let out = tempfile::tempdir().expect("a temporary folder");
    let agents = Agents::shipped();
    let mut classify = Classifier::new(&agents);
    let setup = Setup {
        projects: vec!["acme-docs".into()],
        subdomains: [("acme".to_string(), 0)].into_iter().collect(),
        tz: chrono_tz::UTC,
        session_key: (7, 11),
    };
    let mut lines = Vec::new();
    if std::env::var_os("DOCPIPE_BENCH_WRITE_ONLY").is_some() {
        let mut held = hold(&setup, FLUSH / 4, &mut lines);
        write_held(out.path(), &mut held, &mut classify);
        return;
    }
    let (mut own, mut bytes) = (0.0, 0u64);
    let mut batch = Batch::default();
    let (mut added, mut files, mut writing) = (0u64, 0usize, 0.0);
    for from in (0..EVENTS).step_by(CHUNK as usize) {
        chunk(from, &mut lines);
        bytes += lines.iter().map(|l| l.len() as u64).sum::<u64>();
        let start = cpu();
        for (i, text) in (from..).zip(&lines) {
            batch.line(&setup, text.as_bytes(), "bench", i + 1);
            if batch.events >= FLUSH || i + 1 == EVENTS {
                let flushing = cpu();
                let mut b = std::mem::take(&mut batch);
                for ((_, date), events) in std::mem::take(&mut b.days) {
                    let day = Day {
                        out: out.path(),
                        project: "acme-docs",
                        date,
                    };
                    let w =
                        write_day(&day, &mut b.strings, &events, &mut classify).expect("written");
                    added += w.added;
                    files += w.files.len();
                }
                writing += cpu() - flushing;
            }
        }
        own += cpu() - start;
    }
    let peak = peak_mib();
    // Where the reading goes: each line decoded alone (nothing held).
    let (mut decoding, mut kept) = (0.0, 0u64);
    for from in (0..EVENTS).step_by(CHUNK as usize) {
        chunk(from, &mut lines);
        let start = cpu();
        for text in &lines {
            kept += docpipe_stream::line::decode(text.as_bytes(), |f| {
                f.path.map_or(0, str::len) as u64
            })
            .unwrap_or(0);
        }
        decoding += cpu() - start;
    }
    // One flush's days written again into empty folders, the best of five (the least disturbed
    // by anything else on the machine): the figure to compare a change of the writing by.
    let mut held = hold(&setup, FLUSH, &mut lines);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let again = tempfile::tempdir().expect("a temporary folder");
        let start = cpu();
        write_held(again.path(), &mut held, &mut classify);
        best = best.min(cpu() - start);
    }
    // The decoder against serde_json's, in turns on the same lines (hot in the cache).
    chunk(0, &mut lines);
    let hot = |read: &dyn Fn(&[u8]) -> u64| {
        let start = cpu();
        let mut n = 0u64;
        for _ in 0..HOT_ROUNDS {
            for text in &lines {
                n += read(text.as_bytes());
            }
        }
        std::hint::black_box(n);
        (cpu() - start) * 1e6 / (HOT_ROUNDS * CHUNK) as f64
    };
    let path_len = |f: &docpipe_stream::line::Fields<'_>| f.path.map_or(0, str::len) as u64;
    let (mut fast, mut parsed, mut skipped) = (0.0, 0.0, 0.0);
    for _ in 0..3 {
        fast += hot(&|l| docpipe_stream::line::decode(l, path_len).unwrap_or(0)) / 3.0;
        parsed += hot(&|l| docpipe_stream::line::decode_parsed(l, path_len).unwrap_or(0)) / 3.0;
        skipped +=
            hot(&|l| u64::from(serde_json::from_slice::<serde::de::IgnoredAny>(l).is_ok())) / 3.0;
    }
    std::hint::black_box(kept);
    let per = |t: f64| t * 1e6 / EVENTS as f64;
    println!(
        "{EVENTS} events ({:.0} MB of lines), {added} written, {files} files ({:.1} MB): {:.3} µs of CPU an event, docpipe's own; peak {:.1} MiB while reading them",
        bytes as f64 / 1e6,
        bytes_under(out.path()) as f64 / 1e6,
        per(own),
        peak
    );
    println!(
        "  of which: reading (decoding and holding) {:.3} µs, writing the days' tables (deduplicated there) {:.3} µs; a line decoded alone {:.3} µs",
        per(own - writing),
        per(writing),
        per(decoding)
    );
    println!(
        "  a flush of {FLUSH} events written again, best of 5: {:.3} µs an event; the lake under {} ({})",
        best * 1e6 / FLUSH as f64,
        out.path().display(),
        filesystem(out.path())
    );
    println!(
        "  a line decoded, 2,000 lines {HOT_ROUNDS} times (in the cache), in turns: docpipe's reader {fast:.3} µs, serde_json's {parsed:.3} µs, serde_json passing over it (reading nothing) {skipped:.3} µs"
    );
}
