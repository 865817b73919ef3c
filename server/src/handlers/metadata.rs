//! Metadata, versions 0–12. lograil is a single broker: it leads every partition, its replica
//! set is itself, leader epochs are -1 (unknown) and topic ids are zero (topics have no ids
//! yet). Missing topics are auto-created when both the broker (`--auto-create-topics`) and the
//! request (v4+ `allow_auto_topic_creation`) allow it.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use log_core::Topic;

use super::errors;
use super::RequestContext;
use crate::broker::Broker;

/// "Not requested" for the authorized-operations fields.
const OPERATIONS_OMITTED: i32 = i32::MIN;

pub async fn handle(
    broker: &Arc<Broker>,
    request: MetadataRequest,
    ctx: &RequestContext,
) -> Option<MetadataResponse> {
    let node = BrokerId(broker.config.node_id);
    let names: Vec<String> = match &request.topics {
        // v0: an empty list means every topic; v1+: null means every topic.
        Some(topics) if !(ctx.version == 0 && topics.is_empty()) => topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
            .collect(),
        // Every topic, offline ones included (they answer KAFKA_STORAGE_ERROR).
        _ => broker
            .log
            .topics()
            .iter()
            .map(|t| t.name().to_string())
            .chain(
                broker
                    .log
                    .offline_topics()
                    .into_iter()
                    .map(|(name, _)| name),
            )
            .collect(),
    };
    let create =
        broker.config.auto_create_topics && (ctx.version < 4 || request.allow_auto_topic_creation);
    let topics = names
        .into_iter()
        .map(|name| {
            let response = MetadataResponseTopic::default()
                .with_is_internal(Broker::is_internal(&name))
                .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                .with_topic_authorized_operations(OPERATIONS_OMITTED);
            match broker.topic_or_create(&name, create) {
                Ok(topic) => response.with_partitions(partitions(&topic, node)),
                Err(e) => response.with_error_code(errors::topic(&e).code()),
            }
        })
        .collect();
    let broker_entry = MetadataResponseBroker::default()
        .with_node_id(node)
        .with_host(StrBytes::from_string(broker.host.clone()))
        .with_port(broker.port);
    Some(
        MetadataResponse::default()
            .with_brokers(vec![broker_entry])
            .with_cluster_id(Some(StrBytes::from_string(broker.cluster_id.clone())))
            .with_controller_id(node)
            .with_topics(topics)
            .with_cluster_authorized_operations(OPERATIONS_OMITTED),
    )
}

fn partitions(topic: &Topic, node: BrokerId) -> Vec<MetadataResponsePartition> {
    (0..)
        .zip(topic.partitions())
        .map(|(index, _)| {
            MetadataResponsePartition::default()
                .with_error_code(ResponseError::try_from_code(0).map_or(0, |e| e.code()))
                .with_partition_index(index)
                .with_leader_id(node)
                .with_leader_epoch(-1)
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect()
}
