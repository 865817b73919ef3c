//! Client quotas (AlterClientQuotas, DescribeClientQuotas, `lograil quota`) message by message
//! and across a restart, and their enforcement against librdkafka: a producer over its
//! `producer_byte_rate` is slowed to it while another client id is not, and librdkafka's
//! statistics show the throttle.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::ClientContext;

use test_support::kafka::{create_topic, fetch_request, max_throttle_ms, produce, text};
use test_support::wire::{call, connect, read_response};
use test_support::{lograil_stdout, TestBroker};

const INVALID_REQUEST: i16 = 42;

/// (entity type, name; `None` the default)
type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

pub(crate) fn alter(
    addr: &str,
    entity: Entity,
    ops: &[(&str, Option<f64>)],
    validate_only: bool,
) -> i16 {
    let request = AlterClientQuotasRequest::default()
        .with_validate_only(validate_only)
        .with_entries(vec![EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(text(t))
                            .with_entity_name(n.map(text))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(k, v)| {
                        OpData::default()
                            .with_key(text(k))
                            .with_value(v.unwrap_or(0.0))
                            .with_remove(v.is_none())
                    })
                    .collect(),
            )]);
    let response: AlterClientQuotasResponse =
        call(&mut connect(addr), ApiKey::AlterClientQuotas, 1, &request);
    assert_eq!(response.entries.len(), 1, "{response:?}");
    response.entries[0].error_code
}

/// Each matching entity as "type=name,type=name" (`<default>` for a default) with its values.
fn describe(
    addr: &str,
    filter: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<BTreeMap<String, BTreeMap<String, f64>>, i16> {
    let request = DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            filter
                .iter()
                .map(|(t, m, n)| {
                    ComponentData::default()
                        .with_entity_type(text(t))
                        .with_match_type(*m)
                        .with_match(n.map(text))
                })
                .collect(),
        );
    let response: DescribeClientQuotasResponse = call(
        &mut connect(addr),
        ApiKey::DescribeClientQuotas,
        1,
        &request,
    );
    if response.error_code != 0 {
        return Err(response.error_code);
    }
    Ok(response
        .entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c.entity_type,
                        c.entity_name.as_deref().unwrap_or("<default>")
                    )
                })
                .collect::<Vec<_>>()
                .join(",");
            let values = e
                .values
                .into_iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect())
}

const EXACT: i8 = 0;
const DEFAULT: i8 = 1;
const ANY: i8 = 2;

#[test]
fn client_quotas_are_set_described_removed_and_kept_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(&tmp.path().join("data"), &[]);
    let addr = broker.addr.clone();
    let p = "producer_byte_rate";
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("a"))],
            &[(p, Some(1000.0))],
            false
        ),
        0
    );
    assert_eq!(
        alter(
            &addr,
            &[("client-id", None)],
            &[
                ("consumer_byte_rate", Some(2000.0)),
                ("request_percentage", Some(12.5))
            ],
            false
        ),
        0
    );
    assert_eq!(
        alter(
            &addr,
            &[("user", None), ("client-id", Some("a"))],
            &[(p, Some(3000.0))],
            false
        ),
        0
    );
    // validate_only checks and changes nothing.
    assert_eq!(
        alter(&addr, &[("user", Some("bob"))], &[(p, Some(1.0))], true),
        0
    );
    // Refused as Kafka refuses: unknown key, entity type, fractional byte rate, negative.
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("a"))],
            &[("bytes", Some(1.0))],
            false
        ),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(&addr, &[("group", Some("a"))], &[(p, Some(1.0))], false),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(&addr, &[("client-id", Some("a"))], &[(p, Some(1.5))], false),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(&addr, &[("client-id", Some("a"))], &[(p, Some(-1.0))], true),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("a")), ("client-id", Some("b"))],
            &[(p, Some(1.0))],
            false
        ),
        INVALID_REQUEST
    );

    let all = describe(&addr, &[], false).unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all["client-id=a"][p], 1000.0);
    assert_eq!(all["client-id=<default>"]["request_percentage"], 12.5);
    assert_eq!(all["user=<default>,client-id=a"][p], 3000.0);
    // Filters: exact, default, any; strict leaves out entities with more components.
    let exact = describe(&addr, &[("client-id", EXACT, Some("a"))], false).unwrap();
    assert_eq!(
        exact.keys().collect::<Vec<_>>(),
        ["client-id=a", "user=<default>,client-id=a"]
    );
    let strict = describe(&addr, &[("client-id", EXACT, Some("a"))], true).unwrap();
    assert_eq!(strict.keys().collect::<Vec<_>>(), ["client-id=a"]);
    let default = describe(&addr, &[("client-id", DEFAULT, None)], false).unwrap();
    assert_eq!(default.keys().collect::<Vec<_>>(), ["client-id=<default>"]);
    let users = describe(&addr, &[("user", ANY, None)], false).unwrap();
    assert_eq!(
        users.keys().collect::<Vec<_>>(),
        ["user=<default>,client-id=a"]
    );
    assert!(describe(&addr, &[("ip", ANY, None)], false)
        .unwrap()
        .is_empty());
    assert_eq!(
        describe(&addr, &[("group", ANY, None)], false),
        Err(INVALID_REQUEST)
    );
    assert_eq!(
        describe(&addr, &[("user", EXACT, None)], false),
        Err(INVALID_REQUEST)
    );

    // Removal of one key, then of the entity's last.
    assert_eq!(
        alter(
            &addr,
            &[("client-id", None)],
            &[("request_percentage", None)],
            false
        ),
        0
    );
    assert_eq!(
        alter(&addr, &[("client-id", Some("a"))], &[(p, None)], false),
        0
    );

    broker.stop();
    broker.restart();
    let addr = broker.addr.clone();
    let after = describe(&addr, &[], false).unwrap();
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(
        after["client-id=<default>"],
        BTreeMap::from([("consumer_byte_rate".to_string(), 2000.0)])
    );
    assert_eq!(after["user=<default>,client-id=a"][p], 3000.0);

    // The CLI reads and writes the same quotas.
    let cli = |args: &[&str]| {
        let mut args = [&["quota"], args].concat();
        args.extend(["--bootstrap-server", &addr]);
        lograil_stdout(&args)
    };
    cli(&["set", "--client-id", "cli", "--producer-byte-rate", "4096"]);
    assert_eq!(
        describe(&addr, &[("client-id", EXACT, Some("cli"))], true).unwrap()["client-id=cli"][p],
        4096.0
    );
    let listed = cli(&["describe", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    let text = cli(&["describe", "--client-id-default", "--strict"]);
    assert!(text.contains("consumer_byte_rate=2000"), "{text}");
    cli(&["remove", "--client-id", "cli"]);
    assert!(describe(&addr, &[("client-id", EXACT, Some("cli"))], false)
        .unwrap()
        .is_empty());
    // Addresses (KIP-612 `ip` entities) take their connection rate, and only that.
    cli(&["set", "--ip", "10.1.2.3", "--connection-creation-rate", "7"]);
    cli(&["set", "--ip-default", "--connection-creation-rate", "50"]);
    let ips = describe(&addr, &[("ip", EXACT, Some("10.1.2.3"))], true).unwrap();
    assert_eq!(
        ips["ip=10.1.2.3"]["connection_creation_rate"], 7.0,
        "{ips:?}"
    );
    let text = cli(&["describe", "--ip-default", "--strict"]);
    assert!(text.contains("connection_creation_rate=50"), "{text}");
    cli(&["remove", "--ip", "10.1.2.3"]);
    cli(&["remove", "--ip-default"]);
    let ips = describe(&addr, &[("ip", EXACT, Some("10.1.2.3"))], false).unwrap();
    assert!(ips.is_empty(), "{ips:?}");

    // A corrupt file stops the broker at start with a reason naming it.
    broker.stop();
    std::fs::write(tmp.path().join("data/client-quotas"), "{not json").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lograil"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(tmp.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("client-quotas"), "{err}");
}

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
fn produce_until(addr: &str, client_id: &str, topic: &str, until: Instant) -> Meter {
    let meter = Meter::default();
    let producer: ThreadedProducer<Meter> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("client.id", client_id)
        .set("linger.ms", "5")
        .set("queue.buffering.max.kbytes", "2048")
        .set("statistics.interval.ms", "500")
        .create_with_context(meter.clone())
        .unwrap();
    let value = vec![b'q'; 4096];
    while Instant::now() < until {
        match producer.send(BaseRecord::<(), _>::to(topic).payload(&value)) {
            Ok(()) => {}
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
        let slow = s.spawn(|| produce_until(&addr, "slow", "quota-slow", end));
        let fast = s.spawn(|| produce_until(&addr, "fast", "quota-fast", end));
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
