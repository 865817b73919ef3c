//! ListOffsets, versions 1–11: timestamp -2 is the log start, -1 the log end, -3 (v7+, KIP-734)
//! the record with the largest timestamp, and any other value the first record whose timestamp
//! is at or after it (offset -1 when every record is older). With `isolation_level` 1
//! (read_committed, v2+) the end is the last stable offset, as in Kafka: LATEST is the LSO, and
//! a lookup by time finding an offset at or past it answers -1. A lookup by time reads (and may
//! decompress) batches: it runs on the blocking pool, so it cannot stall other requests. A
//! partition of an offline topic answers UNKNOWN_SERVER_ERROR (see `errors::OFFLINE_LIST_OFFSETS`).
//! The tiered-storage timestamps answer as Kafka answers them for a topic without remote
//! storage, which is every topic here: -4 (v8+, KIP-405's earliest local offset) the log start,
//! -5 (v9+, KIP-1005's latest tiered offset) and -6 (v11+, KIP-1023's earliest offset pending
//! upload) offset -1. v10's `timeout_ms` bounds reads from remote storage: there are none. A
//! negative timestamp the request's version does not know (-3 before v7, -4 before v8, -5
//! before v9, -6 before v11, or one no version knows) answers UNSUPPORTED_VERSION for its
//! partition, as Kafka's broker does.
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
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// The first version that knows `timestamp` (Kafka's `ListOffsetsRequest`); `None` for a
/// negative one that no version knows.
fn first_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        0.. | LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        EARLIEST_PENDING_UPLOAD => Some(11),
        _ => None,
    }
}

impl Handler for ListOffsetsRequest {
    const SERVED: (i16, i16) = (1, 11);
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
            .any(|p| p.timestamp >= 0 || p.timestamp == MAX_TIMESTAMP);
        let version = ctx.version;
        let topics = if by_time {
            let (owner, asked) = (storage.clone(), request.clone());
            match crate::blocking::spawn(move || answer(&owner, asked, version)).await {
                Ok(topics) => topics,
                Err(e) => {
                    tracing::error!(error = %e, "offset lookup task failed");
                    failed(request, ResponseError::UnknownServerError)
                }
            }
        } else {
            answer(&storage, request, version)
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

fn answer(
    storage: &Arc<Storage>,
    request: ListOffsetsRequest,
    version: i16,
) -> Vec<ListOffsetsTopicResponse> {
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
                    if first_version(p.timestamp).is_none_or(|first| version < first) {
                        return response
                            .with_error_code(ResponseError::UnsupportedVersion.code())
                            .with_timestamp(-1)
                            .with_offset(-1);
                    }
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
        EARLIEST | EARLIEST_LOCAL => return Ok((partition.log_start_offset(), -1)),
        LATEST => return Ok((end, -1)),
        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => return Ok((-1, -1)),
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
