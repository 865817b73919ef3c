//! Backlog-bounded topics against the real binary: a producer to a topic whose consumer group
//! is over `lograil.backlog.max.records` (or `max.age.ms`) is throttled, or refused in
//! `reject` mode, and freed once the group commits; librdkafka shows both; `lograil topic
//! describe` shows the bound and the backlog.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use test_support::kafka::{
    max_throttle_ms, produce_response, set_configs, try_create_topic, TOPIC_RESOURCE,
};
use test_support::{lograil_stdout, TestBroker};

const POLICY_VIOLATION: i16 = 44;
const INVALID_CONFIG: i16 = 40;
const TOPIC: &str = "bounded";
const GROUP: &str = "billing";

/// Produces `records` records in one batch to partition 0 over the wire: (error code, error
/// message, throttle_time_ms).
fn produce(addr: &str, records: usize) -> (i16, Option<String>, i32) {
    produce_to(addr, TOPIC, records)
}

/// [`produce`] to `topic`.
fn produce_to(addr: &str, topic: &str, records: usize) -> (i16, Option<String>, i32) {
    let values: Vec<Vec<u8>> = (0..records).map(|i| format!("r{i}").into_bytes()).collect();
    let response = produce_response(addr, topic, 0, now_batch(&values));
    let p = &response.responses[0].partition_responses[0];
    (
        p.error_code,
        p.error_message.as_ref().map(|m| m.to_string()),
        response.throttle_time_ms,
    )
}

/// A batch of these values, stamped now.
fn now_batch(values: &[Vec<u8>]) -> bytes::Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let stamped: Vec<_> = values.iter().map(|v| (None, Some(&v[..]), now)).collect();
    log_core::batch::build(&stamped)
}

/// The group commits `offset` on partitions 0 and 1 (librdkafka, no subscription needed).
fn commit(addr: &str, offsets: [i64; 2]) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut list = TopicPartitionList::new();
    for (p, offset) in offsets.into_iter().enumerate() {
        list.add_partition_offset(TOPIC, p as i32, Offset::Offset(offset))
            .unwrap();
    }
    consumer.commit(&list, CommitMode::Sync).unwrap();
}

/// Waits out the broker's measure of the backlog (refreshed at most every 100 ms).
fn settle() {
    std::thread::sleep(Duration::from_millis(250));
}

#[derive(Clone, Default)]
struct Deliveries {
    results: Arc<Mutex<Vec<Result<(), String>>>>,
    /// The largest `throttle` librdkafka's statistics reported, in ms.
    throttle_max_ms: Arc<AtomicI64>,
}

impl ClientContext for Deliveries {
    fn stats(&self, statistics: Statistics) {
        self.throttle_max_ms
            .fetch_max(max_throttle_ms(&statistics), Ordering::Relaxed);
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        self.results
            .lock()
            .unwrap()
            .push(result.as_ref().map(|_| ()).map_err(|(e, _)| e.to_string()));
    }
}

/// librdkafka produces one record to partition 0: its delivery outcome.
fn rdkafka_produce_one(addr: &str) -> Result<(), String> {
    rdkafka_produce(addr).0
}

/// librdkafka produces one record to partition 0: its delivery outcome, and the largest
/// throttle its statistics showed meanwhile (ms).
fn rdkafka_produce(addr: &str) -> (Result<(), String>, i64) {
    let context = Deliveries::default();
    let producer: ThreadedProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("message.timeout.ms", "10000")
        .set("statistics.interval.ms", "100")
        .create_with_context(context.clone())
        .unwrap();
    producer
        .send(BaseRecord::<(), _>::to(TOPIC).partition(0).payload("x"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(Duration::from_secs(15)).unwrap();
    // A statistics interval or two after the response.
    std::thread::sleep(Duration::from_millis(300));
    let results = context.results.lock().unwrap();
    assert_eq!(results.len(), 1);
    (
        results[0].clone(),
        context.throttle_max_ms.load(Ordering::Relaxed),
    )
}

fn describe(addr: &str) -> String {
    lograil_stdout(&["topic", "describe", TOPIC, "--bootstrap-server", addr])
}

#[test]
fn producers_are_throttled_or_refused_while_a_group_is_over_its_backlog_bound() {
    let mut broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    // Bad values are refused at creation.
    assert_eq!(
        try_create_topic(&addr, "bad", 2, &[("lograil.backlog.mode", "drop")]),
        INVALID_CONFIG
    );
    assert_eq!(
        try_create_topic(&addr, "bad", 2, &[("lograil.backlog.max.records", "0")]),
        INVALID_CONFIG
    );
    assert_eq!(
        try_create_topic(&addr, "bad", 2, &[("lograil.other", "1")]),
        INVALID_CONFIG
    );
    assert_eq!(
        try_create_topic(
            &addr,
            TOPIC,
            2,
            &[
                ("lograil.backlog.group", GROUP),
                ("lograil.backlog.max.records", "100")
            ]
        ),
        0
    );

    // Within the bound: no throttle. 150 records put the group (which never committed) over.
    assert_eq!(produce(&addr, 150), (0, None, 0));
    settle();
    let (code, _, throttle) = produce(&addr, 10);
    assert_eq!(code, 0, "throttle mode appends");
    // Measured before it: 150 of 100, half a bound over: 100 ms + 500 ms.
    assert_eq!(throttle, 600);
    settle();
    let (_, _, grown) = produce(&addr, 100);
    assert!(
        grown > throttle,
        "the throttle grows with the backlog: {grown} after {throttle}"
    );
    // librdkafka is throttled too, and says so in its statistics.
    settle();
    let (delivered, rd_throttle) = rdkafka_produce(&addr);
    assert_eq!(delivered, Ok(()));
    assert!(rd_throttle > 0, "librdkafka's statistics show no throttle");
    let text = describe(&addr);
    assert!(
        text.contains("lograil.backlog.group") && text.contains(GROUP),
        "{text}"
    );
    assert!(
        text.contains("records=261") && text.contains("over_bound=true"),
        "{text}"
    );

    // The group catches up: the throttle lifts.
    commit(&addr, [261, 0]);
    settle();
    assert_eq!(produce(&addr, 10), (0, None, 0));
    assert!(describe(&addr).contains("records=10 over_bound=false"));

    // Reject mode: refused with POLICY_VIOLATION and why, nothing appended; librdkafka
    // reports it as the delivery error.
    set_configs(
        &addr,
        TOPIC_RESOURCE,
        TOPIC,
        &[
            ("lograil.backlog.mode", "reject"),
            ("lograil.backlog.max.records", "5"),
        ],
    );
    settle();
    let (code, message, _) = produce(&addr, 1);
    assert_eq!(code, POLICY_VIOLATION);
    let message = message.unwrap();
    assert!(
        message.contains(GROUP) && message.contains("records=10"),
        "{message}"
    );
    let refused = rdkafka_produce_one(&addr);
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("Policy violation")),
        "{refused:?}"
    );
    commit(&addr, [271, 0]);
    settle();
    assert_eq!(rdkafka_produce_one(&addr), Ok(()));
    assert!(describe(&addr).contains("records=1 over_bound=false"));

    // The bound is kept with the topic.
    broker.stop();
    broker.restart();
    let addr = broker.addr.clone();
    produce(&addr, 10);
    settle();
    assert_eq!(
        produce(&addr, 1).0,
        POLICY_VIOLATION,
        "the bound survives a restart"
    );

    // An age bound: the oldest unread record older than the bound. The group first reads
    // everything (272 records, 10 more after the restart).
    commit(&addr, [282, 0]);
    produce(&addr, 1);
    set_configs(
        &addr,
        TOPIC_RESOURCE,
        TOPIC,
        &[
            ("lograil.backlog.mode", "throttle"),
            ("lograil.backlog.max.records", "-1"),
            ("lograil.backlog.max.age.ms", "1000"),
        ],
    );
    settle();
    assert_eq!(
        produce(&addr, 1).2,
        0,
        "unread records younger than the bound"
    );
    std::thread::sleep(Duration::from_millis(1600));
    let (code, _, throttle) = produce(&addr, 1);
    assert_eq!(code, 0);
    assert!(
        throttle >= 100,
        "unread records over 1 s old: throttle {throttle}"
    );
    assert!(describe(&addr).contains("age_ms="));
}

#[test]
fn the_backlog_and_the_throttles_it_gives_show_in_the_metrics() {
    use crate::metrics::{must, scrape, value};
    let broker = TestBroker::start_temp(&["--metrics-listen", "127.0.0.1:0"]);
    let (addr, metrics) = (broker.addr.clone(), broker.metrics_addr.clone().unwrap());
    assert_eq!(
        try_create_topic(
            &addr,
            TOPIC,
            2,
            &[
                ("lograil.backlog.group", GROUP),
                ("lograil.backlog.max.records", "5"),
                ("lograil.backlog.max.age.ms", "3600000"),
            ]
        ),
        0
    );
    let labels = [("topic", TOPIC), ("group", GROUP)];
    let samples = scrape(&metrics);
    assert_eq!(
        must(&samples, "lograil_topic_backlog_records", &labels),
        0.0
    );
    assert_eq!(
        must(&samples, "lograil_topic_backlog_over_bound", &labels),
        0.0
    );
    assert_eq!(
        must(&samples, "lograil_topic_backlog_max_records", &labels),
        5.0
    );
    assert_eq!(
        must(&samples, "lograil_topic_backlog_max_age_seconds", &labels),
        3600.0
    );
    // Nobody was throttled yet.
    assert_eq!(
        value(&samples, "lograil_client_throttled_responses_total", &[]),
        None
    );

    // 10 records unread: over the bound; the next produce (client id "e2e") is throttled.
    assert_eq!(produce(&addr, 10).0, 0);
    settle();
    let (code, _, throttle_ms) = produce(&addr, 1);
    assert_eq!(code, 0);
    assert!(throttle_ms > 0, "not throttled");
    let samples = scrape(&metrics);
    assert_eq!(
        must(&samples, "lograil_topic_backlog_records", &labels),
        11.0
    );
    assert_eq!(
        must(&samples, "lograil_topic_backlog_over_bound", &labels),
        1.0
    );
    let age = must(&samples, "lograil_topic_backlog_age_seconds", &labels);
    assert!((0.0..60.0).contains(&age), "{age}");
    let client = [("client_id", "e2e")];
    assert_eq!(
        must(
            &samples,
            "lograil_client_throttled_responses_total",
            &client
        ),
        1.0
    );
    assert_eq!(
        must(&samples, "lograil_client_throttle_seconds_total", &client),
        f64::from(throttle_ms) / 1000.0
    );

    // The group catches up: under the bound again.
    commit(&addr, [11, 0]);
    let samples = scrape(&metrics);
    assert_eq!(
        must(&samples, "lograil_topic_backlog_records", &labels),
        0.0
    );
    assert_eq!(
        must(&samples, "lograil_topic_backlog_over_bound", &labels),
        0.0
    );
}

/// Once the group's drain rate is known, the throttle is sized from it like a quota's: a
/// producer pushing four times faster than the group drains, and waiting out every throttle as
/// a client does (KIP-219), is slowed to about the group's pace (not stopped and released in
/// bursts), with throttles no longer than the group needs to drain its backlog, and the backlog
/// stays near its bound.
#[test]
fn the_throttle_slows_producers_to_the_pace_the_group_drains_at() {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    const BOUND: i64 = 200;
    const DRAIN_PER_TICK: i64 = 50; // every 100 ms: 500 records/s
    const BATCH: usize = 20; // every 10 ms at most: 2,000 records/s offered
    let broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    assert_eq!(
        try_create_topic(
            &addr,
            TOPIC,
            2,
            &[
                ("lograil.backlog.group", GROUP),
                ("lograil.backlog.max.records", &BOUND.to_string()),
            ]
        ),
        0
    );
    let end = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // The group: every 100 ms it commits 50 records further, never past the log end.
    let drainer = {
        let (addr, end, stop) = (addr.clone(), end.clone(), stop.clone());
        std::thread::spawn(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &addr)
                .set("group.id", GROUP)
                .set("enable.auto.commit", "false")
                .create()
                .unwrap();
            let (mut committed, mut commits) = (0i64, Vec::new());
            let start = Instant::now();
            for tick in 1.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let at = start + Duration::from_millis(100 * tick);
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                committed = (committed + DRAIN_PER_TICK).min(end.load(Ordering::Relaxed));
                let mut list = TopicPartitionList::new();
                list.add_partition_offset(TOPIC, 0, Offset::Offset(committed))
                    .unwrap();
                consumer.commit(&list, CommitMode::Sync).unwrap();
                commits.push((Instant::now(), committed));
            }
            commits
        })
    };
    // The producer: batches of 20 as fast as every 10 ms, each throttle waited out.
    let values: Vec<Vec<u8>> = (0..BATCH).map(|i| format!("r{i}").into_bytes()).collect();
    let start = Instant::now();
    let mut appends = Vec::new(); // (instant, log end after it, throttle ms)
    while start.elapsed() < Duration::from_secs(9) {
        let response = produce_response(&addr, TOPIC, 0, now_batch(&values));
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "throttle mode appends");
        let after = p.base_offset + BATCH as i64;
        end.store(after, Ordering::Relaxed);
        appends.push((Instant::now(), after, response.throttle_time_ms));
        std::thread::sleep(Duration::from_millis(
            u64::try_from(response.throttle_time_ms).unwrap().max(10),
        ));
    }
    // The drain rate the broker measured and sizes the throttle from, while the group drains.
    let state = describe(&addr);
    stop.store(true, Ordering::Relaxed);
    let commits = drainer.join().unwrap();
    let measured: f64 = state
        .split_whitespace()
        .find_map(|field| field.strip_prefix("drain_per_s="))
        .and_then(|n| n.split(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no drain rate in the backlog state: {state}"));
    assert!(
        (300.0..=700.0).contains(&measured),
        "the broker measured the group's ~500/s: {state}"
    );

    // From 3 s on (the drain rate is known after a second of commits): the accepted rate near
    // the drain rate, every second, and the backlog near its bound.
    let from = start + Duration::from_secs(3);
    let committed_at = |t: Instant| {
        commits
            .iter()
            .take_while(|&&(at, _)| at <= t)
            .last()
            .map_or(0, |&(_, c)| c)
    };
    let end_at = |t: Instant| {
        appends
            .iter()
            .take_while(|&&(at, _, _)| at <= t)
            .last()
            .map_or(0, |&(_, e, _)| e)
    };
    let until = appends.last().unwrap().0;
    let secs = until.duration_since(from).as_secs_f64();
    let drained = (committed_at(until) - committed_at(from)) as f64 / secs;
    let accepted = (end_at(until) - end_at(from)) as f64 / secs;
    assert!(
        drained > 300.0,
        "the group drains about 500/s: {drained:.0}/s"
    );
    assert!(
        (0.5 * drained..=2.0 * drained).contains(&accepted),
        "accepted {accepted:.0}/s against a drain of {drained:.0}/s"
    );
    let per_second: Vec<i64> = (0..6)
        .map(|s| {
            let t = from + Duration::from_secs(s);
            end_at(t + Duration::from_secs(1)) - end_at(t)
        })
        .collect();
    // Never stopped for a whole second (at least a batch), never let through in a flood.
    assert!(
        per_second
            .iter()
            .all(|&n| (BATCH as i64..=1500).contains(&n)),
        "records accepted each second (the group drains ~500): {per_second:?}"
    );
    let backlog_max = appends
        .iter()
        .filter(|&&(at, _, _)| at >= from)
        .map(|&(at, e, _)| e - committed_at(at))
        .max()
        .unwrap();
    assert!(
        backlog_max <= BOUND + 500,
        "the backlog stays near its bound of {BOUND}: up to {backlog_max}"
    );
    // Slowed, not stopped: each throttle at most about the time the group needs to drain the
    // backlog (under 1.4 s at 500/s); the rule used before the drain rate is known gives 100 ms
    // and 1 s more per bound's worth over, and the broker's cap is 30 s.
    let throttles: Vec<i32> = appends
        .iter()
        .filter(|&&(at, _, t)| at >= from && t > 0)
        .map(|&(_, _, t)| t)
        .collect();
    assert!(!throttles.is_empty(), "never throttled");
    let max = *throttles.iter().max().unwrap();
    eprintln!(
        "drained {drained:.0}/s (the broker: {measured:.0}/s), accepted {accepted:.0}/s, per \
         second {per_second:?}, backlog up to {backlog_max}, {} throttles, max {max} ms",
        throttles.len(),
    );
    assert!(max <= 1500, "throttles up to {max} ms: {throttles:?}");
}

/// A share group's backlog is bounded too: by its share-partition start offset (SPSO), which
/// moves as its members acknowledge. Over the bound in `reject` mode a producer is refused;
/// once the workers have acknowledged, it is accepted again.
#[test]
fn a_share_groups_backlog_is_bounded_by_its_start_offset() {
    let broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    let (topic, group) = ("tasks", "workers");
    assert_eq!(
        try_create_topic(
            &addr,
            topic,
            1,
            &[
                ("lograil.backlog.group", group),
                ("lograil.backlog.max.records", "5"),
                ("lograil.backlog.mode", "reject"),
            ]
        ),
        0
    );
    // The worker's first fetch gives the share partition its state (SPSO at the log end).
    let mut worker = crate::shares::Member::join(&addr, group, "w1", topic);
    assert!(worker.fetch(&[], 0).is_empty());
    assert_eq!(produce_to(&addr, topic, 10).0, 0);
    settle();
    let (code, message, _) = produce_to(&addr, topic, 1);
    assert_eq!(code, POLICY_VIOLATION, "10 unfinished records, bound 5");
    let message = message.unwrap();
    assert!(
        message.contains(group) && message.contains("records=10"),
        "{message}"
    );
    // Acquired but not acknowledged: still backlog.
    let got = worker.fetch(&[], 1000);
    assert_eq!(got.len(), 10);
    settle();
    assert_eq!(produce_to(&addr, topic, 1).0, POLICY_VIOLATION);
    // All accepted: SPSO reaches the end and the producer is let through.
    worker.acknowledge(&[(0, 9, vec![1])]);
    settle();
    assert_eq!(produce_to(&addr, topic, 1), (0, None, 0));
}
