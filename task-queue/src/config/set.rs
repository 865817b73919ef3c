//! Setting a share group's configs by name, with Kafka's validators: Kafka's group configs,
//! KIP-1191's dead-letter configs, and lograil's fair-turn and overload configs.

use super::{parse_reset, parse_weights, ShareConfig, ShareConfigError};
use crate::fairness::FairnessKey;

/// One config being set: the name it was given by, and its value (`None`: back to the
/// default).
struct Setting<'a> {
    name: &'a str,
    value: Option<&'a str>,
}

impl Setting<'_> {
    fn invalid(&self, expected: &'static str) -> ShareConfigError {
        ShareConfigError::Invalid {
            name: self.name.to_string(),
            value: self.value.unwrap_or_default().to_string(),
            expected,
        }
    }

    /// The value as an integer in `min..=max`.
    fn number(&self, min: i64, max: i64, expected: &'static str) -> Result<i64, ShareConfigError> {
        self.value
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| self.invalid(expected))
    }
}

impl ShareConfig {
    /// Sets one config by any of its names (`None`: back to `defaults`' value).
    pub fn set(
        &mut self,
        name: &str,
        value: Option<&str>,
        defaults: &ShareConfig,
    ) -> Result<(), ShareConfigError> {
        let canonical =
            Self::canonical(name).ok_or_else(|| ShareConfigError::Unknown(name.to_string()))?;
        let setting = Setting { name, value };
        let known = self.set_group(canonical, &setting, defaults)?
            || self.set_dead_letter(canonical, &setting, defaults)?
            || self.set_fair_turns(canonical, &setting, defaults)?;
        if !known {
            return Err(ShareConfigError::Unknown(name.to_string()));
        }
        Ok(())
    }

    /// Kafka's share group configs (locks, delivery limit, sessions, offset reset,
    /// isolation); `false` for another config.
    fn set_group(
        &mut self,
        canonical: &str,
        setting: &Setting<'_>,
        defaults: &ShareConfig,
    ) -> Result<bool, ShareConfigError> {
        match (canonical, setting.value) {
            ("share.record.lock.duration.ms", None) => {
                self.lock_duration_ms = defaults.lock_duration_ms
            }
            ("share.record.lock.duration.ms", Some(_)) => {
                self.lock_duration_ms = setting.number(1000, 3_600_000, "in 1000..=3600000")?
            }
            ("group.share.delivery.count.limit", None) => {
                self.delivery_limit = defaults.delivery_limit
            }
            ("group.share.delivery.count.limit", Some(_)) => {
                self.delivery_limit = setting.number(2, 10, "in 2..=10")? as u16
            }
            ("group.share.partition.max.record.locks", None) => {
                self.max_record_locks = defaults.max_record_locks;
                self.max_window = defaults.max_window;
            }
            ("group.share.partition.max.record.locks", Some(_)) => {
                self.max_record_locks = setting.number(100, 10_000, "in 100..=10000")? as usize;
                self.max_window = self.max_record_locks * 16;
            }
            ("share.session.timeout.ms", None) => {
                self.session_timeout_ms = defaults.session_timeout_ms
            }
            ("share.session.timeout.ms", Some(_)) => {
                self.session_timeout_ms = setting.number(1000, 3_600_000, "in 1000..=3600000")?
            }
            ("share.heartbeat.interval.ms", None) => {
                self.heartbeat_interval_ms = defaults.heartbeat_interval_ms
            }
            ("share.heartbeat.interval.ms", Some(_)) => {
                self.heartbeat_interval_ms = setting.number(100, 3_600_000, "in 100..=3600000")?
            }
            ("share.auto.offset.reset", None) => {
                self.auto_offset_reset = defaults.auto_offset_reset
            }
            ("share.auto.offset.reset", Some(v)) => {
                self.auto_offset_reset = parse_reset(v).ok_or_else(|| {
                    setting
                        .invalid("latest, earliest or by_duration:<ISO-8601 duration, e.g. PT1H>")
                })?
            }
            ("share.isolation.level", None) => {
                self.isolation_level = defaults.isolation_level.clone()
            }
            ("share.isolation.level", Some(v)) => {
                let level = v.trim().to_ascii_lowercase();
                if level != "read_uncommitted" && level != "read_committed" {
                    return Err(setting.invalid("read_uncommitted or read_committed"));
                }
                self.isolation_level = level;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// KIP-1191's dead-letter configs; `false` for another config.
    fn set_dead_letter(
        &mut self,
        canonical: &str,
        setting: &Setting<'_>,
        defaults: &ShareConfig,
    ) -> Result<bool, ShareConfigError> {
        match (canonical, setting.value) {
            ("errors.deadletterqueue.topic.name", v) => {
                self.dead_letter_topic =
                    v.map(str::trim).filter(|v| !v.is_empty()).map(String::from)
            }
            ("errors.deadletterqueue.copy.record.enable", None) => {
                self.dead_letter_copy_record = defaults.dead_letter_copy_record
            }
            ("errors.deadletterqueue.copy.record.enable", Some(v)) => {
                // Kafka's BOOLEAN: true or false, any case.
                self.dead_letter_copy_record = match v.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(setting.invalid("true or false")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// lograil's fair-turn and overload configs; `false` for another config.
    fn set_fair_turns(
        &mut self,
        canonical: &str,
        setting: &Setting<'_>,
        defaults: &ShareConfig,
    ) -> Result<bool, ShareConfigError> {
        match (canonical, setting.value) {
            ("lograil.share.fairness.key", None) => {
                self.fairness_key = defaults.fairness_key.clone()
            }
            ("lograil.share.fairness.key", Some(v)) => {
                self.fairness_key = FairnessKey::parse(v)
                    .ok_or_else(|| setting.invalid("none, key or header:<name>"))?
            }
            ("lograil.share.fairness.window", None) => {
                self.fairness_window = defaults.fairness_window
            }
            ("lograil.share.fairness.window", Some(_)) => {
                self.fairness_window = setting.number(100, 160_000, "in 100..=160000")? as usize
            }
            ("lograil.share.fairness.weights", None) => {
                self.fairness_weights = defaults.fairness_weights.clone()
            }
            ("lograil.share.fairness.weights", Some(v)) => {
                self.fairness_weights = parse_weights(v)
                    .ok_or_else(|| setting.invalid("tenant=weight,... with weights in 1..=1000"))?
            }
            ("lograil.share.overload.target.ms", None) => {
                self.overload_target_ms = defaults.overload_target_ms
            }
            ("lograil.share.overload.target.ms", Some(v)) if v.trim().is_empty() => {
                self.overload_target_ms = None
            }
            ("lograil.share.overload.target.ms", Some(_)) => {
                let ms = setting.number(0, 3_600_000, "0 (off) or in 1..=3600000")?;
                self.overload_target_ms = (ms > 0).then_some(ms)
            }
            ("lograil.share.overload.interval.ms", None) => {
                self.overload_interval_ms = defaults.overload_interval_ms
            }
            ("lograil.share.overload.interval.ms", Some(_)) => {
                self.overload_interval_ms = setting.number(1, 3_600_000, "in 1..=3600000")?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
