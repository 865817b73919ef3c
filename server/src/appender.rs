//! The broker's append path for one partition of a Produce: the idempotent-producer check, the
//! append, recording the producer's new state; then, separately and without holding a thread,
//! the wait for durability ([`crate::durable`]).
//!
//! Lock order: the partition's producer state is held from the check until the batch is
//! appended and recorded (so a retry racing its original is either appended once or answered
//! as a duplicate), and released before waiting for an fsync. On an async worker
//! ([`AppendMode::Inline`]) neither lock is waited for and no segment is rolled: such an append
//! answers [`ProduceError::WouldBlock`] having written nothing, and is retried on the blocking
//! pool.

use std::sync::{Arc, PoisonError, TryLockError};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use log_core::{AppendError, AppendInfo, Log, Partition};
use record_batch::{BatchError, BatchHeader};

use crate::durable::Syncer;
use crate::metrics::Metrics;
use crate::producers::{ProducerIds, Producers, Verdict};

/// Why records were not appended. Nothing of them was stored.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    #[error("{0} is internal to the broker")]
    InternalTopic(String),
    #[error("{topic}-{index} does not exist")]
    UnknownPartition { topic: String, index: i32 },
    #[error("no records")]
    NoRecords,
    #[error(transparent)]
    Corrupt(#[from] BatchError),
    #[error("producer id {0} was not handed out by this broker")]
    UnknownProducer(i64),
    #[error("producer {producer_id} rejected: {error}")]
    Producer {
        producer_id: i64,
        error: ResponseError,
    },
    #[error(transparent)]
    Append(#[from] AppendError),
    /// The blocking task appending the records failed (it panicked): whether they were
    /// stored is not known.
    #[error("the append task failed: {0}")]
    TaskFailed(String),
}

impl ProduceError {
    /// An inline append that must be retried where blocking is allowed.
    pub fn would_block(&self) -> bool {
        matches!(self, ProduceError::Append(AppendError::WouldBlock))
    }
}

/// Whether an append may wait for locks and roll segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendMode {
    /// On an async worker: never waits (see the module doc).
    Inline,
    /// On a thread that may block.
    Blocking,
}

/// A partition's record set as a Produce carried it, its batch headers parsed once (the
/// handler reads them to choose where to append, the appender to check the producer, the
/// partition to validate the batches).
#[derive(Debug)]
pub struct Batches {
    records: Bytes,
    headers: Result<Vec<BatchHeader>, BatchError>,
}

impl Batches {
    pub fn parse(records: Bytes) -> Batches {
        let headers = record_batch::parse_all(&records);
        Batches { records, headers }
    }

    /// The record set's size in bytes.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether any of its batches is compressed (checking it decompresses them).
    pub fn is_compressed(&self) -> bool {
        self.headers
            .as_ref()
            .is_ok_and(|headers| headers.iter().any(BatchHeader::is_compressed))
    }

    /// The producer id and epoch of its first batch (a producer sends one id per request).
    pub fn producer(&self) -> Option<(i64, i16)> {
        let first = self.headers.as_ref().ok()?.first()?;
        Some((first.producer_id, first.producer_epoch))
    }

    /// Whether any of its batches is not of `codec` (a topic of that `compression.type`
    /// recompresses it).
    pub fn has_other_codec(&self, codec: record_batch::Codec) -> bool {
        self.headers
            .as_ref()
            .is_ok_and(|headers| headers.iter().any(|h| h.codec() != Some(codec)))
    }
}

/// Records appended, not yet known to be durable.
#[derive(Debug)]
pub struct Appended {
    pub info: AppendInfo,
    pub partition: Arc<Partition>,
}

/// Topics only the broker writes (`__consumer_offsets`): clients may not produce to or delete
/// them.
pub fn is_internal(topic: &str) -> bool {
    topic.starts_with("__")
}

/// What an append reads and records: the parts of the broker context it uses.
#[derive(Debug, Clone, Copy)]
pub struct Appender<'a> {
    pub log: &'a Log,
    pub producers: &'a Producers,
    pub producer_ids: &'a ProducerIds,
    pub metrics: &'a Metrics,
}

impl Appender<'_> {
    /// Appends a producer's record batches to `topic`-`index`. A retry of batches already
    /// stored answers with where they were stored, without storing them again. The caller
    /// waits for durability before acknowledging ([`Appended::durable`]).
    pub fn append_records(
        &self,
        topic: &str,
        index: i32,
        batches: Option<&Batches>,
        mode: AppendMode,
    ) -> Result<Appended, ProduceError> {
        if is_internal(topic) {
            return Err(ProduceError::InternalTopic(topic.to_string()));
        }
        let partition = u32::try_from(index)
            .ok()
            .and_then(|i| self.log.topic(topic)?.partition(i).cloned())
            .ok_or_else(|| ProduceError::UnknownPartition {
                topic: topic.to_string(),
                index,
            })?;
        let batches = batches.ok_or(ProduceError::NoRecords)?;
        let (records, headers) = match &batches.headers {
            Ok(headers) => (&batches.records, headers),
            Err(e) => return Err(ProduceError::Corrupt(e.clone())),
        };
        if let Some(id) = headers
            .first()
            .map(|h| h.producer_id)
            .filter(|id| *id >= 0 && !self.producer_ids.issued(*id))
        {
            return Err(ProduceError::UnknownProducer(id));
        }
        let state = self.producers.partition(topic, index);
        let mut producers = match mode {
            AppendMode::Blocking => state.lock().unwrap_or_else(PoisonError::into_inner),
            AppendMode::Inline => match state.try_lock() {
                Ok(producers) => producers,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return Err(AppendError::WouldBlock.into()),
            },
        };
        let info = match producers.check(headers) {
            Verdict::Reject(error) => {
                return Err(ProduceError::Producer {
                    producer_id: headers.first().map_or(-1, |h| h.producer_id),
                    error,
                })
            }
            Verdict::Duplicate(info) => info,
            Verdict::Append => {
                let info = match mode {
                    AppendMode::Blocking => partition.append_pending_parsed(records, headers)?,
                    AppendMode::Inline => partition.try_append_pending_parsed(records, headers)?,
                };
                producers.record(headers, info, log_core::now_ms());
                let count = info.last_offset - info.base_offset + 1;
                self.metrics.appended(
                    topic,
                    u64::try_from(count).unwrap_or(0),
                    records.len() as u64,
                );
                info
            }
        };
        Ok(Appended { info, partition })
    }
}

impl Appended {
    /// Waits until the records are as durable as their topic asks.
    pub async fn durable(&self, syncer: &Syncer) -> Result<(), ProduceError> {
        let end = self.info.last_offset + 1;
        Ok(syncer.wait(&self.partition, end).await?)
    }
}
