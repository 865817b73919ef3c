//! A batch's header, read into its fields.

use crate::error::BatchError;
use crate::layout::*;

/// The header of one batch, its fields as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// The first record's offset.
    pub base_offset: i64,
    /// Whole size of the batch in bytes, `LOG_OVERHEAD + batchLength`.
    pub size: u32,
    /// The epoch of the leader that appended the batch (-1 unset).
    pub partition_leader_epoch: i32,
    /// The CRC-32C the batch carries (not checked by [`BatchHeader::read`]).
    pub crc: u32,
    /// Codec, timestamp type, transactional, control and delete-horizon bits (see
    /// [`crate::layout`]).
    pub attributes: i16,
    /// The last record's offset minus [`base_offset`](Self::base_offset); compaction may
    /// leave fewer records than it counts.
    pub last_offset_delta: i32,
    /// The timestamp the records' deltas are from, or the delete horizon
    /// ([`BatchHeader::delete_horizon`]).
    pub base_timestamp: i64,
    /// The largest record timestamp, or the append time under LogAppendTime.
    pub max_timestamp: i64,
    /// -1 for a producer without idempotence.
    pub producer_id: i64,
    /// The producer's epoch (-1 without idempotence).
    pub producer_epoch: i16,
    /// The first record's sequence number for its producer and partition (-1 without
    /// idempotence).
    pub base_sequence: i32,
    /// Records the batch holds, as its header says.
    pub record_count: i32,
}

impl BatchHeader {
    /// Reads the header at the start of `buf`, checking only what framing needs: a whole
    /// header, a length that covers it, magic 2. For batches a broker already stored or
    /// served, where Kafka's compaction may have left fewer records than `lastOffsetDelta`
    /// counts; a producer's batch is checked with [`BatchHeader::parse`].
    pub fn read(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < HEADER_LEN {
            return Err(BatchError::Truncated {
                needed: HEADER_LEN,
                available: buf.len(),
            });
        }
        let batch_length = i32::from_be_bytes(array(buf, LENGTH_AT));
        if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(BatchError::BadLength(batch_length));
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC {
            return Err(BatchError::BadMagic(magic));
        }
        Ok(BatchHeader {
            base_offset: i64::from_be_bytes(array(buf, BASE_OFFSET_AT)),
            size: batch_length as u32 + LOG_OVERHEAD as u32,
            partition_leader_epoch: i32::from_be_bytes(array(buf, PARTITION_LEADER_EPOCH_AT)),
            crc: u32::from_be_bytes(array(buf, CRC_AT)),
            attributes: i16::from_be_bytes(array(buf, ATTRIBUTES_AT)),
            last_offset_delta: i32::from_be_bytes(array(buf, LAST_OFFSET_DELTA_AT)),
            base_timestamp: i64::from_be_bytes(array(buf, BASE_TIMESTAMP_AT)),
            max_timestamp: i64::from_be_bytes(array(buf, MAX_TIMESTAMP_AT)),
            producer_id: i64::from_be_bytes(array(buf, PRODUCER_ID_AT)),
            producer_epoch: i16::from_be_bytes(array(buf, PRODUCER_EPOCH_AT)),
            base_sequence: i32::from_be_bytes(array(buf, BASE_SEQUENCE_AT)),
            record_count: i32::from_be_bytes(array(buf, RECORD_COUNT_AT)),
        })
    }

    /// Parses the header at the start of `buf` and checks what the header alone can tell:
    /// length, magic, compression codec and record count (at least one record, offset deltas
    /// 0 to count - 1, and, uncompressed, room for that many records). Does not check the CRC
    /// (see [`crate::validate`]).
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        let header = BatchHeader::read(buf)?;
        let codec = header.attributes & COMPRESSION_MASK;
        if codec > Codec::Zstd as i16 {
            return Err(BatchError::BadCompression(codec as u8));
        }
        let count = header.record_count;
        let records_len = header.size as usize - HEADER_LEN;
        let fits = codec != 0 || (count as usize).saturating_mul(MIN_RECORD_LEN) <= records_len;
        if count < 1 || header.last_offset_delta != count - 1 || !fits {
            return Err(BatchError::BadRecordCount {
                count,
                last_offset_delta: header.last_offset_delta,
                records_len,
            });
        }
        Ok(header)
    }

    /// Offset of the last record in the batch.
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offset right after the batch.
    #[inline]
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// The records' codec; `None` for codes Kafka does not define (which [`BatchHeader::parse`]
    /// refuses).
    #[inline]
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_attributes(self.attributes)
    }

    /// Whether the records are compressed (any codec but none, defined or not).
    #[inline]
    pub fn is_compressed(&self) -> bool {
        self.attributes & COMPRESSION_MASK != 0
    }

    /// Whether a transactional producer wrote the batch (`attributes` bit 4).
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    /// Whether the batch holds a control record (a transaction marker) instead of data
    /// (`attributes` bit 5).
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }

    /// The delete horizon the log cleaner set (KIP-534), if it did: its base timestamp.
    #[inline]
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_FLAG != 0).then_some(self.base_timestamp)
    }

    /// Under LogAppendTime the broker's append time, every record's timestamp (the max
    /// timestamp); `None` when the records carry the producer's.
    #[inline]
    pub fn append_time(&self) -> Option<i64> {
        (self.timestamp_type() == TimestampType::LogAppendTime).then_some(self.max_timestamp)
    }

    /// Whose timestamps the records carry: the producer's or the broker's append time.
    #[inline]
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & LOG_APPEND_TIME_FLAG != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
}
