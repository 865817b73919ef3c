//! ConsumerGroupDescribe, versions 0–1 (KIP-848): a consumer-protocol group's state (Empty,
//! Assigning, Reconciling, Stable), group and target assignment epochs, assignor, and each
//! member's epoch, subscription, current and target assignment (member type 1: consumer
//! protocol, v1). An unknown group, or a classic one, answers GROUP_ID_NOT_FOUND as Kafka does.
//! Authorization, as Kafka: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) and on every
//! topic its members subscribe to or are assigned (else TOPIC_AUTHORIZATION_FAILED, without
//! members); KIP-430's authorized operations when asked.

use std::collections::BTreeSet;
use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::broker::{Groups, Storage};
use crate::groups::consumer::{ConsumerGroup, TopicPartition};

/// "Not requested" for the authorized-operations field.
const OPERATIONS_OMITTED: i32 = i32::MIN;
/// Kafka's member types (v1): a consumer-protocol member, a classic one of an upgraded group.
const CONSUMER_MEMBER: i8 = 1;
const CLASSIC_MEMBER: i8 = 0;

impl Handler for ConsumerGroupDescribeRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = (Arc<Storage>, Arc<Groups>);

    fn counts(&self) -> Counts {
        Counts {
            groups: self.group_ids.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, groups): Self::Needs,
        request: ConsumerGroupDescribeRequest,
        ctx: &RequestContext,
    ) -> ConsumerGroupDescribeResponse {
        let operations = request.include_authorized_operations;
        let groups = request
            .group_ids
            .into_iter()
            .map(|id| describe_group(&storage, &groups, ctx, id, operations))
            .collect();
        ConsumerGroupDescribeResponse::default().with_groups(groups)
    }

    fn throttle_time_ms(response: &mut ConsumerGroupDescribeResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ConsumerGroupDescribeResponse, f: &mut dyn FnMut(i16)) {
        r.groups.iter().for_each(|g| f(g.error_code))
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// One group as the principal may see it: refused, not found, hidden for its topics, or its
/// state and members.
fn describe_group(
    storage: &Arc<Storage>,
    groups: &Arc<Groups>,
    ctx: &RequestContext,
    id: GroupId,
    operations: bool,
) -> DescribedGroup {
    let described = DescribedGroup::default()
        .with_group_id(id.clone())
        .with_authorized_operations(OPERATIONS_OMITTED);
    if !ctx.authorize_group(Operation::Describe, &id) {
        return described.with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let described = if operations {
        let bits = ctx.authorized_operations(ResourceType::Group, &id);
        described.with_authorized_operations(bits)
    } else {
        described
    };
    let Some(group) = groups.consumer.describe(&id) else {
        let why = format!("Group {} not found.", id.as_str());
        return described
            .with_error_code(ResponseError::GroupIdNotFound.code())
            .with_error_message(Some(text(&why)))
            .with_group_state(text("Dead"));
    };
    let members = members(storage, &group);
    // As Kafka: a group whose members name a topic the principal may not DESCRIBE is
    // TOPIC_AUTHORIZATION_FAILED, without its members.
    if hides_topics(ctx, &members) {
        return described
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            .with_error_message(Some(text(
                "the group has topics the client is not authorized to describe",
            )));
    }
    described
        .with_group_state(text(group.state()))
        .with_group_epoch(group.epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(text(&group.assignor))
        .with_members(members)
}

/// Each member of `group` with its subscription, current and target assignment.
fn members(storage: &Arc<Storage>, group: &ConsumerGroup) -> Vec<Member> {
    let empty = BTreeSet::new();
    group
        .members
        .iter()
        .map(|(member_id, m)| {
            let target = group.target.get(member_id).unwrap_or(&empty);
            Member::default()
                .with_member_id(text(member_id))
                .with_instance_id(m.instance_id.as_deref().map(text))
                .with_rack_id(m.rack_id.as_deref().map(text))
                .with_member_epoch(m.epoch)
                .with_client_id(text(&m.client_id))
                .with_client_host(text(&m.client_host))
                .with_subscribed_topic_names(m.names.iter().map(|t| TopicName(text(t))).collect())
                .with_subscribed_topic_regex(m.regex.as_deref().map(text))
                .with_assignment(assignment(storage, &m.assigned))
                .with_target_assignment(assignment(storage, target))
                .with_member_type(if m.classic.is_some() {
                    CLASSIC_MEMBER
                } else {
                    CONSUMER_MEMBER
                })
        })
        .collect()
}

/// `partitions` by topic, each topic with its id and name.
fn assignment(storage: &Arc<Storage>, partitions: &BTreeSet<TopicPartition>) -> Assignment {
    let topics = super::assignment::by_topic(partitions)
        .into_iter()
        .map(|(topic_id, partitions)| {
            let name = storage
                .log
                .topic_by_id(topic_id)
                .map(|t| t.name().to_string())
                .unwrap_or_default();
            TopicPartitions::default()
                .with_topic_id(topic_id)
                .with_topic_name(TopicName(text(&name)))
                .with_partitions(partitions)
        })
        .collect();
    Assignment::default().with_topic_partitions(topics)
}

/// Whether a member subscribes to or is assigned a topic the principal may not DESCRIBE.
fn hides_topics(ctx: &RequestContext, members: &[Member]) -> bool {
    members.iter().any(|m| {
        let assigned = m.assignment.topic_partitions.iter().map(|t| &t.topic_name);
        m.subscribed_topic_names
            .iter()
            .chain(assigned)
            .any(|t| !ctx.authorize_topic(Operation::Describe, t))
    })
}
