//! The share (queue) consumer's settings ([`QueueConfig`]).

use std::time::Duration;

use super::{ClientConfig, ConfigError, NetConfig, Reader};

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
    /// The connection settings every client has.
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
    /// The Java share consumer's defaults, for `bootstrap`, in share group `group`.
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
