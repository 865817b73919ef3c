//! Reads from a segment: whole batches by offset (a zero-copy slice of the map) and the first
//! record at or after a timestamp. Both walk the batch chain ([`super::chain`]): a read stops
//! before damage, and a read of a damaged offset is refused with the damage it hit. What a walk
//! touched is released from the process when the read is done ([`Touched`]): with the slice it
//! returns, or at once.

use std::sync::Arc;

use bytes::Bytes;

use std::sync::atomic::Ordering;

use super::chain::{Chain, Link};
use super::{MappedSlice, Segment, Touched};
use crate::batch;
use crate::error::ReadError;
use crate::index::relative;

impl Segment {
    /// Where to start walking for `offset`: the index entry before it, checked against the
    /// batch it points at (a wrong entry costs a walk from the start, never a wrong read).
    /// Returns (byte position, offset of the batch there).
    fn start_for(&self, data: &[u8], offset: i64) -> (usize, i64) {
        let rel = relative(self.base_offset, offset.max(self.base_offset));
        let Some((rel, pos)) = self.indexes.offsets.lookup(rel) else {
            return (0, self.base_offset);
        };
        let expected = self.base_offset + i64::from(rel);
        match data
            .get(pos as usize..)
            .map(record_batch::BatchHeader::read)
        {
            Some(Ok(h)) if h.base_offset == expected => (pos as usize, expected),
            _ => {
                tracing::warn!(segment = %self.log_path.display(), offset = expected, position = pos, "index entry does not match the log; scanning from the start");
                (0, self.base_offset)
            }
        }
    }

    /// Whole batches from the one containing `offset`, up to `max_bytes` (at least one batch).
    /// `None` if the segment holds nothing at or after `offset`. Batches holding an offset at
    /// or past `visible_end` are not returned (not yet durable under `always`, or at or past
    /// the last stable offset for a `read_committed` reader).
    pub fn read(
        self: &Arc<Self>,
        offset: i64,
        max_bytes: usize,
        visible_end: i64,
    ) -> Result<Option<Bytes>, ReadError> {
        if let Some(damage) = self.damage_covering(offset) {
            return Err(self.damaged(damage));
        }
        // The end offset is read before the length (which `publish` stores first), so the
        // bytes seen hold at least the offsets up to it: an append in between cannot look like
        // a segment whose data ends early.
        let end = self.next_offset();
        let (map, len) = self.view()?;
        // An empty closed segment is walked too: its offsets are missing, not elsewhere.
        let data: &[u8] = map.as_deref().map_or(&[], |m| &m[..len as usize]);
        let (pos, expected) = self.start_for(data, offset);
        let mut touched = Touched::new(map.as_ref(), pos);
        let verified = self.verified.load(Ordering::Acquire) as usize;
        let mut range: Option<(usize, usize)> = None;
        // The walk looks at the header after the last batch taken, so a batch whose length is
        // wrong is caught (by the next header and its own CRC) before it is served; a batch not
        // yet CRC-checked in this run is checked before it is taken.
        for link in self.chain(data, pos, expected, end, verified) {
            touched.reach(&link, data.len());
            match (link, range) {
                (Link::Batch(_, header), None) if header.last_offset() < offset => {}
                (Link::Batch(at, header), None) => {
                    if header.last_offset() >= visible_end {
                        return Ok(None);
                    }
                    range = Some((at, at + header.size as usize));
                }
                (Link::Batch(at, header), Some((start, _))) => {
                    let end = at + header.size as usize;
                    if end - start > max_bytes || header.last_offset() >= visible_end {
                        break;
                    }
                    range = Some((start, end));
                }
                (Link::Damage(damage), taken) => {
                    self.record_damage(&damage);
                    if damage.covers(offset) {
                        return Err(self.damaged(damage));
                    }
                    if let Some((start, end)) = taken {
                        range = Some((start, end.min(damage.position as usize)));
                        break;
                    }
                }
            }
        }
        if let Some((start, end)) = range {
            if start <= verified {
                self.verified_up_to(end as u64);
            }
        }
        Ok(range.zip(map.as_ref()).map(|((start, end), map)| {
            Bytes::from_owner(MappedSlice {
                map: map.clone(),
                start,
                end,
                _touched: touched,
            })
        }))
    }

    /// Checks the CRC and framing of every batch of this closed segment (a scrub), even those
    /// a read or an earlier pass checked (bit rot comes later), recording the damage found, so
    /// that it is reported before a reader meets it. Returns how many bytes it read. A segment
    /// not loaded is mapped for the scrub alone, not loaded: a pass does not push the segments
    /// readers use out of the cache.
    pub fn scrub(self: &Arc<Self>) -> Result<u64, ReadError> {
        let len = self.len();
        let end = self.next_offset();
        let loaded = self
            .map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let map = match loaded {
            Some(map) => Some(map),
            None => {
                let file = self
                    .storage
                    .open(&self.log_path)
                    .map_err(|e| crate::error::FileError::new("open", &self.log_path, e))?;
                super::map_file(file.as_ref(), len, &self.log_path)?
            }
        };
        let data: &[u8] = map.as_deref().map_or(&[], |m| &m[..len as usize]);
        let mut touched = Touched::new(map.as_ref(), 0);
        for link in self.chain(data, 0, self.base_offset, end, 0) {
            touched.pass(&link, data.len());
            if let Link::Damage(damage) = link {
                self.record_damage(&damage);
            }
        }
        self.verified_up_to(len);
        Ok(len)
    }

    /// The whole data of this closed segment and its batches (position, header), CRCs
    /// checked, for the log cleaner: damage anywhere is an error (a segment is never cleaned
    /// around damage).
    pub(crate) fn contents(
        self: &Arc<Self>,
    ) -> Result<(Bytes, Vec<(usize, record_batch::BatchHeader)>), ReadError> {
        let end = self.next_offset();
        let (map, len) = self.view()?;
        let Some(map) = map else {
            return Ok((Bytes::new(), Vec::new()));
        };
        let data = &map[..len as usize];
        let verified = self.verified.load(Ordering::Acquire) as usize;
        let mut batches = Vec::new();
        for link in self.chain(data, 0, self.base_offset, end, verified) {
            match link {
                Link::Batch(at, header) => batches.push((at, header)),
                Link::Damage(damage) => {
                    self.record_damage(&damage);
                    return Err(self.damaged(damage));
                }
            }
        }
        self.verified_up_to(len);
        let bytes = Bytes::from_owner(MappedSlice {
            map: map.clone(),
            start: 0,
            end: len as usize,
            _touched: Touched {
                map: Some(map.clone()),
                range: 0..len as usize,
            },
        });
        Ok((bytes, batches))
    }

    /// The walk from byte `pos` (offset `expected`) of a segment whose offsets end at `end`:
    /// batches beyond the CRC-checked prefix `verified` are checked, damage found before is
    /// stepped over as it was then.
    fn chain<'a>(
        &self,
        data: &'a [u8],
        pos: usize,
        expected: i64,
        end: i64,
        verified: usize,
    ) -> Chain<'a> {
        Chain::new(data, pos, expected, end, true)
            .compacted(self.is_compacted())
            .crc_checked_up_to(verified)
            .stepping_over(self.damages())
    }

    /// First record at or after `from` whose timestamp is >= `timestamp`: (offset, timestamp).
    /// Damaged stretches are stepped over.
    pub fn find_timestamp(
        self: &Arc<Self>,
        timestamp: i64,
        from: i64,
    ) -> Result<Option<(i64, i64)>, ReadError> {
        if self.max_timestamp() < timestamp {
            return Ok(None);
        }
        let end = self.next_offset();
        let (map, len) = self.view()?;
        let data: &[u8] = map.as_deref().map_or(&[], |m| &m[..len as usize]);
        let by_time = self
            .indexes
            .times
            .last_before(timestamp)
            .map_or(self.base_offset, |(_, rel)| {
                self.base_offset + i64::from(rel)
            });
        let (pos, expected) = self.start_for(data, by_time.max(from));
        let mut touched = Touched::new(map.as_ref(), pos);
        let verified = self.verified.load(Ordering::Acquire) as usize;
        for link in self.chain(data, pos, expected, end, verified) {
            touched.reach(&link, data.len());
            let (at, header) = match link {
                Link::Batch(at, header) => (at, header),
                Link::Damage(damage) => {
                    self.record_damage(&damage);
                    continue;
                }
            };
            if header.max_timestamp < timestamp || header.last_offset() < from {
                continue;
            }
            // Every record of a LogAppendTime batch has the batch's time, as consumers read it.
            if header.timestamp_type() == record_batch::TimestampType::LogAppendTime {
                return Ok(Some((header.base_offset.max(from), header.max_timestamp)));
            }
            let records = batch::decode(&data[at..at + header.size as usize]).map_err(|e| {
                ReadError::Corrupt {
                    path: self.log_path.clone(),
                    position: at as u64,
                    reason: e.to_string(),
                }
            })?;
            // Offsets inside a stored batch are relative to the base the broker wrote.
            if let Some(r) = records
                .iter()
                .find(|r| r.timestamp >= timestamp && r.offset >= from)
            {
                return Ok(Some((r.offset, r.timestamp)));
            }
        }
        Ok(None)
    }
}
