//! Walking the records of a batch's records section (uncompressed, or once decompressed)
//! without decoding their headers: each record's bytes, offset delta, timestamp delta, key and
//! whether its value is null. What the log cleaner needs to keep or drop records by key, and
//! what checks a stored batch's framing.

use crate::varint;

/// One record of a records section, borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// The whole record as stored: its length varint, then its body.
    pub bytes: &'a [u8],
    /// The record's offset minus the batch's base offset.
    pub offset_delta: i64,
    /// The record's timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// `None` is a null key.
    pub key: Option<&'a [u8]>,
    /// A null value: a tombstone in a compacted topic.
    pub value_is_null: bool,
    /// The record's attributes byte.
    pub attributes: u8,
    /// Its bytes after the offset delta: key, value and headers.
    pub rest: &'a [u8],
}

impl RawRecord<'_> {
    /// Appends the record to `out` with its timestamp delta moved by `shift` (its batch's base
    /// timestamp moved the other way), the rest of its bytes as they are.
    pub fn put_shifted(&self, shift: i64, out: &mut Vec<u8>) {
        let delta = self.timestamp_delta.saturating_add(shift);
        let body = 1 + varint::len(delta) + varint::len(self.offset_delta) + self.rest.len();
        varint::put(out, body as i64);
        out.push(self.attributes);
        varint::put(out, delta);
        varint::put(out, self.offset_delta);
        out.extend_from_slice(self.rest);
    }
}

impl<'a> RawRecord<'a> {
    /// The value of the record's first header named `name`: `None` when it has none (or its
    /// headers do not parse), `Some(None)` when that header's value is null.
    pub fn header(&self, name: &[u8]) -> Option<Option<&'a [u8]>> {
        let (_key, after) = field(self.rest)?;
        let (_value, after) = field(after)?;
        let (count, mut after) = varint::read(after)?;
        for _ in 0..count.max(0) {
            let (key, next) = field(after)?;
            let (value, next) = field(next)?;
            if key == Some(name) {
                return Some(value);
            }
            after = next;
        }
        None
    }
}

/// The records of `data`, one at a time; an item is `None` where the framing breaks (the walk
/// ends there).
pub fn records(data: &[u8]) -> impl Iterator<Item = Option<RawRecord<'_>>> + '_ {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let buf = rest.filter(|r| !r.is_empty())?;
        let record = next(buf);
        rest = record.map(|r| &buf[r.bytes.len()..]);
        Some(record)
    })
}

/// The record at the start of `buf`.
fn next(buf: &[u8]) -> Option<RawRecord<'_>> {
    let (len, after_len) = varint::read(buf)?;
    let len = usize::try_from(len).ok()?;
    let body = after_len.get(..len)?;
    let whole = &buf[..buf.len() - after_len.len() + len];
    // attributes (1 byte), timestampDelta (varlong), offsetDelta (varint), key, value, headers
    let attributes = *body.first()?;
    let (timestamp_delta, after) = varint::read(body.get(1..)?)?;
    let (offset_delta, rest) = varint::read(after)?;
    let (key, after) = field(rest)?;
    let (value, _) = field(after)?;
    Some(RawRecord {
        bytes: whole,
        offset_delta,
        timestamp_delta,
        key,
        value_is_null: value.is_none(),
        attributes,
        rest,
    })
}

/// A length-prefixed field of a record (key, value, a header's name or value; -1: null) and
/// the bytes after it; `None` where it runs past `buf`.
pub fn field(buf: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    let (len, rest) = varint::read(buf)?;
    if len < 0 {
        return Some((None, rest));
    }
    let len = usize::try_from(len).ok()?;
    Some((Some(rest.get(..len)?), rest.get(len..)?))
}

/// Whether `data` holds exactly `count` records whose offset deltas rise strictly and stay
/// within `0..=last_offset_delta`: the records section of a batch as a broker stores it, where
/// compaction may have removed records (Kafka keeps the batch's base offset and last offset
/// delta). A producer's batch must be contiguous ([`crate::records_fit`]).
pub fn stored_records_fit(data: &[u8], count: i32, last_offset_delta: i32) -> bool {
    let mut seen = 0i64;
    let mut previous = -1i64;
    for record in records(data) {
        let Some(record) = record else {
            return false;
        };
        if record.offset_delta <= previous || record.offset_delta > i64::from(last_offset_delta) {
            return false;
        }
        previous = record.offset_delta;
        seen += 1;
    }
    seen == i64::from(count)
}
