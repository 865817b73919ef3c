//! The classic consumer-group protocol's state machine (Kafka's `GroupCoordinator`): members,
//! generations, the join and sync barriers, session and rebalance timeouts, static membership.
//!
//! Every group lives behind one mutex that is never held across an await. A JoinGroup or
//! SyncGroup that has to wait for the rest of the group gets a oneshot receiver; whoever
//! completes the barrier (the last member to arrive, or [`Coordinator::tick`] when a timeout
//! passes) answers every waiter.
//!
//! States: Empty → PreparingRebalance (collecting joins) → CompletingRebalance (waiting for the
//! leader's assignment) → Stable; back to PreparingRebalance when membership changes; Dead once
//! deleted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

/// Group settings, Kafka's broker defaults.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: how long a new group waits for more members.
    pub initial_rebalance_delay: Duration,
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
    pub min_session_timeout: Duration,
    pub max_session_timeout: Duration,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay: Duration::from_millis(3000),
            min_session_timeout: Duration::from_millis(6000),
            max_session_timeout: Duration::from_millis(1_800_000),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names Kafka's tools print.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// An answer now, or one to wait for.
#[derive(Debug)]
pub enum Reply<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

/// A JoinGroup request, as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct Join {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new member first gets its id with MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Joined {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, instance id, metadata): for the leader only.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

#[derive(Debug, Clone, Default)]
pub struct Synced {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// What DescribeGroups shows of a member.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone)]
pub struct GroupView {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberView>,
}

#[derive(Debug)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    last_heartbeat: Instant,
    /// Order of arrival, to pick a leader deterministically.
    joined_at: u64,
    joining: Option<oneshot::Sender<Joined>>,
    syncing: Option<oneshot::Sender<Synced>>,
}

impl Member {
    /// Waiting in JoinGroup (a waiter whose request timed out on its side does not count).
    fn is_joining(&self) -> bool {
        self.joining.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Waiting in SyncGroup for the leader's assignment.
    fn is_syncing(&self) -> bool {
        self.syncing.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug)]
struct Group {
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: HashMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with: their arrival order
    /// and when they lapse (one session timeout later).
    pending: HashMap<String, (u64, Instant)>,
    /// When the current rebalance began (the initial delay never runs past its timeout).
    rebalance_started: Option<Instant>,
    /// When the join barrier completes whoever has arrived.
    rebalance_deadline: Option<Instant>,
    /// The first rebalance of an empty group waits `initial_rebalance_delay` for more members.
    initial_join: bool,
}

impl Group {
    fn new() -> Self {
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
        }
    }

    /// FENCED_INSTANCE_ID when `instance_id` belongs to another member id than `member_id`.
    fn fenced(&self, member_id: &str, instance_id: Option<&str>) -> Option<ResponseError> {
        let owner = self.member_by_instance(instance_id?)?;
        (owner != member_id).then_some(ResponseError::FencedInstanceId)
    }

    fn member_by_instance(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|(_, m)| m.instance_id.as_deref() == Some(instance_id))
            .map(|(id, _)| id.clone())
    }

    /// Protocols every member supports, with votes by each member's preference.
    fn select_protocol(&self) -> Option<String> {
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

    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        // Every current member must share at least one of the newcomer's protocols.
        protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    fn max_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::from_secs(60))
    }

    fn error_joined(error: ResponseError, member_id: &str) -> Joined {
        Joined {
            error: error.code(),
            generation: -1,
            member_id: member_id.to_string(),
            ..Joined::default()
        }
    }
}

/// All groups of the broker.
#[derive(Debug)]
pub struct Coordinator {
    config: GroupConfig,
    groups: Mutex<HashMap<String, Group>>,
    next_member: Mutex<u64>,
}

impl Coordinator {
    pub fn new(config: GroupConfig) -> Self {
        Coordinator {
            config,
            groups: Mutex::new(HashMap::new()),
            next_member: Mutex::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Group>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn new_member_id(&self, client_id: &str) -> (String, u64) {
        let mut next = self
            .next_member
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *next += 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        (format!("{client_id}-{nanos:x}-{}", *next), *next)
    }

    pub fn join(&self, join: Join, now: Instant) -> Reply<Joined> {
        if join.group_id.is_empty() {
            return Reply::Now(Group::error_joined(
                ResponseError::InvalidGroupId,
                &join.member_id,
            ));
        }
        if join.session_timeout < self.config.min_session_timeout
            || join.session_timeout > self.config.max_session_timeout
        {
            return Reply::Now(Group::error_joined(
                ResponseError::InvalidSessionTimeout,
                &join.member_id,
            ));
        }
        if join.protocol_type.is_empty() || join.protocols.is_empty() {
            return Reply::Now(Group::error_joined(
                ResponseError::InconsistentGroupProtocol,
                &join.member_id,
            ));
        }
        let mut groups = self.lock();
        if !join.member_id.is_empty() && !groups.contains_key(&join.group_id) {
            return Reply::Now(Group::error_joined(
                ResponseError::UnknownMemberId,
                &join.member_id,
            ));
        }
        let group = groups
            .entry(join.group_id.clone())
            .or_insert_with(Group::new);
        if group.state == GroupState::Dead {
            return Reply::Now(Group::error_joined(
                ResponseError::CoordinatorNotAvailable,
                &join.member_id,
            ));
        }
        if !group.supports(&join.protocol_type, &join.protocols) {
            return Reply::Now(Group::error_joined(
                ResponseError::InconsistentGroupProtocol,
                &join.member_id,
            ));
        }

        // A static member coming back with a new incarnation replaces its old member id.
        if join.member_id.is_empty() {
            if let Some(instance) = &join.instance_id {
                if let Some(old_id) = group.member_by_instance(instance) {
                    return self.rejoin_static(group, &old_id, join, now);
                }
            }
            let (member_id, order) = self.new_member_id(&join.client_id);
            if join.require_known_member_id && join.instance_id.is_none() {
                group
                    .pending
                    .insert(member_id.clone(), (order, now + join.session_timeout));
                return Reply::Now(Group::error_joined(
                    ResponseError::MemberIdRequired,
                    &member_id,
                ));
            }
            return Reply::Later(self.add_member(group, member_id, order, join, now));
        }

        let member_id = join.member_id.clone();
        if let Some(error) = group.fenced(&member_id, join.instance_id.as_deref()) {
            return Reply::Now(Group::error_joined(error, &member_id));
        }
        if let Some((order, _)) = group.pending.remove(&member_id) {
            return Reply::Later(self.add_member(group, member_id, order, join, now));
        }
        let Some(member) = group.members.get_mut(&member_id) else {
            return Reply::Now(Group::error_joined(
                ResponseError::UnknownMemberId,
                &member_id,
            ));
        };
        let unchanged = member.protocols == join.protocols;
        member.protocols = join.protocols;
        member.session_timeout = join.session_timeout;
        member.rebalance_timeout = join.rebalance_timeout;
        member.last_heartbeat = now;
        let is_leader = group.leader.as_deref() == Some(member_id.as_str());
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance
                if unchanged && !(is_leader && group.state == GroupState::Stable) =>
            {
                // Nothing changed: the member gets the current generation again (the leader,
                // while the group waits for its assignment, with the members to assign).
                Reply::Now(current_generation(group, &member_id, is_leader))
            }
            _ => {
                let (tx, rx) = oneshot::channel();
                if let Some(member) = group.members.get_mut(&member_id) {
                    member.joining = Some(tx);
                }
                if group.state != GroupState::PreparingRebalance {
                    self.prepare_rebalance(group, now);
                }
                try_complete_join(group, now);
                Reply::Later(rx)
            }
        }
    }

    fn add_member(
        &self,
        group: &mut Group,
        member_id: String,
        order: u64,
        join: Join,
        now: Instant,
    ) -> oneshot::Receiver<Joined> {
        let (tx, rx) = oneshot::channel();
        if group.members.is_empty() {
            group.protocol_type = Some(join.protocol_type.clone());
        }
        group.members.insert(
            member_id,
            Member {
                instance_id: join.instance_id,
                client_id: join.client_id,
                client_host: join.client_host,
                session_timeout: join.session_timeout,
                rebalance_timeout: join.rebalance_timeout,
                protocols: join.protocols,
                assignment: Bytes::new(),
                last_heartbeat: now,
                joined_at: order,
                joining: Some(tx),
                syncing: None,
            },
        );
        match group.state {
            GroupState::PreparingRebalance if group.initial_join => {
                // Each newcomer during the initial delay extends it, up to the rebalance timeout
                // counted from when the rebalance began.
                let limit = group.rebalance_started.unwrap_or(now) + group.max_rebalance_timeout();
                let extended = now + self.config.initial_rebalance_delay;
                group.rebalance_deadline = Some(extended.min(limit));
            }
            GroupState::PreparingRebalance => {}
            _ => self.prepare_rebalance(group, now),
        }
        try_complete_join(group, now);
        rx
    }

    fn rejoin_static(
        &self,
        group: &mut Group,
        old_id: &str,
        join: Join,
        now: Instant,
    ) -> Reply<Joined> {
        let Some(mut member) = group.members.remove(old_id) else {
            return Reply::Now(Group::error_joined(ResponseError::UnknownMemberId, ""));
        };
        let (new_id, _) = self.new_member_id(&join.client_id);
        // The old incarnation's waiters are fenced.
        if let Some(tx) = member.joining.take() {
            let _ = tx.send(Group::error_joined(ResponseError::FencedInstanceId, old_id));
        }
        if let Some(tx) = member.syncing.take() {
            let _ = tx.send(Synced {
                error: ResponseError::FencedInstanceId.code(),
                ..Synced::default()
            });
        }
        let unchanged = member.protocols == join.protocols;
        member.protocols = join.protocols;
        member.client_id = join.client_id;
        member.client_host = join.client_host;
        member.session_timeout = join.session_timeout;
        member.rebalance_timeout = join.rebalance_timeout;
        member.last_heartbeat = now;
        let previous_leader = group.leader.clone();
        if group.leader.as_deref() == Some(old_id) {
            group.leader = Some(new_id.clone());
        }
        if group.state == GroupState::Stable && unchanged {
            // KIP-345: a static member that restarts keeps its assignment, no rebalance. As in
            // Kafka, the answer names the leader as it was, so a restarted leader does not
            // take itself for the leader and compute an assignment nobody would receive.
            group.members.insert(new_id.clone(), member);
            let mut joined = current_generation(group, &new_id, false);
            joined.leader = previous_leader.unwrap_or_default();
            return Reply::Now(joined);
        }
        let (tx, rx) = oneshot::channel();
        member.joining = Some(tx);
        group.members.insert(new_id, member);
        if group.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(group, now);
        }
        try_complete_join(group, now);
        Reply::Later(rx)
    }

    fn prepare_rebalance(&self, group: &mut Group, now: Instant) {
        // Members waiting for an assignment of the generation being abandoned must rejoin.
        for member in group.members.values_mut() {
            if let Some(tx) = member.syncing.take() {
                let _ = tx.send(Synced {
                    error: ResponseError::RebalanceInProgress.code(),
                    ..Synced::default()
                });
            }
        }
        group.initial_join = group.state == GroupState::Empty;
        group.state = GroupState::PreparingRebalance;
        let wait = if group.initial_join {
            self.config
                .initial_rebalance_delay
                .min(group.max_rebalance_timeout())
        } else {
            group.max_rebalance_timeout()
        };
        group.rebalance_deadline = Some(now + wait);
        group.rebalance_started = Some(now);
    }

    pub fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Reply<Synced> {
        let fail = |e: ResponseError| {
            Reply::Now(Synced {
                error: e.code(),
                ..Synced::default()
            })
        };
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return fail(ResponseError::UnknownMemberId);
        };
        if let Some(error) = group.fenced(member_id, instance_id) {
            return fail(error);
        }
        let Some(member) = group.members.get_mut(member_id) else {
            return fail(ResponseError::UnknownMemberId);
        };
        member.last_heartbeat = now;
        if generation != group.generation {
            return fail(ResponseError::IllegalGeneration);
        }
        let done = |group: &Group, assignment: Bytes| Synced {
            error: 0,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol.clone(),
            assignment,
        };
        match group.state {
            GroupState::PreparingRebalance => fail(ResponseError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => fail(ResponseError::UnknownMemberId),
            GroupState::Stable => {
                let assignment = member.assignment.clone();
                Reply::Now(done(group, assignment))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                member.syncing = Some(tx);
                if group.leader.as_deref() == Some(member_id) {
                    let mut assigned: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for (id, m) in group.members.iter_mut() {
                        m.assignment = assigned.remove(id).unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
                    let reply = |m: &mut Member| (m.syncing.take(), m.assignment.clone());
                    let waiting: Vec<_> = group.members.values_mut().map(reply).collect();
                    for (tx, assignment) in waiting {
                        if let Some(tx) = tx {
                            let _ = tx.send(done(group, assignment));
                        }
                    }
                }
                Reply::Later(rx)
            }
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> i16 {
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return ResponseError::UnknownMemberId.code();
        };
        if let Some(error) = group.fenced(member_id, instance_id) {
            return error.code();
        }
        let state = group.state;
        let current = group.generation;
        let Some(member) = group.members.get_mut(member_id) else {
            return ResponseError::UnknownMemberId.code();
        };
        member.last_heartbeat = now;
        match state {
            GroupState::Empty | GroupState::Dead => ResponseError::UnknownMemberId.code(),
            _ if generation != current => ResponseError::IllegalGeneration.code(),
            GroupState::PreparingRebalance => ResponseError::RebalanceInProgress.code(),
            GroupState::CompletingRebalance | GroupState::Stable => 0,
        }
    }

    /// Removes members (by member id, or by instance id when the member id is empty). Returns
    /// one error code per member, or a group-level error.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: Instant,
    ) -> Result<Vec<i16>, i16> {
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return Err(ResponseError::UnknownMemberId.code());
        };
        let mut codes = Vec::with_capacity(members.len());
        let mut removed_any = false;
        for (member_id, instance_id) in members {
            if !member_id.is_empty() {
                if let Some(error) = group.fenced(member_id, instance_id.as_deref()) {
                    codes.push(error.code());
                    continue;
                }
            }
            let id = if member_id.is_empty() {
                instance_id
                    .as_deref()
                    .and_then(|i| group.member_by_instance(i))
            } else {
                Some(member_id.clone())
            };
            let found = id.and_then(|id| {
                let member = group.members.get(&id)?;
                if instance_id.is_some() && member.instance_id != *instance_id {
                    return None;
                }
                Some(id)
            });
            match found {
                Some(id) => {
                    remove_member(group, &id, ResponseError::UnknownMemberId);
                    removed_any = true;
                    codes.push(0);
                }
                None => codes.push(ResponseError::UnknownMemberId.code()),
            }
        }
        if removed_any {
            self.after_removal(group, now);
        }
        Ok(codes)
    }

    fn after_removal(&self, group: &mut Group, now: Instant) {
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance if !group.members.is_empty() => {
                self.prepare_rebalance(group, now)
            }
            _ => {}
        }
        if group.members.is_empty() && group.state != GroupState::Dead {
            group.state = GroupState::Empty;
            group.generation += 1;
            group.leader = None;
            group.protocol = None;
            group.rebalance_deadline = None;
        } else {
            try_complete_join(group, now);
        }
    }

    /// Expires members whose session ran out and completes rebalances whose deadline passed.
    pub fn tick(&self, now: Instant) {
        let mut groups = self.lock();
        for (id, group) in groups.iter_mut() {
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| {
                    !m.is_joining()
                        && !m.is_syncing()
                        && now.duration_since(m.last_heartbeat) > m.session_timeout
                })
                .map(|(id, _)| id.clone())
                .collect();
            for member_id in &expired {
                tracing::info!(group = %id, member = %member_id, "session expired: removing member");
                remove_member(group, member_id, ResponseError::UnknownMemberId);
            }
            if !expired.is_empty() {
                self.after_removal(group, now);
            }
            if group.state == GroupState::PreparingRebalance
                && group.rebalance_deadline.is_some_and(|d| now >= d)
            {
                complete_join(group, now);
            }
            group.pending.retain(|_, (_, lapses)| now < *lapses);
        }
        // Groups with nobody in them and nobody about to join are forgotten (their committed
        // offsets live in the offset store).
        groups.retain(|_, g| {
            !(g.state == GroupState::Empty && g.members.is_empty() && g.pending.is_empty())
        });
    }

    /// The group's state for commits: (state, generation, is `member_id` a member), or
    /// FENCED_INSTANCE_ID when the instance id belongs to another member.
    pub fn membership(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<Option<(GroupState, i32, bool)>, ResponseError> {
        let groups = self.lock();
        let Some(group) = groups.get(group_id) else {
            return Ok(None);
        };
        if let Some(error) = group.fenced(member_id, instance_id) {
            return Err(error);
        }
        Ok(Some((
            group.state,
            group.generation,
            group.members.contains_key(member_id),
        )))
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupView> {
        let groups = self.lock();
        let group = groups.get(group_id)?;
        let protocol = group.protocol.clone().unwrap_or_default();
        let mut members: Vec<(&String, &Member)> = group.members.iter().collect();
        members.sort_by_key(|(_, m)| m.joined_at);
        Some(GroupView {
            state: group.state,
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            members: members
                .into_iter()
                .map(|(id, m)| MemberView {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
            protocol,
        })
    }

    /// Every group with members or state: (id, protocol type, state).
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        let groups = self.lock();
        let mut out: Vec<_> = groups
            .iter()
            .filter(|(_, g)| g.state != GroupState::Dead)
            .map(|(id, g)| {
                (
                    id.clone(),
                    g.protocol_type.clone().unwrap_or_default(),
                    g.state,
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Marks an empty group dead (DeleteGroups). `Err` if it has members.
    pub fn delete(&self, group_id: &str) -> Result<(), ResponseError> {
        let mut groups = self.lock();
        match groups.get(group_id) {
            Some(g) if !g.members.is_empty() => Err(ResponseError::NonEmptyGroup),
            _ => {
                groups.remove(group_id);
                Ok(())
            }
        }
    }
}

fn current_generation(group: &Group, member_id: &str, with_members: bool) -> Joined {
    Joined {
        error: 0,
        generation: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol.clone(),
        leader: group.leader.clone().unwrap_or_default(),
        member_id: member_id.to_string(),
        members: if with_members {
            members_of(group)
        } else {
            Vec::new()
        },
    }
}

fn members_of(group: &Group) -> Vec<(String, Option<String>, Bytes)> {
    let protocol = group.protocol.clone().unwrap_or_default();
    let mut members: Vec<(&String, &Member)> = group.members.iter().collect();
    members.sort_by_key(|(_, m)| m.joined_at);
    members
        .into_iter()
        .map(|(id, m)| (id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
        .collect()
}

fn remove_member(group: &mut Group, member_id: &str, error: ResponseError) {
    if let Some(mut member) = group.members.remove(member_id) {
        if let Some(tx) = member.joining.take() {
            let _ = tx.send(Group::error_joined(error, member_id));
        }
        if let Some(tx) = member.syncing.take() {
            let _ = tx.send(Synced {
                error: error.code(),
                ..Synced::default()
            });
        }
    }
    if group.leader.as_deref() == Some(member_id) {
        group.leader = None;
    }
}

/// Completes the join barrier once every member has rejoined (not during an initial delay).
fn try_complete_join(group: &mut Group, now: Instant) {
    if group.state != GroupState::PreparingRebalance || group.initial_join {
        return;
    }
    if group.members.values().all(Member::is_joining) {
        complete_join(group, now);
    }
}

fn complete_join(group: &mut Group, now: Instant) {
    // Members that did not rejoin in time are out.
    let missing: Vec<String> = group
        .members
        .iter()
        .filter(|(_, m)| !m.is_joining())
        .map(|(id, _)| id.clone())
        .collect();
    for id in &missing {
        remove_member(group, id, ResponseError::UnknownMemberId);
    }
    group.initial_join = false;
    group.rebalance_deadline = None;
    group.rebalance_started = None;
    group.generation += 1;
    if group.members.is_empty() {
        group.state = GroupState::Empty;
        group.leader = None;
        group.protocol = None;
        return;
    }
    group.protocol = group.select_protocol();
    let leader_stays = group
        .leader
        .as_ref()
        .is_some_and(|l| group.members.contains_key(l));
    if !leader_stays {
        group.leader = group
            .members
            .iter()
            .min_by_key(|(_, m)| m.joined_at)
            .map(|(id, _)| id.clone());
    }
    group.state = GroupState::CompletingRebalance;
    let members = members_of(group);
    let leader = group.leader.clone().unwrap_or_default();
    let ids: Vec<String> = group.members.keys().cloned().collect();
    for id in ids {
        let joined = Joined {
            error: 0,
            generation: group.generation,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol.clone(),
            leader: leader.clone(),
            member_id: id.clone(),
            members: if id == leader {
                members.clone()
            } else {
                Vec::new()
            },
        };
        if let Some(member) = group.members.get_mut(&id) {
            member.assignment = Bytes::new();
            member.last_heartbeat = now;
            if let Some(tx) = member.joining.take() {
                let _ = tx.send(joined);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(group: &str, member: &str, instance: Option<&str>) -> Join {
        Join {
            group_id: group.into(),
            member_id: member.into(),
            instance_id: instance.map(Into::into),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(10),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            require_known_member_id: true,
        }
    }

    fn coordinator() -> Coordinator {
        Coordinator::new(GroupConfig {
            initial_rebalance_delay: Duration::from_millis(0),
            ..GroupConfig::default()
        })
    }

    fn now_value<T: std::fmt::Debug>(reply: Reply<T>) -> T {
        match reply {
            Reply::Now(v) => v,
            Reply::Later(mut rx) => rx.try_recv().expect("answered"),
        }
    }

    #[test]
    fn two_members_join_sync_and_rebalance_when_one_leaves() {
        let c = coordinator();
        let t = Instant::now();
        let first = now_value(c.join(join("g", "", None), t));
        assert_eq!(first.error, ResponseError::MemberIdRequired.code());
        let a = first.member_id;
        let Reply::Later(mut rx_a) = c.join(join("g", &a, None), t) else {
            panic!()
        };
        // The initial delay of 0 passes at the next tick.
        c.tick(t);
        let joined_a = rx_a.try_recv().unwrap();
        assert_eq!((joined_a.error, joined_a.generation), (0, 1));
        assert_eq!(joined_a.leader, a);
        assert_eq!(joined_a.members.len(), 1);
        let synced = now_value(c.sync(
            "g",
            1,
            &a,
            None,
            vec![(a.clone(), Bytes::from_static(b"p0"))],
            t,
        ));
        assert_eq!(synced.assignment, Bytes::from_static(b"p0"));

        // A second member: the first must rejoin (heartbeat says so), then both get gen 2.
        let b = now_value(c.join(join("g", "", None), t)).member_id;
        let Reply::Later(mut rx_b) = c.join(join("g", &b, None), t) else {
            panic!()
        };
        assert_eq!(
            c.heartbeat("g", 1, &a, None, t),
            ResponseError::RebalanceInProgress.code()
        );
        let Reply::Later(mut rx_a) = c.join(join("g", &a, None), t) else {
            panic!()
        };
        let (ja, jb) = (rx_a.try_recv().unwrap(), rx_b.try_recv().unwrap());
        assert_eq!((ja.generation, jb.generation), (2, 2));
        assert_eq!(ja.leader, a, "the leader stays");
        assert!(jb.members.is_empty());
        let Reply::Later(mut sync_b) = c.sync("g", 2, &b, None, vec![], t) else {
            panic!()
        };
        let assignments = vec![
            (a.clone(), Bytes::from_static(b"p0")),
            (b.clone(), Bytes::from_static(b"p1")),
        ];
        assert_eq!(
            now_value(c.sync("g", 2, &a, None, assignments, t)).assignment,
            Bytes::from_static(b"p0")
        );
        assert_eq!(
            sync_b.try_recv().unwrap().assignment,
            Bytes::from_static(b"p1")
        );
        assert_eq!(
            c.heartbeat("g", 1, &b, None, t),
            ResponseError::IllegalGeneration.code()
        );
        assert_eq!(c.heartbeat("g", 2, &b, None, t), 0);

        // b's session expires: a rebalance, a alone in gen 3.
        let later = t + Duration::from_secs(11);
        assert_eq!(c.heartbeat("g", 2, &a, None, later), 0);
        c.tick(later);
        assert_eq!(
            c.describe("g").unwrap().state,
            GroupState::PreparingRebalance
        );
        let Reply::Later(mut rx_a) = c.join(join("g", &a, None), later) else {
            panic!()
        };
        assert_eq!(rx_a.try_recv().unwrap().generation, 3);
        assert_eq!(c.leave("g", &[(a.clone(), None)], later), Ok(vec![0]));
        assert_eq!(c.describe("g").unwrap().state, GroupState::Empty);
    }

    #[test]
    fn a_restarted_static_member_keeps_its_assignment_without_a_rebalance() {
        let c = coordinator();
        let t = Instant::now();
        let Reply::Later(mut rx) = c.join(join("s", "", Some("host-1")), t) else {
            panic!()
        };
        c.tick(t);
        let joined = rx.try_recv().unwrap();
        let old = joined.member_id.clone();
        now_value(c.sync(
            "s",
            joined.generation,
            &old,
            None,
            vec![(old.clone(), Bytes::from_static(b"all"))],
            t,
        ));
        // Restart: a new JoinGroup with no member id but the same instance id.
        let again = now_value(c.join(join("s", "", Some("host-1")), t));
        assert_eq!(again.error, 0);
        assert_eq!(again.generation, joined.generation, "no rebalance");
        assert_ne!(again.member_id, old);
        let synced = now_value(c.sync("s", again.generation, &again.member_id, None, vec![], t));
        assert_eq!(synced.assignment, Bytes::from_static(b"all"));
        assert_eq!(
            c.heartbeat("s", again.generation, &old, None, t),
            ResponseError::UnknownMemberId.code()
        );
    }

    #[test]
    fn bad_joins_get_kafka_errors() {
        let c = coordinator();
        let t = Instant::now();
        let mut short = join("g", "", None);
        short.session_timeout = Duration::from_millis(10);
        assert_eq!(
            now_value(c.join(short, t)).error,
            ResponseError::InvalidSessionTimeout.code()
        );
        assert_eq!(
            now_value(c.join(join("", "", None), t)).error,
            ResponseError::InvalidGroupId.code()
        );
        assert_eq!(
            now_value(c.join(join("nope", "ghost", None), t)).error,
            ResponseError::UnknownMemberId.code()
        );
    }

    #[test]
    fn a_leader_that_rejoins_before_syncing_gets_the_members_again() {
        let c = coordinator();
        let t = Instant::now();
        let Reply::Later(mut rx) = c.join(join("g", "", Some("i")), t) else {
            panic!()
        };
        c.tick(t);
        let joined = rx.try_recv().unwrap();
        assert_eq!(joined.members.len(), 1);
        // The leader's response got lost; it sends the same JoinGroup again.
        let again = now_value(c.join(join("g", &joined.member_id, Some("i")), t));
        assert_eq!(
            (again.generation, again.members.len()),
            (joined.generation, 1)
        );
    }

    #[test]
    fn a_joiner_that_gave_up_does_not_hold_the_group_forever() {
        let c = coordinator();
        let t = Instant::now();
        let a = now_value(c.join(join("g", "", None), t)).member_id;
        let Reply::Later(rx_a) = c.join(join("g", &a, None), t) else {
            panic!()
        };
        // Its JoinGroup times out client-side: the receiver is dropped.
        drop(rx_a);
        let b = now_value(c.join(join("g", "", None), t)).member_id;
        let Reply::Later(mut rx_b) = c.join(join("g", &b, None), t) else {
            panic!()
        };
        let later = t + Duration::from_secs(11);
        c.tick(later);
        // a's session ran out; b forms the group alone.
        let joined = rx_b.try_recv().unwrap();
        assert_eq!(joined.leader, b);
        assert_eq!(joined.members.len(), 1);
    }

    #[test]
    fn a_second_process_with_the_same_instance_id_fences_the_first() {
        let c = coordinator();
        let t = Instant::now();
        let Reply::Later(mut rx) = c.join(join("g", "", Some("i")), t) else {
            panic!()
        };
        c.tick(t);
        let first = rx.try_recv().unwrap();
        now_value(c.sync(
            "g",
            first.generation,
            &first.member_id,
            Some("i"),
            vec![],
            t,
        ));
        let second = now_value(c.join(join("g", "", Some("i")), t));
        assert_eq!(second.error, 0);
        let fenced = ResponseError::FencedInstanceId.code();
        assert_eq!(
            c.heartbeat("g", first.generation, &first.member_id, Some("i"), t),
            fenced
        );
        assert_eq!(
            now_value(c.join(join("g", &first.member_id, Some("i")), t)).error,
            fenced
        );
        assert_eq!(
            c.heartbeat("g", second.generation, &second.member_id, Some("i"), t),
            0
        );
    }

    #[test]
    fn unanswered_member_ids_and_empty_groups_are_forgotten() {
        let c = coordinator();
        let t = Instant::now();
        for i in 0..50 {
            now_value(c.join(join(&format!("g{i}"), "", None), t));
        }
        assert_eq!(c.list().len(), 50);
        c.tick(t + Duration::from_secs(11));
        assert!(c.list().is_empty());
    }
}
