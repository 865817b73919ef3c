//! # consumer
//!
//! lograil's async Rust client, speaking only the Kafka protocol.

mod admin;
mod cluster;
pub mod config;
mod connection;
mod consumer;
mod error;
mod group;
mod offsets;
mod partitioner;
mod producer;
mod util;

pub use admin::{
    Admin, AdminError, GroupDescription, MemberDescription, NewTopic, PartitionLag,
    TopicDescription,
};
pub use config::{ClientConfig, ConfigError, ConsumerConfig, ProducerConfig};
pub use consumer::{
    AssignmentError, CommitError, ConsumeError, Consumer, ConsumerError, ConsumerRecord,
    TimestampType,
};
pub use error::{CallError, ErrorCode, NetError};
pub use group::RebalanceListener;
pub use partitioner::{murmur2, partition_for_key, to_positive};
pub use producer::{
    DeliveryError, DeliveryFuture, FatalError, Producer, ProducerError, ProducerRecord,
    ProducerStats, RecordMetadata, SendError,
};

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
