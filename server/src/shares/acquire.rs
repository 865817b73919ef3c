//! Acquisition on ShareFetch: a member's records across its partitions, in turn, each
//! partition's by one call of task-queue's [`task_queue::acquire`] over the log
//! ([`LogPartition`]), and what it changed recorded (archived records dead-lettered).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use log_core::Log;
use task_queue::{Fetch, ShareConfig, ShareKey};

use super::partition_log::LogPartition;
use super::{
    FetchError, FetchLimits, PartitionFetch, PartitionRef, Pending, Requester, Shares,
    TopicPartition,
};

impl Shares {
    /// Acquires up to `max_records` records for the requesting member across `partitions`
    /// (starting at `rotate`, so partitions take turns being first), with the batches that hold
    /// them. A record past its deadline is archived instead (and dead-lettered), never
    /// delivered.
    pub fn acquire(
        &self,
        log: &Log,
        from: Requester<'_>,
        partitions: &[TopicPartition],
        rotate: usize,
        limits: FetchLimits,
        pending: &mut Pending,
    ) -> Vec<PartitionFetch> {
        let config = self.config(from.group);
        let max_bytes = limits.bytes;
        let mut left = limits.records;
        let mut bytes = 0usize;
        let mut out = Vec::new();
        let count = partitions.len();
        for i in 0..count {
            let tp = partitions[(rotate + i) % count.max(1)];
            let fetched = if left == 0 || bytes >= max_bytes {
                continue;
            } else {
                let limits = FetchLimits {
                    records: left,
                    ..limits
                };
                self.acquire_one(log, from, tp, limits, &config, pending)
            };
            left = left.saturating_sub(
                fetched
                    .acquired
                    .iter()
                    .map(|(f, l, _)| (l - f + 1) as usize)
                    .sum(),
            );
            bytes += fetched.records.len();
            out.push(fetched);
        }
        out
    }

    /// Acquires records of one partition ([`task_queue::acquire`] over the log) and records
    /// what changed under the share partition's lock.
    fn acquire_one(
        &self,
        log: &Log,
        from: Requester<'_>,
        (topic_id, index): TopicPartition,
        limits: FetchLimits,
        config: &ShareConfig,
        pending: &mut Pending,
    ) -> PartitionFetch {
        let fail = |error| PartitionFetch {
            topic_partition: (topic_id, index),
            error: Some(error),
            records: Bytes::new(),
            acquired: Vec::new(),
        };
        let Some(topic) = log.topic_by_id(topic_id) else {
            return fail(FetchError::Protocol(ResponseError::UnknownTopicId));
        };
        let Some(partition) = u32::try_from(index)
            .ok()
            .and_then(|i| topic.partition(i).cloned())
        else {
            return fail(FetchError::Protocol(ResponseError::UnknownTopicOrPartition));
        };
        let key = ShareKey::new(from.group, topic_id, index);
        let at = PartitionRef {
            key: &key,
            topic: &topic,
            partition: &partition,
            config,
        };
        let state = self.state(&key, &partition, config, from.now, pending);
        let fetch = Fetch {
            member: from.member,
            now: from.now,
            max_records: limits.records,
            whole_batches: limits.whole_batches,
        };
        let (state, acquired) =
            task_queue::acquire(&state, &LogPartition(&partition), fetch, config);
        match acquired {
            Ok(acquired) => match self.record(log, at, &state, &acquired.changes, pending) {
                Ok(()) => PartitionFetch {
                    topic_partition: (topic_id, index),
                    error: None,
                    records: acquired.records,
                    acquired: acquired.ranges,
                },
                Err(error) => fail(FetchError::Protocol(error)),
            },
            Err(failed) => {
                tracing::error!(partition = partition.name(), error = %failed.error, "reading acquired records failed");
                let _ = self.record(log, at, &state, &failed.changes, pending);
                fail(FetchError::Read(Arc::new(failed.error)))
            }
        }
    }
}
