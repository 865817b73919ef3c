//! FindCoordinator, versions 0–3: this broker coordinates every group. Transaction
//! coordinators (key type 1) are not available: lograil has no transactions.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::broker::Broker;

const GROUP: i8 = 0;

pub async fn handle(
    broker: &Arc<Broker>,
    request: FindCoordinatorRequest,
    _: &RequestContext,
) -> Option<FindCoordinatorResponse> {
    let response = FindCoordinatorResponse::default();
    if request.key_type != GROUP {
        return Some(
            response
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "transactions are not supported",
                )))
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        );
    }
    Some(
        response
            .with_node_id(BrokerId(broker.config.node_id))
            .with_host(StrBytes::from_string(broker.host.clone()))
            .with_port(broker.port),
    )
}
