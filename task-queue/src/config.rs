//! A share group's settings, under Kafka's names and with Kafka's defaults; settable per group
//! (Kafka's group configs, IncrementalAlterConfigs on a GROUP resource) over broker defaults.

mod set;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::fairness::FairnessKey;

/// Where a share group starts reading a partition it has never read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AutoOffsetReset {
    /// At the log end: only records produced from then on (Kafka's default).
    Latest,
    /// At the log start.
    Earliest,
    /// The first record at most this many ms old.
    ByDuration(i64),
}

impl fmt::Display for AutoOffsetReset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AutoOffsetReset::Latest => f.write_str("latest"),
            AutoOffsetReset::Earliest => f.write_str("earliest"),
            AutoOffsetReset::ByDuration(ms) => write!(f, "by_duration:PT{}S", ms / 1000),
        }
    }
}

/// A share group's settings (Kafka's `group.share.*` and lograil's own), each with Kafka's
/// default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareConfig {
    /// `group.share.record.lock.duration.ms`: how long an acquired record is held.
    pub lock_duration_ms: i64,
    /// `group.share.delivery.count.limit`: deliveries before a record is archived.
    pub delivery_limit: u16,
    /// `group.share.partition.max.record.locks`: records acquired at once per partition.
    pub max_record_locks: usize,
    /// `group.share.session.timeout.ms`: a member silent this long leaves the group.
    pub session_timeout_ms: i64,
    /// `group.share.heartbeat.interval.ms`: how often members are told to heartbeat.
    pub heartbeat_interval_ms: i64,
    /// `share.auto.offset.reset`.
    pub auto_offset_reset: AutoOffsetReset,
    /// `errors.deadletterqueue.topic.name` (KIP-1191): where archived records are copied.
    pub dead_letter_topic: Option<String>,
    /// `errors.deadletterqueue.copy.record.enable` (KIP-1191, default false): a dead letter
    /// carries the record's key and value; without it, only the context headers.
    pub dead_letter_copy_record: bool,
    /// The broker's `errors.deadletterqueue.topic.name.prefix` (default `dlq.`, `""`: any
    /// name): the prefix a dead-letter topic's name must have. Not a group config.
    pub dead_letter_topic_prefix: String,
    /// The broker's `errors.deadletterqueue.auto.create.topics.enable` (default false): a
    /// missing dead-letter topic is created at the first dead letter. Not a group config.
    pub dead_letter_auto_create: bool,
    /// `share.isolation.level`: `read_uncommitted` (Kafka's default) delivers every record up
    /// to the high watermark, open and aborted transactions' too; `read_committed` only
    /// committed ones, up to the last stable offset. Control records never.
    pub isolation_level: String,
    /// Records between SPSO and SPEO at most (lograil's bound on a partition's state):
    /// 16 x `max_record_locks`.
    pub max_window: usize,
    /// `lograil.share.fairness.key` (lograil's own): `none` (offset order, the default), `key`
    /// or `header:<name>`: what names a record's tenant for fair turns.
    pub fairness_key: FairnessKey,
    /// `lograil.share.fairness.window` (default 20000, in 100..=160000): how many records past
    /// SPSO fair turns (and the overload mode) choose among; at most `max_window` of them are
    /// used. Memory, per share partition whose group has fair turns or the overload mode on:
    /// 32 bytes per record of the window (its tenant's number, timestamp and deadline, and its
    /// offset in its tenant's list), plus each distinct tenant of the window once (its bytes
    /// and about 150 bytes): about 640 KB with a full default window. Not persisted.
    pub fairness_window: usize,
    /// `lograil.share.fairness.weights` (default empty): `tenantA=3,tenantB=2`, records per
    /// turn by tenant (in 1..=1000); unlisted tenants weigh 1.
    pub fairness_weights: BTreeMap<Vec<u8>, u32>,
    /// `lograil.share.overload.target.ms` (default off; `0` or empty: off, else in
    /// 1..=3600000): the oldest available record's wait above which, for a whole interval,
    /// the overload mode (newest first, expired records archived) is on.
    pub overload_target_ms: Option<i64>,
    /// `lograil.share.overload.interval.ms` (default 1000, in 1..=3600000).
    pub overload_interval_ms: i64,
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            lock_duration_ms: 30_000,
            delivery_limit: 5,
            max_record_locks: 2000,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            auto_offset_reset: AutoOffsetReset::Latest,
            dead_letter_topic: None,
            dead_letter_copy_record: false,
            dead_letter_topic_prefix: "dlq.".to_string(),
            dead_letter_auto_create: false,
            isolation_level: "read_uncommitted".to_string(),
            max_window: 32_000,
            fairness_key: FairnessKey::None,
            fairness_window: 20_000,
            fairness_weights: BTreeMap::new(),
            overload_target_ms: None,
            overload_interval_ms: 1000,
        }
    }
}

/// A group config that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareConfigError {
    /// A name that is no group config.
    #[error("unknown group config {0}")]
    Unknown(String),
    /// A value the config does not take.
    #[error("{name}={value}: must be {expected}")]
    Invalid {
        /// The config.
        name: String,
        /// Its value as given.
        value: String,
        /// What it takes, as text for the message.
        expected: &'static str,
    },
}

impl ShareConfig {
    /// Whether `share.isolation.level` is `read_committed`.
    pub fn read_committed(&self) -> bool {
        self.isolation_level == "read_committed"
    }

    /// Every config a share group takes, by the name it is reported under: Kafka's group
    /// config names (`share.*`), then the delivery limit and the lock cap under their broker
    /// names (also taken by Kafka 4.4's group names, `share.delivery.count.limit`,
    /// `share.partition.max.record.locks`), then KIP-1191's dead-letter configs (Kafka 4.4's
    /// names), then lograil's own fair-turn and overload configs.
    pub const NAMES: [&'static str; 14] = [
        "share.record.lock.duration.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
        "group.share.delivery.count.limit",
        "group.share.partition.max.record.locks",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.copy.record.enable",
        "lograil.share.fairness.key",
        "lograil.share.fairness.window",
        "lograil.share.fairness.weights",
        "lograil.share.overload.target.ms",
        "lograil.share.overload.interval.ms",
    ];

    /// Whether acquisition needs the records' metas: fair turns or the overload mode is on.
    pub fn needs_meta(&self) -> bool {
        self.fairness_key != FairnessKey::None || self.overload_target_ms.is_some()
    }

    /// The look-ahead window in use: `fairness_window`, at most `max_window`.
    pub fn lookahead(&self) -> usize {
        self.fairness_window.min(self.max_window)
    }

    /// A tenant's records per turn.
    pub fn weight(&self, tenant: &[u8]) -> u32 {
        self.fairness_weights.get(tenant).copied().unwrap_or(1)
    }

    /// The name a config is reported and stored under, for any name it is known by: Kafka's
    /// group names, and the broker-level `group.share.*` names (also taken per group).
    pub fn canonical(name: &str) -> Option<&'static str> {
        let name = match name {
            "group.share.record.lock.duration.ms" => "share.record.lock.duration.ms",
            "group.share.session.timeout.ms" => "share.session.timeout.ms",
            "group.share.heartbeat.interval.ms" => "share.heartbeat.interval.ms",
            "share.delivery.count.limit" => "group.share.delivery.count.limit",
            "share.partition.max.record.locks" => "group.share.partition.max.record.locks",
            other => other,
        };
        Self::NAMES.iter().copied().find(|n| *n == name)
    }

    /// Every config as (name it is reported under, value).
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        vec![
            (Self::NAMES[0], self.lock_duration_ms.to_string()),
            (Self::NAMES[1], self.session_timeout_ms.to_string()),
            (Self::NAMES[2], self.heartbeat_interval_ms.to_string()),
            (Self::NAMES[3], self.auto_offset_reset.to_string()),
            (Self::NAMES[4], self.isolation_level.clone()),
            (Self::NAMES[5], self.delivery_limit.to_string()),
            (Self::NAMES[6], self.max_record_locks.to_string()),
            (
                Self::NAMES[7],
                self.dead_letter_topic.clone().unwrap_or_default(),
            ),
            (Self::NAMES[8], self.dead_letter_copy_record.to_string()),
            (Self::NAMES[9], self.fairness_key.to_string()),
            (Self::NAMES[10], self.fairness_window.to_string()),
            (Self::NAMES[11], print_weights(&self.fairness_weights)),
            (
                Self::NAMES[12],
                self.overload_target_ms.unwrap_or(0).to_string(),
            ),
            (Self::NAMES[13], self.overload_interval_ms.to_string()),
        ]
    }

    /// The broker-wide defaults under Kafka's broker config names.
    pub fn broker_entries(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "group.share.record.lock.duration.ms",
                self.lock_duration_ms.to_string(),
            ),
            (
                "group.share.delivery.count.limit",
                self.delivery_limit.to_string(),
            ),
            (
                "group.share.partition.max.record.locks",
                self.max_record_locks.to_string(),
            ),
            (
                "group.share.session.timeout.ms",
                self.session_timeout_ms.to_string(),
            ),
            (
                "group.share.heartbeat.interval.ms",
                self.heartbeat_interval_ms.to_string(),
            ),
            (
                "errors.deadletterqueue.topic.name.prefix",
                self.dead_letter_topic_prefix.clone(),
            ),
            (
                "errors.deadletterqueue.auto.create.topics.enable",
                self.dead_letter_auto_create.to_string(),
            ),
        ]
    }
}

/// `tenantA=3,tenantB=2` (empty: none); a tenant named twice takes the last weight.
fn parse_weights(value: &str) -> Option<BTreeMap<Vec<u8>, u32>> {
    let mut weights = BTreeMap::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (tenant, weight) = pair.rsplit_once('=')?;
        let weight = weight
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|w| (1..=1000).contains(w))?;
        weights.insert(tenant.trim().as_bytes().to_vec(), weight);
    }
    Some(weights)
}

fn print_weights(weights: &BTreeMap<Vec<u8>, u32>) -> String {
    let pairs: Vec<String> = weights
        .iter()
        .map(|(tenant, weight)| format!("{}={weight}", String::from_utf8_lossy(tenant)))
        .collect();
    pairs.join(",")
}

/// `latest`, `earliest`, or `by_duration:<ISO-8601 duration>` (days, hours, minutes, seconds).
fn parse_reset(value: &str) -> Option<AutoOffsetReset> {
    match value.trim().to_ascii_lowercase().as_str() {
        "latest" => Some(AutoOffsetReset::Latest),
        "earliest" => Some(AutoOffsetReset::Earliest),
        other => {
            let duration = other.strip_prefix("by_duration:")?.strip_prefix('p')?;
            let (days, time) = match duration.split_once('t') {
                Some((days, time)) => (days, time),
                None => (duration, ""),
            };
            let mut ms = 0i64;
            if !days.is_empty() {
                ms += days
                    .strip_suffix('d')?
                    .parse::<i64>()
                    .ok()?
                    .checked_mul(86_400_000)?;
            }
            let mut number = String::new();
            for c in time.chars() {
                let unit = match c {
                    'h' => 3_600_000,
                    'm' => 60_000,
                    's' => 1000,
                    digit if digit.is_ascii_digit() => {
                        number.push(digit);
                        continue;
                    }
                    _ => return None,
                };
                ms = ms.checked_add(number.parse::<i64>().ok()?.checked_mul(unit)?)?;
                number.clear();
            }
            (number.is_empty() && ms >= 0).then_some(AutoOffsetReset::ByDuration(ms))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_by_kafka_name() {
        let defaults = ShareConfig::default();
        let mut config = defaults.clone();
        config
            .set("group.share.delivery.count.limit", Some("3"), &defaults)
            .unwrap();
        config
            .set("share.auto.offset.reset", Some("earliest"), &defaults)
            .unwrap();
        config
            .set(
                "errors.deadletterqueue.topic.name",
                Some("orders-dlq"),
                &defaults,
            )
            .unwrap();
        assert_eq!(config.delivery_limit, 3);
        assert_eq!(config.auto_offset_reset, AutoOffsetReset::Earliest);
        assert_eq!(config.dead_letter_topic.as_deref(), Some("orders-dlq"));
        config
            .set(
                "share.auto.offset.reset",
                Some("by_duration:PT1H30M"),
                &defaults,
            )
            .unwrap();
        assert_eq!(
            config.auto_offset_reset,
            AutoOffsetReset::ByDuration(5_400_000)
        );
        assert!(config
            .set("group.share.delivery.count.limit", Some("1"), &defaults)
            .is_err());
        assert!(config
            .set("share.auto.offset.reset", Some("soon"), &defaults)
            .is_err());
        assert!(config.set("no.such.thing", Some("1"), &defaults).is_err());
        assert!(!config.dead_letter_copy_record);
        config
            .set(
                "errors.deadletterqueue.copy.record.enable",
                Some("TRUE"),
                &defaults,
            )
            .unwrap();
        assert!(config.dead_letter_copy_record);
        assert!(config
            .set(
                "errors.deadletterqueue.copy.record.enable",
                Some("yes"),
                &defaults,
            )
            .is_err());
        // Broker settings are not group configs.
        assert!(config
            .set(
                "errors.deadletterqueue.topic.name.prefix",
                Some(""),
                &defaults
            )
            .is_err());
        config
            .set("group.share.delivery.count.limit", None, &defaults)
            .unwrap();
        assert_eq!(config.delivery_limit, 5);
    }

    #[test]
    fn fairness_and_overload_configs() {
        let defaults = ShareConfig::default();
        assert!(!defaults.needs_meta());
        let mut config = defaults.clone();
        let set = |config: &mut ShareConfig, name, value| config.set(name, value, &defaults);
        set(
            &mut config,
            "lograil.share.fairness.key",
            Some("header:tenant"),
        )
        .unwrap();
        assert_eq!(config.fairness_key, FairnessKey::Header("tenant".into()));
        assert!(config.needs_meta());
        set(&mut config, "lograil.share.fairness.window", Some("500")).unwrap();
        assert!(set(&mut config, "lograil.share.fairness.window", Some("99")).is_err());
        assert!(set(&mut config, "lograil.share.fairness.window", Some("160001")).is_err());
        set(
            &mut config,
            "lograil.share.fairness.weights",
            Some("a=3, b = 2"),
        )
        .unwrap();
        assert_eq!(
            (
                config.weight(b"a"),
                config.weight(b"b"),
                config.weight(b"c")
            ),
            (3, 2, 1)
        );
        for bad in ["a=0", "a", "a=1001", "a=x"] {
            assert!(set(&mut config, "lograil.share.fairness.weights", Some(bad)).is_err());
        }
        set(&mut config, "lograil.share.overload.target.ms", Some("250")).unwrap();
        set(
            &mut config,
            "lograil.share.overload.interval.ms",
            Some("100"),
        )
        .unwrap();
        assert!(set(&mut config, "lograil.share.overload.interval.ms", Some("0")).is_err());
        assert!(set(&mut config, "lograil.share.fairness.key", Some("value")).is_err());
        let entries: BTreeMap<_, _> = config.entries().into_iter().collect();
        assert_eq!(entries["lograil.share.fairness.key"], "header:tenant");
        assert_eq!(entries["lograil.share.fairness.window"], "500");
        assert_eq!(entries["lograil.share.fairness.weights"], "a=3,b=2");
        assert_eq!(entries["lograil.share.overload.target.ms"], "250");
        assert_eq!(entries["lograil.share.overload.interval.ms"], "100");
        // What entries() prints sets the same config again.
        let mut again = defaults.clone();
        for (name, value) in config.entries() {
            again.set(name, Some(&value), &defaults).unwrap();
        }
        assert_eq!(again, config);
        // The window in use stays within max_window.
        set(&mut config, "lograil.share.fairness.window", Some("160000")).unwrap();
        set(
            &mut config,
            "group.share.partition.max.record.locks",
            Some("100"),
        )
        .unwrap();
        assert_eq!(config.lookahead(), 1600);
        set(&mut config, "lograil.share.overload.target.ms", Some("0")).unwrap();
        set(&mut config, "lograil.share.fairness.key", None).unwrap();
        assert!(!config.needs_meta());
        set(&mut config, "lograil.share.overload.target.ms", Some("")).unwrap();
        assert_eq!(config.overload_target_ms, None);
    }
}
