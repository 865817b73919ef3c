//! Kafka 4.4's topic configs, declared once ([`KAFKA`]): each name with its type, Kafka's
//! default, and what lograil does with it. CreateTopics, AlterConfigs, IncrementalAlterConfigs
//! and DescribeConfigs go through [`set`], [`reset`], [`value`] and [`describe`].
//!
//! Three kinds of config:
//!
//! - [`Handling::Storage`]: log-core's [`TopicConfig`] acts on it; its check, its default (the
//!   broker's, from the flags and dynamic broker defaults) and its stored value are log-core's.
//!   A name log-core's `TopicConfig` interprets is always log-core's, whatever its row says.
//! - [`Handling::Kept`]: lograil does not act on it, and no value Kafka accepts would change
//!   anything on one node without replication or tiered storage (the row says why). Values are
//!   checked as Kafka checks them (its ranges, types and messages), kept with the topic in
//!   [`TopicConfig::extra`] (so they survive a restart) and described as set; a topic without
//!   one describes Kafka's default.
//! - [`Handling::Only`]: as `Kept`, but lograil honours only some values; any other is refused
//!   with what lograil lacks (`remote.storage.enable=true`: no tiered storage).
//!
//! Why `extra` and not a field per config: lograil never reads these values, so typed fields
//! would be code that only round-trips text; `extra` already persists the broker's own topic
//! configs (`lograil.*`) in the topic file and log-core keeps whatever name it does not
//! interpret there.
//!
//! lograil's own topic configs (`lograil.backlog.*`, see `backlog.rs`) are set through here too.

use log_core::{ConfigError, TopicConfig};

/// A config's type, as Kafka declares it (`ConfigDef.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Boolean,
    String,
    Int,
    Long,
    Double,
    List,
}

/// Kafka's check of a value (its `ConfigDef` validators), for the configs lograil keeps.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// Any value of the type.
    Any,
    /// Between the two, both included (`ConfigDef.Range`).
    Range(i64, i64),
    /// The literal `*` or `partition:broker` items (`ThrottledReplicaListValidator`).
    ThrottledReplicas,
}

/// What lograil does with a config.
#[derive(Clone, Copy, Debug)]
pub enum Handling {
    /// log-core's `TopicConfig` acts on it.
    Storage,
    /// Checked, kept and described; not acted on, because of `why`.
    Kept { check: Check, why: &'static str },
    /// Checked, kept and described; values `honours` refuses are refused, the refusal naming
    /// `only` (what lograil takes, and what it lacks for the rest).
    Only {
        check: Check,
        honours: fn(&str) -> bool,
        only: &'static str,
    },
}

/// One of Kafka's topic configs.
#[derive(Clone, Copy, Debug)]
pub struct Def {
    pub name: &'static str,
    pub kind: Type,
    /// Kafka 4.4's default, as its DescribeConfigs gives it.
    pub default: &'static str,
    pub handling: Handling,
}

const LONG_MAX: i64 = i64::MAX;
const INT_MAX: i64 = i32::MAX as i64;

const fn storage(name: &'static str, kind: Type, default: &'static str) -> Def {
    Def {
        name,
        kind,
        default,
        handling: Handling::Storage,
    }
}

const fn kept(
    name: &'static str,
    kind: Type,
    default: &'static str,
    check: Check,
    why: &'static str,
) -> Def {
    Def {
        name,
        kind,
        default,
        handling: Handling::Kept { check, why },
    }
}

const fn only(
    name: &'static str,
    kind: Type,
    default: &'static str,
    check: Check,
    honours: fn(&str) -> bool,
    only: &'static str,
) -> Def {
    Def {
        name,
        kind,
        default,
        handling: Handling::Only {
            check,
            honours,
            only,
        },
    }
}

const NO_REMOTE: &str = "it applies only with tiered storage (remote.storage.enable=true), \
                         which lograil does not have";
const NO_REPLICATION: &str = "one replica, no replication to throttle";

/// Kafka 4.4.0's topic configs (`LogConfig`, as `kafka-configs --describe --all` lists them for
/// a topic), in Kafka's order.
pub const KAFKA: &[Def] = &[
    storage("cleanup.policy", Type::List, "delete"),
    storage("compression.gzip.level", Type::Int, "-1"),
    storage("compression.lz4.level", Type::Int, "9"),
    storage("compression.type", Type::String, "producer"),
    storage("compression.zstd.level", Type::Int, "3"),
    storage("delete.retention.ms", Type::Long, "86400000"),
    storage(
        "errors.deadletterqueue.group.enable",
        Type::Boolean,
        "false",
    ),
    kept(
        "file.delete.delay.ms",
        Type::Long,
        "60000",
        Check::Range(0, LONG_MAX),
        "lograil removes a deleted segment's files at once",
    ),
    storage("flush.messages", Type::Long, "9223372036854775807"),
    storage("flush.ms", Type::Long, "9223372036854775807"),
    kept(
        "follower.replication.throttled.replicas",
        Type::List,
        "",
        Check::ThrottledReplicas,
        NO_REPLICATION,
    ),
    storage("index.interval.bytes", Type::Int, "4096"),
    kept(
        "leader.replication.throttled.replicas",
        Type::List,
        "",
        Check::ThrottledReplicas,
        NO_REPLICATION,
    ),
    kept(
        "local.retention.bytes",
        Type::Long,
        "-2",
        Check::Range(-2, LONG_MAX),
        NO_REMOTE,
    ),
    kept(
        "local.retention.ms",
        Type::Long,
        "-2",
        Check::Range(-2, LONG_MAX),
        NO_REMOTE,
    ),
    storage("max.compaction.lag.ms", Type::Long, "9223372036854775807"),
    only(
        "max.decompressed.message.bytes",
        Type::Int,
        "2147483639",
        Check::Range(1, 2_147_483_639),
        |v| v == "2147483639",
        "2147483639, Kafka's default: lograil does not check each record's decompressed size \
         (it bounds a compressed batch's records at 8 x max.message.bytes)",
    ),
    storage("max.message.bytes", Type::Int, "1048588"),
    storage("message.timestamp.after.max.ms", Type::Long, "3600000"),
    storage(
        "message.timestamp.before.max.ms",
        Type::Long,
        "9223372036854775807",
    ),
    storage("message.timestamp.type", Type::String, "CreateTime"),
    storage("min.cleanable.dirty.ratio", Type::Double, "0.5"),
    storage("min.compaction.lag.ms", Type::Long, "0"),
    kept(
        "min.insync.replicas",
        Type::Int,
        "1",
        Check::Range(1, INT_MAX),
        "one replica: a write with acks=all is acknowledged once the broker has it (Kafka \
         refuses such writes with NOT_ENOUGH_REPLICAS when this exceeds the replicas in sync)",
    ),
    kept(
        "preallocate",
        Type::Boolean,
        "false",
        Check::Any,
        "lograil grows a segment file as it writes it",
    ),
    kept(
        "remote.copy.lag.bytes",
        Type::Long,
        "-1",
        Check::Range(-1, LONG_MAX),
        NO_REMOTE,
    ),
    kept(
        "remote.copy.lag.ms",
        Type::Long,
        "0",
        Check::Range(-1, LONG_MAX),
        NO_REMOTE,
    ),
    kept(
        "remote.log.copy.disable",
        Type::Boolean,
        "false",
        Check::Any,
        NO_REMOTE,
    ),
    kept(
        "remote.log.delete.on.disable",
        Type::Boolean,
        "false",
        Check::Any,
        NO_REMOTE,
    ),
    only(
        "remote.storage.enable",
        Type::Boolean,
        "false",
        Check::Any,
        |v| v.eq_ignore_ascii_case("false"),
        "false: lograil has no tiered storage",
    ),
    storage("retention.bytes", Type::Long, "-1"),
    storage("retention.ms", Type::Long, "604800000"),
    storage("segment.bytes", Type::Int, "1073741824"),
    kept(
        "segment.index.bytes",
        Type::Int,
        "10485760",
        Check::Range(4, INT_MAX),
        "lograil keeps the active segment's index in memory and writes it whole at the roll: \
         there is no preallocated index file to size, and segments roll on segment.bytes and \
         segment.ms only",
    ),
    only(
        "segment.jitter.ms",
        Type::Long,
        "0",
        Check::Range(0, LONG_MAX),
        |v| v.parse::<i64>() == Ok(0),
        "0: lograil rolls a segment at segment.ms, without jitter",
    ),
    storage("segment.ms", Type::Long, "604800000"),
    kept(
        "unclean.leader.election.enable",
        Type::Boolean,
        "false",
        Check::Any,
        "one replica, always the leader: there is no other to elect",
    ),
];

/// The row of a Kafka topic config.
pub fn def(name: &str) -> Option<&'static Def> {
    KAFKA.iter().find(|d| d.name == name)
}

/// Whether log-core's `TopicConfig` interprets `name` (its value and check are log-core's).
fn in_storage(name: &str) -> bool {
    TopicConfig::default()
        .entries()
        .iter()
        .any(|(known, _)| *known == name)
}

/// What a config of [`Handling::Only`] honours, and the refusal's text.
type Honoured = (fn(&str) -> bool, &'static str);

/// The check and the honoured values of a config lograil keeps without acting on it; `None`
/// for one log-core interprets.
fn kept_rule(name: &str) -> Option<(&'static Def, Check, Option<Honoured>)> {
    if in_storage(name) {
        return None;
    }
    let def = def(name)?;
    match def.handling {
        Handling::Storage => None,
        Handling::Kept { check, .. } => Some((def, check, None)),
        Handling::Only {
            check,
            honours,
            only,
        } => Some((def, check, Some((honours, only)))),
    }
}

/// Sets one topic config from its text form: a CreateTopics config, an AlterConfigs value, an
/// IncrementalAlterConfigs SET. An unknown name, a value Kafka would refuse, and one lograil
/// cannot honour are errors, and `config` is then unchanged.
pub fn set(config: &mut TopicConfig, name: &str, value: &str) -> Result<(), ConfigError> {
    // lograil's own topic configs (the backlog bound); names under `lograil.` that are not
    // among them are unknown.
    if name.starts_with(log_core::EXTRA_PREFIX) {
        return crate::backlog::set(config, name, value);
    }
    let Some((def, check, honoured)) = kept_rule(name) else {
        return config.set(name, value);
    };
    let value = value.trim();
    validate(def, check, value)?;
    if let Some((honours, only)) = honoured {
        if !honours(value) {
            return Err(ConfigError::Unsupported {
                name: name.into(),
                value: value.into(),
                supported: only,
            });
        }
    }
    config.extra.insert(name.to_string(), value.to_string());
    Ok(())
}

/// Puts one topic config back to its default (an IncrementalAlterConfigs DELETE): `defaults`'
/// value for one log-core interprets, Kafka's default (nothing kept) for the others; a name
/// lograil does not know has nothing to delete.
pub fn reset(
    config: &mut TopicConfig,
    defaults: &TopicConfig,
    name: &str,
) -> Result<(), ConfigError> {
    if crate::backlog::is_backlog_config(name) {
        crate::backlog::reset(config, name);
        return Ok(());
    }
    if kept_rule(name).is_some() {
        config.extra.remove(name);
        return Ok(());
    }
    match defaults.entries().into_iter().find(|(n, _)| *n == name) {
        Some((_, value)) => config.set(name, &value),
        // As in Kafka, deleting a config that is not set is no error, whatever its name
        // (MirrorMaker 2's topic config sync deletes each of the source's configs at their
        // default, names of newer Kafka versions among them).
        None => Ok(()),
    }
}

/// A Kafka topic config's value in `config` (what DescribeConfigs shows), or `None` for a name
/// that is neither Kafka's nor log-core's.
pub fn value(config: &TopicConfig, name: &str) -> Option<String> {
    if let Some((_, value)) = config.entries().into_iter().find(|(n, _)| *n == name) {
        return Some(value);
    }
    let (def, ..) = kept_rule(name)?;
    Some(
        config
            .extra
            .get(name)
            .cloned()
            .unwrap_or_else(|| def.default.to_string()),
    )
}

/// Topic configs log-core acts on that are not Kafka's, with their types: `write.caching`
/// (Redpanda's name: acks=all acknowledged from the page cache).
pub const LOGRAIL_STORAGE: &[(&str, Type)] = &[(log_core::WRITE_CACHING, Type::Boolean)];

/// The type of a topic config, when the table (or [`LOGRAIL_STORAGE`]) knows it.
pub fn kind(name: &str) -> Option<Type> {
    def(name).map(|d| d.kind).or_else(|| {
        LOGRAIL_STORAGE
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
    })
}

/// What lograil says of a Kafka topic config it keeps without acting on or honours in part
/// (DescribeConfigs' documentation, the console's note); `None` for one it acts on.
pub fn documentation(name: &str) -> Option<String> {
    match def(name)?.handling {
        Handling::Kept { why, .. } => Some(format!("Kept but not acted on by lograil: {why}.")),
        Handling::Only { only, .. } => Some(format!("lograil honours only {only}.")),
        Handling::Storage => None,
    }
}

/// One config as DescribeConfigs (and CreateTopics' answer) lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub name: &'static str,
    pub value: String,
    /// Set on the topic (else a default: the broker's for a config log-core interprets,
    /// Kafka's for the others).
    pub overridden: bool,
    pub kind: Option<Type>,
}

/// Every Kafka topic config of a topic with `config`, new topics getting `defaults`: the ones
/// log-core interprets (set when their value differs from the default: lograil keeps a
/// topic's whole config), then the ones lograil keeps (set when the topic has one). lograil's
/// own (`lograil.*`) are not among them.
pub fn describe(config: &TopicConfig, defaults: &TopicConfig) -> Vec<Described> {
    let defaults = defaults.entries();
    let mut described: Vec<Described> = config
        .entries()
        .into_iter()
        .map(|(name, value)| Described {
            name,
            overridden: !defaults.iter().any(|(n, v)| *n == name && *v == value),
            value,
            kind: kind(name),
        })
        .collect();
    for def in KAFKA {
        if kept_rule(def.name).is_none() {
            continue;
        }
        let set = config.extra.get(def.name);
        described.push(Described {
            name: def.name,
            value: set.cloned().unwrap_or_else(|| def.default.to_string()),
            overridden: set.is_some(),
            kind: Some(def.kind),
        });
    }
    described
}

/// Logs a refused topic config value, once per refusal: the topic, the config, the value
/// (`None`: null) and why.
pub fn log_refusal(topic: &str, name: &str, value: Option<&str>, reason: &dyn std::fmt::Display) {
    tracing::warn!(
        topic,
        config = name,
        value = value.unwrap_or("null"),
        %reason,
        "topic config refused"
    );
}

/// Kafka's check of `value` (trimmed) for a config of `def`'s type and `check`, with Kafka's
/// messages (`ConfigDef.parseType`, its validators, `ConfigException`).
fn validate(def: &Def, check: Check, value: &str) -> Result<(), ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        name: def.name.into(),
        value: value.into(),
        reason,
    };
    let number = match def.kind {
        Type::Boolean => {
            return match value.to_ascii_lowercase().as_str() {
                "true" | "false" => Ok(()),
                _ => Err(invalid("Expected value to be either true or false".into())),
            }
        }
        Type::Int => value
            .parse::<i32>()
            .map(i64::from)
            .map_err(|_| invalid("Not a number of type INT".into()))?,
        Type::Long => value
            .parse::<i64>()
            .map_err(|_| invalid("Not a number of type LONG".into()))?,
        Type::List => return check_list(def, check, value),
        Type::String | Type::Double => return Ok(()),
    };
    match check {
        Check::Range(min, _) if number < min => {
            Err(invalid(format!("Value must be at least {min}")))
        }
        Check::Range(_, max) if number > max => {
            Err(invalid(format!("Value must be no more than {max}")))
        }
        _ => Ok(()),
    }
}

/// A LIST config's check: Kafka splits at commas (blanks around them dropped) and, for the
/// throttled-replica lists, takes `*` alone or `partition:broker` items (empty ones too).
fn check_list(def: &Def, check: Check, value: &str) -> Result<(), ConfigError> {
    let Check::ThrottledReplicas = check else {
        return Ok(());
    };
    let items: Vec<&str> = if value.is_empty() {
        Vec::new()
    } else {
        value.split(',').map(str::trim).collect()
    };
    let replica = |item: &str| {
        item.is_empty()
            || item.split_once(':').is_some_and(|(p, b)| {
                [p, b]
                    .iter()
                    .all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
            })
    };
    if items == ["*"] || items.iter().all(|i| replica(i)) {
        return Ok(());
    }
    Err(ConfigError::Invalid {
        name: def.name.into(),
        value: format!("[{}]", items.join(", ")),
        reason: format!(
            "{} must be the literal '*' or a list of replicas in the following format: \
             [partitionId]:[brokerId],[partitionId]:[brokerId],...",
            def.name
        ),
    })
}

#[cfg(test)]
mod tests;
