//! Apache Kafka's MirrorMaker 2 between lograil and Apache Kafka, both ways, with MirrorMaker's
//! default settings: the way a user outgrows lograil and moves to a Kafka cluster (and back).
//!
//! One run: a `lograil` broker of this build ([`TestBroker`]), a one-broker Apache Kafka 4.4
//! (`tests/kafka/kafka.sh start --brokers 1`) and MirrorMaker 2 in dedicated mode
//! (`tests/mirror/mm2.sh`, MirrorMaker 4.3.1) with both flows, `lr->kafka` and `kafka->lr`. Each
//! side's `orders` (3 partitions, keyed records) has a consumer group that committed an offset
//! in the middle of every partition. On the other side, the test checks that `<alias>.orders`
//! (DefaultReplicationPolicy) holds every record (key, value, timestamp) in each partition's
//! order, that the group's offsets were translated (checkpoints, `sync.group.offsets.enabled`)
//! to the record the group had not consumed yet, and that a consumer of the group resumes there;
//! also heartbeats both ways, and that the remote topic follows its source while MirrorMaker
//! runs: its config, a partition added, records produced later.
//!
//! Needs java and mvn (skipped, saying so, without them); see tests/mirror/README.md.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::{ApiKey, CreatePartitionsRequest, CreatePartitionsResponse};
use test_support::kafka::{
    alter_configs, create_topic_answer, describe_configs, name, rdkafka_produce, Record,
};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const TOPIC: &str = "orders";
const PARTITIONS: u32 = 3;
const PER_PARTITION: usize = 250;
/// Where each partition's group stands: the first record it has not consumed. MirrorMaker
/// translates an offset exactly only at an offset sync or one past it (`OffsetSyncStore`:
/// further on it answers the sync's offset + 1, at-least-once); with the default
/// `offset.lag.max` (100) its syncs of a copy made at once are at the first record, then every
/// 101 records (0, 101, 202), and at the last record copied. So these are exact: at the sync
/// 101, one past it (102), one past 202 (203).
const GROUP_AT: [i64; PARTITIONS as usize] = [101, 102, 203];
/// How long MirrorMaker may take for each phase (copy and translate; copy what came later).
const MIRROR_TIMEOUT: Duration = Duration::from_secs(180);
/// The source topics' `retention.ms` (a day; Kafka's default is a week), which the remote
/// topics take.
const SOURCE_RETENTION_MS: &str = "86400000";
/// What the source topics' `retention.ms` is changed to while MirrorMaker runs (12 hours); the
/// remote topics follow (IncrementalAlterConfigs on the target).
const LATER_RETENTION_MS: &str = "43200000";
/// Records produced to each partition of a source while MirrorMaker runs, after a fourth
/// partition is added.
const LATER: usize = 20;

/// One record as the test compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    key: String,
    value: String,
    timestamp: i64,
}

/// A source cluster of the migration: its MirrorMaker alias, bootstrap and consumer group.
struct Side<'a> {
    alias: &'static str,
    bootstrap: &'a str,
    group: &'static str,
}

#[test]
fn mirror_maker_2_migrates_lograil_to_kafka_and_kafka_to_lograil() {
    if let Some(why) = test_support::java::missing_tools() {
        eprintln!("skipped: MirrorMaker 2 needs {why}");
        return;
    }
    let started = Instant::now();
    let lograil = TestBroker::start_temp(&["--group-initial-rebalance-delay-ms", "0"]);
    let kafka = KafkaPeer::start();
    eprintln!(
        "lograil {} and Kafka {} up in {:.1}s",
        lograil.addr,
        kafka.bootstrap,
        started.elapsed().as_secs_f64()
    );
    let lr = Side {
        alias: "lr",
        bootstrap: &lograil.addr,
        group: "billing",
    };
    let kf = Side {
        alias: "kafka",
        bootstrap: &kafka.bootstrap,
        group: "shipping",
    };
    // (source, target, the source's records per partition)
    let mut flows = [
        (&lr, &kf, fill_source(&lr, 0)),
        (&kf, &lr, fill_source(&kf, 1)),
    ];

    let work = tempfile::tempdir().unwrap();
    let props = work.path().join("mm2.properties");
    std::fs::write(&props, mm2_properties(&lr, &kf)).unwrap();
    let mut mm2 = MirrorMaker::start(&props, &work.path().join("mm2.log"));
    let mirror_started = Instant::now();

    // Both flows: every record copied, each group's offsets translated and synced, and
    // MirrorMaker's heartbeats going both ways (each side's `heartbeats` topic is written by
    // the flow into it, and copied by the flow out of it as `<alias>.heartbeats`).
    mm2.wait("copy, translate and heartbeat", || {
        flows
            .iter()
            .filter_map(|(source, target, records)| {
                let remote = format!("{}.{TOPIC}", source.alias);
                let ends = high_watermarks(target.bootstrap, &remote);
                let offsets = committed(target.bootstrap, source.group, &remote);
                let beats = high_watermarks(target.bootstrap, "heartbeats");
                let copied_beats =
                    high_watermarks(target.bootstrap, &format!("{}.heartbeats", source.alias));
                let done = all_copied(records, &ends)
                    && (0..PARTITIONS as i32)
                        .all(|p| offsets.get(&p) == Some(&GROUP_AT[p as usize]))
                    && beats.get(&0).is_some_and(|n| *n > 0)
                    && copied_beats.get(&0).is_some_and(|n| *n > 0);
                (!done).then(|| {
                    format!(
                        "{} -> {}: {remote} ends {ends:?} (want {PER_PARTITION} each), group {} \
                         at {offsets:?} (want {GROUP_AT:?}), heartbeats {beats:?}, \
                         {}.heartbeats {copied_beats:?}",
                        source.alias, target.alias, source.group, source.alias
                    )
                })
            })
            .collect()
    });
    eprintln!(
        "MirrorMaker copied and translated both ways {:.1}s after it started",
        mirror_started.elapsed().as_secs_f64()
    );

    // The remote topic was created with the source topic's own config.
    for (source, target, _) in &flows {
        let remote = format!("{}.{TOPIC}", source.alias);
        assert_eq!(
            retention_ms(target.bootstrap, &remote).as_deref(),
            Some(SOURCE_RETENTION_MS),
            "{} -> {}: {remote}'s retention.ms",
            source.alias,
            target.alias
        );
    }

    // Producers go on while MirrorMaker runs, a source topic grows a partition and its
    // retention changes: the remote topic follows (CreatePartitions and IncrementalAlterConfigs
    // on the target) and gets the new records.
    for (source, _, records) in &mut flows {
        grow_and_produce(source, records);
        let (error, message) = alter_configs(
            source.bootstrap,
            2,
            TOPIC,
            &[("retention.ms", 0, Some(LATER_RETENTION_MS))],
            false,
        );
        assert_eq!(error, 0, "{}: retention.ms: {message:?}", source.alias);
    }
    mm2.wait(
        "copy the later records, the new partition, the new retention",
        || {
            flows
                .iter()
                .filter_map(|(source, target, records)| {
                    let remote = format!("{}.{TOPIC}", source.alias);
                    let ends = high_watermarks(target.bootstrap, &remote);
                    let retention = retention_ms(target.bootstrap, &remote);
                    let done = all_copied(records, &ends)
                        && retention.as_deref() == Some(LATER_RETENTION_MS);
                    let want: Vec<_> = records.iter().map(|(p, r)| (*p, r.len())).collect();
                    (!done).then(|| {
                        format!(
                            "{} -> {}: {remote} ends {ends:?}, want {want:?}; retention.ms \
                         {retention:?}, want {LATER_RETENTION_MS}",
                            source.alias, target.alias
                        )
                    })
                })
                .collect()
        },
    );
    eprintln!(
        "MirrorMaker copied the later records {:.1}s after it started",
        mirror_started.elapsed().as_secs_f64()
    );
    mm2.stop();

    for (source, target, records) in &flows {
        let remote = format!("{}.{TOPIC}", source.alias);
        let what = format!("{} -> {} ({remote})", source.alias, target.alias);
        // Every record, with its key, value and timestamp, in each partition's order.
        let copied = read_all(target.bootstrap, &remote);
        assert_eq!(
            copied.keys().collect::<Vec<_>>(),
            records.keys().collect::<Vec<_>>(),
            "{what}: partitions"
        );
        for (p, want) in records {
            let got = &copied[p];
            assert_eq!(
                got.len(),
                want.len(),
                "{what}: partition {p}'s record count"
            );
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                panic!(
                    "{what}: partition {p} differs first at offset {i}: {:?}, source {:?}",
                    got[i], want[i]
                );
            }
        }
        // The group's translated offset is the record it had not consumed on the source, and
        // a consumer of the group resumes exactly there.
        let offsets = committed(target.bootstrap, source.group, &remote);
        let resumed = resume(target.bootstrap, source.group, &remote);
        for p in 0..PARTITIONS as i32 {
            let at = GROUP_AT[p as usize];
            let next = &records[&p][at as usize];
            assert_eq!(offsets.get(&p), Some(&at), "{what}: group offset of {p}");
            assert_eq!(
                copied[&p][at as usize], *next,
                "{what}: the record at the group's offset in partition {p}"
            );
            let (offset, rec) = &resumed[&p];
            assert_eq!(
                (*offset, rec),
                (at, next),
                "{what}: where {} resumes in partition {p}",
                source.group
            );
        }
    }
    eprintln!("done in {:.1}s", started.elapsed().as_secs_f64());
}

/// `topic`'s `retention.ms` on `bootstrap` (DescribeConfigs).
fn retention_ms(bootstrap: &str, topic: &str) -> Option<String> {
    describe_configs(bootstrap, 2, topic)
        .into_iter()
        .find(|(name, _, _)| name == "retention.ms")
        .map(|(_, value, _)| value)
}

/// True if the remote topic's high watermarks (`ends`) are the source's record counts, every
/// partition's.
fn all_copied(records: &BTreeMap<i32, Vec<Rec>>, ends: &BTreeMap<i32, i64>) -> bool {
    ends.len() == records.len()
        && records
            .iter()
            .all(|(p, r)| ends.get(p) == Some(&(r.len() as i64)))
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests")
        .join(name)
}

/// The MirrorMaker configuration: the clusters, the flows, the topic, the replication factors
/// one-broker clusters force, group offset sync on, and short intervals; the rest MirrorMaker's
/// defaults.
fn mm2_properties(a: &Side, b: &Side) -> String {
    format!(
        "clusters = {a}, {b}\n\
         {a}.bootstrap.servers = {a_bootstrap}\n\
         {b}.bootstrap.servers = {b_bootstrap}\n\
         {a}->{b}.enabled = true\n\
         {b}->{a}.enabled = true\n\
         topics = {TOPIC}\n\
         sync.group.offsets.enabled = true\n\
         # One broker on each side: MirrorMaker's own topics default to 3 replicas (remote\n\
         # topics to 2), which a one-broker cluster refuses (INVALID_REPLICATION_FACTOR).\n\
         replication.factor = 1\n\
         checkpoints.topic.replication.factor = 1\n\
         heartbeats.topic.replication.factor = 1\n\
         offset-syncs.topic.replication.factor = 1\n\
         config.storage.replication.factor = 1\n\
         offset.storage.replication.factor = 1\n\
         status.storage.replication.factor = 1\n\
         # Short intervals, for a fast test (defaults 60, 60, 600, 600, 600 s).\n\
         emit.checkpoints.interval.seconds = 1\n\
         sync.group.offsets.interval.seconds = 1\n\
         refresh.topics.interval.seconds = 1\n\
         refresh.groups.interval.seconds = 1\n\
         sync.topic.configs.interval.seconds = 1\n",
        a = a.alias,
        b = b.alias,
        a_bootstrap = a.bootstrap,
        b_bootstrap = b.bootstrap,
    )
}

/// Creates `orders` on `side`, produces `PER_PARTITION` keyed records to each partition (the
/// keys chosen by the Java client's partitioner, murmur2, so the producer's partitioner puts
/// them there), and has the side's group consume up to [`GROUP_AT`] and commit. Returns the
/// records as the source holds them, per partition.
fn fill_source(side: &Side, seed: u64) -> BTreeMap<i32, Vec<Rec>> {
    let (error, message) = create_topic_answer(
        side.bootstrap,
        TOPIC,
        PARTITIONS as i32,
        &[("retention.ms", SOURCE_RETENTION_MS)],
    );
    assert_eq!(error, 0, "{}: create {TOPIC}: {message}", side.alias);
    // Keys for each partition.
    let mut keys: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for i in 0.. {
        let key = format!("customer-{seed}-{i}");
        let p = consumer::partition_for_key(key.as_bytes(), PARTITIONS);
        keys.entry(p).or_default().push(key);
        if keys.len() == PARTITIONS as usize && keys.values().all(|k| k.len() >= 7) {
            break;
        }
    }
    // Recent timestamps (brokers refuse or expire records far in the past or future), distinct
    // per record, so that the copies' can be compared.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let base_ts = now - 600_000 + seed as i64 * 100_000;
    let mut want: BTreeMap<i32, Vec<Rec>> = BTreeMap::new();
    let mut records = Vec::new();
    for i in 0..PER_PARTITION {
        for p in 0..PARTITIONS {
            let key = &keys[&p][i % keys[&p].len()];
            let rec = Rec {
                key: key.clone(),
                value: format!("{}-order-{p}-{i}", side.alias),
                timestamp: base_ts + (i as i64) * 10 + p as i64,
            };
            records.push(
                Record::new(rec.value.clone())
                    .key(rec.key.clone())
                    .timestamp(rec.timestamp),
            );
            want.entry(p as i32).or_default().push(rec);
        }
    }
    rdkafka_produce(
        side.bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("partitioner", "murmur2_random"),
            ("linger.ms", "20"),
        ],
        TOPIC,
        records,
    );
    let stored = read_all(side.bootstrap, TOPIC);
    assert_eq!(
        stored, want,
        "{}: the source holds what was produced",
        side.alias
    );

    // The group consumes each partition up to GROUP_AT and commits what it consumed.
    let consumer = consumer_of(side.bootstrap, Some(side.group));
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS as i32 {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut consumed = [0i64; PARTITIONS as usize];
    let deadline = Instant::now() + Duration::from_secs(60);
    while (0..PARTITIONS as usize).any(|p| consumed[p] < GROUP_AT[p]) {
        assert!(
            Instant::now() < deadline,
            "{}: consumed {consumed:?}",
            side.alias
        );
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            let p = m.partition() as usize;
            if m.offset() < GROUP_AT[p] {
                assert_eq!(m.offset(), consumed[p], "{}: offsets in order", side.alias);
                consumed[p] += 1;
            }
        }
    }
    let mut commit = TopicPartitionList::new();
    for p in 0..PARTITIONS as i32 {
        commit
            .add_partition_offset(TOPIC, p, Offset::Offset(consumed[p as usize]))
            .unwrap();
    }
    // A fresh Kafka answers NOT_COORDINATOR while it creates __consumer_offsets.
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = consumer.commit(&commit, CommitMode::Sync) {
        assert!(Instant::now() < deadline, "{}: commit: {e}", side.alias);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        committed(side.bootstrap, side.group, TOPIC),
        (0..PARTITIONS as i32)
            .map(|p| (p, GROUP_AT[p as usize]))
            .collect(),
        "{}: {} committed",
        side.alias,
        side.group
    );
    want
}

/// Grows `side`'s topic by one partition (CreatePartitions) and produces [`LATER`] more records
/// to each partition, new and old; adds them to `records`.
fn grow_and_produce(side: &Side, records: &mut BTreeMap<i32, Vec<Rec>>) {
    let partitions = PARTITIONS as i32 + 1;
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(TOPIC))
            .with_count(partitions)
            .with_assignments(None)])
        .with_timeout_ms(30_000);
    let response: CreatePartitionsResponse = call(
        &mut connect(side.bootstrap),
        ApiKey::CreatePartitions,
        3,
        &request,
    );
    assert_eq!(
        response.results[0].error_code, 0,
        "{}: {response:?}",
        side.alias
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut later = Vec::new();
    for i in 0..LATER {
        for p in 0..partitions {
            let rec = Rec {
                key: format!("later-{i}"),
                value: format!("{}-later-{p}-{i}", side.alias),
                timestamp: now + i as i64,
            };
            later.push(
                Record::new(rec.value.clone())
                    .key(rec.key.clone())
                    .partition(p)
                    .timestamp(rec.timestamp),
            );
            records.entry(p).or_default().push(rec);
        }
    }
    rdkafka_produce(
        side.bootstrap,
        &[("enable.idempotence", "true")],
        TOPIC,
        later,
    );
}

fn consumer_of(bootstrap: &str, group: Option<&str>) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group.unwrap_or("mirror-test-reader"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000");
    config.create().expect("librdkafka consumer")
}

/// `topic`'s partitions and their high watermarks on `bootstrap` (empty while the topic does
/// not exist).
fn high_watermarks(bootstrap: &str, topic: &str) -> BTreeMap<i32, i64> {
    let consumer = consumer_of(bootstrap, None);
    let timeout = Duration::from_secs(5);
    let Ok(metadata) = consumer.fetch_metadata(Some(topic), timeout) else {
        return BTreeMap::new();
    };
    let Some(t) = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
    else {
        return BTreeMap::new();
    };
    t.partitions()
        .iter()
        .filter_map(|p| {
            let (_, high) = consumer.fetch_watermarks(topic, p.id(), timeout).ok()?;
            Some((p.id(), high))
        })
        .collect()
}

/// The offsets `group` has committed on `topic`'s partitions (those it has one for).
fn committed(bootstrap: &str, group: &str, topic: &str) -> BTreeMap<i32, i64> {
    let consumer = consumer_of(bootstrap, Some(group));
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS as i32 {
        tpl.add_partition(topic, p);
    }
    let Ok(offsets) = consumer.committed_offsets(tpl, Duration::from_secs(5)) else {
        return BTreeMap::new();
    };
    offsets
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
}

/// Every record of `topic` on `bootstrap`, per partition in offset order (each partition read
/// to its high watermark).
fn read_all(bootstrap: &str, topic: &str) -> BTreeMap<i32, Vec<Rec>> {
    let consumer = consumer_of(bootstrap, None);
    let ends = high_watermarks(bootstrap, topic);
    let mut tpl = TopicPartitionList::new();
    for p in ends.keys() {
        tpl.add_partition_offset(topic, *p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut out: BTreeMap<i32, Vec<Rec>> = ends.keys().map(|p| (*p, Vec::new())).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let done =
        |out: &BTreeMap<i32, Vec<Rec>>| ends.iter().all(|(p, end)| out[p].len() as i64 >= *end);
    while !done(&out) && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            let part = out.get_mut(&m.partition()).unwrap();
            assert_eq!(
                m.offset(),
                part.len() as i64,
                "{topic}: offsets without gaps"
            );
            part.push(rec_of(&m));
        }
    }
    out
}

fn rec_of(m: &rdkafka::message::BorrowedMessage<'_>) -> Rec {
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    Rec {
        key: text(m.key()),
        value: text(m.payload()),
        timestamp: m.timestamp().to_millis().unwrap_or(-1),
    }
}

/// What a consumer of `group` subscribed to `topic` gets first from each partition, with its
/// offset.
fn resume(bootstrap: &str, group: &str, topic: &str) -> BTreeMap<i32, (i64, Rec)> {
    let consumer = consumer_of(bootstrap, Some(group));
    consumer.subscribe(&[topic]).unwrap();
    let mut first = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (0..PARTITIONS as i32).any(|p| !first.contains_key(&p)) {
        assert!(
            Instant::now() < deadline,
            "{group} on {topic}: first records {first:?}"
        );
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            first
                .entry(m.partition())
                .or_insert_with(|| (m.offset(), rec_of(&m)));
        }
    }
    first
}

/// A one-broker Apache Kafka cluster of `tests/kafka/kafka.sh`, stopped when dropped.
struct KafkaPeer {
    dir: tempfile::TempDir,
    bootstrap: String,
}

impl KafkaPeer {
    fn start() -> KafkaPeer {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(script("kafka/kafka.sh"))
            .arg("start")
            .arg(dir.path().join("cluster"))
            .args(["--brokers", "1"])
            .env_remove("LD_LIBRARY_PATH")
            .stderr(Stdio::inherit())
            .output()
            .expect("kafka.sh start");
        let peer = KafkaPeer {
            bootstrap: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            dir,
        };
        assert!(out.status.success(), "kafka.sh start: {}", out.status);
        peer
    }
}

impl Drop for KafkaPeer {
    fn drop(&mut self) {
        let _ = Command::new(script("kafka/kafka.sh"))
            .arg("stop")
            .arg(self.dir.path().join("cluster"))
            .env_remove("LD_LIBRARY_PATH")
            .stdout(Stdio::null())
            .status();
    }
}

/// MirrorMaker 2 (`tests/mirror/mm2.sh run`), its output in a log file; killed when dropped.
struct MirrorMaker {
    child: Child,
    log: PathBuf,
}

impl MirrorMaker {
    fn start(props: &Path, log: &Path) -> MirrorMaker {
        let out = File::create(log).unwrap();
        let child = Command::new(script("mirror/mm2.sh"))
            .arg("run")
            .arg(props)
            .env_remove("LD_LIBRARY_PATH")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("mm2.sh run");
        MirrorMaker {
            child,
            log: log.to_path_buf(),
        }
    }

    /// Polls `pending` (what is not done yet, one line each) until it is empty; fails the test
    /// with the last answer and MirrorMaker's log if that takes [`MIRROR_TIMEOUT`] or
    /// MirrorMaker exits.
    fn wait(&mut self, what: &str, mut pending: impl FnMut() -> Vec<String>) {
        let start = Instant::now();
        let mut said = Duration::ZERO;
        loop {
            let left = pending();
            if left.is_empty() {
                return;
            }
            if start.elapsed() >= said + Duration::from_secs(5) {
                said = start.elapsed();
                eprintln!(
                    "{:.0}s, waiting to {what}: {}",
                    said.as_secs_f64(),
                    left.join("; ")
                );
            }
            if start.elapsed() > MIRROR_TIMEOUT || !self.running() {
                panic!(
                    "MirrorMaker did not {what} within {MIRROR_TIMEOUT:?} (it {}):\n{}\n{}",
                    if self.running() { "runs" } else { "exited" },
                    left.join("\n"),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines of its log, stack frames left out.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("at "))
            .collect();
        let from = lines.len().saturating_sub(60);
        format!(
            "MirrorMaker's log ({}):\n{}",
            self.log.display(),
            lines[from..].join("\n")
        )
    }

    /// Stops it: SIGKILL, for the test has what it came for and nothing of MirrorMaker's
    /// shutdown is checked.
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for MirrorMaker {
    fn drop(&mut self) {
        self.stop();
    }
}
