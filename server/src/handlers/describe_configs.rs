//! DescribeConfigs, versions 1–4, for topics (resource type 2) and the broker (4), under Kafka's
//! config names. A topic lists every Kafka 4.4 topic config (`topic_config.rs`) with its
//! type (v3+): one log-core acts on is reported as a default (source 5) when equal to the
//! broker's default, else as a topic override (source 1); one lograil keeps without acting on
//! as an override when set on the topic, else as a default with Kafka's value. With
//! `include_documentation`, a config lograil does not act on carries why as its documentation
//! (the others none). No synonyms.
//!
//! The broker resource named "" (Kafka's `--entity-default`) lists the dynamic broker defaults
//! (see `broker_defaults.rs`) under Kafka's broker names.
//!
//! Beyond Kafka: a partition with damaged data (offsets its segments cannot serve) adds a
//! read-only entry `lograil.damage.partition.<N>` describing the damage (offsets, segment file,
//! byte positions, reason), which `lograil topic describe` shows. Kafka's protocol has no
//! message for it; a read-only config is what every admin tool already displays. Likewise each
//! partition of a compacted topic adds `lograil.cleaner.partition.<N>`: its dirty ratio, where
//! its cleaned part ends, the cleaner's lag and what it did. An offline topic answers
//! KAFKA_STORAGE_ERROR with why.
//!
//! Groups (resource type 32): a share group's configs under Kafka's names, and (beyond Kafka)
//! a read-only `lograil.share.partition.<topic>-<N>` entry per share partition with its state
//! counts and overload mode, and with fair turns one `lograil.share.tenant.<topic>-<N>.<rank>`
//! per top tenant (and one for the rest), for `lograil queue describe`.
//!
//! Authorization, as Kafka: DESCRIBE_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED), the
//! group (GROUP_AUTHORIZATION_FAILED), or the cluster for the broker
//! (CLUSTER_AUTHORIZATION_FAILED); a refused resource gets no configs.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::{Topic, TopicConfig};

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::backlog;
use crate::broker::{Backlog, Storage};
use crate::config::BrokerConfig;
use crate::shares::Shares;
use crate::topic_config;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
pub const TOPIC_CONFIG_SOURCE: i8 = 1;
const STATIC_BROKER_CONFIG_SOURCE: i8 = 4;
const DEFAULT_CONFIG_SOURCE: i8 = 5;
const DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE: i8 = 3;
const GROUP: i8 = 32;
/// Kafka's source for a group config set on the group.
const DYNAMIC_GROUP_CONFIG_SOURCE: i8 = 8;
/// Prefix of the read-only entries that describe a share group's partitions.
pub const SHARE_PARTITION_PREFIX: &str = "lograil.share.partition.";
/// Prefix of the read-only entries that describe a share partition's tenants (fair turns):
/// `lograil.share.tenant.<topic>-<partition>.<rank>`.
pub const SHARE_TENANT_PREFIX: &str = "lograil.share.tenant.";
/// Kafka's source for a value that comes from neither a config nor a default.
const UNKNOWN_CONFIG_SOURCE: i8 = 0;
/// Prefix of the read-only entries that report a partition's damaged data.
pub const DAMAGE_PREFIX: &str = "lograil.damage.partition.";

/// (name, value, config source, read-only)
type Entry = (String, String, i8, bool);

/// Kafka's config source of a topic config: set on the topic, or a default.
pub fn config_source(overridden: bool) -> i8 {
    if overridden {
        TOPIC_CONFIG_SOURCE
    } else {
        DEFAULT_CONFIG_SOURCE
    }
}

/// Kafka's `ConfigType` code (DescribeConfigs v3+) of a config type; 0 UNKNOWN.
fn type_code(kind: Option<topic_config::Type>) -> i8 {
    use topic_config::Type;
    match kind {
        None => 0,
        Some(Type::Boolean) => 1,
        Some(Type::String) => 2,
        Some(Type::Int) => 3,
        Some(Type::Long) => 5,
        Some(Type::Double) => 6,
        Some(Type::List) => 7,
    }
}

/// A share group's configs (its overrides as group configs, the rest as defaults), and one
/// read-only entry per share partition: `start=…,end=…,available=…,acquired=…,archived=…`
/// and `oldest_lock_ms=…` when a lock is held (what `lograil queue describe` shows).
fn group_entries(
    broker_config: &BrokerConfig,
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    group: &str,
) -> Vec<Entry> {
    let overrides = shares.overrides(group);
    let streams = broker_config.groups.streams.with_overrides(&overrides);
    let mut entries: Vec<Entry> = shares
        .config(group)
        .entries()
        .into_iter()
        .chain(streams.entries())
        .map(|(k, v)| {
            let source = if overrides.iter().any(|(n, _)| n == k) {
                DYNAMIC_GROUP_CONFIG_SOURCE
            } else {
                DEFAULT_CONFIG_SOURCE
            };
            (k.to_string(), v, source, false)
        })
        .collect();
    for p in shares.summaries(&storage.log, group) {
        let mut value = format!(
            "start={},end={},available={},acquired={},archived={}",
            p.start, p.end, p.available, p.acquired, p.archived
        );
        if let Some(since) = p.oldest_lock_ms {
            value += &format!(",oldest_lock_ms={since}");
        }
        value += &format!(",overloaded={}", u8::from(p.overloaded));
        entries.push((
            format!("{SHARE_PARTITION_PREFIX}{}-{}", p.topic, p.partition),
            value,
            UNKNOWN_CONFIG_SOURCE,
            true,
        ));
        for (rank, t) in p.tenants.iter().enumerate() {
            entries.push((
                format!("{SHARE_TENANT_PREFIX}{}-{}.{rank}", p.topic, p.partition),
                tenant_value(t),
                UNKNOWN_CONFIG_SOURCE,
                true,
            ));
        }
    }
    entries
}

/// `available=…,in_flight=…[,oldest_available_ms=…],tenant=<hex>` for a tenant (its bytes in
/// hex: any bytes survive the text of a config value), `…,other=1` for the rest summed.
fn tenant_value(t: &task_queue::TenantStats) -> String {
    let mut value = format!("available={},in_flight={}", t.available, t.in_flight);
    if let Some(ts) = t.oldest_available_ms {
        value += &format!(",oldest_available_ms={ts}");
    }
    match &t.tenant {
        Some(tenant) => {
            value += ",tenant=";
            for b in tenant.iter() {
                value += &format!("{b:02x}");
            }
        }
        None => value += ",other=1",
    }
    value
}

/// lograil's backlog-bound configs the topic has (as topic overrides) and, when they make a
/// bound, a read-only `lograil.backlog.state` with the backlog now (`records=… age_ms=…
/// over_bound=…`; measured here, or the produce path's measure if under 100 ms old).
fn backlog_entries(
    backlog: &Arc<Backlog>,
    topic: &Topic,
    config: &log_core::TopicConfig,
) -> Vec<Entry> {
    let mut entries: Vec<Entry> = config
        .extra
        .iter()
        .filter(|(k, _)| k.starts_with(log_core::EXTRA_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone(), TOPIC_CONFIG_SOURCE, false))
        .collect();
    if let Some(bound) = backlog::Bound::of(config) {
        let state = backlog.measure(topic, &bound);
        entries.push((
            backlog::STATE.to_string(),
            state.describe(),
            UNKNOWN_CONFIG_SOURCE,
            true,
        ));
    }
    entries
}

/// Prefix of the read-only entries that report where the log cleaner stands on each
/// partition of a compacted topic.
pub const CLEANER_PREFIX: &str = "lograil.cleaner.partition.";

/// One read-only entry per partition of a compacted topic: its dirty ratio, the cleaner's lag
/// and what it did since start-up.
fn cleaner_entries(topic: &Topic) -> Vec<Entry> {
    if !topic.config().cleanup.compact {
        return Vec::new();
    }
    let now = log_core::now_ms();
    (0..)
        .zip(topic.partitions())
        .map(|(index, partition): (u32, _)| {
            let d = partition.dirtiness(now);
            let s = partition.cleaner_stats();
            let mut text = format!(
                "dirty ratio {:.2}, cleaned up to offset {}, lag {} s, {} runs, {} bytes cleaned, {} records removed",
                d.ratio(),
                d.first_dirty,
                d.lag_ms(now) / 1000,
                s.runs,
                s.bytes_read,
                s.records_removed
            );
            if let Some(error) = s.last_error {
                text += &format!("; last pass failed: {error}");
            }
            (format!("{CLEANER_PREFIX}{index}"), text, UNKNOWN_CONFIG_SOURCE, true)
        })
        .collect()
}

/// One read-only entry per partition with known damage.
fn damage_entries(topic: &Topic) -> Vec<Entry> {
    topic
        .partitions()
        .iter()
        .enumerate()
        .filter_map(|(index, partition)| {
            let damage = partition.damage();
            let text = damage
                .iter()
                .map(|(path, d)| {
                    let file = path
                        .file_name()
                        .map(|f| f.to_string_lossy())
                        .unwrap_or_default();
                    format!(
                        "offsets {}..{} in {file} at bytes {}..{}: {}",
                        d.first_offset, d.end_offset, d.position, d.resume_at, d.reason
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            (!damage.is_empty()).then(|| {
                (
                    format!("{DAMAGE_PREFIX}{index}"),
                    text,
                    UNKNOWN_CONFIG_SOURCE,
                    true,
                )
            })
        })
        .collect()
}

impl Handler for DescribeConfigsRequest {
    const SERVED: (i16, i16) = (1, 4);
    type Needs = (Arc<BrokerConfig>, Arc<Storage>, Arc<Shares>, Arc<Backlog>);

    fn counts(&self) -> Counts {
        Counts {
            topics: self.resources.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (broker_config, storage, shares, backlog): Self::Needs,
        request: DescribeConfigsRequest,
        ctx: &RequestContext,
    ) -> DescribeConfigsResponse {
        let include_documentation = request.include_documentation;
        let topic_defaults = storage.topic_defaults();
        let defaults = topic_defaults.entries();
        let results = request
            .resources
            .into_iter()
            .map(|resource| {
                let result = DescribeConfigsResult::default()
                    .with_resource_type(resource.resource_type)
                    .with_resource_name(resource.resource_name.clone());
                if let Err(error) = ctx.authorize_configs(
                    Operation::DescribeConfigs,
                    resource.resource_type,
                    &resource.resource_name,
                ) {
                    return result
                        .with_error_code(error.code())
                        .with_error_message(Some(StrBytes::from_string(error.to_string())));
                }
                let entries = match entries(
                    &broker_config,
                    &storage,
                    &shares,
                    &backlog,
                    &resource,
                    &topic_defaults,
                    &defaults,
                ) {
                    Ok(entries) => entries,
                    Err((error, message)) => {
                        return result
                            .with_error_code(error.code())
                            .with_error_message(Some(StrBytes::from_string(message)))
                    }
                };
                // Null (or, leniently, an empty list) asks for every config.
                let wanted = resource
                    .configuration_keys
                    .as_ref()
                    .filter(|keys| !keys.is_empty());
                let typed = resource.resource_type == TOPIC;
                let configs = entries
                    .into_iter()
                    .filter(|(k, ..)| {
                        wanted.is_none_or(|keys| keys.iter().any(|w| w.as_str() == k))
                    })
                    .map(|entry| answer_entry(entry, typed, include_documentation))
                    .collect();
                result.with_configs(configs)
            })
            .collect();
        DescribeConfigsResponse::default().with_results(results)
    }

    fn throttle_time_ms(response: &mut DescribeConfigsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeConfigsResponse, f: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|t| f(t.error_code))
    }
}

/// Every config entry of a resource (a topic, the broker or its cluster-wide default, a
/// group), or why it has none: a topic missing or offline, a resource type not served.
fn entries(
    broker_config: &BrokerConfig,
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    backlog: &Arc<Backlog>,
    resource: &DescribeConfigsResource,
    topic_defaults: &TopicConfig,
    defaults: &[(&'static str, String)],
) -> Result<Vec<Entry>, (ResponseError, String)> {
    Ok(match resource.resource_type {
        TOPIC => match storage.log.topic(&resource.resource_name) {
            Some(topic) => topic_entries(backlog, &topic, topic_defaults),
            None => {
                let name = resource.resource_name.as_str();
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
            }
        },
        // The cluster-wide default (`--entity-default`): the dynamic values only.
        BROKER if resource.resource_name.is_empty() => storage
            .defaults
            .dynamic()
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v,
                    DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE,
                    false,
                )
            })
            .collect(),
        BROKER => defaults
            .iter()
            .cloned()
            .chain(broker_config.share.broker_entries())
            .map(|(k, v)| (k.to_string(), v, STATIC_BROKER_CONFIG_SOURCE, true))
            .collect(),
        GROUP => group_entries(broker_config, storage, shares, &resource.resource_name),
        other => {
            return Err((
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported"),
            ))
        }
    })
}

/// A topic's configs, then its damage, cleaner and backlog entries.
fn topic_entries(
    backlog: &Arc<Backlog>,
    topic: &Topic,
    topic_defaults: &TopicConfig,
) -> Vec<Entry> {
    let config = topic.config();
    let mut entries: Vec<Entry> = topic_config::describe(&config, topic_defaults)
        .into_iter()
        .map(|d| {
            let source = config_source(d.overridden);
            (d.name.to_string(), d.value, source, false)
        })
        .collect();
    entries.extend(damage_entries(topic));
    entries.extend(cleaner_entries(topic));
    entries.extend(backlog_entries(backlog, topic, &config));
    entries
}

/// An entry as the response carries it; a topic's (`typed`) with its type, and with its
/// documentation when asked.
fn answer_entry(
    (k, v, source, read_only): Entry,
    typed: bool,
    include_documentation: bool,
) -> DescribeConfigsResourceResult {
    let kind = typed.then(|| topic_config::kind(&k)).flatten();
    let doc = (typed && include_documentation)
        .then(|| topic_config::documentation(&k))
        .flatten();
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(k))
        .with_value(Some(StrBytes::from_string(v)))
        .with_read_only(read_only)
        .with_config_source(source)
        .with_config_type(type_code(kind))
        .with_documentation(doc.map(StrBytes::from_string))
}
