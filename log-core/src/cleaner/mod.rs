//! The log cleaner: compaction of the partitions whose `cleanup.policy` holds `compact`, as
//! Kafka's LogCleaner does it. The latest record of each key survives; older records of a key
//! are removed from the closed segments, and so are keyless records; offsets never change
//! (gaps are normal in a compacted partition). The active segment is never cleaned.
//!
//! A partition is cut in three at its *first dirty offset* (where the last clean ended) and
//! its *first uncleanable offset* (the active segment's base, or the first closed segment with
//! a record younger than `min.compaction.lag.ms`, or the last stable offset if it is lower: an
//! open transaction's records are never touched): the clean part, the dirty part, and the
//! rest. A pass cleans when the dirty part is at least `min.cleanable.dirty.ratio` of the
//! clean and dirty parts together, or when its oldest record is older than
//! `max.compaction.lag.ms`:
//!
//! 1. the dirty part is read into an [`OffsetMap`] (key → offset of its latest record there),
//!    bounded by `log.cleaner.dedupe.buffer.size`: a map that fills ends the pass's dirty part
//!    early, the rest waits for the next pass;
//! 2. the closed segments from the log start to the map's end are rewritten in groups of at
//!    most `segment.bytes`, each batch kept whole, dropped, or rebuilt with the records it
//!    keeps (same base offset, last offset delta, producer, codec; new count, length and CRC;
//!    compressed again with the topic's level). A record is dropped when the map holds a later
//!    offset for its key, when it has no key, or when it is a tombstone (null value) whose
//!    batch's delete horizon has passed: as in KIP-534, a batch that keeps tombstones gets
//!    one (the pass's time plus `delete.retention.ms`, as its base timestamp with the
//!    attribute bit set; record timestamps stay) the first time it is cleaned, so a
//!    tombstone stays readable for `delete.retention.ms` after it reached the cleaned part,
//!    whatever its own timestamp. Records of aborted transactions (log-core's transaction
//!    state) are removed, and never enter the offset map, so an aborted value never shadows a
//!    committed one. A transaction marker is kept while a batch of its transaction is (an
//!    empty one a producer keeps included); once none is, it gets its delete horizon as a
//!    tombstone's batch does and goes at the first pass past it, as in Kafka (its abort, if it
//!    is one, is forgotten first: [`Partition::forget_aborted`]). The pass walks from the log
//!    start, so it meets a transaction's batches before its marker;
//! 3. each group replaces its segments crash-safely ([`swap`]).
//!
//! The cleaner reads closed segments, which nothing else writes, and writes files of its own:
//! appends and reads go on meanwhile. Only the swap itself takes the partition's lock on
//! segment files (also taken by retention, which deletes them) and, for a moment, the segment
//! list's write lock. Readers holding a replaced segment keep reading it ([`Segment::retire`]).
//!
//! A batch whose records are all removed goes whole, unless it is its producer's last data
//! batch in the partition and the producer has not expired (`producer.id.expiration.ms`): then
//! an empty batch (no records; the same base offset, last offset delta, producer, epoch and
//! base sequence) stays, as Kafka keeps one, so the producer's sequence is rebuilt after a
//! restart and its next batch is not refused as out of order.

mod offset_map;
mod rules;
pub(crate) mod stats;
pub(crate) mod swap;

pub use stats::CleanerStats;

use std::collections::HashMap;
use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use record_batch::records::records;
use record_batch::{BatchHeader, Codec};

pub(crate) use offset_map::OffsetMap;
use rules::{records_section, Aborted, Kept, Rules};

use crate::error::{BatchError, FileError, OpenError, ReadError};
use crate::partition::{lock, Partition, DECOMPRESSED_PER_MESSAGE_BYTE};
use crate::segment::{Place, Segment};

/// How the background cleaner runs (Kafka's `log.cleaner.*` broker settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanerOptions {
    /// `log.cleaner.enable`.
    pub enabled: bool,
    /// `log.cleaner.backoff.ms`: the pause between two looks at the partitions.
    pub backoff: Duration,
    /// `log.cleaner.dedupe.buffer.size`: the most memory the offset map of one pass takes.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: the most bytes a second the cleaner reads and
    /// writes together; `None`: unbounded (Kafka's default).
    pub io_bytes_per_second: Option<u64>,
    /// `producer.id.expiration.ms`: a producer whose last batch is older is not kept an empty
    /// batch for.
    pub producer_id_expiration: Duration,
}

impl Default for CleanerOptions {
    /// Kafka's defaults: enabled, every 15 s, a 128 MiB map, unbounded I/O, producers expiring
    /// after a day.
    fn default() -> Self {
        CleanerOptions {
            enabled: true,
            backoff: Duration::from_secs(15),
            dedupe_buffer_bytes: 128 << 20,
            io_bytes_per_second: None,
            producer_id_expiration: Duration::from_secs(24 * 3600),
        }
    }
}

/// Where a partition stands for the cleaner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dirtiness {
    /// Where the last clean ended (the log start if none did).
    pub first_dirty: i64,
    /// The active segment's base, or that of the first closed segment too young to clean.
    pub first_uncleanable: i64,
    /// Bytes of closed segments wholly below `first_dirty`.
    pub clean_bytes: u64,
    /// Bytes of closed segments from `first_dirty` to `first_uncleanable`.
    pub dirty_bytes: u64,
    /// Timestamp of the first record not cleaned yet (in a closed segment), if any.
    pub oldest_dirty_timestamp: Option<i64>,
}

impl Dirtiness {
    /// The dirty part's share of the clean and dirty parts, 0.0 to 1.0.
    pub fn ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// How long the oldest record not cleaned yet has waited, in milliseconds (0 if none).
    pub fn lag_ms(&self, now_ms: i64) -> i64 {
        self.oldest_dirty_timestamp
            .map_or(0, |ts| now_ms.saturating_sub(ts).max(0))
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// The first dirty offset after the pass.
    pub cleaned_to: i64,
    /// Segments of the partition before the pass.
    pub segments_before: usize,
    /// Segments after it.
    pub segments_after: usize,
    /// Bytes of the segments rewritten (not counting the read of the dirty part for the map).
    pub bytes_read: u64,
    /// Bytes of the cleaned segments written in their place.
    pub bytes_written: u64,
    /// Records the pass dropped.
    pub records_removed: u64,
}

/// Why a pass failed; the partition is as it was, or as a completed group swap left it.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// A segment could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A cleaned segment could not be written, synced, renamed or removed.
    #[error(transparent)]
    File(#[from] FileError),
    /// A cleaned segment could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A stored batch is not valid.
    #[error("{0}")]
    Batch(#[from] BatchError),
    /// A record of a stored batch does not parse.
    #[error("a record of the batch at offset {offset} does not parse")]
    Record {
        /// The batch's base offset.
        offset: i64,
    },
    /// A batch's kept records could not be written as a new batch.
    #[error("rebuilding the batch at offset {offset}: {reason}")]
    Rebuild {
        /// The batch's base offset.
        offset: i64,
        /// The builder's error.
        reason: String,
    },
}

impl Partition {
    /// Where this partition stands for the cleaner at `now_ms`.
    pub fn dirtiness(&self, now_ms: i64) -> Dirtiness {
        let config = self.config();
        let segments = self.segments().clone();
        let closed = &segments[..segments.len().saturating_sub(1)];
        let active_base = segments.last().map_or(0, |s| s.base_offset);
        let first_dirty = self
            .cleaned_to
            .load(Ordering::Acquire)
            .max(self.log_start_offset());
        let lag = i64::try_from(config.min_compaction_lag_ms).unwrap_or(i64::MAX);
        let first_uncleanable = closed
            .iter()
            .filter(|s| s.next_offset() > first_dirty)
            .find(|s| lag > 0 && s.max_timestamp() > now_ms.saturating_sub(lag))
            .map_or(active_base, |s| s.base_offset.max(first_dirty))
            .min(self.last_stable_offset().max(first_dirty));
        let mut dirtiness = Dirtiness {
            first_dirty,
            first_uncleanable,
            clean_bytes: 0,
            dirty_bytes: 0,
            oldest_dirty_timestamp: None,
        };
        for segment in closed {
            if segment.next_offset() <= first_dirty {
                dirtiness.clean_bytes += segment.len();
            } else if segment.base_offset < first_uncleanable {
                dirtiness.dirty_bytes += segment.len();
            }
        }
        dirtiness.oldest_dirty_timestamp = closed
            .iter()
            .find(|s| s.next_offset() > first_dirty && s.len() > 0)
            .and_then(|s| s.read(first_dirty.max(s.base_offset), 1, i64::MAX).ok())
            .flatten()
            .and_then(|bytes| BatchHeader::read(&bytes).ok())
            .map(|h| h.base_timestamp);
        dirtiness
    }

    /// Whether a pass at `now_ms` would clean: the topic compacts, and its dirty part is
    /// large enough or old enough.
    pub fn needs_cleaning(&self, now_ms: i64) -> bool {
        let config = self.config();
        if !config.cleanup.compact {
            return false;
        }
        let d = self.dirtiness(now_ms);
        let max_lag = i64::try_from(config.max_compaction_lag_ms).unwrap_or(i64::MAX);
        d.dirty_bytes > 0
            && (d.ratio() >= config.min_cleanable_dirty_ratio.get() || d.lag_ms(now_ms) > max_lag)
    }

    /// What this partition's cleaner has done since it opened.
    pub fn cleaner_stats(&self) -> CleanerStats {
        lock(&self.cleaner_stats).clone()
    }

    /// Cleans the dirty part now (whatever its ratio), as the module says, with the map size
    /// and producer expiration of `options`; `None` when the topic does not compact or nothing
    /// is dirty. `pace(bytes)` is called with the bytes read or written as the pass goes (the
    /// I/O bound sleeps there). Blocking file work.
    pub fn clean(
        &self,
        options: &CleanerOptions,
        now_ms: i64,
        mut pace: impl FnMut(u64),
    ) -> Result<Option<CleanReport>, CleanError> {
        let _one = lock(&self.cleaning);
        let result = self.clean_once(options, now_ms, &mut pace);
        let mut stats = lock(&self.cleaner_stats);
        match &result {
            Ok(Some(report)) => {
                stats.runs += 1;
                stats.bytes_read += report.bytes_read;
                stats.bytes_written += report.bytes_written;
                stats.records_removed += report.records_removed;
                stats.last_run_ms = Some(crate::now_ms());
                stats.last_error = None;
            }
            Ok(None) => {}
            Err(e) => stats.last_error = Some(e.to_string()),
        }
        result
    }

    fn clean_once(
        &self,
        options: &CleanerOptions,
        now_ms: i64,
        pace: &mut dyn FnMut(u64),
    ) -> Result<Option<CleanReport>, CleanError> {
        let config = self.config();
        if !config.cleanup.compact {
            return Ok(None);
        }
        let started = std::time::Instant::now();
        let dirtiness = self.dirtiness(now_ms);
        if dirtiness.dirty_bytes == 0 {
            return Ok(None);
        }
        let segments = self.segments().clone();
        let closed = &segments[..segments.len().saturating_sub(1)];
        let per_batch =
            (config.max_message_bytes as usize).saturating_mul(DECOMPRESSED_PER_MESSAGE_BYTE);
        let mut report = CleanReport {
            segments_before: segments.len(),
            ..CleanReport::default()
        };

        // 1. The offset map of the dirty part.
        let (first_dirty, first_uncleanable) = (dirtiness.first_dirty, dirtiness.first_uncleanable);
        let budget = options.dedupe_buffer_bytes;
        let expected = usize::try_from(first_uncleanable - first_dirty).unwrap_or(usize::MAX);
        let mut map = OffsetMap::new(budget, expected);
        let aborted = Aborted::new(self.all_aborted());
        let map_end = map_dirty_keys(closed, &dirtiness, &aborted, per_batch, &mut map, pace)?;
        if map_end <= first_dirty {
            tracing::warn!(partition = %self.name(), budget, "the cleaner's offset map cannot hold one batch's keys; raise log.cleaner.dedupe.buffer.size");
            return Ok(None);
        }

        // 2. and 3. Rewrite the segments below the map's end in groups, each swapped in.
        let place = Place {
            index_interval: config.index_interval_bytes,
            ..self.place.clone()
        };
        let expiration = i64::try_from(options.producer_id_expiration.as_millis());
        let rules = Rules {
            map: &map,
            aborted: &aborted,
            last_batches: self.producers_last_batches()?,
            producers_alive_since_ms: now_ms.saturating_sub(expiration.unwrap_or(i64::MAX)),
            map_end,
            now_ms,
            delete_retention_ms: i64::try_from(config.delete_retention_ms).unwrap_or(i64::MAX),
            per_batch,
            level: |codec| config.compression_levels.of(codec),
        };
        swap::write_reach(self.place.storage.as_ref(), self.dir(), map_end)?;
        let mut kept = Kept::default();
        for group in groups(closed, map_end, u64::from(config.segment_bytes)) {
            self.clean_group(&place, &group, (&rules, &mut kept), &mut report, pace)?;
        }
        swap::write_checkpoint(self.place.storage.as_ref(), self.dir(), map_end)?;
        self.cleaned_to.fetch_max(map_end, Ordering::AcqRel);
        report.cleaned_to = map_end;
        report.segments_after = self.segment_count();
        tracing::info!(
            partition = %self.name(),
            cleaned_to = map_end,
            keys = map.len(),
            map_utilization = map.utilization(),
            read = report.bytes_read,
            written = report.bytes_written,
            removed = report.records_removed,
            took_ms = started.elapsed().as_millis() as u64,
            segments = %format_args!("{} -> {}", report.segments_before, report.segments_after),
            "cleaned"
        );
        Ok(Some(report))
    }

    /// Writes the cleaned form of `group` to `path`, fsynced: whether any batch changed, the
    /// records removed and the bytes written.
    fn write_cleaned(
        &self,
        path: &std::path::Path,
        group: &[Arc<Segment>],
        (rules, kept): (&Rules<'_, impl Fn(Codec) -> i32>, &mut Kept),
        report: &mut CleanReport,
        pace: &mut dyn FnMut(u64),
    ) -> Result<(bool, u64, u64), CleanError> {
        let file = self
            .place
            .storage
            .open(path)
            .map_err(|e| FileError::new("create", path, e))?;
        file.set_len(0)
            .map_err(|e| FileError::new("truncate", path, e))?;
        let mut removed = 0u64;
        let mut changed = false;
        let mut written = 0u64;
        for segment in group {
            let (data, batches) = segment.contents()?;
            let mut out = Vec::with_capacity(data.len());
            for (at, header) in batches {
                let batch = &data[at..at + header.size as usize];
                let (gone, rewritten) = rules.filter(batch, &header, &mut out, kept)?;
                removed += gone;
                changed |= rewritten;
            }
            file.append(&[IoSlice::new(&out)])
                .map_err(|e| FileError::new("write", path, e))?;
            written += out.len() as u64;
            report.bytes_read += data.len() as u64;
            pace((data.len() + out.len()) as u64);
        }
        if changed || group.len() > 1 {
            file.sync_data()
                .map_err(|e| FileError::new("fsync", path, e))?;
        }
        Ok((changed, removed, written))
    }

    /// The base offset of each producer's last data batch (not a marker) in the partition, by
    /// producer id, from its batch headers.
    fn producers_last_batches(&self) -> Result<HashMap<i64, i64>, CleanError> {
        let mut last = HashMap::new();
        for header in self.batch_headers(self.log_start_offset()) {
            match header {
                Ok(h) if h.producer_id >= 0 && !h.is_control() => {
                    last.insert(h.producer_id, h.base_offset);
                }
                Ok(_) | Err(ReadError::Damaged { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(last)
    }

    /// Writes the cleaned form of `group` and swaps it in; a single segment the pass does not
    /// change is left as it is.
    fn clean_group(
        &self,
        place: &Place,
        group: &[Arc<Segment>],
        (rules, kept): (&Rules<'_, impl Fn(Codec) -> i32>, &mut Kept),
        report: &mut CleanReport,
        pace: &mut dyn FnMut(u64),
    ) -> Result<(), CleanError> {
        let base = group[0].base_offset;
        let end = group.last().map_or(base, |s| s.next_offset());
        let path = swap::cleaned_path(self.dir(), base, end);
        let written = self
            .write_cleaned(&path, group, (rules, kept), report, pace)
            .and_then(|written| {
                // The removed markers' aborts are forgotten (and the state file written)
                // before the removal is swapped in.
                self.forget_aborted(&kept.take_removed())?;
                Ok(written)
            });
        let (changed, removed, written) = match written {
            Ok(written) => written,
            Err(e) => {
                // A full disk or a failed fsync: nothing of the pass is left behind.
                let _ = self.place.storage.remove(&path);
                return Err(e);
            }
        };
        if !changed && group.len() == 1 {
            self.place
                .storage
                .remove(&path)
                .map_err(|e| FileError::new("remove", &path, e))?;
            return Ok(());
        }

        let _files = lock(&self.segment_files);
        let current = self.segments().clone();
        let at = current.iter().position(|s| Arc::ptr_eq(s, &group[0]));
        let intact = at.is_some_and(|at| {
            current.len() > at + group.len()
                && current[at..at + group.len()]
                    .iter()
                    .zip(group)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
        });
        let Some(at) = at.filter(|_| intact) else {
            // Retention removed some of them meanwhile: this group waits for the next pass,
            // and so do the markers after it (its transactions' batches stay as they were).
            let _ = self.place.storage.remove(&path);
            kept.keep_all();
            return Ok(());
        };
        for segment in group {
            segment.retire()?;
        }
        let bases: Vec<i64> = group.iter().map(|s| s.base_offset).collect();
        swap::commit(self.dir(), self.place.storage.as_ref(), base, end, &bases)?;
        let cleaned = Segment::open_closed(place, base, end, true)?;
        self.segments
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .splice(at..at + group.len(), [cleaned]);
        report.bytes_written += written;
        report.records_removed += removed;
        Ok(())
    }
}

/// The background cleaner: every `options.backoff`, cleans each partition of `partitions()`
/// that [`Partition::needs_cleaning`], the dirtiest first, reading and writing at most
/// `options.io_bytes_per_second`. `wait(d)` sleeps up to `d` and returns false once the log
/// is closing.
pub(crate) fn run(
    options: CleanerOptions,
    partitions: impl Fn() -> Vec<Arc<Partition>>,
    wait: impl Fn(Duration) -> bool,
) {
    while wait(options.backoff) {
        let now = crate::now_ms();
        let mut due: Vec<(f64, Arc<Partition>)> = partitions()
            .into_iter()
            .filter(|p| p.needs_cleaning(now))
            .map(|p| (p.dirtiness(now).ratio(), p))
            .collect();
        due.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, partition) in due {
            let started = std::time::Instant::now();
            let mut moved = 0u64;
            let pace = |bytes: u64| {
                moved += bytes;
                if let Some(rate) = options.io_bytes_per_second {
                    let due = Duration::from_secs_f64(moved as f64 / rate.max(1) as f64);
                    if let Some(ahead) = due.checked_sub(started.elapsed()) {
                        wait(ahead);
                    }
                }
            };
            let failed_before = partition.cleaner_stats().last_error;
            match partition.clean(&options, crate::now_ms(), pace) {
                // The same failure again (a full disk stays full): said once, not every pass.
                Err(e) if failed_before.as_deref() == Some(e.to_string().as_str()) => {
                    tracing::debug!(partition = %partition.name(), error = %e, "the log cleaner failed again");
                }
                Err(e) => {
                    tracing::error!(partition = %partition.name(), error = %e, "the log cleaner failed; it tries again at each pass, and says so again if the error changes");
                }
                Ok(Some(_)) if failed_before.is_some() => {
                    tracing::info!(partition = %partition.name(), "the log cleaner works again");
                }
                Ok(_) => {}
            }
        }
    }
}

/// The closed segments below `end` (the last may hold `end`), in runs of at most `max_bytes`
/// and of offsets that fit a segment's relative offsets.
fn groups(closed: &[Arc<Segment>], end: i64, max_bytes: u64) -> Vec<Vec<Arc<Segment>>> {
    let mut groups: Vec<Vec<Arc<Segment>>> = Vec::new();
    let mut bytes = 0u64;
    for segment in closed.iter().filter(|s| s.base_offset < end) {
        match groups.last_mut() {
            Some(group)
                if bytes + segment.len() <= max_bytes
                    && segment.next_offset() - group[0].base_offset <= i64::from(i32::MAX) =>
            {
                bytes += segment.len();
                group.push(segment.clone());
            }
            _ => {
                bytes = segment.len();
                groups.push(vec![segment.clone()]);
            }
        }
    }
    groups
}

/// Step 1: reads the keys of the dirty part (from `first_dirty` to `first_uncleanable`) of
/// the closed segments into `map`, control batches and aborted transactions aside, until the
/// map is full. Returns where the map's part ends.
fn map_dirty_keys(
    closed: &[Arc<Segment>],
    dirtiness: &Dirtiness,
    aborted: &Aborted,
    per_batch: usize,
    map: &mut OffsetMap,
    pace: &mut dyn FnMut(u64),
) -> Result<i64, CleanError> {
    let (first_dirty, first_uncleanable) = (dirtiness.first_dirty, dirtiness.first_uncleanable);
    let mut map_end = first_dirty;
    'segments: for segment in closed
        .iter()
        .filter(|s| s.next_offset() > first_dirty && s.base_offset < first_uncleanable)
    {
        let (data, batches) = segment.contents()?;
        pace(data.len() as u64);
        for (at, header) in batches {
            if header.next_offset() <= first_dirty {
                continue;
            }
            if header.base_offset >= first_uncleanable {
                break 'segments;
            }
            if !header.is_control() && !aborted.holds(&header) {
                let batch = &data[at..at + header.size as usize];
                let plain = records_section(batch, &header, per_batch)?;
                for record in records(&plain) {
                    let record = record.ok_or(CleanError::Record {
                        offset: header.base_offset,
                    })?;
                    if let Some(key) = record.key {
                        if !map.put(key, header.base_offset + record.offset_delta) {
                            break 'segments;
                        }
                    }
                }
            }
            map_end = header.next_offset();
        }
        map_end = map_end.max(segment.next_offset().min(first_uncleanable));
    }
    Ok(map_end)
}
