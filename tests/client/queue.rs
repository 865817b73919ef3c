//! The queue consumer (share groups, KIP-932): work shared between consumers with each record
//! completed once, explicit acknowledgements (accept, release with a delay, reject), lock
//! renewal, records given back when a consumer goes away without closing, and the idempotency
//! ledger. On Kafka the release delay is not honoured (Kafka releases at once) and locks are at
//! least Kafka's minimum of 15 s.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use consumer::{Delivery, IdempotencyLedger, ProducerRecord, QueueConsumer};

use test_support::cluster::{unique, TestCluster};

/// A topic with `values` produced to it (round robin over its partitions) and a share group
/// reading it from the start, with `configs` on the group.
async fn setup(
    cluster: &TestCluster,
    partitions: i32,
    values: &[String],
    configs: &[(&str, &str)],
) -> (String, String) {
    let topic = cluster.create_topic("queue", partitions).await;
    let group = unique("workers");
    let mut all = vec![("share.auto.offset.reset", "earliest")];
    all.extend_from_slice(configs);
    cluster
        .admin()
        .await
        .alter_group_configs(&group, &all)
        .await
        .unwrap();
    let producer = cluster.producer(&[("linger.ms", "5")]).await;
    let mut deliveries = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let partition = i32::try_from(i).unwrap() % partitions;
        let record = ProducerRecord::new(topic.as_str())
            .partition(partition)
            .value(value.clone())
            .header("idempotency-key", format!("job-{value}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    for d in deliveries {
        d.await.unwrap();
    }
    producer.close().await;
    (topic, group)
}

async fn queue(
    cluster: &TestCluster,
    group: &str,
    topic: &str,
    props: &[(&str, &str)],
) -> QueueConsumer {
    let mut config = cluster.config().with("group.id", group);
    for (k, v) in props {
        config.set(*k, *v);
    }
    let queue = QueueConsumer::from_config(&config).await.unwrap();
    queue.subscribe(&[topic]);
    queue
}

fn value(d: &Delivery) -> String {
    String::from_utf8(d.value.clone().unwrap().to_vec()).unwrap()
}

/// Receives until `want` records came (or 60 s passed); the deliveries in order.
async fn receive_n(queue: &QueueConsumer, want: usize) -> Vec<Delivery> {
    receive_within(queue, want, Duration::from_secs(60)).await
}

/// Up to `want` deliveries, receiving for at most `limit`.
async fn receive_within(queue: &QueueConsumer, want: usize, limit: Duration) -> Vec<Delivery> {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        got.extend(queue.receive(Duration::from_millis(500)).await.unwrap());
    }
    got
}

/// The group's lock duration for these tests (Kafka refuses less than 15 s): the steps timed
/// against it have at least 0.2 of it, 1.6 s, to spare on a loaded machine.
fn lock_ms(cluster: &TestCluster) -> u64 {
    if cluster.is_kafka() {
        15_000
    } else {
        8_000
    }
}

#[tokio::test]
async fn two_queue_consumers_share_the_work_and_each_record_completes_once() {
    let cluster = TestCluster::start();
    let values: Vec<String> = (0..300).map(|i| i.to_string()).collect();
    let (topic, group) = setup(&cluster, 2, &values, &[]).await;
    let props = [("max.poll.records", "10")];
    let a = queue(&cluster, &group, &topic, &props).await;
    let b = queue(&cluster, &group, &topic, &props).await;
    let mut seen: BTreeMap<String, Vec<(char, i16)>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while seen.len() < values.len() && Instant::now() < deadline {
        let (from_a, from_b) = tokio::join!(
            a.receive(Duration::from_millis(300)),
            b.receive(Duration::from_millis(300))
        );
        for (who, batch) in [('a', from_a.unwrap()), ('b', from_b.unwrap())] {
            for d in batch {
                // Each consumer works a while, so the other gets records meanwhile.
                seen.entry(value(&d))
                    .or_default()
                    .push((who, d.delivery_count()));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen.len(), values.len(), "every record delivered");
    let twice: Vec<_> = seen.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert!(
        seen.values().all(|v| v[0].1 == 1),
        "first deliveries count 1"
    );
    let by_a = seen.values().filter(|v| v[0].0 == 'a').count();
    assert!(
        by_a > 0 && by_a < values.len(),
        "both consumers got work ({by_a} of {} went to a)",
        values.len()
    );
    // Implicit mode: closing accepts the last batches; nothing is left for anyone.
    assert_eq!(a.close().await.unwrap(), vec![]);
    assert_eq!(b.close().await.unwrap(), vec![]);
    let c = queue(&cluster, &group, &topic, &[]).await;
    let left = c.receive(Duration::from_secs(8)).await.unwrap();
    assert!(
        left.is_empty(),
        "completed records came back: {:?}",
        left.iter().map(value).collect::<Vec<_>>()
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn explicit_acknowledgements_release_with_a_delay_reject_and_renew() {
    let cluster = TestCluster::start();
    let lock = lock_ms(&cluster);
    let values: Vec<String> = ["done", "later", "bad", "slow"].map(String::from).to_vec();
    let lock_config = lock.to_string();
    let (topic, group) = setup(
        &cluster,
        1,
        &values,
        &[("share.record.lock.duration.ms", lock_config.as_str())],
    )
    .await;
    let explicit = [("share.acknowledgement.mode", "explicit")];
    let q = queue(&cluster, &group, &topic, &explicit).await;
    // A second member, assigned early, that asks for records only when told to.
    let other = queue(&cluster, &group, &topic, &explicit).await;
    let got = receive_n(&q, 4).await;
    let by_value: BTreeMap<String, &Delivery> = got.iter().map(|d| (value(d), d)).collect();
    assert_eq!(by_value.len(), 4);
    assert!(got.iter().all(|d| d.delivery_count() == 1));
    let held_since = Instant::now();
    by_value["done"].ack();
    by_value["later"].release(Duration::from_millis(1500));
    by_value["bad"].reject();
    // Before the acknowledgements leave: the broker starts the delay after this.
    let released_at = Instant::now();
    assert_eq!(
        q.commit().await.unwrap(),
        vec![],
        "every acknowledgement taken"
    );
    assert_eq!(q.lock_timeout(), Duration::from_millis(lock));

    // "later" comes back with its second delivery; on lograil not before its delay.
    let again = receive_n(&q, 1).await;
    assert_eq!(again.iter().map(value).collect::<Vec<_>>(), vec!["later"]);
    assert_eq!(again[0].delivery_count(), 2);
    if !cluster.is_kafka() {
        assert!(
            released_at.elapsed() >= Duration::from_millis(1400),
            "released with a 1.5 s delay, back after {:?}",
            released_at.elapsed()
        );
    }
    again[0].ack();
    assert_eq!(q.commit().await.unwrap(), vec![]);

    // "slow" outlives its lock thanks to a renewal: nobody else gets it.
    let renew_at = Duration::from_millis(lock * 6 / 10);
    tokio::time::sleep(renew_at.saturating_sub(held_since.elapsed())).await;
    by_value["slow"].renew().await.unwrap();
    tokio::time::sleep(Duration::from_millis(lock * 6 / 10)).await;
    assert!(
        held_since.elapsed() > Duration::from_millis(lock),
        "past the first lock"
    );
    assert!(
        !other.assignment().is_empty(),
        "the other member is assigned"
    );
    // Within the renewed lock (renewed at 0.6, now 1.2, asking until 1.4 of a lock).
    let stolen = other
        .receive(Duration::from_millis(lock * 2 / 10))
        .await
        .unwrap();
    assert!(
        stolen.is_empty(),
        "a renewed record went to another consumer: {:?}",
        stolen.iter().map(value).collect::<Vec<_>>()
    );
    by_value["slow"].ack();
    assert_eq!(
        q.commit().await.unwrap(),
        vec![],
        "still this consumer's to accept"
    );
    // Rejected and accepted records never come back.
    let after = other.receive(Duration::from_secs(2)).await.unwrap();
    assert!(
        after.is_empty(),
        "{:?}",
        after.iter().map(value).collect::<Vec<_>>()
    );
    other.close().await.unwrap();
    q.close().await.unwrap();
}

#[tokio::test]
async fn a_consumer_dropped_without_closing_gives_its_records_back() {
    let cluster = TestCluster::start();
    let values: Vec<String> = (0..5).map(|i| i.to_string()).collect();
    // A lock of 60 s (Kafka's maximum by default) outlasts the 40 s this test waits for the
    // records to come back: only the closed connection can free them.
    let (topic, group) = setup(
        &cluster,
        1,
        &values,
        &[("share.record.lock.duration.ms", "60000")],
    )
    .await;
    let explicit = [("share.acknowledgement.mode", "explicit")];
    let crashed = queue(&cluster, &group, &topic, &explicit).await;
    assert_eq!(receive_n(&crashed, 5).await.len(), 5);
    drop(crashed);
    let next = queue(&cluster, &group, &topic, &explicit).await;
    let got = receive_within(&next, 5, Duration::from_secs(40)).await;
    assert_eq!(
        got.len(),
        5,
        "every record came back before its lock ran out"
    );
    assert!(got.iter().all(|d| d.delivery_count() == 2));
    for d in &got {
        d.ack();
    }
    assert_eq!(next.close().await.unwrap(), vec![]);
}

#[tokio::test]
async fn the_idempotency_ledger_skips_work_already_done_across_a_restart() {
    let cluster = TestCluster::start();
    let values: Vec<String> = (0..20).map(|i| i.to_string()).collect();
    let (topic, group) = setup(&cluster, 1, &values, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let ledger_path = dir.path().join("ledger");
    let ttl = Duration::from_secs(3600);
    let key_of = |d: &Delivery| d.header("idempotency-key").map(<[u8]>::to_vec);
    let explicit = [("share.acknowledgement.mode", "explicit")];
    let mut effects: BTreeMap<String, u32> = BTreeMap::new();

    // The work is done and recorded, but the acknowledgements are lost (released here, as if
    // the worker died between its work and its acknowledgement).
    let q = queue(&cluster, &group, &topic, &explicit).await;
    let mut ledger = IdempotencyLedger::open(&ledger_path, ttl, 10_000).unwrap();
    for d in ledger.skip_done(receive_n(&q, 20).await, key_of) {
        *effects.entry(value(&d)).or_default() += 1;
        ledger.complete(&key_of(&d).unwrap()).unwrap();
        d.release(Duration::ZERO);
    }
    q.close().await.unwrap();
    drop(ledger);

    // A restarted worker gets them again; its ledger (reopened from the file) acknowledges
    // them without doing the work.
    let q = queue(&cluster, &group, &topic, &explicit).await;
    let ledger = IdempotencyLedger::open(&ledger_path, ttl, 10_000).unwrap();
    let again = receive_n(&q, 20).await;
    assert_eq!(again.len(), 20);
    assert!(again.iter().all(|d| d.delivery_count() == 2));
    let todo = ledger.skip_done(again, key_of);
    assert!(
        todo.is_empty(),
        "work done twice: {:?}",
        todo.iter().map(value).collect::<BTreeSet<_>>()
    );
    assert_eq!(q.commit().await.unwrap(), vec![]);
    let left = q.receive(Duration::from_secs(3)).await.unwrap();
    assert!(left.is_empty(), "the skipped records were acknowledged");
    q.close().await.unwrap();
    assert_eq!(effects.len(), 20);
    assert!(effects.values().all(|n| *n == 1), "{effects:?}");
}
