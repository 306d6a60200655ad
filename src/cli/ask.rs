//! `docpipe ask`: ask the v1 assistant a question and stream the answer.

use crate::api::assistant::{AskRequest, Message};
use crate::api::stream::Event;
use crate::clock;
use crate::config::Settings;
use crate::error::UserError;
use std::io::Write;

/// Ask the documentation assistant (v1) a question; the answer streams to the terminal as it
/// arrives, then the sources its search returned and the thread id and key to continue with.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The question.
    pub question: String,
    /// Continue this thread (needs --thread-key).
    #[arg(long, requires = "thread_key")]
    pub thread: Option<String>,
    /// The key of the thread to continue (printed by the first answer).
    #[arg(long, requires = "thread")]
    pub thread_key: Option<String>,
    /// Path of the page the user is on (at most 200 characters).
    #[arg(long)]
    pub path: Option<String>,
    /// Organization whose assistant to ask (default: the only one with an assistant_domain).
    #[arg(long)]
    pub org: Option<String>,
    /// Fingerprint of the asker.
    #[arg(long, default_value = "anonymous")]
    pub fp: String,
    /// Search results the answer is built from.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub retrieval_page_size: u32,
    /// Print the events as JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `ask`.
pub async fn run(args: Args, settings: &Settings) -> anyhow::Result<()> {
    let org = chosen_org(&args, settings)?;
    let domain = org.assistant_domain.clone().ok_or_else(|| {
        UserError::new(format!("organization {} has no assistant_domain", org.id))
    })?;
    let clock = clock::system();
    let client = crate::app::assistant_client(settings, org, clock.clone())?;
    let now = clock.now();
    // A continued thread sends the conversation so far, as the client library does: the
    // messages this folder kept of it (none for a thread begun elsewhere).
    let mut messages = match &args.thread {
        Some(id) => conversation(settings, id)?,
        None => Vec::new(),
    };
    if args.thread.is_some() && messages.is_empty() {
        tracing::warn!(
            "the earlier messages of this thread are not kept in {}: only the new question is sent",
            settings.output_dir.display()
        );
    }
    messages.push(Message::user_at(
        &format!("m{}", now.timestamp_millis()),
        &args.question,
        now,
    ));
    let request = AskRequest {
        fp: args.fp.clone(),
        messages: messages.clone(),
        thread_id: args.thread.clone(),
        thread_key: args.thread_key.clone(),
        retrieval_page_size: args.retrieval_page_size,
        current_path: args.path.clone(),
    };
    let mut answer = client.ask(&domain, &request).await.map_err(|e| {
        // A bad path, thread id or key is the user's input.
        match e.kind {
            crate::api::ErrorKind::Invalid { .. }
            | crate::api::ErrorKind::NotSent { .. }
            | crate::api::ErrorKind::NotFound { .. } => {
                anyhow::Error::new(UserError::from_source(e))
            }
            _ => e.into(),
        }
    })?;
    let mut out = std::io::stdout().lock();
    let mut reply = crate::api::assistant::Reply::default();
    while let Some(event) = answer.next().await {
        let event = event?;
        reply.take(&event);
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&event)?)?;
        } else if let Event::Text { text } = &event {
            write!(out, "{}", crate::text::lines(text))?;
            out.flush()?;
        }
    }
    let thread_id = answer.thread_id.clone().or(args.thread.clone());
    let thread_key = answer.thread_key.clone().or(args.thread_key.clone());
    if let Some(id) = &thread_id {
        messages.push(reply.message(clock.now()));
        if let Err(e) = keep_conversation(settings, id, &messages) {
            tracing::warn!("the conversation is not kept for the next question: {e}");
        }
    }
    if args.json {
        let summary = serde_json::json!({
            "type": "thread", "thread_id": thread_id, "thread_key": thread_key, "sources": answer.sources,
        });
        writeln!(out, "{summary}")?;
        return Ok(());
    }
    print_end(&mut out, &answer.sources, thread_id, thread_key)?;
    Ok(())
}

/// Where the conversation of a thread is kept: `<output>/.threads/<id>.json` (its messages,
/// never its key); `None` for an id that is not a plain name.
fn conversation_file(settings: &Settings, thread: &str) -> Option<std::path::PathBuf> {
    let plain = !thread.is_empty()
        && thread.len() <= 128
        && thread
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    plain.then(|| {
        settings
            .output_dir
            .join(".threads")
            .join(format!("{thread}.json"))
    })
}

/// The largest kept conversation read back, in bytes.
const MAX_CONVERSATION_BYTES: u64 = 16 * 1024 * 1024;

/// The messages kept of a thread (none when there are none).
fn conversation(settings: &Settings, thread: &str) -> anyhow::Result<Vec<Message>> {
    let Some(file) = conversation_file(settings, thread) else {
        return Ok(Vec::new());
    };
    // A FIFO would block for ever and /dev/zero never end: only a regular file, of a size a
    // conversation can have, is read.
    match std::fs::metadata(&file) {
        Ok(m) if !m.is_file() => {
            return Err(UserError::new(format!(
                "{} is not a regular file (a FIFO, a device or a folder): remove it, and the thread goes on without its earlier messages",
                file.display()
            ))
            .into());
        }
        Ok(m) if m.len() > MAX_CONVERSATION_BYTES => {
            return Err(UserError::new(format!(
                "{} holds {} bytes, more than a conversation docpipe keeps ({MAX_CONVERSATION_BYTES})",
                file.display(),
                m.len()
            ))
            .into());
        }
        _ => {}
    }
    match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::Error::new(UserError::new(format!(
                "{} is not a conversation docpipe kept: {e}",
                file.display()
            )))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", file.display())),
    }
}

/// Keeps the conversation of a thread for its next question (under a temporary name, then
/// renamed into place).
fn keep_conversation(
    settings: &Settings,
    thread: &str,
    messages: &[Message],
) -> anyhow::Result<()> {
    let Some(file) = conversation_file(settings, thread) else {
        return Ok(());
    };
    crate::layout::write_whole(&file, &serde_json::to_vec_pretty(messages)?)?;
    Ok(())
}

/// The organization asked of: `--org`, or the one organization with an `assistant_domain`.
fn chosen_org<'s>(
    args: &Args,
    settings: &'s Settings,
) -> anyhow::Result<&'s crate::config::Organization> {
    let with_domain: Vec<_> = settings
        .organizations
        .iter()
        .filter(|o| o.assistant_domain.is_some())
        .collect();
    Ok(match &args.org {
        Some(id) => settings.organization(id).ok_or_else(|| {
            UserError::new(format!(
                "organization {id} is not configured in {}",
                settings.origin
            ))
        })?,
        None if with_domain.len() == 1 => with_domain[0],
        None if with_domain.is_empty() => {
            return Err(UserError::new(format!(
                "no organization in {} has an assistant_domain",
                settings.origin
            ))
            .into());
        }
        None => {
            return Err(UserError::new(
                "several organizations have an assistant_domain: choose one with --org",
            )
            .into());
        }
    })
}

/// The end of an answer for people: its sources, and how to go on with its thread.
fn print_end(
    out: &mut impl Write,
    sources: &[crate::api::stream::Found],
    thread_id: Option<String>,
    thread_key: Option<String>,
) -> anyhow::Result<()> {
    writeln!(out)?;
    if !sources.is_empty() {
        writeln!(out, "\nsources:")?;
        for s in sources {
            match &s.title {
                Some(t) => writeln!(
                    out,
                    "  {}  {}",
                    crate::text::one_line(t),
                    crate::text::one_line(&s.location)
                )?,
                None => writeln!(out, "  {}", crate::text::one_line(&s.location))?,
            }
        }
    }
    if let (Some(id), Some(key)) = (thread_id, thread_key) {
        let (id, key) = (crate::text::one_line(&id), crate::text::one_line(&key));
        writeln!(out, "\nthread: {id}\nthread key: {key}")?;
        writeln!(
            out,
            "continue with: docpipe ask --thread {id} --thread-key {key} \"...\""
        )?;
    }
    Ok(())
}
