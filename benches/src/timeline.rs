//! Records counted per whole second of a run (acknowledged by producers, read by consumers):
//! the throughput-over-time panel of `--plot`. Each client counts on its own, at the moment it
//! handles a record, against the run's common start instant; the counts are added up at the end.

use std::time::Instant;

/// Seconds tracked; records later than this count in the last second (a run stops at its
/// --timeout-secs long before).
const MAX_SECONDS: u64 = 7 * 24 * 3600;

/// Records per whole second since a start instant: `counts()[i]` is the number counted in
/// `[i s, i+1 s)`. The last second of a run is usually partial.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerSecond {
    counts: Vec<u64>,
}

impl PerSecond {
    /// An empty count.
    pub fn new() -> PerSecond {
        PerSecond::default()
    }

    /// Counts one record handled `at`, in the second since `start` it falls in (instants
    /// before `start` count in second 0).
    pub fn record(&mut self, start: Instant, at: Instant) {
        let second = at
            .saturating_duration_since(start)
            .as_secs()
            .min(MAX_SECONDS);
        let i = usize::try_from(second).unwrap_or(0);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
    }

    /// Adds the counts of `other`, second by second.
    pub fn merge(&mut self, other: &PerSecond) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
    }

    /// Records in each second, from the start to the last second with a record.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counts_by_second_and_merges() {
        let t0 = Instant::now();
        let mut a = PerSecond::new();
        a.record(t0, t0);
        a.record(t0, t0 + Duration::from_millis(999));
        a.record(t0, t0 + Duration::from_millis(2500));
        assert_eq!(a.counts(), &[2, 0, 1]);
        let mut b = PerSecond::new();
        b.record(t0 + Duration::from_secs(1), t0); // before its start: second 0
        b.record(t0, t0 + Duration::from_millis(3100));
        a.merge(&b);
        assert_eq!(a.counts(), &[3, 0, 1, 1]);
        let mut empty = PerSecond::new();
        empty.merge(&PerSecond::new());
        assert!(empty.counts().is_empty());
    }
}
