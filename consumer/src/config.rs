//! Client configuration under the Java client's property names (`bootstrap.servers`, `acks`,
//! `linger.ms`, `group.id`, …), with the Java client's defaults.
//!
//! A [`ClientConfig`] is a bag of `name = value` strings, as a Java `Properties`; the typed
//! [`ProducerConfig`], [`ConsumerConfig`] and [`AdminConfig`] are parsed from it, and parsing
//! rejects unknown names and bad values, naming the property.

use std::collections::BTreeMap;
use std::time::Duration;

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown property {0:?}")]
    Unknown(String),
    #[error("property {name}: {value:?} is not {expected}")]
    Invalid {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("property {0} is required")]
    Missing(&'static str),
    #[error("{0}")]
    Conflict(&'static str),
}

/// Properties by their Java client names, e.g. `("bootstrap.servers", "127.0.0.1:9092")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientConfig {
    properties: BTreeMap<String, String>,
}

impl ClientConfig {
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
    /// `client.id` (default `lograil`).
    pub client_id: String,
    /// `request.timeout.ms` (30000): a request unanswered this long closes its connection.
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms` (10000).
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
            bootstrap_servers: d.bootstrap_servers,
        };
        // Accepted for compatibility, with the only value lograil's client speaks.
        if let Some(v) = r.raw("security.protocol") {
            if !v.eq_ignore_ascii_case("PLAINTEXT") {
                return Err(ConfigError::Invalid {
                    name: "security.protocol",
                    value: v.to_string(),
                    expected: "PLAINTEXT (the only protocol this client speaks)",
                });
            }
        }
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
        }
    }
}

/// `acks`: how many replicas must have a batch before the leader answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `0`: no answer at all; offsets are unknown (-1).
    None,
    /// `1`: the leader has it.
    Leader,
    /// `all` / `-1`: every in-sync replica has it.
    All,
}

impl Acks {
    pub(crate) fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl std::str::FromStr for Compression {
    type Err = ();
    fn from_str(s: &str) -> Result<Compression, ()> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            "snappy" => Ok(Compression::Snappy),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(()),
        }
    }
}

/// `partitioner`: where a record without an explicit partition goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioner {
    /// The Java client's default (`murmur2_random`, also accepted as `default`): keyed records by
    /// murmur2 of the key; unkeyed records stick to one partition until `batch.size` bytes have
    /// gone there, then switch (KIP-480/KIP-794).
    Default,
    /// `murmur2`: like the default, but unkeyed records all hash the empty key (one partition).
    Murmur2,
    /// `random`: every record to a random partition, key or not.
    Random,
    /// `round_robin`: every record to the next partition, key or not.
    RoundRobin,
}

/// A producer's settings. Build with [`ProducerConfig::from_config`] (Java names) or
/// [`ProducerConfig::new`] (defaults) and adjust the fields.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub net: NetConfig,
    /// `acks` (default `all`).
    pub acks: Acks,
    /// `linger.ms` (5): how long a batch waits for more records before it is sent.
    pub linger: Duration,
    /// `batch.size` (1000000): bytes of records per partition batch. librdkafka's default (and
    /// franz-go's ~1 MB), not the Java client's 16384: at 16 KiB batches this client spent 2x
    /// the CPU per GiB of librdkafka and reached 0.43x its throughput (BENCHMARKS.md, issue
    /// 10); `linger.ms` still bounds how long a batch waits, so a slow producer sends small ones.
    pub batch_size: usize,
    /// `buffer.memory` (33554432): bytes of records accepted and not yet acknowledged; `send`
    /// waits for room, `try_send` is refused with [`crate::SendError::Full`].
    pub buffer_memory: usize,
    /// `max.block.ms` (60000): how long `send` waits for room or for topic metadata.
    pub max_block: Duration,
    /// `max.request.size` (1048576): the largest record (and request) accepted.
    pub max_request_size: usize,
    /// `compression.type` (none).
    pub compression: Compression,
    /// `enable.idempotence` (true unless `acks` is not `all`, `retries` is 0 or
    /// `max.in.flight.requests.per.connection` is above 5 and idempotence was not asked for).
    pub enable_idempotence: bool,
    /// `delivery.timeout.ms` (120000): a record not acknowledged this long after `send` fails.
    pub delivery_timeout: Duration,
    /// `max.in.flight.requests.per.connection` (5).
    pub max_in_flight: usize,
    /// `retries` (2147483647): how often a batch is retried (within `delivery.timeout.ms`).
    pub retries: u32,
    /// `partitioner` (default).
    pub partitioner: Partitioner,
}

impl ProducerConfig {
    /// The Java client's defaults, for `bootstrap`.
    pub fn new(bootstrap: &str) -> ProducerConfig {
        ProducerConfig::defaults(NetConfig::new(bootstrap))
    }

    fn defaults(net: NetConfig) -> ProducerConfig {
        ProducerConfig {
            net,
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 1_000_000,
            buffer_memory: 32 << 20,
            max_block: Duration::from_secs(60),
            max_request_size: 1 << 20,
            compression: Compression::None,
            enable_idempotence: true,
            delivery_timeout: Duration::from_secs(120),
            max_in_flight: 5,
            retries: i32::MAX as u32,
            partitioner: Partitioner::Default,
        }
    }

    /// Parses the Java client's producer properties.
    pub fn from_config(config: &ClientConfig) -> Result<ProducerConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-producer")?;
        let acks = match r.raw("acks") {
            None => Acks::All,
            Some("0") => Acks::None,
            Some("1") => Acks::Leader,
            Some("all") | Some("-1") => Acks::All,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    name: "acks",
                    value: v.to_string(),
                    expected: "0, 1, all or -1",
                })
            }
        };
        let compression = r.parse(
            "compression.type",
            Compression::None,
            "none, gzip, snappy, lz4 or zstd",
        )?;
        let partitioner = match r.raw("partitioner") {
            None | Some("default") | Some("murmur2_random") => Partitioner::Default,
            Some("murmur2") => Partitioner::Murmur2,
            Some("random") => Partitioner::Random,
            Some("round_robin") => Partitioner::RoundRobin,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    name: "partitioner",
                    value: v.to_string(),
                    expected: "murmur2_random (default), murmur2, random or round_robin",
                })
            }
        };
        let explicit_idempotence = r.raw("enable.idempotence").is_some();
        let d = ProducerConfig::defaults(net);
        let mut c = ProducerConfig {
            acks,
            linger: r.ms("linger.ms", d.linger)?,
            batch_size: r.bytes("batch.size", d.batch_size)?.max(1),
            buffer_memory: r.bytes("buffer.memory", d.buffer_memory)?,
            max_block: r.ms("max.block.ms", d.max_block)?,
            max_request_size: r.bytes("max.request.size", d.max_request_size)?,
            compression,
            enable_idempotence: r.flag("enable.idempotence", d.enable_idempotence)?,
            delivery_timeout: r.ms("delivery.timeout.ms", d.delivery_timeout)?,
            max_in_flight: r.parse(
                "max.in.flight.requests.per.connection",
                d.max_in_flight,
                "a positive number",
            )?,
            retries: r.parse("retries", d.retries, "a number of retries")?,
            partitioner,
            net: d.net,
        };
        r.finish()?;
        if c.max_in_flight == 0 {
            return Err(ConfigError::Invalid {
                name: "max.in.flight.requests.per.connection",
                value: "0".into(),
                expected: "a positive number",
            });
        }
        // The Java client's rules: idempotence needs acks=all, retries and at most 5 requests
        // in flight; asked for explicitly, a conflict is an error, by default it is turned off.
        let compatible = c.acks == Acks::All && c.retries > 0 && c.max_in_flight <= 5;
        if c.enable_idempotence && !compatible {
            if explicit_idempotence {
                return Err(ConfigError::Conflict(
                    "enable.idempotence=true needs acks=all, retries > 0 and \
                     max.in.flight.requests.per.connection <= 5",
                ));
            }
            c.enable_idempotence = false;
        }
        if c.delivery_timeout < c.linger + c.net.request_timeout {
            return Err(ConfigError::Conflict(
                "delivery.timeout.ms must be at least linger.ms + request.timeout.ms",
            ));
        }
        Ok(c)
    }
}

/// `auto.offset.reset`: where a partition without a committed offset (or whose offset is out of
/// range) starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// `none`: an error instead.
    None,
}

/// `partition.assignment.strategy` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignorKind {
    /// `range` / `org.apache.kafka.clients.consumer.RangeAssignor` (eager).
    Range,
    /// `cooperative-sticky` / `org.apache.kafka.clients.consumer.CooperativeStickyAssignor`.
    CooperativeSticky,
}

impl AssignorKind {
    /// The protocol name in JoinGroup, as the Java client sends it.
    pub fn protocol_name(self) -> &'static str {
        match self {
            AssignorKind::Range => "range",
            AssignorKind::CooperativeSticky => "cooperative-sticky",
        }
    }
}

/// A consumer's settings. Build with [`ConsumerConfig::from_config`] (Java names) or
/// [`ConsumerConfig::new`] (defaults) and adjust the fields.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub net: NetConfig,
    /// `group.id`: needed for `subscribe` and for commits; `assign` works without.
    pub group_id: Option<String>,
    /// `group.instance.id`: static membership (KIP-345).
    pub group_instance_id: Option<String>,
    /// `session.timeout.ms` (45000).
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms` (3000).
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms` (300000): a consumer not asking for records this long leaves the
    /// group (and rejoins when it asks again); also the rebalance timeout.
    pub max_poll_interval: Duration,
    /// `enable.auto.commit` (true).
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms` (5000).
    pub auto_commit_interval: Duration,
    /// `auto.offset.reset` (latest).
    pub auto_offset_reset: OffsetReset,
    /// `partition.assignment.strategy` (range, cooperative-sticky: the Java default).
    pub assignors: Vec<AssignorKind>,
    /// `fetch.min.bytes` (1).
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes` (52428800).
    pub fetch_max_bytes: i32,
    /// `fetch.max.wait.ms` (500).
    pub fetch_max_wait: Duration,
    /// `max.partition.fetch.bytes` (1048576).
    pub max_partition_fetch_bytes: i32,
}

impl ConsumerConfig {
    /// The Java client's defaults, for `bootstrap`, with `group` as `group.id`.
    pub fn new(bootstrap: &str, group: Option<&str>) -> ConsumerConfig {
        let mut c = ConsumerConfig::defaults(NetConfig::new(bootstrap));
        c.group_id = group.map(str::to_string);
        c
    }

    fn defaults(net: NetConfig) -> ConsumerConfig {
        ConsumerConfig {
            net,
            group_id: None,
            group_instance_id: None,
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            max_poll_interval: Duration::from_secs(300),
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            auto_offset_reset: OffsetReset::Latest,
            assignors: vec![AssignorKind::Range, AssignorKind::CooperativeSticky],
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            fetch_max_wait: Duration::from_millis(500),
            max_partition_fetch_bytes: 1 << 20,
        }
    }

    /// Parses the Java client's consumer properties.
    pub fn from_config(config: &ClientConfig) -> Result<ConsumerConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-consumer")?;
        let auto_offset_reset = match r.raw("auto.offset.reset") {
            None | Some("latest") => OffsetReset::Latest,
            Some("earliest") => OffsetReset::Earliest,
            Some("none") => OffsetReset::None,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    name: "auto.offset.reset",
                    value: v.to_string(),
                    expected: "earliest, latest or none",
                })
            }
        };
        let assignors = match r.raw("partition.assignment.strategy") {
            None => vec![AssignorKind::Range, AssignorKind::CooperativeSticky],
            Some(list) => {
                let mut out = Vec::new();
                for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    out.push(match name {
                        "range" | "org.apache.kafka.clients.consumer.RangeAssignor" => {
                            AssignorKind::Range
                        }
                        "cooperative-sticky"
                        | "org.apache.kafka.clients.consumer.CooperativeStickyAssignor" => {
                            AssignorKind::CooperativeSticky
                        }
                        other => {
                            return Err(ConfigError::Invalid {
                                name: "partition.assignment.strategy",
                                value: other.to_string(),
                                expected: "range or cooperative-sticky (or their Java class names)",
                            })
                        }
                    });
                }
                if out.is_empty() {
                    return Err(ConfigError::Missing("partition.assignment.strategy"));
                }
                out
            }
        };
        if let Some(level) = r.raw("isolation.level") {
            if level != "read_uncommitted" {
                return Err(ConfigError::Invalid {
                    name: "isolation.level",
                    value: level.to_string(),
                    expected: "read_uncommitted (this client reads no transactions)",
                });
            }
        }
        let d = ConsumerConfig::defaults(net);
        let c = ConsumerConfig {
            group_id: r.string("group.id"),
            group_instance_id: r.string("group.instance.id"),
            session_timeout: r.ms("session.timeout.ms", d.session_timeout)?,
            heartbeat_interval: r.ms("heartbeat.interval.ms", d.heartbeat_interval)?,
            max_poll_interval: r.ms("max.poll.interval.ms", d.max_poll_interval)?,
            enable_auto_commit: r.flag("enable.auto.commit", d.enable_auto_commit)?,
            auto_commit_interval: r.ms("auto.commit.interval.ms", d.auto_commit_interval)?,
            auto_offset_reset,
            assignors,
            fetch_min_bytes: r.parse("fetch.min.bytes", d.fetch_min_bytes, "a number of bytes")?,
            fetch_max_bytes: r.parse("fetch.max.bytes", d.fetch_max_bytes, "a number of bytes")?,
            fetch_max_wait: r.ms("fetch.max.wait.ms", d.fetch_max_wait)?,
            max_partition_fetch_bytes: r.parse(
                "max.partition.fetch.bytes",
                d.max_partition_fetch_bytes,
                "a number of bytes",
            )?,
            net: d.net,
        };
        r.finish()?;
        if c.heartbeat_interval >= c.session_timeout {
            return Err(ConfigError::Conflict(
                "heartbeat.interval.ms must be lower than session.timeout.ms",
            ));
        }
        Ok(c)
    }
}

/// How a share consumer's records are acknowledged (`share.acknowledgement.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// Every record of a batch not acknowledged otherwise is accepted when the next batch is
    /// asked for (or at commit and close).
    Implicit,
    /// Each record is acknowledged by the application; one left alone stays locked to this
    /// consumer until its lock runs out.
    Explicit,
}

/// A share-group (queue) consumer's settings: the Java `KafkaShareConsumer`'s names.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    pub net: NetConfig,
    /// `group.id` (required): the share group.
    pub group_id: String,
    /// `share.acknowledgement.mode` (implicit).
    pub ack_mode: AckMode,
    /// `max.poll.records` (500): records acquired per fetch at most.
    pub max_poll_records: i32,
    /// `fetch.max.wait.ms` (500): how long a fetch waits for records at the broker.
    pub fetch_max_wait: Duration,
    /// `fetch.max.bytes` (52428800).
    pub fetch_max_bytes: i32,
}

impl QueueConfig {
    pub fn new(bootstrap: &str, group: &str) -> QueueConfig {
        QueueConfig {
            net: NetConfig::new(bootstrap),
            group_id: group.to_string(),
            ack_mode: AckMode::Implicit,
            max_poll_records: 500,
            fetch_max_wait: Duration::from_millis(500),
            fetch_max_bytes: 52_428_800,
        }
    }

    /// Parses the Java share consumer's properties.
    pub fn from_config(config: &ClientConfig) -> Result<QueueConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-queue-consumer")?;
        let group_id = r
            .string("group.id")
            .ok_or(ConfigError::Missing("group.id"))?;
        let ack_mode = match r.raw("share.acknowledgement.mode") {
            None | Some("implicit") => AckMode::Implicit,
            Some("explicit") => AckMode::Explicit,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    name: "share.acknowledgement.mode",
                    value: v.to_string(),
                    expected: "implicit or explicit",
                })
            }
        };
        let d = QueueConfig::new("", &group_id);
        let c = QueueConfig {
            max_poll_records: r.parse("max.poll.records", d.max_poll_records, "a number")?,
            fetch_max_wait: r.ms("fetch.max.wait.ms", d.fetch_max_wait)?,
            fetch_max_bytes: r.parse("fetch.max.bytes", d.fetch_max_bytes, "a number of bytes")?,
            net,
            group_id,
            ack_mode,
        };
        r.finish()?;
        if c.max_poll_records < 1 {
            return Err(ConfigError::Invalid {
                name: "max.poll.records",
                value: c.max_poll_records.to_string(),
                expected: "at least 1",
            });
        }
        Ok(c)
    }
}

/// An admin client's settings.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    pub net: NetConfig,
}

impl AdminConfig {
    pub fn new(bootstrap: &str) -> AdminConfig {
        AdminConfig {
            net: NetConfig::new(bootstrap),
        }
    }

    pub fn from_config(config: &ClientConfig) -> Result<AdminConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-admin")?;
        r.finish()?;
        Ok(AdminConfig { net })
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
