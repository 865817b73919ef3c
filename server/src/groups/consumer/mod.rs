//! Consumer groups of KIP-848's consumer protocol (`group.protocol=consumer`): every such group
//! of the broker behind one mutex never held across an await, and what the
//! ConsumerGroupHeartbeat, ConsumerGroupDescribe, OffsetCommit, OffsetFetch, ListGroups,
//! DescribeGroups and DeleteGroups handlers ask of them.
//!
//! - [`assignor`]: the server-side assignors, `uniform` (default) and `range`;
//! - [`group`]: one group, its epochs, target assignment and members' reconciliation.
//!
//! A group is of one protocol at a time: the handlers keep a group id either here or in the
//! classic [`Coordinator`](super::Coordinator); an empty group of either kind can become the
//! other. Members are not persisted: after a restart a group comes back empty with its epoch
//! (its own record in `__consumer_offsets`), its members are UNKNOWN_MEMBER_ID and rejoin.

pub mod assignor;
mod group;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

pub use group::{Answer, Beat, ConsumerGroup, Metadata};

/// A topic partition, by topic id.
pub type TopicPartition = (log_core::Uuid, i32);

/// Settings of consumer-protocol groups (Kafka's `group.consumer.*` broker configs).
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// `group.consumer.session.timeout.ms`.
    pub session_timeout: Duration,
    /// `group.consumer.heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `group.consumer.max.size`.
    pub max_size: usize,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            max_size: 1000,
        }
    }
}

/// Every consumer-protocol group of the broker.
#[derive(Debug, Default)]
pub struct ConsumerGroups {
    pub config: ConsumerConfig,
    groups: Mutex<HashMap<String, ConsumerGroup>>,
    /// Groups whose epoch changed since their own record was written.
    dirty: Mutex<BTreeSet<String>>,
}

impl ConsumerGroups {
    pub fn new(config: ConsumerConfig) -> Self {
        ConsumerGroups {
            config,
            ..Self::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ConsumerGroup>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark(&self, group: &str) {
        self.dirty
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(group.to_string());
    }

    /// A ConsumerGroupHeartbeat already checked for its own faults (an empty member id of a
    /// v0 joiner is filled in by the caller). Leaving (epoch -1 or -2) answers the epoch sent.
    pub fn heartbeat(
        &self,
        group_id: &str,
        beat: Beat,
        now: Instant,
        metadata: Metadata<'_>,
    ) -> Result<Answer, ResponseError> {
        let mut groups = self.lock();
        if beat.epoch < 0 {
            if let Some(group) = groups.get_mut(group_id) {
                let held =
                    beat.epoch == group::LEFT_STATIC && group.leave_static(&beat.member_id, now);
                if !held && group.remove(&beat.member_id) {
                    self.mark(group_id);
                }
            }
            return Ok(Answer {
                member_epoch: beat.epoch,
                assignment: None,
            });
        }
        let group = if beat.epoch == 0 {
            groups
                .entry(group_id.to_string())
                .or_insert_with(|| ConsumerGroup::new(0))
        } else {
            groups
                .get_mut(group_id)
                .ok_or(ResponseError::UnknownMemberId)?
        };
        let epoch = group.epoch;
        let answer = group.heartbeat(beat, now, self.config.max_size, metadata);
        if group.epoch != epoch {
            self.mark(group_id);
        }
        answer
    }

    /// Fences members silent past the session timeout or late revoking; returns them.
    pub fn tick(&self, now: Instant) -> Vec<(String, String)> {
        let mut gone = Vec::new();
        for (id, group) in self.lock().iter_mut() {
            for member in group.expired(now, self.config.session_timeout) {
                tracing::info!(group = %id, member = %member, "consumer group member fenced (session or rebalance timeout)");
                group.remove(&member);
                self.mark(id);
                gone.push((id.clone(), member));
            }
        }
        gone
    }

    /// Forgets the empty groups without committed offsets (their records are deleted), so
    /// group ids a client tried once do not stay forever.
    pub fn forget(&self, has_offsets: impl Fn(&str) -> bool) {
        self.lock().retain(|id, g| {
            let keep = !g.members.is_empty() || has_offsets(id);
            if !keep {
                self.mark(id);
            }
            keep
        });
    }

    /// The regular expression `member_id` of `group_id` subscribes by, if any.
    pub fn member_regex(&self, group_id: &str, member_id: &str) -> Option<String> {
        self.lock()
            .get(group_id)?
            .members
            .get(member_id)?
            .regex
            .clone()
    }

    /// Whether `group_id` is a consumer-protocol group (with members or not).
    pub fn contains(&self, group_id: &str) -> bool {
        self.lock().contains_key(group_id)
    }

    /// The groups with members.
    pub fn groups_with_members(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, g)| !g.members.is_empty())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// A copy of the group, for describing it.
    pub fn describe(&self, group_id: &str) -> Option<ConsumerGroup> {
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

    /// Whether a commit (OffsetCommit, `version`) or an offset fetch (`version` `None`) by
    /// `member_id` at `epoch` may go to this group; `None` when it is not a consumer group.
    /// As Kafka: epoch -1 without a member id commits to an empty group only (an admin, a
    /// consumer without group management); a member must be one, with its current epoch
    /// (STALE_MEMBER_EPOCH), committing with OffsetCommit v9 or later.
    pub fn check_member(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        epoch: i32,
        version: Option<i16>,
    ) -> Option<Result<(), ResponseError>> {
        let groups = self.lock();
        let group = groups.get(group_id)?;
        let admin = epoch < 0 && member_id.is_none_or(str::is_empty);
        if admin && (version.is_none() || group.members.is_empty()) {
            return Some(Ok(()));
        }
        let Some(member) = member_id.and_then(|m| group.members.get(m)) else {
            return Some(Err(ResponseError::UnknownMemberId));
        };
        if version.is_some_and(|v| v < 9) {
            return Some(Err(ResponseError::UnsupportedVersion));
        }
        Some(if member.epoch == epoch {
            Ok(())
        } else {
            Err(ResponseError::StaleMemberEpoch)
        })
    }

    /// Forgets an empty group (DeleteGroups, or the group becoming a classic one);
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

    /// Groups as their own records left them (at start-up): empty, with their epoch.
    pub fn restore(&self, epochs: Vec<(String, i32)>) {
        let mut groups = self.lock();
        for (id, epoch) in epochs {
            groups
                .entry(id)
                .or_insert_with(|| ConsumerGroup::new(epoch));
        }
    }

    /// The groups whose epoch changed since last asked, with their epoch now (`None`: the
    /// group is gone).
    pub fn unpersisted(&self) -> Vec<(String, Option<i32>)> {
        let dirty = std::mem::take(&mut *self.dirty.lock().unwrap_or_else(PoisonError::into_inner));
        let groups = self.lock();
        dirty
            .into_iter()
            .map(|id| {
                let epoch = groups.get(&id).map(|g| g.epoch);
                (id, epoch)
            })
            .collect()
    }

    /// Whether some group's epoch changed since its record was written.
    pub fn has_unpersisted(&self) -> bool {
        !self
            .dirty
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// `groups`' records were not written after all: the next call takes them again.
    pub fn unwritten(&self, groups: &[String]) {
        let mut dirty = self.dirty.lock().unwrap_or_else(PoisonError::into_inner);
        dirty.extend(groups.iter().cloned());
    }
}
