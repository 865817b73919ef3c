//! One segment: a `.log` file of whole batches plus its sparse `.index` and `.timeindex`.
//!
//! The log file is written through the [`Storage`] seam (append-only) and read through a memory
//! map. The active segment is mapped with room to grow (past the end of the file: only the
//! published length is ever touched), so readers never wait for a remap.

use std::fs;
use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use memmap2::{Mmap, MmapOptions};

use crate::batch::{self, BatchHeader};
use crate::error::{FileError, OpenError, ReadError};
use crate::index::{OffsetIndex, TimeIndex};
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
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
}

/// Where the writer stands in the active segment: what it needs to extend the indexes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexCursor {
    interval: u32,
    bytes_since_entry: u32,
    /// Largest timestamp so far and the relative offset of the batch that carried it.
    max_timestamp: i64,
    max_timestamp_rel: u32,
    /// Timestamp of the last `.timeindex` entry.
    last_time_entry: i64,
}

impl IndexCursor {
    pub fn new(interval: u32) -> Self {
        IndexCursor {
            interval,
            bytes_since_entry: 0,
            max_timestamp: -1,
            max_timestamp_rel: 0,
            last_time_entry: -1,
        }
    }

    /// Accounts for the batch at `position` and adds index entries when one is due.
    fn add(&mut self, segment: &Segment, header: &BatchHeader, position: u32) {
        let rel = relative(segment.base_offset, header.base_offset);
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.max_timestamp_rel = rel;
        }
        if self.bytes_since_entry >= self.interval {
            segment.index.push(rel, position);
            self.add_time_entry(segment);
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry = self.bytes_since_entry.saturating_add(header.size);
    }

    fn add_time_entry(&mut self, segment: &Segment) {
        if self.max_timestamp > self.last_time_entry {
            segment
                .time_index
                .push(self.max_timestamp, self.max_timestamp_rel);
            self.last_time_entry = self.max_timestamp;
        }
    }
}

/// `offset - base` as stored in the indexes. The writer rolls before it could overflow.
fn relative(base: i64, offset: i64) -> u32 {
    u32::try_from(offset - base).unwrap_or(u32::MAX)
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
            index: OffsetIndex::new(),
            time_index: TimeIndex::new(),
        }
    }

    /// Opens a closed segment whose offsets end at `end_offset` (the next segment's base).
    /// Index files that are missing or do not fit the log are rebuilt.
    pub fn open_closed(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: i64,
        end_offset: i64,
        index_interval: u32,
    ) -> Result<Segment, OpenError> {
        let log_path = dir.join(file_name(base_offset, LOG_EXT));
        let file = storage
            .open(&log_path)
            .map_err(|e| FileError::new("open", &log_path, e))?;
        let len = file_len(&file, &log_path)?;
        let map = map_file(&file, len, &log_path)?;
        let mut segment = Segment::new(base_offset, log_path, file, map, len, end_offset);
        let span = u64::try_from(end_offset - base_offset).unwrap_or(0);
        let loaded = segment.load_indexes(storage, dir, span);
        match loaded {
            Ok(max_timestamp) => segment
                .max_timestamp
                .store(max_timestamp, Ordering::Relaxed),
            Err(reason) => {
                tracing::warn!(segment = %segment.log_path.display(), %reason, "rebuilding indexes");
                segment.index = OffsetIndex::new();
                segment.time_index = TimeIndex::new();
                let mut cursor = IndexCursor::new(index_interval);
                segment.walk_for_rebuild(&mut cursor, false)?;
                cursor.add_time_entry(&segment);
                segment
                    .max_timestamp
                    .store(cursor.max_timestamp, Ordering::Relaxed);
                if let Err(e) = segment.write_indexes(storage, dir) {
                    tracing::warn!(error = %e, "could not write rebuilt indexes; they will be rebuilt again");
                }
            }
        }
        Ok(segment)
    }

    /// Maps and checks the index files of a closed segment; returns its max timestamp.
    fn load_indexes(
        &mut self,
        storage: &dyn Storage,
        dir: &Path,
        span: u64,
    ) -> Result<i64, String> {
        let len = self.len();
        let map_index = |ext: &str| -> Result<Option<Mmap>, String> {
            let path = dir.join(file_name(self.base_offset, ext));
            let describe = |e: std::io::Error| format!("{}: {e}", path.display());
            if !path.exists() {
                return Err(format!("{} is missing", path.display()));
            }
            let file = storage.open(&path).map_err(describe)?;
            if file.file().metadata().map_err(describe)?.len() == 0 {
                return Ok(None);
            }
            // SAFETY: as in `map_file`; index files of closed segments are never written again.
            unsafe { Mmap::map(file.file()) }
                .map(Some)
                .map_err(describe)
        };
        let index = OffsetIndex::from_map(map_index(INDEX_EXT)?, len, span)
            .map_err(|e| format!("{}: {e}", file_name(self.base_offset, INDEX_EXT)))?;
        let time_index = TimeIndex::from_map(map_index(TIME_INDEX_EXT)?, span)
            .map_err(|e| format!("{}: {e}", file_name(self.base_offset, TIME_INDEX_EXT)))?;
        if let Some((rel, pos)) = index.last() {
            // The last entry must point at a batch with the offset it claims.
            let data = self.snapshot().0.ok_or("log is not mapped")?;
            let header = BatchHeader::parse(&data[pos as usize..len as usize])
                .map_err(|e| format!("index entry at byte {pos}: {e}"))?;
            if header.base_offset != self.base_offset + i64::from(rel) {
                return Err(format!(
                    "last index entry says offset {} at byte {pos}, the log has {}",
                    self.base_offset + i64::from(rel),
                    header.base_offset
                ));
            }
        }
        let max_timestamp = time_index.last().map_or(-1, |(ts, _)| ts);
        self.index = index;
        self.time_index = time_index;
        Ok(max_timestamp)
    }

    /// Opens the last segment of a partition and recovers it: validates every batch (length,
    /// CRC, offsets), truncates a torn or corrupt tail to the last whole valid batch, and
    /// rebuilds its indexes in memory.
    pub fn recover(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: i64,
        capacity: u64,
        index_interval: u32,
    ) -> Result<(Segment, IndexCursor, Recovery), OpenError> {
        let log_path = dir.join(file_name(base_offset, LOG_EXT));
        let file = storage
            .open(&log_path)
            .map_err(|e| FileError::new("open", &log_path, e))?;
        let file_len = file_len(&file, &log_path)?;
        let map = map_file(&file, capacity.max(file_len), &log_path)?;
        let segment = Segment::new(base_offset, log_path, file, map, file_len, base_offset);
        let mut cursor = IndexCursor::new(index_interval);
        let (valid_len, next_offset, reason) = segment.walk_for_rebuild(&mut cursor, true)?;
        let mut recovery = Recovery::default();
        if valid_len < file_len {
            recovery = Recovery {
                truncated_bytes: file_len - valid_len,
                reason,
            };
            tracing::warn!(
                segment = %segment.log_path.display(),
                at = valid_len,
                bytes = recovery.truncated_bytes,
                reason = recovery.reason.as_deref().unwrap_or(""),
                "truncating torn or corrupt tail"
            );
            segment
                .file
                .set_len(valid_len)
                .and_then(|()| segment.file.sync_data())
                .map_err(|e| FileError::new("truncate", &segment.log_path, e))?;
        }
        segment.len.store(valid_len, Ordering::Release);
        segment.next_offset.store(next_offset, Ordering::Release);
        segment
            .max_timestamp
            .store(cursor.max_timestamp, Ordering::Release);
        // The active segment's index files are written when it rolls; older copies are stale.
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            let path = dir.join(file_name(base_offset, ext));
            if let Err(e) = fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(FileError::new("remove", path, e).into());
                }
            }
        }
        Ok((segment, cursor, recovery))
    }

    /// Walks the batches from the start, rebuilding the indexes. With `check_crc` (recovery) it
    /// stops at the first invalid batch and returns where; without it (a closed segment), an
    /// invalid batch is an error naming the file. Returns (valid length, next offset, reason).
    fn walk_for_rebuild(
        &self,
        cursor: &mut IndexCursor,
        check_crc: bool,
    ) -> Result<(u64, i64, Option<String>), OpenError> {
        let len = self.len.load(Ordering::Acquire) as usize;
        let (map, _) = self.snapshot();
        let data: &[u8] = map.as_deref().map_or(&[], |m| &m[..len]);
        let mut pos = 0usize;
        let mut expected = self.base_offset;
        let mut reason = None;
        while pos < len {
            let result = if check_crc {
                batch::validate(&data[pos..])
            } else {
                BatchHeader::parse(&data[pos..]).and_then(|h| {
                    if pos + h.size as usize > len {
                        Err(crate::error::BatchError::Truncated {
                            needed: h.size as usize,
                            available: len - pos,
                        })
                    } else {
                        Ok(h)
                    }
                })
            };
            let header = match result {
                Ok(h) if h.base_offset == expected => h,
                Ok(h) if pos == 0 => {
                    return Err(OpenError::Corrupt {
                        path: self.log_path.clone(),
                        reason: format!(
                            "first batch has base offset {} but the file name says {}",
                            h.base_offset, self.base_offset
                        ),
                    });
                }
                Ok(h) => {
                    reason = Some(format!(
                        "batch at byte {pos} has base offset {}, expected {expected}",
                        h.base_offset
                    ));
                    break;
                }
                Err(e) => {
                    reason = Some(format!("batch at byte {pos}: {e}"));
                    break;
                }
            };
            let Ok(position) = u32::try_from(pos) else {
                reason = Some(format!("segment larger than 4 GiB at byte {pos}"));
                break;
            };
            cursor.add(self, &header, position);
            expected = header.next_offset();
            pos += header.size as usize;
        }
        if reason.is_some() && !check_crc {
            return Err(OpenError::Corrupt {
                path: self.log_path.clone(),
                reason: reason.unwrap_or_default(),
            });
        }
        Ok((pos as u64, expected, reason))
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
            cursor.add(self, header, u32::try_from(position).unwrap_or(u32::MAX));
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
        cursor.add_time_entry(self);
        self.write_indexes(storage, dir)
    }

    /// Writes both index files from memory (replacing what was there) and syncs them.
    fn write_indexes(&self, storage: &dyn Storage, dir: &Path) -> Result<(), FileError> {
        for (ext, bytes) in [
            (INDEX_EXT, self.index.bytes()),
            (TIME_INDEX_EXT, self.time_index.bytes()),
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

    /// Position of the batch containing `offset`, scanning from the index entry before it.
    /// `None` if the published data ends before `offset`.
    fn find(&self, data: &[u8], offset: i64) -> Result<Option<(usize, BatchHeader)>, ReadError> {
        let mut pos = self.indexed_position(data, relative(self.base_offset, offset));
        while pos < data.len() {
            let header = self.header_at(data, pos)?;
            if header.last_offset() >= offset {
                return Ok(Some((pos, header)));
            }
            pos += header.size as usize;
        }
        Ok(None)
    }

    /// Where to start scanning for `relative_offset`: the index entry before it, checked
    /// against the batch it points at (a damaged entry costs a scan, never a wrong read).
    fn indexed_position(&self, data: &[u8], relative_offset: u32) -> usize {
        let Some((rel, pos)) = self.index.lookup(relative_offset) else {
            return 0;
        };
        let pos = pos as usize;
        let expected = self.base_offset + i64::from(rel);
        match data.get(pos..).map(BatchHeader::parse) {
            Some(Ok(h)) if h.base_offset == expected => pos,
            _ => {
                tracing::warn!(segment = %self.log_path.display(), offset = expected, position = pos, "index entry does not match the log; scanning from the start");
                0
            }
        }
    }

    fn header_at(&self, data: &[u8], pos: usize) -> Result<BatchHeader, ReadError> {
        let corrupt = |reason: String| ReadError::Corrupt {
            path: self.log_path.clone(),
            position: pos as u64,
            reason,
        };
        let header = BatchHeader::parse(&data[pos..]).map_err(|e| corrupt(e.to_string()))?;
        if pos + header.size as usize > data.len() {
            return Err(corrupt("batch runs past the end of the segment".into()));
        }
        Ok(header)
    }

    /// Whole batches from the one containing `offset`, up to `max_bytes` (at least one batch).
    /// `None` if the segment holds nothing at or after `offset`.
    /// Batches at or past `visible_end` are not returned (not yet durable under `always`).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        visible_end: i64,
    ) -> Result<Option<Bytes>, ReadError> {
        let (map, len) = self.snapshot();
        let Some(map) = map else { return Ok(None) };
        let data = &map[..len as usize];
        let Some((start, first)) = self.find(data, offset)? else {
            return Ok(None);
        };
        if first.base_offset >= visible_end {
            return Ok(None);
        }
        let mut end = start + first.size as usize;
        while end < data.len() {
            let header = self.header_at(data, end)?;
            if end + header.size as usize - start > max_bytes || header.base_offset >= visible_end {
                break;
            }
            end += header.size as usize;
        }
        Ok(Some(Bytes::from_owner(MappedSlice {
            map: map.clone(),
            start,
            end,
        })))
    }

    /// First record at or after `from` whose timestamp is >= `timestamp`: (offset, timestamp).
    pub fn find_timestamp(
        &self,
        timestamp: i64,
        from: i64,
    ) -> Result<Option<(i64, i64)>, ReadError> {
        if self.max_timestamp() < timestamp {
            return Ok(None);
        }
        let (map, len) = self.snapshot();
        let Some(map) = map else { return Ok(None) };
        let data = &map[..len as usize];
        let start_rel = self
            .time_index
            .last_before(timestamp)
            .map_or(0, |(_, rel)| rel)
            .max(relative(self.base_offset, from.max(self.base_offset)));
        let mut pos = self.indexed_position(data, start_rel);
        while pos < data.len() {
            let header = self.header_at(data, pos)?;
            let size = header.size as usize;
            if header.max_timestamp >= timestamp && header.last_offset() >= from {
                let records =
                    batch::decode(&data[pos..pos + size]).map_err(|e| ReadError::Corrupt {
                        path: self.log_path.clone(),
                        position: pos as u64,
                        reason: e.to_string(),
                    })?;
                // Offsets inside a stored batch are relative to the base the broker wrote.
                if let Some(r) = records
                    .iter()
                    .find(|r| r.timestamp >= timestamp && r.offset >= from)
                {
                    return Ok(Some((r.offset, r.timestamp)));
                }
            }
            pos += size;
        }
        Ok(None)
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
