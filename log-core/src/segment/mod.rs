//! One segment: a `.log` file of whole batches plus its sparse `.index` and `.timeindex`.
//!
//! The log file is written through the [`Storage`] seam (append-only) and read through a memory
//! map. The active segment is mapped with room to grow (past the end of the file: only the
//! published length is ever touched), so readers never wait for a remap; its file and map are
//! opened on demand too and parked again when the open segments' [`SegmentCache`] needs room
//! (its indexes stay in memory: they reach disk only when it rolls). A closed segment keeps
//! no file open: its map and indexes are loaded on first use and unloaded again when the
//! loaded segments' [`SegmentCache`] needs room.
//!
//! This file holds the segment, its write path and its loading; [`open`] opens and recovers
//! segment files, [`read`] serves reads by offset and by timestamp, [`chain`] walks batches and
//! measures damage.
//!
//! **Resident memory.** A page of a map that a read touches counts in the process's resident
//! set (as file-backed memory) for as long as it stays mapped, and a map stays for the life of
//! its segment: read once, a whole partition would stay resident. So log-core hands pages back
//! once it is done with them ([`release`]):
//! - a fetched slice's bytes, with the headers its read walked over to find and check it, when
//!   the slice's last `Bytes` drops (once the response has been written to the socket);
//! - what a walk that returns no slice read (recovery, an index rebuild, a scrub, a time lookup,
//!   a read that finds nothing), when the walk ends.
//!
//! Writes go through the file, never through the map, so the write head leaves nothing mapped
//! behind it. Releasing is `madvise(MADV_DONTNEED)` on the shared file map: it drops this
//! process's page-table entries only; the data stays in the page cache and on disk, and a later
//! access (the next reader of the same bytes, or one still sending a slice of them) faults it
//! back from the page cache: a minor fault, no I/O unless the kernel evicted the page meanwhile.
//! The cost falls on reads of bytes read before: the first read of a page faults either way,
//! a second one now faults again (BENCHMARKS.md, issue 25: the release itself is ~5 µs per
//! MiB; a re-read from the page cache went from ~11 to ~4 GiB/s, still above `read`).
//! MADV_COLD would leave the pages mapped (and resident); MADV_PAGEOUT takes them out of the
//! page cache too, for the next reader to read from disk.

mod active;
mod cache;
pub(crate) mod chain;
mod open;
mod read;

use std::fs;
use std::io::IoSlice;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};

use memmap2::{Mmap, MmapOptions, UncheckedAdvice};

pub(crate) use active::SyncError;
pub use cache::{SegmentCache, DEFAULT_LOADED_SEGMENTS, DEFAULT_OPEN_SEGMENTS};
pub use chain::{Damage, DamageReason};

use crate::error::{FileError, ReadError};
use crate::index::Indexes;
use crate::io::{Storage, StoredFile};

pub(crate) const LOG_EXT: &str = "log";
pub(crate) const INDEX_EXT: &str = "index";
pub(crate) const TIME_INDEX_EXT: &str = "timeindex";

/// `<base offset, 20 digits>.<ext>`, as Kafka names segment files.
pub(crate) fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

/// Parses a segment file name back into its base offset.
pub(crate) fn parse_file_name(name: &str, ext: &str) -> Option<i64> {
    let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// What recovery found in the last segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes cut from the tail (torn or corrupt).
    pub truncated_bytes: u64,
    /// Why the tail was cut, if it was.
    pub reason: Option<DamageReason>,
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub base_offset: i64,
    pub log_path: PathBuf,
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    cache: Arc<SegmentCache>,
    open_files: Arc<SegmentCache>,
    index_interval: u32,
    /// Appended to, until it is sealed.
    active: AtomicBool,
    /// The file appended to: only an active segment has one, while it is not parked.
    file: Mutex<Option<Arc<dyn StoredFile>>>,
    /// The active segment's map length: room to grow.
    capacity: AtomicU64,
    /// Bytes from the start known fsynced (at creation, recovery or a sync): a segment parked
    /// with more than this written is fsynced first.
    synced_len: AtomicU64,
    /// Serialises the active segment's fsyncs (`sync` and a park's), so that a writeback error
    /// reported to one of them is seen by `sync`.
    syncing: Mutex<()>,
    /// The log file's identity ([`identity`]) when it was created or recovered: a reopen by
    /// path checks it is still that file.
    identity: AtomicU64,
    /// The fsync when it was parked failed: the data's durability is unknown, and its next
    /// sync reports this (a later fsync through a new descriptor could not).
    park_failure: OnceLock<String>,
    map: RwLock<Option<Arc<Mmap>>>,
    indexes: Indexes,
    /// Whether `map` and `indexes` hold the segment (an active one: whether its file is open).
    /// Its lock serialises loading and unloading, and is taken before `file`'s.
    loaded: Mutex<bool>,
    /// The cache's clock at the last read, for least-recently-used unloading.
    last_used: AtomicU64,
    /// Listed by the open segments' cache, and by the loaded segments' cache.
    in_open_files: AtomicBool,
    in_cache: AtomicBool,
    /// Bytes of whole batches published to readers.
    len: AtomicU64,
    /// Bytes from the start whose CRCs were checked in this run (on append, at recovery, or by
    /// a read): a batch is CRC-checked once before it is first served.
    verified: AtomicU64,
    /// Offset after the last published batch.
    next_offset: AtomicI64,
    /// Largest batch max-timestamp in the segment, -1 if none.
    max_timestamp: AtomicI64,
    /// Damaged stretches found so far, by position.
    damage: RwLock<Vec<Damage>>,
    /// Written by the log cleaner (or below the partition's cleaned offset when it opened):
    /// its offsets may have gaps ([`chain::Chain::compacted`]).
    compacted: AtomicBool,
    /// Replaced by a cleaned segment: kept loaded (its files are gone or hold the new
    /// segment) for the readers that still hold it.
    retired: AtomicBool,
}

/// Where a segment's files are and how they are opened: what every segment of a partition shares.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub dir: PathBuf,
    pub storage: Arc<dyn Storage>,
    /// Bounds loaded closed segments.
    pub cache: Arc<SegmentCache>,
    /// Bounds active segments with their file open.
    pub open_files: Arc<SegmentCache>,
    pub index_interval: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn map_file(file: &dyn StoredFile, len: u64, path: &Path) -> Result<Option<Arc<Mmap>>, FileError> {
    if len == 0 {
        return Ok(None);
    }
    let len = usize::try_from(len)
        .map_err(|_| FileError::new("map", path, std::io::Error::other("too large")))?;
    // SAFETY: lograil owns the data dir (it holds its lock file) and only ever appends to a
    // mapped file or truncates bytes beyond the published length, which no reader touches.
    // The map may extend past the end of the file; only published bytes are read.
    let map = unsafe { MmapOptions::new().len(len).map(file.file()) }
        .map_err(|e| FileError::new("map", path, e))?;
    Ok(Some(Arc::new(map)))
}

/// A file's device, inode and birth time in one number (never 0 for a real file): the inode
/// of a deleted file is soon reused, its birth time is not.
fn identity(meta: &std::fs::Metadata) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (meta.dev(), meta.ino(), meta.created().ok()).hash(&mut hasher);
    hasher.finish().max(1)
}

/// The granule of a release: the kernel's fault-around window (`fault_around_bytes`, 64 KiB by
/// default). A fault on a file map maps every page of the page cache in the aligned window
/// around the faulting page, so a read leaves pages mapped beyond the bytes it touched; a
/// release of whole aligned windows takes those too.
const RELEASE_ALIGN: usize = 64 << 10;

/// Releases the pages of `map` over `range` (widened to whole [`RELEASE_ALIGN`] windows of the
/// address space, within the map) from this process; see the module doc. Best effort: madvise
/// fails only on arguments outside the map, which the clamp rules out.
fn release(map: &Mmap, range: Range<usize>) {
    let base = map.as_ptr() as usize;
    let start = (base + range.start.min(map.len())) & !(RELEASE_ALIGN - 1);
    let end = (base + range.end.min(map.len())).next_multiple_of(RELEASE_ALIGN);
    let start = start.saturating_sub(base);
    let end = (end - base).min(map.len());
    if start >= end {
        return;
    }
    // SAFETY: the map is a shared, read-only map of a segment file whose mapped bytes never
    // change (the file is only appended to, and only bytes past the published length, which no
    // reader touches, are ever truncated). MADV_DONTNEED on a shared file map drops this
    // process's page-table entries only: a later access, including through a slice a reader
    // still holds, faults the same bytes back from the page cache (or the file). Unlike on a
    // private or anonymous map, no data is lost or zeroed.
    let result =
        unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, start, end - start) };
    if let Err(e) = result {
        tracing::debug!(error = %e, "madvise(MADV_DONTNEED) on a segment map failed");
    }
}

/// How far a walk over a whole segment (recovery, an index rebuild, a scrub) goes before it
/// releases what lies behind it: such a walk keeps about this much mapped, not the segment.
const WALK_STEP: usize = 1 << 20;

/// The bytes of a map a read or walk touched, from where it started to the furthest batch it
/// looked at: released when dropped.
struct Touched {
    map: Option<Arc<Mmap>>,
    range: Range<usize>,
}

impl Touched {
    /// Nothing touched yet; the walk starts at `at`.
    fn new(map: Option<&Arc<Mmap>>, at: usize) -> Touched {
        Touched {
            map: map.cloned(),
            range: at..at,
        }
    }

    /// The walk yielded `link` from `len` bytes of data: it read to the end of the batch it
    /// checked, or, for damage (measured by scanning forward), possibly to the end.
    fn reach(&mut self, link: &chain::Link, len: usize) {
        let end = match link {
            chain::Link::Batch(at, header) => at + header.size as usize,
            chain::Link::Damage(_) => len,
        };
        self.range.end = self.range.end.max(end);
    }

    /// As [`Touched::reach`], for a walk that goes on over the whole segment: every
    /// [`WALK_STEP`], what it has passed is released at once.
    fn pass(&mut self, link: &chain::Link, len: usize) {
        self.reach(link, len);
        if self.range.len() >= WALK_STEP {
            if let Some(map) = &self.map {
                release(map, self.range.clone());
            }
            self.range.start = self.range.end;
        }
    }
}

impl Drop for Touched {
    fn drop(&mut self) {
        if let Some(map) = &self.map {
            release(map, self.range.clone());
        }
    }
}

/// A slice of a mapped segment, owned by a `Bytes` handed to readers. When the last `Bytes`
/// of it drops, what its read touched is released.
struct MappedSlice {
    map: Arc<Mmap>,
    start: usize,
    end: usize,
    _touched: Touched,
}

impl AsRef<[u8]> for MappedSlice {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.start..self.end]
    }
}

impl Segment {
    /// A segment with nothing loaded and no file open.
    fn new(place: &Place, base_offset: i64, len: u64, next_offset: i64) -> Segment {
        Segment {
            base_offset,
            log_path: place.dir.join(file_name(base_offset, LOG_EXT)),
            dir: place.dir.clone(),
            storage: place.storage.clone(),
            cache: place.cache.clone(),
            open_files: place.open_files.clone(),
            index_interval: place.index_interval,
            active: AtomicBool::new(false),
            file: Mutex::new(None),
            capacity: AtomicU64::new(0),
            synced_len: AtomicU64::new(0),
            park_failure: OnceLock::new(),
            syncing: Mutex::new(()),
            identity: AtomicU64::new(0),
            map: RwLock::new(None),
            indexes: Indexes::new(),
            loaded: Mutex::new(false),
            last_used: AtomicU64::new(0),
            in_open_files: AtomicBool::new(false),
            in_cache: AtomicBool::new(false),
            len: AtomicU64::new(len),
            verified: AtomicU64::new(0),
            next_offset: AtomicI64::new(next_offset),
            max_timestamp: AtomicI64::new(-1),
            damage: RwLock::new(Vec::new()),
            compacted: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        }
    }

    /// Whether the cleaner may have removed records from this segment.
    pub fn is_compacted(&self) -> bool {
        self.compacted.load(Ordering::Acquire)
    }

    pub fn set_compacted(&self) {
        self.compacted.store(true, Ordering::Release);
    }

    /// Loads the segment and keeps it loaded from now on: it is about to be replaced by a
    /// cleaned one, and a reader holding it must not reopen files that no longer hold it.
    pub fn retire(self: &Arc<Self>) -> Result<(), ReadError> {
        self.retired.store(true, Ordering::Release);
        self.load()
    }

    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    /// Still appended to (not sealed yet).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset.load(Ordering::Acquire)
    }

    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp.load(Ordering::Acquire)
    }

    /// Marks the first `len` bytes as CRC-checked (extends, never shrinks).
    fn verified_up_to(&self, len: u64) {
        self.verified.fetch_max(len, Ordering::AcqRel);
    }

    pub fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    /// Whether the open segments' cache (`active`) or the loaded segments' lists it.
    fn held_by(&self, active: bool) -> &AtomicBool {
        if active {
            &self.in_open_files
        } else {
            &self.in_cache
        }
    }

    /// The published length and a map that covers it, loading a closed segment first. The
    /// length is read first: a map that grows is installed before the length that needs it is
    /// published.
    fn view(self: &Arc<Self>) -> Result<(Option<Arc<Mmap>>, u64), ReadError> {
        self.last_used.store(cache::tick(), Ordering::Relaxed);
        loop {
            let len = self.len();
            let map = self
                .map
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if map.is_some() || len == 0 {
                return Ok((map, len));
            }
            // A closed segment not loaded (or unloaded meanwhile): load it and look again.
            self.load()?;
        }
    }

    /// Loads a closed segment's map and indexes (rebuilding indexes that are missing or do not
    /// fit the log), then lets the cache unload others if it is over its bound.
    fn load(self: &Arc<Self>) -> Result<(), ReadError> {
        if self.is_active() {
            match self.reopen() {
                Ok(_) => return Ok(()),
                // Sealed meanwhile: it loads as a closed segment.
                Err(_) if !self.is_active() => {}
                Err(e) => return Err(e.into()),
            }
        }
        {
            let mut loaded = lock(&self.loaded);
            if *loaded {
                return Ok(());
            }
            let file = self
                .storage
                .open(&self.log_path)
                .map_err(|e| FileError::new("open", &self.log_path, e))?;
            // The file closes when `file` drops; the map stays valid without it.
            let map = map_file(file.as_ref(), self.len(), &self.log_path)?;
            *self.map.write().unwrap_or_else(PoisonError::into_inner) = map.clone();
            self.load_indexes(map.as_ref());
            *loaded = true;
        }
        self.cache.admit(self);
        Ok(())
    }
    /// Drops a closed segment's map and indexes (readers holding a slice keep its map alive).
    /// An active segment is parked instead ([`Segment::park`]).
    pub fn unload(&self) {
        if self.is_active() {
            return self.park();
        }
        let mut loaded = lock(&self.loaded);
        if !*loaded || self.retired.load(Ordering::Acquire) {
            return;
        }
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = None;
        self.indexes.clear();
        *loaded = false;
    }

    /// The damaged stretch holding `offset`, if one is known.
    fn damage_covering(&self, offset: i64) -> Option<Damage> {
        self.damage
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|d| d.covers(offset))
            .cloned()
    }

    /// Remembers damage found by a walk, reporting it the first time.
    fn record_damage(&self, damage: &Damage) {
        let mut known = self.damage.write().unwrap_or_else(PoisonError::into_inner);
        if known.iter().any(|d| d.position == damage.position) {
            return;
        }
        tracing::error!(
            segment = %self.log_path.display(),
            position = damage.position,
            resume_at = damage.resume_at,
            offsets = %format_args!("{}..{}", damage.first_offset, damage.end_offset),
            reason = %damage.reason,
            "damaged segment: these offsets cannot be served"
        );
        known.push(damage.clone());
        known.sort_by_key(|d| d.position);
    }

    /// Damage found so far.
    pub fn damages(&self) -> Vec<Damage> {
        self.damage
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn damaged(&self, damage: Damage) -> ReadError {
        ReadError::Damaged {
            path: self.log_path.clone(),
            damage,
        }
    }
    /// Writes both index files from memory (replacing what was there) and syncs them.
    fn write_indexes(&self) -> Result<(), FileError> {
        for (ext, bytes) in [
            (INDEX_EXT, self.indexes.offsets.bytes()),
            (TIME_INDEX_EXT, self.indexes.times.bytes()),
        ] {
            let path = self.dir.join(file_name(self.base_offset, ext));
            let result = self.storage.open(&path).and_then(|f| {
                f.set_len(0)?;
                f.append(&[IoSlice::new(&bytes)])?;
                f.sync_data()
            });
            if let Err(e) = result {
                // A partial index file would be trusted on the next load: remove it.
                let _ = fs::remove_file(&path);
                return Err(FileError::new("write", path, e));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(file_name(42, LOG_EXT), "00000000000000000042.log");
        assert_eq!(
            parse_file_name("00000000000000000042.log", LOG_EXT),
            Some(42)
        );
        assert_eq!(parse_file_name("42.log", LOG_EXT), None);
        assert_eq!(parse_file_name("00000000000000000042.index", LOG_EXT), None);
        assert_eq!(parse_file_name("0000000000000000004x.log", LOG_EXT), None);
    }
}
