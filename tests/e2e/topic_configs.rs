//! Kafka 4.4's topic configs against the real binary: librdkafka's AdminClient (CreateTopics,
//! DescribeConfigs, AlterConfigs) and IncrementalAlterConfigs on the wire. Every name is
//! described with Kafka's default, each one lograil keeps without acting on is set, described,
//! kept across a restart and reset; values lograil cannot honour are refused with what it
//! lacks, and logged; a topic that exists is "already exists" whatever configs its re-create
//! asks for.

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::*;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigSource, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;

use test_support::kafka::{alter_configs, create_topic_answer, text, TOPIC_RESOURCE};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const INVALID_CONFIG: i16 = 40;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;

/// Kafka 4.4.0's topic configs and defaults, as `kafka-configs --describe --all` lists them
/// for a new topic of a one-broker Kafka (but `flush.ms`: Kafka never fsyncs by time, lograil
/// within a second by default), and lograil's own `write.caching`.
const KAFKA_DEFAULTS: &[(&str, &str)] = &[
    ("cleanup.policy", "delete"),
    ("compression.gzip.level", "-1"),
    ("compression.lz4.level", "9"),
    ("compression.type", "producer"),
    ("compression.zstd.level", "3"),
    ("delete.retention.ms", "86400000"),
    ("errors.deadletterqueue.group.enable", "false"),
    ("file.delete.delay.ms", "60000"),
    ("flush.messages", "9223372036854775807"),
    ("flush.ms", "1000"),
    ("follower.replication.throttled.replicas", ""),
    ("index.interval.bytes", "4096"),
    ("leader.replication.throttled.replicas", ""),
    ("local.retention.bytes", "-2"),
    ("local.retention.ms", "-2"),
    ("max.compaction.lag.ms", "9223372036854775807"),
    ("max.decompressed.message.bytes", "2147483639"),
    ("max.message.bytes", "1048588"),
    ("message.timestamp.after.max.ms", "3600000"),
    ("message.timestamp.before.max.ms", "9223372036854775807"),
    ("message.timestamp.type", "CreateTime"),
    ("min.cleanable.dirty.ratio", "0.5"),
    ("min.compaction.lag.ms", "0"),
    ("min.insync.replicas", "1"),
    ("preallocate", "false"),
    ("remote.copy.lag.bytes", "-1"),
    ("remote.copy.lag.ms", "0"),
    ("remote.log.copy.disable", "false"),
    ("remote.log.delete.on.disable", "false"),
    ("remote.storage.enable", "false"),
    ("retention.bytes", "-1"),
    ("retention.ms", "604800000"),
    ("segment.bytes", "1073741824"),
    ("segment.index.bytes", "10485760"),
    ("segment.jitter.ms", "0"),
    ("segment.ms", "604800000"),
    ("unclean.leader.election.enable", "false"),
    ("write.caching", "false"),
];

/// The configs lograil keeps without acting on, each with a value other than Kafka's default
/// that Kafka accepts.
const KEPT: &[(&str, &str)] = &[
    ("file.delete.delay.ms", "0"),
    ("follower.replication.throttled.replicas", "*"),
    ("leader.replication.throttled.replicas", "0:1,1:1"),
    ("local.retention.bytes", "1048576"),
    ("local.retention.ms", "-1"),
    ("message.timestamp.after.max.ms", "60000"),
    ("message.timestamp.before.max.ms", "86400000"),
    ("min.insync.replicas", "2"),
    ("preallocate", "true"),
    ("remote.copy.lag.bytes", "100"),
    ("remote.copy.lag.ms", "-1"),
    ("remote.log.copy.disable", "true"),
    ("remote.log.delete.on.disable", "true"),
    ("segment.index.bytes", "4096"),
    ("unclean.leader.election.enable", "true"),
];

fn default_of(name: &str) -> &'static str {
    KAFKA_DEFAULTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn admin(addr: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", addr)
        .create()
        .unwrap()
}

fn options() -> AdminOptions {
    AdminOptions::new().request_timeout(Some(Duration::from_secs(30)))
}

/// librdkafka's DescribeConfigs of one topic: name -> (value, source).
fn described(
    rt: &tokio::runtime::Runtime,
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
) -> HashMap<String, (String, ConfigSource)> {
    let mut results = rt
        .block_on(admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options()))
        .unwrap();
    let resource = results.remove(0).unwrap();
    resource
        .entries
        .into_iter()
        .map(|e| (e.name, (e.value.unwrap_or_default(), e.source)))
        .collect()
}

/// librdkafka's CreateTopics of one topic (1 partition) with `configs`, `validate_only` or not.
fn rdkafka_create(
    rt: &tokio::runtime::Runtime,
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> Result<(), RDKafkaErrorCode> {
    let mut new = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = rt
        .block_on(admin.create_topics([&new], &options().validate_only(validate_only)))
        .unwrap();
    results[0].clone().map(|_| ()).map_err(|(_, code)| code)
}

/// Lines of the broker's log that say a config of `topic` was refused, for `name=value`.
fn refusals_logged(broker: &TestBroker, topic: &str, name: &str, value: &str) -> usize {
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    log.lines()
        .filter(|l| l.contains("topic config refused"))
        .filter(|l| {
            l.contains(&format!("topic={topic} ")) || l.contains(&format!("topic=\"{topic}\""))
        })
        .filter(|l| {
            l.contains(&format!("config={name} ")) || l.contains(&format!("config=\"{name}\""))
        })
        .filter(|l| {
            l.contains(&format!("value={value}")) || l.contains(&format!("value=\"{value}\""))
        })
        .count()
}

#[test]
fn every_kafka_topic_config_is_described_with_its_default_set_kept_and_reset() {
    let rt = runtime();
    let mut broker = TestBroker::start_temp(&[]);
    let client = admin(&broker.addr);
    assert_eq!(rdkafka_create(&rt, &client, "all", &[], false), Ok(()));

    let configs = described(&rt, &client, "all");
    for (name, default) in KAFKA_DEFAULTS {
        let (value, source) = configs
            .get(*name)
            .unwrap_or_else(|| panic!("{name} is not described"));
        assert_eq!(value, default, "{name}");
        assert_eq!(*source, ConfigSource::Default, "{name}");
    }

    // Each one lograil keeps is set (IncrementalAlterConfigs SET), described as the topic's.
    for (name, value) in KEPT {
        let (code, message) = alter_configs(
            &broker.addr,
            TOPIC_RESOURCE,
            "all",
            &[(name, SET, Some(value))],
            false,
        );
        assert_eq!(code, 0, "{name}={value}: {message:?}");
    }
    let configs = described(&rt, &client, "all");
    for (name, value) in KEPT {
        assert_eq!(
            configs[*name],
            (value.to_string(), ConfigSource::DynamicTopic),
            "{name}"
        );
    }
    // Created with them too, librdkafka's CreateTopics.
    assert_eq!(rdkafka_create(&rt, &client, "created", KEPT, false), Ok(()));
    let created = described(&rt, &client, "created");
    for (name, value) in KEPT {
        assert_eq!(created[*name].0, *value, "{name}");
    }

    // Kept with the topic across a restart.
    broker.stop();
    broker.restart();
    let client = admin(&broker.addr);
    let configs = described(&rt, &client, "all");
    for (name, value) in KEPT {
        assert_eq!(
            configs[*name],
            (value.to_string(), ConfigSource::DynamicTopic),
            "{name} after the restart"
        );
    }

    // DELETE puts Kafka's default back.
    for (name, _) in KEPT {
        let (code, message) = alter_configs(
            &broker.addr,
            TOPIC_RESOURCE,
            "all",
            &[(name, DELETE, None)],
            false,
        );
        assert_eq!(code, 0, "{name}: {message:?}");
    }
    let configs = described(&rt, &client, "all");
    for (name, default) in KAFKA_DEFAULTS {
        assert_eq!(
            configs[*name],
            (default.to_string(), ConfigSource::Default),
            "{name} reset"
        );
    }

    // APPEND to a throttled-replica list starts from the topic's value.
    let append = |items| {
        alter_configs(
            &broker.addr,
            TOPIC_RESOURCE,
            "all",
            &[("leader.replication.throttled.replicas", APPEND, Some(items))],
            false,
        )
    };
    assert_eq!(append("0:1").0, 0);
    assert_eq!(append("1:1,0:1").0, 0);
    assert_eq!(
        described(&rt, &client, "all")["leader.replication.throttled.replicas"].0,
        "0:1,1:1"
    );

    // librdkafka's AlterConfigs replaces the whole set: what it does not name goes back.
    let alter = AlterConfig::new(ResourceSpecifier::Topic("created"))
        .set("preallocate", "true")
        .set("retention.ms", "3600000");
    let results = rt
        .block_on(client.alter_configs([&alter], &options()))
        .unwrap();
    assert!(results[0].is_ok(), "{:?}", results[0]);
    let created = described(&rt, &client, "created");
    assert_eq!(
        created["preallocate"],
        ("true".into(), ConfigSource::DynamicTopic)
    );
    assert_eq!(created["retention.ms"].0, "3600000");
    assert_eq!(
        created["min.insync.replicas"],
        ("1".into(), ConfigSource::Default)
    );

    // Types (DescribeConfigs v3+) and, asked for, why lograil does not act on a config.
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(text("all"))
            .with_configuration_keys(None)])
        .with_include_documentation(true);
    let response: DescribeConfigsResponse = call(
        &mut connect(&broker.addr),
        ApiKey::DescribeConfigs,
        4,
        &request,
    );
    let entry = |name: &str| {
        response.results[0]
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    // Kafka's ConfigType codes: BOOLEAN 1, STRING 2, INT 3, LONG 5, LIST 7.
    for (name, code) in [
        ("preallocate", 1),
        ("compression.type", 2),
        ("segment.index.bytes", 3),
        ("retention.ms", 5),
        ("leader.replication.throttled.replicas", 7),
    ] {
        assert_eq!(entry(name).config_type, code, "{name}");
    }
    let doc = entry("remote.log.copy.disable").documentation.unwrap();
    assert!(doc.contains("tiered storage"), "{doc}");
    assert_eq!(entry("retention.ms").documentation, None);
}

#[test]
fn values_lograil_cannot_honour_or_kafka_refuses_are_refused_with_the_reason_and_logged() {
    let rt = runtime();
    let broker = TestBroker::start_temp(&[]);
    let client = admin(&broker.addr);
    assert_eq!(rdkafka_create(&rt, &client, "t", &[], false), Ok(()));

    // Values lograil cannot honour: the reason names what it lacks.
    for (name, value, lacks) in [
        ("remote.storage.enable", "true", "no tiered storage"),
        ("segment.jitter.ms", "1000", "without jitter"),
        (
            "max.decompressed.message.bytes",
            "65536",
            "decompressed size",
        ),
    ] {
        let (code, message) = alter_configs(
            &broker.addr,
            TOPIC_RESOURCE,
            "t",
            &[(name, SET, Some(value))],
            false,
        );
        let message = message.unwrap_or_default();
        assert_eq!(code, INVALID_CONFIG, "{name}={value}: {message}");
        assert!(message.contains(lacks), "{name}={value}: {message}");
        let (code, message) = create_topic_answer(&broker.addr, "refused", 1, &[(name, value)]);
        assert_eq!(code, INVALID_CONFIG, "{message}");
        assert!(message.contains(lacks), "{message}");
        assert_eq!(
            rdkafka_create(&rt, &client, "refused", &[(name, value)], true),
            Err(RDKafkaErrorCode::InvalidConfig),
            "{name}={value}, validate_only"
        );
        // AlterConfigs too (librdkafka's, whose per-resource error the rdkafka crate drops:
        // the answer is checked on the wire).
        let alter = AlterConfig::new(ResourceSpecifier::Topic("t")).set(name, value);
        rt.block_on(client.alter_configs([&alter], &options()))
            .unwrap();
        assert_eq!(described(&rt, &client, "t")[name].0, default_of(name));
        let request =
            AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(TOPIC_RESOURCE)
                .with_resource_name(text("t"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(text(name))
                    .with_value(Some(text(value)))])]);
        let response: AlterConfigsResponse = call(
            &mut connect(&broker.addr),
            ApiKey::AlterConfigs,
            2,
            &request,
        );
        let answer = &response.responses[0];
        assert_eq!(answer.error_code, INVALID_CONFIG, "{name}={value}");
        let message = answer.error_message.as_deref().unwrap_or_default();
        assert!(message.contains(lacks), "{message}");
    }
    // Values Kafka refuses, with Kafka's messages.
    for (name, value, message) in [
        (
            "segment.index.bytes",
            "3",
            "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4",
        ),
        (
            "preallocate",
            "yes",
            "Invalid value yes for configuration preallocate: Expected value to be either true or false",
        ),
        (
            "min.insync.replicas",
            "0",
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
    ] {
        let answer =
            alter_configs(&broker.addr, TOPIC_RESOURCE, "t", &[(name, SET, Some(value))], false);
        assert_eq!(answer, (INVALID_CONFIG, Some(message.to_string())));
    }
    let configs = described(&rt, &client, "t");
    assert_eq!(
        configs["remote.storage.enable"].0, "false",
        "nothing refused was kept"
    );
    assert_eq!(configs["segment.index.bytes"].0, "10485760");

    // Every refusal logged once, with the topic, the config, the value and why.
    for (topic, name, value, times) in [
        // IncrementalAlterConfigs, librdkafka's AlterConfigs, AlterConfigs on the wire.
        ("t", "remote.storage.enable", "true", 3),
        ("t", "preallocate", "yes", 1),
        ("t", "segment.index.bytes", "3", 1),
        // CreateTopics, once on the wire and once validate_only from librdkafka.
        ("refused", "remote.storage.enable", "true", 2),
        ("refused", "segment.jitter.ms", "1000", 2),
    ] {
        let found = refusals_logged(&broker, topic, name, value);
        assert_eq!(found, times, "{topic} {name}={value}");
    }
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("topic config refused") && l.contains("no tiered storage")),
        "the reason is logged"
    );
}

#[test]
fn re_creating_a_topic_answers_already_exists_before_its_configs_are_checked() {
    let rt = runtime();
    let broker = TestBroker::start_temp(&[]);
    let client = admin(&broker.addr);
    assert_eq!(rdkafka_create(&rt, &client, "orders", &[], false), Ok(()));
    // A "create if missing" of a compacted topic, as Kafka Streams, Connect or Spring's
    // KafkaAdmin send it: whatever lograil thinks of the configs, the topic is there.
    let compacted = [
        ("cleanup.policy", "compact"),
        ("min.compaction.lag.ms", "1000"),
        ("delete.retention.ms", "1000"),
        ("segment.jitter.ms", "5"),
    ];
    for validate_only in [false, true] {
        assert_eq!(
            rdkafka_create(&rt, &client, "orders", &compacted, validate_only),
            Err(RDKafkaErrorCode::TopicAlreadyExists),
            "validate_only {validate_only}"
        );
    }
    let (code, message) = create_topic_answer(&broker.addr, "orders", 1, &compacted);
    assert_eq!(
        (code, message.as_str()),
        (TOPIC_ALREADY_EXISTS, "Topic 'orders' already exists.")
    );
    // A new topic with them is still refused (segment.jitter.ms).
    assert_eq!(
        rdkafka_create(&rt, &client, "fresh", &compacted, false),
        Err(RDKafkaErrorCode::InvalidConfig)
    );
}
