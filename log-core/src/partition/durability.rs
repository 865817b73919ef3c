//! Durability: under [`Durability::Always`] an appender waits for an fsync that covers its
//! batch; whoever finds no fsync running starts one for everyone who wrote before it (group
//! commit). [`Durability::Interval`] partitions are flushed by the log's background flusher. A
//! write or fsync that fails in a way that leaves the durable state unknown poisons the
//! partition: every later append is refused.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::{lock, AppendInfo, Partition};
use crate::config::Durability;
use crate::error::{AppendError, FileError};
use crate::io::StoredFile;
use crate::segment::Segment;

/// Whether an fsync is running, and when the last one finished.
#[derive(Debug)]
pub(super) struct SyncState {
    pub syncing: bool,
    pub last_sync: Instant,
}

impl Partition {
    /// Waits until `appended` is as durable as the topic's policy asks (a no-op unless the
    /// policy is [`Durability::Always`]). Fails if the partition was poisoned before it got there.
    pub fn await_durable(&self, appended: &AppendInfo) -> Result<(), AppendError> {
        if self.config().durability == Durability::Always {
            self.wait_durable(appended.last_offset + 1)?;
        }
        Ok(())
    }

    /// Whether everything below `end` is as durable as the topic's policy asks (always true
    /// unless the policy is [`Durability::Always`]); an error if the partition was poisoned
    /// before it got there. Never blocks: for callers that wait for fsyncs their own way.
    pub fn is_durable(&self, end: i64) -> Result<bool, AppendError> {
        if !self.waits_for_fsync() || self.durable_end.load(Ordering::Acquire) >= end {
            return Ok(true);
        }
        self.check_poison()?;
        Ok(false)
    }

    pub(super) fn check_poison(&self) -> Result<(), AppendError> {
        match self.poison.get() {
            Some(reason) => Err(AppendError::Poisoned {
                partition: self.name.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    pub(super) fn poison_with(&self, reason: String) {
        tracing::error!(partition = %self.name, %reason, "partition refuses further writes");
        let _ = self.poison.set(reason);
    }

    /// Blocks until every offset below `end` is on disk, joining or starting a group fsync.
    fn wait_durable(&self, end: i64) -> Result<(), AppendError> {
        let mut state = lock(&self.sync_state);
        loop {
            self.check_poison()?;
            if self.durable_end.load(Ordering::Acquire) >= end {
                return Ok(());
            }
            if state.syncing {
                state = self
                    .synced
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.syncing = true;
            drop(state);
            let result = self.sync_active();
            state = lock(&self.sync_state);
            state.syncing = false;
            match result {
                Ok(covered) => {
                    self.durable_end.fetch_max(covered, Ordering::AcqRel);
                    state.last_sync = Instant::now();
                }
                Err(e) => self.poison_with(e.to_string()),
            }
            self.synced.notify_all();
        }
    }

    /// fsyncs the active segment; returns the end offset that fsync covers.
    fn sync_active(&self) -> Result<i64, FileError> {
        let (file, end, segment): (Arc<dyn StoredFile>, i64, Arc<Segment>) = {
            let writer = lock(&self.writer);
            (
                writer.active.file()?,
                writer.active.next_offset(),
                writer.active.clone(),
            )
        };
        file.sync_data()
            .map_err(|e| FileError::new("fsync", &segment.log_path, e))?;
        Ok(end)
    }

    /// Makes everything appended so far durable.
    pub fn flush(&self) -> Result<(), AppendError> {
        self.wait_durable(self.written_end())
    }

    /// For [`Durability::Interval`]: flushes if there is unsynced data and the interval passed.
    pub fn flush_if_due(&self) -> Result<(), AppendError> {
        let Durability::Interval(every) = self.config().durability else {
            return Ok(());
        };
        let due = {
            let state = lock(&self.sync_state);
            self.durable_end.load(Ordering::Acquire) < self.written_end()
                && state.last_sync.elapsed() >= every
        };
        if due {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Time until the next [`Partition::flush_if_due`] could have work (for a flusher's sleep).
    pub fn flush_interval(&self) -> Option<Duration> {
        match self.config().durability {
            Durability::Interval(every) => Some(every),
            _ => None,
        }
    }
}
