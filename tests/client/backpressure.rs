//! Backpressure with the broker frozen (SIGSTOP): `send().await` waits once `buffer.memory` is
//! full and the process does not grow; `try_send` is refused at once with a retry-after; after
//! SIGCONT everything accepted is delivered. lograil only (freezing a whole Kafka cluster
//! would disturb the other tests sharing it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use consumer::{ProducerRecord, SendError};

use test_support::cluster::{on_kafka, read_all, TestCluster};
use test_support::kafka::wait_until_async;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lograil_only_send_waits_at_buffer_memory_and_try_send_sheds_with_a_hint() {
    if on_kafka() {
        return;
    }
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("backpressure", 3).await;
    const BUFFER: usize = 2 << 20;
    const RECORD: usize = 8 << 10;
    const TOTAL: u64 = 4000; // 32 MiB of records: 16× the buffer.
    let producer = cluster
        .producer(&[
            ("buffer.memory", &BUFFER.to_string()),
            ("request.timeout.ms", "60000"),
            ("delivery.timeout.ms", "180000"),
            ("max.block.ms", "180000"),
            ("linger.ms", "1"),
        ])
        .await;
    // Warm up (metadata, connection, producer id) before freezing the broker.
    producer
        .send(ProducerRecord::new(&topic).value("warm-up"))
        .await
        .unwrap()
        .await
        .unwrap();
    let rss_before = rss_bytes();
    cluster.signal(0, "STOP");

    let accepted = Arc::new(AtomicU64::new(0));
    let sender = {
        let producer = producer.clone();
        let accepted = accepted.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            let mut deliveries = Vec::new();
            for i in 0..TOTAL {
                // A fresh allocation per record: an unbounded queue would show in RSS.
                let value = vec![(i % 251) as u8; RECORD];
                let record = ProducerRecord::new(&topic).key(i.to_string()).value(value);
                deliveries.push(producer.send(record).await.unwrap());
                accepted.fetch_add(1, Ordering::Relaxed);
            }
            deliveries
        })
    };
    // The buffer fills and `send` stops accepting.
    wait_until_async("buffer.memory full", Duration::from_secs(30), || {
        producer.buffered_bytes() + RECORD + 100 > BUFFER
    })
    .await;
    let stuck_at = accepted.load(Ordering::Relaxed);
    assert!(stuck_at < TOTAL / 4, "send kept accepting: {stuck_at}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        stuck_at,
        "send().await is waiting"
    );
    assert!(!sender.is_finished());
    let grown = rss_bytes().saturating_sub(rss_before);
    assert!(
        grown < 64 << 20,
        "RSS grew {} MiB with a {} MiB buffer",
        grown >> 20,
        BUFFER >> 20
    );

    match producer.try_send(ProducerRecord::new(&topic).value(vec![1u8; RECORD])) {
        Err(SendError::Full {
            retry_after,
            record,
        }) => {
            assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_secs(60));
            assert_eq!(
                record.value.as_ref().map(|v| v.len()),
                Some(RECORD),
                "record handed back"
            );
        }
        other => panic!("expected Full, got {other:?}"),
    }

    cluster.signal(0, "CONT");
    let deliveries = tokio::time::timeout(Duration::from_secs(120), sender)
        .await
        .expect("every record accepted after SIGCONT")
        .unwrap();
    for d in deliveries {
        d.await.unwrap();
    }
    // With acknowledgements flowing, the hint comes from the measured drain rate.
    producer.close().await;
    let read = read_all(&cluster, &topic).await;
    assert_eq!(read.values().map(Vec::len).sum::<usize>() as u64, TOTAL + 1);
}
