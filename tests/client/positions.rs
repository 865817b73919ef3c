//! The consumer's position when the log start moves past it: the records already fetched ahead
//! are handed out before the out-of-range reset, as the Java client does.

use std::time::Duration;

use consumer::{ProducerRecord, TopicPartition};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig as RdConfig;
use rdkafka::{Offset, TopicPartitionList};

use test_support::cluster::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_fetched_ahead_are_read_before_an_out_of_range_reset() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("ahead", 1).await;
    let producer = cluster
        .producer(&[("linger.ms", "5"), ("batch.size", "1024")])
        .await;
    for i in 0..2000 {
        let value = format!("record {i:05} {}", "x".repeat(80));
        producer
            .send(ProducerRecord::new(&topic).value(value))
            .await
            .unwrap();
    }
    producer.flush().await;
    // Small fetches (a batch or two) into a buffer of some hundred records ahead of the
    // position.
    let consumer = cluster
        .consumer(
            None,
            &[
                ("max.partition.fetch.bytes", "2048"),
                ("fetch.max.bytes", "65536"),
                ("auto.offset.reset", "earliest"),
            ],
        )
        .await;
    let tp = TopicPartition::new(&topic, 0);
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    consumer.seek(&tp, 0).unwrap();
    assert_eq!(consumer.recv().await.unwrap().offset, 0);
    // Let the fetcher fill its buffer, then move the log start far past it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let admin: AdminClient<DefaultClientContext> = RdConfig::new()
        .set("bootstrap.servers", cluster.plain_bootstrap())
        .create()
        .unwrap();
    let mut before = TopicPartitionList::new();
    before
        .add_partition_offset(&topic, 0, Offset::Offset(1500))
        .unwrap();
    let deleted = admin
        .delete_records(&before, &AdminOptions::new())
        .await
        .unwrap();
    assert_eq!(deleted.elements()[0].offset(), Offset::Offset(1500));

    let mut offsets = Vec::new();
    while offsets.last().is_none_or(|o| *o < 1500) {
        let record = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("a record within 30 s")
            .unwrap();
        offsets.push(record.offset);
    }
    let (ahead, reset) = offsets.split_at(offsets.len() - 1);
    assert_eq!(reset, [1500], "then the reset to the new log start");
    assert!(
        !ahead.is_empty(),
        "records were buffered ahead: {offsets:?}"
    );
    let contiguous: Vec<i64> = (1..=ahead.len() as i64).collect();
    assert_eq!(
        ahead, contiguous,
        "the buffered records, in order, none skipped"
    );
    // The buffer holds about 600 records (64 KiB of ~110-byte records); dropping it at the
    // first fetch that meets the deletion handed out about 225 (measured before the fix).
    assert!(
        ahead.len() > 450,
        "only {} records before the reset: the buffer was dropped",
        ahead.len()
    );
    assert!(
        ahead.len() < 1499,
        "{} records were read before the deletion, not only those fetched ahead",
        ahead.len()
    );
    let next = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
        .await
        .expect("a record within 30 s")
        .unwrap();
    assert_eq!(next.offset, 1501);
    producer.close().await;
}
