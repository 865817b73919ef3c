//! TxnOffsetCommit, versions 0–6: offsets committed within the producer's transaction, pending
//! in it (stored in `__transaction_state` before the answer) until EndTxn: on COMMIT they are
//! stored into the group (`__consumer_offsets`) after the markers, on ABORT dropped. Before v5
//! the group must have joined the transaction (AddOffsetsToTxn), else INVALID_TXN_STATE; v5 is
//! transaction version 2's, where the commit itself adds the group (KIP-890); v6 names topics by
//! id (KIP-1319: an unknown id is UNKNOWN_TOPIC_ID) and answers a member's stale epoch as
//! STALE_MEMBER_EPOCH, which earlier versions answer ILLEGAL_GENERATION. v3+ carries the
//! member, generation and instance id: checked as Kafka checks a transactional commit
//! (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, a consumer or streams group's
//! member epoch; generation -1 with no member is allowed whatever the group's members,
//! and a rebalance being completed does not hold it back, unlike OffsetCommit). Metadata over 4096 bytes is
//! OFFSET_METADATA_TOO_LARGE, an unknown partition UNKNOWN_TOPIC_OR_PARTITION; a stale epoch
//! INVALID_PRODUCER_EPOCH (what Kafka's group coordinator answers), another producer id
//! INVALID_PRODUCER_ID_MAPPING. Authorization: WRITE on the transactional id (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else GROUP_AUTHORIZATION_FAILED)
//! and on each topic (else TOPIC_AUTHORIZATION_FAILED), each for every partition it covers.

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::bounds::{topics_and_partitions, Counts};
use super::offset_commit::{member_error, Committing};
use super::transaction;
use super::Handler;
use super::RequestContext;
use crate::broker::{Groups, Storage, Txns};
use crate::groups::offsets::MAX_METADATA_BYTES;
use crate::transactions::PendingOffset;

/// A topic of the request: its name and id.
type Named = (String, log_core::Uuid);
/// A partition of the request: the offset to commit, or why it is refused.
type PartitionCheck = (i32, Result<PendingOffset, ResponseError>);

impl Handler for TxnOffsetCommitRequest {
    const SERVED: (i16, i16) = (0, 6);
    type Needs = (Arc<Storage>, Arc<Groups>, Arc<Txns>);

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partitions.len())
    }

    async fn handle(
        (storage, groups, txns): Self::Needs,
        request: TxnOffsetCommitRequest,
        ctx: &RequestContext,
    ) -> TxnOffsetCommitResponse {
        let id = request.transactional_id.to_string();
        let group = request.group_id.to_string();
        let request_error = request_error(&groups, &request, ctx, &id, &group);
        // Per topic (name and id), per partition: the offset to commit, or the partition's error.
        let mut checked: Vec<(Named, Vec<PartitionCheck>)> =
            Vec::with_capacity(request.topics.len());
        for topic in &request.topics {
            let (name, unknown) = if ctx.version >= 6 {
                match storage.log.topic_by_id(topic.topic_id) {
                    Some(t) => (t.name().to_string(), None),
                    None => (String::new(), Some(ResponseError::UnknownTopicId)),
                }
            } else {
                (topic.name.to_string(), None)
            };
            let readable = unknown.is_some() || ctx.authorize_topic(Operation::Read, &name);
            let refused = request_error
                .or(unknown)
                .or((!readable).then_some(ResponseError::TopicAuthorizationFailed));
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        check_partition(&storage, &name, p, refused),
                    )
                })
                .collect();
            checked.push(((name, topic.topic_id), partitions));
        }
        let offsets: Vec<((String, i32), PendingOffset)> = checked
            .iter()
            .flat_map(|((topic, _), partitions)| {
                partitions.iter().filter_map(|(index, r)| {
                    r.as_ref()
                        .ok()
                        .map(|o| ((topic.clone(), *index), o.clone()))
                })
            })
            .collect();
        let stored = if offsets.is_empty() {
            Ok(())
        } else {
            let producer = (request.producer_id.0, request.producer_epoch);
            let key = id.clone();
            // v5 is transaction version 2's: no AddOffsetsToTxn before it.
            let add_group = ctx.version >= 5;
            transaction::run(&txns, &id, ResponseError::InvalidProducerEpoch, move |b| {
                b.coordinator.commit_offsets(
                    &key,
                    producer,
                    &group,
                    offsets,
                    add_group,
                    log_core::now_ms(),
                )
            })
            .await
        };
        let store_code = stored.err().map_or(0, |e| e.code());
        let topics = checked
            .into_iter()
            .map(|(topic, partitions)| answer_topic(topic, ctx.version, partitions, store_code))
            .collect();
        TxnOffsetCommitResponse::default().with_topics(topics)
    }

    fn throttle_time_ms(response: &mut TxnOffsetCommitResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &TxnOffsetCommitResponse, f: &mut dyn FnMut(i16)) {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code))
    }
}

/// Why no partition of the request may be committed (the transactional id or group refused,
/// the member's generation, or an empty group id), if so.
fn request_error(
    groups: &Arc<Groups>,
    request: &TxnOffsetCommitRequest,
    ctx: &RequestContext,
    id: &str,
    group: &str,
) -> Option<ResponseError> {
    if !ctx.authorize(Operation::Write, ResourceType::TransactionalId, id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !ctx.authorize_group(Operation::Read, group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else if ctx.version >= 3 {
        let error = member_error(
            groups,
            group,
            (
                request.generation_id_or_member_epoch,
                &request.member_id,
                request.group_instance_id.as_deref(),
            ),
            Committing::Transaction,
        );
        // Before v6 a stale member epoch is answered as Kafka does: ILLEGAL_GENERATION.
        match error {
            Some(ResponseError::StaleMemberEpoch) if ctx.version < 6 => {
                Some(ResponseError::IllegalGeneration)
            }
            other => other,
        }
    } else if group.is_empty() {
        Some(ResponseError::InvalidGroupId)
    } else {
        None
    }
}

/// A partition's offset to commit, or why it is refused: `refused` (the request's or the
/// topic's error), metadata too large, or an unknown partition.
fn check_partition(
    storage: &Arc<Storage>,
    topic: &str,
    p: &TxnOffsetCommitRequestPartition,
    refused: Option<ResponseError>,
) -> Result<PendingOffset, ResponseError> {
    if let Some(error) = refused {
        Err(error)
    } else if p
        .committed_metadata
        .as_ref()
        .is_some_and(|m| m.len() > MAX_METADATA_BYTES)
    {
        Err(ResponseError::OffsetMetadataTooLarge)
    } else if storage.partition(topic, p.partition_index).is_none() {
        Err(ResponseError::UnknownTopicOrPartition)
    } else {
        Ok(PendingOffset {
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
        })
    }
}

/// A topic's answer (by id from v6, by name before): each partition's error, or `store_code`
/// for those accepted.
fn answer_topic(
    (name, id): Named,
    version: i16,
    partitions: Vec<PartitionCheck>,
    store_code: i16,
) -> TxnOffsetCommitResponseTopic {
    let topic = TxnOffsetCommitResponseTopic::default();
    let topic = if version >= 6 {
        topic.with_topic_id(id)
    } else {
        topic.with_name(kafka_protocol::messages::TopicName(name.into()))
    };
    topic.with_partitions(
        partitions
            .into_iter()
            .map(|(index, r)| {
                TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(index)
                    .with_error_code(r.map_or_else(|e| e.code(), |_| store_code))
            })
            .collect(),
    )
}
