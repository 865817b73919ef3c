//! Dynamic broker defaults of topic configs: Kafka's `kafka-configs --alter --entity-type
//! brokers --entity-default --add-config log.retention.ms=...`. Set under Kafka's broker
//! names (`log.retention.ms` for a topic's `retention.ms`, ...), kept in
//! `<data-dir>/broker-defaults` (a format line, then `topic-name=value` lines, written
//! atomically), applied over the start-up flags. A topic whose config equals the old default
//! follows the new one (lograil keeps a topic's full config and treats a value equal to the
//! default as a default, see DescribeConfigs); a topic with its own value keeps it.
//!
//! Deviation: only the broker configs below are dynamic here; every other broker config is a
//! static flag (`write.caching`'s default among them).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use log_core::{ConfigError, FileError, OpenError, TopicConfig};

/// (Kafka broker config name, the topic config it is the default of)
pub const DYNAMIC: &[(&str, &str)] = &[
    ("log.segment.bytes", "segment.bytes"),
    ("log.roll.ms", "segment.ms"),
    ("log.retention.bytes", "retention.bytes"),
    ("log.retention.ms", "retention.ms"),
    ("message.max.bytes", "max.message.bytes"),
    ("log.index.interval.bytes", "index.interval.bytes"),
    ("log.flush.interval.messages", "flush.messages"),
    ("log.flush.interval.ms", "flush.ms"),
];

const FILE: &str = "broker-defaults";
const FORMAT: &str = "# lograil broker defaults, format 1";

/// Why dynamic defaults were not changed.
#[derive(Debug, thiserror::Error)]
pub enum DefaultsError {
    #[error("{0} is not a dynamic broker config in lograil (dynamic: {list})", list = dynamic_names())]
    NotDynamic(String),
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    #[error(transparent)]
    Io(#[from] FileError),
}

fn dynamic_names() -> String {
    DYNAMIC
        .iter()
        .map(|(b, _)| *b)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The topic config a broker config name is the default of.
fn topic_name(broker_name: &str) -> Option<&'static str> {
    DYNAMIC
        .iter()
        .find(|(b, _)| *b == broker_name)
        .map(|(_, t)| *t)
}

#[derive(Debug)]
pub struct BrokerDefaults {
    dir: PathBuf,
    flags: TopicConfig,
    /// Dynamic values by topic config name.
    set: RwLock<BTreeMap<&'static str, String>>,
    /// Serialises alterations (file write, then topics).
    alter: Mutex<()>,
}

impl BrokerDefaults {
    /// Reads `<data_dir>/broker-defaults` if there is one.
    pub fn open(data_dir: &Path, flags: TopicConfig) -> Result<BrokerDefaults, OpenError> {
        let path = data_dir.join(FILE);
        let mut set = BTreeMap::new();
        match fs::read_to_string(&path) {
            Ok(text) => {
                let bad = |source: ConfigError| OpenError::BadConfig {
                    path: path.clone(),
                    source,
                };
                let mut lines = text.lines();
                if lines.next() != Some(FORMAT) {
                    return Err(bad(ConfigError::Format { expected: FORMAT }));
                }
                let mut check = flags.clone();
                for line in lines.filter(|l| !l.trim().is_empty()) {
                    let (name, value) = line.split_once('=').ok_or_else(|| {
                        bad(ConfigError::NotNameValue {
                            line: line.to_string(),
                        })
                    })?;
                    let known = DYNAMIC
                        .iter()
                        .find(|(_, t)| *t == name)
                        .map(|(_, t)| *t)
                        .ok_or_else(|| bad(ConfigError::Unknown { name: name.into() }))?;
                    check.set(known, value).map_err(bad)?;
                    set.insert(known, value.to_string());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FileError::new("read", path, e).into()),
        }
        Ok(BrokerDefaults {
            dir: data_dir.to_path_buf(),
            flags,
            set: RwLock::new(set),
            alter: Mutex::new(()),
        })
    }

    /// The defaults new topics get: the flags with the dynamic values over them.
    pub fn effective(&self) -> TopicConfig {
        let mut config = self.flags.clone();
        for (name, value) in self
            .set
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            // Validated when set.
            let _ = config.set(name, value);
        }
        config
    }

    /// The dynamic values, under Kafka's broker names.
    pub fn dynamic(&self) -> Vec<(&'static str, String)> {
        let set = self.set.read().unwrap_or_else(PoisonError::into_inner);
        DYNAMIC
            .iter()
            .filter_map(|(b, t)| set.get(t).map(|v| (*b, v.clone())))
            .collect()
    }

    /// Held by the caller across [`BrokerDefaults::alter`] and the update of the topics.
    pub fn lock(&self) -> MutexGuard<'_, ()> {
        self.alter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `changes` (Kafka broker name, value to set or `None` to go back to the flag),
    /// all or nothing, durably unless `validate_only`. Returns the defaults before and after.
    /// Blocking file work.
    pub fn alter(
        &self,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(TopicConfig, TopicConfig), DefaultsError> {
        let before = self.effective();
        let mut set = self
            .set
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (name, value) in changes {
            let topic = topic_name(name).ok_or_else(|| DefaultsError::NotDynamic(name.clone()))?;
            match value {
                Some(value) => {
                    let mut check = self.flags.clone();
                    check.set(topic, value)?;
                    set.insert(topic, value.trim().to_string());
                }
                None => {
                    set.remove(topic);
                }
            }
        }
        let mut after = self.flags.clone();
        for (name, value) in &set {
            after.set(name, value)?;
        }
        if !validate_only {
            self.write(&set)?;
            *self.set.write().unwrap_or_else(PoisonError::into_inner) = set;
        }
        Ok((before, after))
    }

    fn write(&self, set: &BTreeMap<&'static str, String>) -> Result<(), FileError> {
        let mut text = format!("{FORMAT}\n");
        for (name, value) in set {
            text += &format!("{name}={value}\n");
        }
        log_core::io::replace_file(&self.dir, FILE, text.as_bytes())
    }
}

/// `config` with every value that equals `before`'s default moved to `after`'s; `None` when
/// nothing changes.
pub fn follow(
    config: &TopicConfig,
    before: &TopicConfig,
    after: &TopicConfig,
) -> Option<TopicConfig> {
    let old = before.entries();
    let new = after.entries();
    let mut followed = config.clone();
    let mut changed = false;
    for (name, value) in config.entries() {
        let was_default = old.iter().any(|(n, v)| *n == name && *v == value);
        let Some((_, target)) = new.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        if was_default && *target != value && DYNAMIC.iter().any(|(_, t)| *t == name) {
            changed |= followed.set(name, target).is_ok();
        }
    }
    changed.then_some(followed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> TopicConfig {
        let mut config = TopicConfig::default();
        for (k, v) in pairs {
            config.set(k, v).unwrap();
        }
        config
    }

    #[test]
    fn only_values_equal_to_the_old_default_follow() {
        let before = TopicConfig::default();
        let after = with(&[("retention.ms", "1000")]);
        let follows = follow(&TopicConfig::default(), &before, &after).unwrap();
        assert_eq!(follows.retention_ms, Some(1000));
        let own = with(&[("retention.ms", "5000")]);
        assert!(follow(&own, &before, &after).is_none());
    }

    #[test]
    fn defaults_are_validated_persisted_and_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let defaults = BrokerDefaults::open(dir.path(), TopicConfig::default()).unwrap();
        assert!(matches!(
            defaults.alter(&[("num.io.threads".into(), Some("4".into()))], false),
            Err(DefaultsError::NotDynamic(_))
        ));
        assert!(matches!(
            defaults.alter(&[("log.segment.bytes".into(), Some("10".into()))], false),
            Err(DefaultsError::Invalid(_))
        ));
        defaults
            .alter(&[("log.retention.ms".into(), Some("1000".into()))], true)
            .unwrap();
        assert!(defaults.dynamic().is_empty(), "validate only");
        defaults
            .alter(&[("log.retention.ms".into(), Some("1000".into()))], false)
            .unwrap();
        drop(defaults);
        let reopened = BrokerDefaults::open(dir.path(), TopicConfig::default()).unwrap();
        assert_eq!(
            reopened.dynamic(),
            vec![("log.retention.ms", "1000".to_string())]
        );
        assert_eq!(reopened.effective().retention_ms, Some(1000));
        fs::write(dir.path().join(FILE), "garbage\n").unwrap();
        assert!(BrokerDefaults::open(dir.path(), TopicConfig::default()).is_err());
    }
}
