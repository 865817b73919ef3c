//! The outage budget: a window of recent outcomes; when most of them failed, the consumer stops
//! spending attempts and probes with one record at growing intervals until one succeeds.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::OutageBudget;

/// What the window says after an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Go on spending attempts.
    Normal,
    /// Most recent records failed: switch to probing.
    Outage,
}

/// The window and, during an outage, the probe schedule.
#[derive(Debug)]
pub(crate) struct Outage {
    budget: OutageBudget,
    /// `true` = failed.
    window: VecDeque<bool>,
    /// Set while in an outage.
    probing: Option<Probing>,
}

#[derive(Debug, Clone)]
struct Probing {
    since_ms: i64,
    next: Instant,
    interval: Duration,
    probes: u64,
}

impl Outage {
    /// An empty window, no outage.
    pub(crate) fn new(budget: OutageBudget) -> Outage {
        Outage {
            window: VecDeque::with_capacity(budget.window),
            budget,
            probing: None,
        }
    }

    /// Counts an outcome (outside an outage).
    pub(crate) fn record(&mut self, failed: bool) -> Verdict {
        if self.budget.window == 0 {
            return Verdict::Normal;
        }
        if self.window.len() == self.budget.window {
            self.window.pop_front();
        }
        self.window.push_back(failed);
        let failures = self.window.iter().filter(|f| **f).count();
        let full = self.window.len() == self.budget.window;
        if full && failures as f64 >= self.budget.failure_ratio * self.budget.window as f64 {
            Verdict::Outage
        } else {
            Verdict::Normal
        }
    }

    /// Enters the outage: the first probe after `probe_interval`.
    pub(crate) fn enter(&mut self, now: Instant, now_ms: i64) {
        self.probing = Some(Probing {
            since_ms: now_ms,
            next: now + self.budget.probe_interval,
            interval: self.budget.probe_interval,
            probes: 0,
        });
    }

    /// A probe failed: the next one after twice the interval (capped).
    pub(crate) fn probe_failed(&mut self, now: Instant) {
        let max = self.budget.probe_max;
        if let Some(p) = &mut self.probing {
            p.interval = (p.interval * 2).min(max);
            p.next = now + p.interval;
            p.probes += 1;
        }
    }

    /// A probe succeeded: back to normal with an empty window.
    pub(crate) fn leave(&mut self) {
        self.probing = None;
        self.window.clear();
    }

    /// In an outage (probing)?
    pub(crate) fn active(&self) -> bool {
        self.probing.is_some()
    }

    /// When the next probe is due, during an outage.
    pub(crate) fn next_probe(&self) -> Option<Instant> {
        self.probing.as_ref().map(|p| p.next)
    }

    /// Since when (ms since the epoch) and how many probes failed, during an outage.
    pub(crate) fn state(&self) -> Option<(i64, u64)> {
        self.probing.as_ref().map(|p| (p.since_ms, p.probes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> OutageBudget {
        OutageBudget {
            window: 10,
            failure_ratio: 0.8,
            probe_interval: Duration::from_secs(1),
            probe_max: Duration::from_secs(3),
        }
    }

    #[test]
    fn one_poison_record_is_no_outage() {
        let mut o = Outage::new(budget());
        for i in 0..100 {
            assert_eq!(o.record(i % 10 == 0), Verdict::Normal);
        }
    }

    #[test]
    fn most_recent_failures_are_an_outage_once_the_window_is_full() {
        let mut o = Outage::new(budget());
        for _ in 0..7 {
            assert_eq!(o.record(true), Verdict::Normal);
        }
        assert_eq!(o.record(true), Verdict::Normal, "8 of 8: window not full");
        assert_eq!(
            o.record(false),
            Verdict::Normal,
            "9 outcomes: window not full"
        );
        assert_eq!(o.record(false), Verdict::Outage, "8 failures of 10");
        // 7 of 10 is under the ratio.
        let mut o = Outage::new(budget());
        for f in [false, false, false, true, true, true, true, true, true] {
            assert_eq!(o.record(f), Verdict::Normal);
        }
        assert_eq!(o.record(true), Verdict::Normal, "7 of 10");
        assert_eq!(
            o.record(true),
            Verdict::Outage,
            "the oldest success slid out: 8 of 10"
        );
    }

    #[test]
    fn probes_back_off_and_a_success_clears_the_window() {
        let mut o = Outage::new(budget());
        let t0 = Instant::now();
        o.enter(t0, 5);
        assert_eq!(o.next_probe(), Some(t0 + Duration::from_secs(1)));
        o.probe_failed(t0);
        assert_eq!(o.next_probe(), Some(t0 + Duration::from_secs(2)));
        o.probe_failed(t0);
        o.probe_failed(t0);
        assert_eq!(o.next_probe(), Some(t0 + Duration::from_secs(3)), "capped");
        assert_eq!(o.state(), Some((5, 3)));
        o.leave();
        assert!(!o.active());
        for _ in 0..9 {
            assert_eq!(o.record(true), Verdict::Normal, "window starts empty");
        }
    }
}
