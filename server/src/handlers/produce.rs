//! Produce, versions 0–12: 3–12 served, 0–2 advertised and refused (`produce_legacy`). acks 0, 1
//! and -1. On one node there are no replicas, so acks=-1 is answered once the batch is fsynced
//! (group commit; unless the topic's `write.caching` is on), acks=1 once it is written (the page
//! cache, fsynced within `flush.ms`); `flush.messages` can make either wait. acks=0 gets no
//! response, as in Kafka. Idempotent producers are checked per (producer id, epoch, partition)
//! (`appender`); a producer id the broker never handed out is UNKNOWN_PRODUCER_ID (v5+;
//! OUT_OF_ORDER_SEQUENCE_NUMBER before, when that code did not exist). A produce with a
//! transactional id is checked against the coordinator first (KIP-890 part 1's verification,
//! `transactions`): each partition must be in the ongoing transaction of the batches'
//! producer id and epoch, else INVALID_TXN_STATE (another epoch: INVALID_PRODUCER_EPOCH), and
//! the transaction's markers wait until the request's appends are done. v12 is transaction
//! version 2's (KIP-890 part 2): the produce itself adds its partitions to the transaction,
//! with no AddPartitionsToTxn before it.
//!
//! A topic's `compression.type` other than `producer` recompresses a batch of another codec,
//! and `message.timestamp.type=LogAppendTime` stamps the batch with the append time (returned
//! as `log_append_time_ms`; -1 under CreateTime), as Kafka's LogValidator does: log-core's
//! `recompress` module has the rules. Recompression runs on the blocking pool; the bytes-in
//! metrics count the bytes received.
//!
//! Authorization: WRITE on the transactional id if one is given, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition; WRITE on each topic, else
//! TOPIC_AUTHORIZATION_FAILED for its partitions (checked before the transaction's check, so a
//! refused topic joins no transaction, as in Kafka). An
//! idempotent batch needs nothing more: since KIP-679 Kafka checks IDEMPOTENT_WRITE (or WRITE
//! on some topic) at InitProducerId, and WRITE on this topic is WRITE on some topic. Without an
//! authorizer the check is one branch per topic.
//!
//! Beyond Kafka: a topic whose consumer group is over its backlog bound (`backlog.rs`) gets a
//! `throttle_time_ms`, or in `reject` mode POLICY_VIOLATION with the reason, for its partitions.

use std::sync::Arc;
use std::time::Duration;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::{Ack, AppendError, AppendInfo};

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::{errors, RequestContext};
use crate::appender::{AppendMode, Appended, Batches, ProduceError};
use crate::backlog::Verdict;
use crate::broker::{Backlog, Storage, Txns};
use crate::transactions::InFlight;

/// Produce requests up to this size are appended on the async worker (see `handle`).
const INLINE_APPEND_BYTES: usize = 64 * 1024;

impl Handler for ProduceRequest {
    const SERVED: (i16, i16) = (0, 12);
    type Needs = (Arc<Storage>, Arc<Backlog>, Arc<Txns>);

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topic_data, |t| t.partition_data.len())
    }

    fn answered(&self) -> bool {
        self.acks != 0
    }

    async fn handle(
        (storage, backlog, txns): Self::Needs,
        request: ProduceRequest,
        ctx: &RequestContext,
    ) -> ProduceResponse {
        let acks = request.acks;
        let transactional_id = request
            .transactional_id
            .as_ref()
            .filter(|id| !id.is_empty())
            .map(|id| id.to_string());
        let refuse = if !matches!(acks, -1..=1) {
            Some((
                ResponseError::InvalidRequiredAcks,
                "acks must be -1, 0 or 1",
            ))
        } else {
            None
        };
        let work = topic_work(request.topic_data);
        let refuse = refuse.or_else(|| {
            transactional_id
                .as_ref()
                .filter(|id| !ctx.authorize(Operation::Write, ResourceType::TransactionalId, id))
                .map(|_| {
                    (
                        ResponseError::TransactionalIdAuthorizationFailed,
                        "not authorized for the transactional id",
                    )
                })
        });
        // WRITE on each topic first, as Kafka: a refused topic joins no transaction.
        let (work, unauthorized) = match refuse {
            None => authorized(ctx, work),
            Some(_) => (work, Vec::new()),
        };
        // The transaction's check, and its markers held back until the appends are done.
        let (work, not_in_transaction, _in_flight) = match (&transactional_id, &refuse) {
            (Some(id), None) => {
                if ctx.version >= 12 {
                    add_to_transaction((&storage, &txns), ctx, id, &work).await;
                }
                let (work, refused, guard) = verify_transactional(&txns, id, work);
                (work, refused, Some(guard))
            }
            _ => (work, Vec::new(), None),
        };
        let mut backlog_throttle = 0;
        let responses = match refuse {
            Some((error, message)) => refuse_all(work, error, message),
            None => {
                let admitted = admit(&backlog, work).await;
                if !admitted.throttle.is_zero() {
                    backlog_throttle =
                        i32::try_from(admitted.throttle.as_millis()).unwrap_or(i32::MAX);
                    crate::quotas::on_throttle(&ctx.client_id, "backlog", admitted.throttle);
                }
                let mut responses = if admitted.accepted.is_empty() {
                    Vec::new()
                } else {
                    append_and_wait(&storage, admitted.accepted, ack(acks), ctx.version).await
                };
                responses.extend(admitted.refused);
                responses.extend(unauthorized);
                responses.extend(not_in_transaction);
                responses
            }
        };
        storage.appended.notify_waiters();
        let responses = responses
            .into_iter()
            .map(|(topic, partitions)| {
                TopicProduceResponse::default()
                    .with_name(StrBytes::from_string(topic).into())
                    .with_partition_responses(partitions)
            })
            .collect();

        ProduceResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(backlog_throttle)
    }

    fn throttle_time_ms(response: &mut ProduceResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ProduceResponse, f: &mut dyn FnMut(i16)) {
        r.responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .for_each(|p| f(p.error_code))
    }
}

/// The request's topics and their partitions' record sets, parsed.
fn topic_work(topic_data: Vec<TopicProduceData>) -> Vec<TopicWork> {
    topic_data
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_data
                .into_iter()
                .map(|p| (p.index, p.records.map(Batches::parse)))
                .collect();
            (t.name.to_string(), partitions)
        })
        .collect()
}

/// Every partition of `work` refused with `error`.
fn refuse_all(work: Vec<TopicWork>, error: ResponseError, message: &str) -> Vec<TopicResults> {
    work.into_iter()
        .map(|(topic, partitions)| {
            let results = partitions
                .into_iter()
                .map(|(index, _)| failure(index, error, message.to_string()))
                .collect();
            (topic, results)
        })
        .collect()
}

/// The topics a produce may append to, the refusals of the others, and the backlog throttle.
struct Admitted {
    accepted: Vec<TopicWork>,
    refused: Vec<TopicResults>,
    /// The longest throttle of a backlog-bounded topic over its bound (throttle mode).
    throttle: Duration,
}

/// Splits `work` into the topics the principal may WRITE and the refusals of the others.
fn authorized(ctx: &RequestContext, work: Vec<TopicWork>) -> (Vec<TopicWork>, Vec<TopicResults>) {
    let mut allowed = Vec::with_capacity(work.len());
    let mut refused = Vec::new();
    for (topic, partitions) in work {
        if ctx.authorize_topic(Operation::Write, &topic) {
            allowed.push((topic, partitions));
        } else {
            let error = ResponseError::TopicAuthorizationFailed;
            let results = partitions
                .into_iter()
                .map(|(index, _)| failure(index, error, error.to_string()))
                .collect();
            refused.push((topic, results));
        }
    }
    (allowed, refused)
}

/// Checks each topic's backlog bound: a topic over its bound in reject mode is refused; in
/// throttle mode it is appended and the response carries a throttle.
async fn admit(backlog: &Arc<Backlog>, work: Vec<TopicWork>) -> Admitted {
    let mut admitted = Admitted {
        accepted: Vec::with_capacity(work.len()),
        refused: Vec::new(),
        throttle: Duration::ZERO,
    };
    for (topic, partitions) in work {
        match backlog.verdict(&topic).await {
            Verdict::Accept => admitted.accepted.push((topic, partitions)),
            Verdict::Throttle(t) => {
                admitted.throttle = admitted.throttle.max(t);
                admitted.accepted.push((topic, partitions));
            }
            Verdict::Reject(message) => {
                let results = partitions
                    .into_iter()
                    .map(|(index, _)| {
                        failure(index, ResponseError::PolicyViolation, message.clone())
                    })
                    .collect();
                admitted.refused.push((topic, results));
            }
        }
    }
    admitted
}

/// The producer id and epoch of the request's first batch ((-1, -1) without one), and every
/// partition it writes to.
fn producer_and_partitions(work: &[TopicWork]) -> ((i64, i16), Vec<(String, i32)>) {
    let producer = work
        .iter()
        .flat_map(|(_, ps)| ps.iter().filter_map(|(_, r)| r.as_ref()?.producer()))
        .next()
        .unwrap_or((-1, -1));
    let partitions = work
        .iter()
        .flat_map(|(topic, ps)| ps.iter().map(move |(index, _)| (topic.clone(), *index)))
        .collect();
    (producer, partitions)
}

/// Transaction version 2: adds the partitions not yet in `id`'s transaction to it, as
/// AddPartitionsToTxn would (stored before the append), only those AddPartitionsToTxn would
/// take (not internal, existing; `work` holds only topics the principal may WRITE). A refusal
/// is left to the checks that follow, which answer it per partition.
async fn add_to_transaction(
    (storage, txns): (&Storage, &Arc<Txns>),
    ctx: &RequestContext,
    id: &str,
    work: &[TopicWork],
) {
    let (producer, partitions) = producer_and_partitions(work);
    let partitions: Vec<(String, i32)> = partitions
        .into_iter()
        .filter(|(topic, index)| {
            super::add_partitions_to_txn::partition_refusal(storage, ctx, topic, *index, false)
                .is_none()
        })
        .collect();
    if partitions.is_empty() {
        return;
    }
    let held = txns
        .coordinator
        .verify_partitions(id, producer.0, producer.1, &partitions);
    if held.is_ok_and(|held| held.iter().all(|h| *h)) {
        return;
    }
    let key = id.to_string();
    let _ = super::transaction::run(txns, id, ResponseError::InvalidProducerEpoch, move |b| {
        b.coordinator.add_partitions(
            &key,
            producer.0,
            producer.1,
            &partitions,
            log_core::now_ms(),
        )
    })
    .await;
}

/// Splits `work` into the partitions the transaction of `id` holds for the batches' producer
/// and the refusals of the others; the guard holds the transaction's markers back.
fn verify_transactional<'a>(
    txns: &'a Txns,
    id: &str,
    work: Vec<TopicWork>,
) -> (Vec<TopicWork>, Vec<TopicResults>, InFlight<'a>) {
    let (producer, partitions) = producer_and_partitions(&work);
    let (checks, guard) = txns
        .coordinator
        .verify_produce(id, producer.0, producer.1, &partitions);
    let mut checks = checks.into_iter();
    let mut accepted = Vec::with_capacity(work.len());
    let mut refused = Vec::new();
    for (topic, ps) in work {
        let mut ok = Vec::with_capacity(ps.len());
        let mut failed = Vec::new();
        for (index, records) in ps {
            // A batch of another producer than the request's first is the appender's to refuse.
            match checks.next() {
                Some(Err(e)) => {
                    failed.push(failure(index, errors::produce_check(&e), e.to_string()))
                }
                _ => ok.push((index, records)),
            }
        }
        if !failed.is_empty() {
            refused.push((topic.clone(), failed));
        }
        if !ok.is_empty() {
            accepted.push((topic, ok));
        }
    }
    (accepted, refused, guard)
}

/// A topic and its partitions' record sets, as the request carried them.
type TopicWork = (String, Vec<(i32, Option<Batches>)>);
type TopicResults = (String, Vec<PartitionProduceResponse>);
/// Per partition of a request: its index, and where its records went or why they did not.
type Outcomes = Vec<Vec<(i32, Result<Appended, ProduceError>)>>;

/// Appends every partition's records, then waits for their durability. A small uncompressed
/// request is appended in place (handing it to another thread costs more than a page-cache
/// write); a large or compressed one (its records are decompressed to be checked), one that a
/// topic's `compression.type` recompresses, and any
/// partition whose append would block (its writer busy, or a segment to roll), goes to the
/// blocking pool. Fsync waits hold no thread.
async fn append_and_wait(
    storage: &Arc<Storage>,
    work: Vec<TopicWork>,
    ack: Ack,
    version: i16,
) -> Vec<TopicResults> {
    let records = || {
        work.iter()
            .flat_map(|(_, ps)| ps.iter().filter_map(|(_, r)| r.as_ref()))
    };
    let bytes: usize = records().map(Batches::len).sum();
    let compressed = records().any(Batches::is_compressed);
    // A topic whose compression.type differs from a batch's recompresses it (log-core's
    // `recompress`): CPU work for the blocking pool, like a compressed batch's check.
    let recompressed = || {
        work.iter().any(|(topic, partitions)| {
            let Some(codec) = storage
                .log
                .topic(topic)
                .and_then(|t| t.compression().codec())
            else {
                return false;
            };
            partitions
                .iter()
                .filter_map(|(_, r)| r.as_ref())
                .any(|b| b.has_other_codec(codec))
        })
    };
    let inline = bytes <= INLINE_APPEND_BYTES && !compressed && !recompressed();
    let work = Arc::new(work);
    let mut outcomes = if inline {
        append_all(storage, &work, ack, AppendMode::Inline, |_, _| true)
    } else {
        blocking(storage, &work, ack, |_, _| true).await
    };
    if outcomes
        .iter()
        .flatten()
        .any(|(_, r)| r.as_ref().is_err_and(ProduceError::would_block))
    {
        let retried = {
            let blocked: Vec<Vec<bool>> = outcomes
                .iter()
                .map(|t| {
                    t.iter()
                        .map(|(_, r)| r.as_ref().is_err_and(ProduceError::would_block))
                        .collect()
                })
                .collect();
            blocking(storage, &work, ack, move |t, p| blocked[t][p]).await
        };
        for (topic, retried) in outcomes.iter_mut().zip(retried) {
            for (slot, again) in topic.iter_mut().zip(retried) {
                if slot.1.as_ref().is_err_and(ProduceError::would_block) {
                    *slot = again;
                }
            }
        }
    }
    storage.appended.notify_waiters();
    // Start every fsync first, then wait for each: the partitions' fsyncs overlap.
    for (_, outcome) in outcomes.iter().flatten() {
        if let Ok(appended) = outcome {
            appended.start_sync(&storage.syncer);
        }
    }
    let mut results = Vec::with_capacity(work.len());
    for ((topic, _), partitions) in work.iter().zip(outcomes) {
        let mut responses = Vec::with_capacity(partitions.len());
        for (index, outcome) in partitions {
            let durable = match outcome {
                Ok(appended) => appended
                    .durable(&storage.syncer)
                    .await
                    .map(|()| appended.info),
                Err(e) => Err(e),
            };
            responses.push(response(topic, index, durable, version));
        }
        results.push((topic.clone(), responses));
    }
    results
}

/// Appends the partitions `chosen(topic index, partition index)` selects; the others get a
/// would-block outcome, replaced by the caller.
fn append_all(
    storage: &Arc<Storage>,
    work: &[TopicWork],
    ack: Ack,
    mode: AppendMode,
    chosen: impl Fn(usize, usize) -> bool,
) -> Outcomes {
    work.iter()
        .enumerate()
        .map(|(t, (topic, partitions))| {
            partitions
                .iter()
                .enumerate()
                .map(|(p, (index, records))| {
                    let outcome = if chosen(t, p) {
                        storage.appender().append_records(
                            topic,
                            *index,
                            records.as_ref(),
                            ack,
                            mode,
                        )
                    } else {
                        Err(AppendError::WouldBlock.into())
                    };
                    (*index, outcome)
                })
                .collect()
        })
        .collect()
}

/// [`append_all`] on the blocking pool. If the task fails, every partition of `work` has
/// [`ProduceError::TaskFailed`]: the producer hears of it (UNKNOWN_SERVER_ERROR) rather than
/// waiting for a response that never comes.
async fn blocking(
    storage: &Arc<Storage>,
    work: &Arc<Vec<TopicWork>>,
    ack: Ack,
    chosen: impl Fn(usize, usize) -> bool + Send + 'static,
) -> Outcomes {
    let (owner, shared) = (storage.clone(), work.clone());
    match crate::blocking::spawn(move || {
        append_all(&owner, &shared, ack, AppendMode::Blocking, chosen)
    })
    .await
    {
        Ok(outcomes) => outcomes,
        Err(e) => {
            tracing::error!(error = %e, "produce task failed");
            work.iter()
                .map(|(_, partitions)| {
                    partitions
                        .iter()
                        .map(|(index, _)| (*index, Err(ProduceError::TaskFailed(e.to_string()))))
                        .collect()
                })
                .collect()
        }
    }
}

/// What a Produce's `acks` asks of its appends: on one node `acks=all` means fsynced (unless
/// the topic's `write.caching` says otherwise), `acks=1` and `acks=0` the page cache.
fn ack(acks: i16) -> Ack {
    if acks == -1 {
        Ack::All
    } else {
        Ack::Written
    }
}

fn response(
    topic: &str,
    index: i32,
    outcome: Result<AppendInfo, ProduceError>,
    version: i16,
) -> PartitionProduceResponse {
    match outcome {
        Ok(info) => PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(info.base_offset)
            .with_log_append_time_ms(info.log_append_time)
            .with_log_start_offset(info.log_start_offset),
        Err(e) => {
            if let ProduceError::Append(e) = &e {
                if !matches!(e, AppendError::InvalidBatch(_)) {
                    tracing::warn!(topic, partition = index, error = %e, "append failed");
                }
            }
            failure(index, errors::produce(&e, version), e.to_string())
                .with_record_errors(record_errors(&e))
        }
    }
}

/// The records an error refuses one by one (KIP-467, Produce v8+): the producer fails those
/// and may send the rest of the batch again.
fn record_errors(e: &ProduceError) -> Vec<BatchIndexAndErrorMessage> {
    let ProduceError::Append(e) = e else {
        return Vec::new();
    };
    e.record_errors()
        .iter()
        .map(|r| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(i32::try_from(r.index).unwrap_or(i32::MAX))
                .with_batch_index_error_message(Some(StrBytes::from_string(r.message.clone())))
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
