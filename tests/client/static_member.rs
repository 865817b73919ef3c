//! KIP-848 static membership, lograil beside Kafka 4.4: a librdkafka member with a
//! `group.instance.id` that closes leaves with epoch -2, and its partitions wait for it; the
//! other member keeps its own and gets none of them, and the member back under the same
//! instance id (a new member id) has its partitions again.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig as RdConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use test_support::cluster::{unique, TestCluster};

fn member(bootstrap: &str, group: &str, instance: &str, topic: &str) -> BaseConsumer {
    let consumer: BaseConsumer = RdConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("group.protocol", "consumer")
        .set("group.instance.id", instance)
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    consumer
}

/// The partitions `consumer` is assigned.
fn assigned(consumer: &BaseConsumer) -> BTreeSet<i32> {
    consumer
        .assignment()
        .unwrap()
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect()
}

/// Polls `consumers` until `done` holds of their assignments, or panics after 60 s.
fn poll_until(consumers: &[&BaseConsumer], what: &str, done: impl Fn(&[BTreeSet<i32>]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for c in consumers {
            let _ = c.poll(Duration::from_millis(50));
        }
        let now: Vec<BTreeSet<i32>> = consumers.iter().map(|c| assigned(c)).collect();
        if done(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "{what} in 60 s: {now:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_that_closes_gets_its_partitions_back_when_it_returns() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("static-848", 4).await;
    let group = unique("static-848");
    let bootstrap = cluster.plain_bootstrap().to_string();
    let a = member(&bootstrap, &group, "instance-a", &topic);
    let b = member(&bootstrap, &group, "instance-b", &topic);
    poll_until(&[&a, &b], "two partitions each", |s| {
        s[0].len() == 2 && s[1].len() == 2
    });
    let a_had = assigned(&a);
    let b_had = assigned(&b);
    drop(a);
    // Well within the session timeout (45 s on both brokers): b's assignment stays as it was.
    let waited = Instant::now() + Duration::from_secs(8);
    while Instant::now() < waited {
        let _ = b.poll(Duration::from_millis(100));
        assert_eq!(
            assigned(&b),
            b_had,
            "b took a partition of the absent member"
        );
    }
    let back = member(&bootstrap, &group, "instance-a", &topic);
    poll_until(&[&back, &b], "a back with its partitions", |s| {
        s[0] == a_had && s[1] == b_had
    });
}
