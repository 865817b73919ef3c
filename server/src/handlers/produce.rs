//! Produce, versions 3–9 served (0–2 are advertised and refused: `produce_legacy`). acks 0, 1
//! and -1; with -1 (and with 1: lograil has no replicas to wait for) the answer comes once the
//! batch is as durable as the topic's `flush.messages`/`flush.ms` policy asks. acks=0 gets no
//! response, as in Kafka. Idempotent producers are checked per (producer id, epoch, partition)
//! (`appender`); transactions are not supported (INVALID_REQUEST).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::AppendError;

use super::{errors, RequestContext};
use crate::appender::ProduceError;
use crate::broker::Broker;

/// Produce requests up to this size are appended on the async worker (see `handle`).
const INLINE_APPEND_BYTES: usize = 64 * 1024;

pub async fn handle(
    broker: &Arc<Broker>,
    request: ProduceRequest,
    _: &RequestContext,
) -> Option<ProduceResponse> {
    let acks = request.acks;
    let refuse = if request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !id.is_empty())
    {
        Some((
            ResponseError::InvalidRequest,
            "transactions are not supported",
        ))
    } else if !matches!(acks, -1..=1) {
        Some((
            ResponseError::InvalidRequiredAcks,
            "acks must be -1, 0 or 1",
        ))
    } else {
        None
    };
    let work: Vec<TopicWork> = request
        .topic_data
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_data
                .into_iter()
                .map(|p| (p.index, p.records))
                .collect();
            (t.name.to_string(), partitions)
        })
        .collect();
    let responses = match refuse {
        Some((error, message)) => work
            .into_iter()
            .map(|(topic, partitions)| {
                let results = partitions
                    .into_iter()
                    .map(|(index, _)| failure(index, error, message.to_string()))
                    .collect();
                (topic, results)
            })
            .collect(),
        None => {
            // A small append to the page cache is done in place: handing it to another thread
            // costs more than the write. One that waits for an fsync, or is large enough to
            // stall on the page cache, goes to the blocking pool, off the async workers.
            let bytes: usize = work
                .iter()
                .flat_map(|(_, partitions)| partitions.iter())
                .map(|(_, records)| records.as_ref().map_or(0, Bytes::len))
                .sum();
            let waits = bytes > INLINE_APPEND_BYTES
                || work.iter().any(|(topic, partitions)| {
                    partitions.iter().any(|(index, _)| {
                        broker
                            .partition(topic, *index)
                            .is_some_and(|p| p.waits_for_fsync())
                    })
                });
            if waits {
                let owner = broker.clone();
                match tokio::task::spawn_blocking(move || append_all(&owner, work)).await {
                    Ok(responses) => responses,
                    Err(e) => {
                        tracing::error!(error = %e, "produce task failed");
                        return None;
                    }
                }
            } else {
                append_all(broker, work)
            }
        }
    };
    broker.appended.notify_waiters();
    if acks == 0 {
        return None;
    }
    let responses = responses
        .into_iter()
        .map(|(topic, partitions)| {
            TopicProduceResponse::default()
                .with_name(StrBytes::from_string(topic).into())
                .with_partition_responses(partitions)
        })
        .collect();
    Some(ProduceResponse::default().with_responses(responses))
}

/// A topic and its partitions' record sets, as the request carried them.
type TopicWork = (String, Vec<(i32, Option<Bytes>)>);
type TopicResults = (String, Vec<PartitionProduceResponse>);

fn append_all(broker: &Broker, work: Vec<TopicWork>) -> Vec<TopicResults> {
    work.into_iter()
        .map(|(topic, partitions)| {
            let results = partitions
                .into_iter()
                .map(|(index, records)| append_one(broker, &topic, index, records))
                .collect();
            (topic, results)
        })
        .collect()
}

fn failure(index: i32, error: ResponseError, message: String) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

fn append_one(
    broker: &Broker,
    topic: &str,
    index: i32,
    records: Option<Bytes>,
) -> PartitionProduceResponse {
    match broker.append_records(topic, index, records) {
        Ok(info) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(info.base_offset)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(info.log_start_offset),
        Err(e) => {
            if let ProduceError::Append(e) = &e {
                if !matches!(e, AppendError::InvalidBatch(_)) {
                    tracing::warn!(topic, partition = index, error = %e, "append failed");
                }
            }
            failure(index, errors::produce(&e), e.to_string())
        }
    }
}
