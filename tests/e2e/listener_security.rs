//! Security settings per listener (Kafka's `listener.name.<listener>.*`): an SSL listener
//! requiring client certificates beside a SASL_SSL one for users without them, a listener of
//! its own keystore and mechanisms, all seen through kcat (librdkafka with OpenSSL).

use std::process::Command;

use test_support::{Certs, TestBroker};

use crate::security::{add_scram_user, kcat};

/// kcat's `-L` against `addr` with `settings` (each a `-X` setting); whether it listed.
fn lists(addr: &str, settings: &[String]) -> (bool, String) {
    let mut args = vec![
        "-b".to_string(),
        addr.to_string(),
        "-L".into(),
        "-m".into(),
        "5".into(),
    ];
    for setting in settings {
        args.push("-X".into());
        args.push(setting.clone());
    }
    let (ok, out, err) = kcat(&args.iter().map(String::as_str).collect::<Vec<_>>(), None);
    (ok && out.contains("broker"), format!("{out}\n{err}"))
}

#[test]
fn an_mtls_listener_stands_beside_a_sasl_ssl_one_for_users_without_certificates() {
    let certs = Certs::new();
    let partner_certs = Certs::new();
    let ca = certs.ca();
    let (key, crt) = certs.client("svc", "/CN=svc");
    let partner_keystore = format!(
        "partner.ssl.keystore.location={}",
        partner_certs.broker_keystore().display()
    );
    let broker = TestBroker::start_temp(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,PARTNER://127.0.0.1:0",
        "--listener-security-protocol-map",
        "PARTNER:SASL_SSL",
        "--ssl-keystore-location",
        certs.broker_keystore().to_str().unwrap(),
        "--ssl-truststore-location",
        ca.to_str().unwrap(),
        // Broker-wide: applies to the SSL listener only, as in Kafka (KIP-684).
        "--ssl-client-auth",
        "required",
        "--listener-name",
        &partner_keystore,
        "--listener-name",
        "partner.sasl.enabled.mechanisms=SCRAM-SHA-512",
    ]);
    add_scram_user(&broker, "app", "app-secret", "SCRAM-SHA-256");
    add_scram_user(&broker, "app", "app-secret", "SCRAM-SHA-512");
    let scram = |mechanism: &str, ca: &std::path::Path| -> Vec<String> {
        vec![
            "security.protocol=SASL_SSL".into(),
            format!("sasl.mechanism={mechanism}"),
            "sasl.username=app".into(),
            "sasl.password=app-secret".into(),
            format!("ssl.ca.location={}", ca.display()),
        ]
    };
    // SASL_SSL: a user without a certificate gets in with SCRAM.
    let (ok, out) = lists(broker.listener("SASL_SSL"), &scram("SCRAM-SHA-256", &ca));
    assert!(ok, "SASL_SSL without a certificate:\n{out}");
    // SSL: without a certificate the handshake fails; with one signed by the truststore it works.
    let ssl = broker.listener("SSL");
    let tls_only = vec![
        "security.protocol=SSL".to_string(),
        format!("ssl.ca.location={}", ca.display()),
    ];
    let (ok, out) = lists(ssl, &tls_only);
    assert!(!ok, "SSL without a certificate listed:\n{out}");
    let mut with_certificate = tls_only.clone();
    with_certificate.push(format!("ssl.certificate.location={}", crt.display()));
    with_certificate.push(format!("ssl.key.location={}", key.display()));
    let (ok, out) = lists(ssl, &with_certificate);
    assert!(ok, "SSL with a certificate:\n{out}");
    // PARTNER: its own keystore (another CA's certificate) and SCRAM-SHA-512 only.
    let partner = broker.listener("PARTNER");
    let (ok, out) = lists(partner, &scram("SCRAM-SHA-512", &partner_certs.ca()));
    assert!(ok, "PARTNER with its own CA and SCRAM-SHA-512:\n{out}");
    let (ok, out) = lists(partner, &scram("SCRAM-SHA-512", &ca));
    assert!(!ok, "PARTNER served the broker-wide certificate:\n{out}");
    let (ok, out) = lists(partner, &scram("SCRAM-SHA-256", &partner_certs.ca()));
    assert!(!ok, "PARTNER took a mechanism it does not offer:\n{out}");
    assert!(
        out.contains("SCRAM-SHA-512"),
        "the refusal names what is offered:\n{out}"
    );
}

#[test]
fn a_setting_for_a_listener_that_does_not_exist_stops_the_broker_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lograil"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--listener-name", "external.ssl.client.auth=required"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("listener.name.external.*: no listener EXTERNAL"),
        "{err}"
    );
}
