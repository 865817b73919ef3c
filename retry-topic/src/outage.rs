//! The outage budget: a window of recent outcomes; when most of them failed, the consumer stops
//! spending attempts and probes with one record at growing intervals until one succeeds.
//!
//! The outage has a class: the error class most of the window's failures had. A probe that
//! fails with another class failed for a reason of its own (a poison record), which says
//! nothing of the outage: it takes its attempt as any failure does, and the next record probes.

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
    /// Each outcome: `None` a success, `Some(class)` a failure of that error class.
    window: VecDeque<Option<String>>,
    /// Set while in an outage.
    probing: Option<Probing>,
}

#[derive(Debug, Clone)]
struct Probing {
    /// The error class most failures of the window had when the outage began.
    class: String,
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

    /// Counts an outcome (outside an outage): `None` a success, `Some(class)` a failure.
    pub(crate) fn record(&mut self, failure: Option<&str>) -> Verdict {
        if self.budget.window == 0 {
            return Verdict::Normal;
        }
        if self.window.len() == self.budget.window {
            self.window.pop_front();
        }
        self.window.push_back(failure.map(str::to_string));
        let failures = self.window.iter().flatten().count();
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
            class: self.commonest_class(),
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

    /// During an outage: does a failure of `class` say the outage goes on? A failure of
    /// another class is the record's own.
    pub(crate) fn is_outage_class(&self, class: &str) -> bool {
        self.probing.as_ref().is_some_and(|p| p.class == class)
    }

    /// The class most failures of the window had; of those tied, the one that failed last.
    fn commonest_class(&self) -> String {
        let mut counts: Vec<(&str, usize, usize)> = Vec::new();
        for (at, class) in self.window.iter().enumerate() {
            let Some(class) = class else { continue };
            match counts.iter_mut().find(|(c, _, _)| *c == class) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = at;
                }
                None => counts.push((class, 1, at)),
            }
        }
        counts
            .into_iter()
            .max_by_key(|(_, n, last)| (*n, *last))
            .map(|(class, _, _)| class.to_string())
            .unwrap_or_default()
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

    const DOWN: Option<&str> = Some("down");

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
            assert_eq!(o.record((i % 10 == 0).then_some("poison")), Verdict::Normal);
        }
    }

    #[test]
    fn most_recent_failures_are_an_outage_once_the_window_is_full() {
        let mut o = Outage::new(budget());
        for _ in 0..7 {
            assert_eq!(o.record(DOWN), Verdict::Normal);
        }
        assert_eq!(o.record(DOWN), Verdict::Normal, "8 of 8: window not full");
        assert_eq!(
            o.record(None),
            Verdict::Normal,
            "9 outcomes: window not full"
        );
        assert_eq!(o.record(None), Verdict::Outage, "8 failures of 10");
        // 7 of 10 is under the ratio.
        let mut o = Outage::new(budget());
        for f in [false, false, false, true, true, true, true, true, true] {
            assert_eq!(o.record(f.then_some("down")), Verdict::Normal);
        }
        assert_eq!(o.record(DOWN), Verdict::Normal, "7 of 10");
        assert_eq!(
            o.record(DOWN),
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
            assert_eq!(o.record(DOWN), Verdict::Normal, "window starts empty");
        }
    }

    #[test]
    fn the_outage_takes_the_class_most_failures_had() {
        let mut o = Outage::new(budget());
        for class in ["down", "down", "poison", "down", "down"] {
            o.record(Some(class));
        }
        for _ in 0..4 {
            o.record(Some("timeout"));
        }
        assert_eq!(o.record(Some("poison")), Verdict::Outage);
        o.enter(Instant::now(), 0);
        assert!(
            o.is_outage_class("timeout"),
            "4 of 10, as many as down, and later"
        );
        assert!(!o.is_outage_class("down"));
        assert!(!o.is_outage_class("poison"), "2 of 10");
        o.leave();
        assert!(!o.is_outage_class("timeout"), "no outage");
    }
}
