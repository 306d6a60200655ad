//! The analytics event stream, as the service writes it to a customer's bucket: for each hour of
//! a day, one object of newline-delimited JSON (named from the hour's UTC timestamp) holding the
//! page views of the streamed projects. A day's browser views add up to the API's `human` of
//! each page, its agents' views to `ai` (or to `agent_fraction` of it, rounded down, when the
//! data file leaves server-side fetches out). Both payload forms, a mix of agents and browsers
//! (a browser's user agent reading Markdown among them), readers sent by AI products, searches,
//! `llms.txt` and `robots.txt` fetches, an event repeated in the next object, and, when asked,
//! bad lines. The truth of a day ([`DayTruth`]) is counted here as the events are made.

use crate::Emulator;
pub use crate::data::StreamData;
use crate::generate::{hash_str, mix, unit};
use chrono::{Duration, NaiveDate};
use serde::Serialize;
use std::collections::BTreeMap;

/// A project's subdomain in the stream.
pub fn subdomain(project: &str) -> String {
    format!("docs-{project}")
}

/// A reader the stream knows: its user agent, what docpipe should name it and its share.
struct Reader {
    user_agent: &'static str,
    agent: &'static str,
    class: &'static str,
    /// Share of the AI views (over the list, they sum to 1).
    share: f64,
    /// Share of its views that are of a page's Markdown.
    markdown: f64,
}

/// A browser's user agent reading Markdown: what docpipe calls an unnamed agent.
pub const MASKED: &str = "unnamed agent (a browser's user agent)";

const BROWSERS: [&str; 3] = [
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
];

const AGENTS: [Reader; 11] = [
    Reader {
        user_agent: "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
        agent: "GPTBot",
        class: "training",
        share: 0.18,
        markdown: 0.0,
    },
    Reader {
        user_agent: "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot",
        agent: "ChatGPT-User",
        class: "assistant",
        share: 0.14,
        markdown: 0.3,
    },
    Reader {
        user_agent: "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot)",
        agent: "OAI-SearchBot",
        class: "search",
        share: 0.08,
        markdown: 0.0,
    },
    Reader {
        user_agent: "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
        agent: "ClaudeBot",
        class: "training",
        share: 0.12,
        markdown: 0.0,
    },
    Reader {
        user_agent: "Claude-User (claude-code/2.0.14; +https://support.anthropic.com/)",
        agent: "claude-code",
        class: "coding",
        share: 0.12,
        markdown: 0.8,
    },
    Reader {
        user_agent: "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; +Claude-User@anthropic.com)",
        agent: "Claude-User",
        class: "assistant",
        share: 0.07,
        markdown: 0.3,
    },
    Reader {
        user_agent: "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
        agent: "PerplexityBot",
        class: "search",
        share: 0.07,
        markdown: 0.0,
    },
    Reader {
        user_agent: "Cursor/1.7 (darwin arm64)",
        agent: "Cursor",
        class: "coding",
        share: 0.06,
        markdown: 0.9,
    },
    Reader {
        user_agent: BROWSERS[0],
        agent: MASKED,
        class: "unknown",
        share: 0.06,
        markdown: 1.0,
    },
    Reader {
        user_agent: "python-requests/2.32.3",
        agent: "python-requests",
        class: "unknown",
        share: 0.05,
        markdown: 0.5,
    },
    Reader {
        user_agent: "Mozilla/5.0 (compatible; NovaCrawlBot/0.9; +https://nova.example/bot)",
        agent: "NovaCrawlBot",
        class: "unknown",
        share: 0.05,
        markdown: 0.0,
    },
];

/// The AI products readers come from, and the share of human views each sends.
const REFERRERS: [(&str, f64); 3] = [
    ("https://chatgpt.com/", 0.03),
    ("https://www.perplexity.ai/search?q=docs", 0.015),
    ("https://claude.ai/chat/1", 0.01),
];

/// One object of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its key under the stream's prefix.
    pub name: String,
    /// Its lines.
    pub bytes: Vec<u8>,
}

/// A day's true counts of reads, per project: by agent (docpipe's name), class and surface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DayTruth {
    /// `(project, agent, class, surface)` -> events.
    pub reads: BTreeMap<(String, String, String, String), u64>,
    /// `(project, referrer host, path)` -> human views an AI product sent.
    pub referrals: BTreeMap<(String, String, String), u64>,
    /// Events made (each once, whatever its objects).
    pub events: u64,
    /// Events written twice (in two objects).
    pub repeated: u64,
    /// Bad lines written, and events of an unknown name or subdomain.
    pub bad: u64,
}

/// One event before it is written.
struct Made {
    second: u32,
    line: String,
}

struct DayWriter<'a> {
    project: &'a str,
    day: NaiveDate,
    seed: u64,
    events: Vec<Made>,
    truth: DayTruth,
    n: u64,
}

impl DayWriter<'_> {
    fn roll(&mut self, salt: u64) -> u64 {
        self.n += 1;
        mix(self.seed ^ salt.wrapping_mul(0x9E37_79B9) ^ self.n.wrapping_mul(0x1000_0001))
    }

    fn event(
        &mut self,
        event: &str,
        path: &str,
        user_agent: &str,
        referrer: Option<&str>,
        session: u64,
        truth: Option<(&str, &str, &str)>,
    ) {
        let h = self.roll(7);
        let second = (h % 86_400) as u32;
        let at = self.day.and_hms_opt(0, 0, 0).unwrap_or_default()
            + Duration::seconds(i64::from(second));
        let id = format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            h >> 32,
            (h >> 16) & 0xffff,
            h & 0xfff,
            (h >> 20) & 0xfff,
            mix(h) & 0xffff_ffff_ffff
        );
        let payload = serde_json::json!({
            "event_id": id,
            "subdomain": subdomain(self.project),
            "user_id": format!("user-{:x}", mix(session ^ 0x55)),
            "anon_id": format!("anon-{:x}", mix(session ^ 0x77)),
            "session_id": format!("sess-{session:x}"),
            "created_at": format!("{}Z", at.format("%Y-%m-%dT%H:%M:%S%.3f")),
            "event": event,
            "path": path,
            "referrer": referrer,
            "user_agent": user_agent,
            "ip": format!("203.0.113.{}", session % 250 + 1),
            "properties": if h.is_multiple_of(3) {
                serde_json::Value::String(r#"{"title":"t"}"#.into())
            } else {
                serde_json::json!({"title": "t"})
            },
        });
        // A third of the lines carry the payload as a JSON-encoded string.
        let payload = if h % 3 == 1 {
            serde_json::Value::String(payload.to_string())
        } else {
            payload
        };
        let line = serde_json::json!({"eventType": event, "payload": payload}).to_string();
        self.events.push(Made { second, line });
        self.truth.events += 1;
        if let Some((agent, class, surface)) = truth {
            let key = (
                self.project.to_string(),
                agent.to_string(),
                class.to_string(),
                surface.to_string(),
            );
            *self.truth.reads.entry(key).or_default() += 1;
        }
    }
}

fn pick<T>(items: &[T], share: impl Fn(&T) -> f64, u: f64) -> &T {
    let mut acc = 0.0;
    for it in items {
        acc += share(it);
        if u < acc {
            return it;
        }
    }
    &items[items.len() - 1]
}

impl DayWriter<'_> {
    /// A page's human views: browsers, some sent by an AI product, some searching.
    fn humans(&mut self, path: &str, views: u64, sessions: u64) {
        for _ in 0..views {
            let h = self.roll(11);
            let browser = BROWSERS[(h % 3) as usize];
            let u = unit(mix(h));
            let mut acc = 0.0;
            let mut referrer = (u < 0.5).then_some("https://www.google.com/");
            for (r, share) in REFERRERS {
                acc += share;
                if u < acc {
                    referrer = Some(r);
                    let host = r.split('/').nth(2).unwrap_or("").trim_start_matches("www.");
                    let key = (self.project.to_string(), host.to_string(), path.to_string());
                    *self.truth.referrals.entry(key).or_default() += 1;
                    break;
                }
            }
            let session = mix(h ^ 3) % sessions.max(1);
            let truth = Some(("browser", "human", "html"));
            self.event("docs.content.view", path, browser, referrer, session, truth);
            if h.is_multiple_of(10) {
                self.event("docs.search.query", path, browser, None, session, None);
            }
        }
    }

    /// A page's agent views: each from a reader of the mix, some of its Markdown.
    fn agents(&mut self, path: &str, views: u64) {
        for _ in 0..views {
            let h = self.roll(13);
            let r = pick(&AGENTS, |r| r.share, unit(h));
            let session = mix(h ^ 5);
            if unit(mix(h ^ 9)) < r.markdown {
                let truth = Some((r.agent, r.class, "markdown"));
                if h.is_multiple_of(2) {
                    self.event(
                        "docs.content.md.view",
                        path,
                        r.user_agent,
                        None,
                        session,
                        truth,
                    );
                } else {
                    let md = format!("{path}.md");
                    self.event("docs.content.view", &md, r.user_agent, None, session, truth);
                }
            } else {
                let truth = Some((r.agent, r.class, "html"));
                self.event(
                    "docs.content.view",
                    path,
                    r.user_agent,
                    None,
                    session,
                    truth,
                );
            }
        }
    }

    /// The day's `llms.txt` and `robots.txt` fetches: a few crawlers and one coding agent.
    fn plumbing(&mut self) {
        for (i, path, surface) in [
            (0, "/llms.txt", "llms_txt"),
            (3, "/llms.txt", "llms_txt"),
            (6, "/llms.txt", "llms_txt"),
            (4, "/llms-full.txt", "llms_txt"),
            (0, "/robots.txt", "infrastructure"),
            (3, "/robots.txt", "infrastructure"),
        ] {
            let r = &AGENTS[i];
            let truth = Some((r.agent, r.class, surface));
            self.event("docs.content.view", path, r.user_agent, None, 1, truth);
        }
    }
}

/// A day of the stream (UTC): its 24 hourly objects, and their truth.
pub fn day(emu: &Emulator, day: NaiveDate) -> (Vec<Object>, DayTruth) {
    let cfg = emu.data().stream.clone().unwrap_or_default();
    let mut lines: Vec<Made> = Vec::new();
    let mut truth = DayTruth::default();
    for project in &cfg.projects {
        let Some(rows) = emu.truth(project, day, day.succ_opt().unwrap_or(day)) else {
            continue;
        };
        let total: u64 = rows.iter().map(|r| r.human).sum();
        let mut w = DayWriter {
            project,
            day,
            seed: mix(emu.data().seed ^ hash_str(project) ^ hash_str(&day.to_string())),
            events: Vec::new(),
            truth: std::mem::take(&mut truth),
            n: 0,
        };
        for row in rows.iter() {
            w.humans(&row.path, row.human, total / 4);
            let streamed = (row.ai as f64 * cfg.agent_fraction).floor() as u64;
            w.agents(&row.path, streamed);
        }
        w.plumbing();
        truth = w.truth;
        lines.append(&mut w.events);
    }
    lines.sort_by_key(|m| m.second);
    let objects = objects(day, lines, &cfg, &mut truth);
    (objects, truth)
}

/// The day's lines cut into hourly objects: each object's first event written again at the end
/// of the one before, bad lines when asked (and the day's last object cut short).
fn objects(
    day: NaiveDate,
    lines: Vec<Made>,
    cfg: &StreamData,
    truth: &mut DayTruth,
) -> Vec<Object> {
    let mut hours: Vec<Vec<String>> = vec![Vec::new(); 24];
    for m in lines {
        hours[(m.second / 3600) as usize].push(m.line);
    }
    for h in 1..24 {
        if let Some(first) = hours[h].first().cloned()
            && !hours[h - 1].is_empty()
        {
            hours[h - 1].push(first);
            truth.repeated += 1;
        }
    }
    let mut out = Vec::new();
    for (h, mut lines) in hours.into_iter().enumerate() {
        if lines.is_empty() {
            continue;
        }
        if cfg.bad_lines {
            lines.push("not json {".into());
            lines.push(
                r#"{"eventType":"docs.content.view","payload":"{\"event_id\": oops"}"#.into(),
            );
            lines.push(format!(r#"{{"eventType":"docs.experiment.viewed","payload":{{"event_id":"x-{h}","subdomain":"docs-x","created_at":"{day}T00:00:00Z"}}}}"#));
            lines.push(format!(r#"{{"eventType":"docs.content.view","payload":{{"event_id":"y-{h}","subdomain":"docs-nobody","created_at":"{day}T00:00:00Z","path":"/a"}}}}"#));
            truth.bad += 4;
        }
        let mut bytes = lines.join("\n").into_bytes();
        bytes.push(b'\n');
        if cfg.bad_lines && h == 23 {
            let cut = format!(
                r#"{{"eventType":"docs.content.view","payload":{{"event_id":"cut-{day}","subd"#
            );
            bytes.extend_from_slice(cut.as_bytes());
            truth.bad += 1;
        }
        out.push(Object {
            name: format!(
                "{}/{}T{h:02}0000Z.jsonl",
                day.format("%Y/%m/%d"),
                day.format("%Y%m%d")
            ),
            bytes,
        });
    }
    out
}
