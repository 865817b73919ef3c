//! LeaveGroup, versions 0–3: one member (v0–2) or a batch of members by id or instance id (v3,
//! KIP-345), of a classic group or classic members of a consumer-protocol group. The group
//! rebalances without them; a group left without members is Empty, and its
//! record (protocol type, generation) is durable in `__consumer_offsets` before the answer, as
//! Kafka writes its group metadata. Authorization: READ on the group, else
//! GROUP_AUTHORIZATION_FAILED (top level).

use std::sync::Arc;
use std::time::Instant;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::bounds::Counts;
use super::Handler;
use super::{errors, RequestContext};
use crate::broker::Groups;

impl Handler for LeaveGroupRequest {
    const SERVED: (i16, i16) = (0, 3);
    type Needs = Arc<Groups>;

    fn counts(&self) -> Counts {
        Counts {
            members: self.members.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        groups: Self::Needs,
        request: LeaveGroupRequest,
        ctx: &RequestContext,
    ) -> LeaveGroupResponse {
        if !ctx.authorize_group(Operation::Read, &request.group_id) {
            return LeaveGroupResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        let members: Vec<(String, Option<String>)> = if ctx.version < 3 {
            vec![(request.member_id.to_string(), None)]
        } else {
            request
                .members
                .iter()
                .map(|m| {
                    (
                        m.member_id.to_string(),
                        m.group_instance_id.as_ref().map(|i| i.to_string()),
                    )
                })
                .collect()
        };
        let response = LeaveGroupResponse::default();
        let now = Instant::now();
        let left = match groups.consumer.classic_leave(&request.group_id, &members) {
            Some(codes) => {
                groups.maybe_downgrade(&request.group_id, now);
                Ok(codes)
            }
            None => groups.classic.leave(&request.group_id, &members, now),
        };
        // A group left Empty has its generation on disk before the answer, as in Kafka.
        groups.store_group_records(Vec::new()).await;
        match left {
            Err(error) => response.with_error_code(error.code()),
            Ok(codes) if ctx.version < 3 => {
                response.with_error_code(codes.first().map_or(0, errors::code))
            }
            Ok(codes) => response.with_members(
                request
                    .members
                    .into_iter()
                    .zip(codes)
                    .map(|(m, code)| {
                        MemberResponse::default()
                            .with_member_id(m.member_id)
                            .with_group_instance_id(m.group_instance_id)
                            .with_error_code(errors::code(&code))
                    })
                    .collect(),
            ),
        }
    }

    fn throttle_time_ms(response: &mut LeaveGroupResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &LeaveGroupResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.members.iter().for_each(|m| f(m.error_code));
    }
}
