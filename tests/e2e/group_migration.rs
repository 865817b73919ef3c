//! KIP-848's online migration with librdkafka: two classic members (`group.protocol=classic`,
//! the eager range assignor) consume a topic; a third member with `group.protocol=consumer`
//! joins the live group, which becomes a consumer-protocol group, its classic members going on
//! with JoinGroup/SyncGroup/Heartbeat under the broker's assignor (two partitions each); the
//! consumer-protocol member is killed, fenced, and the group becomes classic again (three
//! partitions each). Every record is read; one is read twice only when its reader lost its
//! partition before committing past it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use test_support::kafka::{create_topic, wait_until};
use test_support::wire::{call, connect};
use test_support::TestBroker;

use crate::consumer_protocol::{describe, FLAGS};
use crate::groups::{produce, Worker};

const GROUP: &str = "migrating";

/// The group's type as ListGroups shows it ("classic" or "consumer", as Kafka sends them).
fn group_type(addr: &str) -> String {
    let listed: ListGroupsResponse = call(
        &mut connect(addr),
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default(),
    );
    listed
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == GROUP)
        .map(|g| g.group_type.to_string())
        .unwrap_or_default()
}

fn last_assignments(workers: &[&Worker]) -> Vec<Vec<i32>> {
    workers
        .iter()
        .map(|w| w.record().assignments.last().cloned().unwrap_or_default())
        .collect()
}

/// Whether the workers hold `each` partitions apiece, all six between them.
fn even(workers: &[&Worker], each: usize) -> bool {
    let last = last_assignments(workers);
    let all: BTreeSet<i32> = last.iter().flatten().copied().collect();
    last.iter().all(|a| a.len() == each) && all.len() == 6
}

#[test]
fn a_live_classic_group_upgrades_to_the_consumer_protocol_and_back() {
    let broker = TestBroker::start_temp(FLAGS);
    let addr = broker.addr.clone();
    create_topic(&addr, "mig", 6);
    let classic_env = [
        ("LOGRAIL_WORKER_GROUP", GROUP),
        ("LOGRAIL_WORKER_DELAY_MS", "1"),
    ];
    let consumer_env = [
        ("LOGRAIL_WORKER_GROUP", GROUP),
        ("LOGRAIL_WORKER_DELAY_MS", "1"),
        ("LOGRAIL_WORKER_PROTOCOL", "consumer"),
    ];
    let classic: Vec<Worker> = (0..2)
        .map(|_| Worker::start_with(&addr, "mig", &classic_env))
        .collect();
    let classic_refs: Vec<&Worker> = classic.iter().collect();
    wait_until(
        "two classic members, three partitions each",
        Duration::from_secs(60),
        || even(&classic_refs, 3),
    );
    assert_eq!(group_type(&addr), "classic");
    produce(&addr, "mig", 0..2000);
    wait_until("the classic members read", Duration::from_secs(30), || {
        classic.iter().all(|w| !w.record().consumed.is_empty())
    });

    // A consumer-protocol member joins the live group: it is upgraded, and the broker's
    // assignor gives each of the three two partitions.
    let mut newcomer = Worker::start_with(&addr, "mig", &consumer_env);
    let all: Vec<&Worker> = classic.iter().chain([&newcomer]).collect();
    wait_until(
        "three members, two partitions each",
        Duration::from_secs(60),
        || even(&all, 2),
    );
    assert_eq!(group_type(&addr), "consumer");
    let described = describe(&addr, GROUP);
    let types: BTreeMap<i8, usize> = described.members.iter().fold(BTreeMap::new(), |mut m, x| {
        *m.entry(x.member_type).or_default() += 1;
        m
    });
    assert_eq!(
        types,
        BTreeMap::from([(0, 2), (1, 1)]),
        "two classic members, one consumer"
    );
    wait_until("the group stable", Duration::from_secs(30), || {
        describe(&addr, GROUP).group_state.as_str() == "Stable"
    });
    produce(&addr, "mig", 2000..4000);
    wait_until("the newcomer reads", Duration::from_secs(30), || {
        !newcomer.record().consumed.is_empty()
    });

    // The consumer-protocol member dies: fenced after its session timeout, it leaves classic
    // members only, and the group is classic again.
    newcomer.child.kill().unwrap();
    newcomer.child.wait().unwrap();
    let killed = Instant::now();
    wait_until(
        "two classic members again, three partitions each",
        Duration::from_secs(60),
        || even(&classic_refs, 3),
    );
    println!("classic again {:?} after the kill", killed.elapsed());
    assert_eq!(group_type(&addr), "classic");
    produce(&addr, "mig", 4000..6000);

    let everyone: Vec<&Worker> = classic.iter().chain([&newcomer]).collect();
    wait_until("all 6000 records read", Duration::from_secs(60), || {
        let read: BTreeSet<(i32, i64)> = everyone
            .iter()
            .flat_map(|w| w.record().offsets().collect::<Vec<_>>())
            .collect();
        read.len() == 6000
    });
    let logs: Vec<_> = everyone.iter().map(|w| w.record()).collect();
    let mut readers: BTreeMap<(i32, i64), Vec<usize>> = BTreeMap::new();
    for (i, log) in logs.iter().enumerate() {
        for r in log.offsets() {
            readers.entry(r).or_default().push(i);
        }
    }
    let twice: Vec<_> = readers.iter().filter(|(_, by)| by.len() > 1).collect();
    for ((p, o), by) in &twice {
        assert!(
            by.iter().any(|i| logs[*i].left_uncommitted(*p, *o)),
            "({p}, {o}) read by {by:?}, none of whom lost it uncommitted"
        );
    }
    println!(
        "{} records read twice, each past its reader's last commit",
        twice.len()
    );
}

#[test]
fn with_the_migration_policy_disabled_a_live_classic_group_stays_classic() {
    let mut flags = FLAGS.to_vec();
    flags.extend(["--group-consumer-migration-policy", "disabled"]);
    let broker = TestBroker::start_temp(&flags);
    let addr = broker.addr.clone();
    create_topic(&addr, "mig", 6);
    let classic = Worker::start_with(&addr, "mig", &[("LOGRAIL_WORKER_GROUP", GROUP)]);
    wait_until(
        "the classic member has all six",
        Duration::from_secs(60),
        || even(&[&classic], 6),
    );
    let join = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(test_support::kafka::text(GROUP)))
        .with_member_id(test_support::kafka::text("newcomer"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![test_support::kafka::name("mig")]))
        .with_topic_partitions(Some(Vec::new()));
    let refused: ConsumerGroupHeartbeatResponse = call(
        &mut connect(&addr),
        ApiKey::ConsumerGroupHeartbeat,
        1,
        &join,
    );
    assert_eq!(
        refused.error_code,
        kafka_protocol::error::ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(group_type(&addr), "classic");
    // A policy that is none of Kafka's stops the broker at start.
    let (started, _, err) =
        test_support::lograil(&["serve", "--group-consumer-migration-policy", "sideways"]);
    assert!(!started);
    assert!(
        err.contains("bidirectional, upgrade, downgrade, disabled"),
        "{err}"
    );
}
