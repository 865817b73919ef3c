//! ShareFetch, versions 1–2 (KIP-932): a share group member's fetch. In order:
//!
//! 1. the share session: epoch 0 opens one with the request's partitions, N (the session's
//!    epoch) adds them and drops the forgotten ones, -1 closes it (INVALID_SHARE_SESSION_EPOCH,
//!    SHARE_SESSION_NOT_FOUND otherwise);
//! 2. acknowledgements piggybacked on the request are applied (per partition,
//!    `acknowledge_error_code`);
//! 3. closing the session releases the records the member holds, and fetches nothing;
//! 4. otherwise up to `max_records` records are acquired across the session's partitions for
//!    the group's lock duration (returned as `acquisition_lock_timeout_ms`), with the whole
//!    batches that hold them and their delivery counts. With nothing to acquire, the fetch
//!    waits up to `max_wait_ms` for an append or for records released by others.
//!
//! State changes are durable before the answer. `records` is never null (the Java client
//! refuses null). Beyond Kafka: a record whose `deadline` header has passed is archived (and
//! dead-lettered) instead of delivered.
//!
//! Authorization, as Kafka: READ on the group (else GROUP_AUTHORIZATION_FAILED, top level) and
//! on each topic: a partition of a topic without it is TOPIC_AUTHORIZATION_FAILED (its
//! acknowledgements too), is not added to the session and is not fetched.

mod poll;

use std::collections::BTreeMap;
use std::sync::Arc;

use acl::Operation;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareFetchRequest, ShareFetchResponse};
use kafka_protocol::protocol::StrBytes;
use task_queue::{AckBatch, AckType};

use super::bounds::{topics_and_partitions, Counts};
use super::{errors, Handler, RequestContext};
use crate::broker::Storage;
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use crate::shares::Shares;
use crate::shares::{PartitionFetch, Pending, Requester, SessionUpdate, TopicPartition};
use poll::{poll_records, Poll};
use tokio::sync::watch;

impl Handler for ShareFetchRequest {
    const SERVED: (i16, i16) = (1, 2);
    type Needs = (
        Arc<BrokerConfig>,
        Arc<Storage>,
        Arc<Shares>,
        Arc<Metrics>,
        watch::Receiver<bool>,
    );

    fn counts(&self) -> Counts {
        let fetched = topics_and_partitions(&self.topics, |t| t.partitions.len());
        fetched + topics_and_partitions(&self.forgotten_topics_data, |t| t.partitions.len())
    }

    async fn handle(
        (broker_config, storage, shares, metrics, shutdown): Self::Needs,
        request: ShareFetchRequest,
        ctx: &RequestContext,
    ) -> ShareFetchResponse {
        let group = request
            .group_id
            .as_ref()
            .map(|g| g.to_string())
            .unwrap_or_default();
        let member = request.member_id.as_deref().unwrap_or_default().to_string();
        let epoch = request.share_session_epoch;
        let response = base_response(&broker_config, &shares, ctx, &group);
        let fail = |error: ResponseError| {
            response
                .clone()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(error.to_string())))
        };
        if !ctx.authorize_group(Operation::Read, &group) {
            return fail(ResponseError::GroupAuthorizationFailed);
        }
        if epoch != -1 && !shares.members.is_member(&group, &member) {
            return fail(ResponseError::UnknownMemberId);
        }
        let readable = |topic: log_core::Uuid| readable(&storage, ctx, topic);
        let named = Named::of(&request, readable);
        if epoch == 0 && !named.acks.is_empty() {
            return fail(ResponseError::InvalidRequest);
        }
        let (acks, refused_acks): (Acks, Acks) = named
            .acks
            .into_iter()
            .partition(|((topic, _), _)| readable(*topic));
        let update = SessionUpdate {
            epoch,
            add: &named.requested,
            forget: &named.forgotten,
        };
        let session = match shares
            .members
            .session(&group, &member, update, true, Some(ctx.peer))
        {
            Ok(partitions) => partitions,
            Err(error) => return fail(error),
        };

        let outcome = if epoch == -1 || request.is_renew_ack {
            // A request renewing locks fetches nothing (KIP-1222).
            acknowledge_only(&storage, &shares, &group, &member, acks, epoch == -1)
                .await
                .map(|(acked, pending)| (acked, Vec::new(), pending))
        } else {
            let partitions = session
                .into_iter()
                .filter(|(topic, _)| readable(*topic))
                .collect();
            let poll = Poll::new(&request, partitions);
            poll_records(&storage, &shares, &shutdown, &group, &member, poll, acks).await
        };
        let Ok((mut ack_results, fetched, pending)) = outcome else {
            return fail(ResponseError::UnknownServerError);
        };
        pending.durable(&storage.syncer).await;
        let denied = || Err(ResponseError::TopicAuthorizationFailed);
        ack_results.extend(refused_acks.into_iter().map(|(tp, _)| (tp, denied())));
        response.with_responses(answer(
            &broker_config,
            &storage,
            &metrics,
            ack_results,
            fetched,
            &named.refused,
        ))
    }

    fn throttle_time_ms(response: &mut ShareFetchResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn shared(response: &ShareFetchResponse) -> Vec<Bytes> {
        records(response)
    }

    fn each_error(r: &ShareFetchResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        for p in r.responses.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
            f(p.acknowledge_error_code);
        }
    }
}

/// The response's fields every answer has: the group's lock duration and this node.
fn base_response(
    broker_config: &BrokerConfig,
    shares: &Arc<Shares>,
    ctx: &RequestContext,
    group: &str,
) -> ShareFetchResponse {
    let config = shares.config(group);
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(
            i32::try_from(config.lock_duration_ms).unwrap_or(i32::MAX),
        )
        .with_node_endpoints(vec![NodeEndpoint::default()
            .with_node_id(BrokerId(broker_config.node_id))
            .with_host(StrBytes::from_string(ctx.listener.host.clone()))
            .with_port(ctx.listener.port)])
}

/// The partitions a ShareFetch names, and the acknowledgements it carries.
struct Named {
    /// To add to the session (their topics READ-able).
    requested: Vec<TopicPartition>,
    /// Of topics without READ: answered TOPIC_AUTHORIZATION_FAILED, kept out of the session.
    refused: Vec<TopicPartition>,
    /// To drop from the session.
    forgotten: Vec<TopicPartition>,
    /// Acknowledgement batches by partition (of every topic named).
    acks: Acks,
}

impl Named {
    /// What `request` names; `readable` says whether a topic (by id) may be READ.
    fn of(request: &ShareFetchRequest, readable: impl Fn(log_core::Uuid) -> bool) -> Named {
        let (requested, refused): (Vec<TopicPartition>, Vec<TopicPartition>) = request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
            .partition(|(topic, _)| readable(*topic));
        let forgotten: Vec<TopicPartition> = request
            .forgotten_topics_data
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
            .collect();
        let acks: Acks = request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|p| !p.acknowledgement_batches.is_empty())
                    .map(|p| {
                        let batches = ack_batches(&p.acknowledgement_batches, request.is_renew_ack);
                        ((t.topic_id, p.partition_index), batches)
                    })
            })
            .collect();
        Named {
            requested,
            refused,
            forgotten,
            acks,
        }
    }
}

/// A request that closes the session (`release`: epoch -1) or renews locks: its
/// acknowledgements applied, then, on close, every record the member holds released.
async fn acknowledge_only(
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    group: &str,
    member: &str,
    acks: Acks,
    release: bool,
) -> Result<(AckResults, Pending), TaskFailed> {
    let (ack_results, mut pending) = acknowledge(storage, shares, group, member, acks).await?;
    if release {
        let released = release_member(storage, shares, group, member).await?;
        pending.0.extend(released.0);
    }
    Ok((ack_results, pending))
}

/// The tagged field in which lograil's queue consumer gives a release its delay (ms, 8 bytes
/// big-endian); see `vendor/kafka-protocol/LOGRAIL-PATCH.md`.
pub const RELEASE_DELAY_TAG: i32 = 10_000;

/// An acknowledgement batch as ShareFetch and ShareAcknowledge carry it (two wire types of
/// the same fields).
pub trait WireAckBatch {
    fn first_offset(&self) -> i64;
    fn last_offset(&self) -> i64;
    fn acknowledge_types(&self) -> &[i8];
    fn tags(&self) -> &std::collections::BTreeMap<i32, Bytes>;
}

macro_rules! wire_ack_batch {
    ($($batch:ty),*) => {$(
        impl WireAckBatch for $batch {
            fn first_offset(&self) -> i64 {
                self.first_offset
            }
            fn last_offset(&self) -> i64 {
                self.last_offset
            }
            fn acknowledge_types(&self) -> &[i8] {
                &self.acknowledge_types
            }
            fn tags(&self) -> &std::collections::BTreeMap<i32, Bytes> {
                &self.unknown_tagged_fields
            }
        }
    )*};
}

wire_ack_batch!(
    kafka_protocol::messages::share_fetch_request::AcknowledgementBatch,
    kafka_protocol::messages::share_acknowledge_request::AcknowledgementBatch
);

/// One partition's acknowledgement batches, read with [`ack_batch`]: the first that cannot be
/// read fails them all.
pub fn ack_batches<B: WireAckBatch>(
    batches: &[B],
    renew_allowed: bool,
) -> Result<Vec<AckBatch>, ResponseError> {
    batches
        .iter()
        .map(|b| {
            ack_batch(
                b.first_offset(),
                b.last_offset(),
                b.acknowledge_types(),
                b.tags(),
                renew_allowed,
            )
        })
        .collect()
}

/// Acknowledgement types on the wire to ours (a release with lograil's delay tag waits that
/// long before it can be delivered again); INVALID_REQUEST for an unknown type, and for RENEW
/// unless the request says it renews (`IsRenewAck`, v2).
fn ack_batch(
    first: i64,
    last: i64,
    types: &[i8],
    tags: &std::collections::BTreeMap<i32, Bytes>,
    renew_allowed: bool,
) -> Result<AckBatch, ResponseError> {
    let delay = tags
        .get(&RELEASE_DELAY_TAG)
        .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
        .map_or(0, i64::from_be_bytes)
        .clamp(0, 24 * 3_600_000);
    let types = types
        .iter()
        .map(|t| match AckType::from_wire(*t) {
            Some(AckType::Release { .. }) => Ok(AckType::Release { delay }),
            Some(AckType::Renew) if !renew_allowed => Err(ResponseError::InvalidRequest),
            Some(other) => Ok(other),
            None => Err(ResponseError::InvalidRequest),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AckBatch {
        first_offset: first,
        last_offset: last,
        types,
    })
}

/// A share handler's blocking task failed (it panicked; logged): the request answers
/// UNKNOWN_SERVER_ERROR.
#[derive(Debug)]
pub struct TaskFailed;

/// Waits for a share handler's blocking task.
async fn joined<T>(task: tokio::task::JoinHandle<T>) -> Result<T, TaskFailed> {
    task.await.map_err(|e| {
        tracing::error!(error = %e, "share group task failed");
        TaskFailed
    })
}

/// Releases every record `member` holds in `group` (its session or membership ended), on the
/// blocking pool.
pub async fn release_member(
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    group: &str,
    member: &str,
) -> Result<Pending, TaskFailed> {
    let (owner, owner_shares) = (storage.clone(), shares.clone());
    let (group, member) = (group.to_string(), member.to_string());
    joined(crate::blocking::spawn(move || {
        let mut pending = Pending::default();
        owner_shares.release_member(
            &owner.log,
            &group,
            &member,
            log_core::now_ms(),
            &mut pending,
        );
        pending
    }))
    .await
}

/// Each partition's acknowledgement outcome.
pub type AckResults = Vec<(TopicPartition, Result<(), ResponseError>)>;
/// Acknowledgement batches by partition, or why a partition's could not be read.
pub type Acks = Vec<(TopicPartition, Result<Vec<AckBatch>, ResponseError>)>;

/// Applies acknowledgements per partition on the blocking pool.
pub async fn acknowledge(
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    group: &str,
    member: &str,
    acks: Acks,
) -> Result<(AckResults, Pending), TaskFailed> {
    if acks.is_empty() {
        return Ok((Vec::new(), Pending::default()));
    }
    let (owner, owner_shares) = (storage.clone(), shares.clone());
    let (group, member) = (group.to_string(), member.to_string());
    joined(crate::blocking::spawn(move || {
        let mut pending = Pending::default();
        let now = log_core::now_ms();
        let results = apply_acks(
            &owner,
            &owner_shares,
            &group,
            &member,
            acks,
            now,
            &mut pending,
        );
        (results, pending)
    }))
    .await
}

/// Applies acknowledgements partition by partition (blocking: it appends to the share state).
fn apply_acks(
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    group: &str,
    member: &str,
    acks: Acks,
    now: i64,
    pending: &mut Pending,
) -> AckResults {
    acks.into_iter()
        .map(|(tp, batches)| {
            let result = batches.and_then(|batches| {
                shares.acknowledge(
                    &storage.log,
                    Requester { group, member, now },
                    tp,
                    &batches,
                    pending,
                )
            });
            (tp, result)
        })
        .collect()
}

/// Bytes and records out per topic, for the metrics: the batches sent and the records
/// acquired in them.
fn count_out(storage: &Arc<Storage>, metrics: &Arc<Metrics>, fetch: &PartitionFetch) {
    if fetch.records.is_empty() {
        return;
    }
    if let Some(topic) = storage.log.topic_by_id(fetch.topic_partition.0) {
        let records = fetch
            .acquired
            .iter()
            .map(|(first, last, _)| u64::try_from(last - first + 1).unwrap_or(0))
            .sum();
        metrics.fetched(topic.name(), records, fetch.records.len() as u64);
    }
}

/// The response's record slices, in the order they are encoded (shared, not copied, on the way
/// out).
pub fn records(response: &ShareFetchResponse) -> Vec<Bytes> {
    response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.clone())
        .collect()
}

/// Whether the request may READ the topic of id `topic` (an unknown id is left to the share
/// state to refuse).
pub fn readable(storage: &Storage, ctx: &RequestContext, topic: log_core::Uuid) -> bool {
    !ctx.authorizer.is_enabled()
        || storage
            .log
            .topic_by_id(topic)
            .is_none_or(|t| ctx.authorize_topic(Operation::Read, t.name()))
}

/// The response's topics: every partition acknowledged or fetched, with its records (never
/// null), acquired ranges and errors, and those `refused` (TOPIC_AUTHORIZATION_FAILED).
fn answer(
    broker_config: &BrokerConfig,
    storage: &Arc<Storage>,
    metrics: &Arc<Metrics>,
    acks: AckResults,
    fetched: Vec<PartitionFetch>,
    refused: &[TopicPartition],
) -> Vec<ShareFetchableTopicResponse> {
    let leader = LeaderIdAndEpoch::default()
        .with_leader_id(broker_config.node_id)
        .with_leader_epoch(0);
    let mut partitions: BTreeMap<TopicPartition, PartitionData> = BTreeMap::new();
    let empty = |index: i32| {
        PartitionData::default()
            .with_partition_index(index)
            .with_current_leader(leader.clone())
            .with_records(Some(Bytes::new()))
    };
    for (tp, result) in acks {
        let entry = partitions.entry(tp).or_insert_with(|| empty(tp.1));
        if let Err(error) = result {
            entry.acknowledge_error_code = error.code();
            entry.acknowledge_error_message = Some(StrBytes::from_string(error.to_string()));
        }
    }
    for tp in refused {
        let entry = partitions.entry(*tp).or_insert_with(|| empty(tp.1));
        let error = ResponseError::TopicAuthorizationFailed;
        entry.error_code = error.code();
        entry.error_message = Some(StrBytes::from_string(error.to_string()));
    }
    for fetch in fetched {
        let entry = partitions
            .entry(fetch.topic_partition)
            .or_insert_with(|| empty(fetch.topic_partition.1));
        if let Some(error) = &fetch.error {
            let error = errors::share_fetch(error);
            entry.error_code = error.code();
            entry.error_message = Some(StrBytes::from_string(error.to_string()));
        }
        count_out(storage, metrics, &fetch);
        entry.records = Some(fetch.records);
        entry.acquired_records = fetch
            .acquired
            .into_iter()
            .map(|(first, last, count)| {
                AcquiredRecords::default()
                    .with_first_offset(first)
                    .with_last_offset(last)
                    .with_delivery_count(i16::try_from(count).unwrap_or(i16::MAX))
            })
            .collect();
    }
    let mut topics: BTreeMap<log_core::Uuid, Vec<PartitionData>> = BTreeMap::new();
    for ((topic, _), data) in partitions {
        topics.entry(topic).or_default().push(data);
    }
    topics
        .into_iter()
        .map(|(topic_id, partitions)| {
            ShareFetchableTopicResponse::default()
                .with_topic_id(topic_id)
                .with_partitions(partitions)
        })
        .collect()
}
