//! The rate a quota is enforced on: a token bucket over the quota window (Kafka's
//! `TokenBucket` stat, KIP-599).

use std::time::{Duration, Instant};

/// The rate window: `quota.window.num` x `quota.window.size.seconds`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// `quota.window.size.seconds`: one sample's length (default 1 s; the CLI takes 1 to
    /// 3600 s).
    pub size: Duration,
    /// `quota.window.num`: samples in the window (default 11; the CLI takes 2 to 1000).
    pub samples: u32,
}

impl Default for Window {
    fn default() -> Window {
        Window {
            size: Duration::from_secs(1),
            samples: 11,
        }
    }
}

impl Window {
    /// The whole window: the burst a quota allows, and the longest throttle.
    pub fn length(&self) -> Duration {
        self.size * self.samples
    }
}

/// One quota entity's use of one quota, as a token bucket (Kafka's `TokenBucket` stat,
/// KIP-599): it fills at the quota up to the quota times the window, each request takes its
/// value out, and a bucket in debt is a throttle of debt / quota.
#[derive(Debug)]
pub(super) struct Sensor {
    tokens: f64,
    /// When `tokens` was last brought up to date.
    pub(super) updated: Instant,
}

impl Sensor {
    pub(super) fn full(quota: f64, window: Window, now: Instant) -> Sensor {
        Sensor {
            tokens: quota * window.length().as_secs_f64(),
            updated: now,
        }
    }

    /// Takes `value` out and returns the throttle: the time the bucket needs, filling at the
    /// quota, to be out of debt again, at most the whole window.
    pub(super) fn record(
        &mut self,
        value: f64,
        quota: f64,
        window: Window,
        now: Instant,
    ) -> Duration {
        let burst = quota * window.length().as_secs_f64();
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.updated = self.updated.max(now);
        self.tokens = (self.tokens + quota * elapsed).min(burst) - value;
        if self.tokens >= 0.0 || quota <= 0.0 {
            return Duration::ZERO;
        }
        let secs = -self.tokens / quota;
        Duration::from_secs_f64(secs.min(window.length().as_secs_f64()))
    }
}

impl Sensor {
    /// Takes `value` out if the bucket holds that much at `now` (zero returned); otherwise
    /// takes nothing and returns the time it needs, filling at the quota, to hold it (at most
    /// the whole window).
    pub(super) fn try_take(
        &mut self,
        value: f64,
        quota: f64,
        window: Window,
        now: Instant,
    ) -> Duration {
        let burst = quota * window.length().as_secs_f64();
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.updated = self.updated.max(now);
        self.tokens = (self.tokens + quota * elapsed).min(burst);
        if self.tokens >= value || quota <= 0.0 {
            self.tokens -= value;
            return Duration::ZERO;
        }
        let secs = (value - self.tokens) / quota;
        Duration::from_secs_f64(secs.min(window.length().as_secs_f64()))
    }

    /// The time the bucket needs, filling at the quota, to be out of debt at `now`.
    pub(super) fn debt(&self, quota: f64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        let tokens = self.tokens + quota * elapsed;
        if tokens >= 0.0 || quota <= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(-tokens / quota).unwrap_or(Duration::MAX)
    }
}
