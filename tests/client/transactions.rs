//! Transactions through our client: the transactional producer (commit, abort, offsets in the
//! transaction, a zombie fenced) and the `read_committed` consumer, each side also against
//! librdkafka's (a transactional rdkafka producer, a read_committed rdkafka consumer).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use consumer::{
    ConsumerGroupMetadata, Producer, ProducerRecord, SendError, TopicPartition, TransactionError,
    TransactionState,
};
use rdkafka::config::ClientConfig as RdConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use rdkafka::{Offset, TopicPartitionList};

use test_support::cluster::{unique, TestCluster};

/// A transactional producer of ours, initialized.
async fn txn_producer(cluster: &TestCluster, id: &str) -> Producer {
    let producer = cluster
        .producer(&[("transactional.id", id), ("linger.ms", "1")])
        .await;
    producer.init_transactions().await.unwrap();
    assert_eq!(producer.transaction_state(), Some(TransactionState::Ready));
    producer
}

/// Sends `values` to `topic` partition `partition` in the open transaction and waits until
/// each was acknowledged (written, not yet committed).
async fn send_all(producer: &Producer, topic: &str, partition: i32, values: &[&str]) {
    let mut deliveries = Vec::new();
    for v in values {
        let record = ProducerRecord::new(topic)
            .partition(partition)
            .value(v.to_string());
        deliveries.push(producer.send(record).await.unwrap());
    }
    for d in deliveries {
        d.await.unwrap();
    }
}

/// The values of `topic`'s partitions read from the beginning with `isolation.level`, until
/// `sentinel` has been read from each, sorted.
async fn read_values(
    cluster: &TestCluster,
    topic: &str,
    partitions: i32,
    isolation: &str,
    sentinel: &str,
) -> Vec<String> {
    let consumer = cluster
        .consumer(None, &[("isolation.level", isolation)])
        .await;
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(&tps).unwrap();
    consumer.seek_to_beginning(&tps).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    let mut sentinels = 0;
    while sentinels < partitions {
        let record = tokio::time::timeout_at(deadline.into(), consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("{sentinel} not read ({isolation}) in 60 s; read {out:?}"))
            .unwrap();
        let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
        if value == sentinel {
            sentinels += 1;
        } else {
            out.push(value);
        }
    }
    consumer.close().await;
    out.sort();
    out
}

/// Commits one record, `sentinel`, to each of the first `partitions` partitions in a
/// transaction of its own: once a reader has them all, everything before is decided.
async fn commit_sentinel(producer: &Producer, topic: &str, partitions: i32, sentinel: &str) {
    producer.begin_transaction().unwrap();
    for p in 0..partitions {
        send_all(producer, topic, p, &[sentinel]).await;
    }
    producer.commit_transaction().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_records_are_visible_to_read_committed_only_after_the_commit() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("txn-commit", 2).await;
    let producer = txn_producer(&cluster, &unique("txn-commit")).await;
    // Outside a transaction a transactional producer does not send.
    let refused = producer
        .send(ProducerRecord::new(&topic).value("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            SendError::Transaction(TransactionError::InvalidState {
                state: TransactionState::Ready,
                ..
            })
        ),
        "{refused:?}"
    );
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, 0, &["a0", "a1"]).await;
    // try_send cannot wait for AddPartitionsToTxn: only partitions already in the transaction.
    let not_added = producer
        .try_send(ProducerRecord::new(&topic).partition(1).value("b0"))
        .unwrap_err();
    assert!(
        matches!(
            not_added,
            SendError::Transaction(TransactionError::PartitionNotAdded { partition: 1, .. })
        ),
        "{not_added:?}"
    );
    producer
        .try_send(ProducerRecord::new(&topic).partition(0).value("a2"))
        .unwrap()
        .await
        .unwrap();
    send_all(&producer, &topic, 1, &["b0", "b1"]).await;
    // Written but open: read_uncommitted sees the records, read_committed's end (the last
    // stable offset) is before them.
    let reader = cluster
        .consumer(None, &[("isolation.level", "read_committed")])
        .await;
    let tps = [
        TopicPartition::new(&topic, 0),
        TopicPartition::new(&topic, 1),
    ];
    let lso = reader.end_offsets(&tps).await.unwrap();
    assert_eq!(
        lso[&tps[0]], 0,
        "the open transaction holds the last stable offset"
    );
    let plain = cluster.consumer(None, &[]).await;
    let hw = plain.end_offsets(&tps).await.unwrap();
    assert_eq!(hw[&tps[0]], 3);
    producer.commit_transaction().await.unwrap();
    assert_eq!(producer.transaction_state(), Some(TransactionState::Ready));
    // The coordinator writes the markers after EndTxn is answered: the LSO moves past them
    // soon after.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lso = reader.end_offsets(&tps).await.unwrap();
        if lso[&tps[0]] >= 4 && lso[&tps[1]] >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the LSO stays before the committed transaction: {lso:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    commit_sentinel(&producer, &topic, 2, "end").await;
    let seen = read_values(&cluster, &topic, 2, "read_committed", "end").await;
    assert_eq!(seen, ["a0", "a1", "a2", "b0", "b1"]);
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_records_are_never_visible_to_read_committed() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("txn-abort", 1).await;
    let producer = txn_producer(&cluster, &unique("txn-abort")).await;
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, 0, &["kept-1"]).await;
    producer.commit_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, 0, &["aborted-1", "aborted-2"]).await;
    // Queued, perhaps not sent: the abort fails it or it is aborted with the rest.
    let late = producer
        .send(ProducerRecord::new(&topic).partition(0).value("aborted-3"))
        .await
        .unwrap();
    producer.abort_transaction().await.unwrap();
    let _ = late.await;
    assert_eq!(producer.transaction_state(), Some(TransactionState::Ready));
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, 0, &["kept-2"]).await;
    producer.commit_transaction().await.unwrap();
    commit_sentinel(&producer, &topic, 1, "end").await;
    let committed = read_values(&cluster, &topic, 1, "read_committed", "end").await;
    assert_eq!(committed, ["kept-1", "kept-2"]);
    let all = read_values(&cluster, &topic, 1, "read_uncommitted", "end").await;
    assert!(
        all.contains(&"aborted-1".to_string()) && all.contains(&"aborted-2".to_string()),
        "read_uncommitted sees the aborted records: {all:?}"
    );
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_to_a_transaction_are_committed_only_with_it() {
    let cluster = TestCluster::start();
    let source = cluster.create_topic("txn-src", 1).await;
    let sink = cluster.create_topic("txn-sink", 1).await;
    let group = unique("txn-group");
    cluster
        .produce(
            &[],
            (0..6).map(|i| {
                ProducerRecord::new(&source)
                    .partition(0)
                    .value(format!("in-{i}"))
            }),
        )
        .await;
    let consumer = cluster
        .consumer(
            Some(&group),
            &[
                ("enable.auto.commit", "false"),
                ("isolation.level", "read_committed"),
            ],
        )
        .await;
    consumer.subscribe(&[&source]).unwrap();
    let producer = txn_producer(&cluster, &unique("txn-offsets")).await;
    let tp = TopicPartition::new(&source, 0);
    let mut admin = cluster.admin().await;
    let key = (source.clone(), 0);
    let mut read = Vec::new();
    while read.len() < 3 {
        read.push(consumer.recv().await.unwrap());
    }
    let metadata = consumer.group_metadata().unwrap();
    assert!(metadata.generation_id > 0, "{metadata:?}");
    assert!(!metadata.member_id.is_empty());
    let offsets = BTreeMap::from([(tp.clone(), read[2].offset + 1)]);
    // An aborted transaction's offsets are dropped.
    producer.begin_transaction().unwrap();
    send_all(&producer, &sink, 0, &["out-0"]).await;
    producer
        .send_offsets_to_transaction(&offsets, &metadata)
        .await
        .unwrap();
    producer.abort_transaction().await.unwrap();
    let committed = admin.committed_offsets(&group).await.unwrap();
    assert_eq!(committed.get(&key), None, "aborted offsets: {committed:?}");
    // A committed one's take effect.
    producer.begin_transaction().unwrap();
    send_all(&producer, &sink, 0, &["out-1"]).await;
    producer
        .send_offsets_to_transaction(&offsets, &metadata)
        .await
        .unwrap();
    let before = admin.committed_offsets(&group).await.unwrap();
    assert_eq!(before.get(&key), None, "not before the commit: {before:?}");
    // KIP-447: a read_committed consumer asks with require_stable and is told
    // UNSTABLE_OFFSET_COMMIT while the transaction holds offsets of the partition: it waits.
    let waiting = tokio::time::timeout(
        Duration::from_secs(3),
        consumer.committed(std::slice::from_ref(&tp)),
    )
    .await;
    assert!(
        !matches!(&waiting, Ok(Ok(c)) if c.is_empty() || c.get(&tp).is_some()),
        "the pending offsets were answered: {waiting:?}"
    );
    producer.commit_transaction().await.unwrap();
    // The consumer (read_committed) waits for stable offsets: the commit's.
    let after = consumer.committed(std::slice::from_ref(&tp)).await.unwrap();
    assert_eq!(after.get(&tp), Some(&3));
    // A generation the group does not have is refused: abortable, not fatal.
    let stale = ConsumerGroupMetadata {
        generation_id: metadata.generation_id + 100,
        ..metadata.clone()
    };
    producer.begin_transaction().unwrap();
    let refused = producer
        .send_offsets_to_transaction(&BTreeMap::from([(tp.clone(), 5)]), &stale)
        .await
        .unwrap_err();
    assert!(refused.is_abortable(), "{refused}");
    assert_eq!(
        producer.transaction_state(),
        Some(TransactionState::AbortableError)
    );
    assert!(producer
        .commit_transaction()
        .await
        .unwrap_err()
        .is_abortable());
    producer.abort_transaction().await.unwrap();
    let still = consumer.committed(std::slice::from_ref(&tp)).await.unwrap();
    assert_eq!(still.get(&tp), Some(&3));
    consumer.close().await;
    producer.close().await;
    let out = read_values_to_end(&cluster, &sink).await;
    assert_eq!(out, ["out-1"]);
}

/// Every value of partition 0 of `topic` up to its last stable offset, read_committed.
async fn read_values_to_end(cluster: &TestCluster, topic: &str) -> Vec<String> {
    let consumer = cluster
        .consumer(None, &[("isolation.level", "read_committed")])
        .await;
    let tp = TopicPartition::new(topic, 0);
    let end = consumer
        .end_offsets(std::slice::from_ref(&tp))
        .await
        .unwrap()[&tp];
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    consumer
        .seek_to_beginning(std::slice::from_ref(&tp))
        .unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while consumer.position(&tp).unwrap_or(0) < end {
        match tokio::time::timeout_at(deadline.into(), consumer.recv()).await {
            Ok(r) => out.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap()),
            Err(_) => panic!("{topic} not read to {end} in 30 s: {out:?}"),
        }
    }
    consumer.close().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_of_the_same_id_fences_the_first() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("txn-zombie", 1).await;
    let id = unique("txn-zombie");
    let zombie = txn_producer(&cluster, &id).await;
    zombie.begin_transaction().unwrap();
    send_all(&zombie, &topic, 0, &["zombie-1"]).await;
    // The new instance takes the id over; the zombie's open transaction is aborted.
    let successor = txn_producer(&cluster, &id).await;
    let fenced = zombie.commit_transaction().await.unwrap_err();
    assert!(fenced.is_fatal(), "{fenced}");
    assert!(matches!(fenced, TransactionError::Fenced(_)), "{fenced:?}");
    assert_eq!(
        zombie.transaction_state(),
        Some(TransactionState::FatalError)
    );
    // Fatal: nothing more goes through the zombie.
    assert!(zombie.begin_transaction().unwrap_err().is_fatal());
    successor.begin_transaction().unwrap();
    send_all(&successor, &topic, 0, &["successor-1"]).await;
    successor.commit_transaction().await.unwrap();
    commit_sentinel(&successor, &topic, 1, "end").await;
    let seen = read_values(&cluster, &topic, 1, "read_committed", "end").await;
    assert_eq!(seen, ["successor-1"]);
    successor.close().await;
}

fn rd_config(cluster: &TestCluster) -> RdConfig {
    let mut c = RdConfig::new();
    c.set("bootstrap.servers", cluster.plain_bootstrap());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_read_committed_sees_exactly_our_committed_records() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("txn-to-rd", 1).await;
    let producer = txn_producer(&cluster, &unique("txn-to-rd")).await;
    for round in 0..4 {
        producer.begin_transaction().unwrap();
        let values: Vec<String> = (0..3).map(|i| format!("r{round}-{i}")).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        send_all(&producer, &topic, 0, &refs).await;
        if round % 2 == 0 {
            producer.commit_transaction().await.unwrap();
        } else {
            producer.abort_transaction().await.unwrap();
        }
    }
    commit_sentinel(&producer, &topic, 1, "end").await;
    producer.close().await;
    let topic2 = topic.clone();
    let config = rd_config(&cluster);
    let seen = tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = config
            .clone()
            .set("group.id", unique("rd-read-committed"))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic2, 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut out = Vec::new();
        while Instant::now() < deadline {
            let Some(m) = consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            let m = m.unwrap();
            let v = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
            if v == "end" {
                return out;
            }
            out.push(v);
        }
        panic!("librdkafka did not read the sentinel in 60 s: {out:?}");
    })
    .await
    .unwrap();
    let expected: Vec<String> = [0, 2]
        .iter()
        .flat_map(|r| (0..3).map(move |i| format!("r{r}-{i}")))
        .collect();
    assert_eq!(seen, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_read_committed_consumer_sees_exactly_librdkafkas_committed_records() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("rd-to-txn", 1).await;
    let config = rd_config(&cluster);
    let topic2 = topic.clone();
    tokio::task::spawn_blocking(move || {
        let producer: BaseProducer = config
            .clone()
            .set("transactional.id", unique("rd-txn"))
            .create()
            .unwrap();
        let timeout = Duration::from_secs(30);
        producer.init_transactions(timeout).unwrap();
        for round in 0..4 {
            producer.begin_transaction().unwrap();
            for i in 0..3 {
                let v = format!("r{round}-{i}");
                producer
                    .send(BaseRecord::<(), _>::to(&topic2).partition(0).payload(&v))
                    .unwrap();
            }
            producer.flush(timeout).unwrap();
            if round % 2 == 0 {
                producer.commit_transaction(timeout).unwrap();
            } else {
                producer.abort_transaction(timeout).unwrap();
            }
        }
        producer.begin_transaction().unwrap();
        producer
            .send(BaseRecord::<(), _>::to(&topic2).partition(0).payload("end"))
            .unwrap();
        producer.commit_transaction(timeout).unwrap();
    })
    .await
    .unwrap();
    let seen = read_values(&cluster, &topic, 1, "read_committed", "end").await;
    let expected: Vec<String> = [0, 2]
        .iter()
        .flat_map(|r| (0..3).map(move |i| format!("r{r}-{i}")))
        .collect();
    assert_eq!(seen, expected);
    let all = read_values(&cluster, &topic, 1, "read_uncommitted", "end").await;
    assert_eq!(
        all.len(),
        12,
        "read_uncommitted sees aborted records too: {all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_record_makes_the_transaction_abortable_and_the_abort_recovers() {
    let cluster = TestCluster::start();
    let topic = cluster
        .create_topic_with("txn-refused", 1, &[("max.message.bytes", "2000")])
        .await;
    let producer = txn_producer(&cluster, &unique("txn-refused")).await;
    let before = producer.producer_id().unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, 0, &["fine"]).await;
    // Over the topic's max.message.bytes: the broker refuses the batch (MESSAGE_TOO_LARGE)
    // after it got sequence numbers.
    let big = ProducerRecord::new(&topic)
        .partition(0)
        .value("x".repeat(10_000));
    let refused = producer.send(big).await.unwrap().await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        producer.transaction_state(),
        Some(TransactionState::AbortableError)
    );
    let commit = producer.commit_transaction().await.unwrap_err();
    assert!(commit.is_abortable(), "{commit}");
    producer.abort_transaction().await.unwrap();
    // The sequence gap is closed by an epoch bump (KIP-360), same producer id.
    let after = producer.producer_id().unwrap();
    assert_eq!(after.0, before.0);
    assert!(after.1 > before.1, "epoch bumped: {before:?} -> {after:?}");
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, 0, &["next"]).await;
    producer.commit_transaction().await.unwrap();
    commit_sentinel(&producer, &topic, 1, "end").await;
    let seen = read_values(&cluster, &topic, 1, "read_committed", "end").await;
    assert_eq!(seen, ["next"]);
    producer.close().await;
}

/// Lag in seconds is measured from the record at the committed offset: where that offset is a
/// transaction's marker (a read_committed consumer commits past the transaction's last
/// record), the admin reads on to the record after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admins_timestamp_at_a_marker_is_the_next_records() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("ts-marker", 1).await;
    let producer = txn_producer(&cluster, &unique("ts-marker")).await;
    producer.begin_transaction().unwrap();
    for i in 0..2 {
        let record = ProducerRecord::new(&topic).value("in").timestamp(1_000 + i);
        producer.send(record).await.unwrap();
    }
    producer.commit_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    let after = ProducerRecord::new(&topic).value("after").timestamp(5_000);
    let delivered = producer.send(after).await.unwrap();
    producer.commit_transaction().await.unwrap();
    // Offsets 0 and 1, the marker at 2, the next transaction's record at 3.
    assert_eq!(delivered.await.unwrap().offset, 3);
    let mut admin = cluster.admin().await;
    assert_eq!(admin.timestamp_at(&topic, 0, 1).await.unwrap(), Some(1_001));
    assert_eq!(admin.timestamp_at(&topic, 0, 2).await.unwrap(), Some(5_000));
    assert_eq!(
        admin.timestamp_at(&topic, 0, 4).await.unwrap(),
        None,
        "the marker at 4"
    );
    producer.close().await;
}
