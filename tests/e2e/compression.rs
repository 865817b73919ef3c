//! A topic's `compression.type` (the broker recompresses a batch of another codec) and
//! `message.timestamp.type=LogAppendTime` (the broker stamps the append time), with librdkafka
//! producers, kcat and confluent-kafka consumers, and the stored batches read back raw.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::*;
use log_core::batch;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};
use record_batch::{BatchHeader, Codec, TimestampType};
use test_support::kafka::{
    create_topic_answer, describe_configs, fetch_request, init_producer_id, list_offset, produce,
    produce_response, rdkafka_producer,
};
use test_support::wire::{call, connect};
use test_support::TestBroker;

/// librdkafka's codec names and the codec of the batches they send.
const PRODUCER_CODECS: [(&str, Codec); 5] = [
    ("none", Codec::None),
    ("gzip", Codec::Gzip),
    ("snappy", Codec::Snappy),
    ("lz4", Codec::Lz4),
    ("zstd", Codec::Zstd),
];

/// A topic's `compression.type` and the codec its batches are stored with (`None`: the
/// producer's).
const TOPIC_CODECS: [(&str, Option<Codec>); 6] = [
    ("uncompressed", Some(Codec::None)),
    ("gzip", Some(Codec::Gzip)),
    ("snappy", Some(Codec::Snappy)),
    ("lz4", Some(Codec::Lz4)),
    ("zstd", Some(Codec::Zstd)),
    ("producer", None),
];

/// CreateTopics of one partition with `configs`: (error code, error message).
fn create(addr: &str, topic: &str, configs: &[(&str, &str)]) -> (i16, String) {
    create_topic_answer(addr, topic, 1, configs)
}

/// Every batch of partition 0 of `topic` as a fetch serves it: (header, bytes).
fn fetched(addr: &str, topic: &str) -> Vec<(BatchHeader, Bytes)> {
    let mut batches = Vec::new();
    let mut offset = 0;
    loop {
        let request = fetch_request(topic, offset, 0, 1 << 20);
        let response: FetchResponse = call(&mut connect(addr), ApiKey::Fetch, 12, &request);
        let p = &response.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch of {topic}");
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return batches;
        }
        let mut at = 0;
        while at < records.len() {
            let header = BatchHeader::read(&records[at..]).unwrap();
            let size = header.size as usize;
            if at + size > records.len() {
                break;
            }
            // Whole and intact as stored: the CRC the broker computed again holds.
            record_batch::validate(&records[at..at + size]).unwrap();
            batches.push((header, records.slice(at..at + size)));
            offset = header.next_offset();
            at += size;
        }
    }
}

/// What a test record carries: key, value, headers.
fn expected(i: usize) -> (String, String, String) {
    (
        format!("key-{i}"),
        format!(
            "value {i} of a payload that compresses: {}",
            // Long enough that a batch of one record still compresses smaller: librdkafka
            // sends a batch uncompressed when its codec would not shrink it.
            "ab".repeat(100 + i % 50)
        ),
        format!("n={i},src=rdkafka"),
    )
}

/// Sends `count` records (key, value, two headers) to partition 0 of `topic` with librdkafka
/// compressing with `codec`; every one is acknowledged.
fn produce_rdkafka(addr: &str, topic: &str, codec: &str, count: usize, extra: &[(&str, &str)]) {
    let mut props = vec![
        ("compression.type", codec),
        ("linger.ms", "20"),
        ("batch.num.messages", "200"),
        ("message.timeout.ms", "30000"),
    ];
    props.extend_from_slice(extra);
    let p = rdkafka_producer(addr, &props);
    for i in 0..count {
        let (key, value, _) = expected(i);
        let n = i.to_string();
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "n",
                value: Some(&n),
            })
            .insert(Header {
                key: "src",
                value: Some("rdkafka"),
            });
        let record = BaseRecord::to(topic)
            .partition(0)
            .key(&key)
            .payload(&value)
            .headers(headers);
        p.send(record).map_err(|(e, _)| e).unwrap();
    }
    p.flush(Duration::from_secs(60)).unwrap();
    assert_eq!(p.in_flight_count(), 0, "{topic}: every record delivered");
}

/// What `kcat -C` prints reading `topic` (`-p` `partition` when given) from the beginning to
/// its end, one line per record in `format`; a failed run fails the test.
fn kcat_consume(addr: &str, topic: &str, partition: Option<i32>, format: &str) -> String {
    let mut kcat = Command::new("kcat");
    kcat.env_remove("LD_LIBRARY_PATH").args([
        "-b",
        addr,
        "-C",
        "-t",
        topic,
        "-o",
        "beginning",
        "-e",
        "-q",
    ]);
    if let Some(p) = partition {
        kcat.args(["-p", &p.to_string()]);
    }
    let out = kcat
        .args(["-f", format])
        .output()
        .expect("kcat is needed by this test: apt-get install kcat (.ci/run does it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The standard output of a Python `script` run with `args`; a failed run fails the test.
fn python_stdout(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .env_remove("LD_LIBRARY_PATH")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 with confluent-kafka is needed (pip install confluent-kafka)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Partition 0 of `topic` read from the beginning by kcat: (key, value, headers) per record.
fn kcat_read(addr: &str, topic: &str) -> Vec<(String, String, String)> {
    kcat_consume(addr, topic, Some(0), "%k\t%s\t%h\n")
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, '\t').map(String::from);
            (
                f.next().unwrap(),
                f.next().unwrap_or_default(),
                f.next().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn each_topic_compression_type_stores_its_codec_and_every_record() {
    let broker = TestBroker::start_temp(&[]);
    let count = 600;
    for (topic_codec, stored) in TOPIC_CODECS {
        for (producer_codec, sent) in PRODUCER_CODECS {
            let topic = format!("c-{topic_codec}-{producer_codec}");
            assert_eq!(
                create(&broker.addr, &topic, &[("compression.type", topic_codec)]),
                (0, String::new())
            );
            produce_rdkafka(&broker.addr, &topic, producer_codec, count, &[]);
            let batches = fetched(&broker.addr, &topic);
            let want = stored.unwrap_or(sent);
            assert!(batches.len() > 1, "{topic}: several batches");
            for (h, _) in &batches {
                assert_eq!(h.codec(), Some(want), "{topic}: stored codec");
                assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
            }
            assert_eq!(batches.last().unwrap().0.next_offset(), count as i64);
            let records = kcat_read(&broker.addr, &topic);
            let want: Vec<_> = (0..count).map(expected).collect();
            assert_eq!(records, want, "{topic}: kcat reads every record as sent");
        }
    }
}

#[test]
fn a_stored_segment_holds_the_topics_codec() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["--compression-type", "zstd"]);
    // The broker default reaches an auto-created topic.
    produce_rdkafka(&broker.addr, "auto", "lz4", 300, &[]);
    let segment = dir.path().join("auto-0/00000000000000000000.log");
    let bytes = std::fs::read(&segment).unwrap();
    let headers = record_batch::validate_all(&bytes).unwrap();
    assert!(!headers.is_empty());
    assert!(headers.iter().all(|h| h.codec() == Some(Codec::Zstd)));
    let decoded = batch::decode(&bytes).unwrap();
    assert_eq!(decoded.len(), 300);
    for (i, r) in decoded.iter().enumerate() {
        let (key, value, _) = expected(i);
        assert_eq!(r.key.as_deref(), Some(key.as_bytes()));
        assert_eq!(r.value.as_deref(), Some(value.as_bytes()));
        assert_eq!(
            r.header("n").map(|v| &v[..]),
            Some(i.to_string().as_bytes())
        );
    }
    let (ok, stdout, stderr) = test_support::lograil(&["dump-log", segment.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("300") || stdout.contains("299"), "{stdout}");
}

#[test]
fn an_idempotent_producer_to_a_recompressing_topic_lands_each_record_once() {
    let broker = TestBroker::start_temp(&[]);
    assert_eq!(
        create(&broker.addr, "idem", &[("compression.type", "zstd")]).0,
        0
    );
    let count = 20_000;
    produce_rdkafka(
        &broker.addr,
        "idem",
        "lz4",
        count,
        &[("enable.idempotence", "true"), ("max.in.flight", "5")],
    );
    let batches = fetched(&broker.addr, "idem");
    assert!(batches.iter().all(|(h, _)| h.codec() == Some(Codec::Zstd)));
    // The producer's id and sequences are kept: consecutive batches continue the sequence.
    let mut next_sequence = 0;
    for (h, _) in &batches {
        assert!(h.producer_id >= 0);
        assert_eq!(h.base_sequence, next_sequence, "sequences kept");
        next_sequence += h.record_count;
    }
    assert_eq!(next_sequence, count as i32);
    let records = kcat_read(&broker.addr, "idem");
    assert_eq!(records.len(), count, "no duplicates");
    assert_eq!(records, (0..count).map(expected).collect::<Vec<_>>());

    // A retry of a stored batch (the same producer, epoch and sequence) is recognised after
    // recompression: answered with where it was stored, not stored twice.
    let (pid, _) = init_producer_id(&broker.addr);
    let sent =
        batch::build_for_producer(&[(None, Some(b"a"), 1), (None, Some(b"b"), 2)], pid, 0, 0);
    let (code, base) = produce(&broker.addr, "idem", 0, sent.clone());
    assert_eq!((code, base), (0, count as i64));
    assert_eq!(
        produce(&broker.addr, "idem", 0, sent),
        (0, count as i64),
        "a duplicate"
    );
    let end = list_offset(&broker.addr, "idem", -1);
    assert_eq!(end.1, count as i64 + 2, "stored once");
    let last = fetched(&broker.addr, "idem").pop().unwrap().0;
    assert_eq!(
        (last.producer_id, last.base_sequence, last.codec()),
        (pid, 0, Some(Codec::Zstd))
    );
    // And the next sequence goes on from it; a gap is refused as out of order.
    let next = batch::build_for_producer(&[(None, Some(b"c"), 3)], pid, 0, 2);
    assert_eq!(produce(&broker.addr, "idem", 0, next).0, 0);
    let gap = batch::build_for_producer(&[(None, Some(b"d"), 4)], pid, 0, 9);
    assert_eq!(
        produce(&broker.addr, "idem", 0, gap).0,
        45,
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
}

/// (timestamp type, timestamp, key) of each record of `topic` as confluent-kafka reads them.
fn confluent_read(addr: &str, topic: &str, count: usize) -> Vec<(i64, i64, String)> {
    let script = r#"
import sys
from confluent_kafka import Consumer, TopicPartition
addr, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = Consumer({"bootstrap.servers": addr, "group.id": "lat-check", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, 0)])
got = 0
while got < count:
    m = c.poll(10)
    if m is None:
        sys.exit("timed out after %d records" % got)
    if m.error():
        sys.exit(str(m.error()))
    kind, ts = m.timestamp()
    print(kind, ts, m.key().decode())
    got += 1
c.close()
"#;
    python_stdout(script, &[addr, topic, &count.to_string()])
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
            )
        })
        .collect()
}

#[test]
fn log_append_time_is_the_brokers_time_for_consumers_and_list_offsets() {
    let broker = TestBroker::start_temp(&[]);
    for (topic, compression) in [("lat", "producer"), ("lat-zstd", "zstd")] {
        let configs = [
            ("message.timestamp.type", "LogAppendTime"),
            ("compression.type", compression),
        ];
        assert_eq!(create(&broker.addr, topic, &configs).0, 0);
        let before = log_core::now_ms();
        // A producer's own timestamps, far in the past.
        let p = rdkafka_producer(
            &broker.addr,
            &[("compression.type", "gzip"), ("linger.ms", "5")],
        );
        for i in 0..50 {
            let key = format!("k{i}");
            let record = BaseRecord::<String, String>::to(topic)
                .partition(0)
                .key(&key)
                .payload(&key)
                .timestamp(1_000_000_000_000 + i);
            p.send(record).map_err(|(e, _)| e).unwrap();
        }
        p.flush(Duration::from_secs(30)).unwrap();
        let after = log_core::now_ms();

        let batches = fetched(&broker.addr, topic);
        for (h, _) in &batches {
            assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime, "{topic}");
            assert!(
                (before..=after).contains(&h.max_timestamp),
                "{topic}: {h:?}"
            );
        }
        let read = confluent_read(&broker.addr, topic, 50);
        assert_eq!(read.len(), 50);
        for (i, (kind, ts, key)) in read.iter().enumerate() {
            assert_eq!(*kind, 2, "{topic}: TIMESTAMP_LOG_APPEND_TIME");
            assert!(
                (before..=after).contains(ts),
                "{topic}: {ts} not the broker's time"
            );
            assert_eq!(key, &format!("k{i}"));
        }
        // kcat (librdkafka) sees the broker's time too.
        let stamps: Vec<i64> = kcat_consume(&broker.addr, topic, None, "%T\n")
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert_eq!(stamps.len(), 50);
        assert!(
            stamps.iter().all(|t| (before..=after).contains(t)),
            "{stamps:?}"
        );

        // ListOffsets by time agrees: the producer's times are long before every record.
        let first = batches[0].0.max_timestamp;
        assert_eq!(
            list_offset(&broker.addr, topic, 1_000_000_000_010),
            (0, 0, first)
        );
        assert_eq!(list_offset(&broker.addr, topic, after + 1).1, -1);
        let (_, offset, ts) =
            list_offset(&broker.addr, topic, batches.last().unwrap().0.max_timestamp);
        assert!(offset <= batches.last().unwrap().0.base_offset, "{offset}");
        assert!(ts >= first);

        // The produce response carries the append time.
        let records = batch::build(&[(None, Some(b"x"), 5)]);
        let at = log_core::now_ms();
        let response = produce_response(&broker.addr, topic, 0, records);
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0);
        assert!(p.log_append_time_ms >= at && p.log_append_time_ms <= log_core::now_ms());
    }
    // A CreateTime topic answers -1.
    assert_eq!(create(&broker.addr, "ct", &[]).0, 0);
    let response = produce_response(
        &broker.addr,
        "ct",
        0,
        batch::build(&[(None, Some(b"x"), 5)]),
    );
    assert_eq!(
        response.responses[0].partition_responses[0].log_append_time_ms,
        -1
    );
}

#[test]
fn a_producer_setting_log_append_time_is_refused_on_such_a_topic() {
    let broker = TestBroker::start_temp(&[]);
    assert_eq!(
        create(
            &broker.addr,
            "lat",
            &[("message.timestamp.type", "LogAppendTime")]
        )
        .0,
        0
    );
    let mut records = batch::build(&[(None, Some(b"x"), 5)]).to_vec();
    record_batch::build::set_max_timestamp(&mut records, TimestampType::LogAppendTime, 5).unwrap();
    let response = produce_response(&broker.addr, "lat", 0, records.clone().into());
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 32, "INVALID_TIMESTAMP: {p:?}");
    // On a CreateTime topic the broker clears the bit (Kafka does too).
    assert_eq!(create(&broker.addr, "ct", &[]).0, 0);
    assert_eq!(produce(&broker.addr, "ct", 0, records.into()).0, 0);
    let stored = fetched(&broker.addr, "ct");
    assert_eq!(stored[0].0.timestamp_type(), TimestampType::CreateTime);
}

#[test]
fn recompressed_batches_are_bounded_by_max_message_bytes() {
    let broker = TestBroker::start_temp(&[]);
    let configs = [
        ("compression.type", "uncompressed"),
        ("max.message.bytes", "20000"),
    ];
    assert_eq!(create(&broker.addr, "small", &configs).0, 0);
    // 100 KB of zeros compress to a small zstd batch, which decompressed is over the limit.
    let zeros = vec![0u8; 100_000];
    let records = batch::build_with(&[(None, Some(&zeros), 5)], batch::Compression::Zstd);
    assert!(records.len() < 20_000);
    let response = produce_response(&broker.addr, "small", 0, records);
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 10, "MESSAGE_TOO_LARGE: {p:?}");
    assert_eq!(
        list_offset(&broker.addr, "small", -1).1,
        0,
        "nothing stored"
    );
    // A batch that decompresses past the bound of every compressed batch is refused as before.
    assert_eq!(
        create(
            &broker.addr,
            "zstd",
            &[("compression.type", "zstd"), ("max.message.bytes", "20000")]
        )
        .0,
        0
    );
    let bomb = vec![0u8; 1_000_000];
    let records = batch::build_with(&[(None, Some(&bomb), 5)], batch::Compression::Gzip);
    assert!(records.len() < 20_000);
    assert_eq!(
        produce(&broker.addr, "zstd", 0, records).0,
        2,
        "CORRUPT_MESSAGE"
    );
    // Within the bounds it is stored.
    let fine = batch::build_with(
        &[(None, Some(&zeros[..10_000]), 5)],
        batch::Compression::Gzip,
    );
    assert_eq!(produce(&broker.addr, "zstd", 0, fine).0, 0);
    assert_eq!(
        fetched(&broker.addr, "zstd")[0].0.codec(),
        Some(Codec::Zstd)
    );
}

#[test]
fn bad_values_are_refused_with_kafkas_messages() {
    let broker = TestBroker::start_temp(&[]);
    let cases = [
        ("compression.type", "none", "Invalid value none for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("compression.type", "Gzip", "Invalid value Gzip for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("message.timestamp.type", "AppendTime", "Invalid value AppendTime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
        ("compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "0", "Invalid value 0 for configuration compression.lz4.level: Value must be at least 1"),
        ("compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
        ("compression.zstd.level", "high", "Invalid value high for configuration compression.zstd.level: Not a number of type INT"),
    ];
    for (config, value, message) in cases {
        let (code, got) = create(&broker.addr, "bad", &[(config, value)]);
        assert_eq!(code, 40, "INVALID_CONFIG for {config}={value}");
        assert!(got.contains(message), "{got}");
    }
    // Good values are taken and described; an alteration takes effect on the next batch.
    let configs = [
        ("compression.type", "gzip"),
        ("compression.gzip.level", "9"),
    ];
    assert_eq!(create(&broker.addr, "good", &configs).0, 0);
    let described = describe(&broker.addr, "good");
    assert_eq!(described["compression.type"], ("gzip".to_string(), 1));
    assert_eq!(described["compression.gzip.level"], ("9".to_string(), 1));
    assert_eq!(described["compression.zstd.level"], ("3".to_string(), 5));
    assert_eq!(
        described["message.timestamp.type"],
        ("CreateTime".to_string(), 5)
    );
    assert_eq!(
        produce(
            &broker.addr,
            "good",
            0,
            batch::build(&[(None, Some(b"1"), 1)])
        )
        .0,
        0
    );
    test_support::kafka::set_configs(
        &broker.addr,
        test_support::kafka::TOPIC_RESOURCE,
        "good",
        &[("compression.type", "snappy")],
    );
    assert_eq!(
        produce(
            &broker.addr,
            "good",
            0,
            batch::build(&[(None, Some(b"2"), 2)])
        )
        .0,
        0
    );
    let codecs: Vec<_> = fetched(&broker.addr, "good")
        .iter()
        .map(|(h, _)| h.codec())
        .collect();
    assert_eq!(codecs, [Some(Codec::Gzip), Some(Codec::Snappy)]);
    // A bad broker default stops the broker from starting, with Kafka's message.
    let data = tempfile::tempdir().unwrap();
    let mut serve = Command::new(test_support::broker::lograil_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .args(["--compression-type", "brotli"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            serve.kill().unwrap();
            panic!("lograil serve started with --compression-type brotli");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut serve.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("Invalid value brotli for configuration compression.type"),
        "{stderr}"
    );
}

/// DescribeConfigs of a topic: name → (value, config source).
fn describe(addr: &str, topic: &str) -> BTreeMap<String, (String, i8)> {
    describe_configs(addr, 2, topic)
        .into_iter()
        .map(|(name, value, source)| (name, (value, source)))
        .collect()
}

#[test]
fn a_share_consumer_reads_a_recompressed_topic() {
    let broker = TestBroker::start_temp(&[]);
    let configs = [
        ("compression.type", "zstd"),
        ("message.timestamp.type", "LogAppendTime"),
    ];
    assert_eq!(create(&broker.addr, "shared", &configs).0, 0);
    test_support::kafka::set_configs(
        &broker.addr,
        test_support::kafka::GROUP_RESOURCE,
        "sg",
        &[("share.auto.offset.reset", "earliest")],
    );
    produce_rdkafka(&broker.addr, "shared", "none", 300, &[]);
    assert!(fetched(&broker.addr, "shared")
        .iter()
        .all(|(h, _)| h.codec() == Some(Codec::Zstd)));
    let script = r#"
import sys, time
from confluent_kafka import ShareConsumer
share = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "sg"})
share.subscribe(["shared"])
seen, deadline = {}, time.time() + 60
while len(seen) < 300 and time.time() < deadline:
    for m in share.poll(0.5) or []:
        if m.error():
            sys.exit(str(m.error()))
        seen[m.key().decode()] = (m.value().decode(), m.timestamp()[0])
share.close()
for k, (v, kind) in sorted(seen.items()):
    print(k, kind, v, sep="\t")
"#;
    let got: BTreeMap<String, (String, String)> = python_stdout(script, &[&broker.addr])
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            (f[0].to_string(), (f[1].to_string(), f[2].to_string()))
        })
        .collect();
    let want: BTreeMap<String, (String, String)> = (0..300)
        .map(expected)
        .map(|(k, v, _)| (k, ("2".to_string(), v)))
        .collect();
    assert_eq!(
        got, want,
        "every record once, as sent, with the broker's time type"
    );
}
