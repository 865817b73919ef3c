//! Producer identity and the batch bytes it is stamped into.
//!
//! An idempotent producer gets a producer id and epoch from InitProducerId; each partition's
//! batches carry consecutive sequence numbers, assigned when a batch is first sent and kept on
//! every retry, so the broker writes a batch once however often it arrives. When a batch's fate
//! becomes unknown for good (it failed, or expired after it was sent), the epoch is bumped
//! (KIP-360: InitProducerId with the current id and epoch) and sequences start again from 0;
//! batches still waiting are re-stamped, never re-encoded.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as Codec, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::accumulator::{Batch, Encoded};
use crate::config::Compression;
use crate::util::text;

/// Producer id and epoch (absent without idempotence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    pub id: i64,
    pub epoch: i16,
}

/// Byte positions in a RecordBatch v2 header.
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const HEADER_LEN: usize = 61;

fn codec(c: Compression) -> Codec {
    match c {
        Compression::None => Codec::None,
        Compression::Gzip => Codec::Gzip,
        Compression::Snappy => Codec::Snappy,
        Compression::Lz4 => Codec::Lz4,
        Compression::Zstd => Codec::Zstd,
    }
}

/// Encodes the batch's records as one RecordBatch v2 (moving keys and values out of them).
pub(super) fn encode(
    batch: &mut Batch,
    identity: Option<Identity>,
    base_sequence: i32,
    compression: Compression,
) -> Result<(), String> {
    let (producer_id, producer_epoch) = identity.map_or((-1, -1), |i| (i.id, i.epoch));
    // Without idempotence the base sequence is -1; the encoder derives it from the first
    // record's sequence, so records count up from it either way.
    let base = if identity.is_some() {
        base_sequence
    } else {
        -1
    };
    let mut records = Vec::with_capacity(batch.records.len());
    for (i, r) in (0i32..).zip(batch.records.iter_mut()) {
        let mut record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            // Only the base sequence is on the wire; the encoder checks that records count up.
            sequence: base.wrapping_add(i),
            timestamp: r.timestamp,
            key: r.key.take(),
            value: r.value.take(),
            headers: Default::default(),
        };
        for (name, value) in std::mem::take(&mut r.headers) {
            record.headers.insert(text(&name), value);
        }
        records.push(record);
    }
    let capacity = batch.bytes + HEADER_LEN;
    let mut buf = BytesMut::with_capacity(capacity);
    let options = RecordEncodeOptions {
        version: 2,
        compression: codec(compression),
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).map_err(|e| e.to_string())?;
    batch.encoded = Some(Encoded {
        bytes: buf.freeze(),
        producer_id,
        producer_epoch,
        base_sequence: if identity.is_some() { base } else { -1 },
    });
    Ok(())
}

/// Sequence numbers wrap from `i32::MAX` to 0, as Kafka's do.
pub(super) fn wrap_sequence(base: i32, delta: i32) -> i32 {
    let sum = i64::from(base) + i64::from(delta);
    i32::try_from(sum % (i64::from(i32::MAX) + 1)).unwrap_or(0)
}

/// The same batch under a new producer identity and base sequence (the CRC recomputed).
pub(super) fn restamp(encoded: &Encoded, identity: Identity, base_sequence: i32) -> Encoded {
    let mut bytes = BytesMut::from(&encoded.bytes[..]);
    if bytes.len() >= HEADER_LEN {
        let mut put = |at: usize, value: &[u8]| bytes[at..at + value.len()].copy_from_slice(value);
        put(PRODUCER_ID, &identity.id.to_be_bytes());
        put(PRODUCER_EPOCH, &identity.epoch.to_be_bytes());
        put(BASE_SEQUENCE, &base_sequence.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[ATTRIBUTES..]);
        let mut crc_field = &mut bytes[CRC..CRC + 4];
        crc_field.put_u32(crc);
    }
    Encoded {
        bytes: Bytes::from(bytes),
        producer_id: identity.id,
        producer_epoch: identity.epoch,
        base_sequence,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use bytes::Bytes;
    use kafka_protocol::records::RecordBatchDecoder;
    use tokio::sync::oneshot;

    use super::super::accumulator::PendingRecord;
    use super::*;

    fn batch(n: usize) -> Batch {
        Batch {
            topic: Arc::from("t"),
            partition: 0,
            records: (0..n)
                .map(|i| PendingRecord {
                    key: Some(Bytes::from(format!("k{i}"))),
                    value: Some(Bytes::from(format!("v{i}"))),
                    headers: vec![("h".into(), Some(Bytes::from_static(b"x")))],
                    timestamp: 1_000 + i as i64,
                    size: 30,
                    reply: super::super::accumulator::Reply::Future(oneshot::channel().0),
                })
                .collect(),
            bytes: 30 * n,
            created: Instant::now(),
            flush_generation: 0,
            attempts: 0,
            retry_at: None,
            encoded: None,
        }
    }

    #[test]
    fn encodes_one_batch_with_sequences_and_restamps_it() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut b = batch(5);
            encode(&mut b, Some(Identity { id: 7, epoch: 2 }), 40, compression).unwrap();
            let encoded = b.encoded.clone().unwrap();
            let mut bytes = encoded.bytes.clone();
            let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
            assert_eq!(sets.len(), 1, "{compression:?}: one batch");
            let records = &sets[0].records;
            assert_eq!(records.len(), 5);
            assert_eq!(records[4].value.as_deref(), Some(&b"v4"[..]));
            assert_eq!(records[0].producer_id, 7);
            assert_eq!(records[0].sequence, 40);
            assert_eq!(records[2].timestamp, 1_002);
            assert_eq!(records[1].headers.len(), 1);

            let again = restamp(&encoded, Identity { id: 7, epoch: 3 }, 0);
            let mut bytes = again.bytes.clone();
            // The decoder checks the CRC.
            let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
            assert_eq!(sets[0].records[0].producer_epoch, 3);
            assert_eq!(sets[0].records[0].sequence, 0);
            assert_eq!(sets[0].records[3].key.as_deref(), Some(&b"k3"[..]));
        }
    }

    #[test]
    fn without_idempotence_the_batch_has_no_producer() {
        let mut b = batch(3);
        encode(&mut b, None, 0, Compression::None).unwrap();
        let mut bytes = b.encoded.unwrap().bytes;
        let sets = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0].records[0].producer_id, -1);
        assert_eq!(sets[0].records[0].sequence, -1);
    }

    #[test]
    fn sequences_wrap_to_zero() {
        assert_eq!(wrap_sequence(i32::MAX, 1), 0);
        assert_eq!(wrap_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(wrap_sequence(5, 2), 7);
    }
}
