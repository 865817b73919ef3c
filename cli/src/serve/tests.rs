use std::time::Duration;

use clap::Parser;
use log_core::Durability;

use super::Args;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn config_from(file: &str, flags: &[&str]) -> anyhow::Result<lograil::BrokerConfig> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("broker.properties");
    std::fs::write(&path, file)?;
    let mut argv = vec![
        "serve".to_string(),
        "--config".into(),
        path.display().to_string(),
    ];
    argv.extend(flags.iter().map(|f| f.to_string()));
    Cli::try_parse_from(argv)?.args.broker_config()
}

#[test]
fn the_config_file_uses_the_flags_definitions_and_flags_win() {
    let config = config_from(
        "# defaults\ndefault-partitions=3\nsegment.bytes=2097152\nflush.messages=1\n\
         group-initial-rebalance-delay-ms=0\nretention.ms=-1\n",
        &["--segment-bytes", "4194304", "--retention-bytes", "-1"],
    )
    .unwrap();
    assert_eq!(config.default_partitions, 3);
    assert_eq!(
        config.topic_defaults.segment_bytes,
        4 << 20,
        "the flag wins"
    );
    assert_eq!(config.topic_defaults.durability.flush_messages, Some(1));
    assert_eq!(config.topic_defaults.retention_ms, None);
    assert_eq!(config.groups.initial_rebalance_delay, Duration::ZERO);
}

#[test]
fn durability_defaults_are_acks_all_fsynced_unless_write_caching() {
    let config = config_from("", &[]).unwrap();
    assert_eq!(config.topic_defaults.durability, Durability::default());
    let config = config_from(
        "flush.ms=9223372036854775807\n",
        &["--write-caching", "true", "--flush-messages", "10000"],
    )
    .unwrap();
    assert_eq!(
        config.topic_defaults.durability,
        Durability {
            flush_messages: Some(10_000),
            flush_ms: None,
            write_caching: true
        }
    );
}

#[test]
fn compression_and_timestamp_defaults_take_kafka_names() {
    let config = config_from(
        "compression.type=zstd\ncompression.zstd.level=-3\nmessage.timestamp.type=LogAppendTime\n",
        &["--compression-lz4-level", "12"],
    )
    .unwrap();
    let t = &config.topic_defaults;
    assert_eq!(t.compression, log_core::TopicCompression::Zstd);
    assert_eq!(
        (t.compression_levels.zstd, t.compression_levels.lz4),
        (-3, 12)
    );
    assert_eq!(t.timestamp_type, record_batch::TimestampType::LogAppendTime);
    let bad = config_from("", &["--compression-type", "none"]).unwrap_err();
    assert!(
        format!("{bad:#}").contains("String must be one of: uncompressed"),
        "{bad:#}"
    );
}

#[test]
fn limits_take_kafka_names_in_the_config_file() {
    let config = config_from(
        "max.connections.per.ip=5\nconnections.max.idle.ms=2000\nfetch.max.bytes=1024\n\
         offsets.retention.minutes=60\ngroup.max.size=7\n",
        &["--queued-max-request-bytes", "209715200"],
    )
    .unwrap();
    let limits = &config.limits;
    assert_eq!(limits.max_connections_per_ip, 5);
    assert_eq!(limits.connections_max_idle, Duration::from_secs(2));
    assert_eq!(limits.fetch_max_bytes, 1024);
    assert_eq!(limits.offsets_retention, Duration::from_secs(3600));
    assert_eq!(limits.queued_max_request_bytes, 200 << 20);
    assert_eq!(config.groups.max_size, 7);
}

#[test]
fn dead_letter_settings_take_kafkas_names() {
    let defaults = config_from("", &[]).unwrap();
    assert_eq!(defaults.share.dead_letter_topic_prefix, "dlq.");
    assert!(!defaults.share.dead_letter_auto_create);
    let config = config_from(
        "errors.deadletterqueue.topic.name.prefix=errors-\n\
         errors.deadletterqueue.auto.create.topics.enable=true\n",
        &[],
    )
    .unwrap();
    assert_eq!(config.share.dead_letter_topic_prefix, "errors-");
    assert!(config.share.dead_letter_auto_create);
    let any = config_from("", &["--errors-deadletterqueue-topic-name-prefix", ""]).unwrap();
    assert_eq!(any.share.dead_letter_topic_prefix, "");
}

#[test]
fn authorization_takes_kafkas_names() {
    let config = config_from(
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
         super.users=User:admin;User:ops\nallow.everyone.if.no.acl.found=true\n",
        &[],
    )
    .unwrap();
    let auth = &config.authorization;
    assert!(auth.enabled);
    assert!(auth.super_users.contains("User:admin") && auth.super_users.contains("User:ops"));
    assert!(auth.allow_everyone_if_no_acl_found);
    let none = config_from("", &["--authorizer-class-name", ""]).unwrap();
    assert!(!none.authorization.enabled);
    assert!(!config_from("", &[]).unwrap().authorization.enabled);
    assert!(
        config_from("", &["--authorizer-class-name", "acl"])
            .unwrap()
            .authorization
            .enabled
    );
}

#[test]
fn bad_settings_are_refused() {
    for file in [
        "segment.bytes=1048575\n",
        "default-partitions=0\n",
        "no-such-setting=1\n",
        "listen=127.0.0.1:1\n",
        "just some words\n",
        "flush.messages=0\n",
        "write.caching=maybe\n",
        "node-id=abc\n",
        "max.connections=0\n",
        // Smaller than --max-request-bytes (100 MiB): a large request could never be read.
        "queued.max.request.bytes=1048576\n",
        "authorizer.class.name=com.example.RangerAuthorizer\n",
        "super.users=admin\n",
    ] {
        assert!(config_from(file, &[]).is_err(), "{file:?} was accepted");
    }
    assert!(config_from("", &["--retention-ms", "-7"]).is_err());
}

#[test]
fn listener_settings_take_kafkas_prefix_in_the_file_and_on_the_command_line() {
    use lograil::security::tls::ClientAuth;
    use lograil::security::{ListenerConfig, SecurityProtocol};
    let config = config_from(
        "ssl.client.auth=required\n\
         listener.name.sasl_ssl.ssl.client.auth=requested\n\
         listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512\n\
         listener.name.internal.ssl.keystore.location=/etc/internal.pem\n",
        &["--listener-name", "internal.ssl.enabled.protocols=TLSv1.3"],
    )
    .unwrap();
    let listener = |name: &str, protocol| ListenerConfig {
        name: name.to_string(),
        protocol,
        bind: String::new(),
        advertised: None,
    };
    let sasl_ssl = listener("SASL_SSL", SecurityProtocol::SaslSsl);
    let internal = listener("INTERNAL", SecurityProtocol::Ssl);
    let tls = config.security.tls_for(&sasl_ssl);
    assert_eq!(tls.client_auth, ClientAuth::Requested);
    assert_eq!(
        config.security.mechanisms_for(&sasl_ssl),
        vec![sasl::Mechanism::ScramSha512]
    );
    let tls = config.security.tls_for(&internal);
    assert_eq!(tls.client_auth, ClientAuth::Required);
    assert_eq!(tls.keystore, Some("/etc/internal.pem".into()));
    assert!(!tls.tls12, "the flag's line is kept beside the file's");
    for bad in [
        "listener.name.sasl_ssl.ssl.client.auth=sometimes\n",
        "listener.name.sasl_ssl.ssl.cipher.suites=TLS_AES_128_GCM_SHA256\n",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=GSSAPI\n",
        "listener.name.nodot=1\n",
    ] {
        assert!(config_from(bad, &[]).is_err(), "{bad:?} was accepted");
    }
}
