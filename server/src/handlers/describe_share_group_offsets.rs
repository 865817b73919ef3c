//! DescribeShareGroupOffsets, versions 0–1: each share partition's start offset (SPSO) and,
//! from v1, its lag, for the groups asked, all of a group's topics when it names none. A
//! partition the group has never read answers -1 for both. Authorization: DESCRIBE on each
//! group (else GROUP_AUTHORIZATION_FAILED) and on each topic (else its partitions are
//! TOPIC_AUTHORIZATION_FAILED, and it is left out of "all of a group's topics").

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use task_queue::ShareKey;

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::shares::admin::ShareOffset;
use crate::shares::Shares;

impl Handler for DescribeShareGroupOffsetsRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = (Arc<Storage>, Arc<Shares>);

    fn counts(&self) -> Counts {
        let topics = self.groups.iter().flat_map(|g| g.topics.iter().flatten());
        let (topics, partitions) =
            topics.fold((0, 0), |(t, p), topic| (t + 1, p + topic.partitions.len()));
        Counts {
            topics,
            partitions,
            groups: self.groups.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, shares): Self::Needs,
        request: DescribeShareGroupOffsetsRequest,
        ctx: &RequestContext,
    ) -> DescribeShareGroupOffsetsResponse {
        let groups = request
            .groups
            .into_iter()
            .map(|g| describe_group(&storage, &shares, ctx, g))
            .collect();
        DescribeShareGroupOffsetsResponse::default().with_groups(groups)
    }

    fn throttle_time_ms(response: &mut DescribeShareGroupOffsetsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeShareGroupOffsetsResponse, f: &mut dyn FnMut(i16)) {
        for g in &r.groups {
            f(g.error_code);
            g.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
        }
    }
}

/// One group's offsets: refused, not found, or its topics asked (all it has state for when it
/// names none).
fn describe_group(
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    ctx: &RequestContext,
    g: DescribeShareGroupOffsetsRequestGroup,
) -> DescribeShareGroupOffsetsResponseGroup {
    let describable = |topic: &str| ctx.authorize_topic(Operation::Describe, topic);
    let group = DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id.clone());
    if !ctx.authorize_group(Operation::Describe, &g.group_id) {
        return group.with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if !shares.groups().contains(&g.group_id.to_string()) {
        return group.with_error_code(ResponseError::GroupIdNotFound.code());
    }
    let offsets = shares.offsets(&storage.log, &g.group_id);
    // (topic name, partitions) asked, or every topic the group has state for.
    let asked: Vec<(String, Option<Vec<i32>>)> = match g.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.topic_name.to_string(), Some(t.partitions)))
            .collect(),
        None => {
            let mut names: Vec<String> = offsets
                .iter()
                .filter_map(|(k, _)| storage.log.topic_by_id(k.topic_id()))
                .map(|t| t.name().to_string())
                .collect();
            names.dedup();
            names.retain(|n| describable(n));
            names.into_iter().map(|n| (n, None)).collect()
        }
    };
    let topics = asked
        .into_iter()
        .map(|(name, partitions)| {
            if !describable(&name) {
                denied_topic(name, partitions)
            } else {
                describe_topic(storage, name, partitions, &offsets)
            }
        })
        .collect();
    group.with_topics(topics)
}

/// A topic refused before the lookup: nothing said of whether it exists, each partition asked
/// TOPIC_AUTHORIZATION_FAILED.
fn denied_topic(
    name: String,
    partitions: Option<Vec<i32>>,
) -> DescribeShareGroupOffsetsResponseTopic {
    let denied = ResponseError::TopicAuthorizationFailed.code();
    let partitions = partitions.unwrap_or_default().into_iter().map(|p| {
        DescribeShareGroupOffsetsResponsePartition::default()
            .with_partition_index(p)
            .with_start_offset(-1)
            .with_lag(-1)
            .with_leader_epoch(-1)
            .with_error_code(denied)
    });
    DescribeShareGroupOffsetsResponseTopic::default()
        .with_topic_name(TopicName(StrBytes::from_string(name)))
        .with_partitions(partitions.collect())
}

/// A topic's partitions asked (all the group has state for when `None`), each with its start
/// offset and lag (-1 for a partition never read); an unknown topic without partitions.
fn describe_topic(
    storage: &Arc<Storage>,
    name: String,
    partitions: Option<Vec<i32>>,
    offsets: &[(ShareKey, ShareOffset)],
) -> DescribeShareGroupOffsetsResponseTopic {
    let topic = storage.log.topic(&name);
    let response = DescribeShareGroupOffsetsResponseTopic::default()
        .with_topic_name(TopicName(StrBytes::from_string(name)))
        .with_topic_id(topic.as_ref().map(|t| t.id()).unwrap_or_default());
    let Some(topic) = topic else {
        return response;
    };
    let partitions = partitions.unwrap_or_else(|| {
        offsets
            .iter()
            .filter(|(k, _)| k.topic_id() == topic.id())
            .map(|(k, _)| k.partition)
            .collect()
    });
    response.with_partitions(
        partitions
            .into_iter()
            .map(|p| {
                let offset = offsets
                    .iter()
                    .find(|(k, _)| k.topic_id() == topic.id() && k.partition == p)
                    .map(|(_, o)| *o);
                DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p)
                    .with_start_offset(offset.map_or(-1, |o| o.start))
                    .with_lag(offset.and_then(|o| o.lag).unwrap_or(-1))
                    .with_leader_epoch(-1)
            })
            .collect(),
    )
}
