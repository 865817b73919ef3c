//! The log start offset set by DeleteRecords: it may lie inside a segment, so it is kept in
//! `<partition dir>/log-start-offset` (a version byte, then the offset as a big-endian i64),
//! written atomically before any segment below it is deleted. The log start offset is the
//! larger of it and the first segment's base offset.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::{lock, Partition};
use crate::error::{DeleteRecordsError, FileError, OpenError};
use crate::io;

const START_FILE: &str = "log-start-offset";
const START_VERSION: u8 = 1;

/// The log start offset recorded in `dir`, or 0 when none was.
pub(crate) fn read_start_floor(dir: &Path) -> Result<i64, OpenError> {
    Ok(io::read_offset_file(dir, START_FILE, START_VERSION)?.unwrap_or(0))
}

fn write_start_floor(storage: &dyn io::Storage, dir: &Path, offset: i64) -> Result<(), FileError> {
    io::write_offset_file(storage, dir, START_FILE, START_VERSION, offset)
}

impl Partition {
    /// Kafka's DeleteRecords: makes `offset` the log start offset (`-1` is the high watermark),
    /// durably, then deletes the closed segments wholly below it. Reads below it fail with
    /// [`crate::ReadError::OffsetOutOfRange`] from then on, also after a restart. An offset at
    /// or below the log start changes nothing; one past the high watermark (or negative other
    /// than -1) is [`DeleteRecordsError::OffsetOutOfRange`]. Returns the new log start offset.
    /// Blocking file work.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, DeleteRecordsError> {
        let high_watermark = self.log_end_offset();
        let offset = if offset == -1 { high_watermark } else { offset };
        if !(0..=high_watermark).contains(&offset) {
            return Err(DeleteRecordsError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset(),
                high_watermark,
            });
        }
        {
            let _serial = lock(&self.start_lock);
            if offset <= self.log_start_offset() {
                return Ok(self.log_start_offset());
            }
            write_start_floor(self.place.storage.as_ref(), &self.dir, offset)?;
            self.start_floor.fetch_max(offset, Ordering::AcqRel);
        }
        self.transactions_start_at(offset);
        self.delete_segments_before(offset)?;
        tracing::info!(partition = %self.name, log_start = offset, "records deleted");
        Ok(self.log_start_offset())
    }
}
