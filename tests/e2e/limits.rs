//! Resource limits a client can hit, each hit with real sockets: connection caps, bytes of
//! requests being read, idle and partial-request timeouts, request sizes and array lengths per
//! API, fetch response size, partitions per request and per broker, topic auto-creation,
//! producer ids and group sizes; and long file work (creating thousands of partitions, a time
//! lookup in a big compressed batch) that must not stall other requests.
//!
//! Memory is read from `/proc/PID/status` (`RssAnon`: the heap, not the mapped segment files),
//! sampled in a thread so peaks are seen. Waits are on conditions, with generous deadlines that
//! only turn a hang into a failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use log_core::batch;

use test_support::kafka::{
    api_versions_answered, ensure_topic, name as topic, produce_at, produce_request, wait_until,
};
use test_support::wire::{call, closed, connect, frame, read_response};
use test_support::TestBroker;

const MIB: u64 = 1 << 20;

/// Anonymous resident memory of a process (its heap; mapped segment files are not counted).
fn rss_anon(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .expect("RssAnon in /proc/PID/status");
    kb * 1024
}

/// The highest `RssAnon` of a process, sampled every 5 ms until dropped.
struct PeakRss {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PeakRss {
    fn watch(pid: u32) -> PeakRss {
        let peak = Arc::new(AtomicU64::new(rss_anon(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (peak.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_anon(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        PeakRss {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for PeakRss {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn create_topics(addr: &str, topics: &[(&str, i32)]) -> CreateTopicsResponse {
    let request = CreateTopicsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions)| {
                    CreatableTopic::default()
                        .with_name(topic(name))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(-1)
                })
                .collect(),
        )
        .with_timeout_ms(600_000);
    let mut s = connect(addr);
    s.set_read_timeout(Some(Duration::from_secs(600))).unwrap();
    call(&mut s, ApiKey::CreateTopics, 5, &request)
}

/// While `busy` says the broker is still working on something slow, other requests on other
/// connections are answered: a produce to another topic and an ApiVersions, five times over.
/// Fails if the slow work ends before that (the requests were held up behind it).
fn answered_while(addr: &str, other_topic: &str, what: &str, busy: impl Fn() -> bool) {
    let mut s = connect(addr);
    for round in 0..5 {
        let records = batch::build(&[(None, Some(b"meanwhile"), 1)]);
        assert_eq!(produce_at(&mut s, 9, other_topic, records), 0);
        assert!(api_versions_answered(addr));
        assert!(
            busy(),
            "round {round}: {what} was over before other requests were answered: they waited for it"
        );
    }
}

#[test]
fn the_listening_line_is_printed_only_once_the_data_dir_is_open() {
    let _first = TestBroker::start_temp(&[]);
    let data = _first.data_dir.clone();
    // A second broker on the same data dir cannot open it (it is locked): it must exit with an
    // error and never say it is listening, since tests and scripts take that line as "ready".
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_lograil"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(!second.status.success(), "a second broker on a locked dir");
    assert!(
        !stdout.contains("listening"),
        "printed {stdout:?} before failing to open the data dir"
    );
}

#[test]
fn creating_thousands_of_partitions_does_not_stall_other_requests() {
    let broker = TestBroker::start_temp(&[]);
    let data = broker.data_dir.clone();
    ensure_topic(&broker.addr, "other");
    let addr = broker.addr.clone();
    let create = std::thread::spawn(move || create_topics(&addr, &[("big", 8000)]));
    wait_until("the creation started", Duration::from_secs(60), || {
        data.join("big-0").exists()
    });
    // `big.topic` is written once every partition exists.
    answered_while(&broker.addr, "other", "creating 8000 partitions", || {
        !data.join("big.topic").exists()
    });
    let created = create.join().unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    assert!(data.join("big-7999").is_dir());
}

#[test]
fn auto_creating_a_big_topic_does_not_stall_other_requests() {
    let broker = TestBroker::start_temp(&["--default-partitions", "8000"]);
    let data = broker.data_dir.clone();
    let small = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic("other"))
            .with_num_partitions(1)
            .with_replication_factor(-1)])
        .with_timeout_ms(5000);
    let made: CreateTopicsResponse =
        call(&mut connect(&broker.addr), ApiKey::CreateTopics, 5, &small);
    assert_eq!(made.topics[0].error_code, 0);
    let addr = broker.addr.clone();
    let metadata = std::thread::spawn(move || {
        let mut s = connect(&addr);
        s.set_read_timeout(Some(Duration::from_secs(600))).unwrap();
        let request = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic("auto")))
            ]))
            .with_allow_auto_topic_creation(true);
        let response: MetadataResponse = call(&mut s, ApiKey::Metadata, 12, &request);
        response.topics[0].error_code
    });
    wait_until("the auto-creation started", Duration::from_secs(60), || {
        data.join("auto-0").exists()
    });
    answered_while(
        &broker.addr,
        "other",
        "auto-creating 8000 partitions",
        || !data.join("auto.topic").exists(),
    );
    assert_eq!(metadata.join().unwrap(), 0);
}

#[test]
fn time_lookups_in_big_compressed_batches_do_not_stall_other_requests() {
    // A compressed batch may decompress to 8 x max.message.bytes: 4 MiB lets 20 MB in.
    let broker = TestBroker::start_temp(&["--max-message-bytes", "4194304"]);
    ensure_topic(&broker.addr, "zipped");
    ensure_topic(&broker.addr, "other");
    // One gzip batch of 100,000 records (20 MB before compression, a few hundred KB after):
    // finding a timestamp inside it means decompressing and decoding all of it.
    let value = vec![b'z'; 200];
    let records: Vec<log_core::batch::NewRecord> = (0..100_000i64)
        .map(|i| (None, Some(value.as_slice()), i))
        .collect();
    let zipped = batch::build_with(&records, batch::Compression::Gzip);
    assert_eq!(
        produce_at(&mut connect(&broker.addr), 9, "zipped", zipped),
        0
    );
    // More lookups at once than the broker has async workers (one per core).
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let pending = Arc::new(AtomicU64::new(0));
    let lookups: Vec<_> = (0..cores * 2)
        .map(|_| {
            let addr = broker.addr.clone();
            let pending = pending.clone();
            pending.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let request = ListOffsetsRequest::default()
                    .with_replica_id((-1).into())
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(topic("zipped"))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(99_999)])]);
                let mut s = connect(&addr);
                s.set_read_timeout(Some(Duration::from_secs(600))).unwrap();
                let response: ListOffsetsResponse = call(&mut s, ApiKey::ListOffsets, 7, &request);
                pending.fetch_sub(1, Ordering::SeqCst);
                response.topics[0].partitions[0].offset
            })
        })
        .collect();
    answered_while(&broker.addr, "other", "the time lookups", || {
        pending.load(Ordering::SeqCst) == (cores * 2) as u64
    });
    for lookup in lookups {
        assert_eq!(lookup.join().unwrap(), 99_999);
    }
}

#[test]
fn partitions_per_request_and_per_broker_are_capped() {
    let broker = TestBroker::start_temp(&[
        "--max-broker-partitions",
        "50",
        "--max-partitions-per-request",
        "30",
    ]);
    let data = broker.data_dir.clone();
    // Kafka's per-request answer: every topic of the request fails with POLICY_VIOLATION.
    let over = create_topics(&broker.addr, &[("a", 20), ("b", 11)]);
    let codes: Vec<i16> = over.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![44, 44]);
    assert!(!data.join("a-0").exists());
    let huge = create_topics(&broker.addr, &[("huge", 100_000)]);
    assert_eq!(huge.topics[0].error_code, 44, "POLICY_VIOLATION");
    assert!(!data.join("huge-0").exists());
    // Within both caps (the broker already holds three internal partitions:
    // __consumer_offsets, __share_group_state and __transaction_state).
    let ok = create_topics(&broker.addr, &[("a", 20), ("b", 10)]);
    let codes: Vec<i16> = ok.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, 0]);
    // 33 of 50 taken: 17 more fit, 18 do not.
    let full = create_topics(&broker.addr, &[("c", 18)]);
    assert_eq!(full.topics[0].error_code, 44);
    assert!(full.topics[0]
        .error_message
        .as_deref()
        .is_some_and(|m| m.contains("max-broker-partitions")));
    assert_eq!(
        create_topics(&broker.addr, &[("c", 17)]).topics[0].error_code,
        0
    );
    // Auto-creation counts too.
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic("auto")))
        ]))
        .with_allow_auto_topic_creation(true);
    let metadata: MetadataResponse =
        call(&mut connect(&broker.addr), ApiKey::Metadata, 12, &request);
    assert_eq!(metadata.topics[0].error_code, 44);
    assert!(!data.join("auto-0").exists());
    // Zero partitions is still INVALID_PARTITIONS.
    assert_eq!(
        create_topics(&broker.addr, &[("z", 0)]).topics[0].error_code,
        37
    );
}

#[test]
fn topic_auto_creation_is_rate_limited() {
    let broker = TestBroker::start_temp(&["--auto-create-topics-per-second", "2"]);
    let data = broker.data_dir.clone();
    let names = ["t1", "t2", "t3", "t4", "t5"];
    let request = MetadataRequest::default()
        .with_topics(Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic(n))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(true);
    let metadata: MetadataResponse =
        call(&mut connect(&broker.addr), ApiKey::Metadata, 12, &request);
    let codes: Vec<i16> = metadata.topics.iter().map(|t| t.error_code).collect();
    // Two created, the rest answered LEADER_NOT_AVAILABLE (retriable: clients ask again).
    assert_eq!(codes, vec![0, 0, 5, 5, 5]);
    assert!(data.join("t2-0").exists());
    assert!(!data.join("t3-0").exists());
    // Tokens come back with time: a later ask creates the rest.
    wait_until("every topic created", Duration::from_secs(30), || {
        let metadata: MetadataResponse =
            call(&mut connect(&broker.addr), ApiKey::Metadata, 12, &request);
        metadata.topics.iter().all(|t| t.error_code == 0)
    });
}

/// A Produce frame header declaring `size` bytes; the body is whatever follows.
pub(crate) fn declared_produce(size: i32) -> Vec<u8> {
    let mut head = Vec::new();
    head.put_i32(size);
    head.put_i16(ApiKey::Produce as i16);
    head.put_i16(9);
    head.put_i32(1);
    head
}

#[test]
fn partial_requests_are_bounded_in_memory_and_time_out() {
    let broker = TestBroker::start_temp(&[
        "--max-request-bytes",
        "60000000",
        "--queued-max-request-bytes",
        "64000000",
        "--request-read-timeout-ms",
        "3000",
        "--connections-max-idle-ms",
        "2000",
    ]);
    let pid = broker.pid();
    // Warm up, so the baseline includes the broker's working set.
    ensure_topic(&broker.addr, "warm");
    let baseline = rss_anon(pid);
    let peak = PeakRss::watch(pid);
    let mut idle = connect(&broker.addr);
    // 20 connections each declare a 50 MB request and send all of it but its last byte
    // (1 GB in all). A connection the broker stops reading blocks in write until it is closed.
    const DECLARED: usize = 50_000_000;
    let senders: Vec<_> = (0..20)
        .map(|_| {
            let addr = broker.addr.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.write_all(&declared_produce(DECLARED as i32)).unwrap();
                let chunk = vec![0u8; 1 << 20];
                let mut sent = 8;
                while sent < DECLARED - 1 {
                    let n = chunk.len().min(DECLARED - 1 - sent);
                    match s.write(&chunk[..n]) {
                        Ok(n) => sent += n,
                        Err(_) => break,
                    }
                }
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                closed(&mut s)
            })
        })
        .collect();
    for sender in senders {
        assert!(sender.join().unwrap(), "a stalled request is closed");
    }
    let grew = peak.peak().saturating_sub(baseline);
    drop(peak);
    println!("partial requests: RssAnon baseline {baseline} B, peak +{grew} B");
    assert!(
        grew < 64 * MIB + 32 * MIB,
        "1 GB of partial requests grew the broker by {} MiB",
        grew / MIB
    );
    // The connection that never sent anything was closed for being idle.
    assert!(closed(&mut idle), "an idle connection is closed");
    // Still serving, and a large request that arrives whole is taken once the budget is free.
    assert!(api_versions_answered(&broker.addr));
    let value = vec![b'v'; 10 << 20];
    let big = batch::build(&[(None, Some(value.as_slice()), 1)]);
    let mut s = connect(&broker.addr);
    ensure_topic(&broker.addr, "big");
    let request = produce_request("big", 0, Some(big));
    s.write_all(&frame(ApiKey::Produce, 9, 42, &request))
        .unwrap();
    assert!(read_response(&mut s).is_some(), "a whole 10 MB produce");
}

#[test]
fn connections_over_the_caps_are_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&tmp.path().join("data"), &["--max-connections-per-ip", "5"]);
    let answered = |s: &mut TcpStream| {
        s.write_all(&frame(
            ApiKey::ApiVersions,
            3,
            1,
            &ApiVersionsRequest::default(),
        ))
        .is_ok()
            && read_response(s).is_some()
    };
    // Five connections, one at a time (none evicted while the others are made), each busy with
    // a fetch polling long past the burst (an idle or half-sent one would make room for a new
    // connection: see tests/e2e/availability.rs).
    let mut held: Vec<TcpStream> = Vec::new();
    for i in 0..5 {
        let mut s = connect(&broker.addr);
        if i == 0 {
            let metadata = MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic("empty")))
                ]))
                .with_allow_auto_topic_creation(true);
            let created: MetadataResponse = call(&mut s, ApiKey::Metadata, 12, &metadata);
            assert_eq!(created.topics[0].error_code, 0);
        }
        // The fetch goes in the same write as an ApiVersions, behind it: once ApiVersions is
        // answered the broker reads the fetch at once, from what it has already received. (A
        // fetch written alone may not be read yet when the burst begins; its connection is then
        // idle, the first connection of the burst takes its place, and each one after takes
        // the place of the one before, never served: none is refused.)
        let poll = fetch_everything("empty").with_max_wait_ms(15_000);
        let mut both = frame(ApiKey::ApiVersions, 3, 1, &ApiVersionsRequest::default());
        both.extend_from_slice(&frame(ApiKey::Fetch, 11, 2, &poll));
        s.write_all(&both).unwrap();
        assert!(read_response(&mut s).is_some(), "ApiVersions answered");
        held.push(s);
    }
    // A burst over the cap: each closed at once (EOF, not a timeout), one log line for all.
    let mut refused = 0;
    for _ in 0..20 {
        let mut s = connect(&broker.addr);
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut byte = [0u8; 1];
        match s.read(&mut byte) {
            Ok(0) => refused += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => refused += 1,
            Ok(_) => panic!("bytes on a connection that sent nothing"),
            Err(_) => {}
        }
    }
    assert!(refused >= 19, "{refused} of 20 over the cap were refused");
    // Once the long polls end (the one closed here holds its slot until then), a new
    // connection is served again.
    drop(held.pop());
    wait_until("a freed slot is usable", Duration::from_secs(30), || {
        answered(&mut connect(&broker.addr))
    });
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    let lines = log.matches("refusing connections").count();
    assert!(
        (1..=2).contains(&lines),
        "{lines} log lines for one burst:\n{log}"
    );
    drop(held);

    let broker = TestBroker::start(&tmp.path().join("data2"), &["--max-connections", "3"]);
    let mut held: Vec<TcpStream> = (0..3).map(|_| connect(&broker.addr)).collect();
    for s in &mut held {
        assert!(answered(s));
    }
    assert!(closed(&mut connect(&broker.addr)), "over max-connections");
    drop(held.pop());
    wait_until("a freed slot is usable", Duration::from_secs(30), || {
        answered(&mut connect(&broker.addr))
    });
}

/// A DescribeGroups v5 request of `count` one-byte (empty) group ids.
fn describe_empty_groups(count: u32) -> BytesMut {
    fn varint(buf: &mut BytesMut, mut v: u32) {
        while v >= 0x80 {
            buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        buf.put_u8(v as u8);
    }
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    buf.put_i16(ApiKey::DescribeGroups as i16);
    buf.put_i16(5);
    buf.put_i32(9);
    buf.put_i16(-1); // client id
    buf.put_u8(0); // header tagged fields
    varint(&mut buf, count + 1);
    buf.put_bytes(1, count as usize); // each id: compact string of length 0
    buf.put_u8(0); // include_authorized_operations
    buf.put_u8(0); // tagged fields
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf
}

#[test]
fn requests_cannot_decode_into_far_more_memory_than_they_take() {
    let broker = TestBroker::start_temp(&[]);
    let pid = broker.pid();
    ensure_topic(&broker.addr, "warm");
    let baseline = rss_anon(pid);
    let peak = PeakRss::watch(pid);
    // 10 MB of one-byte empty group ids: ten million groups to describe.
    let mut s = connect(&broker.addr);
    // The broker may close before all of it is sent: a failed write is fine.
    let _ = s.write_all(&describe_empty_groups(10_000_000));
    assert!(closed(&mut s), "refused without an answer");
    let grew = peak.peak().saturating_sub(baseline);
    drop(peak);
    println!("10 MB DescribeGroups: RssAnon baseline {baseline} B, peak +{grew} B");
    assert!(grew < 64 * MIB, "grew by {} MiB", grew / MIB);
    assert!(api_versions_answered(&broker.addr), "still serving");

    // A 20 MB Produce (under --max-request-bytes) of 2.5 million empty partitions: counted,
    // and refused, before it is decoded into ten times its size.
    let peak = PeakRss::watch(pid);
    let mut produce = BytesMut::new();
    produce.put_i32(0);
    produce.put_i16(ApiKey::Produce as i16);
    produce.put_i16(7);
    produce.put_i32(11);
    produce.put_i16(-1); // client id
    produce.put_i16(-1); // transactional id
    produce.put_i16(1); // acks
    produce.put_i32(1000);
    produce.put_i32(1); // one topic
    produce.put_i16(1);
    produce.put_slice(b"t");
    let partitions = 2_500_000;
    produce.put_i32(partitions);
    for index in 0..partitions {
        produce.put_i32(index);
        produce.put_i32(-1); // no records
    }
    let len = (produce.len() - 4) as i32;
    produce[..4].copy_from_slice(&len.to_be_bytes());
    let mut s = connect(&broker.addr);
    let _ = s.write_all(&produce);
    assert!(closed(&mut s), "2.5 million partitions refused");
    let grew = peak.peak().saturating_sub(baseline);
    drop(peak);
    println!("20 MB Produce of empty partitions: RssAnon peak +{grew} B");
    assert!(grew < 64 * MIB, "grew by {} MiB", grew / MIB);

    // Under the size cap but over the ids-per-request cap.
    let many: Vec<GroupId> = (0..20_000)
        .map(|i| GroupId(StrBytes::from_string(format!("group-{i:05}"))))
        .collect();
    let request = DescribeGroupsRequest::default().with_groups(many);
    let mut s = connect(&broker.addr);
    s.write_all(&frame(ApiKey::DescribeGroups, 5, 3, &request))
        .unwrap();
    assert!(closed(&mut s), "20,000 group ids");
    // A reasonable one is answered.
    let few: Vec<GroupId> = (0..100)
        .map(|i| GroupId(StrBytes::from_string(format!("group-{i}"))))
        .collect();
    let described: DescribeGroupsResponse = call(
        &mut connect(&broker.addr),
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default().with_groups(few),
    );
    assert_eq!(described.groups.len(), 100);
}

fn fetch_everything(name: &str) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(i32::MAX)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic(name))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(i32::MAX)])])
}

#[test]
fn fetch_responses_are_capped_and_their_memory_released() {
    let broker = TestBroker::start_temp(&["--fetch-max-bytes", "20971520"]);
    let pid = broker.pid();
    ensure_topic(&broker.addr, "wide");
    // 40 batches of ~1 MB: 40 MB in the partition.
    let value = vec![b'w'; 1_000_000];
    let mut s = connect(&broker.addr);
    for i in 0..40 {
        let records = batch::build(&[(None, Some(value.as_slice()), i)]);
        assert_eq!(produce_at(&mut s, 9, "wide", records), 0);
    }
    let before = rss_anon(pid);
    let mut consumer = connect(&broker.addr);
    let response: FetchResponse = call(&mut consumer, ApiKey::Fetch, 12, &fetch_everything("wide"));
    let records = response.responses[0].partitions[0].records.clone().unwrap();
    println!("fetch of max_bytes 2^31-1: {} bytes", records.len());
    assert!(
        records.len() <= 20 << 20,
        "{} bytes over a 20 MiB fetch.max.bytes",
        records.len()
    );
    assert!(records.len() >= 19 << 20, "filled up to the cap");
    // The one-batch exception (KIP-74): a first batch larger than the cap still comes whole.
    let mut small = fetch_everything("wide");
    small.max_bytes = 10;
    small.topics[0].partitions[0].partition_max_bytes = 10;
    let one: FetchResponse = call(&mut consumer, ApiKey::Fetch, 12, &small);
    let records = one.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(record_batch::validate_all(&records).unwrap().len(), 1);
    // The connection stays open, idle: the buffer of that 20 MB response is given back.
    wait_until(
        "the response buffer is released",
        Duration::from_secs(30),
        || rss_anon(pid) < before + 8 * MIB,
    );
    drop(consumer);
}

/// A fetch of `topic` from `offsets[i]` in partition `i`, in that order, with no partition
/// limit and a request limit of `max_bytes`.
fn fetch_partitions(topic_name: &str, offsets: &[i64], max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic(topic_name))
            .with_partitions(
                offsets
                    .iter()
                    .enumerate()
                    .map(|(i, &offset)| {
                        FetchPartition::default()
                            .with_partition(i as i32)
                            .with_fetch_offset(offset)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes(i32::MAX)
                    })
                    .collect(),
            )])
}

/// Per partition of a fetch response: (error code, base offsets of the whole batches it
/// returned, their bytes).
fn fetched_batches(response: &FetchResponse) -> Vec<(i16, Vec<i64>, usize)> {
    response.responses[0]
        .partitions
        .iter()
        .map(|p| {
            let records = p.records.clone().unwrap_or_default();
            let offsets = if records.is_empty() {
                Vec::new()
            } else {
                record_batch::validate_all(&records)
                    .expect("whole, valid batches")
                    .iter()
                    .map(|h| h.base_offset)
                    .collect()
            };
            (p.error_code, offsets, records.len())
        })
        .collect()
}

#[test]
fn the_fetch_budget_spans_partitions() {
    // fetch.max.bytes of 1.5 MiB; three partitions of ~1 MB each, in four batches of 250 kB.
    const CAP: usize = 1_572_864;
    let broker = TestBroker::start_temp(&["--fetch-max-bytes", &CAP.to_string()]);
    let created = create_topics(&broker.addr, &[("spread", 3)]);
    assert_eq!(created.topics[0].error_code, 0);
    let value = vec![b's'; 250_000];
    let mut s = connect(&broker.addr);
    for partition in 0..3 {
        for i in 0..4 {
            let request = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic("spread"))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch::build(&[(
                            None,
                            Some(value.as_slice()),
                            i,
                        )])))])]);
            let response: ProduceResponse = call(&mut s, ApiKey::Produce, 9, &request);
            assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
        }
    }
    let batch_len = batch::build(&[(None, Some(value.as_slice()), 0)]).len();
    // What fits: the first partition whole (4 batches), then as many whole batches of the
    // second as the rest of the budget holds, and none of the third.
    let second = (CAP - 4 * batch_len) / batch_len;
    assert_eq!(second, 2, "the sizes this test is built on");

    for version in [4, 12] {
        let mut consumer = connect(&broker.addr);
        // The client asks for far more than the broker's cap.
        let first: FetchResponse = call(
            &mut consumer,
            ApiKey::Fetch,
            version,
            &fetch_partitions("spread", &[0, 0, 0], i32::MAX),
        );
        let got = fetched_batches(&first);
        let total: usize = got.iter().map(|(_, _, bytes)| bytes).sum();
        println!("Fetch v{version} of 3 x 1 MB under a 1.5 MiB cap: {total} bytes");
        assert_eq!(
            got,
            [
                (0, vec![0, 1, 2, 3], 4 * batch_len),
                (0, vec![0, 1], 2 * batch_len),
                (0, vec![], 0),
            ],
            "Fetch v{version}: the first partition whole, the second up to the cap"
        );
        assert!(total <= CAP, "{total} bytes over fetch.max.bytes {CAP}");
        for p in &first.responses[0].partitions {
            assert_eq!(p.high_watermark, 4, "every partition's end is reported");
        }

        // The next fetch, from where each partition left off, brings the rest.
        let next: FetchResponse = call(
            &mut consumer,
            ApiKey::Fetch,
            version,
            &fetch_partitions("spread", &[4, 2, 0], i32::MAX),
        );
        let got = fetched_batches(&next);
        let total: usize = got.iter().map(|(_, _, bytes)| bytes).sum();
        assert_eq!(
            got,
            [
                (0, vec![], 0),
                (0, vec![2, 3], 2 * batch_len),
                (0, vec![0, 1, 2, 3], 4 * batch_len),
            ],
            "Fetch v{version}: the remaining partitions"
        );
        assert!(total <= CAP, "{total} bytes over fetch.max.bytes {CAP}");

        // The one exception (KIP-74): a request limit smaller than one batch still gets the
        // first batch whole, and nothing after it.
        let tiny: FetchResponse = call(
            &mut consumer,
            ApiKey::Fetch,
            version,
            &fetch_partitions("spread", &[0, 0, 0], 1_000),
        );
        assert_eq!(
            fetched_batches(&tiny),
            [(0, vec![0], batch_len), (0, vec![], 0), (0, vec![], 0)],
            "Fetch v{version}: one whole batch past a 1000-byte limit"
        );
        // And when the first partition has nothing left, the first batch that comes is
        // the second partition's: it is the one allowed to exceed the limit.
        let tiny: FetchResponse = call(
            &mut consumer,
            ApiKey::Fetch,
            version,
            &fetch_partitions("spread", &[4, 3, 0], 1_000),
        );
        assert_eq!(
            fetched_batches(&tiny),
            [(0, vec![], 0), (0, vec![3], batch_len), (0, vec![], 0)],
            "Fetch v{version}: the first batch is the second partition's"
        );
    }
}

fn join_group(stream: &mut TcpStream, group: &str) -> JoinGroupResponse {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(StrBytes::default())
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(Bytes::from_static(b"m")),
        ]);
    call(stream, ApiKey::JoinGroup, 5, &request)
}

#[test]
fn groups_are_capped_at_group_max_size() {
    let broker = TestBroker::start_temp(&["--group-max-size", "2"]);
    let mut s = connect(&broker.addr);
    // New members first get an id (MEMBER_ID_REQUIRED); those pending ids count.
    assert_eq!(join_group(&mut s, "g").error_code, 79);
    assert_eq!(join_group(&mut s, "g").error_code, 79);
    assert_eq!(
        join_group(&mut s, "g").error_code,
        81,
        "GROUP_MAX_SIZE_REACHED"
    );
    // Another group is not affected.
    assert_eq!(join_group(&mut s, "h").error_code, 79);
}

#[test]
fn only_producer_ids_the_broker_handed_out_are_tracked() {
    let broker = TestBroker::start_temp(&[]);
    ensure_topic(&broker.addr, "idem");
    let mut s = connect(&broker.addr);
    // Never handed out: refused, and no state kept for it.
    let made_up = batch::build_for_producer(&[(None, Some(b"x"), 1)], 123_456_789, 0, 0);
    assert_eq!(
        produce_at(&mut s, 9, "idem", made_up.clone()),
        59,
        "UNKNOWN_PRODUCER_ID"
    );
    assert_eq!(
        produce_at(&mut s, 3, "idem", made_up),
        45,
        "OUT_OF_ORDER_SEQUENCE_NUMBER before UNKNOWN_PRODUCER_ID existed (v3-4)"
    );
    // Presenting a made-up id to InitProducerId gets a fresh one instead of an epoch bump.
    let init = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(123_456_789.into())
        .with_producer_epoch(0);
    let id: InitProducerIdResponse = call(&mut s, ApiKey::InitProducerId, 4, &init);
    assert_eq!(id.error_code, 0);
    assert_ne!(id.producer_id.0, 123_456_789);
    let real = batch::build_for_producer(&[(None, Some(b"y"), 2)], id.producer_id.0, 0, 0);
    assert_eq!(produce_at(&mut s, 9, "idem", real), 0);
}
