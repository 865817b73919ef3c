//! Acquisition on a share fetch as one call ([`acquire`]) over what it reads of the log
//! ([`PartitionLog`], which the broker implements over a log partition): the look-ahead
//! window's metas learnt first (fair turns, the overload mode), records taken under the share
//! partition's lock, their batches read, and those that may not be delivered (not committed
//! data, past their deadline) archived instead.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::config::ShareConfig;
use crate::fairness::{FairnessKey, RecordMeta};
use crate::share_partition::{Changes, SharePartition};

/// What acquisition reads of one topic partition's log.
pub trait PartitionLog {
    /// The batches holding acquired records, as sent to the consumer.
    type Records: AsRef<[u8]> + Default;
    /// Why the log could not be read.
    type Error: std::fmt::Display;

    /// The partition's name, for logs.
    fn name(&self) -> &str;
    /// The first offset still in the log: the share partition's start moves up to it.
    fn log_start_offset(&self) -> i64;
    /// The end of the committed records: nothing at or past it is acquired under
    /// `share.isolation.level=read_committed`.
    fn last_stable_offset(&self) -> i64;
    /// The end of the records readers see (the high watermark): nothing at or past it is
    /// acquired under `read_uncommitted`.
    fn high_watermark(&self) -> i64;
    /// How many records to take from `from` on so the acquisition ends with a batch: at least
    /// `max_records`, up to the end of the batch holding the last of them (below `log_end`).
    fn to_batch_end(&self, from: i64, max_records: usize, log_end: i64) -> usize;
    /// The metas of the records at `from..to`, one per offset from `from` on, as far as one
    /// bounded read reaches (see [`SharePartition::learn`]).
    fn read_meta(
        &self,
        from: i64,
        to: i64,
        key: &FairnessKey,
    ) -> Result<Vec<RecordMeta>, Self::Error>;
    /// The whole batches holding the offsets of `ranges` (ascending), each once.
    fn read_batches(&self, ranges: &[(i64, i64, u16)]) -> Result<Self::Records, Self::Error>;
    /// Offsets among `offsets` (ascending) that a share group does not deliver: control
    /// records and, with `committed_only`, aborted transactions' records, in `batches`.
    fn uncommitted(
        &self,
        batches: &Self::Records,
        offsets: &[i64],
        committed_only: bool,
    ) -> Vec<i64>;
    /// Offsets among `offsets` whose record in `batches` has a deadline before `now`.
    fn past_deadline(&self, batches: &Self::Records, offsets: &[i64], now: i64) -> Vec<i64>;
}

/// One member's fetch from one share partition.
#[derive(Debug, Clone, Copy)]
pub struct Fetch<'a> {
    /// The member acquiring.
    pub member: &'a str,
    /// Milliseconds since the epoch.
    pub now: i64,
    /// At most this many records (before rounding up to a batch end).
    pub max_records: usize,
    /// Kafka's `batch_optimized` mode: an acquisition in offset order runs to a batch end.
    pub whole_batches: bool,
}

/// What a fetch acquired: ranges of offsets with their delivery count, in offset order, and
/// the batches that hold them (empty when none was acquired).
#[derive(Debug)]
pub struct Acquisition<R> {
    /// `(first, last, delivery count)`, ascending.
    pub ranges: Vec<(i64, i64, u16)>,
    /// The batches holding them.
    pub records: R,
    /// What the acquisition changed, to persist.
    pub changes: Changes,
}

/// The acquired batches could not be read: the records went back to available, unseen.
#[derive(Debug)]
pub struct ReadFailed<E> {
    /// The log's error.
    pub error: E,
    /// What changed all the same (the share start moved, records archived and released).
    pub changes: Changes,
}

/// What [`acquire`] returns: the share partition's lock, still held, and what was acquired.
pub type AcquireResult<'s, L> = (
    MutexGuard<'s, SharePartition>,
    Result<Acquisition<<L as PartitionLog>::Records>, ReadFailed<<L as PartitionLog>::Error>>,
);

/// Acquires records of one share partition for `fetch.member`. The metas are read without the
/// lock (what another fetch learnt meanwhile is skipped); the rest runs under it, and the
/// guard comes back so the caller persists the changes before another operation runs.
pub fn acquire<'s, L: PartitionLog>(
    state: &'s Mutex<SharePartition>,
    log: &L,
    fetch: Fetch<'_>,
    config: &ShareConfig,
) -> AcquireResult<'s, L> {
    // read_committed: nothing at or past the last stable offset is acquired; read_uncommitted
    // (Kafka's default): up to the high watermark, open transactions' records too.
    let log_end = if config.read_committed() {
        log.last_stable_offset()
    } else {
        log.high_watermark()
    };
    if config.needs_meta() {
        learn_meta(state, log, log_end, config);
    }
    let mut guard = lock(state);
    let (mut ranges, mut changes) = take(&mut guard, log, fetch, log_end, config);
    // Fair turns pick records across the window: the batches go out in offset order.
    ranges.sort_unstable();
    if ranges.is_empty() {
        let none = Acquisition {
            ranges,
            records: L::Records::default(),
            changes,
        };
        return (guard, Ok(none));
    }
    let records = match log.read_batches(&ranges) {
        Ok(records) => records,
        Err(error) => {
            // Give them back, unseen.
            merge(
                &mut changes,
                guard.release_member(fetch.member, fetch.now, config),
            );
            return (guard, Err(ReadFailed { error, changes }));
        }
    };
    let committed_only = config.read_committed();
    let ranges = archive_undeliverable(
        &mut guard,
        log,
        (&records, committed_only),
        ranges,
        fetch.now,
        &mut changes,
    );
    let records = if ranges.is_empty() {
        L::Records::default()
    } else {
        records
    };
    let acquisition = Acquisition {
        ranges,
        records,
        changes,
    };
    (guard, Ok(acquisition))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Learns the metas of the window not read yet (one bounded read per call, without the
/// partition's lock). A failed read is logged: acquisition goes on with what is known.
fn learn_meta<L: PartitionLog>(
    state: &Mutex<SharePartition>,
    log: &L,
    log_end: i64,
    config: &ShareConfig,
) {
    let unknown = lock(state).unknown_meta(log_end, config);
    if let Some((from, to)) = unknown {
        match log.read_meta(from, to, &config.fairness_key) {
            Ok(metas) if !metas.is_empty() => lock(state).learn(from, metas),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(partition = log.name(), error = %e, "reading records for fair turns failed");
            }
        }
    }
}

/// Acquires records below `log_end`, after moving the share start up to the log's. The
/// acquired ranges and what changed.
fn take<L: PartitionLog>(
    state: &mut SharePartition,
    log: &L,
    fetch: Fetch<'_>,
    log_end: i64,
    config: &ShareConfig,
) -> (Vec<(i64, i64, u16)>, Changes) {
    let mut changes = Changes::default();
    // Records deleted by retention are gone for the share group too.
    let log_start = log.log_start_offset();
    if state.start() < log_start {
        changes = state.reset_start(log_start);
    }
    let (member, now) = (fetch.member, fetch.now);
    let (acquired, took) = if fetch.whole_batches && !config.needs_meta() {
        // The lock limit is checked first, then the acquisition runs to a batch end.
        let max_records = match state.lock_room(config) {
            0 => 0,
            room => log.to_batch_end(state.end(), fetch.max_records.min(room), log_end),
        };
        state.acquire_up_to(member, now, max_records, log_end, config)
    } else {
        state.acquire(member, now, fetch.max_records, log_end, config)
    };
    merge(&mut changes, took);
    (acquired.ranges, changes)
}

/// Archives the acquired records that may not be delivered: those not committed (a control
/// record, an aborted transaction's) and those past their deadline. The ranges left.
fn archive_undeliverable<L: PartitionLog>(
    state: &mut SharePartition,
    log: &L,
    (records, committed_only): (&L::Records, bool),
    mut ranges: Vec<(i64, i64, u16)>,
    now: i64,
    changes: &mut Changes,
) -> Vec<(i64, i64, u16)> {
    let offsets: Vec<i64> = ranges.iter().flat_map(|(f, l, _)| *f..=*l).collect();
    let undeliverable = log.uncommitted(records, &offsets, committed_only);
    if !undeliverable.is_empty() {
        merge(changes, state.archive_undeliverable(&undeliverable, now));
        ranges = without(&ranges, &undeliverable);
    }
    let offsets: Vec<i64> = ranges.iter().flat_map(|(f, l, _)| *f..=*l).collect();
    let expired = log.past_deadline(records, &offsets, now);
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
mod tests;
