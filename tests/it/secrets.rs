//! No key ever appears in a log line, an error or a Debug print.

use crate::common::*;
use docpipe::api::views::Window;
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_key_appears_in_logs_errors_or_debug_output() {
    let capture = Capture::default();
    let sink = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let live = Live::start({
        let mut d = small();
        d.faults.error_rate = 0.5;
        d.faults.drop_rate = 0.2;
        d.faults.burst_429_every = 4;
        d.faults.burst_429_len = 1;
        d.faults.burst_retry_after_secs = 2;
        d
    })
    .await;
    let mut seen = String::new();
    let admin = live.client(Some(ADMIN_A), None, open_limits());
    let assistant = live.client(None, Some(ASSIST_A), open_limits());
    seen += &format!("{admin:?} {assistant:?}");
    for _ in 0..5 {
        if let Err(e) = admin
            .page_views("alpha", Window::day(day("2026-03-10")), 250, 0)
            .await
        {
            seen += &format!("{e} {e:?}");
        }
        if let Err(e) = admin.follow_up("alpha", "job_ok", "x").await {
            seen += &format!("{e} {e:?}");
        }
        if let Err(e) = admin
            .page_views("gamma", Window::day(day("2026-03-10")), 250, 0)
            .await
        {
            seen += &format!("{e} {e:?}");
        }
    }
    let wrong = live.client(Some("mint_test_admin_b"), None, open_limits());
    if let Err(e) = wrong.get_job("alpha", "job_ok").await {
        seen += &format!("{e} {e:?}");
    }
    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("retrying"), "the run logged its retries");
    for secret in [ADMIN_A, ASSIST_A, "mint_test_admin_b"] {
        assert!(!logs.contains(secret), "log leaks {secret}");
        assert!(!seen.contains(secret), "errors or Debug leak {secret}");
    }
    assert!(seen.contains("AdminKey(mint_***)"));
    // A service message that echoes the key is redacted.
    assert_eq!(
        admin.redact(&format!("bad key {ADMIN_A}")),
        "bad key mint_***"
    );
}
