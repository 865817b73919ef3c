use super::*;

/// Kafka 4.4.0's topic configs, as `kafka-configs --describe --all` lists them for a new
/// topic of a one-broker cluster (with their types, from its DescribeConfigs).
const KAFKA_4_4: &[(&str, Type, &str)] = &[
    ("cleanup.policy", Type::List, "delete"),
    ("compression.gzip.level", Type::Int, "-1"),
    ("compression.lz4.level", Type::Int, "9"),
    ("compression.type", Type::String, "producer"),
    ("compression.zstd.level", Type::Int, "3"),
    ("delete.retention.ms", Type::Long, "86400000"),
    (
        "errors.deadletterqueue.group.enable",
        Type::Boolean,
        "false",
    ),
    ("file.delete.delay.ms", Type::Long, "60000"),
    ("flush.messages", Type::Long, "9223372036854775807"),
    ("flush.ms", Type::Long, "9223372036854775807"),
    ("follower.replication.throttled.replicas", Type::List, ""),
    ("index.interval.bytes", Type::Int, "4096"),
    ("leader.replication.throttled.replicas", Type::List, ""),
    ("local.retention.bytes", Type::Long, "-2"),
    ("local.retention.ms", Type::Long, "-2"),
    ("max.compaction.lag.ms", Type::Long, "9223372036854775807"),
    ("max.decompressed.message.bytes", Type::Int, "2147483639"),
    ("max.message.bytes", Type::Int, "1048588"),
    ("message.timestamp.after.max.ms", Type::Long, "3600000"),
    (
        "message.timestamp.before.max.ms",
        Type::Long,
        "9223372036854775807",
    ),
    ("message.timestamp.type", Type::String, "CreateTime"),
    ("min.cleanable.dirty.ratio", Type::Double, "0.5"),
    ("min.compaction.lag.ms", Type::Long, "0"),
    ("min.insync.replicas", Type::Int, "1"),
    ("preallocate", Type::Boolean, "false"),
    ("remote.copy.lag.bytes", Type::Long, "-1"),
    ("remote.copy.lag.ms", Type::Long, "0"),
    ("remote.log.copy.disable", Type::Boolean, "false"),
    ("remote.log.delete.on.disable", Type::Boolean, "false"),
    ("remote.storage.enable", Type::Boolean, "false"),
    ("retention.bytes", Type::Long, "-1"),
    ("retention.ms", Type::Long, "604800000"),
    ("segment.bytes", Type::Int, "1073741824"),
    ("segment.index.bytes", Type::Int, "10485760"),
    ("segment.jitter.ms", Type::Long, "0"),
    ("segment.ms", Type::Long, "604800000"),
    ("unclean.leader.election.enable", Type::Boolean, "false"),
];

#[test]
fn the_table_is_kafka_4_4s_names_types_and_defaults() {
    let table: Vec<(&str, Type, &str)> =
        KAFKA.iter().map(|d| (d.name, d.kind, d.default)).collect();
    assert_eq!(table, KAFKA_4_4);
}

#[test]
fn log_core_and_the_table_agree_on_what_is_log_cores() {
    let lograil = TopicConfig::default();
    for (name, value) in lograil.entries() {
        if LOGRAIL_STORAGE.iter().any(|(n, _)| *n == name) {
            assert!(def(name).is_none(), "{name} is Kafka's");
            continue;
        }
        let def = def(name).unwrap_or_else(|| panic!("{name} has no row"));
        assert!(
            matches!(def.handling, Handling::Storage),
            "{name} is log-core's: its row must say Storage"
        );
        // lograil's defaults are Kafka's, but for flush.ms: a second, not never.
        let expected = match name {
            "flush.ms" => "1000",
            _ => def.default,
        };
        assert_eq!(value, expected, "{name}");
    }
    for def in KAFKA {
        if matches!(def.handling, Handling::Storage) {
            assert!(in_storage(def.name), "{} is nobody's", def.name);
        }
    }
}

#[test]
fn every_kafka_config_is_described_with_kafkas_default() {
    let defaults = TopicConfig::default();
    let described = describe(&defaults, &defaults);
    for (name, kind, default) in KAFKA_4_4 {
        let d = described
            .iter()
            .find(|d| d.name == *name)
            .unwrap_or_else(|| panic!("{name} is not described"));
        assert_eq!(d.kind, Some(*kind), "{name}");
        assert!(!d.overridden, "{name}");
        if *name != "flush.ms" {
            assert_eq!(d.value, *default, "{name}");
        }
    }
}

#[test]
fn kept_configs_are_set_kept_and_reset() {
    let defaults = TopicConfig::default();
    let mut config = defaults.clone();
    for (name, value) in [
        ("min.insync.replicas", "2"),
        ("preallocate", "TRUE"),
        ("unclean.leader.election.enable", "true"),
        ("file.delete.delay.ms", "0"),
        ("segment.index.bytes", "4"),
        ("leader.replication.throttled.replicas", "0:1, 1:1"),
        ("follower.replication.throttled.replicas", "*"),
        ("local.retention.ms", "-1"),
        ("local.retention.bytes", "1000"),
        ("remote.copy.lag.ms", "-1"),
        ("remote.copy.lag.bytes", "100"),
        ("remote.log.copy.disable", "true"),
        ("remote.log.delete.on.disable", "true"),
        ("remote.storage.enable", "false"),
        ("max.decompressed.message.bytes", "2147483639"),
        ("segment.jitter.ms", "0"),
    ] {
        set(&mut config, name, value).unwrap_or_else(|e| panic!("{name}={value}: {e}"));
        assert_eq!(
            super::value(&config, name).as_deref(),
            Some(value.trim()),
            "{name}"
        );
        let d = describe(&config, &defaults);
        let entry = d.iter().find(|d| d.name == name).unwrap();
        assert!(entry.overridden, "{name}");
    }
    // Kept with the topic: through its file and back.
    let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
    assert_eq!(back, config);
    assert_eq!(describe(&back, &defaults), describe(&config, &defaults));
    for def in KAFKA.iter().filter(|d| kept_rule(d.name).is_some()) {
        reset(&mut config, &defaults, def.name).unwrap();
    }
    assert_eq!(config, defaults, "reset puts every default back");
    assert!(describe(&config, &defaults).iter().all(|d| !d.overridden));
}

#[test]
fn values_kafka_refuses_are_refused_with_kafkas_messages() {
    for (name, value, message) in [
        ("segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"),
        ("segment.index.bytes", "abc", "Invalid value abc for configuration segment.index.bytes: Not a number of type INT"),
        ("segment.index.bytes", "2147483648", "Invalid value 2147483648 for configuration segment.index.bytes: Not a number of type INT"),
        ("segment.jitter.ms", "-1", "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0"),
        ("segment.jitter.ms", "x", "Invalid value x for configuration segment.jitter.ms: Not a number of type LONG"),
        ("file.delete.delay.ms", "-1", "Invalid value -1 for configuration file.delete.delay.ms: Value must be at least 0"),
        ("preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
        ("unclean.leader.election.enable", "1", "Invalid value 1 for configuration unclean.leader.election.enable: Expected value to be either true or false"),
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        ("leader.replication.throttled.replicas", "0:1:2", "Invalid value [0:1:2] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
        ("follower.replication.throttled.replicas", "*,0:1", "Invalid value [*, 0:1] for configuration follower.replication.throttled.replicas: follower.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
        ("leader.replication.throttled.replicas", "-1:1", "Invalid value [-1:1] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
        ("remote.storage.enable", "maybe", "Invalid value maybe for configuration remote.storage.enable: Expected value to be either true or false"),
        ("local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
        ("local.retention.bytes", "-3", "Invalid value -3 for configuration local.retention.bytes: Value must be at least -2"),
        ("remote.copy.lag.ms", "-2", "Invalid value -2 for configuration remote.copy.lag.ms: Value must be at least -1"),
        ("remote.copy.lag.bytes", "-2", "Invalid value -2 for configuration remote.copy.lag.bytes: Value must be at least -1"),
        ("max.decompressed.message.bytes", "0", "Invalid value 0 for configuration max.decompressed.message.bytes: Value must be at least 1"),
        ("max.decompressed.message.bytes", "2147483640", "Invalid value 2147483640 for configuration max.decompressed.message.bytes: Value must be no more than 2147483639"),
        ("message.timestamp.before.max.ms", "-1", "Invalid value -1 for configuration message.timestamp.before.max.ms: Value must be at least 0"),
        ("message.timestamp.after.max.ms", "-1", "Invalid value -1 for configuration message.timestamp.after.max.ms: Value must be at least 0"),
    ] {
        let mut config = TopicConfig::default();
        let error = set(&mut config, name, value).unwrap_err();
        assert!(matches!(error, ConfigError::Invalid { .. }), "{name}={value}");
        assert_eq!(error.to_string(), message);
        assert_eq!(config, TopicConfig::default(), "refused values change nothing");
    }
    for accepted in ["0:1,,1:2", ",", "0:1,", "", " 0:1 ", "0:1,0:1"] {
        let mut config = TopicConfig::default();
        set(
            &mut config,
            "leader.replication.throttled.replicas",
            accepted,
        )
        .unwrap_or_else(|e| panic!("{accepted:?}: {e}"));
    }
}

#[test]
fn values_lograil_cannot_honour_are_refused_with_what_it_lacks() {
    for (name, value, lacks) in [
        ("remote.storage.enable", "true", "no tiered storage"),
        (
            "max.decompressed.message.bytes",
            "1000",
            "decompressed size",
        ),
        ("segment.jitter.ms", "5000", "without jitter"),
    ] {
        let mut config = TopicConfig::default();
        let error = set(&mut config, name, value).unwrap_err();
        assert!(
            matches!(error, ConfigError::Unsupported { .. }),
            "{name}={value}"
        );
        let message = error.to_string();
        assert!(message.contains(lacks), "{message}");
        assert!(
            message.starts_with(&format!("{name}={value} ")),
            "{message}"
        );
        assert_eq!(config, TopicConfig::default());
    }
    assert!(matches!(
        set(
            &mut TopicConfig::default(),
            "message.downconversion.enable",
            "true"
        ),
        Err(ConfigError::Unknown { .. })
    ));
}
