//! Broker settings: what `lograil serve` takes from flags and from an optional `--config` file.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use log_core::{LogOptions, TopicConfig};
use task_queue::ShareConfig;

pub use crate::groups::GroupConfig;
pub use crate::transactions::TxnConfig;

/// Everything the broker needs besides its listener.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// `--data-dir`: the topics' logs and the broker's own files (client quotas, ACLs,
    /// producer ids, ...).
    pub data_dir: PathBuf,
    /// Host advertised in Metadata; `None` advertises the bound address (`127.0.0.1` when bound
    /// to an unspecified address).
    pub advertised_host: Option<String>,
    /// This broker's node id.
    pub node_id: i32,
    /// Create a topic when a client asks for its metadata and the request allows it.
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic, or of a CreateTopics request that says -1.
    pub default_partitions: u32,
    /// Largest request frame accepted; a bigger one closes the connection.
    pub max_request_bytes: usize,
    /// How often retention runs.
    pub retention_check_interval: Duration,
    /// Defaults for every topic's config; CreateTopics configs override them.
    pub topic_defaults: TopicConfig,
    /// Consumer-group timing.
    pub groups: GroupConfig,
    /// What one client may use of the broker (see [`Limits`]).
    pub limits: Limits,
    /// How the data dir is opened: the storage seam (tests inject faults) and how many closed
    /// segments may be loaded at once.
    pub log: LogOptions,
    /// Share groups' defaults (Kafka's `group.share.*` broker configs); groups override them.
    pub share: ShareConfig,
    /// `group.share.max.size`: members of one share group at most.
    pub share_group_max_size: usize,
    /// Kafka's `quota.window.num` x `quota.window.size.seconds`: the window client quotas are
    /// measured over.
    pub quota_window: crate::quotas::Window,
    /// TLS and SASL for the listeners that use them (docs/security.md).
    pub security: crate::security::SecurityConfig,
    /// The authorizer and its settings (Kafka's `authorizer.class.name`, `super.users`,
    /// `allow.everyone.if.no.acl.found`).
    pub authorization: Authorization,
    /// The transaction coordinator's settings.
    pub transactions: TxnConfig,
}

/// Kafka's authorizer settings. Off by default: everything is allowed, as in Kafka without
/// `authorizer.class.name`.
#[derive(Clone, Debug, Default)]
pub struct Authorization {
    /// An authorizer is configured: requests are checked against the ACLs.
    pub enabled: bool,
    /// `super.users`: principals allowed everything.
    pub super_users: HashSet<String>,
    /// `allow.everyone.if.no.acl.found`: allow what no ACL of the resource speaks of.
    pub allow_everyone_if_no_acl_found: bool,
}

/// The `authorizer.class.name` values that enable lograil's authorizer: Kafka's two
/// ACL authorizers (KRaft's and ZooKeeper's, which decide alike) and lograil's short name.
pub const AUTHORIZER_CLASSES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "acl",
];

/// An authorization setting lograil cannot honour.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorizationError {
    /// `authorizer.class.name` is not empty and not one of [`AUTHORIZER_CLASSES`].
    #[error(
        "authorizer.class.name {0:?} is not an authorizer lograil has: \
         org.apache.kafka.metadata.authorizer.StandardAuthorizer, \
         kafka.security.authorizer.AclAuthorizer or acl (empty: none)"
    )]
    UnknownClass(String),
    /// A `super.users` entry is not a `Type:name` principal.
    #[error("super.users: {0}")]
    SuperUsers(#[from] acl::AclError),
}

impl Authorization {
    /// `authorizer.class.name`: one of [`AUTHORIZER_CLASSES`], or empty for none.
    pub fn set_class(&mut self, class: &str) -> Result<(), AuthorizationError> {
        let class = class.trim();
        if !class.is_empty() && !AUTHORIZER_CLASSES.contains(&class) {
            return Err(AuthorizationError::UnknownClass(class.to_string()));
        }
        self.enabled = !class.is_empty();
        Ok(())
    }

    /// `super.users`: `User:a;User:b`.
    pub fn set_super_users(&mut self, list: &str) -> Result<(), AuthorizationError> {
        self.super_users = acl::Settings::parse_super_users(list)?;
        Ok(())
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            data_dir: PathBuf::from("data"),
            advertised_host: None,
            node_id: 1,
            auto_create_topics: true,
            default_partitions: 1,
            max_request_bytes: 100 * 1024 * 1024,
            retention_check_interval: Duration::from_secs(300),
            topic_defaults: TopicConfig::default(),
            groups: GroupConfig::default(),
            limits: Limits::default(),
            log: LogOptions::default(),
            share: ShareConfig::default(),
            share_group_max_size: 200,
            quota_window: crate::quotas::Window::default(),
            security: crate::security::SecurityConfig::default(),
            authorization: Authorization::default(),
            transactions: TxnConfig::default(),
        }
    }
}

/// Settings that contradict each other.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// `queued.max.request.bytes` below `--max-request-bytes`: a request of the largest size
    /// allowed could never get room to be read.
    #[error("queued.max.request.bytes ({queued}) must be at least --max-request-bytes ({max})")]
    QueueSmallerThanRequest {
        /// [`Limits::queued_max_request_bytes`].
        queued: usize,
        /// [`BrokerConfig::max_request_bytes`].
        max: usize,
    },
    /// `--max-request-bytes` over `i32::MAX`, the largest frame size Kafka's protocol can state.
    #[error("--max-request-bytes ({0}) must be below 2 GiB")]
    RequestTooLarge(usize),
}

impl BrokerConfig {
    /// Checks settings against each other (each alone is checked where it is parsed).
    pub fn validate(&self) -> Result<(), LimitsError> {
        if self.max_request_bytes > i32::MAX as usize {
            return Err(LimitsError::RequestTooLarge(self.max_request_bytes));
        }
        if self.limits.queued_max_request_bytes < self.max_request_bytes {
            return Err(LimitsError::QueueSmallerThanRequest {
                queued: self.limits.queued_max_request_bytes,
                max: self.max_request_bytes,
            });
        }
        Ok(())
    }
}

/// Bounds on what clients can make the broker hold or do, under Kafka's setting names where
/// Kafka has the setting (docs/operations.md, "Limits", lists each with what a client sees when it
/// hits it). `max_request_bytes` above is one of them; `GroupConfig::max_size` another.
#[derive(Clone, Debug)]
pub struct Limits {
    /// `max.connections`: connections at once; a new one over it is closed.
    pub max_connections: usize,
    /// `max.connections.per.ip`: connections at once from one address; a new one over it
    /// evicts one of the address's connections not busy with a request (`limits::Phase`).
    pub max_connections_per_ip: usize,
    /// `max.connection.creation.rate`: connections accepted per second, all addresses
    /// together, in bursts of one second's worth; a connection over it waits to be accepted.
    /// `None`: unlimited (Kafka's default).
    pub max_connection_creation_rate: Option<u32>,
    /// `connections.max.idle.ms`: a connection with no request for this long is closed.
    pub connections_max_idle: Duration,
    /// Once a request's first byte arrives, all of it must within this (lograil's own).
    pub request_read_timeout: Duration,
    /// `queued.max.request.bytes`: bytes of requests over 64 KiB being read or handled at once,
    /// all connections together; a connection waits (reads nothing more) for room.
    pub queued_max_request_bytes: usize,
    /// Largest request frame of any API but Produce (lograil's own; Produce has
    /// `max_request_bytes`).
    pub max_non_produce_request_bytes: usize,
    /// Group ids one DescribeGroups or DeleteGroups may name (lograil's own).
    pub max_groups_per_request: usize,
    /// `fetch.max.bytes`: the most record bytes one fetch response carries (but at least one
    /// whole batch, so a consumer always progresses).
    pub fetch_max_bytes: usize,
    /// `max.broker.partitions` (KIP-578): partitions the broker holds, all topics together.
    /// Requests naming more topics or partitions than this are refused too. The default is
    /// what BENCHMARKS.md's "Partitions on one broker" shows working within 20,000 open files.
    pub max_broker_partitions: u32,
    /// Partitions one CreateTopics may create (Kafka's fixed limit of 10,000).
    pub max_partitions_per_request: u32,
    /// Topics auto-created per second at most (a bucket of as many tokens, refilled at that rate).
    pub auto_create_topics_per_second: u32,
    /// `producer.id.expiration.ms`: idempotent-producer state unused this long is dropped.
    pub producer_id_expiration: Duration,
    /// `producer.id.expiration.check.interval.ms`.
    pub producer_id_expiration_check_interval: Duration,
    /// `offsets.retention.minutes`: committed offsets of a group without members are deleted
    /// once it has been empty this long.
    pub offsets_retention: Duration,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            max_connection_creation_rate: None,
            connections_max_idle: Duration::from_secs(600),
            request_read_timeout: Duration::from_secs(30),
            queued_max_request_bytes: 256 * 1024 * 1024,
            max_non_produce_request_bytes: 1024 * 1024,
            max_groups_per_request: 10_000,
            fetch_max_bytes: 55 * 1024 * 1024,
            max_broker_partitions: 100_000,
            max_partitions_per_request: 10_000,
            auto_create_topics_per_second: 100,
            producer_id_expiration: Duration::from_secs(24 * 3600),
            producer_id_expiration_check_interval: Duration::from_secs(600),
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
            offsets_retention_check_interval: Duration::from_secs(600),
        }
    }
}
