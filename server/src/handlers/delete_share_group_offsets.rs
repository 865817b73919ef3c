//! DeleteShareGroupOffsets, version 0: forgets a share group's state for whole topics (the
//! group starts again from `share.auto.offset.reset` there). Only for a group without members
//! (NON_EMPTY_GROUP otherwise). Authorization, as Kafka: DELETE on the group (else
//! GROUP_AUTHORIZATION_FAILED) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse};

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::shares::Pending;
use crate::shares::Shares;

impl Handler for DeleteShareGroupOffsetsRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = (Arc<Storage>, Arc<Shares>);

    fn counts(&self) -> Counts {
        Counts {
            topics: self.topics.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, shares): Self::Needs,
        request: DeleteShareGroupOffsetsRequest,
        ctx: &RequestContext,
    ) -> DeleteShareGroupOffsetsResponse {
        let group = request.group_id.to_string();
        if !ctx.authorize_group(Operation::Delete, &group) {
            return DeleteShareGroupOffsetsResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        if !shares.groups().contains(&group) {
            return DeleteShareGroupOffsetsResponse::default()
                .with_error_code(ResponseError::GroupIdNotFound.code());
        }
        if shares
            .members
            .describe(&group)
            .is_some_and(|(_, m)| !m.is_empty())
        {
            return DeleteShareGroupOffsetsResponse::default()
                .with_error_code(ResponseError::NonEmptyGroup.code());
        }
        let mut pending = Pending::default();
        let responses = request
            .topics
            .into_iter()
            .map(|t| {
                let response = DeleteShareGroupOffsetsResponseTopic::default();
                if !ctx.authorize_topic(Operation::Read, &t.topic_name) {
                    return response
                        .with_topic_name(t.topic_name)
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                }
                match storage.log.topic(&t.topic_name) {
                    Some(topic) => {
                        shares.delete_offsets(&group, topic.id(), &mut pending);
                        response
                            .with_topic_id(topic.id())
                            .with_topic_name(t.topic_name)
                    }
                    None => response
                        .with_topic_name(t.topic_name)
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                }
            })
            .collect();
        pending.durable(&storage.syncer).await;
        DeleteShareGroupOffsetsResponse::default().with_responses(responses)
    }

    fn throttle_time_ms(response: &mut DeleteShareGroupOffsetsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DeleteShareGroupOffsetsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.responses.iter().for_each(|t| f(t.error_code));
    }
}
