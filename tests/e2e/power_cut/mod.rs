//! Power cuts, not kill -9: the real broker on [`PowerCutFs`], a file system that keeps only
//! what was fsynced when the power goes (kill -9 keeps the page cache, so it cannot tell a
//! broker that fsyncs from one that does not).
//!
//! Each round a topic is created, a group commits an offset, and an idempotent producer (raw
//! protocol, one batch in flight, acks=all or acks=1) appends to 3 partitions; at a seeded
//! random moment the broker is killed and the power cut; the broker starts again on what is
//! left. Checked after every start:
//! - it starts (nothing half-written stops it), every topic whose creation was acknowledged is
//!   there, so is the group's last commit, and what is served is whole batches;
//! - on the defaults, acks=all: every acknowledged record is stored at the offset it was
//!   acknowledged at, and no offset holds two records; so with `--flush-messages 1` and acks=1;
//! - on the defaults, acks=1: nothing acknowledged longer ago than about `flush.ms` is lost;
//! - with `--max-open-segments 1` (every produce to another partition parks the last one's
//!   segment and opens its own), the same;
//! - with `--write-caching true` (the page cache for acks=all too): what was lost is counted
//!   and printed, as the docs say it may be (acknowledged records since the last fsync).

mod mix;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, FetchResponse, ProduceResponse};
use log_core::batch;
use test_support::kafka::{fetch_request, init_producer_id, produce_request, try_create_topic};
use test_support::wire::{call, connect, try_call};
use test_support::{PowerCutFs, TestBroker};

const PARTITIONS: i32 = 3;
const TOPIC: &str = "acked";

/// splitmix64: the rounds' timings from a seed, the same on every machine.
fn next(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Records acknowledged: (partition, offset) → (value, when; `None` once it survived a cut).
type Acked = BTreeMap<(i32, i64), (String, Option<Instant>)>;

/// A produce on `stream` that stops at the first broken connection instead of failing the
/// test: (error code, base offset), or `None` once the broker is gone.
fn try_produce(
    stream: &mut TcpStream,
    topic: &str,
    partition: i32,
    records: bytes::Bytes,
    acks: i16,
) -> Option<(i16, i64)> {
    let request = produce_request(topic, partition, Some(records)).with_acks(acks);
    let response: ProduceResponse = try_call(stream, ApiKey::Produce, 9, &request)?;
    let p = &response.responses[0].partition_responses[0];
    Some((p.error_code, p.base_offset))
}

/// Produces 4-record batches to `topic`'s partitions round robin until the broker goes (or
/// `stop`), recording what was acknowledged; `idempotent` or as a plain producer.
struct Producing {
    addr: String,
    topic: &'static str,
    partitions: i32,
    idempotent: bool,
    acks: i16,
    round: usize,
}

fn producer(how: Producing, acked: Arc<Mutex<Acked>>, stop: Arc<AtomicBool>) {
    let Producing {
        addr,
        topic,
        partitions,
        idempotent,
        acks,
        round,
    } = how;
    let (pid, epoch) = if idempotent {
        init_producer_id(&addr)
    } else {
        (-1, -1)
    };
    let Ok(mut stream) = TcpStream::connect(&addr) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut sequences = vec![0i32; partitions as usize];
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let partition = n % partitions;
        let values: Vec<String> = (0..4).map(|k| format!("r{round}-b{n}-{k}")).collect();
        let records: Vec<batch::NewRecord> = values
            .iter()
            .map(|v| (None, Some(v.as_bytes()), 1))
            .collect();
        let sequence = &mut sequences[partition as usize];
        let bytes = if idempotent {
            batch::build_for_producer(&records, pid, epoch, *sequence)
        } else {
            batch::build(&records)
        };
        match try_produce(&mut stream, topic, partition, bytes, acks) {
            Some((0, base)) => {
                *sequence += 4;
                let now = Some(Instant::now());
                let mut acked = acked.lock().unwrap();
                for (k, v) in values.into_iter().enumerate() {
                    acked.insert((partition, base + k as i64), (v, now));
                }
            }
            _ => return,
        }
    }
}

/// Every record stored in `partition` of `topic`: offset → value, from whole batches.
fn stored(addr: &str, topic: &str, partition: i32) -> BTreeMap<i64, String> {
    let end = end_of(addr, topic, partition);
    let mut out = BTreeMap::new();
    let mut offset = 0;
    while offset < end {
        let mut request = fetch_request(topic, offset, 0, 1 << 20);
        request.topics[0].partitions[0].partition = partition;
        let response: FetchResponse = call(&mut connect(addr), ApiKey::Fetch, 12, &request);
        let p = &response.responses[0].partitions[0];
        assert_eq!(
            p.error_code, 0,
            "fetch of partition {partition} at {offset}"
        );
        let records = p.records.clone().unwrap_or_default();
        assert!(
            !records.is_empty(),
            "partition {partition}: nothing served at {offset} < {end}"
        );
        for record in batch::decode(&records).expect("whole, valid batches") {
            let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
            assert!(
                out.insert(record.offset, value).is_none(),
                "offset {} twice",
                record.offset
            );
            offset = offset.max(record.offset + 1);
        }
    }
    out
}

/// The high watermark of `partition` of `topic`, from a Fetch.
fn end_of(addr: &str, topic: &str, partition: i32) -> i64 {
    let mut request = fetch_request(topic, 0, 0, 1);
    request.topics[0].partitions[0].partition = partition;
    let response: FetchResponse = call(&mut connect(addr), ApiKey::Fetch, 12, &request);
    response.responses[0].partitions[0].high_watermark
}

/// A consumer of group `cut-group` (no subscription: commits and reads commits only).
fn group_consumer(addr: &str) -> rdkafka::consumer::BaseConsumer {
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "cut-group")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap()
}

/// Commits `offset` for partition 0 of `topic`; whether the commit was acknowledged.
fn commit(addr: &str, topic: &str, offset: i64) -> bool {
    use rdkafka::consumer::{CommitMode, Consumer};
    let mut list = rdkafka::TopicPartitionList::new();
    list.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
        .unwrap();
    group_consumer(addr).commit(&list, CommitMode::Sync).is_ok()
}

/// The group's committed offset of partition 0 of `topic`.
fn committed(addr: &str, topic: &str) -> Option<i64> {
    use rdkafka::consumer::Consumer;
    let mut list = rdkafka::TopicPartitionList::new();
    list.add_partition(topic, 0);
    let found = group_consumer(addr)
        .committed_offsets(list, Duration::from_secs(10))
        .unwrap();
    found.elements()[0].offset().to_raw()
}

/// What `cuts` power cuts did to a broker started with `flags`.
#[derive(Debug, Default)]
struct Figures {
    acknowledged: usize,
    lost: usize,
    /// Acknowledged offsets that hold another record after a cut.
    reused: usize,
    /// How long before its cut the oldest record lost (or overwritten) had been acknowledged.
    oldest_lost: Duration,
    lost_topics: usize,
    /// Rounds whose acknowledged group commit was not there after the cut.
    lost_commits: usize,
}

/// How a run produces: acks, and how long a round runs before its cut (at least, plus up to
/// 300 ms drawn from the seed).
#[derive(Clone, Copy, Debug)]
struct Load {
    acks: i16,
    round: Duration,
}

const ACKS_ALL: Load = Load {
    acks: -1,
    round: Duration::from_millis(20),
};

fn power_cuts(flags: &[&str], load: Load, cuts: usize, mut seed: u64) -> Figures {
    let tmp = tempfile::tempdir().unwrap();
    let mount = tmp.path().join("mnt");
    std::fs::create_dir(&mount).unwrap();
    let mut fs = PowerCutFs::mount(&mount).expect("a FUSE mount (/dev/fuse, as root)");
    let data = mount.join("data");
    let log = tmp.path().join("broker.log");
    let mut broker = TestBroker::start_logging_to(&data, &log, flags);
    assert_eq!(try_create_topic(&broker.addr, TOPIC, PARTITIONS, &[]), 0);
    let acked = Arc::new(Mutex::new(Acked::new()));
    let mut topics = vec![TOPIC.to_string()];
    let mut figures = Figures::default();
    for round in 0..cuts {
        let topic = format!("created-{round}");
        assert_eq!(try_create_topic(&broker.addr, &topic, 1, &[]), 0);
        topics.push(topic);
        assert!(commit(&broker.addr, TOPIC, round as i64 + 1));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (addr, acked, stop) = (broker.addr.clone(), acked.clone(), stop.clone());
            let how = Producing {
                addr,
                topic: TOPIC,
                partitions: PARTITIONS,
                idempotent: true,
                acks: load.acks,
                round,
            };
            std::thread::spawn(move || producer(how, acked, stop))
        };
        std::thread::sleep(load.round + Duration::from_millis(next(&mut seed) % 300));
        broker.kill9();
        let cut_at = Instant::now();
        stop.store(true, Ordering::Relaxed);
        thread.join().unwrap();
        fs.cut().unwrap();
        broker.restart();

        let existing =
            test_support::lograil_stdout(&["topic", "list", "--bootstrap-server", &broker.addr]);
        figures.lost_topics += topics
            .iter()
            .filter(|t| !existing.split_whitespace().any(|w| w == t.as_str()))
            .count();
        figures.lost_commits +=
            usize::from(committed(&broker.addr, TOPIC) != Some(round as i64 + 1));
        settle(
            &mut acked.lock().unwrap(),
            survivors(&broker.addr, TOPIC, PARTITIONS),
            cut_at,
            &mut figures,
        );
    }
    figures
}

/// Every record stored in `topic`'s partitions, as survivors of a cut.
fn survivors(addr: &str, topic: &str, partitions: i32) -> Acked {
    let mut survivors = Acked::new();
    for partition in 0..partitions {
        for (offset, value) in stored(addr, topic, partition) {
            survivors.insert((partition, offset), (value, None));
        }
    }
    survivors
}

/// Counts into `figures` what of `acked` the cut at `cut_at` lost or gave to another record,
/// then makes `survivors` (what is stored now) what the next round must keep.
fn settle(acked: &mut Acked, survivors: Acked, cut_at: Instant, figures: &mut Figures) {
    for (at, (value, when)) in acked.iter() {
        figures.acknowledged += usize::from(when.is_some());
        match survivors.get(at) {
            Some((v, _)) if v == value => continue,
            Some(_) => figures.reused += 1,
            None => figures.lost += 1,
        }
        let age = when.map_or(Duration::MAX, |when| cut_at.duration_since(when));
        figures.oldest_lost = figures.oldest_lost.max(age);
    }
    *acked = survivors;
}

/// LOGRAIL_TEST_CUTS: more cuts for a longer run by hand (`default` in CI).
fn cuts(default: usize) -> usize {
    std::env::var("LOGRAIL_TEST_CUTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

#[test]
fn on_the_defaults_a_power_cut_loses_nothing_acknowledged_with_acks_all() {
    let n = cuts(12);
    let figures = power_cuts(&[], ACKS_ALL, n, 0x1096a11);
    eprintln!("defaults, acks=all, {n} cuts: {figures:?}");
    assert!(figures.acknowledged > 100, "{figures:?}");
    assert_eq!(
        (
            figures.lost,
            figures.reused,
            figures.lost_topics,
            figures.lost_commits
        ),
        (0, 0, 0, 0),
        "{figures:?}"
    );
}

/// One active segment open at a time: every produce to another partition parks the last one
/// (fsynced if needed, file closed) and opens its own again, between the power cuts.
#[test]
fn with_one_open_segment_a_power_cut_loses_nothing_acknowledged_with_acks_all() {
    let n = cuts(4);
    let figures = power_cuts(&["--max-open-segments", "1"], ACKS_ALL, n, 0x0e11);
    eprintln!("--max-open-segments 1, acks=all, {n} cuts: {figures:?}");
    assert!(figures.acknowledged > 100, "{figures:?}");
    assert_eq!(
        (figures.lost, figures.reused, figures.lost_topics),
        (0, 0, 0),
        "{figures:?}"
    );
}

#[test]
fn with_flush_messages_1_a_power_cut_loses_nothing_acknowledged_with_acks_1() {
    let n = cuts(4);
    let load = Load {
        acks: 1,
        ..ACKS_ALL
    };
    let figures = power_cuts(&["--flush-messages", "1"], load, n, 0xf1a54);
    eprintln!("--flush-messages 1, acks=1, {n} cuts: {figures:?}");
    assert!(figures.acknowledged > 100, "{figures:?}");
    assert_eq!((figures.lost, figures.reused), (0, 0), "{figures:?}");
}

#[test]
fn on_the_defaults_a_power_cut_loses_only_the_last_flush_ms_of_acks_1() {
    // Rounds of 2 s with flush.ms at 100 ms: without the background flush a cut would lose
    // records acknowledged up to 2 s before it; with it, about the last 100 ms (a generous
    // second allowed for a loaded machine's flusher).
    let n = cuts(3);
    let load = Load {
        acks: 1,
        round: Duration::from_secs(2),
    };
    let figures = power_cuts(&["--flush-ms", "100"], load, n, 0xac51);
    eprintln!("flush.ms 100, acks=1, {n} cuts: {figures:?}");
    assert!(figures.acknowledged > 100, "{figures:?}");
    assert!(figures.oldest_lost < Duration::from_secs(1), "{figures:?}");
    assert_eq!(
        (figures.lost_topics, figures.lost_commits),
        (0, 0),
        "{figures:?}"
    );
}

#[test]
fn with_write_caching_a_power_cut_keeps_topics_and_every_start_succeeds() {
    let n = cuts(4);
    let figures = power_cuts(&["--write-caching", "true"], ACKS_ALL, n, 0xdefa017);
    eprintln!("--write-caching true, acks=all, {n} cuts: {figures:?}");
    assert!(figures.acknowledged > 100, "{figures:?}");
    assert_eq!(
        (figures.lost_topics, figures.lost_commits),
        (0, 0),
        "{figures:?}"
    );
}
