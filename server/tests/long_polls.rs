//! Requests that wait (a long-polling Fetch, a JoinGroup at its barrier) when the thing they
//! wait on goes away: the broker shuts down, or the fetched topic is deleted. Each waiting
//! client gets a response (not a hang, not a connection dropped at the end of the shutdown
//! grace period), and the broker exits cleanly or keeps serving.
//!
//! The broker runs in this process through `lograil::run` on a runtime of its own; the
//! clients are plain blocking sockets on the test thread. The waits asked for are ten minutes
//! long, far past the limits after which this test calls a wait a hang, so an answer can only
//! come from the event under test. No timing is asserted beyond those hang limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../../tests/e2e/wire.rs"]
mod wire;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, FetchRequest, FetchResponse, GroupId,
    JoinGroupRequest, JoinGroupResponse, ProduceRequest, ProduceResponse, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use log_core::batch;
use wire::{call, connect, frame, read_response};

/// Ten minutes: what the waiting requests ask for, and the rebalance delay of a new group.
const LONG: i32 = 600_000;
/// How long a client or the test waits before it calls the broker hung.
const HANG: Duration = Duration::from_secs(60);

/// A broker serving in this process until `stop` is called.
struct InProcess {
    runtime: tokio::runtime::Runtime,
    addr: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<Result<(), lograil::ServeError>>>,
    _dir: tempfile::TempDir,
}

impl InProcess {
    fn start() -> InProcess {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut config = lograil::BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..lograil::BrokerConfig::default()
        };
        // A new group's first JoinGroup waits this long for more members: a barrier that
        // only shutdown can end within the test.
        config.groups.initial_rebalance_delay = Duration::from_millis(LONG as u64);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = runtime.spawn(lograil::run(listener, config, async {
            let _ = stopped.await;
        }));
        InProcess {
            runtime,
            addr,
            stop: Some(stop),
            server: Some(server),
            _dir: dir,
        }
    }

    fn connect(&self) -> TcpStream {
        let stream = connect(&self.addr);
        stream.set_read_timeout(Some(HANG)).unwrap();
        stream
    }

    /// Completes the shutdown future; `run` must then return `Ok` (within the hang limit).
    fn signal_shutdown(&mut self) {
        let _ = self.stop.take().expect("not stopped yet").send(());
    }

    fn wait_for_exit(&mut self) {
        let server = self.server.take().expect("still running");
        let exited = self
            .runtime
            .block_on(async { tokio::time::timeout(HANG, server).await })
            .expect("the broker did not exit after its shutdown signal");
        exited
            .expect("the broker task panicked")
            .expect("the broker returned an error");
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn create_topic(broker: &InProcess, topic: &str) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(-1)])
        .with_timeout_ms(30_000);
    let response: CreateTopicsResponse =
        call(&mut broker.connect(), ApiKey::CreateTopics, 5, &request);
    assert_eq!(response.topics[0].error_code, 0, "{topic} created");
}

/// Produces one small batch to partition 0; its error code and base offset.
fn produce(broker: &InProcess, topic: &str, value: &[u8]) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch::build(&[(None, Some(value), 1)])))])]);
    let response: ProduceResponse = call(&mut broker.connect(), ApiKey::Produce, 9, &request);
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A fetch of partition 0 from `offset` that waits up to `max_wait_ms` for one byte.
fn fetch_request(topic: &str, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])])
}

/// Sends a request whose answer is awaited later with [`response`].
fn send<T: kafka_protocol::protocol::Encodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &T,
) {
    stream.write_all(&frame(key, version, 77, request)).unwrap();
}

/// The response to a request [`send`] sent; fails on a closed connection (and, through the
/// read timeout, on a hang).
fn response<T: Decodable>(stream: &mut TcpStream, key: ApiKey, version: i16, what: &str) -> T {
    let mut body = read_response(stream)
        .unwrap_or_else(|| panic!("{what}: the connection was closed instead of answered"));
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 77);
    T::decode(&mut body, version).unwrap()
}

/// No response has come yet: the request is still waiting in the broker.
fn still_waiting(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let waiting = matches!(
        stream.peek(&mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    );
    stream.set_nonblocking(false).unwrap();
    waiting
}

fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < HANG, "not within {HANG:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn join_request(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(LONG)
        .with_member_id(StrBytes::default())
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(b"m"))])
}

fn group_state(broker: &InProcess, group: &str) -> (String, usize) {
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.to_string()))]);
    let response: DescribeGroupsResponse =
        call(&mut broker.connect(), ApiKey::DescribeGroups, 5, &request);
    let group = &response.groups[0];
    (group.group_state.to_string(), group.members.len())
}

#[test]
fn shutdown_answers_a_long_poll_fetch_and_a_join_at_its_barrier() {
    let mut broker = InProcess::start();
    create_topic(&broker, "quiet");

    // A fetch at the end of an empty partition, asking to wait ten minutes for one byte.
    let mut fetcher = broker.connect();
    send(
        &mut fetcher,
        ApiKey::Fetch,
        12,
        &fetch_request("quiet", 0, LONG),
    );
    // The first member of a new group: its JoinGroup (v3, no member id round) waits at the
    // barrier for the initial rebalance delay, ten minutes.
    let mut joiner = broker.connect();
    send(&mut joiner, ApiKey::JoinGroup, 3, &join_request("g"));
    wait_until("the member waits at the join barrier", || {
        group_state(&broker, "g") == ("PreparingRebalance".to_string(), 1)
    });
    // The fetch was sent before the join, on a connection of its own: it is long-polling by
    // now (a round trip through the same broker has finished since), and is not answered.
    assert!(still_waiting(&mut fetcher), "the fetch was answered early");
    assert!(still_waiting(&mut joiner), "the join was answered early");

    broker.signal_shutdown();

    // Each gets a real response: the fetch an empty one without error, the join
    // COORDINATOR_NOT_AVAILABLE (the client looks for the coordinator again). Had either
    // handler ignored shutdown, its connection would be dropped at the end of the grace
    // period and these reads would see a closed connection.
    let fetched: FetchResponse = response(&mut fetcher, ApiKey::Fetch, 12, "the fetch");
    assert_eq!(fetched.error_code, 0);
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.high_watermark, 0);
    assert!(partition.records.as_ref().is_none_or(Bytes::is_empty));
    let joined: JoinGroupResponse = response(&mut joiner, ApiKey::JoinGroup, 3, "the join");
    assert_eq!(joined.error_code, 15, "COORDINATOR_NOT_AVAILABLE");

    broker.wait_for_exit();
    // And the connections end: EOF, not a hang.
    assert!(wire::closed(&mut fetcher));
    assert!(wire::closed(&mut joiner));
}

#[test]
fn deleting_a_topic_answers_the_fetches_waiting_on_it() {
    let mut broker = InProcess::start();
    create_topic(&broker, "doomed");
    create_topic(&broker, "kept");
    assert_eq!(produce(&broker, "doomed", b"one"), (0, 0));

    // Long-polls at the end of the doomed topic (offset 1), ten minutes each, on two
    // connections; and one on the kept topic that must not be disturbed.
    let mut fetchers: Vec<TcpStream> = (0..2).map(|_| broker.connect()).collect();
    for f in &mut fetchers {
        send(f, ApiKey::Fetch, 12, &fetch_request("doomed", 1, LONG));
    }
    let mut bystander = broker.connect();
    send(
        &mut bystander,
        ApiKey::Fetch,
        12,
        &fetch_request("kept", 0, LONG),
    );
    // A round trip on another connection, then none of them has been answered.
    assert_eq!(produce(&broker, "kept", b"warm-up"), (0, 0));
    let mut bystander_answer: FetchResponse =
        response(&mut bystander, ApiKey::Fetch, 12, "the kept fetch");
    assert_eq!(
        bystander_answer.responses[0].partitions[0].high_watermark,
        1
    );
    send(
        &mut bystander,
        ApiKey::Fetch,
        12,
        &fetch_request("kept", 1, LONG),
    );
    for f in &mut fetchers {
        assert!(
            still_waiting(f),
            "a fetch of the doomed topic was answered early"
        );
    }

    let deleted: DeleteTopicsResponse = call(
        &mut broker.connect(),
        ApiKey::DeleteTopics,
        5,
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![name("doomed")])
            .with_timeout_ms(30_000),
    );
    assert_eq!(deleted.responses[0].error_code, 0);

    // Each waiting fetch is answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka completes the
    // delayed fetches of a deleted partition, rather than after its ten minutes.
    for f in &mut fetchers {
        let fetched: FetchResponse = response(f, ApiKey::Fetch, 12, "a fetch of the doomed topic");
        let p = &fetched.responses[0].partitions[0];
        assert_eq!(p.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
        assert!(p.records.as_ref().is_none_or(Bytes::is_empty));
    }
    // The other topic's long-poll is still waiting, and still wakes on its data.
    assert!(still_waiting(&mut bystander));
    assert_eq!(produce(&broker, "kept", b"two"), (0, 1));
    bystander_answer = response(&mut bystander, ApiKey::Fetch, 12, "the kept fetch");
    let p = &bystander_answer.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 2));
    let records = p.records.clone().unwrap();
    assert_eq!(batch::validate_all(&records).unwrap().len(), 1);

    // The broker keeps serving: the same connections fetch again, and the deleted name can
    // be created afresh and used.
    for f in &mut fetchers {
        let again: FetchResponse = call(f, ApiKey::Fetch, 12, &fetch_request("doomed", 0, 0));
        assert_eq!(again.responses[0].partitions[0].error_code, 3);
    }
    create_topic(&broker, "doomed");
    assert_eq!(produce(&broker, "doomed", b"reborn"), (0, 0));
    let reborn: FetchResponse = call(
        &mut fetchers[0],
        ApiKey::Fetch,
        12,
        &fetch_request("doomed", 0, LONG),
    );
    let p = &reborn.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 1));

    broker.signal_shutdown();
    broker.wait_for_exit();
}
