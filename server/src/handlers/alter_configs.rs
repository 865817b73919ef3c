//! AlterConfigs, versions 0–2 (the legacy, non-incremental form): a topic resource's configs
//! are replaced as a whole, every config not named going back to the broker's default, with
//! the same validation, persistence and immediate effect as IncrementalAlterConfigs (see
//! there). A null value is INVALID_CONFIG. Deviations: broker resources are refused with
//! INVALID_REQUEST (Kafka's tools alter the cluster-wide broker defaults with
//! IncrementalAlterConfigs, which serves them); other resource types too. Authorization: as
//! IncrementalAlterConfigs.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::incremental_alter_configs::{alter_topic, Op, TOPIC};
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::topic_config;

const BROKER: i8 = 4;

impl Handler for AlterConfigsRequest {
    const SERVED: (i16, i16) = (0, 2);
    type Needs = Arc<Storage>;

    fn counts(&self) -> Counts {
        Counts {
            topics: self.resources.len(),
            partitions: self.resources.iter().map(|r| r.configs.len()).sum(),
            ..Counts::default()
        }
    }

    async fn handle(
        storage: Self::Needs,
        request: AlterConfigsRequest,
        ctx: &RequestContext,
    ) -> AlterConfigsResponse {
        let mut responses = Vec::with_capacity(request.resources.len());
        for resource in request.resources {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let allowed = ctx.authorize_configs(
                Operation::AlterConfigs,
                resource.resource_type,
                &resource.resource_name,
            );
            let outcome = match (allowed, resource.resource_type) {
                (Err(error), _) => Err((error, error.to_string())),
                (Ok(()), TOPIC) => {
                    let changes: Result<Vec<_>, String> = resource
                        .configs
                        .iter()
                        .map(|c| match &c.value {
                            Some(value) => Ok((c.name.to_string(), Op::Set(value.to_string()))),
                            None => {
                                let message =
                                    format!("Null value not supported for : {}", c.name.as_str());
                                topic_config::log_refusal(
                                    &resource.resource_name,
                                    &c.name,
                                    None,
                                    &message,
                                );
                                Err(message)
                            }
                        })
                        .collect();
                    match changes {
                        Err(message) => Err((ResponseError::InvalidConfig, message)),
                        Ok(changes) => {
                            let owner = storage.clone();
                            let name = resource.resource_name.to_string();
                            let validate_only = request.validate_only;
                            crate::blocking::spawn(move || {
                                alter_topic(&owner, &name, &changes, true, validate_only)
                            })
                            .await
                            .unwrap_or_else(|e| {
                                Err((
                                    ResponseError::UnknownServerError,
                                    format!("altering the topic's configs failed: {e}"),
                                ))
                            })
                        }
                    }
                }
                (Ok(()), BROKER) => Err((
                    ResponseError::InvalidRequest,
                    "broker configs are altered with IncrementalAlterConfigs: the cluster-wide \
                     defaults (--entity-default) of log.retention.ms, log.retention.bytes, \
                     log.segment.bytes, log.roll.ms, message.max.bytes and \
                     log.index.interval.bytes; the others are lograil's static flags"
                        .to_string(),
                )),
                (Ok(()), other) => Err((
                    ResponseError::InvalidRequest,
                    format!("altering configs of resource type {other} is not supported"),
                )),
            };
            responses.push(match outcome {
                Ok(()) => response,
                Err((error, message)) => response
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            });
        }
        AlterConfigsResponse::default().with_responses(responses)
    }

    fn throttle_time_ms(response: &mut AlterConfigsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &AlterConfigsResponse, f: &mut dyn FnMut(i16)) {
        r.responses.iter().for_each(|c| f(c.error_code))
    }
}
