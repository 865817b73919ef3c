//! The producer's settings ([`ProducerConfig`]).

use std::time::Duration;

use super::{ClientConfig, ConfigError, NetConfig, Reader};

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
    /// `none`: batches go uncompressed.
    None,
    /// `gzip`.
    Gzip,
    /// `snappy`.
    Snappy,
    /// `lz4`.
    Lz4,
    /// `zstd` (needs brokers of Kafka 2.1 or later).
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
    /// The connection settings every client has.
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
    /// `transactional.id` (none): makes the producer transactional
    /// ([`crate::Producer::init_transactions`]); needs idempotence, which it turns on.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms` (60000): how long the transaction coordinator lets a
    /// transaction stay open before it aborts it.
    pub transaction_timeout: Duration,
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
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
        }
    }

    /// Parses the Java client's producer properties.
    pub fn from_config(config: &ClientConfig) -> Result<ProducerConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-producer")?;
        let acks = acks(r.raw("acks"))?;
        let compression = r.parse(
            "compression.type",
            Compression::None,
            "none, gzip, snappy, lz4 or zstd",
        )?;
        let partitioner = partitioner(r.raw("partitioner"))?;
        let explicit_idempotence = r.raw("enable.idempotence").is_some();
        let d = ProducerConfig::defaults(net);
        let c = ProducerConfig {
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
            transactional_id: r.string("transactional.id").filter(|id| !id.is_empty()),
            transaction_timeout: r.ms("transaction.timeout.ms", d.transaction_timeout)?,
            net: d.net,
        };
        r.finish()?;
        c.reconcile(explicit_idempotence)
    }

    /// Checks the settings against each other by the Java client's rules: a transactional
    /// producer is idempotent, and idempotence not asked for explicitly is turned off when
    /// `acks`, `retries` or `max.in.flight.requests.per.connection` do not allow it.
    fn reconcile(mut self, explicit_idempotence: bool) -> Result<ProducerConfig, ConfigError> {
        if self.max_in_flight == 0 {
            return Err(ConfigError::Invalid {
                name: "max.in.flight.requests.per.connection",
                value: "0".into(),
                expected: "a positive number",
            });
        }
        // The Java client's rules: idempotence needs acks=all, retries and at most 5 requests
        // in flight; asked for explicitly, a conflict is an error, by default it is turned off.
        let compatible = self.acks == Acks::All && self.retries > 0 && self.max_in_flight <= 5;
        if self.transactional_id.is_some() {
            // As the Java client: a transactional producer is idempotent.
            if explicit_idempotence && !self.enable_idempotence {
                return Err(ConfigError::Conflict(
                    "transactional.id needs enable.idempotence=true",
                ));
            }
            if !compatible {
                return Err(ConfigError::Conflict(
                    "transactional.id needs acks=all, retries > 0 and \
                     max.in.flight.requests.per.connection <= 5",
                ));
            }
            self.enable_idempotence = true;
        }
        if self.transaction_timeout.is_zero()
            || self.transaction_timeout.as_millis() > i32::MAX as u128
        {
            return Err(ConfigError::Invalid {
                name: "transaction.timeout.ms",
                value: self.transaction_timeout.as_millis().to_string(),
                expected: "a positive number of milliseconds up to 2147483647",
            });
        }
        if self.enable_idempotence && !compatible {
            if explicit_idempotence {
                return Err(ConfigError::Conflict(
                    "enable.idempotence=true needs acks=all, retries > 0 and \
                     max.in.flight.requests.per.connection <= 5",
                ));
            }
            self.enable_idempotence = false;
        }
        if self.delivery_timeout < self.linger + self.net.request_timeout {
            return Err(ConfigError::Conflict(
                "delivery.timeout.ms must be at least linger.ms + request.timeout.ms",
            ));
        }
        Ok(self)
    }
}

/// `acks`' value (all when unset).
fn acks(value: Option<&str>) -> Result<Acks, ConfigError> {
    Ok(match value {
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
    })
}

/// `partitioner`'s value (the default when unset).
fn partitioner(value: Option<&str>) -> Result<Partitioner, ConfigError> {
    Ok(match value {
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
    })
}
