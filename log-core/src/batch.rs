//! Kafka RecordBatch v2 (magic 2), the unit lograil stores byte for byte.
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
//! Because the CRC starts at `attributes`, the broker can write the assigned base offset into the
//! first 8 bytes without re-checksumming.

use bytes::{Bytes, BytesMut};
pub use kafka_protocol::records::Compression;
use kafka_protocol::records::{
    Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::decompress;
use crate::error::BatchError;

/// Bytes before `batchLength` counts: baseOffset (8) and batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// Size of the v2 batch header, up to and including the record count.
pub const HEADER_LEN: usize = 61;
/// The only magic lograil stores.
pub const MAGIC: i8 = 2;

const LENGTH_AT: usize = 8;
const EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_DELTA_AT: usize = 23;
const BASE_TS_AT: usize = 27;
const MAX_TS_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const COUNT_AT: usize = 57;
/// Smallest possible encoded v2 record: seven one-byte varints
/// (length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount).
const MIN_RECORD_LEN: usize = 7;
const COMPRESSION_MASK: i16 = 0x07;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;

/// The parsed header of one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Whole size of the batch in bytes, `LOG_OVERHEAD + batchLength`.
    pub size: u32,
    pub partition_leader_epoch: i32,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses the header at the start of `buf` and checks what the header alone can tell:
    /// length, magic, compression codec and record count. Does not check the CRC.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < HEADER_LEN {
            return Err(BatchError::Truncated {
                needed: HEADER_LEN,
                available: buf.len(),
            });
        }
        let batch_length = be_i32(buf, LENGTH_AT);
        let min_length = (HEADER_LEN - LOG_OVERHEAD) as i32;
        if batch_length < min_length {
            return Err(BatchError::BadLength(batch_length));
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC {
            return Err(BatchError::BadMagic(magic));
        }
        let header = BatchHeader {
            base_offset: be_i64(buf, 0),
            size: batch_length as u32 + LOG_OVERHEAD as u32,
            partition_leader_epoch: be_i32(buf, EPOCH_AT),
            crc: u32::from_be_bytes(array(buf, CRC_AT)),
            attributes: i16::from_be_bytes(array(buf, ATTRIBUTES_AT)),
            last_offset_delta: be_i32(buf, LAST_DELTA_AT),
            base_timestamp: be_i64(buf, BASE_TS_AT),
            max_timestamp: be_i64(buf, MAX_TS_AT),
            producer_id: be_i64(buf, PRODUCER_ID_AT),
            producer_epoch: i16::from_be_bytes(array(buf, PRODUCER_EPOCH_AT)),
            base_sequence: be_i32(buf, BASE_SEQUENCE_AT),
            record_count: be_i32(buf, COUNT_AT),
        };
        let codec = header.attributes & COMPRESSION_MASK;
        if codec > 4 {
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
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offset right after the batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn is_compressed(&self) -> bool {
        self.attributes & COMPRESSION_MASK != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
}

/// The CRC-32C a batch should carry: over everything from `attributes` to its end.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_AT..])
}

/// Validates the single whole batch at the start of `buf` (header, length against `buf`, CRC,
/// and for an uncompressed batch its records' framing against its record count, walking the
/// record lengths without decoding them) and returns its header. `buf` may hold more bytes after the batch.
pub fn validate(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let size = header.size as usize;
    if buf.len() < size {
        return Err(BatchError::Truncated {
            needed: size,
            available: buf.len(),
        });
    }
    let computed = compute_crc(&buf[..size]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    check_records(&buf[..size], &header)?;
    Ok(header)
}

/// Checks that the uncompressed whole batch `batch` (with `header`) holds exactly the records
/// its header counts, with offset deltas 0, 1, 2, …, by walking the record lengths. The CRC
/// only says the producer's bytes arrived intact, not that its header tells the truth about
/// them: a count short of the records would store two records at one offset. A compressed
/// batch passes (see [`validate_compressed`]).
pub fn check_records(batch: &[u8], header: &BatchHeader) -> Result<(), BatchError> {
    let records = batch
        .get(HEADER_LEN..header.size as usize)
        .unwrap_or_default();
    if header.is_compressed() || records_fit(records, header.record_count) {
        Ok(())
    } else {
        Err(BatchError::BadRecordOffsets {
            count: header.record_count,
        })
    }
}

/// Headers of the whole batches that make up `buf`, checking lengths but not CRCs (a cheap look
/// at producer ids and sequences before [`validate_all`] runs on append).
pub fn parse_all(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut headers = Vec::with_capacity(1);
    let mut at = 0;
    while at < buf.len() {
        let header = BatchHeader::parse(&buf[at..]).map_err(|e| e.at(at))?;
        let size = header.size as usize;
        if at + size > buf.len() {
            let truncated = BatchError::Truncated {
                needed: size,
                available: buf.len() - at,
            };
            return Err(truncated.at(at));
        }
        at += size;
        headers.push(header);
    }
    Ok(headers)
}

/// Validates that `buf` is one or more whole, valid batches and nothing else.
pub fn validate_all(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut headers = Vec::with_capacity(1);
    let mut at = 0;
    while at < buf.len() {
        let header = validate(&buf[at..]).map_err(|e| e.at(at))?;
        at += header.size as usize;
        headers.push(header);
    }
    Ok(headers)
}

/// A record to build a batch from: (key, value, timestamp in ms).
pub type NewRecord<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, i64);

/// Builds one uncompressed v2 batch with `records` at offsets from 0, using `kafka-protocol`'s
/// encoder. Each entry is `(key, value, timestamp in ms)`.
pub fn build(records: &[NewRecord]) -> Bytes {
    build_with(records, Compression::None)
}

/// As [`build`], with a compression codec.
pub fn build_with(records: &[NewRecord], compression: Compression) -> Bytes {
    encode(records, compression, -1, -1, -1)
}

/// As [`build`], for an idempotent producer: its id and epoch, and the sequence number of the
/// first record.
pub fn build_for_producer(
    records: &[NewRecord],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Bytes {
    encode(
        records,
        Compression::None,
        producer_id,
        producer_epoch,
        base_sequence,
    )
}

fn encode(
    records: &[NewRecord],
    compression: Compression,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value, timestamp))| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch while offset - sequence stays constant; its
            // base sequence is the first record's (-1 for a non-idempotent producer).
            sequence: if base_sequence < 0 {
                i as i32 - 1
            } else {
                base_sequence.wrapping_add(i as i32)
            },
            timestamp: *timestamp,
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    encode_records(&records, compression)
}

/// A record with headers, to build a batch from (see [`build_with_headers`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeadedRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub timestamp: i64,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Builds one uncompressed v2 batch of records with headers, offsets from 0.
pub fn build_with_headers(records: &[HeadedRecord]) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // As in `encode`: one batch while offset - sequence stays constant.
            sequence: i as i32 - 1,
            timestamp: r.timestamp,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (k.clone().into(), v.clone()))
                .collect(),
            delete_horizon: false,
        })
        .collect();
    encode_records(&records, Compression::None)
}

fn encode_records(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: MAGIC,
        compression,
    };
    // The encoder only fails on a version other than 0..=2 or a codec compiled out; neither
    // can happen with the constants above.
    if let Err(e) = RecordBatchEncoder::encode(&mut buf, records, &options) {
        unreachable!("encoding a v2 batch failed: {e}");
    }
    buf.freeze()
}

/// One decoded record, as returned by [`decode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

impl DecodedRecord {
    /// The value of the first header named `name`.
    pub fn header(&self, name: &str) -> Option<&Bytes> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_ref())
    }
}

/// Most bytes a batch's records may decompress to in [`decode`] (tools, tests, time lookups).
pub const DECODE_MAX_BYTES: usize = 64 << 20;

/// Decodes every record of the whole batches in `buf` (decompressing where needed, at most
/// [`DECODE_MAX_BYTES`] per batch). For tools, tests and time lookups, never on the fetch path.
pub fn decode(buf: &[u8]) -> Result<Vec<DecodedRecord>, BatchError> {
    decode_bounded(buf, DECODE_MAX_BYTES)
}

/// [`decode`] with each batch's records decompressing to at most `max` bytes.
pub fn decode_bounded(buf: &[u8], max: usize) -> Result<Vec<DecodedRecord>, BatchError> {
    let mut bytes = Bytes::copy_from_slice(buf);
    let mut records = Vec::new();
    while !bytes.is_empty() {
        let refused = std::cell::Cell::new(None);
        let hook = |data: &mut Bytes, compression| {
            decompress::decompress(data, compression, max).map_err(|e| {
                refused.set(Some(e.clone()));
                anyhow::Error::new(e)
            })
        };
        let set = RecordBatchDecoder::decode_with_custom_compression(&mut bytes, Some(hook))
            .map_err(|e| match refused.take() {
                Some(e) => BatchError::Decompress(e),
                None => BatchError::Undecodable(e.to_string()),
            })?;
        records.extend(set.records.into_iter().map(|r| {
            DecodedRecord {
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key,
                value: r.value,
                headers: r
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            }
        }));
    }
    Ok(records)
}

/// Checks the records inside the compressed batches of `buf`, as Kafka's broker does before it
/// accepts them: they decompress (to at most `max` bytes per batch), exactly as many records as
/// the header says fill the decompressed bytes, and their offset deltas run 0, 1, 2, … . An
/// uncompressed batch's records were already checked by [`validate`].
pub fn validate_compressed(
    buf: &[u8],
    headers: &[BatchHeader],
    max: usize,
) -> Result<(), BatchError> {
    let mut at = 0usize;
    for header in headers {
        let size = header.size as usize;
        if header.is_compressed() {
            let compression = match header.attributes & COMPRESSION_MASK {
                1 => Compression::Gzip,
                2 => Compression::Snappy,
                3 => Compression::Lz4,
                _ => Compression::Zstd,
            };
            let records =
                decompress::decompress(&buf[at + HEADER_LEN..at + size], compression, max)
                    .map_err(|e| BatchError::from(e).at(at))?;
            if !records_fit(&records, header.record_count) {
                return Err(BatchError::BadRecordOffsets {
                    count: header.record_count,
                }
                .at(at));
            }
        }
        at += size;
    }
    Ok(())
}

/// Whether `data` holds exactly `count` records (each a varint length, then that many bytes)
/// whose offset deltas are 0, 1, 2, … .
fn records_fit(data: &[u8], count: i32) -> bool {
    let mut rest = data;
    for expected in 0..i64::from(count) {
        let Some((len, body)) = varint(rest) else {
            return false;
        };
        let Some(record) = usize::try_from(len).ok().and_then(|len| body.get(..len)) else {
            return false;
        };
        // attributes (1 byte), timestampDelta (varlong), offsetDelta (varint)
        let delta = record
            .get(1..)
            .and_then(varint)
            .and_then(|(_, after_ts)| varint(after_ts))
            .map(|(delta, _)| delta);
        if delta != Some(expected) {
            return false;
        }
        rest = &body[record.len()..];
    }
    rest.is_empty()
}

/// Whether a record of the uncompressed batch `batch` has a header named `name`, found by
/// walking the records' framing: keys, values and other headers are skipped, not read. `None`
/// when the batch is compressed or its records do not parse (decode it to know).
pub fn has_header(batch: &[u8], name: &[u8]) -> Option<bool> {
    let header = BatchHeader::parse(batch).ok()?;
    if header.is_compressed() {
        return None;
    }
    /// A length-prefixed field (-1: null) skipped; the bytes after it, and the field.
    fn field(buf: &[u8]) -> Option<(&[u8], &[u8])> {
        let (len, rest) = varint(buf)?;
        let len = usize::try_from(len.max(0)).ok()?;
        Some((rest.get(len..)?, rest.get(..len)?))
    }
    let mut rest = batch.get(HEADER_LEN..header.size as usize)?;
    for _ in 0..header.record_count {
        let (len, body) = varint(rest)?;
        let len = usize::try_from(len).ok()?;
        let record = body.get(..len)?;
        rest = &body[len..];
        // attributes (1 byte), timestampDelta, offsetDelta, key, value, header count
        let (_, after) = varint(record.get(1..)?)?;
        let (_, after) = varint(after)?;
        let (after, _key) = field(after)?;
        let (after, _value) = field(after)?;
        let (count, mut after) = varint(after)?;
        for _ in 0..count.max(0) {
            let (next, key) = field(after)?;
            if key == name {
                return Some(true);
            }
            (after, _) = field(next)?;
        }
    }
    Some(false)
}

/// A zigzag varint (as Kafka's records use): its value and the bytes after it.
fn varint(buf: &[u8]) -> Option<(i64, &[u8])> {
    let mut raw = 0u64;
    for (i, byte) in buf.iter().enumerate().take(10) {
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let value = (raw >> 1) as i64 ^ -((raw & 1) as i64);
            return Some((value, &buf[i + 1..]));
        }
    }
    None
}

fn array<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&buf[at..at + N]);
    out
}

fn be_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(array(buf, at))
}

fn be_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(array(buf, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bytes {
        build(&[
            (Some(b"k1"), Some(b"hello"), 1_000),
            (None, Some(b"world"), 1_005),
            (Some(b"k3"), None, 1_002),
        ])
    }

    #[test]
    fn a_header_is_found_by_walking_the_framing() {
        let record = |value: &str, headers: &[(&str, &str)]| HeadedRecord {
            key: Some(Bytes::from_static(b"deadline? no, a key")),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), Some(Bytes::copy_from_slice(v.as_bytes()))))
                .collect(),
            ..HeadedRecord::default()
        };
        let with = build_with_headers(&[
            record("deadline in a value", &[("trace", "deadline")]),
            record("b", &[("a", "1"), ("deadline", "42")]),
        ]);
        assert_eq!(
            BatchHeader::parse(&with).unwrap().record_count,
            2,
            "one batch"
        );
        assert_eq!(has_header(&with, b"deadline"), Some(true));
        let without = build_with_headers(&[record("deadline", &[("deadlines", "x")])]);
        assert_eq!(has_header(&without, b"deadline"), Some(false));
        assert_eq!(has_header(&sample(), b"deadline"), Some(false));
        let zipped = build_with(&[(None, Some(b"v"), 1)], Compression::Gzip);
        assert_eq!(has_header(&zipped, b"deadline"), None);
        assert_eq!(
            has_header(&with[..with.len() - 3], b"deadline"),
            None,
            "truncated"
        );
    }

    #[test]
    fn built_batch_validates_and_decodes() {
        let batch = sample();
        let header = validate(&batch).unwrap();
        assert_eq!(header.size as usize, batch.len());
        assert_eq!(header.record_count, 3);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.base_timestamp, 1_000);
        assert_eq!(header.max_timestamp, 1_005);
        assert_eq!((header.producer_id, header.base_sequence), (-1, -1));
        let records = decode(&batch).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[1].value.as_deref(), Some(&b"world"[..]));
        assert_eq!(records[2].key.as_deref(), Some(&b"k3"[..]));
    }

    #[test]
    fn producer_batches_carry_id_epoch_and_sequence() {
        let batch = build_for_producer(&[(None, Some(b"a"), 1), (None, Some(b"b"), 2)], 77, 3, 10);
        let header = validate(&batch).unwrap();
        assert_eq!(header.record_count, 2);
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (77, 3, 10)
        );
    }

    #[test]
    fn base_offset_is_outside_the_crc() {
        let mut batch = sample().to_vec();
        batch[..8].copy_from_slice(&42i64.to_be_bytes());
        let header = validate(&batch).unwrap();
        assert_eq!(header.base_offset, 42);
        assert_eq!(header.last_offset(), 44);
    }

    #[test]
    fn every_flipped_covered_byte_is_caught() {
        let batch = sample().to_vec();
        for at in (MAGIC_AT..batch.len()).chain(LENGTH_AT..EPOCH_AT) {
            let mut bad = batch.clone();
            bad[at] ^= 0x40;
            assert!(validate(&bad).is_err(), "flip at {at} not detected");
        }
    }

    #[test]
    fn truncated_and_empty_input_is_refused() {
        let batch = sample();
        for cut in [0, 10, HEADER_LEN - 1, HEADER_LEN, batch.len() - 1] {
            assert!(validate(&batch[..cut]).is_err(), "cut at {cut}");
        }
        assert!(matches!(validate_all(&[]), Err(BatchError::Empty)));
    }

    #[test]
    fn several_batches_validate_together() {
        let mut two = sample().to_vec();
        two.extend_from_slice(&sample());
        assert_eq!(validate_all(&two).unwrap().len(), 2);
        two.push(0);
        assert!(validate_all(&two).is_err());
    }

    #[test]
    fn record_count_must_fit_the_length() {
        let mut batch = sample().to_vec();
        batch[COUNT_AT..COUNT_AT + 4].copy_from_slice(&1000i32.to_be_bytes());
        batch[LAST_DELTA_AT..LAST_DELTA_AT + 4].copy_from_slice(&999i32.to_be_bytes());
        let crc = compute_crc(&batch);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate(&batch),
            Err(BatchError::BadRecordCount { count: 1000, .. })
        ));
    }

    /// `batch` with its header saying `count` records (CRC recomputed, as a lying producer
    /// would send it).
    fn claiming(batch: &[u8], count: i32) -> Vec<u8> {
        let mut batch = batch.to_vec();
        batch[COUNT_AT..COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
        batch[LAST_DELTA_AT..LAST_DELTA_AT + 4].copy_from_slice(&(count - 1).to_be_bytes());
        let crc = compute_crc(&batch);
        batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    #[test]
    fn an_uncompressed_count_that_lies_about_the_records_is_refused() {
        let values: Vec<String> = (0..10)
            .map(|i| format!("a value long enough {i}"))
            .collect();
        let records: Vec<NewRecord> = values
            .iter()
            .map(|v| (None, Some(v.as_bytes()), 1))
            .collect();
        let batch = build(&records);
        assert_eq!(validate(&batch).unwrap().record_count, 10);
        for count in [1, 5, 9, 11, 20] {
            let lying = claiming(&batch, count);
            assert!(
                BatchHeader::parse(&lying).is_ok(),
                "the header alone fits {count}"
            );
            assert!(
                matches!(
                    validate(&lying),
                    Err(BatchError::BadRecordOffsets { count: c }) if c == count
                ),
                "count {count}: {:?}",
                validate(&lying)
            );
        }
        // Offset deltas that do not run 0, 1, 2, …: the second record's delta made 5.
        let two = build(&[(None, Some(b"x"), 1), (None, Some(b"y"), 1)]);
        let second = HEADER_LEN + 1 + usize::from(two[HEADER_LEN]) / 2;
        let mut skewed = two.to_vec();
        // record: length, attributes, timestampDelta (0: one byte), offsetDelta
        assert_eq!(skewed[second + 3], 2, "zigzag 1");
        skewed[second + 3] = 10;
        let crc = compute_crc(&skewed);
        skewed[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate(&skewed),
            Err(BatchError::BadRecordOffsets { count: 2 })
        ));
    }

    #[test]
    fn compressed_batches_round_trip() {
        let records: Vec<NewRecord> = (0..100)
            .map(|i| (None, Some(&b"aaaaaaaaaaaaaaaa"[..]), i))
            .collect();
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let batch = build_with(&records, codec);
            let header = validate(&batch).unwrap();
            assert!(header.is_compressed());
            assert_eq!(decode(&batch).unwrap().len(), 100);
        }
    }
}
