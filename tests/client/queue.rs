//! The queue consumer (share groups, KIP-932): work shared between consumers with each record
//! completed once, explicit acknowledgements (accept, release with a delay, reject), lock
//! renewal, records given back when a consumer goes away without closing, and the idempotency
//! ledger. On Kafka the release delay is not honoured (Kafka releases at once) and locks are at
//! least Kafka's minimum of 15 s.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use consumer::{
    AdminError, ConsumerRecord, Delivery, ErrorCode, IdempotencyLedger, NewTopic, ProducerRecord,
    QueueConsumer,
};

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use test_support::cluster::{read_all, unique, TestCluster};

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

/// The dead letters one share group writes: `done` accepted, `bad` rejected, `flaky` released
/// until the group's delivery limit (2) archives it.
async fn work_through(cluster: &TestCluster, group: &str, topic: &str) {
    let q = queue(
        cluster,
        group,
        topic,
        &[("share.acknowledgement.mode", "explicit")],
    )
    .await;
    let (mut done, mut bad, mut flaky) = (false, false, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(done && bad && flaky == 2) && Instant::now() < deadline {
        for d in q.receive(Duration::from_millis(500)).await.unwrap() {
            match value(&d).as_str() {
                "done" => {
                    d.ack();
                    done = true;
                }
                "bad" => {
                    d.reject();
                    bad = true;
                }
                _ => {
                    d.release(Duration::ZERO);
                    flaky += 1;
                }
            }
        }
        assert_eq!(q.commit().await.unwrap(), vec![], "{group}: acknowledged");
    }
    assert!(
        done && bad && flaky == 2,
        "{group}: done {done}, bad {bad}, flaky {flaky}"
    );
    q.close().await.unwrap();
}

/// Every record of `topic` once at least `want` are there (or 30 s passed).
async fn read_at_least(cluster: &TestCluster, topic: &str, want: usize) -> Vec<ConsumerRecord> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let records: Vec<ConsumerRecord> = read_all(cluster, topic)
            .await
            .into_values()
            .flatten()
            .collect();
        if records.len() >= want || Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn header(record: &ConsumerRecord, name: &str) -> Option<String> {
    record
        .headers
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.as_deref())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// KIP-1191's share-group dead-letter queue as Kafka 4.4 ships it (share.version=2): the same
/// steps against lograil and against Kafka. A DLQ topic must have the topic config
/// `errors.deadletterqueue.group.enable=true` and a name with the broker's prefix (`dlq.`), and
/// must exist (the broker's auto-creation is off by default); otherwise records are archived
/// without a dead letter (both check when a record is dead-lettered, so the group config itself
/// takes any name). A dead letter has Kafka's context headers and, only with the group config
/// `errors.deadletterqueue.copy.record.enable=true`, the record's key and value, never its
/// headers. Beyond Kafka, lograil adds each delivery's history (`lograil.dlq.attempts`).
#[tokio::test]
async fn share_groups_dead_letter_as_kafka_4_4_ships_kip_1191() {
    let cluster = TestCluster::start();
    // Kafka gates dead letters behind the share.version=2 feature (ApiVersions' finalized
    // features; at share.version=1 records are archived without any); lograil always has them
    // and finalizes share.version=2.
    let first = cluster
        .plain_bootstrap()
        .split(',')
        .next()
        .unwrap()
        .to_string();
    let versions: ApiVersionsResponse = tokio::task::spawn_blocking(move || {
        // (Kafka answers a v3 request without a client name INVALID_REQUEST, featureless.)
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("lograil-tests"))
            .with_client_software_version(StrBytes::from_static_str("1"));
        test_support::wire::call(
            &mut test_support::wire::connect(&first),
            ApiKey::ApiVersions,
            3,
            &request,
        )
    })
    .await
    .unwrap();
    assert_eq!(versions.error_code, 0);
    let share_version = versions
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "share.version")
        .map(|f| f.max_version_level);
    assert!(
        share_version >= Some(2),
        "share.version {share_version:?} (Kafka: start it with --feature share.version=2)"
    );
    let enabled = [("errors.deadletterqueue.group.enable", "true")];
    let copy_dlq = cluster.create_topic_with("dlq.copy", 1, &enabled).await;
    let plain_dlq = cluster.create_topic_with("dlq.plain", 1, &enabled).await;
    let not_enabled = cluster.create_topic_with("dlq.off", 1, &[]).await;
    let unprefixed = cluster.create_topic_with("nodlq", 1, &enabled).await;
    let missing = unique("dlq.missing");

    // Both configs are booleans: anything but true or false is INVALID_CONFIG.
    let refused = cluster
        .admin()
        .await
        .create(&NewTopic {
            name: unique("dlq.bad"),
            partitions: 1,
            replication_factor: cluster.replication(),
            configs: [(
                "errors.deadletterqueue.group.enable".to_string(),
                "maybe".to_string(),
            )]
            .into_iter()
            .collect(),
        })
        .await
        .unwrap_err();
    match &refused {
        AdminError::Call(e) => assert_eq!(e.code(), Some(ErrorCode::InvalidConfig), "{e}"),
        other => panic!("{other}"),
    }
    let refused = cluster
        .admin()
        .await
        .alter_group_configs(
            &unique("workers"),
            &[("errors.deadletterqueue.copy.record.enable", "maybe")],
        )
        .await
        .unwrap_err();
    match &refused {
        AdminError::Call(e) => assert_eq!(e.code(), Some(ErrorCode::InvalidConfig), "{e}"),
        other => panic!("{other}"),
    }

    let topic = cluster.create_topic("jobs", 1).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let offsets = cluster
        .produce(
            &[],
            ["done", "bad", "flaky"].map(|v| {
                ProducerRecord::new(topic.as_str())
                    .partition(0)
                    .key(format!("k-{v}"))
                    .value(v)
                    .header("trace", format!("t-{v}"))
            }),
        )
        .await;
    let groups: Vec<(String, &str, bool)> = [
        (copy_dlq.as_str(), true),
        (plain_dlq.as_str(), false),
        (not_enabled.as_str(), false),
        (unprefixed.as_str(), false),
        (missing.as_str(), false),
    ]
    .into_iter()
    .map(|(dlq, copy)| (unique("workers"), dlq, copy))
    .collect();
    let mut admin = cluster.admin().await;
    for (group, dlq, copy) in &groups {
        let copy = copy.to_string();
        admin
            .alter_group_configs(
                group,
                &[
                    ("share.auto.offset.reset", "earliest"),
                    ("share.delivery.count.limit", "2"),
                    ("errors.deadletterqueue.topic.name", dlq),
                    ("errors.deadletterqueue.copy.record.enable", copy.as_str()),
                ],
            )
            .await
            .unwrap();
    }
    let work = |i: usize| work_through(&cluster, &groups[i].0, &topic);
    tokio::join!(work(0), work(1), work(2), work(3), work(4));

    for (group, dlq, copy) in &groups[..2] {
        let mut letters = read_at_least(&cluster, dlq, 2).await;
        assert_eq!(
            letters.len(),
            2,
            "{dlq}: the rejected and the exhausted record"
        );
        letters.sort_by_key(|r| header(r, "__dlq.errors.offset"));
        for (letter, (source, count, message)) in letters.iter().zip([
            (offsets[1], "1", "Offset rejected by client."),
            (
                offsets[2],
                "2",
                "Offset delivery count exceeded the threshold.",
            ),
        ]) {
            let kafka_headers: Vec<(String, Option<String>)> = letter
                .headers
                .iter()
                .filter(|(k, _)| k.starts_with("__dlq."))
                .map(|(k, _)| (k.clone(), header(letter, k)))
                .collect();
            let want: Vec<(String, Option<String>)> = [
                ("__dlq.errors.topic", topic.clone()),
                ("__dlq.errors.partition", "0".to_string()),
                ("__dlq.errors.offset", source.to_string()),
                ("__dlq.errors.group", group.clone()),
                ("__dlq.errors.delivery.count", count.to_string()),
                ("__dlq.errors.message", message.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Some(v)))
            .collect();
            assert_eq!(kafka_headers, want, "{dlq}");
            assert_eq!(
                header(letter, "trace"),
                None,
                "{dlq}: the record's headers are not copied"
            );
            let name = if source == offsets[1] { "bad" } else { "flaky" };
            if *copy {
                assert_eq!(letter.key.as_deref(), Some(format!("k-{name}").as_bytes()));
                assert_eq!(letter.value.as_deref(), Some(name.as_bytes()));
            } else {
                assert_eq!(
                    (&letter.key, &letter.value),
                    (&None, &None),
                    "{dlq}: headers only"
                );
            }
            assert!(
                letter.timestamp >= before,
                "{dlq}: stamped when dead-lettered"
            );
            // lograil's addition: each delivery, as JSON; Kafka has no such header.
            let attempts = header(letter, "lograil.dlq.attempts");
            if cluster.is_kafka() {
                assert_eq!(attempts, None);
            } else {
                let attempts: serde_json::Value =
                    serde_json::from_str(&attempts.expect("the attempts header")).unwrap();
                assert_eq!(attempts.as_array().unwrap().len().to_string(), count);
            }
        }
    }
    // The refused DLQ topics got nothing (the enabled ones, written by groups that ran at the
    // same time, show the broker had its chance), and the missing one was not created.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for dlq in [&not_enabled, &unprefixed] {
        assert_eq!(read_at_least(&cluster, dlq, 0).await.len(), 0, "{dlq}");
    }
    assert!(
        admin.describe_topic(&missing).await.is_err(),
        "{missing} was not auto-created"
    );
}
