//! What a pass keeps of each batch: all of it, none, the records the offset map does not
//! shadow (rebuilt with its base offset and last offset delta), or an empty batch for a live
//! producer's last (see the module doc of [`super`]); and of each transaction marker: kept
//! while a batch of its transaction is, then kept `delete.retention.ms` more (its delete
//! horizon set), then removed.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use record_batch::records::{records, RawRecord};
use record_batch::{build, BatchHeader, Codec, TimestampType, HEADER_LEN};

use super::{CleanError, OffsetMap};

/// The aborted transactions of a partition, by producer: (first offset, marker offset).
pub(super) struct Aborted(HashMap<i64, Vec<(i64, i64)>>);

impl Aborted {
    pub(super) fn new(aborted: Vec<crate::partition::AbortedTxn>) -> Aborted {
        let mut by_producer: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for a in aborted {
            by_producer
                .entry(a.producer_id)
                .or_default()
                .push((a.first_offset, a.last_offset));
        }
        Aborted(by_producer)
    }

    /// Whether `header`'s batch holds records of an aborted transaction.
    pub(super) fn holds(&self, header: &BatchHeader) -> bool {
        header.is_transactional()
            && !header.is_control()
            && self.0.get(&header.producer_id).is_some_and(|ranges| {
                ranges
                    .iter()
                    .any(|(first, last)| (*first..=*last).contains(&header.base_offset))
            })
    }
}

/// The transactions whose batches the pass has kept so far, by producer: what decides whether a
/// marker still has records to end. Passed from batch to batch, in offset order, over every
/// group of the pass (which starts at the log start, so a transaction's batches come before
/// its marker).
#[derive(Debug, Default)]
pub(super) struct Kept {
    producers: HashSet<i64>,
    /// The markers removed in the group being written, by offset.
    removed: Vec<i64>,
    /// A group of the pass was not swapped in (retention took some of its segments): its
    /// batches stay as they were, so no later marker may go in this pass.
    all: bool,
}

impl Kept {
    /// `header`'s batch was kept (whole, rebuilt or empty).
    fn batch(&mut self, header: &BatchHeader) {
        if header.is_transactional() && !header.is_control() {
            self.producers.insert(header.producer_id);
        }
    }

    /// A marker of `producer`: whether its transaction kept a batch (the transaction ends).
    fn ends(&mut self, producer: i64) -> bool {
        self.producers.remove(&producer) || self.all
    }

    /// The markers the group just written removes (its aborted transactions must go first).
    pub(super) fn take_removed(&mut self) -> Vec<i64> {
        std::mem::take(&mut self.removed)
    }

    /// Every marker from here on is kept: a group's cleaned form was not swapped in.
    pub(super) fn keep_all(&mut self) {
        self.all = true;
    }
}

/// What a pass keeps.
pub(super) struct Rules<'a, L> {
    pub(super) map: &'a OffsetMap,
    /// Their records go, wherever their keys' latest records are.
    pub(super) aborted: &'a Aborted,
    /// Each producer's last data batch: its base offset, by producer id.
    pub(super) last_batches: HashMap<i64, i64>,
    /// A last batch of a producer newer than this (ms) keeps an empty batch when it empties.
    pub(super) producers_alive_since_ms: i64,
    /// Records at or past this offset are not in the map: kept.
    pub(super) map_end: i64,
    /// The pass's clock: tombstones whose batch's delete horizon is past go.
    pub(super) now_ms: i64,
    /// `delete.retention.ms`: a batch with tombstones cleaned the first time gets the delete
    /// horizon `now_ms` + this.
    pub(super) delete_retention_ms: i64,
    pub(super) per_batch: usize,
    pub(super) level: L,
}

impl<L: Fn(Codec) -> i32> Rules<'_, L> {
    /// Appends to `out` what is kept of `batch`: all of it, none, or a rebuilt batch of the
    /// records kept. Returns how many records were removed, and whether the batch changed.
    pub(super) fn filter(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        out: &mut Vec<u8>,
        kept: &mut Kept,
    ) -> Result<(u64, bool), CleanError> {
        let before = out.len();
        let result = if header.is_control() {
            self.filter_marker(batch, header, out, kept)
        } else {
            self.filter_data(batch, header, out)
        };
        if out.len() > before {
            kept.batch(header);
        }
        result
    }

    /// A transaction marker: kept while its transaction kept a batch (or past the map's end);
    /// once none, it gets its delete horizon (now + `delete.retention.ms`), and goes at the
    /// first pass past it, as Kafka's cleaner does. A control batch of another kind is kept.
    fn filter_marker(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        out: &mut Vec<u8>,
        kept: &mut Kept,
    ) -> Result<(u64, bool), CleanError> {
        let live = kept.ends(header.producer_id);
        let marker = record_batch::control_type(batch).is_some();
        if live || !marker || header.base_offset >= self.map_end {
            out.extend_from_slice(batch);
            return Ok((0, false));
        }
        match header.delete_horizon() {
            Some(horizon) if self.now_ms >= horizon => {
                kept.removed.push(header.base_offset);
                Ok((u64::try_from(header.record_count).unwrap_or(0), true))
            }
            Some(_) => {
                out.extend_from_slice(batch);
                Ok((0, false))
            }
            None => {
                let plain = records_section(batch, header, self.per_batch)?;
                let all = records(&plain)
                    .collect::<Option<Vec<RawRecord<'_>>>>()
                    .ok_or(CleanError::Record {
                        offset: header.base_offset,
                    })?;
                let horizon = self.now_ms.saturating_add(self.delete_retention_ms);
                self.rebuild(batch, header, &all, Some(horizon), out)?;
                Ok((0, true))
            }
        }
    }

    /// A data batch: all of it, none, its records the map does not shadow, or an empty batch.
    fn filter_data(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        out: &mut Vec<u8>,
    ) -> Result<(u64, bool), CleanError> {
        if header.base_offset >= self.map_end {
            out.extend_from_slice(batch);
            return Ok((0, false));
        }
        if self.aborted.holds(header) {
            self.keep_empty(batch, header, out)?;
            return Ok((u64::try_from(header.record_count).unwrap_or(0), true));
        }
        if header.record_count == 0 {
            // An empty batch an earlier pass kept: it stays while it is its producer's last.
            let kept = self.keep_empty(batch, header, out)?;
            return Ok((0, !kept));
        }
        let plain = records_section(batch, header, self.per_batch)?;
        let mut kept: Vec<RawRecord<'_>> = Vec::with_capacity(header.record_count.max(0) as usize);
        let mut total = 0u64;
        for record in records(&plain) {
            let record = record.ok_or(CleanError::Record {
                offset: header.base_offset,
            })?;
            total += 1;
            if self.keeps(header, &record) {
                kept.push(record);
            }
        }
        let removed = total - kept.len() as u64;
        // A batch keeping tombstones gets its delete horizon the first time it is cleaned.
        let horizon = (header.delete_horizon().is_none() && kept.iter().any(|r| r.value_is_null))
            .then(|| self.now_ms.saturating_add(self.delete_retention_ms));
        if removed == 0 && horizon.is_none() {
            out.extend_from_slice(batch);
            return Ok((0, false));
        }
        if kept.is_empty() {
            self.keep_empty(batch, header, out)?;
        } else {
            self.rebuild(batch, header, &kept, horizon, out)?;
        }
        Ok((removed, true))
    }

    /// Appends the empty form of `batch`, whose records all go, if it is its live producer's
    /// last data batch: its header, no records, uncompressed. Whether it did.
    fn keep_empty(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        out: &mut Vec<u8>,
    ) -> Result<bool, CleanError> {
        let last = header.producer_id >= 0
            && self.last_batches.get(&header.producer_id) == Some(&header.base_offset)
            && header.max_timestamp >= self.producers_alive_since_ms;
        if !last {
            return Ok(false);
        }
        let start = out.len();
        out.extend_from_slice(&batch[..HEADER_LEN]);
        build::set_record_count(&mut out[start..], 0)
            .and_then(|()| {
                build::rewrap(
                    &mut out[start..],
                    Codec::None,
                    header.timestamp_type(),
                    header.max_timestamp,
                )
            })
            .map_err(|e| CleanError::Rebuild {
                offset: header.base_offset,
                reason: e.to_string(),
            })?;
        Ok(true)
    }

    fn keeps(&self, header: &BatchHeader, record: &RawRecord<'_>) -> bool {
        let offset = header.base_offset + record.offset_delta;
        if offset >= self.map_end {
            return true;
        }
        let Some(key) = record.key else {
            return false;
        };
        if self.map.get(key).is_some_and(|latest| latest > offset) {
            return false;
        }
        !(record.value_is_null
            && header
                .delete_horizon()
                .is_some_and(|horizon| self.now_ms >= horizon))
    }

    /// The batch of `kept` records: `batch`'s header (base offset, last offset delta,
    /// producer, codec, timestamp type) with a new count, max timestamp, length and CRC, and
    /// the delete `horizon` if one is given (its base timestamp then, the records' timestamp
    /// deltas moved so that their timestamps stay).
    fn rebuild(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        kept: &[RawRecord<'_>],
        horizon: Option<i64>,
        out: &mut Vec<u8>,
    ) -> Result<(), CleanError> {
        let rebuild_error = |reason: String| CleanError::Rebuild {
            offset: header.base_offset,
            reason,
        };
        let start = out.len();
        out.extend_from_slice(&batch[..HEADER_LEN]);
        let codec = header.codec().unwrap_or(Codec::None);
        let put = |records: &mut Vec<u8>| match horizon {
            Some(horizon) => {
                let shift = header.base_timestamp.saturating_sub(horizon);
                kept.iter().for_each(|r| r.put_shifted(shift, records));
            }
            None => kept.iter().for_each(|r| records.extend_from_slice(r.bytes)),
        };
        if codec == Codec::None {
            put(out);
        } else {
            let mut plain = Vec::with_capacity(kept.iter().map(|r| r.bytes.len() + 8).sum());
            put(&mut plain);
            crate::compress::compress(&plain, codec, (self.level)(codec), out)
                .map_err(|e| rebuild_error(e.to_string()))?;
        }
        let max_timestamp = match header.timestamp_type() {
            TimestampType::LogAppendTime => header.max_timestamp,
            TimestampType::CreateTime => kept
                .iter()
                .map(|r| header.base_timestamp.saturating_add(r.timestamp_delta))
                .max()
                .unwrap_or(header.max_timestamp),
        };
        let count = i32::try_from(kept.len()).unwrap_or(i32::MAX);
        build::set_record_count(&mut out[start..], count)
            .and_then(|()| match horizon {
                Some(horizon) => build::set_delete_horizon(&mut out[start..], horizon),
                None => Ok(()),
            })
            .and_then(|()| {
                build::rewrap(
                    &mut out[start..],
                    codec,
                    header.timestamp_type(),
                    max_timestamp,
                )
            })
            .map_err(|e| rebuild_error(e.to_string()))
    }
}

/// The records section of a stored batch: its bytes after the header, decompressed if it is
/// compressed (to at most `max` bytes).
pub(super) fn records_section<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
    max: usize,
) -> Result<Cow<'a, [u8]>, CleanError> {
    if header.is_compressed() {
        let plain = crate::batch::decompress_records(batch, header, 0, max)?;
        Ok(Cow::Owned(plain.to_vec()))
    } else {
        Ok(Cow::Borrowed(&batch[HEADER_LEN..]))
    }
}
