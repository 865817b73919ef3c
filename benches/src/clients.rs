//! librdkafka client configuration from the flags, and a client context that prints
//! librdkafka's warnings and errors to stderr (the `rdkafka` crate would send them to the `log`
//! crate, which this binary does not set up).

use anyhow::{bail, Context};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;

use crate::args::RunArgs;

/// Consumer group id given to librdkafka. Consumers never join it: partitions are assigned
/// explicitly and nothing is committed, so the broker needs no group support.
pub const GROUP_ID: &str = "lograil-bench";

/// `-X NAME=VALUE` flags as pairs.
pub fn parse_properties(flags: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    flags
        .iter()
        .map(|flag| {
            let (name, value) = flag
                .split_once('=')
                .with_context(|| format!("-X {flag:?}: expected NAME=VALUE"))?;
            if name.trim().is_empty() {
                bail!("-X {flag:?}: empty property name");
            }
            Ok((name.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}

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

/// A client context that prints librdkafka's warnings and errors to stderr.
#[derive(Debug, Clone, Copy, Default)]
pub struct StderrLog;

impl ClientContext for StderrLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_stderr(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka error: {error}: {reason}");
    }
}

impl ConsumerContext for StderrLog {}

/// Prints a librdkafka log line if it is a warning or worse.
pub fn log_to_stderr(level: RDKafkaLogLevel, fac: &str, message: &str) {
    if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
        eprintln!("librdkafka {level:?} {fac}: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse() {
        let flags = vec![
            "linger.ms=0".to_string(),
            " fetch.wait.max.ms = 10".to_string(),
        ];
        let props = parse_properties(&flags).unwrap();
        assert_eq!(
            props,
            vec![
                ("linger.ms".to_string(), "0".to_string()),
                ("fetch.wait.max.ms".to_string(), "10".to_string())
            ]
        );
        assert!(parse_properties(&["novalue".to_string()]).is_err());
        assert!(parse_properties(&["=1".to_string()]).is_err());
    }
}
