//! librdkafka client configuration from the flags of the `produce`, `consume` and
//! `end-to-end` modes.

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};

use crate::args::RunArgs;

/// Consumer group id given to librdkafka. Consumers never join it: partitions are assigned
/// explicitly and nothing is committed, so the broker needs no group support.
pub const GROUP_ID: &str = "lograil-bench";

fn base(args: &RunArgs) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.brokers)
        .set("client.id", "lograil-bench")
        .set_log_level(RDKafkaLogLevel::Warning);
    config
}

fn with_overrides(mut config: ClientConfig, overrides: &[(String, String)]) -> ClientConfig {
    for (name, value) in overrides {
        config.set(name, value);
    }
    config
}

/// Producer settings: acks, batch.size and linger.ms from the flags; the Java client's murmur2
/// partitioner for keyed records; then every `-X`.
pub fn producer_config(args: &RunArgs, overrides: &[(String, String)]) -> ClientConfig {
    let mut config = base(args);
    config.set("acks", &args.acks);
    if let Some(bytes) = args.batch_size {
        config.set("batch.size", bytes.to_string());
    }
    if let Some(ms) = args.linger_ms {
        config.set("linger.ms", ms.to_string());
    }
    if args.keys > 0 {
        config.set("partitioner", "murmur2_random");
    }
    config.set(
        "statistics.interval.ms",
        crate::client_stats::INTERVAL_MS.to_string(),
    );
    with_overrides(config, overrides)
}

/// Consumer settings: a group id librdkafka insists on, no auto-commit (no group coordinator
/// needed), no offset store, read_committed with `--transaction-ms`; then every `-X`.
pub fn consumer_config(args: &RunArgs, overrides: &[(String, String)]) -> ClientConfig {
    let mut config = base(args);
    config
        .set("group.id", GROUP_ID)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest");
    if args.transaction_ms.is_some() {
        config.set("isolation.level", "read_committed");
    }
    with_overrides(config, overrides)
}

/// Client settings for admin requests and metadata.
pub fn admin_config(args: &RunArgs, overrides: &[(String, String)]) -> ClientConfig {
    // Only the connection-level overrides (sockets, TLS, SASL) make sense for an admin
    // client; producer or consumer properties would be rejected, so they are left out.
    let mut config = base(args);
    for (name, value) in overrides {
        let connection = ["socket.", "security.", "ssl.", "sasl."]
            .iter()
            .any(|prefix| name.starts_with(prefix));
        if connection || name == "debug" {
            config.set(name, value);
        }
    }
    config
}

/// Every property set on `config`, for the report.
pub fn properties(config: &ClientConfig) -> Vec<(String, String)> {
    config
        .config_map()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
