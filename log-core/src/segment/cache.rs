//! Bounds on what segments hold. Two caches of the same kind serve a data dir:
//! - **loaded closed segments** (log mapped, indexes in memory): a closed segment loads on
//!   first use and keeps no file open (the map does not need one);
//! - **open active segments** (the file appended to, and its map with room to grow): an active
//!   segment opens its file on its next write or read and is *parked* again (fsynced if it has
//!   unsynced bytes, file closed, map dropped, indexes kept in memory) when the bound needs room.
//!
//! Beyond a bound the least recently used are let go, so open files stay within the open
//! bound and memory maps within the sum of both, however many partitions there are.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::Segment;

/// Default bound on loaded closed segments: far below Linux's default of 65,530 memory maps
/// per process (`vm.max_map_count`).
pub const DEFAULT_LOADED_SEGMENTS: usize = 10_000;

/// Default bound on active segments with their file open (one descriptor and one map each).
/// `lograil serve` lowers it to half the process's open-file limit when that is smaller.
pub const DEFAULT_OPEN_SEGMENTS: usize = 10_000;

#[derive(Debug)]
pub struct SegmentCache {
    capacity: usize,
    /// Whether it bounds active segments (open files) or closed ones (loaded maps).
    active: bool,
    /// Segments that are (or were, if dropped or changed kind since) held.
    held: Mutex<Vec<Weak<Segment>>>,
}

/// One clock for every use of a segment, reads and writes alike, for least-recently-used order.
static CLOCK: AtomicU64 = AtomicU64::new(0);

/// The time of a use.
pub(super) fn tick() -> u64 {
    CLOCK.fetch_add(1, Ordering::Relaxed)
}

impl SegmentCache {
    /// A cache that keeps at most `capacity` closed segments loaded (at least 1).
    pub fn new(capacity: usize) -> Arc<SegmentCache> {
        SegmentCache::of(capacity, false)
    }

    /// A cache that keeps at most `capacity` active segments' files open (at least 1).
    pub fn active(capacity: usize) -> Arc<SegmentCache> {
        SegmentCache::of(capacity, true)
    }

    fn of(capacity: usize, active: bool) -> Arc<SegmentCache> {
        Arc::new(SegmentCache {
            capacity: capacity.max(1),
            active,
            held: Mutex::new(Vec::new()),
        })
    }

    /// How many segments it holds.
    pub fn held(&self) -> usize {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        self.forget_gone(&mut held);
        held.len()
    }

    /// Drops the entries of segments dropped since, or no longer of this cache's kind (an
    /// active segment that rolled).
    fn forget_gone(&self, held: &mut Vec<Weak<Segment>>) {
        held.retain(|w| match w.upgrade() {
            Some(s) if s.is_active() == self.active => true,
            Some(s) => {
                s.held_by(self.active).store(false, Ordering::Release);
                false
            }
            None => false,
        });
    }

    /// Counts a segment that just loaded (or opened its file, or just closed it). Past the
    /// bound, lets go of the least recently used down to 15/16 of it (64 below it at most), so
    /// that the sort is paid once for many admissions. That happens after the cache's lock is released: a segment's
    /// own locks are taken before the cache's, never after.
    pub(super) fn admit(&self, segment: &Arc<Segment>) {
        let victims = {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            if !segment.held_by(self.active).swap(true, Ordering::AcqRel) {
                held.push(Arc::downgrade(segment));
            }
            if held.len() <= self.capacity {
                return;
            }
            self.forget_gone(&mut held);
            if held.len() <= self.capacity {
                return;
            }
            let mut alive: Vec<(u64, Arc<Segment>)> = held
                .iter()
                .filter_map(Weak::upgrade)
                .map(|s| {
                    let used = if Arc::ptr_eq(&s, segment) {
                        u64::MAX
                    } else {
                        s.last_used()
                    };
                    (used, s)
                })
                .collect();
            alive.sort_unstable_by_key(|(used, _)| *used);
            // At most 64 let go at once: a park may fsync, on whatever thread admitted.
            let keep = self
                .capacity
                .saturating_sub((self.capacity / 16).min(64))
                .max(1);
            let kept = alive.split_off(alive.len().saturating_sub(keep));
            *held = kept.iter().map(|(_, s)| Arc::downgrade(s)).collect();
            alive
        };
        for (_, victim) in victims {
            victim.held_by(self.active).store(false, Ordering::Release);
            if self.active {
                victim.park();
            } else {
                victim.unload();
            }
        }
    }
}
