//! Small mechanisms behind the broker's limits (`config::Limits`): the connection gate
//! (`max.connections`, `max.connections.per.ip`, evicting an address's least useful connection
//! for a new one) with its once-per-burst log line, and the token
//! bucket that paces topic auto-creation. Time is passed in, so tests drive the clock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a new connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{max} connections already (--max-connections)")]
    Total { max: usize },
    #[error(
        "{max} connections from {ip} already, all busy with a request (--max-connections-per-ip)"
    )]
    PerIp { ip: IpAddr, max: usize },
}

/// What a connection is doing, as the gate sees it when it must make room for a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// A request begun and not yet whole: evicted first (the oldest begun first).
    Partial = 0,
    /// No byte of a request yet, and never a whole request: evicted next (the oldest first).
    Fresh = 1,
    /// Between requests, once served: evicted last (the longest idle first).
    Idle = 2,
    /// A request being handled, its response being written, or its throttle: never evicted.
    Busy = 3,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Partial,
            1 => Phase::Fresh,
            2 => Phase::Idle,
            _ => Phase::Busy,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Partial => "half-sent",
            Phase::Fresh => "never-served",
            Phase::Idle => "idle",
            Phase::Busy => "busy",
        }
    }
}

/// One connection's phase and since when, written by its task, read by the gate; and the
/// notice that the gate closed it to make room.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    phase: AtomicU8,
    /// Milliseconds from `epoch` at which the phase began.
    since_ms: AtomicU64,
    evicted: Notify,
}

impl Activity {
    /// Enters `phase` at `now`.
    pub fn set(&self, phase: Phase, now: Instant) {
        let ms = u64::try_from(now.saturating_duration_since(self.epoch).as_millis())
            .unwrap_or(u64::MAX);
        self.since_ms.store(ms, Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Release);
    }

    /// (phase, since), the order in which connections are evicted.
    fn rank(&self) -> (Phase, u64) {
        let phase = Phase::from_u8(self.phase.load(Ordering::Acquire));
        (phase, self.since_ms.load(Ordering::Relaxed))
    }

    /// Completes once the gate has closed this connection to make room for a new one from
    /// its address (at once if it already has). The connection then ends.
    pub async fn evicted(&self) {
        self.evicted.notified().await;
    }
}

/// Counts open connections, in all and per address. When an address is at
/// `max.connections.per.ip`, a new connection from it takes the place of one of its
/// connections that is not busy with a request (see [`Phase`] for which), rather than being
/// refused: one address's idle or half-sent connections cannot lock out a client beside them
/// (NAT, a sidecar). Only an address whose every connection is busy is refused, and any
/// connection over `max.connections`, as in Kafka.
#[derive(Debug)]
pub struct ConnectionGate {
    max: usize,
    max_per_ip: usize,
    epoch: Instant,
    open: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    next_id: u64,
    per_ip: HashMap<IpAddr, HashMap<u64, Arc<Activity>>>,
}

/// One admitted connection; its slot frees when this is dropped (or when the gate evicts it).
#[derive(Debug)]
pub struct Slot {
    gate: Arc<ConnectionGate>,
    ip: IpAddr,
    id: u64,
    activity: Arc<Activity>,
}

impl Slot {
    /// Where the connection reports its phase and hears of its eviction.
    pub fn activity(&self) -> &Activity {
        &self.activity
    }
}

/// A new connection's slot, and the phase of the connection closed to make room, if one was.
#[derive(Debug)]
pub struct Admitted {
    pub slot: Slot,
    pub evicted: Option<Phase>,
}

impl ConnectionGate {
    pub fn new(max: usize, max_per_ip: usize) -> Arc<ConnectionGate> {
        Arc::new(ConnectionGate {
            max,
            max_per_ip,
            epoch: Instant::now(),
            open: Mutex::new(Counts::default()),
        })
    }

    /// A slot for a new connection from `ip` at `now`, evicting one of the address's
    /// connections if it is at its cap; or why there is none.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, now: Instant) -> Result<Admitted, Refused> {
        let mut open = lock(&self.open);
        let open = &mut *open;
        let from_ip = open.per_ip.entry(ip).or_default();
        let mut evicted = None;
        if from_ip.len() >= self.max_per_ip {
            let victim = from_ip
                .iter()
                .map(|(id, a)| (a.rank(), *id))
                .filter(|((phase, _), _)| *phase != Phase::Busy)
                .min();
            let Some(((phase, _), id)) = victim else {
                return Err(Refused::PerIp {
                    ip,
                    max: self.max_per_ip,
                });
            };
            if let Some(activity) = from_ip.remove(&id) {
                activity.evicted.notify_one();
                open.total = open.total.saturating_sub(1);
                evicted = Some(phase);
            }
        } else if open.total >= self.max {
            if from_ip.is_empty() {
                open.per_ip.remove(&ip);
            }
            return Err(Refused::Total { max: self.max });
        }
        let id = open.next_id;
        open.next_id += 1;
        let activity = Arc::new(Activity {
            epoch: self.epoch,
            phase: AtomicU8::new(Phase::Fresh as u8),
            since_ms: AtomicU64::new(0),
            evicted: Notify::new(),
        });
        activity.set(Phase::Fresh, now);
        if let Some(from_ip) = open.per_ip.get_mut(&ip) {
            from_ip.insert(id, activity.clone());
        }
        open.total += 1;
        Ok(Admitted {
            slot: Slot {
                gate: self.clone(),
                ip,
                id,
                activity,
            },
            evicted,
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
        let Some(from_ip) = open.per_ip.get_mut(&self.ip) else {
            return;
        };
        // An evicted connection's place was given back when it was evicted.
        if from_ip.remove(&self.id).is_none() {
            return;
        }
        if from_ip.is_empty() {
            open.per_ip.remove(&self.ip);
        }
        open.total = open.total.saturating_sub(1);
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

    /// Takes one token at `now` if there is one (zero returned); otherwise takes nothing and
    /// returns how long until there is one.
    pub fn take_or_wait(&self, now: Instant) -> Duration {
        let mut state = lock(&self.state);
        let (tokens, last) = &mut *state;
        if let Some(last) = *last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.rate;
            *tokens = (*tokens + refill).min(self.rate);
        }
        *last = Some(now);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - *tokens) / self.rate)
        }
    }

    /// Takes one token at `now` if there is one.
    pub fn try_take(&self, now: Instant) -> bool {
        self.take_or_wait(now).is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_counts_in_all_and_per_address() {
        let gate = ConnectionGate::new(3, 2);
        let now = Instant::now();
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let busy = |admitted: Admitted| {
            admitted.slot.activity().set(Phase::Busy, now);
            admitted.slot
        };
        let a1 = busy(gate.admit(a, now).unwrap());
        let _a2 = busy(gate.admit(a, now).unwrap());
        assert_eq!(
            gate.admit(a, now).unwrap_err(),
            Refused::PerIp { ip: a, max: 2 },
            "nothing to evict"
        );
        let _b1 = busy(gate.admit(b, now).unwrap());
        assert_eq!(gate.admit(b, now).unwrap_err(), Refused::Total { max: 3 });
        drop(a1);
        assert_eq!(gate.open(), 2);
        let _b2 = gate.admit(b, now).unwrap();
        assert_eq!(gate.open(), 3);
    }

    #[test]
    fn an_address_at_its_cap_sheds_half_sent_then_never_served_then_idle_connections() {
        let gate = ConnectionGate::new(100, 4);
        let t = Instant::now();
        let at = |ms| t + Duration::from_millis(ms);
        let a: IpAddr = [10, 0, 0, 1].into();
        let admit = |ms| gate.admit(a, at(ms)).unwrap();
        let busy = admit(0).slot;
        busy.activity().set(Phase::Busy, at(0));
        let idle_old = admit(1).slot;
        idle_old.activity().set(Phase::Idle, at(5));
        let fresh = admit(2).slot;
        let partial = admit(3).slot;
        partial.activity().set(Phase::Partial, at(4));
        let n1 = admit(10);
        assert_eq!(n1.evicted, Some(Phase::Partial));
        let n2 = admit(11);
        assert_eq!(n2.evicted, Some(Phase::Fresh), "the older fresh one");
        assert_eq!(gate.open(), 4);
        // The new ones, fresh, go before the idle one; once they are busy, the idle one goes.
        n2.slot.activity().set(Phase::Busy, at(11));
        let n3 = admit(12);
        assert_eq!(n3.evicted, Some(Phase::Fresh));
        n3.slot.activity().set(Phase::Busy, at(12));
        let n4 = admit(13);
        assert_eq!(n4.evicted, Some(Phase::Idle));
        n4.slot.activity().set(Phase::Busy, at(13));
        assert_eq!(
            gate.admit(a, at(14)).unwrap_err(),
            Refused::PerIp { ip: a, max: 4 },
            "all busy"
        );
        // Dropping an evicted slot frees nothing twice.
        drop((fresh, partial));
        assert_eq!(gate.open(), 4);
        drop(idle_old);
        assert_eq!(gate.open(), 4);
    }

    #[tokio::test]
    async fn an_evicted_connection_hears_of_it() {
        let gate = ConnectionGate::new(100, 1);
        let a: IpAddr = [10, 0, 0, 1].into();
        let first = gate.admit(a, Instant::now()).unwrap().slot;
        let second = gate.admit(a, Instant::now()).unwrap();
        assert_eq!(second.evicted, Some(Phase::Fresh));
        tokio::time::timeout(Duration::from_secs(5), first.activity().evicted())
            .await
            .unwrap();
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
    fn the_bucket_says_how_long_until_its_next_token() {
        let bucket = RateLimiter::per_second(4);
        let t = Instant::now();
        for _ in 0..4 {
            assert_eq!(bucket.take_or_wait(t), Duration::ZERO);
        }
        assert_eq!(bucket.take_or_wait(t), Duration::from_millis(250));
        let later = t + Duration::from_millis(250);
        assert_eq!(bucket.take_or_wait(later), Duration::ZERO);
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
