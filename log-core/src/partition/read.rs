//! Reads: whole batches from an offset, the offset for a timestamp, and the damage found on
//! the way. Readers clone one `Arc<Segment>` under the segment list's read lock and read its
//! published bytes from the memory map.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::Partition;
use crate::batch::{self, DecodedRecord};
use crate::error::{BatchError, ReadError};
use crate::segment::{Damage, Segment};

/// Whole batches read from a partition.
#[derive(Clone, Debug)]
pub struct ReadResult {
    /// Whole batches, as stored: a zero-copy slice of one segment. Empty at the log end.
    pub records: Bytes,
    /// The partition's log start offset when the read was made.
    pub log_start_offset: i64,
    /// The high watermark.
    pub log_end_offset: i64,
    /// The last stable offset (see [`Partition::last_stable_offset`]) when the read was made.
    pub last_stable_offset: i64,
}

impl Partition {
    /// Damaged stretches found so far in this partition's segments (by reads, index rebuilds
    /// and recovery), with the segment file each is in.
    pub fn damage(&self) -> Vec<(PathBuf, Damage)> {
        self.segments()
            .iter()
            .flat_map(|s| s.damages().into_iter().map(|d| (s.log_path.clone(), d)))
            .collect()
    }

    /// Scrubs the closed segments (the active one was checked at open and is checked as it is
    /// read): every batch is CRC- and framing-checked and any damage recorded
    /// ([`Partition::damage`]). `pace(bytes)` is called after each segment with
    /// the bytes it read, to bound the I/O rate; it returns false to stop early.
    pub fn scrub(&self, mut pace: impl FnMut(u64) -> bool) -> Result<(), ReadError> {
        let closed: Vec<_> = {
            let segments = self.segments();
            segments[..segments.len().saturating_sub(1)].to_vec()
        };
        for segment in closed {
            if !pace(segment.scrub()?) {
                break;
            }
        }
        Ok(())
    }

    /// Reads whole batches starting with the one that contains `offset`, up to `max_bytes`
    /// (but always at least one batch, however large, so a consumer can make progress).
    /// At the log end the result is empty.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, ReadError> {
        self.read_below(offset, max_bytes, false)
    }

    /// [`Partition::read`] for `read_committed` readers: whole batches below the last stable
    /// offset only, never a byte of a batch at or past it (empty from the LSO to the high
    /// watermark, which is still the result's `log_end_offset`).
    pub fn read_committed(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, ReadError> {
        self.read_below(offset, max_bytes, true)
    }

    fn read_below(
        &self,
        offset: i64,
        max_bytes: usize,
        committed: bool,
    ) -> Result<ReadResult, ReadError> {
        // The LSO first: it is at most the high watermark read after it.
        let lso = self.last_stable_offset();
        let end = self.log_end_offset();
        let (start, segment) = {
            let segments = self.segments();
            let start = segments
                .first()
                .map_or(0, |s| s.base_offset)
                .max(self.start_floor.load(Ordering::Acquire));
            if offset < start || offset > end {
                return Err(ReadError::OffsetOutOfRange {
                    offset,
                    log_start: start,
                    log_end: end,
                });
            }
            let i = segments
                .partition_point(|s| s.base_offset <= offset)
                .saturating_sub(1);
            (start, segments[i].clone())
        };
        let visible = if committed { lso.min(end) } else { end };
        let records = if offset >= visible {
            Bytes::new()
        } else {
            self.read_from(segment, offset, max_bytes, visible)?
        };
        Ok(ReadResult {
            records,
            log_start_offset: start,
            log_end_offset: end,
            last_stable_offset: lso.min(end),
        })
    }

    /// Whole batches from the one holding `offset` below `visible_end`, also below the log
    /// start offset DeleteRecords set (the partition's own walks at open).
    pub(crate) fn read_any(
        &self,
        offset: i64,
        max_bytes: usize,
        visible_end: i64,
    ) -> Result<Bytes, ReadError> {
        let segment = {
            let segments = self.segments();
            let i = segments
                .partition_point(|s| s.base_offset <= offset)
                .saturating_sub(1);
            match segments.get(i) {
                Some(segment) => segment.clone(),
                None => return Ok(Bytes::new()),
            }
        };
        self.read_from(segment, offset, max_bytes, visible_end)
    }

    fn read_from(
        &self,
        mut segment: Arc<Segment>,
        offset: i64,
        max_bytes: usize,
        end: i64,
    ) -> Result<Bytes, ReadError> {
        loop {
            if let Some(bytes) = segment.read(offset, max_bytes, end)? {
                return Ok(bytes);
            }
            // Past this segment's data: the offset lives in the next one, if any (found by
            // offset: the cleaner may have merged segments meanwhile).
            let next = self
                .segments()
                .iter()
                .find(|s| s.base_offset > segment.base_offset)
                .cloned();
            match next {
                Some(next) => segment = next,
                None => return Ok(Bytes::new()),
            }
        }
    }

    /// The first offset whose record timestamp is >= `timestamp`, with that timestamp;
    /// `None` if every record is older.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, ReadError> {
        let segments: Vec<Arc<Segment>> = self.segments().clone();
        let from = segments
            .first()
            .map_or(0, |s| s.base_offset)
            .max(self.start_floor.load(Ordering::Acquire));
        let end = self.log_end_offset();
        for segment in segments.iter().filter(|s| s.max_timestamp() >= timestamp) {
            if let Some(found) = segment.find_timestamp(timestamp, from)? {
                // Not yet visible (waiting for its fsync) counts as not there.
                return Ok(Some(found).filter(|(offset, _)| *offset < end));
            }
        }
        Ok(None)
    }

    /// Every record from the log start to the log end, a read's batches at a time, each batch
    /// decompressed up to `max_bytes`: how an internal topic (`__consumer_offsets`, the share
    /// state) is replayed when the broker starts.
    pub fn replay<E: From<ReadError> + From<BatchError>>(
        &self,
        max_bytes: usize,
    ) -> impl Iterator<Item = Result<Vec<DecodedRecord>, E>> + '_ {
        let mut offset = Some(self.log_start_offset());
        std::iter::from_fn(move || {
            let from = offset.filter(|o| *o < self.log_end_offset())?;
            let decoded = self
                .read(from, 1 << 20)
                .map_err(E::from)
                .and_then(|read| Ok(batch::decode_bounded(&read.records, max_bytes)?));
            offset = match &decoded {
                Ok(records) => records.last().map(|last| last.offset + 1),
                Err(_) => None,
            };
            Some(decoded).filter(|d| d.as_ref().map_or(true, |r| !r.is_empty()))
        })
    }
}
