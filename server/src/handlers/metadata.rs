//! Metadata, versions 0–12. lograil is a single broker: it leads every partition, its replica
//! set is itself, leader epochs are -1 (unknown); every topic has its id (v10+; share groups
//! address topics by id). Missing topics are auto-created when both the broker (`--auto-create-topics`) and the
//! request (v4+ `allow_auto_topic_creation`) allow it: on the blocking pool, paced by
//! `--auto-create-topics-per-second` and within `max.broker.partitions`. A topic over the pace,
//! or being created by another request, is answered LEADER_NOT_AVAILABLE (clients retry), as
//! Kafka answers while it creates a topic; one over the partition limit POLICY_VIOLATION. An
//! offline topic (its files could not be opened) lists the partitions its directories show,
//! each KAFKA_STORAGE_ERROR with its replica offline; with none, the topic is
//! KAFKA_STORAGE_ERROR.
//!
//! Authorization, as Kafka: a topic asked for without DESCRIBE on it is TOPIC_AUTHORIZATION_FAILED
//! (by name: the name echoed, no id; by id: the id echoed, no name), whether it exists or
//! not; a listing of every topic leaves such topics out. A missing topic is auto-created only
//! with CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. KIP-430: the
//! topics' authorized operations when asked (v8+), the cluster's when asked (v8–10: DESCRIBE on
//! the cluster needed, else 0); without an authorizer every operation of the resource type.

use std::sync::Arc;
use std::time::Instant;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use log_core::{Topic, TopicError, Uuid};

use super::bounds::Counts;
use super::errors;
use super::Handler;
use super::RequestContext;
use crate::broker::{Admin, CreateError, Storage};
use crate::config::BrokerConfig;

/// "Not requested" for the authorized-operations fields.
const OPERATIONS_OMITTED: i32 = i32::MIN;

impl Handler for MetadataRequest {
    const SERVED: (i16, i16) = (0, 12);
    type Needs = (Arc<BrokerConfig>, Arc<str>, Arc<Storage>, Arc<Admin>);

    fn counts(&self) -> Counts {
        Counts {
            topics: self.topics.as_ref().map_or(0, Vec::len),
            ..Counts::default()
        }
    }

    async fn handle(
        (broker_config, cluster_id, storage, admin): Self::Needs,
        request: MetadataRequest,
        ctx: &RequestContext,
    ) -> MetadataResponse {
        let node = BrokerId(broker_config.node_id);
        let listing = !matches!(&request.topics, Some(t) if !(ctx.version == 0 && t.is_empty()));
        let Requested {
            names,
            unknown_ids,
            denied_ids,
        } = requested(&storage, &request, ctx);
        // Listed: only the DESCRIBE-able. Named: the others are refused without a lookup.
        let (names, denied): (Vec<String>, Vec<String>) = names
            .into_iter()
            .partition(|name| ctx.authorize_topic(Operation::Describe, name));
        let denied = if listing { Vec::new() } else { denied };
        let create = broker_config.auto_create_topics
            && (ctx.version < 4 || request.allow_auto_topic_creation);
        let may_create = |name: &str| {
            ctx.authorize_cluster(Operation::Create) || ctx.authorize_topic(Operation::Create, name)
        };
        let mut found: Vec<Found> = names
            .iter()
            .map(|name| lookup(&storage, &admin, name, create, may_create))
            .collect();
        create_missing(&admin, &names, &mut found).await;
        let unknown = unknown_ids
            .into_iter()
            .map(|id| refused_by_id(id, ResponseError::UnknownTopicId))
            .chain(
                denied_ids
                    .into_iter()
                    .map(|id| refused_by_id(id, ResponseError::TopicAuthorizationFailed)),
            );
        let denied = denied.into_iter().map(refused_by_name);
        let topic_operations = ctx.version >= 8 && request.include_topic_authorized_operations;
        let topics = names
            .into_iter()
            .zip(found)
            .map(|(name, topic)| {
                let operations = if topic_operations {
                    ctx.authorized_operations(ResourceType::Topic, &name)
                } else {
                    OPERATIONS_OMITTED
                };
                answer_topic(name, topic, operations, node)
            })
            .chain(unknown)
            .chain(denied)
            .collect();
        let broker_entry = MetadataResponseBroker::default()
            .with_node_id(node)
            .with_host(StrBytes::from_string(ctx.listener.host.clone()))
            .with_port(ctx.listener.port);

        MetadataResponse::default()
            .with_brokers(vec![broker_entry])
            .with_cluster_id(Some(StrBytes::from_string(cluster_id.to_string())))
            .with_controller_id(node)
            .with_topics(topics)
            .with_cluster_authorized_operations(ctx.cluster_operations(
                (8..=10).contains(&ctx.version) && request.include_cluster_authorized_operations,
            ))
    }

    fn throttle_time_ms(response: &mut MetadataResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &MetadataResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        for t in &r.topics {
            f(t.error_code);
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    }
}

/// A requested topic: there, refused, or to be auto-created.
enum Found {
    Topic(Arc<Topic>),
    /// A topic whose files could not be opened, with the partitions its directories show.
    Offline(u32),
    Error(ResponseError),
    ToCreate,
}

/// The topics a request names, by name, before DESCRIBE is checked on them.
struct Requested {
    /// Asked by name, or by an id DESCRIBE-able under its name; or every topic.
    names: Vec<String>,
    /// Asked by an id no topic has (answered UNKNOWN_TOPIC_ID).
    unknown_ids: Vec<Uuid>,
    /// Asked by id and not DESCRIBE-able: echoed by id only.
    denied_ids: Vec<Uuid>,
}

/// The topics asked for: by name, by id (v10+, as share consumers do; answered under their
/// names), or every topic, offline ones included (they answer KAFKA_STORAGE_ERROR).
fn requested(storage: &Arc<Storage>, request: &MetadataRequest, ctx: &RequestContext) -> Requested {
    let mut unknown_ids = Vec::new();
    let mut denied_ids = Vec::new();
    let names: Vec<String> = match &request.topics {
        // v0: an empty list means every topic; v1+: null means every topic.
        Some(topics) if !(ctx.version == 0 && topics.is_empty()) => topics
            .iter()
            .filter_map(|t| match &t.name {
                Some(name) => Some(name.to_string()),
                None => match storage.log.topic_by_id(t.topic_id) {
                    Some(topic) if !ctx.authorize_topic(Operation::Describe, topic.name()) => {
                        denied_ids.push(t.topic_id);
                        None
                    }
                    Some(topic) => Some(topic.name().to_string()),
                    None => {
                        unknown_ids.push(t.topic_id);
                        None
                    }
                },
            })
            .collect(),
        _ => storage
            .log
            .topics()
            .iter()
            .map(|t| t.name().to_string())
            .chain(
                storage
                    .log
                    .offline_topics()
                    .into_iter()
                    .map(|(name, _)| name),
            )
            .collect(),
    };
    Requested {
        names,
        unknown_ids,
        denied_ids,
    }
}

/// Creates the topics to create (a token taken for each) in one go off the async workers, each
/// replacing its [`Found::ToCreate`] in `found` (which follows `names`).
async fn create_missing(admin: &Arc<Admin>, names: &[String], found: &mut [Found]) {
    let missing: Vec<(usize, String)> = found
        .iter()
        .zip(names)
        .enumerate()
        .filter(|(_, (f, _))| matches!(f, Found::ToCreate))
        .map(|(i, (_, name))| (i, name.clone()))
        .collect();
    if missing.is_empty() {
        return;
    }
    let owner = admin.clone();
    let created = crate::blocking::spawn(move || {
        missing
            .into_iter()
            .map(|(i, name)| (i, auto_create(&owner, &name)))
            .collect::<Vec<_>>()
    })
    .await;
    match created {
        Ok(created) => {
            for (i, topic) in created {
                found[i] = topic;
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "topic auto-creation task failed");
            for f in found {
                if matches!(f, Found::ToCreate) {
                    *f = Found::Error(ResponseError::UnknownServerError);
                }
            }
        }
    }
}

/// A topic asked for by id and answered `error`: the id echoed, no name.
fn refused_by_id(id: Uuid, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_topic_id(id)
        .with_error_code(error.code())
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}

/// A topic asked for by name without DESCRIBE on it: the name echoed, no id.
fn refused_by_name(name: String) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name))))
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        .with_topic_authorized_operations(OPERATIONS_OMITTED)
}

/// A DESCRIBE-able topic's entry: its id and partitions, its offline partitions, or its error.
fn answer_topic(
    name: String,
    topic: Found,
    operations: i32,
    node: BrokerId,
) -> MetadataResponseTopic {
    let response = MetadataResponseTopic::default()
        .with_is_internal(crate::broker::Storage::is_internal(&name))
        .with_name(Some(TopicName(StrBytes::from_string(name))))
        .with_topic_authorized_operations(operations);
    match topic {
        Found::Topic(topic) => response
            .with_topic_id(topic.id())
            .with_partitions(partitions(&topic, node)),
        Found::Offline(count) => response.with_partitions(offline_partitions(count, node)),
        Found::Error(e) => response
            .with_error_code(e.code())
            .with_topic_authorized_operations(OPERATIONS_OMITTED),
        // Every topic to create was replaced by its outcome (create_missing).
        Found::ToCreate => response.with_error_code(ResponseError::UnknownServerError.code()),
    }
}

/// The topic if it exists; otherwise why not, or [`Found::ToCreate`] when it is to be
/// auto-created (allowed by the broker, the request and `may_create`, a valid name, and a
/// token of the auto-creation pace taken for it).
fn lookup(
    storage: &Arc<Storage>,
    admin: &Arc<Admin>,
    name: &str,
    create: bool,
    may_create: impl Fn(&str) -> bool,
) -> Found {
    if let Some(topic) = storage.log.topic(name) {
        return Found::Topic(topic);
    }
    // A topic whose files could not be opened: never re-created over its data.
    if let Some(reason) = storage.log.offline_reason(name) {
        let partitions = storage.log.offline_partition_count(name);
        if partitions > 0 {
            return Found::Offline(partitions);
        }
        let offline = TopicError::Offline {
            name: name.to_string(),
            reason,
        };
        return Found::Error(errors::topic(&offline));
    }
    if !create {
        return Found::Error(ResponseError::UnknownTopicOrPartition);
    }
    if !may_create(name) {
        return Found::Error(ResponseError::TopicAuthorizationFailed);
    }
    if log_core::validate_name(name).is_err() {
        return Found::Error(ResponseError::InvalidTopicException);
    }
    if !admin.auto_create.try_take(Instant::now()) {
        tracing::debug!(
            topic = name,
            "auto-creation paced (--auto-create-topics-per-second)"
        );
        return Found::Error(ResponseError::LeaderNotAvailable);
    }
    Found::ToCreate
}

/// Creates a topic for [`Found::ToCreate`]: blocking file work.
fn auto_create(admin: &Arc<Admin>, name: &str) -> Found {
    match admin.auto_create_topic(name) {
        Ok(topic) => Found::Topic(topic),
        Err(e) => {
            if !matches!(e, CreateError::BeingCreated(_)) {
                tracing::warn!(topic = %name, error = %e, "could not auto-create topic");
            }
            Found::Error(errors::create(&e))
        }
    }
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

/// An offline topic's partitions: each KAFKA_STORAGE_ERROR with its one replica offline (as
/// Kafka answers for a replica on a failed log dir), listed so that clients know them and
/// their reads get the error the application sees ([`errors::OFFLINE_FETCH`], [`errors::OFFLINE_LIST_OFFSETS`]).
fn offline_partitions(count: u32, node: BrokerId) -> Vec<MetadataResponsePartition> {
    (0..count)
        .map(|index| {
            MetadataResponsePartition::default()
                .with_error_code(ResponseError::KafkaStorageError.code())
                .with_partition_index(i32::try_from(index).unwrap_or(i32::MAX))
                .with_leader_id(node)
                .with_leader_epoch(-1)
                .with_replica_nodes(vec![node])
                .with_isr_nodes(Vec::new())
                .with_offline_replicas(vec![node])
        })
        .collect()
}
