//! The group member between rebalances: heartbeats, auto commit, the leader's watch on
//! partition counts, the poll timeout; LeaveGroup, and what closing does.

use std::time::{Duration, Instant};

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{ApiKey, GroupId, HeartbeatRequest, LeaveGroupRequest};

use super::{closing, Member, Next};
use crate::consumer::error::{CommitError, ConsumeError};
use crate::error::{CallError, ErrorCode};
use crate::util::{backoff, text};

/// When the stable member does what next.
struct Schedule {
    next_heartbeat: Instant,
    next_commit: Instant,
    next_metadata: Instant,
    last_heartbeat_ok: Instant,
    /// Heartbeats failed in a row (for the backoff).
    failures: u32,
}

impl Member {
    /// How often the leader looks for partition-count changes: every heartbeat while a
    /// subscribed topic has no partitions (it may exist on a broker not yet heard from), else
    /// every `metadata.max.age.ms`.
    fn metadata_check_interval(&self) -> Duration {
        let config = &self.shared.config;
        if self.assigned_from.values().any(|n| *n == 0) {
            config.heartbeat_interval
        } else {
            config.net.metadata_max_age
        }
    }

    /// Heartbeats, auto commits and watches for a reason to rejoin.
    pub(super) async fn stable(&mut self) -> Next {
        let shared = self.shared.clone();
        let config = &shared.config;
        let mut schedule = Schedule {
            next_heartbeat: Instant::now() + config.heartbeat_interval,
            next_commit: Instant::now() + config.auto_commit_interval,
            next_metadata: Instant::now() + self.metadata_check_interval(),
            last_heartbeat_ok: Instant::now(),
            failures: 0,
        };
        loop {
            let notified = shared.group.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if closing(&self.shared) {
                return Next::Close;
            }
            if self.subscription() != self.joined_subscription {
                return Next::Rejoin;
            }
            let now = Instant::now();
            let last_poll = self.shared.last_poll();
            if now.saturating_duration_since(last_poll) > config.max_poll_interval {
                // The application stopped asking for records: leave so the group can move
                // on; the next recv rejoins.
                self.lose_all(config.group_instance_id.is_none());
                self.leave().await;
                self.shared.state().left_for_poll_timeout = true;
                return Next::Rejoin;
            }
            if config.enable_auto_commit && now >= schedule.next_commit {
                schedule.next_commit = now + config.auto_commit_interval;
                let offsets = self.shared.state().commit_offsets(false);
                if let Err(CommitError::Rebalanced(_)) = self.shared.commit(offsets).await {
                    return Next::Rejoin;
                }
            }
            if self.leader && now >= schedule.next_metadata {
                schedule.next_metadata = now + self.metadata_check_interval();
                if self.partition_counts_changed().await {
                    return Next::Rejoin;
                }
            }
            if now >= schedule.next_heartbeat {
                if let Some(next) = self.beat(&mut schedule).await {
                    return next;
                }
            }
            let wake = self.wake_at(&schedule, last_poll);
            tokio::select! {
                () = tokio::time::sleep_until(wake.into()) => {}
                () = notified => {}
            }
        }
    }

    /// Whether a topic's partition count differs from the one the leader assigned from (after
    /// a metadata refresh; a failed refresh is no change).
    async fn partition_counts_changed(&self) -> bool {
        let seen = self.shared.cluster.metadata().version;
        let Ok(m) = self.shared.cluster.refresh(seen).await else {
            return false;
        };
        self.assigned_from.iter().any(|(t, n)| {
            m.partition_count(t)
                .map_or(0, |c| i32::try_from(c).unwrap_or(i32::MAX))
                != *n
        })
    }

    /// One heartbeat, and when the next is due; what to do next when it ends the membership
    /// (a rebalance, the member or generation unknown, fenced, or no heartbeat for a session).
    async fn beat(&mut self, schedule: &mut Schedule) -> Option<Next> {
        let shared = self.shared.clone();
        let config = &shared.config;
        match self.heartbeat().await {
            Ok(()) => {
                schedule.failures = 0;
                schedule.last_heartbeat_ok = Instant::now();
                schedule.next_heartbeat = Instant::now() + config.heartbeat_interval;
            }
            Err(e) => match e.code() {
                Some(ErrorCode::RebalanceInProgress) => return Some(Next::Rejoin),
                Some(ErrorCode::UnknownMemberId) => {
                    self.lose_all(true);
                    return Some(Next::Rejoin);
                }
                Some(ErrorCode::IllegalGeneration) => {
                    self.lose_all(false);
                    return Some(Next::Rejoin);
                }
                Some(ErrorCode::FencedInstanceId) => {
                    self.lose_all(false);
                    self.shared.state().fatal = Some(ConsumeError::Group(e));
                    self.shared.records.notify_one();
                    while !closing(&self.shared) {
                        self.shared.group.notified().await;
                    }
                    return Some(Next::Close);
                }
                _ => {
                    self.shared.cluster.forget_coordinator(&self.group);
                    if schedule.last_heartbeat_ok.elapsed() > config.session_timeout {
                        self.lose_all(false);
                        return Some(Next::Rejoin);
                    }
                    let net = &config.net;
                    schedule.next_heartbeat = Instant::now()
                        + backoff(net.retry_backoff, net.retry_backoff_max, schedule.failures);
                    schedule.failures += 1;
                }
            },
        }
        None
    }

    /// When the stable loop looks again: the next heartbeat, auto commit or metadata check
    /// due, or just past the poll timeout.
    fn wake_at(&self, schedule: &Schedule, last_poll: Instant) -> Instant {
        let config = &self.shared.config;
        let mut wake = schedule.next_heartbeat;
        if config.enable_auto_commit {
            wake = wake.min(schedule.next_commit);
        }
        if self.leader {
            wake = wake.min(schedule.next_metadata);
        }
        wake.min(last_poll + config.max_poll_interval + Duration::from_millis(1))
    }

    async fn heartbeat(&self) -> Result<(), CallError> {
        let (_, connection) = self.shared.cluster.coordinator(&self.group).await?;
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(self.generation)
            .with_member_id(text(&self.member_id))
            .with_group_instance_id(self.shared.config.group_instance_id.as_deref().map(text));
        let response = connection.call(&request, 4).await?;
        crate::error::check(response.error_code, ApiKey::Heartbeat, || {
            format!("group {}", self.group)
        })
    }

    /// LeaveGroup (best effort), then forget the membership.
    pub(super) async fn leave(&mut self) {
        if !self.member_id.is_empty() {
            let member_id = self.member_id.clone();
            let instance_id = self.shared.config.group_instance_id.clone();
            if let Ok((_, connection)) = self.shared.cluster.coordinator(&self.group).await {
                let version = connection.version::<LeaveGroupRequest>(4).unwrap_or(0);
                // v0-2 name one member; v3+ (KIP-345) a list, with the instance id.
                let request =
                    LeaveGroupRequest::default().with_group_id(GroupId(text(&self.group)));
                let request = if version >= 3 {
                    request.with_members(vec![MemberIdentity::default()
                        .with_member_id(text(&member_id))
                        .with_group_instance_id(instance_id.as_deref().map(text))])
                } else {
                    request.with_member_id(text(&member_id))
                };
                match connection.call_at(&request, version).await {
                    Ok(r) if r.error_code == 0 => {
                        tracing::debug!(group = %self.group, %member_id, "left the group")
                    }
                    Ok(r) => {
                        tracing::debug!(group = %self.group, code = r.error_code, "LeaveGroup refused")
                    }
                    Err(e) => tracing::debug!(group = %self.group, error = %e, "LeaveGroup failed"),
                }
            }
        }
        self.generation = -1;
        self.member_id.clear();
        self.set_rebalancing(true);
    }

    /// On close: commit (auto commit: everything handed out), revoke, leave (dynamic members
    /// only: a static member keeps its place until its session times out, as in Kafka).
    pub(super) async fn close(&mut self) {
        if self.generation >= 0 {
            if self.shared.config.enable_auto_commit {
                let offsets = self.shared.state().commit_offsets(true);
                let _ = self.shared.commit(offsets).await;
            }
            let owned = self.owned();
            if !owned.is_empty() {
                if let Some(l) = &self.listener {
                    l.on_partitions_revoked(&owned);
                }
                self.shared.state().remove_partitions(&owned);
            }
        }
        if self.shared.config.group_instance_id.is_none() {
            self.leave().await;
        }
    }
}
