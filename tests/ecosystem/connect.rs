//! A Kafka Connect 4.4 distributed worker: a source and a sink connector of our own
//! (`NumberSource`, `LineSink`), 10,000 records through it, the worker killed mid-way and
//! started again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use consumer::TopicPartition;
use test_support::cluster::{read_all, unique, TestCluster};
use test_support::process::free_port;

use crate::java::{classpath, JavaApp, TURN};

const RECORDS: u64 = 10_000;
const PARTITIONS: i32 = 3;

/// One line of the sink's file: partition, offset, the record's number.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sunk {
    partition: i32,
    offset: i64,
    number: u64,
}

/// The sink's file: its lines in order, `None` for each `START` of its task. A line being
/// written is left out, and so is a line cut by the kill (the sink ends it before its next
/// `START`).
fn sunk(file: &Path, topic: &str) -> Vec<Option<Sunk>> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    let lines: Vec<&str> = complete.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if *line == "START" {
            out.push(None);
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let parsed = (f.len() == 4 && f[0] == topic)
            .then(|| {
                Some(Sunk {
                    partition: f[1].parse().ok()?,
                    offset: f[2].parse().ok()?,
                    number: f[3].strip_prefix("record-")?.parse().ok()?,
                })
            })
            .flatten();
        match parsed {
            Some(s) => out.push(Some(s)),
            None if lines.get(i + 1) == Some(&"START") => {}
            None => panic!("sink line {i}: {line:?}"),
        }
    }
    out
}

/// `record-<n>` → n.
fn number(value: &str) -> u64 {
    value
        .strip_prefix("record-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a record's value: {value:?}"))
}

fn distinct(lines: &[Option<Sunk>]) -> usize {
    let mut numbers: Vec<u64> = lines.iter().flatten().map(|s| s.number).collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers.len()
}

fn write_properties(path: &Path, props: &[(&str, String)]) {
    let text: String = props.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// A distributed worker (its config, offset and status topics created by the worker,
/// compacted) runs a source connector that writes 10,000 numbered records to 3 partitions
/// (~1,000 a second, its source offset the next number) and a sink connector that appends them
/// to a file. The worker is killed with SIGKILL once the sink has written a quarter of them, and
/// a new worker process of the same group is started without any connector config: it reads
/// the connectors from the config topic, the source resumes from its committed offset (not from
/// 0), the sink from its group's committed offsets. In the end the topic holds every number,
/// each in its partition, in order (the only repeats: those sent again after the committed
/// source offset), and the sink wrote every offset of every partition with its record, in
/// order per partition within each run of its task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_worker_restarted_mid_way_delivers_every_record() {
    let Some(classpath) = classpath() else { return };
    let _turn = TURN.lock().await;
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("connect-numbers", PARTITIONS).await;
    let group = unique("connect-cluster");
    // Sink connectors' groups are the cluster's, not the worker group's: a name of its own.
    let sink_name = unique("lines");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sink.txt");
    let replication = cluster.replication().to_string();

    let worker = dir.path().join("worker.properties");
    write_properties(
        &worker,
        &[
            ("bootstrap.servers", cluster.plain_bootstrap().to_string()),
            ("group.id", group.clone()),
            ("config.storage.topic", format!("{group}-configs")),
            ("offset.storage.topic", format!("{group}-offsets")),
            ("status.storage.topic", format!("{group}-status")),
            ("config.storage.replication.factor", replication.clone()),
            ("offset.storage.replication.factor", replication.clone()),
            ("status.storage.replication.factor", replication),
            (
                "key.converter",
                "org.apache.kafka.connect.storage.StringConverter".into(),
            ),
            (
                "value.converter",
                "org.apache.kafka.connect.storage.StringConverter".into(),
            ),
            // Source offsets and sink offsets committed twice a second.
            ("offset.flush.interval.ms", "500".into()),
            ("listeners", format!("http://127.0.0.1:{}", free_port())),
            // Our connectors have ServiceLoader manifests: no classpath scan at start.
            ("plugin.discovery", "service_load".into()),
            // A killed worker's connectors and tasks go to the new one as soon as the group
            // has noticed (not after the default 5 minutes' grace).
            ("scheduled.rebalance.max.delay.ms", "0".into()),
            ("session.timeout.ms", "6000".into()),
            ("heartbeat.interval.ms", "1000".into()),
            ("consumer.session.timeout.ms", "6000".into()),
            ("consumer.heartbeat.interval.ms", "500".into()),
        ],
    );
    let source = dir.path().join("source.properties");
    write_properties(
        &source,
        &[
            ("name", "numbers".into()),
            ("connector.class", "lograil.ecosystem.NumberSource".into()),
            ("tasks.max", "1".into()),
            ("topic", topic.clone()),
            ("count", RECORDS.to_string()),
            ("partitions", PARTITIONS.to_string()),
            ("batch", "50".into()),
            ("interval.ms", "50".into()),
        ],
    );
    let sink = dir.path().join("sink.properties");
    write_properties(
        &sink,
        &[
            ("name", sink_name.clone()),
            ("connector.class", "lograil.ecosystem.LineSink".into()),
            ("tasks.max", "1".into()),
            ("topics", topic.clone()),
            ("file", file.display().to_string()),
        ],
    );
    let arg = |p: &Path| p.display().to_string();

    let mut first = JavaApp::start(
        "connect-1",
        &classpath,
        "lograil.ecosystem.ConnectWorker",
        &[arg(&worker), arg(&source), arg(&sink)],
        dir.path(),
    );
    first
        .wait("both connectors submitted", 120, |l| {
            l.iter().any(|l| *l == format!("SUBMITTED {sink_name}"))
        })
        .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while distinct(&sunk(&file, &topic)) < RECORDS as usize / 4 {
        if Instant::now() > deadline {
            first.fail(&format!(
                "the sink wrote {} records in 120 s",
                distinct(&sunk(&file, &topic))
            ));
        }
        first.alive();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    first.kill();
    let at_kill = distinct(&sunk(&file, &topic));
    assert!(
        at_kill < RECORDS as usize,
        "killed mid-way: the sink had {at_kill} records"
    );
    assert!(
        first.lines().iter().any(|l| l == "SOURCE-START next=0"),
        "{}",
        first.output()
    );

    let mut second = JavaApp::start(
        "connect-2",
        &classpath,
        "lograil.ecosystem.ConnectWorker",
        &[arg(&worker)],
        dir.path(),
    );
    // Until the source has sent its last number to each partition and the sink has written
    // every offset the topic then has.
    let partitions: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    let probe = cluster.consumer(None, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let lines = sunk(&file, &topic);
        let numbers: BTreeSet<u64> = lines.iter().flatten().map(|s| s.number).collect();
        if (RECORDS - PARTITIONS as u64..RECORDS).all(|n| numbers.contains(&n)) {
            let ends = probe.end_offsets(&partitions).await.unwrap();
            let offsets: BTreeSet<(i32, i64)> = lines
                .iter()
                .flatten()
                .map(|s| (s.partition, s.offset))
                .collect();
            if ends
                .iter()
                .all(|(tp, end)| (0..*end).all(|o| offsets.contains(&(tp.partition, o))))
            {
                break;
            }
        }
        if Instant::now() > deadline {
            second.fail(&format!(
                "the sink wrote {} of {RECORDS} records in 180 s after the restart ({at_kill} before)",
                numbers.len()
            ));
        }
        second.alive();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    probe.close().await;
    // The workers' group as Kafka describes it: one member (the killed worker's session has
    // expired), Connect's protocol type and protocol; the sink's consumer group beside it.
    let mut admin = cluster.admin().await;
    let workers = admin.describe_group(&group).await.unwrap();
    assert_eq!(
        (
            workers.state.as_str(),
            workers.protocol_type.as_str(),
            workers.protocol.as_str()
        ),
        ("Stable", "connect", "sessioned"),
        "{workers:?}"
    );
    assert_eq!(workers.members.len(), 1, "{workers:?}");
    // A sink connector's consumer group is `connect-<connector name>`.
    let sinks = admin
        .describe_group(&format!("connect-{sink_name}"))
        .await
        .unwrap();
    assert_eq!(
        (
            sinks.state.as_str(),
            sinks.protocol_type.as_str(),
            sinks.members.len()
        ),
        ("Stable", "consumer", 1),
        "{sinks:?}"
    );
    // The source task went on from its committed offset.
    let resumed: Vec<u64> = second
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("SOURCE-START next=")?.parse().ok())
        .collect();
    let Some(&resumed_at) = resumed.first() else {
        second.fail("its source task did not start")
    };
    assert!(
        resumed_at > 0 && resumed_at < RECORDS,
        "resumed at {resumed_at}:\n{}",
        second.output()
    );
    second.stop().await;

    // The topic: every number once up to where the source resumed, at most twice after it;
    // each in its partition, first seen in order.
    let records = read_all(&cluster, &topic).await;
    let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
    let mut by_offset: BTreeMap<(i32, i64), u64> = BTreeMap::new();
    for (partition, list) in &records {
        let mut highest: Option<u64> = None;
        for r in list {
            let n = number(std::str::from_utf8(r.value.as_deref().unwrap()).unwrap());
            assert_eq!(
                n % PARTITIONS as u64,
                *partition as u64,
                "record-{n} in partition {partition}"
            );
            let count = seen.entry(n).or_default();
            *count += 1;
            if *count == 1 {
                assert!(
                    highest < Some(n),
                    "record-{n} after record-{highest:?} in partition {partition}"
                );
                highest = Some(n);
            }
            by_offset.insert((*partition, r.offset), n);
        }
    }
    assert_eq!(seen.len() as u64, RECORDS, "every number in the topic");
    assert_eq!(seen.keys().next_back(), Some(&(RECORDS - 1)));
    for (n, count) in &seen {
        let most = if *n < resumed_at { 1 } else { 2 };
        assert!(
            *count <= most,
            "record-{n} {count} times in the topic (resumed at {resumed_at})"
        );
    }

    // The sink: each line is the record at its offset; every offset of the topic is there; in
    // order per partition within each run of its task.
    let lines = sunk(&file, &topic);
    let starts = lines.iter().filter(|l| l.is_none()).count();
    assert!(starts >= 2, "the sink task started {starts} times");
    let mut written: BTreeMap<(i32, i64), u32> = BTreeMap::new();
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for line in &lines {
        let Some(s) = line else {
            last.clear();
            continue;
        };
        assert_eq!(
            by_offset.get(&(s.partition, s.offset)),
            Some(&s.number),
            "sink line {s:?} is the topic's record"
        );
        if let Some(before) = last.insert(s.partition, s.offset) {
            assert!(
                s.offset > before,
                "sink: partition {} offset {} after {before}",
                s.partition,
                s.offset
            );
        }
        *written.entry((s.partition, s.offset)).or_default() += 1;
    }
    let missing: Vec<&(i32, i64)> = by_offset
        .keys()
        .filter(|k| !written.contains_key(k))
        .collect();
    assert!(missing.is_empty(), "offsets not at the sink: {missing:?}");
    let ends = {
        let probe = cluster.consumer(None, &[]).await;
        let ends = probe.end_offsets(&partitions).await.unwrap();
        probe.close().await;
        ends
    };
    let total: i64 = ends.values().sum();
    assert_eq!(
        total as usize,
        by_offset.len(),
        "the topic read whole: {ends:?}"
    );
    eprintln!(
        "connect: {} records in the topic for {RECORDS} numbers, {} sink lines, the sink had {at_kill} at the kill, the source resumed at {resumed_at}",
        by_offset.len(),
        lines.iter().flatten().count()
    );
}
