//! Durability: an append whose acknowledgement must wait for an fsync
//! ([`AppendInfo::must_sync`]: `acks=all` without write caching, `flush.messages` reached, the
//! broker's own writes) waits for one that covers its batch; whoever finds no fsync running
//! starts one for everyone who wrote before it (group commit). The rest is fsynced by the
//! log's background flusher within `flush.ms` of being written, at a roll and at a close. A
//! write or fsync that fails in a way that leaves the durable state unknown poisons the
//! partition: every later append is refused.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::{lock, now_ms, AppendInfo, Partition};
use crate::config::{Ack, Durability};
use crate::error::AppendError;
use crate::segment::{Segment, SyncError};

/// Whether an fsync is running.
#[derive(Debug)]
pub(super) struct SyncState {
    pub syncing: bool,
}

impl Partition {
    /// Waits until `appended` is as durable as its acknowledgement asks (a no-op unless
    /// [`AppendInfo::must_sync`]). Fails if the partition was poisoned before it got there.
    pub fn await_durable(&self, appended: &AppendInfo) -> Result<(), AppendError> {
        if appended.must_sync {
            self.wait_durable(appended.last_offset + 1)?;
        }
        Ok(())
    }

    /// Whether every offset below `end` is fsynced; an error if the partition was poisoned
    /// before it got there. Never blocks: for callers that wait for fsyncs their own way.
    pub fn is_durable(&self, end: i64) -> Result<bool, AppendError> {
        if self.durable_end.load(Ordering::Acquire) >= end {
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

    /// Moves the log end to `next` after an append acknowledged as `ack` (under the writer
    /// lock, at `now`): whether its acknowledgement waits for an fsync. One that does not is
    /// seen by readers at once.
    pub(super) fn written_to(
        &self,
        next: i64,
        ack: Ack,
        durability: &Durability,
        now: i64,
    ) -> bool {
        let must_sync = durability.waits(ack, next - self.durable_end.load(Ordering::Acquire));
        self.end_offset.store(next, Ordering::Release);
        let _ = self
            .unsynced_since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
        if !must_sync {
            self.visible_end.fetch_max(next, Ordering::AcqRel);
        }
        must_sync
    }

    /// Every offset below `end` is on disk: readers may see it, and `flush.ms` counts from
    /// what is left.
    pub(super) fn synced_to(&self, end: i64) {
        self.durable_end.fetch_max(end, Ordering::AcqRel);
        self.visible_end.fetch_max(end, Ordering::AcqRel);
        // An append racing this may leave its data without a time: `flush_if_due` gives it
        // one at its next look.
        let left = if end >= self.written_end() {
            0
        } else {
            now_ms()
        };
        self.unsynced_since.store(left, Ordering::Release);
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
                Ok(covered) => self.synced_to(covered),
                Err(SyncError::Sync(e)) => self.poison_with(e.to_string()),
                Err(SyncError::Open(e)) => {
                    // Nothing is known lost: this wait fails, a later one tries again.
                    self.synced.notify_all();
                    return Err(e.into());
                }
            }
            self.synced.notify_all();
        }
    }

    /// fsyncs the active segment; returns the end offset that fsync covers.
    fn sync_active(&self) -> Result<i64, SyncError> {
        let (end, segment): (i64, Arc<Segment>) = {
            let writer = lock(&self.writer);
            (writer.active.next_offset(), writer.active.clone())
        };
        segment.sync()?;
        Ok(end)
    }

    /// Makes everything appended so far durable.
    pub fn flush(&self) -> Result<(), AppendError> {
        self.wait_durable(self.written_end())
    }

    /// For `flush.ms`: flushes if data not yet fsynced was written at least that long ago.
    pub fn flush_if_due(&self) -> Result<(), AppendError> {
        let Some(every) = self.config().durability.flush_ms else {
            return Ok(());
        };
        if self.durable_end.load(Ordering::Acquire) >= self.written_end() {
            return Ok(());
        }
        let since = self.unsynced_since.load(Ordering::Acquire);
        if since == 0 {
            // Written while an fsync finished (see `synced_to`): its time starts now.
            let _ = self.unsynced_since.compare_exchange(
                0,
                now_ms(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            return Ok(());
        }
        if now_ms().saturating_sub(since) >= i64::try_from(every).unwrap_or(i64::MAX) {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// The partition's `flush.ms`, if it has one (for a flusher's sleep).
    pub fn flush_interval(&self) -> Option<Duration> {
        self.config().durability.flush_ms.map(Duration::from_millis)
    }
}
