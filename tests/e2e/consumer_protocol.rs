//! KIP-848 consumer groups (`group.protocol=consumer`) with librdkafka: a group of three loses
//! a member to SIGKILL mid-stream; the others keep their partitions and keep consuming while
//! the broker fences the dead one (session timeout) and hands its partitions over; every record
//! is read, duplicates only from what the dead member read past its last commit. And the
//! protocol's answers on the wire: request checks, epochs, fencing, commits by epoch, classic
//! and consumer groups side by side, the group epoch and offsets across a restart.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;

use test_support::kafka::{create_topic, name, text, wait_until};
use test_support::wire::{call, connect};
use test_support::TestBroker;

use crate::groups::{produce, Worker, WorkerLog};

pub(crate) const FLAGS: &[&str] = &[
    "--default-partitions",
    "6",
    "--group-consumer-session-timeout-ms",
    "6000",
    "--group-consumer-heartbeat-interval-ms",
    "500",
];

pub(crate) fn describe(
    addr: &str,
    group: &str,
) -> consumer_group_describe_response::DescribedGroup {
    let request =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
    let response: ConsumerGroupDescribeResponse = call(
        &mut connect(addr),
        ApiKey::ConsumerGroupDescribe,
        1,
        &request,
    );
    response.groups.into_iter().next().unwrap()
}

/// (member id, its assigned partitions, its target partitions) of a described group.
pub(crate) fn assignments(
    group: &consumer_group_describe_response::DescribedGroup,
) -> Vec<(String, Vec<i32>, Vec<i32>)> {
    let parts = |a: &consumer_group_describe_response::Assignment| {
        let mut p: Vec<i32> = a
            .topic_partitions
            .iter()
            .flat_map(|t| t.partitions.clone())
            .collect();
        p.sort_unstable();
        p
    };
    group
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.to_string(),
                parts(&m.assignment),
                parts(&m.target_assignment),
            )
        })
        .collect()
}

#[test]
fn kip848_group_of_three_loses_a_member_and_every_record_is_read() {
    const RECORDS: u64 = 6000;
    let broker = TestBroker::start_temp(FLAGS);
    create_topic(&broker.addr, "k848", 6);
    let env = [
        ("LOGRAIL_WORKER_PROTOCOL", "consumer"),
        ("LOGRAIL_WORKER_GROUP", "k848-group"),
        ("LOGRAIL_WORKER_DELAY_MS", "4"),
    ];
    let mut workers: Vec<Worker> = (0..3)
        .map(|_| Worker::start_with(&broker.addr, "k848", &env))
        .collect();
    // The group converges before any record exists: two partitions each, disjoint.
    wait_until(
        "three members with two partitions each",
        Duration::from_secs(60),
        || {
            let last: Vec<Vec<i32>> = workers
                .iter()
                .map(|w| w.record().assignments.last().cloned().unwrap_or_default())
                .collect();
            let all: BTreeSet<i32> = last.iter().flatten().copied().collect();
            last.iter().all(|a| a.len() == 2) && all.len() == 6
        },
    );
    let described = describe(&broker.addr, "k848-group");
    assert_eq!(described.error_code, 0);
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.assignor_name.as_str(), "uniform");
    assert_eq!(described.members.len(), 3);
    for (member, assigned, target) in assignments(&described) {
        assert_eq!(assigned, target, "{member} not at its target");
    }
    produce(&broker.addr, "k848", 0..RECORDS);

    while workers[0].record().consumed.len() < 100 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut dead = workers.remove(0);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let killed_at = Instant::now();
    let dead = dead.record();
    let orphaned: Vec<i32> = dead.assignments.last().unwrap().clone();
    let survivors_before: Vec<usize> = workers.iter().map(|w| w.record().consumed.len()).collect();
    let own: Vec<Vec<i32>> = workers
        .iter()
        .map(|w| w.record().assignments.last().unwrap().clone())
        .collect();

    // The survivors take the orphans over once the dead member is fenced.
    let mut took_over = None;
    let mut consumed_during = vec![0usize; workers.len()];
    loop {
        let records: Vec<_> = workers.iter().map(Worker::record).collect();
        if took_over.is_none() {
            let have_orphans = records.iter().any(|r| {
                r.assignments
                    .last()
                    .is_some_and(|a| a.iter().any(|p| orphaned.contains(p)))
            });
            if have_orphans {
                took_over = Some(killed_at.elapsed());
                for (i, r) in records.iter().enumerate() {
                    consumed_during[i] = r.consumed.len() - survivors_before[i];
                }
            }
        }
        let all: BTreeSet<(i32, i64)> = records
            .iter()
            .flat_map(|r| r.offsets().collect::<Vec<_>>())
            .chain(dead.offsets())
            .collect();
        if all.len() as u64 == RECORDS {
            break;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(90),
            "only {} of {RECORDS} read",
            all.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = took_over.expect("the orphaned partitions were handed over");
    println!("orphans {orphaned:?} handed over {took:?} after the kill; survivors read {consumed_during:?} meanwhile");
    // No barrier: each survivor kept its partitions (never revoked) and kept reading them
    // while the dead member's session ran out.
    for (i, w) in workers.iter().enumerate() {
        let record = w.record();
        let since_kill = &record.assignments[record.assignments.len().min(
            record
                .assignments
                .iter()
                .position(|a| a == &own[i])
                .unwrap_or(0),
        )..];
        for a in since_kill {
            assert!(
                own[i].iter().all(|p| a.contains(p)),
                "survivor {i} lost one of {:?}: {a:?}",
                own[i]
            );
        }
        assert!(
            consumed_during[i] > 0,
            "survivor {i} read nothing while the group rebalanced"
        );
    }
    // At convergence: two members, three partitions each, disjoint and complete, at target.
    wait_until(
        "two members at their targets",
        Duration::from_secs(30),
        || {
            let g = describe(&broker.addr, "k848-group");
            let a = assignments(&g);
            let all: BTreeSet<i32> = a.iter().flat_map(|(_, p, _)| p.clone()).collect();
            g.members.len() == 2
                && a.iter().all(|(_, p, t)| p == t && p.len() == 3)
                && all.len() == 6
                && g.group_state.as_str() == "Stable"
        },
    );
    // Our CLI shows the consumer-protocol group, its type and its members.
    let addr = broker.addr.as_str();
    let out = test_support::lograil_stdout(&[
        "group",
        "describe",
        "k848-group",
        "--json",
        "--bootstrap-server",
        addr,
    ]);
    let described: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(described["type"], "Consumer", "{out}");
    assert_eq!(described["state"], "Stable", "{out}");
    assert_eq!(described["protocol"], "uniform", "{out}");
    assert_eq!(described["members"].as_array().unwrap().len(), 2, "{out}");
    let out = test_support::lograil_stdout(&["group", "list", "--bootstrap-server", addr]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("k848-group") && l.contains("Consumer") && l.contains("Stable")),
        "{out}"
    );
    // Duplicates only where the dead member read past its last commit.
    let mut seen: HashMap<(i32, i64), usize> = HashMap::new();
    for c in workers
        .iter()
        .flat_map(|w| w.record().offsets().collect::<Vec<_>>())
        .chain(dead.offsets())
    {
        *seen.entry(c).or_default() += 1;
    }
    let committed_by_dead: BTreeMap<i32, i64> =
        dead.commits
            .iter()
            .fold(BTreeMap::new(), |mut m, (p, next, _)| {
                let e = m.entry(*p).or_insert(0);
                *e = (*e).max(*next);
                m
            });
    let duplicates: Vec<(i32, i64)> = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(c, _)| c)
        .collect();
    for (p, o) in &duplicates {
        // Who read it how often, for a failure's message: librdkafka may hand a survivor the
        // record it was taking when a rebalance paused its partitions once more.
        let times = |log: &WorkerLog| log.offsets().filter(|c| *c == (*p, *o)).count();
        let readers: Vec<String> = workers
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("survivor {i}"), times(&w.record())))
            .chain([("the dead member".to_string(), times(&dead))])
            .filter(|(_, n)| *n > 0)
            .map(|(who, n)| format!("{who} {n}x"))
            .collect();
        assert!(
            orphaned.contains(p) && committed_by_dead.get(p).is_none_or(|next| o >= next),
            "({p}, {o}) read twice but not past the dead member's last commit: read by {readers:?}; \
             orphaned {orphaned:?}; the dead member's last commit {:?}",
            committed_by_dead.get(p)
        );
    }
    println!(
        "{} duplicates, all past the dead member's last commit",
        duplicates.len()
    );
}

fn heartbeat(
    addr: &str,
    version: i16,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    call(
        &mut connect(addr),
        ApiKey::ConsumerGroupHeartbeat,
        version,
        &request,
    )
}

fn join(group: &str, member: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| name(t)).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

fn beat(
    group: &str,
    member: &str,
    epoch: i32,
    owned: Option<Vec<TopicPartitions>>,
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
        .with_topic_partitions(owned)
}

fn owned(response: &ConsumerGroupHeartbeatResponse) -> Vec<TopicPartitions> {
    response
        .assignment
        .as_ref()
        .map(|a| {
            a.topic_partitions
                .iter()
                .map(|t| {
                    TopicPartitions::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(t.partitions.clone())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn count(response: &ConsumerGroupHeartbeatResponse) -> usize {
    response.assignment.as_ref().map_or(0, |a| {
        a.topic_partitions.iter().map(|t| t.partitions.len()).sum()
    })
}

fn commit(addr: &str, version: i16, group: &str, member: &str, epoch: i32) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(text(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name("wire"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(7)])]);
    let response: OffsetCommitResponse =
        call(&mut connect(addr), ApiKey::OffsetCommit, version, &request);
    response.topics[0].partitions[0].error_code
}

#[test]
fn kip848_wire_answers_are_kafkas() {
    let mut broker = TestBroker::start_temp(FLAGS);
    let addr = broker.addr.clone();
    create_topic(&addr, "wire", 4);
    let code = |e: ResponseError| e.code();

    // Bad first heartbeats.
    // Neither names nor a regex (an empty list would join subscribed to nothing, as Kafka 4.4).
    let no_topics = join("g", "m1", &[]).with_subscribed_topic_names(None);
    assert_eq!(
        heartbeat(&addr, 1, no_topics).error_code,
        code(ResponseError::InvalidRequest)
    );
    let no_member = join("g", "", &["wire"]);
    assert_eq!(
        heartbeat(&addr, 1, no_member).error_code,
        code(ResponseError::InvalidRequest)
    );
    let odd_assignor = join("g", "m1", &["wire"]).with_server_assignor(Some(text("sticky")));
    assert_eq!(
        heartbeat(&addr, 1, odd_assignor).error_code,
        code(ResponseError::UnsupportedAssignor)
    );
    let regex = join("g", "m1", &["wire"]).with_subscribed_topic_regex(Some(text("w(.*")));
    let refused = heartbeat(&addr, 1, regex);
    assert_eq!(
        refused.error_code,
        code(ResponseError::InvalidRegularExpression)
    );
    assert!(
        refused
            .error_message
            .as_deref()
            .is_some_and(|m| m.starts_with("SubscribedTopicRegex `w(.*` is not a valid")),
        "{:?}",
        refused.error_message
    );
    assert_eq!(
        heartbeat(&addr, 1, beat("g", "nobody", 3, None)).error_code,
        code(ResponseError::UnknownMemberId)
    );

    // v0 names the member; it gets all four partitions at epoch 1.
    let a = heartbeat(&addr, 0, join("g", "", &["wire"]));
    assert_eq!(a.error_code, 0, "{:?}", a.error_message);
    let a_id = a.member_id.clone().unwrap().to_string();
    assert!(!a_id.is_empty());
    assert_eq!((a.member_epoch, count(&a)), (1, 4));
    assert_eq!(
        heartbeat(&addr, 1, beat("g", &a_id, 9, None)).error_code,
        code(ResponseError::FencedMemberEpoch)
    );
    // A second member joins at epoch 2 with nothing: a's two partitions must be revoked first.
    let b = heartbeat(&addr, 1, join("g", "m-b", &["wire"]));
    assert_eq!((b.error_code, b.member_epoch, count(&b)), (0, 2, 0));
    let a2 = heartbeat(&addr, 1, beat("g", &a_id, 1, Some(owned(&a))));
    assert_eq!(
        (a2.member_epoch, count(&a2)),
        (1, 2),
        "a keeps its epoch and two partitions"
    );
    // Commits by epoch: a is at 1 (v9 only), b at 2.
    assert_eq!(commit(&addr, 9, "g", &a_id, 1), 0);
    assert_eq!(
        commit(&addr, 9, "g", &a_id, 2),
        code(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        commit(&addr, 8, "g", &a_id, 1),
        code(ResponseError::UnsupportedVersion)
    );
    assert_eq!(
        commit(&addr, 9, "g", "stranger", 1),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        commit(&addr, 9, "g", "", -1),
        code(ResponseError::UnknownMemberId)
    );
    // b gets nothing until a acknowledges the revocation by heartbeating without them.
    let b2 = heartbeat(&addr, 1, beat("g", "m-b", 2, Some(Vec::new())));
    assert_eq!(count(&b2), 0);
    let a3 = heartbeat(&addr, 1, beat("g", &a_id, 1, Some(owned(&a2))));
    assert_eq!(a3.member_epoch, 2);
    let b3 = heartbeat(&addr, 1, beat("g", "m-b", 2, Some(Vec::new())));
    assert_eq!((b3.member_epoch, count(&b3)), (2, 2));
    let g = describe(&addr, "g");
    assert_eq!(
        (g.group_state.as_str(), g.group_epoch, g.assignment_epoch),
        ("Stable", 2, 2)
    );

    // Classic and consumer side by side: a live consumer group takes no classic member.
    let classic = JoinGroupRequest::default()
        .with_group_id(GroupId(text("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(text("range"))]);
    let joined: JoinGroupResponse = call(&mut connect(&addr), ApiKey::JoinGroup, 5, &classic);
    assert_eq!(
        joined.error_code,
        code(ResponseError::InconsistentGroupProtocol)
    );
    // A classic member's request is checked as the classic coordinator checks it.
    let endless = classic.clone().with_session_timeout_ms(i32::MAX);
    let joined: JoinGroupResponse = call(&mut connect(&addr), ApiKey::JoinGroup, 5, &endless);
    assert_eq!(
        joined.error_code,
        code(ResponseError::InvalidSessionTimeout)
    );
    let listed: ListGroupsResponse = call(
        &mut connect(&addr),
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default().with_types_filter(vec![text("consumer")]),
    );
    let row = listed
        .groups
        .iter()
        .find(|l| l.group_id.as_str() == "g")
        .unwrap();
    assert_eq!(
        (row.group_type.as_str(), row.protocol_type.as_str()),
        ("consumer", "consumer")
    );
    let deleted: DeleteGroupsResponse = call(
        &mut connect(&addr),
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text("g"))]),
    );
    assert_eq!(
        deleted.results[0].error_code,
        code(ResponseError::NonEmptyGroup)
    );

    // Both leave; the group is empty, keeps its offsets and epoch over a restart.
    for id in [a_id.as_str(), "m-b"] {
        let left = heartbeat(&addr, 1, beat("g", id, -1, None));
        assert_eq!((left.error_code, left.member_epoch), (0, -1));
    }
    let empty = describe(&addr, "g");
    assert_eq!(
        (empty.group_state.as_str(), empty.group_epoch),
        ("Empty", 4)
    );
    // An empty consumer group takes the commit of a consumer outside group management.
    assert_eq!(commit(&addr, 9, "g", "", -1), 0);
    broker.stop();
    broker.restart();
    let addr = broker.addr.clone();
    let back = describe(&addr, "g");
    assert_eq!(
        (back.error_code, back.group_epoch),
        (0, 4),
        "the epoch survives a restart"
    );
    let c = heartbeat(&addr, 1, join("g", "m-c", &["wire"]));
    assert_eq!(
        (c.member_epoch, count(&c)),
        (5, 4),
        "the epochs go on from there"
    );
    let fetched: OffsetFetchResponse = call(
        &mut connect(&addr),
        ApiKey::OffsetFetch,
        7,
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(text("g")))
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name("wire"))
                    .with_partition_indexes(vec![0]),
            ])),
    );
    assert_eq!(fetched.topics[0].partitions[0].committed_offset, 7);
    // v9: a member fetches with its id and epoch; a stale epoch is refused, an admin is not.
    let fetch_v9 = |member: Option<&str>, epoch: i32| {
        let group = offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text("g")))
            .with_member_id(member.map(text))
            .with_member_epoch(epoch)
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(name("wire"))
                    .with_partition_indexes(vec![0]),
            ]));
        let response: OffsetFetchResponse = call(
            &mut connect(&addr),
            ApiKey::OffsetFetch,
            9,
            &OffsetFetchRequest::default().with_groups(vec![group]),
        );
        let g = response.groups.into_iter().next().unwrap();
        let offset = g.topics.first().map(|t| t.partitions[0].committed_offset);
        (g.error_code, offset)
    };
    assert_eq!(fetch_v9(Some("m-c"), 5), (0, Some(7)));
    assert_eq!(
        fetch_v9(Some("m-c"), 4).0,
        code(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        fetch_v9(Some("stranger"), 5).0,
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(fetch_v9(None, -1), (0, Some(7)));

    // A member that stops heartbeating is fenced after the session timeout (6 s here).
    wait_until("the silent member fenced", Duration::from_secs(30), || {
        describe(&addr, "g").members.is_empty()
    });
    assert_eq!(
        heartbeat(&addr, 1, beat("g", "m-c", 5, None)).error_code,
        code(ResponseError::UnknownMemberId)
    );
    // An empty consumer group may become a classic group.
    let joined: JoinGroupResponse = call(&mut connect(&addr), ApiKey::JoinGroup, 3, &classic);
    assert_eq!(joined.error_code, 0);
}
