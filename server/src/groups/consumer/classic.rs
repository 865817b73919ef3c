//! Classic-protocol members in a consumer-protocol group: KIP-848's online migration (Kafka's
//! `group.consumer.migration.policy`). A live classic group that a consumer-protocol member
//! joins becomes a consumer-protocol group with its members ([`ConsumerGroups::adopt`]); they
//! go on with JoinGroup, SyncGroup, Heartbeat and LeaveGroup, served here from the group's
//! server-side assignment, as Kafka's coordinator does:
//!
//! - JoinGroup answers at once, with the member's epoch as its generation and no leader: its
//!   subscription and owned partitions (the embedded protocol) move it towards its target as
//!   a consumer-protocol heartbeat would;
//! - SyncGroup answers the partitions it is assigned now;
//! - Heartbeat answers REBALANCE_IN_PROGRESS when it must join again: the group moved to a
//!   new epoch, it has partitions to give up, or partitions it waited for are free.
//!
//! When the last consumer-protocol member leaves, the group becomes classic again
//! ([`ConsumerGroups::take_for_downgrade`]) with each member's target as its assignment.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::embedded;
use super::group::{ClassicProtocol, ConsumerGroup, Member, MemberState};
use super::{Beat, ConsumerGroups, Metadata, TopicPartition};
use crate::groups::{Join, Joined, Synced};

#[cfg(test)]
mod tests;

/// `group.consumer.migration.policy`: which way a live group may change protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Kafka's default.
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    pub fn upgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    pub fn downgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

impl std::str::FromStr for MigrationPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "bidirectional" => Ok(MigrationPolicy::Bidirectional),
            "upgrade" => Ok(MigrationPolicy::Upgrade),
            "downgrade" => Ok(MigrationPolicy::Downgrade),
            "disabled" => Ok(MigrationPolicy::Disabled),
            _ => Err(format!(
                "{s}: one of bidirectional, upgrade, downgrade, disabled"
            )),
        }
    }
}

/// A live classic group as it changes protocol (either way).
#[derive(Debug, Clone)]
pub struct ClassicImage {
    pub generation: i32,
    pub members: Vec<ClassicMemberImage>,
}

#[derive(Debug, Clone)]
pub struct ClassicMemberImage {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    /// The metadata of the group's protocol (its subscription).
    pub metadata: Bytes,
    /// Its assignment (the embedded protocol's bytes).
    pub assignment: Bytes,
}

/// Partitions by topic name as partitions by topic id (unknown topics left out).
fn by_id(partitions: &[(String, i32)], metadata: Metadata<'_>) -> BTreeSet<TopicPartition> {
    partitions
        .iter()
        .filter_map(|(topic, p)| Some((metadata(topic)?.0, *p)))
        .collect()
}

impl ConsumerGroup {
    /// A consumer-protocol group of a classic group's members, as Kafka converts one: the
    /// group epoch and each member's epoch are the generation, each member's target its
    /// current assignment, every member stable.
    fn from_classic(image: ClassicImage, now: Instant, metadata: Metadata<'_>) -> ConsumerGroup {
        let mut group = ConsumerGroup::new(image.generation);
        for m in image.members {
            let subscription = embedded::subscription(&m.metadata).unwrap_or_default();
            let assigned = by_id(
                &embedded::assignment(&m.assignment).unwrap_or_default(),
                metadata,
            );
            let names: BTreeSet<String> = subscription.topics.into_iter().collect();
            let member = Member {
                instance_id: m.instance_id,
                rack_id: subscription.rack_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout: m.rebalance_timeout,
                topics: names.clone(),
                names,
                regex: None,
                assignor: None,
                epoch: image.generation,
                previous_epoch: image.generation,
                state: MemberState::Stable,
                assigned: assigned.clone(),
                revoking: BTreeSet::new(),
                last_heartbeat: now,
                revoke_deadline: None,
                classic: Some(ClassicProtocol {
                    session_timeout: m.session_timeout,
                    protocols: m.protocols,
                }),
            };
            group.target.insert(m.member_id.clone(), assigned);
            group.members.insert(m.member_id, member);
        }
        group.topics = group
            .members
            .values()
            .flat_map(|m| &m.topics)
            .filter_map(|t| Some((t.clone(), metadata(t)?)))
            .collect();
        group
    }

    /// The partitions by topic name (topics the group no longer knows left out).
    fn names(&self, partitions: &BTreeSet<TopicPartition>) -> Vec<(String, i32)> {
        partitions
            .iter()
            .filter_map(|(id, p)| {
                let (name, _) = self.topics.iter().find(|(_, (t, _))| t == id)?;
                Some((name.clone(), *p))
            })
            .collect()
    }

    /// The classic member `member_id` (by its instance id when it sent one), checked as
    /// Kafka does: FENCED_INSTANCE_ID for another member's instance, UNKNOWN_MEMBER_ID for
    /// no such member or one of the consumer protocol, ILLEGAL_GENERATION for another epoch.
    fn classic_member(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<&mut Member, ResponseError> {
        if let Some(instance) = instance_id {
            let owner = self
                .members
                .iter()
                .find(|(_, m)| m.instance_id.as_deref() == Some(instance))
                .map(|(id, _)| id.as_str());
            match owner {
                None => return Err(ResponseError::UnknownMemberId),
                Some(owner) if owner != member_id => return Err(ResponseError::FencedInstanceId),
                Some(_) => {}
            }
        }
        let member = self
            .members
            .get_mut(member_id)
            .filter(|m| m.classic.is_some())
            .ok_or(ResponseError::UnknownMemberId)?;
        if member.epoch != generation {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(member)
    }

    /// The member id a JoinGroup joins as, and whether it renamed a member: a static member
    /// back under a new member id takes its old self's place; a new member of JoinGroup v4+
    /// first gets its id (`Err`, MEMBER_ID_REQUIRED).
    fn classic_member_id(&mut self, join: &Join) -> Result<(String, bool), String> {
        if !join.member_id.is_empty() {
            return Ok((join.member_id.clone(), false));
        }
        let member_id = log_core::Uuid::new_v4().to_string();
        let old = join.instance_id.as_ref().and_then(|instance| {
            self.members
                .iter()
                .find(|(_, m)| m.instance_id.as_ref() == Some(instance) && m.classic.is_some())
                .map(|(id, _)| id.clone())
        });
        let Some(old) = old else {
            if join.require_known_member_id {
                return Err(member_id);
            }
            return Ok((member_id, false));
        };
        if let Some(m) = self.members.remove(&old) {
            self.members.insert(member_id.clone(), m);
        }
        if let Some(t) = self.target.remove(&old) {
            self.target.insert(member_id.clone(), t);
        }
        Ok((member_id, true))
    }

    /// Whether partitions of its target that `member_id` has not been given are still held
    /// by others.
    fn waits_on_unreleased(&self, member_id: &str) -> bool {
        let Some(target) = self.target.get(member_id) else {
            return false;
        };
        let member = &self.members[member_id];
        self.members
            .iter()
            .filter(|(id, _)| id.as_str() != member_id)
            .flat_map(|(_, m)| m.assigned.iter().chain(&m.revoking))
            .any(|tp| target.contains(tp) && !member.assigned.contains(tp))
    }
}

impl ConsumerGroups {
    /// Takes a live classic group over (an online upgrade); false when the group id is taken.
    pub fn adopt(
        &self,
        group_id: &str,
        image: ClassicImage,
        now: Instant,
        metadata: Metadata<'_>,
    ) -> bool {
        let mut groups = self.lock();
        if groups.contains_key(group_id) {
            return false;
        }
        let group = ConsumerGroup::from_classic(image, now, metadata);
        tracing::info!(group = %group_id, members = group.members.len(), epoch = group.epoch, "classic group upgraded to a consumer-protocol group");
        groups.insert(group_id.to_string(), group);
        self.mark(group_id);
        true
    }

    /// Takes out a group whose members all speak the classic protocol (its last
    /// consumer-protocol member left), to become a classic group of at most `max_size`
    /// members, each assigned its target; `None` for any other group.
    pub fn take_for_downgrade(&self, group_id: &str, max_size: usize) -> Option<ClassicImage> {
        let mut groups = self.lock();
        let group = groups.get(group_id)?;
        let all_classic = group.members.values().all(|m| m.classic.is_some());
        if group.members.is_empty() || !all_classic || group.members.len() > max_size {
            return None;
        }
        let group = groups.remove(group_id)?;
        self.mark(group_id);
        let empty = BTreeSet::new();
        let members = group
            .members
            .iter()
            .map(|(id, m)| {
                let protocols = m.classic.clone().map(|c| c.protocols).unwrap_or_default();
                let metadata = protocols
                    .first()
                    .map(|(_, m)| m.clone())
                    .unwrap_or_default();
                let target = group.names(group.target.get(id).unwrap_or(&empty));
                ClassicMemberImage {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout: m
                        .classic
                        .as_ref()
                        .map_or(Duration::ZERO, |c| c.session_timeout),
                    rebalance_timeout: m.rebalance_timeout,
                    assignment: embedded::encode_assignment(&target, embedded::version(&metadata)),
                    metadata,
                    protocols,
                }
            })
            .collect();
        tracing::info!(group = %group_id, epoch = group.epoch, "consumer-protocol group downgraded to a classic group");
        Some(ClassicImage {
            generation: group.epoch,
            members,
        })
    }

    /// JoinGroup of a classic member to a consumer-protocol group with members; `None` when
    /// `join.group_id` is no such group (the classic coordinator takes it).
    pub fn classic_join(
        &self,
        join: &Join,
        now: Instant,
        metadata: Metadata<'_>,
    ) -> Option<Joined> {
        let mut groups = self.lock();
        let group = groups
            .get_mut(&join.group_id)
            .filter(|g| !g.members.is_empty())?;
        let fail = |error| Some(Joined::failed(error, &join.member_id));
        let Some((protocol, first)) = join.protocols.first() else {
            return fail(ResponseError::InconsistentGroupProtocol);
        };
        let subscription = match embedded::subscription(first) {
            Some(s) if join.protocol_type == "consumer" => s,
            _ => return fail(ResponseError::InconsistentGroupProtocol),
        };
        let (member_id, renamed) = match group.classic_member_id(join) {
            Ok(found) => found,
            Err(id) => return Some(Joined::failed(ResponseError::MemberIdRequired, &id)),
        };
        let epoch = match group.members.get(&member_id) {
            Some(m) if m.classic.is_none() => return fail(ResponseError::UnknownMemberId),
            Some(m) => m.epoch,
            None => 0,
        };
        let before = group.member_record(&member_id);
        let group_epoch = group.epoch;
        let beat = Beat {
            member_id: member_id.clone(),
            epoch,
            instance_id: join.instance_id.clone(),
            rack_id: subscription.rack_id,
            rebalance_timeout_ms: i32::try_from(join.rebalance_timeout.as_millis())
                .unwrap_or(i32::MAX),
            topics: Some(subscription.topics),
            regex: None,
            matched: BTreeSet::new(),
            assignor: None,
            owned: Some(by_id(&subscription.owned, metadata)),
            client_id: join.client_id.clone(),
            client_host: join.client_host.clone(),
        };
        let answer = group.heartbeat(beat, now, self.config.max_size, metadata);
        if let Some(m) = group.members.get_mut(&member_id) {
            m.classic = Some(ClassicProtocol {
                session_timeout: join.session_timeout,
                protocols: join.protocols.clone(),
            });
        }
        if renamed || group.epoch != group_epoch || before.is_none() {
            self.mark(&join.group_id);
        } else if group.member_record(&member_id) != before {
            self.mark_member(&join.group_id, &member_id);
        }
        Some(match answer {
            Ok(answer) => Joined {
                error: None,
                generation: answer.member_epoch,
                protocol_type: Some("consumer".to_string()),
                protocol_name: Some(protocol.clone()),
                leader: String::new(),
                member_id,
                members: Vec::new(),
            },
            Err(error) => Joined::failed(error, &member_id),
        })
    }

    /// SyncGroup of a classic member of a consumer-protocol group: the partitions it is
    /// assigned now. `None` when `group_id` is no consumer-protocol group with members.
    pub fn classic_sync(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol_name: Option<&str>,
        now: Instant,
    ) -> Option<Synced> {
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).filter(|g| !g.members.is_empty())?;
        let group_epoch = group.epoch;
        let member = match group.classic_member(member_id, instance_id, generation) {
            Ok(member) => member,
            Err(error) => return Some(Synced::failed(error)),
        };
        let protocols = member
            .classic
            .as_ref()
            .map(|c| c.protocols.clone())
            .unwrap_or_default();
        let chosen = match protocol_name {
            Some(name) => protocols.iter().find(|(n, _)| n == name),
            None => protocols.first(),
        };
        let Some((name, metadata)) = chosen.cloned() else {
            return Some(Synced::failed(ResponseError::InconsistentGroupProtocol));
        };
        if group_epoch > member.epoch && member.state != MemberState::UnrevokedPartitions {
            return Some(Synced::failed(ResponseError::RebalanceInProgress));
        }
        member.last_heartbeat = now;
        let assigned = member.assigned.clone();
        let assignment =
            embedded::encode_assignment(&group.names(&assigned), embedded::version(&metadata));
        Some(Synced {
            error: None,
            protocol_type: Some("consumer".to_string()),
            protocol_name: Some(name),
            assignment,
        })
    }

    /// Heartbeat of a classic member of a consumer-protocol group: REBALANCE_IN_PROGRESS when
    /// it must join again. `None` when `group_id` is no consumer-protocol group with members.
    pub fn classic_heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Option<Result<(), ResponseError>> {
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).filter(|g| !g.members.is_empty())?;
        let group_epoch = group.epoch;
        let member = match group.classic_member(member_id, instance_id, generation) {
            Ok(member) => member,
            Err(error) => return Some(Err(error)),
        };
        member.last_heartbeat = now;
        let state = member.state;
        let behind = member.epoch < group_epoch;
        let rejoin = behind
            || state == MemberState::UnrevokedPartitions
            || (state == MemberState::UnreleasedPartitions
                && !group.waits_on_unreleased(member_id));
        Some(if rejoin {
            Err(ResponseError::RebalanceInProgress)
        } else {
            Ok(())
        })
    }

    /// LeaveGroup of classic members (by id, or by instance id alone) of a consumer-protocol
    /// group: each one's answer. `None` when `group_id` is no consumer-protocol group with
    /// members.
    pub fn classic_leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Option<Vec<Result<(), ResponseError>>> {
        let mut groups = self.lock();
        let group = groups.get_mut(group_id).filter(|g| !g.members.is_empty())?;
        let mut answers = Vec::new();
        for (member_id, instance_id) in members {
            let found = match instance_id {
                Some(instance) => group
                    .members
                    .iter()
                    .find(|(_, m)| m.instance_id.as_ref() == Some(instance))
                    .map(|(id, _)| id.clone())
                    .ok_or(ResponseError::UnknownMemberId)
                    .and_then(|id| {
                        if member_id.is_empty() || *member_id == id {
                            Ok(id)
                        } else {
                            Err(ResponseError::FencedInstanceId)
                        }
                    }),
                None => Ok(member_id.clone()),
            };
            let answer = found.and_then(|id| {
                if group.members.get(&id).is_some_and(|m| m.classic.is_some()) {
                    group.remove(&id);
                    Ok(())
                } else {
                    Err(ResponseError::UnknownMemberId)
                }
            });
            answers.push(answer);
        }
        self.mark(group_id);
        Some(answers)
    }
}
