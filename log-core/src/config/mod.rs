//! Per-topic configuration, under Kafka's own config names: [`TopicConfig`] and its text form;
//! the durability settings are in [`durability`], the other value types in [`values`].

mod durability;
mod values;

pub use durability::{Ack, Durability};
pub use values::{
    timestamp_type_name, CleanupPolicy, CompressionLevels, DirtyRatio, TopicCompression,
};

use std::collections::BTreeMap;

use record_batch::{Codec, TimestampType};

use crate::error::ConfigError;

/// A topic's storage settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicConfig {
    /// `segment.bytes`: roll the active segment before it would grow past this.
    pub segment_bytes: u32,
    /// `segment.ms`: roll the active segment once its first batch is this old.
    pub segment_ms: Option<u64>,
    /// `retention.bytes`: delete the oldest closed segments while the partition is larger.
    pub retention_bytes: Option<u64>,
    /// `retention.ms`: delete closed segments whose newest record is older than this.
    pub retention_ms: Option<u64>,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: u32,
    /// `index.interval.bytes`: bytes of log between two sparse index entries.
    pub index_interval_bytes: u32,
    /// `flush.messages`, `flush.ms`, `write.caching`.
    pub durability: Durability,
    /// `errors.deadletterqueue.group.enable` (KIP-1191): share groups may write dead letters
    /// to this topic (Kafka refuses a dead-letter topic without it).
    pub dlq_group_enable: bool,
    /// `compression.type`: the codec batches are stored with (the broker recompresses a batch
    /// of another codec), or the producer's.
    pub compression: TopicCompression,
    /// `compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level` (KIP-390):
    /// the level the broker compresses with when it recompresses to that codec.
    pub compression_levels: CompressionLevels,
    /// `message.timestamp.type`: the producer's timestamps, or the broker's append time.
    pub timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms` (KIP-937): with CreateTime, a record whose timestamp
    /// is further in the past than this is refused (`i64::MAX`: never).
    pub timestamp_before_max_ms: u64,
    /// `message.timestamp.after.max.ms` (KIP-937): with CreateTime, a record whose timestamp
    /// is further in the future than this is refused (`i64::MAX`: never).
    pub timestamp_after_max_ms: u64,
    /// `cleanup.policy`: deletion by `retention.*`, compaction, both, or neither.
    pub cleanup: CleanupPolicy,
    /// `delete.retention.ms`: how long a tombstone (a record with a null value) stays in a
    /// compacted partition after the cleaner first finds it in the cleaned part.
    pub delete_retention_ms: u64,
    /// `min.compaction.lag.ms`: a record younger than this is never compacted away.
    pub min_compaction_lag_ms: u64,
    /// `max.compaction.lag.ms`: a record older than this makes its partition cleanable
    /// whatever its dirty ratio.
    pub max_compaction_lag_ms: u64,
    /// `min.cleanable.dirty.ratio`: the share of a partition's log not yet cleaned above which
    /// the cleaner compacts it.
    pub min_cleanable_dirty_ratio: DirtyRatio,
    /// Configs the storage engine keeps with the topic as text but never interprets: the
    /// layers above's own, under names starting with [`EXTRA_PREFIX`] (the broker's backlog
    /// bound, `lograil.backlog.*`), and the Kafka configs the broker accepts without acting
    /// on them (`preallocate`, `min.insync.replicas`, ...). Whoever sets them validates them.
    pub extra: BTreeMap<String, String>,
}

/// The topic config that lets share groups use a topic as their dead-letter queue.
pub const DLQ_GROUP_ENABLE: &str = "errors.deadletterqueue.group.enable";
/// The topic config that acknowledges `acks=all` from the page cache (Redpanda's name; not
/// Kafka's: see [`Durability`]).
pub const WRITE_CACHING: &str = "write.caching";
/// Names of the configs kept in [`TopicConfig::extra`] start with this.
pub const EXTRA_PREFIX: &str = "lograil.";

impl Default for TopicConfig {
    /// Kafka's defaults (1 GiB segments rolled weekly, 7-day retention, 1 MiB batches), but
    /// for durability: `acks=all` fsynced, the rest within a second ([`Durability::default`]).
    fn default() -> Self {
        TopicConfig {
            segment_bytes: 1 << 30,
            segment_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            max_message_bytes: 1_048_588,
            index_interval_bytes: 4096,
            durability: Durability::default(),
            dlq_group_enable: false,
            compression: TopicCompression::Producer,
            compression_levels: CompressionLevels::default(),
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX as u64,
            // Kafka 4's default: an hour ahead.
            timestamp_after_max_ms: 3_600_000,
            cleanup: CleanupPolicy::default(),
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX as u64,
            min_cleanable_dirty_ratio: DirtyRatio::default(),
            extra: BTreeMap::new(),
        }
    }
}

/// Smallest `segment.bytes` accepted by name: Kafka's floor since 4.0 (KIP-1030), so that a
/// topic cannot be made to roll a segment every few records. The engine itself works with any
/// size that holds a batch (tests build smaller configs directly).
pub const MIN_SEGMENT_BYTES: u32 = 1 << 20;
/// Smallest `segment.bytes` read back from a topic file: room for one batch header.
const STORED_SEGMENT_FLOOR: u32 = 1024;

/// A value a config's validator refuses, with Kafka's reason.
fn invalid_value(name: &str, value: &str, reason: String) -> ConfigError {
    ConfigError::Invalid {
        name: name.into(),
        value: value.into(),
        reason,
    }
}

impl TopicConfig {
    /// Sets one config by its Kafka name from its text form. `-1` means "no limit" for the
    /// optional ones.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        self.set_text(name, value, MIN_SEGMENT_BYTES)
    }

    fn set_text(&mut self, name: &str, value: &str, segment_floor: u32) -> Result<(), ConfigError> {
        if name.starts_with(EXTRA_PREFIX) {
            self.extra
                .insert(name.to_string(), value.trim().to_string());
            return Ok(());
        }
        if !self.entries().iter().any(|(known, _)| *known == name) {
            return Err(ConfigError::Unknown { name: name.into() });
        }
        let value = value.trim();
        if self.set_non_numeric(name, value)? {
            return Ok(());
        }
        let number = match value.parse::<i64>() {
            Ok(n) => n,
            Err(_) if name.starts_with("compression.") => {
                return Err(invalid_value(
                    name,
                    value,
                    "Not a number of type INT".into(),
                ))
            }
            Err(_) => {
                return Err(ConfigError::NotANumber {
                    name: name.into(),
                    value: value.into(),
                })
            }
        };
        self.apply(name, number, segment_floor)
    }

    /// Sets a config whose value is not an integer (a name, a boolean, a ratio); `false` when
    /// `name` is an integer config, left to [`TopicConfig::apply`].
    fn set_non_numeric(&mut self, name: &str, value: &str) -> Result<bool, ConfigError> {
        // Kafka's validators and messages (ConfigDef.ValidString, ConfigException).
        let invalid = |reason: String| invalid_value(name, value, reason);
        match name {
            "compression.type" => {
                self.compression = TopicCompression::parse(value).ok_or_else(|| {
                    let names: Vec<&str> =
                        TopicCompression::NAMES.iter().map(|(_, n)| *n).collect();
                    invalid(format!("String must be one of: {}", names.join(", ")))
                })?;
            }
            "message.timestamp.type" => {
                self.timestamp_type = match value {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => {
                        return Err(invalid(
                            "String must be one of: CreateTime, LogAppendTime".into(),
                        ))
                    }
                };
            }
            "cleanup.policy" => {
                self.cleanup = CleanupPolicy::parse(value)
                    .map_err(|_| invalid("String must be one of: compact, delete".into()))?;
            }
            "min.cleanable.dirty.ratio" => {
                let ratio = value
                    .parse::<f64>()
                    .map_err(|_| invalid("Not a number of type DOUBLE".into()))?;
                if !(0.0..=1.0).contains(&ratio) {
                    return Err(invalid(if ratio < 0.0 {
                        "Value must be at least 0.0".into()
                    } else {
                        "Value must be no more than 1.0".into()
                    }));
                }
                self.min_cleanable_dirty_ratio = DirtyRatio(ratio);
            }
            DLQ_GROUP_ENABLE | WRITE_CACHING => {
                // Kafka's BOOLEAN: true or false, any case.
                let on = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("Expected value to be either true or false".into())),
                };
                if name == WRITE_CACHING {
                    self.durability.write_caching = on;
                } else {
                    self.dlq_group_enable = on;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Sets one numeric config by its Kafka name.
    pub fn set_number(&mut self, name: &str, value: i64) -> Result<(), ConfigError> {
        self.apply(name, value, MIN_SEGMENT_BYTES)
    }

    fn apply(&mut self, name: &str, value: i64, segment_floor: u32) -> Result<(), ConfigError> {
        let optional = || -> Result<Option<u64>, ConfigError> {
            match value {
                -1 => Ok(None),
                n => u64::try_from(n)
                    .map(Some)
                    .map_err(|_| ConfigError::NegativeLimit {
                        name: name.into(),
                        value,
                    }),
            }
        };
        let bounded = |min: u32| -> Result<u32, ConfigError> {
            u32::try_from(value)
                .ok()
                .filter(|n| *n >= min && *n <= i32::MAX as u32)
                .ok_or(ConfigError::OutOfRange {
                    name: name.into(),
                    value,
                    min: min.into(),
                    max: i32::MAX.into(),
                })
        };
        // Kafka's ConfigDef.Range (and gzip's own validator) with their messages.
        let level = |min: i32, max: i32, or: Option<i32>| -> Result<i32, ConfigError> {
            let invalid = |reason: String| ConfigError::Invalid {
                name: name.into(),
                value: value.to_string(),
                reason,
            };
            let n = i32::try_from(value).map_err(|_| invalid("Not a number of type INT".into()))?;
            match or {
                Some(or) if n != or && !(min..=max).contains(&n) => Err(invalid(format!(
                    "Value must be between {min} and {max} or equal to {or}"
                ))),
                Some(_) => Ok(n),
                None if n < min => Err(invalid(format!("Value must be at least {min}"))),
                None if n > max => Err(invalid(format!("Value must be no more than {max}"))),
                None => Ok(n),
            }
        };
        // Kafka's LONG with ConfigDef.Range.atLeast, and its message.
        let at_least = |min: i64| -> Result<u64, ConfigError> {
            if value < min {
                return Err(ConfigError::Invalid {
                    name: name.into(),
                    value: value.to_string(),
                    reason: format!("Value must be at least {min}"),
                });
            }
            Ok(value as u64)
        };
        match name {
            "delete.retention.ms" => self.delete_retention_ms = at_least(0)?,
            "message.timestamp.before.max.ms" => self.timestamp_before_max_ms = at_least(0)?,
            "message.timestamp.after.max.ms" => self.timestamp_after_max_ms = at_least(0)?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = at_least(0)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = at_least(1)?,
            "compression.gzip.level" => self.compression_levels.gzip = level(1, 9, Some(-1))?,
            "compression.lz4.level" => self.compression_levels.lz4 = level(1, 17, None)?,
            "compression.zstd.level" => self.compression_levels.zstd = level(-131_072, 22, None)?,
            "segment.bytes" => self.segment_bytes = bounded(segment_floor)?,
            "segment.ms" => self.segment_ms = optional()?.filter(|ms| *ms > 0),
            "retention.bytes" => self.retention_bytes = optional()?,
            "retention.ms" => self.retention_ms = optional()?,
            "max.message.bytes" => self.max_message_bytes = bounded(0)?,
            "index.interval.bytes" => self.index_interval_bytes = bounded(0)?,
            // Kafka's LONG, at least 1 (flush.messages) or 0 (flush.ms); Long.MAX_VALUE, and
            // -1 (how lograil stored "never" before), mean never.
            "flush.messages" => {
                self.durability.flush_messages = match value {
                    -1 | i64::MAX => None,
                    _ => Some(at_least(1)?),
                }
            }
            "flush.ms" => {
                self.durability.flush_ms = match value {
                    -1 | i64::MAX => None,
                    _ => Some(at_least(0)?),
                }
            }
            _ => return Err(ConfigError::Unknown { name: name.into() }),
        }
        Ok(())
    }

    /// Whether a batch of `codec` with timestamp type `timestamp_type` is stored as it came
    /// (else the broker recompresses it or restamps its timestamp, `crate::recompress`).
    pub fn keeps(&self, codec: Option<Codec>, timestamp_type: TimestampType) -> bool {
        self.compression.codec().is_none_or(|c| Some(c) == codec)
            && timestamp_type == TimestampType::CreateTime
            && self.timestamp_type == TimestampType::CreateTime
    }

    /// Every config as `(Kafka name, value)`, `-1` for "no limit".
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<u64>| v.map_or("-1".to_string(), |v| v.to_string());
        // Kafka's "never" for the flush settings is Long.MAX_VALUE.
        let never = |v: Option<u64>| v.map_or(i64::MAX.to_string(), |v| v.to_string());
        let durability = self.durability;
        vec![
            ("segment.bytes", self.segment_bytes.to_string()),
            ("segment.ms", opt(self.segment_ms)),
            ("retention.bytes", opt(self.retention_bytes)),
            ("retention.ms", opt(self.retention_ms)),
            ("max.message.bytes", self.max_message_bytes.to_string()),
            (
                "index.interval.bytes",
                self.index_interval_bytes.to_string(),
            ),
            ("flush.messages", never(durability.flush_messages)),
            ("flush.ms", never(durability.flush_ms)),
            (WRITE_CACHING, durability.write_caching.to_string()),
            (DLQ_GROUP_ENABLE, self.dlq_group_enable.to_string()),
            ("compression.type", self.compression.name().to_string()),
            (
                "compression.gzip.level",
                self.compression_levels.gzip.to_string(),
            ),
            (
                "compression.lz4.level",
                self.compression_levels.lz4.to_string(),
            ),
            (
                "compression.zstd.level",
                self.compression_levels.zstd.to_string(),
            ),
            (
                "message.timestamp.type",
                timestamp_type_name(self.timestamp_type).to_string(),
            ),
            (
                "message.timestamp.before.max.ms",
                self.timestamp_before_max_ms.to_string(),
            ),
            (
                "message.timestamp.after.max.ms",
                self.timestamp_after_max_ms.to_string(),
            ),
            ("cleanup.policy", self.cleanup.name().to_string()),
            ("delete.retention.ms", self.delete_retention_ms.to_string()),
            (
                "min.compaction.lag.ms",
                self.min_compaction_lag_ms.to_string(),
            ),
            (
                "max.compaction.lag.ms",
                self.max_compaction_lag_ms.to_string(),
            ),
            (
                "min.cleanable.dirty.ratio",
                self.min_cleanable_dirty_ratio.get().to_string(),
            ),
        ]
    }

    /// Text form, one `name=value` a line, as stored in `<topic>.topic` files.
    pub fn to_properties(&self) -> String {
        let mut text: String = self
            .entries()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        for (k, v) in &self.extra {
            text += &format!("{k}={v}\n");
        }
        text
    }

    /// Parses [`TopicConfig::to_properties`] output; `#` starts a comment line. A stored
    /// `segment.bytes` below [`MIN_SEGMENT_BYTES`] (from before that floor) is kept as it is; a
    /// name not interpreted here goes to [`TopicConfig::extra`] as it was stored.
    pub fn from_properties(text: &str) -> Result<Self, ConfigError> {
        let mut config = TopicConfig::default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line
                .split_once('=')
                .ok_or_else(|| ConfigError::NotNameValue { line: line.into() })?;
            let (name, value) = (name.trim(), value.trim());
            match config.set_text(name, value, STORED_SEGMENT_FLOOR) {
                Err(ConfigError::Unknown { .. }) => {
                    config.extra.insert(name.to_string(), value.to_string());
                }
                other => other?,
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip() {
        let mut config = TopicConfig::default();
        config.set("segment.bytes", "2097152").unwrap();
        config.set("retention.ms", "-1").unwrap();
        config.set("flush.ms", "250").unwrap();
        config.set("lograil.backlog.group", "billing").unwrap();
        // A name the engine does not interpret, kept by the broker as text.
        config.extra.insert("preallocate".into(), "true".into());
        let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
        assert_eq!(back, config);
        assert_eq!(back.extra["preallocate"], "true");
        assert_eq!(back.durability.flush_ms, Some(250));
    }

    #[test]
    fn compression_and_timestamp_configs_are_kafkas() {
        let mut config = TopicConfig::default();
        config.set("compression.type", "zstd").unwrap();
        config.set("compression.zstd.level", "-7").unwrap();
        config.set("compression.gzip.level", "-1").unwrap();
        config.set("compression.lz4.level", "17").unwrap();
        config
            .set("message.timestamp.type", "LogAppendTime")
            .unwrap();
        assert_eq!(config.compression.codec(), Some(Codec::Zstd));
        assert_eq!(config.compression_levels.of(Codec::Zstd), -7);
        assert_eq!(config.timestamp_type, TimestampType::LogAppendTime);
        let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
        assert_eq!(back, config);
        let defaults = TopicConfig::default();
        assert_eq!(defaults.compression, TopicCompression::Producer);
        assert_eq!(
            defaults.compression_levels,
            CompressionLevels {
                gzip: -1,
                lz4: 9,
                zstd: 3
            }
        );
        for (name, value, message) in [
            ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
            ("compression.type", "none", "Invalid value none for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
            ("message.timestamp.type", "BrokerTime", "Invalid value BrokerTime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
            ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
            ("compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
            ("compression.lz4.level", "0", "Invalid value 0 for configuration compression.lz4.level: Value must be at least 1"),
            ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
            ("compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
            ("compression.zstd.level", "-131073", "Invalid value -131073 for configuration compression.zstd.level: Value must be at least -131072"),
            ("compression.zstd.level", "x", "Invalid value x for configuration compression.zstd.level: Not a number of type INT"),
        ] {
            let mut config = TopicConfig::default();
            assert_eq!(config.set(name, value).unwrap_err().to_string(), message);
            assert_eq!(config, TopicConfig::default(), "refused values change nothing");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        let mut config = TopicConfig::default();
        assert!(matches!(
            config.set("segment.bytes", "10"),
            Err(ConfigError::OutOfRange { min: 1048576, .. })
        ));
        assert!(matches!(
            config.set("segment.bytes", "abc"),
            Err(ConfigError::NotANumber { .. })
        ));
        assert!(matches!(
            config.set("retention.ms", "-5"),
            Err(ConfigError::NegativeLimit { value: -5, .. })
        ));
        assert!(matches!(
            config.set("no.such.config", "x"),
            Err(ConfigError::Unknown { .. })
        ));
        assert!(matches!(
            TopicConfig::from_properties("garbage"),
            Err(ConfigError::NotNameValue { .. })
        ));
        assert_eq!(
            config,
            TopicConfig::default(),
            "refused values change nothing"
        );
    }
}
