//! Batches built and decoded with `kafka-protocol`'s encoder and decoder (for tools, tests and
//! time lookups, never on the append or fetch path), and the check of a compressed batch's
//! records on append, which needs the codecs. The format itself (header layout, parse,
//! validation, the client's batch builder) is the `record-batch` crate.

use bytes::{Bytes, BytesMut};
pub use kafka_protocol::records::Compression;
use kafka_protocol::records::{
    Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use record_batch::{BatchHeader, Codec, HEADER_LEN, MAGIC};

use crate::decompress;
use crate::error::BatchError;

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
    /// `None` is a null key.
    pub key: Option<Bytes>,
    /// `None` is a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Ms since the epoch.
    pub timestamp: i64,
    /// `(name, value)` in order; a `None` value is a null header value.
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Builds one uncompressed v2 batch of records with headers, offsets from 0.
pub fn build_with_headers(records: &[HeadedRecord]) -> Bytes {
    build_with_headers_compressed(records, Compression::None)
}

/// [`build_with_headers`] with the records compressed by `compression`.
pub fn build_with_headers_compressed(records: &[HeadedRecord], compression: Compression) -> Bytes {
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
    encode_records(&records, compression)
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
    /// The record's offset (the batch's base offset plus its delta).
    pub offset: i64,
    /// Ms since the epoch: the producer's, or the append time under LogAppendTime.
    pub timestamp: i64,
    /// `None` is a null key.
    pub key: Option<Bytes>,
    /// `None` is a null value (a tombstone).
    pub value: Option<Bytes>,
    /// `(name, value)` in order; a `None` value is a null header value.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// The batch's producer id (-1 for a producer that is neither idempotent nor
    /// transactional).
    pub producer_id: i64,
    /// In a transactional batch.
    pub transactional: bool,
    /// A control record: a transaction marker (key: version, then 0 abort / 1 commit).
    pub control: bool,
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
        let position = buf.len() - bytes.len();
        let refused = std::cell::Cell::new(None);
        let hook = |data: &mut Bytes, compression| {
            decompress::decompress(data, compression, max).map_err(|e| {
                refused.set(Some(e.clone()));
                anyhow::Error::new(e)
            })
        };
        let set = RecordBatchDecoder::decode_with_custom_compression(&mut bytes, Some(hook))
            .map_err(|e| match refused.take() {
                Some(source) => BatchError::Decompress { position, source },
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
                producer_id: r.producer_id,
                transactional: r.transactional,
                control: r.control,
            }
        }));
    }
    Ok(records)
}

/// Checks the records inside the compressed batches of `buf`, as Kafka's broker does before it
/// accepts them: they decompress (to at most `max` bytes per batch), exactly as many records as
/// the header says fill the decompressed bytes, and their offset deltas run 0, 1, 2, … . An
/// uncompressed batch's records were already checked by [`record_batch::validate`].
pub fn validate_compressed(
    buf: &[u8],
    headers: &[BatchHeader],
    max: usize,
) -> Result<(), BatchError> {
    let mut at = 0usize;
    for header in headers {
        let size = header.size as usize;
        if header.is_compressed() {
            decompressed_records(&buf[at..at + size], header, at, max)?;
        }
        at += size;
    }
    Ok(())
}

/// The records section of compressed `batch` (its header `header`, at byte `position` of what
/// arrived), decompressed to at most `max` bytes and checked as [`validate_compressed`] says.
pub(crate) fn decompressed_records(
    batch: &[u8],
    header: &BatchHeader,
    position: usize,
    max: usize,
) -> Result<Bytes, BatchError> {
    let records = decompress_records(batch, header, position, max)?;
    if !record_batch::records_fit(&records, header.record_count) {
        let error = record_batch::BatchError::BadRecordOffsets {
            count: header.record_count,
        };
        return Err(error.at(position).into());
    }
    Ok(records)
}

/// The records section of compressed `batch` decompressed to at most `max` bytes, not checked
/// (a stored batch the cleaner or a share fetch reads: its records were checked when it was
/// appended). `position` is where the batch is, for the error.
pub fn decompress_records(
    batch: &[u8],
    header: &BatchHeader,
    position: usize,
    max: usize,
) -> Result<Bytes, BatchError> {
    let compression = match header.codec() {
        Some(Codec::Gzip) => Compression::Gzip,
        Some(Codec::Snappy) => Compression::Snappy,
        Some(Codec::Lz4) => Compression::Lz4,
        // zstd, or codec bits no codec has: the zstd decoder refuses what is not zstd.
        _ => Compression::Zstd,
    };
    decompress::decompress(&batch[HEADER_LEN..], compression, max)
        .map_err(|source| BatchError::Decompress { position, source })
}

#[cfg(test)]
mod tests {
    use record_batch::validate;

    use super::*;

    fn sample() -> Bytes {
        build(&[
            (Some(b"k1"), Some(b"hello"), 1_000),
            (None, Some(b"world"), 1_005),
            (Some(b"k3"), None, 1_002),
        ])
    }

    #[test]
    fn built_batch_validates_and_decodes() {
        let batch = sample();
        let header = validate(&batch).unwrap();
        assert_eq!(header.size as usize, batch.len());
        assert_eq!((header.record_count, header.max_timestamp), (3, 1_005));
        assert_eq!((header.producer_id, header.base_sequence), (-1, -1));
        let records = decode(&batch).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(records[1].value.as_deref(), Some(&b"world"[..]));
        assert_eq!(records[2].key.as_deref(), Some(&b"k3"[..]));
        assert_eq!(records[2].offset, 2);
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
    fn headers_are_built_and_decoded() {
        let record = HeadedRecord {
            key: None,
            value: Some(Bytes::from_static(b"v")),
            timestamp: 7,
            headers: vec![
                ("a".into(), Some(Bytes::from_static(b"1"))),
                ("b".into(), None),
            ],
        };
        let batch = build_with_headers(&[record.clone(), record]);
        assert_eq!(validate(&batch).unwrap().record_count, 2, "one batch");
        assert_eq!(record_batch::has_header(&batch, b"b"), Some(true));
        let decoded = decode(&batch).unwrap();
        assert_eq!(decoded[1].header("a").map(|v| &v[..]), Some(&b"1"[..]));
        assert_eq!(decoded[1].header("b"), None, "a null value");
    }

    #[test]
    fn compressed_batches_round_trip_and_are_checked_decompressed() {
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
            let two = [&sample()[..], &batch[..]].concat();
            let headers = record_batch::validate_all(&two).unwrap();
            assert_eq!(validate_compressed(&two, &headers, 1 << 20), Ok(()));
            assert!(matches!(
                validate_compressed(&two, &headers, 100),
                Err(BatchError::Decompress { position, .. }) if position == sample().len()
            ));
            assert!(matches!(
                decode_bounded(&two, 100),
                Err(BatchError::Decompress { position, .. }) if position == sample().len()
            ));
        }
    }
}
