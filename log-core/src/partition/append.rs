//! The write path. An append is prepared without a lock (validation, a compacted topic's keys,
//! the recompression the topic asks for, the markers it carries), then written under the
//! writer lock (offsets assigned, the segment rolled when due, the transaction state kept in
//! step, the log end moved); its wait for durability is `durability`'s.

use std::borrow::Cow;
use std::sync::PoisonError;
use std::sync::TryLockError;

use record_batch::{BatchHeader, ControlType};

use super::{
    lock, now_ms, transactions, AppendInfo, Partition, Writer, DECOMPRESSED_PER_MESSAGE_BYTE,
};
use crate::batch;
use crate::config::{Ack, TopicConfig};
use crate::error::AppendError;
use crate::index::IndexCursor;
use crate::recompress::{self, Rewritten};
use crate::record_checks::RecordChecks;
use crate::segment::{Place, Segment, SyncError};

/// An append checked and ready to write: its batches as they will be stored (the producer's,
/// or recompressed), and the transaction markers among them.
struct Prepared<'a> {
    records: &'a [u8],
    headers: Cow<'a, [BatchHeader]>,
    rewritten: Option<Rewritten>,
    /// Per batch, the marker it is (control batches only).
    markers: Vec<Option<ControlType>>,
    /// When the append was prepared (ms since the epoch): its LogAppendTime.
    now: i64,
}

impl Prepared<'_> {
    fn records(&self) -> &[u8] {
        self.rewritten
            .as_ref()
            .map_or(self.records, |r| &r.records[..])
    }

    fn headers(&self) -> &[BatchHeader] {
        self.rewritten
            .as_ref()
            .map_or(&self.headers, |r| &r.headers[..])
    }
}

/// `TooLarge` if a batch is over `max` bytes.
fn too_large(headers: &[BatchHeader], max: usize) -> Result<(), AppendError> {
    match headers.iter().find(|h| h.size as usize > max) {
        Some(h) => Err(AppendError::TooLarge {
            size: h.size as usize,
            max,
        }),
        None => Ok(()),
    }
}

impl Partition {
    /// Appends one or more whole RecordBatch v2 batches (as a producer sends them), assigning
    /// them the next offsets. The batches are validated first; an invalid one refuses the whole
    /// append and nothing is written. Returns once the data is as durable as the topic's policy
    /// asks of an `acks=all` append.
    pub fn append(&self, records: &[u8]) -> Result<AppendInfo, AppendError> {
        let info = self.append_pending(records, Ack::All)?;
        self.await_durable(&info)?;
        Ok(info)
    }

    /// [`Partition::append`] without the wait for durability, acknowledged as `ack` says: the
    /// batches are written, and [`Partition::await_durable`] must be called before
    /// acknowledging them (they are readable once they need no fsync or have had it). Lets a
    /// caller keep its own per-partition state in step with the log without holding a lock
    /// across an fsync.
    pub fn append_pending(&self, records: &[u8], ack: Ack) -> Result<AppendInfo, AppendError> {
        self.append_unsynced(records, None, ack, true)
    }

    /// [`Partition::append_pending`] of batches whose headers the caller already parsed, with
    /// [`record_batch::parse_all`] of these same `records` (a broker looks at producer ids and
    /// sequences before appending): only the checks `parse_all` leaves are made (CRCs, the
    /// records' framing, compressed records), the headers not parsed again.
    pub fn append_pending_parsed(
        &self,
        records: &[u8],
        headers: &[BatchHeader],
        ack: Ack,
    ) -> Result<AppendInfo, AppendError> {
        self.append_unsynced(records, Some(headers), ack, true)
    }

    /// [`Partition::append_pending`] for a caller that must not block (an async worker): fails
    /// with [`AppendError::WouldBlock`], writing nothing, when another append holds the writer
    /// or the append would roll the segment (fsync, index files, a new file). Retry those on a
    /// thread that may block.
    pub fn try_append_pending(&self, records: &[u8], ack: Ack) -> Result<AppendInfo, AppendError> {
        self.append_unsynced(records, None, ack, false)
    }

    /// [`Partition::try_append_pending`] of batches whose headers the caller already parsed
    /// (see [`Partition::append_pending_parsed`]).
    pub fn try_append_pending_parsed(
        &self,
        records: &[u8],
        headers: &[BatchHeader],
        ack: Ack,
    ) -> Result<AppendInfo, AppendError> {
        self.append_unsynced(records, Some(headers), ack, false)
    }

    /// `parsed`: the headers of `records` from [`record_batch::parse_all`], if the caller has
    /// them.
    fn append_unsynced(
        &self,
        records: &[u8],
        parsed: Option<&[BatchHeader]>,
        ack: Ack,
        may_block: bool,
    ) -> Result<AppendInfo, AppendError> {
        self.check_poison()?;
        let config = self.config();
        let prepared = self.prepare(records, parsed, &config, may_block)?;
        self.write(&prepared, &config, ack, may_block)
    }

    /// Everything an append checks and computes before it takes the writer lock: the batches'
    /// validation and size, each record's key (compacted) and timestamp (KIP-937), the recompression or restamp the topic
    /// asks for (never on an async worker), the markers among them.
    fn prepare<'a>(
        &self,
        records: &'a [u8],
        parsed: Option<&'a [BatchHeader]>,
        config: &TopicConfig,
        may_block: bool,
    ) -> Result<Prepared<'a>, AppendError> {
        let headers = match parsed {
            Some(headers) => {
                record_batch::validate_parsed(records, headers)?;
                Cow::Borrowed(headers)
            }
            None => Cow::Owned(record_batch::validate_all(records)?),
        };
        let max_size = config.max_message_bytes as usize;
        too_large(&headers, max_size)?;
        let per_batch = max_size.saturating_mul(DECOMPRESSED_PER_MESSAGE_BYTE);
        let now = now_ms();
        let keeps = recompress::keeps_all(config, &headers);
        let checks = RecordChecks::of(config, now);
        if checks.any() {
            // Compressed batches are decompressed and checked once, here.
            let refused = checks.check(&self.name, records, &headers, per_batch)?;
            if !refused.errors.is_empty() {
                return Err(AppendError::RefusedRecords {
                    partition: self.name.clone(),
                    errors: refused.errors,
                    invalid_timestamp: refused.invalid_timestamp,
                });
            }
        } else if keeps && headers.iter().any(BatchHeader::is_compressed) {
            batch::validate_compressed(records, &headers, per_batch)?;
        }
        let rewritten = if keeps {
            None
        } else {
            if !may_block && recompress::recompresses(config, &headers) {
                return Err(AppendError::WouldBlock);
            }
            let budget = max_size
                .max(records.len())
                .saturating_mul(DECOMPRESSED_PER_MESSAGE_BYTE);
            let rewritten = recompress::rewrite(records, &headers, config, now, per_batch, budget)?;
            too_large(&rewritten.headers, max_size)?;
            Some(rewritten)
        };
        let mut prepared = Prepared {
            records,
            headers,
            rewritten,
            markers: Vec::new(),
            now,
        };
        if prepared.headers().iter().any(BatchHeader::is_control) {
            prepared.markers = transactions::markers(prepared.records(), prepared.headers());
        }
        Ok(prepared)
    }

    /// The locked part of an append: offsets assigned, the segment rolled when due, the
    /// batches written and published, the transaction state kept in step, the log end moved.
    fn write(
        &self,
        prepared: &Prepared<'_>,
        config: &TopicConfig,
        ack: Ack,
        may_block: bool,
    ) -> Result<AppendInfo, AppendError> {
        let (records, headers) = (prepared.records(), prepared.headers());
        let transactional = headers.iter().any(BatchHeader::is_transactional);
        let total = records.len() as u64;
        let count: i64 = headers
            .iter()
            .map(|h| h.next_offset() - h.base_offset)
            .sum();
        let mut writer = if may_block {
            lock(&self.writer)
        } else {
            match self.writer.try_lock() {
                Ok(writer) => writer,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return Err(AppendError::WouldBlock),
            }
        };
        if writer.closed {
            return Err(AppendError::Closed(self.name.clone()));
        }
        self.check_poison()?;
        let base = writer.active.next_offset();
        if base.checked_add(count).is_none() {
            return Err(AppendError::OffsetOverflow);
        }
        let rolled = self.should_roll(&writer, config, total, count);
        if rolled {
            if !may_block {
                return Err(AppendError::WouldBlock);
            }
            self.roll(&mut writer, config)?;
        }
        if !may_block && !writer.active.is_open() {
            // Opening a parked segment may park others, with their fsyncs.
            return Err(AppendError::WouldBlock);
        }
        if transactional {
            self.track_transactions(base, may_block)
                .map_err(|e| e.map_or(AppendError::WouldBlock, AppendError::Io))?;
        }
        let segment = writer.active.clone();
        let position = segment.len();
        if position + total > u64::from(u32::MAX) {
            return Err(AppendError::OffsetOverflow);
        }
        // One descriptor for the write and its truncation: while it is held, the segment is
        // not parked, and a failure to open it fails the append before anything is written.
        let file = segment.file()?;
        segment.ensure_capacity(file.as_ref(), position + total)?;
        let (assigned, offsets, next) = assign_offsets(base, headers);
        if let Err(e) = segment.write(file.as_ref(), records, headers, &offsets) {
            if let Err(cut) = segment.truncate_to_published(file.as_ref()) {
                self.poison_with(format!("{e}; then {cut}"));
            }
            return Err(e.into());
        }
        segment.publish(&mut writer.cursor, &assigned, position);
        writer.first_append_ms.get_or_insert_with(now_ms);
        if transactional {
            // Before the log end moves: a reader that sees these batches sees their state.
            let mut txns = lock(&self.txns);
            for (i, header) in assigned.iter().enumerate() {
                txns.apply(header, prepared.markers.get(i).copied().flatten());
            }
        }
        let must_sync = self.written_to(next, ack, &config.durability, prepared.now);
        drop(writer);
        Ok(AppendInfo {
            base_offset: base,
            last_offset: next - 1,
            max_timestamp: headers.iter().map(|h| h.max_timestamp).max().unwrap_or(-1),
            log_append_time: match config.timestamp_type {
                record_batch::TimestampType::LogAppendTime => prepared.now,
                record_batch::TimestampType::CreateTime => -1,
            },
            log_start_offset: self.log_start_offset(),
            must_sync,
            rolled,
        })
    }

    fn should_roll(&self, writer: &Writer, config: &TopicConfig, bytes: u64, count: i64) -> bool {
        let active = &writer.active;
        let size = active.len();
        if size == 0 {
            return false;
        }
        let too_big = size + bytes > u64::from(config.segment_bytes);
        // A compacted topic also rolls once the segment is older than max.compaction.lag.ms
        // (KIP-354): the cleaner never cleans the active segment.
        let max_age = [
            config.segment_ms,
            config
                .cleanup
                .compact
                .then_some(config.max_compaction_lag_ms),
        ]
        .into_iter()
        .flatten()
        .min();
        let too_old = match (max_age, writer.first_append_ms) {
            (Some(ms), Some(first)) => {
                now_ms().saturating_sub(first) >= i64::try_from(ms).unwrap_or(i64::MAX)
            }
            _ => false,
        };
        // Relative offsets in the index are u32; Kafka rolls at i32::MAX, so do we.
        let offsets_full = active.next_offset() + count - active.base_offset > i64::from(i32::MAX);
        too_big || too_old || offsets_full
    }

    /// Closes the active segment (indexes written, data fsynced, file closed) and starts a new
    /// one.
    fn roll(&self, writer: &mut Writer, config: &TopicConfig) -> Result<(), AppendError> {
        let old = writer.active.clone();
        if let Err(e) = old.seal(&mut writer.cursor) {
            // The log is intact; the indexes are rebuilt when the segment next loads.
            tracing::warn!(partition = %self.name, error = %e, "could not write segment indexes");
        }
        // Closed segments are always durable, so recovery only ever has to check the last one.
        match old.sync() {
            Ok(()) => {}
            Err(SyncError::Open(e)) => return Err(e.into()),
            Err(SyncError::Sync(e)) => {
                self.poison_with(e.to_string());
                return Err(e.into());
            }
        }
        let base = old.next_offset();
        let place = Place {
            index_interval: config.index_interval_bytes,
            ..self.place.clone()
        };
        let new = Segment::create(&place, base, u64::from(config.segment_bytes))?;
        self.segments
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(new.clone());
        old.close_file();
        // Every batch below `base` is applied and fsynced: the transaction state as of it.
        self.save_transactions(base);
        writer.active = new;
        writer.cursor = IndexCursor::new(base, config.index_interval_bytes);
        writer.first_append_ms = None;
        self.synced_to(base);
        Ok(())
    }

    /// Flushes and refuses further appends. Called when the owner shuts down.
    pub fn close(&self) -> Result<(), AppendError> {
        let result = if self.poison.get().is_some() {
            Ok(())
        } else {
            self.flush()
        };
        let mut writer = lock(&self.writer);
        if result.is_ok() && !writer.closed && self.poison.get().is_none() {
            self.save_transactions(self.written_end());
        }
        writer.closed = true;
        result
    }
}

/// The batches' headers with their offsets from `base` on, those offsets as written in front
/// of each stored batch (the stored batch is the producer's, with our base offset in front),
/// and the offset after the last.
fn assign_offsets(base: i64, headers: &[BatchHeader]) -> (Vec<BatchHeader>, Vec<[u8; 8]>, i64) {
    let mut assigned = Vec::with_capacity(headers.len());
    let mut offsets = Vec::with_capacity(headers.len());
    let mut next = base;
    for header in headers {
        offsets.push(next.to_be_bytes());
        assigned.push(BatchHeader {
            base_offset: next,
            ..*header
        });
        next += header.next_offset() - header.base_offset;
    }
    (assigned, offsets, next)
}
