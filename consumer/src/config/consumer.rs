//! The group consumer's settings ([`ConsumerConfig`]).

use std::time::Duration;

use super::{ClientConfig, ConfigError, NetConfig, Reader};

/// `auto.offset.reset`: where a partition without a committed offset (or whose offset is out of
/// range) starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// `earliest`: the partition's first offset (the log start).
    Earliest,
    /// `latest` (the default): the log end, so only records produced from then on.
    Latest,
    /// `none`: [`crate::ConsumeError::NoOffset`] instead, until a seek.
    None,
}

/// `isolation.level`: which records of transactions a consumer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    /// `read_uncommitted` (the default, as the Java client's): every record, those of open and
    /// aborted transactions too; reads up to the high watermark.
    ReadUncommitted,
    /// `read_committed`: records of committed transactions (and non-transactional ones) only,
    /// up to the last stable offset (before the first transaction still open).
    ReadCommitted,
}

impl IsolationLevel {
    /// The wire value (Fetch, ListOffsets).
    pub(crate) fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
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
    /// The connection settings every client has.
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
    /// `isolation.level` (read_uncommitted).
    pub isolation_level: IsolationLevel,
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
            isolation_level: IsolationLevel::ReadUncommitted,
        }
    }

    /// Parses the Java client's consumer properties.
    pub fn from_config(config: &ClientConfig) -> Result<ConsumerConfig, ConfigError> {
        let mut r = Reader::new(config);
        let net = NetConfig::read(&mut r, "lograil-consumer")?;
        let auto_offset_reset = offset_reset(r.raw("auto.offset.reset"))?;
        let assignors = assignors(r.raw("partition.assignment.strategy"))?;
        let isolation_level = isolation_level(r.raw("isolation.level"))?;
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
            isolation_level,
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

/// `auto.offset.reset`'s value (latest when unset).
fn offset_reset(value: Option<&str>) -> Result<OffsetReset, ConfigError> {
    Ok(match value {
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
    })
}

/// `partition.assignment.strategy`'s list (range, cooperative-sticky when unset); an empty
/// list is missing.
fn assignors(value: Option<&str>) -> Result<Vec<AssignorKind>, ConfigError> {
    Ok(match value {
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
    })
}

/// `isolation.level`'s value, in any case (read_uncommitted when unset).
fn isolation_level(value: Option<&str>) -> Result<IsolationLevel, ConfigError> {
    Ok(match value {
        None => IsolationLevel::ReadUncommitted,
        Some(level) => match level.to_ascii_lowercase().as_str() {
            "read_uncommitted" => IsolationLevel::ReadUncommitted,
            "read_committed" => IsolationLevel::ReadCommitted,
            _ => {
                return Err(ConfigError::Invalid {
                    name: "isolation.level",
                    value: level.to_string(),
                    expected: "read_uncommitted or read_committed",
                })
            }
        },
    })
}
