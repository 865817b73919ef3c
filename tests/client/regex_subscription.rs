//! KIP-848 subscriptions by regular expression (`subscribed_topic_regex`), lograil beside
//! Kafka 4.4: a librdkafka consumer with `group.protocol=consumer` subscribes to `^<base>-in-.*`
//! and reads the two matching topics, then a third created after it joined, never the topic
//! beside them that does not match.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use consumer::ProducerRecord;
use rdkafka::config::ClientConfig as RdConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;
use test_support::cluster::{unique, TestCluster};

/// Records read by `consumer` per topic until `want` of those matching `base` are in, or 60 s.
fn read(consumer: &BaseConsumer, base: &str, want: usize, seen: &mut BTreeMap<String, usize>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let matching = |seen: &BTreeMap<String, usize>| {
        seen.iter()
            .filter(|(t, _)| t.starts_with(&format!("{base}-in-")))
            .map(|(_, n)| n)
            .sum::<usize>()
    };
    while matching(seen) < want {
        assert!(Instant::now() < deadline, "read in 60 s: {seen:?}");
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            *seen.entry(m.topic().to_string()).or_default() += 1;
        }
    }
}

async fn produce(cluster: &TestCluster, topic: &str, n: usize) {
    cluster
        .produce(
            &[],
            (0..n).map(|i| ProducerRecord::new(topic).value(format!("v{i}"))),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kip_848_regex_subscription_takes_matching_topics_and_later_ones() {
    let cluster = TestCluster::start();
    let base = unique("regex");
    let one = cluster.create_topic(&format!("{base}-in-one"), 2).await;
    let two = cluster.create_topic(&format!("{base}-in-two"), 1).await;
    let other = cluster.create_topic(&format!("{base}-out"), 1).await;
    for topic in [&one, &two, &other] {
        produce(&cluster, topic, 5).await;
    }
    let consumer: BaseConsumer = RdConfig::new()
        .set("bootstrap.servers", cluster.plain_bootstrap())
        .set("group.id", unique("regex-group"))
        .set("group.protocol", "consumer")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[&format!("^{base}-in-.*")]).unwrap();
    let mut seen = BTreeMap::new();
    read(&consumer, &base, 10, &mut seen);
    assert_eq!(seen.get(&one), Some(&5), "{seen:?}");
    assert_eq!(seen.get(&two), Some(&5), "{seen:?}");
    // A topic created after the member joined comes into its subscription.
    let late = cluster.create_topic(&format!("{base}-in-late"), 1).await;
    produce(&cluster, &late, 5).await;
    read(&consumer, &base, 15, &mut seen);
    assert_eq!(seen.get(&late), Some(&5), "{seen:?}");
    assert_eq!(
        seen.get(&other),
        None,
        "a topic the regex does not match: {seen:?}"
    );
}
