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
//! other. A group's epoch, target and members are kept in `__consumer_offsets` (`stored`),
//! written before the heartbeat that changed them is answered, as in Kafka: after a restart
//! the members go on at their epochs with their partitions, their session timers started
//! again.

pub mod assignor;
mod classic;
pub mod embedded;
mod group;
mod stored;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

pub use classic::{ClassicImage, ClassicMemberImage, MigrationPolicy};
pub use group::{Answer, Beat, ConsumerGroup, Metadata};

use super::offsets::{ConsumerGroupImage, ConsumerGroupWrite};

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
    /// `group.consumer.migration.policy`.
    pub migration: MigrationPolicy,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
            max_size: 1000,
            migration: MigrationPolicy::default(),
        }
    }
}

/// Every consumer-protocol group of the broker.
#[derive(Debug, Default)]
pub struct ConsumerGroups {
    pub config: ConsumerConfig,
    groups: Mutex<HashMap<String, ConsumerGroup>>,
    /// What changed in each group since its records were written.
    dirty: Mutex<BTreeMap<String, Dirty>>,
}

/// What of a group may differ from its records.
#[derive(Debug)]
enum Dirty {
    /// Its epoch, target, or which members it has.
    All,
    /// These members' records only.
    Members(BTreeSet<String>),
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

    fn lock_dirty(&self) -> MutexGuard<'_, BTreeMap<String, Dirty>> {
        self.dirty.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark(&self, group: &str) {
        self.lock_dirty().insert(group.to_string(), Dirty::All);
    }

    fn mark_member(&self, group: &str, member: &str) {
        let mut dirty = self.lock_dirty();
        match dirty
            .entry(group.to_string())
            .or_insert_with(|| Dirty::Members(BTreeSet::new()))
        {
            Dirty::All => {}
            Dirty::Members(members) => {
                members.insert(member.to_string());
            }
        }
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
                if held {
                    self.mark_member(group_id, &beat.member_id);
                } else if group.remove(&beat.member_id) {
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
        let member_id = beat.member_id.clone();
        let before = group.member_record(&member_id);
        let answer = group.heartbeat(beat, now, self.config.max_size, metadata);
        let after = group.member_record(&member_id);
        if group.epoch != epoch || (before.is_none() && after.is_some()) {
            // A new epoch, or a new member id (a static member's return): all of it.
            self.mark(group_id);
        } else if after != before {
            self.mark_member(group_id, &member_id);
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
    /// (STALE_MEMBER_EPOCH), committing with OffsetCommit v9 or later; a classic member (of an
    /// upgraded group) with any version, its epoch as its generation (ILLEGAL_GENERATION).
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
        if member.classic.is_some() {
            return Some(if member.epoch == epoch {
                Ok(())
            } else {
                Err(ResponseError::IllegalGeneration)
            });
        }
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

    /// Groups as their records left them (at start-up): their epochs, targets and members.
    pub fn restore(&self, images: Vec<(String, ConsumerGroupImage)>, now: Instant) {
        let mut groups = self.lock();
        for (id, image) in images {
            groups
                .entry(id)
                .or_insert_with(|| ConsumerGroup::restored(image, now));
        }
    }

    /// What changed since last asked, to be written (`None`: the group is gone).
    pub fn unpersisted(&self) -> Vec<(String, Option<ConsumerGroupWrite>)> {
        let dirty = std::mem::take(&mut *self.lock_dirty());
        let groups = self.lock();
        dirty
            .into_iter()
            .map(|(id, dirty)| {
                let write = groups.get(&id).map(|g| {
                    let (members, all_members) = match dirty {
                        Dirty::All => (g.members.keys().cloned().collect(), true),
                        Dirty::Members(members) => (members, false),
                    };
                    ConsumerGroupWrite {
                        epoch: g.epoch,
                        target: g.target_record(),
                        members: members
                            .into_iter()
                            .filter_map(|m| Some((m.clone(), g.member_record(&m)?)))
                            .collect(),
                        all_members,
                    }
                });
                (id, write)
            })
            .collect()
    }

    /// Whether some group changed since its records were written.
    pub fn has_unpersisted(&self) -> bool {
        !self.lock_dirty().is_empty()
    }

    /// `groups`' records were not written after all: the next call takes them again.
    pub fn unwritten(&self, groups: &[String]) {
        let mut dirty = self.lock_dirty();
        for group in groups {
            dirty.insert(group.clone(), Dirty::All);
        }
    }
}
