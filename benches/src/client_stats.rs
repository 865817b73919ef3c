//! librdkafka's own statistics (`statistics.interval.ms`), added up over a run: the round-trip
//! time of requests to the broker (`rtt`: request written to response read) and the time a
//! record waits in the producer's queue before it goes into a request (`int_latency`). They
//! split a delivery latency into broker time and client queueing.
//!
//! librdkafka reports each as percentiles of a window that restarts at every report, so the
//! run's figures are approximate: the mean and max are exact over the windows received, p50 and
//! p99 are the request-weighted means of the windows' percentiles. The last, partial window of
//! a run is not reported by librdkafka and is missing.

use rdkafka::statistics::{Statistics, Window};
use serde::Serialize;

/// The statistics interval the harness asks librdkafka for, in ms.
pub const INTERVAL_MS: u32 = 500;

/// Windows of one librdkafka latency metric, added up.
#[derive(Debug, Clone, Copy, Default)]
pub struct WindowSum {
    count: i64,
    sum_us: i64,
    max_us: i64,
    p50_weighted: f64,
    p99_weighted: f64,
}

impl WindowSum {
    fn add(&mut self, w: &Window) {
        if w.cnt <= 0 {
            return;
        }
        self.count += w.cnt;
        self.sum_us += w.sum;
        self.max_us = self.max_us.max(w.max);
        self.p50_weighted += w.p50 as f64 * w.cnt as f64;
        self.p99_weighted += w.p99 as f64 * w.cnt as f64;
    }

    fn merge(&mut self, other: &WindowSum) {
        self.count += other.count;
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
        self.p50_weighted += other.p50_weighted;
        self.p99_weighted += other.p99_weighted;
    }

    /// The summary, `None` if no window had a value.
    pub fn summary(&self) -> Option<WindowSummary> {
        (self.count > 0).then(|| {
            let n = self.count as f64;
            WindowSummary {
                count: self.count,
                mean_us: self.sum_us as f64 / n,
                approx_p50_us: self.p50_weighted / n,
                approx_p99_us: self.p99_weighted / n,
                max_us: self.max_us,
            }
        })
    }
}

/// One librdkafka latency metric over a run, in µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowSummary {
    /// Values in the windows received: requests (round trips) or records (queueing).
    pub count: i64,
    /// Mean over the windows received (exact).
    pub mean_us: f64,
    /// Request-weighted mean of the windows' p50.
    pub approx_p50_us: f64,
    /// Request-weighted mean of the windows' p99.
    pub approx_p99_us: f64,
    /// Largest value of any window received (exact).
    pub max_us: i64,
}

/// Broker round trips and producer queueing of one or more clients.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientStats {
    /// Round trips of requests to every broker (librdkafka's `rtt`).
    pub rtt: WindowSum,
    /// Records' time in the producer's queue (librdkafka's `int_latency`), every broker.
    pub queue: WindowSum,
}

impl ClientStats {
    /// Adds one statistics report.
    pub fn add(&mut self, statistics: &Statistics) {
        for broker in statistics.brokers.values() {
            if let Some(w) = &broker.rtt {
                self.rtt.add(w);
            }
            if let Some(w) = &broker.int_latency {
                self.queue.add(w);
            }
        }
    }

    /// Adds another client's.
    pub fn merge(&mut self, other: &ClientStats) {
        self.rtt.merge(&other.rtt);
        self.queue.merge(&other.queue);
    }

    /// The summary for the report.
    pub fn summary(&self) -> ClientStatsSummary {
        ClientStatsSummary {
            broker_round_trip: self.rtt.summary(),
            producer_queue: self.queue.summary(),
        }
    }
}

/// What the report shows of librdkafka's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClientStatsSummary {
    /// Requests to the broker (Produce, plus the odd Metadata): written to answered.
    pub broker_round_trip: Option<WindowSummary>,
    /// Records in the producer's queue before going into a request (includes linger.ms).
    pub producer_queue: Option<WindowSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(cnt: i64, p50: i64, p99: i64, max: i64) -> Window {
        Window {
            cnt,
            sum: cnt * p50,
            p50,
            p99,
            max,
            ..Window::default()
        }
    }

    #[test]
    fn windows_add_up_weighted_by_count() {
        let mut s = WindowSum::default();
        s.add(&window(100, 200, 1_000, 2_000));
        s.add(&window(300, 100, 500, 900));
        s.add(&window(0, 9_999, 9_999, 9_999));
        let sum = s.summary().unwrap();
        assert_eq!(sum.count, 400);
        assert_eq!(sum.max_us, 2_000);
        assert!((sum.approx_p50_us - 125.0).abs() < 1e-9);
        assert!((sum.approx_p99_us - 625.0).abs() < 1e-9);
        assert!((sum.mean_us - 125.0).abs() < 1e-9);
        assert!(WindowSum::default().summary().is_none());
    }
}
