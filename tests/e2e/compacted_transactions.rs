//! Exactly-once on a compacted topic across kill -9 (what a Kafka Streams `exactly_once_v2`
//! changelog is): a librdkafka transactional producer commits and aborts transactions on a
//! `cleanup.policy=compact` topic whose segments (rolled every 200 ms) the cleaner keeps thinning, while the
//! broker is killed and started again on the same port (librdkafka reconnects and retries what
//! was in flight). The broker must answer every retry of a stored batch as a duplicate: no
//! batch (producer id, epoch, base sequence) is ever stored twice, and the producer never
//! meets a fatal error. With `delete.retention.ms=100` the cleaner also removes the markers of
//! transactions with no batch left: fewer markers stay than transactions ended, and after the
//! last restart no transaction is left open (the last stable offset is the high watermark).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, FetchResponse};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, Producer};
use test_support::kafka::{fetch_request, rdkafka_producer, try_create_topic};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const TOPIC: &str = "changelog";
const PARTITIONS: i32 = 3;

/// Transactions of 30 records (a third with keys of their own, which the cleaner keeps, the
/// rest over 10 keys it thins), every 5th aborted, until `stop`; a new producer with the same
/// transactional id after any error (it fences the old one). Counts commits, aborts (the
/// every-5th ones) and fatal errors.
fn transact(addr: String, stop: Arc<AtomicBool>, counts: [Arc<AtomicU64>; 3]) {
    let [commits, aborts, fatal] = counts;
    let props = [
        ("transactional.id", "changelog-writer"),
        ("linger.ms", "5"),
        ("message.timeout.ms", "20000"),
        ("transaction.timeout.ms", "20000"),
    ];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let producer = rdkafka_producer(&addr, &props);
        if producer.init_transactions(Duration::from_secs(15)).is_err() {
            continue;
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            n += 1;
            let result = (|| -> Result<(), KafkaError> {
                producer.begin_transaction()?;
                for i in 0..30u64 {
                    let key = if i % 3 == 0 {
                        format!("own-{n}-{i}")
                    } else {
                        format!("shared-{}", i % 10)
                    };
                    let value = format!("t{n}-{i}");
                    let record = BaseRecord::to(TOPIC)
                        .key(&key)
                        .payload(&value)
                        .partition(((i / 3) % PARTITIONS as u64) as i32);
                    producer.send(record).map_err(|(e, _)| e)?;
                }
                if n.is_multiple_of(5) {
                    producer.abort_transaction(Duration::from_secs(15))?;
                    aborts.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                } else {
                    producer.commit_transaction(Duration::from_secs(15))?;
                    commits.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
            })();
            match result {
                Ok(()) => {}
                Err(KafkaError::Transaction(e)) if e.is_fatal() => {
                    eprintln!("fatal transaction error: {e}");
                    fatal.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Err(KafkaError::Transaction(e)) if e.txn_requires_abort() => {
                    let _ = producer.abort_transaction(Duration::from_secs(15));
                }
                // The broker is down: abort what is left once it is back, or start anew.
                Err(_) => {
                    if producer.abort_transaction(Duration::from_secs(15)).is_err() {
                        break;
                    }
                }
            }
        }
    }
}

/// A data batch's identity: partition, producer id, epoch, base sequence.
type StoredBatch = (i32, i64, i16, i32);

/// (partition, producer id, epoch, base sequence) → the offsets of the data batches carrying
/// it, in every partition of the topic; and how many control batches (markers) there are.
fn stored_batches(addr: &str) -> (HashMap<StoredBatch, Vec<i64>>, usize) {
    let mut seen: HashMap<StoredBatch, Vec<i64>> = HashMap::new();
    let mut markers = 0;
    for partition in 0..PARTITIONS {
        let mut offset = 0;
        loop {
            let mut request = fetch_request(TOPIC, offset, 0, 1 << 20);
            request.isolation_level = 0;
            request.topics[0].partitions[0].partition = partition;
            let response: FetchResponse = call(&mut connect(addr), ApiKey::Fetch, 12, &request);
            let p = &response.responses[0].partitions[0];
            assert_eq!(p.error_code, 0);
            let records = p.records.clone().unwrap_or_default();
            if records.is_empty() {
                assert!(offset >= p.high_watermark, "nothing served at {offset}");
                break;
            }
            let mut at = 0;
            while at < records.len() {
                let h = record_batch::validate_stored(&records[at..]).unwrap();
                if h.is_control() {
                    markers += 1;
                } else if h.producer_id >= 0 {
                    let key = (partition, h.producer_id, h.producer_epoch, h.base_sequence);
                    seen.entry(key).or_default().push(h.base_offset);
                }
                at += h.size as usize;
                offset = h.next_offset();
            }
        }
    }
    (seen, markers)
}

/// Each partition's (last stable offset, high watermark), as a read_committed Fetch answers.
fn stable_offsets(addr: &str) -> Vec<(i64, i64)> {
    (0..PARTITIONS)
        .map(|partition| {
            let mut request = fetch_request(TOPIC, 0, 0, 1);
            request.isolation_level = 1;
            request.topics[0].partitions[0].partition = partition;
            let response: FetchResponse = call(&mut connect(addr), ApiKey::Fetch, 12, &request);
            let p = &response.responses[0].partitions[0];
            (p.last_stable_offset, p.high_watermark)
        })
        .collect()
}

#[test]
fn a_compacted_exactly_once_topic_stores_no_batch_twice_across_kills() {
    let port = test_support::process::free_port();
    let listeners = format!("PLAINTEXT://127.0.0.1:{port}");
    let mut broker = TestBroker::start_temp(&[
        "--listeners",
        &listeners,
        "--log-cleaner-backoff-ms",
        "50",
        "--flush-messages",
        "1",
    ]);
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "200"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", "100"),
    ];
    assert_eq!(
        try_create_topic(&broker.addr, TOPIC, PARTITIONS, &configs),
        0
    );
    let stop = Arc::new(AtomicBool::new(false));
    let counts: [Arc<AtomicU64>; 3] = Default::default();
    let [commits, aborts, fatal] = counts.clone();
    let writer = {
        let (addr, stop) = (broker.addr.clone(), stop.clone());
        std::thread::spawn(move || transact(addr, stop, counts))
    };
    let mut seed = 0x5eed_u64;
    // LOGRAIL_TEST_KILLS: more kills for a longer run by hand (8 in CI).
    let kills: usize = std::env::var("LOGRAIL_TEST_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    for _ in 0..kills {
        let before = commits.load(Ordering::Relaxed);
        test_support::kafka::wait_until("commits go on", Duration::from_secs(60), || {
            commits.load(Ordering::Relaxed) >= before + 3
        });
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis((seed >> 33) % 400));
        broker.kill9();
        broker.restart();
    }
    let before = commits.load(Ordering::Relaxed);
    test_support::kafka::wait_until(
        "commits after the last restart",
        Duration::from_secs(60),
        || commits.load(Ordering::Relaxed) >= before + 3,
    );
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    // The cleaner has had time to pass the markers' horizons (100 ms).
    std::thread::sleep(Duration::from_millis(1500));
    let (seen, markers) = stored_batches(&broker.addr);
    let twice: Vec<_> = seen
        .iter()
        .filter(|(_, offsets)| offsets.len() > 1)
        .collect();
    let ended = commits.load(Ordering::Relaxed) + aborts.load(Ordering::Relaxed);
    eprintln!(
        "{kills} kills, {} commits, {} aborts, {} batches stored, {markers} markers, {} fatal errors",
        commits.load(Ordering::Relaxed),
        aborts.load(Ordering::Relaxed),
        seen.len(),
        fatal.load(Ordering::Relaxed)
    );
    // Each transaction ended wrote a marker to each partition (a commit's keep the records of
    // their own keys; an abort's have none left once cleaned): the aborts' markers go.
    assert!(
        (markers as u64) < ended * PARTITIONS as u64,
        "{markers} markers kept of at least {} written",
        ended * PARTITIONS as u64
    );
    assert!(twice.is_empty(), "batches stored twice: {twice:?}");
    assert_eq!(fatal.load(Ordering::Relaxed), 0, "fatal producer errors");
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    assert!(!log.contains("could not rebuild producer state"), "{log}");
    assert!(log.contains("cleaned"), "the cleaner ran");
    // Restarted once more: no transaction is open, read_committed reads to the end.
    broker.kill9();
    broker.restart();
    for (stable, high) in stable_offsets(&broker.addr) {
        assert_eq!(stable, high, "a transaction left open");
    }
}
