//! Share-group membership (ShareGroupHeartbeat, KIP-932) and share sessions (ShareFetch and
//! ShareAcknowledge epochs). On one broker every member of a share group is assigned every
//! partition of the topics it subscribes to: the records, not the partitions, are shared.
//!
//! A member joins with epoch 0 and a member id it generated, gets the group's epoch, and must
//! heartbeat with it; a new subscription or a new partition bumps the epoch and sends the
//! assignment again. A member silent for the session timeout is removed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kafka_protocol::error::ResponseError;
use log_core::Uuid;

/// A topic partition, by topic id.
pub type TopicPartition = (Uuid, i32);

#[derive(Debug, Clone)]
pub struct Member {
    pub epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscriptions: BTreeSet<String>,
    /// What the member was last told it is assigned.
    pub assignment: BTreeSet<TopicPartition>,
    pub last_seen_ms: i64,
}

#[derive(Debug, Default)]
pub struct ShareGroup {
    pub epoch: i32,
    pub members: BTreeMap<String, Member>,
}

/// One member's share session: the partitions it fetches, the epoch its next request must
/// carry, and the connection that opened it (its records are released when that connection
/// closes, as Kafka does).
#[derive(Debug, Clone)]
pub struct Session {
    pub epoch: i32,
    pub partitions: BTreeSet<TopicPartition>,
    pub peer: Option<SocketAddr>,
}

/// A ShareGroupHeartbeat, as membership needs it.
#[derive(Debug, Clone)]
pub struct ShareBeat<'a> {
    pub group_id: &'a str,
    pub member_id: &'a str,
    /// 0 to join, -1 to leave.
    pub member_epoch: i32,
    /// The topics it subscribes to (`None`: unchanged).
    pub subscriptions: Option<Vec<String>>,
    pub client_id: &'a str,
    pub client_host: &'a str,
}

/// What a ShareFetch or ShareAcknowledge asks of its member's share session: the epoch it
/// carries, and the partitions it adds to and forgets from the session.
#[derive(Debug, Clone, Copy)]
pub struct SessionUpdate<'a> {
    pub epoch: i32,
    pub add: &'a [TopicPartition],
    pub forget: &'a [TopicPartition],
}

/// What a heartbeat answers.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub member_epoch: i32,
    /// Sent when it changed (or on joining).
    pub assignment: Option<BTreeSet<TopicPartition>>,
}

/// Members of every share group and their sessions.
#[derive(Debug, Default)]
pub struct Membership {
    groups: Mutex<HashMap<String, ShareGroup>>,
    sessions: Mutex<HashMap<(String, String), Session>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Membership {
    /// A ShareGroupHeartbeat. `partitions_of(topic)` lists a topic's partitions (empty if it
    /// does not exist). Returns the answer, or the member that left (epoch -1).
    pub fn heartbeat(
        &self,
        beat: ShareBeat<'_>,
        now_ms: i64,
        max_members: usize,
        partitions_of: impl Fn(&str) -> Vec<TopicPartition>,
    ) -> Result<Heartbeat, ResponseError> {
        let ShareBeat {
            group_id,
            member_id,
            member_epoch,
            subscriptions,
            client_id,
            client_host,
        } = beat;
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if member_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        if member_epoch == -1 {
            return Ok(self.leave(group_id, member_id));
        }
        let mut groups = lock(&self.groups);
        let group = groups.entry(group_id.to_string()).or_default();
        let joining = member_epoch == 0;
        if joining && !group.members.contains_key(member_id) {
            if group.members.len() >= max_members {
                return Err(ResponseError::GroupMaxSizeReached);
            }
            if subscriptions.as_ref().is_none_or(Vec::is_empty) {
                return Err(ResponseError::InvalidRequest);
            }
            group.epoch += 1;
            let member = Member {
                epoch: 0,
                client_id: client_id.to_string(),
                client_host: client_host.to_string(),
                subscriptions: BTreeSet::new(),
                assignment: BTreeSet::new(),
                last_seen_ms: now_ms,
            };
            group.members.insert(member_id.to_string(), member);
        }
        let group_epoch = group.epoch;
        let member = group
            .members
            .get_mut(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if !joining && member_epoch != member.epoch {
            return Err(ResponseError::FencedMemberEpoch);
        }
        member.last_seen_ms = now_ms;
        if let Some(topics) = subscriptions {
            member.subscriptions = topics.into_iter().collect();
        }
        let assignment: BTreeSet<TopicPartition> = member
            .subscriptions
            .iter()
            .flat_map(|topic| partitions_of(topic))
            .collect();
        let changed = assignment != member.assignment || member.epoch == 0 || joining;
        if changed {
            member.assignment = assignment.clone();
            member.epoch = group_epoch.max(member.epoch + 1);
        }
        Ok(Heartbeat {
            member_epoch: member.epoch,
            assignment: changed.then_some(assignment),
        })
    }

    /// A heartbeat at epoch -1: the member leaves its group (bumping the group's epoch) and
    /// its share session closes.
    fn leave(&self, group_id: &str, member_id: &str) -> Heartbeat {
        let mut groups = lock(&self.groups);
        if let Some(group) = groups.get_mut(group_id) {
            if group.members.remove(member_id).is_some() {
                group.epoch += 1;
            }
        }
        drop(groups);
        self.close_session(group_id, member_id);
        Heartbeat {
            member_epoch: -1,
            assignment: None,
        }
    }

    /// Whether `member_id` is in `group_id`.
    pub fn is_member(&self, group_id: &str, member_id: &str) -> bool {
        lock(&self.groups)
            .get(group_id)
            .is_some_and(|g| g.members.contains_key(member_id))
    }

    /// Removes members silent for longer than their group's session timeout; returns them as
    /// (group, member).
    pub fn expire(&self, now_ms: i64, timeout_ms: impl Fn(&str) -> i64) -> Vec<(String, String)> {
        let mut gone = Vec::new();
        for (group_id, group) in lock(&self.groups).iter_mut() {
            let timeout = timeout_ms(group_id);
            let silent: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| now_ms - m.last_seen_ms > timeout)
                .map(|(id, _)| id.clone())
                .collect();
            for member in silent {
                group.members.remove(&member);
                group.epoch += 1;
                gone.push((group_id.clone(), member));
            }
        }
        for (group, member) in &gone {
            tracing::info!(group, member, "share group member timed out");
            self.close_session(group, member);
        }
        gone
    }

    /// A group's members and epoch, for ShareGroupDescribe; `None` if the group is unknown.
    pub fn describe(&self, group_id: &str) -> Option<(i32, Vec<(String, Member)>)> {
        let groups = lock(&self.groups);
        let group = groups.get(group_id)?;
        Some((
            group.epoch,
            group
                .members
                .iter()
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect(),
        ))
    }

    /// Every share group known to membership, with how many members it has.
    pub fn list(&self) -> Vec<(String, usize)> {
        lock(&self.groups)
            .iter()
            .map(|(id, g)| (id.clone(), g.members.len()))
            .collect()
    }

    /// Checks a ShareFetch's or ShareAcknowledge's session epoch and moves the session on:
    /// epoch 0 opens a new session with `add` (a fetch only), N must be the session's epoch
    /// (then `add` joins and `forget` leaves it), -1 closes it after this request. Returns the
    /// session's partitions.
    pub fn session(
        &self,
        group_id: &str,
        member_id: &str,
        update: SessionUpdate<'_>,
        opening_allowed: bool,
        peer: Option<SocketAddr>,
    ) -> Result<BTreeSet<TopicPartition>, ResponseError> {
        let SessionUpdate { epoch, add, forget } = update;
        let key = (group_id.to_string(), member_id.to_string());
        let mut sessions = lock(&self.sessions);
        match epoch {
            0 if !opening_allowed => Err(ResponseError::InvalidShareSessionEpoch),
            0 => {
                let session = Session {
                    epoch: 1,
                    partitions: add.iter().copied().collect(),
                    peer,
                };
                let partitions = session.partitions.clone();
                sessions.insert(key, session);
                Ok(partitions)
            }
            -1 => Ok(sessions
                .remove(&key)
                .map(|s| s.partitions)
                .unwrap_or_default()),
            n => {
                let session = sessions
                    .get_mut(&key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if session.epoch != n {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                session.epoch = if n == i32::MAX { 1 } else { n + 1 };
                session.partitions.extend(add.iter().copied());
                for p in forget {
                    session.partitions.remove(p);
                }
                Ok(session.partitions.clone())
            }
        }
    }

    pub fn close_session(&self, group_id: &str, member_id: &str) {
        lock(&self.sessions).remove(&(group_id.to_string(), member_id.to_string()));
    }

    pub fn has_sessions(&self) -> bool {
        !lock(&self.sessions).is_empty()
    }

    /// Closes the sessions opened on the connection from `peer`; returns their (group, member).
    pub fn close_sessions_of(&self, peer: SocketAddr) -> Vec<(String, String)> {
        let mut sessions = lock(&self.sessions);
        let closed: Vec<(String, String)> = sessions
            .iter()
            .filter(|(_, s)| s.peer == Some(peer))
            .map(|(k, _)| k.clone())
            .collect();
        for key in &closed {
            sessions.remove(key);
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partitions(topic: &str) -> Vec<TopicPartition> {
        match topic {
            "t" => vec![(Uuid::from_u128(1), 0), (Uuid::from_u128(1), 1)],
            _ => Vec::new(),
        }
    }

    /// A heartbeat of `member` of group `g` at `epoch`, from client `c` on `/h`.
    fn beat(member: &str, epoch: i32, subscriptions: Option<Vec<String>>) -> ShareBeat<'_> {
        ShareBeat {
            group_id: "g",
            member_id: member,
            member_epoch: epoch,
            subscriptions,
            client_id: "c",
            client_host: "/h",
        }
    }

    /// A session update at `epoch`.
    fn update<'a>(
        epoch: i32,
        add: &'a [TopicPartition],
        forget: &'a [TopicPartition],
    ) -> SessionUpdate<'a> {
        SessionUpdate { epoch, add, forget }
    }

    #[test]
    fn members_join_get_every_partition_and_are_fenced_on_a_stale_epoch() {
        let m = Membership::default();
        let join = |member: &str, epoch: i32| {
            m.heartbeat(
                beat(member, epoch, Some(vec!["t".into()])),
                0,
                10,
                partitions,
            )
        };
        let a = join("a", 0).unwrap();
        assert_eq!(a.assignment.unwrap().len(), 2);
        let b = join("b", 0).unwrap();
        assert_eq!(
            b.assignment.unwrap().len(),
            2,
            "every member gets every partition"
        );
        let again = m
            .heartbeat(beat("a", a.member_epoch, None), 1, 10, partitions)
            .unwrap();
        assert!(again.assignment.is_none(), "unchanged: not sent again");
        assert_eq!(
            m.heartbeat(beat("a", a.member_epoch + 7, None), 1, 10, partitions)
                .unwrap_err(),
            ResponseError::FencedMemberEpoch
        );
        assert_eq!(
            m.heartbeat(beat("zz", 3, None), 1, 10, partitions)
                .unwrap_err(),
            ResponseError::UnknownMemberId
        );
        assert_eq!(m.expire(100_000, |_| 45_000).len(), 2);
        assert!(!m.is_member("g", "a"));
    }

    #[test]
    fn sessions_open_at_zero_advance_and_close_at_minus_one() {
        let m = Membership::default();
        let p = (Uuid::from_u128(1), 0);
        assert_eq!(
            m.session("g", "a", update(0, &[p], &[]), true, None)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            m.session("g", "a", update(2, &[], &[]), true, None)
                .unwrap_err(),
            ResponseError::InvalidShareSessionEpoch
        );
        assert!(m
            .session("g", "a", update(1, &[], &[p]), true, None)
            .unwrap()
            .is_empty());
        assert_eq!(
            m.session("g", "b", update(1, &[], &[]), true, None)
                .unwrap_err(),
            ResponseError::ShareSessionNotFound
        );
        assert_eq!(
            m.session("g", "a", update(0, &[], &[]), false, None)
                .unwrap_err(),
            ResponseError::InvalidShareSessionEpoch
        );
        m.session("g", "a", update(-1, &[], &[]), true, None)
            .unwrap();
        assert_eq!(
            m.session("g", "a", update(2, &[], &[]), true, None)
                .unwrap_err(),
            ResponseError::ShareSessionNotFound
        );
    }
}
