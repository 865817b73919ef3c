//! The chain's exactly-once mode: forwards and their source offsets commit in one transaction,
//! so a `read_committed` reader of the retry topic and the DLT sees each forward once, also
//! when the chain's task is killed mid-way and another instance takes over.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use consumer::{ConsumerRecord, TopicPartition};
use retry_topic::{headers, Delivery, HandlerError};

use crate::harness::{chain_config, produce_values, value_of, wait_for, Effects, Running};
use test_support::cluster::{unique, TestCluster};

#[derive(Debug, thiserror::Error)]
#[error("always fails")]
struct AlwaysFails;

/// Every committed record of `topic` (all partitions), read `read_committed` up to the last
/// stable offsets it has now.
async fn committed_records(cluster: &TestCluster, topic: &str) -> Vec<ConsumerRecord> {
    let partitions = cluster
        .admin()
        .await
        .describe_topic(topic)
        .await
        .unwrap()
        .partitions;
    let consumer = cluster
        .consumer(None, &[("isolation.level", "read_committed")])
        .await;
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    let ends = consumer.end_offsets(&tps).await.unwrap();
    consumer.assign(&tps).unwrap();
    consumer.seek_to_beginning(&tps).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let behind =
        |c: &consumer::Consumer| tps.iter().any(|tp| c.position(tp).unwrap_or(0) < ends[tp]);
    while behind(&consumer) {
        match tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await {
            Ok(r) => out.push(r.unwrap()),
            Err(_) => assert!(
                Instant::now() < deadline,
                "{topic} not read to its stable end {ends:?} in 60 s"
            ),
        }
    }
    consumer.close().await;
    out
}

/// Records per value.
fn by_value(records: &[ConsumerRecord]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in records {
        *out.entry(value_of(r)).or_default() += 1;
    }
    out
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// `fail-*` records always fail; the others are processed (counted in `effects`).
fn handler(effects: Effects) -> impl retry_topic::Handler {
    move |d: Delivery| {
        let effects = effects.clone();
        async move {
            let v = value_of(&d.record);
            if v.starts_with("fail-") {
                return Err(HandlerError::from(AlwaysFails));
            }
            effects.add(&v);
            Ok::<(), HandlerError>(())
        }
    }
}

fn eos_config(cluster: &TestCluster, topic: &str, group: &str) -> retry_topic::RetryConfig {
    chain_config(cluster, topic, group)
        .delays([Duration::from_millis(200)])
        .max_attempts(3)
        .outage(None)
        .exactly_once(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_dead_letters_each_failure_once_with_its_history() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("eos", 1).await;
    let group = unique("eos-g");
    let ok = values("ok", 10);
    let fail = values("fail", 5);
    let mut all: Vec<&str> = Vec::new();
    for i in 0..10 {
        all.push(&ok[i]);
        if i % 2 == 0 {
            all.push(&fail[i / 2]);
        }
    }
    produce_values(&cluster, &topic, &all).await;
    let effects = Effects::default();
    let running = Running::start(
        &cluster,
        eos_config(&cluster, &topic, &group),
        handler(effects.clone()),
    )
    .await;
    let dlt = format!("{topic}-dlt");
    let c = &cluster;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if committed_records(c, &dlt).await.len() >= fail.len() && effects.len() == ok.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all dead-lettered in 90 s: {:?}",
            effects.get()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    running.stop().await;
    // Successes: processed once each.
    let got = effects.get();
    assert_eq!(got.len(), ok.len());
    assert!(got.values().all(|n| *n == 1), "{got:?}");
    // Failures: in the DLT once each, with their whole history; twice in the retry topic.
    let dead = committed_records(&cluster, &dlt).await;
    let expected: BTreeMap<String, usize> = fail.iter().map(|v| (v.clone(), 1)).collect();
    assert_eq!(by_value(&dead), expected);
    for r in &dead {
        let history = headers::history(r).unwrap();
        assert_eq!(history.len(), 3, "three attempts recorded: {history:?}");
        assert_eq!(headers::attempts(r).unwrap(), 4);
    }
    let retried = committed_records(&cluster, &format!("{topic}-retry")).await;
    let twice: BTreeMap<String, usize> = fail.iter().map(|v| (v.clone(), 2)).collect();
    assert_eq!(by_value(&retried), twice);
    // The main topic's offset commits were the transactions': everything is committed.
    let committed = cluster
        .admin()
        .await
        .committed_offsets(&group)
        .await
        .unwrap();
    assert_eq!(
        committed.get(&(topic.clone(), 0)),
        Some(&(all.len() as i64))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_survives_killed_chains_without_duplicate_forwards() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("eos-kill", 2).await;
    let group = unique("eos-kill-g");
    // One instance id, as a restarted pod keeps its name: the successor's init aborts the
    // transaction the killed one left open.
    let id = unique("eos-kill-txn");
    let ok = values("ok", 30);
    let fail = values("fail", 12);
    let mut all: Vec<&str> = ok.iter().map(String::as_str).collect();
    all.extend(fail.iter().map(String::as_str));
    // Interleaved over both partitions.
    let mut sent = 0;
    for (i, v) in all.iter().enumerate() {
        let p = (i % 2) as i32;
        crate::harness::produce(&cluster, &topic, p, &[(None, v, Vec::new())]).await;
        sent += 1;
    }
    assert_eq!(sent, all.len());
    let effects = Effects::default();
    let dlt = format!("{topic}-dlt");
    let config = || eos_config(&cluster, &topic, &group).transactional_id(id.clone());
    // Two chains killed part-way (their task aborted wherever it is: between a forward and
    // its commit, inside a transaction, in the handler), then one that finishes. The kill
    // points count the dead letters of every chain so far: dead letters come in bursts (the
    // retry topic's records fall due together), so one chain may take more than its share.
    let mut dead_before = 0;
    for kill_after in [2usize, 6] {
        let running = Running::start(&cluster, config(), handler(effects.clone())).await;
        let e = running.events.clone();
        let dead_here = move || {
            e.lock()
                .unwrap()
                .iter()
                .filter(|ev| matches!(ev, retry_topic::Event::DeadLettered { .. }))
                .count()
        };
        wait_for(
            &format!("{kill_after} dead letters before the kill"),
            90,
            || dead_before + dead_here() >= kill_after,
        )
        .await;
        drop(running);
        dead_before += dead_here();
    }
    let running = Running::start(&cluster, config(), handler(effects.clone())).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let dead = committed_records(&cluster, &dlt).await;
        if dead.len() >= fail.len() && effects.len() == ok.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not done in 120 s: {} dead letters, {} processed",
            dead.len(),
            effects.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // A little longer, for any duplicate to show.
    tokio::time::sleep(Duration::from_secs(1)).await;
    running.stop().await;
    let dead = committed_records(&cluster, &dlt).await;
    let once: BTreeMap<String, usize> = fail.iter().map(|v| (v.clone(), 1)).collect();
    assert_eq!(by_value(&dead), once, "each failure dead-lettered once");
    let retried = committed_records(&cluster, &format!("{topic}-retry")).await;
    let twice: BTreeMap<String, usize> = fail.iter().map(|v| (v.clone(), 2)).collect();
    assert_eq!(
        by_value(&retried),
        twice,
        "each failure retried twice, no duplicate"
    );
    for r in &dead {
        assert_eq!(headers::history(r).unwrap().len(), 3);
    }
    // Successes: each processed (a success not yet committed at a kill is processed again:
    // the handler's effects are at least once).
    assert_eq!(effects.len(), ok.len());
}
