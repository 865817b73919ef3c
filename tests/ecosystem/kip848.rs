//! The Java client (kafka-clients 4.4.0) in a KIP-848 consumer group (`group.protocol=consumer`,
//! the broker's assignor): three members over six partitions, one killed (SIGKILL) mid-stream;
//! the broker fences it after its session timeout and the others take its partitions. Every
//! record is read; duplicates only past the dead member's last commit. On lograil the broker is
//! then killed (SIGKILL) and started again: the two members go on with their partitions, no
//! rebalance, every later record read once.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use consumer::ProducerRecord;
use test_support::cluster::{unique, TestCluster};

use crate::group_migration::Periods;
use crate::java::{classpath, JavaApp, TURN};

const RECORDS: i64 = 3000;

/// A member's output: (partition, offset) read, (partition, next) committed, assignments.
struct Seen {
    read: Vec<(i32, i64)>,
    commits: Vec<(i32, i64)>,
    assignments: Vec<Vec<i32>>,
}

fn seen(app: &JavaApp) -> Seen {
    let lines = Periods::of(app);
    Seen {
        read: lines.read.iter().map(|(p, o, _)| (*p, *o)).collect(),
        commits: lines.commits.iter().map(|(p, n, _)| (*p, *n)).collect(),
        assignments: lines.assignments,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_kip848_group_of_three_loses_a_member_and_every_record_is_read() {
    let Some(classpath) = classpath() else { return };
    let _turn = TURN.lock().await;
    let mut cluster = TestCluster::start_with(&[
        "--group-consumer-session-timeout-ms",
        "6000",
        "--group-consumer-heartbeat-interval-ms",
        "500",
    ]);
    let topic = cluster.create_topic("kip848", 6).await;
    let group = unique("kip848");
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = [
        ("--bootstrap", cluster.plain_bootstrap().to_string()),
        ("--topic", topic.clone()),
        ("--group", group.clone()),
        ("--group-protocol", "consumer".to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect();
    let mut apps: Vec<JavaApp> = (0..3)
        .map(|i| {
            JavaApp::start(
                &format!("kip848-{i}"),
                &classpath,
                "lograil.ecosystem.Kip848Consumer",
                &args,
                dir.path(),
            )
        })
        .collect();
    // Converged before any record: two partitions each, all six given.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let last: Vec<Vec<i32>> = apps
            .iter()
            .map(|a| seen(a).assignments.last().cloned().unwrap_or_default())
            .collect();
        let all: BTreeSet<i32> = last.iter().flatten().copied().collect();
        if last.iter().all(|a| a.len() == 2) && all.len() == 6 {
            break;
        }
        for app in &mut apps {
            app.alive();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no even assignment: {last:?}\n{}",
            apps[0].output()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    cluster
        .produce(
            &[],
            (0..RECORDS).map(|i| {
                ProducerRecord::new(topic.as_str())
                    .key(format!("k{i}"))
                    .value(i.to_string())
            }),
        )
        .await;
    apps[0]
        .wait("100 records read", 60, |lines| {
            lines.iter().filter(|l| l.starts_with("M ")).count() >= 100
        })
        .await;
    let mut dead = apps.remove(0);
    dead.kill();
    let dead = seen(&dead);
    let orphaned = dead.assignments.last().unwrap().clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let read: BTreeSet<(i32, i64)> = apps
            .iter()
            .flat_map(|a| seen(a).read)
            .chain(dead.read.iter().copied())
            .collect();
        if read.len() as i64 == RECORDS {
            break;
        }
        for app in &mut apps {
            app.alive();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {RECORDS} read\n{}",
            read.len(),
            apps[0].output()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The survivors ended with all six partitions between them, disjoint.
    let last: Vec<Vec<i32>> = apps
        .iter()
        .map(|a| seen(a).assignments.last().cloned().unwrap_or_default())
        .collect();
    let all: BTreeSet<i32> = last.iter().flatten().copied().collect();
    assert_eq!(all.len(), 6, "{last:?}");
    assert_eq!(last.iter().map(Vec::len).sum::<usize>(), 6, "{last:?}");
    // Duplicates only past the dead member's last commit of an orphaned partition.
    let committed: BTreeMap<i32, i64> =
        dead.commits.iter().fold(BTreeMap::new(), |mut m, (p, n)| {
            let e = m.entry(*p).or_insert(0);
            *e = (*e).max(*n);
            m
        });
    let mut count: HashMap<(i32, i64), usize> = HashMap::new();
    for r in apps
        .iter()
        .flat_map(|a| seen(a).read)
        .chain(dead.read.iter().copied())
    {
        *count.entry(r).or_default() += 1;
    }
    for ((p, o), n) in count {
        if n > 1 {
            assert!(
                orphaned.contains(&p) && committed.get(&p).is_none_or(|next| o >= *next),
                "({p}, {o}) read {n} times, not past the dead member's last commit"
            );
        }
    }
    let assigned: Vec<usize> = apps.iter().map(|a| seen(a).assignments.len()).collect();
    if cluster.crash_and_restart_lograil() {
        survive_a_broker_crash(&cluster, &topic, &mut apps, &assigned).await;
    }
}

/// The members of a converged group go on across the broker's crash: the next `RECORDS` are
/// each read once, and no member's assignment changes (`assigned`: their `A` lines so far).
async fn survive_a_broker_crash(
    cluster: &TestCluster,
    topic: &str,
    apps: &mut [JavaApp],
    assigned: &[usize],
) {
    let read_before: Vec<usize> = apps.iter().map(|a| seen(a).read.len()).collect();
    cluster
        .produce(
            &[],
            (RECORDS..2 * RECORDS).map(|i| {
                ProducerRecord::new(topic)
                    .key(format!("k{i}"))
                    .value(i.to_string())
            }),
        )
        .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let after: Vec<(i32, i64)> = apps
            .iter()
            .zip(&read_before)
            .flat_map(|(a, n)| seen(a).read.split_off(*n))
            .collect();
        if after.len() as i64 >= RECORDS {
            let distinct: BTreeSet<&(i32, i64)> = after.iter().collect();
            assert_eq!(
                distinct.len(),
                after.len(),
                "records read twice after the crash"
            );
            break;
        }
        for app in apps.iter_mut() {
            app.alive();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {RECORDS} read after the crash\n{}",
            after.len(),
            apps[0].output()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for (app, before) in apps.iter().zip(assigned) {
        let now = seen(app).assignments;
        assert_eq!(now.len(), *before, "reassigned after the crash: {now:?}");
    }
}
