//! Where each field of a RecordBatch v2 header is, and what the bits of `attributes` mean.
//!
//! Layout of the 61-byte header (all integers big-endian):
//!
//! | at | field | covered by CRC |
//! |---|---|---|
//! | 0 | baseOffset i64 | no |
//! | 8 | batchLength i32 (bytes after this field) | no |
//! | 12 | partitionLeaderEpoch i32 | no |
//! | 16 | magic i8 | no |
//! | 17 | crc u32 (CRC-32C of bytes 21..end) | — |
//! | 21 | attributes i16 | yes |
//! | 23 | lastOffsetDelta i32 | yes |
//! | 27 | baseTimestamp i64, 35 maxTimestamp i64 | yes |
//! | 43 | producerId i64, 51 producerEpoch i16, 53 baseSequence i32 | yes |
//! | 57 | records count i32, then the records | yes |
//!
//! Because the CRC starts at `attributes`, a broker can write the assigned base offset into the
//! first 8 bytes (and a leader its epoch) without re-checksumming.

/// Bytes before what `batchLength` counts: baseOffset (8) and batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// Size of the v2 batch header, up to and including the record count.
pub const HEADER_LEN: usize = 61;
/// The only magic this crate reads or writes.
pub const MAGIC: i8 = 2;

// Byte offsets of the header's fields, as in the table above.

/// `baseOffset`, i64: the first record's offset (0 from a producer; the broker assigns it).
pub const BASE_OFFSET_AT: usize = 0;
/// `batchLength`, i32: the batch's bytes after this field.
pub const LENGTH_AT: usize = 8;
/// `partitionLeaderEpoch`, i32: the leader's epoch when it appended the batch (-1 unset).
pub const PARTITION_LEADER_EPOCH_AT: usize = 12;
/// `magic`, i8: the format version, [`MAGIC`].
pub const MAGIC_AT: usize = 16;
/// `crc`, u32: CRC-32C of the bytes from [`ATTRIBUTES_AT`] to the end of the batch.
pub const CRC_AT: usize = 17;
/// Where the bytes the CRC covers start.
pub const ATTRIBUTES_AT: usize = 21;
/// `lastOffsetDelta`, i32: the last record's offset minus the base offset.
pub const LAST_OFFSET_DELTA_AT: usize = 23;
/// `baseTimestamp`, i64: the first record's timestamp, or the delete horizon
/// ([`DELETE_HORIZON_FLAG`]); record timestamps are deltas from it.
pub const BASE_TIMESTAMP_AT: usize = 27;
/// `maxTimestamp`, i64: the largest record timestamp, or the append time under LogAppendTime.
pub const MAX_TIMESTAMP_AT: usize = 35;
/// `producerId`, i64: -1 for a producer without idempotence.
pub const PRODUCER_ID_AT: usize = 43;
/// `producerEpoch`, i16.
pub const PRODUCER_EPOCH_AT: usize = 51;
/// `baseSequence`, i32: the first record's sequence number for its producer and partition.
pub const BASE_SEQUENCE_AT: usize = 53;
/// `recordCount`, i32; the records follow it.
pub const RECORD_COUNT_AT: usize = 57;

/// Smallest possible encoded v2 record: seven one-byte varints
/// (length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount).
pub const MIN_RECORD_LEN: usize = 7;

/// `attributes` bits 0-2: the compression codec of the records.
pub const COMPRESSION_MASK: i16 = 0x07;
/// `attributes` bit 3: the timestamps are the broker's append time (else the producer's).
pub const LOG_APPEND_TIME_FLAG: i16 = 0x08;
/// `attributes` bit 4: the batch belongs to a transaction.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
/// `attributes` bit 5: a control batch (transaction markers), not user records.
pub const CONTROL_FLAG: i16 = 0x20;
/// `attributes` bit 6 (KIP-534): the base timestamp is the batch's delete horizon, when the
/// log cleaner may remove its tombstones; record timestamps stay base + delta.
pub const DELETE_HORIZON_FLAG: i16 = 0x40;

/// The compression codec of a batch's records, as `attributes` bits 0-2 name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Records as they are (`compression.type=none`).
    None = 0,
    /// `compression.type=gzip`.
    Gzip = 1,
    /// `compression.type=snappy`.
    Snappy = 2,
    /// `compression.type=lz4` (LZ4 frames).
    Lz4 = 3,
    /// `compression.type=zstd` (Kafka 2.1 and later).
    Zstd = 4,
}

impl Codec {
    /// The codec named by `attributes`, `None` for the codes 5-7 Kafka does not define.
    #[inline]
    pub fn from_attributes(attributes: i16) -> Option<Codec> {
        match attributes & COMPRESSION_MASK {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// What a batch's timestamps are, as `attributes` bit 3 says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker when it appended the batch.
    LogAppendTime,
}

/// The big-endian `i16` at `at`, if `buf` holds it.
#[inline]
pub fn i16_at(buf: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

/// The big-endian `i32` at `at`, if `buf` holds it.
#[inline]
pub fn i32_at(buf: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

/// The big-endian `i64` at `at`, if `buf` holds it.
#[inline]
pub fn i64_at(buf: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

/// The `N` bytes at `at`; `buf` must hold them (checked by the caller, once for a whole header).
#[inline]
pub(crate) fn array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_follow_each_other() {
        let fields = [
            (BASE_OFFSET_AT, 8),
            (LENGTH_AT, 4),
            (PARTITION_LEADER_EPOCH_AT, 4),
            (MAGIC_AT, 1),
            (CRC_AT, 4),
            (ATTRIBUTES_AT, 2),
            (LAST_OFFSET_DELTA_AT, 4),
            (BASE_TIMESTAMP_AT, 8),
            (MAX_TIMESTAMP_AT, 8),
            (PRODUCER_ID_AT, 8),
            (PRODUCER_EPOCH_AT, 2),
            (BASE_SEQUENCE_AT, 4),
            (RECORD_COUNT_AT, 4),
        ];
        let mut at = 0;
        for (start, len) in fields {
            assert_eq!(start, at);
            at += len;
        }
        assert_eq!(at, HEADER_LEN);
        assert_eq!(LENGTH_AT + 4, LOG_OVERHEAD);
    }

    #[test]
    fn codecs_and_readers() {
        for codec in [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ] {
            let attributes = codec as i16 | TRANSACTIONAL_FLAG | LOG_APPEND_TIME_FLAG;
            assert_eq!(Codec::from_attributes(attributes), Some(codec));
        }
        assert_eq!(Codec::from_attributes(5), None);
        let buf = [0u8, 1, 0, 0, 0, 2];
        assert_eq!(i16_at(&buf, 0), Some(1));
        assert_eq!(i32_at(&buf, 2), Some(2));
        assert_eq!(i32_at(&buf, 3), None);
        assert_eq!(i64_at(&buf, 0), None);
    }
}
