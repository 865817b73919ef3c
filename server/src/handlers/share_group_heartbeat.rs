//! ShareGroupHeartbeat, version 1 (KIP-932): joins (member epoch 0, a member id the client
//! generated), stays in (the member's current epoch) or leaves (-1) a share group. On one broker
//! every member is assigned every partition of the topics it subscribes to; the assignment is
//! sent on joining and whenever it changes (a new subscription, a topic created or grown).
//! Leaving releases the records the member holds. Authorization, as Kafka: READ on the group
//! (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic (else
//! TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::config::BrokerConfig;
use crate::shares::Shares;
use crate::shares::{ShareBeat, TopicPartition};

impl Handler for ShareGroupHeartbeatRequest {
    const SERVED: (i16, i16) = (1, 1);
    type Needs = (Arc<BrokerConfig>, Arc<Storage>, Arc<Shares>);

    async fn handle(
        (broker_config, storage, shares): Self::Needs,
        request: ShareGroupHeartbeatRequest,
        ctx: &RequestContext,
    ) -> ShareGroupHeartbeatResponse {
        let group = request.group_id.to_string();
        let member = request.member_id.to_string();
        let denied = |error: ResponseError| {
            ShareGroupHeartbeatResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(error.to_string())))
        };
        if !ctx.authorize_group(Operation::Read, &group) {
            return denied(ResponseError::GroupAuthorizationFailed);
        }
        if request
            .subscribed_topic_names
            .iter()
            .flatten()
            .any(|topic| !ctx.authorize_topic(Operation::Describe, topic))
        {
            return denied(ResponseError::TopicAuthorizationFailed);
        }
        let config = shares.config(&group);
        let subscriptions = request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.to_string()).collect());
        let host = format!("/{}", ctx.peer.ip());
        let beat = ShareBeat {
            group_id: &group,
            member_id: &member,
            member_epoch: request.member_epoch,
            subscriptions,
            client_id: &ctx.client_id,
            client_host: &host,
        };
        let answer = shares.members.heartbeat(
            beat,
            log_core::now_ms(),
            broker_config.share_group_max_size,
            |topic| partitions_of(&storage, topic),
        );
        let response = ShareGroupHeartbeatResponse::default().with_heartbeat_interval_ms(
            i32::try_from(config.heartbeat_interval_ms).unwrap_or(i32::MAX),
        );
        let heartbeat = match answer {
            Ok(heartbeat) => heartbeat,
            Err(error) => {
                return response
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(error.to_string())))
            }
        };
        if request.member_epoch == -1 {
            if let Ok(pending) =
                super::share_fetch::release_member(&storage, &shares, &group, &member).await
            {
                pending.durable(&storage.syncer).await;
            }
        }
        let assignment = heartbeat.assignment.map(|partitions| {
            Assignment::default().with_topic_partitions(
                super::assignment::by_topic(&partitions)
                    .into_iter()
                    .map(|(topic_id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(topic_id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
        });

        response
            .with_member_id(Some(StrBytes::from_string(member)))
            .with_member_epoch(heartbeat.member_epoch)
            .with_assignment(assignment)
    }

    fn throttle_time_ms(response: &mut ShareGroupHeartbeatResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ShareGroupHeartbeatResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

/// A topic's partitions by topic id; none if it does not exist (a subscription may name a topic
/// before it is created: its partitions are assigned once it is).
pub fn partitions_of(storage: &Arc<Storage>, topic: &str) -> Vec<TopicPartition> {
    storage.log.topic(topic).map_or_else(Vec::new, |t| {
        (0..t.partitions().len())
            .filter_map(|p| Some((t.id(), i32::try_from(p).ok()?)))
            .collect()
    })
}
