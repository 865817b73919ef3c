//! Batches built by this crate and by `kafka-protocol`'s encoder (an independent one, and the
//! only one here with codecs), parsed, validated and damaged.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record as KafkaRecord, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType as KafkaTimestampType,
};
use proptest::prelude::*;

use crate::build::{self, Record, Stamp};
use crate::layout::*;
use crate::*;

/// (key, value, timestamp in ms)
type Simple<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, i64);

/// `kafka-protocol`'s batch of `records` with `headers` on each, offsets from 0.
fn reference(
    records: &[Simple],
    headers: &[(&str, Option<&[u8]>)],
    compression: Compression,
    producer: (i64, i16, i32),
) -> Bytes {
    let (producer_id, producer_epoch, base_sequence) = producer;
    let records: Vec<KafkaRecord> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value, timestamp))| KafkaRecord {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: KafkaTimestampType::Creation,
            offset: i as i64,
            // One batch while offset - sequence stays constant.
            sequence: if base_sequence < 0 {
                i as i32 - 1
            } else {
                base_sequence.wrapping_add(i as i32)
            },
            timestamp: *timestamp,
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string().into(), v.map(Bytes::copy_from_slice)))
                .collect(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

fn plain(records: &[Simple]) -> Bytes {
    reference(records, &[], Compression::None, (-1, -1, -1))
}

/// This crate's uncompressed batch of the same records.
fn built(
    records: &[Simple],
    headers: &[(&str, Option<&[u8]>)],
    producer: (i64, i16, i32),
) -> Bytes {
    let mut buf = BytesMut::new();
    build::begin(&mut buf, 0);
    let base_timestamp = records[0].2;
    for (i, (key, value, timestamp)) in records.iter().enumerate() {
        let record = Record {
            offset_delta: i as i32,
            timestamp_delta: timestamp - base_timestamp,
            key: *key,
            value: *value,
            headers: headers.iter().map(|(k, v)| (k.as_bytes(), *v)),
        };
        build::put_record(&mut buf, record).unwrap();
    }
    let stamp = Stamp {
        codec: Codec::None,
        record_count: records.len() as i32,
        base_timestamp,
        max_timestamp: records.iter().map(|r| r.2).max().unwrap(),
        producer_id: producer.0,
        producer_epoch: producer.1,
        base_sequence: producer.2,
    };
    build::finish(&mut buf, &stamp).unwrap();
    buf.freeze()
}

fn sample() -> Bytes {
    plain(&[
        (Some(b"k1"), Some(b"hello"), 1_000),
        (None, Some(b"world"), 1_005),
        (Some(b"k3"), None, 1_002),
    ])
}

#[test]
fn a_header_is_found_by_walking_the_framing() {
    let record = (Some(&b"deadline? no, a key"[..]), Some(&b"deadline"[..]), 1);
    let with = reference(
        &[record, record],
        &[("trace", Some(b"deadline")), ("deadline", Some(b"42"))],
        Compression::None,
        (-1, -1, -1),
    );
    assert_eq!(BatchHeader::parse(&with).unwrap().record_count, 2);
    assert_eq!(has_header(&with, b"deadline"), Some(true));
    let without = reference(
        &[record],
        &[("deadlines", Some(b"x")), ("a", None)],
        Compression::None,
        (-1, -1, -1),
    );
    assert_eq!(has_header(&without, b"deadline"), Some(false));
    assert_eq!(has_header(&sample(), b"deadline"), Some(false));
    let zipped = reference(&[record], &[], Compression::Gzip, (-1, -1, -1));
    assert_eq!(has_header(&zipped, b"deadline"), None);
    assert_eq!(
        has_header(&with[..with.len() - 3], b"deadline"),
        None,
        "truncated"
    );
}

#[test]
fn a_records_header_value_is_read_in_place() {
    let record = (Some(&b"tenant"[..]), Some(&b"tenant"[..]), 1);
    // This crate's builder keeps both headers of the same name (kafka-protocol's keeps one).
    let headers: &[(&str, Option<&[u8]>)] = &[
        ("trace", Some(b"t")),
        ("tenant", Some(b"acme")),
        ("tenant", Some(b"x")),
        ("n", None),
    ];
    let batch = built(&[record], headers, (-1, -1, -1));
    let raw = records::records(&batch[HEADER_LEN..])
        .next()
        .unwrap()
        .unwrap();
    // The first of two, not the key or the value of the same name.
    assert_eq!(raw.header(b"tenant"), Some(Some(&b"acme"[..])));
    assert_eq!(raw.header(b"n"), Some(None), "a null value");
    assert_eq!(raw.header(b"tenan"), None);
    let bare = plain(&[record]);
    let raw = records::records(&bare[HEADER_LEN..])
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(raw.header(b"tenant"), None);
}

#[test]
fn a_batch_validates_with_its_fields() {
    let batch = sample();
    let header = validate(&batch).unwrap();
    assert_eq!(header.size as usize, batch.len());
    assert_eq!(header.record_count, 3);
    assert_eq!(header.last_offset_delta, 2);
    assert_eq!(header.base_timestamp, 1_000);
    assert_eq!(header.max_timestamp, 1_005);
    assert_eq!((header.producer_id, header.base_sequence), (-1, -1));
    assert_eq!(header.codec(), Some(Codec::None));
    assert_eq!(header.timestamp_type(), TimestampType::CreateTime);
    assert!(!header.is_transactional() && !header.is_control());
    assert_eq!(header, BatchHeader::read(&batch).unwrap());
}

#[test]
fn producer_batches_carry_id_epoch_and_sequence() {
    let records = [(None, Some(&b"a"[..]), 1), (None, Some(&b"b"[..]), 2)];
    let batch = reference(&records, &[], Compression::None, (77, 3, 10));
    let header = validate(&batch).unwrap();
    assert_eq!(header.record_count, 2);
    let producer = (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
    );
    assert_eq!(producer, (77, 3, 10));
}

#[test]
fn base_offset_is_outside_the_crc() {
    let mut batch = sample().to_vec();
    batch[..8].copy_from_slice(&42i64.to_be_bytes());
    let header = validate(&batch).unwrap();
    assert_eq!(header.base_offset, 42);
    assert_eq!(header.last_offset(), 44);
    assert_eq!(header.next_offset(), 45);
}

#[test]
fn every_flipped_covered_byte_is_caught() {
    let batch = sample().to_vec();
    for at in (MAGIC_AT..batch.len()).chain(LENGTH_AT..PARTITION_LEADER_EPOCH_AT) {
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
    assert!(matches!(parse_all(&[]), Err(BatchError::Empty)));
    assert!(matches!(validate_parsed(&[], &[]), Err(BatchError::Empty)));
}

#[test]
fn several_batches_validate_together() {
    let mut two = sample().to_vec();
    two.extend_from_slice(&sample());
    let headers = validate_all(&two).unwrap();
    assert_eq!(headers.len(), 2);
    assert_eq!(parse_all(&two).unwrap(), headers);
    assert_eq!(validate_parsed(&two, &headers), Ok(()));
    assert!(
        validate_parsed(&two[..two.len() - 1], &headers).is_err(),
        "headers that do not cover the bytes"
    );
    two.push(0);
    assert!(validate_all(&two).is_err());
    assert!(parse_all(&two).is_err());
    assert!(matches!(
        validate_parsed(&two, &headers),
        Err(BatchError::At { .. })
    ));
}

#[test]
fn a_crc_mismatch_after_a_cheap_parse_is_caught() {
    let mut two = sample().to_vec();
    two.extend_from_slice(&sample());
    let last = two.len() - 1;
    two[last] ^= 1;
    let headers = parse_all(&two).unwrap();
    let error = validate_parsed(&two, &headers).unwrap_err();
    assert_eq!(Err(error.clone()), validate_all(&two).map(|_| ()));
    let BatchError::At { position, source } = error else {
        panic!("{error:?}");
    };
    assert_eq!(position, sample().len());
    assert!(matches!(*source, BatchError::CrcMismatch { .. }));
}

/// `batch` with its header saying `count` records (CRC recomputed, as a lying producer would
/// send it).
fn claiming(batch: &[u8], count: i32) -> Vec<u8> {
    let mut batch = batch.to_vec();
    batch[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
    batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]
        .copy_from_slice(&(count - 1).to_be_bytes());
    let crc = compute_crc(&batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn record_count_must_fit_the_length() {
    let batch = claiming(&sample(), 1000);
    assert!(matches!(
        validate(&batch),
        Err(BatchError::BadRecordCount { count: 1000, .. })
    ));
}

#[test]
fn a_header_is_read_without_the_producer_checks() {
    // As Kafka's compaction leaves a batch: fewer records than its offset deltas span.
    let mut compacted = sample().to_vec();
    compacted[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&1i32.to_be_bytes());
    let header = BatchHeader::read(&compacted).unwrap();
    assert_eq!((header.record_count, header.next_offset()), (1, 3));
    assert!(matches!(
        BatchHeader::parse(&compacted),
        Err(BatchError::BadRecordCount { .. })
    ));
    let mut magic = sample().to_vec();
    magic[MAGIC_AT] = 1;
    assert_eq!(BatchHeader::read(&magic), Err(BatchError::BadMagic(1)));
    let mut short = sample().to_vec();
    short[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&48i32.to_be_bytes());
    assert_eq!(BatchHeader::read(&short), Err(BatchError::BadLength(48)));
}

#[test]
fn an_uncompressed_count_that_lies_about_the_records_is_refused() {
    let values: Vec<String> = (0..10)
        .map(|i| format!("a value long enough {i}"))
        .collect();
    let records: Vec<Simple> = values
        .iter()
        .map(|v| (None, Some(v.as_bytes()), 1))
        .collect();
    let batch = plain(&records);
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
    let two = plain(&[(None, Some(b"x"), 1), (None, Some(b"y"), 1)]);
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
fn compressed_batches_validate_by_their_header() {
    let records: Vec<Simple> = (0..100)
        .map(|i| (None, Some(&b"aaaaaaaaaaaaaaaa"[..]), i))
        .collect();
    for (compression, codec) in [
        (Compression::Gzip, Codec::Gzip),
        (Compression::Snappy, Codec::Snappy),
        (Compression::Lz4, Codec::Lz4),
        (Compression::Zstd, Codec::Zstd),
    ] {
        let batch = reference(&records, &[], compression, (-1, -1, -1));
        let header = validate(&batch).unwrap();
        assert!(header.is_compressed());
        assert_eq!(header.codec(), Some(codec));
        assert_eq!(header.record_count, 100);
    }
    let mut unknown = sample().to_vec();
    unknown[ATTRIBUTES_AT + 1] |= 5;
    assert_eq!(
        BatchHeader::parse(&unknown),
        Err(BatchError::BadCompression(5))
    );
}

#[test]
fn built_batches_are_kafka_protocols_bytes() {
    let long = vec![7u8; 300];
    let records: [Simple; 4] = [
        (Some(b"k"), Some(b"v"), 1_700_000_000_000),
        (None, None, 1_700_000_000_005),
        (Some(b""), Some(&long), 1_700_000_000_001),
        (Some(&long), Some(b""), 1_700_000_009_000),
    ];
    for headers in [
        &[][..],
        &[("a", Some(&b"1"[..]))],
        &[("trace", None), ("", Some(&long[..]))],
    ] {
        for producer in [(-1, -1, -1), (1 << 40, 3, i32::MAX - 1)] {
            let ours = built(&records, headers, producer);
            let theirs = reference(&records, headers, Compression::None, producer);
            assert_eq!(ours, theirs, "{headers:?} {producer:?}");
        }
    }
}

#[test]
fn a_restamped_batch_validates_with_its_new_producer() {
    let records = [(None, Some(&b"a"[..]), 5), (None, Some(&b"b"[..]), 4)];
    let mut batch = built(&records, &[], (7, 1, 40)).to_vec();
    build::restamp(&mut batch, 7, 2, 0).unwrap();
    let header = validate(&batch).unwrap();
    let producer = (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
    );
    assert_eq!(producer, (7, 2, 0));
    assert_eq!((header.base_timestamp, header.max_timestamp), (5, 5));
    assert_eq!(batch, built(&records, &[], (7, 2, 0)));
    assert_eq!(
        build::restamp(&mut [0u8; 60], 1, 1, 1),
        Err(BuildError::NoHeader(60))
    );
}

#[test]
fn finish_refuses_what_is_not_a_batch() {
    let stamp = Stamp::new(Codec::None, 1, 0);
    assert_eq!(
        build::finish(&mut [0u8; 10], &stamp),
        Err(BuildError::NoHeader(10))
    );
    let empty = Stamp::new(Codec::None, 0, 0);
    assert_eq!(
        build::finish(&mut [0u8; HEADER_LEN], &empty),
        Err(BuildError::Empty)
    );
}

proptest! {
    /// A cheap parse, then the rest of the checks, accepts what the whole validation accepts,
    /// of batches damaged anywhere.
    #[test]
    fn parse_then_validate_parsed_is_validate_all(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
        split in 1usize..5,
        damage in proptest::option::of((any::<usize>(), any::<u8>())),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let records: Vec<Simple> = values.iter().map(|v| (None, Some(&v[..]), 9)).collect();
        let split = split.min(records.len());
        let mut buf = built(&records[..split], &[], (-1, -1, -1)).to_vec();
        if split < records.len() {
            buf.extend_from_slice(&built(&records[split..], &[("h", None)], (3, 0, 0)));
        }
        if let Some((at, xor)) = damage {
            let at = at % buf.len();
            buf[at] ^= xor;
        }
        if let Some(cut) = cut {
            buf.truncate(cut % (buf.len() + 1));
        }
        let whole = validate_all(&buf);
        let stepwise = parse_all(&buf).and_then(|headers| {
            validate_parsed(&buf, &headers).map(|()| headers)
        });
        // The same verdict (the error may be another batch's: the cheap parse looks at every
        // header before any CRC).
        prop_assert_eq!(whole.is_ok(), stepwise.is_ok(), "{:?} {:?}", whole, stepwise);
        if let (Ok(whole), Ok(stepwise)) = (whole, stepwise) {
            prop_assert_eq!(whole, stepwise);
        }
    }
}

#[test]
fn a_broker_restamps_and_rewraps_a_batch_with_a_valid_crc() {
    let mut batch = sample().to_vec();
    let before = validate(&batch).unwrap();
    build::set_max_timestamp(&mut batch, TimestampType::LogAppendTime, 99).unwrap();
    let after = validate(&batch).unwrap();
    assert_eq!(after.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(after.max_timestamp, 99);
    assert_eq!(
        (after.base_timestamp, after.record_count),
        (before.base_timestamp, before.record_count)
    );
    build::set_max_timestamp(&mut batch, TimestampType::CreateTime, 7).unwrap();
    assert_eq!(
        validate(&batch).unwrap().timestamp_type(),
        TimestampType::CreateTime
    );

    // The same records under another codec tag (the bytes stand in for compressed ones).
    let mut out = batch[..HEADER_LEN].to_vec();
    out.extend_from_slice(b"0123456789");
    build::rewrap(&mut out, Codec::Zstd, TimestampType::LogAppendTime, 5).unwrap();
    let h = BatchHeader::read(&out).unwrap();
    assert_eq!(h.size as usize, out.len());
    assert_eq!(h.codec(), Some(Codec::Zstd));
    assert_eq!(
        (h.timestamp_type(), h.max_timestamp),
        (TimestampType::LogAppendTime, 5)
    );
    assert_eq!(h.crc, compute_crc(&out));
    assert_eq!(
        (h.producer_id, h.base_sequence, h.record_count),
        (
            before.producer_id,
            before.base_sequence,
            before.record_count
        )
    );
    assert!(matches!(
        build::rewrap(&mut [0u8; 10], Codec::None, TimestampType::CreateTime, 0),
        Err(BuildError::NoHeader(10))
    ));
}
