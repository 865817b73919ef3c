//! Protocol behaviour checked message by message: idempotent producers across a restart, fetch
//! long-polling and limits, ListOffsets, and the admin APIs.

use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use log_core::batch;

use test_support::kafka::{
    delete_records, ensure_topic, fetch_request, init_producer_id, list_offset, list_offset_at,
    name as topic, produce,
};
use test_support::wire::{call, connect};
use test_support::TestBroker;

#[test]
fn idempotent_retries_are_stored_once_even_across_a_restart() {
    let mut broker = TestBroker::start_temp(&[]);
    ensure_topic(&broker.addr, "idem");
    let (pid, epoch) = init_producer_id(&broker.addr);
    assert!(pid >= 0);
    assert_eq!(epoch, 0);

    let first = batch::build_for_producer(
        &[(None, Some(b"a"), 1), (None, Some(b"b"), 2)],
        pid,
        epoch,
        0,
    );
    assert_eq!(produce(&broker.addr, "idem", 0, first.clone()), (0, 0));
    // A retry: acknowledged again at the same offset, stored once.
    assert_eq!(produce(&broker.addr, "idem", 0, first.clone()), (0, 0));
    assert_eq!(list_offset(&broker.addr, "idem", -1).1, 2);
    // A gap in the sequence.
    let gap = batch::build_for_producer(&[(None, Some(b"x"), 3)], pid, epoch, 5);
    assert_eq!(
        produce(&broker.addr, "idem", 0, gap).0,
        45,
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );

    broker.stop();
    broker.restart();
    // The producer state was rebuilt from the log: the retry is still recognised.
    assert_eq!(produce(&broker.addr, "idem", 0, first), (0, 0));
    let second = batch::build_for_producer(&[(None, Some(b"c"), 4)], pid, epoch, 2);
    assert_eq!(produce(&broker.addr, "idem", 0, second), (0, 2));
    assert_eq!(list_offset(&broker.addr, "idem", -1).1, 3);
    // An older epoch is fenced.
    let bumped = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(pid.into())
        .with_producer_epoch(epoch);
    let bumped: InitProducerIdResponse = call(
        &mut connect(&broker.addr),
        ApiKey::InitProducerId,
        4,
        &bumped,
    );
    assert_eq!((bumped.producer_id.0, bumped.producer_epoch), (pid, 1));
    let new_epoch = batch::build_for_producer(&[(None, Some(b"d"), 5)], pid, 1, 0);
    assert_eq!(produce(&broker.addr, "idem", 0, new_epoch), (0, 3));
    let stale = batch::build_for_producer(&[(None, Some(b"e"), 6)], pid, 0, 3);
    assert_eq!(
        produce(&broker.addr, "idem", 0, stale).0,
        47,
        "INVALID_PRODUCER_EPOCH"
    );
    // Ids are not reused after the restart.
    assert_ne!(init_producer_id(&broker.addr).0, pid);
}

#[test]
fn idempotent_retries_are_stored_once_after_delete_records_and_a_restart() {
    let mut broker = TestBroker::start_temp(&[]);
    ensure_topic(&broker.addr, "idem-deleted");
    let (pid, epoch) = init_producer_id(&broker.addr);
    let plain = batch::build(&[(None, Some(&b"plain"[..]), 1); 5]);
    assert_eq!(produce(&broker.addr, "idem-deleted", 0, plain), (0, 0));
    let values: Vec<String> = (0..10).map(|i| format!("idem-{i}")).collect();
    let records: Vec<batch::NewRecord> = values
        .iter()
        .map(|v| (None, Some(v.as_bytes()), 2))
        .collect();
    let acknowledged = batch::build_for_producer(&records, pid, epoch, 0);
    assert_eq!(
        produce(&broker.addr, "idem-deleted", 0, acknowledged.clone()),
        (0, 5)
    );
    // DeleteRecords moves the log start inside the (only) segment.
    assert_eq!(delete_records(&broker.addr, "idem-deleted", 3), (0, 3));

    for restart in ["a clean stop", "kill -9"] {
        if restart == "kill -9" {
            broker.kill9();
        } else {
            broker.stop();
        }
        broker.restart();
        // The producer state was rebuilt from the log start: the retry is acknowledged at its
        // first offsets and stored once.
        assert_eq!(
            produce(&broker.addr, "idem-deleted", 0, acknowledged.clone()),
            (0, 5),
            "after {restart}"
        );
        assert_eq!(
            list_offset(&broker.addr, "idem-deleted", -1).1,
            15,
            "after {restart}"
        );
    }
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    assert!(!log.contains("could not rebuild producer state"), "{log}");
}

#[test]
fn fetch_long_polls_until_an_append_wakes_it() {
    let broker = TestBroker::start_temp(&[]);
    ensure_topic(&broker.addr, "poll");

    // Nothing arrives: the fetch returns empty after max_wait_ms.
    let start = Instant::now();
    let empty: FetchResponse = call(
        &mut connect(&broker.addr),
        ApiKey::Fetch,
        12,
        &fetch_request("poll", 0, 400, 1 << 20),
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(350),
        "returned after {waited:?}"
    );
    let p = &empty.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));

    // An append 300 ms in wakes a fetch willing to wait 10 minutes: only the append can answer
    // it before the connection's 10 s read timeout fails the call.
    let addr = broker.addr.clone();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        produce(
            &addr,
            "poll",
            0,
            batch::build(&[(None, Some(b"wake up"), 1)]),
        )
    });
    let woken: FetchResponse = call(
        &mut connect(&broker.addr),
        ApiKey::Fetch,
        12,
        &fetch_request("poll", 0, 600_000, 1 << 20),
    );
    assert_eq!(producer.join().unwrap(), (0, 0));
    let records = woken.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(
        batch::decode(&records).unwrap()[0].value.as_deref(),
        Some(&b"wake up"[..])
    );
    assert_eq!(woken.responses[0].partitions[0].high_watermark, 1);

    // partition_max_bytes: one whole batch even when it is larger than the limit, never more.
    for i in 0..4 {
        produce(
            &broker.addr,
            "poll",
            0,
            batch::build(&[(None, Some(format!("b{i}").as_bytes()), 2)]),
        );
    }
    let limited: FetchResponse = call(
        &mut connect(&broker.addr),
        ApiKey::Fetch,
        12,
        &fetch_request("poll", 1, 0, 1),
    );
    let records = limited.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(record_batch::validate_all(&records).unwrap().len(), 1);
    let all: FetchResponse = call(
        &mut connect(&broker.addr),
        ApiKey::Fetch,
        12,
        &fetch_request("poll", 1, 0, 1 << 20),
    );
    let records = all.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(record_batch::validate_all(&records).unwrap().len(), 4);

    // Past the end, and an unknown topic.
    let out: FetchResponse = call(
        &mut connect(&broker.addr),
        ApiKey::Fetch,
        12,
        &fetch_request("poll", 1000, 0, 1 << 20),
    );
    assert_eq!(
        out.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    let unknown: FetchResponse = call(
        &mut connect(&broker.addr),
        ApiKey::Fetch,
        12,
        &fetch_request("nope", 0, 0, 1 << 20),
    );
    assert_eq!(
        unknown.responses[0].partitions[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
}

#[test]
fn list_offsets_earliest_latest_and_by_timestamp() {
    let broker = TestBroker::start_temp(&[]);
    ensure_topic(&broker.addr, "times");
    for i in 0..5i64 {
        let records = batch::build(&[
            (None, Some(b"x"), 1000 * i),
            (None, Some(b"y"), 1000 * i + 500),
        ]);
        produce(&broker.addr, "times", 0, records);
    }
    assert_eq!(list_offset(&broker.addr, "times", -2), (0, 0, -1));
    assert_eq!(list_offset(&broker.addr, "times", -1), (0, 10, -1));
    assert_eq!(list_offset(&broker.addr, "times", 2000), (0, 4, 2000));
    assert_eq!(list_offset(&broker.addr, "times", 2001), (0, 5, 2500));
    assert_eq!(list_offset(&broker.addr, "times", 99_999), (0, -1, -1));
    assert_eq!(
        list_offset(&broker.addr, "times", -3),
        (0, 9, 4500),
        "max timestamp"
    );
}

/// The tiered-storage timestamps (-4, -5, -6) as Kafka answers them for a topic without remote
/// storage, and UNSUPPORTED_VERSION for a timestamp the request's version does not know.
#[test]
fn list_offsets_tiered_timestamps_and_the_versions_that_know_them() {
    const UNSUPPORTED_VERSION: i16 = 35;
    let broker = TestBroker::start_temp(&[]);
    ensure_topic(&broker.addr, "tiers");
    for i in 0..4i64 {
        produce(
            &broker.addr,
            "tiers",
            0,
            batch::build(&[(None, Some(b"x"), 1000 * i)]),
        );
    }
    assert_eq!(delete_records(&broker.addr, "tiers", 2), (0, 2));
    let at = |timestamp, version| list_offset_at(&broker.addr, "tiers", timestamp, version);
    assert_eq!(at(-4, 8), (0, 2, -1), "earliest local: the log start");
    assert_eq!(at(-4, 11), (0, 2, -1));
    assert_eq!(at(-5, 9), (0, -1, -1), "latest tiered: nothing tiered");
    assert_eq!(at(-6, 11), (0, -1, -1), "earliest pending upload: none");
    assert_eq!(at(-2, 11), (0, 2, -1));
    assert_eq!(at(-1, 11), (0, 4, -1));
    assert_eq!(at(-3, 11), (0, 3, 3000));
    assert_eq!(
        at(1000, 10),
        (0, 2, 2000),
        "below the log start: the first record"
    );
    for (timestamp, version) in [(-3, 6), (-4, 7), (-5, 8), (-6, 10), (-7, 11), (-100, 11)] {
        assert_eq!(
            at(timestamp, version),
            (UNSUPPORTED_VERSION, -1, -1),
            "timestamp {timestamp} in v{version}"
        );
    }
}

#[test]
fn admin_create_describe_and_delete_topics() {
    let broker = TestBroker::start_temp(&["--auto-create-topics", "false"]);
    let data = broker.data_dir.clone();
    let creatable = |name: &str, partitions: i32, replication: i16, configs: &[(&str, &str)]| {
        CreatableTopic::default()
            .with_name(topic(name))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            )
    };
    let create = |topics: Vec<CreatableTopic>, validate_only: bool| -> CreateTopicsResponse {
        let request = CreateTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(5000)
            .with_validate_only(validate_only);
        call(
            &mut connect(&broker.addr),
            ApiKey::CreateTopics,
            5,
            &request,
        )
    };
    let created = create(
        vec![
            creatable(
                "cfg",
                3,
                1,
                &[("segment.bytes", "1048576"), ("flush.messages", "1")],
            ),
            creatable("bad/name", 1, 1, &[]),
            creatable("replicated", 1, 3, &[]),
            creatable("shredded", 1, -1, &[("cleanup.policy", "shred")]),
            creatable("zero", 0, 1, &[]),
        ],
        false,
    );
    let codes: Vec<i16> = created.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, 17, 38, 40, 37]);
    assert_eq!(created.topics[0].num_partitions, 3);
    assert!(data.join("cfg-2").is_dir());
    assert_eq!(
        create(vec![creatable("cfg", 1, 1, &[])], false).topics[0].error_code,
        36
    );
    assert_eq!(
        create(vec![creatable("dry", 2, 1, &[])], true).topics[0].error_code,
        0
    );
    assert!(
        !data.join("dry-0").exists(),
        "validate_only creates nothing"
    );

    // Metadata does not auto-create when the broker says no.
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic("ghost")))
        ]))
        .with_allow_auto_topic_creation(true);
    let metadata: MetadataResponse =
        call(&mut connect(&broker.addr), ApiKey::Metadata, 12, &request);
    assert_eq!(metadata.topics[0].error_code, 3);

    let describe = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("cfg"))
            .with_configuration_keys(None),
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("ghost")),
    ]);
    let described: DescribeConfigsResponse = call(
        &mut connect(&broker.addr),
        ApiKey::DescribeConfigs,
        4,
        &describe,
    );
    let configs = &described.results[0].configs;
    let get = |name: &str| configs.iter().find(|c| c.name.as_str() == name).unwrap();
    assert_eq!(get("segment.bytes").value.as_deref(), Some("1048576"));
    assert_eq!(get("segment.bytes").config_source, 1, "a topic override");
    assert_eq!(get("flush.messages").value.as_deref(), Some("1"));
    assert_eq!(get("retention.ms").config_source, 5, "the default");
    assert_eq!(described.results[1].error_code, 3);

    let delete = DeleteTopicsRequest::default()
        .with_topic_names(vec![topic("cfg"), topic("ghost")])
        .with_timeout_ms(5000);
    let deleted: DeleteTopicsResponse =
        call(&mut connect(&broker.addr), ApiKey::DeleteTopics, 5, &delete);
    let codes: Vec<i16> = deleted.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 3]);
    assert!(!data.join("cfg-0").exists(), "files deleted with the topic");
}

#[test]
fn metadata_carries_each_topics_id_across_restarts() {
    let mut broker = TestBroker::start_temp(&[]);
    let id_of = |addr: &str| {
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic("ids"))),
        ]));
        let response: MetadataResponse = call(&mut connect(addr), ApiKey::Metadata, 12, &request);
        response.topics[0].topic_id
    };
    ensure_topic(&broker.addr, "ids");
    let id = id_of(&broker.addr);
    assert!(!id.is_nil());
    broker.stop();
    broker.restart();
    assert_eq!(id_of(&broker.addr), id);
}

#[test]
fn a_line_logged_on_the_blocking_pool_names_its_request() {
    let broker = TestBroker::start_temp(&[]);
    // Topic creation runs on the blocking pool and logs "created topic" there.
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic("spanned"))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let response: CreateTopicsResponse = call(
        &mut connect(&broker.addr),
        ApiKey::CreateTopics,
        5,
        &request,
    );
    assert_eq!(response.topics[0].error_code, 0);
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("created topic") && l.contains("spanned"))
        .unwrap_or_else(|| panic!("no creation line in:\n{log}"));
    for part in [
        "connection{peer=",
        "api=CreateTopics",
        "version=5",
        "correlation_id=42",
    ] {
        assert!(line.contains(part), "{part:?} missing from {line:?}");
    }
}
