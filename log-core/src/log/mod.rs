//! A data directory of topics: `<data-dir>/<topic>.topic` holds a topic's partition count and
//! config (Kafka config names, one `name=value` a line), `<data-dir>/<topic>-<N>/` its
//! partitions. The `.topic` file is written last when a topic is created and removed first when
//! it is deleted, so it is the commit point of both; partition directories that no topic holds
//! (a crash came before or after that point) are removed at open.
//!
//! This file opens and closes the data dir and finds its topics; `topics` creates, deletes,
//! grows and reconfigures them; `background` runs the flusher, scrubber and cleaner threads.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use uuid::Uuid;

mod background;
mod topics;

use crate::cleaner::CleanerOptions;
use crate::config::{Durability, TopicConfig};
pub use crate::data_dir::MAX_PARTITIONS;
use crate::data_dir::{
    count_partitions, partition_dirs, read_topic_file, remove_dir, remove_orphans,
    take_clean_marker, write_clean_marker, write_topic_file,
};
use crate::error::{AppendError, FileError, OpenError, TopicError};
use crate::io::{self, FileStorage, Storage};
use crate::partition::OpenContext;
use crate::partition::{Partition, RetentionReport};
use crate::scrub::{ScrubOptions, ScrubStats};
use crate::segment::{SegmentCache, DEFAULT_LOADED_SEGMENTS, DEFAULT_OPEN_SEGMENTS};
use crate::topic::{open_topic, validate_name, Topic};

const LOCK_FILE: &str = ".lock";
/// Partition directories of a deleted topic are renamed with this suffix, then removed.
const DELETED_SUFFIX: &str = "-deleted";
/// Longest file name (in bytes) the common Linux file systems allow.
const MAX_FILE_NAME: usize = 255;

/// The storage engine over one data directory.
#[derive(Debug)]
pub struct Log {
    shared: Arc<Shared>,
    /// The background threads (flusher, scrubber, cleaner), joined at shutdown.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The shutdown ran (it runs once).
    shut: AtomicBool,
}

/// How a data directory is opened.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Where writes and fsyncs go (the real file system, or a test's fake).
    pub storage: Arc<dyn Storage>,
    /// How many closed segments may be loaded (log mapped, indexes in memory) at once.
    pub loaded_segments: usize,
    /// How many active segments may have their file open (and mapped) at once: the rest are
    /// parked, and open again on their next write or read.
    pub open_segments: usize,
    /// When the background scrubber checks the closed segments, and how fast.
    pub scrub: ScrubOptions,
    /// The background log cleaner (compaction).
    pub cleaner: CleanerOptions,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            storage: Arc::new(FileStorage),
            loaded_segments: DEFAULT_LOADED_SEGMENTS,
            open_segments: DEFAULT_OPEN_SEGMENTS,
            scrub: ScrubOptions::default(),
            cleaner: CleanerOptions::default(),
        }
    }
}

#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    context: OpenContext,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Names of topics being created: taken before their files are made, without holding
    /// `topics`, so a slow creation blocks neither readers nor a create of another name.
    creating: Mutex<BTreeSet<String>>,
    /// Topics whose files could not be opened, with why: not served, and their names cannot
    /// be taken by a new topic (which would remove their data).
    offline: RwLock<BTreeMap<String, String>>,
    /// How many partition directories each offline topic has (its partitions, as far as the
    /// data dir tells without its `.topic` file).
    offline_partitions: BTreeMap<String, u32>,
    /// Serialises changes to existing topics (partitions added, config altered, deletion), so
    /// that each rewrites the `.topic` file from the state the last one left.
    alter: Mutex<()>,
    /// Held for the life of the log: one process per data dir.
    _lock: File,
    stop: Mutex<bool>,
    wake: Condvar,
    scrub_stats: ScrubStats,
}

impl Log {
    /// Opens (creating if missing) the data directory `dir` on the real file system.
    pub fn open(dir: impl AsRef<Path>) -> Result<Log, OpenError> {
        Log::open_with_options(dir, LogOptions::default())
    }

    /// Opens `dir` with all writes going through `storage` (see [`crate::io`]).
    pub fn open_with(dir: impl AsRef<Path>, storage: Arc<dyn Storage>) -> Result<Log, OpenError> {
        Log::open_with_options(
            dir,
            LogOptions {
                storage,
                ..LogOptions::default()
            },
        )
    }

    /// Opens `dir` with `options`. A topic whose files cannot be opened is reported and kept
    /// offline ([`Log::offline_topics`]); every other topic opens.
    pub fn open_with_options(dir: impl AsRef<Path>, options: LogOptions) -> Result<Log, OpenError> {
        let dir = dir.as_ref().to_path_buf();
        let lock = lock_dir(&dir)?;
        let context = OpenContext {
            storage: options.storage,
            cache: SegmentCache::new(options.loaded_segments),
            open_files: SegmentCache::active(options.open_segments),
            clean: take_clean_marker(&dir)?,
        };
        let OpenedTopics { topics, offline } = open_topics(&dir, &context)?;
        let partition_dirs = partition_dirs(&dir);
        let offline_partitions = count_partitions(&partition_dirs, |t| offline.contains_key(t));
        remove_orphans(&partition_dirs, |topic, index| {
            offline.contains_key(topic)
                || topics
                    .get(topic)
                    .is_some_and(|t: &Arc<Topic>| (index as usize) < t.partitions.len())
        });
        let dir_for_errors = dir.clone();
        let unclean = !context.clean;
        let context = OpenContext {
            clean: false,
            ..context
        };
        let shared = Arc::new(Shared {
            dir,
            context,
            topics: RwLock::new(topics),
            creating: Mutex::new(BTreeSet::new()),
            offline: RwLock::new(offline),
            offline_partitions,
            alter: Mutex::new(()),
            _lock: lock,
            stop: Mutex::new(false),
            wake: Condvar::new(),
            scrub_stats: ScrubStats::default(),
        });
        let threads = background::spawn(
            &shared,
            options.scrub,
            options.cleaner,
            unclean,
            &dir_for_errors,
        )?;
        Ok(Log {
            shared,
            threads: Mutex::new(threads),
            shut: AtomicBool::new(false),
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The topic named `name`, if it exists (an offline topic does not).
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.shared.topics_read().get(name).cloned()
    }

    /// The one partition of an internal state log (committed offsets, share-group state),
    /// created on first use: every append fsynced before it is acknowledged, nothing deleted by
    /// retention (its owner compacts it), `segment_bytes` per segment, batches of at most
    /// `max_message_bytes`.
    pub fn state_log(
        &self,
        name: &str,
        segment_bytes: u32,
        max_message_bytes: u32,
    ) -> Result<Arc<Partition>, TopicError> {
        let topic = match self.topic(name) {
            Some(topic) => topic,
            None => self.create_topic(
                name,
                1,
                TopicConfig {
                    durability: Durability::ALWAYS,
                    segment_bytes,
                    max_message_bytes,
                    retention_ms: None,
                    ..TopicConfig::default()
                },
            )?,
        };
        Ok(topic.partitions()[0].clone())
    }

    /// The topic with Kafka topic id `id`, if it exists.
    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.shared
            .topics_read()
            .values()
            .find(|t| t.id == id)
            .cloned()
    }

    /// Topics that could not be opened, with why.
    pub fn offline_topics(&self) -> Vec<(String, String)> {
        self.shared
            .offline
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, reason)| (name.clone(), reason.clone()))
            .collect()
    }

    /// Why `name` is offline, if it is.
    pub fn offline_reason(&self, name: &str) -> Option<String> {
        self.shared
            .offline
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// How many partitions offline topic `name` has, as counted from its partition
    /// directories (0 if it has none, or is not offline).
    pub fn offline_partition_count(&self, name: &str) -> u32 {
        self.shared
            .offline_partitions
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    /// What the background scrubber has done since the log opened.
    pub fn scrub_stats(&self) -> &ScrubStats {
        &self.shared.scrub_stats
    }

    /// How many closed segments are loaded now (bounded by [`LogOptions::loaded_segments`]).
    pub fn loaded_segments(&self) -> usize {
        self.shared.context.cache.held()
    }

    /// How many active segments have their file open now (bounded by
    /// [`LogOptions::open_segments`]).
    pub fn open_segments(&self) -> usize {
        self.shared.context.open_files.held()
    }

    /// All topics, by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.shared.topics_read().values().cloned().collect()
    }

    /// Runs retention on every partition; returns the total removed.
    pub fn apply_retention(&self, now_ms: i64) -> Result<RetentionReport, FileError> {
        let mut total = RetentionReport::default();
        for topic in self.topics() {
            for partition in topic.partitions() {
                let report = partition.apply_retention(now_ms)?;
                total.deleted_segments += report.deleted_segments;
                total.deleted_bytes += report.deleted_bytes;
            }
        }
        Ok(total)
    }

    /// Flushes every partition and stops the background flusher. Dropping the log does the
    /// same, but can only log errors.
    pub fn close(self) -> Result<(), AppendError> {
        self.shut_down()
    }

    /// Stops the background threads, flushes and closes every partition (later appends are
    /// refused) and marks the data dir as shut down cleanly, so that nothing is written to it
    /// after this returns. Runs once: a second call (and the drop) does nothing. For an owner
    /// that shares the log and must know when its files are final.
    pub fn shut_down(&self) -> Result<(), AppendError> {
        if self.shut.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        *self
            .shared
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        for thread in threads {
            let _ = thread.join();
        }
        let mut first_error = None;
        for topic in self.topics() {
            for partition in topic.partitions() {
                if let Err(e) = partition.close() {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => write_clean_marker(&self.shared.dir).map_err(AppendError::from),
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            tracing::error!(error = %e, "flush on close failed");
        }
    }
}

impl Shared {
    fn alter_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.alter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every partition of every topic, for the background threads' passes.
    fn partitions(&self) -> Vec<Arc<Partition>> {
        self.topics_read()
            .values()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect()
    }

    fn topics_read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Topic>>> {
        self.topics.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn topics_write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Topic>>> {
        self.topics.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps up to `timeout` (less when woken); false once the log is closing.
    fn wait(&self, timeout: Duration) -> bool {
        let stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        if *stop {
            return false;
        }
        let (stop, _) = self
            .wake
            .wait_timeout(stop, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        !*stop
    }
}

/// Creates the data directory `dir` if missing and takes its lock: one process at a time.
fn lock_dir(dir: &Path) -> Result<File, OpenError> {
    crate::io::create_dir_durably(dir).map_err(|e| FileError::new("create", dir, e))?;
    let lock_path = dir.join(LOCK_FILE);
    let lock = File::create(&lock_path).map_err(|e| FileError::new("create", &lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Err(OpenError::Locked { path: lock_path }),
        Err(fs::TryLockError::Error(e)) => return Err(FileError::new("lock", &lock_path, e).into()),
    }
    Ok(lock)
}

/// A data directory's topics as opened.
struct OpenedTopics {
    topics: BTreeMap<String, Arc<Topic>>,
    /// Those whose files could not be opened, with why.
    offline: BTreeMap<String, String>,
}

/// Opens the topics of a data directory; on the way, clears what a crash left half done (an
/// interrupted file replacement, a topic deleted just before it).
fn open_topics(dir: &Path, context: &OpenContext) -> Result<OpenedTopics, OpenError> {
    let mut topics = BTreeMap::new();
    let mut offline = BTreeMap::new();
    let entries = fs::read_dir(dir).map_err(|e| FileError::new("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| FileError::new("list", dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(io::REPLACE_TMP_PREFIX) {
            // A file replacement a crash interrupted: the old file is still in place.
            let _ = fs::remove_file(&path);
            continue;
        }
        if name.ends_with(DELETED_SUFFIX) {
            // A topic deleted just before a crash.
            remove_dir(&path);
            continue;
        }
        if let Some(topic) = name.strip_suffix(".topic") {
            if validate_name(topic).is_err() {
                tracing::warn!(file = %path.display(), "ignoring a topic file with an invalid name");
                continue;
            }
            let opened = read_topic_file(&path).and_then(|file| {
                let id = match file.id {
                    Some(id) => id,
                    None => {
                        let id = Uuid::new_v4();
                        write_topic_file(dir, topic, file.partitions, &file.config, id)?;
                        id
                    }
                };
                open_topic(dir, topic, id, file.partitions, file.config, context)
            });
            match opened {
                Ok(opened) => {
                    topics.insert(opened.name.clone(), Arc::new(opened));
                }
                Err(e) => {
                    tracing::error!(topic, error = %e, "topic cannot be opened: it stays offline");
                    offline.insert(topic.to_string(), e.to_string());
                }
            }
        }
    }
    Ok(OpenedTopics { topics, offline })
}
