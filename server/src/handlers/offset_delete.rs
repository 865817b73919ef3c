//! OffsetDelete, version 0: deletes a group's committed offsets for some partitions. Refused
//! (GROUP_SUBSCRIBED_TO_TOPIC) for topics that members of a live consumer group (classic or
//! consumer protocol) subscribe to.
//! Authorization: DELETE on the group (else GROUP_AUTHORIZATION_FAILED, top level) and READ on
//! each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).

use std::collections::HashSet;
use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::{errors, RequestContext};
use crate::broker::Groups;
use crate::groups::consumer::embedded;
use crate::groups::GroupState;

impl Handler for OffsetDeleteRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = Arc<Groups>;

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partitions.len())
    }

    async fn handle(
        groups: Self::Needs,
        request: OffsetDeleteRequest,
        ctx: &RequestContext,
    ) -> OffsetDeleteResponse {
        let group = request.group_id.to_string();
        if !ctx.authorize_group(Operation::Delete, &group) {
            return OffsetDeleteResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        let view = groups.classic.describe(&group);
        let consumer = groups.consumer.describe(&group);
        if view.is_none() && consumer.is_none() && !groups.offsets.has_offsets(&group) {
            return OffsetDeleteResponse::default()
                .with_error_code(ResponseError::GroupIdNotFound.code());
        }
        let subscribed: HashSet<String> = view
            .filter(|v| v.state != GroupState::Empty && v.protocol_type == "consumer")
            .map(|v| {
                v.members
                    .iter()
                    .flat_map(|m| {
                        embedded::subscription(&m.metadata)
                            .unwrap_or_default()
                            .topics
                    })
                    .collect()
            })
            .unwrap_or_default();
        // A consumer-protocol group's members name their topics themselves.
        let subscribed: HashSet<String> = consumer
            .into_iter()
            .flat_map(|g| g.members.into_values().flat_map(|m| m.topics))
            .chain(subscribed)
            .collect();
        let (owner, ctx) = (groups.clone(), ctx.clone());
        let topics = crate::blocking::map_each(
            request.topics,
            move |topic| {
                let name = topic.name.to_string();
                let readable = ctx.authorize_topic(Operation::Read, &name);
                let partitions = topic
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let code = if !readable {
                            ResponseError::TopicAuthorizationFailed.code()
                        } else if subscribed.contains(&name) {
                            ResponseError::GroupSubscribedToTopic.code()
                        } else {
                            match owner
                                .offsets
                                .delete(&group, Some(&[(name.clone(), p.partition_index)]))
                            {
                                Ok(_) => 0,
                                Err(e) => errors::offsets(&e).code(),
                            }
                        };
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code)
                    })
                    .collect();
                OffsetDeleteResponseTopic::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            },
            |topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(ResponseError::UnknownServerError.code())
                    })
                    .collect();
                OffsetDeleteResponseTopic::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            },
        )
        .await;
        OffsetDeleteResponse::default().with_topics(topics)
    }

    fn throttle_time_ms(response: &mut OffsetDeleteResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &OffsetDeleteResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code));
    }
}
