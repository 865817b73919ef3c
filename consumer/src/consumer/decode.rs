//! Fetched record batches: their framing checked without decoding them, a `read_committed`
//! fetch's aborted transactions dropped, and batches decoded into records (every codec;
//! control batches skipped), for `recv` a batch at a time (the share consumer's, only the
//! records it acquired: `wanted.rs`).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::records::{RecordBatchDecoder, TimestampType as WireTimestampType};
use record_batch::{layout, BatchHeader, LOG_OVERHEAD};

use super::record::{ConsumerRecord, TimestampType};
use crate::error::ErrorCode;

/// What one partition's fetch produced, decoded outside the lock.
pub(super) enum Outcome {
    Records {
        /// Whole batches, not yet decoded.
        batches: Bytes,
        next_offset: i64,
        high_watermark: i64,
    },
    Error(ErrorCode),
    Corrupt {
        offset: i64,
        reason: String,
    },
}

/// The header of the batch at the start of `bytes`, or why it is unreadable (with its base
/// offset). `None` if the batch is not whole. Read as [`BatchHeader::read`] does, not checked as
/// a producer's batch is: Kafka's compaction leaves batches with fewer records than their offset
/// deltas span.
pub(super) fn batch_frame(bytes: &[u8]) -> Option<Result<BatchHeader, (i64, String)>> {
    let length = layout::i32_at(bytes, layout::LENGTH_AT)?;
    let base = layout::i64_at(bytes, layout::BASE_OFFSET_AT)?;
    let whole = usize::try_from(length).map(|l| l + LOG_OVERHEAD);
    if whole.is_ok_and(|total| bytes.len() < total) {
        return None;
    }
    Some(BatchHeader::read(bytes).map_err(|e| (base, e.to_string())))
}

/// Checks the framing of the batches in a fetched partition without decoding them: the whole
/// batches (a trailing partial batch is left for the next fetch) and the offset after them.
pub(super) fn frame(fetch_offset: i64, bytes: Bytes, high_watermark: i64) -> Outcome {
    let mut whole = 0;
    let mut next_offset = fetch_offset;
    while let Some(framed) = batch_frame(&bytes[whole..]) {
        let header = match framed {
            Ok(header) => header,
            Err((offset, reason)) => return Outcome::Corrupt { offset, reason },
        };
        next_offset = next_offset.max(header.next_offset());
        whole += header.size as usize;
    }
    Outcome::Records {
        batches: bytes.slice(..whole),
        next_offset,
        high_watermark,
    }
}

/// A `read_committed` fetch's batches without those of aborted transactions (`aborted`: the
/// fetch response's producer ids and first offsets), as the Java client's `CompletedFetch`
/// reads them: walking the batches in order, a producer is aborted from the first offset of
/// one of its aborted transactions until its abort marker; its transactional batches in
/// between are dropped. Control batches stay (`recv` skips them; the position moves past
/// them). Copies the kept batches only when one is dropped. Kafka writes markers
/// uncompressed; one that is not read as an abort keeps its producer aborted until the end
/// of this fetch, at worst.
pub(super) fn committed_only(outcome: Outcome, aborted: &[(i64, i64)]) -> Outcome {
    let Outcome::Records {
        batches,
        next_offset,
        high_watermark,
    } = outcome
    else {
        return outcome;
    };
    if aborted.is_empty() {
        return Outcome::Records {
            batches,
            next_offset,
            high_watermark,
        };
    }
    let mut pending: Vec<(i64, i64)> = aborted.to_vec();
    // By first offset, latest first, so the next one to open is at the end.
    pending.sort_by_key(|a| std::cmp::Reverse(a.1));
    let mut open: HashSet<i64> = HashSet::new();
    let mut kept: Vec<(usize, usize)> = Vec::new();
    let mut dropped = false;
    let mut at = 0;
    while let Some(Ok(header)) = batch_frame(&batches[at..]) {
        let size = header.size as usize;
        let mut keep = true;
        if header.producer_id >= 0 {
            while pending
                .last()
                .is_some_and(|(_, first)| *first <= header.last_offset())
            {
                if let Some((producer, _)) = pending.pop() {
                    open.insert(producer);
                }
            }
            if header.is_control() {
                let marker = record_batch::control_type(&batches[at..at + size]);
                if marker == Some(record_batch::ControlType::Abort) {
                    open.remove(&header.producer_id);
                }
            } else if header.is_transactional() && open.contains(&header.producer_id) {
                keep = false;
            }
        }
        if keep {
            kept.push((at, at + size));
        } else {
            dropped = true;
        }
        at += size;
    }
    let batches = if dropped {
        let mut out = bytes::BytesMut::with_capacity(kept.iter().map(|(a, b)| b - a).sum());
        for (from, to) in kept {
            out.extend_from_slice(&batches[from..to]);
        }
        out.freeze()
    } else {
        batches
    };
    Outcome::Records {
        batches,
        next_offset,
        high_watermark,
    }
}

/// Whether `batches` (whole, framed) holds control batches only (or nothing).
pub(super) fn only_control(batches: &[u8]) -> bool {
    let mut at = 0;
    while at < batches.len() {
        match batch_frame(&batches[at..]) {
            Some(Ok(header)) if header.is_control() => at += header.size as usize,
            _ => return false,
        }
    }
    true
}

/// Decodes the first batch of `batches` (whole, framed by [`frame`]) into `out`: its records
/// at or after `from`; nothing for a control batch. The batch is taken off `batches` either
/// way; an error names its base offset.
pub(super) fn decode_next(
    topic: &Arc<str>,
    partition: i32,
    from: i64,
    batches: &mut Bytes,
    out: &mut VecDeque<ConsumerRecord>,
) -> Result<(), (i64, String)> {
    let header = match batch_frame(batches) {
        Some(framed) => framed?,
        None => {
            *batches = Bytes::new();
            return Err((-1, "a partial batch".to_string()));
        }
    };
    let mut batch = batches.split_to(header.size as usize);
    if header.is_control() || header.next_offset() <= from {
        return Ok(());
    }
    let base = header.base_offset;
    let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| (base, e.to_string()))?;
    // The decoder gives each record its create time, also under LogAppendTime.
    let append_time = header.append_time();
    for r in set.records {
        if r.offset < from || r.control {
            continue;
        }
        let headers: Vec<(String, Option<Bytes>)> = r
            .headers
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        out.push_back(ConsumerRecord {
            topic: topic.clone(),
            partition,
            offset: r.offset,
            timestamp: append_time.unwrap_or(r.timestamp),
            timestamp_type: match r.timestamp_type {
                WireTimestampType::Creation => TimestampType::CreateTime,
                WireTimestampType::LogAppend => TimestampType::LogAppendTime,
            },
            key: r.key,
            value: r.value,
            headers,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::error::ConsumeError;
    use super::super::state::{Chunk, Position, State};
    use super::*;
    use crate::TopicPartition;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn batch(base: i64, n: i64, control: bool) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: control,
                control,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                sequence: -1 + i as i32,
                timestamp: 1000 + i,
                key: Some(Bytes::from(format!("k{}", base + i))),
                value: Some(Bytes::from(format!("v{}", base + i))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::Lz4,
            },
        )
        .unwrap();
        buf.freeze()
    }

    /// A transactional batch of producer `pid` (`marker`: a control batch, abort or commit),
    /// uncompressed as Kafka writes markers.
    fn txn_batch(base: i64, n: i64, pid: i64, marker: Option<bool>) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                transactional: true,
                control: marker.is_some(),
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: pid,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: base + i,
                sequence: base as i32 + i as i32,
                timestamp: 1000 + i,
                // A marker's key: version 0, type 0 (abort) or 1 (commit).
                key: Some(match marker {
                    Some(commit) => Bytes::from(vec![0, 0, 0, u8::from(commit)]),
                    None => Bytes::from(format!("k{}", base + i)),
                }),
                value: Some(Bytes::from(format!("v{}", base + i))),
                headers: Default::default(),
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.freeze()
    }

    #[test]
    fn read_committed_drops_aborted_transactions_up_to_their_markers() {
        // Producer 7 aborts 0-1 (marker 2), producer 8 commits 3-4 (marker 6) while producer 7
        // writes 5 and aborts again (marker 7); producer 7's 8 after its abort is kept (a new
        // transaction, committed at 9).
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&txn_batch(0, 2, 7, None));
        all.extend_from_slice(&txn_batch(2, 1, 7, Some(false)));
        all.extend_from_slice(&txn_batch(3, 2, 8, None));
        all.extend_from_slice(&txn_batch(5, 1, 7, None));
        all.extend_from_slice(&txn_batch(6, 1, 8, Some(true)));
        all.extend_from_slice(&txn_batch(7, 1, 7, Some(false)));
        all.extend_from_slice(&txn_batch(8, 1, 7, None));
        all.extend_from_slice(&txn_batch(9, 1, 7, Some(true)));
        let bytes = all.freeze();
        let aborted = [(7, 0), (7, 5)];
        let outcome = committed_only(frame(0, bytes.clone(), 10), &aborted);
        let Outcome::Records {
            mut batches,
            next_offset,
            ..
        } = outcome
        else {
            panic!("framing refused");
        };
        assert_eq!(
            next_offset, 10,
            "the position goes past every batch fetched"
        );
        let topic: Arc<str> = Arc::from("t");
        let mut records = VecDeque::new();
        while !batches.is_empty() {
            decode_next(&topic, 0, 0, &mut batches, &mut records).unwrap();
        }
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        assert_eq!(
            offsets,
            vec![3, 4, 8],
            "aborted records and markers are never returned"
        );
        // Without aborted transactions (read_uncommitted sees them all but the markers).
        let (all_records, _) = decode(0, bytes).unwrap();
        let offsets: Vec<i64> = all_records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![0, 1, 3, 4, 5, 8]);
    }

    #[test]
    fn the_position_moves_past_trailing_markers() {
        let tp = TopicPartition::new("t", 0);
        let mut st = State::new();
        st.add_partitions(std::slice::from_ref(&tp));
        st.reposition(&tp, Position::Known(0));
        let epoch = st.partitions[&tp].epoch;
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&txn_batch(0, 2, 7, None));
        all.extend_from_slice(&txn_batch(2, 1, 7, Some(true)));
        let Outcome::Records {
            batches,
            next_offset,
            ..
        } = frame(0, all.freeze(), 3)
        else {
            panic!("framing refused");
        };
        st.buffer.push_back(Chunk {
            topic: Arc::from("t"),
            partition: tp.clone(),
            epoch,
            bytes: batches.len(),
            batches,
            records: VecDeque::new(),
            end: next_offset,
        });
        let backoff = Duration::from_secs(1);
        assert_eq!(st.next_record(backoff).unwrap().unwrap().offset, 0);
        assert_eq!(st.partitions[&tp].position, Position::Known(1));
        assert_eq!(st.next_record(backoff).unwrap().unwrap().offset, 1);
        assert_eq!(
            st.partitions[&tp].position,
            Position::Known(3),
            "past the commit marker with the last record"
        );
        assert!(st.next_record(backoff).is_none());
    }

    /// Frames `bytes` and decodes every batch from `from`.
    fn decode(from: i64, bytes: Bytes) -> Result<(Vec<ConsumerRecord>, i64), (i64, String)> {
        let Outcome::Records {
            mut batches,
            next_offset,
            ..
        } = frame(from, bytes, -1)
        else {
            return Err((-1, "not records".into()));
        };
        let topic: Arc<str> = Arc::from("t");
        let mut records = VecDeque::new();
        while !batches.is_empty() {
            decode_next(&topic, 0, from, &mut batches, &mut records)?;
        }
        Ok((records.into(), next_offset))
    }

    #[test]
    fn decodes_whole_batches_skipping_control_and_earlier_records() {
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&batch(0, 3, false));
        all.extend_from_slice(&batch(3, 1, true));
        all.extend_from_slice(&batch(4, 2, false));
        let partial = batch(6, 5, false);
        all.extend_from_slice(&partial[..partial.len() - 3]);
        let (records, next_offset) = decode(1, all.freeze()).unwrap();
        let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![1, 2, 4, 5]);
        assert_eq!(next_offset, 6, "the partial batch is fetched again");
        assert_eq!(records[0].value.as_deref(), Some(&b"v1"[..]));
    }

    #[test]
    fn recv_decodes_batch_by_batch_and_stops_at_a_corrupt_one() {
        let tp = TopicPartition::new("t", 0);
        let mut st = State::new();
        st.add_partitions(std::slice::from_ref(&tp));
        st.reposition(&tp, Position::Known(1));
        let epoch = st.partitions[&tp].epoch;
        let mut corrupt = batch(3, 2, false).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        let mut all = bytes::BytesMut::new();
        all.extend_from_slice(&batch(0, 3, false));
        all.extend_from_slice(&corrupt);
        all.extend_from_slice(&batch(5, 1, false));
        let Outcome::Records { batches, .. } = frame(1, all.freeze(), 6) else {
            panic!("framing refused");
        };
        st.buffer.push_back(Chunk {
            topic: Arc::from("t"),
            partition: tp.clone(),
            epoch,
            bytes: batches.len(),
            batches,
            records: VecDeque::new(),
            end: 6,
        });
        let backoff = Duration::from_secs(1);
        let offsets: Vec<i64> = (0..2)
            .map(|_| st.next_record(backoff).unwrap().unwrap().offset)
            .collect();
        assert_eq!(
            offsets,
            vec![1, 2],
            "records before the fetch position are skipped"
        );
        match st.next_record(backoff) {
            Some(Err(ConsumeError::Corrupt { offset, .. })) => assert_eq!(offset, 3),
            other => panic!("expected a corrupt batch at 3, got {other:?}"),
        }
        let p = &st.partitions[&tp];
        assert_eq!(p.position, Position::Known(3), "stays at the corrupt batch");
        assert_eq!(p.fetch_offset, 3, "fetched again from there");
        assert!(p.retry_at.is_some(), "after a backoff");
        assert!(st.buffer.is_empty(), "the batches after it are dropped");
        assert!(st.next_record(backoff).is_none());
    }

    #[test]
    fn a_corrupt_batch_is_reported() {
        let mut b = batch(0, 2, false).to_vec();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(decode(0, Bytes::from(b)), Err((0, _))));
        let mut framing = batch(5, 2, false).to_vec();
        framing[layout::MAGIC_AT] = 1;
        assert!(matches!(
            frame(5, Bytes::from(framing), -1),
            Outcome::Corrupt { offset: 5, .. }
        ));
    }
}
