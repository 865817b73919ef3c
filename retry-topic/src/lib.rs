//! # retry-topic — non-blocking retries and dead-letter topics over any Kafka cluster
//!
//! A consumer reads a partition in order, so one record that keeps failing stops every record
//! behind it (head-of-line blocking). A [`RetryingConsumer`] moves the failing record out of the
//! way instead: to `orders-retry-1000`, `orders-retry-10000`, … and finally `orders-dlt`, while
//! the main partition moves on. It talks to brokers only through the `consumer` crate, so it
//! runs unchanged on lograil and on Apache Kafka.
//!
//! **It is**
//! - a handler loop: the handler returns `Ok`, or a [`HandlerError`] that the [`Classifier`]
//!   calls retryable or fatal (fatal goes straight to the DLT); a panic is a failed attempt;
//! - a chain of retry topics named as Spring Kafka 4.1 names them, its defaults included
//!   (one topic per distinct delay: `orders-retry` for a fixed back-off, `orders-retry-1000`,
//!   `orders-retry-2000` for an exponential one; or one per retry, `orders-retry-0`,
//!   `orders-retry-1`: [`SameIntervalTopicReuse`], [`TopicSuffixing`]; suffixes `-retry`,
//!   `-dlt`), created if missing with the main topic's partition count; fixed delays or capped
//!   exponential with full jitter ([`Backoff`]); max attempts and a global retry deadline
//!   ([`RetryConfig`]);
//! - due-time waits without polling: a retry topic holds one delay, so its records are in due
//!   order; its partition is paused until the head record is due, nothing else waits;
//! - at least once, never a skip: a source offset is committed only after its record was
//!   handled or produced (acks=all) to the next topic;
//! - interoperable with Spring Kafka's `@RetryableTopic`: `retry_topic-attempts`,
//!   `retry_topic-backoff-timestamp`, `retry_topic-original-timestamp`, the original-record and
//!   exception headers, in Spring's byte encodings ([`headers`]); plus the whole attempt
//!   history in `lograil.retry.history`; a failure replaces every exception header of the
//!   attempt before, Spring's included;
//! - a hand-over in either direction: a retry topic one side wrote and the other reads is read
//!   by a group new to it, which must start at the earliest offset (Kafka's default, `latest`,
//!   skips the retries already waiting): a [`RetryingConsumer`] reads its retry topics in its
//!   own group from the earliest offset; a Spring service needs `auto.offset.reset=earliest`
//!   in its consumer factory (Spring reads each retry topic in the group `<group><suffix>`,
//!   `billing-retry`). A record both sides read may be handled twice, never skipped;
//! - optional per-key ordering: while a key has a record in retry, its later records are
//!   parked behind it in the chain and come back in their original order
//!   ([`Status::parked`] says which keys, since when and why);
//! - records past their `deadline` header go to the DLT as `expired`;
//! - an outage budget: when most recent records fail, every partition is paused and one record
//!   probes at growing intervals, instead of every record burning its attempts into the DLT;
//! - dead-letter tooling ([`dlt`]): read ours or Spring's DLT records (the class a Spring
//!   listener threw, not Spring's `ListenerExecutionFailedException` around it), redrive them
//!   rate-limited and idempotently (`lograil dlt list|show|redrive`).
//!
//! - optionally exactly once ([`RetryConfig::exactly_once`]): each forward (to a retry topic,
//!   the DLT, or parked) and its source offset commit in one transaction of a transactional
//!   producer, with the consumer's group metadata (Kafka's EOS v2), and the chain reads
//!   `read_committed`: a crash or a rebalance between a forward and its commit aborts both,
//!   so no reader of the chain's topics sees a forward twice. `transactional.id` is
//!   `<group>-retry-<random>` per instance, or [`RetryConfig::transactional_id`] (a stable
//!   one per instance lets a restart abort its predecessor's open transaction at once).
//!
//! **It is not** exactly once by default (a crash between a forward and its commit forwards
//! that record again), nor does exactly-once mode make the handler's own side effects
//! exactly once (a processed record whose commit was lost is handled again), nor a
//! scheduler: a record is never processed before it is due, but it may wait
//! behind the head of its retry partition (up to the stage delay with jitter).
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use consumer::ClientConfig;
//! use retry_topic::{Delivery, HandlerError, RetryConfig, RetryingConsumer};
//!
//! #[derive(Debug, thiserror::Error)]
//! #[error("payment service unavailable")]
//! struct Unavailable;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = ClientConfig::new().with("bootstrap.servers", "127.0.0.1:9092");
//! // orders -> orders-retry-1000 -> orders-retry-10000 -> orders-dlt
//! let config = RetryConfig::new("orders", "billing")
//!     .delays([Duration::from_secs(1), Duration::from_secs(10)])
//!     .max_attempts(3);
//! let handler = |d: Delivery| async move {
//!     if d.record.value.as_deref() == Some(b"poison".as_slice()) {
//!         return Err(HandlerError::fatal(Unavailable)); // straight to orders-dlt
//!     }
//!     println!("attempt {}: {:?}", d.attempt, d.record.value);
//!     Ok::<(), HandlerError>(())
//! };
//! let consumer = RetryingConsumer::new(&client, config, handler).await?;
//! let status = consumer.status(); // outage, parked keys, waiting partitions
//! consumer.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! println!("{:?}", status.get());
//! # Ok(())
//! # }
//! ```
//!
//! Without a broker, what runs here is the chain's layout and Spring's encodings:
//!
//! ```
//! use std::time::Duration;
//! use retry_topic::{headers, RetryConfig, SameIntervalTopicReuse};
//!
//! let topology = RetryConfig::new("orders", "billing")
//!     .exponential(Duration::from_secs(1), 10.0, Duration::from_secs(60), true)
//!     .max_attempts(5)
//!     .topology()
//!     .unwrap();
//! let topics: Vec<_> = topology.stages.iter().map(|s| s.topic.as_str()).collect();
//! assert_eq!(topics, ["orders-retry-1000", "orders-retry-10000", "orders-retry-60000"]);
//! assert_eq!(topology.dlt, "orders-dlt");
//! // Attempt 5 (the fourth retry) stays in the capped stage.
//! assert_eq!(topology.stage_for_attempt(5), Some(2));
//! // Spring Kafka's defaults: a fixed back-off is one topic, `orders-retry`...
//! let spring = RetryConfig::new("orders", "billing").topology().unwrap();
//! assert_eq!(spring.read_topics(), ["orders", "orders-retry"]);
//! // ...or one per retry with MULTIPLE_TOPICS.
//! let multiple = RetryConfig::new("orders", "billing")
//!     .topic_reuse(SameIntervalTopicReuse::MultipleTopics)
//!     .topology()
//!     .unwrap();
//! assert_eq!(multiple.read_topics(), ["orders", "orders-retry-0", "orders-retry-1"]);
//! // retry_topic-backoff-timestamp is Java's BigInteger.toByteArray().
//! assert_eq!(headers::big_integer(1_767_225_600_000), [0x01, 0x9b, 0x76, 0xda, 0xa8, 0x00]);
//! ```

#![warn(missing_docs, unreachable_pub, rustdoc::broken_intra_doc_links)]

mod config;
pub mod dlt;
mod error;
mod handler;
pub mod headers;
mod keyorder;
mod outage;
mod parked;
mod retrying;
mod status;

pub use config::{
    Backoff, ConfigError, OutageBudget, Place, RetryConfig, SameIntervalTopicReuse, Stage,
    TopicSuffixing, Topology,
};
pub use error::RetryError;
pub use handler::{Class, Classifier, Delivery, Handler, HandlerError, PANIC_CLASS};
pub use keyorder::ParkedKey;
pub use parked::parked_keys;
pub use retrying::{RetryingConsumer, EXPIRED_CLASS, MALFORMED_CLASS};
pub use status::{Event, EventHook, OutageStatus, Status, StatusHandle, WaitingPartition};
