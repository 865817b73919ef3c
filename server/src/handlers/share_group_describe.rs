//! ShareGroupDescribe, version 1: a share group's members, their subscriptions and assignments.
//! The group is Stable while it has members, Empty otherwise; the assignor is "simple" (every
//! member gets every subscribed partition on one broker). An unknown group answers
//! GROUP_ID_NOT_FOUND, as Kafka does. Authorization, as Kafka: DESCRIBE on the group (else
//! GROUP_AUTHORIZATION_FAILED) and on every topic its members subscribe to or are assigned
//! (else TOPIC_AUTHORIZATION_FAILED, without members); KIP-430's authorized operations when
//! asked.

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    GroupId, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::shares::members::Member as ShareMember;
use crate::shares::Shares;

/// "Not requested" for the authorized-operations field.
const OPERATIONS_OMITTED: i32 = i32::MIN;

impl Handler for ShareGroupDescribeRequest {
    const SERVED: (i16, i16) = (1, 1);
    type Needs = (Arc<Storage>, Arc<Shares>);

    fn counts(&self) -> Counts {
        Counts {
            groups: self.group_ids.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, shares): Self::Needs,
        request: ShareGroupDescribeRequest,
        ctx: &RequestContext,
    ) -> ShareGroupDescribeResponse {
        let operations = request.include_authorized_operations;
        let groups = request
            .group_ids
            .into_iter()
            .map(|id| describe_group(&storage, &shares, ctx, id, operations))
            .collect();
        ShareGroupDescribeResponse::default().with_groups(groups)
    }

    fn throttle_time_ms(response: &mut ShareGroupDescribeResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ShareGroupDescribeResponse, f: &mut dyn FnMut(i16)) {
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
    shares: &Arc<Shares>,
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
    let known = shares.members.describe(&id);
    let Some((epoch, members)) = known.or_else(|| {
        shares
            .groups()
            .contains(&id.to_string())
            .then(|| (0, Vec::new()))
    }) else {
        return described
            .with_error_code(ResponseError::GroupIdNotFound.code())
            .with_group_state(text("Dead"));
    };
    let state = if members.is_empty() {
        "Empty"
    } else {
        "Stable"
    };
    let members: Vec<Member> = members
        .into_iter()
        .map(|(member_id, m)| member(storage, &member_id, &m))
        .collect();
    // As Kafka: a group whose members name a topic the principal may not DESCRIBE is
    // TOPIC_AUTHORIZATION_FAILED, without its members.
    if hides_topics(ctx, &members) {
        let error = ResponseError::TopicAuthorizationFailed;
        return described
            .with_error_code(error.code())
            .with_error_message(Some(text(
                "the group has topics the client is not authorized to describe",
            )));
    }
    described
        .with_group_state(text(state))
        .with_group_epoch(epoch)
        .with_assignment_epoch(epoch)
        .with_assignor_name(text("simple"))
        .with_members(members)
}

/// A member with its subscription and assignment (by topic, each with its id and name).
fn member(storage: &Arc<Storage>, member_id: &str, m: &ShareMember) -> Member {
    let assigned = super::assignment::by_topic(&m.assignment)
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
    Member::default()
        .with_member_id(text(member_id))
        .with_member_epoch(m.epoch)
        .with_client_id(text(&m.client_id))
        .with_client_host(text(&m.client_host))
        .with_subscribed_topic_names(m.subscriptions.iter().map(|t| TopicName(text(t))).collect())
        .with_assignment(Assignment::default().with_topic_partitions(assigned))
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
