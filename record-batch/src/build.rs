//! Writing a batch: a header placeholder, the records one by one as they come, then the header
//! stamped over the placeholder with its CRC. Compression is the caller's: it compresses the
//! bytes after [`HEADER_LEN`] between the last record and [`finish`] (this crate has no codec).
//! A transaction marker is such a batch too: [`control_batch`].
//!
//! ```
//! use bytes::BytesMut;
//! use record_batch::build::{self, Record, Stamp};
//! use record_batch::{validate, Codec};
//!
//! let mut buf = BytesMut::new();
//! build::begin(&mut buf, 64);
//! for (i, value) in [&b"a"[..], b"bc"].into_iter().enumerate() {
//!     build::put_record(
//!         &mut buf,
//!         Record {
//!             offset_delta: i as i32,
//!             timestamp_delta: 0,
//!             key: None,
//!             value: Some(value),
//!             headers: std::iter::empty(),
//!         },
//!     )?;
//! }
//! build::finish(&mut buf, &Stamp::new(Codec::None, 2, 1_700_000_000_000))?;
//! assert_eq!(validate(&buf)?.record_count, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use bytes::{BufMut, BytesMut};

use crate::error::BuildError;
use crate::layout::*;
use crate::marker::{ControlType, CONTROL_VERSION};
use crate::validate::compute_crc;
use crate::varint;

/// Clears `buf` and starts a batch in it: a zeroed header for [`finish`] to fill in, and room
/// reserved for `records_capacity` bytes of records.
pub fn begin(buf: &mut BytesMut, records_capacity: usize) {
    buf.clear();
    buf.reserve(HEADER_LEN + records_capacity);
    buf.put_bytes(0, HEADER_LEN);
}

/// One record to write. Its timestamp and offset are deltas from the batch's base timestamp
/// and base offset.
#[derive(Clone, Debug)]
pub struct Record<'a, H> {
    /// The record's offset minus the batch's base offset (its index in the batch).
    pub offset_delta: i32,
    /// The record's timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// `None` is a null key (not the same as an empty one).
    pub key: Option<&'a [u8]>,
    /// `None` is a null value (a tombstone in a compacted topic).
    pub value: Option<&'a [u8]>,
    /// `(name, value)` pairs, walked twice (lengths first, then bytes).
    pub headers: H,
}

/// A length on the wire (-1 for null).
#[inline]
fn wire_len(len: Option<usize>) -> Result<i64, BuildError> {
    match len {
        None => Ok(-1),
        Some(n) => i32::try_from(n)
            .map(i64::from)
            .map_err(|_| BuildError::FieldTooLarge(n)),
    }
}

/// Bytes of a length-prefixed field.
#[inline]
fn field_len(data: Option<&[u8]>) -> Result<usize, BuildError> {
    let len = data.map(<[u8]>::len);
    Ok(varint::len(wire_len(len)?) + len.unwrap_or(0))
}

#[inline]
fn put_field<B: BufMut + ?Sized>(buf: &mut B, data: Option<&[u8]>) -> Result<(), BuildError> {
    varint::put(buf, wire_len(data.map(<[u8]>::len))?);
    if let Some(d) = data {
        buf.put_slice(d);
    }
    Ok(())
}

/// Bytes of `record` after its length varint.
#[inline]
fn body_len<'a, H>(record: &Record<'a, H>) -> Result<i32, BuildError>
where
    H: Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + Clone,
{
    let mut len = 1 // attributes
        + varint::len(record.timestamp_delta)
        + varint::len(i64::from(record.offset_delta))
        + field_len(record.key)?
        + field_len(record.value)?;
    let mut headers = 0i64;
    for (name, value) in record.headers.clone() {
        headers += 1;
        len += field_len(Some(name))? + field_len(value)?;
    }
    len += varint::len(headers);
    i32::try_from(len).map_err(|_| BuildError::RecordTooLarge(len))
}

/// Appends `record` to the records of the batch in `buf`, length-prefixed.
#[inline]
pub fn put_record<'a, B, H>(buf: &mut B, record: Record<'a, H>) -> Result<(), BuildError>
where
    B: BufMut + ?Sized,
    H: Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + Clone,
{
    let body = body_len(&record)?;
    varint::put(buf, i64::from(body));
    buf.put_i8(0); // attributes
    varint::put(buf, record.timestamp_delta);
    varint::put(buf, i64::from(record.offset_delta));
    put_field(buf, record.key)?;
    put_field(buf, record.value)?;
    let count = record.headers.clone().count();
    varint::put(buf, i64::try_from(count).unwrap_or(i64::MAX));
    for (name, value) in record.headers {
        put_field(buf, Some(name))?;
        put_field(buf, value)?;
    }
    Ok(())
}

/// What [`finish`] writes into a batch's header besides its length and CRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The codec the records after the header are compressed with.
    pub codec: Codec,
    /// Records in the batch (at least 1); `lastOffsetDelta` is one less.
    pub record_count: i32,
    /// The timestamp the records' timestamp deltas are from (usually the first record's).
    pub base_timestamp: i64,
    /// The largest record timestamp.
    pub max_timestamp: i64,
    /// -1, -1, -1 for a producer without idempotence.
    pub producer_id: i64,
    /// The producer's epoch (-1 without idempotence).
    pub producer_epoch: i16,
    /// The first record's sequence number (-1 without idempotence).
    pub base_sequence: i32,
}

impl Stamp {
    /// A batch of `record_count` records all stamped `timestamp`, from no idempotent producer.
    pub fn new(codec: Codec, record_count: i32, timestamp: i64) -> Stamp {
        Stamp {
            codec,
            record_count,
            base_timestamp: timestamp,
            max_timestamp: timestamp,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }
}

/// Fills in the header of the whole batch `batch` (the placeholder [`begin`] wrote, then the
/// records): base offset 0 (the broker assigns it), the length, partition leader epoch -1,
/// magic 2, attributes (the codec, CreateTime, not transactional), `stamp`, and last the CRC.
pub fn finish(batch: &mut [u8], stamp: &Stamp) -> Result<(), BuildError> {
    if batch.len() < HEADER_LEN {
        return Err(BuildError::NoHeader(batch.len()));
    }
    if stamp.record_count < 1 {
        return Err(BuildError::Empty);
    }
    let length = i32::try_from(batch.len() - LOG_OVERHEAD)
        .map_err(|_| BuildError::BatchTooLarge(batch.len()))?;
    let mut header = &mut batch[..HEADER_LEN];
    header.put_i64(0);
    header.put_i32(length);
    header.put_i32(-1);
    header.put_i8(MAGIC);
    header.put_u32(0); // the CRC, below
    header.put_i16(stamp.codec as i16);
    header.put_i32(stamp.record_count - 1);
    header.put_i64(stamp.base_timestamp);
    header.put_i64(stamp.max_timestamp);
    header.put_i64(stamp.producer_id);
    header.put_i16(stamp.producer_epoch);
    header.put_i32(stamp.base_sequence);
    header.put_i32(stamp.record_count);
    put_crc(batch);
    Ok(())
}

/// Rewrites the producer id, epoch and base sequence of the whole batch `batch`, and its CRC
/// (an idempotent producer's batch sent again under a new epoch).
pub fn restamp(
    batch: &mut [u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Result<(), BuildError> {
    if batch.len() < HEADER_LEN {
        return Err(BuildError::NoHeader(batch.len()));
    }
    let mut put = |at: usize, value: &[u8]| batch[at..at + value.len()].copy_from_slice(value);
    put(PRODUCER_ID_AT, &producer_id.to_be_bytes());
    put(PRODUCER_EPOCH_AT, &producer_epoch.to_be_bytes());
    put(BASE_SEQUENCE_AT, &base_sequence.to_be_bytes());
    put_crc(batch);
    Ok(())
}

/// Marks the whole batch `batch` as part of a transaction (the transactional attribute bit),
/// then its CRC: what a transactional producer sends.
pub fn set_transactional(batch: &mut [u8]) -> Result<(), BuildError> {
    if batch.len() < HEADER_LEN {
        return Err(BuildError::NoHeader(batch.len()));
    }
    let attributes = i16_at(batch, ATTRIBUTES_AT).unwrap_or(0) | TRANSACTIONAL_FLAG;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    put_crc(batch);
    Ok(())
}

fn put_crc(batch: &mut [u8]) {
    let crc = compute_crc(batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Sets the timestamp type bit of `attributes` and the max timestamp of the whole batch
/// `batch`, then its CRC: what a broker does to a batch of a `message.timestamp.type=
/// LogAppendTime` topic (the append time as max timestamp, which consumers take as every
/// record's timestamp), or to clear a producer's LogAppendTime bit on a CreateTime topic.
pub fn set_max_timestamp(
    batch: &mut [u8],
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> Result<(), BuildError> {
    if batch.len() < HEADER_LEN {
        return Err(BuildError::NoHeader(batch.len()));
    }
    let attributes = i16_at(batch, ATTRIBUTES_AT).unwrap_or(0);
    let attributes = match timestamp_type {
        TimestampType::LogAppendTime => attributes | LOG_APPEND_TIME_FLAG,
        TimestampType::CreateTime => attributes & !LOG_APPEND_TIME_FLAG,
    };
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    put_crc(batch);
    Ok(())
}

/// Sets the record count of the whole batch `batch` (the broker's log cleaner keeps some of a
/// batch's records; its base offset and last offset delta stay), without its CRC: a
/// [`rewrap`] follows.
pub fn set_record_count(batch: &mut [u8], record_count: i32) -> Result<(), BuildError> {
    if batch.len() < HEADER_LEN {
        return Err(BuildError::NoHeader(batch.len()));
    }
    batch[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&record_count.to_be_bytes());
    Ok(())
}

/// Marks the whole batch `batch` with a delete horizon (KIP-534): the flag in `attributes`,
/// `horizon` as its base timestamp (the records' timestamp deltas must be relative to it),
/// without its CRC: a [`rewrap`] follows.
pub fn set_delete_horizon(batch: &mut [u8], horizon: i64) -> Result<(), BuildError> {
    if batch.len() < HEADER_LEN {
        return Err(BuildError::NoHeader(batch.len()));
    }
    let attributes = i16_at(batch, ATTRIBUTES_AT).unwrap_or(0) | DELETE_HORIZON_FLAG;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&horizon.to_be_bytes());
    Ok(())
}

/// Finishes a batch a broker rewrote: `batch` holds another batch's header (its first
/// [`HEADER_LEN`] bytes, copied) followed by that batch's records compressed anew with
/// `codec` (the records inside are the same bytes whatever their codec). Sets the length, the
/// codec, then [`set_max_timestamp`] with `timestamp_type` and `max_timestamp`; the base
/// offset, epochs, producer id, base sequence, count and offsets stay the copied header's.
/// What a broker does for a topic's `compression.type`.
pub fn rewrap(
    batch: &mut [u8],
    codec: Codec,
    timestamp_type: TimestampType,
    max_timestamp: i64,
) -> Result<(), BuildError> {
    if batch.len() < HEADER_LEN {
        return Err(BuildError::NoHeader(batch.len()));
    }
    let length = i32::try_from(batch.len() - LOG_OVERHEAD)
        .map_err(|_| BuildError::BatchTooLarge(batch.len()))?;
    batch[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
    let attributes = i16_at(batch, ATTRIBUTES_AT).unwrap_or(0);
    let attributes = (attributes & !COMPRESSION_MASK) | codec as i16;
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    set_max_timestamp(batch, timestamp_type, max_timestamp)
}

/// A RecordBatch v2 holding one transaction marker for `producer_id` at `producer_epoch`,
/// written by the coordinator of `coordinator_epoch`, stamped `timestamp_ms`; base offset 0
/// (the log assigns it), base sequence -1 (markers carry no sequence).
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    kind: ControlType,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.put_i16(CONTROL_VERSION);
    key.put_i16(kind as i16);
    let mut value = Vec::with_capacity(6);
    value.put_i16(CONTROL_VERSION);
    value.put_i32(coordinator_epoch);
    let mut buf = BytesMut::new();
    begin(&mut buf, 32);
    let record = Record {
        offset_delta: 0,
        timestamp_delta: 0,
        key: Some(&key[..]),
        value: Some(&value[..]),
        headers: std::iter::empty(),
    };
    // A record of ten bytes of key and value always fits: neither call can fail.
    let built = put_record(&mut buf, record).and_then(|()| {
        finish(
            &mut buf,
            &Stamp {
                producer_id,
                producer_epoch,
                base_sequence: -1,
                ..Stamp::new(Codec::None, 1, timestamp_ms)
            },
        )
    });
    debug_assert!(built.is_ok(), "{built:?}");
    let attributes = TRANSACTIONAL_FLAG | CONTROL_FLAG;
    buf[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&buf);
    buf[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    buf.to_vec()
}
