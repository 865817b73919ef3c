//! Heartbeat, versions 0–3: keeps a member's session alive and tells it when to rejoin
//! (REBALANCE_IN_PROGRESS).

use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::{errors, RequestContext};
use crate::broker::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    request: HeartbeatRequest,
    _: &RequestContext,
) -> Option<HeartbeatResponse> {
    let error = broker.groups.heartbeat(
        &request.group_id,
        request.generation_id,
        &request.member_id,
        request.group_instance_id.as_deref(),
        Instant::now(),
    );
    Some(HeartbeatResponse::default().with_error_code(errors::code(&error)))
}
