//! The admin APIs Kafka's tools need beyond topic creation, message by message against the
//! real binary: CreatePartitions, IncrementalAlterConfigs / AlterConfigs for topics,
//! DeleteRecords, DescribeCluster, DescribeLogDirs, DescribeProducers, with Kafka's error codes
//! for bad input and their effects checked after a restart.

use std::path::Path;

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use log_core::batch;

use test_support::kafka::{
    alter_configs, create_topic, describe_configs, fetch_request, init_producer_id, list_offset,
    name, produce, text,
};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REQUEST: i16 = 42;
const INVALID_CONFIG: i16 = 40;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const POLICY_VIOLATION: i16 = 44;

fn partition_count(addr: &str, topic: &str) -> usize {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(false);
    let response: MetadataResponse = call(&mut connect(addr), ApiKey::Metadata, 12, &request);
    assert_eq!(response.topics[0].error_code, 0);
    response.topics[0].partitions.len()
}

/// (error code, number of bytes of records, log start offset) of a fetch of partition 0 at
/// `offset`.
fn fetch(addr: &str, topic: &str, offset: i64) -> (i16, usize, i64) {
    let request = fetch_request(topic, offset, 0, 1 << 20);
    let response: FetchResponse = call(&mut connect(addr), ApiKey::Fetch, 11, &request);
    let p = &response.responses[0].partitions[0];
    (
        p.error_code,
        p.records.as_ref().map_or(0, |r| r.len()),
        p.log_start_offset,
    )
}

/// The offset of partition 0 at `timestamp`, answered without error.
fn offset_at(addr: &str, topic: &str, timestamp: i64) -> i64 {
    let (code, offset, _) = list_offset(addr, topic, timestamp);
    assert_eq!(code, 0);
    offset
}

fn create_partitions(addr: &str, topics: &[(&str, i32)], validate_only: bool) -> Vec<i16> {
    let request = CreatePartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(t, n)| {
                    CreatePartitionsTopic::default()
                        .with_name(name(t))
                        .with_count(*n)
                        .with_assignments(None)
                })
                .collect(),
        )
        .with_timeout_ms(5000)
        .with_validate_only(validate_only);
    let response: CreatePartitionsResponse =
        call(&mut connect(addr), ApiKey::CreatePartitions, 3, &request);
    assert_eq!(response.results.len(), topics.len());
    response.results.iter().map(|r| r.error_code).collect()
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

#[test]
fn create_partitions_grows_a_topic_and_refuses_what_kafka_refuses() {
    let mut broker = TestBroker::start_temp(&["--max-broker-partitions", "20"]);
    let data = broker.data_dir.clone();
    let addr = broker.addr.clone();
    create_topic(&addr, "grow", 2);
    assert_eq!(
        produce(&addr, "grow", 0, batch::build(&[(None, Some(b"old"), 1)])),
        (0, 0)
    );

    assert_eq!(create_partitions(&addr, &[("grow", 5)], true), vec![0]);
    assert_eq!(
        partition_count(&addr, "grow"),
        2,
        "validate_only changes nothing"
    );
    assert_eq!(create_partitions(&addr, &[("grow", 5)], false), vec![0]);
    assert_eq!(partition_count(&addr, "grow"), 5);
    assert_eq!(
        segment_files(&data.join("grow-4")),
        vec!["00000000000000000000.log"]
    );
    assert_eq!(
        produce(&addr, "grow", 4, batch::build(&[(None, Some(b"new"), 2)])),
        (0, 0)
    );

    assert_eq!(
        create_partitions(
            &addr,
            &[
                ("grow", 4),
                ("grow2", 5),
                ("missing", 3),
                ("__consumer_offsets", 60)
            ],
            false
        ),
        vec![
            INVALID_PARTITIONS,
            UNKNOWN_TOPIC_OR_PARTITION,
            UNKNOWN_TOPIC_OR_PARTITION,
            INVALID_REQUEST
        ]
    );
    assert_eq!(
        create_partitions(&addr, &[("grow", 5)], false),
        vec![INVALID_PARTITIONS]
    );
    assert_eq!(
        create_partitions(&addr, &[("grow", -3)], false),
        vec![INVALID_PARTITIONS]
    );
    assert_eq!(
        create_partitions(&addr, &[("grow", 6), ("grow", 7)], false),
        vec![INVALID_REQUEST, INVALID_REQUEST]
    );
    // 5 of `grow`, __consumer_offsets and __share_group_state count against the cap of 20.
    assert_eq!(
        create_partitions(&addr, &[("grow", 100)], false),
        vec![POLICY_VIOLATION]
    );
    // An assignment of a new partition to another broker.
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name("grow"))
            .with_count(6)
            .with_assignments(Some(vec![
                CreatePartitionsAssignment::default().with_broker_ids(vec![2.into()])
            ]))])
        .with_timeout_ms(5000);
    let response: CreatePartitionsResponse =
        call(&mut connect(&addr), ApiKey::CreatePartitions, 3, &request);
    assert_eq!(response.results[0].error_code, INVALID_REPLICA_ASSIGNMENT);
    assert!(response.results[0].error_message.is_some());
    assert_eq!(partition_count(&addr, "grow"), 5);

    broker.stop();
    broker.restart();
    assert_eq!(partition_count(&broker.addr, "grow"), 5);
    assert_eq!(fetch(&broker.addr, "grow", 0).0, 0);
}

fn describe_topic_configs(addr: &str, topic: &str) -> Vec<(String, String, i8)> {
    describe_configs(addr, 2, topic)
}

fn config_of(addr: &str, topic: &str, key: &str) -> (String, i8) {
    describe_topic_configs(addr, topic)
        .into_iter()
        .find(|(k, ..)| k == key)
        .map(|(_, v, s)| (v, s))
        .unwrap_or_else(|| panic!("{key} is not described"))
}

#[test]
fn topic_configs_are_altered_at_once_validated_and_kept_across_a_restart() {
    let mut broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    create_topic(&addr, "conf", 2);
    let (default_retention, source) = config_of(&addr, "conf", "retention.ms");
    assert_eq!(source, 5, "a default");

    const SET: i8 = 0;
    const DELETE: i8 = 1;
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "conf",
            &[("retention.ms", SET, Some("1234"))],
            true
        )
        .0,
        0
    );
    assert_eq!(
        config_of(&addr, "conf", "retention.ms").0,
        default_retention
    );
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "conf",
            &[
                ("retention.ms", SET, Some("1234")),
                ("segment.bytes", SET, Some("2097152")),
                ("cleanup.policy", SET, Some("delete")),
            ],
            false
        )
        .0,
        0
    );
    assert_eq!(config_of(&addr, "conf", "retention.ms"), ("1234".into(), 1));
    assert_eq!(
        config_of(&addr, "conf", "segment.bytes"),
        ("2097152".into(), 1)
    );

    // Bad input: nothing of the resource's changes is applied.
    let (code, message) = alter_configs(
        &addr,
        2,
        "conf",
        &[
            ("retention.ms", SET, Some("99")),
            ("no.such.config", SET, Some("1")),
        ],
        false,
    );
    assert_eq!(code, INVALID_CONFIG);
    assert!(message.unwrap().contains("no.such.config"));
    assert_eq!(config_of(&addr, "conf", "retention.ms").0, "1234");
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "conf",
            &[("retention.ms", SET, Some("soon"))],
            false
        )
        .0,
        INVALID_CONFIG
    );
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "conf",
            &[("segment.bytes", SET, Some("10"))],
            false
        )
        .0,
        INVALID_CONFIG
    );
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "conf",
            &[("cleanup.policy", SET, Some("compact,shred"))],
            false
        )
        .0,
        INVALID_CONFIG,
        "a policy Kafka does not have"
    );
    assert_eq!(
        alter_configs(&addr, 2, "conf", &[("retention.ms", SET, None)], false).0,
        INVALID_CONFIG
    );
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "missing",
            &[("retention.ms", SET, Some("1"))],
            false
        )
        .0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    // A per-broker config (the cluster-wide defaults: see the test of dynamic defaults).
    let (code, message) = alter_configs(
        &addr,
        4,
        "1",
        &[("log.retention.ms", SET, Some("1"))],
        false,
    );
    assert_eq!(code, INVALID_REQUEST);
    assert!(message.unwrap().contains("static"));

    // DELETE puts the broker default back.
    assert_eq!(
        alter_configs(&addr, 2, "conf", &[("segment.bytes", DELETE, None)], false).0,
        0
    );
    assert_eq!(config_of(&addr, "conf", "segment.bytes").1, 5);

    broker.stop();
    broker.restart();
    let addr = broker.addr.clone();
    assert_eq!(config_of(&addr, "conf", "retention.ms"), ("1234".into(), 1));
    assert_eq!(config_of(&addr, "conf", "segment.bytes").1, 5);

    // AlterConfigs replaces the whole set: retention.ms goes back to the default.
    let request = AlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("conf"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(text("max.message.bytes"))
                .with_value(Some(text("65536")))]),
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text("conf"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(text("bogus"))
                .with_value(Some(text("1")))]),
    ]);
    let response: AlterConfigsResponse =
        call(&mut connect(&addr), ApiKey::AlterConfigs, 2, &request);
    let codes: Vec<i16> = response.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, INVALID_CONFIG]);
    assert_eq!(
        config_of(&addr, "conf", "max.message.bytes"),
        ("65536".into(), 1)
    );
    assert_eq!(
        config_of(&addr, "conf", "retention.ms"),
        (default_retention, 5)
    );
    // In effect without a restart: a batch over the new max.message.bytes is refused.
    let big = vec![b'x'; 100_000];
    assert_eq!(
        produce(&addr, "conf", 0, batch::build(&[(None, Some(&big[..]), 1)])).0,
        10,
        "MESSAGE_TOO_LARGE"
    );
}

fn delete_records(addr: &str, requests: &[(&str, i32, i64)]) -> Vec<(i16, i64)> {
    let topics = requests
        .iter()
        .map(|(t, p, o)| {
            DeleteRecordsTopic::default()
                .with_name(name(t))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(*p)
                    .with_offset(*o)])
        })
        .collect();
    let request = DeleteRecordsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000);
    let response: DeleteRecordsResponse =
        call(&mut connect(addr), ApiKey::DeleteRecords, 2, &request);
    response
        .topics
        .iter()
        .map(|t| (t.partitions[0].error_code, t.partitions[0].low_watermark))
        .collect()
}

#[test]
fn delete_records_moves_the_log_start_deletes_old_segments_and_survives_a_restart() {
    let mut broker = TestBroker::start_temp(&[]);
    let data = broker.data_dir.clone();
    let addr = broker.addr.clone();
    create_topic(&addr, "old", 1);
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "old",
            &[("segment.bytes", 0, Some("1048576"))],
            false
        )
        .0,
        0
    );
    // 12 records of 300 KB: a segment every 3 or 4.
    let value = vec![b'v'; 300_000];
    for i in 0..12 {
        assert_eq!(
            produce(
                &addr,
                "old",
                0,
                batch::build(&[(None, Some(&value[..]), i)])
            ),
            (0, i)
        );
    }
    let dir = data.join("old-0");
    let before = segment_files(&dir);
    assert!(before.len() >= 3, "{before:?}");

    assert_eq!(
        delete_records(
            &addr,
            &[
                ("old", 0, 13),
                ("old", 0, -7),
                ("old", 3, 1),
                ("nope", 0, 1)
            ]
        ),
        vec![
            (OFFSET_OUT_OF_RANGE, -1),
            (OFFSET_OUT_OF_RANGE, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1)
        ]
    );
    assert_eq!(offset_at(&addr, "old", -2), 0, "nothing moved");
    assert_eq!(delete_records(&addr, &[("old", 0, 7)]), vec![(0, 7)]);
    assert_eq!(offset_at(&addr, "old", -2), 7);
    let (code, _, log_start) = fetch(&addr, "old", 6);
    assert_eq!(code, OFFSET_OUT_OF_RANGE);
    assert_eq!(fetch(&addr, "old", 0).0, OFFSET_OUT_OF_RANGE);
    let (code, bytes, log_start_7) = fetch(&addr, "old", 7);
    assert_eq!((code, log_start_7), (0, 7));
    assert!(bytes > 300_000);
    assert!(log_start == -1 || log_start == 7);
    let after = segment_files(&dir);
    assert!(after.len() < before.len(), "{before:?} -> {after:?}");
    assert_eq!(after.last(), before.last());
    // Lower than the log start: nothing changes.
    assert_eq!(delete_records(&addr, &[("old", 0, 2)]), vec![(0, 7)]);

    broker.kill9();
    broker.restart();
    let addr = broker.addr.clone();
    assert_eq!(offset_at(&addr, "old", -2), 7);
    assert_eq!(fetch(&addr, "old", 6).0, OFFSET_OUT_OF_RANGE);
    // -1: up to the high watermark.
    assert_eq!(delete_records(&addr, &[("old", 0, -1)]), vec![(0, 12)]);
    assert_eq!(offset_at(&addr, "old", -2), 12);
    assert_eq!(offset_at(&addr, "old", -1), 12);
    assert_eq!(fetch(&addr, "old", 12).0, 0);
}

#[test]
fn describe_cluster_log_dirs_and_producers() {
    let mut broker = TestBroker::start_temp(&[]);
    let data = broker.data_dir.clone();
    let addr = broker.addr.clone();
    let describe = |addr: &str, endpoint_type: i8| -> DescribeClusterResponse {
        let request = DescribeClusterRequest::default().with_endpoint_type(endpoint_type);
        call(&mut connect(addr), ApiKey::DescribeCluster, 2, &request)
    };
    let cluster = describe(&addr, 1);
    assert_eq!(cluster.error_code, 0);
    assert_eq!(cluster.controller_id.0, 1);
    assert_eq!(cluster.brokers.len(), 1);
    assert_eq!(cluster.brokers[0].broker_id.0, 1);
    assert_eq!(
        format!(
            "{}:{}",
            cluster.brokers[0].host.as_str(),
            cluster.brokers[0].port
        ),
        addr
    );
    let metadata: MetadataResponse = call(
        &mut connect(&addr),
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![])),
    );
    assert_eq!(
        metadata.cluster_id.as_deref(),
        Some(cluster.cluster_id.as_str())
    );
    assert_eq!(
        describe(&addr, 7).error_code,
        115,
        "UNSUPPORTED_ENDPOINT_TYPE"
    );

    create_topic(&addr, "dirs", 2);
    assert_eq!(
        produce(
            &addr,
            "dirs",
            1,
            batch::build(&[(Some(b"k"), Some(b"value"), 1)])
        ),
        (0, 0)
    );
    let request = DescribeLogDirsRequest::default().with_topics(Some(vec![
        DescribableLogDirTopic::default()
            .with_topic(name("dirs"))
            .with_partitions(vec![0, 1]),
        DescribableLogDirTopic::default()
            .with_topic(name("absent"))
            .with_partitions(vec![0]),
    ]));
    let dirs: DescribeLogDirsResponse =
        call(&mut connect(&addr), ApiKey::DescribeLogDirs, 4, &request);
    assert_eq!(dirs.error_code, 0);
    assert_eq!(dirs.results.len(), 1);
    let result = &dirs.results[0];
    assert_eq!(
        Path::new(result.log_dir.as_str()),
        std::fs::canonicalize(&data).unwrap()
    );
    assert_eq!(result.topics.len(), 1, "an unknown topic is left out");
    let mut sizes: Vec<(i32, i64)> = result.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.partition_size))
        .collect();
    sizes.sort_unstable();
    let on_disk = |p: i32| -> i64 {
        std::fs::read_dir(data.join(format!("dirs-{p}")))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .map(|e| e.metadata().unwrap().len() as i64)
            .sum()
    };
    assert_eq!(sizes, vec![(0, 0), (1, on_disk(1))]);
    assert!(on_disk(1) > 0);

    // An idempotent producer shows up in DescribeProducers.
    let (pid, _) = init_producer_id(&addr);
    let records =
        batch::build_for_producer(&[(None, Some(b"a"), 1), (None, Some(b"b"), 2)], pid, 0, 0);
    assert_eq!(produce(&addr, "dirs", 0, records), (0, 0));
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(name("dirs"))
        .with_partition_indexes(vec![0, 1, 9])]);
    let producers: DescribeProducersResponse =
        call(&mut connect(&addr), ApiKey::DescribeProducers, 0, &request);
    let partitions = &producers.topics[0].partitions;
    assert_eq!(partitions[0].error_code, 0);
    assert_eq!(partitions[0].active_producers.len(), 1);
    assert_eq!(partitions[0].active_producers[0].producer_id.0, pid);
    assert_eq!(partitions[0].active_producers[0].last_sequence, 1);
    assert!(partitions[1].active_producers.is_empty());
    assert_eq!(partitions[2].error_code, UNKNOWN_TOPIC_OR_PARTITION);

    // The cluster id is the same after a restart.
    broker.stop();
    broker.restart();
    assert_eq!(describe(&broker.addr, 1).cluster_id, cluster.cluster_id);
}

/// The Java consumer (so Kafka's ConsoleConsumer with a group) sends JoinGroup v5 here and
/// rejects a null protocol name, which is non-nullable before v7: the first join's
/// MEMBER_ID_REQUIRED answer carries an empty one, as Kafka's does.
#[test]
fn join_group_before_v7_never_answers_a_null_protocol_name() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    let broker = TestBroker::start_temp(&[]);
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(text("java-like")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(text(""))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"\0\0"))]);
    let first: JoinGroupResponse = call(&mut connect(&broker.addr), ApiKey::JoinGroup, 5, &request);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    assert_eq!(first.protocol_name.as_deref(), Some(""));
    let member = first.member_id.clone();
    let second: JoinGroupResponse = call(
        &mut connect(&broker.addr),
        ApiKey::JoinGroup,
        5,
        &request.with_member_id(member),
    );
    assert_eq!(second.error_code, 0);
    assert_eq!(second.protocol_name.as_deref(), Some("range"));
}

#[test]
fn dynamic_broker_defaults_reach_topics_without_their_own_value_and_persist() {
    let mut broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    create_topic(&addr, "follows", 1);
    create_topic(&addr, "own", 1);
    assert_eq!(
        alter_configs(
            &addr,
            2,
            "own",
            &[("retention.ms", SET, Some("5000"))],
            false
        )
        .0,
        0
    );
    let (flag_default, _) = config_of(&addr, "follows", "retention.ms");

    // Bad input first: nothing changes.
    assert_eq!(
        alter_configs(&addr, 4, "", &[("num.io.threads", SET, Some("4"))], false).0,
        INVALID_REQUEST
    );
    assert_eq!(
        alter_configs(
            &addr,
            4,
            "",
            &[("log.retention.ms", SET, Some("later"))],
            false
        )
        .0,
        INVALID_REQUEST
    );
    assert_eq!(
        alter_configs(
            &addr,
            4,
            "1",
            &[("log.retention.ms", SET, Some("1000"))],
            false
        )
        .0,
        INVALID_REQUEST,
        "per-broker configs are static flags"
    );
    assert_eq!(
        alter_configs(
            &addr,
            4,
            "",
            &[("log.retention.ms", SET, Some("1000"))],
            true
        )
        .0,
        0
    );
    assert_eq!(config_of(&addr, "follows", "retention.ms").0, flag_default);

    assert_eq!(
        alter_configs(
            &addr,
            4,
            "",
            &[("log.retention.ms", SET, Some("1000"))],
            false
        )
        .0,
        0
    );
    assert_eq!(
        config_of(&addr, "follows", "retention.ms"),
        ("1000".into(), 5)
    );
    assert_eq!(config_of(&addr, "own", "retention.ms"), ("5000".into(), 1));
    create_topic(&addr, "new", 1);
    assert_eq!(config_of(&addr, "new", "retention.ms"), ("1000".into(), 5));
    let describe_default = |addr: &str| describe_configs(addr, 4, "");
    assert_eq!(
        describe_default(&addr),
        vec![("log.retention.ms".to_string(), "1000".to_string(), 3)]
    );

    broker.stop();
    broker.restart();
    let addr = broker.addr.clone();
    assert_eq!(
        describe_default(&addr),
        vec![("log.retention.ms".to_string(), "1000".to_string(), 3)]
    );
    assert_eq!(
        config_of(&addr, "follows", "retention.ms"),
        ("1000".into(), 5)
    );
    // Back to the flag: the topics that followed follow back.
    assert_eq!(
        alter_configs(&addr, 4, "", &[("log.retention.ms", DELETE, None)], false).0,
        0
    );
    assert!(describe_default(&addr).is_empty());
    assert_eq!(
        config_of(&addr, "follows", "retention.ms"),
        (flag_default.clone(), 5)
    );
    assert_eq!(config_of(&addr, "new", "retention.ms"), (flag_default, 5));
    assert_eq!(config_of(&addr, "own", "retention.ms"), ("5000".into(), 1));
}
