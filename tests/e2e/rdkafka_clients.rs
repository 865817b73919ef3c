//! librdkafka (through the `rdkafka` crate, built from its bundled source) against the real
//! broker: idempotent keyed produce, consume back, restarts and `kill -9`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer, ProducerContext, PurgeConfig, ThreadedProducer,
};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use test_support::kafka::{rdkafka_send, Record};
use test_support::TestBroker;

const PARTITIONS: i32 = 6;

/// Records which messages the broker acknowledged (their payload is a decimal id).
#[derive(Clone, Default)]
struct Acks {
    acked: Arc<Mutex<Vec<u64>>>,
    failed: Arc<Mutex<Vec<String>>>,
}

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {
        match result {
            Ok(message) => {
                let id = std::str::from_utf8(message.payload().unwrap_or_default())
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .expect("payload is an id");
                self.acked.lock().unwrap().push(id);
            }
            Err((e, _)) => self.failed.lock().unwrap().push(e.to_string()),
        }
    }
}

fn producer(addr: &str, acks: &Acks) -> ThreadedProducer<Acks> {
    producer_with(addr, acks, &[])
}

/// An idempotent murmur2 producer, with `extra` settings on top.
fn producer_with(addr: &str, acks: &Acks, extra: &[(&str, &str)]) -> ThreadedProducer<Acks> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", addr)
        .set("enable.idempotence", "true")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create_with_context(acks.clone()).expect("producer")
}

fn key_of(id: u64) -> String {
    format!("key-{}", id % 997)
}

/// Produces ids `from..to` keyed by `key_of`, waits until all are acknowledged.
fn produce(producer: &ThreadedProducer<Acks>, topic: &str, ids: std::ops::Range<u64>) {
    rdkafka_send(
        producer,
        topic,
        ids.map(|id| Record::new(id.to_string()).key(key_of(id))),
    );
}

/// Every record of the topic, per partition in offset order: (offset, key, id).
fn consume_all(addr: &str, topic: &str) -> BTreeMap<i32, Vec<(i64, String, u64)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "e2e-assign")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
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
    let mut out: BTreeMap<i32, Vec<(i64, String, u64)>> = BTreeMap::new();
    let mut at_end = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while at_end.len() < PARTITIONS as usize {
        assert!(
            Instant::now() < deadline,
            "consume did not reach the end in 120 s"
        );
        match consumer.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("consume error: {e}"),
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
                let id = std::str::from_utf8(m.payload().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap();
                out.entry(m.partition())
                    .or_default()
                    .push((m.offset(), key, id));
            }
        }
    }
    out
}

/// Each id once, per-key order kept, each key on the murmur2 partition (the consumer crate's, = Java's).
fn check_consumed(consumed: &BTreeMap<i32, Vec<(i64, String, u64)>>, expected: &HashSet<u64>) {
    let mut seen = HashSet::new();
    for (partition, records) in consumed {
        let mut last_per_key: HashMap<&str, u64> = HashMap::new();
        for (i, (offset, key, id)) in records.iter().enumerate() {
            assert_eq!(*offset, i as i64, "offsets are contiguous from 0");
            assert!(seen.insert(*id), "id {id} consumed twice");
            let want = consumer::partition_for_key(key.as_bytes(), PARTITIONS as u32);
            assert_eq!(
                *partition as u32, want,
                "key {key} on partition {partition}, murmur2 says {want}"
            );
            if let Some(prev) = last_per_key.insert(key, *id) {
                assert!(prev < *id, "key {key}: {prev} after {id}");
            }
        }
    }
    let missing: Vec<_> = expected.difference(&seen).take(10).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged ids missing, e.g. {missing:?}",
        expected.len() - seen.intersection(expected).count()
    );
}

#[test]
fn idempotent_keyed_round_trip_of_100k_records() {
    let broker = TestBroker::start_temp(&["--default-partitions", "6"]);
    let acks = Acks::default();
    let p = producer(&broker.addr, &acks);
    produce(&p, "keyed", 0..100_000);
    assert!(
        acks.failed.lock().unwrap().is_empty(),
        "{:?}",
        acks.failed.lock().unwrap()
    );
    assert_eq!(acks.acked.lock().unwrap().len(), 100_000);
    let consumed = consume_all(&broker.addr, "keyed");
    assert_eq!(consumed.values().map(Vec::len).sum::<usize>(), 100_000);
    assert_eq!(
        consumed.len(),
        PARTITIONS as usize,
        "keys spread over all partitions"
    );
    check_consumed(&consumed, &(0..100_000).collect());
}

#[test]
fn every_compression_codec_round_trips() {
    let broker = TestBroker::start_temp(&["--default-partitions", "6"]);
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let acks = Acks::default();
        let p = producer_with(&broker.addr, &acks, &[("compression.type", codec)]);
        let topic = format!("compressed-{codec}");
        produce(&p, &topic, 0..5_000);
        assert!(
            acks.failed.lock().unwrap().is_empty(),
            "{codec}: {:?}",
            acks.failed.lock().unwrap()
        );
        assert_eq!(acks.acked.lock().unwrap().len(), 5_000, "{codec}");
        let consumed = consume_all(&broker.addr, &topic);
        check_consumed(&consumed, &(0..5_000).collect());
    }
}

#[test]
fn nothing_is_lost_across_a_graceful_restart() {
    let mut broker = TestBroker::start_temp(&["--default-partitions", "6"]);
    let acks = Acks::default();
    {
        let p = producer(&broker.addr, &acks);
        produce(&p, "restart", 0..20_000);
    }
    broker.stop();
    broker.restart();
    let consumed = consume_all(&broker.addr, "restart");
    assert_eq!(consumed.values().map(Vec::len).sum::<usize>(), 20_000);
    check_consumed(&consumed, &(0..20_000).collect());
    // And appends carry on after the restart, at the right offsets.
    let p = producer(&broker.addr, &acks);
    produce(&p, "restart", 20_000..21_000);
    let consumed = consume_all(&broker.addr, "restart");
    check_consumed(&consumed, &(0..21_000).collect());
}

#[test]
fn acknowledged_records_survive_kill_9_with_durability_always() {
    let mut broker =
        TestBroker::start_temp(&["--default-partitions", "6", "--flush-messages", "1"]);
    let acks = Acks::default();
    let p = producer(&broker.addr, &acks);
    // Keep producing while the broker is killed.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (p, stop) = (p.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut id = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let key = key_of(id);
                let payload = id.to_string();
                match p.send(BaseRecord::to("durable").key(&key).payload(&payload)) {
                    Ok(()) => id += 1,
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while acks.acked.lock().unwrap().len() < 5_000 {
        assert!(Instant::now() < deadline, "too few acks in 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    broker.kill9();
    let acked: HashSet<u64> = acks.acked.lock().unwrap().iter().copied().collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sender.join().unwrap();
    p.purge(PurgeConfig::default().queue().inflight());
    drop(p);
    broker.restart();
    let consumed = consume_all(&broker.addr, "durable");
    check_consumed(&consumed, &acked);
    // Producer ids survive too: a new idempotent producer gets a fresh id and its records land.
    let acks2 = Acks::default();
    let p = producer(&broker.addr, &acks2);
    produce(&p, "durable", 2_000_000..2_000_100);
    assert_eq!(acks2.acked.lock().unwrap().len(), 100);
}
