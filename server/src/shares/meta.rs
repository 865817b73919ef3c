//! What fair turns and the overload mode read of the log: each record's tenant, timestamp and
//! deadline ([`RecordMeta`]). An uncompressed batch's records are walked in place (no copy,
//! no allocation but the tenant's); a compressed one is decoded.

use log_core::batch::{self, DecodedRecord};
use log_core::{Partition, ReadError};
use record_batch::{BatchHeader, TimestampType, HEADER_LEN};
use task_queue::{FairnessKey, RecordMeta, Tenant};

use super::delivery::{parse_deadline, DEADLINE_HEADER, READ_BYTES};

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

/// The metas of an uncompressed batch's records by offset, read from their framing in place;
/// `None` when the batch is compressed, carries a delete horizon in place of its base
/// timestamp, or its framing breaks (then [`decoded`] says).
fn walked(header: &BatchHeader, bytes: &[u8], key: &FairnessKey) -> Option<Vec<(i64, RecordMeta)>> {
    if header.is_compressed() || header.delete_horizon().is_some() {
        return None;
    }
    let append_time = header.timestamp_type() == TimestampType::LogAppendTime;
    record_batch::records::records(bytes.get(HEADER_LEN..)?)
        .map(|record| {
            let record = record?;
            let tenant = match key {
                FairnessKey::None => None,
                FairnessKey::Key => record.key,
                FairnessKey::Header(name) => record.header(name.as_bytes()).flatten(),
            };
            let timestamp = if append_time {
                header.max_timestamp
            } else {
                header.base_timestamp.wrapping_add(record.timestamp_delta)
            };
            let meta = RecordMeta {
                tenant: tenant.map_or_else(no_tenant, Tenant::from),
                timestamp,
                deadline: record
                    .header(DEADLINE_HEADER.as_bytes())
                    .flatten()
                    .and_then(parse_deadline),
            };
            Some((header.base_offset + record.offset_delta, meta))
        })
        .collect()
}

/// The metas of a batch's records by offset, decoded. A batch that cannot be decoded is
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
