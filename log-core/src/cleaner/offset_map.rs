//! The cleaner's offset map: for each key of the dirty part of a partition, the offset of its
//! latest record, in a bounded amount of memory (Kafka's `log.cleaner.dedupe.buffer.size`).
//! Keys are kept as 128-bit fingerprints (two independent SipHash keys), as Kafka keeps an
//! MD5 of each key: 24 bytes of key and offset per entry whatever the key's size, with a
//! chance of two keys sharing a fingerprint too small to matter (below 10^-20 for a billion
//! keys).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

/// Memory one slot of the table takes: a 16-byte fingerprint, an 8-byte offset and the
/// table's control byte. The table has a power of two of slots and is at most 7/8 full, so a
/// budget holds 7/8 of the largest power of two of slots that fits in it.
pub(crate) const SLOT_BYTES: usize = 25;

/// The most entries a new map makes room for before it grows. A dirty part's record count
/// (the most keys it can have) is often many times its keys, and a table sized for it is
/// mostly empty, larger than the caches, and slower to probe.
const INITIAL_ENTRIES: usize = 1 << 16;

#[derive(Debug)]
pub(crate) struct OffsetMap {
    seeds: (RandomState, RandomState),
    latest: HashMap<(u64, u64), i64, BuildHasherDefault<Fingerprint>>,
    max_entries: usize,
}

impl OffsetMap {
    /// A map of at most `budget` bytes, for at most `expected` keys (it grows as they come).
    pub fn new(budget: usize, expected: usize) -> OffsetMap {
        let slots = (budget / SLOT_BYTES).max(8);
        let slots = 1usize << (usize::BITS - 1 - slots.leading_zeros());
        let max_entries = slots / 8 * 7;
        OffsetMap {
            seeds: (RandomState::new(), RandomState::new()),
            latest: HashMap::with_capacity_and_hasher(
                expected.min(max_entries).min(INITIAL_ENTRIES),
                BuildHasherDefault::default(),
            ),
            max_entries,
        }
    }

    fn fingerprint(&self, key: &[u8]) -> (u64, u64) {
        (self.seeds.0.hash_one(key), self.seeds.1.hash_one(key))
    }

    /// Records `offset` as `key`'s latest; false (nothing recorded) when the map is full and
    /// `key` is new.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let fingerprint = self.fingerprint(key);
        if self.latest.len() >= self.max_entries && !self.latest.contains_key(&fingerprint) {
            return false;
        }
        let entry = self.latest.entry(fingerprint).or_insert(offset);
        *entry = (*entry).max(offset);
        true
    }

    /// The offset of `key`'s latest record in the mapped part, if it has one there.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(&self.fingerprint(key)).copied()
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }

    /// How full the map is, 0.0 to 1.0 (Kafka's buffer utilization).
    pub fn utilization(&self) -> f64 {
        self.latest.len() as f64 / self.max_entries as f64
    }
}

/// The hasher of a table whose keys are already hashes: their two halves xored.
#[derive(Debug, Default)]
struct Fingerprint(u64);

impl Hasher for Fingerprint {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_and_refuses_new_keys_when_full() {
        // 300 bytes hold 8 slots (12 would not be a power of two): 7 keys.
        let mut map = OffsetMap::new(12 * SLOT_BYTES, 10);
        assert!(map.put(b"a", 5));
        assert!(map.put(b"a", 3), "an older offset of a known key");
        assert_eq!(map.get(b"a"), Some(5));
        for (i, key) in [b"b", b"c", b"d", b"e", b"f", b"g"].into_iter().enumerate() {
            assert!(map.put(key, 6 + i as i64));
        }
        assert!(!map.put(b"h", 20), "full");
        assert!(map.put(b"b", 21), "a known key still updates");
        assert_eq!((map.get(b"b"), map.get(b"h")), (Some(21), None));
        assert_eq!(map.len(), 7);
        assert!((map.utilization() - 1.0).abs() < 1e-9);
        assert!(
            map.latest.capacity() <= 7,
            "the table never grew past its slots"
        );
    }
}
