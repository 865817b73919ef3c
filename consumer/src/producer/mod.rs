//! The producer: records are partitioned (murmur2 for keys, as the Java client), gathered into
//! one batch per partition by size and `linger.ms`, and sent to each partition's leader by a
//! background task, idempotently by default.
//!
//! - `record`: the records the application sends, and what it gets back.
//! - `send`: `send` and `try_send`: checks, the partition, the append.
//! - `memory`: the `buffer.memory` bound and the drain-rate meter behind `try_send`'s hint.
//! - `batch`: a partition's batch of records, and its encoded form.
//! - `accumulator`: per-partition queues of batches, the sticky partitioner.
//! - `sender`: the background task (drain, Produce requests, responses, retries, epoch bumps).
//! - `encode`: a batch's records into one RecordBatch v2 (with `record_batch`'s builder).
//! - `idempotence`: producer id and epoch, sequence numbers, re-stamping after an epoch bump.
//! - `transaction`: `transactional.id`: the transaction calls and their state machine.

mod accumulator;
mod batch;
mod encode;
mod idempotence;
mod memory;
mod record;
mod send;
mod sender;
mod transaction;

pub use record::{DeliveryFuture, IntoTopic, ProducerRecord, RecordMetadata};
pub use transaction::{AbortReason, ConsumerGroupMetadata, TransactionError, TransactionState};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::cluster::Cluster;
use crate::config::{ClientConfig, ConfigError, ProducerConfig};
use crate::error::{CallError, ErrorCode, NetError};
use crate::util::lock;

use accumulator::Accumulator;
use memory::BufferPool;

/// Why the producer stopped for good: the broker fenced it or its sequence numbers no longer
/// match the broker's (records may be lost). Every later send fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("producer stopped: {code} on {topic}-{partition}")]
pub struct FatalError {
    /// The error code (`PRODUCER_FENCED`, `INVALID_PRODUCER_EPOCH`, `UNKNOWN_PRODUCER_ID`,
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER`, `CLUSTER_AUTHORIZATION_FAILED`, …; a failed
    /// InitProducerId gives its code, or `UNKNOWN_SERVER_ERROR` without one).
    pub code: ErrorCode,
    /// The topic of the batch that got it; empty when InitProducerId failed.
    pub topic: String,
    /// The partition of that batch; -1 when InitProducerId failed.
    pub partition: i32,
}

/// Why a record was not delivered.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The partition's leader refused the batch with a non-retriable error
    /// (`MESSAGE_TOO_LARGE`, `TOPIC_AUTHORIZATION_FAILED`, `INVALID_RECORD`, …).
    #[error("{topic}-{partition}: {code}")]
    Broker {
        /// The record's topic.
        topic: String,
        /// The record's partition.
        partition: i32,
        /// The Produce response's error code.
        code: ErrorCode,
    },
    /// Not acknowledged within `delivery.timeout.ms` (the configured value), counted from when
    /// its batch was opened, retries included.
    #[error("not acknowledged within delivery.timeout.ms ({0:?})")]
    Timeout(Duration),
    /// `retries` attempts failed with retriable errors or lost connections; the last failure.
    #[error("retries exhausted: {0}")]
    Retries(CallError),
    /// The producer stopped for good (see [`FatalError`]); nothing more is delivered.
    #[error(transparent)]
    Fatal(#[from] FatalError),
    /// The batch could not be encoded or compressed; the encoder's error.
    #[error("the record could not be encoded: {0}")]
    Encode(String),
    /// The producer's background task ended (aborted, or its runtime shut down) before the
    /// record was acknowledged or failed.
    #[error("the producer stopped before the record was delivered")]
    Closed,
    /// Its transaction was aborted before the record was sent
    /// ([`Producer::abort_transaction`]).
    #[error("the record's transaction was aborted")]
    Aborted,
}

/// Why `send` or `try_send` did not accept a record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// `buffer.memory` is full (from `try_send`): try again after about `retry_after`, an
    /// estimate from the rate at which acknowledged batches have been freeing memory.
    #[error("producer buffer full; retry in about {retry_after:?}")]
    Full {
        /// When room is likely, from the measured drain rate.
        retry_after: Duration,
        /// The record, handed back for the retry.
        record: Box<ProducerRecord>,
    },
    /// `try_send` for a topic whose partitions are not known yet (a metadata request is on its
    /// way; [`Producer::partitions_for`] waits for it).
    #[error("no metadata for topic {topic} yet")]
    MetadataPending {
        /// The topic whose metadata is awaited.
        topic: String,
    },
    /// No room (or no metadata) within `max.block.ms` (the configured value).
    #[error("send blocked for max.block.ms ({0:?})")]
    Timeout(Duration),
    /// The record alone is larger than `max.request.size` or `buffer.memory`.
    #[error("record of {size} bytes is over {limit} ({setting})")]
    RecordTooLarge {
        /// The record's size as [`ProducerRecord::size_estimate`] counts it, in bytes (with
        /// a batch's header, 61 bytes, against `max.request.size`).
        size: usize,
        /// The limit it is over, in bytes.
        limit: usize,
        /// The property that sets the limit.
        setting: &'static str,
    },
    /// The record's timestamp is negative (a timestamp is unset or at least 0, as the Java
    /// client's `ProducerRecord` has it; -1 would read back as "no timestamp").
    #[error("timestamp {0} is negative: a record's timestamp is at least 0, or unset")]
    InvalidTimestamp(i64),
    /// The record names a partition the topic does not have.
    #[error("topic {topic} has no partition {partition}")]
    UnknownPartition {
        /// The record's topic.
        topic: String,
        /// The partition it named.
        partition: i32,
    },
    /// Metadata for the topic failed with a non-retriable error (`TOPIC_AUTHORIZATION_FAILED`,
    /// `INVALID_TOPIC_EXCEPTION`, …).
    #[error("metadata for {topic}: {source}")]
    Metadata {
        /// The record's topic.
        topic: String,
        /// The failure.
        source: CallError,
    },
    /// The producer stopped for good earlier (see [`FatalError`]).
    #[error(transparent)]
    Fatal(#[from] FatalError),
    /// The producer is closing ([`Producer::close`] was called on a clone of it).
    #[error("the producer is closed")]
    Closed,
    /// A transactional producer's send outside an open transaction, in a transaction that
    /// must be aborted, or whose partition could not be added to the transaction.
    #[error(transparent)]
    Transaction(#[from] TransactionError),
}

/// Why a producer could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// The properties were refused ([`Producer::from_config`]).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No bootstrap server answered with the cluster's metadata.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Counters of what the producer did, for tests and monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Batches put back for another attempt after a retriable failure.
    pub retries: u64,
    /// Epoch bumps after a batch failed for good (KIP-360).
    pub epoch_bumps: u64,
    /// Produce requests sent.
    pub requests: u64,
}

#[derive(Debug, Default)]
struct Counters {
    retries: AtomicU64,
    epoch_bumps: AtomicU64,
    requests: AtomicU64,
}

/// State shared by the producer handles and the sender task.
#[derive(Debug)]
struct Inner {
    config: ProducerConfig,
    cluster: Arc<Cluster>,
    memory: BufferPool,
    accumulator: Mutex<Accumulator>,
    /// Wakes the sender: a batch to send, a flush, a close, metadata.
    wake: Notify,
    /// When the sleeping sender wakes by itself (ns since `base`; `AWAKE` while it runs, u64::MAX
    /// for never): an append whose linger ends later needs not wake it.
    sender_wake_at: AtomicU64,
    /// The sleeping sender waits for a response before it can send more (one broker's
    /// requests in flight are at the limit): a full batch needs not wake it. With several
    /// brokers, a batch for another one waits at most for that response.
    sender_saturated: AtomicBool,
    base: Instant,
    /// Set once: every later send fails with it.
    fatal: Mutex<Option<FatalError>>,
    /// The producer id and epoch in use (idempotence), for diagnostics.
    identity: Mutex<Option<(i64, i16)>>,
    closing: AtomicBool,
    flush: accumulator::FlushTracker,
    /// Refreshing metadata in the background (one at a time).
    refreshing: AtomicBool,
    counters: Counters,
    /// With `transactional.id`: the transaction's state.
    txn: Option<transaction::Txn>,
}

/// `Inner::sender_wake_at` while the sender is running.
const AWAKE: u64 = 0;

impl Inner {
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos())
            .unwrap_or(u64::MAX - 1)
            .max(1)
    }

    fn fatal(&self) -> Option<FatalError> {
        lock(&self.fatal).clone()
    }

    /// Refreshes metadata in the background, waking the sender when done.
    fn refresh_metadata(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.clone();
        let seen = self.cluster.metadata().version;
        tokio::spawn(async move {
            let _ = inner.cluster.refresh(seen).await;
            inner.refreshing.store(false, Ordering::Release);
            inner.wake.notify_one();
        });
    }
}

/// Closes the producer when the last handle goes: queued records are still delivered.
#[derive(Debug)]
struct Handle {
    inner: Arc<Inner>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.inner.closing.store(true, Ordering::Release);
        self.inner.wake.notify_one();
    }
}

/// An asynchronous, cluster-aware Kafka producer. Cheap to clone; every clone sends through
/// the same buffer and background task.
#[derive(Debug, Clone)]
pub struct Producer {
    handle: Arc<Handle>,
}

impl Producer {
    /// Starts a producer from the Java client's properties.
    pub async fn from_config(config: &ClientConfig) -> Result<Producer, ProducerError> {
        Producer::new(ProducerConfig::from_config(config)?).await
    }

    /// Connects to the cluster and starts the background sender.
    pub async fn new(config: ProducerConfig) -> Result<Producer, ProducerError> {
        let cluster = Cluster::connect(config.net.clone()).await?;
        let inner = Arc::new(Inner {
            memory: BufferPool::new(config.buffer_memory, config.net.retry_backoff_max),
            accumulator: Mutex::new(Accumulator::default()),
            wake: Notify::new(),
            sender_wake_at: AtomicU64::new(AWAKE),
            sender_saturated: AtomicBool::new(false),
            base: Instant::now(),
            fatal: Mutex::new(None),
            identity: Mutex::new(None),
            closing: AtomicBool::new(false),
            flush: accumulator::FlushTracker::default(),
            refreshing: AtomicBool::new(false),
            counters: Counters::default(),
            txn: config
                .transactional_id
                .clone()
                .map(|id| transaction::Txn::new(id, config.transaction_timeout)),
            config,
            cluster,
        });
        let task = tokio::spawn(sender::run(inner.clone()));
        Ok(Producer {
            handle: Arc::new(Handle {
                inner,
                task: Mutex::new(Some(task)),
            }),
        })
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.handle.inner
    }

    /// Sends every record queued so far at once (ignoring `linger.ms`) and waits until each has
    /// been acknowledged or has failed.
    pub async fn flush(&self) {
        let inner = self.inner();
        let generation = inner.flush.begin();
        inner.wake.notify_one();
        inner.flush.wait(generation).await;
    }

    /// Flushes, then stops the background task. Other clones of this producer stop working.
    pub async fn close(self) {
        let inner = self.inner().clone();
        let generation = inner.flush.begin();
        inner.closing.store(true, Ordering::Release);
        inner.wake.notify_one();
        inner.flush.wait(generation).await;
        let task = lock(&self.handle.task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// The producer id and epoch the broker gave this (idempotent) producer, once it has one.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        *lock(&self.inner().identity)
    }

    /// The counters so far (since the producer started).
    pub fn stats(&self) -> ProducerStats {
        let c = &self.inner().counters;
        ProducerStats {
            retries: c.retries.load(Ordering::Relaxed),
            epoch_bumps: c.epoch_bumps.load(Ordering::Relaxed),
            requests: c.requests.load(Ordering::Relaxed),
        }
    }

    /// Bytes of `buffer.memory` in use (records accepted and not yet acknowledged).
    pub fn buffered_bytes(&self) -> usize {
        self.inner().memory.used()
    }
}
