//! Error types, one per operation, each naming the file it concerns where there is one.

use std::io;
use std::path::PathBuf;

use crate::decompress::DecompressError;
use crate::segment::chain::Damage;

/// Why a record set was refused, or could not be decoded: not valid as RecordBatch v2, or
/// its records do not decompress or decode.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error(transparent)]
    Invalid(#[from] record_batch::BatchError),
    #[error("at byte {position} of the record set: {source}")]
    Decompress {
        /// Where the batch starts.
        position: usize,
        source: DecompressError,
    },
    #[error("batch cannot be decoded: {0}")]
    Undecodable(String),
}

/// An I/O failure on a named file.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct FileError {
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl FileError {
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
    #[error("unknown config {name}")]
    Unknown { name: String },
    #[error("{name}={value}: not a number")]
    NotANumber { name: String, value: String },
    #[error("{name}={value}: must be in {min}..={max}")]
    OutOfRange {
        name: String,
        value: i64,
        min: i64,
        max: i64,
    },
    #[error("{name}={value}: must be -1 (no limit) or >= 0")]
    NegativeLimit { name: String, value: i64 },
    #[error("{name}={value} is not supported (only {supported})")]
    Unsupported {
        name: String,
        value: String,
        supported: &'static str,
    },
    /// Kafka's `ConfigException` message, for the configs Kafka validates by name.
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
    #[error("line {line:?} is not name=value")]
    NotNameValue { line: String },
    #[error("the first line must be {expected:?}")]
    Format { expected: &'static str },
    #[error("missing or invalid {name}")]
    Missing { name: &'static str },
}

/// Opening a log, a topic or a partition failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{path} is locked by another process (is another broker using this data dir?)")]
    Locked { path: PathBuf },
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    BadConfig { path: PathBuf, source: ConfigError },
}

/// An append was refused; nothing of it was stored.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge { size: usize, max: usize },
    #[error(transparent)]
    Io(#[from] FileError),
    /// A write or fsync failed earlier in a way that leaves the partition's durable state
    /// unknown; no further append is accepted until the partition is reopened.
    #[error("partition {partition} refuses writes after an earlier failure: {reason}")]
    Poisoned { partition: String, reason: String },
    #[error("partition {0} is closed")]
    Closed(String),
    #[error("offset overflow: the partition is past i64::MAX or a segment past 4 GiB")]
    OffsetOverflow,
    /// A producer set the LogAppendTime bit of a batch for a `message.timestamp.type=
    /// LogAppendTime` topic (Kafka's INVALID_TIMESTAMP: only the broker sets it).
    #[error("invalid timestamp type in the batch at byte {position}: producer should not set timestamp type to LogAppendTime")]
    ProducerLogAppendTime { position: usize },
    /// A record without a key for a topic whose `cleanup.policy` compacts (Kafka's
    /// INVALID_RECORD, with its message).
    #[error("Compacted topic cannot accept message without key in topic partition {partition}.")]
    KeylessRecord { partition: String },
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
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    #[error("{path}: corrupt data at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    /// The offset lies in a damaged stretch of a segment: it cannot be served, and reads on
    /// either side of the stretch go on working.
    #[error("{path}: offsets {}..{} are damaged (bytes {}..{}): {}", damage.first_offset, damage.end_offset, damage.position, damage.resume_at, damage.reason)]
    Damaged { path: PathBuf, damage: Damage },
    #[error(transparent)]
    Io(#[from] FileError),
}

/// Records could not be deleted (DeleteRecords).
#[derive(Debug, thiserror::Error)]
pub enum DeleteRecordsError {
    #[error(
        "offset {offset} is beyond the high watermark {high_watermark} (log start {log_start})"
    )]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        high_watermark: i64,
    },
    #[error(transparent)]
    Io(#[from] FileError),
}

/// Creating or deleting a topic failed.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    #[error("invalid partition count {0}: must be 1..=100000")]
    InvalidPartitions(u32),
    #[error(
        "topic {name} has {current} partitions; it can only grow, and {requested} is not more"
    )]
    PartitionsNotIncreased {
        name: String,
        current: u32,
        requested: u32,
    },
    #[error("invalid config: {0}")]
    InvalidConfig(#[from] ConfigError),
    #[error("topic {name} is offline: {reason}")]
    Offline { name: String, reason: String },
    #[error(transparent)]
    Io(#[from] FileError),
    #[error(transparent)]
    Open(#[from] OpenError),
}
