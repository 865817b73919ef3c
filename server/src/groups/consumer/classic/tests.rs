//! Classic members in a consumer-protocol group: a live classic group taken over, its members
//! moved by heartbeats and joins as Kafka's coordinator moves them, no partition held twice,
//! the group given back to the classic protocol with each member's target; commits checked by
//! generation; classic members kept across a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as Owned;
use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use log_core::Uuid;

use super::super::{embedded, Beat, ConsumerGroups};
use super::{ClassicImage, ClassicMemberImage};
use crate::groups::offsets::ConsumerGroupImage;
use crate::groups::Join;

const TOPIC: Uuid = Uuid::from_u128(7);

fn metadata(topic: &str) -> Option<(Uuid, u32)> {
    (topic == "t").then_some((TOPIC, 6))
}

/// A v1 subscription to "t" owning `owned` partitions of it.
fn subscription(owned: &[i32]) -> Bytes {
    let s = ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("t")])
        .with_owned_partitions(vec![Owned::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(owned.to_vec())]);
    let mut out = BytesMut::new();
    out.put_i16(1);
    s.encode(&mut out, 1).unwrap();
    out.freeze()
}

fn assignment(partitions: &[i32]) -> Bytes {
    let named: Vec<(String, i32)> = partitions.iter().map(|p| ("t".to_string(), *p)).collect();
    embedded::encode_assignment(&named, 1)
}

fn partitions(bytes: &[u8]) -> Vec<i32> {
    let mut out: Vec<i32> = embedded::assignment(bytes)
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    out.sort_unstable();
    out
}

fn classic_member(id: &str, assigned: &[i32]) -> ClassicMemberImage {
    ClassicMemberImage {
        member_id: id.to_string(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/h".into(),
        session_timeout: Duration::from_secs(45),
        rebalance_timeout: Duration::from_secs(30),
        protocols: vec![("range".into(), subscription(&[]))],
        metadata: subscription(&[]),
        assignment: assignment(assigned),
    }
}

fn join(member: &str, owned: &[i32]) -> Join {
    Join {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/h".into(),
        session_timeout: Duration::from_secs(45),
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(owned))],
        require_known_member_id: true,
    }
}

fn consumer_beat(epoch: i32, owned: Option<BTreeSet<(Uuid, i32)>>) -> Beat {
    Beat {
        member_id: "c".into(),
        epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: if epoch == 0 { 30_000 } else { -1 },
        topics: (epoch == 0).then(|| vec!["t".to_string()]),
        regex: None,
        matched: BTreeSet::new(),
        assignor: None,
        owned,
        client_id: "c".into(),
        client_host: "/h".into(),
    }
}

/// A classic group of a (0, 1, 2) and b (3, 4, 5) at generation 5, taken over.
fn upgraded(now: Instant) -> ConsumerGroups {
    let groups = ConsumerGroups::default();
    let image = ClassicImage {
        generation: 5,
        members: vec![
            classic_member("a", &[0, 1, 2]),
            classic_member("b", &[3, 4, 5]),
        ],
    };
    assert!(groups.adopt("g", image, now, &metadata));
    groups
}

fn held_once(groups: &ConsumerGroups) {
    let g = groups.describe("g").unwrap();
    let mut seen = BTreeSet::new();
    for m in g.members.values() {
        for tp in m.assigned.iter().chain(&m.revoking) {
            assert!(seen.insert(*tp), "{tp:?} held twice: {g:?}");
        }
    }
}

#[test]
fn classic_members_of_an_upgraded_group_move_by_rejoining() {
    let now = Instant::now();
    let groups = upgraded(now);
    let g = groups.describe("g").unwrap();
    assert_eq!((g.epoch, g.members.len()), (5, 2));
    assert!(g
        .members
        .values()
        .all(|m| m.epoch == 5 && m.assigned.len() == 3));
    assert_eq!(
        groups.classic_heartbeat("g", "a", None, 5, now),
        Some(Ok(()))
    );
    assert_eq!(
        groups.classic_heartbeat("g", "a", None, 4, now),
        Some(Err(ResponseError::IllegalGeneration))
    );
    assert_eq!(groups.classic_heartbeat("nope", "a", None, 5, now), None);
    converge_with_a_consumer_member(&groups, now);
}

/// Consumer-protocol member c joins the upgraded group; the classic members rejoin until all
/// three hold two partitions at epoch 6.
fn converge_with_a_consumer_member(groups: &ConsumerGroups, now: Instant) {
    // A consumer-protocol member joins: epoch 6, two partitions each, c waits for them.
    let c = groups.heartbeat("g", consumer_beat(0, Some(BTreeSet::new())), now, &metadata);
    assert_eq!(c.unwrap().member_epoch, 6);
    assert_eq!(
        groups.classic_heartbeat("g", "a", None, 5, now),
        Some(Err(ResponseError::RebalanceInProgress))
    );
    let refused = groups
        .classic_sync("g", "a", None, 5, Some("range"), now)
        .unwrap();
    assert_eq!(refused.error, Some(ResponseError::RebalanceInProgress));

    // a (cooperative) rejoins still owning its three: it keeps two, gives one up, stays at 5.
    let joined = groups
        .classic_join(&join("a", &[0, 1, 2]), now, &metadata)
        .unwrap();
    assert_eq!(
        (joined.error, joined.generation, joined.leader.as_str()),
        (None, 5, "")
    );
    let synced = groups
        .classic_sync("g", "a", None, 5, Some("range"), now)
        .unwrap();
    let kept = partitions(&synced.assignment);
    assert_eq!(kept.len(), 2, "{synced:?}");
    held_once(groups);
    // Having given it up, it joins again and reaches epoch 6.
    let joined = groups
        .classic_join(&join("a", &kept), now, &metadata)
        .unwrap();
    assert_eq!(joined.generation, 6);
    // b (eager) gave everything up before joining.
    let joined = groups
        .classic_join(&join("b", &[]), now, &metadata)
        .unwrap();
    assert_eq!(joined.generation, 6);
    let b = groups
        .classic_sync("g", "b", None, 6, Some("range"), now)
        .unwrap();
    assert_eq!(partitions(&b.assignment).len(), 2);
    held_once(groups);
    let c = groups
        .heartbeat("g", consumer_beat(6, Some(BTreeSet::new())), now, &metadata)
        .unwrap();
    assert_eq!(c.assignment.map(|a| a.len()), Some(2));
    assert_eq!(groups.describe("g").unwrap().state(), "Stable");
}

#[test]
fn classic_members_commit_by_generation_and_the_group_goes_back_classic_without_c() {
    let now = Instant::now();
    let groups = upgraded(now);
    converge_with_a_consumer_member(&groups, now);
    // Commits: a classic member by generation with any version; c with v9 or later only.
    assert_eq!(
        groups.check_member("g", Some("a"), 6, Some(2)),
        Some(Ok(()))
    );
    assert_eq!(
        groups.check_member("g", Some("a"), 5, Some(8)),
        Some(Err(ResponseError::IllegalGeneration))
    );
    assert_eq!(
        groups.check_member("g", Some("c"), 6, Some(8)),
        Some(Err(ResponseError::UnsupportedVersion))
    );

    // Not while a consumer-protocol member is in it; once c leaves, back to classic with the
    // targets computed without c.
    assert!(groups.take_for_downgrade("g", 1000).is_none());
    groups
        .heartbeat("g", consumer_beat(-1, None), now, &metadata)
        .unwrap();
    assert!(
        groups.take_for_downgrade("g", 1).is_none(),
        "over group.max.size"
    );
    let image = groups.take_for_downgrade("g", 1000).unwrap();
    assert_eq!(image.generation, 7);
    let mut all = BTreeSet::new();
    for m in &image.members {
        let parts = partitions(&m.assignment);
        assert_eq!(parts.len(), 3, "{}: {parts:?}", m.member_id);
        all.extend(parts);
    }
    assert_eq!(all.len(), 6);
    assert!(groups.describe("g").is_none());
}

#[test]
fn a_new_classic_member_gets_its_id_first_and_a_static_one_takes_its_place_back() {
    let now = Instant::now();
    let groups = upgraded(now);
    let first = groups.classic_join(&join("", &[]), now, &metadata).unwrap();
    assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
    assert!(!first.member_id.is_empty());
    let joined = groups
        .classic_join(&join(&first.member_id, &[]), now, &metadata)
        .unwrap();
    assert_eq!((joined.error, joined.generation), (None, 6));
    assert_eq!(groups.describe("g").unwrap().members.len(), 3);
    // Not of the consumer protocol's members, not with another type.
    let mut wrong = join("a", &[]);
    wrong.protocol_type = "connect".into();
    assert_eq!(
        groups.classic_join(&wrong, now, &metadata).unwrap().error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    assert_eq!(
        groups.classic_leave("g", &[("x".into(), None)]),
        Some(vec![Err(ResponseError::UnknownMemberId)])
    );
    assert_eq!(
        groups.classic_leave("g", &[("a".into(), None)]),
        Some(vec![Ok(())])
    );
    assert_eq!(groups.describe("g").unwrap().members.len(), 2);
}

#[test]
fn classic_members_are_kept_across_a_restart() {
    let now = Instant::now();
    let groups = upgraded(now);
    groups
        .heartbeat("g", consumer_beat(0, Some(BTreeSet::new())), now, &metadata)
        .unwrap();
    let (id, write) = groups.unpersisted().pop().unwrap();
    let write = write.unwrap();
    assert!(write.all_members);
    let image = ConsumerGroupImage {
        epoch: write.epoch,
        target: Some(write.target),
        members: write.members,
    };
    let restarted = ConsumerGroups::default();
    restarted.restore(vec![(id, image)], now);
    let g = restarted.describe("g").unwrap();
    let classic: BTreeMap<&String, bool> = g
        .members
        .iter()
        .map(|(id, m)| (id, m.classic.is_some()))
        .collect();
    assert_eq!(
        classic,
        BTreeMap::from([
            (&"a".to_string(), true),
            (&"b".to_string(), true),
            (&"c".to_string(), false)
        ])
    );
    assert_eq!(
        restarted.classic_heartbeat("g", "a", None, 5, now),
        Some(Err(ResponseError::RebalanceInProgress)),
        "a is known, at its generation, and told to rejoin"
    );
}
