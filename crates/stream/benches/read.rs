//! What reading the event stream costs: 1,000,000 events (30 days of one project, 2,000 pages,
//! a third of the payloads as JSON-encoded strings, a mix of browsers and agents like a docs
//! site's) decoded, deduplicated, held, and written as the days' five tables every 200,000
//! events (as `docpipe`'s reader flushes), on one thread. The lines are made one at a time as
//! they are read (never held), and making them is timed apart and taken off: the figures are
//! docpipe's own work. Prints the CPU time per event and the process's peak resident memory.
//!
//!   cargo bench -p docpipe-stream --bench read

use docpipe_agents::Agents;
use docpipe_stream::batch::{Batch, Setup};
use docpipe_stream::day::{Classifier, Day, write_day};
use std::collections::HashMap;

const EVENTS: u64 = 1_000_000;
const FLUSH: u64 = 200_000;

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
        r#"{{"event_id":"{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}","subdomain":"acme","user_id":"u-{}","anon_id":"a-{}","session_id":"s-{}","created_at":"2026-11-{day:02}T{:02}:{:02}:{:02}.000Z","event":"{event}","path":"/guides/page-{}","referrer":"{referrer}","user_agent":"{ua}","ip":"203.0.113.{}","properties":{{"title":"Page"}}}}"#,
        (h >> 32) as u32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (i >> 40) & 0xfff,
        i & 0xffff_ffff_ffff,
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

/// The process's CPU time (user and system), in seconds.
fn cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
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

fn main() {
    let mut text = String::new();
    // Making the lines alone: what is taken off.
    let start = cpu();
    let mut bytes = 0u64;
    for i in 0..EVENTS {
        line(i, &mut text);
        bytes += text.len() as u64;
    }
    let making = cpu() - start;
    let out = tempfile::tempdir().expect("a temporary folder");
    let agents = Agents::shipped();
    let mut classify = Classifier::new(&agents);
    let setup = Setup {
        projects: vec!["acme-docs".into()],
        subdomains: HashMap::from([("acme".to_string(), 0)]),
        tz: chrono_tz::UTC,
        session_key: (7, 11),
    };
    let start = cpu();
    let mut batch = Batch::default();
    let (mut added, mut files) = (0u64, 0usize);
    for i in 0..EVENTS {
        line(i, &mut text);
        batch.line(&setup, text.as_bytes(), "bench", i + 1);
        if batch.events >= FLUSH || i + 1 == EVENTS {
            let mut b = std::mem::take(&mut batch);
            for ((_, date), events) in std::mem::take(&mut b.days) {
                let day = Day {
                    out: out.path(),
                    project: "acme-docs",
                    date,
                };
                let w = write_day(&day, &mut b.strings, &events, &mut classify).expect("written");
                added += w.added;
                files += w.files.len();
            }
        }
    }
    let total = cpu() - start;
    let own = total - making;
    // Where the time goes: each line decoded alone, then decoded and held (no write).
    let start = cpu();
    let mut kept = 0u64;
    for i in 0..EVENTS {
        line(i, &mut text);
        kept +=
            docpipe_stream::line::decode(text.as_bytes(), |f| f.path.map_or(0, str::len) as u64)
                .unwrap_or(0);
    }
    let decoding = cpu() - start - making;
    let start = cpu();
    let mut held = Batch::default();
    for i in 0..EVENTS / 5 {
        line(i, &mut text);
        held.line(&setup, text.as_bytes(), "bench", i + 1);
    }
    let holding = (cpu() - start) * 5.0 - making;
    std::hint::black_box((kept, held.events));
    println!(
        "{EVENTS} events ({:.0} MB of lines), {added} written, {files} files: {:.3} µs of CPU an event with the lines' making, {:.3} µs own (making them: {:.3} µs); peak {:.1} MiB",
        bytes as f64 / 1e6,
        total * 1e6 / EVENTS as f64,
        own * 1e6 / EVENTS as f64,
        making * 1e6 / EVENTS as f64,
        peak_mib()
    );
    println!(
        "  of which: decoding a line {:.3} µs, decoding and holding it {:.3} µs, writing the days' tables {:.3} µs (the rest)",
        decoding * 1e6 / EVENTS as f64,
        holding * 1e6 / EVENTS as f64,
        (own - holding) * 1e6 / EVENTS as f64
    );
}
