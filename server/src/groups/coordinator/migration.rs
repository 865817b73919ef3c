//! A live classic group out of the classic coordinator and back into it: KIP-848's online
//! migration (see `groups::consumer::classic`, which serves the group in between).

use std::time::Instant;

use kafka_protocol::error::ResponseError;

use super::super::consumer::{ClassicImage, ClassicMemberImage};
use super::super::group::{Group, Member};
use super::super::messages::GroupState;
use super::Coordinator;

/// The protocol type of the consumer's embedded protocol.
const CONSUMER: &str = "consumer";

impl Coordinator {
    /// Takes out a live group of the consumer protocol type with at most `max_size` members,
    /// to become a consumer-protocol group (an online upgrade): whoever waits in JoinGroup or
    /// SyncGroup is told REBALANCE_IN_PROGRESS and joins again, into the new group. `None`
    /// for any other group.
    pub fn take_for_upgrade(&self, group_id: &str, max_size: usize) -> Option<ClassicImage> {
        let mut groups = self.lock();
        let group = groups.get(group_id)?;
        if group.members.is_empty()
            || group.protocol_type.as_deref() != Some(CONSUMER)
            || group.members.len() > max_size
        {
            return None;
        }
        let mut group = groups.remove(group_id)?;
        let protocol = group.protocol.clone();
        let mut members: Vec<(u64, ClassicMemberImage)> = group
            .members
            .drain()
            .map(|(id, mut m)| {
                m.fail_waiters(ResponseError::RebalanceInProgress, &id);
                let metadata = match &protocol {
                    Some(p) => m.metadata_for(p),
                    None => m
                        .protocols
                        .first()
                        .map(|(_, md)| md.clone())
                        .unwrap_or_default(),
                };
                let image = ClassicMemberImage {
                    member_id: id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: m.protocols,
                    metadata,
                    assignment: m.assignment,
                };
                (m.joined_at, image)
            })
            .collect();
        members.sort_by_key(|(order, _)| *order);
        tracing::info!(group = %group_id, generation = group.generation, "classic group taken over by the consumer protocol");
        Some(ClassicImage {
            generation: group.generation,
            members: members.into_iter().map(|(_, m)| m).collect(),
        })
    }

    /// Makes a classic group of a consumer-protocol group's members (an online downgrade):
    /// Stable at its epoch with each member's assignment, then rebalancing, so that they join
    /// again as Kafka has them do. False when the group id is taken.
    pub fn adopt(&self, group_id: &str, image: ClassicImage, now: Instant) -> bool {
        let mut groups = self.lock();
        if groups.contains_key(group_id) {
            return false;
        }
        let mut group = Group::new();
        group.generation = image.generation;
        group.protocol_type = Some(CONSUMER.to_string());
        group.state = GroupState::Stable;
        for m in image.members {
            let (_, joined_at) = self.new_member_id("");
            group.leader.get_or_insert_with(|| m.member_id.clone());
            group.members.insert(
                m.member_id,
                Member {
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: m.protocols,
                    assignment: m.assignment,
                    last_heartbeat: now,
                    joined_at,
                    joining: None,
                    syncing: None,
                },
            );
        }
        group.protocol = group.select_protocol();
        group.prepare_rebalance(&self.config, now);
        groups.insert(group_id.to_string(), group);
        true
    }
}
