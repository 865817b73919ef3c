//! The story as data, drawn from the seed before anything runs: every webhook event (when it
//! arrives, its tenant and conversation key, how long each worker takes on it), which one is
//! the poison record, when the flood and the downstream outage happen. The same seed and
//! duration give the same plan.

use std::time::Duration;

/// The flooding tenant.
pub const NOISY: &str = "acme";
/// The tenants in the order the table and the report show them.
pub const TENANTS: [&str; 3] = [NOISY, "globex", "initech"];

/// Events per second each tenant sends outside the flood.
const BASE_RATE: f64 = 6.0;
/// Extra events per second the noisy tenant sends during the flood: well over what the task
/// workers finish (3 workers at about 17 ms a task), so its backlog builds.
const FLOOD_RATE: f64 = 300.0;

/// A splitmix64 generator: a few lines, and its sequence for a seed never changes with a
/// dependency's version.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }

    /// The wait to the next arrival of a Poisson process of `rate` per second, in ms.
    fn arrival_gap_ms(&mut self, rate: f64) -> f64 {
        -(1.0 - self.unit()).ln() / rate * 1000.0
    }
}

/// One webhook event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its number in the run (0, 1, …, in arrival order): the `demo-seq` header.
    pub seq: u64,
    /// When it arrives, ms after the start.
    pub at_ms: u64,
    pub tenant: &'static str,
    /// The conversation, `<tenant>/c<n>`: the record key.
    pub key: String,
    /// How long the webhook worker takes to store it, µs.
    pub chain_us: u64,
    /// How long a task worker takes on its reply task, ms (a slow tail of model calls).
    pub task_ms: u64,
}

/// What the run plays.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub seed: u64,
    pub duration: Duration,
    /// In arrival order.
    pub events: Vec<Event>,
    /// The `seq` of the record every attempt fails on.
    pub poison: u64,
    /// The noisy tenant's flood, ms after the start: [from, to).
    pub flood_ms: (u64, u64),
    /// The downstream outage of the webhook workers, ms after the start: [from, to).
    pub outage_ms: (u64, u64),
}

impl Plan {
    /// The plan of `seed` for a run of `duration` (at least 5 s, so each phase has room).
    pub fn new(seed: u64, duration: Duration) -> Plan {
        let total = u64::try_from(duration.as_millis())
            .unwrap_or(u64::MAX)
            .max(5000);
        let flood_ms = (total * 15 / 100, total * 40 / 100);
        let outage_from = total * 55 / 100;
        let outage_ms = (
            outage_from,
            outage_from + (total * 12 / 100).clamp(2000, 5000),
        );
        let mut rng = Rng::new(seed);
        let mut events = Vec::new();
        for tenant in TENANTS {
            let conversations = if tenant == NOISY { 50 } else { 12 };
            let mut at = 0.0;
            loop {
                let flooding = tenant == NOISY && (flood_ms.0..flood_ms.1).contains(&(at as u64));
                let rate = BASE_RATE + if flooding { FLOOD_RATE } else { 0.0 };
                at += rng.arrival_gap_ms(rate);
                if at as u64 >= total {
                    break;
                }
                let slow = rng.unit() < 0.02;
                events.push(Event {
                    seq: 0,
                    at_ms: at as u64,
                    tenant,
                    key: format!("{tenant}/c{}", rng.range(0, conversations)),
                    chain_us: rng.range(200, 2500),
                    task_ms: if slow {
                        rng.range(60, 150)
                    } else {
                        rng.range(5, 25)
                    },
                });
            }
        }
        events.sort_by_key(|e| e.at_ms);
        for (seq, e) in events.iter_mut().enumerate() {
            e.seq = seq as u64;
        }
        // A quiet tenant's event before the flood: its partition is busy behind it.
        let candidates: Vec<u64> = events
            .iter()
            .filter(|e| e.tenant != NOISY && e.at_ms >= total / 20 && e.at_ms < flood_ms.0)
            .map(|e| e.seq)
            .collect();
        let poison = match candidates.len() {
            0 => 0,
            n => candidates[rng.range(0, n as u64) as usize],
        };
        Plan {
            seed,
            duration: Duration::from_millis(total),
            events,
            poison,
            flood_ms,
            outage_ms,
        }
    }

    /// Whether `ms` after the start falls in the flood.
    pub fn flooding(&self, ms: u64) -> bool {
        (self.flood_ms.0..self.flood_ms.1).contains(&ms)
    }

    /// Whether the downstream is down `ms` after the start.
    pub fn down(&self, ms: u64) -> bool {
        (self.outage_ms.0..self.outage_ms.1).contains(&ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_plan_and_another_seed_another() {
        let a = Plan::new(7, Duration::from_secs(10));
        assert_eq!(a, Plan::new(7, Duration::from_secs(10)));
        assert_ne!(a.events, Plan::new(8, Duration::from_secs(10)).events);
    }

    #[test]
    fn the_noisy_tenant_floods_and_the_poison_is_a_quiet_tenants_before_the_flood() {
        let plan = Plan::new(3, Duration::from_secs(20));
        let in_flood = |tenant: &str| {
            plan.events
                .iter()
                .filter(|e| e.tenant == tenant && plan.flooding(e.at_ms))
                .count()
        };
        assert!(in_flood(NOISY) > 20 * in_flood("globex"), "{plan:?}");
        let poison = &plan.events[plan.poison as usize];
        assert_eq!(poison.seq, plan.poison);
        assert_ne!(poison.tenant, NOISY);
        assert!(poison.at_ms < plan.flood_ms.0);
        assert!(plan.flood_ms.1 <= plan.outage_ms.0);
        assert!(plan.events.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    }
}
