//! A bounded page of a partition's records, read from the log for the console (the message
//! browser and the dead-letter pages): at most [`PAGE_RECORDS`] records within [`READ_BYTES`]
//! of the log, each batch decompressed to at most [`DECODE_MAX`] bytes. Reads the log: call
//! it where blocking is allowed (the console's responder runs on the blocking pool).

use log_core::batch::{self, DecodedRecord};
use log_core::Partition;

/// Records shown per page.
pub const PAGE_RECORDS: usize = 50;
/// Bytes of the log read for one page (the records past it are on the next page).
pub const READ_BYTES: usize = 4 << 20;
/// The first read of a page: later ones double it, within the page's budget.
const FIRST_CHUNK: usize = 64 << 10;
/// Most bytes one batch may decompress to.
const DECODE_MAX: usize = 8 << 20;

/// One page of a partition from an offset.
#[derive(Debug)]
pub struct Page {
    pub records: Vec<DecodedRecord>,
    /// The offset the next page starts at (`None` at the log end).
    pub next: Option<i64>,
    /// Why reading stopped early (a damaged segment, a batch that does not decode).
    pub error: Option<String>,
}

/// Reads the records of `partition` from `from` (raised to the log start) that `keep`
/// accepts, at most [`PAGE_RECORDS`] of them and at most [`READ_BYTES`] of the log.
pub fn read(partition: &Partition, from: i64, keep: impl Fn(&DecodedRecord) -> bool) -> Page {
    read_within(partition, from, READ_BYTES, keep)
}

/// [`read`] within `budget` bytes of the log (a page over several partitions shares
/// [`READ_BYTES`] between them).
pub fn read_within(
    partition: &Partition,
    from: i64,
    budget: usize,
    keep: impl Fn(&DecodedRecord) -> bool,
) -> Page {
    let from = from.max(partition.log_start_offset());
    let end = partition.log_end_offset();
    let mut page = Page {
        records: Vec::new(),
        next: None,
        error: None,
    };
    let mut at = from;
    let mut budget = budget;
    // Read in chunks that double: a page of small records reads and decodes little of the log.
    let mut chunk = FIRST_CHUNK;
    while at < end && page.records.len() < PAGE_RECORDS && budget > 0 {
        let read = match partition.read(at, chunk.min(budget)) {
            Ok(read) => read,
            Err(e) => {
                page.error = Some(e.to_string());
                break;
            }
        };
        if read.records.is_empty() {
            break;
        }
        budget = budget.saturating_sub(read.records.len());
        chunk = chunk.saturating_mul(2);
        let decoded = match batch::decode_bounded(&read.records, DECODE_MAX) {
            Ok(decoded) => decoded,
            Err(e) => {
                page.error = Some(e.to_string());
                break;
            }
        };
        let Some(last) = decoded.last().map(|r| r.offset) else {
            break;
        };
        let first = at;
        for record in decoded.into_iter().filter(|r| r.offset >= first) {
            if page.records.len() == PAGE_RECORDS {
                break;
            }
            at = record.offset + 1;
            if keep(&record) {
                page.records.push(record);
            }
        }
        if page.records.len() < PAGE_RECORDS {
            at = at.max(last + 1);
        }
    }
    if at < end && page.error.is_none() {
        page.next = Some(at);
    }
    page
}
