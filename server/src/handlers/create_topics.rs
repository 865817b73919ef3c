//! CreateTopics, versions 2–5. `num_partitions = -1` takes `--default-partitions`; the
//! replication factor must be -1 or 1 (one broker). Manual replica assignments are checked as
//! Kafka's controller checks them, with its errors and messages: `num_partitions` and the
//! replication factor both -1 (else INVALID_REQUEST), each partition once, ids 0..n, each
//! replica list non-empty, of known brokers (node 1 only), without repeats, all of one length
//! (else INVALID_REPLICA_ASSIGNMENT).
//! A topic that exists answers TOPIC_ALREADY_EXISTS before anything else of its request is
//! checked (as Kafka's controller: a re-create with configs lograil refuses is still "already
//! exists"). Configs are Kafka 4.4's (see `topic_config.rs`); a bad value, or one lograil
//! cannot honour, is INVALID_CONFIG, logged. `validate_only` checks everything and creates
//! nothing. The answer's configs are the topic's, each as DescribeConfigs lists it.
//!
//! Limits, answered as Kafka does with POLICY_VIOLATION: a request for more partitions in all
//! than `--max-partitions-per-request` (Kafka's fixed 10,000) fails every one of its topics;
//! a topic that would take the broker past `max.broker.partitions` (KIP-578) fails. The files
//! are made on the blocking pool, and no lock that other requests need is held meanwhile.
//!
//! Authorization, as Kafka: CREATE on the cluster, or on the topic, else TOPIC_AUTHORIZATION_FAILED.
//! A topic created without DESCRIBE_CONFIGS on it is answered without its configs, partitions
//! and replication factor, and `topic_config_error_code` TOPIC_AUTHORIZATION_FAILED.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::TopicConfig;

use super::bounds::{topics_and_partitions, Counts};
use super::describe_configs::config_source;
use super::errors;
use super::Handler;
use super::RequestContext;
use crate::broker::{Admin, Storage};
use crate::config::BrokerConfig;
use crate::topic_config;

impl Handler for CreateTopicsRequest {
    const SERVED: (i16, i16) = (2, 5);
    type Needs = (Arc<BrokerConfig>, Arc<Storage>, Arc<Admin>);

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.assignments.len())
    }

    async fn handle(
        (broker_config, storage, admin): Self::Needs,
        request: CreateTopicsRequest,
        ctx: &RequestContext,
    ) -> CreateTopicsResponse {
        let requested = requested_partitions(&broker_config, &request.topics);
        let per_request = broker_config.limits.max_partitions_per_request;
        if requested > u64::from(per_request) {
            // Kafka's answer (and message) for a request over its fixed 10,000.
            let message = format!(
                "Excessively large number of partitions per request: {requested} requested, \
                 limit {per_request} (--max-partitions-per-request)."
            );
            let results = request
                .topics
                .into_iter()
                .map(|topic| {
                    CreatableTopicResult::default()
                        .with_name(topic.name)
                        .with_num_partitions(-1)
                        .with_replication_factor(-1)
                        .with_error_code(ResponseError::PolicyViolation.code())
                        .with_error_message(Some(StrBytes::from_string(message.clone())))
                })
                .collect();
            return CreateTopicsResponse::default().with_topics(results);
        }
        let (owner, ctx) = (
            (broker_config.clone(), storage.clone(), admin.clone()),
            ctx.clone(),
        );
        let validate_only = request.validate_only;
        let cluster_create = ctx.authorize_cluster(Operation::Create);
        let results = crate::blocking::map_each(
            request.topics,
            move |topic| {
                let allowed = Allowed {
                    create: cluster_create || ctx.authorize_topic(Operation::Create, &topic.name),
                    describe_configs: ctx.authorize_topic(Operation::DescribeConfigs, &topic.name),
                };
                create(&owner.0, &owner.1, &owner.2, topic, validate_only, allowed)
            },
            |topic| {
                CreatableTopicResult::default()
                    .with_name(topic.name)
                    .with_num_partitions(-1)
                    .with_replication_factor(-1)
                    .with_error_code(ResponseError::UnknownServerError.code())
            },
        )
        .await;
        CreateTopicsResponse::default().with_topics(results)
    }

    fn throttle_time_ms(response: &mut CreateTopicsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &CreateTopicsResponse, f: &mut dyn FnMut(i16)) {
        r.topics.iter().for_each(|t| f(t.error_code))
    }
}

/// Partitions a request asks for, all its topics together, as Kafka counts them.
fn requested_partitions(broker_config: &BrokerConfig, topics: &[CreatableTopic]) -> u64 {
    topics
        .iter()
        .map(|t| match (t.assignments.len(), t.num_partitions) {
            (0, -1) => u64::from(broker_config.default_partitions),
            (0, n) => u64::try_from(n).unwrap_or(0),
            (assigned, _) => assigned as u64,
        })
        .sum()
}

/// The partition count of a topic created with manual replica assignments, checked as Kafka's
/// controller checks them (`ReplicationControlManager.createTopic`), with its messages. The
/// only registered broker is this one, `node`.
fn assigned_partitions(topic: &CreatableTopic, node: i32) -> Result<u32, (ResponseError, String)> {
    let invalid = |message: String| Err((ResponseError::InvalidReplicaAssignment, message));
    if topic.replication_factor != -1 {
        return Err((
            ResponseError::InvalidRequest,
            "A manual partition assignment was specified, but replication factor was not set \
             to -1."
                .into(),
        ));
    }
    if topic.num_partitions != -1 {
        return Err((
            ResponseError::InvalidRequest,
            "A manual partition assignment was specified, but numPartitions was not set to -1."
                .into(),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(topic.assignments.len());
    let mut replicas: Option<usize> = None;
    for assignment in &topic.assignments {
        let index = assignment.partition_index;
        if !seen.insert(index) {
            return invalid(format!(
                "Found multiple manual partition assignments for partition {index}"
            ));
        }
        let mut ids: Vec<i32> = assignment.broker_ids.iter().map(|b| b.0).collect();
        if ids.is_empty() {
            return invalid(
                "The manual partition assignment includes an empty replica list.".into(),
            );
        }
        ids.sort_unstable();
        for (i, id) in ids.iter().enumerate() {
            if *id != node {
                return invalid(format!(
                    "The manual partition assignment includes broker {id}, but no such broker \
                     is registered."
                ));
            }
            if i > 0 && ids[i - 1] == *id {
                return invalid(format!(
                    "The manual partition assignment includes the broker {id} more than once."
                ));
            }
        }
        if let Some(previous) = replicas.filter(|r| *r != ids.len()) {
            return invalid(format!(
                "The manual partition assignment includes a partition with {} replica(s), but \
                 this is not consistent with previous partitions, which have {previous} \
                 replica(s).",
                ids.len()
            ));
        }
        replicas = Some(ids.len());
    }
    let count = seen.len();
    if (0..count).any(|i| i32::try_from(i).map_or(true, |i| !seen.contains(&i))) {
        return invalid("partitions should be a consecutive 0-based integer sequence".into());
    }
    match u32::try_from(count) {
        Ok(n) if n <= log_core::MAX_PARTITIONS => Ok(n),
        _ => Err((
            ResponseError::InvalidPartitions,
            format!("{count} partitions"),
        )),
    }
}

/// What the request may do with one of its topics.
struct Allowed {
    create: bool,
    /// See the configs it was created with.
    describe_configs: bool,
}

/// Creates a topic the broker itself needs (a streams group's internal topic), as CreateTopics
/// would with CREATE allowed. `Some((topic, why))` when it was not created, unless it exists.
pub(super) fn create_internal(
    broker_config: &BrokerConfig,
    storage: &Storage,
    admin: &Admin,
    topic: CreatableTopic,
) -> Option<(String, String)> {
    let allowed = Allowed {
        create: true,
        describe_configs: false,
    };
    let result = create(broker_config, storage, admin, topic, false, allowed);
    let fine = [0, ResponseError::TopicAlreadyExists.code()];
    (!fine.contains(&result.error_code)).then(|| {
        let why = result
            .error_message
            .map(|m| m.to_string())
            .unwrap_or_default();
        (result.name.to_string(), why)
    })
}

fn create(
    broker_config: &BrokerConfig,
    storage: &Storage,
    admin: &Admin,
    topic: CreatableTopic,
    validate_only: bool,
    allowed: Allowed,
) -> CreatableTopicResult {
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
    if !allowed.create {
        return fail(
            ResponseError::TopicAuthorizationFailed,
            "Authorization failed.".to_string(),
        );
    }
    if let Err(e) = log_core::validate_name(&name) {
        return fail(ResponseError::InvalidTopicException, e.to_string());
    }
    // Before anything else of the request is checked, as Kafka's controller does: a tool that
    // creates a topic if missing learns it is there, whatever configs it asks for.
    if storage.log.topic(&name).is_some() {
        return fail(
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        );
    }
    let partitions = match partition_count(broker_config, &topic) {
        Ok(n) => n,
        Err((error, message)) => return fail(error, message),
    };
    let defaults = storage.topic_defaults();
    let config = match configured(&defaults, &name, &topic) {
        Ok(config) => config,
        Err(e) => return fail(ResponseError::InvalidConfig, e),
    };
    let created = if validate_only {
        admin.check_room(partitions)
    } else {
        admin
            .create_topic(&name, partitions, config.clone())
            .map(|_| tracing::info!(topic = %name, partitions, "created topic"))
    };
    if let Err(e) = created {
        return fail(errors::create(&e), e.to_string());
    }
    if !allowed.describe_configs {
        return result.with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code());
    }
    let configs = topic_config::describe(&config, &defaults)
        .into_iter()
        .map(|d| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(d.name))
                .with_value(Some(StrBytes::from_string(d.value)))
                .with_config_source(config_source(d.overridden))
        })
        .collect();
    result
        .with_num_partitions(i32::try_from(partitions).unwrap_or(i32::MAX))
        .with_replication_factor(1)
        .with_configs(Some(configs))
}

/// The topic's partition count: asked (or `--default-partitions`) on one replica, or its
/// manual assignments'.
fn partition_count(
    broker_config: &BrokerConfig,
    topic: &CreatableTopic,
) -> Result<u32, (ResponseError, String)> {
    if !topic.assignments.is_empty() {
        return assigned_partitions(topic, broker_config.node_id);
    }
    if !matches!(topic.replication_factor, -1 | 1) {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} on a single broker",
                topic.replication_factor
            ),
        ));
    }
    match topic.num_partitions {
        -1 => Ok(broker_config.default_partitions),
        n => match u32::try_from(n) {
            Ok(n) if (1..=log_core::MAX_PARTITIONS).contains(&n) => Ok(n),
            _ => Err((ResponseError::InvalidPartitions, format!("{n} partitions"))),
        },
    }
}

/// The topic's config: the broker's defaults with the request's configs set on them; a
/// refused one is logged and its message returned.
fn configured(
    defaults: &TopicConfig,
    name: &str,
    topic: &CreatableTopic,
) -> Result<TopicConfig, String> {
    let mut config: TopicConfig = defaults.clone();
    for c in &topic.configs {
        let value = c.value.as_deref().unwrap_or("-1");
        if let Err(e) = topic_config::set(&mut config, &c.name, value) {
            topic_config::log_refusal(name, &c.name, Some(value), &e);
            return Err(e.to_string());
        }
    }
    Ok(config)
}
