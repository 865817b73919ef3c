//! A bound on how many closed segments keep their log mapped and their indexes in memory.
//! Closed segments load on first use; once more than the bound are loaded, the least recently
//! used are unloaded. No file stays open for a closed segment (the map does not need one), so
//! open files are one per partition, and memory maps at most this bound plus the partitions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::Segment;

/// Default bound on loaded closed segments: far below Linux's default of 65,530 memory maps
/// per process (`vm.max_map_count`).
pub const DEFAULT_LOADED_SEGMENTS: usize = 10_000;

#[derive(Debug)]
pub struct SegmentCache {
    capacity: usize,
    /// Closed segments that are (or were, if dropped since) loaded.
    loaded: Mutex<Vec<Weak<Segment>>>,
    clock: AtomicU64,
}

impl SegmentCache {
    /// A cache that keeps at most `capacity` closed segments loaded (at least 1).
    pub fn new(capacity: usize) -> Arc<SegmentCache> {
        Arc::new(SegmentCache {
            capacity: capacity.max(1),
            loaded: Mutex::new(Vec::new()),
            clock: AtomicU64::new(0),
        })
    }

    /// The time of a use, for least-recently-used order.
    pub(super) fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// How many closed segments are loaded.
    pub fn loaded(&self) -> usize {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        loaded.retain(|w| w.strong_count() > 0);
        loaded.len()
    }

    /// Counts a closed segment that just loaded (or just closed its file) and unloads the
    /// least recently used ones beyond the bound. Unloading happens after the cache's lock is
    /// released: a segment's own lock is taken before the cache's, never after.
    pub(super) fn admit(&self, segment: &Arc<Segment>) {
        let victims = {
            let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
            loaded.retain(|w| w.strong_count() > 0);
            if !loaded.iter().any(|w| w.as_ptr() == Arc::as_ptr(segment)) {
                loaded.push(Arc::downgrade(segment));
            }
            let excess = loaded.len().saturating_sub(self.capacity);
            let mut victims = Vec::with_capacity(excess);
            for _ in 0..excess {
                let oldest = loaded
                    .iter()
                    .enumerate()
                    .filter_map(|(i, w)| Some((i, w.upgrade()?)))
                    .filter(|(_, s)| !Arc::ptr_eq(s, segment))
                    .min_by_key(|(_, s)| s.last_used());
                let Some((i, victim)) = oldest else { break };
                loaded.swap_remove(i);
                victims.push(victim);
            }
            victims
        };
        for victim in victims {
            victim.unload();
        }
    }
}
