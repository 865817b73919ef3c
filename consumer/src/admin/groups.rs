//! Group calls: list every broker's groups, find a group's coordinator, describe a group
//! (classic, or KIP-848 consumer-protocol), set a group's configs.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Buf;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

use super::{Admin, AdminError, GroupDescription, MemberDescription};
use crate::error::{check, CallError, ErrorCode};
use crate::offsets;
use crate::util::text;

impl Admin {
    /// Sets group configs (IncrementalAlterConfigs on the group; Kafka's share-group configs
    /// such as `share.auto.offset.reset`, `share.record.lock.duration.ms`,
    /// `share.delivery.count.limit` and, with Kafka 4.4's share.version=2, KIP-1191's
    /// `errors.deadletterqueue.topic.name` and `errors.deadletterqueue.copy.record.enable`).
    pub async fn alter_group_configs(
        &mut self,
        group: &str,
        configs: &[(&str, &str)],
    ) -> Result<(), AdminError> {
        use kafka_protocol::messages::incremental_alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        const GROUP: i8 = 32;
        const SET: i8 = 0;
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(GROUP)
                .with_resource_name(text(group))
                .with_configs(
                    configs
                        .iter()
                        .map(|(name, value)| {
                            AlterableConfig::default()
                                .with_name(text(name))
                                .with_config_operation(SET)
                                .with_value(Some(text(value)))
                        })
                        .collect(),
                ),
        ]);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 1).await?;
        let code = response.responses.first().map_or(0, |r| r.error_code);
        Ok(check(code, ApiKey::IncrementalAlterConfigs, || {
            format!("group {group}")
        })?)
    }

    /// (group id, state, protocol type, group type: `Classic`, `Consumer` for KIP-848
    /// consumer-protocol groups, `Share`) of every group, from every broker (each lists the
    /// groups it coordinates; ListGroups v5, Kafka 3.8 and later).
    pub async fn list_groups(
        &mut self,
    ) -> Result<Vec<(String, String, String, String)>, AdminError> {
        let (metadata, _) = self.cluster.fetch_metadata(Some(Vec::new()), false).await?;
        let mut brokers: Vec<i32> = metadata.brokers.keys().copied().collect();
        brokers.sort_unstable();
        let mut out = BTreeMap::new();
        for broker in brokers {
            let connection = self.cluster.connection(broker).await?;
            let response = connection.call(&ListGroupsRequest::default(), 5).await?;
            check(response.error_code, ApiKey::ListGroups, || {
                format!("broker {broker}")
            })?;
            for g in response.groups {
                out.insert(
                    g.group_id.to_string(),
                    (
                        g.group_state.to_string(),
                        g.protocol_type.to_string(),
                        group_type_name(&g.group_type),
                    ),
                );
            }
        }
        Ok(out
            .into_iter()
            .map(|(id, (state, kind, group_type))| (id, state, kind, group_type))
            .collect())
    }

    /// The broker (node id) coordinating `group` (FindCoordinator).
    pub async fn group_coordinator(&mut self, group: &str) -> Result<i32, AdminError> {
        self.cluster.forget_coordinator(group);
        let deadline = Self::deadline();
        let mut attempt = 0;
        loop {
            match self.cluster.coordinator(group).await {
                Ok((node, _)) => return Ok(node),
                Err(e) => {
                    let pause = crate::util::backoff(
                        self.cluster.net.retry_backoff,
                        self.cluster.net.retry_backoff_max,
                        attempt,
                    );
                    attempt += 1;
                    if !e.is_retriable() || Instant::now() + pause >= deadline {
                        return Err(e.into());
                    }
                    self.cluster.forget_coordinator(group);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// A group's state and members (DescribeGroups to its coordinator, retried while the
    /// coordinator moves, for up to 60 s; a group DescribeGroups calls Dead is asked again with
    /// ConsumerGroupDescribe, which describes KIP-848 consumer-protocol groups).
    pub async fn describe_group(&mut self, group: &str) -> Result<GroupDescription, AdminError> {
        let classic = self.describe_classic_group(group).await?;
        if classic.state != "Dead" {
            return Ok(classic);
        }
        Ok(self
            .describe_consumer_group(group)
            .await?
            .unwrap_or(classic))
    }

    /// A KIP-848 consumer-protocol group (ConsumerGroupDescribe); `None` if it is not one.
    async fn describe_consumer_group(
        &mut self,
        group: &str,
    ) -> Result<Option<GroupDescription>, AdminError> {
        let request =
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
        let node = self.group_coordinator(group).await?;
        let connection = self.cluster.connection(node).await?;
        let Ok(response) = connection.call(&request, 0).await else {
            // A broker without the API has no such group.
            return Ok(None);
        };
        let Some(described) = response.groups.into_iter().next() else {
            return Ok(None);
        };
        if described.error_code == ErrorCode::GroupIdNotFound.code() {
            return Ok(None);
        }
        check(described.error_code, ApiKey::ConsumerGroupDescribe, || {
            format!("group {group}")
        })?;
        Ok(Some(GroupDescription {
            group_id: group.to_string(),
            state: described.group_state.to_string(),
            protocol_type: "consumer".to_string(),
            protocol: described.assignor_name.to_string(),
            group_type: "Consumer".to_string(),
            members: described
                .members
                .into_iter()
                .map(|m| MemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: m.instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: m
                        .assignment
                        .topic_partitions
                        .into_iter()
                        .map(|t| (t.topic_name.to_string(), t.partitions))
                        .collect(),
                })
                .collect(),
        }))
    }

    async fn describe_classic_group(
        &mut self,
        group: &str,
    ) -> Result<GroupDescription, AdminError> {
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let described = offsets::with_coordinator(&self.cluster, group, Self::deadline(), |c| {
            let request = &request;
            async move {
                let response = c.call(request, 5).await?;
                let described = response.groups.into_iter().next().ok_or_else(|| {
                    CallError::broker(
                        ApiKey::DescribeGroups,
                        format!("group {group}"),
                        ErrorCode::UnknownServerError,
                    )
                })?;
                check(described.error_code, ApiKey::DescribeGroups, || {
                    format!("group {group}")
                })?;
                Ok(described)
            }
        })
        .await?;
        let consumer = described.protocol_type.as_str() == "consumer";
        Ok(GroupDescription {
            group_id: group.to_string(),
            state: described.group_state.to_string(),
            protocol_type: described.protocol_type.to_string(),
            protocol: described.protocol_data.to_string(),
            group_type: "Classic".to_string(),
            members: described
                .members
                .into_iter()
                .map(|m| MemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: if consumer {
                        decode_assignment(&m.member_assignment)
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        })
    }
}

/// (topic, partitions) from a consumer-protocol assignment; empty if it does not decode.
fn decode_assignment(bytes: &[u8]) -> Vec<(String, Vec<i32>)> {
    let mut buf = bytes;
    if buf.remaining() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    ConsumerProtocolAssignment::decode(&mut buf, version)
        .map(|a| {
            a.assigned_partitions
                .into_iter()
                .map(|t| (t.topic.to_string(), t.partitions))
                .collect()
        })
        .unwrap_or_default()
}

/// A group type as Kafka's admin client names it (`GroupType.parse`: the broker sends
/// `classic`, `consumer`, `share` or `streams`); another is kept as sent.
fn group_type_name(sent: &str) -> String {
    ["Classic", "Consumer", "Share", "Streams"]
        .into_iter()
        .find(|name| name.eq_ignore_ascii_case(sent))
        .map_or_else(|| sent.to_string(), str::to_string)
}
