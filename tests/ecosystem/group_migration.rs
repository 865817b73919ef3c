//! KIP-848's online migration with the Java client (kafka-clients 4.4.0), on lograil and on
//! Kafka 4.4 (whose `group.consumer.migration.policy` is `bidirectional` by default, as
//! lograil's): two `group.protocol=classic` members (the eager range assignor) read a topic;
//! a `group.protocol=consumer` member joins the live group, which becomes a consumer-protocol
//! group with the classic members in it (two partitions each, the broker's assignor); the
//! consumer-protocol member is stopped (it leaves) and the group is classic again (three
//! partitions each). Every record is read; one is read twice only when its reader lost its
//! partition before committing past it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use consumer::ProducerRecord;
use kafka_protocol::messages::{ApiKey, ListGroupsRequest, ListGroupsResponse};
use test_support::cluster::{unique, TestCluster};
use test_support::kafka::group_coordinator;
use test_support::wire::{call, connect};

use crate::java::{classpath, JavaApp, TURN};

const BATCH: i64 = 2000;

/// What a `Kip848Consumer` printed, each read and commit with its assignment period (the `A`
/// lines before it).
#[derive(Default)]
pub(crate) struct Periods {
    pub(crate) read: Vec<(i32, i64, usize)>,
    pub(crate) commits: Vec<(i32, i64, usize)>,
    pub(crate) assignments: Vec<Vec<i32>>,
}

impl Periods {
    pub(crate) fn of(app: &JavaApp) -> Periods {
        let mut out = Periods::default();
        for line in app.lines() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let period = out.assignments.len();
            match parts.as_slice() {
                ["M", p, o] => out
                    .read
                    .push((p.parse().unwrap(), o.parse().unwrap(), period)),
                ["C", p, o] => out
                    .commits
                    .push((p.parse().unwrap(), o.parse().unwrap(), period)),
                ["A", list] => out
                    .assignments
                    .push(list.split(',').map(|p| p.parse().unwrap()).collect()),
                ["A"] => out.assignments.push(Vec::new()),
                _ => {}
            }
        }
        out
    }

    /// Whether it read (p, o) and lost the partition (or stopped) before committing past it.
    fn left_uncommitted(&self, p: i32, o: i64) -> bool {
        self.read.iter().any(|(rp, ro, period)| {
            (*rp, *ro) == (p, o)
                && !self
                    .commits
                    .iter()
                    .any(|(cp, next, cperiod)| *cp == p && *next > o && cperiod == period)
        })
    }
}

/// Whether the apps hold `each` partitions apiece, all six between them.
fn even(apps: &[&JavaApp], each: usize) -> bool {
    let last: Vec<Vec<i32>> = apps
        .iter()
        .map(|a| {
            Periods::of(a)
                .assignments
                .last()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let all: BTreeSet<i32> = last.iter().flatten().copied().collect();
    last.iter().all(|a| a.len() == each) && all.len() == 6
}

async fn wait_even(apps: &mut [&mut JavaApp], each: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let shared: Vec<&JavaApp> = apps.iter().map(|a| &**a).collect();
        if even(&shared, each) {
            return;
        }
        for app in apps.iter_mut() {
            app.alive();
        }
        if Instant::now() > deadline {
            apps[0].fail(&format!("{what}: not {each} partitions each"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The group's type as its coordinator's ListGroups shows it ("classic", "consumer").
fn group_type(cluster: &TestCluster, group: &str) -> String {
    let coordinator = group_coordinator(&cluster.address_of(1), group);
    let listed: ListGroupsResponse = call(
        &mut connect(&coordinator),
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default(),
    );
    listed
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == group)
        .map(|g| g.group_type.to_string())
        .unwrap_or_default()
}

async fn produce(cluster: &TestCluster, topic: &str, from: i64) {
    cluster
        .produce(
            &[],
            (from..from + BATCH).map(|i| {
                ProducerRecord::new(topic)
                    .key(format!("k{i}"))
                    .value(i.to_string())
            }),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_classic_group_migrates_to_the_consumer_protocol_and_back_online() {
    let Some(classpath) = classpath() else { return };
    let _turn = TURN.lock().await;
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("migrate", 6).await;
    let group = unique("migrate");
    let dir = tempfile::tempdir().unwrap();
    let start = |name: &str, protocol: &str| {
        let args: Vec<String> = [
            ("--bootstrap", cluster.plain_bootstrap().to_string()),
            ("--topic", topic.clone()),
            ("--group", group.clone()),
            ("--group-protocol", protocol.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect();
        JavaApp::start(
            name,
            &classpath,
            "lograil.ecosystem.Kip848Consumer",
            &args,
            dir.path(),
        )
    };
    let mut a = start("migrate-classic-a", "classic");
    let mut b = start("migrate-classic-b", "classic");
    wait_even(&mut [&mut a, &mut b], 3, "two classic members").await;
    assert_eq!(group_type(&cluster, &group), "classic");
    produce(&cluster, &topic, 0).await;

    let mut c = start("migrate-consumer", "consumer");
    wait_even(&mut [&mut a, &mut b, &mut c], 2, "upgraded, three members").await;
    assert_eq!(group_type(&cluster, &group), "consumer");
    produce(&cluster, &topic, BATCH).await;
    c.wait("the consumer-protocol member reads", 60, |lines| {
        lines.iter().any(|l| l.starts_with("M "))
    })
    .await;

    c.stop().await;
    assert!(c.lines().iter().any(|l| l == "CLOSED"), "{}", c.output());
    wait_even(&mut [&mut a, &mut b], 3, "downgraded, two classic members").await;
    assert_eq!(group_type(&cluster, &group), "classic");
    produce(&cluster, &topic, 2 * BATCH).await;

    let deadline = Instant::now() + Duration::from_secs(120);
    let everyone = loop {
        let everyone: Vec<Periods> = [&a, &b, &c].iter().map(|x| Periods::of(x)).collect();
        let read: BTreeSet<(i32, i64)> = everyone
            .iter()
            .flat_map(|p| p.read.iter().map(|(p, o, _)| (*p, *o)))
            .collect();
        if read.len() as i64 == 3 * BATCH {
            break everyone;
        }
        a.alive();
        b.alive();
        if Instant::now() > deadline {
            a.fail(&format!("only {} of {} read", read.len(), 3 * BATCH));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut readers: BTreeMap<(i32, i64), Vec<usize>> = BTreeMap::new();
    for (i, p) in everyone.iter().enumerate() {
        for (part, o, _) in &p.read {
            readers.entry((*part, *o)).or_default().push(i);
        }
    }
    for ((p, o), by) in readers.iter().filter(|(_, by)| by.len() > 1) {
        assert!(
            by.iter().any(|i| everyone[*i].left_uncommitted(*p, *o)),
            "({p}, {o}) read by {by:?}, none of whom lost it uncommitted"
        );
    }
}
