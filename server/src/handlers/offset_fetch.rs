//! OffsetFetch, versions 1–9 (v8+: several groups a request): the committed offset of each
//! asked partition (-1 when none), or (v2+, topics null) every offset the group has committed.
//! v9 (KIP-848): a member of a consumer-protocol group asks with its member id and epoch
//! (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH for the group, as Kafka); no member id and epoch -1
//! (an admin) may always fetch. Each
//! comes with the leader epoch it was committed with; a commit made without one (-1) is
//! answered with the partition's epoch, 0, which is what a Kafka client sees on Kafka (its
//! clients commit the epoch of the batches they read, 0 until a leader changes).
//! Authorization, as Kafka: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED (v1: on
//! each asked partition; v2+: the top-level error, nothing else); DESCRIBE on each topic, else
//! its asked partitions are TOPIC_AUTHORIZATION_FAILED (offset -1) and, when every offset is
//! asked for, the topic is left out. KIP-447 (v7+): with `require_stable`, a partition whose
//! offsets wait in a transaction not yet complete is UNSTABLE_OFFSET_COMMIT (the Java client
//! asks with it under read_committed, franz-go always), so a new owner after a rebalance does
//! not start from offsets that transaction is about to move.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::RequestContext;
use crate::broker::{Groups, Storage, Txns};

/// The leader epoch of every lograil partition: one broker leads it from its creation on, the
/// epoch a Kafka partition has until its first leader change.
const PARTITION_LEADER_EPOCH: i32 = 0;

impl Handler for OffsetFetchRequest {
    const SERVED: (i16, i16) = (1, 9);
    type Needs = (Arc<Storage>, Arc<Groups>, Arc<Txns>);

    fn counts(&self) -> Counts {
        let single = topics_and_partitions(self.topics.as_deref().unwrap_or_default(), |t| {
            t.partition_indexes.len()
        });
        let grouped = self
            .groups
            .iter()
            .map(|g| {
                topics_and_partitions(g.topics.as_deref().unwrap_or_default(), |t| {
                    t.partition_indexes.len()
                })
            })
            .fold(single, |all, group| all + group);
        Counts {
            groups: self.groups.len(),
            ..grouped
        }
    }

    async fn handle(
        (storage, groups, txns): Self::Needs,
        request: OffsetFetchRequest,
        ctx: &RequestContext,
    ) -> OffsetFetchResponse {
        let unstable = |group: &str| {
            if request.require_stable {
                txns.coordinator.pending_offsets(group)
            } else {
                HashSet::new()
            }
        };
        if ctx.version >= 8 {
            let groups = request
                .groups
                .into_iter()
                .map(|g| {
                    let pending = unstable(&g.group_id);
                    fetch_group(&storage, &groups, ctx, g, &pending)
                })
                .collect();
            return OffsetFetchResponse::default().with_groups(groups);
        }
        let group = request.group_id.to_string();
        if !ctx.authorize_group(Operation::Describe, &group) {
            return group_denied(request, ctx.version);
        }
        if group.is_empty() {
            return OffsetFetchResponse::default()
                .with_error_code(ResponseError::InvalidGroupId.code());
        }
        let wanted = request.topics.map(|topics| {
            topics
                .into_iter()
                .map(|t| (t.name.to_string(), t.partition_indexes))
                .collect()
        });
        let pending = unstable(&group);
        OffsetFetchResponse::default().with_topics(offsets_of(
            &storage,
            &groups,
            ctx,
            (&group, &pending),
            wanted,
        ))
    }

    fn throttle_time_ms(response: &mut OffsetFetchResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &OffsetFetchResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code));
        for g in &r.groups {
            f(g.error_code);
            g.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
        }
    }
}

/// One group of a v8+ request: its own errors (authorization, a consumer-protocol member's
/// epoch), else its offsets as [`offsets_of`] answers them.
fn fetch_group(
    storage: &Arc<Storage>,
    groups: &Arc<Groups>,
    ctx: &RequestContext,
    g: OffsetFetchRequestGroup,
    pending: &HashSet<(String, i32)>,
) -> OffsetFetchResponseGroup {
    let id = g.group_id.to_string();
    let failed = |error: ResponseError| {
        OffsetFetchResponseGroup::default()
            .with_group_id(g.group_id.clone())
            .with_error_code(error.code())
    };
    if !ctx.authorize_group(Operation::Describe, &id) {
        return failed(ResponseError::GroupAuthorizationFailed);
    }
    if id.is_empty() {
        return failed(ResponseError::InvalidGroupId);
    }
    let member = g.member_id.as_deref();
    let checked = groups
        .consumer
        .check_member(&id, member, g.member_epoch, None)
        .or_else(|| {
            groups
                .streams
                .check_member(&id, member, g.member_epoch, false)
        });
    if let Some(Err(error)) = checked {
        return failed(error);
    }
    let wanted = g.topics.clone().map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    let topics = offsets_of(storage, groups, ctx, (&id, pending), wanted)
        .into_iter()
        .map(|t| {
            OffsetFetchResponseTopics::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .into_iter()
                        .map(|p| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(p.partition_index)
                                .with_committed_offset(p.committed_offset)
                                .with_committed_leader_epoch(p.committed_leader_epoch)
                                .with_metadata(p.metadata)
                                .with_error_code(p.error_code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetFetchResponseGroup::default()
        .with_group_id(g.group_id)
        .with_topics(topics)
}

/// The committed offsets of `group` for the asked partitions (`None`: every partition it
/// committed), per topic, with each topic the principal may not DESCRIBE answered as such,
/// and each partition in `pending` (offsets of a transaction not yet complete, asked with
/// `require_stable`) UNSTABLE_OFFSET_COMMIT: the client asks again once it completes.
fn offsets_of(
    storage: &Arc<Storage>,
    groups: &Arc<Groups>,
    ctx: &RequestContext,
    (group, pending): (&str, &HashSet<(String, i32)>),
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<OffsetFetchResponseTopic> {
    let group = group.to_string();
    let describable = |topic: &str| ctx.authorize_topic(Operation::Describe, topic);
    let wanted: BTreeMap<String, Vec<i32>> = match asked {
        Some(topics) => topics.into_iter().collect(),
        // Every committed offset, but of topics the principal may not DESCRIBE.
        None => {
            let mut all: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for ((topic, partition), _) in groups.offsets.group_offsets(&group) {
                if describable(&topic) {
                    all.entry(topic).or_default().push(partition);
                }
            }
            all
        }
    };
    wanted
        .into_iter()
        .map(|(topic, partitions)| {
            let denied = !describable(&topic);
            let partitions = partitions
                .into_iter()
                .map(|index| {
                    let response =
                        OffsetFetchResponsePartition::default().with_partition_index(index);
                    let refused = if denied {
                        Some(ResponseError::TopicAuthorizationFailed)
                    } else if pending.contains(&(topic.clone(), index)) {
                        Some(ResponseError::UnstableOffsetCommit)
                    } else {
                        None
                    };
                    if let Some(error) = refused {
                        return response
                            .with_committed_offset(-1)
                            .with_committed_leader_epoch(-1)
                            .with_metadata(Some(StrBytes::default()))
                            .with_error_code(error.code());
                    }
                    match groups.offsets.fetch(&group, &topic, index) {
                        Some(c) => response
                            .with_committed_offset(c.offset)
                            .with_committed_leader_epoch(committed_epoch(
                                storage,
                                &topic,
                                index,
                                c.leader_epoch,
                            ))
                            .with_metadata(Some(StrBytes::from_string(
                                c.metadata.unwrap_or_default(),
                            ))),
                        None => response
                            .with_committed_offset(-1)
                            .with_committed_leader_epoch(-1)
                            .with_metadata(Some(StrBytes::default())),
                    }
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(partitions)
        })
        .collect()
}

/// The leader epoch a commit is answered with: the one it was committed with, else (a client
/// that did not know it: lograil's Metadata and batches say -1) the partition's, 0, as long as
/// the partition exists.
fn committed_epoch(storage: &Arc<Storage>, topic: &str, partition: i32, committed: i32) -> i32 {
    if committed >= 0 {
        return committed;
    }
    let exists = u32::try_from(partition)
        .ok()
        .zip(storage.log.topic(topic))
        .is_some_and(|(index, t)| t.partition(index).is_some());
    if exists {
        PARTITION_LEADER_EPOCH
    } else {
        committed
    }
}

/// The answer to a request for a group the principal may not DESCRIBE: v1 has no top-level
/// error, so each asked partition carries it.
fn group_denied(request: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let error = ResponseError::GroupAuthorizationFailed.code();
    if version >= 2 {
        return OffsetFetchResponse::default().with_error_code(error);
    }
    let topics = request
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partition_indexes
                        .into_iter()
                        .map(|index| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(index)
                                .with_committed_offset(-1)
                                .with_committed_leader_epoch(-1)
                                .with_metadata(Some(StrBytes::default()))
                                .with_error_code(error)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}
