//! A consumer-protocol group to its records in `__consumer_offsets` and back
//! (`groups::offsets::consumer` says which records those are).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::group::{ClassicProtocol, ConsumerGroup, Member, MemberState};
use super::TopicPartition;
use crate::groups::offsets::{
    ClassicMemberRecord, ConsumerGroupImage, ConsumerMemberRecord, ConsumerTargetRecord,
    StoredPartition,
};

fn stored(partitions: &BTreeSet<TopicPartition>) -> Vec<StoredPartition> {
    partitions
        .iter()
        .map(|(id, p)| (id.as_u128(), *p))
        .collect()
}

fn partitions(stored: &[StoredPartition]) -> BTreeSet<TopicPartition> {
    stored
        .iter()
        .map(|(id, p)| (log_core::Uuid::from_u128(*id), *p))
        .collect()
}

impl MemberState {
    /// Kafka's codes (`MemberState.value()`).
    fn code(self) -> u8 {
        match self {
            MemberState::Stable => 1,
            MemberState::UnrevokedPartitions => 2,
            MemberState::UnreleasedPartitions => 3,
        }
    }

    fn from_code(code: u8) -> MemberState {
        match code {
            2 => MemberState::UnrevokedPartitions,
            3 => MemberState::UnreleasedPartitions,
            _ => MemberState::Stable,
        }
    }
}

impl ConsumerGroup {
    /// The record of member `id`, if it is one.
    pub(super) fn member_record(&self, id: &str) -> Option<ConsumerMemberRecord> {
        let m = self.members.get(id)?;
        let empty = BTreeSet::new();
        Some(ConsumerMemberRecord {
            instance_id: m.instance_id.clone(),
            rack_id: m.rack_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: u64::try_from(m.rebalance_timeout.as_millis())
                .unwrap_or(u64::MAX),
            names: m.names.iter().cloned().collect(),
            regex: m.regex.clone(),
            topics: m.topics.iter().cloned().collect(),
            assignor: m.assignor.clone(),
            epoch: m.epoch,
            previous_epoch: m.previous_epoch,
            state: m.state.code(),
            assigned: stored(&m.assigned),
            revoking: stored(&m.revoking),
            target: stored(self.target.get(id).unwrap_or(&empty)),
            classic: m.classic.as_ref().map(|c| ClassicMemberRecord {
                session_timeout_ms: u64::try_from(c.session_timeout.as_millis())
                    .unwrap_or(u64::MAX),
                protocols: c
                    .protocols
                    .iter()
                    .map(|(name, metadata)| (name.clone(), metadata.to_vec()))
                    .collect(),
            }),
        })
    }

    pub(super) fn target_record(&self) -> ConsumerTargetRecord {
        ConsumerTargetRecord {
            assignment_epoch: self.assignment_epoch,
            assignor: self.assignor.clone(),
            topics: self
                .topics
                .iter()
                .map(|(name, (id, count))| (name.clone(), id.as_u128(), *count))
                .collect(),
        }
    }

    /// The group its records keep, its members' session timers (and revocation deadlines)
    /// started again at `now`.
    pub(super) fn restored(image: ConsumerGroupImage, now: Instant) -> ConsumerGroup {
        let mut group = ConsumerGroup::new(image.epoch);
        if let Some(target) = image.target {
            group.assignment_epoch = target.assignment_epoch;
            group.assignor = target.assignor;
            group.topics = target
                .topics
                .into_iter()
                .map(|(name, id, count)| (name, (log_core::Uuid::from_u128(id), count)))
                .collect();
        }
        for (id, r) in image.members {
            let state = MemberState::from_code(r.state);
            let rebalance_timeout = Duration::from_millis(r.rebalance_timeout_ms);
            let member = Member {
                instance_id: r.instance_id,
                rack_id: r.rack_id,
                client_id: r.client_id,
                client_host: r.client_host,
                rebalance_timeout,
                topics: r.topics.into_iter().collect(),
                names: r.names.into_iter().collect(),
                regex: r.regex,
                assignor: r.assignor,
                epoch: r.epoch,
                previous_epoch: r.previous_epoch,
                state,
                assigned: partitions(&r.assigned),
                revoking: partitions(&r.revoking),
                last_heartbeat: now,
                revoke_deadline: (state == MemberState::UnrevokedPartitions)
                    .then(|| now + rebalance_timeout),
                classic: r.classic.map(|c| ClassicProtocol {
                    session_timeout: Duration::from_millis(c.session_timeout_ms),
                    protocols: c
                        .protocols
                        .into_iter()
                        .map(|(name, metadata)| (name, bytes::Bytes::from(metadata)))
                        .collect(),
                }),
            };
            group.target.insert(id.clone(), partitions(&r.target));
            group.members.insert(id, member);
        }
        group
    }
}
