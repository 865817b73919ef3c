//! The active segment's write path: created or recovered with its file open and mapped with
//! room to grow; parked (fsynced first, file closed, map dropped) when the open segments'
//! cache needs room and opened again by its next write or read; appended to, published,
//! fsynced, sealed when it rolls, then closed.

use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use memmap2::Mmap;
use record_batch::BatchHeader;

use super::{cache, file_name, identity, lock, map_file, Place, Segment, LOG_EXT};
use crate::error::FileError;
use crate::index::IndexCursor;
use crate::io::{self, StoredFile};

/// Why an fsync of the active segment failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    /// Its parked file could not be opened again (too many open files, say): nothing written
    /// is known lost.
    #[error(transparent)]
    Open(FileError),
    /// The fsync failed: what it covered may be lost.
    #[error(transparent)]
    Sync(FileError),
}

impl Segment {
    /// Creates a new, empty active segment with room for `capacity` bytes.
    pub fn create(
        place: &Place,
        base_offset: i64,
        capacity: u64,
    ) -> Result<Arc<Segment>, FileError> {
        let log_path = place.dir.join(file_name(base_offset, LOG_EXT));
        let file = place
            .storage
            .open(&log_path)
            .map_err(|e| FileError::new("create", &log_path, e))?;
        // Make the new file's directory entry durable before anything is acknowledged in it.
        io::sync_dir(&place.dir).map_err(|e| FileError::new("fsync", &place.dir, e))?;
        let map = map_file(file.as_ref(), capacity, &log_path)?;
        let segment = Segment::new(place, base_offset, 0, base_offset);
        segment.opened_active(file, map, capacity);
        let segment = Arc::new(segment);
        segment.open_files.admit(&segment);
        Ok(segment)
    }

    /// Installs an active segment's open file and map (at creation or recovery).
    pub(super) fn opened_active(
        &self,
        file: Arc<dyn StoredFile>,
        map: Option<Arc<Mmap>>,
        capacity: u64,
    ) {
        if let Ok(meta) = file.file().metadata() {
            self.identity.store(identity(&meta), Ordering::Release);
        }
        self.active.store(true, Ordering::Release);
        self.capacity.store(capacity, Ordering::Release);
        self.synced_len.store(self.len(), Ordering::Release);
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = map;
        *lock(&self.file) = Some(file);
        *lock(&self.loaded) = true;
    }

    /// Opens a parked active segment's file again, with its map (room to grow included); its
    /// indexes never left memory. Returns the open file.
    pub(super) fn reopen(self: &Arc<Self>) -> Result<Arc<dyn StoredFile>, FileError> {
        let file = {
            let mut loaded = lock(&self.loaded);
            let mut slot = lock(&self.file);
            if let Some(file) = slot.as_ref() {
                return Ok(file.clone());
            }
            if !self.is_active() {
                return Err(FileError::new(
                    "write",
                    &self.log_path,
                    std::io::Error::other("segment is sealed"),
                ));
            }
            let file = self.open_same_file()?;
            // The capacity is read under the map's lock, which `ensure_capacity` raises it
            // under: a map it installs meanwhile is never replaced by a smaller one.
            let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
            let capacity = self.capacity.load(Ordering::Acquire).max(self.len());
            if map.as_ref().is_none_or(|m| (m.len() as u64) < capacity) {
                *map = map_file(file.as_ref(), capacity, &self.log_path)?;
            }
            drop(map);
            *slot = Some(file.clone());
            *loaded = true;
            file
        };
        self.open_files.admit(self);
        Ok(file)
    }

    /// Opens the segment's file again by its path, never creating it, and checks it is the
    /// same file: a deleted topic's directory may be gone, or hold a new topic of the same
    /// name whose files this segment must not touch.
    fn open_same_file(&self) -> Result<Arc<dyn StoredFile>, FileError> {
        let gone = |why: &str| FileError::new("open", &self.log_path, std::io::Error::other(why));
        if !self.log_path.is_file() {
            return Err(gone("the segment's file is gone (its topic was deleted?)"));
        }
        let file = self
            .storage
            .open(&self.log_path)
            .map_err(|e| FileError::new("open", &self.log_path, e))?;
        let meta = file
            .file()
            .metadata()
            .map_err(|e| FileError::new("stat", &self.log_path, e))?;
        let known = self.identity.load(Ordering::Acquire);
        if known != 0 && identity(&meta) != known {
            return Err(gone(
                "another file now has the segment's path (its topic was re-created?)",
            ));
        }
        Ok(file)
    }

    /// Parks an active segment to free its descriptor and map: fsyncs what it holds beyond
    /// the bytes known synced, then closes its file. Its indexes stay; the next write or read
    /// reopens it. A failed fsync is kept for its next [`Segment::sync`] to report.
    ///
    /// A segment whose file someone holds (a write or an fsync in progress) is left open: its
    /// bytes could land after this fsync, with no descriptor left to report their writeback.
    /// It is listed again on its next use.
    pub(super) fn park(&self) {
        // An fsync of it in progress: busy, so left open (and the two fsyncs never race to
        // report one writeback error to only one of them).
        let Ok(_syncing) = self.syncing.try_lock() else {
            return;
        };
        let mut loaded = lock(&self.loaded);
        let mut slot = lock(&self.file);
        let Some(file) = slot.as_ref() else { return };
        if !self.is_active() || Arc::strong_count(file) > 1 {
            return;
        }
        let len = self.len();
        if self.synced_len.load(Ordering::Acquire) < len {
            match file.sync_data() {
                Ok(()) => {
                    self.synced_len.fetch_max(len, Ordering::AcqRel);
                }
                Err(e) => {
                    let _ = self.park_failure.set(e.to_string());
                }
            }
        }
        *slot = None;
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = None;
        *loaded = false;
    }

    /// The active segment's file, opened again if it was parked.
    pub fn file(self: &Arc<Self>) -> Result<Arc<dyn StoredFile>, FileError> {
        self.last_used.store(cache::tick(), Ordering::Relaxed);
        let open = lock(&self.file).clone();
        match open {
            Some(file) => {
                if !self.in_open_files.load(Ordering::Acquire) {
                    // Left open by a park that found it busy: counted again.
                    self.open_files.admit(self);
                }
                Ok(file)
            }
            None => self.reopen(),
        }
    }

    /// Appends whole validated batches, writing each one's assigned base offset into its first
    /// 8 bytes on the way (`offsets[i]` for `headers[i]`). On error the file may hold a prefix of
    /// the write: the caller truncates it with [`Segment::truncate_to_published`].
    pub fn write(
        &self,
        file: &dyn StoredFile,
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
        file.append(&slices)
            .map_err(|e| FileError::new("write", &self.log_path, e))
    }

    /// Makes sure the map covers `needed` bytes (a batch larger than the segment size).
    pub fn ensure_capacity(&self, file: &dyn StoredFile, needed: u64) -> Result<(), FileError> {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        self.capacity.fetch_max(needed, Ordering::AcqRel);
        if map.as_ref().is_some_and(|m| m.len() as u64 >= needed) {
            return Ok(());
        }
        *map = map_file(file, needed, &self.log_path)?;
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
    pub fn truncate_to_published(&self, file: &dyn StoredFile) -> Result<(), FileError> {
        file.set_len(self.len())
            .map_err(|e| FileError::new("truncate", &self.log_path, e))
    }

    /// fsyncs the active segment. An error to open its file again is [`SyncError::Open`]:
    /// nothing is known lost; a failed fsync (now, or when it was parked) is
    /// [`SyncError::Sync`].
    /// A segment sealed meanwhile is synced: the roll that sealed it fsynced it first.
    pub fn sync(self: &Arc<Self>) -> Result<(), SyncError> {
        let _syncing = lock(&self.syncing);
        let len = self.len();
        let file = match self.file() {
            Ok(file) => file,
            Err(_) if !self.is_active() => return Ok(()),
            Err(e) => return Err(SyncError::Open(e)),
        };
        let failed = |e| SyncError::Sync(FileError::new("fsync", &self.log_path, e));
        let synced = file.sync_data();
        if let Some(reason) = self.park_failure.get() {
            return Err(failed(std::io::Error::other(reason.clone())));
        }
        synced.map_err(failed)?;
        self.synced_len.fetch_max(len, Ordering::AcqRel);
        Ok(())
    }

    /// Whether its file is open (not parked, not sealed).
    pub fn is_open(&self) -> bool {
        lock(&self.file).is_some()
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
        {
            let loaded = lock(&self.loaded);
            self.active.store(false, Ordering::Release);
            lock(&self.file).take();
            if !*loaded {
                // Parked before it closed: its indexes are on disk, and load from there.
                self.indexes.clear();
            }
        }
        self.cache.admit(self);
    }
}
