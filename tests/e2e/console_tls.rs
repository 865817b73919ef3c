//! `--console-tls` and `--metrics-tls`: the console and `/metrics` over HTTPS with the
//! broker's keystore, fetched with curl verifying against the test CA.

use test_support::{Certs, TestBroker};

use crate::browser::logged;

/// curl's status line and body for `url` (HTTPS verified against `ca`), as `user:password`
/// when given; `None` when no HTTP answer came.
fn curl(ca: &std::path::Path, url: &str, user: Option<&str>) -> Option<(String, String)> {
    let mut command = std::process::Command::new("curl");
    command
        .args(["-s", "-i", "--max-time", "10", "--cacert"])
        .arg(ca);
    if let Some(user) = user {
        command.args(["-u", user]);
    }
    let out = command.arg(url).output().expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

#[test]
fn with_console_tls_and_metrics_tls_both_serve_https_with_the_brokers_keystore() {
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("plain-users");
    std::fs::write(&users, "admin=admin-secret\n").unwrap();
    let keystore = certs.broker_keystore();
    let tls_flags = [
        "--console-listen",
        "127.0.0.1:0",
        "--console-tls",
        "--metrics-listen",
        "127.0.0.1:0",
        "--metrics-tls",
    ];
    let mut flags = vec![
        "--listeners",
        "SASL_SSL://127.0.0.1:0",
        "--sasl-plain-users-file",
        users.to_str().unwrap(),
        "--ssl-keystore-location",
        keystore.to_str().unwrap(),
    ];
    flags.extend(tls_flags);
    let broker = TestBroker::start_temp(&flags);
    logged(&broker, "console: HTTP Basic authentication");
    let console = broker.console_addr.clone().expect("the console's address");
    let metrics = broker.metrics_addr.clone().expect("the metrics address");
    let ca = certs.ca();
    let page = format!("https://{console}/topics");
    let (status, body) = curl(&ca, &page, Some("admin:admin-secret")).expect("an HTTPS answer");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        body.contains("<title>lograil · Topics and partitions</title>"),
        "{body}"
    );
    let (status, _) = curl(&ca, &page, None).expect("an HTTPS answer");
    assert_eq!(status, "HTTP/1.1 401 Unauthorized");
    // Plain HTTP to the HTTPS port gets no page.
    let plain = curl(
        &ca,
        &format!("http://{console}/topics"),
        Some("admin:admin-secret"),
    );
    assert!(plain.is_none(), "{plain:?}");
    let (status, body) = curl(&ca, &format!("https://{metrics}/metrics"), None).expect("HTTPS");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("lograil_"), "{body}");
    drop(broker);

    // Without a keystore the broker does not start, and says why.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lograil"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(tls_flags)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--ssl-keystore-location"), "{err}");
}
