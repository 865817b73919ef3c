//! One partition: an ordered list of segments, one writer, many lock-free-ish readers.
//!
//! Appends are serialised by the writer mutex; validation and CRC checks run before it is taken.
//! Readers take the segment list's read lock only long enough to clone one `Arc<Segment>`, then
//! read published bytes from its memory map.
//!
//! This file holds the partition and its opening; `append` the write path with its segment
//! roll (prepared without a lock, written under the writer's); [`read`] the reads,
//! [`durability`] the group commit, flushing and poisoning, [`retention`] the deletion of old
//! segments, `start` the log start offset set by DeleteRecords, [`batches`] iteration over
//! batch headers, [`transactions`] the open and aborted transactions and the last stable
//! offset; compaction is `crate::cleaner`'s.

mod append;
mod batches;
mod durability;
mod read;
mod retention;
mod start;
mod transactions;

pub use batches::BatchHeaders;
use durability::SyncState;
pub use read::ReadResult;
pub use retention::RetentionReport;
pub use transactions::{AbortedTxn, OpenTxn};

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::TopicConfig;
use crate::error::{FileError, OpenError};
use crate::index::IndexCursor;
use crate::io::Storage;
use crate::segment::{self, Place, Recovery, Segment, SegmentCache};

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended.
    pub base_offset: i64,
    /// Offset of the last record appended.
    pub last_offset: i64,
    /// Largest record timestamp in the appended batches (-1 if none).
    pub max_timestamp: i64,
    /// The append time the broker stamped the batches with (`message.timestamp.type=
    /// LogAppendTime`), -1 under CreateTime: a Produce response's `log_append_time_ms`.
    pub log_append_time: i64,
    /// The partition's log start offset after the append.
    pub log_start_offset: i64,
    /// The append may be acknowledged only once an fsync covers it (its ack and the topic's
    /// durability ask for it); until then readers do not see it either.
    pub must_sync: bool,
    /// The append closed the active segment and started a new one (where the broker writes
    /// its producer-state snapshot).
    pub rolled: bool,
}

/// One partition of a topic: its segments in a directory `<topic>-<index>`, appended to by
/// one writer at a time and read concurrently.
pub struct Partition {
    name: String,
    dir: PathBuf,
    /// Where new segments go and how they are opened.
    pub(crate) place: Place,
    config: RwLock<TopicConfig>,
    pub(crate) segments: RwLock<Vec<Arc<Segment>>>,
    /// Offset after the last written batch.
    end_offset: AtomicI64,
    /// Every offset below this is on disk.
    durable_end: AtomicI64,
    /// What readers see (the high watermark): everything fsynced, and everything up to the
    /// last append whose acknowledgement did not wait for an fsync (so an `acks=all` record
    /// is seen only once it is on disk or a later `acks=1` record is seen).
    visible_end: AtomicI64,
    /// When data was first written that is not fsynced yet (ms since the epoch; 0: none
    /// known), for `flush.ms`.
    unsynced_since: AtomicI64,
    writer: Mutex<Writer>,
    sync_state: Mutex<SyncState>,
    synced: Condvar,
    /// Set once a write or fsync failed in a way that leaves the durable state unknown.
    poison: OnceLock<String>,
    recovery: Recovery,
    /// The log start offset set by DeleteRecords (see `start.rs`); 0 when never set.
    start_floor: AtomicI64,
    /// Serialises changes of `start_floor` and its file.
    start_lock: Mutex<()>,
    /// Where the log cleaner's last pass ended (the first dirty offset; see `cleaner`).
    pub(crate) cleaned_to: AtomicI64,
    /// One cleaner pass at a time.
    pub(crate) cleaning: Mutex<()>,
    /// Held while segment files are deleted (retention) or swapped (the cleaner).
    pub(crate) segment_files: Mutex<()>,
    pub(crate) cleaner_stats: Mutex<crate::cleaner::stats::CleanerStats>,
    /// Open and aborted transactions (see `transactions.rs`); taken after `writer`.
    txns: Mutex<transactions::Transactions>,
    /// The partition holds (or held) a transactional batch: `txns` matters.
    transactional: AtomicBool,
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("log_start_offset", &self.log_start_offset())
            .field("log_end_offset", &self.log_end_offset())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Writer {
    active: Arc<Segment>,
    cursor: IndexCursor,
    /// Wall-clock time of the active segment's first batch, for `segment.ms`.
    first_append_ms: Option<i64>,
    closed: bool,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A compressed batch's records may decompress to this many times `max.message.bytes` (which
/// bounds the compressed batch, as in Kafka): room for any producer's batch (librdkafka's and
/// the Java client's batch sizes are counted uncompressed, 1 MB at most by default), no room
/// for a decompression bomb.
pub const DECOMPRESSED_PER_MESSAGE_BYTE: usize = 8;

/// What every partition of a data dir opens with.
#[derive(Debug, Clone)]
pub(crate) struct OpenContext {
    pub storage: Arc<dyn Storage>,
    pub cache: Arc<SegmentCache>,
    pub open_files: Arc<SegmentCache>,
    /// The data dir was shut down cleanly: recovery need not check CRCs.
    pub clean: bool,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Partition {
    /// Opens the partition in `dir` (creating it if missing) and recovers its last segment.
    /// `name` (`topic-N`) is used in errors and logs.
    pub(crate) fn open(
        dir: &Path,
        name: &str,
        config: TopicConfig,
        context: &OpenContext,
    ) -> Result<Partition, OpenError> {
        crate::io::create_dir_durably(dir).map_err(|e| FileError::new("create", dir, e))?;
        crate::cleaner::swap::recover(dir, context.storage.as_ref())?;
        let cleaned_to = crate::cleaner::swap::read_checkpoint(dir)?;
        let compacted_below = crate::cleaner::swap::read_reach(dir)?;
        let place = Place {
            dir: dir.to_path_buf(),
            storage: context.storage.clone(),
            cache: context.cache.clone(),
            open_files: context.open_files.clone(),
            index_interval: config.index_interval_bytes,
        };
        let mut bases = list_segments(dir)?;
        let start_floor = start::read_start_floor(dir)?;
        if bases.is_empty() {
            drop(Segment::create(&place, 0, 0)?);
            bases.push(0);
        }
        let mut segments = Vec::with_capacity(bases.len());
        for pair in bases.windows(2) {
            segments.push(Segment::open_closed(
                &place,
                pair[0],
                pair[1],
                pair[0] < compacted_below,
            )?);
        }
        let last_base = *bases.last().unwrap_or(&0);
        let (active, cursor, recovery) = Segment::recover(
            &place,
            last_base,
            u64::from(config.segment_bytes),
            context.clean,
        )?;
        segments.push(active.clone());
        let end = active.next_offset();
        let first_append_ms = (active.len() > 0).then(|| {
            // Kafka rolls on the age of the first batch's timestamp; after a restart we only
            // know the segment's timestamps, so age counts from its newest one.
            let ts = active.max_timestamp();
            if ts > 0 {
                ts
            } else {
                now_ms()
            }
        });
        let partition = Partition {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            place,
            config: RwLock::new(config),
            segments: RwLock::new(segments),
            end_offset: AtomicI64::new(end),
            writer: Mutex::new(Writer {
                active,
                cursor,
                first_append_ms,
                closed: false,
            }),
            durable_end: AtomicI64::new(end),
            visible_end: AtomicI64::new(end),
            unsynced_since: AtomicI64::new(0),
            sync_state: Mutex::new(SyncState { syncing: false }),
            synced: Condvar::new(),
            poison: OnceLock::new(),
            recovery,
            start_floor: AtomicI64::new(start_floor),
            start_lock: Mutex::new(()),
            cleaned_to: AtomicI64::new(cleaned_to),
            cleaning: Mutex::new(()),
            segment_files: Mutex::new(()),
            cleaner_stats: Mutex::new(Default::default()),
            txns: Mutex::new(Default::default()),
            transactional: AtomicBool::new(false),
        };
        partition.load_transactions()?;
        Ok(partition)
    }

    /// `<topic>-<index>`, as its directory is named.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The partition's directory, holding its segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What recovery did to the last segment when the partition opened.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The topic's config as this partition applies it now (a copy).
    pub fn config(&self) -> TopicConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The config's `compression.type`.
    pub fn compression(&self) -> crate::config::TopicCompression {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .compression
    }

    /// Replaces the config; takes effect from the next append or retention pass (appends
    /// already waiting for an fsync still wait for it).
    pub fn set_config(&self, config: TopicConfig) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
    }

    /// The first offset served: the first segment's base offset, or past it when
    /// DeleteRecords moved it (see [`Partition::delete_records_before`]).
    pub fn log_start_offset(&self) -> i64 {
        let first = self.segments().first().map_or(0, |s| s.base_offset);
        first.max(self.start_floor.load(Ordering::Acquire))
    }

    /// The end of what readers see (Kafka's high watermark, on a single node): no reader sees
    /// a record whose append waits for its fsync (`acks=all`) before that fsync, unless a
    /// later append that did not wait (`acks=1`) is seen.
    pub fn log_end_offset(&self) -> i64 {
        self.visible_end.load(Ordering::Acquire)
    }

    /// The offset the next append gets. It runs ahead of [`Partition::log_end_offset`] by
    /// what awaits its fsync.
    pub fn next_offset(&self) -> i64 {
        self.written_end()
    }

    fn written_end(&self) -> i64 {
        self.end_offset.load(Ordering::Acquire)
    }

    /// Bytes of log data on disk (index files not counted).
    pub fn size_bytes(&self) -> u64 {
        self.segments().iter().map(|s| s.len()).sum()
    }

    /// The largest record timestamp in the partition, if any record has one.
    pub fn max_timestamp(&self) -> Option<i64> {
        self.segments()
            .iter()
            .map(|s| s.max_timestamp())
            .max()
            .filter(|ts| *ts >= 0)
    }

    /// Segments in the partition, the active one included.
    pub fn segment_count(&self) -> usize {
        self.segments().len()
    }

    /// The base offset of every segment, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments().iter().map(|s| s.base_offset).collect()
    }

    pub(crate) fn segments(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Segment>>> {
        self.segments.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Base offsets of the `.log` files in `dir`, sorted.
fn list_segments(dir: &Path) -> Result<Vec<i64>, OpenError> {
    let entries = fs::read_dir(dir).map_err(|e| FileError::new("list", dir, e))?;
    let mut bases = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| FileError::new("list", dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(base) = segment::parse_file_name(&name, segment::LOG_EXT) {
            bases.push(base);
        } else if name.ends_with(".log") {
            tracing::warn!(file = %entry.path().display(), "ignoring a .log file that is not named as a segment");
        }
    }
    bases.sort_unstable();
    Ok(bases)
}
