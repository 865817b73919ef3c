//! ListOffsets, versions 1–7: timestamp -2 is the log start, -1 the log end, -3 (v7, KIP-734)
//! the record with the largest timestamp, and any other value the first record whose timestamp
//! is at or after it (offset -1 when every record is older). With `isolation_level` 1
//! (read_committed, v2+) the end is the last stable offset, as in Kafka: LATEST is the LSO, and
//! a lookup by time finding an offset at or past it answers -1. A lookup by time reads (and may
//! decompress) batches: it runs on the blocking pool, so it cannot stall other requests. A
//! partition of an offline topic answers UNKNOWN_SERVER_ERROR (see `errors::OFFLINE_LIST_OFFSETS`).
//! Authorization: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions
//! (whether the topic exists or not).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use log_core::{Partition, ReadError};

use super::bounds::{topics_and_partitions, Counts};
use super::errors;
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;

const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
const MAX_TIMESTAMP: i64 = -3;

impl Handler for ListOffsetsRequest {
    const SERVED: (i16, i16) = (1, 7);
    type Needs = Arc<Storage>;

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partitions.len())
    }

    async fn handle(
        storage: Self::Needs,
        mut request: ListOffsetsRequest,
        ctx: &RequestContext,
    ) -> ListOffsetsResponse {
        let (topics, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| ctx.authorize_topic(Operation::Describe, &t.name));
        request.topics = topics;
        let denied = failed(
            ListOffsetsRequest::default().with_topics(denied),
            ResponseError::TopicAuthorizationFailed,
        );
        let by_time = request
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| !matches!(p.timestamp, EARLIEST | LATEST));
        let topics = if by_time {
            let (owner, asked) = (storage.clone(), request.clone());
            match crate::blocking::spawn(move || answer(&owner, asked)).await {
                Ok(topics) => topics,
                Err(e) => {
                    tracing::error!(error = %e, "offset lookup task failed");
                    failed(request, ResponseError::UnknownServerError)
                }
            }
        } else {
            answer(&storage, request)
        };
        ListOffsetsResponse::default().with_topics(topics.into_iter().chain(denied).collect())
    }

    fn throttle_time_ms(response: &mut ListOffsetsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ListOffsetsResponse, f: &mut dyn FnMut(i16)) {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code))
    }
}

fn answer(storage: &Arc<Storage>, request: ListOffsetsRequest) -> Vec<ListOffsetsTopicResponse> {
    let committed = request.isolation_level == READ_COMMITTED;
    request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_leader_epoch(-1);
                    let Some(partition) = storage.partition(&topic.name, p.partition_index) else {
                        let error = if storage.is_offline(&topic.name, p.partition_index) {
                            errors::OFFLINE_LIST_OFFSETS
                        } else {
                            ResponseError::UnknownTopicOrPartition
                        };
                        return response
                            .with_error_code(error.code())
                            .with_timestamp(-1)
                            .with_offset(-1);
                    };
                    match lookup(&partition, p.timestamp, committed) {
                        Ok((offset, timestamp)) => {
                            response.with_offset(offset).with_timestamp(timestamp)
                        }
                        Err(e) => response
                            .with_error_code(errors::read(&e).code())
                            .with_timestamp(-1)
                            .with_offset(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect()
}

/// Every partition of `request` answered with `error`.
fn failed(request: ListOffsetsRequest, error: ResponseError) -> Vec<ListOffsetsTopicResponse> {
    request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_leader_epoch(-1)
                        .with_error_code(error.code())
                        .with_timestamp(-1)
                        .with_offset(-1)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect()
}

/// `isolation_level` of a read_committed client.
const READ_COMMITTED: i8 = 1;

/// (offset, timestamp) for a ListOffsets timestamp; `committed`: what a read_committed reader
/// may see, up to the last stable offset.
fn lookup(partition: &Partition, timestamp: i64, committed: bool) -> Result<(i64, i64), ReadError> {
    let end = if committed {
        partition.last_stable_offset()
    } else {
        partition.log_end_offset()
    };
    let found = match timestamp {
        EARLIEST => return Ok((partition.log_start_offset(), -1)),
        LATEST => return Ok((end, -1)),
        MAX_TIMESTAMP => partition
            .max_timestamp()
            .map(|max| partition.offset_for_timestamp(max))
            .transpose()?
            .flatten(),
        t => partition.offset_for_timestamp(t)?,
    };
    Ok(found
        .filter(|(offset, _)| *offset < end)
        .unwrap_or((-1, -1)))
}
