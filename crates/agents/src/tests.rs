use super::*;

/// A user agent's classification, as a tuple to compare.
fn who(a: &Agents, ua: &str) -> (String, String, Class) {
    let w = a.who(ua);
    (w.agent, w.operator, w.class)
}

fn named(agent: &str, operator: &str, class: Class) -> (String, String, Class) {
    (agent.to_string(), operator.to_string(), class)
}

#[test]
fn the_shipped_table_names_the_agents_of_the_field_by_their_real_user_agents() {
    let a = Agents::shipped();
    assert_eq!(a.version(), "2026-11-28");
    assert_eq!(a.named().count(), 22);
    let ua = |product: &str| {
        format!(
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; {product}; +https://example.com/bot)"
        )
    };
    let cases = [
        ("GPTBot/1.2", named("GPTBot", "OpenAI", Class::Training)),
        (
            "OAI-SearchBot/1.0",
            named("OAI-SearchBot", "OpenAI", Class::Search),
        ),
        (
            "ClaudeBot/1.0",
            named("ClaudeBot", "Anthropic", Class::Training),
        ),
        (
            "Claude-SearchBot/1.0",
            named("Claude-SearchBot", "Anthropic", Class::Search),
        ),
        (
            "PerplexityBot/1.0",
            named("PerplexityBot", "Perplexity", Class::Search),
        ),
        (
            "Perplexity-User/1.0",
            named("Perplexity-User", "Perplexity", Class::Assistant),
        ),
        ("CCBot/2.0", named("CCBot", "Common Crawl", Class::Training)),
        (
            "Bytespider",
            named("Bytespider", "ByteDance", Class::Training),
        ),
        (
            "meta-externalagent/1.1",
            named("meta-externalagent", "Meta", Class::Training),
        ),
        (
            "meta-externalfetcher/1.1",
            named("meta-externalfetcher", "Meta", Class::Assistant),
        ),
        ("Googlebot/2.1", named("Googlebot", "Google", Class::Search)),
        ("bingbot/2.0", named("bingbot", "Microsoft", Class::Search)),
    ];
    for (product, want) in cases {
        assert_eq!(who(&a, &ua(product)), want, "{product}");
    }
    // Matched whatever the case.
    assert_eq!(
        who(&a, "gptbot/1.0"),
        named("GPTBot", "OpenAI", Class::Training)
    );
}

#[test]
fn a_generic_bot_rule_never_swallows_an_assistant_and_claude_code_is_the_program_that_fetched() {
    let a = Agents::shipped();
    // ChatGPT-User's user agent ends in openai.com/bot.
    assert_eq!(
        who(
            &a,
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ChatGPT-User/1.0; +https://openai.com/bot"
        ),
        named("ChatGPT-User", "OpenAI", Class::Assistant)
    );
    assert_eq!(
        who(
            &a,
            "Claude-User (claude-code/1.0.83; +https://support.anthropic.com/)"
        ),
        named("claude-code", "Anthropic", Class::Coding)
    );
    assert_eq!(
        who(&a, "Claude-User/1.0 (+https://support.anthropic.com/)"),
        named("Claude-User", "Anthropic", Class::Assistant)
    );
}

#[test]
fn what_the_table_does_not_name_is_a_browser_or_an_unknown_program_named_by_its_product_token() {
    let a = Agents::shipped();
    let chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
    assert_eq!(who(&a, chrome), named(BROWSER, "", Class::Human));
    let unknown = |name: &str| named(name, "", Class::Unknown);
    let cases = [
        (
            "Mozilla/5.0 (compatible; NewAgentBot/2.1; +https://example.com/bot)",
            "NewAgentBot",
        ),
        ("axios/1.7.2", "axios"),
        ("python-requests/2.32.3", "python-requests"),
        ("curl/8.5.0", "curl"),
        ("TotallyNew/1.0 (something)", "TotallyNew"),
        ("", "(no user agent)"),
        ("   ", "(no user agent)"),
    ];
    for (ua, name) in cases {
        assert_eq!(who(&a, ua), unknown(name), "{ua:?}");
    }
    // A stranger's text: one line, cut at MAX_NAME characters.
    let long = format!("Evil\u{7}Bot{}/1.0", "x".repeat(500));
    let w = a.who(&long);
    assert_eq!(w.class, Class::Unknown);
    assert_eq!(w.agent.chars().count(), MAX_NAME);
    assert!(w.agent.starts_with("EvilBotxxx"), "{}", w.agent);
    // A line break splits a user agent's tokens: no name holds one.
    assert_eq!(a.who("Evil\nSpyBot/1.0").agent, "SpyBot");
}

#[test]
fn a_read_is_of_a_surface_and_a_browser_reading_what_only_programs_read_is_an_agent() {
    let cases = [
        ("docs.content.view", "/guides/quickstart", Surface::Html),
        ("docs.content.view", "/", Surface::Html),
        (
            "docs.content.md.view",
            "/guides/quickstart",
            Surface::Markdown,
        ),
        (
            "docs.content.view",
            "/guides/quickstart.md",
            Surface::Markdown,
        ),
        ("docs.content.view", "/llms.txt", Surface::LlmsTxt),
        ("docs.content.view", "/llms-full.txt?x=1", Surface::LlmsTxt),
        ("docs.content.view", "/v2/llms.txt", Surface::LlmsTxt),
        ("docs.mcp.tool_call", "/", Surface::Mcp),
        ("docs.content.view", "/mcp", Surface::Mcp),
        ("docs.content.view", "/mcp/search", Surface::Mcp),
        ("docs.content.view", "/mcpx", Surface::Html),
        ("docs.content.view", "/robots.txt", Surface::Infrastructure),
        ("docs.content.view", "/sitemap.xml", Surface::Infrastructure),
        (
            "docs.content.view",
            "/sitemap-0.xml",
            Surface::Infrastructure,
        ),
        (
            "docs.content.view",
            "/images/logo.SVG",
            Surface::Infrastructure,
        ),
        (
            "docs.content.view",
            "/_next/static/chunk.js",
            Surface::Infrastructure,
        ),
    ];
    for (event, path, want) in cases {
        assert_eq!(surface(event, path), want, "{event} {path}");
    }
    let names = Surface::ALL.map(|s| (s.index(), s.as_str()));
    assert_eq!(
        names,
        [
            (0, "html"),
            (1, "markdown"),
            (2, "llms_txt"),
            (3, "mcp"),
            (4, "infrastructure")
        ]
    );
    let a = Agents::shipped();
    let browser = "Mozilla/5.0 (Macintosh) AppleWebKit/605.1.15 Safari/605.1.15";
    let r = a.read(browser, "docs.content.md.view", "/guides/quickstart");
    assert_eq!(
        (r.who.agent.as_str(), r.who.class, r.surface),
        (MASKED, Class::Unknown, Surface::Markdown)
    );
    let r = a.read(browser, "docs.content.view", "/llms.txt");
    assert_eq!((r.who.class, r.surface), (Class::Unknown, Surface::LlmsTxt));
    let r = a.read(browser, "docs.content.view", "/guides/quickstart");
    assert_eq!(
        (r.who.agent.as_str(), r.who.class, r.surface),
        (BROWSER, Class::Human, Surface::Html)
    );
    // A named agent keeps its name whatever it reads.
    let r = a.read("GPTBot/1.2", "docs.content.view", "/llms-full.txt");
    assert_eq!(
        (r.who.agent.as_str(), r.who.class, r.surface),
        ("GPTBot", Class::Training, Surface::LlmsTxt)
    );
    assert_eq!(
        [Class::Training, Class::Coding, Class::Unknown].map(Class::as_str),
        ["training", "coding", "unknown"]
    );
    assert_eq!(Surface::LlmsTxt.to_string(), "llms_txt");
}

#[test]
fn a_users_file_adds_and_replaces_agents_and_the_version_says_so() {
    let mine = r#"
version = "acme-1"

[[agents]]
agent = "NewAgentBot"
operator = "Example AI"
class = "assistant"
patterns = ["NewAgentBot"]

[[agents]]
agent = "GPTBot"
operator = "OpenAI"
class = "search"
patterns = ["GPTBot"]

[generic]
browsers = ["Lynx/"]
"#;
    let a = Agents::with_user(mine, "my-agents.toml").unwrap();
    assert_eq!(a.version(), "2026-11-28+acme-1");
    assert_eq!(a.named().count(), 23);
    assert_eq!(
        a.named().next().unwrap(),
        Who {
            agent: "NewAgentBot".into(),
            operator: "Example AI".into(),
            class: Class::Assistant
        }
    );
    assert_eq!(
        who(
            &a,
            "Mozilla/5.0 (compatible; NewAgentBot/2.1; +https://example.com/bot)"
        ),
        named("NewAgentBot", "Example AI", Class::Assistant)
    );
    assert_eq!(
        who(&a, "GPTBot/1.2"),
        named("GPTBot", "OpenAI", Class::Search)
    );
    assert_eq!(
        who(&a, "ClaudeBot/1.0"),
        named("ClaudeBot", "Anthropic", Class::Training)
    );
    assert_eq!(who(&a, "Lynx/2.9.0"), named(BROWSER, "", Class::Human));
    // The shipped table alone is unchanged.
    assert_eq!(
        who(&Agents::shipped(), "Lynx/2.9.0"),
        named("Lynx", "", Class::Unknown)
    );
}

#[test]
fn a_bad_users_file_is_one_line_naming_the_file_and_the_problem() {
    let row = |fields: &str| format!("version = \"v1\"\n\n[[agents]]\n{fields}\n");
    let cases = [
        (
            "version = \"v1\"\nagents = 3\n".to_string(),
            "a.toml: line 2: invalid type: integer `3`, expected a sequence",
        ),
        (
            "[[agents]]\nagent = \"X\"\noperator = \"Y\"\nclass = \"search\"\npatterns = [\"XBot\"]\n".to_string(),
            "a.toml: line 1: missing field `version`",
        ),
        (
            "version = \"my version\"\n".to_string(),
            "a.toml: version \"my version\": letters, digits, '.', '_' and '-' only",
        ),
        (
            row("agent = \"X\"\noperator = \"Y\"\nclass = \"crawler\"\npatterns = [\"XBot\"]"),
            "a.toml: line 6: unknown variant `crawler`, expected one of `training`, `search`, `assistant`, `coding`, `human`, `unknown`",
        ),
        (
            row("agent = \"X\"\noperator = \"Y\"\nclass = \"search\"\npatterns = [\"ai\"]"),
            "a.toml: agents[0] (X): pattern \"ai\": at least three characters of one line",
        ),
        (
            row("agent = \"X\"\noperator = \"\"\nclass = \"search\"\npatterns = [\"XBot\"]"),
            "a.toml: agents[0] (X): operator is empty",
        ),
        (
            row("agent = \"X\"\noperator = \"Y\"\nclass = \"search\"\npatterns = []"),
            "a.toml: agents[0] (X): patterns: none given",
        ),
        (
            row("agent = \"X\"\noperator = \"Y\"\nclass = \"search\"\npatterns = [\"XBot\"]\nurl = \"x\""),
            "a.toml: line 8: unknown field `url`, expected one of `agent`, `operator`, `class`, `patterns`",
        ),
        (
            "version = \"v1\"\n[generic]\nbots = [\"b\"]\n".to_string(),
            "a.toml: generic: pattern \"b\": at least three characters of one line",
        ),
    ];
    for (text, want) in cases {
        let e = Agents::with_user(&text, "a.toml").unwrap_err();
        assert_eq!(e.to_string(), want, "{text}");
    }
}
