//! One consumer group and its members, with the state transitions of Kafka's classic protocol
//! as methods: Empty → PreparingRebalance (collecting joins) → CompletingRebalance (waiting for
//! the leader's assignment) → Stable; back to PreparingRebalance when membership changes.
//!
//! Members waiting in JoinGroup or SyncGroup hold a oneshot sender; a transition that completes
//! a barrier answers them.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::messages::{GroupConfig, GroupState, Joined, Synced};
use super::offsets::{GroupMeta, MemberMeta};

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[derive(Debug)]
pub(super) struct Member {
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_heartbeat: Instant,
    /// Order of arrival, to pick a leader deterministically.
    pub joined_at: u64,
    pub joining: Option<oneshot::Sender<Joined>>,
    pub syncing: Option<oneshot::Sender<Synced>>,
}

impl Member {
    /// Waiting in JoinGroup (a waiter whose request timed out on its side does not count).
    pub fn is_joining(&self) -> bool {
        self.joining.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Waiting in SyncGroup for the leader's assignment.
    pub fn is_syncing(&self) -> bool {
        self.syncing.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Answers whatever this member waits for with `error` (it was removed or fenced).
    pub(super) fn fail_waiters(&mut self, error: ResponseError, member_id: &str) {
        if let Some(tx) = self.joining.take() {
            let _ = tx.send(Joined::failed(error, member_id));
        }
        if let Some(tx) = self.syncing.take() {
            let _ = tx.send(Synced::failed(error));
        }
    }
}

#[derive(Debug)]
pub(super) struct Group {
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: HashMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with: their arrival order
    /// and when they lapse (one session timeout later).
    pub pending: HashMap<String, (u64, Instant)>,
    /// When the current rebalance began (the initial delay never runs past its timeout).
    pub rebalance_started: Option<Instant>,
    /// When the join barrier completes whoever has arrived.
    pub rebalance_deadline: Option<Instant>,
    /// The first rebalance of an empty group waits `initial_rebalance_delay` for more members.
    pub initial_join: bool,
    /// The group's own record as `__consumer_offsets` has it (protocol type, generation).
    pub persisted: Option<GroupMeta>,
}

impl Group {
    pub fn new() -> Self {
        Group {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: HashMap::new(),
            pending: HashMap::new(),
            rebalance_started: None,
            rebalance_deadline: None,
            initial_join: false,
            persisted: None,
        }
    }

    /// A group as its own record in `__consumer_offsets` left it before a restart: its
    /// protocol type and its generation, which keeps counting (as in Kafka); Stable with its
    /// members (their sessions started again at `now`) if it was, else Empty.
    pub fn restored(meta: GroupMeta, now: Instant) -> Self {
        let mut group = Group {
            generation: meta.generation,
            protocol_type: Some(meta.protocol_type.clone()),
            ..Group::new()
        };
        if let (Some(protocol), false) = (&meta.protocol, meta.members.is_empty()) {
            group.state = GroupState::Stable;
            group.protocol = Some(protocol.clone());
            group.leader = meta.leader.clone();
            for (joined_at, m) in (0..).zip(&meta.members) {
                let member = Member {
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout: Duration::from_millis(m.session_timeout_ms),
                    rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms),
                    protocols: vec![(protocol.clone(), Bytes::from(m.subscription.clone()))],
                    assignment: Bytes::from(m.assignment.clone()),
                    last_heartbeat: now,
                    joined_at,
                    joining: None,
                    syncing: None,
                };
                group.members.insert(m.member_id.clone(), member);
            }
        }
        group.persisted = Some(meta);
        group
    }

    /// The group's own record, when it differs from what `__consumer_offsets` has (a group
    /// that never had a member has none): with its members once it is Stable, so that they go
    /// on after a restart; without while it rebalances or is Empty.
    pub fn unpersisted(&self) -> Option<GroupMeta> {
        let mut meta = GroupMeta::of_type(self.protocol_type.as_deref()?, self.generation);
        if self.state == GroupState::Stable && self.persisted_as_stable() {
            // Within a Stable generation only a member's id may change (a static member back).
            return None;
        }
        if self.state == GroupState::Stable {
            let protocol = self.protocol.clone().unwrap_or_default();
            let mut members: Vec<(&String, &Member)> = self.members.iter().collect();
            members.sort_by_key(|(_, m)| m.joined_at);
            meta.members = members
                .into_iter()
                .map(|(id, m)| MemberMeta {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: millis(m.session_timeout),
                    rebalance_timeout_ms: millis(m.rebalance_timeout),
                    subscription: m.metadata_for(&protocol).to_vec(),
                    assignment: m.assignment.to_vec(),
                })
                .collect();
            meta.protocol = self.protocol.clone();
            meta.leader = self.leader.clone();
        }
        (self.persisted.as_ref() != Some(&meta)).then_some(meta)
    }

    /// Whether the record written is this Stable generation's, with these members (checked
    /// without building the record: the group timer asks every group every 100 ms).
    fn persisted_as_stable(&self) -> bool {
        self.persisted.as_ref().is_some_and(|p| {
            p.generation == self.generation
                && !p.members.is_empty()
                && p.leader == self.leader
                && p.members.len() == self.members.len()
                && p.members
                    .iter()
                    .all(|m| self.members.contains_key(&m.member_id))
        })
    }

    /// FENCED_INSTANCE_ID when `instance_id` belongs to another member id than `member_id`.
    pub fn fenced(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ResponseError> {
        match instance_id.and_then(|i| self.member_by_instance(i)) {
            Some(owner) if owner != member_id => Err(ResponseError::FencedInstanceId),
            _ => Ok(()),
        }
    }

    pub fn member_by_instance(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance_id))
            .map(|(id, _)| id.clone())
    }

    /// Whether a member with these protocols may join: any protocol type while the group is
    /// empty; otherwise the group's type and a protocol every current member shares.
    pub fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// Protocols every member supports, with votes by each member's preference.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let mut candidates: Option<Vec<String>> = None;
        for member in self.members.values() {
            let names: Vec<String> = member.protocols.iter().map(|(n, _)| n.clone()).collect();
            candidates = Some(match candidates {
                None => names,
                Some(c) => c.into_iter().filter(|n| names.contains(n)).collect(),
            });
        }
        let candidates = candidates?;
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(n))
            {
                *votes.entry(name).or_default() += 1;
            }
        }
        // Most votes; ties go to the first candidate in the first member's order.
        candidates
            .iter()
            .max_by_key(|c| {
                (
                    votes.get(c.as_str()).copied().unwrap_or(0),
                    std::cmp::Reverse(candidates.iter().position(|x| x == *c)),
                )
            })
            .cloned()
    }

    pub fn max_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::from_secs(60))
    }

    /// The current generation as a JoinGroup answer for `member_id` (with the members to
    /// assign when `with_members`: the leader's answer).
    pub fn current_generation(&self, member_id: &str, with_members: bool) -> Joined {
        Joined {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if with_members {
                self.members_in_order()
            } else {
                Vec::new()
            },
        }
    }

    /// (member id, instance id, metadata for the chosen protocol), in order of arrival.
    fn members_in_order(&self) -> Vec<(String, Option<String>, Bytes)> {
        let protocol = self.protocol.clone().unwrap_or_default();
        let mut members: Vec<(&String, &Member)> = self.members.iter().collect();
        members.sort_by_key(|(_, m)| m.joined_at);
        members
            .into_iter()
            .map(|(id, m)| (id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
            .collect()
    }

    /// Removes a member, answering its waiters with `error`.
    pub fn remove_member(&mut self, member_id: &str, error: ResponseError) {
        if let Some(mut member) = self.members.remove(member_id) {
            member.fail_waiters(error, member_id);
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
    }

    /// Replaces a static member's old member id with `new_id`, fencing the old incarnation's
    /// waiters; the member keeps its assignment. Returns the member, now out of the map.
    pub fn take_for_rejoin(&mut self, old_id: &str, new_id: &str) -> Option<Member> {
        let mut member = self.members.remove(old_id)?;
        member.fail_waiters(ResponseError::FencedInstanceId, old_id);
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.to_string());
        }
        Some(member)
    }

    /// Starts a rebalance: members waiting for an assignment of the generation being abandoned
    /// must rejoin, and the join barrier gets its deadline.
    pub fn prepare_rebalance(&mut self, config: &GroupConfig, now: Instant) {
        for member in self.members.values_mut() {
            if let Some(tx) = member.syncing.take() {
                let _ = tx.send(Synced::failed(ResponseError::RebalanceInProgress));
            }
        }
        self.initial_join = self.state == GroupState::Empty;
        self.state = GroupState::PreparingRebalance;
        let wait = if self.initial_join {
            config
                .initial_rebalance_delay
                .min(self.max_rebalance_timeout())
        } else {
            self.max_rebalance_timeout()
        };
        self.rebalance_deadline = Some(now + wait);
        self.rebalance_started = Some(now);
    }

    /// After members left or expired: a rebalance for those who stay, or Empty.
    pub fn after_removal(&mut self, config: &GroupConfig, now: Instant) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance if !self.members.is_empty() => {
                self.prepare_rebalance(config, now)
            }
            _ => {}
        }
        if self.members.is_empty() && self.state != GroupState::Dead {
            self.state = GroupState::Empty;
            self.generation += 1;
            self.leader = None;
            self.protocol = None;
            self.rebalance_deadline = None;
        } else {
            self.try_complete_join(now);
        }
    }

    /// Completes the join barrier once every member has rejoined (not during an initial delay).
    pub fn try_complete_join(&mut self, now: Instant) {
        if self.state != GroupState::PreparingRebalance || self.initial_join {
            return;
        }
        if self.members.values().all(Member::is_joining) {
            self.complete_join(now);
        }
    }

    /// Closes the join barrier: members that did not rejoin are out, the generation advances,
    /// a protocol and a leader are chosen, and every waiting member is answered.
    pub fn complete_join(&mut self, now: Instant) {
        let missing: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| !m.is_joining())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &missing {
            self.remove_member(id, ResponseError::UnknownMemberId);
        }
        self.initial_join = false;
        self.rebalance_deadline = None;
        self.rebalance_started = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.leader = None;
            self.protocol = None;
            return;
        }
        self.protocol = self.select_protocol();
        let leader_stays = self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l));
        if !leader_stays {
            self.leader = self
                .members
                .iter()
                .min_by_key(|(_, m)| m.joined_at)
                .map(|(id, _)| id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        let leader = self.leader.clone().unwrap_or_default();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let joined = self.current_generation(&id, id == leader);
            if let Some(member) = self.members.get_mut(&id) {
                member.assignment = Bytes::new();
                member.last_heartbeat = now;
                if let Some(tx) = member.joining.take() {
                    let _ = tx.send(joined);
                }
            }
        }
    }

    /// The leader's SyncGroup: stores every member's assignment, the group becomes Stable and
    /// every member waiting in SyncGroup gets its part.
    pub fn complete_sync(&mut self, assignments: Vec<(String, Bytes)>) {
        let mut assigned: HashMap<String, Bytes> = assignments.into_iter().collect();
        for (id, m) in self.members.iter_mut() {
            m.assignment = assigned.remove(id).unwrap_or_default();
        }
        self.state = GroupState::Stable;
        let waiting: Vec<_> = self
            .members
            .values_mut()
            .map(|m| (m.syncing.take(), m.assignment.clone()))
            .collect();
        for (tx, assignment) in waiting {
            if let Some(tx) = tx {
                let _ = tx.send(self.synced(assignment));
            }
        }
    }

    /// A successful SyncGroup answer carrying `assignment`.
    pub fn synced(&self, assignment: Bytes) -> Synced {
        Synced {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment,
        }
    }

    /// Members whose session ran out at `now` (those waiting in a barrier are not expired).
    pub fn expired_members(&self, now: Instant) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, m)| {
                !m.is_joining()
                    && !m.is_syncing()
                    && now.duration_since(m.last_heartbeat) > m.session_timeout
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Nobody in it and nobody about to join: the group can be forgotten (its committed
    /// offsets live in the offset store).
    pub fn is_forgettable(&self) -> bool {
        self.state == GroupState::Empty && self.members.is_empty() && self.pending.is_empty()
    }
}
