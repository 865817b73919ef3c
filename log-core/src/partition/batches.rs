//! Iteration over the batch headers of a partition, without decoding records (for owners that
//! rebuild state from what the log holds, such as idempotent-producer state).

use bytes::Bytes;
use record_batch::BatchHeader;

use super::Partition;
use crate::error::ReadError;

/// Bytes read from the log at a time while iterating.
const CHUNK: usize = 1 << 20;

/// The headers of a partition's batches from a given offset to the log end, oldest first.
/// A damaged stretch is yielded as [`ReadError::Damaged`] and stepped over; any other error
/// ends the walk, after it is yielded.
#[derive(Debug)]
pub struct BatchHeaders<'a> {
    partition: &'a Partition,
    /// Offset of the next batch to read once `chunk` is used up.
    next: i64,
    chunk: Bytes,
    at: usize,
    failed: bool,
}

impl Partition {
    /// The headers of every batch from the one holding `from` to the log end.
    pub fn batch_headers(&self, from: i64) -> BatchHeaders<'_> {
        BatchHeaders {
            partition: self,
            next: from,
            chunk: Bytes::new(),
            at: 0,
            failed: false,
        }
    }
}

impl Iterator for BatchHeaders<'_> {
    type Item = Result<BatchHeader, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.at >= self.chunk.len() {
            if self.next >= self.partition.log_end_offset() {
                return None;
            }
            match self.partition.read(self.next, CHUNK) {
                Ok(read) if read.records.is_empty() => return None,
                Ok(read) => {
                    self.chunk = read.records;
                    self.at = 0;
                }
                Err(ReadError::Damaged { path, damage }) if damage.end_offset > self.next => {
                    self.next = damage.end_offset;
                    return Some(Err(ReadError::Damaged { path, damage }));
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
        // `read` returns whole batches whose headers it has checked. A batch the cleaner thinned
        // holds fewer records than its offset range: read, not parsed as a producer's.
        match BatchHeader::read(&self.chunk[self.at..]) {
            Ok(header) => {
                self.at += header.size as usize;
                self.next = header.next_offset();
                Some(Ok(header))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(ReadError::Corrupt {
                    path: self.partition.dir.clone(),
                    position: self.at as u64,
                    reason: e.to_string(),
                }))
            }
        }
    }
}
