//! Transactions with librdkafka's transactional producer (through `rdkafka`) and read_committed
//! consumers against the real broker: commits seen, aborts never, offsets committed with the
//! transaction, zombies fenced, hanging transactions aborted after their timeout, and `kill -9`
//! between a transaction's steps.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, DescribeTransactionsRequest,
    DescribeTransactionsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProduceResponse, TransactionalId, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use test_support::kafka::{create_topic, name, text};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const PARTITIONS: i32 = 2;
const T: Duration = Duration::from_secs(30);

type TxnProducer = ThreadedProducer<DefaultProducerContext>;

fn txn_producer(addr: &str, id: &str, extra: &[(&str, &str)]) -> TxnProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", addr)
        .set("transactional.id", id)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000");
    for (k, v) in extra {
        config.set(*k, *v);
        if *k == "transaction.timeout.ms" {
            // librdkafka wants a message timeout within the transaction's.
            config.set("message.timeout.ms", *v);
        }
    }
    let producer: TxnProducer = config.create().expect("transactional producer");
    producer.init_transactions(T).expect("init_transactions");
    producer
}

/// Sends `values` to `topic` round robin over its partitions and waits until they are
/// acknowledged (in the producer's open transaction).
fn send(producer: &TxnProducer, topic: &str, values: &[String]) {
    for (i, v) in values.iter().enumerate() {
        let partition = i32::try_from(i).unwrap() % PARTITIONS;
        producer
            .send(
                BaseRecord::<str, str>::to(topic)
                    .payload(v.as_str())
                    .key(v.as_str())
                    .partition(partition),
            )
            .map_err(|(e, _)| e)
            .expect("send");
    }
    producer.flush(T).expect("flush");
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Every record value of `topic` up to its end as `isolation` sees it (read_committed: the
/// last stable offset).
fn read(addr: &str, topic: &str, isolation: &str) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "e2e-txn-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation)
        .set("fetch.wait.max.ms", "100")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut out = Vec::new();
    let mut at_end = HashSet::new();
    let deadline = Instant::now() + T;
    while at_end.len() < PARTITIONS as usize {
        assert!(
            Instant::now() < deadline,
            "{topic} not read to its end in {T:?}"
        );
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("consume error: {e}"),
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            }
        }
    }
    out.sort();
    out
}

/// Waits until `read` gives `expected` (the coordinator's timer acts within a few of its
/// 200 ms ticks); fails with the last read.
fn eventually(expected: Vec<String>, mut read: impl FnMut() -> Vec<String>) {
    let deadline = Instant::now() + T;
    loop {
        let got = read();
        if got == expected || Instant::now() > deadline {
            assert_eq!(got, expected);
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The offsets `group` committed on `topic`, by partition, as a read_committed consumer
/// (librdkafka's default) asks for them: with `require_stable`, so offsets an open
/// transaction holds are waited for (KIP-447).
fn committed(addr: &str, group: &str, topic: &str) -> HashMap<i32, i64> {
    committed_as(addr, group, topic, "read_committed", T).expect("committed")
}

/// As [`committed`], at `isolation` within `timeout`.
fn committed_as(
    addr: &str,
    group: &str,
    topic: &str,
    isolation: &str,
    timeout: Duration,
) -> Result<HashMap<i32, i64>, rdkafka::error::KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .expect("consumer");
    let mut wanted = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        wanted.add_partition(topic, p);
    }
    let list = consumer.committed_offsets(wanted, timeout)?;
    Ok(list
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect())
}

#[test]
fn committed_transactions_are_read_aborted_never_and_offsets_commit_with_them() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "txn-out", PARTITIONS);
    create_topic(&broker.addr, "txn-in", PARTITIONS);
    let producer = txn_producer(&broker.addr, "e2e-commit", &[]);
    // A consumer of the group whose offsets the transaction commits (not subscribed: a
    // "simple" commit, generation -1).
    let group: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("group.id", "e2e-txn-group")
        .create()
        .unwrap();

    producer.begin_transaction().unwrap();
    send(&producer, "txn-out", &values("first", 10));
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("txn-in", 0, Offset::Offset(5))
        .unwrap();
    offsets
        .add_partition_offset("txn-in", 1, Offset::Offset(7))
        .unwrap();
    producer
        .send_offsets_to_transaction(&offsets, &group.group_metadata().unwrap(), T)
        .unwrap();
    let uncommitted = "read_uncommitted";
    let short = Duration::from_secs(3);
    assert!(
        committed_as(&broker.addr, "e2e-txn-group", "txn-in", uncommitted, T)
            .unwrap()
            .is_empty(),
        "offsets of an open transaction are not committed yet"
    );
    // A read_committed consumer (require_stable) is told UNSTABLE_OFFSET_COMMIT and waits.
    assert!(
        committed_as(
            &broker.addr,
            "e2e-txn-group",
            "txn-in",
            "read_committed",
            short
        )
        .is_err(),
        "the open transaction's offsets were answered as stable"
    );
    producer.commit_transaction(T).unwrap();
    assert_eq!(
        committed(&broker.addr, "e2e-txn-group", "txn-in"),
        HashMap::from([(0, 5), (1, 7)])
    );

    producer.begin_transaction().unwrap();
    send(&producer, "txn-out", &values("aborted", 10));
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("txn-in", 0, Offset::Offset(50))
        .unwrap();
    producer
        .send_offsets_to_transaction(&offsets, &group.group_metadata().unwrap(), T)
        .unwrap();
    producer.abort_transaction(T).unwrap();
    assert_eq!(
        committed(&broker.addr, "e2e-txn-group", "txn-in"),
        HashMap::from([(0, 5), (1, 7)]),
        "an aborted transaction's offsets are dropped"
    );

    producer.begin_transaction().unwrap();
    send(&producer, "txn-out", &values("second", 10));
    producer.commit_transaction(T).unwrap();

    let mut expected = values("first", 10);
    expected.extend(values("second", 10));
    assert_eq!(
        read(&broker.addr, "txn-out", "read_committed"),
        sorted(expected.clone())
    );
    // The aborted records are in the log: read_uncommitted sees them.
    expected.extend(values("aborted", 10));
    assert_eq!(
        read(&broker.addr, "txn-out", "read_uncommitted"),
        sorted(expected)
    );
}

#[test]
fn a_second_producer_of_the_transactional_id_fences_the_first() {
    let broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "txn-fence", PARTITIONS);
    let zombie = txn_producer(&broker.addr, "e2e-fence", &[]);
    zombie.begin_transaction().unwrap();
    send(&zombie, "txn-fence", &values("zombie", 4));

    // The new instance's InitProducerId aborts the zombie's transaction and bumps the epoch.
    let fresh = txn_producer(&broker.addr, "e2e-fence", &[]);
    let refused = zombie
        .commit_transaction(T)
        .expect_err("the zombie's commit is refused");
    assert!(
        refused.rdkafka_error_code().is_some_and(|c| matches!(
            c,
            rdkafka::types::RDKafkaErrorCode::Fenced
                | rdkafka::types::RDKafkaErrorCode::ProducerFenced
                | rdkafka::types::RDKafkaErrorCode::InvalidProducerEpoch
        )),
        "the zombie is fenced: {refused}"
    );
    fresh.begin_transaction().unwrap();
    send(&fresh, "txn-fence", &values("fresh", 4));
    fresh.commit_transaction(T).unwrap();
    assert_eq!(
        read(&broker.addr, "txn-fence", "read_committed"),
        sorted(values("fresh", 4))
    );
}

#[test]
fn a_hanging_transaction_is_aborted_after_its_timeout() {
    let broker = TestBroker::start_temp(&[
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "200",
    ]);
    create_topic(&broker.addr, "txn-hang", PARTITIONS);
    let hanging = txn_producer(
        &broker.addr,
        "e2e-hang",
        &[("transaction.timeout.ms", "1000")],
    );
    hanging.begin_transaction().unwrap();
    send(&hanging, "txn-hang", &values("hanging", 6));
    // Records written after the hanging ones by another producer become readable once the
    // coordinator aborts the hanging transaction (the last stable offset moves past it).
    let other = txn_producer(&broker.addr, "e2e-hang-other", &[]);
    other.begin_transaction().unwrap();
    send(&other, "txn-hang", &values("later", 4));
    other.commit_transaction(T).unwrap();
    // The coordinator aborts it with the epoch bumped (the producer's was 0).
    let aborted = state_after(&broker.addr, "e2e-hang", "CompleteAbort");
    assert_eq!(aborted.1, 1, "aborted at a bumped epoch");
    eventually(sorted(values("later", 4)), || {
        read(&broker.addr, "txn-hang", "read_committed")
    });
    // Its producer was fenced by the abort's bumped epoch.
    assert!(
        hanging.commit_transaction(T).is_err(),
        "a timed-out transaction cannot commit"
    );
}

#[test]
fn kill_9_between_a_transactions_steps_never_shows_an_abort_nor_loses_a_commit() {
    let mut broker = TestBroker::start_temp(&[
        "--flush-messages",
        "1",
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "200",
    ]);
    create_topic(&broker.addr, "txn-crash", PARTITIONS);
    {
        let producer = txn_producer(
            &broker.addr,
            "e2e-crash",
            &[("transaction.timeout.ms", "2000")],
        );
        producer.begin_transaction().unwrap();
        send(&producer, "txn-crash", &values("committed", 6));
        producer.commit_transaction(T).unwrap();
        // Killed right after EndTxn was answered: the commit is durable.
        broker.kill9();
        broker.restart();
    }
    assert_eq!(
        read(&broker.addr, "txn-crash", "read_committed"),
        sorted(values("committed", 6))
    );
    {
        // Killed between begin and commit: the open transaction comes back Ongoing and is
        // aborted once its timeout runs out.
        let producer = txn_producer(
            &broker.addr,
            "e2e-crash",
            &[("transaction.timeout.ms", "2000")],
        );
        producer.begin_transaction().unwrap();
        send(&producer, "txn-crash", &values("open", 6));
        broker.kill9();
        broker.restart();
    }
    let after = txn_producer(&broker.addr, "e2e-crash-after", &[]);
    after.begin_transaction().unwrap();
    send(&after, "txn-crash", &values("after", 2));
    after.commit_transaction(T).unwrap();
    let mut expected = values("committed", 6);
    expected.extend(values("after", 2));
    let expected = sorted(expected);
    // The open transaction is aborted after the restart, once its timeout has run out.
    state_after(&broker.addr, "e2e-crash", "CompleteAbort");
    eventually(expected.clone(), || {
        read(&broker.addr, "txn-crash", "read_committed")
    });
    // A new producer of the id after the restart fences the old one and commits.
    let again = txn_producer(&broker.addr, "e2e-crash", &[]);
    again.begin_transaction().unwrap();
    send(&again, "txn-crash", &values("again", 2));
    again.commit_transaction(T).unwrap();
    broker.kill9();
    broker.restart();
    let mut expected = expected;
    expected.extend(values("again", 2));
    assert_eq!(
        read(&broker.addr, "txn-crash", "read_committed"),
        sorted(expected)
    );
}

/// DescribeTransactions of `id`: (error code, state, producer id, epoch).
fn describe(addr: &str, id: &str) -> (i16, String, i64, i16) {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(text(id))]);
    let response: DescribeTransactionsResponse = call(
        &mut connect(addr),
        ApiKey::DescribeTransactions,
        0,
        &request,
    );
    let s = &response.transaction_states[0];
    (
        s.error_code,
        s.transaction_state.to_string(),
        s.producer_id.0,
        s.producer_epoch,
    )
}

/// Waits until `id` is in `state`; its (producer id, epoch) then.
fn state_after(addr: &str, id: &str, state: &str) -> (i64, i16) {
    let deadline = Instant::now() + T;
    loop {
        let (error, got, pid, epoch) = describe(addr, id);
        if (error, got.as_str()) == (0, state) {
            return (pid, epoch);
        }
        assert!(
            Instant::now() < deadline,
            "{id} is {got} (error {error}), not {state}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One transactional record of producer `pid` at `epoch`, sequence 0.
pub(crate) fn transactional_batch(pid: i64, epoch: i16) -> bytes::Bytes {
    use record_batch::build::{self, Record, Stamp};
    let mut buf = bytes::BytesMut::new();
    build::begin(&mut buf, 0);
    let record = Record {
        offset_delta: 0,
        timestamp_delta: 0,
        key: None,
        value: Some(&b"v"[..]),
        headers: std::iter::empty(),
    };
    build::put_record(&mut buf, record).unwrap();
    let stamp = Stamp {
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: 0,
        ..Stamp::new(record_batch::Codec::None, 1, 1)
    };
    build::finish(&mut buf, &stamp).unwrap();
    build::set_transactional(&mut buf).unwrap();
    buf.freeze()
}

/// InitProducerId for a transactional id: (error code, producer id, epoch).
pub(crate) fn init_raw(
    stream: &mut std::net::TcpStream,
    id: &str,
    timeout_ms: i32,
) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(text(id))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let r: InitProducerIdResponse = call(stream, ApiKey::InitProducerId, 4, &request);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

#[test]
fn the_coordinator_answers_as_kafka_on_the_wire() {
    let broker = TestBroker::start_temp(&["--transaction-max-timeout-ms", "5000"]);
    create_topic(&broker.addr, "txn-wire", PARTITIONS);
    let mut stream = connect(&broker.addr);

    let find: FindCoordinatorResponse = call(
        &mut stream,
        ApiKey::FindCoordinator,
        3,
        &FindCoordinatorRequest::default()
            .with_key(text("wire"))
            .with_key_type(1),
    );
    assert_eq!((find.error_code, find.node_id.0), (0, 1), "{find:?}");

    assert_eq!(
        init_raw(&mut stream, "wire", 5001).0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    let (error, pid, epoch) = init_raw(&mut stream, "wire", 5000);
    assert_eq!((error, epoch), (0, 0));
    assert_eq!(describe(&broker.addr, "wire"), (0, "Empty".into(), pid, 0));
    assert_eq!(
        describe(&broker.addr, "nobody").0,
        ResponseError::TransactionalIdNotFound.code()
    );

    // An unknown topic fails its partition; the others are not attempted, nothing added.
    let add = |stream: &mut std::net::TcpStream, topics: &[(&str, i32)], epoch: i16| {
        let topics = topics
            .iter()
            .map(|(t, p)| {
                AddPartitionsToTxnTopic::default()
                    .with_name(name(t))
                    .with_partitions(vec![*p])
            })
            .collect();
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text("wire")))
            .with_v3_and_below_producer_id(pid.into())
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(topics);
        let r: AddPartitionsToTxnResponse = call(stream, ApiKey::AddPartitionsToTxn, 3, &request);
        r.results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            })
            .collect::<Vec<i16>>()
    };
    assert_eq!(
        add(&mut stream, &[("txn-wire", 0), ("no-such-topic", 0)], 0),
        vec![
            ResponseError::OperationNotAttempted.code(),
            ResponseError::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(
        add(&mut stream, &[("txn-wire", 0)], 1),
        vec![ResponseError::ProducerFenced.code()],
        "another epoch is fenced"
    );
    assert_eq!(add(&mut stream, &[("txn-wire", 0)], 0), vec![0]);
    assert_eq!(describe(&broker.addr, "wire").1, "Ongoing");

    let list: ListTransactionsResponse = call(
        &mut stream,
        ApiKey::ListTransactions,
        1,
        &ListTransactionsRequest::default()
            .with_state_filters(vec![text("Ongoing"), text("Bogus")])
            .with_duration_filter(-1),
    );
    assert_eq!(list.unknown_state_filters, vec![text("Bogus")]);
    let listed: Vec<(String, i64)> = list
        .transaction_states
        .iter()
        .map(|s| (s.transactional_id.to_string(), s.producer_id.0))
        .collect();
    assert_eq!(listed, vec![("wire".to_string(), pid)]);

    // KIP-890 part 1: a transactional produce to a partition not in the transaction.
    let batch = transactional_batch(pid, 0);
    let produce = |partition: i32| {
        let mut request =
            test_support::kafka::produce_request("txn-wire", partition, Some(batch.clone()));
        request.transactional_id = Some(TransactionalId(text("wire")));
        let r: ProduceResponse = call(&mut connect(&broker.addr), ApiKey::Produce, 9, &request);
        r.responses[0].partition_responses[0].error_code
    };
    assert_eq!(produce(1), ResponseError::InvalidTxnState.code());
    assert_eq!(produce(0), 0);

    // A new producer of the id aborts the open transaction first: retry until it is done.
    assert_eq!(
        init_raw(&mut stream, "wire", 5000).0,
        ResponseError::ConcurrentTransactions.code()
    );
    let deadline = Instant::now() + T;
    let (error, again, epoch) = loop {
        let answer = init_raw(&mut stream, "wire", 5000);
        if answer.0 != ResponseError::ConcurrentTransactions.code() || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        (error, again, epoch),
        (0, pid, 2),
        "fenced at 1, bumped again"
    );

    // `kafka-transactions abort` writes a marker itself (WriteTxnMarkers): checked by the
    // partition against the epoch its markers reached (1, the fenced abort's).
    let markers = |epoch: i16, partition: i32| {
        let marker = WritableTxnMarker::default()
            .with_producer_id(pid.into())
            .with_producer_epoch(epoch)
            .with_transaction_result(false)
            .with_coordinator_epoch(0)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(name("txn-wire"))
                .with_partition_indexes(vec![partition])]);
        let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
        let r: WriteTxnMarkersResponse = call(
            &mut connect(&broker.addr),
            ApiKey::WriteTxnMarkers,
            1,
            &request,
        );
        r.markers[0].topics[0].partitions[0].error_code
    };
    assert_eq!(markers(0, 0), ResponseError::InvalidProducerEpoch.code());
    assert_eq!(markers(1, 0), 0);
    assert_eq!(markers(1, 9), ResponseError::UnknownTopicOrPartition.code());
}
