//! Partition assignors run by the group leader: range (the Java client's `RangeAssignor`) and
//! cooperative-sticky (balanced, keeps owned partitions where it can, and never hands a
//! partition to a new owner in the same round its old owner still holds it).
//!
//! Also the consumer protocol's subscription and assignment encodings (a version prefix and
//! `ConsumerProtocolSubscription` / `ConsumerProtocolAssignment`).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::config::AssignorKind;
use crate::util::text;
use crate::TopicPartition;

/// One member as its JoinGroup metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub topics: Vec<String>,
    /// Partitions it holds now (cooperative protocol).
    pub owned: Vec<TopicPartition>,
    /// The generation those were assigned in (-1 unknown).
    pub generation: i32,
}

/// Member id → the partitions it gets.
pub(crate) type Assignment = BTreeMap<String, Vec<TopicPartition>>;

pub(crate) fn assign(
    kind: AssignorKind,
    members: &[Member],
    partitions: &BTreeMap<String, i32>,
) -> Assignment {
    match kind {
        AssignorKind::Range => range(members, partitions),
        AssignorKind::CooperativeSticky => cooperative_sticky(members, partitions),
    }
}

/// Java's member order: static members first by instance id, then dynamic ones by member id.
fn member_order(a: &Member, b: &Member) -> std::cmp::Ordering {
    match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// Per topic, its partitions in contiguous ranges over the sorted subscribers; the first
/// `n % c` subscribers get one more.
fn range(members: &[Member], partitions: &BTreeMap<String, i32>) -> Assignment {
    let mut out: Assignment = members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect();
    for (topic, count) in partitions {
        let mut subscribers: Vec<&Member> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        subscribers.sort_by(|a, b| member_order(a, b));
        let c = i32::try_from(subscribers.len()).unwrap_or(i32::MAX);
        let (per, extra) = (count / c, count % c);
        for (i, m) in (0i32..).zip(subscribers) {
            let start = per * i + i.min(extra);
            let length = per + i32::from(i < extra);
            if let Some(list) = out.get_mut(&m.member_id) {
                list.extend((start..start + length).map(|p| TopicPartition::new(topic, p)));
            }
        }
    }
    out
}

fn cooperative_sticky(members: &[Member], partitions: &BTreeMap<String, i32>) -> Assignment {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by(|a, b| member_order(a, b));
    let subscribed: BTreeSet<&String> = sorted.iter().flat_map(|m| m.topics.iter()).collect();
    let all: Vec<TopicPartition> = partitions
        .iter()
        .filter(|(t, _)| subscribed.contains(t))
        .flat_map(|(t, n)| (0..*n).map(move |p| TopicPartition::new(t, p)))
        .collect();
    let previous = current_owners(&sorted, &all);
    let (mut target, taken) = keep_owned(&sorted, &previous, all.len());
    assign_rest(&sorted, &all, &taken, &mut target);
    even_out(&sorted, &previous, &mut target, all.len());
    withhold_moves(target, &previous)
}

/// Partition → its current owner and the generation it was assigned in.
type Owners<'a> = BTreeMap<TopicPartition, (&'a str, i32)>;

/// Member id → the partitions it is to get.
type Target<'a> = BTreeMap<&'a str, Vec<TopicPartition>>;

/// Whether `m` subscribes to `tp`'s topic.
fn eligible(m: &Member, tp: &TopicPartition) -> bool {
    m.topics.contains(&tp.topic)
}

/// Who owns what now: valid claims, the newest generation winning a conflict.
fn current_owners<'a>(sorted: &[&'a Member], all: &[TopicPartition]) -> Owners<'a> {
    let exists: BTreeSet<&TopicPartition> = all.iter().collect();
    let mut previous: Owners<'a> = BTreeMap::new();
    for m in sorted {
        for tp in &m.owned {
            if !exists.contains(tp) || !eligible(m, tp) {
                continue;
            }
            let newer = previous
                .get(tp)
                .is_none_or(|(_, generation)| m.generation > *generation);
            if newer {
                previous.insert(tp.clone(), (m.member_id.as_str(), m.generation));
            }
        }
    }
    previous
}

/// Keep owned partitions up to the quota: each member's target and every partition kept.
fn keep_owned<'a>(
    sorted: &[&'a Member],
    previous: &Owners<'_>,
    total: usize,
) -> (Target<'a>, BTreeSet<TopicPartition>) {
    let count = sorted.len().max(1);
    let (min_quota, mut max_slots) = (total / count, total % count);
    let mut target: Target<'a> = sorted
        .iter()
        .map(|m| (m.member_id.as_str(), Vec::new()))
        .collect();
    let mut taken: BTreeSet<TopicPartition> = BTreeSet::new();
    for m in sorted {
        let mut owned: Vec<&TopicPartition> = previous
            .iter()
            .filter(|(_, (owner, _))| *owner == m.member_id)
            .map(|(tp, _)| tp)
            .collect();
        owned.sort();
        let quota = if owned.len() > min_quota && max_slots > 0 {
            max_slots -= 1;
            min_quota + 1
        } else {
            min_quota
        };
        for tp in owned.into_iter().take(quota) {
            taken.insert(tp.clone());
            if let Some(list) = target.get_mut(m.member_id.as_str()) {
                list.push(tp.clone());
            }
        }
    }
    (target, taken)
}

/// The rest, each to the eligible member with the fewest.
fn assign_rest(
    sorted: &[&Member],
    all: &[TopicPartition],
    taken: &BTreeSet<TopicPartition>,
    target: &mut Target<'_>,
) {
    for tp in all.iter().filter(|tp| !taken.contains(*tp)) {
        let best = sorted
            .iter()
            .filter(|m| eligible(m, tp))
            .min_by_key(|m| target.get(m.member_id.as_str()).map_or(0, Vec::len));
        if let Some(m) = best {
            if let Some(list) = target.get_mut(m.member_id.as_str()) {
                list.push(tp.clone());
            }
        }
    }
}

/// Even out what differing subscriptions left uneven: move a partition from a member
/// with two or more than another eligible member.
fn even_out(sorted: &[&Member], previous: &Owners<'_>, target: &mut Target<'_>, total: usize) {
    let count = sorted.len().max(1);
    for _ in 0..total.saturating_mul(count) {
        let mut moved = false;
        'search: for from in sorted {
            for to in sorted {
                let (nf, nt) = (
                    target.get(from.member_id.as_str()).map_or(0, Vec::len),
                    target.get(to.member_id.as_str()).map_or(0, Vec::len),
                );
                if nf <= nt + 1 {
                    continue;
                }
                let candidate = target.get(from.member_id.as_str()).and_then(|list| {
                    // Prefer moving a partition `from` did not own before.
                    let movable: Vec<&TopicPartition> =
                        list.iter().filter(|tp| eligible(to, tp)).collect();
                    movable
                        .iter()
                        .find(|tp| {
                            previous.get(**tp).map(|(o, _)| *o) != Some(from.member_id.as_str())
                        })
                        .or(movable.first())
                        .map(|tp| (*tp).clone())
                });
                if let Some(tp) = candidate {
                    if let Some(list) = target.get_mut(from.member_id.as_str()) {
                        list.retain(|x| *x != tp);
                    }
                    if let Some(list) = target.get_mut(to.member_id.as_str()) {
                        list.push(tp);
                    }
                    moved = true;
                    break 'search;
                }
            }
        }
        if !moved {
            break;
        }
    }
}

/// Cooperative: a partition changing owner is withheld this round; its old owner
/// revokes it and rejoins, and the next round hands it over.
fn withhold_moves(target: Target<'_>, previous: &Owners<'_>) -> Assignment {
    target
        .into_iter()
        .map(|(member, mut list)| {
            list.retain(|tp| previous.get(tp).is_none_or(|(owner, _)| *owner == member));
            list.sort();
            (member.to_string(), list)
        })
        .collect()
}

/// The JoinGroup metadata of a member subscribing to `topics` and owning `owned`.
pub(crate) fn encode_subscription(
    topics: &BTreeSet<String>,
    owned: &[TopicPartition],
    generation: i32,
) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in owned {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let subscription = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| text(t)).collect())
        .with_user_data(None)
        .with_owned_partitions(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    OwnedTopic::default()
                        .with_topic(TopicName(text(t)))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_generation_id(generation);
    encode_versioned(&subscription, 2)
}

pub(crate) fn decode_subscription(
    member_id: &str,
    instance_id: Option<&str>,
    bytes: &[u8],
) -> Option<Member> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16().clamp(0, 3);
    let s = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    Some(Member {
        member_id: member_id.to_string(),
        instance_id: instance_id.map(str::to_string),
        topics: s.topics.iter().map(|t| t.to_string()).collect(),
        owned: s
            .owned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.topic.0.as_str(), *p))
            })
            .collect(),
        generation: if version >= 2 { s.generation_id } else { -1 },
    })
}

pub(crate) fn encode_assignment(partitions: &[TopicPartition]) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let assignment = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    AssignedTopic::default()
                        .with_topic(TopicName(text(t)))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_user_data(None);
    encode_versioned(&assignment, 0)
}

/// The partitions of an assignment; `None` if it does not decode. Empty bytes are an empty
/// assignment (Kafka sends that to members the leader left out).
pub(crate) fn decode_assignment(bytes: &[u8]) -> Option<Vec<TopicPartition>> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return Some(Vec::new());
    }
    let version = buf.get_i16().clamp(0, 3);
    let a = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    let mut out: Vec<TopicPartition> = a
        .assigned_partitions
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.topic.0.as_str(), *p))
        })
        .collect();
    out.sort();
    out.dedup();
    Some(out)
}

fn encode_versioned<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    // Encoding these plain messages into memory cannot fail.
    let _ = message.encode(&mut buf, version);
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str], owned: &[(&str, i32)], generation: i32) -> Member {
        Member {
            member_id: id.to_string(),
            instance_id: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            owned: owned
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
            generation,
        }
    }

    fn parts(a: &Assignment, id: &str) -> Vec<(String, i32)> {
        a[id]
            .iter()
            .map(|tp| (tp.topic.clone(), tp.partition))
            .collect()
    }

    fn counts(partitions: &[(&str, i32)]) -> BTreeMap<String, i32> {
        partitions
            .iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect()
    }

    #[test]
    fn range_gives_contiguous_ranges_extra_to_the_first() {
        let members = [
            member("b", &["t", "u"], &[], -1),
            member("a", &["t", "u"], &[], -1),
        ];
        let a = assign(
            AssignorKind::Range,
            &members,
            &counts(&[("t", 3), ("u", 2)]),
        );
        assert_eq!(
            parts(&a, "a"),
            vec![("t".into(), 0), ("t".into(), 1), ("u".into(), 0)]
        );
        assert_eq!(parts(&a, "b"), vec![("t".into(), 2), ("u".into(), 1)]);
    }

    #[test]
    fn range_puts_static_members_first() {
        let mut s = member("z", &["t"], &[], -1);
        s.instance_id = Some("i".into());
        let members = [member("a", &["t"], &[], -1), s];
        let a = assign(AssignorKind::Range, &members, &counts(&[("t", 3)]));
        assert_eq!(a["z"].len(), 2);
        assert_eq!(a["z"][0].partition, 0);
    }

    fn check_balanced_and_complete(a: &Assignment, total: usize) {
        let sizes: Vec<usize> = a.values().map(Vec::len).collect();
        let all: BTreeSet<&TopicPartition> = a.values().flatten().collect();
        assert_eq!(all.len(), sizes.iter().sum::<usize>(), "no partition twice");
        assert_eq!(all.len(), total);
        assert!(
            sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
            "{a:?}"
        );
    }

    #[test]
    fn sticky_first_round_is_balanced() {
        let members: Vec<Member> = ["a", "b", "c"]
            .iter()
            .map(|id| member(id, &["t"], &[], -1))
            .collect();
        let a = assign(
            AssignorKind::CooperativeSticky,
            &members,
            &counts(&[("t", 7)]),
        );
        check_balanced_and_complete(&a, 7);
    }

    #[test]
    fn sticky_keeps_owned_and_withholds_moves_for_one_round() {
        // a owned all six; b joins.
        let owned: Vec<(&str, i32)> = (0..6).map(|p| ("t", p)).collect();
        let members = [member("a", &["t"], &owned, 1), member("b", &["t"], &[], -1)];
        let first = assign(
            AssignorKind::CooperativeSticky,
            &members,
            &counts(&[("t", 6)]),
        );
        // a keeps three of its own; b gets nothing yet (a must revoke first).
        assert_eq!(first["a"].len(), 3);
        assert!(first["b"].is_empty());
        // Second round: a owns its three, b owns none: b gets the other three.
        let kept: Vec<(&str, i32)> = first["a"].iter().map(|tp| ("t", tp.partition)).collect();
        let members = [member("a", &["t"], &kept, 2), member("b", &["t"], &[], -1)];
        let second = assign(
            AssignorKind::CooperativeSticky,
            &members,
            &counts(&[("t", 6)]),
        );
        assert_eq!(second["a"], first["a"], "a keeps what it had");
        check_balanced_and_complete(&second, 6);
    }

    #[test]
    fn sticky_member_leaving_spreads_only_its_partitions() {
        let members = [
            member("a", &["t"], &[("t", 0), ("t", 1)], 3),
            member("b", &["t"], &[("t", 2), ("t", 3)], 3),
        ];
        // c (owning 4 and 5) is gone.
        let a = assign(
            AssignorKind::CooperativeSticky,
            &members,
            &counts(&[("t", 6)]),
        );
        check_balanced_and_complete(&a, 6);
        assert!(a["a"].contains(&TopicPartition::new("t", 0)));
        assert!(a["a"].contains(&TopicPartition::new("t", 1)));
        assert!(a["b"].contains(&TopicPartition::new("t", 2)));
        assert!(a["b"].contains(&TopicPartition::new("t", 3)));
    }

    #[test]
    fn sticky_conflicting_claims_go_to_the_newest_generation() {
        let members = [
            member("a", &["t"], &[("t", 0)], 1),
            member("b", &["t"], &[("t", 0)], 2),
        ];
        let a = assign(
            AssignorKind::CooperativeSticky,
            &members,
            &counts(&[("t", 2)]),
        );
        assert_eq!(a["b"], vec![TopicPartition::new("t", 0)]);
        assert_eq!(a["a"], vec![TopicPartition::new("t", 1)]);
    }

    #[test]
    fn sticky_respects_differing_subscriptions() {
        let members = [
            member("a", &["t"], &[], -1),
            member("b", &["t", "u"], &[], -1),
        ];
        let a = assign(
            AssignorKind::CooperativeSticky,
            &members,
            &counts(&[("t", 2), ("u", 2)]),
        );
        assert!(a["a"].iter().all(|tp| tp.topic == "t"));
        assert_eq!(a.values().map(Vec::len).sum::<usize>(), 4);
        assert_eq!(a["a"].len(), 2);
    }

    #[test]
    fn protocol_messages_round_trip() {
        let topics: BTreeSet<String> = ["t".to_string(), "u".to_string()].into();
        let owned = vec![TopicPartition::new("t", 1), TopicPartition::new("u", 0)];
        let bytes = encode_subscription(&topics, &owned, 7);
        let m = decode_subscription("m", Some("i"), &bytes).unwrap();
        assert_eq!(m.topics, vec!["t", "u"]);
        assert_eq!(m.owned, owned);
        assert_eq!(m.generation, 7);
        assert_eq!(m.instance_id.as_deref(), Some("i"));
        let bytes = encode_assignment(&owned);
        assert_eq!(decode_assignment(&bytes).unwrap(), owned);
        assert_eq!(decode_assignment(&[]).unwrap(), Vec::new());
    }
}
