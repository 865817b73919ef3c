//! CreatePartitions, versions 0–3: grows a topic (`kafka-topics --alter --partitions N`). The
//! new partitions are empty, with their own directories and first segments; keys move as in
//! Kafka (the producer's partitioner sees the new count at its next metadata refresh).
//!
//! As Kafka: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a count that is not larger than
//! the current one is INVALID_PARTITIONS; a topic named twice in one request is
//! INVALID_REQUEST; `validate_only` checks and changes nothing. The limits of CreateTopics
//! apply: more than `--max-partitions-per-request` new partitions in one request, or past
//! `max.broker.partitions`, is POLICY_VIOLATION; past 100,000 in a topic INVALID_PARTITIONS.
//! Deviations: manual assignments are accepted only when every new partition is on this
//! node (there is no other), otherwise INVALID_REPLICA_ASSIGNMENT; internal topics
//! (`__consumer_offsets`, whose partition count places groups) are not grown
//! (INVALID_REQUEST). Authorization: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED.

use std::collections::HashMap;
use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::{topics_and_partitions, Counts};
use super::errors;
use super::Handler;
use super::RequestContext;
use crate::broker::{Admin, Storage};
use crate::config::BrokerConfig;

impl Handler for CreatePartitionsRequest {
    const SERVED: (i16, i16) = (0, 3);
    type Needs = (Arc<BrokerConfig>, Arc<Storage>, Arc<Admin>);

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.assignments.as_ref().map_or(0, Vec::len))
    }

    async fn handle(
        (broker_config, storage, admin): Self::Needs,
        request: CreatePartitionsRequest,
        ctx: &RequestContext,
    ) -> CreatePartitionsResponse {
        let mut named: HashMap<String, usize> = HashMap::new();
        for topic in &request.topics {
            *named.entry(topic.name.to_string()).or_default() += 1;
        }
        let new_partitions: u64 = request
            .topics
            .iter()
            .filter_map(|t| {
                let current = storage.log.topic(&t.name)?.partitions().len() as u64;
                Some(u64::try_from(t.count).unwrap_or(0).saturating_sub(current))
            })
            .sum();
        let per_request = u64::from(broker_config.limits.max_partitions_per_request);
        let (owner, ctx) = (
            (broker_config.clone(), storage.clone(), admin.clone()),
            ctx.clone(),
        );
        let validate_only = request.validate_only;
        let results = crate::blocking::map_each(
            request.topics,
            move |topic| {
                let name = topic.name.to_string();
                let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
                let outcome = if !ctx.authorize_topic(Operation::Alter, &name) {
                    Err((
                        ResponseError::TopicAuthorizationFailed,
                        "The topic authorization is failed.".to_string(),
                    ))
                } else if named.get(&name).copied().unwrap_or(0) > 1 {
                    Err((
                        ResponseError::InvalidRequest,
                        format!("topic {name} is named more than once in the request"),
                    ))
                } else if new_partitions > per_request {
                    Err((
                        ResponseError::PolicyViolation,
                        format!(
                            "Excessively large number of partitions per request: \
                                 {new_partitions} requested, limit {per_request} \
                                 (--max-partitions-per-request)."
                        ),
                    ))
                } else {
                    grow(&owner.0, &owner.1, &owner.2, &name, &topic, validate_only)
                };
                match outcome {
                    Ok(()) => result,
                    Err((error, message)) => result
                        .with_error_code(error.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                }
            },
            |topic| {
                CreatePartitionsTopicResult::default()
                    .with_name(topic.name)
                    .with_error_code(ResponseError::UnknownServerError.code())
            },
        )
        .await;
        CreatePartitionsResponse::default().with_results(results)
    }

    fn throttle_time_ms(response: &mut CreatePartitionsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &CreatePartitionsResponse, f: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|t| f(t.error_code))
    }
}

fn grow(
    broker_config: &BrokerConfig,
    storage: &Storage,
    admin: &Admin,
    name: &str,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let Some(existing) = storage.log.topic(name) else {
        let error = match storage.log.offline_reason(name) {
            Some(reason) => (
                ResponseError::KafkaStorageError,
                format!("topic {name} is offline: {reason}"),
            ),
            None => (
                ResponseError::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            ),
        };
        return Err(error);
    };
    if crate::broker::Storage::is_internal(name) {
        return Err((
            ResponseError::InvalidRequest,
            format!("the partition count of internal topic {name} is fixed"),
        ));
    }
    let current = existing.partitions().len() as i64;
    let requested = i64::from(topic.count);
    if requested < current {
        return Err((
            ResponseError::InvalidPartitions,
            format!(
                "Topic currently has {current} partitions, which is higher than the requested \
                 {requested}."
            ),
        ));
    }
    if requested == current {
        return Err((
            ResponseError::InvalidPartitions,
            format!("Topic already has {current} partitions."),
        ));
    }
    let count = match u32::try_from(requested) {
        Ok(n) if n <= log_core::MAX_PARTITIONS => n,
        _ => {
            return Err((
                ResponseError::InvalidPartitions,
                format!(
                    "{requested} partitions is over the limit of {}",
                    log_core::MAX_PARTITIONS
                ),
            ))
        }
    };
    if let Some(assignments) = &topic.assignments {
        let node = broker_config.node_id;
        let added = (requested - current) as usize;
        if assignments.len() != added
            || assignments
                .iter()
                .any(|a| a.broker_ids.iter().map(|b| b.0).ne([node]))
        {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "{added} new partitions need {added} assignments, each of this one broker \
                     ([{node}])"
                ),
            ));
        }
    }
    let done = if validate_only {
        admin.check_room(count - current as u32)
    } else {
        admin.add_partitions(name, count).map(|_| {
            tracing::info!(topic = name, from = current, to = count, "added partitions");
        })
    };
    done.map_err(|e| (errors::create(&e), e.to_string()))
}
