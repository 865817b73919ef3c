//! Broker settings: what `lograil serve` takes from flags and from an optional `--config` file.

use std::path::PathBuf;
use std::time::Duration;

use log_core::{ConfigError, TopicConfig};

pub use crate::groups::GroupConfig;

/// Everything the broker needs besides its listener.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
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
        }
    }
}

/// Kafka topic configs that clients and tools commonly send and that lograil accepts but does
/// not act on, with the only value it honours (`None`: any value).
const ACCEPTED_AS_IS: &[(&str, Option<&str>)] = &[
    ("cleanup.policy", Some("delete")),
    ("compression.type", Some("producer")),
    ("message.timestamp.type", Some("CreateTime")),
    ("min.insync.replicas", None),
    ("unclean.leader.election.enable", None),
    ("message.downconversion.enable", None),
    ("preallocate", None),
];

/// Applies one Kafka topic config to `config`. Configs lograil cannot honour are refused with
/// a reason, so a client never believes a setting took effect when it did not.
pub fn set_topic_config(
    config: &mut TopicConfig,
    name: &str,
    value: &str,
) -> Result<(), ConfigError> {
    if let Some((_, honoured)) = ACCEPTED_AS_IS.iter().find(|(n, _)| *n == name) {
        return match honoured {
            Some(only) if !value.eq_ignore_ascii_case(only) => Err(ConfigError::Unsupported {
                name: name.into(),
                value: value.into(),
                supported: only,
            }),
            _ => Ok(()),
        };
    }
    config.set(name, value)
}
