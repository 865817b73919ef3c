//! The consumer-protocol group state machine: reconciliation steps, fencing, and a model-based
//! proptest (random joins, leaves, heartbeats, silences and topic changes; a restart step
//! from the group's records, its clients going on)
//! checking that no partition is ever held by two members and that, once every member has
//! heartbeated enough, each holds exactly its target and the targets cover every partition.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use log_core::Uuid;
use proptest::prelude::*;

use super::{Beat, ConsumerConfig, ConsumerGroups, TopicPartition};
use crate::groups::offsets::{ConsumerGroupImage, ConsumerGroupWrite};

fn beat(
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
    owned: Option<BTreeSet<TopicPartition>>,
) -> Beat {
    Beat {
        member_id: member.to_string(),
        epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: if epoch == 0 { 10_000 } else { -1 },
        topics: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
        regex: None,
        matched: BTreeSet::new(),
        assignor: None,
        owned,
        client_id: "c".into(),
        client_host: "/h".into(),
    }
}

fn topic_id(topic: &str) -> Uuid {
    Uuid::from_u128(u128::from(topic.as_bytes()[0]))
}

/// Topics "a" and "b" with the partition counts given.
fn metadata(counts: &BTreeMap<String, u32>) -> impl Fn(&str) -> Option<(Uuid, u32)> + '_ {
    move |t: &str| counts.get(t).map(|n| (topic_id(t), *n))
}

#[test]
fn a_moved_partition_is_revoked_before_it_is_given() {
    let groups = ConsumerGroups::default();
    let counts = BTreeMap::from([("a".to_string(), 4)]);
    let md = metadata(&counts);
    let now = Instant::now();
    let a = groups
        .heartbeat(
            "g",
            beat("a", 0, Some(&["a"]), Some(BTreeSet::new())),
            now,
            &md,
        )
        .unwrap();
    let a_owned = a.assignment.clone().unwrap();
    assert_eq!((a.member_epoch, a_owned.len()), (1, 4));
    let b = groups
        .heartbeat(
            "g",
            beat("b", 0, Some(&["a"]), Some(BTreeSet::new())),
            now,
            &md,
        )
        .unwrap();
    assert_eq!(
        (b.member_epoch, b.assignment.unwrap().len()),
        (2, 0),
        "b waits: a holds its share"
    );
    // a is told to give two up and stays at epoch 1 until it has.
    let a2 = groups
        .heartbeat("g", beat("a", 1, None, Some(a_owned.clone())), now, &md)
        .unwrap();
    let kept = a2.assignment.clone().unwrap();
    assert_eq!((a2.member_epoch, kept.len()), (1, 2));
    // Still listing them: nothing moves.
    let a3 = groups
        .heartbeat("g", beat("a", 1, None, Some(a_owned)), now, &md)
        .unwrap();
    assert_eq!((a3.member_epoch, a3.assignment), (1, None));
    let b2 = groups
        .heartbeat("g", beat("b", 2, None, Some(BTreeSet::new())), now, &md)
        .unwrap();
    assert_eq!(b2.assignment, None, "b gets nothing while a holds it");
    let a4 = groups
        .heartbeat("g", beat("a", 1, None, Some(kept.clone())), now, &md)
        .unwrap();
    assert_eq!(a4.member_epoch, 2);
    let b3 = groups
        .heartbeat("g", beat("b", 2, None, Some(BTreeSet::new())), now, &md)
        .unwrap();
    let given = b3.assignment.unwrap();
    assert_eq!(given.len(), 2);
    assert!(given.is_disjoint(&kept));
    let g = groups.describe("g").unwrap();
    assert_eq!(g.state(), "Stable");
}

#[test]
fn epochs_are_checked_as_kafka_does() {
    let groups = ConsumerGroups::default();
    let counts = BTreeMap::from([("a".to_string(), 2)]);
    let md = metadata(&counts);
    let now = Instant::now();
    let a = groups
        .heartbeat(
            "g",
            beat("a", 0, Some(&["a"]), Some(BTreeSet::new())),
            now,
            &md,
        )
        .unwrap();
    let owned = a.assignment.unwrap();
    assert_eq!(
        groups
            .heartbeat("g", beat("a", 5, None, None), now, &md)
            .unwrap_err(),
        ResponseError::FencedMemberEpoch
    );
    assert_eq!(
        groups
            .heartbeat("g", beat("zz", 1, None, None), now, &md)
            .unwrap_err(),
        ResponseError::UnknownMemberId
    );
    // A new partition bumps the epoch; a heartbeat at the previous epoch (the answer lost)
    // owning no more than assigned is accepted.
    let grown = BTreeMap::from([("a".to_string(), 3)]);
    let md2 = metadata(&grown);
    let a2 = groups
        .heartbeat("g", beat("a", 1, None, Some(owned.clone())), now, &md2)
        .unwrap();
    assert_eq!((a2.member_epoch, a2.assignment.unwrap().len()), (2, 3));
    groups
        .heartbeat("g", beat("a", 1, None, Some(owned)), now, &md2)
        .unwrap();
    assert_eq!(
        groups.check_member("g", Some("a"), 2, Some(9)),
        Some(Ok(()))
    );
    assert_eq!(
        groups.check_member("g", Some("a"), 1, Some(9)),
        Some(Err(ResponseError::StaleMemberEpoch))
    );
    assert_eq!(groups.check_member("nope", Some("a"), 1, Some(9)), None);
}

#[test]
fn a_silent_member_is_fenced_and_a_full_group_refuses_joiners() {
    let groups = ConsumerGroups::new(ConsumerConfig {
        session_timeout: Duration::from_secs(45),
        heartbeat_interval: Duration::from_secs(5),
        max_size: 2,
        ..ConsumerConfig::default()
    });
    let counts = BTreeMap::from([("a".to_string(), 2)]);
    let md = metadata(&counts);
    let now = Instant::now();
    let a = groups
        .heartbeat(
            "g",
            beat("a", 0, Some(&["a"]), Some(BTreeSet::new())),
            now,
            &md,
        )
        .unwrap();
    groups
        .heartbeat(
            "g",
            beat("b", 0, Some(&["a"]), Some(BTreeSet::new())),
            now,
            &md,
        )
        .unwrap();
    assert_eq!(
        groups
            .heartbeat(
                "g",
                beat("c", 0, Some(&["a"]), Some(BTreeSet::new())),
                now,
                &md
            )
            .unwrap_err(),
        ResponseError::GroupMaxSizeReached
    );
    // a is asked to give up one partition for b, and does not within its rebalance
    // timeout (10 s): fenced, though it heartbeats.
    groups
        .heartbeat("g", beat("a", a.member_epoch, None, None), now, &md)
        .unwrap();
    let late = now + Duration::from_secs(11);
    groups
        .heartbeat("g", beat("a", a.member_epoch, None, None), late, &md)
        .unwrap();
    assert_eq!(groups.tick(late), vec![("g".to_string(), "a".to_string())]);
    // b heartbeats (taking both partitions), then falls silent past the session timeout.
    let b = groups
        .heartbeat("g", beat("b", 2, None, Some(BTreeSet::new())), late, &md)
        .unwrap();
    assert_eq!(b.assignment.map(|a| a.len()), Some(2));
    assert!(groups.tick(late + Duration::from_secs(44)).is_empty());
    let gone = groups.tick(late + Duration::from_secs(46));
    assert_eq!(gone, vec![("g".to_string(), "b".to_string())]);
    assert!(groups.describe("g").unwrap().members.is_empty());
}

#[derive(Debug, Clone)]
enum Step {
    Join(usize, bool),
    Leave(usize),
    /// A member heartbeats with what it owns (acknowledging revocations).
    Beat(usize),
    /// A member heartbeats still listing what it was asked to give up.
    Stale(usize),
    Grow(bool),
    /// Time passes past the session timeout for members that did not heartbeat since.
    Silence,
    /// The broker restarts: the group comes back from its records, members included, and
    /// the clients go on as they were.
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..5usize, any::<bool>()).prop_map(|(m, b)| Step::Join(m, b)),
        (0..5usize).prop_map(Step::Leave),
        (0..5usize).prop_map(Step::Beat),
        (0..5usize).prop_map(Step::Beat),
        (0..5usize).prop_map(Step::Stale),
        any::<bool>().prop_map(Step::Grow),
        Just(Step::Silence),
        Just(Step::Restart),
    ]
}

/// The client side of each member: its epoch and what it owns, as a real client keeps them.
#[derive(Debug, Default, Clone)]
struct Client {
    epoch: i32,
    owned: BTreeSet<TopicPartition>,
    /// What the broker last said it may keep.
    told: BTreeSet<TopicPartition>,
}

fn holders_are_unique(groups: &ConsumerGroups) -> Result<(), TestCaseError> {
    let Some(g) = groups.describe("g") else {
        return Ok(());
    };
    let mut seen = BTreeSet::new();
    for (id, m) in &g.members {
        for tp in m.assigned.iter().chain(&m.revoking) {
            prop_assert!(seen.insert(*tp), "{tp:?} held twice (again by {id}): {g:?}");
        }
    }
    Ok(())
}

/// Applies `writes` to `stored` as `__consumer_offsets` does to its records.
fn write(
    stored: &mut BTreeMap<String, ConsumerGroupImage>,
    writes: Vec<(String, Option<ConsumerGroupWrite>)>,
) {
    for (id, write) in writes {
        let Some(w) = write else {
            stored.remove(&id);
            continue;
        };
        let image = stored.entry(id).or_insert_with(|| ConsumerGroupImage {
            epoch: w.epoch,
            target: None,
            members: BTreeMap::new(),
        });
        image.epoch = w.epoch;
        image.target = Some(w.target);
        if w.all_members {
            image.members.retain(|m, _| w.members.contains_key(m));
        }
        image.members.extend(w.members);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_partition_has_two_owners_and_the_group_converges_to_its_target(
        steps in proptest::collection::vec(step(), 1..60)
    ) {
        let mut groups = ConsumerGroups::default();
        let mut counts = BTreeMap::from([("a".to_string(), 3), ("b".to_string(), 2)]);
        let mut clients: BTreeMap<usize, Client> = BTreeMap::new();
        let mut stored: BTreeMap<String, ConsumerGroupImage> = BTreeMap::new();
        let mut now = Instant::now();
        let name = |m: usize| format!("m{m}");
        let subs = |both: bool| if both { &["a", "b"][..] } else { &["a"][..] };
        let apply = |groups: &ConsumerGroups, clients: &mut BTreeMap<usize, Client>, m: usize,
                     b: Beat, now: Instant, counts: &BTreeMap<String, u32>| {
            let md = metadata(counts);
            match groups.heartbeat("g", b, now, &md) {
                Ok(answer) => {
                    let c = clients.entry(m).or_default();
                    c.epoch = answer.member_epoch;
                    if let Some(a) = answer.assignment {
                        // The client gives up what is not in the answer; takes what is.
                        c.told = a.clone();
                        c.owned = a;
                    }
                    true
                }
                Err(_) => {
                    // Fenced or unknown: the client drops everything and will rejoin.
                    clients.remove(&m);
                    false
                }
            }
        };
        for s in steps {
            match s {
                Step::Join(m, both) => {
                    if let std::collections::btree_map::Entry::Vacant(e) = clients.entry(m) {
                        e.insert(Client::default());
                        let b = beat(&name(m), 0, Some(subs(both)), Some(BTreeSet::new()));
                        apply(&groups, &mut clients, m, b, now, &counts);
                    }
                }
                Step::Leave(m) => {
                    if clients.remove(&m).is_some() {
                        let md = metadata(&counts);
                        groups.heartbeat("g", beat(&name(m), -1, None, None), now, &md).unwrap();
                    }
                }
                Step::Beat(m) => {
                    // The client has finished giving up what it was told to: it owns only what
                    // it may keep.
                    if let Some(c) = clients.get_mut(&m) {
                        c.owned = c.told.clone();
                    }
                    if let Some(c) = clients.get(&m).cloned() {
                        let b = beat(&name(m), c.epoch, None, Some(c.owned));
                        apply(&groups, &mut clients, m, b, now, &counts);
                    }
                }
                Step::Stale(m) => {
                    // Listing more than it was told to keep: the revocation is not acknowledged.
                    if let Some(c) = clients.get(&m).cloned() {
                        let b = beat(&name(m), c.epoch, None, Some(c.owned.clone()));
                        let md = metadata(&counts);
                        if let Ok(answer) = groups.heartbeat("g", b, now, &md) {
                            if let Some(c) = clients.get_mut(&m) {
                                c.epoch = answer.member_epoch;
                                if let Some(a) = answer.assignment {
                                    // Keeps the old ones until its next heartbeat.
                                    c.owned.retain(|tp| a.contains(tp) || c.told.contains(tp));
                                    c.owned.extend(a.iter().copied());
                                    c.told = a;
                                }
                            }
                        }
                    }
                }
                Step::Grow(a) => {
                    let topic = if a { "a" } else { "b" };
                    if let Some(n) = counts.get_mut(topic) {
                        *n = (*n + 1).min(8);
                    }
                }
                Step::Silence => {
                    now += Duration::from_secs(46);
                    for (_, m) in groups.tick(now) {
                        if let Some(i) = m.strip_prefix('m').and_then(|i| i.parse().ok()) {
                            clients.remove(&i);
                        }
                    }
                }
                Step::Restart => {
                    groups = ConsumerGroups::default();
                    groups.restore(stored.clone().into_iter().collect(), now);
                    // No member is fenced by it: each goes on at its epoch.
                    for (m, c) in clients.clone() {
                        let b = beat(&name(m), c.epoch, None, Some(c.owned));
                        prop_assert!(apply(&groups, &mut clients, m, b, now, &counts), "m{m} fenced");
                    }
                }
            }
            // Every change is written before it is answered.
            write(&mut stored, groups.unpersisted());
            holders_are_unique(&groups)?;
            // The clients never own a partition twice either.
            let mut owned = BTreeSet::new();
            for c in clients.values() {
                for tp in &c.owned {
                    prop_assert!(owned.insert(*tp), "two clients consume {tp:?}");
                }
            }
        }
        // Quiescence: every member heartbeats, acknowledging, until nothing changes.
        for _ in 0..6 {
            let members: Vec<usize> = clients.keys().copied().collect();
            for m in members {
                if let Some(c) = clients.get_mut(&m) {
                    c.owned = c.told.clone();
                }
                if let Some(c) = clients.get(&m).cloned() {
                    let b = beat(&name(m), c.epoch, None, Some(c.owned));
                    apply(&groups, &mut clients, m, b, now, &counts);
                }
                holders_are_unique(&groups)?;
            }
        }
        if let Some(g) = groups.describe("g") {
            if !g.members.is_empty() {
                prop_assert_eq!(g.state(), "Stable");
                for (id, m) in &g.members {
                    let empty = BTreeSet::new();
                    prop_assert_eq!(&m.assigned, g.target.get(id).unwrap_or(&empty));
                    prop_assert!(m.revoking.is_empty());
                    prop_assert_eq!(m.epoch, g.epoch);
                }
                // Every partition of a subscribed topic is someone's.
                let subscribed: BTreeSet<&String> = g.members.values().flat_map(|m| &m.topics).collect();
                let all: usize = subscribed.iter().map(|t| counts[*t] as usize).sum();
                let given: usize = g.members.values().map(|m| m.assigned.len()).sum();
                prop_assert_eq!(given, all);
            }
        }
    }
}

/// A static member's heartbeat: `beat` with its instance id.
fn static_beat(
    member: &str,
    instance: &str,
    epoch: i32,
    topics: Option<&[&str]>,
    owned: Option<BTreeSet<TopicPartition>>,
) -> Beat {
    Beat {
        instance_id: Some(instance.to_string()),
        ..beat(member, epoch, topics, owned)
    }
}

#[test]
fn a_static_member_that_leaves_keeps_its_partitions_for_its_return() {
    let groups = ConsumerGroups::default();
    let counts = BTreeMap::from([("a".to_string(), 4)]);
    let md = metadata(&counts);
    let now = Instant::now();
    let join = |member: &str, instance: &str| {
        static_beat(member, instance, 0, Some(&["a"]), Some(BTreeSet::new()))
    };
    let a = groups.heartbeat("g", join("a", "i-a"), now, &md).unwrap();
    let a_owned = a.assignment.unwrap();
    groups.heartbeat("g", join("b", "i-b"), now, &md).unwrap();
    let a2 = groups
        .heartbeat("g", beat("a", 1, None, Some(a_owned)), now, &md)
        .unwrap();
    let a_kept = a2.assignment.unwrap();
    let a3 = groups
        .heartbeat("g", beat("a", 1, None, Some(a_kept.clone())), now, &md)
        .unwrap();
    let b = groups
        .heartbeat("g", beat("b", 2, None, Some(BTreeSet::new())), now, &md)
        .unwrap();
    let b_owned = b.assignment.unwrap();
    assert_eq!((a3.member_epoch, a_kept.len(), b_owned.len()), (2, 2, 2));
    let epoch = groups.describe("g").unwrap().epoch;
    // a leaves as a static member: its partitions stay its own, the group epoch stays.
    let left = groups
        .heartbeat("g", static_beat("a", "i-a", -2, None, None), now, &md)
        .unwrap();
    assert_eq!(left.member_epoch, -2);
    let b2 = groups
        .heartbeat("g", beat("b", 2, None, Some(b_owned.clone())), now, &md)
        .unwrap();
    assert_eq!(b2.assignment, None, "b gets nothing of a's");
    assert_eq!(groups.describe("g").unwrap().epoch, epoch);
    // Its instance id is not free to a new member while b holds its own...
    assert_eq!(
        groups.heartbeat("g", join("c", "i-b"), now, &md),
        Err(ResponseError::UnreleasedInstanceId)
    );
    // ...and a, back under a new member id, has its epoch and partitions at once.
    let back = groups.heartbeat("g", join("a-2", "i-a"), now, &md).unwrap();
    assert_eq!(back.member_epoch, 2);
    assert_eq!(back.assignment, Some(a_kept.clone()));
    assert_eq!(groups.describe("g").unwrap().epoch, epoch);
    // Gone for longer than the session timeout, its partitions go to b.
    groups
        .heartbeat("g", static_beat("a-2", "i-a", -2, None, None), now, &md)
        .unwrap();
    let later = now + groups.config.session_timeout + Duration::from_secs(1);
    groups
        .heartbeat("g", beat("b", 2, None, Some(b_owned.clone())), later, &md)
        .unwrap();
    let fenced = groups.tick(later);
    assert_eq!(fenced, vec![("g".to_string(), "a-2".to_string())]);
    let b3 = groups
        .heartbeat("g", beat("b", 2, None, Some(b_owned)), later, &md)
        .unwrap();
    assert_eq!(b3.assignment.map(|a| a.len()), Some(4));
}
