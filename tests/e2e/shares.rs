//! Share groups (KIP-932) spoken in raw protocol, step by step: a poison record that every
//! consumer dies on reaches its delivery limit and is dead-lettered, across a graceful restart
//! and a kill -9; records past their deadline are never delivered; bad acknowledgements get
//! Kafka's error codes and change nothing. (Real share consumers — librdkafka's, the Java
//! client's — are driven in `external_clients`.)

use std::net::TcpStream;
use std::time::{Duration, Instant};

use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatchAck,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::*;
use log_core::batch;

use test_support::kafka::{self, create_topic, set_configs, text, Record, GROUP_RESOURCE};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const INVALID_RECORD_STATE: i16 = 121;
const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_REQUEST: i16 = 42;

/// Produces records (value, headers) to partition 0 of `topic` in one batch.
fn produce(addr: &str, topic: &str, records: &[(&str, Vec<(&str, String)>)]) {
    let records = records.iter().map(|(value, headers)| {
        headers
            .iter()
            .fold(Record::new(*value), |r, (k, v)| r.header(*k, v.clone()))
    });
    kafka::produce_records(addr, topic, 0, records);
}

pub(crate) fn topic_id(addr: &str, name: &str) -> log_core::Uuid {
    let request =
        MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(text(name))))]));
    let response: MetadataResponse = call(&mut connect(addr), ApiKey::Metadata, 12, &request);
    response.topics[0].topic_id
}

/// One share consumer in raw protocol: a connection, its member id and session epoch.
pub(crate) struct Member {
    stream: TcpStream,
    group: String,
    id: String,
    session_epoch: i32,
    topic: log_core::Uuid,
    /// `MaxRecords` of its fetches.
    pub(crate) max_records: i32,
}

impl Member {
    pub(crate) fn join(addr: &str, group: &str, id: &str, topic: &str) -> Member {
        let mut stream = connect(addr);
        let request = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_member_id(text(id))
            .with_member_epoch(0)
            .with_subscribed_topic_names(Some(vec![TopicName(text(topic))]));
        let response: ShareGroupHeartbeatResponse =
            call(&mut stream, ApiKey::ShareGroupHeartbeat, 1, &request);
        assert_eq!(response.error_code, 0, "{:?}", response.error_message);
        let assignment = response.assignment.expect("assigned");
        assert_eq!(assignment.topic_partitions[0].partitions, vec![0]);
        Member {
            stream,
            group: group.to_string(),
            id: id.to_string(),
            session_epoch: 0,
            topic: assignment.topic_partitions[0].topic_id,
            max_records: 100,
        }
    }

    /// A ShareFetch of partition 0 carrying `acks` ((first, last, type)); the response.
    fn fetch_raw(&mut self, acks: &[(i64, i64, i8)], wait_ms: i32) -> ShareFetchResponse {
        let partition = FetchPartition::default()
            .with_partition_index(0)
            .with_acknowledgement_batches(
                acks.iter()
                    .map(|(first, last, kind)| {
                        AcknowledgementBatch::default()
                            .with_first_offset(*first)
                            .with_last_offset(*last)
                            .with_acknowledge_types(vec![*kind])
                    })
                    .collect(),
            );
        let request = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(text(&self.group))))
            .with_member_id(Some(text(&self.id)))
            .with_share_session_epoch(self.session_epoch)
            .with_max_wait_ms(wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(self.max_records)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(self.topic)
                .with_partitions(vec![partition])]);
        call(&mut self.stream, ApiKey::ShareFetch, 1, &request)
    }

    /// A ShareFetch v2 asking for `max_records` in ShareAcquireMode `mode` (0 batch_optimized,
    /// 1 record_limit); the acquired ranges of partition 0.
    fn fetch_v2(&mut self, max_records: i32, mode: i8) -> Vec<(i64, i64)> {
        let request = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(text(&self.group))))
            .with_member_id(Some(text(&self.id)))
            .with_share_session_epoch(self.session_epoch)
            .with_max_wait_ms(2000)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(max_records)
            .with_share_acquire_mode(mode)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(self.topic)
                .with_partitions(vec![
                    FetchPartition::default().with_partition_index(0)
                ])]);
        let response: ShareFetchResponse = call(&mut self.stream, ApiKey::ShareFetch, 2, &request);
        assert_eq!(response.error_code, 0, "{:?}", response.error_message);
        self.session_epoch += 1;
        response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .flat_map(|p| &p.acquired_records)
            .map(|a| (a.first_offset, a.last_offset))
            .collect()
    }

    /// Fetches; returns (offset, value, delivery count) of every record acquired.
    pub(crate) fn fetch(
        &mut self,
        acks: &[(i64, i64, i8)],
        wait_ms: i32,
    ) -> Vec<(i64, String, i16)> {
        let response = self.fetch_raw(acks, wait_ms);
        assert_eq!(response.error_code, 0, "{:?}", response.error_message);
        self.session_epoch += 1;
        let mut got = Vec::new();
        for partition in response.responses.iter().flat_map(|t| &t.partitions) {
            assert_eq!(partition.error_code, 0);
            assert_eq!(partition.acknowledge_error_code, 0);
            let records = batch::decode(partition.records.as_deref().unwrap_or_default()).unwrap();
            for acquired in &partition.acquired_records {
                for r in records
                    .iter()
                    .filter(|r| (acquired.first_offset..=acquired.last_offset).contains(&r.offset))
                {
                    let value = String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap();
                    got.push((r.offset, value, acquired.delivery_count));
                }
            }
        }
        got
    }

    /// A ShareAcknowledge of `acks` on partition 0 (v1): (top-level, partition) error codes.
    pub(crate) fn acknowledge(&mut self, acks: &[(i64, i64, Vec<i8>)]) -> (i16, i16) {
        let batches = acks
            .iter()
            .map(|(first, last, kinds)| {
                AckBatchAck::default()
                    .with_first_offset(*first)
                    .with_last_offset(*last)
                    .with_acknowledge_types(kinds.clone())
            })
            .collect();
        let response = self.send_acks(batches, 1, false);
        Self::codes(&response)
    }

    /// Releases `offset` with lograil's delay tag (10000): not deliverable again for `delay_ms`.
    fn release_after(&mut self, offset: i64, delay_ms: i64) -> (i16, i16) {
        let batch = AckBatchAck::default()
            .with_first_offset(offset)
            .with_last_offset(offset)
            .with_acknowledge_types(vec![2])
            .with_unknown_tagged_field(
                10_000,
                bytes::Bytes::copy_from_slice(&delay_ms.to_be_bytes()),
            );
        Self::codes(&self.send_acks(vec![batch], 1, false))
    }

    /// Renews the lock on `offset` (type 4) at `version`, saying so (`IsRenewAck`) when it can.
    fn renew(&mut self, offset: i64, version: i16) -> ShareAcknowledgeResponse {
        let batch = AckBatchAck::default()
            .with_first_offset(offset)
            .with_last_offset(offset)
            .with_acknowledge_types(vec![4]);
        self.send_acks(vec![batch], version, version >= 2)
    }

    fn send_acks(
        &mut self,
        batches: Vec<AckBatchAck>,
        version: i16,
        renew: bool,
    ) -> ShareAcknowledgeResponse {
        let request = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(text(&self.group))))
            .with_member_id(Some(text(&self.id)))
            .with_share_session_epoch(self.session_epoch)
            .with_is_renew_ack(renew)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(self.topic)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches)])]);
        let response: ShareAcknowledgeResponse = call(
            &mut self.stream,
            ApiKey::ShareAcknowledge,
            version,
            &request,
        );
        if response.error_code == 0 {
            self.session_epoch += 1;
        }
        response
    }

    fn codes(response: &ShareAcknowledgeResponse) -> (i16, i16) {
        let partition = response
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(0, |p| p.error_code);
        (response.error_code, partition)
    }
}

/// DescribeShareGroupOffsets v1 of partition 0: (start offset, lag).
fn share_offset(addr: &str, group: &str, topic: &str) -> (i64, i64) {
    use kafka_protocol::messages::describe_share_group_offsets_request::{
        DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
    };
    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(text(topic)))
                .with_partitions(vec![0])])),
    ]);
    let response: DescribeShareGroupOffsetsResponse = call(
        &mut connect(addr),
        ApiKey::DescribeShareGroupOffsets,
        1,
        &request,
    );
    let partition = &response.groups[0].topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    (partition.start_offset, partition.lag)
}

/// Every record of partition 0 of `topic`: (value, headers).
/// A dead-letter topic as Kafka 4.4 takes one: `errors.deadletterqueue.group.enable=true`.
pub(crate) fn create_dlq(addr: &str, topic: &str) {
    let code = kafka::try_create_topic(
        addr,
        topic,
        1,
        &[("errors.deadletterqueue.group.enable", "true")],
    );
    assert_eq!(code, 0, "creating {topic}");
}

/// Every record of partition 0 of `topic`: its value (empty when null) and headers.
pub(crate) fn read_all(addr: &str, topic: &str) -> Vec<(String, Vec<(String, String)>)> {
    let request = kafka::fetch_request(topic, 0, 0, 1 << 20);
    let response: FetchResponse = call(&mut connect(addr), ApiKey::Fetch, 12, &request);
    let records = response.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    batch::decode(&records)
        .unwrap()
        .into_iter()
        .map(|r| {
            let headers = r
                .headers
                .iter()
                .map(|(k, v)| {
                    let value = v.as_ref().map(|v| String::from_utf8_lossy(v).into_owned());
                    (k.clone(), value.unwrap_or_default())
                })
                .collect();
            let value = r.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
            (value.unwrap_or_default(), headers)
        })
        .collect()
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Fetches until `want` records came back (locks run out meanwhile), at most 20 s.
fn fetch_until(member: &mut Member, want: usize) -> Vec<(i64, String, i16)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = member.fetch(&[], 500);
        if got.len() >= want {
            return got;
        }
        assert!(Instant::now() < deadline, "only {got:?} came back");
    }
}

#[test]
fn a_poison_record_is_dead_lettered_after_its_delivery_limit_across_restarts_and_kill_9() {
    let mut broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "tasks", 1);
    create_dlq(&broker.addr, "dlq.tasks");
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "workers",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("group.share.delivery.count.limit", "3"),
            ("group.share.record.lock.duration.ms", "1000"),
            ("errors.deadletterqueue.topic.name", "dlq.tasks"),
            ("errors.deadletterqueue.copy.record.enable", "true"),
        ],
    );
    produce(
        &broker.addr,
        "tasks",
        &[
            ("ok-0", vec![]),
            ("poison", vec![("trace", "t-1".into())]),
            ("ok-2", vec![]),
        ],
    );
    // Delivery 1: the healthy records are accepted; the worker dies on the poison one.
    let mut a = Member::join(&broker.addr, "workers", "worker-a", "tasks");
    let got = a.fetch(&[], 2000);
    assert_eq!(
        got.iter().map(|(o, _, d)| (*o, *d)).collect::<Vec<_>>(),
        vec![(0, 1), (1, 1), (2, 1)]
    );
    a.acknowledge(&[(0, 0, vec![1]), (2, 2, vec![1])]);
    // The broker restarts gracefully while worker-a hangs; the lock did not survive, the
    // delivery count did.
    broker.stop();
    drop(a);
    broker.restart();
    let mut b = Member::join(&broker.addr, "workers", "worker-b", "tasks");
    assert_eq!(fetch_until(&mut b, 1), vec![(1, "poison".to_string(), 2)]);
    // worker-b hangs with its connection open: the record comes back when its lock runs out.
    // Delivery 3, then the broker is killed.
    let mut c = Member::join(&broker.addr, "workers", "worker-c", "tasks");
    assert_eq!(fetch_until(&mut c, 1), vec![(1, "poison".to_string(), 3)]);
    drop(b);
    broker.kill9();
    broker.restart();
    // Its deliveries are used up: the next fetch archives it, dead-letters it, and returns
    // nothing; the queue flows on.
    produce(&broker.addr, "tasks", &[("ok-3", vec![])]);
    let mut d = Member::join(&broker.addr, "workers", "worker-d", "tasks");
    let got = fetch_until(&mut d, 1);
    assert_eq!(got, vec![(3, "ok-3".to_string(), 1)]);
    let dead = read_all(&broker.addr, "dlq.tasks");
    assert_eq!(dead.len(), 1, "{dead:?}");
    let (value, headers) = &dead[0];
    assert_eq!(value, "poison");
    assert_eq!(
        header(headers, "trace"),
        None,
        "the record's own headers are not copied (Kafka 4.4)"
    );
    assert_eq!(header(headers, "__dlq.errors.topic"), Some("tasks"));
    assert_eq!(header(headers, "__dlq.errors.partition"), Some("0"));
    assert_eq!(header(headers, "__dlq.errors.offset"), Some("1"));
    assert_eq!(header(headers, "__dlq.errors.group"), Some("workers"));
    assert_eq!(header(headers, "__dlq.errors.delivery.count"), Some("3"));
    assert_eq!(
        header(headers, "__dlq.errors.message"),
        Some("Offset delivery count exceeded the threshold.")
    );
    let attempts: serde_json::Value =
        serde_json::from_str(header(headers, "lograil.dlq.attempts").unwrap()).unwrap();
    let attempts: Vec<(&str, &str)> = attempts
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["member"].as_str().unwrap(),
                a["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    // worker-a's and worker-c's locks were lost with the broker (a restart ends no delivery
    // on record); worker-b's ran out while the broker ran.
    assert_eq!(attempts, vec![("worker-b", "lock timed out")]);
}

#[test]
fn a_record_past_its_deadline_is_never_delivered_and_goes_to_the_dead_letters() {
    // The dead-letter topic is created at the first dead letter, as the broker setting asks.
    let broker =
        TestBroker::start_temp(&["--errors-deadletterqueue-auto-create-topics-enable", "true"]);
    create_topic(&broker.addr, "jobs", 1);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("errors.deadletterqueue.topic.name", "dlq.jobs"),
            ("errors.deadletterqueue.copy.record.enable", "true"),
        ],
    );
    let now = log_core::now_ms();
    produce(
        &broker.addr,
        "jobs",
        &[
            ("late", vec![("deadline", (now - 1000).to_string())]),
            ("in-time", vec![("deadline", (now + 3_600_000).to_string())]),
            ("no-deadline", vec![]),
        ],
    );
    let mut m = Member::join(&broker.addr, "g", "m", "jobs");
    let got: Vec<String> = fetch_until(&mut m, 2)
        .into_iter()
        .map(|(_, v, _)| v)
        .collect();
    assert_eq!(got, vec!["in-time", "no-deadline"]);
    let dead = read_all(&broker.addr, "dlq.jobs");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].0, "late");
    assert_eq!(
        header(&dead[0].1, "__dlq.errors.message"),
        Some("Offset deadline passed before delivery.")
    );
}

#[test]
fn bad_acknowledgements_get_kafkas_errors_and_change_nothing() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "q", 1);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[("share.auto.offset.reset", "earliest")],
    );
    produce(
        &broker.addr,
        "q",
        &[("r0", vec![]), ("r1", vec![]), ("r2", vec![])],
    );
    let mut a = Member::join(&broker.addr, "g", "a", "q");
    let mut b = Member::join(&broker.addr, "g", "b", "q");
    assert_eq!(a.fetch(&[], 2000).len(), 3, "a holds all three");
    // b opens its session, gets nothing, and cannot acknowledge a's records.
    assert!(b.fetch(&[], 0).is_empty());
    assert_eq!(b.acknowledge(&[(0, 0, vec![1])]), (0, INVALID_RECORD_STATE));
    // Overlapping or backwards ranges, and types that do not fit the range.
    assert_eq!(
        a.acknowledge(&[(0, 1, vec![1]), (1, 2, vec![1])]),
        (0, INVALID_REQUEST)
    );
    assert_eq!(a.acknowledge(&[(2, 1, vec![1])]), (0, INVALID_REQUEST));
    assert_eq!(a.acknowledge(&[(0, 2, vec![1, 1])]), (0, INVALID_REQUEST));
    // An offset nobody holds.
    assert_eq!(a.acknowledge(&[(7, 7, vec![1])]), (0, INVALID_RECORD_STATE));
    // A wrong session epoch, and a member that never joined.
    a.session_epoch += 5;
    assert_eq!(
        a.acknowledge(&[(0, 0, vec![1])]).0,
        INVALID_SHARE_SESSION_EPOCH
    );
    a.session_epoch -= 5;
    let mut ghost = Member {
        stream: connect(&broker.addr),
        group: "g".into(),
        id: "ghost".into(),
        session_epoch: 0,
        topic: topic_id(&broker.addr, "q"),
        max_records: 100,
    };
    assert_eq!(ghost.fetch_raw(&[], 0).error_code, UNKNOWN_MEMBER_ID);
    // Nothing changed: a still holds all three and accepts them.
    assert_eq!(a.acknowledge(&[(0, 2, vec![1])]), (0, 0));
    produce(&broker.addr, "q", &[("r3", vec![])]);
    let got: Vec<i64> = fetch_until(&mut b, 1)
        .into_iter()
        .map(|(o, _, _)| o)
        .collect();
    assert_eq!(got, vec![3], "0..2 were accepted once, by their holder");
}

#[test]
fn a_release_can_carry_a_delay_before_the_record_comes_back() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "later", 1);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[("share.auto.offset.reset", "earliest")],
    );
    produce(
        &broker.addr,
        "later",
        &[("backoff", vec![]), ("now", vec![])],
    );
    let mut m = Member::join(&broker.addr, "g", "m", "later");
    assert_eq!(m.fetch(&[], 2000).len(), 2);
    // A delay long enough that the next fetch comes well within it on a loaded machine.
    assert_eq!(m.release_after(0, 4000), (0, 0));
    assert_eq!(m.acknowledge(&[(1, 1, vec![2])]), (0, 0));
    // Only the record released without a delay is there at once.
    let at_once: Vec<(i64, i16)> = m
        .fetch(&[], 0)
        .into_iter()
        .map(|(o, _, d)| (o, d))
        .collect();
    assert_eq!(at_once, vec![(1, 2)]);
    // The other comes back once its delay is over.
    let later: Vec<(i64, i16)> = fetch_until(&mut m, 1)
        .into_iter()
        .map(|(o, _, d)| (o, d))
        .collect();
    assert_eq!(later, vec![(0, 2)]);
}

#[test]
fn records_come_back_at_once_when_their_consumers_connection_closes() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "jobs", 1);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[
            ("share.auto.offset.reset", "earliest"),
            // Far longer than the test may take: only the closed connection can free them.
            ("share.record.lock.duration.ms", "3600000"),
            ("errors.deadletterqueue.topic.name", "dlq.jobs"),
            ("errors.deadletterqueue.copy.record.enable", "true"),
            ("group.share.delivery.count.limit", "2"),
        ],
    );
    produce(&broker.addr, "jobs", &[("a", vec![]), ("b", vec![])]);
    create_dlq(&broker.addr, "dlq.jobs");
    let mut crashed = Member::join(&broker.addr, "g", "crashed", "jobs");
    assert_eq!(crashed.fetch(&[], 2000).len(), 2);
    drop(crashed);
    let mut next = Member::join(&broker.addr, "g", "next", "jobs");
    let got: Vec<(i64, i16)> = fetch_until(&mut next, 2)
        .into_iter()
        .map(|(o, _, d)| (o, d))
        .collect();
    assert_eq!(got, vec![(0, 2), (1, 2)]);
    // Reject one: its history names the closed session.
    assert_eq!(next.acknowledge(&[(0, 0, vec![3])]), (0, 0));
    let dead = read_all(&broker.addr, "dlq.jobs");
    assert_eq!(dead.len(), 1, "{dead:?}");
    let attempts: serde_json::Value =
        serde_json::from_str(header(&dead[0].1, "lograil.dlq.attempts").unwrap()).unwrap();
    assert_eq!(attempts[0]["member"], "crashed");
    assert_eq!(attempts[0]["outcome"], "session closed");
}

#[test]
fn a_consumer_renews_its_lock_and_the_lag_counts_what_is_left() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "slow", 1);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", "8000"),
        ],
    );
    produce(
        &broker.addr,
        "slow",
        &[("a", vec![]), ("b", vec![]), ("c", vec![])],
    );
    let mut m = Member::join(&broker.addr, "g", "m", "slow");
    assert_eq!(m.fetch(&[], 2000).len(), 3);
    assert_eq!(m.acknowledge(&[(0, 0, vec![1])]), (0, 0));
    assert_eq!(share_offset(&broker.addr, "g", "slow"), (1, 2));
    // RENEW needs v2's IsRenewAck.
    assert_eq!(
        Member::codes(&m.renew(1, 1)),
        (0, INVALID_REQUEST),
        "a v1 acknowledgement cannot renew"
    );
    // Halfway through the lock, offset 1's is renewed; offset 2's runs out. (Each step has
    // half a lock, 4 s, to spare on a loaded machine.)
    std::thread::sleep(Duration::from_millis(4000));
    let renewed = m.renew(1, 2);
    assert_eq!(Member::codes(&renewed), (0, 0));
    assert_eq!(renewed.acquisition_lock_timeout_ms, 8000);
    let mut other = Member::join(&broker.addr, "g", "other", "slow");
    let got: Vec<(i64, i16)> = fetch_until(&mut other, 1)
        .into_iter()
        .map(|(o, _, d)| (o, d))
        .collect();
    assert_eq!(
        got,
        vec![(2, 2)],
        "only the lock that was not renewed ran out"
    );
    assert_eq!(m.acknowledge(&[(1, 1, vec![1])]), (0, 0), "m still holds 1");
    assert_eq!(other.acknowledge(&[(2, 2, vec![1])]), (0, 0));
    assert_eq!(share_offset(&broker.addr, "g", "slow"), (3, 0));
}

#[test]
fn acquisitions_end_with_a_batch_unless_the_consumer_asks_for_a_strict_limit() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "batches", 1);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[("share.auto.offset.reset", "earliest")],
    );
    // Two batches of ten records: offsets 0..=9 and 10..=19.
    for batch in ["a", "b"] {
        let records: Vec<(String, Vec<(&str, String)>)> =
            (0..10).map(|i| (format!("{batch}{i}"), vec![])).collect();
        let records: Vec<(&str, Vec<(&str, String)>)> = records
            .iter()
            .map(|(v, h)| (v.as_str(), h.clone()))
            .collect();
        produce(&broker.addr, "batches", &records);
    }
    let mut m = Member::join(&broker.addr, "g", "m", "batches");
    // record_limit: exactly what was asked for.
    assert_eq!(m.fetch_v2(3, 1), vec![(0, 2)]);
    // batch_optimized (Kafka's default): up to the end of the batch holding the last record
    // asked for, so no batch is sent for a part of its records.
    assert_eq!(m.fetch_v2(3, 0), vec![(3, 9)]);
    // Past the log end there is nothing more to align with.
    assert_eq!(m.fetch_v2(15, 0), vec![(10, 19)]);
}

#[test]
fn the_record_lock_limit_is_checked_before_a_batch_and_never_splits_one() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "locks", 1);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("group.share.partition.max.record.locks", "100"),
        ],
    );
    // Three batches of 150 records: 0..=149, 150..=299, 300..=449.
    for batch in ["a", "b", "c"] {
        let records: Vec<(String, Vec<(&str, String)>)> =
            (0..150).map(|i| (format!("{batch}{i}"), vec![])).collect();
        let records: Vec<(&str, Vec<(&str, String)>)> = records
            .iter()
            .map(|(v, h)| (v.as_str(), h.clone()))
            .collect();
        produce(&broker.addr, "locks", &records);
    }
    let mut m = Member::join(&broker.addr, "g", "m", "locks");
    // Room for 100 locks: the acquisition runs on to the end of the batch.
    assert_eq!(m.fetch_v2(500, 0), vec![(0, 149)]);
    // No room left: nothing, in either mode (not a slice of the next batch).
    assert_eq!(m.fetch_v2(500, 0), vec![]);
    assert_eq!(m.fetch_v2(500, 1), vec![]);
    // 100 accepted leave 50 held: room for 50, and the next batch comes whole.
    assert_eq!(m.acknowledge(&[(0, 99, vec![1])]), (0, 0));
    assert_eq!(m.fetch_v2(500, 0), vec![(150, 299)]);
    // The strict mode keeps the limit exactly.
    assert_eq!(m.acknowledge(&[(100, 299, vec![1])]), (0, 0));
    assert_eq!(m.fetch_v2(500, 1), vec![(300, 399)]);
}

#[test]
fn share_group_counts_lock_age_and_dead_letters_show_in_the_metrics() {
    use crate::metrics::{must, scrape, value};
    let broker = TestBroker::start_temp(&["--metrics-listen", "127.0.0.1:0"]);
    let metrics = broker.metrics_addr.clone().unwrap();
    create_topic(&broker.addr, "m-tasks", 1);
    create_dlq(&broker.addr, "dlq.m-tasks");
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "m-workers",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("errors.deadletterqueue.topic.name", "dlq.m-tasks"),
        ],
    );
    produce(
        &broker.addr,
        "m-tasks",
        &[("a", vec![]), ("b", vec![]), ("c", vec![])],
    );
    let mut member = Member::join(&broker.addr, "m-workers", "worker", "m-tasks");
    assert_eq!(member.fetch(&[], 2000).len(), 3);
    // Offset 1 done, offset 2 rejected (archived and dead-lettered), offset 0 still held.
    assert_eq!(
        member.acknowledge(&[(1, 1, vec![1]), (2, 2, vec![3])]),
        (0, 0)
    );

    let p0 = [
        ("group", "m-workers"),
        ("topic", "m-tasks"),
        ("partition", "0"),
    ];
    let state = |s: &'static str| {
        [
            ("group", "m-workers"),
            ("topic", "m-tasks"),
            ("partition", "0"),
            ("state", s),
        ]
    };
    // The lock on offset 0 ages while it is held.
    let deadline = Instant::now() + Duration::from_secs(20);
    let samples = loop {
        let samples = scrape(&metrics);
        if must(&samples, "lograil_share_group_oldest_lock_age_seconds", &p0) >= 1.0 {
            break samples;
        }
        assert!(Instant::now() < deadline, "the lock did not age to 1 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        must(&samples, "lograil_share_group_records", &state("available")),
        0.0
    );
    assert_eq!(
        must(&samples, "lograil_share_group_records", &state("acquired")),
        1.0
    );
    assert_eq!(
        must(&samples, "lograil_share_group_records", &state("archived")),
        1.0
    );
    assert_eq!(
        must(
            &samples,
            "lograil_dead_letter_records_total",
            &[("topic", "dlq.m-tasks")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "lograil_dead_letter_records_total",
            &[("topic", "m-tasks")]
        ),
        None
    );
    // The share fetch delivered the 3 records.
    assert_eq!(
        must(
            &samples,
            "lograil_topic_records_out_total",
            &[("topic", "m-tasks")]
        ),
        3.0
    );

    // Released: available again, no lock held.
    assert_eq!(member.acknowledge(&[(0, 0, vec![2])]), (0, 0));
    let samples = scrape(&metrics);
    assert_eq!(
        must(&samples, "lograil_share_group_records", &state("available")),
        1.0
    );
    assert_eq!(
        must(&samples, "lograil_share_group_records", &state("acquired")),
        0.0
    );
    assert_eq!(
        must(&samples, "lograil_share_group_oldest_lock_age_seconds", &p0),
        0.0
    );
    assert_eq!(
        must(
            &samples,
            "lograil_dead_letters_failed_total",
            &[("reason", "refused")]
        ),
        0.0
    );

    // A group whose dead-letter topic lacks Kafka's `dlq.` prefix: the rejected record is
    // archived without a copy, and the metric counts it.
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "m-refused",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("errors.deadletterqueue.topic.name", "m-tasks-dead"),
        ],
    );
    let mut refused = Member::join(&broker.addr, "m-refused", "worker", "m-tasks");
    assert_eq!(refused.fetch(&[], 2000).len(), 3);
    assert_eq!(refused.acknowledge(&[(0, 2, vec![3, 3, 1])]), (0, 0));
    let samples = scrape(&metrics);
    assert_eq!(
        must(
            &samples,
            "lograil_dead_letters_failed_total",
            &[("reason", "refused")]
        ),
        2.0
    );
    assert_eq!(
        must(
            &samples,
            "lograil_dead_letters_failed_total",
            &[("reason", "error")]
        ),
        0.0
    );
    assert_eq!(
        must(
            &samples,
            "lograil_dead_letter_records_total",
            &[("topic", "dlq.m-tasks")]
        ),
        1.0,
        "the first group's dead letter only"
    );
}

/// A share group over transactional data at `share.isolation.level=read_committed` delivers
/// committed records only: nothing from the open transaction on (the last stable offset), no
/// record of the aborted transaction, no transaction marker; a commit marker written while
/// the broker is down lets the rest through. At Kafka's default, read_uncommitted, a group
/// gets every record up to the high watermark but the markers.
#[test]
fn a_share_group_delivers_committed_records_only_when_read_committed() {
    use crate::transactions::{write, Write, LAYOUT, TOPIC};
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), LAYOUT);
    let mut broker = TestBroker::start(dir.path(), &[]);
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "u",
        &[("share.auto.offset.reset", "earliest")],
    );
    let mut u = Member::join(&broker.addr, "u", "m", TOPIC);
    let offsets: Vec<i64> = fetch_until(&mut u, 1)
        .into_iter()
        .map(|(o, _, _)| o)
        .collect();
    assert_eq!(offsets, [0, 1, 2, 3, 5, 7, 8, 9], "read_uncommitted");
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "g",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("share.isolation.level", "read_committed"),
        ],
    );
    let mut m = Member::join(&broker.addr, "g", "m", TOPIC);
    let got: Vec<(i64, String)> = fetch_until(&mut m, 1)
        .into_iter()
        .map(|(o, v, _)| (o, v))
        .collect();
    let expected = [(0, "p0"), (2, "committed-1"), (5, "committed-2"), (7, "p1")];
    let expected: Vec<(i64, String)> = expected.iter().map(|(o, v)| (*o, v.to_string())).collect();
    assert_eq!(got, expected);
    let acks: Vec<(i64, i64, i8)> = got.iter().map(|(o, _)| (*o, *o, 1)).collect();
    assert!(m.fetch(&acks, 1000).is_empty(), "nothing past the LSO");
    broker.stop();

    write(
        dir.path(),
        &[Write::End(7, record_batch::ControlType::Commit)],
    );
    broker.restart();
    let mut m = Member::join(&broker.addr, "g", "m2", TOPIC);
    let got: Vec<(i64, String)> = fetch_until(&mut m, 1)
        .into_iter()
        .map(|(o, v, _)| (o, v))
        .collect();
    assert_eq!(got, vec![(8, "open-1".to_string()), (9, "p2".to_string())]);
}
