//! IncrementalAlterConfigs, versions 0–1, all of a resource's changes or none: SET, DELETE,
//! and APPEND / SUBTRACT for Kafka's LIST topic configs (`cleanup.policy` and the replication
//! throttles; the list that results is checked as a SET of it), with Kafka's semantics (see
//! `apply`):
//!
//! - topics (resource type 2): Kafka 4.4's topic configs (see `topic_config.rs`), persisted
//!   in the topic's `.topic` file and in effect at once, without a restart (`retention.ms` at
//!   the next retention pass, `segment.bytes` for the next segment, `flush.messages`/`flush.ms`
//!   from the next append). DELETE puts a config back to the broker's default (Kafka's for
//!   the configs lograil keeps without acting on); a DELETE of a name lograil does not know
//!   changes nothing and is no error, as in Kafka (MirrorMaker 2's config sync relies on it).
//!   A SET of an unknown name, a bad value or one lograil cannot honour is INVALID_CONFIG,
//!   logged; an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a
//!   config named twice INVALID_REQUEST (Kafka's "duplicate config keys"). Internal topics'
//!   configs are lograil's own (INVALID_REQUEST).
//! - share groups (resource type GROUP, 32): Kafka's `group.share.*` configs,
//!   `share.auto.offset.reset` and KIP-1191's `errors.deadletterqueue.topic.name` (any name, as
//!   Kafka 4.4: the dead-letter topic is checked when a record is dead-lettered) and
//!   `errors.deadletterqueue.copy.record.enable` (true or false), and streams groups'
//!   `streams.session.timeout.ms`, `streams.heartbeat.interval.ms`,
//!   `streams.num.standby.replicas` and `streams.initial.rebalance.delay.ms`
//!   (`groups::streams::config`), all persisted in `__share_group_state`.
//! - the cluster-wide broker defaults (resource type 4, name "", Kafka's `--entity-default`):
//!   `log.retention.ms`, `log.retention.bytes`, `log.segment.bytes`, `log.roll.ms`,
//!   `message.max.bytes`, `log.index.interval.bytes`, `log.flush.interval.messages`,
//!   `log.flush.interval.ms` (see `broker_defaults.rs`); topics with the
//!   old default follow the new one. A bad value, or any other broker config, is
//!   INVALID_REQUEST (Kafka's code for a bad broker config).
//!
//! Deviations: a per-broker resource (type 4 named by a node id) is refused with
//! INVALID_REQUEST: lograil's other broker configs are its command-line flags, static. APPEND or
//! SUBTRACT on a config that is not a list is INVALID_CONFIG, as in Kafka. Share group configs
//! take SET and DELETE only.
//!
//! Authorization, as Kafka: ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED), the
//! group (GROUP_AUTHORIZATION_FAILED), or the cluster for the broker
//! (CLUSTER_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::{ConfigError, TopicConfig};

use super::bounds::Counts;
use super::Handler;
use super::{errors, RequestContext};
use crate::broker::Storage;
use crate::broker_defaults::{follow, DefaultsError};
use crate::shares::Pending;
use crate::shares::Shares;
use crate::topic_config::{self, Type};

pub const GROUP: i8 = 32;
pub const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

impl Handler for IncrementalAlterConfigsRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = (Arc<Storage>, Arc<Shares>);

    fn counts(&self) -> Counts {
        Counts {
            topics: self.resources.len(),
            partitions: self.resources.iter().map(|r| r.configs.len()).sum(),
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, shares): Self::Needs,
        request: IncrementalAlterConfigsRequest,
        ctx: &RequestContext,
    ) -> IncrementalAlterConfigsResponse {
        let mut pending = Pending::default();
        let mut responses = Vec::with_capacity(request.resources.len());
        for resource in request.resources {
            if let Err(error) = ctx.authorize_configs(
                Operation::AlterConfigs,
                resource.resource_type,
                &resource.resource_name,
            ) {
                responses.push(
                    AlterConfigsResourceResponse::default()
                        .with_resource_type(resource.resource_type)
                        .with_resource_name(resource.resource_name)
                        .with_error_code(error.code())
                        .with_error_message(Some(StrBytes::from_string(error.to_string()))),
                );
                continue;
            }
            let is_broker = resource.resource_type == BROKER && resource.resource_name.is_empty();
            if is_broker || resource.resource_type == TOPIC {
                responses
                    .push(alter_broker_or_topic(&storage, resource, request.validate_only).await);
                continue;
            }
            responses.push(alter_group(
                &shares,
                resource,
                request.validate_only,
                &mut pending,
            ));
        }
        pending.durable(&storage.syncer).await;
        IncrementalAlterConfigsResponse::default().with_responses(responses)
    }

    fn throttle_time_ms(response: &mut IncrementalAlterConfigsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &IncrementalAlterConfigsResponse, f: &mut dyn FnMut(i16)) {
        r.responses.iter().for_each(|c| f(c.error_code))
    }
}

/// The broker's topic defaults (the broker resource named "") or one topic's configs, on
/// the blocking pool.
async fn alter_broker_or_topic(
    storage: &Arc<Storage>,
    resource: AlterConfigsResource,
    validate_only: bool,
) -> AlterConfigsResourceResponse {
    let response = AlterConfigsResourceResponse::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let is_topic = resource.resource_type == TOPIC;
    let topic = is_topic.then_some(resource.resource_name.as_str());
    let changes = match topic_changes(&resource.configs, topic) {
        Ok(changes) => changes,
        Err((error, message)) => {
            return response
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message)));
        }
    };
    let owner = storage.clone();
    let name = resource.resource_name.to_string();
    let outcome = crate::blocking::spawn(move || {
        if is_topic {
            alter_topic(&owner, &name, &changes, false, validate_only)
        } else {
            let changes: Vec<_> = changes
                .into_iter()
                .map(|(name, op)| match op {
                    Op::Set(value) => (name, Some(value)),
                    // Only SET and DELETE come for the broker (`topic_changes`).
                    _ => (name, None),
                })
                .collect();
            alter_broker_defaults(&owner, &changes, validate_only)
        }
    })
    .await
    .unwrap_or_else(|e| {
        let what = if is_topic {
            "the topic's configs"
        } else {
            "the broker defaults"
        };
        Err((
            ResponseError::UnknownServerError,
            format!("altering {what} failed: {e}"),
        ))
    });
    match outcome {
        Ok(()) => response,
        Err((error, message)) => response
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    }
}

/// A share group's configs (or a refusal for a resource type not served).
fn alter_group(
    shares: &Arc<Shares>,
    resource: AlterConfigsResource,
    validate_only: bool,
    pending: &mut Pending,
) -> AlterConfigsResourceResponse {
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
            match resource.resource_type {
                BROKER => "lograil's per-broker configs are its command-line flags, static: \
                           only the cluster-wide defaults (--entity-default) of log.retention.ms, \
                           log.retention.bytes, log.segment.bytes, log.roll.ms, \
                           message.max.bytes and log.index.interval.bytes can be altered"
                    .to_string(),
                other => format!("altering configs of resource type {other} is not supported"),
            },
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
    if validate_only {
        if let Err(e) = shares.check_configs(&resource.resource_name, &changes) {
            return fail(ResponseError::InvalidConfig, e.to_string());
        }
        return response;
    }
    match shares.alter_configs(&resource.resource_name, &changes, pending) {
        Ok(()) => response,
        Err(e) => fail(ResponseError::InvalidConfig, e.to_string()),
    }
}

/// One config change, as IncrementalAlterConfigs' operations name them.
#[derive(Clone, Debug)]
pub(super) enum Op {
    Set(String),
    /// Back to the default.
    Delete,
    /// Items added to a LIST config's value.
    Append(String),
    /// Items removed from a LIST config's value.
    Subtract(String),
}

/// One config change: its name and what to do.
type Change = (String, Op);

/// A topic's (`topic`) or the broker defaults' changes, or why not (error and message). A
/// config named twice in one resource is INVALID_REQUEST, as in Kafka; APPEND and SUBTRACT
/// only apply to a topic's LIST configs (see [`apply`]). A refused topic config is logged.
fn topic_changes(
    configs: &[AlterableConfig],
    topic: Option<&str>,
) -> Result<Vec<Change>, (ResponseError, String)> {
    let mut names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err((
            ResponseError::InvalidRequest,
            "Error due to duplicate config keys".into(),
        ));
    }
    let mut changes = Vec::with_capacity(configs.len());
    for config in configs {
        let name = config.name.to_string();
        let op = config.config_operation;
        let value = config.value.as_ref().map(ToString::to_string);
        let refused = |error: ResponseError, message: String| {
            if let Some(topic) = topic {
                topic_config::log_refusal(topic, &name, value.as_deref(), &message);
            }
            Err((error, message))
        };
        let change = match (op, value.clone()) {
            (SET, Some(value)) => Op::Set(value),
            (SET, None) => {
                return refused(
                    ResponseError::InvalidConfig,
                    format!("Null value not supported for : {name}"),
                )
            }
            (DELETE, _) => Op::Delete,
            (APPEND | SUBTRACT, value) => {
                let verb = if op == APPEND { "APPEND" } else { "SUBTRACT" };
                let list = topic.is_some() && topic_config::kind(&name) == Some(Type::List);
                if !list {
                    return refused(
                        ResponseError::InvalidConfig,
                        format!("Can't {verb} to key {name} because its type is not LIST."),
                    );
                }
                let Some(value) = value else {
                    return refused(
                        ResponseError::InvalidRequest,
                        format!("Null value not supported for : {name}"),
                    );
                };
                if op == APPEND {
                    Op::Append(value)
                } else {
                    Op::Subtract(value)
                }
            }
            (other, _) => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other} for {name}"),
                ))
            }
        };
        changes.push((name, change));
    }
    Ok(changes)
}

/// Applies one change to a topic's `config`. APPEND and SUBTRACT apply to a LIST config as
/// Kafka's controller applies them (`ConfigurationControlManager`): the list is the topic's
/// value (or the default), empty items dropped; APPEND adds each item not already there, in
/// order; SUBTRACT removes each item given (one that is absent is no error). The list that
/// results is then set, and checked, as a SET of it would be.
fn apply(
    config: &mut TopicConfig,
    defaults: &TopicConfig,
    name: &str,
    op: &Op,
) -> Result<(), ConfigError> {
    let (items_given, append) = match op {
        Op::Set(value) => return topic_config::set(config, name, value),
        Op::Delete => return topic_config::reset(config, defaults, name),
        Op::Append(items) => (items, true),
        Op::Subtract(items) => (items, false),
    };
    let before = topic_config::value(config, name)
        .ok_or_else(|| ConfigError::Unknown { name: name.into() })?;
    let mut list: Vec<&str> = self::items(&before).collect();
    for item in self::items(items_given) {
        let at = list.iter().position(|x| *x == item);
        match (append, at) {
            (true, None) => list.push(item),
            (false, Some(at)) => {
                list.remove(at);
            }
            _ => {}
        }
    }
    topic_config::set(config, name, &list.join(","))
}

/// A list config's items: split at commas, empty ones dropped (Kafka's `getParts`).
fn items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').filter(|item| !item.is_empty())
}

/// Alters topic `name`'s configs: each change sets a value, puts the default back or adds to or
/// removes from a list ([`apply`]); with `replace` (AlterConfigs) every config not named goes
/// back to the default. A refused value is logged. All or nothing; persisted and in effect at once unless `validate_only`.
/// Blocking file work.
pub(super) fn alter_topic(
    storage: &Arc<Storage>,
    name: &str,
    changes: &[Change],
    replace: bool,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let Some(topic) = storage.log.topic(name) else {
        return Err(match storage.log.offline_reason(name) {
            Some(reason) => (
                ResponseError::KafkaStorageError,
                format!("topic {name} is offline: {reason}"),
            ),
            None => (
                ResponseError::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            ),
        });
    };
    if crate::broker::Storage::is_internal(name) {
        return Err((
            ResponseError::InvalidRequest,
            format!("the configs of internal topic {name} are lograil's own"),
        ));
    }
    let defaults = &storage.topic_defaults();
    let mut config = if replace {
        defaults.clone()
    } else {
        topic.config()
    };
    for (key, op) in changes {
        if let Err(e) = apply(&mut config, defaults, key, op) {
            let value = match op {
                Op::Set(v) | Op::Append(v) | Op::Subtract(v) => Some(v.as_str()),
                Op::Delete => None,
            };
            topic_config::log_refusal(name, key, value, &e);
            return Err((ResponseError::InvalidConfig, e.to_string()));
        }
    }
    if validate_only {
        return Ok(());
    }
    storage
        .log
        .set_topic_config(name, config)
        .map_err(|e| (errors::topic(&e), e.to_string()))?;
    tracing::info!(
        topic = name,
        changes = changes.len(),
        "altered topic configs"
    );
    Ok(())
}

/// Alters the dynamic broker defaults (`--entity-type brokers --entity-default`), then moves
/// every topic that had the old default value to the new one. Blocking file work.
fn alter_broker_defaults(
    storage: &Arc<Storage>,
    changes: &[(String, Option<String>)],
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let _serial = storage.defaults.lock();
    let (before, after) = storage
        .defaults
        .alter(changes, validate_only)
        .map_err(|e| match e {
            DefaultsError::Io(_) => (ResponseError::KafkaStorageError, e.to_string()),
            // Kafka answers a bad broker config with INVALID_REQUEST.
            _ => (ResponseError::InvalidRequest, e.to_string()),
        })?;
    if validate_only {
        return Ok(());
    }
    for topic in storage.log.topics() {
        if crate::broker::Storage::is_internal(topic.name()) {
            continue;
        }
        if let Some(config) = follow(&topic.config(), &before, &after) {
            storage
                .log
                .set_topic_config(topic.name(), config)
                .map_err(|e| (errors::topic(&e), e.to_string()))?;
        }
    }
    tracing::info!(changes = changes.len(), "altered dynamic broker defaults");
    Ok(())
}
