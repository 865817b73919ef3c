//! Produce, versions 3–9 served; 0–2 advertised (older librdkafka turns compression off when
//! they are missing) and answered with UNSUPPORTED_VERSION. acks 0, 1 and -1; with -1 (and with
//! 1: lograil has no replicas to wait for) the answer comes once the batch is as durable as the
//! topic's `flush.messages`/`flush.ms` policy asks. acks=0 gets no response, as in Kafka.
//! Idempotent producers are checked per (producer id, epoch, partition); transactions are not
//! supported (INVALID_REQUEST).

use std::sync::{Arc, PoisonError};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::batch;

use super::RequestContext;
use super::{errors, malformed, RequestError};
use crate::broker::Broker;
use crate::producers::Verdict;

pub const MIN_VERSION: i16 = 3;
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
    if Broker::is_internal(topic) {
        return failure(
            index,
            ResponseError::InvalidTopicException,
            format!("{topic} is internal to the broker"),
        );
    }
    let Some(partition) = broker.partition(topic, index) else {
        return failure(
            index,
            ResponseError::UnknownTopicOrPartition,
            format!("{topic}-{index} does not exist"),
        );
    };
    let Some(records) = records else {
        return failure(index, ResponseError::CorruptMessage, "no records".into());
    };
    let headers = match batch::parse_all(&records) {
        Ok(headers) => headers,
        Err(e) => return failure(index, ResponseError::CorruptMessage, e.to_string()),
    };
    let state = broker.producers.partition(topic, index);
    let mut producers = state.lock().unwrap_or_else(PoisonError::into_inner);
    let appended = match producers.check(&headers) {
        Verdict::Reject(error) => {
            return failure(
                index,
                error,
                format!("producer {} rejected", headers[0].producer_id),
            )
        }
        Verdict::Duplicate(info) => {
            drop(producers);
            Ok(info)
        }
        Verdict::Append => {
            let result = partition.append_pending(&records);
            if let Ok(info) = &result {
                producers.record(&headers, *info);
            }
            drop(producers);
            result
        }
    };
    match appended.and_then(|info| partition.await_durable(&info).map(|()| info)) {
        Ok(info) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(info.base_offset)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(info.log_start_offset),
        Err(e) => {
            if !matches!(e, log_core::AppendError::InvalidBatch(_)) {
                tracing::warn!(partition = partition.name(), error = %e, "append failed");
            }
            failure(index, errors::append(&e), e.to_string())
        }
    }
}

/// Answers Produce v0–2 (which kafka-protocol cannot decode) with UNSUPPORTED_VERSION for every
/// partition, decoding just enough of the request by hand to name them.
pub fn reject_legacy(frame: Bytes, version: i16) -> Result<Option<BytesMut>, RequestError> {
    let bad = |reason: &str| malformed(format_args!("Produce v{version}"), reason);
    let mut buf = frame;
    let take_string = |buf: &mut Bytes| -> Result<Bytes, RequestError> {
        let len = buf.try_get_i16().map_err(|_| bad("truncated"))?;
        let len = usize::try_from(len).unwrap_or(0);
        if buf.remaining() < len {
            return Err(bad("truncated string"));
        }
        Ok(buf.split_to(len))
    };
    buf.advance(4); // api key, version
    let correlation_id = buf.try_get_i32().map_err(|_| bad("truncated"))?;
    take_string(&mut buf)?; // client id
    let acks = buf.try_get_i16().map_err(|_| bad("truncated"))?;
    buf.try_get_i32().map_err(|_| bad("truncated"))?; // timeout
    let mut out = BytesMut::new();
    out.put_i32(0); // length, filled in below
    out.put_i32(correlation_id);
    let topics = buf.try_get_i32().map_err(|_| bad("truncated"))?;
    out.put_i32(topics.max(0));
    for _ in 0..topics.max(0) {
        let name = take_string(&mut buf)?;
        out.put_i16(i16::try_from(name.len()).map_err(|_| bad("topic name too long"))?);
        out.put_slice(&name);
        let partitions = buf.try_get_i32().map_err(|_| bad("truncated"))?;
        out.put_i32(partitions.max(0));
        for _ in 0..partitions.max(0) {
            let index = buf.try_get_i32().map_err(|_| bad("truncated"))?;
            let size = buf.try_get_i32().map_err(|_| bad("truncated"))?;
            let size = usize::try_from(size).unwrap_or(0);
            if buf.remaining() < size {
                return Err(bad("truncated records"));
            }
            buf.advance(size);
            out.put_i32(index);
            out.put_i16(ResponseError::UnsupportedVersion.code());
            out.put_i64(-1); // base offset
            if version >= 2 {
                out.put_i64(-1); // log append time
            }
        }
    }
    if version >= 1 {
        out.put_i32(0); // throttle time
    }
    if acks == 0 {
        // No response to acks=0, even to refuse it.
        return Ok(None);
    }
    let len = i32::try_from(out.len() - 4).map_err(|_| bad("too large"))?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(Some(out))
}
