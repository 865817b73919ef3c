//! A batch of records for one partition, from the first `send` into it to its acknowledgement:
//! the records waiting (each with where its outcome goes) and, once encoded, the bytes every
//! attempt sends. The accumulator, the encoder and the sender share these.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use super::record::RecordMetadata;
use super::DeliveryError;

/// A record accepted by `send`, waiting for its batch to be acknowledged.
#[derive(Debug)]
pub(super) struct PendingRecord {
    /// Taken out when the batch is encoded (the encoded batch holds them from then on).
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    pub timestamp: i64,
    /// Bytes of `buffer.memory` it holds.
    pub size: usize,
    pub reply: Reply,
}

/// Where a record's outcome goes.
pub(super) enum Reply {
    Future(oneshot::Sender<Result<RecordMetadata, DeliveryError>>),
    Callback(Box<dyn FnOnce(Result<RecordMetadata, DeliveryError>) + Send>),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reply::Future(_) => "Reply::Future",
            Reply::Callback(_) => "Reply::Callback",
        })
    }
}

impl Reply {
    pub(super) fn send(self, outcome: Result<RecordMetadata, DeliveryError>) {
        match self {
            // The future may have been dropped: nobody is waiting.
            Reply::Future(tx) => {
                let _ = tx.send(outcome);
            }
            Reply::Callback(f) => f(outcome),
        }
    }
}

/// A batch once encoded: its bytes are what every attempt sends (the same sequence numbers on
/// every retry, so the broker can drop duplicates).
#[derive(Debug, Clone)]
pub(super) struct Encoded {
    pub bytes: Bytes,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 without idempotence.
    pub base_sequence: i32,
}

/// Records for one partition, sent together.
#[derive(Debug)]
pub(super) struct Batch {
    pub topic: Arc<str>,
    pub partition: i32,
    pub records: Vec<PendingRecord>,
    /// Estimated bytes (the sum of the records' sizes).
    pub bytes: usize,
    pub created: Instant,
    pub flush_generation: u64,
    /// Attempts that failed so far.
    pub attempts: u32,
    /// Not to be sent again before this (retry backoff).
    pub retry_at: Option<Instant>,
    pub encoded: Option<Encoded>,
    /// The RecordBatch being written: a header placeholder, then the first `written` records
    /// (see `encode::write_pending`); taken when the batch is encoded.
    pub open: BytesMut,
    pub written: usize,
    /// The first record's timestamp, and the largest, of the records written.
    pub base_timestamp: i64,
    pub max_timestamp: i64,
}

impl Batch {
    pub(super) fn sequence(&self) -> Option<i32> {
        self.encoded
            .as_ref()
            .map(|e| e.base_sequence)
            .filter(|s| *s >= 0)
    }

    pub(super) fn record_count(&self) -> i32 {
        i32::try_from(self.records.len()).unwrap_or(i32::MAX)
    }
}
