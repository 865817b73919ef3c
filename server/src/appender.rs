//! The broker's append path for one partition of a Produce: the idempotent-producer check, the
//! append, recording the producer's new state; then, separately and without holding a thread,
//! the wait for durability ([`crate::durable`]). Transaction markers from the transaction
//! coordinator take the same path ([`Appender::write_marker`]); the partition's transaction
//! state (open and aborted transactions, the last stable offset) is log-core's, kept from
//! the batch headers it appends.
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
use log_core::{Ack, AppendError, AppendInfo, Log, Partition};
use record_batch::{BatchError, BatchHeader, ControlType};
use tokio::sync::Notify;

use crate::durable::Syncer;
use crate::metrics::Metrics;
use crate::producers::{PartitionProducers, ProducerIds, Producers, Verdict};

/// Why records were not appended. Nothing of them was stored.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    #[error("{0} is internal to the broker")]
    InternalTopic(String),
    #[error("{topic}-{index} does not exist")]
    UnknownPartition { topic: String, index: i32 },
    #[error("no records")]
    NoRecords,
    /// A client's record set held a control batch: only the broker writes those.
    #[error("control batches are written by the transaction coordinator, not by clients")]
    ControlBatch,
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

/// A transaction marker to write: whose transaction it ends, at which producer and coordinator
/// epochs, and whether it commits or aborts.
#[derive(Debug, Clone, Copy)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub kind: ControlType,
}

/// What an append reads and records: the parts of the broker context it uses.
#[derive(Debug, Clone, Copy)]
pub struct Appender<'a> {
    pub log: &'a Log,
    pub producers: &'a Producers,
    pub producer_ids: &'a ProducerIds,
    pub metrics: &'a Metrics,
    /// Woken after an append (fetches long-polling for records or for the LSO to move).
    pub appended: &'a Notify,
}

impl Appender<'_> {
    /// Appends a producer's record batches to `topic`-`index`, to be acknowledged as `ack`
    /// says. A retry of batches already stored answers with where they were stored, without
    /// storing them again. The caller waits for durability before acknowledging
    /// ([`Appended::durable`]).
    pub fn append_records(
        &self,
        topic: &str,
        index: i32,
        batches: Option<&Batches>,
        ack: Ack,
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
        if headers.iter().any(BatchHeader::is_control) {
            return Err(ProduceError::ControlBatch);
        }
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
        let verdict = match headers.first() {
            // Kafka's ProducerAppendInfo: a producer with a transaction open here writes
            // transactional batches until its marker.
            Some(first)
                if first.producer_id >= 0
                    && !first.is_transactional()
                    && partition.has_open_transaction(first.producer_id) =>
            {
                Verdict::Reject(ResponseError::InvalidTxnState)
            }
            _ => producers.check(headers),
        };
        let info = match verdict {
            Verdict::Reject(error) => {
                return Err(ProduceError::Producer {
                    producer_id: headers.first().map_or(-1, |h| h.producer_id),
                    error,
                })
            }
            // The retry waits for what its own ack asks, and for what the original waits for.
            Verdict::Duplicate(info) => AppendInfo {
                must_sync: info.must_sync || partition.config().durability.waits(ack, 0),
                ..info
            },
            Verdict::Append => {
                let info = match mode {
                    AppendMode::Blocking => {
                        partition.append_pending_parsed(records, headers, ack)?
                    }
                    AppendMode::Inline => {
                        partition.try_append_pending_parsed(records, headers, ack)?
                    }
                };
                producers.record(headers, info, log_core::now_ms());
                if info.rolled {
                    snapshot(&producers, &partition, info.last_offset + 1);
                }
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

    /// Appends a transaction marker for `producer_id` to `topic`-`index` (markers go to data
    /// partitions only) and ends the producer's open transaction there. An epoch below the
    /// partition's current epoch for that producer is refused (INVALID_PRODUCER_EPOCH, as
    /// Kafka's ProducerAppendInfo: fenced), and so is a coordinator epoch below the last
    /// marker's (TRANSACTION_COORDINATOR_FENCED); a higher producer epoch becomes the current
    /// epoch (fences older produces; sequences start again at 0). A marker for a producer
    /// with nothing open here is written and changes nothing else (as in Kafka).
    ///
    /// The caller waits with [`Appended::durable`] before it moves on, as the produce path
    /// does, and then wakes long-polling fetches (`Broker::appended.notify_waiters()`):
    /// under durability `always` a marker moves the last stable offset only once it is on
    /// disk. This call wakes them too (the other durabilities show it at once).
    #[allow(dead_code, reason = "called by the transaction coordinator (issue 26)")]
    pub fn write_marker(
        &self,
        topic: &str,
        index: i32,
        marker: Marker,
        mode: AppendMode,
    ) -> Result<Appended, ProduceError> {
        let Marker {
            producer_id,
            producer_epoch,
            coordinator_epoch,
            kind,
        } = marker;
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
        let state = self.producers.partition(topic, index);
        let mut producers = match mode {
            AppendMode::Blocking => state.lock().unwrap_or_else(PoisonError::into_inner),
            AppendMode::Inline => match state.try_lock() {
                Ok(producers) => producers,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return Err(AppendError::WouldBlock.into()),
            },
        };
        producers
            .check_marker(producer_id, producer_epoch, coordinator_epoch)
            .map_err(|error| ProduceError::Producer { producer_id, error })?;
        let now = log_core::now_ms();
        let marker =
            record_batch::control_batch(producer_id, producer_epoch, coordinator_epoch, kind, now);
        // A marker is fsynced whatever the topic's durability: exactly-once rests on it.
        let info = match mode {
            AppendMode::Blocking => partition.append_pending(&marker, Ack::Fsynced)?,
            AppendMode::Inline => partition.try_append_pending(&marker, Ack::Fsynced)?,
        };
        producers.record_marker(producer_id, producer_epoch, coordinator_epoch, now);
        if info.rolled {
            snapshot(&producers, &partition, info.last_offset + 1);
        }
        drop(producers);
        self.appended.notify_waiters();
        Ok(Appended { info, partition })
    }
}

/// Writes the partition's producer-state snapshot as of `at` after a roll (a roll is blocking
/// work already: the appender is on a thread that may block). A failure leaves the previous
/// snapshot, from which a restart replays more of the log.
fn snapshot(producers: &PartitionProducers, partition: &Partition, at: i64) {
    if let Err(e) = producers.save_snapshot(partition.dir(), at) {
        tracing::warn!(partition = partition.name(), error = %e, "could not write the producer snapshot");
    }
}

impl Appended {
    /// Starts the fsync the records wait for, if they wait for one (a caller with several
    /// partitions starts them all before it waits: their fsyncs overlap).
    pub fn start_sync(&self, syncer: &Syncer) {
        if self.info.must_sync {
            syncer.start(&self.partition, self.info.last_offset + 1);
        }
    }

    /// Waits until the records are as durable as their acknowledgement asks.
    pub async fn durable(&self, syncer: &Syncer) -> Result<(), ProduceError> {
        if !self.info.must_sync {
            return Ok(());
        }
        let end = self.info.last_offset + 1;
        Ok(syncer.wait(&self.partition, end).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::Broker;
    use crate::config::BrokerConfig;
    use record_batch::build::{self, Record, Stamp};
    use record_batch::Codec;

    fn broker(dir: &std::path::Path) -> Arc<Broker> {
        let config = BrokerConfig {
            data_dir: dir.to_path_buf(),
            ..BrokerConfig::default()
        };
        let (stop, stopped) = tokio::sync::watch::channel(false);
        std::mem::forget(stop);
        let metrics = Arc::new(Metrics::new(&crate::handlers::APIS));
        let broker = Arc::new(Broker::open(config, stopped, metrics).unwrap());
        broker
            .admin()
            .create_topic("t", 1, broker.storage().topic_defaults())
            .unwrap();
        broker
    }

    /// A batch of `count` records from producer `pid` at `epoch` from `sequence`.
    fn batch(pid: i64, epoch: i16, sequence: i32, count: i32, transactional: bool) -> Batches {
        let mut buf = bytes::BytesMut::new();
        build::begin(&mut buf, 0);
        for i in 0..count {
            let record = Record {
                offset_delta: i,
                timestamp_delta: 0,
                key: None,
                value: Some(&b"v"[..]),
                headers: std::iter::empty(),
            };
            build::put_record(&mut buf, record).unwrap();
        }
        let stamp = Stamp {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: sequence,
            ..Stamp::new(Codec::None, count, 1)
        };
        build::finish(&mut buf, &stamp).unwrap();
        if transactional {
            build::set_transactional(&mut buf).unwrap();
        }
        Batches::parse(buf.freeze())
    }

    fn refused(result: Result<Appended, ProduceError>) -> ResponseError {
        match result {
            Err(ProduceError::Producer { error, .. }) => error,
            other => panic!("expected a producer error, got {other:?}"),
        }
    }

    /// A `kind` marker of producer `pid` at `epoch`, from the coordinator at `coordinator_epoch`.
    fn marker(pid: i64, epoch: i16, coordinator_epoch: i32, kind: ControlType) -> Marker {
        Marker {
            producer_id: pid,
            producer_epoch: epoch,
            coordinator_epoch,
            kind,
        }
    }

    #[tokio::test]
    async fn markers_end_transactions_move_the_lso_and_fence_old_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path());
        let appender = broker.storage().appender();
        let (a, b) = (
            broker.storage().producer_ids.allocate().unwrap(),
            broker.storage().producer_ids.allocate().unwrap(),
        );
        let blocking = AppendMode::Blocking;
        let append = |batches: Batches| {
            appender.append_records("t", 0, Some(&batches), Ack::Written, blocking)
        };
        let mark = |topic: &str, marker: Marker| appender.write_marker(topic, 0, marker, blocking);
        let plain = append(batch(-1, -1, -1, 2, false));
        assert_eq!(plain.unwrap().info.base_offset, 0);
        let first = append(batch(a, 0, 0, 2, true)).unwrap();
        let partition = first.partition.clone();
        assert_eq!(first.info.base_offset, 2);
        assert_eq!(partition.last_stable_offset(), 2);
        append(batch(b, 0, 0, 1, true)).unwrap();
        // A non-transactional batch of a producer in a transaction is INVALID_TXN_STATE.
        let stray = append(batch(a, 0, 2, 1, false));
        assert_eq!(refused(stray), ResponseError::InvalidTxnState);
        // Clients may not write control batches.
        let forged =
            Batches::parse(record_batch::control_batch(a, 0, 0, ControlType::Commit, 0).into());
        assert!(matches!(append(forged), Err(ProduceError::ControlBatch)));

        let commit = mark("t", marker(a, 0, 0, ControlType::Commit)).unwrap();
        assert_eq!(commit.info.base_offset, 5);
        // A marker is fsynced whatever the topic's durability; until then it holds the LSO.
        assert!(commit.info.must_sync);
        assert_eq!(partition.last_stable_offset(), 2);
        commit.durable(&broker.storage().syncer).await.unwrap();
        assert_eq!(partition.last_stable_offset(), 4, "b's transaction is open");
        let abort = mark("t", marker(b, 0, 0, ControlType::Abort)).unwrap();
        abort.durable(&broker.storage().syncer).await.unwrap();
        assert_eq!(partition.last_stable_offset(), 7);
        assert_eq!(
            partition.aborted_transactions(0, 7),
            vec![log_core::AbortedTxn {
                producer_id: b,
                first_offset: 4,
                last_offset: abort.info.base_offset
            }]
        );
        assert!(partition.open_transactions().is_empty());

        // KIP-890: the marker's bumped epoch fences the old one, data and markers alike.
        mark("t", marker(a, 1, 0, ControlType::Abort)).unwrap();
        let old = append(batch(a, 0, 2, 1, true));
        assert_eq!(refused(old), ResponseError::InvalidProducerEpoch);
        let old = mark("t", marker(a, 0, 0, ControlType::Commit));
        assert_eq!(refused(old), ResponseError::InvalidProducerEpoch);
        let zombie = mark("t", marker(a, 1, -1, ControlType::Commit));
        assert_eq!(refused(zombie), ResponseError::TransactionCoordinatorFenced);
        let next = append(batch(a, 1, 0, 1, true));
        assert_eq!(
            partition.last_stable_offset(),
            next.unwrap().info.base_offset
        );
        assert!(matches!(
            mark("__consumer_offsets", marker(a, 1, 0, ControlType::Commit)),
            Err(ProduceError::InternalTopic(_))
        ));
    }
}
