//! What naming a reader costs: 1,000,000 reads (a user agent, an event and a path) of a mix like a
//! docs site's stream (browsers most, then assistants, crawlers, coding agents, HTTP programs and
//! browsers reading Markdown), each classified by the shipped table, on one thread: first each
//! read alone, then with the user agents' names kept in a map by user agent (a stream has few
//! distinct ones: what its reader will keep). Prints the time per read and the classes counted
//! (so that the work cannot be optimised away).
//!
//!   cargo bench -p docpipe-agents --bench classify

use docpipe_agents::{Agents, Class, Who, surface};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

const USER_AGENTS: [(&str, u32); 12] = [
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
        40,
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
        20,
    ),
    (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ChatGPT-User/1.0; +https://openai.com/bot",
        10,
    ),
    (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
        5,
    ),
    (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
        5,
    ),
    (
        "Claude-User (claude-code/1.0.83; +https://support.anthropic.com/)",
        5,
    ),
    (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
        3,
    ),
    (
        "Mozilla/5.0 (compatible; NewAgentBot/2.1; +https://example.com/bot)",
        2,
    ),
    ("axios/1.7.2", 3),
    ("curl/8.5.0", 2),
    (
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        3,
    ),
    ("python-requests/2.32.3", 2),
];

const READS: [(&str, &str); 5] = [
    ("docs.content.view", "/guides/quickstart"),
    ("docs.content.view", "/api-reference/endpoints/list-pages"),
    ("docs.content.md.view", "/guides/quickstart"),
    ("docs.content.view", "/llms.txt"),
    ("docs.content.view", "/images/logo.svg"),
];

/// One round's line: the time per read and the classes counted.
fn print(what: &str, n: usize, took: Duration, classes: &BTreeMap<Class, u64>) {
    let counted: Vec<String> = classes.iter().map(|(c, k)| format!("{c} {k}")).collect();
    println!(
        "{n} {what} in {:.1} ms: {:.0} ns a read; {}",
        took.as_secs_f64() * 1e3,
        took.as_nanos() as f64 / n as f64,
        counted.join(", ")
    );
}

fn main() {
    let n = 1_000_000;
    let weights: u32 = USER_AGENTS.iter().map(|(_, w)| w).sum();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let reads: Vec<(&str, &str, &str)> = (0..n)
        .map(|_| {
            let mut pick = (next() % u64::from(weights)) as u32;
            let ua = USER_AGENTS
                .iter()
                .find(|(_, w)| {
                    let hit = pick < *w;
                    pick = pick.saturating_sub(*w);
                    hit
                })
                .map_or(USER_AGENTS[0].0, |(u, _)| u);
            let (event, path) = READS[(next() % READS.len() as u64) as usize];
            (ua, event, path)
        })
        .collect();
    let agents = Agents::shipped();
    for _ in 0..3 {
        let mut classes: BTreeMap<Class, u64> = BTreeMap::new();
        let mut known: HashMap<&str, Who> = HashMap::new();
        let start = Instant::now();
        for (ua, event, path) in &reads {
            let who = known.entry(ua).or_insert_with(|| agents.who(ua));
            let class = if who.class == Class::Human && surface(event, path).is_for_agents() {
                Class::Unknown
            } else {
                who.class
            };
            *classes.entry(class).or_default() += 1;
        }
        print(
            "reads, names kept by user agent,",
            n,
            start.elapsed(),
            &classes,
        );
    }
    for _ in 0..3 {
        let mut classes: BTreeMap<Class, u64> = BTreeMap::new();
        let start = Instant::now();
        for (ua, event, path) in &reads {
            *classes
                .entry(agents.read(ua, event, path).who.class)
                .or_default() += 1;
        }
        print("reads classified", n, start.elapsed(), &classes);
    }
}
