//! The server-side assignors of KIP-848 (`group.consumer.assignors`): `uniform` (the default,
//! Kafka's UniformAssignor: balanced within one partition among the members that subscribe to
//! a topic, and sticky: a partition stays with its current owner unless balance needs it
//! elsewhere) and `range` (Kafka's RangeAssignor: per topic, the subscribed members each take
//! a contiguous range, the first ones one partition more, in Kafka's order: static members
//! first by instance id, then the others by member id, so a static member that comes back
//! under a new member id keeps its ranges).
//!
//! Both see the group the same way: each member's subscribed topics, each subscribed topic's
//! id and partition count, and (for stickiness) the current target assignment.

use std::collections::{BTreeMap, BTreeSet};

use super::TopicPartition;

/// The assignors served, the default first.
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

/// What an assignor sees of one member.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    pub topics: &'a BTreeSet<String>,
    /// Its `group.instance.id`, if it is a static member.
    pub instance_id: Option<&'a str>,
    /// Its partitions in the current target assignment.
    pub current: &'a BTreeSet<TopicPartition>,
}

/// A target assignment: every member with its partitions (possibly none).
pub type Target = BTreeMap<String, BTreeSet<TopicPartition>>;

/// Computes the target assignment with the named assignor (`uniform` for any name not in
/// [`ASSIGNORS`]; the heartbeat refuses those before they get here). `topics` gives each
/// subscribed topic's id and partition count; topics missing from it do not exist yet.
pub fn assign(
    assignor: &str,
    members: &BTreeMap<String, Spec<'_>>,
    topics: &BTreeMap<String, (log_core::Uuid, u32)>,
) -> Target {
    match assignor {
        "range" => range(members, topics),
        _ => uniform(members, topics),
    }
}

fn range(
    members: &BTreeMap<String, Spec<'_>>,
    topics: &BTreeMap<String, (log_core::Uuid, u32)>,
) -> Target {
    let mut target: Target = members
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    // Kafka's order: static members by instance id, then the others by member id.
    let mut ordered: Vec<(&String, &Spec<'_>)> = members.iter().collect();
    ordered.sort_by(
        |(m1, s1), (m2, s2)| match (s1.instance_id, s2.instance_id) {
            (Some(i1), Some(i2)) => i1.cmp(i2),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => m1.cmp(m2),
        },
    );
    for (topic, (id, count)) in topics {
        let subscribed: Vec<&String> = ordered
            .iter()
            .filter(|(_, s)| s.topics.contains(topic))
            .map(|(m, _)| *m)
            .collect();
        let Ok(n) = u32::try_from(subscribed.len()) else {
            continue;
        };
        if n == 0 {
            continue;
        }
        let (each, extra) = (count / n, count % n);
        let mut next = 0u32;
        for (i, member) in (0u32..).zip(subscribed) {
            let len = each + u32::from(i < extra);
            let slot = target.entry(member.clone()).or_default();
            for p in next..next + len {
                if let Ok(p) = i32::try_from(p) {
                    slot.insert((*id, p));
                }
            }
            next += len;
        }
    }
    target
}

/// Kafka's UniformAssignor: partitions stay with their current owners where they may, the
/// others go to the least loaded eligible members, then partitions move until balanced.
fn uniform(
    members: &BTreeMap<String, Spec<'_>>,
    topics: &BTreeMap<String, (log_core::Uuid, u32)>,
) -> Target {
    let mut target: Target = members
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    let eligible = eligible_members(members, topics);
    let mut owner = sticky_owners(members, &eligible);
    let mut counts: BTreeMap<&String, usize> = members.keys().map(|m| (m, 0)).collect();
    for m in owner.values() {
        if let Some(c) = counts.get_mut(m) {
            *c += 1;
        }
    }
    assign_unowned(&eligible, &mut owner, &mut counts);
    balance(&eligible, &mut owner, &mut counts);
    for (tp, member) in owner {
        target.entry(member).or_default().insert(tp);
    }
    target
}

/// Who may own each partition: the members subscribed to its topic (partitions of topics no
/// member subscribes to are left out).
fn eligible_members<'m>(
    members: &'m BTreeMap<String, Spec<'_>>,
    topics: &BTreeMap<String, (log_core::Uuid, u32)>,
) -> BTreeMap<TopicPartition, Vec<&'m String>> {
    let mut eligible: BTreeMap<TopicPartition, Vec<&String>> = BTreeMap::new();
    for (topic, (id, count)) in topics {
        let subscribed: Vec<&String> = members
            .iter()
            .filter(|(_, s)| s.topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if subscribed.is_empty() {
            continue;
        }
        for p in 0..*count {
            if let Ok(p) = i32::try_from(p) {
                eligible.insert((*id, p), subscribed.clone());
            }
        }
    }
    eligible
}

/// 1. Sticky: a partition stays with its current owner while that owner may have it.
fn sticky_owners(
    members: &BTreeMap<String, Spec<'_>>,
    eligible: &BTreeMap<TopicPartition, Vec<&String>>,
) -> BTreeMap<TopicPartition, String> {
    let mut owner: BTreeMap<TopicPartition, String> = BTreeMap::new();
    for (member, spec) in members {
        for tp in spec.current {
            if eligible.get(tp).is_some_and(|e| e.contains(&member)) && !owner.contains_key(tp) {
                owner.insert(*tp, member.clone());
            }
        }
    }
    owner
}

/// 2. Every other partition to its least loaded eligible member (ties: member id order).
fn assign_unowned(
    eligible: &BTreeMap<TopicPartition, Vec<&String>>,
    owner: &mut BTreeMap<TopicPartition, String>,
    counts: &mut BTreeMap<&String, usize>,
) {
    for (tp, candidates) in eligible {
        if owner.contains_key(tp) {
            continue;
        }
        let Some(least) = candidates
            .iter()
            .min_by_key(|m| (counts.get(**m).copied().unwrap_or(0), **m))
        else {
            continue;
        };
        owner.insert(*tp, (*least).clone());
        if let Some(c) = counts.get_mut(*least) {
            *c += 1;
        }
    }
}

/// 3. Balance: move a partition from a member with two more than an eligible other, until
///    none can move (bounded: each move lowers the sum of squared counts).
fn balance(
    eligible: &BTreeMap<TopicPartition, Vec<&String>>,
    owner: &mut BTreeMap<TopicPartition, String>,
    counts: &mut BTreeMap<&String, usize>,
) {
    loop {
        let mut moved = false;
        for (tp, candidates) in eligible {
            let Some(from) = owner.get(tp).cloned() else {
                continue;
            };
            let from_count = counts.get(&from).copied().unwrap_or(0);
            let Some(to) = candidates
                .iter()
                .filter(|m| counts.get(**m).copied().unwrap_or(0) + 1 < from_count)
                .min_by_key(|m| (counts.get(**m).copied().unwrap_or(0), **m))
            else {
                continue;
            };
            if let Some(c) = counts.get_mut(&from) {
                *c -= 1;
            }
            if let Some(c) = counts.get_mut(*to) {
                *c += 1;
            }
            owner.insert(*tp, (*to).clone());
            moved = true;
        }
        if !moved {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use log_core::Uuid;

    fn topics(list: &[(&str, u32)]) -> BTreeMap<String, (Uuid, u32)> {
        list.iter()
            .zip(1u128..)
            .map(|((t, n), id)| (t.to_string(), (Uuid::from_u128(id), *n)))
            .collect()
    }

    fn specs<'a>(
        subs: &'a [(String, BTreeSet<String>, BTreeSet<TopicPartition>)],
    ) -> BTreeMap<String, Spec<'a>> {
        subs.iter()
            .map(|(m, t, c)| {
                (
                    m.clone(),
                    Spec {
                        topics: t,
                        instance_id: None,
                        current: c,
                    },
                )
            })
            .collect()
    }

    fn member(name: &str, topics: &[&str]) -> (String, BTreeSet<String>, BTreeSet<TopicPartition>) {
        (
            name.to_string(),
            topics.iter().map(|t| t.to_string()).collect(),
            BTreeSet::new(),
        )
    }

    fn sizes(target: &Target) -> Vec<usize> {
        target.values().map(BTreeSet::len).collect()
    }

    fn covers(target: &Target, total: usize) {
        let all: Vec<&TopicPartition> = target.values().flatten().collect();
        let unique: BTreeSet<&TopicPartition> = all.iter().copied().collect();
        assert_eq!(
            all.len(),
            unique.len(),
            "a partition given twice: {target:?}"
        );
        assert_eq!(unique.len(), total, "not every partition given: {target:?}");
    }

    #[test]
    fn uniform_is_balanced_within_one_and_complete() {
        for members in 1..8usize {
            for partitions in [1u32, 5, 12, 13] {
                let subs: Vec<_> = (0..members)
                    .map(|i| member(&format!("m{i}"), &["a", "b"]))
                    .collect();
                let t = topics(&[("a", partitions), ("b", 3)]);
                let target = assign("uniform", &specs(&subs), &t);
                let s = sizes(&target);
                assert!(
                    s.iter().max().unwrap() - s.iter().min().unwrap() <= 1,
                    "{members} members, {partitions}: {s:?}"
                );
                covers(&target, partitions as usize + 3);
            }
        }
    }

    #[test]
    fn uniform_keeps_current_owners_where_it_can() {
        let t = topics(&[("a", 12)]);
        let three: Vec<_> = ["m0", "m1", "m2"]
            .iter()
            .map(|m| member(m, &["a"]))
            .collect();
        let first = assign("uniform", &specs(&three), &t);
        // m1 leaves: m0 and m2 keep all they had and share m1's four.
        let two: Vec<_> = ["m0", "m2"]
            .iter()
            .map(|m| {
                let mut s = member(m, &["a"]);
                s.2 = first[*m].clone();
                s
            })
            .collect();
        let second = assign("uniform", &specs(&two), &t);
        for m in ["m0", "m2"] {
            assert!(first[m].is_subset(&second[m]), "{m} lost a partition");
            assert_eq!(second[m].len(), 6);
        }
        // A fourth joins: each old member gives up only what balance needs.
        let mut four = two.clone();
        four[0].2 = second["m0"].clone();
        four[1].2 = second["m2"].clone();
        four.push(member("m3", &["a"]));
        four.push(member("m4", &["a"]));
        let third = assign("uniform", &specs(&four), &t);
        covers(&third, 12);
        let kept: usize = ["m0", "m2"]
            .iter()
            .map(|m| third[*m].intersection(&second[*m]).count())
            .sum();
        assert_eq!(kept, 6, "m0 and m2 keep 3 each of their 6: {third:?}");
    }

    #[test]
    fn uniform_gives_a_topic_only_to_its_subscribers() {
        let subs = vec![member("m0", &["a"]), member("m1", &["a", "b"])];
        let t = topics(&[("a", 4), ("b", 2)]);
        let target = assign("uniform", &specs(&subs), &t);
        let b = Uuid::from_u128(2);
        assert!(target["m0"].iter().all(|(id, _)| *id != b));
        covers(&target, 6);
        assert_eq!(sizes(&target), vec![3, 3]);
    }

    #[test]
    fn range_is_kafkas_contiguous_ranges_in_member_order() {
        let subs = vec![
            member("c", &["a"]),
            member("a", &["a", "b"]),
            member("b", &["a", "b"]),
        ];
        let t = topics(&[("a", 7), ("b", 3)]);
        let target = assign("range", &specs(&subs), &t);
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let of = |m: &str| target[m].iter().copied().collect::<Vec<_>>();
        // Topic a: 7 over 3 members: a gets 0-2, b 3-4, c 5-6; topic b: 3 over a and b.
        assert_eq!(of("a"), vec![(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]);
        assert_eq!(of("b"), vec![(a, 3), (a, 4), (b, 2)]);
        assert_eq!(of("c"), vec![(a, 5), (a, 6)]);
    }

    #[test]
    fn range_puts_static_members_first_by_instance_id() {
        let t = topics(&[("a", 5)]);
        let empty = BTreeSet::new();
        let topics_a: BTreeSet<String> = ["a".to_string()].into();
        let spec = |instance_id| Spec {
            topics: &topics_a,
            instance_id,
            current: &empty,
        };
        // A static member back under a new member id ("z") keeps the first range by its
        // instance id; the dynamic member comes after the static ones.
        let members: BTreeMap<String, Spec<'_>> = [
            ("a".to_string(), spec(None)),
            ("m".to_string(), spec(Some("i-2"))),
            ("z".to_string(), spec(Some("i-1"))),
        ]
        .into();
        let target = assign("range", &members, &t);
        let a = Uuid::from_u128(1);
        let of = |m: &str| target[m].iter().copied().collect::<Vec<_>>();
        assert_eq!(of("z"), vec![(a, 0), (a, 1)]);
        assert_eq!(of("m"), vec![(a, 2), (a, 3)]);
        assert_eq!(of("a"), vec![(a, 4)]);
    }

    #[test]
    fn topics_without_subscribers_or_members_without_topics_get_nothing() {
        let subs = vec![member("m0", &["x"])];
        let t = topics(&[("a", 4)]);
        for name in ASSIGNORS {
            let target = assign(name, &specs(&subs), &t);
            assert!(target["m0"].is_empty());
        }
    }
}
