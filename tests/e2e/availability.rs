//! Availability under hostile neighbours: one address's idle and half-sent connections do not
//! lock out a well-behaved client from the same address, a slowloris does not take `/metrics`
//! dark, and many connections of one client id share its byte-rate quota instead of each
//! getting their own.
//!
//! Waits are on conditions, with deadlines that only turn a hang into a failure.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use log_core::batch;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

use test_support::kafka::{
    api_versions_answered, create_topic, produce_at, produce_request, wait_until,
};
use test_support::wire::{call, connect, frame, read_response};
use test_support::TestBroker;

use crate::limits::declared_produce;

/// Whether the broker still holds `stream` open: nothing to read yet (or bytes waiting) is
/// open; end of stream or a reset is closed.
fn is_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open = match stream.peek(&mut byte) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => true,
        Err(_) => false,
    };
    stream.set_nonblocking(false).unwrap();
    open
}

/// The delivery reports of a librdkafka producer.
#[derive(Clone, Default)]
struct Deliveries(Arc<Mutex<Vec<Result<(), String>>>>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let report = result.as_ref().map(|_| ()).map_err(|(e, _)| e.to_string());
        self.0.lock().unwrap().push(report);
    }
}

#[test]
fn idle_and_half_sent_connections_of_one_address_do_not_lock_out_its_neighbours() {
    const PER_IP: usize = 20;
    let broker = TestBroker::start_temp(&["--max-connections-per-ip", &PER_IP.to_string()]);
    let addr = broker.addr.clone();
    // A client that has been served and is idle between requests (the topic is created on it,
    // so that no other connection is still closing when the flood starts).
    let mut established = connect(&addr);
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(
            kafka_protocol::protocol::StrBytes::from_static_str("neighbours"),
        )))]))
        .with_allow_auto_topic_creation(true);
    let created: MetadataResponse = call(&mut established, ApiKey::Metadata, 12, &metadata);
    assert_eq!(created.topics[0].error_code, 0);
    let records = || batch::build(&[(None, Some(b"neighbour"), 1)]);
    assert_eq!(produce_at(&mut established, 9, "neighbours", records()), 0);

    // The flood, all from 127.0.0.1: 10 connections with a request begun and stalled, then 10
    // that never send a byte: one over the cap with the established client.
    let partial: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = connect(&addr);
            s.write_all(&declared_produce(10_000)).unwrap();
            s
        })
        .collect();
    let silent: Vec<TcpStream> = (0..PER_IP / 2).map(|_| connect(&addr)).collect();

    // Fresh clients from the same address are served at once, on new connections (kept open,
    // so that each takes a place).
    let mut served = Vec::new();
    for round in 0..3 {
        let mut fresh = connect(&addr);
        fresh
            .write_all(&frame(
                ApiKey::Produce,
                9,
                7,
                &produce_request("neighbours", 0, Some(records())),
            ))
            .unwrap();
        assert!(
            read_response(&mut fresh).is_some(),
            "round {round}: a new connection that sends a produce was closed unanswered \
             (the address's slots were held by idle and half-sent connections)"
        );
        served.push(fresh);
    }
    // The room was made by closing stalled half-sent requests first: four of them (one over
    // the cap, then three fresh clients), and none of the silent connections.
    let closed_partial = |partial: &[TcpStream]| partial.iter().filter(|s| !is_open(s)).count();
    wait_until(
        "four half-sent connections are closed",
        Duration::from_secs(10),
        || closed_partial(&partial) >= 4,
    );
    assert_eq!(closed_partial(&partial), 4, "more evicted than needed");
    assert!(
        silent.iter().all(is_open),
        "a silent connection was closed while half-sent ones were left"
    );
    // The established client was never the one closed.
    assert_eq!(produce_at(&mut established, 9, "neighbours", records()), 0);

    // A real client (librdkafka: a bootstrap connection, then the broker's) gets its record
    // acknowledged from the same address while the flood goes on.
    let deliveries = Deliveries::default();
    let producer: ThreadedProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", &addr)
        .set("message.timeout.ms", "10000")
        .set("linger.ms", "0")
        .create_with_context(deliveries.clone())
        .unwrap();
    producer
        .send(BaseRecord::<(), _>::to("neighbours").payload(b"from librdkafka"))
        .map_err(|(e, _)| e)
        .unwrap();
    let _ = producer.flush(Duration::from_secs(15));
    assert_eq!(
        *deliveries.0.lock().unwrap(),
        vec![Ok(())],
        "librdkafka's record"
    );
    drop(producer);
    assert!(api_versions_answered(&addr), "the broker is healthy");
    assert_eq!(produce_at(&mut established, 9, "neighbours", records()), 0);
    drop((silent, served));
}

#[test]
fn a_slowloris_does_not_take_metrics_dark() {
    let broker = TestBroker::start_temp(&["--metrics-listen", "127.0.0.1:0"]);
    let metrics = broker.metrics_addr.clone().unwrap();
    // 24 connections, more than the endpoint serves at once, each with a request head begun
    // and never finished.
    let mut slow: Vec<TcpStream> = (0..24)
        .map(|_| {
            let mut s = TcpStream::connect(&metrics).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: slow").unwrap();
            s
        })
        .collect();
    let samples = crate::metrics::scrape(&metrics);
    assert!(!samples.is_empty());
    // The scrape came through by closing some slow heads, not by waiting until the slow
    // connections' head timeout closed all those being served.
    let open = slow.iter().filter(|s| is_open(s)).count();
    assert!(
        open >= 12,
        "only {open} of the 24 slow connections are open: the scrape waited for their timeout"
    );
    // And again, with the slowloris topped up.
    slow.retain(is_open);
    while slow.len() < 24 {
        let mut s = TcpStream::connect(&metrics).unwrap();
        s.write_all(b"GET /met").unwrap();
        slow.push(s);
    }
    assert!(!crate::metrics::scrape(&metrics).is_empty());
    // A slow head is closed within the (short) head timeout, as a whole.
    let mut last = TcpStream::connect(&metrics).unwrap();
    last.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    last.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    let mut rest = Vec::new();
    last.read_to_end(&mut rest)
        .expect("a head never finished is closed within 5 s");
    assert!(rest.is_empty(), "a head never finished got an answer");
}

#[test]
fn connections_of_one_client_id_share_its_byte_rate_quota() {
    const QUOTA: f64 = 100_000.0;
    const CONNECTIONS: usize = 40;
    const VALUE: usize = 20_000;
    // A 2-second window: a burst of 200 kB, and a throttle of at most 2 s.
    let broker = TestBroker::start_temp(&["--quota-window-num", "2"]);
    let addr = broker.addr.clone();
    create_topic(&addr, "shared-quota", 1);
    // The wire tests' client id is "e2e".
    assert_eq!(
        crate::quotas::alter(
            &addr,
            &[("client-id", Some("e2e"))],
            &[("producer_byte_rate", Some(QUOTA))],
            false
        ),
        0
    );
    let value = vec![b'q'; VALUE];
    let request = frame(
        ApiKey::Produce,
        9,
        1,
        &produce_request(
            "shared-quota",
            0,
            Some(batch::build(&[(None, Some(value.as_slice()), 1)])),
        ),
    );
    let start = Instant::now();
    let end = start + Duration::from_secs(5);
    // Each connection produces as fast as the broker answers it, ignoring throttle_time_ms.
    let acked: Vec<Vec<Instant>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CONNECTIONS)
            .map(|_| {
                let (addr, request) = (&addr, &request);
                scope.spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let mut acked = Vec::new();
                    while Instant::now() < end {
                        let left = end.saturating_duration_since(Instant::now());
                        s.set_read_timeout(Some(left + Duration::from_secs(1)))
                            .unwrap();
                        if s.write_all(request).is_err() {
                            break;
                        }
                        let mut len = [0u8; 4];
                        if s.read_exact(&mut len).is_err() {
                            break;
                        }
                        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
                        if s.read_exact(&mut body).is_err() {
                            break;
                        }
                        acked.push(Instant::now());
                    }
                    acked
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    // After the first second (the burst), over the rest of the run.
    let from = start + Duration::from_secs(1);
    let count = acked
        .iter()
        .flatten()
        .filter(|t| **t >= from && **t < end)
        .count();
    let rate = (count * VALUE) as f64 / (end - from).as_secs_f64();
    println!(
        "{CONNECTIONS} connections of one client id: {rate:.0} B/s acknowledged, {:.2}x the quota",
        rate / QUOTA
    );
    assert!(
        rate < 2.0 * QUOTA,
        "{CONNECTIONS} connections of one client id got {:.1}x its producer_byte_rate",
        rate / QUOTA
    );
    assert!(count > 0, "nothing was acknowledged");
    assert!(api_versions_answered(&addr));
}

/// Connects, asks for ApiVersions and closes, over and over until `until`: how many of the
/// connections were answered, and how many were tried.
fn reconnect_per_request(addr: &str, until: Instant) -> (usize, usize) {
    let (mut served, mut tried) = (0, 0);
    while Instant::now() < until {
        tried += 1;
        let mut s = connect(addr);
        let request = frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default());
        if s.write_all(&request).is_ok() && read_response(&mut s).is_some() {
            served += 1;
        }
    }
    (served, tried)
}

#[test]
fn connection_creation_rate_quotas_hold_a_reconnecting_client_to_its_rate() {
    const RATE: f64 = 10.0;
    let tmp = tempfile::tempdir().unwrap();
    // A 2-second window: a burst of 20 connections.
    let broker = TestBroker::start(&tmp.path().join("data"), &["--quota-window-num", "2"]);
    let addr = broker.addr.clone();
    let alter = |entity: &[(&str, Option<&str>)], key: &str, value: f64| {
        crate::quotas::alter(&addr, entity, &[(key, Some(value))], false)
    };
    const INVALID_REQUEST: i16 = 42;
    let ip = [("ip", Some("127.0.0.1"))];
    // Kafka's rules: an ip entity stands alone, takes only connection_creation_rate (a whole
    // number), and names an address.
    assert_eq!(
        alter(
            &[("ip", Some("127.0.0.1")), ("client-id", Some("a"))],
            "connection_creation_rate",
            RATE
        ),
        INVALID_REQUEST
    );
    assert_eq!(alter(&ip, "producer_byte_rate", 1000.0), INVALID_REQUEST);
    assert_eq!(
        alter(
            &[("client-id", Some("a"))],
            "connection_creation_rate",
            RATE
        ),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(
            &[("ip", Some("not-an-address"))],
            "connection_creation_rate",
            RATE
        ),
        INVALID_REQUEST
    );
    assert_eq!(alter(&ip, "connection_creation_rate", 1.5), INVALID_REQUEST);
    assert_eq!(
        alter(&[("ip", None)], "connection_creation_rate", 1000.0),
        0
    );
    assert_eq!(alter(&ip, "connection_creation_rate", RATE), 0);

    let start = Instant::now();
    let secs = 3.0;
    let (served, tried) = reconnect_per_request(&addr, start + Duration::from_secs_f64(secs));
    let allowed = 2.0 * RATE + secs * RATE;
    println!("reconnect per request at {RATE}/s: {served} of {tried} connections served, {allowed} allowed");
    assert!(served >= 1, "nothing was served");
    assert!(
        (served as f64) < allowed * 1.3,
        "{served} connections served in {secs} s at a quota of {RATE}/s (burst {})",
        2.0 * RATE
    );
    // Once the client slows to its rate, it is served again.
    std::thread::sleep(Duration::from_millis(200));
    wait_until(
        "a connection is served again",
        Duration::from_secs(10),
        || api_versions_answered(&addr),
    );

    // The broker-wide rate (Kafka's max.connection.creation.rate): connections over it wait
    // to be accepted.
    let broker = TestBroker::start(
        &tmp.path().join("data2"),
        &["--max-connection-creation-rate", "10"],
    );
    let start = Instant::now();
    let secs = 2.0;
    let (served, tried) =
        reconnect_per_request(&broker.addr, start + Duration::from_secs_f64(secs));
    // A burst of one second's worth, then the rate.
    let allowed = RATE + secs * RATE;
    println!("broker-wide {RATE}/s: {served} of {tried} connections served, {allowed} allowed");
    assert!(served >= 1);
    assert!(
        (served as f64) < allowed * 1.3,
        "{served} connections accepted in {secs} s at --max-connection-creation-rate {RATE}"
    );
}
