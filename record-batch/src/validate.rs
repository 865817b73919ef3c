//! Checking that bytes are whole, valid batches: headers, CRCs, and the framing of the records.

use crate::error::BatchError;
use crate::header::BatchHeader;
use crate::layout::{ATTRIBUTES_AT, CRC_AT, HEADER_LEN};
use crate::varint;

/// The CRC-32C a batch should carry: over everything from `attributes` to its end.
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_AT..])
}

/// Validates the single whole batch at the start of `buf` (header, length against `buf`, CRC,
/// and for an uncompressed batch its records' framing against its record count, walking the
/// record lengths without decoding them) and returns its header. `buf` may hold more bytes
/// after the batch.
pub fn validate(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let size = header.size as usize;
    if buf.len() < size {
        return Err(BatchError::Truncated {
            needed: size,
            available: buf.len(),
        });
    }
    check_batch(&buf[..size], &header)?;
    Ok(header)
}

/// What [`validate`] checks beyond the header, on the whole batch `batch`: its CRC (the one its
/// bytes carry) and its records' framing.
fn check_batch(batch: &[u8], header: &BatchHeader) -> Result<(), BatchError> {
    let computed = compute_crc(batch);
    let stored = u32::from_be_bytes(crate::layout::array(batch, CRC_AT));
    if computed != stored {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    check_records(batch, header)
}

/// Checks that the uncompressed whole batch `batch` (with `header`) holds exactly the records
/// its header counts, with offset deltas 0, 1, 2, …, by walking the record lengths. The CRC
/// only says the producer's bytes arrived intact, not that its header tells the truth about
/// them: a count short of the records would store two records at one offset. A compressed
/// batch passes (its records are checked once decompressed, with [`records_fit`]).
pub fn check_records(batch: &[u8], header: &BatchHeader) -> Result<(), BatchError> {
    let records = batch
        .get(HEADER_LEN..header.size as usize)
        .unwrap_or_default();
    if header.is_compressed() || records_fit(records, header.record_count) {
        Ok(())
    } else {
        Err(BatchError::BadRecordOffsets {
            count: header.record_count,
        })
    }
}

/// Validates the single whole batch at the start of `buf` as a broker stored it: a header
/// ([`BatchHeader::read`]), its length against `buf`, its CRC, and for an uncompressed batch
/// its records' framing with [`crate::records::stored_records_fit`] (compaction may have
/// removed records, leaving gaps in the offset deltas). What reads check of a compacted
/// segment; [`validate`] checks a producer's batch.
pub fn validate_stored(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::read(buf)?;
    let size = header.size as usize;
    if buf.len() < size {
        return Err(BatchError::Truncated {
            needed: size,
            available: buf.len(),
        });
    }
    let batch = &buf[..size];
    let computed = compute_crc(batch);
    let stored = u32::from_be_bytes(crate::layout::array(batch, CRC_AT));
    if computed != stored {
        return Err(BatchError::CrcMismatch { stored, computed });
    }
    let records = &batch[HEADER_LEN.min(size)..];
    if header.is_compressed()
        || crate::records::stored_records_fit(
            records,
            header.record_count,
            header.last_offset_delta,
        )
    {
        Ok(header)
    } else {
        Err(BatchError::BadRecordOffsets {
            count: header.record_count,
        })
    }
}

/// Headers of the whole batches that make up `buf`, each parsed ([`BatchHeader::parse`]) and
/// fitting in `buf`, CRCs not checked: a cheap look at producer ids, sequences and codecs.
/// [`validate_parsed`] then finishes the checks of [`validate_all`] without parsing again.
pub fn parse_all(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut headers = Vec::with_capacity(1);
    let mut at = 0;
    while at < buf.len() {
        let header = BatchHeader::parse(&buf[at..]).map_err(|e| e.at(at))?;
        let size = header.size as usize;
        if at + size > buf.len() {
            let truncated = BatchError::Truncated {
                needed: size,
                available: buf.len() - at,
            };
            return Err(truncated.at(at));
        }
        at += size;
        headers.push(header);
    }
    Ok(headers)
}

/// Validates that `buf` is one or more whole, valid batches ([`validate`]) and nothing else.
pub fn validate_all(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut headers = Vec::with_capacity(1);
    let mut at = 0;
    while at < buf.len() {
        let header = validate(&buf[at..]).map_err(|e| e.at(at))?;
        at += header.size as usize;
        headers.push(header);
    }
    Ok(headers)
}

/// Finishes validating `buf` whose headers [`parse_all`] returned: each batch's CRC and
/// records' framing, as [`validate_all`] checks them, the headers not parsed again. `headers`
/// must be what `parse_all(buf)` returned (their sizes are checked to cover `buf` exactly; a
/// debug build also checks every header against the bytes).
pub fn validate_parsed(buf: &[u8], headers: &[BatchHeader]) -> Result<(), BatchError> {
    if headers.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut at = 0;
    for header in headers {
        let size = header.size as usize;
        let Some(batch) = buf.get(at..at + size) else {
            let truncated = BatchError::Truncated {
                needed: size,
                available: buf.len().saturating_sub(at),
            };
            return Err(truncated.at(at));
        };
        debug_assert_eq!(BatchHeader::parse(batch).as_ref(), Ok(header));
        check_batch(batch, header).map_err(|e| e.at(at))?;
        at += size;
    }
    if at != buf.len() {
        // Bytes after the last header's batch: parse_all would have refused them.
        return Err(BatchError::Truncated {
            needed: HEADER_LEN,
            available: buf.len() - at,
        }
        .at(at));
    }
    Ok(())
}

/// Whether `data` holds exactly `count` records (each a varint length, then that many bytes)
/// whose offset deltas are 0, 1, 2, … : the records section of an uncompressed batch, or of a
/// compressed one once decompressed.
pub fn records_fit(data: &[u8], count: i32) -> bool {
    let mut rest = data;
    for expected in 0..i64::from(count) {
        let Some((len, body)) = varint::read(rest) else {
            return false;
        };
        let Some(record) = usize::try_from(len).ok().and_then(|len| body.get(..len)) else {
            return false;
        };
        // attributes (1 byte), timestampDelta (varlong), offsetDelta (varint)
        let delta = record
            .get(1..)
            .and_then(varint::read)
            .and_then(|(_, after_ts)| varint::read(after_ts))
            .map(|(delta, _)| delta);
        if delta != Some(expected) {
            return false;
        }
        rest = &body[record.len()..];
    }
    rest.is_empty()
}

/// Whether a record of the uncompressed batch `batch` has a header named `name`, found by
/// walking the records' framing: keys, values and other headers are skipped, not read. `None`
/// when the batch is compressed or its records do not parse (decode it to know).
pub fn has_header(batch: &[u8], name: &[u8]) -> Option<bool> {
    let header = BatchHeader::read(batch).ok()?;
    if header.is_compressed() {
        return None;
    }
    /// A length-prefixed field (-1: null) skipped; the bytes after it, and the field.
    fn field(buf: &[u8]) -> Option<(&[u8], &[u8])> {
        let (len, rest) = varint::read(buf)?;
        let len = usize::try_from(len.max(0)).ok()?;
        Some((rest.get(len..)?, rest.get(..len)?))
    }
    let mut rest = batch.get(HEADER_LEN..header.size as usize)?;
    for _ in 0..header.record_count {
        let (len, body) = varint::read(rest)?;
        let len = usize::try_from(len).ok()?;
        let record = body.get(..len)?;
        rest = &body[len..];
        // attributes (1 byte), timestampDelta, offsetDelta, key, value, header count
        let (_, after) = varint::read(record.get(1..)?)?;
        let (_, after) = varint::read(after)?;
        let (after, _key) = field(after)?;
        let (after, _value) = field(after)?;
        let (count, mut after) = varint::read(after)?;
        for _ in 0..count.max(0) {
            let (next, key) = field(after)?;
            if key == name {
                return Some(true);
            }
            (after, _) = field(next)?;
        }
    }
    Some(false)
}
