//! Transactions with Apache Kafka's own 4.4 clients: the Java client's transactional producer
//! (commit, abort, `sendOffsetsToTransaction`, a fenced zombie) read back read_committed and
//! read_uncommitted by the Java consumer and by librdkafka, and a Kafka Streams word count with
//! `exactly_once_v2` killed (SIGKILL) mid-run and restarted: exact, every count once.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use consumer::{ProducerRecord, TopicPartition};
use rdkafka::config::ClientConfig as RdConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use test_support::cluster::{unique, TestCluster};

use crate::java::{classpath, JavaApp, TURN};

/// A librdkafka consumer of `topic`'s `partitions` from the beginning at `isolation.level`.
pub(crate) fn rd_consumer(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
) -> BaseConsumer {
    let consumer: BaseConsumer = RdConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("rd-read"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "50")
        .set("isolation.level", isolation)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    consumer
}

/// Records of each partition of `topic` (`partitions` of them), key and value, read by
/// librdkafka at `isolation.level` from the beginning to the end it reports (the last stable
/// offset under read_committed).
pub(crate) fn rd_read(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
) -> BTreeMap<i32, Vec<(String, String)>> {
    let consumer = rd_consumer(bootstrap, topic, partitions, isolation);
    let mut out: BTreeMap<i32, Vec<(String, String)>> = BTreeMap::new();
    let mut at_end = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while at_end.len() < partitions as usize {
        assert!(
            Instant::now() < deadline,
            "librdkafka ({isolation}) read {topic} to its end in 60 s: at the end of {at_end:?}"
        );
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("librdkafka ({isolation}) reading {topic}: {e}"),
            Some(Ok(m)) => {
                let text = |b: Option<&[u8]>| String::from_utf8(b.unwrap().to_vec()).unwrap();
                out.entry(m.partition())
                    .or_default()
                    .push((text(m.key()), text(m.payload())));
            }
        }
    }
    out
}

fn sorted(mut values: Vec<String>) -> Vec<String> {
    values.sort();
    values
}

/// Runs `lograil.ecosystem.<class>` with `args` (`--name value` pairs).
pub(crate) fn start(
    name: &str,
    classpath: &str,
    class: &str,
    args: &[(&str, String)],
    logs: &Path,
) -> JavaApp {
    let args: Vec<String> = args
        .iter()
        .flat_map(|(k, v)| [format!("--{k}"), v.clone()])
        .collect();
    JavaApp::start(
        name,
        classpath,
        &format!("lograil.ecosystem.{class}"),
        &args,
        logs,
    )
}

/// The Java client's transactions (`Transactions.java`): a producer commits, aborts and commits
/// again; a consume-transform-produce loop (read_committed consumer, transactional producer,
/// `sendOffsetsToTransaction`) with one transaction aborted and redone; a zombie producer
/// fenced by a second `initTransactions` of its transactional.id. Read back by the Java
/// consumer and by librdkafka: read_committed sees exactly the committed records (each input
/// record transformed once), read_uncommitted the aborted ones too; the group's committed
/// offsets are the input's end. The Java client runs transaction version 2 (the epoch bumped
/// at each transaction's end, partitions and the group added by Produce v12 and
/// TxnOffsetCommit v5) as the broker's finalized features tell it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_transactions_commit_abort_send_offsets_and_fence_a_zombie() {
    const INPUT: usize = 100;
    let Some(classpath) = classpath() else { return };
    let _turn = TURN.lock().await;
    let cluster = TestCluster::start();
    let input = cluster.create_topic("txn-in", 2).await;
    let output = cluster.create_topic("txn-out", 2).await;
    cluster
        .produce(
            &[],
            (0..INPUT).map(|i| {
                ProducerRecord::new(input.as_str())
                    .key(format!("k{i}"))
                    .value(format!("in-{i}"))
            }),
        )
        .await;
    let group = unique("txn-ctp");
    let dir = tempfile::tempdir().unwrap();
    let mut app = start(
        "transactions",
        &classpath,
        "Transactions",
        &[
            ("bootstrap", cluster.plain_bootstrap().to_string()),
            ("input", input.clone()),
            ("input-records", INPUT.to_string()),
            ("output", output.clone()),
            ("group", group.clone()),
            ("txn-prefix", unique("txn")),
        ],
        dir.path(),
    );
    app.wait("DONE", 180, |l| {
        l.iter().any(|l| l == "DONE" || l.starts_with("ERROR"))
    })
    .await;
    let lines = app.lines();
    if !lines.iter().any(|l| l == "DONE") {
        app.fail("an error");
    }
    let field = |prefix: &str| -> String {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| app.fail(&format!("no {prefix:?} line")))
            .to_string()
    };
    assert_eq!(
        field("FENCED "),
        "ProducerFencedException",
        "{}",
        app.output()
    );
    // Transaction version 2 on both brokers: each of the three transactions' end bumped the
    // epoch (version 1 would leave it at 0).
    let epoch: i16 = field("EPOCH ").parse().unwrap();
    assert!(
        epoch >= 3,
        "epoch {epoch} after three transactions\n{}",
        app.output()
    );
    let redone: usize = field("CTP-ABORTED ").parse().unwrap();
    let transactions: usize = field("CTP-DONE ").parse().unwrap();
    assert!(redone > 0 && transactions >= 2, "{}", app.output());
    let read = |level: &str| -> Vec<String> {
        let line = field(&format!("READ {level} "));
        let (count, values) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let values: Vec<String> = values
            .split(',')
            .filter(|v| !v.is_empty())
            .map(String::from)
            .collect();
        assert_eq!(count.parse::<usize>().unwrap(), values.len());
        values
    };
    let (java_committed, java_uncommitted) = (read("read_committed"), read("read_uncommitted"));

    // What each must be: the committed transactions' records, each input record transformed
    // once; read_uncommitted adds the aborted ones (the aborted transaction of the loop wrote
    // `redone` records that were written again).
    let committed: Vec<String> = (0..5)
        .map(|i| format!("committed-1-{i}"))
        .chain((0..5).map(|i| format!("committed-2-{i}")))
        .chain((0..INPUT).map(|i| format!("ctp-in-{i}")))
        .chain(["fresh-0".to_string()])
        .collect();
    assert_eq!(
        sorted(java_committed.clone()),
        sorted(committed.clone()),
        "Java, read_committed"
    );
    let ctp = |values: &[String]| values.iter().filter(|v| v.starts_with("ctp-")).count();
    let not_ctp = |values: &[String]| -> Vec<String> {
        sorted(
            values
                .iter()
                .filter(|v| !v.starts_with("ctp-"))
                .cloned()
                .collect(),
        )
    };
    let aborted: Vec<String> = (0..5)
        .map(|i| format!("aborted-{i}"))
        .chain(["zombie-0".to_string()])
        .collect();
    assert_eq!(
        not_ctp(&java_uncommitted),
        sorted(not_ctp(&committed).into_iter().chain(aborted).collect()),
        "Java, read_uncommitted"
    );
    assert_eq!(
        ctp(&java_uncommitted),
        INPUT + redone,
        "Java, read_uncommitted"
    );
    for v in &committed {
        assert!(java_uncommitted.contains(v), "read_uncommitted has {v}");
    }

    // librdkafka reads the same, in the same order per partition (the Java lines are the
    // partitions' records one partition after the other).
    for (level, java) in [
        ("read_committed", &java_committed),
        ("read_uncommitted", &java_uncommitted),
    ] {
        let rd: Vec<String> = rd_read(cluster.plain_bootstrap(), &output, 2, level)
            .into_values()
            .flatten()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(&rd, java, "librdkafka against the Java consumer, {level}");
    }

    // The loop's offsets went in with its transactions: the group has read the whole input.
    let probe = cluster.consumer(None, &[]).await;
    let partitions: Vec<TopicPartition> = (0..2)
        .map(|p| TopicPartition::new(input.as_str(), p))
        .collect();
    let ends = probe.end_offsets(&partitions).await.unwrap();
    probe.close().await;
    let got = cluster
        .admin()
        .await
        .committed_offsets(&group)
        .await
        .unwrap();
    let want: BTreeMap<(String, i32), i64> = ends
        .iter()
        .map(|(tp, end)| ((tp.topic.to_string(), tp.partition), *end))
        .collect();
    assert_eq!(got, want, "{group}'s committed offsets");
}

const VOCABULARY: [&str; 8] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
];
/// Input lines of the exactly-once test, produced in `STEPS` steps.
pub(crate) const EOS_LINES: usize = 400;
pub(crate) const STEPS: usize = 10;

/// Input line `i`: one to four words of the vocabulary.
pub(crate) fn eos_line(i: usize) -> String {
    let mut seed = (i as u64 + 7).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = || {
        seed ^= seed >> 31;
        seed = seed.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        seed ^= seed >> 29;
        seed
    };
    let words = 1 + next() % 4;
    (0..words)
        .map(|_| VOCABULARY[(next() % VOCABULARY.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// Word → how often it occurs in `lines`.
pub(crate) fn word_counts(lines: &[String]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for word in lines.iter().flat_map(|l| l.split(' ')) {
        *counts.entry(word.to_string()).or_default() += 1;
    }
    counts
}

/// Each word's counts as the output has them (read_committed by librdkafka), in offset order.
pub(crate) fn count_sequences(bootstrap: &str, topic: &str) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (word, count) in rd_read(bootstrap, topic, 2, "read_committed")
        .into_values()
        .flatten()
    {
        out.entry(word).or_default().push(count.parse().unwrap());
    }
    out
}

/// A Kafka Streams word count with `exactly_once_v2` and no record cache (every update is
/// written; `ExactlyOnceCounts.java`), killed with SIGKILL while it works through the input and
/// started again: read_committed, each word's counts in the output are 1, 2, … up to the exact
/// count, each once. An at-least-once application killed so counts records twice (its offsets
/// are committed every 30 s): with `--guarantee at_least_once` this test fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_exactly_once_counts_are_exact_after_a_kill() {
    let Some(classpath) = classpath() else { return };
    let _turn = TURN.lock().await;
    let cluster = TestCluster::start();
    let input = cluster.create_topic("eos-lines", 2).await;
    let words_out = cluster.create_topic("eos-words", 2).await;
    let app_id = unique("eos-counts");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let args = [
        ("bootstrap", cluster.plain_bootstrap().to_string()),
        ("app-id", app_id.clone()),
        ("input", input.clone()),
        ("words-out", words_out.clone()),
        ("state-dir", state.display().to_string()),
        ("replication", cluster.replication().to_string()),
        ("guarantee", "exactly_once_v2".to_string()),
        ("group-protocol", "classic".to_string()),
    ];
    let lines: Vec<String> = (0..EOS_LINES).map(eos_line).collect();
    let per_step = EOS_LINES / STEPS;
    let produce = |steps: std::ops::Range<usize>| {
        let range = steps.start * per_step..steps.end * per_step;
        lines[range.clone()]
            .iter()
            .zip(range)
            .map(|(text, i)| {
                ProducerRecord::new(input.as_str())
                    .key(format!("line-{i}"))
                    .value(text.clone())
            })
            .collect::<Vec<_>>()
    };
    let bootstrap = cluster.plain_bootstrap().to_string();

    let mut first = start("eos-1", &classpath, "ExactlyOnceCounts", &args, dir.path());
    first
        .wait("RUNNING", 90, |l| l.iter().any(|l| l == "STATE RUNNING"))
        .await;
    // Two librdkafka consumers following the output, polled in turn for what each has.
    let followers = ["read_uncommitted", "read_committed"]
        .map(|level| rd_consumer(&bootstrap, &words_out, 2, level));
    let mut seen = [0usize; 2];
    let follow = |seen: &mut [usize; 2]| {
        for (follower, seen) in followers.iter().zip(seen) {
            while let Some(m) = follower.poll(Duration::from_millis(10)) {
                if m.is_ok() {
                    *seen += 1;
                }
            }
        }
    };
    // Half the input, all of it counted and committed before the kill.
    for step in 0..STEPS / 2 {
        cluster.produce(&[], produce(step..step + 1)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let half: usize = word_counts(&lines[..STEPS / 2 * per_step])
        .values()
        .sum::<u64>() as usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen[1] < half {
        first.alive();
        follow(&mut seen);
        assert!(
            Instant::now() < deadline,
            "{} of {half} updates committed in 60 s:\n{}",
            seen[1],
            first.output()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Three more steps at once, and the kill while the application works through them: once
    // the output holds records past what is committed (an open transaction's).
    cluster
        .produce(&[], produce(STEPS / 2..STEPS / 2 + 3))
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen[0] <= seen[1] {
        first.alive();
        follow(&mut seen);
        assert!(
            Instant::now() < deadline,
            "no open transaction's records in the output in 60 s:\n{}",
            first.output()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let [uncommitted, committed] = seen;
    first.kill();
    eprintln!(
        "eos: killed with {committed} committed updates and {uncommitted} in the log, of {}",
        word_counts(&lines).values().sum::<u64>()
    );

    // The rest, and the application again (its state directory kept, as a restarted process
    // would find it).
    cluster.produce(&[], produce(STEPS / 2 + 3..STEPS)).await;
    let mut second = start("eos-2", &classpath, "ExactlyOnceCounts", &args, dir.path());
    let want = word_counts(&lines);
    let deadline = Instant::now() + Duration::from_secs(120);
    let got = loop {
        let got = count_sequences(&bootstrap, &words_out);
        let latest: BTreeMap<String, u64> = got
            .iter()
            .map(|(w, counts)| (w.clone(), *counts.last().unwrap()))
            .collect();
        if latest == want {
            break got;
        }
        // Past the input's counts is double counting: no need to wait longer.
        let over = latest
            .iter()
            .any(|(w, c)| want.get(w).is_none_or(|n| c > n));
        if over || Instant::now() > deadline {
            second.fail(&format!(
                "latest counts {latest:?}, want {want:?} (over: {over})"
            ));
        }
        second.alive();
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    second.stop().await;
    assert!(second.lines().iter().any(|l| l == "CLOSED"));
    for (word, counts) in &got {
        let expected: Vec<u64> = (1..=want[word]).collect();
        assert_eq!(counts, &expected, "{word}'s counts, read_committed");
    }
    // The output read whole after the stop: the same.
    assert_eq!(count_sequences(&bootstrap, &words_out), got);
    let uncommitted: usize = rd_read(&bootstrap, &words_out, 2, "read_uncommitted")
        .values()
        .map(Vec::len)
        .sum();
    eprintln!(
        "eos: {} committed updates, {uncommitted} read_uncommitted",
        got.values().map(Vec::len).sum::<usize>()
    );
}
