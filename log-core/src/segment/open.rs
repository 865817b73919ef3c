//! Opening segment files: a closed segment with its index files checked (and rebuilt when they
//! do not fit the log), and the last segment recovered batch by batch.

use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;

use memmap2::Mmap;

use super::{file_len, file_name, map_file, Recovery, Segment, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use crate::batch::{self, BatchHeader};
use crate::error::{BatchError, FileError, OpenError};
use crate::index::{IndexCursor, Indexes, OffsetIndex, TimeIndex};
use crate::io::Storage;

impl Segment {
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
                segment.indexes = Indexes::new();
                let mut cursor = IndexCursor::new(base_offset, index_interval);
                segment.walk_for_rebuild(&mut cursor, false)?;
                cursor.add_time_entry(&segment.indexes);
                segment
                    .max_timestamp
                    .store(cursor.max_timestamp(), Ordering::Relaxed);
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
        self.indexes = Indexes {
            offsets: index,
            times: time_index,
        };
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
        let mut cursor = IndexCursor::new(base_offset, index_interval);
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
            .store(cursor.max_timestamp(), Ordering::Release);
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
                        Err(BatchError::Truncated {
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
            cursor.add(&self.indexes, &header, position);
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
}
