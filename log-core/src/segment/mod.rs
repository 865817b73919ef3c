//! One segment: a `.log` file of whole batches plus its sparse `.index` and `.timeindex`.
//!
//! The log file is written through the [`Storage`] seam (append-only) and read through a memory
//! map. The active segment is mapped with room to grow (past the end of the file: only the
//! published length is ever touched), so readers never wait for a remap.
//!
//! This file holds the segment and its write path; [`open`] opens and recovers segment files,
//! [`read`] serves reads by offset and by timestamp.

mod open;
mod read;

use std::fs;
use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use memmap2::{Mmap, MmapOptions};

use crate::batch::BatchHeader;
use crate::error::FileError;
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
    pub reason: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub base_offset: i64,
    pub log_path: PathBuf,
    file: Arc<dyn StoredFile>,
    map: RwLock<Option<Arc<Mmap>>>,
    /// Bytes of whole batches published to readers.
    len: AtomicU64,
    /// Offset after the last published batch.
    next_offset: AtomicI64,
    /// Largest batch max-timestamp in the segment, -1 if none.
    max_timestamp: AtomicI64,
    indexes: Indexes,
}

fn map_file(
    file: &Arc<dyn StoredFile>,
    len: u64,
    path: &Path,
) -> Result<Option<Arc<Mmap>>, FileError> {
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

/// A slice of a mapped segment, owned by a `Bytes` handed to readers.
struct MappedSlice {
    map: Arc<Mmap>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for MappedSlice {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.start..self.end]
    }
}

impl Segment {
    /// Creates a new, empty segment with room for `capacity` bytes.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: i64,
        capacity: u64,
    ) -> Result<Segment, FileError> {
        let log_path = dir.join(file_name(base_offset, LOG_EXT));
        let file = storage
            .open(&log_path)
            .map_err(|e| FileError::new("create", &log_path, e))?;
        // Make the new file's directory entry durable before anything is acknowledged in it.
        io::sync_dir(dir).map_err(|e| FileError::new("fsync", dir, e))?;
        let map = map_file(&file, capacity, &log_path)?;
        Ok(Segment::new(
            base_offset,
            log_path,
            file,
            map,
            0,
            base_offset,
        ))
    }

    fn new(
        base_offset: i64,
        log_path: PathBuf,
        file: Arc<dyn StoredFile>,
        map: Option<Arc<Mmap>>,
        len: u64,
        next_offset: i64,
    ) -> Segment {
        Segment {
            base_offset,
            log_path,
            file,
            map: RwLock::new(map),
            len: AtomicU64::new(len),
            next_offset: AtomicI64::new(next_offset),
            max_timestamp: AtomicI64::new(-1),
            indexes: Indexes::new(),
        }
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

    /// The published length and a map that covers it. The length is read first: a map that
    /// grows is installed before the length that needs it is published.
    fn snapshot(&self) -> (Option<Arc<Mmap>>, u64) {
        let len = self.len();
        let map = self
            .map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        (map, len)
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
        self.file
            .append(&slices)
            .map_err(|e| FileError::new("write", &self.log_path, e))
    }

    /// Makes sure the map covers `needed` bytes (a batch larger than the segment size).
    pub fn ensure_capacity(&self, needed: u64) -> Result<(), FileError> {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.as_ref().is_some_and(|m| m.len() as u64 >= needed) {
            return Ok(());
        }
        *map = map_file(&self.file, needed, &self.log_path)?;
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
            self.len.store(position, Ordering::Release);
            self.next_offset
                .store(last.next_offset(), Ordering::Release);
        }
    }

    /// Cuts the file back to the published length after a failed write.
    pub fn truncate_to_published(&self) -> Result<(), FileError> {
        self.file
            .set_len(self.len())
            .map_err(|e| FileError::new("truncate", &self.log_path, e))
    }

    pub fn sync(&self) -> Result<(), FileError> {
        self.file
            .sync_data()
            .map_err(|e| FileError::new("fsync", &self.log_path, e))
    }

    pub fn file(&self) -> Arc<dyn StoredFile> {
        self.file.clone()
    }

    /// Seals the segment when it rolls: final time-index entry, then the index files.
    pub fn seal(
        &self,
        storage: &dyn Storage,
        dir: &Path,
        cursor: &mut IndexCursor,
    ) -> Result<(), FileError> {
        cursor.add_time_entry(&self.indexes);
        self.write_indexes(storage, dir)
    }

    /// Writes both index files from memory (replacing what was there) and syncs them.
    fn write_indexes(&self, storage: &dyn Storage, dir: &Path) -> Result<(), FileError> {
        for (ext, bytes) in [
            (INDEX_EXT, self.indexes.offsets.bytes()),
            (TIME_INDEX_EXT, self.indexes.times.bytes()),
        ] {
            let path = dir.join(file_name(self.base_offset, ext));
            let result = storage.open(&path).and_then(|f| {
                f.set_len(0)?;
                f.append(&[IoSlice::new(&bytes)])?;
                f.sync_data()
            });
            if let Err(e) = result {
                // A partial index file would be trusted on the next open: remove it.
                let _ = fs::remove_file(&path);
                return Err(FileError::new("write", path, e));
            }
        }
        Ok(())
    }
}

fn file_len(file: &Arc<dyn StoredFile>, path: &Path) -> Result<u64, FileError> {
    file.file()
        .metadata()
        .map(|m| m.len())
        .map_err(|e| FileError::new("stat", path, e))
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
