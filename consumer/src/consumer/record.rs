//! What the consumer hands out: a record of a partition, with its timestamp's kind.

use std::sync::Arc;

use bytes::Bytes;

/// `LogAppendTime` or `CreateTime`, as the batch says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's timestamp, as sent (`message.timestamp.type=CreateTime`, the default).
    CreateTime,
    /// The broker's clock when it appended the batch (`message.timestamp.type=LogAppendTime`).
    LogAppendTime,
}

/// A record read from a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic (shared by every record fetched for it).
    pub topic: Arc<str>,
    /// The partition within `topic`.
    pub partition: i32,
    /// The record's offset in its partition; committing `offset + 1` marks it consumed.
    pub offset: i64,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    /// Whose clock `timestamp` is.
    pub timestamp_type: TimestampType,
    /// None for a null key (not the same as an empty one).
    pub key: Option<Bytes>,
    /// None for a null value (a tombstone in a compacted topic).
    pub value: Option<Bytes>,
    /// Header names and values (None: a null value) in the record's order; a name given twice
    /// appears once, with its last value.
    pub headers: Vec<(String, Option<Bytes>)>,
}
