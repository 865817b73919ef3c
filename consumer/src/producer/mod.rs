//! The producer: records are partitioned (murmur2 for keys, as the Java client), gathered into
//! one batch per partition by size and `linger.ms`, and sent to each partition's leader by a
//! background task, idempotently by default.
//!
//! - `memory`: the `buffer.memory` bound and the drain-rate meter behind `try_send`'s hint.
//! - `accumulator`: per-partition queues of batches, the sticky partitioner.
//! - `sender`: the background task (drain, Produce requests, responses, retries, epoch bumps).
//! - `encode`: a batch's records into one RecordBatch v2 (with `record_batch`'s builder).
//! - `idempotence`: producer id and epoch, sequence numbers, re-stamping after an epoch bump.
//! - `transaction`: `transactional.id`: the transaction calls and their state machine.

mod accumulator;
mod encode;
mod idempotence;
mod memory;
mod sender;
mod transaction;

pub use transaction::{AbortReason, ConsumerGroupMetadata, TransactionError, TransactionState};

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{oneshot, Notify};

use crate::cluster::Cluster;
use crate::config::{ClientConfig, ConfigError, Partitioner, ProducerConfig};
use crate::error::{CallError, ErrorCode, NetError};
use crate::partitioner::partition_for_key;
use crate::util::lock;

use accumulator::{Accumulator, Appended, PendingRecord, Reply};
use memory::BufferPool;

/// A topic name for [`ProducerRecord::new`].
pub trait IntoTopic {
    /// The name as the shared string a record holds (no allocation for an `Arc<str>`).
    fn into_topic(self) -> Arc<str>;
}

impl IntoTopic for &str {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for &String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self.as_str())
    }
}

impl IntoTopic for String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for Arc<str> {
    fn into_topic(self) -> Arc<str> {
        self
    }
}

impl IntoTopic for &Arc<str> {
    fn into_topic(self) -> Arc<str> {
        self.clone()
    }
}

/// A record to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The topic to send to.
    pub topic: Arc<str>,
    /// `None`: the partitioner chooses (murmur2 of the key, or sticky for no key).
    pub partition: Option<i32>,
    /// `None`: a null key (unkeyed: the partitioner does not hash it).
    pub key: Option<Bytes>,
    /// `None`: a null value (a tombstone in a compacted topic).
    pub value: Option<Bytes>,
    /// Header names and values, in order. A name given twice keeps its last value: the record
    /// codec (`kafka-protocol`) stores headers in a map.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Milliseconds since the epoch (`CreateTime`); `None`: the time of `send`.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record for `topic` (a `&str`, `String` or `Arc<str>`; sending many records to one
    /// topic, a cloned `Arc<str>` saves an allocation per record) with no key, value or headers
    /// yet.
    pub fn new(topic: impl IntoTopic) -> ProducerRecord {
        ProducerRecord {
            topic: topic.into_topic(),
            partition: None,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// Sets the key (the default partitioner sends equal keys to one partition).
    pub fn key(mut self, key: impl Into<Bytes>) -> ProducerRecord {
        self.key = Some(key.into());
        self
    }

    /// Sets the value; without one the record's value is null.
    pub fn value(mut self, value: impl Into<Bytes>) -> ProducerRecord {
        self.value = Some(value.into());
        self
    }

    /// Adds a header after those already set (for a null header value, push onto `headers`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<Bytes>) -> ProducerRecord {
        self.headers.push((name.into(), Some(value.into())));
        self
    }

    /// Sends to this partition, bypassing the partitioner; `send` refuses one the topic does
    /// not have ([`SendError::UnknownPartition`]).
    pub fn partition(mut self, partition: i32) -> ProducerRecord {
        self.partition = Some(partition);
        self
    }

    /// Sets the record's `CreateTime`, in milliseconds since the epoch (default: the time of
    /// `send`).
    pub fn timestamp(mut self, ms: i64) -> ProducerRecord {
        self.timestamp = Some(ms);
        self
    }

    /// Bytes the record takes in a batch at most (before compression): what counts against
    /// `batch.size`, `buffer.memory` and `max.request.size`.
    pub fn size_estimate(&self) -> usize {
        // Length, attributes, timestamp and offset deltas, key and value lengths, header count:
        // at most 21 bytes of varints, as the Java client estimates.
        21 + self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + self
                .headers
                .iter()
                .map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, Bytes::len))
                .sum::<usize>()
    }
}

/// Where an acknowledged record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The record's topic.
    pub topic: Arc<str>,
    /// The partition it went to (the partitioner's choice, or the one the record named).
    pub partition: i32,
    /// -1 with `acks=0` (the broker does not say).
    pub offset: i64,
    /// The record's timestamp, or the broker's append time for `LogAppendTime` topics.
    pub timestamp: i64,
}

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
        /// The record's size as [`ProducerRecord::size_estimate`] counts it, in bytes.
        size: usize,
        /// The limit it is over, in bytes.
        limit: usize,
        /// The property that sets the limit.
        setting: &'static str,
    },
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

/// Completes when the record is acknowledged (or has failed for good).
#[derive(Debug)]
pub struct DeliveryFuture {
    rx: oneshot::Receiver<Result<RecordMetadata, DeliveryError>>,
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, DeliveryError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(DeliveryError::Closed)))
    }
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

    /// Queues `record`, waiting (up to `max.block.ms`) for room in `buffer.memory` and for
    /// the topic's metadata. The returned future completes when the record is acknowledged.
    ///
    /// A transactional producer sends only inside a transaction; the first record of a
    /// partition waits until the partition is added to it (AddPartitionsToTxn).
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture, SendError> {
        let (partition, size) = self.reserve(&record).await?;
        self.join_or_release(&record, partition, size).await?;
        let (tx, rx) = oneshot::channel();
        self.append(record, partition, size, Reply::Future(tx));
        Ok(DeliveryFuture { rx })
    }

    /// As [`Producer::send`], with `callback` called once the record is acknowledged or has
    /// failed for good, instead of a future (the Java client's `send(record, callback)`).
    /// Callbacks run on the producer's background task: keep them short.
    pub async fn send_with_callback<F>(
        &self,
        record: ProducerRecord,
        callback: F,
    ) -> Result<(), SendError>
    where
        F: FnOnce(Result<RecordMetadata, DeliveryError>) + Send + 'static,
    {
        let (partition, size) = self.reserve(&record).await?;
        self.join_or_release(&record, partition, size).await?;
        self.append(record, partition, size, Reply::Callback(Box::new(callback)));
        Ok(())
    }

    /// A transactional producer's record joins the open transaction; if it cannot, its bytes
    /// of `buffer.memory` are given back.
    async fn join_or_release(
        &self,
        record: &ProducerRecord,
        partition: i32,
        size: usize,
    ) -> Result<(), SendError> {
        if self.inner().txn.is_none() {
            return Ok(());
        }
        if let Err(e) = self.join_transaction(&record.topic, partition).await {
            self.inner().memory.release(size);
            return Err(SendError::Transaction(e));
        }
        Ok(())
    }

    /// The record's partition and size, once its bytes of `buffer.memory` are taken.
    async fn reserve(&self, record: &ProducerRecord) -> Result<(i32, usize), SendError> {
        let inner = self.inner();
        let started = Instant::now();
        let deadline = started + inner.config.max_block;
        let size = self.admit(record)?;
        let partition = match self.choose_partition(record, size)? {
            Some(p) => p,
            None => {
                self.wait_for_metadata(&record.topic, deadline).await?;
                self.choose_partition(record, size)?
                    .ok_or_else(|| SendError::MetadataPending {
                        topic: record.topic.to_string(),
                    })?
            }
        };
        // Room now (the common case) needs no timer.
        if inner.memory.try_acquire_quiet(size) {
            return Ok((partition, size));
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, inner.memory.acquire(size)).await {
            Err(_) => Err(SendError::Timeout(inner.config.max_block)),
            Ok(Err(())) => Err(SendError::Closed),
            Ok(Ok(())) => Ok((partition, size)),
        }
    }

    /// Queues `record` only if that needs no waiting: [`SendError::Full`] (with the record and
    /// a retry-after hint) when `buffer.memory` is full, [`SendError::MetadataPending`] when the
    /// topic's partitions are not known yet. A transactional producer's `try_send` needs the
    /// partition in the open transaction already (an earlier `send` to it):
    /// [`TransactionError::PartitionNotAdded`] otherwise.
    pub fn try_send(&self, record: ProducerRecord) -> Result<DeliveryFuture, SendError> {
        let inner = self.inner();
        let size = self.admit(&record)?;
        let Some(partition) = self.choose_partition(&record, size)? else {
            inner.cluster.add_interest([&*record.topic]);
            inner.refresh_metadata();
            return Err(SendError::MetadataPending {
                topic: record.topic.to_string(),
            });
        };
        if let Some(txn) = &inner.txn {
            txn.joined(&record.topic, partition)?;
        }
        if let Err(retry_after) = inner.memory.try_acquire(size) {
            return Err(SendError::Full {
                retry_after,
                record: Box::new(record),
            });
        }
        let (tx, rx) = oneshot::channel();
        self.append(record, partition, size, Reply::Future(tx));
        Ok(DeliveryFuture { rx })
    }

    /// Checks that the producer can take `record`; its size.
    fn admit(&self, record: &ProducerRecord) -> Result<usize, SendError> {
        let inner = self.inner();
        if let Some(fatal) = inner.fatal() {
            return Err(SendError::Fatal(fatal));
        }
        if inner.closing.load(Ordering::Acquire) {
            return Err(SendError::Closed);
        }
        let size = record.size_estimate();
        if size > inner.config.max_request_size {
            return Err(SendError::RecordTooLarge {
                size,
                limit: inner.config.max_request_size,
                setting: "max.request.size",
            });
        }
        if size > inner.config.buffer_memory {
            return Err(SendError::RecordTooLarge {
                size,
                limit: inner.config.buffer_memory,
                setting: "buffer.memory",
            });
        }
        Ok(size)
    }

    /// The record's partition, or `None` while the topic's partition count is unknown.
    fn choose_partition(
        &self,
        record: &ProducerRecord,
        size: usize,
    ) -> Result<Option<i32>, SendError> {
        let inner = self.inner();
        let metadata = inner.cluster.metadata();
        let Some(count) = metadata.partition_count(&record.topic) else {
            return Ok(None);
        };
        let count32 = u32::try_from(count).unwrap_or(u32::MAX);
        if let Some(p) = record.partition {
            if p < 0 || usize::try_from(p).map_or(true, |p| p >= count) {
                return Err(SendError::UnknownPartition {
                    topic: record.topic.to_string(),
                    partition: p,
                });
            }
            return Ok(Some(p));
        }
        let hashed = |key: &[u8]| i32::try_from(partition_for_key(key, count32)).unwrap_or(0);
        let partition = match (inner.config.partitioner, record.key.as_deref()) {
            (Partitioner::Default | Partitioner::Murmur2, Some(key)) => hashed(key),
            (Partitioner::Murmur2, None) => hashed(&[]),
            (Partitioner::Random, _) => i32::try_from(fastrand::usize(..count)).unwrap_or(0),
            (Partitioner::RoundRobin, _) => {
                lock(&inner.accumulator).round_robin(&record.topic, count)
            }
            (Partitioner::Default, None) => {
                // Partitions with a leader, asked for only when a new sticky partition is due.
                let available = || -> Vec<i32> {
                    let Some(topic) = metadata.topics.get(&*record.topic) else {
                        return Vec::new();
                    };
                    (0i32..)
                        .zip(&topic.partitions)
                        .filter(|(_, p)| p.leader >= 0)
                        .map(|(i, _)| i)
                        .collect()
                };
                lock(&inner.accumulator).sticky(
                    &record.topic,
                    count,
                    available,
                    size,
                    inner.config.batch_size,
                )
            }
        };
        Ok(Some(partition))
    }

    /// Waits until the topic's partitions are known, refreshing metadata with backoff.
    async fn wait_for_metadata(&self, topic: &str, deadline: Instant) -> Result<(), SendError> {
        let inner = self.inner();
        inner.cluster.add_interest([topic]);
        let net = &inner.config.net;
        let mut attempt = 0;
        loop {
            let seen = inner.cluster.metadata().version;
            let outcome =
                tokio::time::timeout_at(deadline.into(), inner.cluster.refresh(seen)).await;
            match outcome {
                Err(_) => return Err(SendError::Timeout(inner.config.max_block)),
                Ok(Ok(m)) if m.partition_count(topic).is_some() => return Ok(()),
                Ok(Ok(m)) => {
                    if let Some(code) = m
                        .topics
                        .get(topic)
                        .and_then(|t| t.error)
                        .filter(|c| !c.is_retriable())
                    {
                        return Err(SendError::Metadata {
                            topic: topic.to_string(),
                            source: CallError::broker(
                                kafka_protocol::messages::ApiKey::Metadata,
                                topic,
                                code,
                            ),
                        });
                    }
                }
                Ok(Err(e)) if !e.is_retriable() => {
                    return Err(SendError::Metadata {
                        topic: topic.to_string(),
                        source: e,
                    })
                }
                Ok(Err(_)) => {}
            }
            let pause = crate::util::backoff(net.retry_backoff, net.retry_backoff_max, attempt);
            attempt += 1;
            if Instant::now() + pause >= deadline {
                return Err(SendError::Timeout(inner.config.max_block));
            }
            tokio::time::sleep(pause).await;
        }
    }

    fn append(&self, record: ProducerRecord, partition: i32, size: usize, reply: Reply) {
        let inner = self.inner();
        let pending = PendingRecord {
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp: record.timestamp.unwrap_or_else(crate::util::now_ms),
            size,
            reply,
        };
        let appended = lock(&inner.accumulator).append(
            &record.topic,
            partition,
            pending,
            inner.config.batch_size,
            &inner.flush,
        );
        let wake = match appended {
            Appended::Joined => false,
            Appended::Full => !inner.sender_saturated.load(Ordering::Acquire),
            Appended::New(created) => {
                let due = inner.nanos(created + inner.config.linger);
                let wake_at = inner.sender_wake_at.load(Ordering::Acquire);
                wake_at == AWAKE || due < wake_at
            }
        };
        if wake {
            inner.wake.notify_one();
        }
    }

    /// The partition count of `topic`, waiting (up to `max.block.ms`) for its metadata.
    pub async fn partitions_for(&self, topic: &str) -> Result<usize, SendError> {
        let inner = self.inner();
        if let Some(n) = inner.cluster.metadata().partition_count(topic) {
            return Ok(n);
        }
        self.wait_for_metadata(topic, Instant::now() + inner.config.max_block)
            .await?;
        inner
            .cluster
            .metadata()
            .partition_count(topic)
            .ok_or_else(|| SendError::MetadataPending {
                topic: topic.to_string(),
            })
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
