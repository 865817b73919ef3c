//! Quotas enforced: a producer over its `producer_byte_rate` is slowed to it while another
//! client id is not (librdkafka, whose statistics show the throttle), also when its appends are
//! slow (a disk whose fsyncs take long), and a consumer over its `consumer_byte_rate` is
//! throttled and its connection muted.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;

use test_support::kafka::{
    create_topic, fetch_request, max_throttle_ms, produce, produce_request, text,
};
use test_support::wire::{call, connect, read_response};
use test_support::{PowerCutFs, TestBroker};

use crate::quotas::alter;

/// Delivered payload bytes with their time, and the largest throttle librdkafka's
/// statistics reported.
#[derive(Clone, Default)]
struct Meter {
    delivered: Arc<Mutex<Vec<(Instant, usize)>>>,
    failed: Arc<Mutex<Vec<String>>>,
    throttle_max_ms: Arc<AtomicI64>,
    stats: Arc<AtomicI64>,
}

impl ClientContext for Meter {
    fn stats(&self, statistics: Statistics) {
        self.stats.fetch_add(1, Ordering::Relaxed);
        self.throttle_max_ms
            .fetch_max(max_throttle_ms(&statistics), Ordering::Relaxed);
    }
}

impl ProducerContext for Meter {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) => {
                use rdkafka::message::Message;
                let n = m.payload().map_or(0, <[u8]>::len);
                self.delivered.lock().unwrap().push((Instant::now(), n));
            }
            Err((e, _)) => self.failed.lock().unwrap().push(e.to_string()),
        }
    }
}

/// Produces 4 KiB records as fast as librdkafka takes them until `until`.
/// acks=1: an append's latency is then the page cache's, not a busy disk's fsync (an fsync
/// taking longer than a request's bytes at the quota holds a producer below its quota whatever
/// its throttle: requests of one connection are handled in turn). At most `pace` bytes a
/// second: the unthrottled producer need not fill the machine's disk for other tests.
fn produce_until(addr: &str, client_id: &str, topic: &str, until: Instant, pace: f64) -> Meter {
    let meter = Meter::default();
    let producer: ThreadedProducer<Meter> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("client.id", client_id)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("queue.buffering.max.kbytes", "2048")
        .set("statistics.interval.ms", "500")
        .create_with_context(meter.clone())
        .unwrap();
    let value = vec![b'q'; 4096];
    let start = Instant::now();
    let mut sent = 0.0;
    while Instant::now() < until {
        let due = start + Duration::from_secs_f64(sent / pace);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        match producer.send(BaseRecord::<(), _>::to(topic).payload(&value)) {
            Ok(()) => sent += value.len() as f64,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err((e, _)) => panic!("{client_id}: {e}"),
        }
    }
    // What is still queued is not counted: purge it rather than wait for it.
    producer.purge(rdkafka::producer::PurgeConfig::default().queue().inflight());
    let _ = producer.flush(Duration::from_secs(15));
    // One more statistics interval, so the last throttle is reported.
    std::thread::sleep(Duration::from_millis(600));
    meter
}

/// Bytes per second delivered between `from` and `to`.
fn rate(meter: &Meter, from: Instant, to: Instant) -> f64 {
    let delivered = meter.delivered.lock().unwrap();
    let bytes: usize = delivered
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, n)| n)
        .sum();
    bytes as f64 / (to - from).as_secs_f64()
}

#[test]
fn a_producer_over_its_byte_rate_is_slowed_to_it_and_another_client_id_is_not() {
    const QUOTA: f64 = 1_000_000.0;
    // Kafka's default window: 11 s at the quota may go at once before the throttle starts.
    const BURST: usize = 11_000_000;
    let broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("slow"))],
            &[("producer_byte_rate", Some(QUOTA))],
            false
        ),
        0
    );
    let start = Instant::now();
    let end = start + Duration::from_secs(10);
    let (slow, fast) = std::thread::scope(|s| {
        let slow = s.spawn(|| produce_until(&addr, "slow", "quota-slow", end, f64::INFINITY));
        let fast = s.spawn(|| produce_until(&addr, "fast", "quota-fast", end, 10.0 * QUOTA));
        (slow.join().unwrap(), fast.join().unwrap())
    });
    assert!(
        slow.failed
            .lock()
            .unwrap()
            .iter()
            .all(|e| e.contains("Purged")),
        "{:?}",
        slow.failed
    );
    // The measurement starts once the slow producer's burst is spent (and a moment more).
    let burst_spent = {
        let delivered = slow.delivered.lock().unwrap();
        let mut total = 0;
        delivered
            .iter()
            .find(|(_, n)| {
                total += n;
                total >= BURST
            })
            .map(|(t, _)| *t)
            .expect("the slow producer never got past its burst")
    };
    let from = burst_spent + Duration::from_millis(500);
    assert!(
        end - from >= Duration::from_secs(5),
        "the burst took {:?}: too little time left to measure",
        burst_spent - start
    );
    let slow_rate = rate(&slow, from, end);
    let fast_rate = rate(&fast, from, end);
    eprintln!(
        "burst spent after {:?}; measured over {:?}: slow {slow_rate:.0} B/s, fast {fast_rate:.0} B/s, \
         slow's largest throttle {} ms",
        burst_spent - start,
        end - from,
        slow.throttle_max_ms.load(Ordering::Relaxed)
    );
    // Payload bytes: the quota counts request bytes, a few percent more.
    assert!(
        (slow_rate / QUOTA - 1.0).abs() <= 0.15,
        "slow producer at {slow_rate:.0} B/s, quota {QUOTA}"
    );
    assert!(
        fast_rate > 3.0 * QUOTA,
        "fast producer only at {fast_rate:.0} B/s"
    );
    assert!(slow.stats.load(Ordering::Relaxed) > 0 && fast.stats.load(Ordering::Relaxed) > 0);
    assert!(
        slow.throttle_max_ms.load(Ordering::Relaxed) > 0,
        "librdkafka's statistics show no throttle for the slow producer"
    );
    assert_eq!(
        fast.throttle_max_ms.load(Ordering::Relaxed),
        0,
        "the fast producer was throttled"
    );
}

/// One connection's Fetch of partition 0 from offset 0: (throttle_time_ms, record bytes).
fn fetch_throttle(stream: &mut std::net::TcpStream, topic: &str) -> (i32, usize) {
    let request = fetch_request(topic, 0, 0, 1 << 20);
    let response: FetchResponse = call(stream, ApiKey::Fetch, 11, &request);
    let records = response.responses[0].partitions[0]
        .records
        .as_ref()
        .map_or(0, |r| r.len());
    (response.throttle_time_ms, records)
}

#[test]
fn a_consumer_over_its_byte_rate_is_throttled_and_its_connection_muted() {
    // A 2-second window: a quota of 10000 B/s allows a burst of 20000 bytes.
    let broker = TestBroker::start_temp(&["--quota-window-num", "2"]);
    let addr = broker.addr.clone();
    let value = vec![b'c'; 60_000];
    create_topic(&addr, "quota-fetch", 1);
    let records = log_core::batch::build(&[(None, Some(&value[..]), 1)]);
    assert_eq!(produce(&addr, "quota-fetch", 0, records).0, 0);
    // Without a quota: no throttle.
    let mut stream = connect(&addr);
    let (throttle, bytes) = fetch_throttle(&mut stream, "quota-fetch");
    assert!(bytes > 60_000, "{bytes}");
    assert_eq!(throttle, 0);

    // The wire tests' client id is "e2e".
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("e2e"))],
            &[("consumer_byte_rate", Some(10_000.0))],
            false
        ),
        0
    );
    let (throttle, _) = fetch_throttle(&mut stream, "quota-fetch");
    // (bytes - 20000 burst) / 10000 B/s: about 4 s; at most the window, 2 s.
    assert_eq!(throttle, 2000, "throttle_time_ms of an over-quota fetch");
    // The connection reads nothing more until the throttle has passed.
    let sent = Instant::now();
    let _: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    );
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(1900),
        "the next request was answered after {waited:?}, inside the 2 s throttle"
    );
    // Another client id is not throttled.
    let other = rdkafka_fetch_throttle_free(&addr);
    assert!(other, "another client id was throttled");

    // request_percentage: any handler time over a quota this small is throttled.
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("e2e"))],
            &[
                ("consumer_byte_rate", None),
                ("request_percentage", Some(0.0001))
            ],
            false
        ),
        0
    );
    let mut stream = connect(&addr);
    let mut throttled = false;
    for _ in 0..3 {
        let metadata: MetadataResponse = call(
            &mut stream,
            ApiKey::Metadata,
            12,
            &MetadataRequest::default(),
        );
        throttled |= metadata.throttle_time_ms > 0;
    }
    assert!(throttled, "request_percentage never throttled");
}

/// Whether a Fetch under another client id ("other") gets no throttle.
fn rdkafka_fetch_throttle_free(addr: &str) -> bool {
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::protocol::{Decodable, Encodable};
    use std::io::Write;
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(text("quota-fetch")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(11)
        .with_correlation_id(7)
        .with_client_id(Some(text("other")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, ApiKey::Fetch.request_header_version(11))
        .unwrap();
    request.encode(&mut buf, 11).unwrap();
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    let mut stream = connect(addr);
    stream.write_all(&buf).unwrap();
    let mut body = read_response(&mut stream).unwrap();
    ResponseHeader::decode(&mut body, ApiKey::Fetch.response_header_version(11)).unwrap();
    let response = FetchResponse::decode(&mut body, 11).unwrap();
    assert!(response.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|r| r.len() > 60_000));
    response.throttle_time_ms == 0
}

/// A producer honouring `throttle_time_ms` (KIP-219), one request at a time, on a disk whose
/// fsyncs take 200 ms still gets its quota: the bucket fills while the append waits for its
/// fsync, so each throttle is shorter by that time (one of the whole request's bytes at the
/// quota would hold it to 600 / (600 + 200) of its quota).
#[test]
fn a_producer_on_a_slow_disk_is_held_to_its_quota_not_below_it() {
    const QUOTA: f64 = 1_000_000.0;
    let tmp = tempfile::tempdir().unwrap();
    let mount = tmp.path().join("mnt");
    std::fs::create_dir(&mount).unwrap();
    let fs = PowerCutFs::mount(&mount).expect("a FUSE mount (/dev/fuse, as root)");
    // A 2-second window: a burst of 2 MB at 1 MB/s.
    let broker = TestBroker::start(&mount.join("data"), &["--quota-window-num", "2"]);
    let addr = broker.addr.clone();
    create_topic(&addr, "quota-slow-disk", 1);
    // The wire tests' client id is "e2e".
    let entity = [("client-id", Some("e2e"))];
    assert_eq!(
        alter(
            &addr,
            &entity,
            &[("producer_byte_rate", Some(QUOTA))],
            false
        ),
        0
    );
    fs.set_fsync_delay(Duration::from_millis(200));
    let value = vec![b's'; 600_000];
    let mut stream = connect(&addr);
    // (answered at, request bytes, throttle_time_ms), one request at a time, each sent once
    // the previous one's throttle has passed.
    let mut answers = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(9) {
        let records = log_core::batch::build(&[(None, Some(&value[..]), log_core::now_ms())]);
        let request = produce_request("quota-slow-disk", 0, Some(records));
        let response: ProduceResponse = call(&mut stream, ApiKey::Produce, 9, &request);
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
        answers.push((Instant::now(), value.len(), response.throttle_time_ms));
        std::thread::sleep(Duration::from_millis(response.throttle_time_ms as u64));
    }
    // The rate from the first throttled answer (the burst spent) to the last.
    let throttles: Vec<i32> = answers.iter().map(|(_, _, t)| *t).collect();
    let first = throttles.iter().position(|t| *t > 0);
    let first = first.unwrap_or_else(|| panic!("never throttled: {throttles:?}"));
    assert!(
        answers.len() >= first + 6,
        "too few answers after the burst: {throttles:?}"
    );
    let (from, _, _) = answers[first];
    let (to, _, _) = answers[answers.len() - 1];
    let bytes: usize = answers[first + 1..].iter().map(|(_, n, _)| n).sum();
    let rate = bytes as f64 / (to - from).as_secs_f64();
    eprintln!("{rate:.0} B/s; throttles {throttles:?}");
    assert!(
        (rate / QUOTA - 1.0).abs() <= 0.15,
        "a producer on a slow disk at {rate:.0} B/s, quota {QUOTA}; throttles {throttles:?}"
    );
    // Throttled all the same, by less than the request's bytes at the quota (600 ms).
    assert!(
        throttles[first..].iter().all(|t| (1..600).contains(t)),
        "{throttles:?}"
    );
}
