//! Kafka operations the suites share: over the raw protocol ([`crate::wire`]), one request on a
//! connection of its own, asserting what set-up needs; through librdkafka ([`rdkafka_produce`]);
//! and [`wait_until`] a condition holds.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    FetchRequest, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use log_core::batch::{self, HeadedRecord};
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{
    BaseRecord, DefaultProducerContext, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;

use crate::wire::{call, connect, frame, read_response};

/// A string of the protocol.
pub fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A topic name of the protocol.
pub fn name(topic: &str) -> TopicName {
    TopicName(text(topic))
}

/// Creates `topic` with `partitions` partitions, the broker's replication factor and
/// `configs`; the topic's error code.
pub fn try_create_topic(addr: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) -> i16 {
    create_topic_answer(addr, topic, partitions, configs).0
}

/// [`try_create_topic`]'s error code with the error message ("" when there is none).
pub fn create_topic_answer(
    addr: &str,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> (i16, String) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(text(k))
                            .with_value(Some(text(v)))
                    })
                    .collect(),
            )])
        .with_timeout_ms(30_000);
    let response: CreateTopicsResponse =
        call(&mut connect(addr), ApiKey::CreateTopics, 5, &request);
    assert_eq!(response.topics.len(), 1, "{response:?}");
    let t = &response.topics[0];
    (
        t.error_code,
        t.error_message.as_deref().unwrap_or("").into(),
    )
}

/// Creates `topic` with `partitions` partitions; fails the test if it cannot.
pub fn create_topic(addr: &str, topic: &str, partitions: i32) {
    assert_eq!(
        try_create_topic(addr, topic, partitions, &[]),
        0,
        "{topic} created"
    );
}

/// Has `topic` created by a Metadata request that may create topics (the broker's defaults);
/// fails the test unless it then exists.
pub fn ensure_topic(addr: &str, topic: &str) {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(true);
    let response: MetadataResponse = call(&mut connect(addr), ApiKey::Metadata, 12, &request);
    assert_eq!(response.topics[0].error_code, 0, "{topic} created");
}

/// A Produce of `records` to one partition, acks=all.
pub fn produce_request(topic: &str, partition: i32, records: Option<Bytes>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(records)])])
}

/// Produces `records` (v9) to `partition` of `topic`; the whole response.
pub fn produce_response(
    addr: &str,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> ProduceResponse {
    let request = produce_request(topic, partition, Some(records));
    call(&mut connect(addr), ApiKey::Produce, 9, &request)
}

/// A new idempotent producer's (id, epoch), from InitProducerId v4.
pub fn init_producer_id(addr: &str) -> (i64, i16) {
    let init = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let id: InitProducerIdResponse = call(&mut connect(addr), ApiKey::InitProducerId, 4, &init);
    assert_eq!(id.error_code, 0, "{id:?}");
    (id.producer_id.0, id.producer_epoch)
}

/// Produces `records` (v9) to `partition` of `topic`; (error code, base offset).
pub fn produce(addr: &str, topic: &str, partition: i32, records: Bytes) -> (i16, i64) {
    let response = produce_response(addr, topic, partition, records);
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Produces to partition 0 at `version` on `stream`; the partition's error code.
pub fn produce_at(stream: &mut TcpStream, version: i16, topic: &str, records: Bytes) -> i16 {
    let response: ProduceResponse = call(
        stream,
        ApiKey::Produce,
        version,
        &produce_request(topic, 0, Some(records)),
    );
    response.responses[0].partition_responses[0].error_code
}

/// A Fetch of partition 0 of `topic` from `offset` that waits up to `max_wait_ms` for one
/// byte, and returns up to `partition_max_bytes` (50 MiB for the whole response).
pub fn fetch_request(
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
    partition_max_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(partition_max_bytes)])])
}

/// DeleteRecords (v2) of partition 0 of `topic` before `offset`: (error code, low watermark).
pub fn delete_records(addr: &str, topic: &str, offset: i64) -> (i16, i64) {
    let request = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(offset)])])
        .with_timeout_ms(5000);
    let response: DeleteRecordsResponse =
        call(&mut connect(addr), ApiKey::DeleteRecords, 2, &request);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// ListOffsets (v7) of partition 0 of `topic` at `timestamp` (-1 latest, -2 earliest):
/// (error code, offset, timestamp).
pub fn list_offset(addr: &str, topic: &str, timestamp: i64) -> (i16, i64, i64) {
    list_offset_at(addr, topic, timestamp, 7)
}

/// [`list_offset`] in ListOffsets `version`.
pub fn list_offset_at(addr: &str, topic: &str, timestamp: i64, version: i16) -> (i16, i64, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp)])]);
    let response: ListOffsetsResponse =
        call(&mut connect(addr), ApiKey::ListOffsets, version, &request);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

/// The resource types of the config APIs (`resource_type` of [`alter_configs`] and
/// [`describe_configs`]): a topic.
pub const TOPIC_RESOURCE: i8 = 2;
/// A broker, named by its id (or "" for the cluster-wide default).
pub const BROKER_RESOURCE: i8 = 4;
/// A group (consumer or share group).
pub const GROUP_RESOURCE: i8 = 32;

/// IncrementalAlterConfigs (v1) of one resource (a `*_RESOURCE` type), each
/// change (name, operation: 0 set, 1 delete, value); (error code, message).
pub fn alter_configs(
    addr: &str,
    resource_type: i8,
    resource: &str,
    changes: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let request = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(resource))
            .with_configs(
                changes
                    .iter()
                    .map(|(k, op, v)| {
                        AlterableConfig::default()
                            .with_name(text(k))
                            .with_config_operation(*op)
                            .with_value(v.map(text))
                    })
                    .collect(),
            )])
        .with_validate_only(validate_only);
    let response: IncrementalAlterConfigsResponse = call(
        &mut connect(addr),
        ApiKey::IncrementalAlterConfigs,
        1,
        &request,
    );
    let r = &response.responses[0];
    (
        r.error_code,
        r.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// DescribeConfigs (v4) of every config of one resource (`resource_type`: 2 a topic, 4 a
/// broker, "" the cluster default): (name, value or "" when null, config source). A resource
/// error fails the test.
pub fn describe_configs(addr: &str, resource_type: i8, name: &str) -> Vec<(String, String, i8)> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configuration_keys(None)]);
    let response: DescribeConfigsResponse =
        call(&mut connect(addr), ApiKey::DescribeConfigs, 4, &request);
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "{result:?}");
    result
        .configs
        .iter()
        .map(|c| {
            let value = c.value.as_deref().unwrap_or("").to_string();
            (c.name.to_string(), value, c.config_source)
        })
        .collect()
}

/// Sets `configs` of one resource (as [`alter_configs`]); fails the test if refused.
pub fn set_configs(addr: &str, resource_type: i8, resource: &str, configs: &[(&str, &str)]) {
    let changes: Vec<_> = configs.iter().map(|(k, v)| (*k, 0, Some(*v))).collect();
    let (code, message) = alter_configs(addr, resource_type, resource, &changes, false);
    assert_eq!(code, 0, "{resource}: {message:?}");
}

/// ApiVersions v3.
pub fn api_versions(addr: &str) -> ApiVersionsResponse {
    call(
        &mut connect(addr),
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
}

/// Whether an ApiVersions request on a connection of its own is answered (not closed).
pub fn api_versions_answered(addr: &str) -> bool {
    let mut s = connect(addr);
    s.write_all(&frame(
        ApiKey::ApiVersions,
        3,
        1,
        &ApiVersionsRequest::default(),
    ))
    .unwrap();
    read_response(&mut s).is_some()
}

/// A record for [`rdkafka_send`] and [`produce_records`]: a value, and a key, partition,
/// timestamp and headers if given.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// The key; `None`: a null key.
    pub key: Option<String>,
    /// The value, as UTF-8 text.
    pub value: String,
    /// The partition [`rdkafka_send`] sends it to (`None`: librdkafka's partitioner picks
    /// one); [`produce_records`] ignores it.
    pub partition: Option<i32>,
    /// The timestamp in ms since the Unix epoch; `None`: the time it is sent.
    pub timestamp: Option<i64>,
    /// Headers as (name, value), in order; names may repeat.
    pub headers: Vec<(String, String)>,
}

impl Record {
    /// A record of `value` alone: no key, partition, timestamp or header.
    pub fn new(value: impl Into<String>) -> Record {
        Record {
            value: value.into(),
            ..Record::default()
        }
    }

    /// The record with `key` as its key.
    pub fn key(self, key: impl Into<String>) -> Record {
        Record {
            key: Some(key.into()),
            ..self
        }
    }

    /// The record for `partition`, where [`rdkafka_send`] sends it ([`produce_records`]
    /// ignores it).
    pub fn partition(self, partition: i32) -> Record {
        Record {
            partition: Some(partition),
            ..self
        }
    }

    /// The record with `timestamp`, in ms since the Unix epoch.
    pub fn timestamp(self, timestamp: i64) -> Record {
        Record {
            timestamp: Some(timestamp),
            ..self
        }
    }

    /// The record with header `name`: `value` added after those it has.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Record {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Produces `records` to `partition` of `topic` in one batch, in the raw protocol (Produce
/// v9, acks=-1), which must succeed. A record without a timestamp gets the time it is sent.
pub fn produce_records(
    addr: &str,
    topic: &str,
    partition: i32,
    records: impl IntoIterator<Item = Record>,
) {
    let records: Vec<HeadedRecord> = records
        .into_iter()
        .map(|r| HeadedRecord {
            key: r.key.map(Bytes::from),
            value: Some(Bytes::from(r.value)),
            timestamp: r.timestamp.unwrap_or_else(log_core::now_ms),
            headers: r
                .headers
                .into_iter()
                .map(|(k, v)| (k, Some(Bytes::from(v))))
                .collect(),
        })
        .collect();
    let (code, _) = produce(addr, topic, partition, batch::build_with_headers(&records));
    assert_eq!(code, 0, "producing to {topic}-{partition}");
}

/// The largest throttle (ms) that librdkafka's `statistics` show for any broker.
pub fn max_throttle_ms(statistics: &Statistics) -> i64 {
    statistics
        .brokers
        .values()
        .filter_map(|b| b.throttle.as_ref())
        .map(|w| w.max)
        .max()
        .unwrap_or(0)
}

/// A librdkafka producer of the broker at `addr`, with `props` set.
pub fn rdkafka_producer(
    addr: &str,
    props: &[(&str, &str)],
) -> ThreadedProducer<DefaultProducerContext> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", addr);
    for (k, v) in props {
        config.set(*k, *v);
    }
    config.create().expect("librdkafka producer")
}

/// Sends `records` to `topic` (waiting while librdkafka's queue is full), then flushes: every
/// record is delivered or has failed (see the producer's context) within 60 s.
pub fn rdkafka_send<C>(
    producer: &ThreadedProducer<C>,
    topic: &str,
    records: impl IntoIterator<Item = Record>,
) where
    C: ProducerContext<DeliveryOpaque = ()> + 'static,
{
    for r in records {
        let mut record = BaseRecord::to(topic).payload(&r.value);
        if let Some(key) = &r.key {
            record = record.key(key);
        }
        if let Some(partition) = r.partition {
            record = record.partition(partition);
        }
        if let Some(timestamp) = r.timestamp {
            record = record.timestamp(timestamp);
        }
        if !r.headers.is_empty() {
            let headers = r.headers.iter().fold(OwnedHeaders::new(), |h, (k, v)| {
                h.insert(Header {
                    key: k,
                    value: Some(v),
                })
            });
            record = record.headers(headers);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("send failed: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
}

/// A librdkafka consumer of group `group` (no auto-commit, `props` set) assigned partition
/// `partition` of `topic` from its beginning.
pub fn rdkafka_reader(
    addr: &str,
    group: &str,
    topic: &str,
    partition: i32,
    props: &[(&str, &str)],
) -> rdkafka::consumer::BaseConsumer {
    use rdkafka::consumer::Consumer;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false");
    for (k, v) in props {
        config.set(*k, *v);
    }
    let consumer: rdkafka::consumer::BaseConsumer = config.create().expect("librdkafka consumer");
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, rdkafka::Offset::Beginning)
        .expect("an assignment");
    consumer.assign(&assignment).expect("assign");
    consumer
}

/// Produces `records` to `topic` with a librdkafka producer of its own ([`rdkafka_producer`]
/// with `props`, [`rdkafka_send`]).
pub fn rdkafka_produce(
    addr: &str,
    props: &[(&str, &str)],
    topic: &str,
    records: impl IntoIterator<Item = Record>,
) {
    rdkafka_send(&rdkafka_producer(addr, props), topic, records);
}

/// Polls `condition` every 20 ms; fails the test if it does not hold within `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < timeout, "not within {timeout:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`wait_until`] on a tokio runtime: sleeps without holding the thread.
pub async fn wait_until_async(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < timeout, "not within {timeout:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The address of `group`'s coordinator, as the broker at `addr` names it (FindCoordinator v3).
pub fn group_coordinator(addr: &str, group: &str) -> String {
    let request = kafka_protocol::messages::FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_key(text(group));
    let response: kafka_protocol::messages::FindCoordinatorResponse =
        call(&mut connect(addr), ApiKey::FindCoordinator, 3, &request);
    assert_eq!(response.error_code, 0, "{response:?}");
    format!("{}:{}", response.host.as_str(), response.port)
}

/// StreamsGroupDescribe (v0) of one group, asked of its coordinator.
pub fn describe_streams_group(
    addr: &str,
    group: &str,
) -> kafka_protocol::messages::streams_group_describe_response::DescribedGroup {
    let coordinator = group_coordinator(addr, group);
    let request = kafka_protocol::messages::StreamsGroupDescribeRequest::default()
        .with_group_ids(vec![kafka_protocol::messages::GroupId(text(group))]);
    let mut response: kafka_protocol::messages::StreamsGroupDescribeResponse = call(
        &mut connect(&coordinator),
        ApiKey::StreamsGroupDescribe,
        0,
        &request,
    );
    response.groups.remove(0)
}
