//! DescribeConfigs, versions 1–4, for topics (resource type 2) and the broker (4), under Kafka's
//! config names. A topic config equal to the broker default is reported as a default
//! (source 5), any other as a topic override (source 1), so Kafka tooling lists overrides.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::broker::Broker;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
pub const TOPIC_CONFIG_SOURCE: i8 = 1;
const STATIC_BROKER_CONFIG_SOURCE: i8 = 4;
const DEFAULT_CONFIG_SOURCE: i8 = 5;

pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeConfigsRequest,
    _: &RequestContext,
) -> Option<DescribeConfigsResponse> {
    let defaults = broker.config.topic_defaults.entries();
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let entries: Vec<(&'static str, String, i8)> = match resource.resource_type {
                TOPIC => match broker.log.topic(&resource.resource_name) {
                    Some(topic) => topic
                        .config()
                        .entries()
                        .into_iter()
                        .map(|(k, v)| {
                            let default = defaults.iter().any(|(dk, dv)| *dk == k && *dv == v);
                            let source = if default {
                                DEFAULT_CONFIG_SOURCE
                            } else {
                                TOPIC_CONFIG_SOURCE
                            };
                            (k, v, source)
                        })
                        .collect(),
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(StrBytes::from_string(format!(
                                "topic {} does not exist",
                                resource.resource_name.as_str()
                            ))))
                    }
                },
                BROKER => defaults
                    .iter()
                    .map(|(k, v)| (*k, v.clone(), STATIC_BROKER_CONFIG_SOURCE))
                    .collect(),
                other => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "resource type {other} is not supported"
                        ))))
                }
            };
            // Null (or, leniently, an empty list) asks for every config.
            let wanted = resource
                .configuration_keys
                .as_ref()
                .filter(|keys| !keys.is_empty());
            let configs = entries
                .into_iter()
                .filter(|(k, _, _)| wanted.is_none_or(|keys| keys.iter().any(|w| w.as_str() == *k)))
                .map(|(k, v, source)| {
                    DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_static_str(k))
                        .with_value(Some(StrBytes::from_string(v)))
                        .with_read_only(resource.resource_type == BROKER)
                        .with_config_source(source)
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    Some(DescribeConfigsResponse::default().with_results(results))
}
