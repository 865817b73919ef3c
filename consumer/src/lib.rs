//! # consumer — lograil's Kafka client
//!
//! An async (tokio) Kafka client that speaks only the Kafka wire protocol (through
//! `kafka-protocol`), so the same code runs against one lograil broker and against a
//! multi-broker Apache Kafka (or Redpanda) cluster.
//!
//! **It is**
//! - a [`Producer`]: the Java client's property names and defaults ([`ProducerConfig`]),
//!   murmur2 partitioning bit for bit as the Java client ([`partition_for_key`]), batching per
//!   partition by `batch.size` and `linger.ms`, gzip/snappy/lz4/zstd, headers, a
//!   [`DeliveryFuture`] per record; idempotent by default (producer id, sequence numbers,
//!   retries that never duplicate or reorder, capped exponential backoff with full jitter until
//!   `delivery.timeout.ms`); memory bounded by `buffer.memory` — [`Producer::send`] waits for
//!   room, [`Producer::try_send`] sheds at once with [`SendError::Full`] and a retry-after
//!   estimated from the measured drain rate;
//! - a [`Consumer`]: the classic group protocol in a background task (join, sync, heartbeat,
//!   leave on close; `range` and `cooperative-sticky` assignors; static membership with
//!   `group.instance.id`; a [`RebalanceListener`]), or hand-picked partitions with
//!   [`Consumer::assign`]; records as an async stream; manual commits (awaited or in the
//!   background) and auto commit, at least once; seek by offset, time, beginning or end; pause
//!   and resume; every codec; control batches skipped;
//! - a [`QueueConsumer`]: a member of a share group (KIP-932, Kafka's queues) that receives
//!   records held for it alone and acknowledges each ([`Delivery::ack`], [`Delivery::release`]
//!   with a delay, [`Delivery::reject`]) or renews its lock ([`Delivery::renew`]), in implicit
//!   or explicit mode; with an [`IdempotencyLedger`] that skips records whose work was done;
//! - an [`Admin`] client: topics, groups, committed offsets, lag;
//! - cluster-aware: each request goes where Kafka wants it (a partition's leader, the group's
//!   coordinator, the controller); `NOT_LEADER_OR_FOLLOWER`, `NOT_COORDINATOR`, newer leader
//!   epochs and vanished brokers refresh the metadata and retry.
//!
//! - secured: `security.protocol` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL under the Java
//!   client's property names ([`config::Security`]): TLS with rustls from PEM truststores and
//!   keystores (mTLS), the broker's name checked unless
//!   `ssl.endpoint.identification.algorithm` is empty; SASL PLAIN, SCRAM-SHA-256 and
//!   SCRAM-SHA-512 with credentials from `sasl.jaas.config` or `sasl.username` /
//!   `sasl.password`. A refused login ([`NetError::Authentication`]) or certificate
//!   ([`NetError::Tls`]) fails the call, never retried; configs print no secret.
//!
//! - transactional: with `transactional.id`, [`Producer::init_transactions`],
//!   [`Producer::begin_transaction`], [`Producer::send_offsets_to_transaction`] (with
//!   [`Consumer::group_metadata`], Kafka's EOS v2), [`Producer::commit_transaction`] and
//!   [`Producer::abort_transaction`], over transaction version 1's APIs (AddPartitionsToTxn
//!   before a partition's first batch), with an explicit [`TransactionState`] and typed
//!   [`TransactionError`]s (fenced and fatal, abortable, timeout); `isolation.level=
//!   read_committed` consumers skip aborted transactions' records and read up to the last
//!   stable offset;
//!
//! **It is not** a client for KIP-848's new consumer protocol, nor a transaction version 2
//! (KIP-890) producer; it has no GSSAPI (Kerberos) or
//! OAUTHBEARER, no JKS or PKCS12 stores, no encrypted private keys and no built-in CA roots,
//! and does not re-authenticate long-lived connections (KIP-368). A header name given twice in
//! one record keeps its last value (the record codec stores headers in a map).
//!
//! # Security properties
//!
//! | property | values |
//! |---|---|
//! | `security.protocol` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` (any case) |
//! | `ssl.truststore.location` or `ssl.ca.location` | a PEM file of CA certificates (required for TLS) |
//! | `ssl.truststore.certificates` | the same, inline |
//! | `ssl.truststore.type`, `ssl.keystore.type` | `PEM` (the only type) |
//! | `ssl.keystore.location` | mTLS: a PEM file holding the private key and the chain |
//! | `ssl.keystore.certificate.chain` + `ssl.keystore.key` | mTLS, inline PEM |
//! | `ssl.certificate.location` + `ssl.key.location` | mTLS, two PEM files (librdkafka) |
//! | `ssl.endpoint.identification.algorithm` | `https` (default) or empty: the name not checked |
//! | `ssl.key.password` | refused: encrypted keys are not supported |
//! | `sasl.mechanism` | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` |
//! | `sasl.jaas.config` | `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="...";` (or `plain.PlainLoginModule`) |
//! | `sasl.username` + `sasl.password` | the credentials, librdkafka's way |
//!
//! ```
//! use consumer::{ClientConfig, ConfigError, ProducerConfig};
//!
//! let config = ClientConfig::new()
//!     .with("bootstrap.servers", "broker:9093")
//!     .with("security.protocol", "SASL_SSL")
//!     .with("sasl.mechanism", "SCRAM-SHA-512")
//!     .with(
//!         "sasl.jaas.config",
//!         r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="secret";"#,
//!     );
//! // TLS needs the CA certificates to trust: without them the config is refused at once.
//! let e = ProducerConfig::from_config(&config).unwrap_err();
//! assert!(matches!(e, ConfigError::Security { name: "ssl.truststore.location", .. }));
//! assert!(!format!("{config:?}").contains("secret"));
//! ```
//!
//! # Delivery semantics
//!
//! The consumer is at least once: a record returned by [`Consumer::recv`] counts as processed
//! when `recv` is called again. Auto commit (and the commit before partitions are revoked)
//! covers processed records; [`Consumer::commit`] covers everything handed out, including the
//! record in hand, like the Java client's `commitSync()`.
//!
//! # A keyed producer
//!
//! ```no_run
//! use consumer::{ClientConfig, Producer, ProducerRecord};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ClientConfig::new()
//!     .with("bootstrap.servers", "127.0.0.1:9092")
//!     .with("linger.ms", "10")
//!     .with("compression.type", "lz4");
//! let producer = Producer::from_config(&config).await?;
//! let mut deliveries = Vec::new();
//! for i in 0..100 {
//!     let record = ProducerRecord::new("orders")
//!         .key(format!("customer-{}", i % 7))
//!         .value(format!("order {i}"))
//!         .header("source", "example");
//!     // Waits only if buffer.memory is full; the delivery completes when acknowledged.
//!     deliveries.push(producer.send(record).await?);
//! }
//! for delivery in deliveries {
//!     let meta = delivery.await?;
//!     println!("{}-{}@{}", meta.topic, meta.partition, meta.offset);
//! }
//! producer.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # A transactional producer
//!
//! Records of a transaction become visible to `read_committed` consumers together, when it
//! commits, or never, if it aborts; consumed offsets sent to it commit with it
//! (read-process-write exactly once):
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use consumer::{ClientConfig, Consumer, Producer, ProducerRecord, TopicPartition};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = ClientConfig::new().with("bootstrap.servers", "127.0.0.1:9092");
//! let consumer = Consumer::from_config(
//!     &client
//!         .clone()
//!         .with("group.id", "enricher")
//!         .with("enable.auto.commit", "false")
//!         .with("isolation.level", "read_committed"),
//! )
//! .await?;
//! consumer.subscribe(&["orders"])?;
//! // One transactional.id per running instance: a new producer with the same id fences the
//! // old one and aborts what it left open.
//! let producer = Producer::from_config(&client.with("transactional.id", "enricher-0")).await?;
//! producer.init_transactions().await?;
//! loop {
//!     let record = consumer.recv().await?;
//!     producer.begin_transaction()?;
//!     let out = ProducerRecord::new("orders-enriched").value(record.value.clone().unwrap_or_default());
//!     producer.send(out).await?;
//!     let offsets = BTreeMap::from([(TopicPartition::new(&*record.topic, record.partition), record.offset + 1)]);
//!     let group = consumer.group_metadata().expect("group.id is set");
//!     producer.send_offsets_to_transaction(&offsets, &group).await?;
//!     match producer.commit_transaction().await {
//!         Ok(()) => {}
//!         // A record or the offsets were refused: abort, read again from the committed offset.
//!         Err(e) if e.is_abortable() => {
//!             producer.abort_transaction().await?;
//!             consumer.seek(&TopicPartition::new(&*record.topic, record.partition), record.offset)?;
//!         }
//!         // Fenced: another instance took over.
//!         Err(e) => return Err(e.into()),
//!     }
//! }
//! # }
//! ```
//!
//! Without a broker, what runs is the configuration:
//!
//! ```
//! use consumer::{ClientConfig, ConfigError, ConsumerConfig, ProducerConfig};
//! use consumer::config::IsolationLevel;
//!
//! let client = ClientConfig::new().with("bootstrap.servers", "127.0.0.1:9092");
//! let producer = ProducerConfig::from_config(&client.clone().with("transactional.id", "t-1")).unwrap();
//! assert!(producer.enable_idempotence, "a transactional producer is idempotent");
//! assert_eq!(producer.transaction_timeout.as_millis(), 60_000);
//! // As the Java client, a transactional producer needs acks=all.
//! let conflict = ProducerConfig::from_config(&client.clone().with("transactional.id", "t-1").with("acks", "1"));
//! assert!(matches!(conflict, Err(ConfigError::Conflict(_))));
//! let consumer = ConsumerConfig::from_config(&client.with("isolation.level", "read_committed")).unwrap();
//! assert_eq!(consumer.isolation_level, IsolationLevel::ReadCommitted);
//! ```
//!
//! # A group consumer loop
//!
//! ```no_run
//! use consumer::{ClientConfig, Consumer};
//! use futures_util::StreamExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ClientConfig::new()
//!     .with("bootstrap.servers", "127.0.0.1:9092")
//!     .with("group.id", "billing")
//!     .with("auto.offset.reset", "earliest")
//!     .with("enable.auto.commit", "false");
//! let consumer = Consumer::from_config(&config).await?;
//! consumer.subscribe(&["orders"])?;
//! {
//!     let mut records = std::pin::pin!(consumer.stream().take(1000));
//!     while let Some(record) = records.next().await {
//!         let record = record?;
//!         println!("{}-{}@{}: {:?}", record.topic, record.partition, record.offset, record.value);
//!         consumer.commit().await?; // or every N records, or leave it to auto commit
//!     }
//! }
//! consumer.close().await; // leaves the group
//! # Ok(())
//! # }
//! ```
//!
//! Without a broker, what compiles and runs here is the configuration and the partitioner:
//!
//! ```
//! use consumer::{partition_for_key, ClientConfig, ConfigError, ProducerConfig};
//!
//! let config = ClientConfig::new()
//!     .with("bootstrap.servers", "127.0.0.1:9092")
//!     .with("acks", "1");
//! let producer = ProducerConfig::from_config(&config).unwrap();
//! // As in the Java client, acks=1 turns the default idempotence off.
//! assert!(!producer.enable_idempotence);
//! assert!(matches!(
//!     ProducerConfig::from_config(&config.clone().with("lingerms", "5")),
//!     Err(ConfigError::Unknown(_))
//! ));
//! // The Java client's partition for key "foobar" among 50 partitions.
//! assert_eq!(partition_for_key(b"foobar", 50), 16);
//! ```

#![warn(missing_docs, unreachable_pub, rustdoc::broken_intra_doc_links)]

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
mod queue;
#[cfg(test)]
mod tls_tests;
mod util;

pub use admin::{
    Admin, AdminError, ClientQuotas, GroupDescription, MemberDescription, NewTopic, PartitionLag,
    QuotaEntity, QuotaMatch, TopicDescription,
};
pub use config::{
    AckMode, AdminConfig, ClientConfig, ConfigError, ConsumerConfig, ProducerConfig, QueueConfig,
};
pub use connection::Connection;
pub use consumer::{
    AssignmentError, CommitError, ConsumeError, Consumer, ConsumerError, ConsumerRecord,
    TimestampType,
};
pub use error::{CallError, ErrorCode, NetError};
pub use group::RebalanceListener;
pub use partitioner::{murmur2, partition_for_key, to_positive};
pub use producer::{
    AbortReason, ConsumerGroupMetadata, DeliveryError, DeliveryFuture, FatalError, IntoTopic,
    Producer, ProducerError, ProducerRecord, ProducerStats, RecordMetadata, SendError,
    TransactionError, TransactionState,
};
pub use queue::{AckFailure, Delivery, IdempotencyLedger, QueueConsumer, QueueError};

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's index, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// Partition `partition` of `topic`.
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
