//! One rebalance of the group member: JoinGroup (with the member-id round trip), the leader's
//! assignment, SyncGroup, then the partitions revoked and added.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, GroupId, JoinGroupRequest, JoinGroupResponse, SyncGroupRequest,
};

use super::assignor;
use super::{JoinFailure, Member};
use crate::config::AssignorKind;
use crate::connection::BrokerConnection;
use crate::error::{CallError, ErrorCode};
use crate::util::text;
use crate::TopicPartition;

/// How long the leader waits for a subscribed topic the metadata does not show yet before it
/// assigns without it (`Member::assign`).
const MISSING_TOPIC_WAIT: Duration = Duration::from_secs(3);

impl Member {
    /// One rebalance: JoinGroup, the assignment if leader, SyncGroup, then the new partitions.
    /// `Ok(true)`: rejoin at once (cooperative partitions were revoked).
    pub(super) async fn join(
        &mut self,
        subscription: &BTreeSet<String>,
    ) -> Result<bool, JoinFailure> {
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
        let response = self.join_group(&connection, subscription).await?;
        let (protocol, kind) = chosen_protocol(&self.shared.config.assignors, &response);
        let assignments = if self.leader {
            self.assign(kind, &response.members).await
        } else {
            Vec::new()
        };
        let assigned = self.sync_group(&connection, &protocol, assignments).await?;
        self.joined_subscription = subscription.clone();
        Ok(self.apply_assignment(&assigned).await)
    }

    /// JoinGroup (again with the member id the coordinator gives, if it asks for one); takes
    /// the generation, member id and leadership it answers.
    async fn join_group(
        &mut self,
        connection: &BrokerConnection,
        subscription: &BTreeSet<String>,
    ) -> Result<JoinGroupResponse, JoinFailure> {
        let shared = self.shared.clone();
        let config = &shared.config;
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
        let mut request = JoinGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_session_timeout_ms(millis(config.session_timeout))
            .with_rebalance_timeout_ms(millis(config.max_poll_interval))
            .with_member_id(text(&self.member_id))
            .with_group_instance_id(config.group_instance_id.as_deref().map(text))
            .with_protocol_type(text("consumer"))
            .with_protocols(protocols);
        let version = connection
            .version::<JoinGroupRequest>(7)
            .map_err(|e| JoinFailure::Fatal(e.into()))?;
        let response = loop {
            let response = connection
                .call_with_timeout(&request, version, self.rebalance_wait())
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
        Ok(response)
    }

    /// How long a JoinGroup or SyncGroup may take: the rebalance timeout and a request's.
    fn rebalance_wait(&self) -> Duration {
        let config = &self.shared.config;
        config.max_poll_interval + config.net.request_timeout
    }

    /// SyncGroup (with the leader's `assignments`): this member's partitions.
    async fn sync_group(
        &mut self,
        connection: &BrokerConnection,
        protocol: &str,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> Result<Vec<TopicPartition>, JoinFailure> {
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(self.generation)
            .with_member_id(text(&self.member_id))
            .with_group_instance_id(self.shared.config.group_instance_id.as_deref().map(text))
            .with_protocol_type(Some(text("consumer")))
            .with_protocol_name(Some(text(protocol)))
            .with_assignments(assignments);
        let version = connection
            .version::<SyncGroupRequest>(5)
            .map_err(|e| JoinFailure::Fatal(e.into()))?;
        let synced = connection
            .call_with_timeout(&sync, version, self.rebalance_wait())
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
        Ok(assigned)
    }

    /// Applies the new assignment: revokes what went away, adds what is new. True when
    /// cooperative partitions were revoked (rejoin at once).
    async fn apply_assignment(&mut self, assigned: &[TopicPartition]) -> bool {
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
        self.cooperative && !revoked.is_empty()
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
}

/// The protocol the coordinator chose, and its assignor (range if none of ours).
fn chosen_protocol(
    assignors: &[AssignorKind],
    response: &JoinGroupResponse,
) -> (String, AssignorKind) {
    let protocol = response
        .protocol_name
        .as_ref()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let kind = assignors
        .iter()
        .copied()
        .find(|a| a.protocol_name() == protocol)
        .unwrap_or(AssignorKind::Range);
    (protocol, kind)
}

/// A timeout in whole milliseconds, as the requests carry it.
fn millis(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
