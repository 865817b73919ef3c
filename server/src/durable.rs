//! Waiting for fsyncs without holding a thread per waiter. Under durability `always` an append
//! is acknowledged only once it is on disk; a produce that waits for that awaits here. Per
//! partition at most one fsync runs on the blocking pool, covering everything written before
//! it started; every waiter is woken when it finishes and checks whether it is covered (group
//! commit, as in log-core, but the waiters are tasks, not threads).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use log_core::{AppendError, Partition};
use tokio::sync::Notify;

/// One partition's fsync in flight and its waiters.
#[derive(Debug, Default)]
struct Slot {
    syncing: AtomicBool,
    synced: Notify,
}

#[derive(Debug, Default)]
pub struct Syncer {
    /// By partition name (`topic-N`); one slot per partition that ever waited.
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Syncer {
    fn slot(&self, partition: &Partition) -> Arc<Slot> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(partition.name().to_string())
            .or_default()
            .clone()
    }

    /// Starts an fsync of `partition` unless offsets below `end` are durable already or one
    /// is running (lets a caller with several partitions overlap their fsyncs).
    pub fn start(&self, partition: &Arc<Partition>, end: i64) {
        if matches!(partition.is_durable(end), Ok(false)) {
            Self::sync(partition, &self.slot(partition));
        }
    }

    /// Waits until every offset of `partition` below `end` is as durable as its topic asks.
    pub async fn wait(&self, partition: &Arc<Partition>, end: i64) -> Result<(), AppendError> {
        if partition.is_durable(end)? {
            return Ok(());
        }
        let slot = self.slot(partition);
        loop {
            let synced = slot.synced.notified();
            tokio::pin!(synced);
            synced.as_mut().enable();
            if partition.is_durable(end)? {
                return Ok(());
            }
            Self::sync(partition, &slot);
            synced.await;
        }
    }

    /// Runs an fsync of everything written so far on the blocking pool, unless one is running.
    fn sync(partition: &Arc<Partition>, slot: &Arc<Slot>) {
        if slot.syncing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (partition, slot) = (partition.clone(), slot.clone());
        crate::blocking::spawn(move || {
            // A failure poisons the partition; the waiters see it in `is_durable`.
            let _ = partition.flush();
            slot.syncing.store(false, Ordering::Release);
            slot.synced.notify_waiters();
        });
    }
}
