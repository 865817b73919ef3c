//! Head-of-line relief, measured: records stream into one partition at a steady rate; the
//! processing latency (send to handler) of the healthy records is compared between a
//! retrying consumer without a poison record, the same with a poison record at the head, and
//! a plain consumer that retries the poison record in place (3 attempts, 1 s apart).
//!
//! The figures are printed (BENCHMARKS.md quotes them); the test checks that every healthy
//! record was processed exactly once in each run, and that the poison record held back the
//! healthy ones far less than in place retries do (a bound loose enough for a noisy machine;
//! the 1.2x target is read from the printed medians, not asserted).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use consumer::{Producer, ProducerRecord};
use retry_topic::{Delivery, HandlerError};

use crate::harness::{chain_config, value_of, wait_for, Running};
use test_support::cluster::{unique, TestCluster};

const RECORDS: usize = 2000;
const RATE: u64 = 500;

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Sends `RECORDS` records `<seq>:<send time µs>` (the first `poison` if asked) at `RATE`/s.
async fn stream(cluster: &TestCluster, topic: &str, poison: bool) {
    let producer = Producer::from_config(&cluster.config().with("linger.ms", "0"))
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    let mut deliveries = Vec::new();
    for i in 0..RECORDS {
        tokio::time::sleep_until(start + Duration::from_micros(i as u64 * 1_000_000 / RATE)).await;
        let value = if poison && i == 0 {
            "poison".to_string()
        } else {
            format!("{i}:{}", now_us())
        };
        deliveries.push(
            producer
                .send(ProducerRecord::new(topic).value(value).partition(0))
                .await
                .unwrap(),
        );
    }
    for d in deliveries {
        d.await.unwrap();
    }
    producer.close().await;
}

/// Latency in µs of a healthy record value, or `None` for the poison record.
fn latency(value: &str) -> Option<(usize, i64)> {
    let (seq, sent) = value.split_once(':')?;
    Some((seq.parse().ok()?, now_us() - sent.parse::<i64>().ok()?))
}

/// Waits until `group` is stable with partition 0 of `topic` assigned, so the clock starts after
/// the first rebalance (Kafka delays a new group's by `group.initial.rebalance.delay.ms`).
async fn assigned(cluster: &TestCluster, group: &str, topic: &str) {
    let mut admin = cluster.admin().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(g) = admin.describe_group(group).await {
            let has = g.members.iter().any(|m| {
                m.assignment
                    .iter()
                    .any(|(t, ps)| t == topic && ps.contains(&0))
            });
            if g.state == "Stable" && has {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{group} not assigned {topic} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// p50, p99, max in ms; checks each healthy record was seen once.
fn summary(name: &str, seen: &[(usize, i64)], poison: bool) -> (f64, f64, f64) {
    let mut seqs: Vec<usize> = seen.iter().map(|s| s.0).collect();
    seqs.sort_unstable();
    let expected: Vec<usize> = (usize::from(poison)..RECORDS).collect();
    assert_eq!(seqs, expected, "{name}: every healthy record exactly once");
    let mut l: Vec<i64> = seen.iter().map(|s| s.1).collect();
    l.sort_unstable();
    let s = (
        percentile(&l, 0.5),
        percentile(&l, 0.99),
        percentile(&l, 1.0),
    );
    eprintln!(
        "HOL {name:<40} p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
        s.0, s.1, s.2
    );
    s
}

#[derive(Debug, thiserror::Error)]
#[error("poison")]
struct Poison;

async fn retrying_run(cluster: &TestCluster, poison: bool) -> (f64, f64, f64) {
    let topic = cluster.create_topic("hol", 1).await;
    let group = unique("hol-g");
    let config = chain_config(cluster, &topic, &group)
        .delays([Duration::from_secs(1)])
        .max_attempts(3);
    let seen: Arc<Mutex<Vec<(usize, i64)>>> = Arc::default();
    let s = seen.clone();
    let handler = move |d: Delivery| {
        let s = s.clone();
        async move {
            let value = value_of(&d.record);
            match latency(&value) {
                Some(l) => {
                    s.lock().unwrap().push(l);
                    Ok(())
                }
                None => Err(HandlerError::from(Poison)),
            }
        }
    };
    let running = Running::start(cluster, config, handler).await;
    assigned(cluster, &group, &topic).await;
    stream(cluster, &topic, poison).await;
    let want = RECORDS - usize::from(poison);
    wait_for("every healthy record", 60, || {
        seen.lock().unwrap().len() >= want
    })
    .await;
    running.stop().await;
    let seen = seen.lock().unwrap().clone();
    let name = if poison {
        "retrying consumer, poison at head"
    } else {
        "retrying consumer, no poison"
    };
    summary(name, &seen, poison)
}

/// A plain group consumer that retries a failing record in place: 3 attempts, 1 s apart.
async fn plain_run(cluster: &TestCluster) -> (f64, f64, f64) {
    let topic = cluster.create_topic("hol-plain", 1).await;
    let group = unique("hol-plain-g");
    let consumer = cluster
        .consumer(Some(&group), &[("enable.auto.commit", "true")])
        .await;
    consumer.subscribe(&[topic.as_str()]).unwrap();
    let mut seen = Vec::new();
    let producer = async {
        assigned(cluster, &group, &topic).await;
        stream(cluster, &topic, true).await;
    };
    let consume = async {
        while seen.len() < RECORDS - 1 {
            let record = consumer.recv().await.unwrap();
            let value = value_of(&record);
            match latency(&value) {
                Some(l) => seen.push(l),
                None => {
                    for _attempt in 1..3 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }
    };
    tokio::join!(producer, consume);
    consumer.close().await;
    summary("plain consumer, poison retried in place", &seen, true)
}

/// Runs of each kind, interleaved; medians are reported (the machine is shared and noisy).
const ROUNDS: usize = 3;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_at_the_head_does_not_hold_back_the_partition() {
    let cluster = TestCluster::start();
    let (mut clean, mut poisoned, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let c = retrying_run(&cluster, false).await.1;
        let p = retrying_run(&cluster, true).await.1;
        clean.push(c);
        poisoned.push(p);
        ratios.push(p / c);
    }
    let plain = plain_run(&cluster).await;
    let (clean, poisoned) = (median(clean), median(poisoned));
    eprintln!(
        "HOL medians of {ROUNDS} rounds ({RECORDS} records at {RATE}/s): p99 no poison {clean:.2} ms, \
         poison at head {poisoned:.2} ms (ratio of medians {:.2}x, median of per-round ratios \
         {:.2}x); plain consumer p99 {:.2} ms ({:.0}x)",
        poisoned / clean,
        median(ratios),
        plain.1,
        plain.1 / clean
    );
    assert!(
        poisoned < plain.1 / 2.0,
        "the poison record held the partition back: p99 {poisoned:.2} ms against {:.2} ms retried in place",
        plain.1
    );
}
