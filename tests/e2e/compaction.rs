//! Compaction with real clients: a librdkafka producer writes keyed records and tombstones to
//! a `cleanup.policy=compact` topic, the broker's log cleaner compacts its closed segments,
//! and a librdkafka consumer reading from the start sees only the latest value of each key,
//! at its original offset, and no tombstone once `delete.retention.ms` has passed.

use std::collections::BTreeMap;
use std::time::Duration;

use log_core::batch;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Message, Offset};
use test_support::kafka::{
    describe_configs, list_offset, produce, produce_response, rdkafka_producer, rdkafka_reader,
    try_create_topic, wait_until, TOPIC_RESOURCE,
};
use test_support::TestBroker;

const INVALID_RECORD: i16 = 87;

/// The cleaner's passes over partition 0 so far, from `topic describe`'s read-only entry.
pub(crate) fn cleaner_runs(addr: &str, topic: &str) -> u64 {
    let entry = describe_configs(addr, TOPIC_RESOURCE, topic)
        .into_iter()
        .find(|(name, _, _)| name == "lograil.cleaner.partition.0")
        .map(|(_, value, _)| value)
        .expect("a compacted topic describes its cleaner");
    let runs = entry
        .split(", ")
        .find_map(|part| part.strip_suffix(" runs"))
        .unwrap_or_else(|| panic!("{entry}"));
    runs.parse().unwrap()
}

/// Every record of partition 0 from the start, read with librdkafka: offset → (key, value).
fn read_all(addr: &str, topic: &str) -> BTreeMap<i64, (String, Option<String>)> {
    let consumer = rdkafka_reader(addr, "reader", topic, 0, &[]);
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap();
    let mut records = BTreeMap::new();
    let mut position = -1;
    while position + 1 < high {
        let message = consumer
            .poll(Duration::from_secs(10))
            .expect("a record before the high watermark")
            .unwrap();
        let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
        position = message.offset();
        let record = (text(message.key()).unwrap(), text(message.payload()));
        assert!(
            records.insert(position, record).is_none(),
            "offset {position} twice"
        );
        if position + 1 >= high {
            break;
        }
        // Compaction may have removed the records up to the high watermark.
        let (_, now_high) = consumer
            .fetch_watermarks(topic, 0, Duration::from_secs(10))
            .unwrap();
        if consumer.position().unwrap().elements()[0].offset() == Offset::Offset(now_high) {
            break;
        }
    }
    records
}

#[test]
fn a_compacted_topic_read_back_keeps_the_latest_value_of_each_key_and_drops_tombstones() {
    let broker = TestBroker::start_temp(&["--log-cleaner-backoff-ms", "100"]);
    let addr = &broker.addr;
    let topic = "compacted";
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "100"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("delete.retention.ms", "0"),
    ];
    assert_eq!(try_create_topic(addr, topic, 1, &configs), 0);

    let producer = rdkafka_producer(addr, &[("linger.ms", "0")]);
    let send = |key: &str, value: Option<&str>| {
        let mut record = BaseRecord::to(topic).key(key).partition(0);
        if let Some(value) = value {
            record = record.payload(value);
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.flush(Duration::from_secs(10)).unwrap();
    };
    // Four rounds over 20 keys, each in a segment of its own (segment.ms rolls at the next
    // append); round 2 deletes k0..k4, round 3 writes k5..k19 again.
    for round in 0..4 {
        for k in 0..20 {
            let key = format!("k{k}");
            match round {
                2 if k < 5 => send(&key, None),
                3 if k < 5 => {}
                _ => send(&key, Some(&format!("v{round}-{k}"))),
            }
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    send("tail", Some("first"));
    wait_until("a first pass", Duration::from_secs(20), || {
        cleaner_runs(addr, topic) >= 1
    });
    // The tombstones were in the dirty part of that pass: a second pass, over new dirty data,
    // finds them in the clean part and older than delete.retention.ms.
    std::thread::sleep(Duration::from_millis(150));
    send("tail", Some("second"));
    std::thread::sleep(Duration::from_millis(150));
    send("tail", Some("third"));
    wait_until("a second pass", Duration::from_secs(20), || {
        cleaner_runs(addr, topic) >= 2
    });

    let records = read_all(addr, topic);
    let mut latest: BTreeMap<String, (i64, Option<String>)> = BTreeMap::new();
    for (offset, (key, value)) in &records {
        assert!(
            latest
                .insert(key.clone(), (*offset, value.clone()))
                .is_none()
                || key == "tail",
            "{key} read twice below the active segment: {records:?}"
        );
    }
    for k in 0..5 {
        assert!(
            !latest.contains_key(&format!("k{k}")),
            "k{k}'s tombstone is gone with its records: {records:?}"
        );
    }
    for k in 5..20 {
        // Rounds 0 to 2 took offsets 0..60, so round 3's record of key k has offset
        // 60 + (k - 5): the offsets did not change.
        let offset = 60 + (k - 5);
        assert_eq!(
            latest.get(&format!("k{k}")),
            Some(&(offset, Some(format!("v3-{k}")))),
            "{records:?}"
        );
    }
    assert_eq!(latest["tail"].1.as_deref(), Some("third"));

    // `topic describe` shows where the cleaner stands.
    let described =
        test_support::lograil_stdout(&["topic", "describe", topic, "--bootstrap-server", addr]);
    assert!(
        described.contains("Cleaner: dirty ratio")
            && !described.contains("Cleaner: dirty ratio 0.00, cleaned up to offset 0,"),
        "{described}"
    );

    // Keyless records are refused, as Kafka refuses them: each named (KIP-467), with
    // Kafka's message, and nothing of the batch stored.
    let mixed = batch::build(&[
        (Some(b"k1"), Some(b"kept?"), 1),
        (None, Some(b"no key"), 1),
        (Some(b"k2"), Some(b"kept?"), 1),
        (None, Some(b"no key either"), 1),
    ]);
    let end = list_offset(addr, topic, -1).1;
    let response = produce_response(addr, topic, 0, mixed);
    let refused = &response.responses[0].partition_responses[0];
    assert_eq!(refused.error_code, INVALID_RECORD);
    let named: Vec<(i32, String)> = refused
        .record_errors
        .iter()
        .map(|e| {
            let message = e.batch_index_error_message.as_deref().unwrap_or_default();
            (e.batch_index, message.to_string())
        })
        .collect();
    let why =
        format!("Compacted topic cannot accept message without key in topic partition {topic}-0");
    assert_eq!(named, vec![(1, why.clone()), (3, why.clone())]);
    assert_eq!(
        refused.error_message.as_deref().unwrap_or_default(),
        format!(
            "One or more records have been rejected due to 2 record errors in total, and only \
             showing the first three errors at most: [RecordError(batchIndex=1, message='{why}'), \
             RecordError(batchIndex=3, message='{why}')]"
        )
    );
    assert_eq!(
        list_offset(addr, topic, -1).1,
        end,
        "nothing of the batch stored"
    );
    let keyed = batch::build(&[(Some(b"k1"), Some(b"back"), 1)]);
    assert_eq!(produce(addr, topic, 0, keyed).0, 0);
}

/// The batch of `count` records an idempotent producer sends as its `batch`th: one key of its
/// own (which the cleaner keeps) and `count - 1` keys every batch repeats (which it removes
/// from all but the newest batch).
fn thinning_batch(pid: i64, epoch: i16, batch: i32, count: i32) -> bytes::Bytes {
    let keys: Vec<String> = std::iter::once(format!("own-{batch}"))
        .chain((1..count).map(|k| format!("shared-{k}")))
        .collect();
    let values: Vec<String> = (0..count).map(|r| format!("v{batch}-{r}")).collect();
    let records: Vec<batch::NewRecord> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| (Some(k.as_bytes()), Some(v.as_bytes()), 1))
        .collect();
    batch::build_for_producer(&records, pid, epoch, batch * count)
}

/// Idempotence across a restart of a compacted partition the cleaner thinned: the producer
/// state is rebuilt from batches holding fewer records than their offset range (Kafka's
/// compaction keeps a batch's base offset, last offset delta and base sequence), so a retry
/// of the last acknowledged batch is answered at its first offsets, not stored again.
#[test]
fn idempotent_retries_are_stored_once_after_the_cleaner_thinned_batches_and_a_restart() {
    let mut broker = TestBroker::start_temp(&["--log-cleaner-backoff-ms", "50"]);
    let topic = "compacted-idem";
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "100"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(try_create_topic(&broker.addr, topic, 1, &configs), 0);
    let (pid, epoch) = test_support::kafka::init_producer_id(&broker.addr);
    const COUNT: i32 = 10;
    // A burst of batches, then three batches in segments of their own, the last in the active
    // segment (which the cleaner never touches); the rebuild walks the last two segments.
    let bursts = [0..200, 200..201, 201..202, 202..203];
    for (i, burst) in bursts.into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(150));
        }
        for n in burst {
            let answer = produce(&broker.addr, topic, 0, thinning_batch(pid, epoch, n, COUNT));
            assert_eq!(answer, (0, i64::from(n * COUNT)), "batch {n}");
        }
    }
    // The cleaner thins batches 0 to 200 to one record over their ten offsets (batch 201's
    // shared keys are the newest the cleaner's map holds: the active segment is not read).
    let thinned = || {
        let (mut offset, mut thinned) = (0, 0);
        while offset < 2020 {
            let fetch = test_support::kafka::fetch_request(topic, offset, 0, 50 << 20);
            let fetched: kafka_protocol::messages::FetchResponse = test_support::wire::call(
                &mut test_support::wire::connect(&broker.addr),
                kafka_protocol::messages::ApiKey::Fetch,
                12,
                &fetch,
            );
            let records = fetched.responses[0].partitions[0].records.clone().unwrap();
            let mut at = 0;
            while at < records.len() {
                let header = record_batch::validate_stored(&records[at..]).unwrap();
                thinned += usize::from(header.record_count < header.last_offset_delta + 1);
                at += header.size as usize;
                offset = header.next_offset();
            }
        }
        thinned
    };
    wait_until(
        "the cleaner thinned batches 0 to 200",
        Duration::from_secs(20),
        || thinned() == 201,
    );

    let end = i64::from(203 * COUNT);
    for restart in ["a clean stop", "kill -9"] {
        if restart == "kill -9" {
            broker.kill9();
        } else {
            broker.stop();
        }
        broker.restart();
        // The last batch, and one the cleaner thinned (its sequences are still ten).
        for n in [202, 201, 200] {
            let retry = thinning_batch(pid, epoch, n, COUNT);
            assert_eq!(
                produce(&broker.addr, topic, 0, retry),
                (0, i64::from(n * COUNT)),
                "batch {n} retried after {restart}"
            );
        }
        assert_eq!(
            test_support::kafka::list_offset(&broker.addr, topic, -1).1,
            end,
            "after {restart}: nothing stored twice"
        );
    }
    // The producer's next batch follows on.
    let next = thinning_batch(pid, epoch, 203, COUNT);
    assert_eq!(produce(&broker.addr, topic, 0, next), (0, end));
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    assert!(!log.contains("could not rebuild producer state"), "{log}");
}

/// The empty batch the cleaner keeps for a producer's last batch (all its records shadowed) is
/// read past by librdkafka: the records after it are delivered, and the batch is served with
/// no records over its offset.
#[test]
fn librdkafka_reads_past_the_empty_batch_kept_for_a_producers_last_batch() {
    let broker = TestBroker::start_temp(&["--log-cleaner-backoff-ms", "50"]);
    let topic = "compacted-empty";
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "100"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(try_create_topic(&broker.addr, topic, 1, &configs), 0);
    let (pid, epoch) = test_support::kafka::init_producer_id(&broker.addr);
    // Written now: a producer whose last batch is older than producer.id.expiration.ms (a day)
    // is expired, and keeps no empty batch.
    let now = log_core::now_ms();
    let idempotent = batch::build_for_producer(&[(Some(b"k"), Some(b"first"), now)], pid, epoch, 0);
    assert_eq!(produce(&broker.addr, topic, 0, idempotent), (0, 0));
    // Later values of the same key, each in a segment of its own.
    for (i, value) in ["second", "third", "fourth"].iter().enumerate() {
        std::thread::sleep(Duration::from_millis(150));
        let plain = batch::build(&[(Some(b"k"), Some(value.as_bytes()), now)]);
        assert_eq!(produce(&broker.addr, topic, 0, plain), (0, i as i64 + 1));
    }
    let first_batch = || {
        let fetch = test_support::kafka::fetch_request(topic, 0, 0, 1 << 20);
        let fetched: kafka_protocol::messages::FetchResponse = test_support::wire::call(
            &mut test_support::wire::connect(&broker.addr),
            kafka_protocol::messages::ApiKey::Fetch,
            12,
            &fetch,
        );
        let records = fetched.responses[0].partitions[0].records.clone().unwrap();
        record_batch::validate_stored(&records).unwrap()
    };
    wait_until(
        "the cleaner emptied offset 0",
        Duration::from_secs(20),
        || first_batch().record_count == 0,
    );
    assert_eq!(first_batch().producer_id, pid);
    let records = read_all(&broker.addr, topic);
    assert!(!records.contains_key(&0), "{records:?}");
    assert_eq!(
        records.values().last().map(|(_, v)| v.as_deref()),
        Some(Some("fourth")),
        "{records:?}"
    );
}
