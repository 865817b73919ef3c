//! The log start offset set by DeleteRecords: it may lie inside a segment, so it is kept in
//! `<partition dir>/log-start-offset` (a version byte, then the offset as a big-endian i64),
//! written atomically before any segment below it is deleted. The log start offset is the
//! larger of it and the first segment's base offset.

use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::{lock, Partition};
use crate::error::{DeleteRecordsError, FileError, OpenError};
use crate::io;

const START_FILE: &str = "log-start-offset";
const START_VERSION: u8 = 1;

/// The log start offset recorded in `dir`, or 0 when none was.
pub(crate) fn read_start_floor(dir: &Path) -> Result<i64, OpenError> {
    let path = dir.join(START_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(FileError::new("read", path, e).into()),
    };
    match bytes.as_slice() {
        [START_VERSION, offset @ ..] if offset.len() == 8 => {
            let mut be = [0u8; 8];
            be.copy_from_slice(offset);
            Ok(i64::from_be_bytes(be).max(0))
        }
        _ => Err(OpenError::Corrupt {
            path,
            reason: format!(
                "expected version {START_VERSION} and an 8-byte offset, found {} bytes",
                bytes.len()
            ),
        }),
    }
}

fn write_start_floor(dir: &Path, offset: i64) -> Result<(), FileError> {
    let mut bytes = Vec::with_capacity(9);
    bytes.push(START_VERSION);
    bytes.extend_from_slice(&offset.to_be_bytes());
    io::replace_file(dir, START_FILE, &bytes)
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
            write_start_floor(&self.dir, offset)?;
            self.start_floor.fetch_max(offset, Ordering::AcqRel);
        }
        self.delete_segments_before(offset)?;
        tracing::info!(partition = %self.name, log_start = offset, "records deleted");
        Ok(self.log_start_offset())
    }
}
