//! What an append checks of each record, beyond its batch's validation: a compacted topic's
//! keys, and a CreateTime topic's timestamp window (KIP-937). One walk over each batch's
//! records, a compressed batch decompressed once (and checked as
//! [`crate::batch::validate_compressed`] checks it); each refused record is named (KIP-467).

use record_batch::{BatchHeader, TimestampType, HEADER_LEN};

use crate::batch;
use crate::config::TopicConfig;
use crate::error::{BatchError, RecordError};

/// A record timestamp's "none" (Kafka's `RecordBatch.NO_TIMESTAMP`): never checked.
const NO_TIMESTAMP: i64 = -1;

/// What to check of every record of an append.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordChecks {
    /// A compacted topic takes keyed records only.
    keyed: bool,
    /// The timestamps accepted, if bounded.
    window: Option<Window>,
}

/// The record timestamps a CreateTime topic accepts at `now` (inclusive bounds).
#[derive(Debug, Clone, Copy)]
struct Window {
    now: i64,
    before_max_ms: i64,
    after_max_ms: i64,
}

impl Window {
    fn admits(&self, timestamp: i64) -> bool {
        let diff = self.now.saturating_sub(timestamp);
        diff <= self.before_max_ms && diff.saturating_neg() <= self.after_max_ms
    }

    /// Kafka's words for a timestamp out of the window (its bounds computed as Java does).
    fn refusal(&self, timestamp: i64, offset: i64) -> String {
        format!(
            "Timestamp {timestamp} of message with offset {offset} is out of range. The \
             timestamp should be within [{}, {}]",
            self.now.wrapping_sub(self.before_max_ms),
            self.now.wrapping_add(self.after_max_ms)
        )
    }
}

/// The records an append refuses one by one, and whether any for its timestamp (then the
/// partition's error is INVALID_TIMESTAMP, else INVALID_RECORD, as in Kafka).
#[derive(Debug, Default)]
pub(crate) struct Refused {
    pub errors: Vec<RecordError>,
    pub invalid_timestamp: bool,
}

impl RecordChecks {
    /// What `config` asks of the records of an append at `now` (ms since the epoch).
    pub fn of(config: &TopicConfig, now: i64) -> RecordChecks {
        let as_i64 = |ms: u64| i64::try_from(ms).unwrap_or(i64::MAX);
        let (before, after) = (
            as_i64(config.timestamp_before_max_ms),
            as_i64(config.timestamp_after_max_ms),
        );
        let bounded = before < i64::MAX || after < i64::MAX;
        let window =
            (config.timestamp_type == TimestampType::CreateTime && bounded).then_some(Window {
                now,
                before_max_ms: before,
                after_max_ms: after,
            });
        RecordChecks {
            keyed: config.cleanup.compact,
            window,
        }
    }

    /// Whether any record is to be looked at.
    pub fn any(&self) -> bool {
        self.keyed || self.window.is_some()
    }

    /// Walks the records of every batch of `records` (validated; `headers` theirs), a
    /// compressed batch decompressed to at most `max` bytes and checked; the refused ones,
    /// each by its index among all the records (from 0).
    pub fn check(
        &self,
        partition: &str,
        records: &[u8],
        headers: &[BatchHeader],
        max: usize,
    ) -> Result<Refused, BatchError> {
        let mut refused = Refused::default();
        let (mut at, mut first) = (0usize, 0u32);
        for header in headers {
            let size = header.size as usize;
            if !header.is_control() {
                let whole = &records[at..at + size];
                let decompressed;
                let plain: &[u8] = if header.is_compressed() {
                    decompressed = batch::decompressed_records(whole, header, at, max)?;
                    &decompressed
                } else {
                    &whole[HEADER_LEN..]
                };
                self.check_batch(partition, header, plain, first, &mut refused);
            }
            at += size;
            first = first.saturating_add(u32::try_from(header.record_count).unwrap_or(0));
        }
        Ok(refused)
    }

    /// One batch's records (`plain`, uncompressed), the first of them at index `first`.
    fn check_batch(
        &self,
        partition: &str,
        header: &BatchHeader,
        plain: &[u8],
        first: u32,
        refused: &mut Refused,
    ) {
        let records = record_batch::records::records(plain);
        for (index, record) in (first..).zip(records) {
            let Some(record) = record else {
                // Validation found every record whole: nothing more to read.
                break;
            };
            if self.keyed && record.key.is_none() {
                refused.errors.push(RecordError {
                    index,
                    message: format!(
                        "Compacted topic cannot accept message without key in topic partition \
                         {partition}"
                    ),
                });
                continue;
            }
            let Some(window) = &self.window else {
                continue;
            };
            let timestamp = header.base_timestamp.saturating_add(record.timestamp_delta);
            if timestamp != NO_TIMESTAMP && !window.admits(timestamp) {
                let offset = header.base_offset.saturating_add(record.offset_delta);
                refused.errors.push(RecordError {
                    index,
                    message: window.refusal(timestamp, offset),
                });
                refused.invalid_timestamp = true;
            }
        }
    }
}
