//! Small mechanisms behind the broker's limits (`config::Limits`): the connection gate
//! (`max.connections`, `max.connections.per.ip`) with its once-per-burst log line, and the token
//! bucket that paces topic auto-creation. Time is passed in, so tests drive the clock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{max} connections already (--max-connections)")]
    Total { max: usize },
    #[error("{max} connections from {ip} already (--max-connections-per-ip)")]
    PerIp { ip: IpAddr, max: usize },
}

/// Counts open connections, in all and per address.
#[derive(Debug)]
pub struct ConnectionGate {
    max: usize,
    max_per_ip: usize,
    open: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// One admitted connection; its slot frees when this is dropped.
#[derive(Debug)]
pub struct Slot {
    gate: Arc<ConnectionGate>,
    ip: IpAddr,
}

impl ConnectionGate {
    pub fn new(max: usize, max_per_ip: usize) -> Arc<ConnectionGate> {
        Arc::new(ConnectionGate {
            max,
            max_per_ip,
            open: Mutex::new(Counts::default()),
        })
    }

    /// A slot for a new connection from `ip`, or why there is none. As in Kafka, the
    /// connection over a cap is the one refused; established ones are left alone.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refused> {
        let mut open = lock(&self.open);
        if open.total >= self.max {
            return Err(Refused::Total { max: self.max });
        }
        let from_ip = open.per_ip.entry(ip).or_insert(0);
        if *from_ip >= self.max_per_ip {
            return Err(Refused::PerIp {
                ip,
                max: self.max_per_ip,
            });
        }
        *from_ip += 1;
        open.total += 1;
        Ok(Slot {
            gate: self.clone(),
            ip,
        })
    }

    /// Connections open now.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        lock(&self.open).total
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = lock(&self.gate.open);
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

/// Logs refused connections once per burst: the first refusal is logged at once; those in the
/// following `quiet` period are only counted, and the count goes into the next line logged.
#[derive(Debug)]
pub struct RefusalLog {
    quiet: Duration,
    last_logged: Option<Instant>,
    unreported: u64,
}

impl RefusalLog {
    pub fn new(quiet: Duration) -> RefusalLog {
        RefusalLog {
            quiet,
            last_logged: None,
            unreported: 0,
        }
    }

    /// Notes one refusal at `now`; returns how many refusals to report (this one included) if
    /// a line should be logged now.
    pub fn note(&mut self, now: Instant) -> Option<u64> {
        self.unreported += 1;
        if self
            .last_logged
            .is_some_and(|at| now.saturating_duration_since(at) < self.quiet)
        {
            return None;
        }
        self.last_logged = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }
}

/// A token bucket: up to `rate` tokens, refilled at `rate` per second.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    state: Mutex<(f64, Option<Instant>)>,
}

impl RateLimiter {
    pub fn per_second(rate: u32) -> RateLimiter {
        let rate = f64::from(rate.max(1));
        RateLimiter {
            rate,
            state: Mutex::new((rate, None)),
        }
    }

    /// Takes one token at `now` if there is one.
    pub fn try_take(&self, now: Instant) -> bool {
        let mut state = lock(&self.state);
        let (tokens, last) = &mut *state;
        if let Some(last) = *last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.rate;
            *tokens = (*tokens + refill).min(self.rate);
        }
        *last = Some(now);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_counts_in_all_and_per_address() {
        let gate = ConnectionGate::new(3, 2);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let a1 = gate.admit(a).unwrap();
        let _a2 = gate.admit(a).unwrap();
        assert_eq!(gate.admit(a).unwrap_err(), Refused::PerIp { ip: a, max: 2 });
        let _b1 = gate.admit(b).unwrap();
        assert_eq!(gate.admit(b).unwrap_err(), Refused::Total { max: 3 });
        drop(a1);
        assert_eq!(gate.open(), 2);
        let _b2 = gate.admit(b).unwrap();
    }

    #[test]
    fn refusals_are_logged_once_per_burst() {
        let mut log = RefusalLog::new(Duration::from_secs(10));
        let t = Instant::now();
        assert_eq!(log.note(t), Some(1));
        for i in 1..=50 {
            assert_eq!(log.note(t + Duration::from_millis(i * 100)), None);
        }
        assert_eq!(log.note(t + Duration::from_secs(11)), Some(51));
    }

    #[test]
    fn the_bucket_refills_at_its_rate() {
        let bucket = RateLimiter::per_second(2);
        let t = Instant::now();
        assert!(bucket.try_take(t));
        assert!(bucket.try_take(t));
        assert!(!bucket.try_take(t));
        assert!(!bucket.try_take(t + Duration::from_millis(400)));
        assert!(bucket.try_take(t + Duration::from_millis(600)));
        // It never holds more than one second's worth.
        let later = t + Duration::from_secs(60);
        assert!(bucket.try_take(later));
        assert!(bucket.try_take(later));
        assert!(!bucket.try_take(later));
    }
}
