//! What share groups read from and write to the log: the batches holding acquired records, the
//! deadlines records carry, and the copies of archived records sent to a dead-letter topic.

use bytes::Bytes;
use log_core::batch::{self, DecodedRecord, HeadedRecord};
use log_core::{Partition, ReadError};
use task_queue::{ArchiveReason, Archived, Attempt, Outcome};
use vocabulary::headers::{
    DLQ_ERRORS_DELIVERY_COUNT, DLQ_ERRORS_GROUP, DLQ_ERRORS_MESSAGE, DLQ_ERRORS_OFFSET,
    DLQ_ERRORS_PARTITION, DLQ_ERRORS_TOPIC,
};

use super::meta::parse_deadline;
use super::READ_BYTES;

/// The header that gives a record's deadline, in ms since the epoch (8 bytes big-endian, or
/// decimal text): past it, the record is archived as expired instead of delivered.
pub use vocabulary::headers::DEADLINE as DEADLINE_HEADER;
/// lograil's own dead-letter header: every delivery of the record, as JSON.
pub const ATTEMPTS_HEADER: &str = "lograil.dlq.attempts";

/// The whole batches that hold the offsets of `ranges` (ascending), each batch once, in offset
/// order: zero-copy slices of the segments when they are contiguous (acquisition in offset
/// order), joined by a copy otherwise. One read serves every range it reaches, so ranges
/// scattered by fair turns cost the reads of their span, not one read each.
pub fn read_acquired(
    partition: &Partition,
    ranges: &[(i64, i64, u16)],
) -> Result<Bytes, ReadError> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut ranges = ranges
        .iter()
        .map(|&(first, last, _)| (first, last))
        .peekable();
    // The offset after the last batch walked.
    let mut walked_to = i64::MIN;
    while let Some(&(first, _)) = ranges.peek() {
        let read = partition.read(first.max(walked_to), READ_BYTES)?;
        if read.records.is_empty() {
            break;
        }
        // The start of the run of wanted batches being gathered.
        let mut run: Option<usize> = None;
        let mut at = 0;
        while at < read.records.len() {
            let header = record_batch::BatchHeader::read(&read.records[at..]).map_err(|e| {
                ReadError::Corrupt {
                    path: partition.dir().to_path_buf(),
                    position: at as u64,
                    reason: e.to_string(),
                }
            })?;
            let end = (at + header.size as usize).min(read.records.len());
            // Ranges wholly before this batch hold offsets no batch has.
            while ranges
                .next_if(|&(_, last)| last < header.base_offset)
                .is_some()
            {}
            let wanted = header.next_offset() > walked_to
                && ranges
                    .peek()
                    .is_some_and(|&(first, _)| first <= header.last_offset());
            match (wanted, run) {
                (true, None) => run = Some(at),
                (false, Some(start)) => {
                    chunks.push(read.records.slice(start..at));
                    run = None;
                }
                _ => {}
            }
            walked_to = walked_to.max(header.next_offset());
            while ranges.next_if(|&(_, last)| last < walked_to).is_some() {}
            at = end;
            if ranges.peek().is_none() {
                break;
            }
        }
        if let Some(start) = run {
            chunks.push(read.records.slice(start..at));
        }
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => chunks.concat().into(),
    })
}

/// How many records to acquire from `speo` on so that the acquisition ends with a batch: up to
/// the end of the batch holding the `max_records`th (Kafka's `batch_optimized` mode), or
/// `max_records` when that lies at or past the log end or cannot be read.
pub fn to_batch_end(partition: &Partition, speo: i64, max_records: usize, log_end: i64) -> usize {
    let Some(last) = i64::try_from(max_records)
        .ok()
        .and_then(|n| speo.checked_add(n - 1))
        .filter(|last| *last >= speo && *last < log_end)
    else {
        return max_records;
    };
    partition
        .read(last, 1)
        .ok()
        .and_then(|read| record_batch::BatchHeader::read(&read.records).ok())
        .and_then(|header| usize::try_from(header.last_offset().min(log_end - 1) + 1 - speo).ok())
        .map_or(max_records, |n| n.max(max_records))
}

/// Offsets among `offsets` (ascending) that a share group does not deliver, in the batches
/// `batches`: those of control batches (transaction markers) and, with `committed_only`
/// (`share.isolation.level=read_committed`), those of aborted transactions' batches.
pub fn uncommitted(
    partition: &Partition,
    batches: &[u8],
    offsets: &[i64],
    committed_only: bool,
) -> Vec<i64> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < batches.len() {
        let Ok(header) = record_batch::BatchHeader::read(&batches[at..]) else {
            break;
        };
        at += header.size as usize;
        let aborted = || {
            partition
                .aborted_transactions(header.base_offset, header.next_offset())
                .iter()
                .any(|a| {
                    a.producer_id == header.producer_id
                        && (a.first_offset..=a.last_offset).contains(&header.base_offset)
                })
        };
        if header.is_control() || (committed_only && header.is_transactional() && aborted()) {
            let from = offsets.partition_point(|o| *o < header.base_offset);
            let to = offsets.partition_point(|o| *o <= header.last_offset());
            out.extend_from_slice(&offsets[from..to]);
        }
    }
    out
}

/// A record's deadline, if it has one that can be read.
fn deadline(record: &DecodedRecord) -> Option<i64> {
    parse_deadline(record.header(DEADLINE_HEADER)?)
}

/// Offsets among `offsets` whose record in `batches` has a deadline before `now` (the first
/// `deadline` header of a record, as fair turns read it). Batches are read only if they may
/// carry the header (compressed, or a record's framing names it).
pub fn past_deadline(batches: &[u8], offsets: &[i64], now: i64) -> Vec<i64> {
    let mut expired = Vec::new();
    let mut at = 0;
    while at < batches.len() {
        let Ok(header) = record_batch::BatchHeader::read(&batches[at..]) else {
            break;
        };
        let bytes = &batches[at..at + header.size as usize];
        at += header.size as usize;
        // Compressed or unreadable framing: read the records to know.
        let may_have = record_batch::has_header(bytes, DEADLINE_HEADER.as_bytes()).unwrap_or(true);
        if !may_have {
            continue;
        }
        let found = match super::meta::deadlines(&header, bytes) {
            Some(found) => found,
            None => match batch::decode(bytes) {
                Ok(records) => records.iter().map(|r| (r.offset, deadline(r))).collect(),
                Err(_) => continue,
            },
        };
        expired.extend(
            found
                .into_iter()
                .filter(|(offset, _)| offsets.binary_search(offset).is_ok())
                .filter(|(_, deadline)| deadline.is_some_and(|d| d < now))
                .map(|(offset, _)| offset),
        );
    }
    expired
}

/// Where an archived record came from.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub partition: i32,
}

/// The `__dlq.errors.message` of a dead letter: Kafka 4.4's texts for the two reasons Kafka
/// has (a client's reject, the delivery limit), lograil's for a passed deadline.
pub fn reason_message(reason: ArchiveReason) -> &'static str {
    match reason {
        ArchiveReason::Rejected => "Offset rejected by client.",
        ArchiveReason::DeliveryLimit => "Offset delivery count exceeded the threshold.",
        ArchiveReason::Expired => "Offset deadline passed before delivery.",
        ArchiveReason::Gap => "Offset is a gap.",
    }
}

/// Dead letters of `archived` records of `partition`, as Kafka 4.4 writes them (KIP-1191):
/// the context headers `__dlq.errors.topic`, `.partition`, `.offset`, `.group`,
/// `.delivery.count` and `.message`, then lograil's [`ATTEMPTS_HEADER`]; the record's key and
/// value only with `copy_record` (the group's `errors.deadletterqueue.copy.record.enable`), and
/// never its headers; timestamped `now`. A record that can no longer be read (deleted by
/// retention meanwhile) gets the headers only, as in Kafka.
pub fn dead_letters(
    partition: &Partition,
    source: Source<'_>,
    archived: &[Archived],
    copy_record: bool,
    now: i64,
) -> Result<Vec<HeadedRecord>, ReadError> {
    let mut out = Vec::with_capacity(archived.len());
    for record in archived.iter().filter(|a| a.reason.dead_letters()) {
        let (key, value) = if copy_record {
            original(partition, record.offset)?
                .map(|r| (r.key, r.value))
                .unwrap_or_default()
        } else {
            (None, None)
        };
        let text = |s: String| Some(Bytes::from(s));
        let headers = vec![
            (DLQ_ERRORS_TOPIC.to_string(), text(source.topic.to_string())),
            (
                DLQ_ERRORS_PARTITION.to_string(),
                text(source.partition.to_string()),
            ),
            (
                DLQ_ERRORS_OFFSET.to_string(),
                text(record.offset.to_string()),
            ),
            (DLQ_ERRORS_GROUP.to_string(), text(source.group.to_string())),
            (
                DLQ_ERRORS_DELIVERY_COUNT.to_string(),
                text(record.deliveries.to_string()),
            ),
            (
                DLQ_ERRORS_MESSAGE.to_string(),
                text(reason_message(record.reason).to_string()),
            ),
            (
                ATTEMPTS_HEADER.to_string(),
                text(attempts_json(&record.history)),
            ),
        ];
        out.push(HeadedRecord {
            key,
            value,
            timestamp: now,
            headers,
        });
    }
    Ok(out)
}

/// The record at `offset`, if it can still be read.
fn original(partition: &Partition, offset: i64) -> Result<Option<DecodedRecord>, ReadError> {
    let read = match partition.read(offset, 1) {
        Ok(read) => read,
        Err(ReadError::OffsetOutOfRange { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Ok(decoded) = batch::decode(&read.records) else {
        return Ok(None);
    };
    Ok(decoded.into_iter().find(|r| r.offset == offset))
}

/// `[{"member":…,"acquired_at":…,"ended_at":…,"outcome":…}, …]`
fn attempts_json(attempts: &[Attempt]) -> String {
    let items: Vec<serde_json::Value> = attempts
        .iter()
        .map(|a| {
            serde_json::json!({
                "member": a.member,
                "acquired_at": a.acquired_at,
                "ended_at": a.ended_at,
                "outcome": match a.outcome {
                    Outcome::Accepted => "accepted",
                    Outcome::Released => "released",
                    Outcome::Rejected => "rejected",
                    Outcome::TimedOut => "lock timed out",
                    Outcome::SessionClosed => "session closed",
                },
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;
    use log_core::batch::HeadedRecord;
    use task_queue::{FairnessKey, Tenant};

    use super::read_acquired;
    use crate::shares::meta::read_meta;

    fn record(key: &str, tenant: &str, timestamp: i64, deadline: Option<&str>) -> HeadedRecord {
        let mut headers = vec![("tenant".to_string(), Some(Bytes::from(tenant.to_string())))];
        if let Some(d) = deadline {
            headers.push(("deadline".to_string(), Some(Bytes::from(d.to_string()))));
        }
        HeadedRecord {
            key: Some(Bytes::from(key.to_string())),
            value: Some(Bytes::from_static(b"v")),
            timestamp,
            headers,
        }
    }

    /// A log of one topic with one partition: its directory (removed when dropped), the log
    /// (its partitions close with it) and the partition.
    fn one_partition() -> (
        tempfile::TempDir,
        log_core::Log,
        std::sync::Arc<log_core::Partition>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let log = log_core::Log::open(dir.path()).unwrap();
        let topic = log
            .create_topic("t", 1, log_core::TopicConfig::default())
            .unwrap();
        let partition = topic.partition(0).unwrap().clone();
        (dir, log, partition)
    }

    #[test]
    fn metas_name_tenants_by_key_or_header_and_fill_offsets_without_records() {
        let (_dir, _log, partition) = one_partition();
        // 0..=2 one batch, 3 a transaction marker, 4..=5 another batch.
        let first = [
            record("k0", "acme", 100, None),
            record("k1", "umbrella", 101, Some("5000")),
            record("k2", "acme", 102, None),
        ];
        partition
            .append(&log_core::batch::build_with_headers(&first))
            .unwrap();
        let marker = record_batch::control_batch(7, 0, 0, record_batch::ControlType::Commit, 103);
        partition.append(&marker).unwrap();
        let second = [record("k4", "acme", 104, None), record("", "", 105, None)];
        partition
            .append(&log_core::batch::build_with_headers(&second))
            .unwrap();

        let tenants = |key: &FairnessKey, from, to| -> Vec<Tenant> {
            read_meta(&partition, from, to, key)
                .unwrap()
                .into_iter()
                .map(|m| m.tenant)
                .collect()
        };
        let t = |s: &str| Tenant::from(s.as_bytes());
        let header = FairnessKey::Header("tenant".to_string());
        assert_eq!(
            tenants(&header, 0, 6),
            vec![t("acme"), t("umbrella"), t("acme"), t(""), t("acme"), t("")]
        );
        assert_eq!(
            tenants(&FairnessKey::Key, 1, 5),
            vec![t("k1"), t("k2"), t(""), t("k4")]
        );
        assert_eq!(tenants(&FairnessKey::None, 4, 6), vec![t(""), t("")]);
        assert_eq!(
            tenants(&FairnessKey::Header("absent".to_string()), 0, 1),
            vec![t("")]
        );
        let metas = read_meta(&partition, 0, 6, &header).unwrap();
        let times: Vec<(i64, Option<i64>)> =
            metas.iter().map(|m| (m.timestamp, m.deadline)).collect();
        assert_eq!(
            times,
            vec![
                (100, None),
                (101, Some(5000)),
                (102, None),
                (103, None),
                (104, None),
                (105, None)
            ]
        );
        // Past the log end: as far as the log goes; nothing at all past it.
        assert_eq!(read_meta(&partition, 5, 100, &header).unwrap().len(), 1);
        assert!(read_meta(&partition, 6, 100, &header).unwrap().is_empty());
        assert!(read_meta(&partition, 3, 3, &header).unwrap().is_empty());
    }

    /// A compressed batch's records are decoded, an uncompressed one's walked in place: the
    /// same metas either way.
    #[test]
    fn metas_of_compressed_and_uncompressed_batches_agree() {
        let (_dir, _log, partition) = one_partition();
        let records = [
            record("k0", "acme", 100, Some("7000")),
            record("k1", "umbrella", 99, None),
        ];
        let plain = log_core::batch::build_with_headers(&records);
        let zipped = log_core::batch::build_with_headers_compressed(
            &records,
            log_core::batch::Compression::Gzip,
        );
        assert!(record_batch::BatchHeader::read(&zipped)
            .unwrap()
            .is_compressed());
        partition.append(&plain).unwrap();
        partition.append(&zipped).unwrap();
        let header = FairnessKey::Header("tenant".to_string());
        let metas = read_meta(&partition, 0, 4, &header).unwrap();
        let seen: Vec<(Tenant, i64, Option<i64>)> = metas
            .into_iter()
            .map(|m| (m.tenant, m.timestamp, m.deadline))
            .collect();
        let t = |s: &str| Tenant::from(s.as_bytes());
        let expected = [(t("acme"), 100, Some(7000)), (t("umbrella"), 99, None)];
        assert_eq!(seen[..2], expected[..]);
        assert_eq!(seen[2..], expected[..]);
    }

    /// Deadlines are found in compressed batches too (decompressed and read in place), only
    /// for the offsets asked about.
    #[test]
    fn past_deadlines_are_found_in_compressed_and_uncompressed_batches() {
        let records = [
            record("k0", "acme", 100, Some("5000")),
            record("k1", "acme", 101, None),
            record("k2", "acme", 102, Some("9000")),
        ];
        let plain = log_core::batch::build_with_headers(&records);
        let zipped = log_core::batch::build_with_headers_compressed(
            &records,
            log_core::batch::Compression::Lz4,
        );
        for batch in [plain, zipped] {
            let header = record_batch::BatchHeader::read(&batch).unwrap();
            // Read in place, not through the decoder.
            let found = crate::shares::meta::deadlines(&header, &batch).unwrap();
            assert_eq!(found, vec![(0, Some(5000)), (1, None), (2, Some(9000))]);
            assert_eq!(super::past_deadline(&batch, &[0, 1, 2], 6000), vec![0]);
            assert_eq!(super::past_deadline(&batch, &[0, 1, 2], 10_000), vec![0, 2]);
            assert!(super::past_deadline(&batch, &[1, 2], 6000).is_empty());
        }
    }

    #[test]
    fn scattered_ranges_get_the_batches_holding_them_each_once_in_order() {
        let (_dir, _log, partition) = one_partition();
        // Ten batches of three records: offsets 3b..3b+2 in batch b.
        for b in 0..10 {
            let records: Vec<HeadedRecord> = (0..3)
                .map(|i| record(&format!("k{}", 3 * b + i), "t", 100, None))
                .collect();
            partition
                .append(&log_core::batch::build_with_headers(&records))
                .unwrap();
        }
        let bases = |bytes: &Bytes| -> Vec<i64> {
            let mut out = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let h = record_batch::BatchHeader::read(&bytes[at..]).unwrap();
                out.push(h.base_offset);
                at += h.size as usize;
            }
            out
        };
        // Two ranges in batch 0, one spanning batches 2-3, one in batch 7.
        let ranges = [(0, 0, 1), (2, 2, 1), (7, 10, 1), (22, 22, 2)];
        assert_eq!(
            bases(&read_acquired(&partition, &ranges).unwrap()),
            vec![0, 6, 9, 21]
        );
        // Contiguous ranges: one zero-copy run.
        let run = read_acquired(&partition, &[(3, 8, 1)]).unwrap();
        assert_eq!(bases(&run), vec![3, 6]);
        assert!(read_acquired(&partition, &[]).unwrap().is_empty());
    }
}
