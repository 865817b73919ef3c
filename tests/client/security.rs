//! TLS and SASL: our client against the Kafka cluster's SASL_SSL listeners (`kafka.sh` gives
//! each node one: a certificate signed by the cluster's own CA, SCRAM-SHA-512 and SCRAM-SHA-256
//! users from the metadata log, PLAIN users from the listener's JAAS config). Tests named
//! `kafka_only_*` do nothing without a secured Kafka (`LOGRAIL_TEST_KAFKA`); the config checks
//! run everywhere.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use consumer::config::SecurityProtocol;
use consumer::{
    Admin, AdminError, CallError, ClientConfig, ConfigError, Consumer, ErrorCode, NetError,
    Producer, ProducerConfig, ProducerError, ProducerRecord,
};

use test_support::cluster::{unique, TestCluster};

/// The secured Kafka cluster, or None (the test then does nothing).
fn secured() -> Option<TestCluster> {
    let cluster = TestCluster::start();
    if cluster.is_secured() {
        Some(cluster)
    } else {
        eprintln!("no secured Kafka cluster (LOGRAIL_TEST_KAFKA): nothing to test");
        None
    }
}

const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// SASL_SSL properties for `user`/`password` with `mechanism` and the cluster's CA.
fn sasl_ssl(
    cluster: &TestCluster,
    mechanism: &str,
    module: &str,
    user: &str,
    password: &str,
) -> ClientConfig {
    let ca = cluster.kafka_dir().unwrap().join("tls/ca.pem");
    ClientConfig::new()
        .with("bootstrap.servers", cluster.bootstrap())
        .with("security.protocol", "sasl_ssl")
        .with("sasl.mechanism", mechanism)
        .with(
            "sasl.jaas.config",
            format!("{module} required username=\"{user}\" password=\"{password}\";"),
        )
        .with("ssl.truststore.type", "PEM")
        .with("ssl.truststore.location", ca.display().to_string())
}

/// Produces three records with `config` and reads them back with a consumer of `config`.
async fn round_trip(cluster: &TestCluster, config: &ClientConfig) {
    let topic = cluster.create_topic("sec", 1).await;
    let producer = Producer::from_config(&config.clone().with("linger.ms", "0"))
        .await
        .unwrap();
    for i in 0..3 {
        let record = ProducerRecord::new(topic.as_str()).value(format!("secret {i}"));
        producer.send(record).await.unwrap().await.unwrap();
    }
    producer.close().await;
    let consumer = Consumer::from_config(
        &config
            .clone()
            .with("group.id", unique("sec-g"))
            .with("auto.offset.reset", "earliest"),
    )
    .await
    .unwrap();
    consumer.subscribe(&[topic.as_str()]).unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        let record = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
            .await
            .expect("records within 60 s")
            .unwrap();
        got.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
    }
    assert_eq!(got, ["secret 0", "secret 1", "secret 2"]);
    consumer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_only_scram_sha_256_and_plain_work_too() {
    let Some(cluster) = secured() else { return };
    round_trip(
        &cluster,
        &sasl_ssl(&cluster, "SCRAM-SHA-256", SCRAM, "alice", "alice-secret"),
    )
    .await;
    // librdkafka's names for the credentials, and PLAIN (bob has no SCRAM credential).
    let ca = cluster.kafka_dir().unwrap().join("tls/ca.pem");
    let plain = ClientConfig::new()
        .with("bootstrap.servers", cluster.bootstrap())
        .with("security.protocol", "SASL_SSL")
        .with("sasl.mechanism", "PLAIN")
        .with("sasl.username", "bob")
        .with("sasl.password", "bob-secret")
        .with("ssl.ca.location", ca.display().to_string());
    round_trip(&cluster, &plain).await;
    // The PLAIN login module's form of the JAAS config.
    round_trip(
        &cluster,
        &sasl_ssl(&cluster, "PLAIN", PLAIN, "alice", "alice-secret"),
    )
    .await;
}

/// The authentication failure inside a client's error.
fn authentication(e: &NetError) -> (Option<ErrorCode>, &str) {
    match e {
        NetError::Authentication { code, message, .. } => (*code, message.as_str()),
        other => panic!("not an authentication failure: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_only_a_wrong_password_is_a_prompt_typed_error() {
    let Some(cluster) = secured() else { return };
    for (mechanism, module) in [
        ("SCRAM-SHA-512", SCRAM),
        ("SCRAM-SHA-256", SCRAM),
        ("PLAIN", PLAIN),
    ] {
        let config = sasl_ssl(&cluster, mechanism, module, "alice", "not-her-password");
        let started = Instant::now();
        // Far under the 30 s request timeout and the endless reconnects a retriable error
        // would get.
        let e = tokio::time::timeout(Duration::from_secs(10), Producer::from_config(&config))
            .await
            .expect("the producer gives up within 10 s")
            .unwrap_err();
        let ProducerError::Net(net) = &e else {
            panic!("{mechanism}: {e:?}")
        };
        let (code, message) = authentication(net);
        assert_eq!(code, Some(ErrorCode::SaslAuthenticationFailed), "{e}");
        assert!(
            message.to_lowercase().contains("authentication failed"),
            "the broker's message: {message}"
        );
        assert!(!e.to_string().contains("not-her-password"), "{e}");
        assert!(!CallError::Net(net.clone()).is_retriable());

        let e = tokio::time::timeout(Duration::from_secs(10), Admin::from_config(&config))
            .await
            .expect("the admin client gives up within 10 s")
            .unwrap_err();
        let AdminError::Call(CallError::Net(net)) = &e else {
            panic!("{mechanism}: {e:?}")
        };
        assert_eq!(
            authentication(net).0,
            Some(ErrorCode::SaslAuthenticationFailed)
        );
        eprintln!("{mechanism}: refused in {:?}: {e}", started.elapsed());
    }

    // A mechanism the user has no credential for is refused the same way; one the listener
    // does not enable names those it does.
    let e = Producer::from_config(&sasl_ssl(
        &cluster,
        "SCRAM-SHA-512",
        SCRAM,
        "bob",
        "bob-secret",
    ))
    .await
    .unwrap_err();
    let ProducerError::Net(net) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        authentication(net).0,
        Some(ErrorCode::SaslAuthenticationFailed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_only_tls_checks_the_brokers_certificate() {
    let Some(cluster) = secured() else { return };
    // A truststore of a CA that did not sign the brokers' certificate: the server certificate
    // itself (not a CA) stands in for one.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-ca.pem");
    let server_pem =
        std::fs::read_to_string(cluster.kafka_dir().unwrap().join("tls/server.crt")).unwrap();
    std::fs::write(&other, server_pem).unwrap();
    let config = sasl_ssl(&cluster, "SCRAM-SHA-512", SCRAM, "alice", "alice-secret")
        .with("ssl.truststore.location", other.display().to_string());
    let e = tokio::time::timeout(Duration::from_secs(10), Producer::from_config(&config))
        .await
        .expect("within 10 s")
        .unwrap_err();
    assert!(
        matches!(&e, ProducerError::Net(NetError::Tls { .. })),
        "{e:?}"
    );

    // TLS to a plaintext listener: a clear TLS error, not a hang.
    let plain = cluster.plain_bootstrap().to_string();
    let config = sasl_ssl(&cluster, "SCRAM-SHA-512", SCRAM, "alice", "alice-secret")
        .with("bootstrap.servers", plain);
    let e = tokio::time::timeout(Duration::from_secs(15), Producer::from_config(&config))
        .await
        .expect("within 15 s")
        .unwrap_err();
    assert!(
        matches!(&e, ProducerError::Net(NetError::Tls { .. })),
        "{e:?}"
    );
}

#[test]
fn security_configs_are_checked_at_construction() {
    let base = ClientConfig::new().with("bootstrap.servers", "127.0.0.1:1");
    let refused = |props: &[(&str, &str)]| {
        let mut c = base.clone();
        for (k, v) in props {
            c.set(*k, *v);
        }
        ProducerConfig::from_config(&c).unwrap_err()
    };
    // SSL without a truststore: this client has no built-in roots.
    let e = refused(&[("security.protocol", "SSL")]);
    assert!(
        matches!(
            &e,
            ConfigError::Security {
                name: "ssl.truststore.location",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("ssl.truststore.location"), "{e}");
    assert!(matches!(
        refused(&[("security.protocol", "TLS")]),
        ConfigError::Invalid {
            name: "security.protocol",
            ..
        }
    ));
    assert!(matches!(
        refused(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", "/nonexistent/ca.pem")
        ]),
        ConfigError::Security {
            name: "ssl.truststore.location",
            ..
        }
    ));
    // SASL: GSSAPI (the Java default) is not supported, credentials are required.
    let e = refused(&[("security.protocol", "SASL_PLAINTEXT")]);
    assert!(e.to_string().contains("GSSAPI"), "{e}");
    assert!(matches!(
        refused(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "GSSAPI")
        ]),
        ConfigError::Invalid {
            name: "sasl.mechanism",
            ..
        }
    ));
    assert!(matches!(
        refused(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN")
        ]),
        ConfigError::Security {
            name: "sasl.jaas.config",
            ..
        }
    ));
    assert!(matches!(
        refused(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.jaas.config", "com.example.Module required;")
        ]),
        ConfigError::Security {
            name: "sasl.jaas.config",
            ..
        }
    ));
    assert!(matches!(
        refused(&[
            ("security.protocol", "SSL"),
            ("ssl.key.password", "hunter2")
        ]),
        ConfigError::Security {
            name: "ssl.key.password",
            ..
        }
    ));
    // Good ones parse, and print no secret.
    let mut c = base.clone();
    c.set("security.protocol", "SASL_PLAINTEXT");
    c.set("sasl.mechanism", "SCRAM-SHA-512");
    c.set(
        "sasl.jaas.config",
        format!("{SCRAM} required username=\"alice\" password=\"hunter2\";"),
    );
    let parsed = ProducerConfig::from_config(&c).unwrap();
    assert_eq!(
        parsed.net.security.protocol(),
        SecurityProtocol::SaslPlaintext
    );
    assert_eq!(parsed.net.security.sasl_username(), Some("alice"));
    for printed in [format!("{c:?}"), format!("{parsed:?}")] {
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(
            printed.contains("alice") || printed.contains("redacted"),
            "{printed}"
        );
    }
}

fn lograil() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lograil"))
}

#[test]
fn kafka_only_cli_commands_take_a_command_config() {
    let Some(cluster) = secured() else { return };
    let topic = unique("sec-cli");
    let out = lograil()
        .args(["topic", "create", &topic, "--partitions", "1"])
        .args(cluster.cli_args())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = lograil()
        .arg("produce")
        .args(cluster.cli_args())
        .args(["--topic", &topic])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"one\ntwo\n").unwrap();
    assert!(child.wait().unwrap().success());
    let out = lograil()
        .arg("consume")
        .args(cluster.cli_args())
        .args(["--topic", &topic, "--from-beginning", "--max-messages", "2"])
        .args(["--timeout-ms", "20000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let values: Vec<&str> = stdout
        .lines()
        .map(|l| l.rsplit('\t').next().unwrap())
        .collect();
    assert_eq!(values, ["one", "two"], "{stdout}");

    // A wrong password in the file: the broker's refusal, at once, and no password printed.
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong.properties");
    let args = cluster.cli_args();
    let good = std::fs::read_to_string(&args[3]).unwrap();
    std::fs::write(&wrong, good.replace("alice-secret", "not-her-password")).unwrap();
    let started = Instant::now();
    let out = lograil()
        .args(["topic", "list", "--bootstrap-server", cluster.bootstrap()])
        .arg("--command-config")
        .arg(&wrong)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("SaslAuthenticationFailed"), "{stderr}");
    assert!(!stderr.contains("not-her-password"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
