#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

use super::assignor::Tasks;
use super::topology::{Problem, Status, Subtopology, TopicInfo, Topology};
use super::{Beat, StreamsConfig, StreamsGroups};

fn info(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo {
        name: name.into(),
        partitions,
        replication: 0,
        configs: vec![("cleanup.policy".into(), "compact".into())],
    }
}

/// Kafka Streams' word count: subtopology 0 reads `lines` and writes the repartition topic,
/// subtopology 1 reads it and keeps a changelogged count.
fn word_count() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["lines".into()],
                source_regex: vec![],
                changelogs: vec![],
                repartition_sinks: vec!["app-words-repartition".into()],
                repartition_sources: vec![],
                copartition_groups: vec![],
            },
            Subtopology {
                id: "1".into(),
                source_topics: vec!["app-words-repartition".into()],
                source_regex: vec![],
                changelogs: vec![info("app-counts-changelog", 0)],
                repartition_sinks: vec![],
                repartition_sources: vec![info("app-words-repartition", 0)],
                copartition_groups: vec![],
            },
        ],
    }
}

fn topics(have: &[(&str, i32)]) -> impl Fn(&str) -> Option<i32> {
    let have: BTreeMap<String, i32> = have.iter().map(|(t, n)| (t.to_string(), *n)).collect();
    move |t: &str| have.get(t).copied()
}

#[test]
fn a_missing_source_topic_stops_the_topology() {
    let configured = word_count().configure(&topics(&[]));
    assert!(configured.tasks.is_empty());
    assert_eq!(
        configured.problem,
        Some(Problem::Status(
            Status::MissingSourceTopics,
            "Source topics lines are missing.".into()
        ))
    );
}

#[test]
fn internal_topics_take_their_partition_counts_from_the_sources() {
    let configured = word_count().configure(&topics(&[("lines", 3)]));
    assert_eq!(
        configured.tasks,
        BTreeMap::from([("0".into(), 3), ("1".into(), 3)])
    );
    let missing: Vec<(&str, i32)> = configured
        .missing
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(
        missing,
        [("app-counts-changelog", 3), ("app-words-repartition", 3)]
    );
    assert_eq!(configured.missing[0].configs, info("x", 0).configs);
    assert!(matches!(
        configured.problem,
        Some(Problem::Status(Status::MissingInternalTopics, _))
    ));
    // Once created, the topology is ready.
    let have = [
        ("lines", 3),
        ("app-words-repartition", 3),
        ("app-counts-changelog", 3),
    ];
    let ready = word_count().configure(&topics(&have));
    assert!(ready.ready(), "{ready:?}");
    assert!(ready.missing.is_empty());
}

#[test]
fn an_internal_topic_of_the_wrong_width_is_incorrectly_partitioned() {
    let have = [("lines", 3), ("app-words-repartition", 2)];
    let configured = word_count().configure(&topics(&have));
    assert!(matches!(
        configured.problem,
        Some(Problem::Status(Status::IncorrectlyPartitionedTopics, _))
    ));
}

#[test]
fn a_repartition_topic_nobody_writes_is_an_invalid_topology() {
    let mut topology = word_count();
    topology.subtopologies[0].repartition_sinks.clear();
    let configured = topology.configure(&topics(&[("lines", 3)]));
    assert!(matches!(configured.problem, Some(Problem::Invalid(_))));
}

#[test]
fn copartitioned_sources_must_be_equally_wide() {
    let mut topology = word_count();
    topology.subtopologies[0].source_topics.push("more".into());
    topology.subtopologies[0].copartition_groups =
        vec![["lines".to_string(), "more".to_string()].into()];
    let configured = topology.configure(&topics(&[("lines", 3), ("more", 2)]));
    assert!(matches!(
        configured.problem,
        Some(Problem::Status(Status::IncorrectlyPartitionedTopics, _))
    ));
}

fn config() -> StreamsConfig {
    StreamsConfig {
        initial_delay: Duration::from_millis(100),
        assignment_interval: Duration::ZERO,
        ..StreamsConfig::default()
    }
}

fn join(member: &str, process: &str) -> Beat {
    Beat {
        member_id: member.into(),
        epoch: 0,
        rebalance_timeout_ms: 30_000,
        topology: Some(word_count()),
        owned: Some(Tasks::default()),
        process_id: Some(process.into()),
        ..Beat::default()
    }
}

fn beat(member: &str, epoch: i32, owned: &Tasks) -> Beat {
    Beat {
        member_id: member.into(),
        epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        ..Beat::default()
    }
}

const READY: [(&str, i32); 3] = [
    ("lines", 2),
    ("app-words-repartition", 2),
    ("app-counts-changelog", 2),
];

#[test]
fn the_first_member_waits_out_the_initial_delay_then_runs_every_task() {
    let groups = StreamsGroups::new(config());
    let have = topics(&READY);
    let t0 = Instant::now();
    let first = groups.heartbeat("g", join("a", "p1"), t0, &have).unwrap();
    assert_eq!(first.tasks, Some(Tasks::default()));
    assert_eq!(first.status[0].0, Status::AssignmentDelayed);
    let later = t0 + Duration::from_millis(200);
    let second = groups
        .heartbeat(
            "g",
            beat("a", first.member_epoch, &Tasks::default()),
            later,
            &have,
        )
        .unwrap();
    let tasks = second.tasks.expect("the tasks changed");
    assert_eq!(tasks.active.len(), 4);
    assert!(second.status.is_empty(), "{:?}", second.status);
    assert_eq!(groups.describe("g").unwrap().state(), "Stable");
}

#[test]
fn missing_internal_topics_are_asked_for_and_nothing_is_assigned() {
    let groups = StreamsGroups::new(config());
    let have = topics(&[("lines", 2)]);
    let t0 = Instant::now();
    let answer = groups.heartbeat("g", join("a", "p1"), t0, &have).unwrap();
    let names: Vec<&str> = answer.create.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["app-counts-changelog", "app-words-repartition"]);
    assert!(answer
        .status
        .iter()
        .any(|(s, _)| *s == Status::MissingInternalTopics));
    let later = t0 + Duration::from_millis(200);
    let again = groups
        .heartbeat(
            "g",
            beat("a", answer.member_epoch, &Tasks::default()),
            later,
            &have,
        )
        .unwrap();
    assert!(again.tasks.is_none_or(|t| t.is_empty()));
    assert_eq!(groups.describe("g").unwrap().state(), "NotReady");
}

/// A second member gets its tasks only once the first has given them up.
#[test]
fn a_task_moves_only_after_its_owner_gave_it_up() {
    let groups = StreamsGroups::new(StreamsConfig {
        initial_delay: Duration::ZERO,
        assignment_interval: Duration::ZERO,
        ..StreamsConfig::default()
    });
    let have = topics(&READY);
    let now = Instant::now();
    let a = groups.heartbeat("g", join("a", "p1"), now, &have).unwrap();
    let a_tasks = a.tasks.unwrap();
    assert_eq!(a_tasks.active.len(), 4);
    let b = groups.heartbeat("g", join("b", "p2"), now, &have).unwrap();
    // Nothing free yet: a still runs every task.
    assert!(b.tasks.as_ref().unwrap().active.is_empty(), "{b:?}");
    let b_epoch = b.member_epoch;
    // a is told to give two up, keeping its epoch until it has.
    let a2 = groups
        .heartbeat("g", beat("a", a.member_epoch, &a_tasks), now, &have)
        .unwrap();
    let kept = a2.tasks.unwrap();
    assert_eq!(kept.active.len(), 2);
    assert_eq!(a2.member_epoch, a.member_epoch);
    // Still listing them: b waits.
    let b2 = groups
        .heartbeat("g", beat("b", b_epoch, &Tasks::default()), now, &have)
        .unwrap();
    assert!(b2.tasks.is_none(), "{b2:?}");
    // a gives them up, moves on; then b gets them.
    let a3 = groups
        .heartbeat("g", beat("a", a2.member_epoch, &kept), now, &have)
        .unwrap();
    assert!(a3.member_epoch > a.member_epoch);
    let b3 = groups
        .heartbeat("g", beat("b", b_epoch, &Tasks::default()), now, &have)
        .unwrap();
    let theirs = b3.tasks.unwrap();
    assert_eq!(theirs.active.len(), 2);
    assert!(theirs.active.is_disjoint(&kept.active));
    assert_eq!(groups.describe("g").unwrap().state(), "Stable");
    // b leaves: its tasks are a's again.
    groups.leave("g", "b", false).unwrap();
    let a4 = groups
        .heartbeat("g", beat("a", a3.member_epoch, &kept), now, &have)
        .unwrap();
    assert_eq!(a4.tasks.unwrap().active.len(), 4);
}

#[test]
fn a_changed_topology_and_a_stale_epoch_are_refused() {
    let groups = StreamsGroups::new(config());
    let have = topics(&READY);
    let now = Instant::now();
    let a = groups.heartbeat("g", join("a", "p1"), now, &have).unwrap();
    let mut other = join("b", "p1");
    let mut topology = word_count();
    topology.subtopologies[0].source_topics.push("more".into());
    other.topology = Some(topology);
    let refused = groups.heartbeat("g", other, now, &have).unwrap_err();
    assert_eq!(refused.0, ResponseError::InvalidRequest);
    let ahead = beat("a", a.member_epoch + 5, &Tasks::default());
    let fenced = groups.heartbeat("g", ahead, now, &have).unwrap_err();
    assert_eq!(fenced.0, ResponseError::FencedMemberEpoch);
    let unknown = groups
        .heartbeat("g", beat("zz", 3, &Tasks::default()), now, &have)
        .unwrap_err();
    assert_eq!(unknown.0, ResponseError::UnknownMemberId);
    // A group the broker does not know (deleted, or its record lost) tells the member to
    // rejoin; Kafka's GROUP_ID_NOT_FOUND would stop the Streams client.
    let gone = groups
        .heartbeat("h", beat("a", 3, &Tasks::default()), now, &have)
        .unwrap_err();
    assert_eq!(gone.0, ResponseError::UnknownMemberId);
    assert!(groups.describe("h").is_none());
}

#[test]
fn a_silent_member_is_fenced_and_a_shutdown_request_reaches_everyone() {
    let groups = StreamsGroups::new(config());
    let have = topics(&READY);
    let now = Instant::now();
    groups.heartbeat("g", join("a", "p1"), now, &have).unwrap();
    let mut b = join("b", "p2");
    b.shutdown = true;
    let answer = groups.heartbeat("g", b, now, &have).unwrap();
    assert!(answer
        .status
        .iter()
        .any(|(s, _)| *s == Status::ShutdownApplication));
    let later = now + groups.config.session_timeout + Duration::from_secs(1);
    let gone = groups.tick(later);
    assert_eq!(gone.len(), 2);
    assert_eq!(groups.describe("g").unwrap().state(), "Empty");
    assert!(groups.describe("g").unwrap().shutdown_by.is_none());
}

#[test]
fn a_topology_over_the_task_cap_is_invalid() {
    let configured = word_count().configure(&topics(&[("lines", 600_000)]));
    assert!(
        matches!(&configured.problem, Some(Problem::Invalid(why)) if why.contains("cap")),
        "{configured:?}"
    );
}

mod model {
    //! Random joins (two processes), leaves, heartbeats and silences: at every step no
    //! active task is run by two members, no process holds a task twice, and once every
    //! member has heartbeated enough each runs exactly its target and the targets cover every
    //! task.

    use std::collections::{BTreeMap, BTreeSet};
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::super::assignor::{Task, Tasks};
    use super::super::{Beat, StreamsConfig, StreamsGroupRecord, StreamsGroups};
    use super::{beat, join, topics, READY};

    #[derive(Debug, Clone)]
    enum Step {
        Join(usize),
        Leave(usize),
        Beat(usize),
        Silence,
        /// The broker restarts: the group comes back from its record, its clients go on.
        Restart,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..4usize).prop_map(Step::Join),
            (0..4usize).prop_map(Step::Leave),
            (0..4usize).prop_map(Step::Beat),
            (0..4usize).prop_map(Step::Beat),
            Just(Step::Silence),
            Just(Step::Restart),
        ]
    }

    /// What a client runs (after giving up what it was last told not to).
    #[derive(Debug, Default, Clone)]
    struct Client {
        epoch: i32,
        runs: Tasks,
    }

    fn process(m: usize) -> String {
        format!("p{}", m % 2)
    }

    fn send(
        groups: &StreamsGroups,
        clients: &mut BTreeMap<usize, Client>,
        m: usize,
        b: Beat,
        now: Instant,
    ) -> bool {
        let have = topics(&READY);
        match groups.heartbeat("g", b, now, &have) {
            Ok(answer) => {
                let c = clients.entry(m).or_default();
                c.epoch = answer.member_epoch;
                if let Some(tasks) = answer.tasks {
                    c.runs = tasks;
                }
                true
            }
            Err(_) => {
                clients.remove(&m);
                false
            }
        }
    }

    fn check_exclusive(groups: &StreamsGroups) {
        let Some(group) = groups.describe("g") else {
            return;
        };
        let mut active: BTreeSet<&Task> = BTreeSet::new();
        let mut per_process: BTreeMap<&str, BTreeSet<&Task>> = BTreeMap::new();
        for m in group.members.values() {
            for t in m.assigned.active.iter().chain(&m.revoking.active) {
                assert!(active.insert(t), "{t:?} active twice: {group:?}");
            }
            let held = per_process.entry(m.process_id.as_str()).or_default();
            let all = m.assigned.active.iter().chain(&m.assigned.standby);
            for t in all {
                assert!(held.insert(t), "{t:?} twice in {}: {group:?}", m.process_id);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn no_task_runs_twice_and_the_group_converges(steps in proptest::collection::vec(step(), 1..50)) {
            let config = StreamsConfig {
                initial_delay: Duration::ZERO,
                assignment_interval: Duration::ZERO,
                standbys: 1,
                ..StreamsConfig::default()
            };
            let mut groups = StreamsGroups::new(config.clone());
            let mut stored: BTreeMap<String, StreamsGroupRecord> = BTreeMap::new();
            let mut clients: BTreeMap<usize, Client> = BTreeMap::new();
            let mut now = Instant::now();
            let name = |m: usize| format!("m{m}");
            for s in steps {
                match s {
                    Step::Join(m) => {
                        if let std::collections::btree_map::Entry::Vacant(e) = clients.entry(m) {
                            e.insert(Client::default());
                            send(&groups, &mut clients, m, join(&name(m), &process(m)), now);
                        }
                    }
                    Step::Leave(m) => {
                        if clients.remove(&m).is_some() {
                            let _ = groups.leave("g", &name(m), false);
                        }
                    }
                    Step::Beat(m) => {
                        if let Some(c) = clients.get(&m).cloned() {
                            send(&groups, &mut clients, m, beat(&name(m), c.epoch, &c.runs), now);
                        }
                    }
                    Step::Silence => {
                        now += Duration::from_secs(60);
                        for (_, m) in groups.tick(now) {
                            let i: usize = m[1..].parse().unwrap();
                            clients.remove(&i);
                        }
                    }
                    Step::Restart => {
                        groups = StreamsGroups::new(config.clone());
                        groups.restore(stored.clone().into_iter().collect(), now);
                        // No member is fenced by it: each goes on at its epoch.
                        for (m, c) in clients.clone() {
                            let b = beat(&name(m), c.epoch, &c.runs);
                            prop_assert!(send(&groups, &mut clients, m, b, now), "m{m} fenced");
                        }
                    }
                }
                // Every change is written before it is answered.
                for (id, record) in groups.unpersisted() {
                    match record {
                        Some(record) => stored.insert(id, record),
                        None => stored.remove(&id),
                    };
                }
                check_exclusive(&groups);
            }
            // Every member heartbeats until nothing changes: each runs its target.
            for _ in 0..4 {
                for m in clients.keys().copied().collect::<Vec<_>>() {
                    if let Some(c) = clients.get(&m).cloned() {
                        send(&groups, &mut clients, m, beat(&name(m), c.epoch, &c.runs), now);
                    }
                    check_exclusive(&groups);
                }
            }
            if let Some(group) = groups.describe("g") {
                if !group.members.is_empty() {
                    prop_assert_eq!(group.state(), "Stable");
                    let mut covered = BTreeSet::new();
                    for (id, m) in &group.members {
                        prop_assert_eq!(&m.assigned, &group.target[id]);
                        covered.extend(m.assigned.active.iter().cloned());
                    }
                    prop_assert_eq!(covered.len(), 4);
                }
            }
        }
    }
}

#[test]
fn a_joiner_over_the_group_size_is_refused() {
    let groups = StreamsGroups::new(StreamsConfig {
        max_size: 1,
        ..config()
    });
    let have = topics(&READY);
    let now = Instant::now();
    groups.heartbeat("g", join("a", "p1"), now, &have).unwrap();
    let refused = groups
        .heartbeat("g", join("b", "p2"), now, &have)
        .unwrap_err();
    assert_eq!(refused.0, ResponseError::GroupMaxSizeReached);
    assert_eq!(groups.describe("g").unwrap().members.len(), 1);
    assert_eq!(StreamsConfig::default().max_size, 1000);
}
