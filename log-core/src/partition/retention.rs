//! Retention: deleting the oldest closed segments by age or size (or below an offset an owner
//! no longer needs), which advances the log start offset. The active segment is never deleted.

use std::fs;
use std::sync::{Arc, PoisonError};

use super::{lock, Partition};
use crate::error::FileError;
use crate::io;
use crate::segment::{self, Segment};

/// What the retention pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Segments deleted.
    pub deleted_segments: usize,
    /// Their bytes.
    pub deleted_bytes: u64,
    /// The log start offset after the pass.
    pub log_start_offset: i64,
}

impl Partition {
    /// Deletes the oldest closed segments that are past `retention.ms` (by their newest record,
    /// relative to `now_ms`) or beyond `retention.bytes`, and advances the log start offset.
    /// The active segment is never deleted. Nothing is deleted unless `cleanup.policy` holds
    /// `delete`.
    pub fn apply_retention(&self, now_ms: i64) -> Result<RetentionReport, FileError> {
        let config = self.config();
        if !config.cleanup.delete {
            return Ok(RetentionReport {
                log_start_offset: self.log_start_offset(),
                ..Default::default()
            });
        }
        let mut total = self.size_bytes();
        self.delete_oldest_segments(|s| {
            let too_old = config.retention_ms.is_some_and(|ms| {
                let newest = s.max_timestamp();
                newest >= 0 && now_ms.saturating_sub(newest) > ms as i64
            });
            let too_big = config
                .retention_bytes
                .is_some_and(|max| total.saturating_sub(s.len()) >= max);
            if too_old || too_big {
                total -= s.len();
            }
            too_old || too_big
        })
    }

    /// Deletes the closed segments that hold only offsets below `offset` (for an owner that
    /// rewrote what it still needs past `offset`, as a compaction would).
    pub fn delete_segments_before(&self, offset: i64) -> Result<RetentionReport, FileError> {
        self.delete_oldest_segments(|s| s.next_offset() <= offset)
    }

    /// Deletes the longest prefix of closed segments for which `doomed` holds, advancing the
    /// log start offset. The active segment is never deleted.
    fn delete_oldest_segments(
        &self,
        mut doomed: impl FnMut(&Segment) -> bool,
    ) -> Result<RetentionReport, FileError> {
        let _files = lock(&self.segment_files);
        let writer = lock(&self.writer);
        // Segments past the transaction state's file are what the walk at open reads.
        let saved_at = self.transactions_saved_at();
        let doomed: Vec<Arc<Segment>> = {
            let segments = self.segments();
            let closed = &segments[..segments.len().saturating_sub(1)];
            closed
                .iter()
                .take_while(|s| s.next_offset() <= saved_at && doomed(s))
                .cloned()
                .collect()
        };
        if doomed.is_empty() {
            return Ok(RetentionReport {
                log_start_offset: self.log_start_offset(),
                ..Default::default()
            });
        }
        let log_start = {
            let mut segments = self
                .segments
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            segments.drain(..doomed.len());
            segments.first().map_or(0, |s| s.base_offset)
        };
        let log_start = log_start.max(self.start_floor.load(std::sync::atomic::Ordering::Acquire));
        drop(writer);
        self.transactions_start_at(log_start);
        // Readers that already hold a segment keep its map; the files go now.
        let mut report = RetentionReport {
            log_start_offset: log_start,
            ..Default::default()
        };
        for segment in &doomed {
            for ext in [
                segment::LOG_EXT,
                segment::INDEX_EXT,
                segment::TIME_INDEX_EXT,
            ] {
                let path = self.dir.join(segment::file_name(segment.base_offset, ext));
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(FileError::new("delete", path, e)),
                }
            }
            report.deleted_segments += 1;
            report.deleted_bytes += segment.len();
        }
        io::sync_dir(&self.dir).map_err(|e| FileError::new("fsync", &self.dir, e))?;
        tracing::info!(partition = %self.name, segments = report.deleted_segments, bytes = report.deleted_bytes, log_start, "deleted old segments");
        Ok(report)
    }
}
