//! `share.isolation.level` (KIP-932), lograil beside Kafka 4.4: over a partition holding a
//! committed transaction, an aborted one and one still open, a share group at Kafka's default
//! (read_uncommitted) gets every record up to the high watermark, the aborted and open ones
//! too; one at read_committed gets the committed records only, and the open transaction's
//! once it commits. No group ever gets a transaction marker.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use consumer::{Producer, ProducerRecord, QueueConsumer};
use test_support::cluster::{unique, TestCluster};

async fn send_all(producer: &Producer, topic: &str, values: &[&str]) {
    let mut deliveries = Vec::new();
    for v in values {
        let record = ProducerRecord::new(topic).partition(0).value(v.to_string());
        deliveries.push(producer.send(record).await.unwrap());
    }
    for d in deliveries {
        d.await.unwrap();
    }
}

/// A share group of `topic` from its start, at `isolation` (None: the default).
async fn group(cluster: &TestCluster, topic: &str, isolation: Option<&str>) -> QueueConsumer {
    let group = unique("isolation");
    let mut configs = vec![("share.auto.offset.reset", "earliest")];
    if let Some(level) = isolation {
        configs.push(("share.isolation.level", level));
    }
    let mut admin = cluster.admin().await;
    admin.alter_group_configs(&group, &configs).await.unwrap();
    let queue = QueueConsumer::from_config(&cluster.config().with("group.id", &group))
        .await
        .unwrap();
    queue.subscribe(&[topic]);
    queue
}

/// The values `queue` receives (each acknowledged) until it has `want` or 30 s passed, then
/// whatever more comes within a second.
async fn values(queue: &QueueConsumer, want: usize) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = BTreeSet::new();
    let mut quiet_until = None;
    loop {
        for d in queue.receive(Duration::from_millis(300)).await.unwrap() {
            got.insert(String::from_utf8(d.value.clone().unwrap().to_vec()).unwrap());
        }
        if got.len() >= want && quiet_until.is_none() {
            quiet_until = Some(Instant::now() + Duration::from_secs(1));
        }
        if quiet_until.is_some_and(|q| Instant::now() > q) || Instant::now() > deadline {
            return got;
        }
    }
}

fn set(values: &[&str]) -> BTreeSet<String> {
    values.iter().map(|v| v.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_isolation_level_decides_whether_aborted_and_open_records_are_delivered() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("share-isolation", 1).await;
    let producer = cluster
        .producer(&[
            ("transactional.id", &unique("share-iso")),
            ("linger.ms", "1"),
        ])
        .await;
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, &["committed-1", "committed-2"]).await;
    producer.commit_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, &["aborted-1"]).await;
    producer.abort_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    send_all(&producer, &topic, &["open-1"]).await;

    let uncommitted = group(&cluster, &topic, None).await;
    let all = set(&["committed-1", "committed-2", "aborted-1", "open-1"]);
    assert_eq!(
        values(&uncommitted, all.len()).await,
        all,
        "read_uncommitted"
    );
    let committed = group(&cluster, &topic, Some("read_committed")).await;
    assert_eq!(
        values(&committed, 2).await,
        set(&["committed-1", "committed-2"]),
        "read_committed, the transaction open"
    );
    producer.commit_transaction().await.unwrap();
    assert_eq!(
        values(&committed, 1).await,
        set(&["open-1"]),
        "once it commits"
    );
    for queue in [uncommitted, committed] {
        queue.close().await.unwrap();
    }
    producer.close().await;
}
