//! Requests that wait (a long-polling Fetch, a JoinGroup at its barrier) when the thing they
//! wait on goes away: the broker shuts down, or the fetched topic is deleted. Each waiting
//! client gets a response (not a hang, not a connection dropped at the end of the shutdown
//! grace period), and the broker exits cleanly or keeps serving.
//!
//! The broker runs in this process through `lograil::run` on a runtime of its own; the
//! clients are plain blocking sockets on the test thread. The waits asked for are ten minutes
//! long, far past the limits after which this test calls a wait a hang, so an answer can only
//! come from the event under test. No timing is asserted beyond those hang limits.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::{
    ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FetchRequest, FetchResponse, GroupId, JoinGroupRequest,
    JoinGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use log_core::batch;
use test_support::kafka::{create_topic, name, produce, wait_until};
use test_support::wire::{self, call, receive, send};
use test_support::InProcess;

/// Ten minutes: what the waiting requests ask for, and the rebalance delay of a new group.
const LONG: i32 = 600_000;
/// How long a client or the test waits before it calls the broker hung.
const HANG: Duration = Duration::from_secs(60);

/// A broker in this process whose new groups wait ten minutes at their first join barrier:
/// a barrier that only shutdown can end within the test.
fn start() -> InProcess {
    InProcess::start(2, |config| {
        config.groups.initial_rebalance_delay = Duration::from_millis(LONG as u64)
    })
}

/// A connection that calls the broker hung after [`HANG`].
fn client(broker: &InProcess) -> TcpStream {
    let stream = wire::connect(&broker.addr);
    stream.set_read_timeout(Some(HANG)).unwrap();
    stream
}

/// One small batch of `value`.
fn one(value: &[u8]) -> Bytes {
    batch::build(&[(None, Some(value), 1)])
}

/// A fetch of partition 0 from `offset` that waits up to `max_wait_ms` for one byte.
fn fetch_request(topic: &str, offset: i64, max_wait_ms: i32) -> FetchRequest {
    test_support::kafka::fetch_request(topic, offset, max_wait_ms, 1 << 20)
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
        call(&mut client(broker), ApiKey::DescribeGroups, 5, &request);
    let group = &response.groups[0];
    (group.group_state.to_string(), group.members.len())
}

#[test]
fn shutdown_answers_a_long_poll_fetch_and_a_join_at_its_barrier() {
    let mut broker = start();
    create_topic(&broker.addr, "quiet", 1);

    // A fetch at the end of an empty partition, asking to wait ten minutes for one byte.
    let mut fetcher = client(&broker);
    send(
        &mut fetcher,
        ApiKey::Fetch,
        12,
        &fetch_request("quiet", 0, LONG),
    );
    // The first member of a new group: its JoinGroup (v3, no member id round) waits at the
    // barrier for the initial rebalance delay, ten minutes.
    let mut joiner = client(&broker);
    send(&mut joiner, ApiKey::JoinGroup, 3, &join_request("g"));
    wait_until("the member waits at the join barrier", HANG, || {
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
    let fetched: FetchResponse = receive(&mut fetcher, ApiKey::Fetch, 12);
    assert_eq!(fetched.error_code, 0);
    let partition = &fetched.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert_eq!(partition.high_watermark, 0);
    assert!(partition.records.as_ref().is_none_or(Bytes::is_empty));
    let joined: JoinGroupResponse = receive(&mut joiner, ApiKey::JoinGroup, 3);
    assert_eq!(joined.error_code, 15, "COORDINATOR_NOT_AVAILABLE");

    broker.wait_for_exit(HANG);
    // And the connections end: EOF, not a hang.
    assert!(wire::closed(&mut fetcher));
    assert!(wire::closed(&mut joiner));
}

#[test]
fn deleting_a_topic_answers_the_fetches_waiting_on_it() {
    let mut broker = start();
    create_topic(&broker.addr, "doomed", 1);
    create_topic(&broker.addr, "kept", 1);
    assert_eq!(produce(&broker.addr, "doomed", 0, one(b"one")), (0, 0));

    // Long-polls at the end of the doomed topic (offset 1), ten minutes each, on two
    // connections; and one on the kept topic that must not be disturbed.
    let mut fetchers: Vec<TcpStream> = (0..2).map(|_| client(&broker)).collect();
    for f in &mut fetchers {
        send(f, ApiKey::Fetch, 12, &fetch_request("doomed", 1, LONG));
    }
    let mut bystander = client(&broker);
    send(
        &mut bystander,
        ApiKey::Fetch,
        12,
        &fetch_request("kept", 0, LONG),
    );
    // A round trip on another connection, then none of them has been answered.
    assert_eq!(produce(&broker.addr, "kept", 0, one(b"warm-up")), (0, 0));
    let mut bystander_answer: FetchResponse = receive(&mut bystander, ApiKey::Fetch, 12);
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
        &mut client(&broker),
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
        let fetched: FetchResponse = receive(f, ApiKey::Fetch, 12);
        let p = &fetched.responses[0].partitions[0];
        assert_eq!(p.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
        assert!(p.records.as_ref().is_none_or(Bytes::is_empty));
    }
    // The other topic's long-poll is still waiting, and still wakes on its data.
    assert!(still_waiting(&mut bystander));
    assert_eq!(produce(&broker.addr, "kept", 0, one(b"two")), (0, 1));
    bystander_answer = receive(&mut bystander, ApiKey::Fetch, 12);
    let p = &bystander_answer.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 2));
    let records = p.records.clone().unwrap();
    assert_eq!(record_batch::validate_all(&records).unwrap().len(), 1);

    // The broker keeps serving: the same connections fetch again, and the deleted name can
    // be created afresh and used.
    for f in &mut fetchers {
        let again: FetchResponse = call(f, ApiKey::Fetch, 12, &fetch_request("doomed", 0, 0));
        assert_eq!(again.responses[0].partitions[0].error_code, 3);
    }
    create_topic(&broker.addr, "doomed", 1);
    assert_eq!(produce(&broker.addr, "doomed", 0, one(b"reborn")), (0, 0));
    let reborn: FetchResponse = call(
        &mut fetchers[0],
        ApiKey::Fetch,
        12,
        &fetch_request("doomed", 0, LONG),
    );
    let p = &reborn.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 1));

    broker.signal_shutdown();
    broker.wait_for_exit(HANG);
}
