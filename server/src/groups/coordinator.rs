//! The group coordinator (Kafka's `GroupCoordinator` for the classic protocol): every group of
//! the broker behind one mutex that is never held across an await, and the operations the
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups and DeleteGroups
//! handlers call. A group holds at most `group.max.size` members, pending member ids included
//! (GROUP_MAX_SIZE_REACHED for a new member over it). A JoinGroup or SyncGroup that has to wait for the rest of its group gets a
//! oneshot receiver ([`Reply::Later`]); whoever completes the barrier (the last member to
//! arrive, or [`Coordinator::tick`] when a timeout passes) answers every waiter.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::group::{Group, Member};
use super::messages::{
    GroupConfig, GroupState, GroupView, Join, Joined, MemberView, Reply, Synced,
};
use super::offsets::GroupMeta;

mod migration;

/// All groups of the broker.
#[derive(Debug)]
pub struct Coordinator {
    config: GroupConfig,
    groups: Mutex<HashMap<String, Group>>,
    next_member: Mutex<u64>,
}

impl Coordinator {
    /// The group settings it was made with.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

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

    /// A member id no member had before (`<client id>-<time>-<n>`) and its arrival order.
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

    /// A request's own faults, before any group is looked at.
    pub fn check_join(&self, join: &Join) -> Result<(), ResponseError> {
        if join.group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if join.session_timeout < self.config.min_session_timeout
            || join.session_timeout > self.config.max_session_timeout
        {
            return Err(ResponseError::InvalidSessionTimeout);
        }
        if join.protocol_type.is_empty() || join.protocols.is_empty() {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        Ok(())
    }

    pub fn join(&self, join: Join, now: Instant) -> Reply<Joined> {
        let refuse = |error| Reply::Now(Joined::failed(error, &join.member_id));
        if let Err(error) = self.check_join(&join) {
            return refuse(error);
        }
        let mut groups = self.lock();
        if !join.member_id.is_empty() && !groups.contains_key(&join.group_id) {
            return refuse(ResponseError::UnknownMemberId);
        }
        let group = groups
            .entry(join.group_id.clone())
            .or_insert_with(Group::new);
        if group.state == GroupState::Dead {
            return refuse(ResponseError::CoordinatorNotAvailable);
        }
        if !group.supports(&join.protocol_type, &join.protocols) {
            return refuse(ResponseError::InconsistentGroupProtocol);
        }
        if join.member_id.is_empty() {
            self.join_new(group, join, now)
        } else {
            self.join_known(group, join, now)
        }
    }

    /// A JoinGroup without a member id: a static member's new incarnation, or a new member
    /// (which first gets its id with MEMBER_ID_REQUIRED when the client asks for that).
    fn join_new(&self, group: &mut Group, join: Join, now: Instant) -> Reply<Joined> {
        if let Some(instance) = &join.instance_id {
            if let Some(old_id) = group.member_by_instance(instance) {
                return self.rejoin_static(group, &old_id, join, now);
            }
        }
        // group.max.size: new members waiting for their id count, so a client looping on
        // JoinGroup cannot grow the group's pending ids without bound either.
        if group.members.len() + group.pending.len() >= self.config.max_size {
            return Reply::Now(Joined::failed(ResponseError::GroupMaxSizeReached, ""));
        }
        let (member_id, order) = self.new_member_id(&join.client_id);
        if join.require_known_member_id && join.instance_id.is_none() {
            group
                .pending
                .insert(member_id.clone(), (order, now + join.session_timeout));
            return Reply::Now(Joined::failed(ResponseError::MemberIdRequired, &member_id));
        }
        Reply::Later(self.add_member(group, member_id, order, join, now))
    }

    /// A JoinGroup from a member id the coordinator handed out.
    fn join_known(&self, group: &mut Group, join: Join, now: Instant) -> Reply<Joined> {
        let member_id = join.member_id.clone();
        if let Err(error) = group.fenced(&member_id, join.instance_id.as_deref()) {
            return Reply::Now(Joined::failed(error, &member_id));
        }
        if let Some((order, _)) = group.pending.remove(&member_id) {
            return Reply::Later(self.add_member(group, member_id, order, join, now));
        }
        let Some(member) = group.members.get_mut(&member_id) else {
            return Reply::Now(Joined::failed(ResponseError::UnknownMemberId, &member_id));
        };
        let unchanged = member.protocols == join.protocols;
        member.protocols = join.protocols;
        member.session_timeout = join.session_timeout;
        member.rebalance_timeout = join.rebalance_timeout;
        member.last_heartbeat = now;
        let is_leader = group.leader.as_deref() == Some(member_id.as_str());
        let settled = match group.state {
            GroupState::Stable => !is_leader,
            GroupState::CompletingRebalance => true,
            _ => false,
        };
        if unchanged && settled {
            // Nothing changed: the member gets the current generation again (the leader,
            // while the group waits for its assignment, with the members to assign).
            return Reply::Now(group.current_generation(&member_id, is_leader));
        }
        let (tx, rx) = oneshot::channel();
        if let Some(member) = group.members.get_mut(&member_id) {
            member.joining = Some(tx);
        }
        if group.state != GroupState::PreparingRebalance {
            group.prepare_rebalance(&self.config, now);
        }
        group.try_complete_join(now);
        Reply::Later(rx)
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
            _ => group.prepare_rebalance(&self.config, now),
        }
        group.try_complete_join(now);
        rx
    }

    /// A static member (KIP-345) back with a new incarnation: it replaces its old member id.
    fn rejoin_static(
        &self,
        group: &mut Group,
        old_id: &str,
        join: Join,
        now: Instant,
    ) -> Reply<Joined> {
        let (new_id, _) = self.new_member_id(&join.client_id);
        let previous_leader = group.leader.clone();
        let Some(mut member) = group.take_for_rejoin(old_id, &new_id) else {
            return Reply::Now(Joined::failed(ResponseError::UnknownMemberId, ""));
        };
        let unchanged = member.protocols == join.protocols;
        member.protocols = join.protocols;
        member.client_id = join.client_id;
        member.client_host = join.client_host;
        member.session_timeout = join.session_timeout;
        member.rebalance_timeout = join.rebalance_timeout;
        member.last_heartbeat = now;
        if group.state == GroupState::Stable && unchanged {
            // A static member that restarts keeps its assignment, no rebalance. As in Kafka,
            // the answer names the leader as it was, so a restarted leader does not take itself
            // for the leader and compute an assignment nobody would receive.
            group.members.insert(new_id.clone(), member);
            let mut joined = group.current_generation(&new_id, false);
            joined.leader = previous_leader.unwrap_or_default();
            return Reply::Now(joined);
        }
        let (tx, rx) = oneshot::channel();
        member.joining = Some(tx);
        group.members.insert(new_id, member);
        if group.state != GroupState::PreparingRebalance {
            group.prepare_rebalance(&self.config, now);
        }
        group.try_complete_join(now);
        Reply::Later(rx)
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
        let fail = |e: ResponseError| Reply::Now(Synced::failed(e));
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            return fail(ResponseError::UnknownMemberId);
        };
        if let Err(error) = group.fenced(member_id, instance_id) {
            return fail(error);
        }
        let Some(member) = group.members.get_mut(member_id) else {
            return fail(ResponseError::UnknownMemberId);
        };
        member.last_heartbeat = now;
        if generation != group.generation {
            return fail(ResponseError::IllegalGeneration);
        }
        match group.state {
            GroupState::PreparingRebalance => fail(ResponseError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => fail(ResponseError::UnknownMemberId),
            GroupState::Stable => {
                let assignment = member.assignment.clone();
                Reply::Now(group.synced(assignment))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                member.syncing = Some(tx);
                if group.leader.as_deref() == Some(member_id) {
                    group.complete_sync(assignments);
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
    ) -> Result<(), ResponseError> {
        let mut groups = self.lock();
        let group = groups
            .get_mut(group_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        group.fenced(member_id, instance_id)?;
        let (state, current) = (group.state, group.generation);
        let member = group
            .members
            .get_mut(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        member.last_heartbeat = now;
        match state {
            GroupState::Empty | GroupState::Dead => Err(ResponseError::UnknownMemberId),
            _ if generation != current => Err(ResponseError::IllegalGeneration),
            GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
            GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
        }
    }

    /// Removes members (by member id, or by instance id when the member id is empty). Returns
    /// one result per member, or a group-level error.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: Instant,
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let mut groups = self.lock();
        let group = groups
            .get_mut(group_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        let results: Vec<Result<(), ResponseError>> = members
            .iter()
            .map(|(member_id, instance_id)| {
                let id = leaving_member(group, member_id, instance_id.as_deref())?;
                group.remove_member(&id, ResponseError::UnknownMemberId);
                Ok(())
            })
            .collect();
        if results.iter().any(Result::is_ok) {
            group.after_removal(&self.config, now);
        }
        Ok(results)
    }

    /// Expires members whose session ran out and completes rebalances whose deadline passed;
    /// forgets the Empty groups without members for which `has_offsets` is false (a group with
    /// committed offsets is kept, with its protocol type and generation, as in Kafka). Returns
    /// the forgotten groups that had their own record in `__consumer_offsets`, to delete.
    pub fn tick(&self, now: Instant, has_offsets: impl Fn(&str) -> bool) -> Vec<String> {
        let mut groups = self.lock();
        for (id, group) in groups.iter_mut() {
            let expired = group.expired_members(now);
            for member_id in &expired {
                tracing::info!(group = %id, member = %member_id, "session expired: removing member");
                group.remove_member(member_id, ResponseError::UnknownMemberId);
            }
            if !expired.is_empty() {
                group.after_removal(&self.config, now);
            }
            if group.state == GroupState::PreparingRebalance
                && group.rebalance_deadline.is_some_and(|d| now >= d)
            {
                group.complete_join(now);
            }
            group.pending.retain(|_, (_, lapses)| now < *lapses);
        }
        let mut forgotten = Vec::new();
        groups.retain(|id, g| {
            let keep = !g.is_forgettable() || has_offsets(id);
            if !keep && g.persisted.is_some() {
                forgotten.push(id.clone());
            }
            keep
        });
        forgotten
    }

    /// Groups as their own records in `__consumer_offsets` left them (at start-up): with their
    /// protocol type and generation, Stable with their members if they were, else Empty.
    pub fn restore(&self, metas: Vec<(String, GroupMeta)>, now: Instant) {
        let mut groups = self.lock();
        for (id, meta) in metas {
            if !meta.members.is_empty() {
                // Member ids handed out from now on come after the restored ones.
                let mut next = self
                    .next_member
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                *next = (*next).max(meta.members.len() as u64);
            }
            groups
                .entry(id)
                .or_insert_with(|| Group::restored(meta, now));
        }
    }

    /// The groups whose protocol type or generation changed since their own record was last
    /// written, with the record to write; each counts as written from now on.
    pub fn unpersisted(&self) -> Vec<(String, GroupMeta)> {
        let mut groups = self.lock();
        groups
            .iter_mut()
            .filter_map(|(id, g)| {
                let meta = g.unpersisted()?;
                g.persisted = Some(meta.clone());
                Some((id.clone(), meta))
            })
            .collect()
    }

    /// Is there a group `group_id` (with members or not)?
    pub fn contains(&self, group_id: &str) -> bool {
        self.lock().contains_key(group_id)
    }

    /// `groups`' records were not written after all ([`unpersisted`](Self::unpersisted) took
    /// them): the next call takes them again.
    pub fn unwritten(&self, groups: &[String]) {
        let mut all = self.lock();
        for id in groups {
            if let Some(g) = all.get_mut(id) {
                g.persisted = None;
            }
        }
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
        group.fenced(member_id, instance_id)?;
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

    /// The groups that have members.
    pub fn groups_with_members(&self) -> std::collections::HashSet<String> {
        self.lock()
            .iter()
            .filter(|(_, g)| !g.members.is_empty())
            .map(|(id, _)| id.clone())
            .collect()
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

    /// Forgets an empty group (DeleteGroups). NON_EMPTY_GROUP if it has members.
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

/// The member id a LeaveGroup entry names: by member id (checked against a given instance id),
/// or by instance id alone.
fn leaving_member(
    group: &Group,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<String, ResponseError> {
    if !member_id.is_empty() {
        group.fenced(member_id, instance_id)?;
    }
    let id = if member_id.is_empty() {
        instance_id.and_then(|i| group.member_by_instance(i))
    } else {
        Some(member_id.to_string())
    };
    id.filter(|id| {
        group
            .members
            .get(id)
            .is_some_and(|m| instance_id.is_none() || m.instance_id.as_deref() == instance_id)
    })
    .ok_or(ResponseError::UnknownMemberId)
}
