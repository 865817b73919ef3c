//! CreateTopics, versions 2–5. `num_partitions = -1` takes `--default-partitions`; the
//! replication factor must be -1 or 1 (one broker); manual replica assignments are refused.
//! Configs use Kafka's names (see `config::set_topic_config`); one lograil cannot honour is
//! INVALID_CONFIG. `validate_only` checks everything and creates nothing.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::TopicConfig;

use super::describe_configs::TOPIC_CONFIG_SOURCE;
use super::errors;
use super::RequestContext;
use crate::broker::Broker;
use crate::config::set_topic_config;

pub async fn handle(
    broker: &Arc<Broker>,
    request: CreateTopicsRequest,
    _: &RequestContext,
) -> Option<CreateTopicsResponse> {
    let owner = broker.clone();
    let validate_only = request.validate_only;
    let results = tokio::task::spawn_blocking(move || {
        request
            .topics
            .into_iter()
            .map(|topic| create(&owner, topic, validate_only))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    Some(CreateTopicsResponse::default().with_topics(results))
}

fn create(broker: &Broker, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult {
    let name = topic.name.to_string();
    let result = CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_num_partitions(-1)
        .with_replication_factor(-1);
    let fail = |error: ResponseError, message: String| {
        result
            .clone()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if let Err(e) = log_core::validate_name(&name) {
        return fail(ResponseError::InvalidTopicException, e.to_string());
    }
    if !matches!(topic.replication_factor, -1 | 1) {
        return fail(
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} on a single broker",
                topic.replication_factor
            ),
        );
    }
    if !topic.assignments.is_empty() {
        return fail(
            ResponseError::InvalidReplicaAssignment,
            "manual replica assignment is not supported".into(),
        );
    }
    let partitions = match topic.num_partitions {
        -1 => broker.config.default_partitions,
        n => match u32::try_from(n) {
            Ok(n) if (1..=log_core::MAX_PARTITIONS).contains(&n) => n,
            _ => return fail(ResponseError::InvalidPartitions, format!("{n} partitions")),
        },
    };
    let mut config: TopicConfig = broker.config.topic_defaults.clone();
    for c in &topic.configs {
        let value = c.value.as_deref().unwrap_or("-1");
        if let Err(e) = set_topic_config(&mut config, &c.name, value) {
            return fail(ResponseError::InvalidConfig, e.to_string());
        }
    }
    if broker.log.topic(&name).is_some() {
        return fail(
            ResponseError::TopicAlreadyExists,
            format!("topic {name} already exists"),
        );
    }
    if !validate_only {
        if let Err(e) = broker.log.create_topic(&name, partitions, config.clone()) {
            return fail(errors::topic(&e), e.to_string());
        }
        tracing::info!(topic = %name, partitions, "created topic");
    }
    let configs = config
        .entries()
        .into_iter()
        .map(|(k, v)| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(k))
                .with_value(Some(StrBytes::from_string(v)))
                .with_config_source(TOPIC_CONFIG_SOURCE)
        })
        .collect();
    result
        .with_num_partitions(i32::try_from(partitions).unwrap_or(i32::MAX))
        .with_replication_factor(1)
        .with_configs(Some(configs))
}
