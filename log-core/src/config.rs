//! Per-topic configuration, under Kafka's own config names.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::ConfigError;

/// When an append reaches the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// An append returns only once it is fsynced; concurrent appends share one fsync
    /// (group commit). Kafka: `flush.messages=1`.
    Always,
    /// Appends are fsynced in the background at most this far apart. Kafka: `flush.ms=N`.
    Interval(Duration),
    /// The OS decides when to write back (Kafka's default).
    #[default]
    Never,
}

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
    /// `flush.messages` / `flush.ms`.
    pub durability: Durability,
    /// `errors.deadletterqueue.group.enable` (KIP-1191): share groups may write dead letters
    /// to this topic (Kafka refuses a dead-letter topic without it).
    pub dlq_group_enable: bool,
    /// Configs of the layers above the storage engine, under names starting with
    /// [`EXTRA_PREFIX`] (the broker's backlog bound, `lograil.backlog.*`): kept with the topic
    /// as text, never interpreted here; whoever sets them validates them.
    pub extra: BTreeMap<String, String>,
}

/// The topic config that lets share groups use a topic as their dead-letter queue.
pub const DLQ_GROUP_ENABLE: &str = "errors.deadletterqueue.group.enable";

/// Names of the configs kept in [`TopicConfig::extra`] start with this.
pub const EXTRA_PREFIX: &str = "lograil.";

impl Default for TopicConfig {
    /// Kafka's defaults: 1 GiB segments rolled weekly, 7-day retention, 1 MiB batches.
    fn default() -> Self {
        TopicConfig {
            segment_bytes: 1 << 30,
            segment_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            max_message_bytes: 1_048_588,
            index_interval_bytes: 4096,
            durability: Durability::Never,
            dlq_group_enable: false,
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
        if name == DLQ_GROUP_ENABLE {
            // Kafka's BOOLEAN: true or false, any case, around spaces.
            self.dlq_group_enable = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(ConfigError::NotABoolean {
                        name: name.into(),
                        value: value.into(),
                    })
                }
            };
            return Ok(());
        }
        let number = value
            .trim()
            .parse::<i64>()
            .map_err(|_| ConfigError::NotANumber {
                name: name.into(),
                value: value.into(),
            })?;
        self.apply(name, number, segment_floor)
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
        match name {
            "segment.bytes" => self.segment_bytes = bounded(segment_floor)?,
            "segment.ms" => self.segment_ms = optional()?.filter(|ms| *ms > 0),
            "retention.bytes" => self.retention_bytes = optional()?,
            "retention.ms" => self.retention_ms = optional()?,
            "max.message.bytes" => self.max_message_bytes = bounded(0)?,
            "index.interval.bytes" => self.index_interval_bytes = bounded(0)?,
            // `flush.messages` and `flush.ms` each switch their own policy on or off, so the
            // order in which they are set does not matter.
            "flush.messages" => match value {
                1 => self.durability = Durability::Always,
                n if n > 1 => {
                    return Err(ConfigError::Unsupported {
                        name: name.into(),
                        value: value.to_string(),
                        supported: "1, fsync every append",
                    })
                }
                _ if self.durability == Durability::Always => self.durability = Durability::Never,
                _ => {}
            },
            "flush.ms" => match optional()? {
                Some(ms) => self.durability = Durability::Interval(Duration::from_millis(ms)),
                None if matches!(self.durability, Durability::Interval(_)) => {
                    self.durability = Durability::Never
                }
                None => {}
            },
            _ => return Err(ConfigError::Unknown { name: name.into() }),
        }
        Ok(())
    }

    /// Every config as `(Kafka name, value)`, `-1` for "no limit".
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<u64>| v.map_or("-1".to_string(), |v| v.to_string());
        let (flush_messages, flush_ms) = match self.durability {
            Durability::Always => ("1".to_string(), "-1".to_string()),
            Durability::Interval(d) => ("-1".to_string(), d.as_millis().to_string()),
            Durability::Never => ("-1".to_string(), "-1".to_string()),
        };
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
            ("flush.messages", flush_messages),
            ("flush.ms", flush_ms),
            (DLQ_GROUP_ENABLE, self.dlq_group_enable.to_string()),
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
    /// `segment.bytes` below [`MIN_SEGMENT_BYTES`] (from before that floor) is kept as it is.
    pub fn from_properties(text: &str) -> Result<Self, ConfigError> {
        let mut config = TopicConfig::default();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line
                .split_once('=')
                .ok_or_else(|| ConfigError::NotNameValue { line: line.into() })?;
            config.set_text(name.trim(), value.trim(), STORED_SEGMENT_FLOOR)?;
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
        let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
        assert_eq!(back, config);
        assert_eq!(
            back.durability,
            Durability::Interval(Duration::from_millis(250))
        );
    }

    #[test]
    fn flush_messages_one_is_always() {
        let config = TopicConfig::from_properties("flush.messages=1\n").unwrap();
        assert_eq!(config.durability, Durability::Always);
        let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
        assert_eq!(back.durability, Durability::Always);
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
            config.set("flush.messages", "100"),
            Err(ConfigError::Unsupported { .. })
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
