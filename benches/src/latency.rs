//! Latency histograms: HdrHistogram at microsecond resolution (3 significant digits, up to one
//! hour), and the percentile summary the report prints.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest recordable latency: one hour, in µs. Larger values are clamped to it.
const MAX_MICROS: u64 = 3_600_000_000;

/// Points of [`Latency::percentile_curve`] below the maximum: ten per factor of ten of
/// `1 - p/100`, up to 99.9987%.
const CURVE_STEPS: u32 = 50;

/// A latency histogram in µs.
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty histogram.
    pub fn new() -> Self {
        // 1 µs .. 1 h with 3 significant digits. `new_with_bounds` fails only for low < 1,
        // high < 2 * low or more than 5 digits: never for these constants.
        #[allow(clippy::expect_used)]
        let hist = Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("constant, valid bounds");
        Latency { hist }
    }

    /// Records one latency.
    pub fn record(&mut self, latency: Duration) {
        self.record_micros(u64::try_from(latency.as_micros()).unwrap_or(MAX_MICROS));
    }

    /// Records one latency given in µs (0 counts as 1 µs, the resolution).
    pub fn record_micros(&mut self, micros: u64) {
        self.hist.saturating_record(micros.clamp(1, MAX_MICROS));
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so `add` cannot fail; if it ever did, fold value by value.
        if self.hist.add(&other.hist).is_err() {
            for v in other.hist.iter_recorded() {
                let value = v.value_iterated_to();
                for _ in 0..v.count_at_value() {
                    self.hist.saturating_record(value.clamp(1, MAX_MICROS));
                }
            }
        }
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The percentile curve for plotting: (percentile in %, µs) at percentiles evenly spaced on
    /// the scale of `-log10(1 - p/100)` (0, 20.6, 36.9, ... 90, ... 99, ... 99.99, ... 99.9987),
    /// then (100, max). Empty when nothing was recorded.
    pub fn percentile_curve(&self) -> Vec<(f64, u64)> {
        let h = &self.hist;
        if h.is_empty() {
            return Vec::new();
        }
        let mut curve: Vec<(f64, u64)> = (0..CURVE_STEPS)
            .map(|k| {
                let q = 1.0 - 10f64.powf(-f64::from(k) / 10.0);
                (q * 100.0, h.value_at_quantile(q))
            })
            .collect();
        curve.push((100.0, h.max()));
        curve
    }

    /// The percentile summary (all zero when nothing was recorded).
    pub fn summary(&self) -> LatencySummary {
        let h = &self.hist;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let q = |p: f64| h.value_at_quantile(p);
        LatencySummary {
            count: h.len(),
            min_us: h.min(),
            mean_us: h.mean(),
            p50_us: q(0.50),
            p90_us: q(0.90),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            p99_99_us: q(0.9999),
            max_us: h.max(),
        }
    }
}

/// Percentiles of a latency histogram, in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Smallest value (at least 1: the resolution).
    pub min_us: u64,
    /// Mean (not rounded to whole µs).
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p99_9_us: u64,
    /// 99.99th percentile.
    pub p99_99_us: u64,
    /// Largest value (values over one hour were recorded as one hour).
    pub max_us: u64,
}

impl LatencySummary {
    /// Rows of (label, µs) in the order the report prints them.
    pub fn rows(&self) -> [(&'static str, u64); 8] {
        [
            ("min", self.min_us),
            ("p50", self.p50_us),
            ("p90", self.p90_us),
            ("p95", self.p95_us),
            ("p99", self.p99_us),
            ("p99.9", self.p99_9_us),
            ("p99.99", self.p99_99_us),
            ("max", self.max_us),
        ]
    }
}

/// A latency in µs for humans: `850 µs`, `12.3 ms`, `4.20 s`.
pub fn human_micros(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_uniform_spread() {
        let mut l = Latency::new();
        for us in 1..=10_000 {
            l.record_micros(us);
        }
        let s = l.summary();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min_us, 1);
        // 3 significant digits: within 0.1%.
        assert!((4_995..=5_005).contains(&s.p50_us), "{s:?}");
        assert!((9_890..=9_910).contains(&s.p99_us), "{s:?}");
        assert!((9_990..=10_010).contains(&s.max_us), "{s:?}");
    }

    #[test]
    fn merge_adds_counts_and_extremes() {
        let mut a = Latency::new();
        let mut b = Latency::new();
        a.record(Duration::from_micros(100));
        b.record(Duration::from_millis(50));
        b.record_micros(0);
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 3);
        assert_eq!(s.min_us, 1);
        assert!(s.max_us >= 50_000 && s.max_us < 50_100, "{s:?}");
    }

    #[test]
    fn huge_values_are_clamped_and_empty_is_zero() {
        let mut l = Latency::new();
        assert_eq!(l.summary(), LatencySummary::default());
        l.record(Duration::from_secs(100_000));
        assert!(l.summary().max_us >= MAX_MICROS);
    }

    #[test]
    fn percentile_curve_rises_to_the_max() {
        assert!(Latency::new().percentile_curve().is_empty());
        let mut l = Latency::new();
        for us in 1..=10_000 {
            l.record_micros(us);
        }
        let curve = l.percentile_curve();
        assert_eq!(curve.len(), CURVE_STEPS as usize + 1);
        assert_eq!(curve[0], (0.0, 1));
        assert!(curve
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(curve.last().map(|p| p.0), Some(100.0));
        let p90 = curve[10];
        assert!((p90.0 - 90.0).abs() < 1e-9 && (8_990..=9_010).contains(&p90.1));
    }

    #[test]
    fn human_units() {
        assert_eq!(human_micros(850), "850 µs");
        assert_eq!(human_micros(12_345), "12.35 ms");
        assert_eq!(human_micros(4_200_000), "4.20 s");
    }
}
