//! FindCoordinator, versions 0–3: this broker coordinates every group and every transactional
//! id (key type 1, `transactions`); another key type is INVALID_REQUEST. Authorization:
//! DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), on the transactional id for key type
//! 1 (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::config::BrokerConfig;

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

impl Handler for FindCoordinatorRequest {
    const SERVED: (i16, i16) = (0, 3);
    type Needs = Arc<BrokerConfig>;

    fn counts(&self) -> Counts {
        Counts {
            groups: self.coordinator_keys.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        broker_config: Self::Needs,
        request: FindCoordinatorRequest,
        ctx: &RequestContext,
    ) -> FindCoordinatorResponse {
        let response = FindCoordinatorResponse::default();
        let key = request.key.as_str();
        // With Kafka's messages (`Errors.message()`), which clients print after the code.
        let denied = match request.key_type {
            GROUP => (!ctx.authorize_group(Operation::Describe, key)).then_some((
                ResponseError::GroupAuthorizationFailed,
                "Group authorization failed.",
            )),
            TRANSACTION => {
                (!ctx.authorize(Operation::Describe, ResourceType::TransactionalId, key)).then_some(
                    (
                        ResponseError::TransactionalIdAuthorizationFailed,
                        "Transactional Id authorization failed.",
                    ),
                )
            }
            _ => None,
        };
        if let Some((error, message)) = denied {
            return response
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_static_str(message)))
                .with_node_id(BrokerId(-1))
                .with_port(-1);
        }
        if !matches!(request.key_type, GROUP | TRANSACTION) {
            return response
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "unknown coordinator key type {}",
                    request.key_type
                ))))
                .with_node_id(BrokerId(-1))
                .with_port(-1);
        }

        response
            .with_node_id(BrokerId(broker_config.node_id))
            .with_host(StrBytes::from_string(ctx.listener.host.clone()))
            .with_port(ctx.listener.port)
    }

    fn throttle_time_ms(response: &mut FindCoordinatorResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &FindCoordinatorResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.coordinators.iter().for_each(|c| f(c.error_code));
    }
}
