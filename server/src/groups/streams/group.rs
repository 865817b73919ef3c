//! One streams group (KIP-1071): its topology, members, group epoch, target assignment and
//! each member's reconciliation towards it (Kafka's `StreamsGroup` and the streams
//! `CurrentAssignmentBuilder`).
//!
//! As in a consumer-protocol group, a task the target moves is first revoked from its owner
//! (which keeps its epoch, UNREVOKED_TASKS, until a heartbeat no longer lists it) and only then
//! given to its new owner. An active task is never run by two members at once, and a process
//! never holds one task twice (active, standby or warm-up). The target is computed only when
//! the topology is ready (every source topic there, every internal topic created and as wide as
//! it must be); until then every member is assigned nothing and is told why (a status).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

use super::assignor::{self, Kind, MemberSpec, Task, Tasks};
use super::topology::{Configured, Problem, Status, TopicInfo, Topology};
use super::StreamsConfig;

/// Kafka's streams `MemberState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// Waiting for the member to give up `revoking`.
    UnrevokedTasks,
    /// At the target epoch, waiting for tasks other members still hold.
    UnreleasedTasks,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: Duration,
    pub process_id: String,
    pub endpoint: Option<(String, u16)>,
    pub client_tags: Vec<(String, String)>,
    pub topology_epoch: i32,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    pub assigned: Tasks,
    pub revoking: Tasks,
    pub last_heartbeat: Instant,
    pub revoke_deadline: Option<Instant>,
}

impl Member {
    fn new(now: Instant) -> Self {
        Member {
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout: Duration::ZERO,
            process_id: String::new(),
            endpoint: None,
            client_tags: Vec::new(),
            topology_epoch: -1,
            epoch: 0,
            previous_epoch: -1,
            state: MemberState::Stable,
            assigned: Tasks::default(),
            revoking: Tasks::default(),
            last_heartbeat: now,
            revoke_deadline: None,
        }
    }

    /// Records what a heartbeat says of the member; whether the group's epoch must bump (a
    /// field the assignment or the endpoints depend on changed).
    fn record_beat(&mut self, beat: &mut Beat, now: Instant) -> bool {
        let before = (
            self.rack_id.clone(),
            self.process_id.clone(),
            self.endpoint.clone(),
            self.client_tags.clone(),
            self.topology_epoch,
        );
        self.last_heartbeat = now;
        self.client_id = std::mem::take(&mut beat.client_id);
        self.client_host = std::mem::take(&mut beat.client_host);
        if let Some(rack) = beat.rack_id.take() {
            self.rack_id = Some(rack);
        }
        if let Ok(ms) = u64::try_from(beat.rebalance_timeout_ms) {
            self.rebalance_timeout = Duration::from_millis(ms);
        }
        if let Some(process) = beat.process_id.take() {
            self.process_id = process;
        }
        if let Some(endpoint) = beat.endpoint.take() {
            self.endpoint = Some(endpoint);
        }
        if let Some(tags) = beat.client_tags.take() {
            self.client_tags = tags;
        }
        if let Some(topology) = &beat.topology {
            self.topology_epoch = topology.epoch;
        }
        before
            != (
                self.rack_id.clone(),
                self.process_id.clone(),
                self.endpoint.clone(),
                self.client_tags.clone(),
                self.topology_epoch,
            )
    }
}

/// A StreamsGroupHeartbeat at epoch 0 or more, checked by the caller.
#[derive(Debug, Clone, Default)]
pub struct Beat {
    pub member_id: String,
    pub epoch: i32,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// Sent when joining.
    pub topology: Option<Topology>,
    /// The tasks the member says it runs (`None`: unchanged since its last heartbeat).
    pub owned: Option<Tasks>,
    pub process_id: Option<String>,
    pub endpoint: Option<(String, u16)>,
    pub client_tags: Option<Vec<(String, String)>>,
    pub shutdown: bool,
    pub endpoint_epoch: i32,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub member_epoch: i32,
    /// Sent when joining or when it changed.
    pub tasks: Option<Tasks>,
    pub status: Vec<(Status, String)>,
    /// Internal topics the broker is to create for the topology.
    pub create: Vec<TopicInfo>,
    pub endpoint_epoch: i32,
    /// Each member's endpoint with its active and standby tasks, when the member's endpoint
    /// epoch is behind the group's.
    pub endpoints: Option<Vec<((String, u16), Tasks)>>,
}

/// A topic's partition count now (`None`: no such topic).
pub type Partitions<'a> = &'a dyn Fn(&str) -> Option<i32>;

#[derive(Debug, Clone)]
pub struct StreamsGroup {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub topology: Option<Topology>,
    pub configured: Configured,
    pub members: BTreeMap<String, Member>,
    pub target: BTreeMap<String, Tasks>,
    /// No target is computed before this (`group.streams.initial.rebalance.delay.ms` after
    /// the first member joined an empty group).
    delay_until: Option<Instant>,
    last_assignment: Option<Instant>,
    /// The member that asked the whole application to shut down, until the group is empty.
    pub shutdown_by: Option<String>,
    pub endpoint_epoch: i32,
    /// The standby replicas the target was computed with (`streams.num.standby.replicas`).
    pub(super) standbys: usize,
}

impl StreamsGroup {
    pub fn new() -> Self {
        StreamsGroup {
            epoch: 1,
            assignment_epoch: 1,
            topology: None,
            configured: Configured::default(),
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            delay_until: None,
            last_assignment: None,
            shutdown_by: None,
            endpoint_epoch: 0,
            standbys: 0,
        }
    }

    /// Kafka's streams group states.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.topology.is_none() || !self.configured.ready() {
            "NotReady"
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

    /// The topology a heartbeat's is checked against: a group without one adopts the
    /// member's; a member behind the group's epoch is stale; any other difference is
    /// INVALID_REQUEST, as in Kafka (topology updates are not supported).
    fn check_topology(&self, beat: &Beat) -> Result<(), (ResponseError, String)> {
        match (&self.topology, &beat.topology) {
            (Some(have), Some(sent)) if sent.epoch >= have.epoch && sent != have => Err((
                ResponseError::InvalidRequest,
                "Topology updates are not supported yet.".into(),
            )),
            _ => Ok(()),
        }
    }

    /// A heartbeat with epoch 0 or more (leaving is [`StreamsGroup::remove`]).
    pub fn heartbeat(
        &mut self,
        mut beat: Beat,
        now: Instant,
        config: &StreamsConfig,
        partitions: Partitions<'_>,
    ) -> Result<Answer, (ResponseError, String)> {
        self.check_topology(&beat)?;
        let topology = self.topology.as_ref().or(beat.topology.as_ref());
        let configured = topology
            .map(|t| t.configure(partitions))
            .unwrap_or_default();
        if let Some(Problem::Invalid(why)) = &configured.problem {
            return Err((ResponseError::StreamsInvalidTopology, why.clone()));
        }
        let id = beat.member_id.clone();
        let mut bump = false;
        if beat.epoch == 0 {
            bump |= self.join(&id, now, config)?;
        }
        let member = self.members.get_mut(&id).ok_or_else(|| unknown(&id))?;
        if beat.epoch > 0 {
            check_epoch(member, &beat)?;
        }
        if self.topology.is_none() {
            self.topology = beat.topology.clone();
        }
        let owned = beat.owned.take();
        if beat.shutdown && self.shutdown_by.is_none() {
            self.shutdown_by = Some(id.clone());
        }
        bump |= member.record_beat(&mut beat, now);
        let before = (member.epoch, member.assigned.clone());
        if configured != self.configured {
            self.configured = configured;
            bump = true;
        }
        if config.standbys != self.standbys {
            // As Kafka: a change of the assignment's configs bumps the epoch.
            self.standbys = config.standbys;
            bump = true;
        }
        if bump {
            self.epoch += 1;
        }
        let mut status = Vec::new();
        if self.epoch > self.assignment_epoch {
            if let Some(why) = self.delayed(now, config) {
                status.push((Status::AssignmentDelayed, why.to_string()));
            } else {
                self.compute_target(config.standbys);
                self.last_assignment = Some(now);
            }
        }
        self.reconcile(&id, owned.as_ref(), now);
        let member = self.members.get(&id).ok_or_else(|| unknown(&id))?;
        let changed = before != (member.epoch, member.assigned.clone());
        let full = beat.epoch == 0;
        if (full || changed) && member.endpoint.is_some() {
            self.endpoint_epoch += 1;
        }
        Ok(self.answer(&id, full || changed, beat.endpoint_epoch, status))
    }

    fn answer(
        &self,
        id: &str,
        send_tasks: bool,
        endpoint_epoch: i32,
        mut status: Vec<(Status, String)>,
    ) -> Answer {
        let member = &self.members[id];
        if let Some(topology) = &self.topology {
            if member.topology_epoch < topology.epoch {
                let why = format!(
                    "The member's topology epoch {} is behind the group's topology epoch {}.",
                    member.topology_epoch, topology.epoch
                );
                status.insert(0, (Status::StaleTopology, why));
            }
        }
        if let Some(Problem::Status(code, why)) = &self.configured.problem {
            status.push((*code, why.clone()));
        }
        if let Some(by) = &self.shutdown_by {
            let why = format!("Streams group member {by} encountered a fatal error and requested a shutdown for the entire application.");
            status.push((Status::ShutdownApplication, why));
        }
        let create = match &self.configured.problem {
            Some(Problem::Status(Status::MissingInternalTopics, _)) => {
                self.configured.missing.clone()
            }
            _ => Vec::new(),
        };
        let endpoints = (endpoint_epoch != self.endpoint_epoch).then(|| {
            self.members
                .values()
                .filter_map(|m| {
                    let tasks = Tasks {
                        active: m.assigned.active.clone(),
                        standby: m.assigned.standby.clone(),
                        warmup: BTreeSet::new(),
                    };
                    Some((m.endpoint.clone()?, tasks))
                })
                .collect()
        });
        Answer {
            member_epoch: member.epoch,
            tasks: send_tasks.then(|| member.assigned.clone()),
            status,
            create,
            endpoint_epoch: self.endpoint_epoch,
            endpoints,
        }
    }

    /// Why the target may not be computed yet, if it may not.
    fn delayed(&self, now: Instant, config: &StreamsConfig) -> Option<&'static str> {
        if self.delay_until.is_some_and(|t| now < t) {
            return Some("Assignment delayed due to the configured initial rebalance delay.");
        }
        if self
            .last_assignment
            .is_some_and(|t| now < t + config.assignment_interval)
        {
            return Some("Assignment delayed due to the configured assignment interval.");
        }
        None
    }

    /// A heartbeat at epoch 0: a new member joins, or a known one rejoins having given up
    /// every task. Whether the group's epoch must bump.
    fn join(
        &mut self,
        id: &str,
        now: Instant,
        config: &StreamsConfig,
    ) -> Result<bool, (ResponseError, String)> {
        if let Some(member) = self.members.get_mut(id) {
            member.assigned = Tasks::default();
            member.revoking = Tasks::default();
            member.previous_epoch = member.epoch;
            member.epoch = 0;
            member.state = MemberState::Stable;
            member.revoke_deadline = None;
            return Ok(false);
        }
        if self.members.len() >= config.max_size {
            return Err((
                ResponseError::GroupMaxSizeReached,
                format!(
                    "The streams group has reached its maximum size of {}.",
                    config.max_size
                ),
            ));
        }
        if self.members.is_empty() && !config.initial_delay.is_zero() {
            self.delay_until = Some(now + config.initial_delay);
        }
        self.members.insert(id.to_string(), Member::new(now));
        Ok(true)
    }

    /// Removes a member (it left, was fenced or timed out): its tasks are free at once.
    pub fn remove(&mut self, member_id: &str) -> bool {
        if self.members.remove(member_id).is_none() {
            return false;
        }
        self.target.remove(member_id);
        self.epoch += 1;
        if self.members.is_empty() {
            self.shutdown_by = None;
        }
        true
    }

    /// Members silent past `session_timeout`, or that did not give up revoked tasks within
    /// their rebalance timeout.
    pub fn expired(&self, now: Instant, session_timeout: Duration) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, m)| {
                now.saturating_duration_since(m.last_heartbeat) > session_timeout
                    || m.revoke_deadline.is_some_and(|d| now > d)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn compute_target(&mut self, standbys: usize) {
        if self.configured.ready() {
            let empty = Tasks::default();
            let specs: BTreeMap<String, MemberSpec<'_>> = self
                .members
                .iter()
                .map(|(id, m)| {
                    let spec = MemberSpec {
                        process_id: &m.process_id,
                        previous: self.target.get(id).unwrap_or(&empty),
                    };
                    (id.clone(), spec)
                })
                .collect();
            let stateful: BTreeSet<String> = self
                .topology
                .iter()
                .flat_map(|t| &t.subtopologies)
                .filter(|s| !s.changelogs.is_empty())
                .map(|s| s.id.clone())
                .collect();
            self.target = assignor::assign(&specs, &self.configured.tasks, &stateful, standbys);
        } else {
            self.target = self
                .members
                .keys()
                .map(|id| (id.clone(), Tasks::default()))
                .collect();
        }
        self.assignment_epoch = self.epoch;
    }

    /// What the other members hold now (assigned or being revoked): their active tasks, and
    /// every task held in `process` (this member's assigned ones included).
    fn holdings(&self, id: &str, process: &str) -> (BTreeSet<Task>, Tasks) {
        let mut others_active = BTreeSet::new();
        let mut in_process = Tasks::default();
        for (other, m) in &self.members {
            let mine = other == id;
            let held = [&m.assigned]
                .into_iter()
                .chain((!mine).then_some(&m.revoking));
            for tasks in held {
                if !mine {
                    others_active.extend(tasks.active.iter().cloned());
                }
                if m.process_id == process {
                    in_process.add(tasks);
                }
            }
        }
        (others_active, in_process)
    }

    /// Moves a member towards its target, as far as it can now.
    fn reconcile(&mut self, id: &str, owned: Option<&Tasks>, now: Instant) {
        let Some(member) = self.members.get(id) else {
            return;
        };
        match member.state {
            MemberState::Stable if member.epoch == self.assignment_epoch => return,
            MemberState::UnrevokedTasks if owned.is_none_or(|o| o.overlaps(&member.revoking)) => {
                return
            }
            _ => {}
        }
        let (others_active, in_process) = self.holdings(id, &member.process_id);
        let target = self.target.get(id).cloned().unwrap_or_default();
        let assignment_epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(id) else {
            return;
        };
        let (keep, revoke, add) = member.assigned.diff(&target);
        if !revoke.is_empty() && owned.is_none_or(|o| o.overlaps(&revoke)) {
            member.assigned = keep;
            member.revoking = revoke;
            member.state = MemberState::UnrevokedTasks;
            member.revoke_deadline = Some(now + member.rebalance_timeout);
            return;
        }
        // An active task waits until no other member runs it and no member of this process
        // holds it as a standby or warm-up; a standby or warm-up task, until no member of this
        // process holds it at all.
        let (free, held) = add.split(|kind, t| match kind {
            Kind::Active => {
                !others_active.contains(t)
                    && !in_process.standby.contains(t)
                    && !in_process.warmup.contains(t)
            }
            Kind::Standby | Kind::Warmup => !in_process.contains(t),
        });
        let mut assigned = keep;
        assigned.add(&free);
        member.assigned = assigned;
        member.revoking = Tasks::default();
        member.revoke_deadline = None;
        member.state = if held.is_empty() {
            MemberState::Stable
        } else {
            MemberState::UnreleasedTasks
        };
        if member.epoch != assignment_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = assignment_epoch;
        }
    }
}

fn unknown(id: &str) -> (ResponseError, String) {
    (
        ResponseError::UnknownMemberId,
        format!("Member {id} is not a member of the group."),
    )
}

/// Fences a heartbeat whose epoch is ahead of the member's, or behind it other than as a
/// retry of a lost answer (the previous epoch, owning no more than it is assigned now).
fn check_epoch(member: &Member, beat: &Beat) -> Result<(), (ResponseError, String)> {
    let retry = beat.epoch == member.previous_epoch
        && beat
            .owned
            .as_ref()
            .is_some_and(|o| o.within(&member.assigned));
    if beat.epoch > member.epoch || (beat.epoch < member.epoch && !retry) {
        let why = format!(
            "The streams group member has an epoch ({}) other than the group's view of it ({}).",
            beat.epoch, member.epoch
        );
        return Err((ResponseError::FencedMemberEpoch, why));
    }
    Ok(())
}
