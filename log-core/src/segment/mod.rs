//! One segment: a `.log` file of whole batches plus its sparse `.index` and `.timeindex`.
//!
//! The log file is written through the [`Storage`] seam (append-only) and read through a memory
//! map. The active segment is mapped with room to grow (past the end of the file: only the
//! published length is ever touched), so readers never wait for a remap. A closed segment keeps
//! no file open: its map and indexes are loaded on first use and unloaded again when the
//! [`SegmentCache`] needs room.
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

mod cache;
pub(crate) mod chain;
mod open;
mod read;

use std::fs;
use std::io::IoSlice;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use memmap2::{Mmap, MmapOptions, UncheckedAdvice};
use record_batch::BatchHeader;

pub use cache::{SegmentCache, DEFAULT_LOADED_SEGMENTS};
pub use chain::{Damage, DamageReason};

use crate::error::{FileError, ReadError};
use crate::index::{IndexCursor, Indexes};
use crate::io::{self, Storage, StoredFile};

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
    index_interval: u32,
    /// The file appended to: only the active segment has one, until it is sealed.
    file: Mutex<Option<Arc<dyn StoredFile>>>,
    map: RwLock<Option<Arc<Mmap>>>,
    indexes: Indexes,
    /// Whether `map` and `indexes` hold the segment (always, for the active segment). Its lock
    /// serialises loading and unloading.
    loaded: Mutex<bool>,
    /// The cache's clock at the last read, for least-recently-used unloading.
    last_used: AtomicU64,
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
    pub cache: Arc<SegmentCache>,
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
    /// Creates a new, empty active segment with room for `capacity` bytes.
    pub fn create(place: &Place, base_offset: i64, capacity: u64) -> Result<Segment, FileError> {
        let log_path = place.dir.join(file_name(base_offset, LOG_EXT));
        let file = place
            .storage
            .open(&log_path)
            .map_err(|e| FileError::new("create", &log_path, e))?;
        // Make the new file's directory entry durable before anything is acknowledged in it.
        io::sync_dir(&place.dir).map_err(|e| FileError::new("fsync", &place.dir, e))?;
        let map = map_file(file.as_ref(), capacity, &log_path)?;
        let segment = Segment::new(place, base_offset, 0, base_offset);
        *segment.map.write().unwrap_or_else(PoisonError::into_inner) = map;
        *lock(&segment.file) = Some(file);
        *lock(&segment.loaded) = true;
        Ok(segment)
    }

    /// A segment with nothing loaded and no file open.
    fn new(place: &Place, base_offset: i64, len: u64, next_offset: i64) -> Segment {
        Segment {
            base_offset,
            log_path: place.dir.join(file_name(base_offset, LOG_EXT)),
            dir: place.dir.clone(),
            storage: place.storage.clone(),
            cache: place.cache.clone(),
            index_interval: place.index_interval,
            file: Mutex::new(None),
            map: RwLock::new(None),
            indexes: Indexes::new(),
            loaded: Mutex::new(false),
            last_used: AtomicU64::new(0),
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

    /// The published length and a map that covers it, loading a closed segment first. The
    /// length is read first: a map that grows is installed before the length that needs it is
    /// published.
    fn view(self: &Arc<Self>) -> Result<(Option<Arc<Mmap>>, u64), ReadError> {
        self.last_used.store(self.cache.tick(), Ordering::Relaxed);
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
    /// The active segment is never unloaded.
    pub fn unload(&self) {
        let mut loaded = lock(&self.loaded);
        if !*loaded || lock(&self.file).is_some() || self.retired.load(Ordering::Acquire) {
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

    /// The active segment's file.
    pub fn file(&self) -> Result<Arc<dyn StoredFile>, FileError> {
        lock(&self.file).clone().ok_or_else(|| {
            FileError::new(
                "write",
                &self.log_path,
                std::io::Error::other("segment is sealed"),
            )
        })
    }

    /// Appends whole validated batches, writing each one's assigned base offset into its first
    /// 8 bytes on the way (`offsets[i]` for `headers[i]`). On error the file may hold a prefix of
    /// the write: the caller truncates it with [`Segment::truncate_to_published`].
    pub fn write(
        &self,
        records: &[u8],
        headers: &[BatchHeader],
        offsets: &[[u8; 8]],
    ) -> Result<(), FileError> {
        let mut slices = Vec::with_capacity(headers.len() * 2);
        let mut at = 0usize;
        for (header, offset) in headers.iter().zip(offsets) {
            let size = header.size as usize;
            slices.push(IoSlice::new(offset));
            slices.push(IoSlice::new(&records[at + 8..at + size]));
            at += size;
        }
        self.file()?
            .append(&slices)
            .map_err(|e| FileError::new("write", &self.log_path, e))
    }

    /// Makes sure the map covers `needed` bytes (a batch larger than the segment size).
    pub fn ensure_capacity(&self, needed: u64) -> Result<(), FileError> {
        let file = self.file()?;
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.as_ref().is_some_and(|m| m.len() as u64 >= needed) {
            return Ok(());
        }
        *map = map_file(file.as_ref(), needed, &self.log_path)?;
        Ok(())
    }

    /// Publishes batches just written: index entries first, then length and next offset.
    pub fn publish(&self, cursor: &mut IndexCursor, headers: &[BatchHeader], mut position: u64) {
        for header in headers {
            let at = u32::try_from(position).unwrap_or(u32::MAX);
            cursor.add(&self.indexes, header, at);
            position += u64::from(header.size);
            self.max_timestamp
                .fetch_max(header.max_timestamp, Ordering::AcqRel);
        }
        if let Some(last) = headers.last() {
            // Appended batches were validated, CRC included: if everything before them was
            // checked too, so is everything up to their end.
            let _ = self.verified.compare_exchange(
                self.len(),
                position,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            self.len.store(position, Ordering::Release);
            self.next_offset
                .store(last.next_offset(), Ordering::Release);
        }
    }

    /// Cuts the file back to the published length after a failed write.
    pub fn truncate_to_published(&self) -> Result<(), FileError> {
        self.file()?
            .set_len(self.len())
            .map_err(|e| FileError::new("truncate", &self.log_path, e))
    }

    pub fn sync(&self) -> Result<(), FileError> {
        self.file()?
            .sync_data()
            .map_err(|e| FileError::new("fsync", &self.log_path, e))
    }

    /// Seals the segment when it rolls: the final time-index entry and the index files. A
    /// failure leaves the log intact (the indexes are rebuilt on the next load).
    pub fn seal(&self, cursor: &mut IndexCursor) -> Result<(), FileError> {
        cursor.add_time_entry(&self.indexes);
        self.write_indexes()
    }

    /// Closes the file of a sealed, synced segment; from now on it is a closed segment that
    /// the cache may unload.
    pub fn close_file(self: &Arc<Self>) {
        lock(&self.file).take();
        self.cache.admit(self);
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
