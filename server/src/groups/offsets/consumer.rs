//! A consumer-protocol group's own records (KIP-848) in `__consumer_offsets`, as Kafka's
//! coordinator keeps them, so that after a restart its members go on at their epochs with
//! their partitions, without a rebalance:
//!
//! - key `(group, "", -2)`: the group epoch ([`ConsumerGroupMeta`], Kafka's
//!   ConsumerGroupMetadata record);
//! - key `(group, "", -3)`: the target assignment's epoch, assignor and the subscribed topics
//!   it was computed from ([`ConsumerTargetRecord`], Kafka's TargetAssignmentMetadata and
//!   PartitionMetadata records);
//! - key `(group, <member id>, -4)`: one member, what it subscribes to, where it is in its
//!   reconciliation and its target ([`ConsumerMemberRecord`], Kafka's MemberMetadata,
//!   CurrentMemberAssignment and TargetAssignmentMember records).
//!
//! Heartbeats and session timers are not kept: they start again at start-up.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Key, Value};

/// A topic partition by topic id (as a `u128`).
pub type StoredPartition = (u128, i32);

/// The group epoch, so a group's epochs keep counting across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerGroupMeta {
    pub epoch: i32,
}

/// What the group's target assignment was computed at, with and from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerTargetRecord {
    pub assignment_epoch: i32,
    pub assignor: String,
    /// (name, topic id, partition count) of each subscribed topic.
    pub topics: Vec<(String, u128, u32)>,
}

/// One member of a consumer-protocol group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerMemberRecord {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: u64,
    /// The topic names it subscribed by name.
    pub names: Vec<String>,
    pub regex: Option<String>,
    /// Every topic it subscribes to (its names and its regex's matches).
    pub topics: Vec<String>,
    pub assignor: Option<String>,
    pub epoch: i32,
    pub previous_epoch: i32,
    /// Kafka's `MemberState` codes: 1 stable, 2 unrevoked, 3 unreleased partitions.
    pub state: u8,
    pub assigned: Vec<StoredPartition>,
    pub revoking: Vec<StoredPartition>,
    pub target: Vec<StoredPartition>,
    /// Set for a member of the classic protocol (an upgraded group's).
    pub classic: Option<ClassicMemberRecord>,
}

/// What a classic-protocol member of a consumer-protocol group brings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassicMemberRecord {
    pub session_timeout_ms: u64,
    /// Its protocols: (name, metadata).
    pub protocols: Vec<(String, Vec<u8>)>,
}

/// A consumer-protocol group as its records keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupImage {
    pub epoch: i32,
    pub target: Option<ConsumerTargetRecord>,
    pub members: BTreeMap<String, ConsumerMemberRecord>,
}

/// What a group is now, to be written where its records differ.
#[derive(Debug, Clone)]
pub struct ConsumerGroupWrite {
    pub epoch: i32,
    pub target: ConsumerTargetRecord,
    pub members: BTreeMap<String, ConsumerMemberRecord>,
    /// Whether `members` are all its members: a stored member not among them is deleted.
    pub all_members: bool,
}

const META_PARTITION: i32 = -2;
const TARGET_PARTITION: i32 = -3;
const MEMBER_PARTITION: i32 = -4;

/// Which of a consumer group's records a key is.
pub(super) enum Part {
    Meta,
    Target,
    /// The member id.
    Member(String),
}

impl Key {
    fn consumer(group: &str, part: &Part) -> Key {
        match part {
            Part::Meta => Key::new(group, "", META_PARTITION),
            Part::Target => Key::new(group, "", TARGET_PARTITION),
            Part::Member(member) => Key::new(group, member, MEMBER_PARTITION),
        }
    }

    /// The consumer group record this key is, if it is one.
    pub(super) fn consumer_part(&self) -> Option<Part> {
        match (self.topic.as_str(), self.partition) {
            ("", META_PARTITION) => Some(Part::Meta),
            ("", TARGET_PARTITION) => Some(Part::Target),
            (member, MEMBER_PARTITION) if !member.is_empty() => {
                Some(Part::Member(member.to_string()))
            }
            _ => None,
        }
    }
}

/// A record's value, decoded for the part it is (`None`: a tombstone).
pub(super) enum Stored {
    Meta(Option<ConsumerGroupMeta>),
    Target(Option<ConsumerTargetRecord>),
    Member(String, Option<Box<ConsumerMemberRecord>>),
}

impl Stored {
    /// Decodes `value` as the record `part` is; `None` when it does not decode.
    pub(super) fn decode(part: Part, value: Option<&[u8]>) -> Option<Stored> {
        fn decoded<V: serde::de::DeserializeOwned>(value: Option<&[u8]>) -> Option<Option<V>> {
            match value {
                None => Some(None),
                Some(bytes) => log_core::StateLog::decode(bytes).map(Some),
            }
        }
        Some(match part {
            Part::Meta => Stored::Meta(decoded(value)?),
            Part::Target => Stored::Target(decoded(value)?),
            Part::Member(id) => Stored::Member(id, decoded(value)?),
        })
    }

    /// The part a written value is; `None` for a value of another kind.
    pub(super) fn written(part: Part, value: Option<Value>) -> Option<Stored> {
        Some(match (part, value) {
            (Part::Meta, Some(Value::ConsumerGroup(meta))) => Stored::Meta(Some(meta)),
            (Part::Meta, None) => Stored::Meta(None),
            (Part::Target, Some(Value::ConsumerTarget(target))) => Stored::Target(Some(target)),
            (Part::Target, None) => Stored::Target(None),
            (Part::Member(id), Some(Value::ConsumerMember(member))) => {
                Stored::Member(id, Some(member))
            }
            (Part::Member(id), None) => Stored::Member(id, None),
            _ => return None,
        })
    }
}

/// Sets `slot` to what was written at `at` (`None`: deleted), unless a later write is there.
fn put<V>(slot: &mut Option<(V, i64)>, value: Option<V>, at: i64) {
    if slot.as_ref().is_some_and(|(_, was)| *was > at) {
        return;
    }
    *slot = value.map(|v| (v, at));
}

/// A consumer group's records as the log has them, each with the offset that wrote it.
#[derive(Debug, Default)]
pub(super) struct StoredGroup {
    meta: Option<(ConsumerGroupMeta, i64)>,
    target: Option<(ConsumerTargetRecord, i64)>,
    members: BTreeMap<String, (ConsumerMemberRecord, i64)>,
}

impl StoredGroup {
    pub(super) fn apply(&mut self, stored: Stored, at: i64) {
        match stored {
            Stored::Meta(meta) => put(&mut self.meta, meta, at),
            Stored::Target(target) => put(&mut self.target, target, at),
            Stored::Member(id, member) => {
                let mut slot = self.members.remove(&id);
                put(&mut slot, member.map(|m| *m), at);
                if let Some(slot) = slot {
                    self.members.insert(id, slot);
                }
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.meta.is_none() && self.target.is_none() && self.members.is_empty()
    }

    pub(super) fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    /// The group as its records keep it; `None` without its epoch record.
    pub(super) fn image(&self) -> Option<ConsumerGroupImage> {
        Some(ConsumerGroupImage {
            epoch: self.meta?.0.epoch,
            target: self.target.as_ref().map(|(t, _)| t.clone()),
            members: self
                .members
                .iter()
                .map(|(id, (m, _))| (id.clone(), m.clone()))
                .collect(),
        })
    }

    /// Every record it has, as it would be written again.
    pub(super) fn records(&self, group: &str) -> Vec<(Key, Option<Value>)> {
        let mut out = Vec::new();
        if let Some((meta, _)) = self.meta {
            out.push((
                Key::consumer(group, &Part::Meta),
                Some(Value::ConsumerGroup(meta)),
            ));
        }
        if let Some((target, _)) = &self.target {
            out.push((
                Key::consumer(group, &Part::Target),
                Some(Value::ConsumerTarget(target.clone())),
            ));
        }
        for (id, (member, _)) in &self.members {
            out.push((
                Key::consumer(group, &Part::Member(id.clone())),
                Some(Value::ConsumerMember(Box::new(member.clone()))),
            ));
        }
        out
    }

    /// The records that make it what `write` says (`None`: the group is gone), and no other.
    pub(super) fn changes(
        &self,
        group: &str,
        write: Option<ConsumerGroupWrite>,
    ) -> Vec<(Key, Option<Value>)> {
        let key = |part: Part| Key::consumer(group, &part);
        let mut out = Vec::new();
        let Some(write) = write else {
            if self.meta.is_some() {
                out.push((key(Part::Meta), None));
            }
            if self.target.is_some() {
                out.push((key(Part::Target), None));
            }
            for id in self.members.keys() {
                out.push((key(Part::Member(id.clone())), None));
            }
            return out;
        };
        let meta = ConsumerGroupMeta { epoch: write.epoch };
        if self.meta.map(|(m, _)| m) != Some(meta) {
            out.push((key(Part::Meta), Some(Value::ConsumerGroup(meta))));
        }
        if self.target.as_ref().map(|(t, _)| t) != Some(&write.target) {
            out.push((key(Part::Target), Some(Value::ConsumerTarget(write.target))));
        }
        if write.all_members {
            for id in self.members.keys() {
                if !write.members.contains_key(id) {
                    out.push((key(Part::Member(id.clone())), None));
                }
            }
        }
        for (id, member) in write.members {
            if self.members.get(&id).map(|(m, _)| m) != Some(&member) {
                out.push((
                    key(Part::Member(id)),
                    Some(Value::ConsumerMember(Box::new(member))),
                ));
            }
        }
        out
    }
}
