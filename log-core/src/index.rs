//! Sparse segment indexes in Kafka's on-disk layout (no header, big-endian), so Kafka's own
//! tools can read them:
//!
//! - `.index`: 8-byte entries `(offset - segment base: u32, byte position of a batch start: u32)`;
//! - `.timeindex`: 12-byte entries `(max timestamp so far: i64, offset - segment base: u32)`.
//!
//! The active segment's indexes live in memory, extended by an [`IndexCursor`] as batches are
//! appended, and are written out when the segment rolls; a closed segment's index files are
//! read when the segment is loaded.

use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use record_batch::BatchHeader;

pub(crate) const OFFSET_ENTRY_LEN: usize = 8;
pub(crate) const TIME_ENTRY_LEN: usize = 12;

/// Entries of `LEN` bytes, appended by the writer, searched by readers.
#[derive(Debug)]
struct EntryList<const LEN: usize>(RwLock<Vec<u8>>);

impl<const LEN: usize> EntryList<LEN> {
    fn owned(bytes: Vec<u8>) -> Self {
        EntryList(RwLock::new(bytes))
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<u8>> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, entry: [u8; LEN]) {
        self.write().extend_from_slice(&entry);
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<u8>> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `other`'s entries (loading or unloading a segment).
    fn replace(&self, other: &Self) {
        *self.write() = std::mem::take(&mut *other.write());
    }

    /// Index of the last entry for which `before(entry)` holds, entries being sorted so that
    /// `before` is true for a prefix.
    fn last_where(&self, before: impl Fn(&[u8]) -> bool) -> Option<[u8; LEN]> {
        let bytes = self.read();
        let n = bytes.len() / LEN;
        let entry = |i: usize| &bytes[i * LEN..(i + 1) * LEN];
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(entry(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo > 0).then(|| to_array(entry(lo - 1)))
    }

    fn last(&self) -> Option<[u8; LEN]> {
        let bytes = self.read();
        (bytes.len() >= LEN).then(|| to_array(&bytes[bytes.len() - LEN..]))
    }

    fn to_vec(&self) -> Vec<u8> {
        self.read().to_vec()
    }
}

fn to_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(bytes);
    out
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(to_array(&bytes[at..at + 4]))
}

/// Offset → byte position.
#[derive(Debug)]
pub(crate) struct OffsetIndex(EntryList<OFFSET_ENTRY_LEN>);

/// Why the bytes of an index file do not fit their segment. An entry is shown as it is stored:
/// (relative offset, position) in an `.index`, (timestamp, relative offset) in a `.timeindex`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EntriesError {
    #[error("size {len} is not a multiple of {entry_len}")]
    Size { len: usize, entry_len: usize },
    #[error("entry ({0}, {1}) points outside the segment")]
    Outside(i64, u32),
    #[error("entry ({0}, {1}) is out of order")]
    OutOfOrder(i64, u32),
}

impl OffsetIndex {
    pub fn new() -> Self {
        OffsetIndex(EntryList::owned(Vec::new()))
    }

    /// Checks the bytes of an `.index` file against the segment it indexes; `Err` says why
    /// they do not fit.
    pub fn from_bytes(entries: Vec<u8>, log_len: u64, span: u64) -> Result<Self, EntriesError> {
        if !entries.len().is_multiple_of(OFFSET_ENTRY_LEN) {
            return Err(EntriesError::Size {
                len: entries.len(),
                entry_len: OFFSET_ENTRY_LEN,
            });
        }
        let mut previous: Option<(u32, u32)> = None;
        for entry in entries.chunks_exact(OFFSET_ENTRY_LEN) {
            let (rel, pos) = (u32_at(entry, 0), u32_at(entry, 4));
            let entry = (i64::from(rel), pos);
            if u64::from(rel) >= span.max(1) || u64::from(pos) >= log_len.max(1) {
                return Err(EntriesError::Outside(entry.0, entry.1));
            }
            if previous.is_some_and(|(r, p)| rel <= r || pos <= p) {
                return Err(EntriesError::OutOfOrder(entry.0, entry.1));
            }
            previous = Some((rel, pos));
        }
        Ok(OffsetIndex(EntryList(RwLock::new(entries))))
    }

    pub fn push(&self, relative_offset: u32, position: u32) {
        let mut entry = [0u8; OFFSET_ENTRY_LEN];
        entry[..4].copy_from_slice(&relative_offset.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.0.push(entry);
    }

    /// The last entry `(relative offset, position)` at or before `relative_offset`.
    pub fn lookup(&self, relative_offset: u32) -> Option<(u32, u32)> {
        self.0
            .last_where(|e| u32_at(e, 0) <= relative_offset)
            .map(|e| (u32_at(&e, 0), u32_at(&e, 4)))
    }

    pub fn last(&self) -> Option<(u32, u32)> {
        self.0.last().map(|e| (u32_at(&e, 0), u32_at(&e, 4)))
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// Timestamp → offset.
#[derive(Debug)]
pub(crate) struct TimeIndex(EntryList<TIME_ENTRY_LEN>);

impl TimeIndex {
    pub fn new() -> Self {
        TimeIndex(EntryList::owned(Vec::new()))
    }

    /// Checks the bytes of a `.timeindex` file; `Err` if they do not fit a segment of `span`
    /// offsets.
    pub fn from_bytes(entries: Vec<u8>, span: u64) -> Result<Self, EntriesError> {
        if !entries.len().is_multiple_of(TIME_ENTRY_LEN) {
            return Err(EntriesError::Size {
                len: entries.len(),
                entry_len: TIME_ENTRY_LEN,
            });
        }
        let mut previous: Option<(i64, u32)> = None;
        for entry in entries.chunks_exact(TIME_ENTRY_LEN) {
            let (ts, rel) = decode_time(entry);
            if u64::from(rel) >= span.max(1) {
                return Err(EntriesError::Outside(ts, rel));
            }
            if previous.is_some_and(|(t, r)| ts < t || rel < r) {
                return Err(EntriesError::OutOfOrder(ts, rel));
            }
            previous = Some((ts, rel));
        }
        Ok(TimeIndex(EntryList(RwLock::new(entries))))
    }

    pub fn push(&self, timestamp: i64, relative_offset: u32) {
        let mut entry = [0u8; TIME_ENTRY_LEN];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&relative_offset.to_be_bytes());
        self.0.push(entry);
    }

    /// The last entry whose timestamp is strictly below `timestamp`: every record before its
    /// offset is older than `timestamp`.
    pub fn last_before(&self, timestamp: i64) -> Option<(i64, u32)> {
        self.0
            .last_where(|e| decode_time(e).0 < timestamp)
            .map(|e| decode_time(&e))
    }

    pub fn last(&self) -> Option<(i64, u32)> {
        self.0.last().map(|e| decode_time(&e))
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

fn decode_time(entry: &[u8]) -> (i64, u32) {
    (i64::from_be_bytes(to_array(&entry[..8])), u32_at(entry, 8))
}

/// A segment's two indexes.
#[derive(Debug)]
pub(crate) struct Indexes {
    pub offsets: OffsetIndex,
    pub times: TimeIndex,
}

impl Indexes {
    pub fn new() -> Self {
        Indexes {
            offsets: OffsetIndex::new(),
            times: TimeIndex::new(),
        }
    }

    /// Takes `other`'s entries in place of these.
    pub fn replace(&self, other: Indexes) {
        self.offsets.0.replace(&other.offsets.0);
        self.times.0.replace(&other.times.0);
    }

    /// Drops every entry (a segment being unloaded).
    pub fn clear(&self) {
        self.replace(Indexes::new());
    }
}

/// `offset - base` as stored in the indexes. The writer rolls before it could overflow.
pub(crate) fn relative(base: i64, offset: i64) -> u32 {
    u32::try_from(offset - base).unwrap_or(u32::MAX)
}

/// Where the writer stands in a segment's indexes: when the next `.index` entry is due and the
/// largest timestamp so far, for `.timeindex`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexCursor {
    base_offset: i64,
    interval: u32,
    bytes_since_entry: u32,
    /// Largest timestamp so far and the relative offset of the batch that carried it.
    max_timestamp: i64,
    max_timestamp_rel: u32,
    /// Timestamp of the last `.timeindex` entry.
    last_time_entry: i64,
}

impl IndexCursor {
    /// A cursor at the start of the segment whose first offset is `base_offset`, with an
    /// `.index` entry every `interval` bytes of log.
    pub fn new(base_offset: i64, interval: u32) -> Self {
        IndexCursor {
            base_offset,
            interval,
            bytes_since_entry: 0,
            max_timestamp: -1,
            max_timestamp_rel: 0,
            last_time_entry: -1,
        }
    }

    /// The largest batch timestamp seen so far, -1 if none.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Accounts for the batch at `position` and adds index entries when one is due.
    pub fn add(&mut self, indexes: &Indexes, header: &BatchHeader, position: u32) {
        let rel = relative(self.base_offset, header.base_offset);
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.max_timestamp_rel = rel;
        }
        if self.bytes_since_entry >= self.interval {
            indexes.offsets.push(rel, position);
            self.add_time_entry(indexes);
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry = self.bytes_since_entry.saturating_add(header.size);
    }

    /// Adds a `.timeindex` entry for the largest timestamp so far, if it is new (also when a
    /// segment is sealed, so its last timestamp is indexed).
    pub fn add_time_entry(&mut self, indexes: &Indexes) {
        if self.max_timestamp > self.last_time_entry {
            indexes
                .times
                .push(self.max_timestamp, self.max_timestamp_rel);
            self.last_time_entry = self.max_timestamp;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_lookup_finds_the_last_entry_at_or_before() {
        let index = OffsetIndex::new();
        assert_eq!(index.lookup(5), None);
        index.push(1, 0);
        index.push(10, 4096);
        index.push(20, 8192);
        assert_eq!(index.lookup(0), None);
        assert_eq!(index.lookup(9), Some((1, 0)));
        assert_eq!(index.lookup(10), Some((10, 4096)));
        assert_eq!(index.lookup(19), Some((10, 4096)));
        assert_eq!(index.lookup(1000), Some((20, 8192)));
        assert_eq!(index.bytes().len(), 3 * OFFSET_ENTRY_LEN);
        assert_eq!(index.last(), Some((20, 8192)));
    }

    #[test]
    fn time_lookup_is_strictly_before() {
        let index = TimeIndex::new();
        index.push(100, 0);
        index.push(200, 10);
        assert_eq!(index.last_before(100), None);
        assert_eq!(index.last_before(101), Some((100, 0)));
        assert_eq!(index.last_before(200), Some((100, 0)));
        assert_eq!(index.last_before(201), Some((200, 10)));
        assert_eq!(index.last(), Some((200, 10)));
    }
}
