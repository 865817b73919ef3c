//! # log-core
//!
//! lograil's embeddable storage engine: topics of partitions, each partition an append-only
//! series of segment files holding Kafka RecordBatch v2 batches byte for byte (unless the
//! topic's `compression.type` or `message.timestamp.type=LogAppendTime` has the batch
//! recompressed or restamped on append, as Kafka does), with Kafka's file names and sparse
//! `.index` / `.timeindex` files.
//!
//! **It is** a library: validate-and-append, zero-copy reads by offset (memory-mapped, no decode),
//! reads by timestamp, segment roll and retention, a durability policy per topic with group
//! commit, and crash recovery that keeps exactly the valid prefix.
//!
//! **It is not** a broker: no sockets, no Kafka request types, no consumer groups. The `server`
//! crate puts the Kafka protocol in front of it. Choosing a partition for a key is the
//! producer's job, as in Kafka: the murmur2 partitioner lives in the `consumer` client crate.
//! Nor is it the batch format: the header layout, parsing and validation are the
//! `record-batch` crate, which the client uses too.
//!
//! ```
//! use log_core::{batch, Log, TopicConfig};
//!
//! let dir = tempfile::tempdir()?;
//! let log = Log::open(dir.path())?;
//! let topic = log.create_topic("orders", 3, TopicConfig::default())?;
//! let key = b"customer-42";
//! let partition = topic.partition(1).unwrap();
//!
//! let records = batch::build(&[(Some(key), Some(b"created"), 1_700_000_000_000)]);
//! let appended = partition.append(&records)?;
//! assert_eq!(appended.base_offset, 0);
//!
//! let read = partition.read(0, 1 << 20)?;
//! let decoded = batch::decode(&read.records)?;
//! assert_eq!(decoded[0].value.as_deref(), Some(&b"created"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod batch;
mod cleaner;
pub mod compress;
mod config;
mod data_dir;
pub mod decompress;
pub mod dump;
mod error;
mod index;
pub mod io;
mod log;
mod partition;
mod recompress;
mod record_checks;
mod scrub;
mod segment;
mod state_log;
mod topic;

pub use cleaner::{CleanError, CleanReport, CleanerOptions, CleanerStats, Dirtiness};
pub use config::{
    timestamp_type_name, Ack, CleanupPolicy, CompressionLevels, DirtyRatio, Durability,
    TopicCompression, TopicConfig, DLQ_GROUP_ENABLE, EXTRA_PREFIX, MIN_SEGMENT_BYTES,
    WRITE_CACHING,
};
pub use error::{
    AppendError, BatchError, ConfigError, DeleteRecordsError, FileError, OpenError, ReadError,
    RecordError, TopicError,
};
pub use log::{Log, LogOptions, MAX_PARTITIONS};
pub use partition::{
    now_ms, AbortedTxn, AppendInfo, BatchHeaders, OpenTxn, Partition, ReadResult, RetentionReport,
};
pub use scrub::{ScrubOptions, ScrubStats, DEFAULT_SCRUB};
pub use segment::{Damage, DamageReason, Recovery, DEFAULT_LOADED_SEGMENTS, DEFAULT_OPEN_SEGMENTS};
pub use state_log::{StateLog, StateLogError};
pub use topic::{validate_name, Topic};
pub use uuid::Uuid;
