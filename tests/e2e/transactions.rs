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

use test_support::kafka::{create_topic, wait_until};
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

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The offsets `group` committed on `topic`, by partition.
fn committed(addr: &str, group: &str, topic: &str) -> HashMap<i32, i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut wanted = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        wanted.add_partition(topic, p);
    }
    let list = consumer.committed_offsets(wanted, T).expect("committed");
    list.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
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
    assert!(
        committed(&broker.addr, "e2e-txn-group", "txn-in").is_empty(),
        "offsets of an open transaction are not committed yet"
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
    wait_until("the hanging transaction is aborted", T, || {
        read(&broker.addr, "txn-hang", "read_committed") == sorted(values("later", 4))
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
    wait_until(
        "the open transaction is aborted after the restart",
        T,
        || read(&broker.addr, "txn-crash", "read_committed") == expected,
    );
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
