//! DescribeGroups, versions 0–5: state, protocol and members with their metadata and
//! assignment. A group that only has offsets is Empty; an unknown one, or a consumer-protocol
//! (KIP-848) group, is Dead, as in Kafka.
//! Authorization: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it (empty state,
//! as Kafka). KIP-430 (v3+): the group's authorized operations when asked.

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::broker::Groups;
use crate::groups::GroupState;

/// KIP-430's "not computed".
const OPERATIONS_OMITTED: i32 = i32::MIN;

impl Handler for DescribeGroupsRequest {
    const SERVED: (i16, i16) = (0, 5);
    type Needs = Arc<Groups>;

    fn counts(&self) -> Counts {
        Counts {
            groups: self.groups.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        groups: Self::Needs,
        request: DescribeGroupsRequest,
        ctx: &RequestContext,
    ) -> DescribeGroupsResponse {
        let text = StrBytes::from_string;
        let operations = ctx.version >= 3 && request.include_authorized_operations;
        let groups = request
            .groups
            .into_iter()
            .map(|id| {
                let described = DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_authorized_operations(OPERATIONS_OMITTED);
                if !ctx.authorize_group(Operation::Describe, &id) {
                    return described
                        .with_error_code(ResponseError::GroupAuthorizationFailed.code());
                }
                let described = if operations {
                    described.with_authorized_operations(
                        ctx.authorized_operations(ResourceType::Group, &id),
                    )
                } else {
                    described
                };
                match groups.classic.describe(&id) {
                    Some(view) => described
                        .with_group_state(StrBytes::from_static_str(view.state.name()))
                        .with_protocol_type(text(view.protocol_type))
                        .with_protocol_data(text(view.protocol))
                        .with_members(
                            view.members
                                .into_iter()
                                .map(|m| {
                                    DescribedGroupMember::default()
                                        .with_member_id(text(m.member_id))
                                        .with_group_instance_id(m.instance_id.map(text))
                                        .with_client_id(text(m.client_id))
                                        .with_client_host(text(m.client_host))
                                        .with_member_metadata(m.metadata)
                                        .with_member_assignment(m.assignment)
                                })
                                .collect(),
                        ),
                    None => {
                        // A consumer-protocol group is not a classic one: Dead, as in Kafka
                        // (ConsumerGroupDescribe describes it).
                        let state = if groups.consumer.contains(&id) || groups.streams.contains(&id)
                        {
                            GroupState::Dead
                        } else if groups.offsets.has_offsets(&id) {
                            GroupState::Empty
                        } else {
                            GroupState::Dead
                        };
                        described.with_group_state(StrBytes::from_static_str(state.name()))
                    }
                }
            })
            .collect();
        DescribeGroupsResponse::default().with_groups(groups)
    }

    fn throttle_time_ms(response: &mut DescribeGroupsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeGroupsResponse, f: &mut dyn FnMut(i16)) {
        r.groups.iter().for_each(|g| f(g.error_code))
    }
}
