//! Reads from a segment: whole batches by offset (a zero-copy slice of the map) and the first
//! record at or after a timestamp.

use bytes::Bytes;

use super::{MappedSlice, Segment};
use crate::batch::{self, BatchHeader};
use crate::error::ReadError;
use crate::index::relative;

impl Segment {
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
        let Some((rel, pos)) = self.indexes.offsets.lookup(relative_offset) else {
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
            .indexes
            .times
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
