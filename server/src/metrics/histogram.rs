//! A latency histogram of atomics, for the request path: `prometheus-client`'s `Histogram`
//! takes a mutex per observation, which every connection sending the same API and version
//! would contend on. This one is a bucket search and two relaxed atomic adds; it is encoded by
//! `prometheus-client` like its own (`MetricEncoder::encode_histogram`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{MetricEncoder, NoLabelSet};

/// Durations in buckets with upper bounds `first × 2^i`, plus +Inf.
#[derive(Debug)]
pub struct LatencyHistogram {
    /// Upper bounds in nanoseconds, ascending.
    bounds: Vec<u64>,
    /// One per bound, then +Inf: observations in that bucket (not cumulative).
    counts: Vec<AtomicU64>,
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    /// `buckets` bounds from `first`, doubling.
    pub fn doubling(first: Duration, buckets: u32) -> LatencyHistogram {
        let first = u64::try_from(first.as_nanos()).unwrap_or(u64::MAX).max(1);
        let bounds: Vec<u64> = (0..buckets)
            .map(|i| first.saturating_mul(1u64 << i.min(63)))
            .collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        LatencyHistogram {
            bounds,
            counts,
            sum_nanos: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = self.bounds.partition_point(|&bound| bound < nanos);
        if let Some(count) = self.counts.get(bucket) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Encodes `_sum`, `_count` and the cumulative `_bucket`s (seconds); the count is the sum
    /// of the buckets read, so `le="+Inf"` always equals `_count`.
    pub fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let bound = self
                    .bounds
                    .get(i)
                    .map_or(f64::INFINITY, |&n| n as f64 / 1e9);
                (bound, c.load(Ordering::Relaxed))
            })
            .collect();
        let count = buckets.iter().map(|(_, c)| c).sum();
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = LatencyHistogram::doubling(Duration::from_micros(100), 3);
        // Bounds 100 µs, 200 µs, 400 µs, +Inf.
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_micros(150));
        h.observe(Duration::from_micros(400));
        h.observe(Duration::from_secs(3));
        let counts: Vec<u64> = h.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(counts, vec![2, 1, 1, 1]);
        assert_eq!(h.sum_nanos.load(Ordering::Relaxed), 3_000_700_000);
    }
}
