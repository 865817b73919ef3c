//! ShareAcknowledge, versions 1–2 (KIP-932): acknowledgements outside a fetch, within the
//! member's share session (its current epoch; -1 acknowledges, then closes the session and
//! releases what the member still holds). Accept, release, reject and gap per offset range,
//! validated all-or-nothing per partition (INVALID_RECORD_STATE for a record the member does
//! not hold). Applied state is durable before the answer. Authorization: READ on the group
//! (else GROUP_AUTHORIZATION_FAILED, top level) and on each topic (else its partitions are
//! TOPIC_AUTHORIZATION_FAILED, their acknowledgements not applied).

use std::collections::BTreeMap;
use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::{topics_and_partitions, Counts};
use super::share_fetch::{ack_batches, acknowledge, readable, release_member, AckResults, Acks};
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::config::BrokerConfig;
use crate::shares::SessionUpdate;
use crate::shares::Shares;

impl Handler for ShareAcknowledgeRequest {
    const SERVED: (i16, i16) = (1, 2);
    type Needs = (Arc<BrokerConfig>, Arc<Storage>, Arc<Shares>);

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partitions.len())
    }

    async fn handle(
        (broker_config, storage, shares): Self::Needs,
        request: ShareAcknowledgeRequest,
        ctx: &RequestContext,
    ) -> ShareAcknowledgeResponse {
        let group = request
            .group_id
            .as_ref()
            .map(|g| g.to_string())
            .unwrap_or_default();
        let member = request.member_id.as_deref().unwrap_or_default().to_string();
        let epoch = request.share_session_epoch;
        let lock_ms = shares.config(&group).lock_duration_ms;
        let response = ShareAcknowledgeResponse::default()
            .with_acquisition_lock_timeout_ms(i32::try_from(lock_ms).unwrap_or(i32::MAX))
            .with_node_endpoints(vec![NodeEndpoint::default()
                .with_node_id(BrokerId(broker_config.node_id))
                .with_host(StrBytes::from_string(ctx.listener.host.clone()))
                .with_port(ctx.listener.port)]);
        let fail = |error: ResponseError| {
            response
                .clone()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(error.to_string())))
        };
        if !ctx.authorize_group(Operation::Read, &group) {
            return fail(ResponseError::GroupAuthorizationFailed);
        }
        let update = SessionUpdate {
            epoch,
            add: &[],
            forget: &[],
        };
        if let Err(error) = shares
            .members
            .session(&group, &member, update, false, Some(ctx.peer))
        {
            return fail(error);
        }
        let acks = acks(&request);
        let (acks, refused): (Acks, Acks) = acks
            .into_iter()
            .partition(|((topic, _), _)| readable(&storage, ctx, *topic));
        let Ok((mut results, mut pending)) =
            acknowledge(&storage, &shares, &group, &member, acks).await
        else {
            return fail(ResponseError::UnknownServerError);
        };
        let denied = || Err(ResponseError::TopicAuthorizationFailed);
        results.extend(refused.into_iter().map(|(tp, _)| (tp, denied())));
        if epoch == -1 {
            let Ok(released) = release_member(&storage, &shares, &group, &member).await else {
                return fail(ResponseError::UnknownServerError);
            };
            pending.0.extend(released.0);
        }
        pending.durable(&storage.syncer).await;
        response.with_responses(answer(&broker_config, results))
    }

    fn throttle_time_ms(response: &mut ShareAcknowledgeResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ShareAcknowledgeResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.responses
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code));
    }
}

/// Each partition's acknowledgement batches, or why they could not be read.
fn acks(request: &ShareAcknowledgeRequest) -> Acks {
    request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let batches = ack_batches(&p.acknowledgement_batches, request.is_renew_ack);
                ((t.topic_id, p.partition_index), batches)
            })
        })
        .collect()
}

/// The response's topics: each partition acknowledged, with its error if any.
fn answer(broker_config: &BrokerConfig, results: AckResults) -> Vec<ShareAcknowledgeTopicResponse> {
    let leader = LeaderIdAndEpoch::default()
        .with_leader_id(broker_config.node_id)
        .with_leader_epoch(0);
    let mut topics: BTreeMap<log_core::Uuid, Vec<PartitionData>> = BTreeMap::new();
    for ((topic, index), result) in results {
        let mut data = PartitionData::default()
            .with_partition_index(index)
            .with_current_leader(leader.clone());
        if let Err(error) = result {
            data = data
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(error.to_string())));
        }
        topics.entry(topic).or_default().push(data);
    }
    topics
        .into_iter()
        .map(|(topic_id, partitions)| {
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
        })
        .collect()
}
