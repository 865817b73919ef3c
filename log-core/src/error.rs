//! Error types, one per operation, each naming the file it concerns where there is one.

use std::io;
use std::path::PathBuf;

use crate::decompress::DecompressError;
use crate::segment::chain::Damage;

/// Why a record set was refused, or could not be decoded: not valid as RecordBatch v2, or
/// its records do not decompress or decode.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// A batch is not valid RecordBatch v2 (framing, CRC, counts).
    #[error(transparent)]
    Invalid(#[from] record_batch::BatchError),
    /// A compressed batch's records do not decompress within bounds.
    #[error("at byte {position} of the record set: {source}")]
    Decompress {
        /// Where the batch starts.
        position: usize,
        /// The codec's failure, or the bound passed.
        source: DecompressError,
    },
    /// The records do not decode (kafka-protocol's message).
    #[error("batch cannot be decoded: {0}")]
    Undecodable(String),
}

/// An I/O failure on a named file.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct FileError {
    /// What was being done (`open`, `read`, `fsync`, …).
    pub op: &'static str,
    /// The file or directory it was done to.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}

impl FileError {
    /// `op` on `path` failed with `source`.
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        FileError {
            op,
            path: path.into(),
            source,
        }
    }

    /// True when the disk is full (ENOSPC) or over quota.
    pub fn is_disk_full(&self) -> bool {
        matches!(
            self.source.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        )
    }
}

/// A config value, or a file of settings, that is not valid.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A config name this log does not know.
    #[error("unknown config {name}")]
    Unknown {
        /// The name as given.
        name: String,
    },
    /// A numeric config whose value does not parse.
    #[error("{name}={value}: not a number")]
    NotANumber {
        /// The config.
        name: String,
        /// Its value as given.
        value: String,
    },
    /// A numeric config outside its range.
    #[error("{name}={value}: must be in {min}..={max}")]
    OutOfRange {
        /// The config.
        name: String,
        /// Its value.
        value: i64,
        /// The least value allowed.
        min: i64,
        /// The greatest value allowed.
        max: i64,
    },
    /// A limit below -1 (-1 is no limit).
    #[error("{name}={value}: must be -1 (no limit) or >= 0")]
    NegativeLimit {
        /// The config.
        name: String,
        /// Its value.
        value: i64,
    },
    /// A value Kafka accepts that this log does not implement.
    #[error("{name}={value} is not supported (only {supported})")]
    Unsupported {
        /// The config.
        name: String,
        /// Its value as given.
        value: String,
        /// The values that are, as text for the message.
        supported: &'static str,
    },
    /// Kafka's `ConfigException` message, for the configs Kafka validates by name.
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        /// The config.
        name: String,
        /// Its value as given.
        value: String,
        /// Kafka's reason.
        reason: String,
    },
    /// A line of a settings file that is not `name=value`.
    #[error("line {line:?} is not name=value")]
    NotNameValue {
        /// The line.
        line: String,
    },
    /// A `.topic` file whose first line is not a format this log reads.
    #[error("the first line must be {expected:?}")]
    Format {
        /// The current format's first line.
        expected: &'static str,
    },
    /// A `.topic` file without a valid `partitions=` or `id=` line.
    #[error("missing or invalid {name}")]
    Missing {
        /// `partitions` or `id`.
        name: &'static str,
    },
}

/// Opening a log, a topic or a partition failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A file could not be opened, read or created.
    #[error(transparent)]
    Io(#[from] FileError),
    /// The data directory's lock file is held by another process.
    #[error("{path} is locked by another process (is another broker using this data dir?)")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A file's content cannot be what this log wrote (recovery does not repair it).
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A topic's `.topic` file is not valid.
    #[error("{path}: {source}")]
    BadConfig {
        /// The `.topic` file.
        path: PathBuf,
        /// What is wrong in it.
        source: ConfigError,
    },
}

/// An append was refused; nothing of it was stored.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The record set is not valid, or its records do not decompress or decode.
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// A batch larger than the topic's `max.message.bytes`.
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge {
        /// The batch's bytes.
        size: usize,
        /// `max.message.bytes`.
        max: usize,
    },
    /// Writing failed (before anything of the append became visible).
    #[error(transparent)]
    Io(#[from] FileError),
    /// A write or fsync failed earlier in a way that leaves the partition's durable state
    /// unknown; no further append is accepted until the partition is reopened.
    #[error("partition {partition} refuses writes after an earlier failure: {reason}")]
    Poisoned {
        /// The partition (`topic-index`).
        partition: String,
        /// The earlier failure.
        reason: String,
    },
    /// The partition was closed (its topic deleted, or the log shut down).
    #[error("partition {0} is closed")]
    Closed(String),
    /// An offset would pass `i64::MAX`, or a position in a segment 4 GiB.
    #[error("offset overflow: the partition is past i64::MAX or a segment past 4 GiB")]
    OffsetOverflow,
    /// A producer set the LogAppendTime bit of a batch for a `message.timestamp.type=
    /// LogAppendTime` topic (Kafka's INVALID_TIMESTAMP: only the broker sets it).
    #[error("invalid timestamp type in the batch at byte {position}: producer should not set timestamp type to LogAppendTime")]
    ProducerLogAppendTime {
        /// Where the batch starts in the record set.
        position: usize,
    },
    /// Records refused one by one (KIP-467): keyless records for a compacted topic (Kafka's
    /// INVALID_RECORD) and, with CreateTime, records whose timestamp lies outside
    /// `message.timestamp.before.max.ms` / `after.max.ms` (KIP-937: INVALID_TIMESTAMP, which
    /// wins when both occur). Nothing of the append is written.
    #[error("{}", refused_message(.errors, *.invalid_timestamp))]
    RefusedRecords {
        /// The partition (`topic-index`).
        partition: String,
        /// Each refused record, by its index among those appended, ascending.
        errors: Vec<RecordError>,
        /// Whether a record was refused for its timestamp.
        invalid_timestamp: bool,
    },
    /// Recompressing for the topic's `compression.type` failed in the codec.
    #[error(transparent)]
    Compress(#[from] crate::compress::CompressError),
    /// Only from [`crate::Partition::try_append_pending`]: nothing was written.
    #[error("the append would block (the writer is busy or the segment must roll)")]
    WouldBlock,
}

impl From<record_batch::BatchError> for AppendError {
    fn from(e: record_batch::BatchError) -> Self {
        AppendError::InvalidBatch(e.into())
    }
}

impl AppendError {
    /// True when the failure was a full disk: the client may retry later.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, AppendError::Io(e) if e.is_disk_full())
    }
}

/// A read by offset or timestamp failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The offset is before the log start or past the log end.
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The partition's log start offset.
        log_start: i64,
        /// The partition's log end offset.
        log_end: i64,
    },
    /// A segment's bytes are not batches where its index points.
    #[error("{path}: corrupt data at byte {position}: {reason}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Where in it.
        position: u64,
        /// What is wrong.
        reason: String,
    },
    /// The offset lies in a damaged stretch of a segment: it cannot be served, and reads on
    /// either side of the stretch go on working.
    #[error("{path}: offsets {}..{} are damaged (bytes {}..{}): {}", damage.first_offset, damage.end_offset, damage.position, damage.resume_at, damage.reason)]
    Damaged {
        /// The segment file.
        path: PathBuf,
        /// The damaged stretch.
        damage: Damage,
    },
    /// A segment or index could not be read.
    #[error(transparent)]
    Io(#[from] FileError),
}

/// Records could not be deleted (DeleteRecords).
#[derive(Debug, thiserror::Error)]
pub enum DeleteRecordsError {
    /// The offset is past the high watermark.
    #[error(
        "offset {offset} is beyond the high watermark {high_watermark} (log start {log_start})"
    )]
    OffsetOutOfRange {
        /// The offset records were to be deleted before.
        offset: i64,
        /// The partition's log start offset.
        log_start: i64,
        /// The partition's high watermark.
        high_watermark: i64,
    },
    /// Segments or the log start checkpoint could not be written or removed.
    #[error(transparent)]
    Io(#[from] FileError),
}

/// Creating or deleting a topic failed.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// A name Kafka refuses ([`crate::validate_name`]).
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A topic of that name exists.
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    /// No topic of that name.
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    /// A partition count of 0 or over [`crate::MAX_PARTITIONS`].
    #[error("invalid partition count {0}: must be 1..=100000")]
    InvalidPartitions(u32),
    /// A partition count not above the topic's (partitions are only added).
    #[error(
        "topic {name} has {current} partitions; it can only grow, and {requested} is not more"
    )]
    PartitionsNotIncreased {
        /// The topic.
        name: String,
        /// Its partitions now.
        current: u32,
        /// The count asked for.
        requested: u32,
    },
    /// A topic config that is not valid.
    #[error("invalid config: {0}")]
    InvalidConfig(#[from] ConfigError),
    /// A topic of that name is offline: its files failed to open
    /// ([`crate::Log::offline_reason`]).
    #[error("topic {name} is offline: {reason}")]
    Offline {
        /// The topic.
        name: String,
        /// Why it did not open.
        reason: String,
    },
    /// The topic's directory or files could not be written or removed.
    #[error(transparent)]
    Io(#[from] FileError),
    /// A new partition could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
}

/// One refused record of an append: its index among the records appended and why (Kafka's
/// `RecordError`, sent back in Produce's `record_errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's index among those of the request's partition (from 0).
    pub index: u32,
    /// Why it was refused.
    pub message: String,
}

impl AppendError {
    /// The records this error refuses one by one (KIP-467), if it names any: the producer
    /// then fails those records and may send the others again.
    pub fn record_errors(&self) -> &[RecordError] {
        match self {
            AppendError::RefusedRecords { errors, .. } => errors,
            _ => &[],
        }
    }
}

/// Kafka's message for an append refused for some of its records.
fn refused_message(errors: &[RecordError], invalid_timestamp: bool) -> String {
    if invalid_timestamp {
        return "One or more records have been rejected due to invalid timestamp".to_string();
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                e.index, e.message
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}
