//! AlterShareGroupOffsets, version 0: sets the start offset of share partitions, as Kafka's
//! `kafka-share-groups --reset-offsets` does. Only for a group without members
//! (NON_EMPTY_GROUP otherwise); the partitions' states start afresh at the new offset, clamped
//! to the log. Authorization, as Kafka: READ on the group (else GROUP_AUTHORIZATION_FAILED) and
//! on each topic (else its partitions are TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::shares::Pending;
use crate::shares::Shares;

impl Handler for AlterShareGroupOffsetsRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = (Arc<Storage>, Arc<Shares>);

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partitions.len())
    }

    async fn handle(
        (storage, shares): Self::Needs,
        request: AlterShareGroupOffsetsRequest,
        ctx: &RequestContext,
    ) -> AlterShareGroupOffsetsResponse {
        let group = request.group_id.to_string();
        if !ctx.authorize_group(Operation::Read, &group) {
            return AlterShareGroupOffsetsResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        let readable: Vec<bool> = request
            .topics
            .iter()
            .map(|t| ctx.authorize_topic(Operation::Read, &t.topic_name))
            .collect();
        let members = shares.members.describe(&group).map_or(0, |(_, m)| m.len());
        if members > 0 {
            return AlterShareGroupOffsetsResponse::default()
                .with_error_code(ResponseError::NonEmptyGroup.code());
        }
        let (owner, owner_shares) = (storage.clone(), shares.clone());
        let altered = crate::blocking::spawn(move || {
            let mut pending = Pending::default();
            let responses: Vec<AlterShareGroupOffsetsResponseTopic> = request
                .topics
                .into_iter()
                .zip(readable)
                .map(|(t, readable)| {
                    let topic = owner.log.topic(&t.topic_name).filter(|_| readable);
                    let response = AlterShareGroupOffsetsResponseTopic::default()
                        .with_topic_id(topic.as_ref().map(|t| t.id()).unwrap_or_default())
                        .with_topic_name(t.topic_name);
                    let partitions = t
                        .partitions
                        .into_iter()
                        .map(|p| {
                            let done = AlterShareGroupOffsetsResponsePartition::default()
                                .with_partition_index(p.partition_index);
                            let found = topic.as_ref().and_then(|topic| {
                                let partition =
                                    topic.partition(u32::try_from(p.partition_index).ok()?)?;
                                Some((topic.id(), partition.clone()))
                            });
                            let Some((id, partition)) = found else {
                                let error = if readable {
                                    ResponseError::UnknownTopicOrPartition
                                } else {
                                    ResponseError::TopicAuthorizationFailed
                                };
                                return done.with_error_code(error.code());
                            };
                            let start = p
                                .start_offset
                                .clamp(partition.log_start_offset(), partition.log_end_offset());
                            let key = task_queue::ShareKey::new(&group, id, p.partition_index);
                            match owner_shares.alter_offset(&key, start, &mut pending) {
                                Ok(()) => done,
                                Err(error) => done.with_error_code(error.code()),
                            }
                        })
                        .collect();
                    response.with_partitions(partitions)
                })
                .collect();
            (responses, pending)
        })
        .await;
        let (responses, pending) = match altered {
            Ok(altered) => altered,
            Err(e) => {
                tracing::error!(error = %e, "AlterShareGroupOffsets task failed");
                let failed = ResponseError::UnknownServerError;
                return AlterShareGroupOffsetsResponse::default()
                    .with_error_code(failed.code())
                    .with_error_message(Some(StrBytes::from_string(failed.to_string())));
            }
        };
        pending.durable(&storage.syncer).await;
        AlterShareGroupOffsetsResponse::default().with_responses(responses)
    }

    fn throttle_time_ms(response: &mut AlterShareGroupOffsetsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &AlterShareGroupOffsetsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.responses
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code));
    }
}
