//! The console tests' tools: the headless browser (Debian's `chromium-headless-shell`) that
//! loads pages and runs their script, and plain HTTP for the figures.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use test_support::kafka;
use test_support::TestBroker;

use crate::metrics::http;

/// The headless browser, or `None` (with a loud message) when it is missing and `CI` is
/// unset; with `CI` set a missing browser fails the test.
pub(crate) fn browser() -> Option<PathBuf> {
    let candidates = [
        "/usr/bin/chromium-headless-shell",
        "/usr/lib/chromium/chromium-headless-shell",
        "/usr/bin/chromium",
    ];
    if let Some(found) = candidates.iter().map(PathBuf::from).find(|p| p.is_file()) {
        return Some(found);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and no headless Chromium was found (apt-get install chromium-headless-shell)"
    );
    eprintln!(
        "\n\n!!!!! SKIPPING the browser part of the console test: no headless Chromium \
         (apt-get install chromium-headless-shell) !!!!!\n\n"
    );
    None
}

/// Runs the browser on `args` with `budget_ms` of virtual time for the pages' scripts (the
/// deferred script runs within 2 s; the refresh comes every 5 s).
pub(crate) fn chromium(browser: &Path, budget_ms: u32, args: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .env_remove("LD_LIBRARY_PATH")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("run headless Chromium");
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The DOM of `url` after its scripts ran for `budget_ms` of virtual time.
pub(crate) fn dom_after(browser: &Path, url: &str, budget_ms: u32) -> String {
    let out = chromium(browser, budget_ms, &["--dump-dom", url]);
    String::from_utf8(out.stdout).expect("a UTF-8 DOM")
}

/// The DOM of `url` once its script ran.
pub(crate) fn dom(browser: &Path, url: &str) -> String {
    dom_after(browser, url, 2000)
}

/// The text between `from` and the next `until` after it, the first time `from` occurs.
pub(crate) fn after<'a>(page: &'a str, from: &str, until: &str) -> &'a str {
    let start = page
        .find(from)
        .unwrap_or_else(|| panic!("{from:?} not on the page:\n{page}"))
        + from.len();
    let rest = &page[start..];
    &rest[..rest.find(until).unwrap_or(rest.len())]
}

/// Waits for the broker to log `line` (it logs once serving).
pub(crate) fn logged(broker: &TestBroker, line: &str) {
    kafka::wait_until(line, Duration::from_secs(10), || {
        std::fs::read_to_string(broker.log_path()).is_ok_and(|log| log.contains(line))
    });
}

pub(crate) fn get(addr: &str, path: &str) -> (String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: console\r\n\r\n");
    let (status, _, body) = http(addr, request.as_bytes());
    (status, body)
}
