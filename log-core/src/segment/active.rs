//! The active segment's write path: created or recovered with its file open and mapped with
//! room to grow; parked (fsynced first, file closed, map dropped) when the open segments'
//! cache needs room and opened again by its next write or read; appended to, published,
//! fsynced, sealed when it rolls, then closed.

use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use memmap2::Mmap;
use record_batch::BatchHeader;

use super::{cache, file_name, lock, map_file, Place, Segment, LOG_EXT};
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
            let file = self
                .storage
                .open(&self.log_path)
                .map_err(|e| FileError::new("open", &self.log_path, e))?;
            let capacity = self.capacity.load(Ordering::Acquire).max(self.len());
            let map = map_file(file.as_ref(), capacity, &self.log_path)?;
            *self.map.write().unwrap_or_else(PoisonError::into_inner) = map;
            *slot = Some(file.clone());
            *loaded = true;
            file
        };
        self.open_files.admit(self);
        Ok(file)
    }

    /// Parks an active segment to free its descriptor and map: fsyncs what it holds beyond
    /// the bytes known synced, then closes its file. Its indexes stay; the next write or read
    /// reopens it. A failed fsync is kept for its next [`Segment::sync`] to report.
    pub(super) fn park(&self) {
        let mut loaded = lock(&self.loaded);
        let mut slot = lock(&self.file);
        let Some(file) = slot.as_ref() else { return };
        if !self.is_active() {
            return;
        }
        if self.synced_len.load(Ordering::Acquire) < self.len() {
            match file.sync_data() {
                Ok(()) => {
                    self.synced_len.fetch_max(self.len(), Ordering::AcqRel);
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
            Some(file) => Ok(file),
            None => self.reopen(),
        }
    }

    /// Appends whole validated batches, writing each one's assigned base offset into its first
    /// 8 bytes on the way (`offsets[i]` for `headers[i]`). On error the file may hold a prefix of
    /// the write: the caller truncates it with [`Segment::truncate_to_published`].
    pub fn write(
        self: &Arc<Self>,
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
    pub fn ensure_capacity(self: &Arc<Self>, needed: u64) -> Result<(), FileError> {
        let file = self.file()?;
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        self.capacity.fetch_max(needed, Ordering::AcqRel);
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
    pub fn truncate_to_published(self: &Arc<Self>) -> Result<(), FileError> {
        self.file()?
            .set_len(self.len())
            .map_err(|e| FileError::new("truncate", &self.log_path, e))
    }

    /// fsyncs the active segment. An error to open its file again is [`SyncError::Open`]:
    /// nothing is known lost; a failed fsync (now, or when it was parked) is
    /// [`SyncError::Sync`].
    pub fn sync(self: &Arc<Self>) -> Result<(), SyncError> {
        let len = self.len();
        let file = self.file().map_err(SyncError::Open)?;
        let failed = |e| SyncError::Sync(FileError::new("fsync", &self.log_path, e));
        if let Some(reason) = self.park_failure.get() {
            return Err(failed(std::io::Error::other(reason.clone())));
        }
        file.sync_data().map_err(failed)?;
        self.synced_len.fetch_max(len, Ordering::AcqRel);
        Ok(())
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
            let _loaded = lock(&self.loaded);
            self.active.store(false, Ordering::Release);
            lock(&self.file).take();
        }
        self.cache.admit(self);
    }
}
