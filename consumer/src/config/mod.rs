//! Client configuration under the Java client's property names (`bootstrap.servers`, `acks`,
//! `linger.ms`, `group.id`, …), with the Java client's defaults.
//!
//! A [`ClientConfig`] is a bag of `name = value` strings, as a Java `Properties`; the typed
//! [`ProducerConfig`], [`ConsumerConfig`] and [`AdminConfig`] are parsed from it, and parsing
//! rejects unknown names and bad values, naming the property.

use std::collections::BTreeMap;
use std::time::Duration;

mod admin;
mod consumer;
mod producer;
mod properties;
mod queue;
pub(crate) mod security;

pub use admin::AdminConfig;
pub use consumer::{AssignorKind, ConsumerConfig, IsolationLevel, OffsetReset};
pub use producer::{Acks, Compression, Partitioner, ProducerConfig};
pub use queue::{AckMode, QueueConfig};
pub use security::{SaslMechanism, Security, SecurityProtocol};

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A property this client does not know (a typo, or a Java property it does not
    /// implement).
    #[error("unknown property {0:?}")]
    Unknown(String),
    /// A value that does not parse, is out of range or is not supported (`security.protocol`
    /// `TLS`, `sasl.mechanism` `GSSAPI`).
    #[error("property {name}: {value:?} is not {expected}")]
    Invalid {
        /// The property.
        name: &'static str,
        /// The value given (trimmed).
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// A required property is absent or empty (`bootstrap.servers`, a share consumer's
    /// `group.id`, `partition.assignment.strategy` set to no assignor).
    #[error("property {0} is required")]
    Missing(&'static str),
    /// Values that are each valid but not together, e.g. `heartbeat.interval.ms` not below
    /// `session.timeout.ms`; the message says which.
    #[error("{0}")]
    Conflict(&'static str),
    /// A security property that cannot be used: a PEM file that cannot be read or holds no
    /// certificate, an encrypted key, a `sasl.jaas.config` that does not parse, a companion
    /// property missing (a truststore for SSL, credentials for SASL). The reason never quotes a
    /// secret.
    #[error("property {name}: {reason}")]
    Security {
        /// The property at fault (or the one to set).
        name: &'static str,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// A `.properties` text that does not parse (a bad `\u` escape).
    #[error("line {line}: {reason}")]
    Properties {
        /// The line (from 1) the property starts on.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A `.properties` file that cannot be read or parsed.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Properties by their Java client names, e.g. `("bootstrap.servers", "127.0.0.1:9092")`.
/// Its `Debug` print hides the values of secrets (passwords, `sasl.jaas.config`,
/// `ssl.keystore.key`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientConfig {
    properties: BTreeMap<String, String>,
}

/// Whether a property's value is a secret (the Java client's `Password` type).
fn is_secret(name: &str) -> bool {
    name.contains("password") || name == "sasl.jaas.config" || name == "ssl.keystore.key"
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for (k, v) in &self.properties {
            if is_secret(k) {
                map.entry(k, &"[redacted]");
            } else {
                map.entry(k, v);
            }
        }
        map.finish()
    }
}

impl ClientConfig {
    /// No properties set.
    pub fn new() -> ClientConfig {
        ClientConfig::default()
    }

    /// Sets a property (a later value replaces an earlier one).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut ClientConfig {
        self.properties.insert(name.into(), value.into());
        self
    }

    /// Builder form of [`ClientConfig::set`].
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> ClientConfig {
        self.set(name, value);
        self
    }

    /// The value set for `name`, as given (parsing trims it); None if it is not set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.properties.get(name).map(String::as_str)
    }

    /// Every property set, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.properties
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ClientConfig {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> ClientConfig {
        let mut config = ClientConfig::new();
        for (k, v) in iter {
            config.set(k, v);
        }
        config
    }
}

/// Reads typed properties and remembers which names were known, so leftovers are rejected.
struct Reader<'a> {
    config: &'a ClientConfig,
    known: Vec<&'static str>,
}

impl<'a> Reader<'a> {
    fn new(config: &'a ClientConfig) -> Reader<'a> {
        Reader {
            config,
            known: Vec::new(),
        }
    }

    fn raw(&mut self, name: &'static str) -> Option<&'a str> {
        self.known.push(name);
        self.config.get(name).map(str::trim)
    }

    fn parse<T: std::str::FromStr>(
        &mut self,
        name: &'static str,
        default: T,
        expected: &'static str,
    ) -> Result<T, ConfigError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| ConfigError::Invalid {
                name,
                value: v.to_string(),
                expected,
            }),
        }
    }

    fn ms(&mut self, name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
        let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
        self.parse(name, default, "a number of milliseconds")
            .map(Duration::from_millis)
    }

    fn bytes(&mut self, name: &'static str, default: usize) -> Result<usize, ConfigError> {
        self.parse(name, default, "a number of bytes")
    }

    fn flag(&mut self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(ConfigError::Invalid {
                name,
                value: v.to_string(),
                expected: "true or false",
            }),
        }
    }

    fn string(&mut self, name: &'static str) -> Option<String> {
        self.raw(name).filter(|v| !v.is_empty()).map(str::to_string)
    }

    /// Every property not read is an error.
    fn finish(self) -> Result<(), ConfigError> {
        match self
            .config
            .properties
            .keys()
            .find(|k| !self.known.contains(&k.as_str()))
        {
            Some(unknown) => Err(ConfigError::Unknown(unknown.clone())),
            None => Ok(()),
        }
    }
}

/// Settings every client has: where the cluster is and how to talk to it.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// `bootstrap.servers`: `host:port` list to learn the cluster from.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`: the name brokers log and quota this client by (default
    /// `lograil-producer`, `lograil-consumer`, `lograil-queue-consumer` or `lograil-admin`
    /// from `from_config`; `lograil` from [`NetConfig::new`]).
    pub client_id: String,
    /// `request.timeout.ms` (30000): a request unanswered this long closes its connection.
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms` (10000): how long opening a TCP connection may
    /// take.
    pub connection_setup_timeout: Duration,
    /// `metadata.max.age.ms` (300000): metadata is refreshed at least this often.
    pub metadata_max_age: Duration,
    /// `retry.backoff.ms` (100): first backoff after a retriable error.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms` (1000): the cap of the exponential backoff.
    pub retry_backoff_max: Duration,
    /// `allow.auto.create.topics` (producer: true; consumer: true): Metadata may create topics
    /// when the broker allows it.
    pub allow_auto_create_topics: bool,
    /// `security.protocol` (PLAINTEXT) and its `ssl.*` and `sasl.*` companions.
    pub security: Security,
}

impl NetConfig {
    fn read(r: &mut Reader<'_>, client_id: &str) -> Result<NetConfig, ConfigError> {
        let bootstrap_servers: Vec<String> = r
            .raw("bootstrap.servers")
            .ok_or(ConfigError::Missing("bootstrap.servers"))?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if bootstrap_servers.is_empty() {
            return Err(ConfigError::Missing("bootstrap.servers"));
        }
        let d = NetConfig::defaults(bootstrap_servers, client_id);
        let net = NetConfig {
            client_id: r.string("client.id").unwrap_or(d.client_id),
            request_timeout: r.ms("request.timeout.ms", d.request_timeout)?,
            connection_setup_timeout: r.ms(
                "socket.connection.setup.timeout.ms",
                d.connection_setup_timeout,
            )?,
            metadata_max_age: r.ms("metadata.max.age.ms", d.metadata_max_age)?,
            retry_backoff: r.ms("retry.backoff.ms", d.retry_backoff)?,
            retry_backoff_max: r.ms("retry.backoff.max.ms", d.retry_backoff_max)?,
            allow_auto_create_topics: r
                .flag("allow.auto.create.topics", d.allow_auto_create_topics)?,
            security: Security::read(r)?,
            bootstrap_servers: d.bootstrap_servers,
        };
        Ok(net)
    }

    /// A configuration for `bootstrap` (a comma-separated `host:port` list) with every other
    /// setting at its default.
    pub fn new(bootstrap: &str) -> NetConfig {
        NetConfig::defaults(
            bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            "lograil",
        )
    }

    fn defaults(bootstrap_servers: Vec<String>, client_id: &str) -> NetConfig {
        NetConfig {
            bootstrap_servers,
            client_id: client_id.to_string(),
            request_timeout: Duration::from_secs(30),
            connection_setup_timeout: Duration::from_secs(10),
            metadata_max_age: Duration::from_secs(300),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            allow_auto_create_topics: true,
            security: Security::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer(props: &[(&str, &str)]) -> Result<ProducerConfig, ConfigError> {
        let mut c: ClientConfig = props.iter().copied().collect();
        c.set("bootstrap.servers", "127.0.0.1:9092");
        ProducerConfig::from_config(&c)
    }

    #[test]
    fn producer_defaults_are_the_java_clients() {
        let c = producer(&[]).unwrap();
        assert_eq!(c.acks, Acks::All);
        assert!(c.enable_idempotence);
        assert_eq!(c.linger, Duration::from_millis(5));
        assert_eq!(c.batch_size, 1_000_000);
        assert_eq!(c.buffer_memory, 32 << 20);
        assert_eq!(c.delivery_timeout, Duration::from_secs(120));
        assert_eq!(c.max_in_flight, 5);
        assert_eq!(c.net.retry_backoff, Duration::from_millis(100));
        assert_eq!(c.net.retry_backoff_max, Duration::from_secs(1));
    }

    #[test]
    fn idempotence_follows_the_java_rules() {
        assert!(!producer(&[("acks", "1")]).unwrap().enable_idempotence);
        assert!(matches!(
            producer(&[("acks", "1"), ("enable.idempotence", "true")]),
            Err(ConfigError::Conflict(_))
        ));
        assert!(
            !producer(&[("max.in.flight.requests.per.connection", "6")])
                .unwrap()
                .enable_idempotence
        );
    }

    #[test]
    fn bad_values_and_unknown_names_are_refused() {
        assert!(matches!(
            producer(&[("acks", "2")]),
            Err(ConfigError::Invalid { name: "acks", .. })
        ));
        assert!(matches!(
            producer(&[("linger.ms", "soon")]),
            Err(ConfigError::Invalid {
                name: "linger.ms",
                ..
            })
        ));
        assert_eq!(
            producer(&[("lingr.ms", "5")]).unwrap_err(),
            ConfigError::Unknown("lingr.ms".into())
        );
        assert!(matches!(
            producer(&[("delivery.timeout.ms", "1000")]),
            Err(ConfigError::Conflict(_))
        ));
        assert_eq!(
            ProducerConfig::from_config(&ClientConfig::new()).unwrap_err(),
            ConfigError::Missing("bootstrap.servers")
        );
    }

    #[test]
    fn consumer_properties() {
        let c: ClientConfig = [
            ("bootstrap.servers", "a:1, b:2"),
            ("group.id", "g"),
            ("auto.offset.reset", "earliest"),
            (
                "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            ),
        ]
        .into_iter()
        .collect();
        let c = ConsumerConfig::from_config(&c).unwrap();
        assert_eq!(c.net.bootstrap_servers, vec!["a:1", "b:2"]);
        assert_eq!(c.group_id.as_deref(), Some("g"));
        assert_eq!(c.auto_offset_reset, OffsetReset::Earliest);
        assert_eq!(c.assignors, vec![AssignorKind::CooperativeSticky]);
        assert!(c.enable_auto_commit);
        assert_eq!(c.session_timeout, Duration::from_secs(45));
    }
}
