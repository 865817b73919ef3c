//! What a partition does to a producer's batches before storing them when its topic asks for
//! it, as Kafka's LogValidator does for magic 2:
//!
//! - `compression.type` other than `producer`, and a batch of another codec: its records are
//!   decompressed (bounded, as every compressed batch on append) and compressed with the
//!   topic's codec at its KIP-390 level. The records inside are the same bytes (offset and
//!   timestamp deltas, keys, values, headers), so the batch keeps its base offset, count,
//!   producer id, epoch and base sequence (an idempotent producer's retries are still
//!   recognised) and base timestamp; its length, codec and CRC are new. A batch already of the
//!   topic's codec is stored as it came (no recompression), checked as always.
//! - `message.timestamp.type=LogAppendTime`: the batch's timestamp type bit is set and its max
//!   timestamp is the append time (consumers take it as every record's timestamp); the CRC is
//!   computed again. A producer's batch that sets the bit itself is refused (INVALID_TIMESTAMP),
//!   as in Kafka; on a CreateTime topic the bit is cleared.
//!
//! Bounds: each batch decompresses to at most the bound of every compressed batch on append
//! (`DECOMPRESSED_PER_MESSAGE_BYTE` times `max.message.bytes`), and the batches of one append
//! that are recompressed together to at most that factor times the larger of
//! `max.message.bytes` and the bytes received (a batch only checked counts against its own
//! bound, as on any topic); one batch is decompressed at a time. A batch over
//! `max.message.bytes` once recompressed is refused (the caller checks, Kafka's
//! RecordTooLargeException).
//!
//! Deviation: Kafka takes one batch per partition and rebuilds the max timestamp from the
//! records; lograil keeps each batch (several per partition are accepted) and its header's max
//! timestamp under CreateTime.

use record_batch::{build, BatchHeader, TimestampType, HEADER_LEN};

use crate::config::TopicConfig;
use crate::error::AppendError;

/// A producer's record set as its topic stores it.
#[derive(Debug)]
pub(crate) struct Rewritten {
    pub records: Vec<u8>,
    pub headers: Vec<BatchHeader>,
}

/// Whether `config` keeps every batch of `headers` as it came.
pub(crate) fn keeps_all(config: &TopicConfig, headers: &[BatchHeader]) -> bool {
    headers
        .iter()
        .all(|h| h.is_control() || config.keeps(h.codec(), h.timestamp_type()))
}

/// Whether storing `headers` under `config` recompresses a batch (work for a thread that may
/// block, never an async worker).
pub(crate) fn recompresses(config: &TopicConfig, headers: &[BatchHeader]) -> bool {
    config
        .compression
        .codec()
        .is_some_and(|target| headers.iter().any(|h| h.codec() != Some(target)))
}

/// `records` (whole batches, validated, `headers` theirs) as `config` stores them, stamped
/// `now` for LogAppendTime. `per_batch`: most bytes one batch's records may decompress to;
/// `budget`: what the batches recompressed decompress to together.
pub(crate) fn rewrite(
    records: &[u8],
    headers: &[BatchHeader],
    config: &TopicConfig,
    now: i64,
    per_batch: usize,
    mut budget: usize,
) -> Result<Rewritten, AppendError> {
    let target = config.compression.codec();
    let mut out = Vec::with_capacity(records.len());
    let mut rewritten = Vec::with_capacity(headers.len());
    let mut at = 0usize;
    for header in headers {
        let size = header.size as usize;
        let batch = &records[at..at + size];
        let (timestamp_type, max_timestamp) = match config.timestamp_type {
            TimestampType::LogAppendTime => {
                if header.timestamp_type() == TimestampType::LogAppendTime {
                    return Err(AppendError::ProducerLogAppendTime { position: at });
                }
                (TimestampType::LogAppendTime, now)
            }
            TimestampType::CreateTime => (TimestampType::CreateTime, header.max_timestamp),
        };
        let start = out.len();
        match target.filter(|t| Some(*t) != header.codec()) {
            Some(codec) => {
                let inner = &batch[HEADER_LEN..];
                let decompressed;
                let plain: &[u8] = if header.is_compressed() {
                    decompressed = crate::batch::decompressed_records(
                        batch,
                        header,
                        at,
                        per_batch.min(budget),
                    )?;
                    &decompressed
                } else {
                    // Its records' framing was checked with its CRC.
                    inner
                };
                budget = budget.saturating_sub(plain.len());
                out.extend_from_slice(&batch[..HEADER_LEN]);
                crate::compress::compress(
                    plain,
                    codec,
                    config.compression_levels.of(codec),
                    &mut out,
                )?;
                build::rewrap(&mut out[start..], codec, timestamp_type, max_timestamp)
                    .map_err(|_| too_large(out.len() - start, config))?;
            }
            None => {
                if header.is_compressed() {
                    crate::batch::validate_compressed(
                        batch,
                        std::slice::from_ref(header),
                        per_batch,
                    )?;
                }
                out.extend_from_slice(batch);
                if (timestamp_type, max_timestamp)
                    != (header.timestamp_type(), header.max_timestamp)
                {
                    build::set_max_timestamp(&mut out[start..], timestamp_type, max_timestamp)
                        .map_err(|_| too_large(size, config))?;
                }
            }
        }
        let stored = BatchHeader::read(&out[start..]).map_err(|e| AppendError::from(e.at(at)))?;
        rewritten.push(stored);
        at += size;
    }
    Ok(Rewritten {
        records: out,
        headers: rewritten,
    })
}

fn too_large(size: usize, config: &TopicConfig) -> AppendError {
    AppendError::TooLarge {
        size,
        max: config.max_message_bytes as usize,
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::Compression;
    use record_batch::Codec;

    use crate::error::BatchError;

    use super::*;
    use crate::batch::{build_for_producer, build_with, decode, NewRecord};
    use crate::config::TopicCompression;

    fn records() -> Vec<NewRecord<'static>> {
        (0..50)
            .map(|i| {
                (
                    Some(&b"key"[..]),
                    Some(&b"a value that repeats, repeats, repeats"[..]),
                    1_000 + i,
                )
            })
            .collect()
    }

    fn config(compression: TopicCompression, timestamp_type: TimestampType) -> TopicConfig {
        TopicConfig {
            compression,
            timestamp_type,
            ..TopicConfig::default()
        }
    }

    #[test]
    fn every_codec_to_every_codec_keeps_the_records_and_the_producer() {
        let codecs = [
            (
                Compression::None,
                TopicCompression::Uncompressed,
                Codec::None,
            ),
            (Compression::Gzip, TopicCompression::Gzip, Codec::Gzip),
            (Compression::Snappy, TopicCompression::Snappy, Codec::Snappy),
            (Compression::Lz4, TopicCompression::Lz4, Codec::Lz4),
            (Compression::Zstd, TopicCompression::Zstd, Codec::Zstd),
        ];
        let records = records();
        for (from, _, _) in codecs {
            let batch = build_with(&records, from);
            let want = decode(&batch).unwrap();
            for (_, topic, codec) in codecs {
                let headers = record_batch::validate_all(&batch).unwrap();
                let config = config(topic, TimestampType::CreateTime);
                let out = rewrite(&batch, &headers, &config, 5, 1 << 20, 1 << 20).unwrap();
                let stored = record_batch::validate_all(&out.records).unwrap();
                assert_eq!(stored, out.headers);
                assert_eq!(stored[0].codec(), Some(codec), "{from:?} to {topic:?}");
                assert_eq!(
                    (
                        stored[0].record_count,
                        stored[0].base_timestamp,
                        stored[0].max_timestamp
                    ),
                    (50, 1_000, 1_049)
                );
                assert_eq!(decode(&out.records).unwrap(), want, "{from:?} to {topic:?}");
            }
        }
        let batch = build_for_producer(&records[..3], 42, 7, 100);
        let headers = record_batch::validate_all(&batch).unwrap();
        let config = config(TopicCompression::Zstd, TimestampType::CreateTime);
        let out = rewrite(&batch, &headers, &config, 5, 1 << 20, 1 << 20).unwrap();
        let h = out.headers[0];
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (42, 7, 100)
        );
    }

    #[test]
    fn log_append_time_stamps_the_batch_and_refuses_a_producers_stamp() {
        let batch = build_with(&records(), Compression::Lz4);
        let headers = record_batch::validate_all(&batch).unwrap();
        let lat = config(TopicCompression::Producer, TimestampType::LogAppendTime);
        let out = rewrite(&batch, &headers, &lat, 77_000, 1 << 20, 1 << 20).unwrap();
        let h = record_batch::validate_all(&out.records).unwrap()[0];
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!((h.max_timestamp, h.codec()), (77_000, Some(Codec::Lz4)));
        assert_eq!(
            &out.records[HEADER_LEN..],
            &batch[HEADER_LEN..],
            "records untouched"
        );
        // The stamped batch sent again as if by a producer.
        let err = rewrite(&out.records, &[h], &lat, 78_000, 1 << 20, 1 << 20).unwrap_err();
        assert!(
            matches!(err, AppendError::ProducerLogAppendTime { position: 0 }),
            "{err}"
        );
        // A CreateTime topic clears it.
        let create = config(TopicCompression::Producer, TimestampType::CreateTime);
        let back = rewrite(&out.records, &[h], &create, 0, 1 << 20, 1 << 20).unwrap();
        assert_eq!(back.headers[0].timestamp_type(), TimestampType::CreateTime);
    }

    #[test]
    fn decompression_is_bounded_per_batch_and_per_append() {
        let batch = build_with(&records(), Compression::Gzip);
        let two = [&batch[..], &batch[..]].concat();
        let headers = record_batch::validate_all(&two).unwrap();
        let config = config(TopicCompression::Zstd, TimestampType::CreateTime);
        let plain = decode(&batch).unwrap().len();
        assert_eq!(plain, 50);
        let inner = crate::decompress::decompress(&batch[HEADER_LEN..], Compression::Gzip, 1 << 20)
            .unwrap()
            .len();
        assert!(rewrite(&two, &headers, &config, 0, inner, 2 * inner).is_ok());
        for (per_batch, budget, position) in [
            (inner - 1, 1 << 20, 0),
            (1 << 20, 2 * inner - 1, batch.len()),
        ] {
            let err = rewrite(&two, &headers, &config, 0, per_batch, budget).unwrap_err();
            assert!(
                matches!(&err, AppendError::InvalidBatch(BatchError::Decompress { position: p, .. }) if *p == position),
                "{err}"
            );
        }
    }
}
