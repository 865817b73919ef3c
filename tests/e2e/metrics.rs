//! `lograil serve --metrics-listen`: the `/metrics` exposition after known traffic (parsed,
//! figures checked against what was produced and consumed), bad HTTP requests, Debian's
//! Prometheus server scraping a broker and answering a lag-in-seconds query, and the shipped
//! alert rules through `promtool`.
//!
//! The Prometheus tests need `prometheus` and `promtool` (Debian's `prometheus` package, which
//! `.ci/run` installs); without them they fail, saying so.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use test_support::kafka::{rdkafka_produce, Record};
use test_support::process::free_port;
use test_support::wire::{call, closed, connect, frame};
use test_support::TestBroker;

/// A broker with `/metrics` on a free port; fsync before ack, so fsyncs are timed.
fn broker() -> TestBroker {
    TestBroker::start_temp(&[
        "--metrics-listen",
        "127.0.0.1:0",
        "--flush-messages",
        "1",
        "--group-initial-rebalance-delay-ms",
        "0",
    ])
}

/// Sends `request` raw to `addr` and returns the status line, the headers and the body.
pub(crate) fn http(addr: &str, request: &[u8]) -> (String, BTreeMap<String, String>, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .expect("the metrics endpoint answers and closes the connection within 20 s");
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no blank line after the head: {response:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().to_string();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(": ").unwrap();
            (k.to_ascii_lowercase(), v.to_string())
        })
        .collect();
    (status, headers, body.to_string())
}

/// One sample of the exposition: name and labels, value.
pub(crate) type Samples = Vec<(String, BTreeMap<String, String>, f64)>;

/// Parses OpenMetrics text: `name{label="value",...} number` lines; comments skipped. Checks
/// it ends in `# EOF`.
fn parse(text: &str) -> Samples {
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end");
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').unwrap();
                let labels = rest
                    .split("\",")
                    .filter(|l| !l.is_empty())
                    .map(|l| {
                        let (k, v) = l.split_once("=\"").unwrap();
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        out.push((name, labels, value));
    }
    out
}

pub(crate) fn scrape(addr: &str) -> Samples {
    let (status, headers, body) = http(addr, b"GET /metrics HTTP/1.1\r\nHost: lograil\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(headers["content-length"], body.len().to_string());
    parse(&body)
}

/// The value of the one sample named `name` whose labels include `labels`.
pub(crate) fn value(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<f64> = samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| *v)
        .collect();
    assert!(found.len() <= 1, "{name} {labels:?} matches {found:?}");
    found.first().copied()
}

pub(crate) fn must(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    value(samples, name, labels).unwrap_or_else(|| {
        let names: Vec<_> = samples.iter().filter(|(n, ..)| n == name).collect();
        panic!("no {name} {labels:?}; the {name} samples: {names:?}")
    })
}

/// `count` records of `topic` partition 0, the i-th timestamped `base_ms + i s`.
fn produce(addr: &str, topic: &str, count: i64, base_ms: i64) {
    let records = (0..count).map(|i| {
        Record::new(format!("record {i}"))
            .partition(0)
            .timestamp(base_ms + i * 1000)
    });
    rdkafka_produce(addr, &[("linger.ms", "5")], topic, records);
}

/// Reads `count` records of `topic` as group `group`, then commits offset `commit` on
/// partition 0 (the group's next record to read).
fn consume_and_commit(addr: &str, group: &str, topic: &str, count: usize, commit: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = 0;
    while got < count {
        assert!(Instant::now() < deadline, "consumed {got} of {count}");
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            assert_eq!(m.unwrap().topic(), topic);
            got += 1;
        }
    }
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, 0, Offset::Offset(commit))
        .unwrap();
    consumer.commit(&list, CommitMode::Sync).unwrap();
}

#[test]
fn metrics_report_traffic_offsets_requests_and_lag_after_known_traffic() {
    let broker = broker();
    let metrics = broker
        .metrics_addr
        .clone()
        .expect("the start-up line names /metrics");

    // 100 records, one a second, the newest 100 s old; 3 dead letters.
    let base = log_core::now_ms() - 200_000;
    produce(&broker.addr, "m-orders", 100, base);
    produce(&broker.addr, "m-orders-dlt", 3, base);
    // A group that read everything and committed half.
    consume_and_commit(&broker.addr, "halfway", "m-orders", 100, 50);
    // One malformed Metadata request (its topic array claims 2^31-1 topics): the broker closes
    // that connection and counts an error.
    let mut s = connect(&broker.addr);
    let mut bad = frame(ApiKey::Metadata, 1, 6, &MetadataRequest::default());
    let n = bad.len();
    bad[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
    s.write_all(&bad).unwrap();
    assert!(closed(&mut s));
    // A Metadata request for a topic that does not exist (no auto-creation): answered with
    // UNKNOWN_TOPIC_OR_PARTITION for that topic.
    let missing = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("m-missing"))))]))
        .with_allow_auto_topic_creation(false);
    let answer: MetadataResponse = call(&mut connect(&broker.addr), ApiKey::Metadata, 7, &missing);
    assert_eq!(answer.topics[0].error_code, 3);
    // A connection that stays open while scraped.
    let mut open = connect(&broker.addr);
    let _: ApiVersionsResponse = call(
        &mut open,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    );

    let samples = scrape(&metrics);
    let orders = [("topic", "m-orders")];
    let p0 = [("topic", "m-orders"), ("partition", "0")];
    // In: exactly what was produced; the bytes are the partition's log.
    assert_eq!(
        must(&samples, "lograil_topic_records_in_total", &orders),
        100.0
    );
    let bytes_in = must(&samples, "lograil_topic_bytes_in_total", &orders);
    assert_eq!(
        bytes_in,
        must(&samples, "lograil_partition_size_bytes", &p0)
    );
    assert!(bytes_in > 100.0 * 8.0, "{bytes_in}");
    // Out: the group read all 100 records (whole batches: at least every byte once).
    assert!(must(&samples, "lograil_topic_records_out_total", &orders) >= 100.0);
    assert!(must(&samples, "lograil_topic_bytes_out_total", &orders) >= bytes_in);
    assert_eq!(
        must(&samples, "lograil_partition_log_start_offset", &p0),
        0.0
    );
    assert_eq!(
        must(&samples, "lograil_partition_log_end_offset", &p0),
        100.0
    );
    // Dead letters: only in the dead-letter topic.
    assert_eq!(
        must(
            &samples,
            "lograil_dead_letter_records_total",
            &[("topic", "m-orders-dlt")]
        ),
        3.0
    );
    assert_eq!(
        value(&samples, "lograil_dead_letter_records_total", &orders),
        None
    );

    // Lag: 50 records; the oldest unconsumed (offset 50) was written at base + 50 s, 150 s
    // before the records were produced.
    let lag = [
        ("group", "halfway"),
        ("topic", "m-orders"),
        ("partition", "0"),
    ];
    assert_eq!(
        must(&samples, "lograil_consumer_group_lag_records", &lag),
        50.0
    );
    let seconds = must(&samples, "lograil_consumer_group_lag_seconds", &lag);
    let expected = (log_core::now_ms() - (base + 50_000)) as f64 / 1000.0;
    assert!(
        (expected - 5.0..=expected + 1.0).contains(&seconds),
        "lag {seconds} s, expected about {expected} s"
    );
    // One scrape so far: no consume rate, so no time to drain (never +Inf or NaN).
    assert_eq!(
        value(&samples, "lograil_consumer_group_consume_rate", &lag),
        None
    );
    assert_eq!(
        value(
            &samples,
            "lograil_consumer_group_time_to_drain_seconds",
            &lag
        ),
        None
    );

    // Requests per API and version, errors, latency.
    let produce_requests: f64 = samples
        .iter()
        .filter(|(n, l, _)| n == "lograil_requests_total" && l["api"] == "Produce")
        .map(|(.., v)| v)
        .sum();
    assert!(produce_requests >= 1.0);
    let metadata_v1 = [("api", "Metadata"), ("version", "1")];
    assert_eq!(must(&samples, "lograil_requests_total", &metadata_v1), 1.0);
    assert_eq!(
        must(&samples, "lograil_request_errors_total", &metadata_v1),
        1.0
    );
    assert_eq!(
        must(
            &samples,
            "lograil_response_errors_total",
            &[
                ("api", "Metadata"),
                ("version", "7"),
                ("error", "UNKNOWN_TOPIC_OR_PARTITION")
            ]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "lograil_response_errors_total",
            &[("api", "Produce")]
        ),
        None,
        "every produce succeeded"
    );
    let api_versions = [("api", "ApiVersions"), ("version", "3")];
    assert_eq!(
        must(&samples, "lograil_request_errors_total", &api_versions),
        0.0
    );
    assert!(
        must(
            &samples,
            "lograil_request_duration_seconds_count",
            &api_versions
        ) >= 1.0
    );
    assert_eq!(
        must(
            &samples,
            "lograil_request_duration_seconds_bucket",
            &[("api", "ApiVersions"), ("version", "3"), ("le", "+Inf")]
        ),
        must(
            &samples,
            "lograil_request_duration_seconds_count",
            &api_versions
        )
    );
    // --flush-messages 1: every produce waited for an fsync.
    assert!(must(&samples, "lograil_fsync_duration_seconds_count", &[]) >= 2.0);
    assert!(must(&samples, "lograil_connections_open", &[]) >= 1.0);

    // The group consumes 30 more: a consume rate and a time to drain appear.
    consume_and_commit(&broker.addr, "halfway", "m-orders", 50, 80);
    std::thread::sleep(Duration::from_millis(1100));
    let samples = scrape(&metrics);
    assert_eq!(
        must(&samples, "lograil_consumer_group_lag_records", &lag),
        20.0
    );
    let rate = must(&samples, "lograil_consumer_group_consume_rate", &lag);
    assert!(rate > 0.0, "{rate}");
    let drain = must(
        &samples,
        "lograil_consumer_group_time_to_drain_seconds",
        &lag,
    );
    assert!((drain - 20.0 / rate).abs() < 1e-6, "{drain} vs 20 / {rate}");

    // A deleted topic's series go.
    let delete = DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(StrBytes::from_static_str("m-orders-dlt"))])
        .with_timeout_ms(5000);
    let deleted: DeleteTopicsResponse =
        call(&mut connect(&broker.addr), ApiKey::DeleteTopics, 5, &delete);
    assert_eq!(deleted.responses[0].error_code, 0);
    let samples = scrape(&metrics);
    let dlt = [("topic", "m-orders-dlt")];
    assert_eq!(
        value(&samples, "lograil_dead_letter_records_total", &dlt),
        None
    );
    assert_eq!(
        value(&samples, "lograil_topic_records_in_total", &dlt),
        None
    );
    assert!(value(&samples, "lograil_topic_records_in_total", &orders).is_some());

    // The raw connection closed: no longer counted.
    drop(open);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let samples = scrape(&metrics);
        let now_open = must(&samples, "lograil_connections_open", &[]);
        if now_open == 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{now_open} connections still counted open"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bad_metrics_requests_get_http_errors_and_do_not_touch_the_broker() {
    let broker = broker();
    let metrics = broker.metrics_addr.clone().unwrap();
    produce(&broker.addr, "m-bad", 5, log_core::now_ms());

    let status = |request: &[u8]| http(&metrics, request).0;
    assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 Not Found");
    assert_eq!(
        status(b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"),
        "HTTP/1.1 405 Method Not Allowed"
    );
    assert_eq!(status(b"garbage\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    assert_eq!(
        status(b"GET /metrics HTTP/9.9\r\n\r\n"),
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(status(b"\xff\xfe\xfd\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    // A Kafka request sent to the metrics port is not HTTP.
    let kafka = frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default());
    let (s, _, body) = http(&metrics, &kafka);
    assert_eq!(s, "HTTP/1.1 400 Bad Request", "{body}");
    // A head that never ends is cut off at 8 KiB.
    let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 20_000));
    assert_eq!(
        status(&huge),
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    // HEAD: the headers only.
    let (s, headers, body) = http(&metrics, b"HEAD /metrics HTTP/1.0\r\n\r\n");
    assert_eq!(s, "HTTP/1.1 200 OK");
    assert!(body.is_empty());
    assert!(headers["content-length"].parse::<usize>().unwrap() > 0);
    // A client that connects and sends nothing does not stop others from scraping.
    let _silent = TcpStream::connect(&metrics).unwrap();

    // The broker is untouched: it answers Kafka clients, its log is as it was, and the metrics
    // still come.
    let mut s = connect(&broker.addr);
    let versions: ApiVersionsResponse = call(
        &mut s,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    );
    assert_eq!(versions.error_code, 0);
    let samples = scrape(&metrics);
    let p0 = [("topic", "m-bad"), ("partition", "0")];
    assert_eq!(must(&samples, "lograil_partition_log_end_offset", &p0), 5.0);
    assert_eq!(
        must(
            &samples,
            "lograil_topic_records_in_total",
            &[("topic", "m-bad")]
        ),
        5.0
    );
}

/// Fails the test, saying how to get it, when `program` is not installed.
fn require(program: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "`{program}` is not installed: this test needs Debian's `prometheus` package \
         (`apt-get install prometheus`; .ci/run installs it)"
    );
}

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus")
}

#[test]
fn promtool_accepts_and_unit_tests_the_shipped_alert_rules() {
    require("promtool");
    let dir = deploy_dir();
    let check = Command::new("promtool")
        .args(["check", "rules"])
        .arg(dir.join("alerts.yml"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout).to_string()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{out}");
    assert!(out.contains("SUCCESS: 2 rules found"), "{out}");
    // The alerts fire on lag in seconds and on dead letters, and only then.
    let test = Command::new("promtool")
        .args(["test", "rules"])
        .arg(dir.join("alerts_test.yml"))
        .output()
        .unwrap();
    let out =
        String::from_utf8_lossy(&test.stdout).to_string() + &String::from_utf8_lossy(&test.stderr);
    assert!(test.status.success(), "{out}");
}

/// A Prometheus server, killed when dropped.
struct PrometheusServer(Child);

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on `addr`: the body of a 200 answer, `None` otherwise (not up yet).
pub(crate) fn get(addr: &str, path: &str) -> Option<String> {
    let stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut stream = stream;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?;
    (status == "200").then(|| body.to_string())
}

#[test]
fn prometheus_scrapes_the_broker_and_serves_lag_in_seconds() {
    require("prometheus");
    let tmp = tempfile::tempdir().unwrap();
    let broker = broker();
    let metrics = broker.metrics_addr.clone().unwrap();
    let base = log_core::now_ms() - 200_000;
    produce(&broker.addr, "m-lagged", 100, base);
    consume_and_commit(&broker.addr, "behind", "m-lagged", 100, 50);

    let config = tmp.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: lograil\n    static_configs:\n      - targets: ['{metrics}']\n"
        ),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(tmp.path().join("prometheus.log")).unwrap();
    let _server = PrometheusServer(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                tmp.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );

    // Through Prometheus' HTTP API, until the series has been scraped.
    let query = "/api/v1/query?query=lograil_consumer_group_lag_seconds%7Bgroup%3D%22behind%22%7D";
    let deadline = Instant::now() + Duration::from_secs(60);
    let result = loop {
        if let Some(body) = get(&web, query) {
            let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(answer["status"], "success", "{body}");
            let result = answer["data"]["result"].as_array().unwrap().clone();
            if !result.is_empty() {
                break result;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus had no lag series after 60 s; its log: {}",
            std::fs::read_to_string(tmp.path().join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(result.len(), 1, "{result:?}");
    let series = &result[0];
    assert_eq!(series["metric"]["topic"], "m-lagged");
    assert_eq!(series["metric"]["partition"], "0");
    assert_eq!(series["metric"]["job"], "lograil");
    // [timestamp, "value"]: the oldest unconsumed record (offset 50) is base + 50 s old.
    let seconds: f64 = series["value"][1].as_str().unwrap().parse().unwrap();
    let expected = (log_core::now_ms() - (base + 50_000)) as f64 / 1000.0;
    assert!(
        (expected - 65.0..=expected + 1.0).contains(&seconds),
        "lag {seconds} s through Prometheus, expected about {expected} s"
    );
}
