//! Records waiting to be sent: one queue of batches per partition, filled by `send` and
//! drained by the sender. Also the partitioners that need state (sticky, round robin) and the
//! flush bookkeeping.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use tokio::sync::Notify;

use super::batch::{Batch, PendingRecord};
use crate::util::lock;

/// One partition's queue and its idempotence state.
#[derive(Debug, Default)]
pub(super) struct PartitionQueue {
    pub batches: VecDeque<Batch>,
    /// The sequence number the next new batch gets.
    pub next_sequence: i32,
    /// The sequence after the last acknowledged batch (what the broker expects next).
    pub acked_sequence: i32,
    /// Batches of this partition in flight.
    pub in_flight: usize,
}

impl PartitionQueue {
    /// Puts a batch that failed back for a retry, in sequence order ahead of new batches.
    pub(super) fn requeue(&mut self, batch: Batch) {
        let seq = batch.sequence();
        let position = match seq {
            None => 0,
            Some(s) => self
                .batches
                .iter()
                .position(|b| b.sequence().is_none_or(|other| other > s))
                .unwrap_or(self.batches.len()),
        };
        self.batches.insert(position, batch);
    }
}

pub(super) type PartitionKey = (Arc<str>, i32);

/// What an append did, for deciding whether to wake the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Appended {
    /// Into a batch with room left.
    Joined,
    /// A new batch, created at this instant (ready once `linger.ms` has passed).
    New(Instant),
    /// A batch is ready to go.
    Full,
}

/// FNV-1a: the accumulator hashes a partition key for every record; SipHash's DoS resistance
/// buys nothing for keys the application chose.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

pub(super) type FnvMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

#[derive(Debug, Default)]
pub(super) struct Accumulator {
    pub partitions: FnvMap<PartitionKey, PartitionQueue>,
    /// Topic → (sticky partition, bytes sent to it since it was chosen).
    sticky: HashMap<String, (i32, usize)>,
    round_robin: HashMap<String, usize>,
    /// Where the next drain starts, so no partition is always last.
    pub drain_start: usize,
}

impl Accumulator {
    /// Adds a record to its partition's last batch, or a new one if that is full.
    pub(super) fn append(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        record: PendingRecord,
        batch_size: usize,
        flush: &FlushTracker,
    ) -> Appended {
        let key = (topic.clone(), partition);
        let queue = match self.partitions.get_mut(&key) {
            Some(q) => q,
            None => self.partitions.entry(key).or_default(),
        };
        let topic = topic.clone();
        let size = record.size;
        if let Some(last) = queue
            .batches
            .back_mut()
            .filter(|b| b.encoded.is_none() && b.bytes + size <= batch_size)
        {
            last.bytes += size;
            last.records.push(record);
            // An error (a field over 2 GiB) is met again, and reported, when the batch is
            // encoded.
            let _ = super::encode::write_pending(last, batch_size);
            return if last.bytes >= batch_size {
                Appended::Full
            } else {
                Appended::Joined
            };
        }
        let generation = flush.register();
        let created = Instant::now();
        // A batch behind another one is sent as soon as its predecessor goes.
        let behind = !queue.batches.is_empty();
        let mut batch = Batch {
            topic,
            partition,
            records: vec![record],
            bytes: size,
            created,
            flush_generation: generation,
            attempts: 0,
            retry_at: None,
            encoded: None,
            open: BytesMut::new(),
            written: 0,
            base_timestamp: 0,
            max_timestamp: 0,
        };
        // Room for a full batch of records of this size, without reserving `batch.size` for
        // a batch of a few small records.
        let _ = super::encode::write_pending(
            &mut batch,
            batch_size.min(size.saturating_mul(16)).max(size),
        );
        queue.batches.push_back(batch);
        if size >= batch_size || behind {
            Appended::Full
        } else {
            Appended::New(created)
        }
    }

    /// The sticky partition for an unkeyed record (KIP-794): the same partition until
    /// `batch_size` bytes went there, then another one with a leader, at random.
    pub(super) fn sticky(
        &mut self,
        topic: &str,
        count: usize,
        available: impl FnOnce() -> Vec<i32>,
        size: usize,
        batch_size: usize,
    ) -> i32 {
        if let Some((p, sent)) = self.sticky.get_mut(topic) {
            if *sent < batch_size && usize::try_from(*p).is_ok_and(|p| p < count) {
                *sent += size;
                return *p;
            }
        }
        let current = self.sticky.get(topic).map(|(p, _)| *p);
        let candidates: Vec<i32> = available()
            .into_iter()
            .filter(|p| Some(*p) != current)
            .collect();
        let partition = if candidates.is_empty() {
            current
                .filter(|p| usize::try_from(*p).is_ok_and(|p| p < count))
                .unwrap_or_else(|| i32::try_from(fastrand::usize(..count.max(1))).unwrap_or(0))
        } else {
            candidates[fastrand::usize(..candidates.len())]
        };
        self.sticky.insert(topic.to_string(), (partition, size));
        partition
    }

    pub(super) fn round_robin(&mut self, topic: &str, count: usize) -> i32 {
        let next = self.round_robin.entry(topic.to_string()).or_insert(0);
        let p = *next % count.max(1);
        *next = next.wrapping_add(1);
        i32::try_from(p).unwrap_or(0)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.partitions.values().all(|q| q.batches.is_empty())
    }
}

/// Which batches a flush waits for: each batch is registered in the generation current at its
/// creation, and `flush` waits until every batch of an earlier generation has completed.
#[derive(Debug, Default)]
pub(super) struct FlushTracker {
    state: Mutex<FlushState>,
    done: Notify,
}

#[derive(Debug, Default)]
struct FlushState {
    generation: u64,
    outstanding: BTreeMap<u64, usize>,
}

impl FlushTracker {
    /// A new batch: counted in the current generation, which is returned.
    pub(super) fn register(&self) -> u64 {
        let mut state = lock(&self.state);
        let generation = state.generation;
        *state.outstanding.entry(generation).or_default() += 1;
        generation
    }

    /// A batch completed (acknowledged or failed).
    pub(super) fn complete(&self, generation: u64) {
        let mut state = lock(&self.state);
        if let Some(n) = state.outstanding.get_mut(&generation) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                state.outstanding.remove(&generation);
                drop(state);
                self.done.notify_waiters();
            }
        }
    }

    /// Batches of generations below the current one are to be sent at once.
    pub(super) fn current(&self) -> u64 {
        lock(&self.state).generation
    }

    /// Starts a flush; wait for it with the returned generation.
    pub(super) fn begin(&self) -> u64 {
        let mut state = lock(&self.state);
        state.generation += 1;
        state.generation
    }

    /// Waits until every batch registered before generation `generation` has completed.
    pub(super) async fn wait(&self, generation: u64) {
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pending = lock(&self.state)
                .outstanding
                .range(..generation)
                .next()
                .is_some();
            if !pending {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tokio::sync::oneshot;

    use super::super::batch::{Encoded, Reply};
    use super::*;

    fn record(size: usize) -> PendingRecord {
        let (reply, _) = oneshot::channel();
        PendingRecord {
            key: None,
            value: Some(Bytes::from(vec![0; size])),
            headers: Vec::new(),
            timestamp: 0,
            size,
            reply: Reply::Future(reply),
        }
    }

    #[test]
    fn batches_fill_up_to_batch_size() {
        let flush = FlushTracker::default();
        let mut acc = Accumulator::default();
        let t: Arc<str> = Arc::from("t");
        assert!(matches!(
            acc.append(&t, 0, record(40), 100, &flush),
            Appended::New(_)
        ));
        assert_eq!(acc.append(&t, 0, record(40), 100, &flush), Appended::Joined);
        // Would exceed: a new batch, behind the first (which is ready now).
        assert_eq!(acc.append(&t, 0, record(40), 100, &flush), Appended::Full);
        // Exactly full.
        assert_eq!(acc.append(&t, 0, record(60), 100, &flush), Appended::Full);
        let queue = &acc.partitions[&(Arc::from("t"), 0)];
        let sizes: Vec<usize> = queue.batches.iter().map(|b| b.bytes).collect();
        assert_eq!(sizes, vec![80, 100]);
        // A record larger than batch.size gets a batch of its own.
        assert_eq!(acc.append(&t, 1, record(500), 100, &flush), Appended::Full);
        assert_eq!(
            acc.partitions[&(Arc::from("t"), 1)].batches[0]
                .records
                .len(),
            1
        );
    }

    #[test]
    fn sticky_partition_changes_after_a_batch() {
        let mut acc = Accumulator::default();
        let available = || vec![0, 1, 2];
        let first = acc.sticky("t", 3, available, 60, 100);
        assert_eq!(acc.sticky("t", 3, available, 30, 100), first);
        // 90 bytes sent: still under 100.
        assert_eq!(acc.sticky("t", 3, available, 30, 100), first);
        // 120 ≥ 100: another partition.
        assert_ne!(acc.sticky("t", 3, available, 30, 100), first);
    }

    #[test]
    fn retries_go_back_in_sequence_order() {
        let mut queue = PartitionQueue::default();
        let batch = |seq: Option<i32>| Batch {
            topic: Arc::from("t"),
            partition: 0,
            records: Vec::new(),
            bytes: 0,
            created: Instant::now(),
            flush_generation: 0,
            attempts: 0,
            retry_at: None,
            encoded: seq.map(|s| Encoded {
                bytes: Bytes::new(),
                producer_id: 1,
                producer_epoch: 0,
                base_sequence: s,
            }),
            open: BytesMut::new(),
            written: 0,
            base_timestamp: 0,
            max_timestamp: 0,
        };
        queue.batches.push_back(batch(None));
        queue.requeue(batch(Some(20)));
        queue.requeue(batch(Some(10)));
        queue.requeue(batch(Some(30)));
        let order: Vec<Option<i32>> = queue.batches.iter().map(Batch::sequence).collect();
        assert_eq!(order, vec![Some(10), Some(20), Some(30), None]);
    }

    #[tokio::test]
    async fn flush_waits_for_earlier_batches_only() {
        let tracker = Arc::new(FlushTracker::default());
        let a = tracker.register();
        let generation = tracker.begin();
        let b = tracker.register();
        let waiter = {
            let tracker = tracker.clone();
            tokio::spawn(async move { tracker.wait(generation).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        tracker.complete(a);
        waiter.await.unwrap();
        tracker.complete(b);
    }
}
