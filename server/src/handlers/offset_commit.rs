//! OffsetCommit, versions 2–9. A member commits within its generation; a "simple" consumer
//! (generation -1, no member id) may commit to a group without members, as in Kafka. A member
//! of a KIP-848 consumer-protocol group commits with v9+ (else UNSUPPORTED_VERSION) and its
//! current member epoch (else STALE_MEMBER_EPOCH; UNKNOWN_MEMBER_ID if not a member). Offsets are
//! stored in `__consumer_offsets` (durability `always`) before the response goes out. Metadata
//! over 4096 bytes is OFFSET_METADATA_TOO_LARGE. Authorization: READ on the group (else every
//! partition is GROUP_AUTHORIZATION_FAILED) and on each topic (else TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use log_core::Topic;

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::{errors, RequestContext};
use crate::broker::{Groups, Storage};
use crate::groups::offsets::MAX_METADATA_BYTES;
use crate::groups::{Committed, GroupState};

/// A partition of the request: the commit to store, or why it is refused.
type PartitionCheck = (i32, Result<Committed, ResponseError>);

impl Handler for OffsetCommitRequest {
    const SERVED: (i16, i16) = (2, 9);
    type Needs = (Arc<Storage>, Arc<Groups>);

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partitions.len())
    }

    async fn handle(
        (storage, groups): Self::Needs,
        request: OffsetCommitRequest,
        ctx: &RequestContext,
    ) -> OffsetCommitResponse {
        let group = request.group_id.to_string();
        let group_error = group_error(&groups, &request, ctx, &group);
        let now = log_core::now_ms();
        // Per partition: Ok(commit to store) or the partition's error.
        let mut checked: Vec<(String, Vec<PartitionCheck>)> = Vec::new();
        for topic in &request.topics {
            let name = topic.name.to_string();
            let exists = storage.log.topic(&name);
            let readable = ctx.authorize_topic(Operation::Read, &name);
            let refused =
                group_error.or((!readable).then_some(ResponseError::TopicAuthorizationFailed));
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        check_partition(p, refused, exists.as_deref(), now),
                    )
                })
                .collect();
            checked.push((name, partitions));
        }
        let store_error = store(&groups, group, &checked).await;
        let topics = checked
            .into_iter()
            .map(|(name, partitions)| answer_topic(name, partitions, store_error))
            .collect();
        OffsetCommitResponse::default().with_topics(topics)
    }

    fn throttle_time_ms(response: &mut OffsetCommitResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &OffsetCommitResponse, f: &mut dyn FnMut(i16)) {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code))
    }
}

/// Why no partition of the request may be committed (the group refused, or the member's
/// generation or epoch), if so.
fn group_error(
    groups: &Arc<Groups>,
    request: &OffsetCommitRequest,
    ctx: &RequestContext,
    group: &str,
) -> Option<ResponseError> {
    if !ctx.authorize_group(Operation::Read, group) {
        return Some(ResponseError::GroupAuthorizationFailed);
    }
    member_error(
        groups,
        group,
        (
            request.generation_id_or_member_epoch,
            &request.member_id,
            request.group_instance_id.as_deref(),
        ),
        Committing::Offsets(ctx.version),
    )
}

/// What commits: OffsetCommit at its version, or TxnOffsetCommit (a transactional commit).
#[derive(Debug, Clone, Copy)]
pub(super) enum Committing {
    Offsets(i16),
    Transaction,
}

/// Why this member (generation or epoch, member id, instance id) may not commit to `group`
/// now, if it may not: a consumer-protocol group checks the member's epoch (and OffsetCommit's
/// v9 floor, which Kafka does not ask of a transactional commit), a classic group as
/// [`classic_error`] says.
pub(super) fn member_error(
    groups: &Arc<Groups>,
    group: &str,
    member: (i32, &str, Option<&str>),
    committing: Committing,
) -> Option<ResponseError> {
    let (epoch, member_id, _) = member;
    let version = match committing {
        Committing::Offsets(version) => version,
        Committing::Transaction => i16::MAX,
    };
    let consumer = groups
        .consumer
        .check_member(group, Some(member_id), epoch, Some(version));
    let streams = || {
        groups
            .streams
            .check_member(group, Some(member_id), epoch, true)
    };
    match consumer.or_else(streams) {
        Some(checked) => checked.err(),
        None => classic_error(
            groups,
            group,
            member,
            matches!(committing, Committing::Transaction),
        ),
    }
}

/// A partition's commit, or why it is refused: `refused` (the group's or the topic's error),
/// metadata too large, or an unknown partition of `topic`.
fn check_partition(
    p: &OffsetCommitRequestPartition,
    refused: Option<ResponseError>,
    topic: Option<&Topic>,
    now: i64,
) -> Result<Committed, ResponseError> {
    if let Some(error) = refused {
        Err(error)
    } else if p
        .committed_metadata
        .as_ref()
        .is_some_and(|m| m.len() > MAX_METADATA_BYTES)
    {
        Err(ResponseError::OffsetMetadataTooLarge)
    } else if !topic
        .is_some_and(|t| u32::try_from(p.partition_index).is_ok_and(|i| t.partition(i).is_some()))
    {
        Err(ResponseError::UnknownTopicOrPartition)
    } else {
        Ok(Committed {
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            commit_timestamp: now,
        })
    }
}

/// Stores the accepted commits into `__consumer_offsets`, off the async workers; the error of
/// every accepted partition if that fails.
async fn store(
    groups: &Arc<Groups>,
    group: String,
    checked: &[(String, Vec<PartitionCheck>)],
) -> Option<ResponseError> {
    let commits: Vec<((String, i32), Committed)> = checked
        .iter()
        .flat_map(|(topic, partitions)| {
            partitions.iter().filter_map(|(index, r)| {
                r.as_ref()
                    .ok()
                    .map(|c| ((topic.clone(), *index), c.clone()))
            })
        })
        .collect();
    if commits.is_empty() {
        return None;
    }
    let owner = groups.clone();
    let id = group.clone();
    let stored = match crate::blocking::spawn(move || owner.offsets.commit(&id, commits)).await {
        Ok(stored) => stored.map_err(|e| {
            tracing::error!(group = %group, error = %e, "storing offsets failed");
            errors::offsets(&e)
        }),
        Err(e) => {
            tracing::error!(group = %group, error = %e, "offset commit task failed");
            Err(ResponseError::UnknownServerError)
        }
    };
    stored.err()
}

/// A topic's answer: each partition's error, or the store's for those accepted.
fn answer_topic(
    name: String,
    partitions: Vec<PartitionCheck>,
    store_error: Option<ResponseError>,
) -> OffsetCommitResponseTopic {
    OffsetCommitResponseTopic::default()
        .with_name(kafka_protocol::messages::TopicName(name.into()))
        .with_partitions(
            partitions
                .into_iter()
                .map(|(index, r)| {
                    let code = match r {
                        Err(e) => e.code(),
                        Ok(_) => store_error.map_or(0, |e| e.code()),
                    };
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                })
                .collect(),
        )
}

/// Why this member may not commit to this classic group now, if it may not, as Kafka's
/// ClassicGroup decides: a commit without a member and generation goes to an empty group only
/// (`transactional`: to any), a member's must carry the current generation, and a
/// non-transactional one waits out CompletingRebalance (REBALANCE_IN_PROGRESS).
fn classic_error(
    groups: &Arc<Groups>,
    group: &str,
    (generation, member_id, instance_id): (i32, &str, Option<&str>),
    transactional: bool,
) -> Option<ResponseError> {
    if group.is_empty() {
        return Some(ResponseError::InvalidGroupId);
    }
    let simple = generation < 0 && member_id.is_empty();
    let membership = match groups.classic.membership(group, member_id, instance_id) {
        Ok(membership) => membership,
        Err(fenced) => return Some(fenced),
    };
    match membership {
        None if simple => None,
        None => Some(ResponseError::IllegalGeneration),
        Some((GroupState::Empty | GroupState::Dead, _, _)) if simple => None,
        Some(_) if simple && transactional => None,
        Some(_) if simple => Some(ResponseError::UnknownMemberId),
        Some((_, _, false)) => Some(ResponseError::UnknownMemberId),
        Some((_, current, true)) if current != generation => Some(ResponseError::IllegalGeneration),
        Some((GroupState::CompletingRebalance, _, _)) if !transactional => {
            Some(ResponseError::RebalanceInProgress)
        }
        Some(_) => None,
    }
}
