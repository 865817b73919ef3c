//! Transactions on the partition side with real clients: a partition holding transactional
//! batches from three producers, one transaction committed, one aborted, one left open, and
//! plain records between them (written through log-core with the broker's own control-batch
//! builder, as the transaction coordinator's markers are), served by the real binary. A
//! librdkafka consumer in `read_committed` (librdkafka's default) sees exactly the committed
//! records and nothing from the open transaction on, also after a kill -9 and restart; one in
//! `read_uncommitted` sees every data record; a marker written once the broker is stopped
//! ends the open transaction and the committed reader goes on.

use std::path::Path;
use std::time::Duration;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeProducersRequest, DescribeProducersResponse, ListOffsetsRequest,
    ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use log_core::{batch, Log, TopicConfig};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Message;
use record_batch::ControlType;
use test_support::kafka::rdkafka_reader;
use test_support::wire::{call, connect};
use test_support::TestBroker;

pub(crate) const TOPIC: &str = "txn";

/// Appends to `TOPIC`-0 of the data dir `dir` (no broker running): `(producer, value)` data
/// batches (producer -1: plain) and `(producer, kind)` markers.
pub(crate) enum Write {
    Plain(&'static str),
    Txn(i64, &'static str),
    End(i64, ControlType),
}

pub(crate) fn write(dir: &Path, writes: &[Write]) {
    let log = Log::open(dir).unwrap();
    if log.topic(TOPIC).is_none() {
        log.create_topic(TOPIC, 1, TopicConfig::default()).unwrap();
    }
    let partition = log.topic(TOPIC).unwrap().partitions()[0].clone();
    let mut sequences = std::collections::HashMap::new();
    for w in writes {
        let bytes = match w {
            Write::Plain(v) => batch::build(&[(None, Some(v.as_bytes()), 1)]).to_vec(),
            Write::Txn(pid, v) => {
                let seq = sequences.entry(*pid).or_insert(0);
                let mut b =
                    batch::build_for_producer(&[(None, Some(v.as_bytes()), 1)], *pid, 0, *seq)
                        .to_vec();
                *seq += 1;
                record_batch::build::set_transactional(&mut b).unwrap();
                b
            }
            Write::End(pid, kind) => record_batch::control_batch(*pid, 0, 0, *kind, 1),
        };
        partition.append(&bytes).unwrap();
    }
    log.close().unwrap();
}

/// Three transactions and plain records between them: producer 5's aborted, 6's committed,
/// 7's left open at offset 8 (the LSO; the high watermark is 10).
pub(crate) const LAYOUT: &[Write] = &[
    Write::Plain("p0"),                 // 0
    Write::Txn(5, "aborted-1"),         // 1
    Write::Txn(6, "committed-1"),       // 2
    Write::Txn(5, "aborted-2"),         // 3
    Write::End(5, ControlType::Abort),  // 4
    Write::Txn(6, "committed-2"),       // 5
    Write::End(6, ControlType::Commit), // 6
    Write::Plain("p1"),                 // 7
    Write::Txn(7, "open-1"),            // 8
    Write::Plain("p2"),                 // 9
];

/// The values `consumer` delivers until it has been quiet for `quiet`.
fn drain(consumer: &BaseConsumer, quiet: Duration) -> Vec<(i64, String)> {
    let mut seen = Vec::new();
    while let Some(message) = consumer.poll(quiet) {
        let message = message.unwrap();
        let value = String::from_utf8(message.payload().unwrap().to_vec()).unwrap();
        seen.push((message.offset(), value));
    }
    seen
}

/// ListOffsets LATEST of `TOPIC`-0 at `isolation_level` (0 uncommitted, 1 committed).
fn latest(addr: &str, isolation_level: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = call(&mut connect(addr), ApiKey::ListOffsets, 7, &request);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    partition.offset
}

fn reader(addr: &str, group: &str, isolation: &str) -> BaseConsumer {
    rdkafka_reader(addr, group, TOPIC, 0, &[("isolation.level", isolation)])
}

#[test]
fn read_committed_librdkafka_consumers_see_committed_records_only_across_kill_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    use Write::*;
    write(dir.path(), LAYOUT);
    let mut broker = TestBroker::start(dir.path(), &[]);
    let committed = |addr: &str, group: &str| {
        let consumer = reader(addr, group, "read_committed");
        drain(&consumer, Duration::from_secs(3))
    };
    let expected: Vec<(i64, String)> =
        [(0, "p0"), (2, "committed-1"), (5, "committed-2"), (7, "p1")]
            .into_iter()
            .map(|(o, v)| (o, v.to_string()))
            .collect();
    assert_eq!(committed(&broker.addr, "c1"), expected);

    let uncommitted = reader(&broker.addr, "u1", "read_uncommitted");
    let all: Vec<String> = drain(&uncommitted, Duration::from_secs(3))
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        all,
        [
            "p0",
            "aborted-1",
            "committed-1",
            "aborted-2",
            "committed-2",
            "p1",
            "open-1",
            "p2"
        ]
    );
    let (_, high) = uncommitted
        .fetch_watermarks(TOPIC, 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, 10, "the high watermark is past the open transaction");
    drop(uncommitted);

    // The open transaction is still open after a kill -9: the reader still stops at it.
    broker.kill9();
    broker.restart();
    assert_eq!(committed(&broker.addr, "c2"), expected);
    // What the broker says of it: ListOffsets' LATEST by isolation level, and DescribeProducers'
    // transaction start offsets (what `kafka-transactions find-hanging` reads).
    assert_eq!(
        latest(&broker.addr, 1),
        8,
        "read_committed LATEST is the LSO"
    );
    assert_eq!(latest(&broker.addr, 0), 10);
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partition_indexes(vec![0])]);
    let described: DescribeProducersResponse = call(
        &mut connect(&broker.addr),
        ApiKey::DescribeProducers,
        0,
        &request,
    );
    let starts: Vec<(i64, i64)> = described.topics[0].partitions[0]
        .active_producers
        .iter()
        .map(|p| (p.producer_id.0, p.current_txn_start_offset))
        .collect();
    assert_eq!(starts, vec![(5, -1), (6, -1), (7, 8)]);
    broker.stop();

    // Its commit marker: the committed reader goes on through it.
    write(dir.path(), &[End(7, ControlType::Commit), Plain("p3")]);
    broker.restart();
    let mut all_committed = expected.clone();
    all_committed.extend(
        [(8, "open-1"), (9, "p2"), (11, "p3")]
            .into_iter()
            .map(|(o, v)| (o, v.to_string())),
    );
    assert_eq!(committed(&broker.addr, "c3"), all_committed);
    broker.stop();
}
