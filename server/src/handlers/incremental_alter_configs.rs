//! IncrementalAlterConfigs, versions 0–1, for share groups (resource type GROUP, 32): Kafka's
//! `group.share.*` configs, `share.auto.offset.reset` and KIP-1191's
//! `errors.deadletterqueue.topic.name`, SET or DELETE, all of a resource's changes or none,
//! persisted in `__share_group_state`. Topic and broker resources are not altered yet (Kafka's
//! tools get INVALID_REQUEST saying so); APPEND and SUBTRACT (for list configs) do not apply to
//! these configs (INVALID_CONFIG).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::share_fetch::wait_durable;
use super::RequestContext;
use crate::broker::Broker;
use crate::shares::Pending;

pub const GROUP: i8 = 32;
const SET: i8 = 0;
const DELETE: i8 = 1;

pub async fn handle(
    broker: &Arc<Broker>,
    request: IncrementalAlterConfigsRequest,
    _: &RequestContext,
) -> Option<IncrementalAlterConfigsResponse> {
    let mut pending = Pending::default();
    let responses = request
        .resources
        .into_iter()
        .map(|resource| {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let fail = |error: ResponseError, message: String| {
                response
                    .clone()
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            };
            if resource.resource_type != GROUP {
                return fail(
                    ResponseError::InvalidRequest,
                    format!(
                        "altering configs of resource type {} is not supported yet",
                        resource.resource_type
                    ),
                );
            }
            let mut changes = Vec::with_capacity(resource.configs.len());
            for config in &resource.configs {
                let value = match config.config_operation {
                    SET => config.value.as_ref().map(ToString::to_string),
                    DELETE => None,
                    other => {
                        return fail(
                            ResponseError::InvalidConfig,
                            format!(
                                "operation {other} does not apply to {}",
                                config.name.as_str()
                            ),
                        )
                    }
                };
                changes.push((config.name.to_string(), value));
            }
            if request.validate_only {
                let mut check = broker.shares.config(&resource.resource_name);
                let defaults = broker.config.share.clone();
                for (name, value) in &changes {
                    if let Err(e) = check.set(name, value.as_deref(), &defaults) {
                        return fail(ResponseError::InvalidConfig, e.to_string());
                    }
                }
                return response;
            }
            match broker
                .shares
                .alter_configs(&resource.resource_name, &changes, &mut pending)
            {
                Ok(()) => response,
                Err(e) => fail(ResponseError::InvalidConfig, e.to_string()),
            }
        })
        .collect();
    wait_durable(broker, pending).await;
    Some(IncrementalAlterConfigsResponse::default().with_responses(responses))
}
