//! Group membership under the classic protocol, in a background task: find the coordinator,
//! JoinGroup (with KIP-394's member-id round trip and KIP-345 static membership), SyncGroup
//! (the leader runs the assignor), heartbeats, auto commit, LeaveGroup on close.
//!
//! The rebalance protocol follows the assignors, as in the Java client: cooperative when every
//! configured assignor is cooperative-sticky (partitions are revoked only when they move, in a
//! second round), eager otherwise (everything is revoked before joining).

pub(crate) mod assignor;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};

use crate::config::AssignorKind;
use crate::consumer::{ConsumeError, Shared};
use crate::error::{CallError, ErrorCode};
use crate::util::{backoff, text};
use crate::TopicPartition;

/// How long the leader waits for a subscribed topic the metadata does not show yet before it
/// assigns without it (`Member::assign`).
const MISSING_TOPIC_WAIT: Duration = Duration::from_secs(3);

/// Told about partitions as the group moves them. Called from the group task: keep it short
/// and do not block (hand work to another task if needed).
///
/// With `enable.auto.commit`, the offsets of processed records are committed before
/// `on_partitions_revoked` is called.
pub trait RebalanceListener: Send + Sync + std::fmt::Debug {
    /// Partitions newly assigned (their position is the committed offset, or
    /// `auto.offset.reset`).
    fn on_partitions_assigned(&self, _partitions: &[TopicPartition]) {}
    /// Partitions given up in an orderly rebalance (or on close).
    fn on_partitions_revoked(&self, _partitions: &[TopicPartition]) {}
    /// Partitions lost: the member was dropped from the group (session timeout, fenced
    /// generation) and others may already own them; nothing could be committed.
    fn on_partitions_lost(&self, partitions: &[TopicPartition]) {
        self.on_partitions_revoked(partitions);
    }
}

/// Why the stable phase ended.
enum Next {
    Rejoin,
    Close,
}

/// A failure of one join attempt.
enum JoinFailure {
    /// Try again after a backoff.
    Retry(CallError),
    /// The group will not take this member.
    Fatal(CallError),
}

struct Member {
    shared: Arc<Shared>,
    listener: Option<Arc<dyn RebalanceListener>>,
    group: String,
    member_id: String,
    generation: i32,
    cooperative: bool,
    leader: bool,
    /// Topics and partition counts the leader assigned from (a change means rebalance).
    assigned_from: BTreeMap<String, i32>,
    joined_subscription: BTreeSet<String>,
    attempts: u32,
}

pub(crate) async fn run(shared: Arc<Shared>, listener: Option<Arc<dyn RebalanceListener>>) {
    let Some(group) = shared.config.group_id.clone() else {
        return;
    };
    let cooperative = shared
        .config
        .assignors
        .iter()
        .all(|a| *a == AssignorKind::CooperativeSticky);
    let mut member = Member {
        shared,
        listener,
        group,
        member_id: String::new(),
        generation: -1,
        cooperative,
        leader: false,
        assigned_from: BTreeMap::new(),
        joined_subscription: BTreeSet::new(),
        attempts: 0,
    };
    member.run().await;
}

fn closing(shared: &Shared) -> bool {
    shared.closing.load(Ordering::Acquire)
}

/// Returns once the consumer is closing.
async fn wait_closing(shared: &Shared) {
    loop {
        let notified = shared.group.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if closing(shared) {
            return;
        }
        notified.await;
    }
}

impl Member {
    fn subscription(&self) -> BTreeSet<String> {
        self.shared.state().subscription.clone()
    }

    fn owned(&self) -> Vec<TopicPartition> {
        self.shared.state().partitions.keys().cloned().collect()
    }

    async fn run(&mut self) {
        let shared = self.shared.clone();
        loop {
            if closing(&self.shared) {
                self.close().await;
                return;
            }
            let notified = shared.group.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let waiting_for_poll = self.shared.state().left_for_poll_timeout;
            let subscription = self.subscription();
            if subscription.is_empty() || waiting_for_poll {
                if waiting_for_poll
                    && self.shared.last_poll().elapsed() < self.shared.config.max_poll_interval
                {
                    self.shared.state().left_for_poll_timeout = false;
                    continue;
                }
                if !subscription.is_empty() || self.generation < 0 {
                    notified.await;
                    continue;
                }
                // Unsubscribed: give everything back and leave.
                self.revoke_all().await;
                self.leave().await;
                continue;
            }
            let outcome = tokio::select! {
                r = self.join(&subscription) => Some(r),
                () = wait_closing(&shared) => None,
            };
            let Some(outcome) = outcome else {
                self.close().await;
                return;
            };
            match outcome {
                Ok(again) => {
                    self.attempts = 0;
                    if again {
                        continue;
                    }
                }
                Err(JoinFailure::Fatal(e)) => {
                    self.shared.state().fatal = Some(ConsumeError::Group(e));
                    self.shared.records.notify_one();
                    // Nothing more to do until close.
                    while !closing(&self.shared) {
                        self.shared.group.notified().await;
                    }
                    continue;
                }
                Err(JoinFailure::Retry(e)) => {
                    tracing::debug!(group = %self.group, error = %e, "rebalance failed; retrying");
                    let net = &self.shared.config.net;
                    let pause = backoff(net.retry_backoff, net.retry_backoff_max, self.attempts);
                    self.attempts += 1;
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.shared.group.notified() => {}
                    }
                    continue;
                }
            }
            match self.stable().await {
                Next::Rejoin => continue,
                Next::Close => {
                    self.close().await;
                    return;
                }
            }
        }
    }

    fn set_rebalancing(&self, on: bool) {
        let mut st = self.shared.state();
        st.membership.rebalancing = on;
        st.membership.generation = if on { -1 } else { self.generation };
        st.membership.member_id = self.member_id.clone();
    }

    /// Commits processed offsets (auto commit only), then gives `partitions` back.
    async fn revoke(&mut self, partitions: &[TopicPartition]) {
        if partitions.is_empty() {
            return;
        }
        if self.shared.config.enable_auto_commit && self.generation >= 0 {
            let offsets: BTreeMap<TopicPartition, i64> = self
                .shared
                .state()
                .commit_offsets(false)
                .into_iter()
                .filter(|(tp, _)| partitions.contains(tp))
                .collect();
            let _ = self.shared.commit(offsets).await;
        }
        if let Some(l) = &self.listener {
            l.on_partitions_revoked(partitions);
        }
        self.shared.state().remove_partitions(partitions);
        self.shared.fetcher.notify_one();
    }

    async fn revoke_all(&mut self) {
        let owned = self.owned();
        self.revoke(&owned).await;
    }

    /// The generation is gone: partitions are lost, nothing is committed.
    fn lose_all(&mut self, reset_member: bool) {
        let owned = self.owned();
        if !owned.is_empty() {
            if let Some(l) = &self.listener {
                l.on_partitions_lost(&owned);
            }
            self.shared.state().remove_partitions(&owned);
        }
        self.generation = -1;
        if reset_member {
            self.member_id.clear();
        }
        self.set_rebalancing(true);
    }

    /// One rebalance: JoinGroup, the assignment if leader, SyncGroup, then the new partitions.
    /// `Ok(true)`: rejoin at once (cooperative partitions were revoked).
    async fn join(&mut self, subscription: &BTreeSet<String>) -> Result<bool, JoinFailure> {
        let shared = self.shared.clone();
        let config = &shared.config;
        if !self.cooperative {
            self.revoke_all().await;
        }
        self.set_rebalancing(true);
        let (_, connection) = self
            .shared
            .cluster
            .coordinator(&self.group)
            .await
            .map_err(|e| self.coordinator_failure(e))?;
        let owned = if self.cooperative {
            self.owned()
        } else {
            Vec::new()
        };
        let metadata = assignor::encode_subscription(subscription, &owned, self.generation);
        let protocols = config
            .assignors
            .iter()
            .map(|a| {
                JoinGroupRequestProtocol::default()
                    .with_name(text(a.protocol_name()))
                    .with_metadata(metadata.clone())
            })
            .collect();
        let rebalance_timeout = config.max_poll_interval;
        let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
        let mut request = JoinGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_session_timeout_ms(millis(config.session_timeout))
            .with_rebalance_timeout_ms(millis(rebalance_timeout))
            .with_member_id(text(&self.member_id))
            .with_group_instance_id(config.group_instance_id.as_deref().map(text))
            .with_protocol_type(text("consumer"))
            .with_protocols(protocols);
        let version = connection
            .version::<JoinGroupRequest>(7)
            .map_err(|e| JoinFailure::Fatal(e.into()))?;
        let wait = rebalance_timeout + config.net.request_timeout;
        let response = loop {
            let response = connection
                .call_with_timeout(&request, version, wait)
                .await
                .map_err(|e| self.coordinator_failure(e.into()))?;
            match ErrorCode::try_from_code(response.error_code) {
                None => break response,
                Some(ErrorCode::MemberIdRequired) => {
                    self.member_id = response.member_id.to_string();
                    request.member_id = response.member_id.clone();
                }
                Some(code) => {
                    let error =
                        CallError::broker(ApiKey::JoinGroup, format!("group {}", self.group), code);
                    return Err(self.join_error(code, error));
                }
            }
        };
        self.generation = response.generation_id;
        self.member_id = response.member_id.to_string();
        self.leader = response.leader == response.member_id;
        let protocol = response
            .protocol_name
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let kind = config
            .assignors
            .iter()
            .copied()
            .find(|a| a.protocol_name() == protocol)
            .unwrap_or(AssignorKind::Range);

        let assignments = if self.leader {
            self.assign(kind, &response.members).await
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(self.generation)
            .with_member_id(text(&self.member_id))
            .with_group_instance_id(config.group_instance_id.as_deref().map(text))
            .with_protocol_type(Some(text("consumer")))
            .with_protocol_name(Some(text(&protocol)))
            .with_assignments(assignments);
        let version = connection
            .version::<SyncGroupRequest>(5)
            .map_err(|e| JoinFailure::Fatal(e.into()))?;
        let synced = connection
            .call_with_timeout(&sync, version, wait)
            .await
            .map_err(|e| self.coordinator_failure(e.into()))?;
        if let Some(code) = ErrorCode::try_from_code(synced.error_code) {
            let error = CallError::broker(ApiKey::SyncGroup, format!("group {}", self.group), code);
            return Err(self.join_error(code, error));
        }
        let Some(assigned) = assignor::decode_assignment(&synced.assignment) else {
            return Err(JoinFailure::Retry(CallError::broker(
                ApiKey::SyncGroup,
                format!("group {}", self.group),
                ErrorCode::InconsistentGroupProtocol,
            )));
        };
        self.joined_subscription = subscription.clone();

        // Apply: revoke what went away, add what is new.
        let owned = self.owned();
        let revoked: Vec<TopicPartition> = owned
            .iter()
            .filter(|tp| !assigned.contains(tp))
            .cloned()
            .collect();
        let added: Vec<TopicPartition> = assigned
            .iter()
            .filter(|tp| !owned.contains(tp))
            .cloned()
            .collect();
        // Revocation commits under the new generation.
        self.set_rebalancing(false);
        self.revoke(&revoked).await;
        {
            let mut st = self.shared.state();
            st.add_partitions(&added);
        }
        self.shared
            .cluster
            .add_interest(added.iter().map(|tp| tp.topic.as_str()));
        if let Some(l) = &self.listener {
            l.on_partitions_assigned(&added);
        }
        self.shared.fetcher.notify_one();
        Ok(self.cooperative && !revoked.is_empty())
    }

    /// The leader's job: decode the members' subscriptions, learn partition counts, run the
    /// assignor.
    async fn assign(
        &mut self,
        kind: AssignorKind,
        members: &[kafka_protocol::messages::join_group_response::JoinGroupResponseMember],
    ) -> Vec<SyncGroupRequestAssignment> {
        let decoded: Vec<assignor::Member> = members
            .iter()
            .filter_map(|m| {
                assignor::decode_subscription(
                    m.member_id.as_str(),
                    m.group_instance_id.as_ref().map(|i| i.as_str()),
                    &m.metadata,
                )
            })
            .collect();
        let topics: BTreeSet<&str> = decoded
            .iter()
            .flat_map(|m| m.topics.iter().map(String::as_str))
            .collect();
        let cluster = &self.shared.cluster;
        cluster.add_interest(topics.iter().copied());
        let refresh = || async {
            let seen = cluster.metadata().version;
            match cluster.refresh(seen).await {
                Ok(m) => m,
                Err(_) => cluster.metadata(),
            }
        };
        let mut metadata = refresh().await;
        // A topic created just before the join may not have reached the broker that answered
        // yet (a cluster's brokers learn new topics from its controller): look again for a
        // while rather than assign without it and rebalance once it shows, which re-reads
        // what the members processed but had not committed yet.
        let missing_until = Instant::now() + MISSING_TOPIC_WAIT;
        while topics
            .iter()
            .any(|t| metadata.partition_count(t).unwrap_or(0) == 0)
            && Instant::now() < missing_until
        {
            tokio::time::sleep(self.shared.config.net.retry_backoff).await;
            metadata = refresh().await;
        }
        let counts: BTreeMap<String, i32> = topics
            .iter()
            .filter_map(|t| {
                metadata
                    .partition_count(t)
                    .map(|n| (t.to_string(), i32::try_from(n).unwrap_or(i32::MAX)))
            })
            .collect();
        self.assigned_from = topics
            .iter()
            .map(|t| (t.to_string(), counts.get(*t).copied().unwrap_or(0)))
            .collect();
        let assignment = assignor::assign(kind, &decoded, &counts);
        members
            .iter()
            .map(|m| {
                let partitions = assignment
                    .get(m.member_id.as_str())
                    .cloned()
                    .unwrap_or_default();
                SyncGroupRequestAssignment::default()
                    .with_member_id(m.member_id.clone())
                    .with_assignment(assignor::encode_assignment(&partitions))
            })
            .collect()
    }

    fn coordinator_failure(&self, e: CallError) -> JoinFailure {
        self.shared.cluster.forget_coordinator(&self.group);
        if e.is_retriable() {
            JoinFailure::Retry(e)
        } else {
            JoinFailure::Fatal(e)
        }
    }

    /// JoinGroup / SyncGroup error codes.
    fn join_error(&mut self, code: ErrorCode, error: CallError) -> JoinFailure {
        match code {
            ErrorCode::UnknownMemberId => {
                self.lose_all(true);
                JoinFailure::Retry(error)
            }
            ErrorCode::IllegalGeneration => {
                self.lose_all(false);
                JoinFailure::Retry(error)
            }
            ErrorCode::RebalanceInProgress => JoinFailure::Retry(error),
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress => {
                self.shared.cluster.forget_coordinator(&self.group);
                JoinFailure::Retry(error)
            }
            c if c.is_retriable() => JoinFailure::Retry(error),
            _ => JoinFailure::Fatal(error),
        }
    }

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
    async fn stable(&mut self) -> Next {
        let shared = self.shared.clone();
        let config = &shared.config;
        let mut next_heartbeat = Instant::now() + config.heartbeat_interval;
        let mut next_commit = Instant::now() + config.auto_commit_interval;
        let mut next_metadata = Instant::now() + self.metadata_check_interval();
        let mut last_heartbeat_ok = Instant::now();
        let mut failures = 0;
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
            if config.enable_auto_commit && now >= next_commit {
                next_commit = now + config.auto_commit_interval;
                let offsets = self.shared.state().commit_offsets(false);
                if let Err(crate::consumer::CommitError::Rebalanced(_)) =
                    self.shared.commit(offsets).await
                {
                    return Next::Rejoin;
                }
            }
            if self.leader && now >= next_metadata {
                next_metadata = now + self.metadata_check_interval();
                let seen = self.shared.cluster.metadata().version;
                if let Ok(m) = self.shared.cluster.refresh(seen).await {
                    let changed = self.assigned_from.iter().any(|(t, n)| {
                        m.partition_count(t)
                            .map_or(0, |c| i32::try_from(c).unwrap_or(i32::MAX))
                            != *n
                    });
                    if changed {
                        return Next::Rejoin;
                    }
                }
            }
            if now >= next_heartbeat {
                match self.heartbeat().await {
                    Ok(()) => {
                        failures = 0;
                        last_heartbeat_ok = Instant::now();
                        next_heartbeat = Instant::now() + config.heartbeat_interval;
                    }
                    Err(e) => match e.code() {
                        Some(ErrorCode::RebalanceInProgress) => return Next::Rejoin,
                        Some(ErrorCode::UnknownMemberId) => {
                            self.lose_all(true);
                            return Next::Rejoin;
                        }
                        Some(ErrorCode::IllegalGeneration) => {
                            self.lose_all(false);
                            return Next::Rejoin;
                        }
                        Some(ErrorCode::FencedInstanceId) => {
                            self.lose_all(false);
                            self.shared.state().fatal = Some(ConsumeError::Group(e));
                            self.shared.records.notify_one();
                            while !closing(&self.shared) {
                                self.shared.group.notified().await;
                            }
                            return Next::Close;
                        }
                        _ => {
                            self.shared.cluster.forget_coordinator(&self.group);
                            if last_heartbeat_ok.elapsed() > config.session_timeout {
                                self.lose_all(false);
                                return Next::Rejoin;
                            }
                            let net = &config.net;
                            next_heartbeat = Instant::now()
                                + backoff(net.retry_backoff, net.retry_backoff_max, failures);
                            failures += 1;
                        }
                    },
                }
            }
            let mut wake = next_heartbeat;
            if config.enable_auto_commit {
                wake = wake.min(next_commit);
            }
            if self.leader {
                wake = wake.min(next_metadata);
            }
            wake = wake.min(last_poll + config.max_poll_interval + Duration::from_millis(1));
            tokio::select! {
                () = tokio::time::sleep_until(wake.into()) => {}
                () = notified => {}
            }
        }
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
    async fn leave(&mut self) {
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
    async fn close(&mut self) {
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
