//! What the workers report while the story runs, shared between them, and the per-second rows
//! the live table and the report are drawn from.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::plan::TENANTS;

/// Percentiles of a set of waits, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Waits {
    pub count: usize,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl Waits {
    /// Nearest-rank percentiles of `waits` (sorted in place).
    pub fn of(waits: &mut [u64]) -> Waits {
        if waits.is_empty() {
            return Waits::default();
        }
        waits.sort_unstable();
        let rank =
            |p: f64| waits[((p * waits.len() as f64).ceil() as usize).clamp(1, waits.len()) - 1];
        Waits {
            count: waits.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: waits[waits.len() - 1],
        }
    }
}

/// One share group of task workers.
#[derive(Debug, Default)]
pub struct QueueStats {
    /// `seq`s of the tasks done (a redelivered task counts once).
    pub done: BTreeSet<u64>,
    /// Waits (record timestamp to delivery, ms) of this second, per tenant.
    pub second: BTreeMap<&'static str, Vec<u64>>,
    /// Every wait of the run, per tenant.
    pub all: BTreeMap<&'static str, Vec<u64>>,
    /// The waits of the tasks that arrived during the flood, per tenant.
    pub flood: BTreeMap<&'static str, Vec<u64>>,
}

/// The poison record as the webhook workers saw it.
#[derive(Debug, Default, Clone)]
pub struct Poison {
    /// Where it is in the main topic (attempt 1).
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    /// The attempts made on it.
    pub attempts: u32,
    pub dead_lettered: bool,
    /// Records after it in its partition done before it reached the dead-letter topic.
    pub passed_by: u64,
}

/// Everything counted so far.
#[derive(Debug, Default)]
pub struct Stats {
    pub produced: u64,
    /// `seq`s the webhook workers finished.
    pub chain_done: BTreeSet<u64>,
    /// Records forwarded to a retry topic (a failed attempt that is not the last).
    pub retried: u64,
    /// Source records (topic, partition, offset) written to the dead-letter topic.
    pub dead_lettered: BTreeSet<(String, i32, i64)>,
    pub dead_classes: BTreeMap<String, u64>,
    pub poison: Poison,
    /// Outage: when the chain saw it (ms after the start) and its failed probes.
    pub outage_detected_ms: Option<u64>,
    pub outage_ended_ms: Option<u64>,
    pub failed_probes: u64,
    /// Retries and dead letters while the downstream was down.
    pub retried_in_outage: u64,
    pub dead_in_outage: u64,
    /// Whether the chain is pausing for an outage right now.
    pub paused: bool,
    /// Per share group, in the order of `queue::GROUPS`.
    pub queues: Vec<QueueStats>,
}

/// [`Stats`] behind a lock, cloned into every worker.
#[derive(Debug, Clone, Default)]
pub struct Shared(Arc<Mutex<Stats>>);

impl Shared {
    pub fn new(groups: usize) -> Shared {
        let stats = Stats {
            queues: (0..groups).map(|_| QueueStats::default()).collect(),
            ..Stats::default()
        };
        Shared(Arc::new(Mutex::new(stats)))
    }

    pub fn lock(&self) -> MutexGuard<'_, Stats> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One second of the run, as the table prints it and the report plots it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// Seconds since the start, at the end of this second.
    pub t: u64,
    pub produced: u64,
    pub completed: u64,
    pub retried: u64,
    pub dead_lettered: u64,
    /// The webhook workers' group: seconds behind on the main topic (its worst partition).
    pub lag_seconds: Option<f64>,
    pub flooding: bool,
    pub down: bool,
    /// The chain paused for the outage (probing).
    pub paused: bool,
    /// Per share group, per tenant (in [`TENANTS`] order): the waits of this second.
    pub waits: Vec<Vec<Waits>>,
}

impl Stats {
    /// The row for the second ending now; clears the per-second waits.
    pub fn row(&mut self, t: u64, lag_seconds: Option<f64>, flooding: bool, down: bool) -> Row {
        let waits = self
            .queues
            .iter_mut()
            .map(|q| {
                TENANTS
                    .iter()
                    .map(|tenant| {
                        Waits::of(q.second.get_mut(tenant).map_or(&mut [][..], |v| &mut v[..]))
                    })
                    .collect()
            })
            .collect();
        for q in &mut self.queues {
            q.second.clear();
        }
        Row {
            t,
            produced: self.produced,
            completed: self.chain_done.len() as u64,
            retried: self.retried,
            dead_lettered: self.dead_lettered.len() as u64,
            lag_seconds,
            flooding,
            down,
            paused: self.paused,
            waits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut waits: Vec<u64> = (1..=100).rev().collect();
        let w = Waits::of(&mut waits);
        assert_eq!((w.count, w.p50, w.p99, w.max), (100, 50, 99, 100));
        assert_eq!(Waits::of(&mut [7]).p99, 7);
        assert_eq!(Waits::of(&mut [3, 1, 2]).p50, 2, "rank ceil(0.5 * 3)");
        assert_eq!(Waits::of(&mut []), Waits::default());
    }
}
