//! The cleaner's offset map: for each key of the dirty part of a partition, the offset of its
//! latest record, in a bounded amount of memory (Kafka's `log.cleaner.dedupe.buffer.size`).
//! Keys are kept as 128-bit fingerprints (two independent SipHash keys), as Kafka keeps an
//! MD5 of each key: 24 bytes of key and offset per entry whatever the key's size, with a
//! chance of two keys sharing a fingerprint too small to matter (below 10^-20 for a billion
//! keys).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

/// Memory one entry takes, table overhead included (what the budget is divided by).
pub(crate) const ENTRY_BYTES: usize = 32;

/// The most entries a new map makes room for before it grows. A dirty part's record count
/// (the most keys it can have) is often many times its keys, and a table sized for it is
/// mostly empty, larger than the caches, and slower to probe.
const INITIAL_ENTRIES: usize = 1 << 16;

#[derive(Debug)]
pub(crate) struct OffsetMap {
    seeds: (RandomState, RandomState),
    latest: HashMap<u128, i64, BuildHasherDefault<Fingerprint>>,
    max_entries: usize,
}

impl OffsetMap {
    /// A map of at most `budget` bytes, for at most `expected` keys (it grows as they come).
    pub fn new(budget: usize, expected: usize) -> OffsetMap {
        let max_entries = (budget / ENTRY_BYTES).max(1);
        OffsetMap {
            seeds: (RandomState::new(), RandomState::new()),
            latest: HashMap::with_capacity_and_hasher(
                expected.min(max_entries).min(INITIAL_ENTRIES),
                BuildHasherDefault::default(),
            ),
            max_entries,
        }
    }

    fn fingerprint(&self, key: &[u8]) -> u128 {
        let high = self.seeds.0.hash_one(key);
        let low = self.seeds.1.hash_one(key);
        (u128::from(high) << 64) | u128::from(low)
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

/// The hasher of a table whose keys are already hashes: their low 64 bits.
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

    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_and_refuses_new_keys_when_full() {
        let mut map = OffsetMap::new(3 * ENTRY_BYTES, 10);
        assert!(map.put(b"a", 5));
        assert!(map.put(b"a", 3), "an older offset of a known key");
        assert_eq!(map.get(b"a"), Some(5));
        assert!(map.put(b"b", 6));
        assert!(map.put(b"c", 7));
        assert!(!map.put(b"d", 8), "full");
        assert!(map.put(b"b", 9), "a known key still updates");
        assert_eq!((map.get(b"b"), map.get(b"d")), (Some(9), None));
        assert_eq!(map.len(), 3);
        assert!((map.utilization() - 1.0).abs() < 1e-9);
    }
}
