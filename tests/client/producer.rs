//! The producer: keyed partitioning, delivery reports, batching, codecs and headers,
//! idempotent retries, epoch bumps and delivery timeouts.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use consumer::{partition_for_key, DeliveryError, ProducerRecord, SendError, TimestampType};

use test_support::cluster::{read_all, TestCluster};
use test_support::kafka::wait_until_async;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_records_land_on_their_murmur2_partition() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("keyed", 6).await;
    let producer = cluster.producer(&[("linger.ms", "20")]).await;
    let mut deliveries = Vec::new();
    for i in 0..300 {
        let key = format!("user-{}", i % 37);
        let record = ProducerRecord::new(&topic)
            .key(key.clone())
            .value(format!("event-{i}"));
        deliveries.push((key, i, producer.send(record).await.unwrap()));
    }
    let mut acked: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for (key, i, delivery) in deliveries {
        let meta = delivery.await.unwrap();
        let expected = partition_for_key(key.as_bytes(), 6) as i32;
        assert_eq!(meta.partition, expected, "{key}");
        assert_eq!(&*meta.topic, topic.as_str());
        acked
            .entry(meta.partition)
            .or_default()
            .push((meta.offset, format!("event-{i}")));
    }
    // Offsets per partition are 0, 1, 2, … in send order.
    for (partition, list) in &acked {
        let offsets: Vec<i64> = list.iter().map(|(o, _)| *o).collect();
        let expected: Vec<i64> = (0..list.len() as i64).collect();
        assert_eq!(offsets, expected, "partition {partition}");
    }
    producer.close().await;

    let read = read_all(&cluster, &topic).await;
    for (partition, records) in &read {
        let values: Vec<String> = records
            .iter()
            .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
            .collect();
        let sent: Vec<String> = acked[partition].iter().map(|(_, v)| v.clone()).collect();
        assert_eq!(
            values, sent,
            "partition {partition} reads back what was acknowledged"
        );
        for r in records {
            let key = r.key.as_deref().unwrap();
            assert_eq!(partition_for_key(key, 6) as i32, *partition);
        }
    }
    assert_eq!(read.values().map(Vec::len).sum::<usize>(), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_timestamps_nulls_and_every_codec_round_trip() {
    let cluster = TestCluster::start();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = cluster.create_topic(&format!("codec-{codec}"), 1).await;
        let producer = cluster
            .producer(&[("compression.type", codec), ("linger.ms", "50")])
            .await;
        let mut sent = Vec::new();
        for i in 0..50i64 {
            let mut record = ProducerRecord::new(&topic)
                .timestamp(1_700_000_000_000 + i)
                .header("trace-id", format!("t-{i}"))
                .header("empty", Bytes::new());
            record.headers.push(("null".to_string(), None));
            if i % 5 != 0 {
                record = record.key(format!("k{i}"));
            }
            if i % 7 != 0 {
                // Compressible and not: repeated text, then bytes.
                let mut value = format!("{codec} value {i} ").repeat(20).into_bytes();
                value.extend((0..=255u8).map(|b| b.wrapping_mul(i as u8)));
                record = record.value(value);
            }
            sent.push(record.clone());
            producer.send(record).await.unwrap();
        }
        producer.flush().await;
        let read = read_all(&cluster, &topic).await;
        let got = &read[&0];
        assert_eq!(got.len(), sent.len(), "{codec}");
        for (r, s) in got.iter().zip(&sent) {
            assert_eq!(r.key, s.key, "{codec} key");
            assert_eq!(r.value, s.value, "{codec} value");
            assert_eq!(Some(r.timestamp), s.timestamp, "{codec} timestamp");
            assert_eq!(r.headers, s.headers, "{codec} headers");
        }
        producer.close().await;
    }
}

/// A negative timestamp is refused at `send`, as the Java client's `ProducerRecord` refuses it;
/// 0 is a timestamp like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_timestamp_is_refused_at_send() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("negative-ts", 1).await;
    let producer = cluster.producer(&[]).await;
    for ts in [-1, -5, i64::MIN] {
        let refused = producer
            .send(ProducerRecord::new(&topic).timestamp(ts).value("v"))
            .await;
        assert!(
            matches!(refused, Err(SendError::InvalidTimestamp(t)) if t == ts),
            "{ts}: {refused:?}"
        );
    }
    let zero = producer
        .send(ProducerRecord::new(&topic).timestamp(0).value("v"))
        .await
        .unwrap();
    assert_eq!(zero.await.unwrap().offset, 0, "nothing refused was stored");
    let read = read_all(&cluster, &topic).await;
    assert_eq!(read[&0].len(), 1);
    assert_eq!(read[&0][0].timestamp, 0);
    producer.close().await;
}

/// `max.request.size` counts a record with the batch header it needs (61 bytes), as the Java
/// client does: refused at `send`, not by the broker later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_request_size_counts_the_batch_header() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("request-size", 1).await;
    let producer = cluster.producer(&[("max.request.size", "1000")]).await;
    let record = |len: usize| ProducerRecord::new(&topic).value(vec![1u8; len]);
    // 21 bytes of record overhead at most: 900 + 21 + 61 fits, 930 + 21 + 61 does not.
    let refused = producer.send(record(930)).await;
    assert!(
        matches!(
            refused,
            Err(SendError::RecordTooLarge {
                size: 1012,
                limit: 1000,
                ..
            })
        ),
        "{refused:?}"
    );
    let fits = producer.send(record(900)).await.unwrap();
    assert_eq!(fits.await.unwrap().offset, 0);
    producer.close().await;
}

/// On a `message.timestamp.type=LogAppendTime` topic the broker's append time is every
/// record's timestamp (the batch's max timestamp, as the Java client reads it), whatever the
/// producer stamped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_append_time_topic_gives_every_record_the_append_time() {
    let cluster = TestCluster::start();
    let topic = cluster
        .create_topic_with(
            "append-time",
            1,
            &[("message.timestamp.type", "LogAppendTime")],
        )
        .await;
    let producer = cluster.producer(&[("linger.ms", "20")]).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for i in 0..5 {
        let record = ProducerRecord::new(&topic)
            .timestamp(1_000 + i)
            .value(format!("v{i}"));
        producer.send(record).await.unwrap();
    }
    producer.flush().await;
    let read = read_all(&cluster, &topic).await;
    let got = &read[&0];
    assert_eq!(got.len(), 5);
    for r in got {
        assert_eq!(r.timestamp_type, TimestampType::LogAppendTime);
        assert!(
            r.timestamp >= before - 1_000,
            "offset {}: timestamp {} is the producer's, not the append time (>= {before})",
            r.offset,
            r.timestamp
        );
    }
    // What lag in seconds is measured from.
    let mut admin = cluster.admin().await;
    let at = admin.timestamp_at(&topic, 0, 2).await.unwrap();
    assert_eq!(
        at,
        Some(got[2].timestamp),
        "the admin's timestamp of offset 2"
    );
    producer.close().await;
}

/// Once a leader's batch has lingered, the batches of its other partitions go in the same
/// request before their own linger is over (as the Java client drains a ready node).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lingered_batch_takes_the_leaders_other_batches_along() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("drain-node", 6).await;
    let first = leader_of(&cluster, &topic, 0).await;
    let mut other = None;
    for p in 1..6 {
        if leader_of(&cluster, &topic, p).await == first {
            other = Some(p);
            break;
        }
    }
    let other = other.expect("a second partition led by partition 0's leader");
    let producer = cluster.producer(&[("linger.ms", "1500")]).await;
    // Connections and metadata first, so that only the two records make requests.
    producer
        .send(ProducerRecord::new(&topic).partition(0).value("warm"))
        .await
        .unwrap();
    producer.flush().await;
    let requests = producer.stats().requests;
    let started = std::time::Instant::now();
    let a = producer
        .send(ProducerRecord::new(&topic).partition(0).value("a"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let b = producer
        .send(ProducerRecord::new(&topic).partition(other).value("b"))
        .await
        .unwrap();
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!((a.partition, b.partition), (0, other));
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_millis(2000),
        "the second batch went with the first at 1.5 s, not at its own linger (2.2 s): {waited:?}"
    );
    assert_eq!(
        producer.stats().requests,
        requests + 1,
        "one request for both"
    );
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_sends_lingering_batches_and_unkeyed_records_stick_per_batch() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("flush", 4).await;
    // A linger far beyond the test: only flush can send these.
    let producer = cluster
        .producer(&[("linger.ms", "600000"), ("delivery.timeout.ms", "700000")])
        .await;
    let mut deliveries = Vec::new();
    for i in 0..100 {
        let record = ProducerRecord::new(&topic).value(format!("{i:0100}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    tokio::time::timeout(Duration::from_secs(30), producer.flush())
        .await
        .expect("flush returned");
    let mut partitions = HashSet::new();
    let requests = producer.stats().requests;
    for d in deliveries {
        // Already complete: flush waited for them.
        let meta = tokio::time::timeout(Duration::from_millis(1), d)
            .await
            .expect("delivered by flush")
            .unwrap();
        partitions.insert(meta.partition);
    }
    // 100 records of ~121 bytes fit in one batch: the sticky partitioner keeps them on one
    // partition.
    assert_eq!(partitions.len(), 1, "{partitions:?}");
    assert!(requests >= 1);
    // Nothing more to send: a second flush sends nothing.
    producer.flush().await;
    assert_eq!(producer.stats().requests, requests);
    producer.close().await;
}

/// Requests time out while the leader is frozen (SIGSTOP); the producer retries the same
/// batches with the same sequence numbers, and the broker writes each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retries_never_duplicate_or_reorder() {
    let cluster = TestCluster::start_exclusive();
    let topic = cluster.create_topic("idempotent", 3).await;
    let producer = cluster
        .producer(&[
            ("request.timeout.ms", "1500"),
            ("delivery.timeout.ms", "120000"),
            ("linger.ms", "2"),
            ("batch.size", "2000"),
        ])
        .await;
    // Records 0..400 go out; then the leader of partition 0 freezes while 400..800 are sent:
    // their requests time out and are retried.
    let mut deliveries = Vec::new();
    for i in 0..400u32 {
        let record = ProducerRecord::new(&topic)
            .key(format!("k{}", i % 30))
            .value(i.to_string());
        deliveries.push(producer.send(record).await.unwrap());
    }
    // The first 400 are acknowledged (the producer has its id) before the leader freezes.
    for d in deliveries.drain(..) {
        let meta = d.await.unwrap();
        assert!(meta.offset >= 0);
    }
    let leader = leader_of(&cluster, &topic, 0).await;
    cluster.signal(leader, "STOP");
    for i in 400..800u32 {
        let record = ProducerRecord::new(&topic)
            .key(format!("k{}", i % 30))
            .value(i.to_string());
        deliveries.push(producer.send(record).await.unwrap());
    }
    // Long enough for requests to time out and be retried (request.timeout.ms = 1.5 s).
    wait_until_async("a retry", Duration::from_secs(30), || {
        producer.stats().retries > 0
    })
    .await;
    cluster.signal(leader, "CONT");
    for d in deliveries {
        tokio::time::timeout(Duration::from_secs(90), d)
            .await
            .expect("delivered")
            .unwrap();
    }
    assert!(producer.stats().retries > 0);
    producer.close().await;

    let read = read_all(&cluster, &topic).await;
    let mut seen = HashSet::new();
    let mut per_key: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for records in read.values() {
        for r in records {
            let id: u32 = std::str::from_utf8(r.value.as_deref().unwrap())
                .unwrap()
                .parse()
                .unwrap();
            assert!(seen.insert(id), "record {id} written twice");
            let key = String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap();
            per_key.entry(key).or_default().push(id);
        }
    }
    assert_eq!(seen.len(), 800, "every record written once");
    for (key, ids) in per_key {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(ids, sorted, "records of {key} in send order");
    }
}

/// The broker (node id) leading `topic`-`partition`.
pub async fn leader_of(cluster: &TestCluster, topic: &str, partition: i32) -> i32 {
    let mut admin = cluster.admin().await;
    admin.describe_topic(topic).await.unwrap().leaders[partition as usize]
}

/// A batch the broker refuses for good (MESSAGE_TOO_LARGE) fails alone; the idempotent producer
/// bumps its epoch (the sequence gap) and what follows is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_batch_fails_alone_and_the_epoch_is_bumped() {
    let cluster = TestCluster::start();
    let topic = cluster
        .create_topic_with("too-large", 1, &[("max.message.bytes", "2000")])
        .await;
    let producer = cluster.producer(&[("linger.ms", "0")]).await;
    let small = |i: u32| ProducerRecord::new(&topic).value(format!("small-{i}"));
    let first = producer.send(small(0)).await.unwrap().await.unwrap();
    assert_eq!(first.offset, 0);
    let big = producer
        .send(ProducerRecord::new(&topic).value(vec![7u8; 10_000]))
        .await
        .unwrap();
    match big.await {
        Err(DeliveryError::Broker { code, .. }) => {
            assert_eq!(code, consumer::ErrorCode::MessageTooLarge)
        }
        other => panic!("expected MESSAGE_TOO_LARGE, got {other:?}"),
    }
    let mut later = Vec::new();
    for i in 1..=20 {
        later.push(producer.send(small(i)).await.unwrap());
    }
    for (i, d) in later.into_iter().enumerate() {
        let meta = d.await.unwrap();
        assert_eq!(meta.offset, i as i64 + 1);
    }
    assert_eq!(producer.stats().epoch_bumps, 1);
    producer.close().await;
    assert_eq!(read_all(&cluster, &topic).await[&0].len(), 21);
}

/// With nobody to take them, records fail after `delivery.timeout.ms`, and `send` still returns
/// (the buffer is not full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lograil_only_records_time_out_when_the_cluster_is_gone() {
    if test_support::cluster::on_kafka() {
        return; // Needs the whole cluster gone: lograil only.
    }
    let mut cluster = TestCluster::start();
    let topic = cluster.create_topic("timeout", 1).await;
    let producer = cluster
        .producer(&[
            ("request.timeout.ms", "500"),
            ("delivery.timeout.ms", "2000"),
            ("linger.ms", "0"),
        ])
        .await;
    producer
        .send(ProducerRecord::new(&topic).value("before"))
        .await
        .unwrap()
        .await
        .unwrap();
    cluster.kill_lograil();
    let d = producer
        .send(ProducerRecord::new(&topic).value("after"))
        .await
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(30), d)
        .await
        .unwrap()
    {
        Err(DeliveryError::Timeout(t)) => assert_eq!(t, Duration::from_secs(2)),
        other => panic!("expected a delivery timeout, got {other:?}"),
    }
    assert_eq!(producer.buffered_bytes(), 0, "memory given back");
}

/// A batch written under the producer's own id behind its back makes the broker expect a later
/// sequence: the producer's next batch gets OUT_OF_ORDER_SEQUENCE_NUMBER for the very sequence
/// the broker should have expected, which is fatal: that record fails, and so does every later
/// send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_out_of_order_sequence_is_fatal() {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    let cluster = TestCluster::start();
    let topic = cluster.create_topic("fatal", 1).await;
    let producer = cluster.producer(&[("linger.ms", "0")]).await;
    for i in 0..5 {
        producer
            .send(
                ProducerRecord::new(&topic)
                    .partition(0)
                    .value(format!("{i}")),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let (id, epoch) = producer
        .producer_id()
        .expect("an idempotent producer has an id");

    // Sequences 5..=15 under the producer's id, sent straight to the leader.
    let records: Vec<Record> = (0..11)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: 5 + i as i32,
            timestamp: 0,
            key: None,
            value: Some(Bytes::from_static(b"intruder")),
            headers: Default::default(),
        })
        .collect();
    let mut batch = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.clone())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.freeze()))])]);
    let leader = leader_of(&cluster, &topic, 0).await;
    let addr = cluster.address_of(leader);
    let response: ProduceResponse = tokio::task::spawn_blocking(move || {
        let mut stream = test_support::wire::connect(&addr);
        test_support::wire::call(&mut stream, ApiKey::Produce, 7, &request)
    })
    .await
    .unwrap();
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);

    let d = producer
        .send(ProducerRecord::new(&topic).partition(0).value("next"))
        .await
        .unwrap();
    match d.await {
        Err(DeliveryError::Fatal(f)) => {
            assert_eq!(f.code, consumer::ErrorCode::OutOfOrderSequenceNumber)
        }
        other => panic!("expected a fatal error, got {other:?}"),
    }
    match producer
        .send(ProducerRecord::new(&topic).value("after"))
        .await
    {
        Err(consumer::SendError::Fatal(_)) => {}
        other => panic!("expected the producer to refuse, got {other:?}"),
    }
}
