//! Acquisition on ShareFetch: a member's records across its partitions, in turn, each
//! partition's window of record metadata learnt from the log first (fair turns), records past
//! their deadline archived and dead-lettered instead of delivered.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use log_core::{Log, Partition};
use task_queue::{Changes, ShareConfig, ShareKey, SharePartition};

use super::delivery;
use super::{
    lock, FetchError, FetchLimits, PartitionFetch, PartitionRef, Pending, Requester, Shares,
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

    /// Acquires records of one partition: its window's metadata learnt, records taken under
    /// the partition's lock, their batches read, those that may not be delivered archived, and
    /// the changes recorded.
    fn acquire_one(
        &self,
        log: &Log,
        from: Requester<'_>,
        (topic_id, index): TopicPartition,
        limits: FetchLimits,
        config: &ShareConfig,
        pending: &mut Pending,
    ) -> PartitionFetch {
        let (member, now) = (from.member, from.now);
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
        let state = self.state(&key, &partition, config, now, pending);
        // Committed records only: nothing at or past the last stable offset is acquired.
        let log_end = partition.last_stable_offset();
        if config.needs_meta() {
            learn_meta(&state, &partition, log_end, config);
        }
        let mut state = lock(&state);
        let (mut ranges, mut changes) = take(&mut state, at, from, limits, log_end);
        // Fair turns pick records across the window: the batches go out in offset order.
        ranges.sort_unstable();
        let records = match delivery::read_acquired(&partition, &ranges) {
            Ok(records) => records,
            Err(e) => {
                tracing::error!(partition = partition.name(), error = %e, "reading acquired records failed");
                // Give them back, unseen.
                merge(&mut changes, state.release_member(member, now, config));
                let _ = self.record(log, at, &state, &changes, pending);
                return fail(FetchError::Read(Arc::new(e)));
            }
        };
        let ranges =
            archive_undeliverable(&mut state, &partition, &records, ranges, now, &mut changes);
        if let Err(error) = self.record(log, at, &state, &changes, pending) {
            return fail(FetchError::Protocol(error));
        }
        PartitionFetch {
            topic_partition: (topic_id, index),
            error: None,
            records: if ranges.is_empty() {
                Bytes::new()
            } else {
                records
            },
            acquired: ranges,
        }
    }
}

/// Fair turns and the overload mode choose among the records whose tenant, timestamp and
/// deadline are known: learns those of the window not read yet (one bounded read per call,
/// without the partition's lock: what another fetch learned meanwhile is skipped).
fn learn_meta(
    state: &Mutex<SharePartition>,
    partition: &Partition,
    log_end: i64,
    config: &ShareConfig,
) {
    let unknown = lock(state).unknown_meta(log_end, config);
    if let Some((from, to)) = unknown {
        match delivery::read_meta(partition, from, to, &config.fairness_key) {
            Ok(metas) if !metas.is_empty() => lock(state).learn(from, metas),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(partition = partition.name(), error = %e, "reading records for fair turns failed");
            }
        }
    }
}

/// Acquires records below `log_end` for the requesting member in the partition's state, after
/// moving its start up to the log's. The acquired ranges and what changed.
fn take(
    state: &mut SharePartition,
    at: PartitionRef<'_>,
    from: Requester<'_>,
    limits: FetchLimits,
    log_end: i64,
) -> (Vec<(i64, i64, u16)>, Changes) {
    let (partition, config) = (at.partition, at.config);
    let mut changes = Changes::default();
    // Records deleted by retention are gone for the share group too.
    if state.start() < partition.log_start_offset() {
        changes = state.reset_start(partition.log_start_offset());
    }
    let (acquired, took) = if limits.whole_batches && !config.needs_meta() {
        // The lock limit is checked first, then the acquisition runs to a batch end.
        let room = state.lock_room(config);
        let max_records = match room {
            0 => 0,
            room => {
                delivery::to_batch_end(partition, state.end(), limits.records.min(room), log_end)
            }
        };
        state.acquire_up_to(from.member, from.now, max_records, log_end, config)
    } else {
        state.acquire(from.member, from.now, limits.records, log_end, config)
    };
    merge(&mut changes, took);
    (acquired.ranges, changes)
}

/// Archives the acquired records that may not be delivered: those not committed (a gap, an
/// aborted transaction's) and those past their deadline. The ranges left to deliver.
fn archive_undeliverable(
    state: &mut SharePartition,
    partition: &Partition,
    records: &[u8],
    mut ranges: Vec<(i64, i64, u16)>,
    now: i64,
    changes: &mut Changes,
) -> Vec<(i64, i64, u16)> {
    let offsets: Vec<i64> = ranges.iter().flat_map(|(f, l, _)| *f..=*l).collect();
    let undeliverable = delivery::uncommitted(partition, records, &offsets);
    if !undeliverable.is_empty() {
        merge(changes, state.archive_undeliverable(&undeliverable, now));
        ranges = without(&ranges, &undeliverable);
    }
    let offsets: Vec<i64> = ranges.iter().flat_map(|(f, l, _)| *f..=*l).collect();
    let expired = delivery::past_deadline(records, &offsets, now);
    if !expired.is_empty() {
        merge(changes, state.archive_expired(&expired, now));
        ranges = without(&ranges, &expired);
    }
    ranges
}

fn merge(into: &mut Changes, more: Changes) {
    into.offsets.extend(more.offsets);
    into.archived.extend(more.archived);
    into.overload = more.overload.or(into.overload);
}

/// `ranges` without the offsets in `removed` (sorted).
fn without(ranges: &[(i64, i64, u16)], removed: &[i64]) -> Vec<(i64, i64, u16)> {
    let mut out = Vec::new();
    for &(first, last, count) in ranges {
        let mut start = first;
        for offset in first..=last {
            if removed.binary_search(&offset).is_ok() {
                if start < offset {
                    out.push((start, offset - 1, count));
                }
                start = offset + 1;
            }
        }
        if start <= last {
            out.push((start, last, count));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::without;

    #[test]
    fn ranges_lose_the_removed_offsets() {
        assert_eq!(
            without(&[(0, 9, 1), (20, 21, 2)], &[0, 4, 5, 9, 21]),
            vec![(1, 3, 1), (6, 8, 1), (20, 20, 2)]
        );
        assert_eq!(without(&[(3, 3, 1)], &[3]), vec![]);
    }
}
