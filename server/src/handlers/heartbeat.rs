//! Heartbeat, versions 0–3: keeps a member's session alive and tells it when to rejoin
//! (REBALANCE_IN_PROGRESS), in a classic group or as a classic member of a consumer-protocol
//! group. Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.

use std::sync::Arc;
use std::time::Instant;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::Handler;
use super::{errors, RequestContext};
use crate::broker::Groups;

impl Handler for HeartbeatRequest {
    const SERVED: (i16, i16) = (0, 3);
    type Needs = Arc<Groups>;

    async fn handle(
        groups: Self::Needs,
        request: HeartbeatRequest,
        ctx: &RequestContext,
    ) -> HeartbeatResponse {
        if !ctx.authorize_group(Operation::Read, &request.group_id) {
            return HeartbeatResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        let now = Instant::now();
        let error = groups
            .consumer
            .classic_heartbeat(
                &request.group_id,
                &request.member_id,
                request.group_instance_id.as_deref(),
                request.generation_id,
                now,
            )
            .unwrap_or_else(|| {
                groups.classic.heartbeat(
                    &request.group_id,
                    request.generation_id,
                    &request.member_id,
                    request.group_instance_id.as_deref(),
                    now,
                )
            });
        HeartbeatResponse::default().with_error_code(errors::code(&error))
    }

    fn throttle_time_ms(response: &mut HeartbeatResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &HeartbeatResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
