//! Consumer groups across a broker crash: librdkafka members consume while the broker is
//! killed with SIGKILL and started again on the same address. Their group comes back from its
//! records in `__consumer_offsets` with its members and assignments (a KIP-848 group with its
//! epochs, a classic group Stable at its generation), so each member goes on with its
//! partitions: no revocation, no new assignment, no record read twice, every record read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use test_support::kafka::{create_topic, wait_until};
use test_support::TestBroker;

use crate::consumer_protocol::{assignments, describe, FLAGS};
use crate::groups::{produce, Worker};

#[test]
fn kip848_members_keep_their_partitions_across_a_broker_crash() {
    const BEFORE: u64 = 2000;
    const AFTER: u64 = 2000;
    let mut broker = TestBroker::start_temp(FLAGS);
    create_topic(&broker.addr, "k848r", 6);
    let env = [
        ("LOGRAIL_WORKER_PROTOCOL", "consumer"),
        ("LOGRAIL_WORKER_GROUP", "k848r-group"),
        ("LOGRAIL_WORKER_DELAY_MS", "1"),
    ];
    let workers: Vec<Worker> = (0..2)
        .map(|_| Worker::start_with(&broker.addr, "k848r", &env))
        .collect();
    wait_until(
        "two members with three partitions each",
        Duration::from_secs(60),
        || {
            let g = describe(&broker.addr, "k848r-group");
            let a = assignments(&g);
            g.group_state.as_str() == "Stable"
                && a.len() == 2
                && a.iter().all(|(_, p, t)| p == t && p.len() == 3)
                && workers
                    .iter()
                    .all(|w| w.record().assignments.last().is_some_and(|a| a.len() == 3))
        },
    );
    let members =
        |g: &kafka_protocol::messages::consumer_group_describe_response::DescribedGroup| {
            g.members
                .iter()
                .map(|m| (m.member_id.to_string(), m.member_epoch))
                .collect::<BTreeMap<String, i32>>()
        };
    let before = describe(&broker.addr, "k848r-group");
    let before_members = members(&before);
    let assigned_before: Vec<usize> = workers
        .iter()
        .map(|w| w.record().assignments.len())
        .collect();
    produce(&broker.addr, "k848r", 0..BEFORE);
    wait_until("some records read", Duration::from_secs(30), || {
        workers.iter().all(|w| !w.record().consumed.is_empty())
    });

    broker.kill9();
    broker.restart_at_same_address();
    let back = describe(&broker.addr, "k848r-group");
    assert_eq!(
        (back.group_epoch, members(&back)),
        (before.group_epoch, before_members.clone()),
        "the group came back with its members and epochs"
    );
    assert_eq!(assignments(&back), assignments(&before));
    produce(&broker.addr, "k848r", BEFORE..BEFORE + AFTER);

    let started = Instant::now();
    loop {
        let read: BTreeSet<(i32, i64)> = workers
            .iter()
            .flat_map(|w| w.record().offsets().collect::<Vec<_>>())
            .collect();
        if read.len() as u64 == BEFORE + AFTER {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "only {} of {} read after the restart",
            read.len(),
            BEFORE + AFTER
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // No rebalance: neither member was told of a new assignment, none read a record twice.
    for (i, w) in workers.iter().enumerate() {
        let record = w.record();
        assert_eq!(
            record.assignments.len(),
            assigned_before[i],
            "member {i} was reassigned: {:?}",
            record.assignments
        );
        let offsets: Vec<(i32, i64)> = record.offsets().collect();
        let distinct: BTreeSet<&(i32, i64)> = offsets.iter().collect();
        assert_eq!(
            offsets.len(),
            distinct.len(),
            "member {i} read records twice"
        );
    }
    let after = describe(&broker.addr, "k848r-group");
    assert_eq!(after.group_state.as_str(), "Stable");
    assert_eq!(
        (after.group_epoch, members(&after)),
        (before.group_epoch, before_members),
        "still the same members at the same epochs"
    );
}

/// Neither member was told of a new assignment since `assigned_before` (their `A` lines
/// then), none read a record twice.
fn no_rebalance(workers: &[Worker], assigned_before: &[usize]) {
    for (i, w) in workers.iter().enumerate() {
        let record = w.record();
        assert_eq!(
            record.assignments.len(),
            assigned_before[i],
            "member {i} was reassigned: {:?}",
            record.assignments
        );
        let offsets: Vec<(i32, i64)> = record.offsets().collect();
        let distinct: BTreeSet<&(i32, i64)> = offsets.iter().collect();
        assert_eq!(
            offsets.len(),
            distinct.len(),
            "member {i} read records twice"
        );
    }
}

/// Waits until every record of `0..count` was read by one of `workers`.
fn read_all(workers: &[Worker], count: u64) {
    wait_until("every record read", Duration::from_secs(60), || {
        let read: BTreeSet<(i32, i64)> = workers
            .iter()
            .flat_map(|w| w.record().offsets().collect::<Vec<_>>())
            .collect();
        read.len() as u64 == count
    });
}

#[test]
fn classic_members_keep_their_partitions_across_a_broker_crash() {
    let mut broker = TestBroker::start_temp(&["--group-initial-rebalance-delay-ms", "0"]);
    create_topic(&broker.addr, "classicr", 6);
    let env = [
        ("LOGRAIL_WORKER_GROUP", "classicr-group"),
        ("LOGRAIL_WORKER_DELAY_MS", "1"),
    ];
    let workers: Vec<Worker> = (0..2)
        .map(|_| Worker::start_with(&broker.addr, "classicr", &env))
        .collect();
    wait_until(
        "two members, three partitions each",
        Duration::from_secs(60),
        || {
            let last: Vec<Vec<i32>> = workers
                .iter()
                .map(|w| w.record().assignments.last().cloned().unwrap_or_default())
                .collect();
            let all: BTreeSet<i32> = last.iter().flatten().copied().collect();
            last.iter().all(|a| a.len() == 3) && all.len() == 6
        },
    );
    let assigned_before: Vec<usize> = workers
        .iter()
        .map(|w| w.record().assignments.len())
        .collect();
    produce(&broker.addr, "classicr", 0..2000);
    wait_until("some records read", Duration::from_secs(30), || {
        workers.iter().all(|w| !w.record().consumed.is_empty())
    });
    broker.kill9();
    broker.restart_at_same_address();
    produce(&broker.addr, "classicr", 2000..4000);
    read_all(&workers, 4000);
    no_rebalance(&workers, &assigned_before);
}
