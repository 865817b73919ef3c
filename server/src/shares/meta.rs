//! What fair turns and the overload mode read of the log: each record's tenant, timestamp and
//! deadline ([`RecordMeta`]), and the deadlines a share fetch checks. A batch's records are
//! walked in place (a compressed one once decompressed): no decoding into records, no
//! allocation but the tenant's.

use log_core::batch::{self, DecodedRecord};
use log_core::{Partition, ReadError};
use record_batch::records::{records, RawRecord};
use record_batch::{BatchHeader, HEADER_LEN};
use task_queue::{FairnessKey, RecordMeta, Tenant};

use vocabulary::headers::DEADLINE as DEADLINE_HEADER;

use super::READ_BYTES;

/// The tenant of records without a key or the named header (and of offsets with no record).
fn no_tenant() -> Tenant {
    Tenant::from(&[][..])
}

/// What fair turns and the overload mode need of the records at offsets `from..to` (one
/// [`RecordMeta`] per offset, from `from` on, as far as one read of at most [`READ_BYTES`]
/// reaches, so a call is bounded): the tenant per `key` (the record key, or the first header of
/// that name; none: the empty tenant), the record's timestamp and its deadline header. An
/// offset with no record (a transaction marker, a record compacted away, a gap between
/// batches) gets the empty tenant, its batch's timestamp and no deadline. Empty when nothing
/// at `from` can be read yet.
pub fn read_meta(
    partition: &Partition,
    from: i64,
    to: i64,
    key: &FairnessKey,
) -> Result<Vec<RecordMeta>, ReadError> {
    let mut metas: Vec<RecordMeta> = Vec::new();
    if from >= to {
        return Ok(metas);
    }
    let read = match partition.read(from, READ_BYTES) {
        Ok(read) => read,
        Err(ReadError::OffsetOutOfRange { .. }) => return Ok(metas),
        Err(e) => return Err(e),
    };
    let mut next = from;
    let mut at = 0;
    while at < read.records.len() && next < to {
        let header = BatchHeader::read(&read.records[at..]).map_err(|e| ReadError::Corrupt {
            path: partition.dir().to_path_buf(),
            position: at as u64,
            reason: e.to_string(),
        })?;
        let end = at + header.size as usize;
        let Some(bytes) = read.records.get(at..end) else {
            // A batch cut by the read's end: the next call starts with it.
            break;
        };
        at = end;
        if header.next_offset() <= next {
            continue;
        }
        let filler = || RecordMeta {
            tenant: no_tenant(),
            timestamp: header.max_timestamp,
            deadline: None,
        };
        // Offsets before this batch that no batch holds.
        while next < header.base_offset.min(to) {
            metas.push(filler());
            next += 1;
        }
        let records = if header.is_control() {
            Vec::new()
        } else {
            walked(&header, bytes, key).unwrap_or_else(|| decoded(partition, bytes, key))
        };
        let mut records = records.into_iter().peekable();
        let last = header.last_offset().min(to - 1);
        while next <= last {
            while records.next_if(|(offset, _)| *offset < next).is_some() {}
            match records.next_if(|(offset, _)| *offset == next) {
                Some((_, meta)) => metas.push(meta),
                None => metas.push(filler()),
            }
            next += 1;
        }
    }
    Ok(metas)
}

/// The metas of a batch's records by offset, read from their framing in place (decompressed
/// first if the batch is compressed); `None` when that cannot be done ([`with_records`]), and
/// [`decoded`] says.
fn walked(header: &BatchHeader, bytes: &[u8], key: &FairnessKey) -> Option<Vec<(i64, RecordMeta)>> {
    let append_time = header.append_time();
    with_records(header, bytes, |section| {
        records(section)
            .map(|record| {
                let record = record?;
                let tenant = match key {
                    FairnessKey::None => None,
                    FairnessKey::Key => record.key,
                    FairnessKey::Header(name) => record.header(name.as_bytes()).flatten(),
                };
                let timestamp = append_time
                    .unwrap_or(header.base_timestamp.wrapping_add(record.timestamp_delta));
                let meta = RecordMeta {
                    tenant: tenant.map_or_else(no_tenant, Tenant::from),
                    timestamp,
                    deadline: deadline_of(&record),
                };
                Some((header.base_offset.wrapping_add(record.offset_delta), meta))
            })
            .collect()
    })
}

/// Each record's offset and deadline in `batch`, read in place as [`walked`] reads them.
pub(super) fn deadlines(header: &BatchHeader, batch: &[u8]) -> Option<Vec<(i64, Option<i64>)>> {
    with_records(header, batch, |section| {
        records(section)
            .map(|record| {
                let record = record?;
                Some((
                    header.base_offset.wrapping_add(record.offset_delta),
                    deadline_of(&record),
                ))
            })
            .collect()
    })
}

/// `f` of `batch`'s records section (decompressed if the batch is compressed). `None`, for a
/// decoder to say instead, when the batch carries a delete horizon in place of its base
/// timestamp, does not decompress, or `f` finds its framing broken. Read in place, a record's
/// header is the first of its name, and a LogAppendTime batch's timestamp is its append time,
/// as Kafka's broker reads them.
fn with_records<T>(
    header: &BatchHeader,
    batch: &[u8],
    f: impl FnOnce(&[u8]) -> Option<T>,
) -> Option<T> {
    if header.delete_horizon().is_some() {
        return None;
    }
    if header.is_compressed() {
        let section = batch::decompress_records(batch, header, 0, batch::DECODE_MAX_BYTES).ok()?;
        return f(&section);
    }
    f(batch.get(HEADER_LEN..)?)
}

/// A deadline header's value: 8 bytes big-endian, or decimal text.
pub(super) fn parse_deadline(value: &[u8]) -> Option<i64> {
    match <[u8; 8]>::try_from(value) {
        Ok(bytes) => Some(i64::from_be_bytes(bytes)),
        Err(_) => std::str::from_utf8(value).ok()?.trim().parse().ok(),
    }
}

/// A record's deadline header (the first of that name), if it reads as one.
fn deadline_of(record: &RawRecord<'_>) -> Option<i64> {
    record
        .header(DEADLINE_HEADER.as_bytes())
        .flatten()
        .and_then(parse_deadline)
}

/// The metas of a batch's records by offset, decoded (a header of a repeated name is its last
/// value there: kafka-protocol keeps one per name). A batch that cannot be decoded is
/// served (and reported) as it is by the fetch that reads it; its records count under the
/// empty tenant here, rather than stalling the window on a meta that can never be learned.
fn decoded(partition: &Partition, bytes: &[u8], key: &FairnessKey) -> Vec<(i64, RecordMeta)> {
    let records = batch::decode(bytes).unwrap_or_else(|e| {
        tracing::warn!(partition = partition.name(), error = %e, "records of a batch unreadable for fair turns");
        Vec::new()
    });
    records
        .iter()
        .map(|record| {
            let meta = RecordMeta {
                tenant: tenant(record, key),
                timestamp: record.timestamp,
                deadline: record
                    .header(DEADLINE_HEADER)
                    .and_then(|v| parse_deadline(v)),
            };
            (record.offset, meta)
        })
        .collect()
}

/// A decoded record's tenant under `key`.
fn tenant(record: &DecodedRecord, key: &FairnessKey) -> Tenant {
    let bytes = match key {
        FairnessKey::None => None,
        FairnessKey::Key => record.key.as_ref(),
        FairnessKey::Header(name) => record.header(name),
    };
    bytes.map_or_else(no_tenant, |b| Tenant::from(b.as_ref()))
}
