//! # consumer
//!
//! lograil's async Rust client, speaking only the Kafka protocol, so it works against lograil
//! and against a Kafka or Redpanda cluster alike.
//!
//! **It is**, for now, a [`Connection`] that negotiates versions with ApiVersions, and an
//! [`Admin`] with the calls `lograil topic` and `lograil group` need: topics, groups,
//! committed offsets, log offsets and lag. **It is not** yet a producer or a group consumer:
//! use librdkafka (the `rdkafka` crate) for those until they land here.

mod admin;
mod connection;
mod partitioner;

pub use admin::{Admin, GroupDescription, MemberDescription, PartitionLag, TopicDescription};
pub use connection::{ClientError, Connection};
pub use partitioner::{murmur2, partition_for_key, to_positive};
