//! Idempotent producers: producer-id allocation and per-partition sequence checks.
//!
//! For each (partition, producer id) the broker keeps the producer's epoch, the last sequence
//! it stored, and its last five batches, so a retried batch is acknowledged again with its
//! original offsets instead of being stored twice. The state survives a restart through a
//! snapshot written at each segment roll and at a clean shutdown ([`snapshot`]), then the batch
//! headers after it (the batches carry producer id, epoch and sequence); producer ids come from
//! [`ids`].
//!
//! Bounded, as in Kafka: a producer's state on a partition is dropped after
//! `producer.id.expiration.ms` without a produce there ([`Producers::expire`]); and only ids this
//! broker handed out are tracked ([`ProducerIds::issued`]): a produce with any other id is
//! refused, so a client cannot make the broker keep state for ids it made up.

mod ids;
mod snapshot;

pub use ids::ProducerIds;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kafka_protocol::error::ResponseError;
use log_core::{AppendInfo, Log, Partition};
use record_batch::BatchHeader;

/// How many recent batches per producer are remembered for de-duplication (the Java client's
/// `max.in.flight.requests.per.connection` limit for idempotence).
const RECENT_BATCHES: usize = 5;
/// Segments scanned per partition on start-up to rebuild producer state when there is no
/// snapshot to start from.
const SEGMENTS_TO_SCAN: usize = 2;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What to do with the batches of one produce to one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Append,
    /// A retry of batches already stored: acknowledge them again.
    Duplicate(AppendInfo),
    Reject(ResponseError),
}

#[derive(Debug, Clone)]
struct ProducerEntry {
    epoch: i16,
    last_sequence: i32,
    /// False for a producer known here only from a transaction marker (no batch of it seen):
    /// its next batch's sequence is taken as it comes, as for an unknown producer.
    sequence_known: bool,
    /// The epoch of the transaction coordinator that wrote its last marker here (-1: none
    /// seen); a marker from an older coordinator is fenced.
    coordinator_epoch: i32,
    /// (first sequence, last sequence, where they were stored)
    recent: VecDeque<(i32, i32, AppendInfo)>,
    /// When the producer last appended here (ms since the epoch).
    last_seen_ms: i64,
}

/// The producer state of one partition. Lock it across check → append → record.
#[derive(Debug, Default)]
pub struct PartitionProducers {
    entries: HashMap<i64, ProducerEntry>,
}

/// The batch's last sequence: from its last offset delta, not its record count, which the
/// cleaner lowers when it removes records (a producer's batch has both agree).
fn last_sequence(header: &BatchHeader) -> i32 {
    let last = i64::from(header.base_sequence) + i64::from(header.last_offset_delta);
    // Sequences wrap from i32::MAX to 0.
    (last % (i64::from(i32::MAX) + 1)) as i32
}

fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl PartitionProducers {
    /// Checks the batches of one produce (all from one producer, as clients send them).
    pub fn check(&self, headers: &[BatchHeader]) -> Verdict {
        let Some(first) = headers.first() else {
            return Verdict::Append;
        };
        if first.producer_id < 0 {
            return Verdict::Append;
        }
        if headers
            .iter()
            .any(|h| h.producer_id != first.producer_id || h.producer_epoch != first.producer_epoch)
        {
            return Verdict::Reject(ResponseError::InvalidRecord);
        }
        let Some(entry) = self.entries.get(&first.producer_id) else {
            // Unknown producer (new, or older than the state kept): accept its sequence.
            return Verdict::Append;
        };
        if first.producer_epoch < entry.epoch {
            return Verdict::Reject(ResponseError::InvalidProducerEpoch);
        }
        let last = headers.last().map_or(first.base_sequence, last_sequence);
        if first.producer_epoch > entry.epoch {
            return if first.base_sequence == 0 {
                Verdict::Append
            } else {
                Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
            };
        }
        if let Some((_, _, info)) = entry
            .recent
            .iter()
            .find(|(f, l, _)| *f == first.base_sequence && *l == last)
        {
            return Verdict::Duplicate(*info);
        }
        if !entry.sequence_known || first.base_sequence == next_sequence(entry.last_sequence) {
            Verdict::Append
        } else {
            Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
        }
    }

    /// Records batches that were just appended at `info`, at `now_ms`.
    pub fn record(&mut self, headers: &[BatchHeader], info: AppendInfo, now_ms: i64) {
        let (Some(first), Some(last)) = (headers.first(), headers.last()) else {
            return;
        };
        if first.producer_id < 0 {
            return;
        }
        let entry = self
            .entries
            .entry(first.producer_id)
            .or_insert_with(|| ProducerEntry::new(first.producer_epoch, now_ms));
        entry.last_seen_ms = entry.last_seen_ms.max(now_ms);
        if first.producer_epoch != entry.epoch {
            entry.epoch = first.producer_epoch;
            entry.recent.clear();
        }
        let last_seq = last_sequence(last);
        entry.last_sequence = last_seq;
        entry.sequence_known = true;
        if entry.recent.len() == RECENT_BATCHES {
            entry.recent.pop_front();
        }
        entry
            .recent
            .push_back((first.base_sequence, last_seq, info));
    }
}

impl ProducerEntry {
    fn new(epoch: i16, now_ms: i64) -> ProducerEntry {
        ProducerEntry {
            epoch,
            last_sequence: -1,
            sequence_known: false,
            coordinator_epoch: -1,
            recent: VecDeque::new(),
            last_seen_ms: now_ms,
        }
    }
}

impl PartitionProducers {
    /// Checks a transaction marker for `producer_id` at `producer_epoch` from the coordinator
    /// of `coordinator_epoch`, as Kafka's ProducerAppendInfo does: an epoch below the
    /// producer's is INVALID_PRODUCER_EPOCH (fenced), a coordinator epoch below the last
    /// marker's TRANSACTION_COORDINATOR_FENCED.
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), ResponseError> {
        let Some(entry) = self.entries.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.epoch {
            return Err(ResponseError::InvalidProducerEpoch);
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(ResponseError::TransactionCoordinatorFenced);
        }
        Ok(())
    }

    /// Records a marker just appended (markers carry no sequence): a higher epoch becomes the
    /// producer's, and its sequence starts again at 0 (KIP-890's epoch bump at each
    /// transaction's end); an older epoch's produces are fenced from then on.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        now_ms: i64,
    ) {
        let entry = self
            .entries
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::new(producer_epoch, now_ms));
        entry.last_seen_ms = entry.last_seen_ms.max(now_ms);
        if producer_epoch > entry.epoch {
            entry.epoch = producer_epoch;
            entry.recent.clear();
            entry.last_sequence = -1;
            entry.sequence_known = true;
        }
        entry.coordinator_epoch = entry.coordinator_epoch.max(coordinator_epoch);
    }

    /// The coordinator epoch of `producer_id`'s last marker here (-1: none seen).
    pub fn coordinator_epoch(&self, producer_id: i64) -> i32 {
        self.entries
            .get(&producer_id)
            .map_or(-1, |e| e.coordinator_epoch)
    }

    /// Drops producers not seen for `expiration_ms` at `now_ms`; returns how many.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.entries.len();
        self.entries
            .retain(|_, e| now_ms.saturating_sub(e.last_seen_ms) < expiration_ms);
        before - self.entries.len()
    }

    /// The producers with state here, by id: (id, epoch, last sequence, last append in ms
    /// since the epoch), for DescribeProducers.
    pub fn active(&self) -> Vec<(i64, i16, i32, i64)> {
        let mut active: Vec<_> = self
            .entries
            .iter()
            .map(|(id, e)| (*id, e.epoch, e.last_sequence, e.last_seen_ms))
            .collect();
        active.sort_unstable();
        active
    }

    /// Producers tracked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

type SharedPartition = Arc<Mutex<PartitionProducers>>;

/// Producer state of every partition, keyed by topic then partition index.
#[derive(Debug, Default)]
pub struct Producers {
    topics: Mutex<HashMap<String, HashMap<i32, SharedPartition>>>,
}

impl Producers {
    pub fn partition(&self, topic: &str, partition: i32) -> SharedPartition {
        let mut topics = lock(&self.topics);
        topics
            .entry(topic.to_string())
            .or_default()
            .entry(partition)
            .or_default()
            .clone()
    }

    /// Forgets a deleted topic, so a new topic of the same name starts clean.
    pub fn forget_topic(&self, topic: &str) {
        lock(&self.topics).remove(topic);
    }

    /// Drops every partition's producers not seen for `expiration_ms` at `now_ms`; returns how
    /// many. Each partition is locked in turn, briefly.
    pub fn expire(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let partitions: Vec<SharedPartition> = lock(&self.topics)
            .values()
            .flat_map(|partitions| partitions.values().cloned())
            .collect();
        partitions
            .iter()
            .map(|p| lock(p).expire(now_ms, expiration_ms))
            .sum()
    }

    /// Writes a snapshot of every partition with producer state (at a clean shutdown, once
    /// appends have stopped): a restart then reads no batch header. A partition that fails is
    /// logged and rebuilt the longer way.
    pub fn save_snapshots(&self, log: &Log) {
        let partitions: Vec<(String, i32, SharedPartition)> = lock(&self.topics)
            .iter()
            .flat_map(|(topic, ps)| ps.iter().map(|(i, p)| (topic.clone(), *i, p.clone())))
            .collect();
        for (topic, index, state) in partitions {
            let Some(partition) = u32::try_from(index)
                .ok()
                .and_then(|i| log.topic(&topic)?.partition(i).cloned())
            else {
                continue;
            };
            let state = lock(&state);
            if let Err(e) = state.save_snapshot(partition.dir(), partition.next_offset()) {
                tracing::warn!(partition = partition.name(), error = %e, "could not write the producer snapshot");
            }
        }
    }

    /// Rebuilds a partition's state: its snapshot, then the batch headers after it (without a
    /// usable snapshot, those of its last segments), from the log start on (a producer whose
    /// batches are all below it is gone, as in Kafka). A producer read from the log is taken as
    /// last seen at its last batch's timestamp (as Kafka does), or now if that is later.
    pub fn rebuild(&self, topic: &str, index: i32, partition: &Partition) {
        let now_ms = log_core::now_ms();
        let state = self.partition(topic, index);
        let mut state = lock(&state);
        let log_start = partition.log_start_offset();
        let from = match PartitionProducers::load_snapshot(partition.dir(), log_start) {
            Ok(Some((at, loaded))) if at <= partition.next_offset() => {
                *state = loaded;
                Some(at.max(log_start))
            }
            Ok(Some((at, _))) => {
                // A power cut took the log's tail after the snapshot was written.
                tracing::info!(partition = partition.name(), at, end = partition.next_offset(), "the producer snapshot is past the log's end; producer state is read from the last segments");
                if let Err(e) = PartitionProducers::remove_snapshot(partition.dir()) {
                    tracing::warn!(partition = partition.name(), error = %e, "could not remove a stale producer snapshot");
                }
                None
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(partition = partition.name(), error = %e, "the producer snapshot is not used; producer state is read from the last segments");
                None
            }
        };
        let from = from.unwrap_or_else(|| {
            let bases = partition.segment_base_offsets();
            // DeleteRecords may have moved the log start inside the first segment scanned.
            bases[bases.len().saturating_sub(SEGMENTS_TO_SCAN)..]
                .first()
                .map_or(log_start, |&base| base.max(log_start))
        });
        for header in partition.batch_headers(from) {
            match header {
                // A marker: its epoch, no sequence (its coordinator epoch is in its record,
                // which the walk does not read: fencing by coordinator epoch restarts).
                Ok(h) if h.producer_id >= 0 && h.is_control() => {
                    state.record_marker(
                        h.producer_id,
                        h.producer_epoch,
                        -1,
                        h.max_timestamp.min(now_ms),
                    );
                }
                Ok(h) if h.producer_id >= 0 => {
                    let info = AppendInfo {
                        base_offset: h.base_offset,
                        last_offset: h.last_offset(),
                        max_timestamp: h.max_timestamp,
                        log_append_time: match h.timestamp_type() {
                            record_batch::TimestampType::LogAppendTime => h.max_timestamp,
                            record_batch::TimestampType::CreateTime => -1,
                        },
                        log_start_offset: log_start,
                        // Read back from the log: on disk already.
                        must_sync: false,
                        rolled: false,
                    };
                    state.record(std::slice::from_ref(&h), info, h.max_timestamp.min(now_ms));
                }
                Ok(_) => {}
                Err(e @ log_core::ReadError::Damaged { .. }) => {
                    tracing::warn!(partition = partition.name(), error = %e, "producer state of a damaged stretch is not rebuilt");
                }
                Err(e) => {
                    tracing::warn!(partition = partition.name(), error = %e, "could not rebuild producer state; producers will be accepted as new");
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            size: 100,
            partition_leader_epoch: -1,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: count,
        }
    }

    fn info(base: i64) -> AppendInfo {
        AppendInfo {
            base_offset: base,
            last_offset: base + 1,
            max_timestamp: 0,
            log_append_time: -1,
            log_start_offset: 0,
            must_sync: false,
            rolled: false,
        }
    }

    #[test]
    fn sequences_are_checked_and_retries_deduplicated() {
        let mut p = PartitionProducers::default();
        let b0 = [header(7, 0, 0, 2)];
        assert_eq!(p.check(&b0), Verdict::Append);
        p.record(&b0, info(10), 0);
        assert_eq!(p.check(&b0), Verdict::Duplicate(info(10)));
        let b1 = [header(7, 0, 2, 2)];
        assert_eq!(p.check(&b1), Verdict::Append);
        p.record(&b1, info(12), 0);
        assert_eq!(p.check(&b0), Verdict::Duplicate(info(10)));
        // A gap, and a sequence from the past that is not a known batch.
        assert_eq!(
            p.check(&[header(7, 0, 9, 1)]),
            Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            p.check(&[header(7, 0, 1, 1)]),
            Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
        );
        // An old epoch is fenced; a new epoch starts at 0.
        assert_eq!(
            p.check(&[header(7, -1, 4, 1)]),
            Verdict::Reject(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            p.check(&[header(7, 1, 5, 1)]),
            Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(p.check(&[header(7, 1, 0, 1)]), Verdict::Append);
        // Non-idempotent producers are not checked.
        assert_eq!(p.check(&[header(-1, -1, -1, 3)]), Verdict::Append);
    }

    #[test]
    fn markers_fence_older_epochs_and_start_sequences_again() {
        let mut p = PartitionProducers::default();
        p.record(&[header(7, 0, 0, 3)], info(0), 0);
        assert_eq!(p.check_marker(7, 0, 0), Ok(()));
        p.record_marker(7, 0, 0, 0);
        // The same epoch keeps its sequence: the next batch follows on.
        assert_eq!(p.check(&[header(7, 0, 3, 1)]), Verdict::Append);
        assert_eq!(p.check(&[header(7, 0, 0, 3)]), Verdict::Duplicate(info(0)));
        // A marker of a bumped epoch: the old epoch is fenced, the new one starts at 0.
        p.record_marker(7, 1, 0, 0);
        assert_eq!(
            p.check(&[header(7, 0, 3, 1)]),
            Verdict::Reject(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            p.check(&[header(7, 1, 3, 1)]),
            Verdict::Reject(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(p.check(&[header(7, 1, 0, 1)]), Verdict::Append);
        assert_eq!(
            p.check_marker(7, 0, 0),
            Err(ResponseError::InvalidProducerEpoch)
        );
        // A newer coordinator fences an older one.
        p.record_marker(7, 1, 4, 0);
        assert_eq!(
            p.check_marker(7, 1, 3),
            Err(ResponseError::TransactionCoordinatorFenced)
        );
        assert_eq!(p.coordinator_epoch(7), 4);
        // Known from a marker only: its sequence is taken as it comes.
        p.record_marker(8, 2, 0, 0);
        assert_eq!(p.check(&[header(8, 2, 17, 1)]), Verdict::Append);
        assert_eq!(
            p.check(&[header(8, 1, 0, 1)]),
            Verdict::Reject(ResponseError::InvalidProducerEpoch)
        );
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let mut p = PartitionProducers::default();
        let b = [header(1, 0, i32::MAX - 1, 2)];
        p.record(&b, info(0), 0);
        assert_eq!(p.check(&[header(1, 0, 0, 1)]), Verdict::Append);
    }

    #[test]
    fn producers_unseen_for_the_expiration_are_dropped() {
        let day = 24 * 3600 * 1000;
        let mut p = PartitionProducers::default();
        let t0 = 1_000_000;
        p.record(&[header(1, 0, 0, 1)], info(0), t0);
        p.record(&[header(2, 0, 0, 1)], info(1), t0);
        // Producer 2 produces again half a day later; producer 1 does not.
        p.record(&[header(2, 0, 1, 1)], info(2), t0 + day / 2);
        assert_eq!(p.expire(t0 + day - 1, day), 0);
        assert_eq!(p.expire(t0 + day, day), 1, "producer 1, idle for a day");
        assert_eq!(p.len(), 1);
        // An expired producer is taken as new: its next sequence is accepted, not a duplicate.
        assert_eq!(p.check(&[header(1, 0, 0, 1)]), Verdict::Append);
        assert_eq!(
            p.check(&[header(2, 0, 1, 1)]),
            Verdict::Duplicate(info(2)),
            "producer 2 is still tracked"
        );
        assert_eq!(p.expire(t0 + day / 2 + day, day), 1);
        assert_eq!(p.len(), 0);
    }
}
