//! Only the wanted records of fetched batches, decoded. A share fetch hands over whole batches
//! of which the consumer acquired some records; with fair turns often a few of each batch
//! (measured: 2-8 times as many records fetched as acquired). An uncompressed batch is walked
//! in place ([`record_batch::records`], after its CRC and framing are checked) and only its
//! wanted records are built, their keys and values slices of the fetched bytes; any other batch
//! is decoded whole ([`decode_next`]) and filtered. Both give what [`decode_next`] gives: a
//! header name given twice appears once, in its first place, with its last value.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use record_batch::records::{self, field};
use record_batch::{varint, BatchHeader, HEADER_LEN};

use super::decode::{batch_frame, decode_next, frame, Outcome};
use super::record::{ConsumerRecord, TimestampType};

/// The records of the whole batches of `bytes` whose offsets lie in `ranges` (inclusive
/// `(first, last)` pairs, sorted by first offset), control batches skipped; a batch failing
/// its checks is an error naming its offset.
pub(crate) fn decode_wanted(
    topic: &Arc<str>,
    partition: i32,
    bytes: Bytes,
    ranges: &[(i64, i64)],
) -> Result<Vec<ConsumerRecord>, (i64, String)> {
    let mut batches = match frame(0, bytes, -1) {
        Outcome::Records { batches, .. } => batches,
        Outcome::Corrupt { offset, reason } => return Err((offset, reason)),
        Outcome::Error(code) => return Err((-1, code.to_string())),
    };
    let mut wanted = Wanted { ranges, at: 0 };
    let mut out = Vec::new();
    while let Some(framed) = batch_frame(&batches) {
        let header = framed?;
        if header.is_control() || !wanted.overlaps(header.base_offset, header.last_offset()) {
            let _ = batches.split_to(header.size as usize);
            continue;
        }
        if header.is_compressed() || header.delete_horizon().is_some() {
            let mut decoded = VecDeque::new();
            decode_next(topic, partition, 0, &mut batches, &mut decoded)?;
            out.extend(decoded.into_iter().filter(|r| wanted.contains(r.offset)));
            continue;
        }
        let batch = batches.split_to(header.size as usize);
        walk(topic, partition, &header, &batch, &mut wanted, &mut out)?;
    }
    Ok(out)
}

/// Builds the wanted records of the uncompressed batch `batch` into `out`.
fn walk(
    topic: &Arc<str>,
    partition: i32,
    header: &BatchHeader,
    batch: &Bytes,
    wanted: &mut Wanted<'_>,
    out: &mut Vec<ConsumerRecord>,
) -> Result<(), (i64, String)> {
    let base = header.base_offset;
    let broken = |reason: &str| (base, reason.to_string());
    record_batch::validate_stored(batch).map_err(|e| (base, e.to_string()))?;
    let append_time = header.append_time();
    let timestamp_type = match append_time {
        Some(_) => TimestampType::LogAppendTime,
        None => TimestampType::CreateTime,
    };
    for record in records::records(&batch[HEADER_LEN..]) {
        let record = record.ok_or_else(|| broken("a record's framing is broken"))?;
        let offset = base.wrapping_add(record.offset_delta);
        if !wanted.contains(offset) {
            continue;
        }
        let (key, rest) = field(record.rest).ok_or_else(|| broken("a record's key"))?;
        let (value, rest) = field(rest).ok_or_else(|| broken("a record's value"))?;
        let headers = headers(rest, batch).ok_or_else(|| broken("a record's headers"))?;
        out.push(ConsumerRecord {
            topic: topic.clone(),
            partition,
            offset,
            timestamp: append_time
                .unwrap_or(header.base_timestamp.wrapping_add(record.timestamp_delta)),
            timestamp_type,
            key: key.map(|k| batch.slice_ref(k)),
            value: value.map(|v| batch.slice_ref(v)),
            headers,
        });
    }
    Ok(())
}

/// A record's headers (count, then name and value of each); a name given twice keeps its
/// first place and takes its last value. `None` where they do not parse.
fn headers(buf: &[u8], batch: &Bytes) -> Option<Vec<(String, Option<Bytes>)>> {
    let (count, mut rest) = varint::read(buf)?;
    let mut out: Vec<(String, Option<Bytes>)> = Vec::new();
    for _ in 0..count.max(0) {
        let (name, after) = field(rest)?;
        let (value, after) = field(after)?;
        rest = after;
        let name = std::str::from_utf8(name?).ok()?;
        let value = value.map(|v| batch.slice_ref(v));
        match out.iter_mut().find(|(n, _)| n == name) {
            Some(kept) => kept.1 = value,
            None => out.push((name.to_string(), value)),
        }
    }
    Some(out)
}

/// The wanted offsets, asked in rising order: a cursor over the sorted ranges.
struct Wanted<'a> {
    ranges: &'a [(i64, i64)],
    at: usize,
}

impl Wanted<'_> {
    /// Whether `offset` (no lower than any asked before) is wanted.
    fn contains(&mut self, offset: i64) -> bool {
        self.overlaps(offset, offset)
    }

    /// Whether any offset of `first..=last` is wanted (`first` no lower than any asked before).
    fn overlaps(&mut self, first: i64, last: i64) -> bool {
        while self.ranges.get(self.at).is_some_and(|r| r.1 < first) {
            self.at += 1;
        }
        self.ranges.get(self.at).is_some_and(|r| r.0 <= last)
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType as Wire,
    };
    use record_batch::build::{self, Stamp};
    use record_batch::Codec;

    use super::*;

    type Header<'a> = (&'a [u8], Option<&'a [u8]>);
    /// A record to write: key, value, headers.
    type Raw<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, &'a [Header<'a>]);

    /// An uncompressed batch at `base` of records (key, value, headers), written by
    /// record-batch's builder (which, unlike kafka-protocol's, can repeat a header name).
    fn raw(base: i64, records: &[Raw], append: bool) -> Bytes {
        let mut buf = BytesMut::new();
        build::begin(&mut buf, 256);
        for (i, (key, value, headers)) in records.iter().enumerate() {
            let record = build::Record {
                offset_delta: i as i32,
                timestamp_delta: 10 * i as i64,
                key: *key,
                value: *value,
                headers: headers.iter().copied(),
            };
            build::put_record(&mut buf, record).unwrap();
        }
        let stamp = Stamp::new(Codec::None, records.len() as i32, 5_000);
        build::finish(&mut buf, &stamp).unwrap();
        if append {
            build::set_max_timestamp(&mut buf, record_batch::TimestampType::LogAppendTime, 9_999)
                .unwrap();
        }
        // The base offset lies outside the CRC.
        buf[..8].copy_from_slice(&base.to_be_bytes());
        buf.freeze()
    }

    /// A gzip batch of `n` records at `base`, by kafka-protocol's encoder.
    fn gzip(base: i64, n: i64) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: Wire::Creation,
                offset: base + i,
                sequence: -1,
                timestamp: 2_000 + i,
                key: Some(Bytes::from(format!("k{}", base + i))),
                value: (i % 2 == 0).then(|| Bytes::from(format!("v{}", base + i))),
                headers: [("h".into(), Some(Bytes::from_static(b"x")))]
                    .into_iter()
                    .collect(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::Gzip,
        };
        RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
        buf.freeze()
    }

    /// Every record of `bytes` decoded whole, the way `recv` decodes them.
    fn reference(topic: &Arc<str>, bytes: &Bytes) -> Vec<ConsumerRecord> {
        let Outcome::Records { mut batches, .. } = frame(0, bytes.clone(), -1) else {
            panic!("unframed");
        };
        let mut out = VecDeque::new();
        while !batches.is_empty() {
            decode_next(topic, 0, 0, &mut batches, &mut out).unwrap();
        }
        out.into()
    }

    fn fetched() -> Bytes {
        let dup: &[Header] = &[
            (b"tenant", Some(b"acme")),
            (b"trace", None),
            (b"tenant", Some(b"globex")),
            (b"empty", Some(b"")),
        ];
        let mut all = BytesMut::new();
        all.extend_from_slice(&raw(
            0,
            &[
                (Some(b"a"), Some(b"1"), dup),
                (None, Some(b""), &[]),
                (Some(b""), None, dup),
                (Some(b"d"), Some(b"4"), &[]),
            ],
            false,
        ));
        all.extend_from_slice(&gzip(4, 4));
        all.extend_from_slice(&raw(
            8,
            &[(None, Some(b"x"), &[]), (None, Some(b"y"), dup)],
            true,
        ));
        all.freeze()
    }

    #[test]
    fn the_wanted_records_are_those_a_whole_decode_gives() {
        let topic: Arc<str> = "t".into();
        let bytes = fetched();
        let whole = reference(&topic, &bytes);
        assert_eq!(whole.len(), 10);
        assert_eq!(
            whole[9].timestamp, 9_999,
            "LogAppendTime: the batch's max timestamp"
        );
        for ranges in [
            vec![(0, 9)],
            vec![],
            vec![(1, 1), (3, 5), (9, 9)],
            vec![(2, 2), (7, 8)],
            vec![(-5, 0), (20, 30)],
        ] {
            let got = decode_wanted(&topic, 0, bytes.clone(), &ranges).unwrap();
            let expected: Vec<&ConsumerRecord> = whole
                .iter()
                .filter(|r| ranges.iter().any(|(a, b)| (*a..=*b).contains(&r.offset)))
                .collect();
            assert_eq!(got.len(), expected.len(), "{ranges:?}");
            for (g, e) in got.iter().zip(expected) {
                assert_eq!(g.offset, e.offset);
                assert_eq!(g.timestamp, e.timestamp, "offset {}", e.offset);
                assert_eq!(g.timestamp_type, e.timestamp_type, "offset {}", e.offset);
                assert_eq!(g.key, e.key, "offset {}", e.offset);
                assert_eq!(g.value, e.value, "offset {}", e.offset);
                assert_eq!(g.headers, e.headers, "offset {}", e.offset);
            }
        }
    }

    #[test]
    fn a_damaged_batch_is_an_error_naming_its_offset() {
        let topic: Arc<str> = "t".into();
        let mut bytes = BytesMut::from(&fetched()[..]);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let err = decode_wanted(&topic, 0, bytes.freeze(), &[(8, 9)]).unwrap_err();
        assert_eq!(err.0, 8, "{err:?}");
        assert!(err.1.to_lowercase().contains("crc"), "{err:?}");
    }
}
