//! One consumer-protocol group (KIP-848): its members, the group epoch, the target assignment
//! and each member's reconciliation towards it (Kafka's `CurrentAssignmentBuilder`).
//!
//! The group epoch bumps when a member joins or leaves, when a member's subscription or server
//! assignor changes, and when a subscribed topic appears or grows. The target assignment is
//! computed at once for the new epoch (its epoch is then the group's). Each member converges
//! on its own heartbeats, with no barrier: a partition the target moves is first revoked from
//! its owner (the member keeps its epoch and waits, UNREVOKED_PARTITIONS, until a heartbeat no
//! longer lists it), and only then given to its new owner (which, meanwhile, is at the new
//! epoch with what is free, UNRELEASED_PARTITIONS). No partition is ever held by two members.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

use super::assignor::{self, Spec, Target};
use super::TopicPartition;

/// The epoch of a static member that left (Kafka's `LEAVE_GROUP_STATIC_MEMBER_EPOCH`): it
/// holds its partitions for its return within the session timeout.
pub const LEFT_STATIC: i32 = -2;

/// Kafka's `MemberState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// Waiting for the member to give up `revoking`.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still hold.
    UnreleasedPartitions,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: Duration,
    /// What the member subscribes to: its topic names and the topics its regex matches.
    pub topics: BTreeSet<String>,
    /// The topic names it subscribed by name.
    pub names: BTreeSet<String>,
    /// `subscribed_topic_regex`, if it subscribed by one.
    pub regex: Option<String>,
    pub assignor: Option<String>,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    /// What the member owns (or was told to own).
    pub assigned: BTreeSet<TopicPartition>,
    /// What it must give up before it moves on.
    pub revoking: BTreeSet<TopicPartition>,
    pub last_heartbeat: Instant,
    /// When an unacknowledged revocation fences it (its rebalance timeout).
    pub revoke_deadline: Option<Instant>,
    /// Set for a member that speaks the classic protocol (`classic`).
    pub classic: Option<ClassicProtocol>,
}

/// What a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat) in a
/// consumer-protocol group brings (Kafka's ClassicMemberMetadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicProtocol {
    pub session_timeout: Duration,
    /// Its protocols (assignor names) with their metadata, in its order of preference.
    pub protocols: Vec<(String, bytes::Bytes)>,
}

impl Member {
    /// A member that just joined: nothing known of it yet, at epoch 0.
    fn new(now: Instant) -> Self {
        Member {
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout: Duration::ZERO,
            topics: BTreeSet::new(),
            names: BTreeSet::new(),
            regex: None,
            assignor: None,
            epoch: 0,
            previous_epoch: -1,
            state: MemberState::Stable,
            assigned: BTreeSet::new(),
            revoking: BTreeSet::new(),
            last_heartbeat: now,
            revoke_deadline: None,
            classic: None,
        }
    }

    /// Records what a heartbeat says of the member (the fields it sent; its owned partitions
    /// aside). Whether the group's epoch must bump: its subscription or assignor changed.
    fn record_beat(&mut self, beat: Beat, now: Instant) -> bool {
        let mut bump = false;
        self.last_heartbeat = now;
        self.client_id = beat.client_id;
        self.client_host = beat.client_host;
        if beat.instance_id.is_some() {
            self.instance_id = beat.instance_id;
        }
        if beat.rack_id.is_some() {
            self.rack_id = beat.rack_id;
        }
        if let Ok(ms) = u64::try_from(beat.rebalance_timeout_ms) {
            self.rebalance_timeout = Duration::from_millis(ms);
        }
        if let Some(names) = beat.topics {
            self.names = names.into_iter().collect();
        }
        if let Some(regex) = beat.regex {
            self.regex = Some(regex).filter(|r| !r.is_empty());
        }
        let topics: BTreeSet<String> = self.names.union(&beat.matched).cloned().collect();
        bump |= topics != self.topics;
        self.topics = topics;
        if beat.assignor.is_some() && beat.assignor != self.assignor {
            self.assignor = beat.assignor;
            bump = true;
        }
        bump
    }
}

/// Fences a heartbeat whose epoch is ahead of the member's, or behind it other than as a
/// retry of a lost answer.
fn check_epoch(member: &Member, beat: &Beat) -> Result<(), ResponseError> {
    if beat.epoch > member.epoch {
        return Err(ResponseError::FencedMemberEpoch);
    }
    if beat.epoch < member.epoch
        && (beat.epoch != member.previous_epoch
            || beat
                .owned
                .as_ref()
                .is_some_and(|o| !o.is_subset(&member.assigned)))
    {
        // An older epoch is accepted only when the answer that moved the member on was
        // lost: the previous epoch, owning no more than it is assigned now.
        return Err(ResponseError::FencedMemberEpoch);
    }
    Ok(())
}

/// A ConsumerGroupHeartbeat, as the group needs it (validated by the caller).
#[derive(Debug, Clone)]
pub struct Beat {
    pub member_id: String,
    pub epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// `subscribed_topic_names` (`None`: unchanged).
    pub topics: Option<Vec<String>>,
    /// `subscribed_topic_regex` (`None`: unchanged; empty: none).
    pub regex: Option<String>,
    /// The topics the member's regex (this one, else the one it has) matches now, among those
    /// its principal may describe; empty without a regex.
    pub matched: BTreeSet<String>,
    pub assignor: Option<String>,
    /// The partitions the member says it owns (`None`: not sent).
    pub owned: Option<BTreeSet<TopicPartition>>,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub member_epoch: i32,
    /// Sent on a full request or when it changed.
    pub assignment: Option<BTreeSet<TopicPartition>>,
}

/// A topic's id and partition count, as the broker knows it now (`None`: no such topic).
pub type Metadata<'a> = &'a dyn Fn(&str) -> Option<(log_core::Uuid, u32)>;

#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    pub target: Target,
    /// The subscribed topics' ids and partition counts the target was computed from.
    pub topics: BTreeMap<String, (log_core::Uuid, u32)>,
    /// The assignor the target was computed with.
    pub assignor: String,
}

impl ConsumerGroup {
    /// A new group, or one whose epoch was kept (restored after a restart).
    pub fn new(epoch: i32) -> Self {
        ConsumerGroup {
            epoch,
            assignment_epoch: epoch,
            members: BTreeMap::new(),
            target: Target::new(),
            topics: BTreeMap::new(),
            assignor: assignor::ASSIGNORS[0].to_string(),
        }
    }

    /// Kafka's consumer group states.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch != self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// A heartbeat with epoch 0 or more (leaving is [`ConsumerGroup::remove`]).
    pub fn heartbeat(
        &mut self,
        mut beat: Beat,
        now: Instant,
        max_size: usize,
        metadata: Metadata<'_>,
    ) -> Result<Answer, ResponseError> {
        let id = beat.member_id.clone();
        let mut bump = false;
        let mut returned = false;
        if beat.epoch == 0 {
            (bump, returned) = self.join(&id, beat.instance_id.as_ref(), now, max_size)?;
        }
        let member = self
            .members
            .get_mut(&id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if !returned {
            check_epoch(member, &beat)?;
        }
        let full = beat.epoch == 0
            || (beat.rebalance_timeout_ms != -1
                && (beat.topics.is_some() || beat.regex.is_some())
                && beat.owned.is_some());
        let owned = beat.owned.take();
        bump |= member.record_beat(beat, now);
        let before = (member.epoch, member.assigned.clone());
        // The subscribed topics as they are now: a topic created or grown bumps the epoch too.
        let topics = self.subscribed_metadata(metadata);
        bump |= topics != self.topics;
        if bump {
            self.topics = topics;
            self.epoch += 1;
        }
        if self.epoch > self.assignment_epoch {
            self.compute_target();
        }
        self.reconcile(&id, owned.as_ref(), now);
        let member = self
            .members
            .get(&id)
            .ok_or(ResponseError::UnknownMemberId)?;
        let changed = before != (member.epoch, member.assigned.clone());
        Ok(Answer {
            member_epoch: member.epoch,
            assignment: (full || changed).then(|| member.assigned.clone()),
        })
    }

    /// A heartbeat at epoch 0: the member joins, or rejoins having given up everything it had.
    /// A static member that left (epoch -2) and comes back under a new member id takes its
    /// old self's place: its epoch and partitions, at once; while its old self has not left,
    /// the instance id is UNRELEASED_INSTANCE_ID, as in Kafka. Whether the group's epoch must
    /// bump (a member came), and whether a static member returned.
    fn join(
        &mut self,
        id: &str,
        instance_id: Option<&String>,
        now: Instant,
        max_size: usize,
    ) -> Result<(bool, bool), ResponseError> {
        let old = instance_id.and_then(|instance| {
            self.members
                .iter()
                .find(|(m, v)| m.as_str() != id && v.instance_id.as_ref() == Some(instance))
                .map(|(m, v)| (m.clone(), v.epoch))
        });
        if let Some((old_id, epoch)) = old {
            if epoch != LEFT_STATIC {
                return Err(ResponseError::UnreleasedInstanceId);
            }
            if let Some(mut member) = self.members.remove(&old_id) {
                member.epoch = member.previous_epoch;
                member.last_heartbeat = now;
                if let Some(target) = self.target.remove(&old_id) {
                    self.target.insert(id.to_string(), target);
                }
                self.members.insert(id.to_string(), member);
                return Ok((false, true));
            }
        }
        let mut bump = false;
        match self.members.get_mut(id) {
            Some(member) => {
                // Rejoining: the member gave up everything it had.
                member.assigned.clear();
                member.revoking.clear();
                member.previous_epoch = member.epoch;
                member.epoch = 0;
                member.state = MemberState::Stable;
                member.revoke_deadline = None;
            }
            None => {
                if self.members.len() >= max_size {
                    return Err(ResponseError::GroupMaxSizeReached);
                }
                self.members.insert(id.to_string(), Member::new(now));
                bump = true;
            }
        }
        Ok((bump, false))
    }

    /// A static member's leave (epoch -2): it stays, holding its partitions, until it comes
    /// back under its instance id or its session times out (then [`ConsumerGroup::remove`]).
    /// False when there is no such static member.
    pub fn leave_static(&mut self, member_id: &str, now: Instant) -> bool {
        let Some(member) = self.members.get_mut(member_id) else {
            return false;
        };
        if member.instance_id.is_none() {
            return false;
        }
        if member.epoch != LEFT_STATIC {
            member.previous_epoch = member.epoch;
            member.epoch = LEFT_STATIC;
        }
        member.last_heartbeat = now;
        member.revoke_deadline = None;
        true
    }

    /// Removes a member (it left, was fenced or timed out): its partitions are free at once.
    pub fn remove(&mut self, member_id: &str) -> bool {
        if self.members.remove(member_id).is_none() {
            return false;
        }
        self.epoch += 1;
        let subscribed: BTreeSet<&String> = self.members.values().flat_map(|m| &m.topics).collect();
        self.topics.retain(|t, _| subscribed.contains(t));
        self.compute_target();
        true
    }

    /// Members silent past `session_timeout` (a classic member's: its own), or that did not
    /// give up revoked partitions within their rebalance timeout.
    pub fn expired(&self, now: Instant, session_timeout: Duration) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, m)| {
                let session = m
                    .classic
                    .as_ref()
                    .map_or(session_timeout, |c| c.session_timeout);
                now.saturating_duration_since(m.last_heartbeat) > session
                    || m.revoke_deadline.is_some_and(|d| now > d)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn subscribed_metadata(
        &self,
        metadata: Metadata<'_>,
    ) -> BTreeMap<String, (log_core::Uuid, u32)> {
        let names: BTreeSet<&String> = self.members.values().flat_map(|m| &m.topics).collect();
        names
            .into_iter()
            .filter_map(|t| Some((t.clone(), metadata(t)?)))
            .collect()
    }

    /// The assignor most members ask for (ties: the first served), else the default.
    fn preferred_assignor(&self) -> String {
        let mut votes: BTreeMap<usize, usize> = BTreeMap::new();
        for name in self.members.values().filter_map(|m| m.assignor.as_deref()) {
            if let Some(i) = assignor::ASSIGNORS.iter().position(|a| *a == name) {
                *votes.entry(i).or_default() += 1;
            }
        }
        let best = votes
            .iter()
            .max_by_key(|(i, n)| (**n, std::cmp::Reverse(**i)))
            .map_or(0, |(i, _)| *i);
        assignor::ASSIGNORS[best].to_string()
    }

    fn compute_target(&mut self) {
        self.assignor = self.preferred_assignor();
        let empty = BTreeSet::new();
        let specs: BTreeMap<String, Spec<'_>> = self
            .members
            .iter()
            .map(|(id, m)| {
                (
                    id.clone(),
                    Spec {
                        topics: &m.topics,
                        instance_id: m.instance_id.as_deref(),
                        current: self.target.get(id).unwrap_or(&empty),
                    },
                )
            })
            .collect();
        self.target = assignor::assign(&self.assignor, &specs, &self.topics);
        self.assignment_epoch = self.epoch;
    }

    /// Moves a member towards its target, as far as it can now.
    fn reconcile(&mut self, id: &str, owned: Option<&BTreeSet<TopicPartition>>, now: Instant) {
        let owns_any = |set: &BTreeSet<TopicPartition>| owned.is_none_or(|o| !o.is_disjoint(set));
        let Some(member) = self.members.get(id) else {
            return;
        };
        match member.state {
            MemberState::Stable if member.epoch == self.assignment_epoch => return,
            MemberState::UnrevokedPartitions if owns_any(&member.revoking) => return,
            _ => {}
        }
        // What other members still hold (assigned or being revoked) is not free.
        let held: BTreeSet<TopicPartition> = self
            .members
            .iter()
            .filter(|(other, _)| other.as_str() != id)
            .flat_map(|(_, m)| m.assigned.iter().chain(&m.revoking))
            .copied()
            .collect();
        let empty = BTreeSet::new();
        let target = self.target.get(id).unwrap_or(&empty).clone();
        let assignment_epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(id) else {
            return;
        };
        let keep: BTreeSet<TopicPartition> =
            member.assigned.intersection(&target).copied().collect();
        let revoke: BTreeSet<TopicPartition> = member.assigned.difference(&keep).copied().collect();
        let wanted: BTreeSet<TopicPartition> = target.difference(&keep).copied().collect();
        let unreleased = !wanted.is_disjoint(&held);
        if !revoke.is_empty() && owns_any(&revoke) {
            member.assigned = keep;
            member.revoking = revoke;
            member.state = MemberState::UnrevokedPartitions;
            member.revoke_deadline = Some(now + member.rebalance_timeout);
            return;
        }
        let mut assigned = keep;
        assigned.extend(wanted.difference(&held).copied());
        member.assigned = assigned;
        member.revoking.clear();
        member.revoke_deadline = None;
        member.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        if member.epoch != assignment_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = assignment_epoch;
        }
    }
}
