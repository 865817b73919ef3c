//! Why bytes are not a valid batch, and why a batch could not be built.

/// Why bytes are not a valid Kafka RecordBatch v2.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("no batch: the record set is empty")]
    Empty,
    #[error("truncated batch: {needed} bytes needed, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("invalid batch length {0}")]
    BadLength(i32),
    #[error("unsupported magic {0}: only RecordBatch v2 (magic 2) is read")]
    BadMagic(i8),
    #[error("CRC-32C mismatch: batch says {stored:#010x}, content is {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("unknown compression codec {0}")]
    BadCompression(u8),
    #[error("record count {count} does not fit lastOffsetDelta {last_offset_delta} and {records_len} bytes of records")]
    BadRecordCount {
        count: i32,
        last_offset_delta: i32,
        records_len: usize,
    },
    #[error("the batch says {count} records; its records are not that many, with offset deltas 0, 1, 2, …")]
    BadRecordOffsets { count: i32 },
    #[error("at byte {position} of the record set: {source}")]
    At {
        position: usize,
        source: Box<BatchError>,
    },
}

impl BatchError {
    /// This error, said of the batch at byte `position` of a record set (as is, at 0).
    pub fn at(self, position: usize) -> Self {
        if position == 0 {
            self
        } else {
            BatchError::At {
                position,
                source: Box::new(self),
            }
        }
    }
}

/// Why a batch could not be built.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BuildError {
    #[error("empty batch")]
    Empty,
    #[error("too many records")]
    TooManyRecords,
    #[error("field of {0} bytes is too large")]
    FieldTooLarge(usize),
    #[error("record of {0} bytes is too large")]
    RecordTooLarge(usize),
    #[error("batch of {0} bytes is too large")]
    BatchTooLarge(usize),
    #[error("{0} bytes cannot hold a batch header")]
    NoHeader(usize),
}
