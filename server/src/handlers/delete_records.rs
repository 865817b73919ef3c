//! DeleteRecords, versions 0–2 (`kafka-delete-records`): each partition's log start offset
//! moves up to the offset asked for (-1: the high watermark), durably (see
//! `Partition::delete_records_before`); fetches below it get OFFSET_OUT_OF_RANGE and whole
//! segments below it are deleted. The answer's low watermark is the new log start offset.
//!
//! As Kafka: an offset past the high watermark, or negative other than -1, is
//! OFFSET_OUT_OF_RANGE; an offset below the log start changes nothing; an unknown topic or
//! partition is UNKNOWN_TOPIC_OR_PARTITION (low watermark -1). Deviation: internal topics
//! are lograil's own (POLICY_VIOLATION). The work is done on the blocking pool; `timeout_ms`
//! is not waited on, there being no replicas to wait for. Authorization: DELETE on each
//! topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use log_core::DeleteRecordsError;

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;

impl Handler for DeleteRecordsRequest {
    const SERVED: (i16, i16) = (0, 2);
    type Needs = Arc<Storage>;

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partitions.len())
    }

    async fn handle(
        storage: Self::Needs,
        request: DeleteRecordsRequest,
        ctx: &RequestContext,
    ) -> DeleteRecordsResponse {
        let (owner, ctx) = (storage.clone(), ctx.clone());
        let topics = crate::blocking::map_each(
            request.topics,
            move |topic| {
                let allowed = ctx.authorize_topic(Operation::Delete, &topic.name);
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        let result = DeleteRecordsPartitionResult::default()
                            .with_partition_index(p.partition_index)
                            .with_low_watermark(-1);
                        if !allowed {
                            let denied = ResponseError::TopicAuthorizationFailed;
                            return result.with_error_code(denied.code());
                        }
                        match delete(&owner, &topic.name, p.partition_index, p.offset) {
                            Ok(low_watermark) => result.with_low_watermark(low_watermark),
                            Err(error) => result.with_error_code(error.code()),
                        }
                    })
                    .collect();
                DeleteRecordsTopicResult::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            },
            |topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        DeleteRecordsPartitionResult::default()
                            .with_partition_index(p.partition_index)
                            .with_low_watermark(-1)
                            .with_error_code(ResponseError::UnknownServerError.code())
                    })
                    .collect();
                DeleteRecordsTopicResult::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            },
        )
        .await;
        DeleteRecordsResponse::default().with_topics(topics)
    }

    fn throttle_time_ms(response: &mut DeleteRecordsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DeleteRecordsResponse, f: &mut dyn FnMut(i16)) {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code))
    }
}

fn delete(
    storage: &Arc<Storage>,
    topic: &str,
    index: i32,
    offset: i64,
) -> Result<i64, ResponseError> {
    if crate::broker::Storage::is_internal(topic) && storage.log.topic(topic).is_some() {
        return Err(ResponseError::PolicyViolation);
    }
    let partition = storage
        .partition(topic, index)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    match partition.delete_records_before(offset) {
        Ok(low_watermark) => Ok(low_watermark),
        Err(DeleteRecordsError::OffsetOutOfRange { .. }) => Err(ResponseError::OffsetOutOfRange),
        Err(DeleteRecordsError::Io(e)) => {
            tracing::error!(topic, partition = index, error = %e, "delete records failed");
            Err(ResponseError::KafkaStorageError)
        }
    }
}
