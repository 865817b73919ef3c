//! Admin calls: topics, consumer groups, committed offsets and lag, routed as Kafka requires
//! (topic changes to the controller, group calls to the group's coordinator, offsets to each
//! partition's leader), so they work on a cluster as on lograil.
//!
//! - `topics`: list, describe, create (waiting for leaders everywhere) and delete topics.
//! - `groups`: list and describe groups, find their coordinators, set their configs.
//! - `lag`: committed offsets, partitions' offsets and timestamps, and a group's lag.
//! - `quotas`: describe and alter client quotas.

mod groups;
mod lag;
mod quotas;
mod topics;

pub use quotas::{ClientQuotas, QuotaEntity, QuotaMatch};

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;

use crate::cluster::Cluster;
use crate::config::{AdminConfig, ClientConfig, ConfigError};
use crate::error::{CallError, NetError};
use crate::TopicPartition;

/// A topic as Metadata and DescribeConfigs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    /// The topic's name.
    pub name: String,
    /// How many partitions the metadata lists.
    pub partitions: i32,
    /// One of Kafka's own topics (`__consumer_offsets`, `__transaction_state`, …).
    pub internal: bool,
    /// Replicas of partition 0 (the replication factor is its length).
    pub replicas: Vec<i32>,
    /// The leader of each partition (-1: none).
    pub leaders: Vec<i32>,
    /// Kafka config names and values, a null value as `""` (only from
    /// [`Admin::describe_topic`]; empty from [`Admin::list_topics`]).
    pub configs: Vec<(String, String)>,
}

/// A member of a classic group, as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct MemberDescription {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id`; None for a dynamic member.
    pub instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// The address it connects from, as the broker writes it (`/` and the IP: `/127.0.0.1`).
    pub host: String,
    /// (topic, partitions) from the consumer-protocol assignment; empty when the group is not
    /// a `consumer` group or the assignment does not decode.
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// A group, as DescribeGroups shows a classic one, or ConsumerGroupDescribe a KIP-848
/// consumer-protocol one ([`Admin::describe_group`]).
#[derive(Debug, Clone)]
pub struct GroupDescription {
    /// The group asked about.
    pub group_id: String,
    /// The coordinator's state name: `Stable`, `PreparingRebalance`, `CompletingRebalance`,
    /// `Empty` or `Dead` (an unknown group is `Dead` with no members).
    pub state: String,
    /// `consumer` for consumer groups (Kafka Connect workers say `connect`); empty for an
    /// unknown group.
    pub protocol_type: String,
    /// The protocol the group chose: for a consumer group, the assignor (`range`,
    /// `cooperative-sticky`; for a consumer-protocol group the broker's, `uniform` or
    /// `range`); empty until a generation has chosen one.
    pub protocol: String,
    /// `Classic`, or `Consumer` for a KIP-848 consumer-protocol group (`group.protocol=consumer`),
    /// whose states are `Empty`, `Assigning`, `Reconciling` and `Stable`.
    pub group_type: String,
    /// The members of the current generation.
    pub members: Vec<MemberDescription>,
}

/// Where a group stands on one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionLag {
    /// The topic.
    pub topic: String,
    /// The partition within `topic`.
    pub partition: i32,
    /// The next offset the group will read; `None` if it never committed.
    pub committed: Option<i64>,
    /// The partition's first offset (ListOffsets earliest; -1 if its leader gave none).
    pub log_start: i64,
    /// The partition's log end offset, the offset the next record gets (ListOffsets latest;
    /// -1 if its leader gave none).
    pub log_end: i64,
    /// Records between the committed offset (or the log start, if later) and the log end;
    /// `None` if the group never committed.
    pub lag_records: Option<i64>,
    /// Now minus the timestamp of the oldest unconsumed record, in seconds (0 when caught up);
    /// `None` if the group never committed or that record could not be read.
    pub lag_seconds: Option<f64>,
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The topic's name.
    pub name: String,
    /// -1: the broker's default.
    pub partitions: i32,
    /// -1: the broker's default (`default.replication.factor`).
    pub replication_factor: i16,
    /// Topic configs to set (`retention.ms`, `cleanup.policy`, …); the rest keep the broker's
    /// defaults.
    pub configs: Vec<(String, String)>,
}

/// Why an admin call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The properties were refused ([`Admin::from_config`]).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A request failed: no connection, or the broker answered with an error code.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The response had no entry for what was asked (the topic, config resource or quota
    /// entity).
    #[error("empty {0:?} response")]
    EmptyResponse(ApiKey),
    /// A fetched record batch did not decode ([`Admin::timestamp_at`], [`Admin::lag`]).
    #[error("undecodable batch in {partition}: {reason}")]
    Undecodable {
        /// The partition fetched.
        partition: TopicPartition,
        /// The decoder's error.
        reason: String,
    },
}

impl From<NetError> for AdminError {
    fn from(e: NetError) -> AdminError {
        AdminError::Call(CallError::Net(e))
    }
}

/// How long an admin call keeps retrying (the Java client's `default.api.timeout.ms`).
const API_TIMEOUT: Duration = Duration::from_secs(60);

/// Admin operations on a cluster (or one lograil). Methods take `&mut self` for the CLI's
/// sake; the client is cheap to clone.
#[derive(Debug, Clone)]
pub struct Admin {
    cluster: Arc<Cluster>,
}

impl Admin {
    /// Connects with default settings to `bootstrap` (`host:port[,host:port…]`).
    pub async fn connect(bootstrap: &str) -> Result<Admin, AdminError> {
        Admin::new(AdminConfig::new(bootstrap)).await
    }

    /// Connects with the Java client's admin properties (`bootstrap.servers`, `client.id`,
    /// timeouts, …).
    pub async fn from_config(config: &ClientConfig) -> Result<Admin, AdminError> {
        Admin::new(AdminConfig::from_config(config)?).await
    }

    /// Connects with typed settings. Its metadata requests never create topics, whatever
    /// `allow.auto.create.topics` says.
    pub async fn new(config: AdminConfig) -> Result<Admin, AdminError> {
        let mut net = config.net;
        net.allow_auto_create_topics = false;
        Ok(Admin {
            cluster: Cluster::connect(net).await?,
        })
    }

    fn deadline() -> Instant {
        Instant::now() + API_TIMEOUT
    }
}
