//! KIP-1071 streams groups with Kafka Streams 4.4's own client (`group.protocol=streams`), two
//! instances and exactly-once: the broker splits the tasks between them, takes them from one
//! that is killed (SIGKILL) once it is fenced, and the output still holds every count once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use consumer::ProducerRecord;
use rdkafka::consumer::Consumer as _;
use test_support::cluster::{unique, TestCluster};

use crate::java::{classpath, JavaApp, TURN};
use crate::transactions::{
    count_sequences, eos_line, rd_consumer, start, word_counts, EOS_LINES, STEPS,
};

/// Each member's active tasks as StreamsGroupDescribe shows them, once the group is Stable with
/// `members` members; the test fails after 90 s.
async fn stable_tasks(
    addr: &str,
    group: &str,
    members: usize,
    apps: &mut [&mut JavaApp],
) -> Vec<BTreeSet<(String, i32)>> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let described = test_support::kafka::describe_streams_group(addr, group);
        if described.group_state.as_str() == "Stable" && described.members.len() == members {
            return described
                .members
                .iter()
                .map(|m| {
                    m.assignment
                        .active_tasks
                        .iter()
                        .flat_map(|t| {
                            t.partitions
                                .iter()
                                .map(|p| (t.subtopology_id.to_string(), *p))
                        })
                        .collect()
                })
                .collect();
        }
        for app in apps.iter_mut() {
            app.alive();
        }
        assert!(
            Instant::now() < deadline,
            "streams group {group} not Stable with {members} members in 90 s: {described:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The exactly-once word count (`ExactlyOnceCounts.java`, two subtopologies of 2 partitions: 4
/// tasks) as a streams group. One instance runs alone and takes every task; a second joins and
/// the broker moves two tasks to it (revoked from the first, then assigned); the first is
/// killed with SIGKILL while a transaction is open, the broker fences it after the session
/// timeout and the survivor takes all four tasks; on lograil the broker is then killed
/// (SIGKILL) and restarted, and the survivor rejoins. Read_committed, each word's counts in
/// the output are 1, 2, … up to the exact count, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_group_moves_tasks_between_instances_exactly_once() {
    let Some(classpath) = classpath() else { return };
    let _turn = TURN.lock().await;
    // lograil: a 6 s session (Kafka 4.4's is 45 s at least) and quick heartbeats; a fixed
    // port, so the clients find the broker again after its crash.
    let listeners = format!(
        "PLAINTEXT://127.0.0.1:{}",
        test_support::process::free_port()
    );
    let mut cluster = TestCluster::start_with(&[
        "--listeners",
        &listeners,
        "--group-streams-session-timeout-ms",
        "6000",
        "--group-streams-heartbeat-interval-ms",
        "500",
        "--group-streams-initial-rebalance-delay-ms",
        "500",
    ]);
    let input = cluster.create_topic("sg-lines", 2).await;
    let words_out = cluster.create_topic("sg-words", 2).await;
    let app_id = unique("sg-counts");
    let dir = tempfile::tempdir().unwrap();
    let args = |instance: &str| {
        vec![
            ("bootstrap", cluster.plain_bootstrap().to_string()),
            ("app-id", app_id.clone()),
            ("input", input.clone()),
            ("words-out", words_out.clone()),
            ("state-dir", dir.path().join(instance).display().to_string()),
            ("replication", cluster.replication().to_string()),
            ("guarantee", "exactly_once_v2".to_string()),
            ("group-protocol", "streams".to_string()),
        ]
    };
    let lines: Vec<String> = (0..EOS_LINES).map(eos_line).collect();
    let per_step = EOS_LINES / STEPS;
    let produce = |steps: std::ops::Range<usize>| {
        let range = steps.start * per_step..steps.end * per_step;
        lines[range.clone()]
            .iter()
            .zip(range)
            .map(|(text, i)| {
                ProducerRecord::new(input.as_str())
                    .key(format!("line-{i}"))
                    .value(text.clone())
            })
            .collect::<Vec<_>>()
    };
    let bootstrap = cluster.plain_bootstrap().to_string();
    let addr = cluster.address_of(1);

    let mut first = start(
        "sg-1",
        &classpath,
        "ExactlyOnceCounts",
        &args("a"),
        dir.path(),
    );
    first
        .wait("RUNNING", 90, |l| l.iter().any(|l| l == "STATE RUNNING"))
        .await;
    let alone = stable_tasks(&addr, &app_id, 1, &mut [&mut first]).await;
    assert_eq!(alone[0].len(), 4, "one member runs every task: {alone:?}");
    for step in 0..3 {
        cluster.produce(&[], produce(step..step + 1)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A second instance: two tasks each, none run by both.
    let mut second = start(
        "sg-2",
        &classpath,
        "ExactlyOnceCounts",
        &args("b"),
        dir.path(),
    );
    let shared = stable_tasks(&addr, &app_id, 2, &mut [&mut first, &mut second]).await;
    assert_eq!(shared[0].len(), 2, "{shared:?}");
    assert_eq!(shared[1].len(), 2, "{shared:?}");
    assert!(shared[0].is_disjoint(&shared[1]), "{shared:?}");
    for step in 3..6 {
        cluster.produce(&[], produce(step..step + 1)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The first killed while it has a transaction open: output records past the committed ones.
    let followers = ["read_uncommitted", "read_committed"]
        .map(|level| rd_consumer(&bootstrap, &words_out, 2, level));
    let mut seen = [0usize; 2];
    cluster.produce(&[], produce(6..8)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen[0] <= seen[1] {
        for (follower, seen) in followers.iter().zip(seen.iter_mut()) {
            while let Some(m) = follower.poll(Duration::from_millis(10)) {
                if m.is_ok() {
                    *seen += 1;
                }
            }
        }
        first.alive();
        second.alive();
        assert!(
            Instant::now() < deadline,
            "no open transaction's records in the output in 60 s:\n{}",
            first.output()
        );
    }
    first.kill();
    for follower in &followers {
        follower.unsubscribe();
    }
    cluster.produce(&[], produce(8..STEPS)).await;

    // The survivor takes every task once the broker fences the killed member.
    let survivor = stable_tasks(&addr, &app_id, 1, &mut [&mut second]).await;
    assert_eq!(survivor[0].len(), 4, "{survivor:?}");
    // lograil: the broker killed (SIGKILL) and started again while the survivor works. The
    // group comes back from its record with its member before any heartbeat; its open
    // transaction is aborted, and it runs its tasks again.
    if cluster.crash_and_restart_lograil() {
        let back = test_support::kafka::describe_streams_group(&addr, &app_id);
        assert_eq!(back.members.len(), 1, "{back:?}");
        let back = stable_tasks(&addr, &app_id, 1, &mut [&mut second]).await;
        assert_eq!(back[0].len(), 4, "{back:?}");
    }
    let want = word_counts(&lines);
    let deadline = Instant::now() + Duration::from_secs(120);
    let got = loop {
        let got = count_sequences(&bootstrap, &words_out);
        let latest: BTreeMap<String, u64> = got
            .iter()
            .map(|(w, counts)| (w.clone(), *counts.last().unwrap()))
            .collect();
        if latest == want {
            break got;
        }
        let over = latest
            .iter()
            .any(|(w, c)| want.get(w).is_none_or(|n| c > n));
        if over || Instant::now() > deadline {
            second.fail(&format!(
                "latest counts {latest:?}, want {want:?} (over: {over})"
            ));
        }
        second.alive();
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    second.stop().await;
    for (word, counts) in &got {
        let expected: Vec<u64> = (1..=want[word]).collect();
        assert_eq!(counts, &expected, "{word}'s counts, read_committed");
    }
    // Closed cleanly: the group is empty.
    let described = test_support::kafka::describe_streams_group(&addr, &app_id);
    assert_eq!(described.group_state.as_str(), "Empty", "{described:?}");
}
