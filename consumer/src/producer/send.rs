//! Taking a record in: `send` (waiting for room and metadata), `try_send` (waiting for
//! nothing), the checks and the partitioner's choice, then the append to the accumulator that
//! wakes the sender when a batch is due.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::oneshot;

use super::accumulator::Appended;
use super::batch::{PendingRecord, Reply};
use super::record::{DeliveryFuture, ProducerRecord, RecordMetadata};
use super::{DeliveryError, Producer, SendError, AWAKE};
use crate::config::Partitioner;
use crate::error::CallError;
use crate::partitioner::partition_for_key;
use crate::util::lock;

impl Producer {
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
    /// [`TransactionError::PartitionNotAdded`](super::TransactionError::PartitionNotAdded)
    /// otherwise.
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
        if let Some(timestamp) = record.timestamp.filter(|t| *t < 0) {
            return Err(SendError::InvalidTimestamp(timestamp));
        }
        let size = record.size_estimate();
        // Alone in its batch, as the Java client counts it against `max.request.size`.
        let alone = size + record_batch::HEADER_LEN;
        if alone > inner.config.max_request_size {
            return Err(SendError::RecordTooLarge {
                size: alone,
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
}
