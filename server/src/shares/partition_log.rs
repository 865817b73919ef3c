//! A log partition as share acquisition reads it: task-queue's [`PartitionLog`] over
//! log-core, the reads in `delivery.rs`.

use bytes::Bytes;
use log_core::{Partition, ReadError};
use task_queue::{FairnessKey, PartitionLog, RecordMeta};

use super::delivery;

/// One topic partition of the log, for [`task_queue::acquire`].
pub struct LogPartition<'a>(pub &'a Partition);

impl PartitionLog for LogPartition<'_> {
    type Records = Bytes;
    type Error = ReadError;

    fn name(&self) -> &str {
        self.0.name()
    }

    fn log_start_offset(&self) -> i64 {
        self.0.log_start_offset()
    }

    fn last_stable_offset(&self) -> i64 {
        self.0.last_stable_offset()
    }

    fn high_watermark(&self) -> i64 {
        self.0.log_end_offset()
    }

    fn to_batch_end(&self, from: i64, max_records: usize, log_end: i64) -> usize {
        delivery::to_batch_end(self.0, from, max_records, log_end)
    }

    fn read_meta(
        &self,
        from: i64,
        to: i64,
        key: &FairnessKey,
    ) -> Result<Vec<RecordMeta>, ReadError> {
        super::meta::read_meta(self.0, from, to, key)
    }

    fn read_batches(&self, ranges: &[(i64, i64, u16)]) -> Result<Bytes, ReadError> {
        delivery::read_acquired(self.0, ranges)
    }

    fn uncommitted(&self, batches: &Bytes, offsets: &[i64], committed_only: bool) -> Vec<i64> {
        delivery::uncommitted(self.0, batches, offsets, committed_only)
    }

    fn past_deadline(&self, batches: &Bytes, offsets: &[i64], now: i64) -> Vec<i64> {
        delivery::past_deadline(batches, offsets, now)
    }
}
