//! Backlog-bounded topics (beyond Kafka): a topic config bounds how far a named consumer group
//! may fall behind, in records and/or in age, and producers to the topic are pushed back when
//! it has: throttled (a `throttle_time_ms` that grows with how far over the bound the backlog
//! is, the connection muted as for a quota) or, in `reject` mode, refused with
//! POLICY_VIOLATION and a message saying why. When the group catches up, the push-back lifts.
//!
//! Topic configs (set like any other: CreateTopics, kafka-configs, `lograil topic create
//! --config`; kept with the topic):
//!
//! - `lograil.backlog.group`: the consumer group whose backlog is bounded (no bound without it);
//! - `lograil.backlog.max.records`: records the group may have left to read, all partitions
//!   together (log end minus committed offset; a partition without a commit counts from its log
//!   start);
//! - `lograil.backlog.max.age.ms`: the age of its oldest unread record (now minus the first
//!   timestamp of the batch holding the committed offset);
//! - `lograil.backlog.mode`: `throttle` (the default) or `reject`.
//!
//! The backlog is measured at most every [`REFRESH`] per topic (on the blocking pool: it may
//! read a segment), not per record.
//!
//! Why POLICY_VIOLATION for `reject`: it is not retriable, so every client reports it to the
//! application at once, with the broker's message where the client shows messages (the Java
//! client, Produce v8+); THROTTLING_QUOTA_EXCEEDED is retriable in the Java client, which would
//! retry quietly until its delivery timeout.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use log_core::{ConfigError, Topic, TopicConfig};

use crate::broker::Broker;

pub const GROUP: &str = "lograil.backlog.group";
pub const MAX_RECORDS: &str = "lograil.backlog.max.records";
pub const MAX_AGE_MS: &str = "lograil.backlog.max.age.ms";
pub const MODE: &str = "lograil.backlog.mode";
/// The read-only entry of DescribeConfigs with the backlog now.
pub const STATE: &str = "lograil.backlog.state";
const NAMES: [&str; 4] = [GROUP, MAX_RECORDS, MAX_AGE_MS, MODE];

/// How old a measured backlog may be before the next produce measures it again.
pub const REFRESH: Duration = Duration::from_millis(100);
/// The throttle just over the bound; it grows by [`THROTTLE_PER_OVER`] per bound's worth over.
const THROTTLE_BASE: Duration = Duration::from_millis(100);
const THROTTLE_PER_OVER: Duration = Duration::from_secs(1);

/// Whether `name` is one of the backlog configs.
pub fn is_backlog_config(name: &str) -> bool {
    NAMES.contains(&name)
}

/// Checks one backlog config and sets it in `config` (`-1`, or an empty group, unsets it).
pub fn set(config: &mut TopicConfig, name: &str, value: &str) -> Result<(), ConfigError> {
    let value = value.trim();
    let unset = match name {
        GROUP => value.is_empty(),
        MAX_RECORDS | MAX_AGE_MS => {
            let n: i64 = value.parse().map_err(|_| ConfigError::NotANumber {
                name: name.into(),
                value: value.into(),
            })?;
            if n != -1 && n < 1 {
                return Err(ConfigError::OutOfRange {
                    name: name.into(),
                    value: n,
                    min: 1,
                    max: i64::MAX,
                });
            }
            n == -1
        }
        MODE => {
            if !matches!(value, "throttle" | "reject") {
                return Err(ConfigError::Unsupported {
                    name: name.into(),
                    value: value.into(),
                    supported: "throttle or reject",
                });
            }
            false
        }
        _ => return Err(ConfigError::Unknown { name: name.into() }),
    };
    if unset {
        config.extra.remove(name);
    } else {
        config.extra.insert(name.to_string(), value.to_string());
    }
    Ok(())
}

/// Puts a backlog config back to its default (unset).
pub fn reset(config: &mut TopicConfig, name: &str) {
    config.extra.remove(name);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Throttle,
    Reject,
}

/// A topic's bound, from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub group: String,
    pub max_records: Option<i64>,
    pub max_age_ms: Option<i64>,
    pub mode: Mode,
}

impl Bound {
    /// `None` without a group or without a limit.
    pub fn of(config: &TopicConfig) -> Option<Bound> {
        if config.extra.is_empty() {
            return None;
        }
        let group = config.extra.get(GROUP)?.clone();
        let number = |name| config.extra.get(name).and_then(|v| v.parse::<i64>().ok());
        let bound = Bound {
            group,
            max_records: number(MAX_RECORDS),
            max_age_ms: number(MAX_AGE_MS),
            mode: match config.extra.get(MODE).map(String::as_str) {
                Some("reject") => Mode::Reject,
                _ => Mode::Throttle,
            },
        };
        (bound.max_records.is_some() || bound.max_age_ms.is_some()).then_some(bound)
    }
}

/// A topic's backlog as last measured.
#[derive(Debug, Clone)]
pub struct State {
    pub records: i64,
    /// Age of the oldest unread record; `None` when nothing is unread or no age bound is set.
    pub age_ms: Option<i64>,
    /// How far over the bound, in bounds (0.5: half a bound over); 0 or less within it.
    pub over: f64,
    measured: Instant,
}

impl State {
    pub fn is_over(&self) -> bool {
        self.over > 0.0
    }

    /// The read-only DescribeConfigs value: `records=N [age_ms=N] over_bound=BOOL` (spaces:
    /// Kafka's tools print configs separated by commas).
    pub fn describe(&self) -> String {
        let mut text = format!("records={}", self.records);
        if let Some(age) = self.age_ms {
            text += &format!(" age_ms={age}");
        }
        text + &format!(" over_bound={}", self.is_over())
    }
}

/// What a produce to a bounded topic gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Accept,
    Throttle(Duration),
    Reject(String),
}

/// The last measured backlog of every bounded topic.
#[derive(Debug, Default)]
pub struct Backlogs {
    states: Mutex<HashMap<String, State>>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Measures `topic`'s backlog for `bound` now. Reads a segment per partition with an age bound
/// (the batch at the committed offset): call it off the async workers.
pub fn measure(broker: &Broker, topic: &Topic, bound: &Bound) -> State {
    let now = now_ms();
    let mut records = 0i64;
    let mut oldest: Option<i64> = None;
    for (index, partition) in (0..).zip(topic.partitions()) {
        let start = partition.log_start_offset();
        let end = partition.log_end_offset();
        let committed = broker
            .offsets
            .fetch(&bound.group, topic.name(), index)
            .map_or(start, |c| c.offset)
            .clamp(start, end);
        records += end - committed;
        if committed < end && bound.max_age_ms.is_some() {
            let first = partition
                .read(committed, 1)
                .ok()
                .and_then(|read| log_core::batch::BatchHeader::parse(&read.records).ok())
                .map(|header| header.base_timestamp);
            if let Some(ts) = first {
                oldest = Some(oldest.map_or(ts, |o: i64| o.min(ts)));
            }
        }
    }
    let age_ms = oldest.map(|ts| (now - ts).max(0));
    let over_records = bound
        .max_records
        .map_or(f64::MIN, |max| (records - max) as f64 / max as f64);
    let over_age = match (bound.max_age_ms, age_ms) {
        (Some(max), Some(age)) => (age - max) as f64 / max as f64,
        _ => f64::MIN,
    };
    State {
        records,
        age_ms,
        over: over_records.max(over_age),
        measured: Instant::now(),
    }
}

impl Backlogs {
    fn fresh(&self, topic: &str) -> Option<State> {
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        states
            .get(topic)
            .filter(|s| s.measured.elapsed() < REFRESH)
            .cloned()
    }

    fn store(&self, topic: &str, state: State) {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        // Topics whose bound went away, or that were deleted, are dropped as they go stale.
        states.retain(|_, s| s.measured.elapsed() < REFRESH * 100);
        states.insert(topic.to_string(), state);
    }

    /// The backlog of `topic` now, measured again if the last measure is older than
    /// [`REFRESH`]; `None` when the topic has no bound.
    pub async fn state(broker: &std::sync::Arc<Broker>, topic: &str) -> Option<(Bound, State)> {
        let handle = broker.log.topic(topic)?;
        let bound = Bound::of(&handle.config())?;
        if let Some(state) = broker.backlogs.fresh(topic) {
            return Some((bound, state));
        }
        let owner = broker.clone();
        let for_measure = bound.clone();
        let state = crate::blocking::spawn(move || measure(&owner, &handle, &for_measure))
            .await
            .ok()?;
        broker.backlogs.store(topic, state.clone());
        Some((bound, state))
    }

    /// What a produce to `topic` gets now.
    pub async fn verdict(broker: &std::sync::Arc<Broker>, topic: &str) -> Verdict {
        let Some((bound, state)) = Backlogs::state(broker, topic).await else {
            return Verdict::Accept;
        };
        if !state.is_over() {
            return Verdict::Accept;
        }
        match bound.mode {
            Mode::Reject => Verdict::Reject(format!(
                "topic {topic}: the backlog of consumer group {} is over its bound ({}; \
                 lograil.backlog.max.records={}, lograil.backlog.max.age.ms={}); produce \
                 again once the group has caught up (lograil.backlog.mode=reject)",
                bound.group,
                state.describe(),
                bound.max_records.map_or("-1".into(), |n| n.to_string()),
                bound.max_age_ms.map_or("-1".into(), |n| n.to_string()),
            )),
            Mode::Throttle => {
                let cap = broker.quotas.window().length();
                let throttle = THROTTLE_BASE + THROTTLE_PER_OVER.mul_f64(state.over.min(1e6));
                Verdict::Throttle(throttle.min(cap))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn configs_are_checked_set_and_unset() {
        let mut config = TopicConfig::default();
        assert!(Bound::of(&config).is_none());
        set(&mut config, GROUP, "billing").unwrap();
        assert!(Bound::of(&config).is_none(), "no limit yet");
        set(&mut config, MAX_RECORDS, "1000").unwrap();
        let bound = Bound::of(&config).unwrap();
        assert_eq!(bound.max_records, Some(1000));
        assert_eq!(bound.mode, Mode::Throttle);
        set(&mut config, MODE, "reject").unwrap();
        assert_eq!(Bound::of(&config).unwrap().mode, Mode::Reject);
        assert!(set(&mut config, MODE, "drop").is_err());
        assert!(set(&mut config, MAX_AGE_MS, "0").is_err());
        assert!(set(&mut config, MAX_AGE_MS, "soon").is_err());
        assert!(set(&mut config, "lograil.backlog.nope", "1").is_err());
        set(&mut config, MAX_RECORDS, "-1").unwrap();
        assert!(Bound::of(&config).is_none());
        let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
        assert_eq!(back, config, "kept with the topic");
    }
}
