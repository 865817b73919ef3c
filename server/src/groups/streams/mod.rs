//! Streams groups of KIP-1071 (`group.protocol=streams` in Kafka Streams): every such group
//! of the broker behind one mutex never held across an await, and what the
//! StreamsGroupHeartbeat, StreamsGroupDescribe, OffsetCommit, OffsetFetch, ListGroups and
//! DeleteGroups handlers ask of them.
//!
//! - [`topology`]: the topology a group runs, configured against the topics that exist;
//! - [`assignor`]: the task assignor;
//! - [`group`]: one group, its epochs, target assignment and members' reconciliation.
//!
//! A group id is a streams group, a consumer-protocol group or a classic one, never two at
//! once; an empty one of another kind becomes a streams group when a member joins. As in
//! Kafka 4.4 there is no static membership, no warm-up task and no source topic regex (each is
//! refused with INVALID_REQUEST). A group is kept in `__consumer_offsets` ([`stored`]),
//! written before the heartbeat that changed it is answered: after a restart its members go
//! on at their epochs with their tasks. A member of a group the broker does not know is told
//! UNKNOWN_MEMBER_ID (Kafka: GROUP_ID_NOT_FOUND, fatal to the Streams client) and rejoins.

pub mod assignor;
pub mod config;
mod group;
pub mod stored;
pub mod topology;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

pub use group::{Answer, Beat, Member, Partitions, StreamsGroup};
pub use stored::StreamsGroupRecord;

/// Settings of streams groups (Kafka's `group.streams.*` broker configs).
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    /// `group.streams.session.timeout.ms`.
    pub session_timeout: Duration,
    /// `group.streams.heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `group.streams.num.standby.replicas`.
    pub standbys: usize,
    /// `group.streams.initial.rebalance.delay.ms`.
    pub initial_delay: Duration,
    /// `group.streams.assignment.interval.ms`.
    pub assignment_interval: Duration,
    /// `group.streams.max.size`: members of one group (default 1000, as lograil's consumer
    /// groups; Kafka's is unbounded).
    pub max_size: usize,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        StreamsConfig {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            standbys: 0,
            initial_delay: Duration::from_millis(3_000),
            assignment_interval: Duration::from_millis(1_000),
            max_size: 1000,
        }
    }
}

/// Every streams group of the broker.
#[derive(Debug, Default)]
pub struct StreamsGroups {
    pub config: StreamsConfig,
    groups: Mutex<HashMap<String, StreamsGroup>>,
    /// Groups that changed since their record was written.
    dirty: Mutex<BTreeSet<String>>,
}

impl StreamsGroups {
    pub fn new(config: StreamsConfig) -> Self {
        StreamsGroups {
            config,
            ..StreamsGroups::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, StreamsGroup>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_dirty(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.dirty.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark(&self, group: &str) {
        self.lock_dirty().insert(group.to_string());
    }

    /// A StreamsGroupHeartbeat already checked for its own faults, epoch 0 or more, under the
    /// broker's settings (for tests; the handler passes the group's own).
    #[cfg(test)]
    pub fn heartbeat(
        &self,
        group_id: &str,
        beat: Beat,
        now: Instant,
        partitions: Partitions<'_>,
    ) -> Result<Answer, (ResponseError, String)> {
        self.heartbeat_with(group_id, beat, now, partitions, &self.config)
    }

    /// [`StreamsGroups::heartbeat`] under the group's own settings (`config`: the broker's
    /// with the group's `streams.*` configs).
    pub fn heartbeat_with(
        &self,
        group_id: &str,
        beat: Beat,
        now: Instant,
        partitions: Partitions<'_>,
        config: &StreamsConfig,
    ) -> Result<Answer, (ResponseError, String)> {
        let mut groups = self.lock();
        let fresh = !groups.contains_key(group_id);
        if fresh && beat.epoch != 0 {
            // Kafka answers GROUP_ID_NOT_FOUND, which the Streams client takes as fatal; a
            // group gone here (deleted, its record lost) is one to rejoin.
            let why = format!(
                "Member {} is not a member of group {group_id}.",
                beat.member_id
            );
            return Err((ResponseError::UnknownMemberId, why));
        }
        let group = groups
            .entry(group_id.to_string())
            .or_insert_with(StreamsGroup::new);
        let member_id = beat.member_id.clone();
        let epochs = |g: &StreamsGroup| {
            let shutdown = g.shutdown_by.clone();
            (g.epoch, g.assignment_epoch, g.endpoint_epoch, shutdown)
        };
        let before = (epochs(group), group.member_record(&member_id));
        let answer = group.heartbeat(beat, now, config, partitions);
        if answer.is_err() && fresh {
            groups.remove(group_id);
        } else if before != (epochs(group), group.member_record(&member_id)) {
            self.mark(group_id);
        }
        answer
    }

    /// A member's leave (epoch -1): UNKNOWN_MEMBER_ID when there is no such group or member
    /// (Kafka: GROUP_ID_NOT_FOUND for the group). `shutdown`: it asks the application to shut down.
    pub fn leave(
        &self,
        group_id: &str,
        member_id: &str,
        shutdown: bool,
    ) -> Result<(), (ResponseError, String)> {
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(group_id) else {
            let why = format!("Member {member_id} is not a member of group {group_id}.");
            return Err((ResponseError::UnknownMemberId, why));
        };
        if !group.members.contains_key(member_id) {
            let why = format!("Member {member_id} is not a member of group {group_id}.");
            return Err((ResponseError::UnknownMemberId, why));
        }
        if shutdown && group.shutdown_by.is_none() {
            group.shutdown_by = Some(member_id.to_string());
        }
        group.remove(member_id);
        self.mark(group_id);
        Ok(())
    }

    /// Fences members silent past the broker's session timeout or late revoking; returns them
    /// (for tests; the group timer passes each group's own).
    #[cfg(test)]
    pub fn tick(&self, now: Instant) -> Vec<(String, String)> {
        self.tick_with(now, |_| self.config.session_timeout)
    }

    /// [`StreamsGroups::tick`] with each group's own session timeout (`session`, by group id).
    pub fn tick_with(
        &self,
        now: Instant,
        session: impl Fn(&str) -> Duration,
    ) -> Vec<(String, String)> {
        let mut gone = Vec::new();
        for (id, group) in self.lock().iter_mut() {
            for member in group.expired(now, session(id)) {
                tracing::info!(group = %id, member = %member, "streams group member fenced (session or rebalance timeout)");
                group.remove(&member);
                self.mark(id);
                gone.push((id.clone(), member));
            }
        }
        gone
    }

    /// Forgets the empty groups without committed offsets (their records are deleted).
    pub fn forget(&self, has_offsets: impl Fn(&str) -> bool) {
        self.lock().retain(|id, g| {
            let keep = !g.members.is_empty() || has_offsets(id);
            if !keep {
                self.mark(id);
            }
            keep
        });
    }

    /// Groups as their records left them (at start-up), members included.
    pub fn restore(&self, records: Vec<(String, StreamsGroupRecord)>, now: Instant) {
        let mut groups = self.lock();
        for (id, record) in records {
            groups
                .entry(id)
                .or_insert_with(|| StreamsGroup::restored(record, now));
        }
    }

    /// The groups that changed since last asked, with their record now (`None`: gone).
    pub fn unpersisted(&self) -> Vec<(String, Option<StreamsGroupRecord>)> {
        let dirty = std::mem::take(&mut *self.lock_dirty());
        let groups = self.lock();
        dirty
            .into_iter()
            .map(|id| {
                let record = groups.get(&id).map(StreamsGroup::record);
                (id, record)
            })
            .collect()
    }

    /// Whether some group changed since its record was written.
    pub fn has_unpersisted(&self) -> bool {
        !self.lock_dirty().is_empty()
    }

    /// `groups`' records were not written after all: the next call takes them again.
    pub fn unwritten(&self, groups: &[String]) {
        self.lock_dirty().extend(groups.iter().cloned());
    }

    /// The groups with members.
    pub fn groups_with_members(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, g)| !g.members.is_empty())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Whether `group_id` is a streams group (with members or not).
    pub fn contains(&self, group_id: &str) -> bool {
        self.lock().contains_key(group_id)
    }

    /// A copy of the group, for describing it.
    pub fn describe(&self, group_id: &str) -> Option<StreamsGroup> {
        self.lock().get(group_id).cloned()
    }

    /// Every group: (id, state).
    pub fn list(&self) -> Vec<(String, &'static str)> {
        let mut all: Vec<_> = self
            .lock()
            .iter()
            .map(|(id, g)| (id.clone(), g.state()))
            .collect();
        all.sort();
        all
    }

    /// Whether a commit (`commit`: OffsetCommit or TxnOffsetCommit) or an offset fetch by
    /// `member_id` at `epoch` may go to this group; `None` when it is not a streams group. As
    /// Kafka: epoch -1 without a member id from an admin goes to an empty group (a fetch, to
    /// any); a member must be one, at its current epoch (STALE_MEMBER_EPOCH).
    pub fn check_member(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        epoch: i32,
        commit: bool,
    ) -> Option<Result<(), ResponseError>> {
        let groups = self.lock();
        let group = groups.get(group_id)?;
        let admin = epoch < 0 && member_id.is_none_or(str::is_empty);
        if admin && (!commit || group.members.is_empty()) {
            return Some(Ok(()));
        }
        let Some(member) = member_id.and_then(|m| group.members.get(m)) else {
            return Some(Err(ResponseError::UnknownMemberId));
        };
        // A commit one epoch behind is taken: it was sent before the answer that moved the
        // member on arrived (Kafka checks the epoch each task was assigned at).
        let late = commit && epoch == member.previous_epoch && epoch >= 0;
        Some(if member.epoch == epoch || late {
            Ok(())
        } else {
            Err(ResponseError::StaleMemberEpoch)
        })
    }

    /// Forgets an empty group (DeleteGroups, or the group becoming another kind);
    /// NON_EMPTY_GROUP if it has members. Returns whether there was one.
    pub fn delete(&self, group_id: &str) -> Result<bool, ResponseError> {
        let mut groups = self.lock();
        match groups.get(group_id) {
            Some(g) if !g.members.is_empty() => Err(ResponseError::NonEmptyGroup),
            Some(_) => {
                groups.remove(group_id);
                self.mark(group_id);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests;
