//! Why bytes are not a valid batch, and why a batch could not be built.

/// Why bytes are not a valid Kafka RecordBatch v2.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// The record set has no bytes.
    #[error("no batch: the record set is empty")]
    Empty,
    /// The bytes end before the header, or before the length the header gives.
    #[error("truncated batch: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the header or the batch's length says it takes.
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
    /// The `batchLength` field: too short to cover the header, or negative.
    #[error("invalid batch length {0}")]
    BadLength(i32),
    /// The magic byte, which is not 2 (message sets v0 and v1 are not read).
    #[error("unsupported magic {0}: only RecordBatch v2 (magic 2) is read")]
    BadMagic(i8),
    /// The batch's CRC-32C does not match its content.
    #[error("CRC-32C mismatch: batch says {stored:#010x}, content is {computed:#010x}")]
    CrcMismatch {
        /// The header's CRC field.
        stored: u32,
        /// The CRC-32C of the bytes from `attributes` to the end of the batch.
        computed: u32,
    },
    /// The attributes' compression bits name a codec Kafka does not define.
    #[error("unknown compression codec {0}")]
    BadCompression(u8),
    /// `recordCount` is below 1 or not `lastOffsetDelta + 1`, or (uncompressed) more records
    /// than the bytes after the header could hold.
    #[error("record count {count} does not fit lastOffsetDelta {last_offset_delta} and {records_len} bytes of records")]
    BadRecordCount {
        /// The header's `recordCount`.
        count: i32,
        /// The header's `lastOffsetDelta`.
        last_offset_delta: i32,
        /// Bytes after the header.
        records_len: usize,
    },
    /// The records, walked, are not `recordCount` records with offset deltas 0, 1, 2, ….
    #[error("the batch says {count} records; its records are not that many, with offset deltas 0, 1, 2, …")]
    BadRecordOffsets {
        /// The header's `recordCount`.
        count: i32,
    },
    /// An error of a batch after the first of a record set ([`BatchError::at`]).
    #[error("at byte {position} of the record set: {source}")]
    At {
        /// Where the batch starts in the record set.
        position: usize,
        /// What is wrong with it.
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
    /// A batch stamped with fewer than one record.
    #[error("empty batch")]
    Empty,
    /// More records than a batch's `i32` offset deltas can number (no function of this crate
    /// returns it today).
    #[error("too many records")]
    TooManyRecords,
    /// A key, value, header name or header value longer than an `i32` length can say.
    #[error("field of {0} bytes is too large")]
    FieldTooLarge(usize),
    /// A record longer than an `i32` length can say.
    #[error("record of {0} bytes is too large")]
    RecordTooLarge(usize),
    /// A batch longer than `batchLength` (`i32`) can say.
    #[error("batch of {0} bytes is too large")]
    BatchTooLarge(usize),
    /// A batch's buffer shorter than a batch header.
    #[error("{0} bytes cannot hold a batch header")]
    NoHeader(usize),
}
