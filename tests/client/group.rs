//! The group consumer: partitions shared in a group and moved when a member dies, eager and
//! cooperative rebalances, static membership, commits and restarts, auto commit's
//! at-least-once, seeks, pause and resume.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use consumer::{
    ClientConfig, ConsumeError, Consumer, ConsumerConfig, ProducerRecord, RebalanceListener,
    TopicPartition,
};

use test_support::cluster::{unique, TestCluster};
use test_support::kafka::wait_until_async;

/// Every rebalance callback, in order.
#[derive(Debug, Default)]
pub struct Events {
    log: Mutex<Vec<(&'static str, Vec<TopicPartition>)>>,
}

impl Events {
    fn all(&self) -> Vec<(&'static str, Vec<TopicPartition>)> {
        self.log.lock().unwrap().clone()
    }
    fn of(&self, kind: &str) -> Vec<Vec<TopicPartition>> {
        self.all()
            .into_iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, p)| p)
            .collect()
    }
}

impl RebalanceListener for Events {
    fn on_partitions_assigned(&self, partitions: &[TopicPartition]) {
        self.log
            .lock()
            .unwrap()
            .push(("assigned", partitions.to_vec()));
    }
    fn on_partitions_revoked(&self, partitions: &[TopicPartition]) {
        self.log
            .lock()
            .unwrap()
            .push(("revoked", partitions.to_vec()));
    }
    fn on_partitions_lost(&self, partitions: &[TopicPartition]) {
        self.log.lock().unwrap().push(("lost", partitions.to_vec()));
    }
}

async fn produce_ids(cluster: &TestCluster, topic: &str, ids: std::ops::Range<u32>) {
    let records = ids.map(|id| {
        ProducerRecord::new(topic)
            .key(format!("k{}", id % 50))
            .value(id.to_string())
    });
    cluster.produce(&[("linger.ms", "5")], records).await;
}

fn id_of(r: &consumer::ConsumerRecord) -> u32 {
    std::str::from_utf8(r.value.as_deref().unwrap())
        .unwrap()
        .parse()
        .unwrap()
}

async fn member(
    cluster: &TestCluster,
    group: &str,
    assignor: &str,
    extra: &[(&str, &str)],
) -> (Arc<Consumer>, Arc<Events>) {
    let mut config: ClientConfig = cluster
        .config()
        .with("group.id", group)
        .with("session.timeout.ms", "6000")
        .with("heartbeat.interval.ms", "300")
        .with("fetch.max.wait.ms", "200")
        .with("auto.offset.reset", "earliest")
        .with("auto.commit.interval.ms", "200")
        .with("partition.assignment.strategy", assignor);
    for (k, v) in extra {
        config.set(*k, *v);
    }
    let events = Arc::new(Events::default());
    let consumer = Consumer::with_listener(
        ConsumerConfig::from_config(&config).unwrap(),
        Some(events.clone()),
    )
    .await
    .unwrap();
    (Arc::new(consumer), events)
}

/// Reads in the background, recording (member, id) pairs.
fn reader(
    index: usize,
    consumer: Arc<Consumer>,
    seen: Arc<Mutex<Vec<(usize, u32)>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match consumer.recv().await {
                Ok(r) => seen.lock().unwrap().push((index, id_of(&r))),
                Err(ConsumeError::Closed) => return,
                Err(e) => panic!("member {index}: {e}"),
            }
        }
    })
}

fn ids(seen: &Mutex<Vec<(usize, u32)>>) -> BTreeSet<u32> {
    seen.lock().unwrap().iter().map(|(_, id)| *id).collect()
}

async fn three_members_one_killed(assignor: &str) {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("group3", 6).await;
    let group = unique("g3");
    produce_ids(&cluster, &topic, 0..300).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut members = Vec::new();
    for i in 0..3 {
        let (c, _) = member(&cluster, &group, assignor, &[]).await;
        c.subscribe(&[&topic]).unwrap();
        let task = reader(i, c.clone(), seen.clone());
        members.push((c, task));
    }
    wait_until_async(
        "three members with two partitions each",
        Duration::from_secs(60),
        || {
            let sets: Vec<Vec<TopicPartition>> =
                members.iter().map(|(c, _)| c.assignment()).collect();
            let all: BTreeSet<&TopicPartition> = sets.iter().flatten().collect();
            sets.iter().all(|s| s.len() == 2) && all.len() == 6
        },
    )
    .await;
    wait_until_async(
        "the first 300 records read",
        Duration::from_secs(60),
        || ids(&seen).len() == 300,
    )
    .await;

    // Member 0 dies: no commit, no LeaveGroup (dropping is a crash).
    let (dead, task) = members.remove(0);
    task.abort();
    let _ = task.await;
    let dead_partitions = dead.assignment();
    drop(dead);
    produce_ids(&cluster, &topic, 300..600).await;
    wait_until_async(
        "the survivors to take all six partitions",
        Duration::from_secs(60),
        || {
            let all: BTreeSet<TopicPartition> =
                members.iter().flat_map(|(c, _)| c.assignment()).collect();
            all.len() == 6
        },
    )
    .await;
    wait_until_async("every record read", Duration::from_secs(60), || {
        ids(&seen).len() == 600
    })
    .await;
    // The dead member's partitions were read by the others after it died.
    let late: BTreeSet<u32> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, id)| *m != 0 && *id >= 300)
        .map(|(_, id)| *id)
        .collect();
    assert_eq!(
        late.len(),
        300,
        "survivors read all of 300..600 ({dead_partitions:?} moved)"
    );
    for (c, task) in members {
        task.abort();
        let _ = task.await;
        Arc::try_unwrap(c).unwrap().close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_range_one_killed() {
    three_members_one_killed("range").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_cooperative_sticky_one_killed() {
    three_members_one_killed("cooperative-sticky").await;
}

/// Cooperative: a joining member takes half; the first member gives up only those three
/// (never all six) and keeps reading the rest throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_rebalance_revokes_only_what_moves() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("coop", 6).await;
    let group = unique("coop");
    let (a, a_events) = member(&cluster, &group, "cooperative-sticky", &[]).await;
    a.subscribe(&[&topic]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let a_task = reader(0, a.clone(), seen.clone());
    wait_until_async("a owns all six", Duration::from_secs(60), || {
        a.assignment().len() == 6
    })
    .await;
    let (b, b_events) = member(&cluster, &group, "cooperative-sticky", &[]).await;
    b.subscribe(&[&topic]).unwrap();
    let b_task = reader(1, b.clone(), seen.clone());
    wait_until_async("three each", Duration::from_secs(60), || {
        a.assignment().len() == 3 && b.assignment().len() == 3
    })
    .await;
    let a_now: BTreeSet<TopicPartition> = a.assignment().into_iter().collect();
    let b_now: BTreeSet<TopicPartition> = b.assignment().into_iter().collect();
    assert!(a_now.is_disjoint(&b_now));
    let revoked = a_events.of("revoked");
    assert_eq!(revoked.len(), 1, "one revocation: {:?}", a_events.all());
    assert_eq!(revoked[0].len(), 3);
    assert!(revoked[0].iter().all(|tp| b_now.contains(tp)));
    assert!(a_events.of("lost").is_empty());
    assert!(b_events.of("revoked").is_empty());
    produce_ids(&cluster, &topic, 0..200).await;
    wait_until_async("both read", Duration::from_secs(60), || {
        ids(&seen).len() == 200
    })
    .await;
    for (c, t) in [(a, a_task), (b, b_task)] {
        t.abort();
        let _ = t.await;
        Arc::try_unwrap(c).unwrap().close().await;
    }
}

/// Eager (range): everything is revoked before the rebalance, then handed out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_rebalance_revokes_everything_first() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("eager", 4).await;
    let group = unique("eager");
    let (a, a_events) = member(&cluster, &group, "range", &[]).await;
    a.subscribe(&[&topic]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let a_task = reader(0, a.clone(), seen.clone());
    wait_until_async("a owns all", Duration::from_secs(60), || {
        a.assignment().len() == 4
    })
    .await;
    let (b, _) = member(&cluster, &group, "range", &[]).await;
    b.subscribe(&[&topic]).unwrap();
    let b_task = reader(1, b.clone(), seen.clone());
    wait_until_async("two each", Duration::from_secs(60), || {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    let events = a_events.all();
    let kinds: Vec<(&str, usize)> = events.iter().map(|(k, p)| (*k, p.len())).collect();
    assert_eq!(
        kinds,
        vec![("assigned", 4), ("revoked", 4), ("assigned", 2)],
        "{events:?}"
    );
    for (c, t) in [(a, a_task), (b, b_task)] {
        t.abort();
        let _ = t.await;
        Arc::try_unwrap(c).unwrap().close().await;
    }
}

/// Static membership: a member that restarts with its `group.instance.id` within the session
/// timeout gets its partitions back, and the other member is not disturbed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_member_restart_keeps_its_partitions() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("static", 4).await;
    let group = unique("static");
    let session = [("session.timeout.ms", "30000")];
    let (a, _) = member(
        &cluster,
        &group,
        "range",
        &[("group.instance.id", "a"), session[0]],
    )
    .await;
    let (b, b_events) = member(
        &cluster,
        &group,
        "range",
        &[("group.instance.id", "b"), session[0]],
    )
    .await;
    a.subscribe(&[&topic]).unwrap();
    b.subscribe(&[&topic]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let a_task = reader(0, a.clone(), seen.clone());
    let b_task = reader(1, b.clone(), seen.clone());
    wait_until_async("two each", Duration::from_secs(60), || {
        a.assignment().len() == 2 && b.assignment().len() == 2
    })
    .await;
    let a_before = a.assignment();
    let b_events_before = b_events.all().len();
    // Crash a and bring it back under the same instance id.
    a_task.abort();
    let _ = a_task.await;
    drop(a);
    let (a2, a2_events) = member(
        &cluster,
        &group,
        "range",
        &[("group.instance.id", "a"), session[0]],
    )
    .await;
    a2.subscribe(&[&topic]).unwrap();
    let a2_task = reader(0, a2.clone(), seen.clone());
    wait_until_async(
        "a back with its partitions",
        Duration::from_secs(60),
        || a2.assignment() == a_before,
    )
    .await;
    assert_eq!(a2_events.of("assigned"), vec![a_before.clone()]);
    produce_ids(&cluster, &topic, 0..100).await;
    wait_until_async("all read", Duration::from_secs(60), || {
        ids(&seen).len() == 100
    })
    .await;
    assert_eq!(
        b_events.all().len(),
        b_events_before,
        "b saw no rebalance: {:?}",
        b_events.all()
    );
    for (c, t) in [(a2, a2_task), (b, b_task)] {
        t.abort();
        let _ = t.await;
        Arc::try_unwrap(c).unwrap().close().await;
    }
}

/// Manual commits: a consumer reads a third, commits, closes; the next one starts exactly at
/// the committed offsets and reads the rest, nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_close_and_resume_where_committed() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("resume", 3).await;
    let group = unique("resume");
    produce_ids(&cluster, &topic, 0..300).await;
    let props = [("enable.auto.commit", "false")];
    let first = cluster.consumer(Some(&group), &props).await;
    first.subscribe(&[&topic]).unwrap();
    let mut read = Vec::new();
    while read.len() < 100 {
        read.push(id_of(&first.recv().await.unwrap()));
    }
    first.commit().await.unwrap();
    let partitions: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    let committed = first.committed(&partitions).await.unwrap();
    let positions: BTreeMap<TopicPartition, i64> = partitions
        .iter()
        .filter_map(|tp| first.position(tp).map(|o| (tp.clone(), o)))
        .collect();
    assert_eq!(committed, positions);
    assert_eq!(committed.values().sum::<i64>(), 100);
    first.close().await;
    // close() left the group: no member lingers until its session times out.
    let described = cluster.admin().await.describe_group(&group).await.unwrap();
    assert!(described.members.is_empty(), "{described:?}");

    let second = cluster.consumer(Some(&group), &props).await;
    second.subscribe(&[&topic]).unwrap();
    let mut first_offsets: BTreeMap<i32, i64> = BTreeMap::new();
    while read.len() < 300 {
        let r = second.recv().await.unwrap();
        first_offsets.entry(r.partition).or_insert(r.offset);
        read.push(id_of(&r));
    }
    for (p, offset) in &first_offsets {
        let c = committed
            .get(&TopicPartition::new(&topic, *p))
            .copied()
            .unwrap_or(0);
        assert_eq!(*offset, c, "partition {p} resumes at its committed offset");
    }
    let unique_ids: HashSet<u32> = read.iter().copied().collect();
    assert_eq!(unique_ids.len(), 300, "nothing twice, nothing missing");
    second.close().await;
}

/// Auto commit covers processed records only: the record in hand is committed once `recv` is
/// called again. A crash mid-stream loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_commit_is_at_least_once() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("atleast", 1).await;
    let group = unique("atleast");
    produce_ids(&cluster, &topic, 0..200).await;
    let tp = TopicPartition::new(&topic, 0);
    let props = [("auto.commit.interval.ms", "100")];
    let first = cluster.consumer(Some(&group), &props).await;
    first.subscribe(&[&topic]).unwrap();
    let mut read = Vec::new();
    let mut last = None;
    while read.len() < 50 {
        let r = first.recv().await.unwrap();
        read.push(id_of(&r));
        last = Some(r.offset);
    }
    let in_hand = last.unwrap();
    let mut admin = cluster.admin().await;
    // The record at `in_hand` is not processed yet: the commit stops right before it.
    let mut committed = None;
    for _ in 0..200 {
        committed = admin
            .committed_offsets(&group)
            .await
            .unwrap()
            .get(&(topic.clone(), 0))
            .copied();
        if committed == Some(in_hand) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        committed,
        Some(in_hand),
        "auto commit up to the record in hand"
    );
    // Asking for the next record processes it: the commit moves past it.
    let r = first.recv().await.unwrap();
    read.push(id_of(&r));
    for _ in 0..200 {
        committed = admin
            .committed_offsets(&group)
            .await
            .unwrap()
            .get(&(topic.clone(), 0))
            .copied();
        if committed == Some(in_hand + 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(committed, Some(in_hand + 1));
    // Crash: no close, no final commit.
    drop(first);
    let second = cluster
        .consumer(Some(&group), &[("session.timeout.ms", "6000")])
        .await;
    second.subscribe(&[&topic]).unwrap();
    let r = second.recv().await.unwrap();
    assert!(
        r.offset <= in_hand + 2,
        "resumes at or before the last processed record"
    );
    read.push(id_of(&r));
    while read.iter().collect::<HashSet<_>>().len() < 200 {
        read.push(id_of(&second.recv().await.unwrap()));
    }
    second.close().await;
    let _ = tp;
}

/// No committed offset and auto.offset.reset=none: recv reports it; a seek fixes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_none_is_an_error_until_a_seek() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("nonereset", 1).await;
    produce_ids(&cluster, &topic, 0..10).await;
    let group = unique("none");
    let c = cluster
        .consumer(Some(&group), &[("auto.offset.reset", "none")])
        .await;
    let tp = TopicPartition::new(&topic, 0);
    c.assign(std::slice::from_ref(&tp)).unwrap();
    match tokio::time::timeout(Duration::from_secs(30), c.recv())
        .await
        .unwrap()
    {
        Err(ConsumeError::NoOffset { partition }) => assert_eq!(partition, tp),
        other => panic!("expected NoOffset, got {other:?}"),
    }
    c.seek(&tp, 7).unwrap();
    assert_eq!(c.recv().await.unwrap().offset, 7);
    c.close().await;

    // latest: only what is produced after the consumer started.
    let latest = cluster
        .consumer(Some(&unique("latest")), &[("auto.offset.reset", "latest")])
        .await;
    latest.assign(std::slice::from_ref(&tp)).unwrap();
    wait_until_async("position resolved", Duration::from_secs(30), || {
        latest.position(&tp) == Some(10)
    })
    .await;
    produce_ids(&cluster, &topic, 10..11).await;
    let r = latest.recv().await.unwrap();
    assert_eq!((r.offset, id_of(&r)), (10, 10));
    latest.close().await;
}

/// Seek by offset, by time, to the beginning and end; pause and resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_pause_and_resume() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("seek", 2).await;
    let base = 1_600_000_000_000i64;
    let producer = cluster.producer(&[]).await;
    for p in 0..2 {
        for i in 0..100i64 {
            producer
                .send(
                    ProducerRecord::new(&topic)
                        .partition(p)
                        .timestamp(base + i * 1000)
                        .value(format!("{p}-{i}")),
                )
                .await
                .unwrap();
        }
    }
    producer.flush().await;
    let (p0, p1) = (
        TopicPartition::new(&topic, 0),
        TopicPartition::new(&topic, 1),
    );
    let c = cluster.consumer(None, &[]).await;
    c.assign(&[p0.clone(), p1.clone()]).unwrap();
    c.seek(&p0, 50).unwrap();
    c.seek_to_timestamp(&p1, base + 70 * 1000 - 1).unwrap();
    c.pause(std::slice::from_ref(&p0)).unwrap();
    assert_eq!(c.paused(), vec![p0.clone()]);
    // Only partition 1, from 70.
    for expected in 70..100 {
        let r = c.recv().await.unwrap();
        assert_eq!((r.partition, r.offset), (1, expected));
    }
    assert_eq!(c.position(&p0), Some(50));
    c.resume(std::slice::from_ref(&p0)).unwrap();
    for expected in 50..100 {
        let r = c.recv().await.unwrap();
        assert_eq!((r.partition, r.offset), (0, expected));
        assert_eq!(r.value.as_deref(), Some(format!("0-{expected}").as_bytes()));
    }
    c.seek_to_beginning(std::slice::from_ref(&p1)).unwrap();
    let r = c.recv().await.unwrap();
    assert_eq!((r.partition, r.offset), (1, 0));
    c.seek_to_end(&[p0.clone(), p1.clone()]).unwrap();
    wait_until_async("at the end", Duration::from_secs(30), || {
        c.position(&p0) == Some(100) && c.position(&p1) == Some(100)
    })
    .await;
    producer
        .send(ProducerRecord::new(&topic).partition(1).value("new"))
        .await
        .unwrap()
        .await
        .unwrap();
    let r = c.recv().await.unwrap();
    assert_eq!((r.partition, r.offset), (1, 100));
    // offsets_for_times agrees with the seek.
    let found = c
        .offsets_for_times(std::slice::from_ref(&p0), base + 42_000)
        .await
        .unwrap();
    assert_eq!(found.get(&p0), Some(&42));
    producer.close().await;
    c.close().await;
}

/// A member that stops asking for records for `max.poll.interval.ms` leaves the group (its
/// partitions are lost to it and go to the others) and rejoins on its next `recv`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_polling_leaves_and_rejoins() {
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("pollgap", 2).await;
    let group = unique("pollgap");
    let props = [("max.poll.interval.ms", "4000")];
    let (a, a_events) = member(&cluster, &group, "range", &props).await;
    let (b, _) = member(&cluster, &group, "range", &props).await;
    a.subscribe(&[&topic]).unwrap();
    b.subscribe(&[&topic]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let b_task = reader(1, b.clone(), seen.clone());
    // a asks for records until the group is settled, then stops asking.
    let a_task = reader(0, a.clone(), seen.clone());
    wait_until_async("one partition each", Duration::from_secs(60), || {
        a.assignment().len() == 1 && b.assignment().len() == 1
    })
    .await;
    a_task.abort();
    let _ = a_task.await;
    // After max.poll.interval.ms without a recv, a leaves and b takes both partitions.
    wait_until_async("b owns both partitions", Duration::from_secs(60), || {
        b.assignment().len() == 2
    })
    .await;
    assert!(a.assignment().is_empty());
    assert_eq!(a_events.of("lost").len(), 1, "{:?}", a_events.all());
    // a asks again: it rejoins and gets a partition back.
    produce_ids(&cluster, &topic, 0..20).await;
    let a_reader = reader(0, a.clone(), seen.clone());
    wait_until_async("a back in the group", Duration::from_secs(60), || {
        a.assignment().len() == 1 && b.assignment().len() == 1
    })
    .await;
    wait_until_async("all read", Duration::from_secs(60), || {
        ids(&seen).len() == 20
    })
    .await;
    for (c, t) in [(a, a_reader), (b, b_task)] {
        t.abort();
        let _ = t.await;
        Arc::try_unwrap(c).unwrap().close().await;
    }
}

/// A subscribed topic that does not exist when the group forms (a retry topic just created on
/// another broker of a cluster, which has not heard of it yet) is assigned once it appears:
/// the leader looks again every heartbeat while a subscribed topic has no partitions, not only
/// after `metadata.max.age.ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribed_topic_created_after_the_join_is_assigned() {
    let cluster = TestCluster::start();
    let present = cluster.create_topic("present", 1).await;
    let later = unique("later");
    let group = unique("later-g");
    let (c, _) = member(
        &cluster,
        &group,
        "range",
        &[("allow.auto.create.topics", "false")],
    )
    .await;
    c.subscribe(&[&present, &later]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let task = reader(0, c.clone(), seen.clone());
    wait_until_async(
        "the present topic assigned",
        Duration::from_secs(60),
        || c.assignment().len() == 1,
    )
    .await;
    cluster
        .admin()
        .await
        .create(&consumer::NewTopic {
            name: later.clone(),
            partitions: 1,
            replication_factor: cluster.replication(),
            configs: Vec::new(),
        })
        .await
        .unwrap();
    produce_ids(&cluster, &later, 0..5).await;
    // Well within the default metadata.max.age.ms (5 minutes).
    wait_until_async(
        "the later topic assigned and read",
        Duration::from_secs(30),
        || ids(&seen).len() == 5,
    )
    .await;
    assert_eq!(c.assignment().len(), 2);
    task.abort();
    let _ = task.await;
    Arc::try_unwrap(c).unwrap().close().await;
}
