//! Failed logins in the log without a flood: a password guesser gets one line per client
//! address per [`WINDOW`], and that line says how many failures the window before held back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the failures of one address after a logged one are counted, not logged.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Addresses tracked at most; past it (once none can be forgotten), a failure from a new
/// address is not logged (the metrics still count every failure).
const ADDRESSES: usize = 1024;

/// The failed logins of every client address, shared by the Kafka listeners and the console.
/// Up to 1024 addresses are tracked; while that many are (each within its window or with
/// failures held back), a failure from a new address is neither logged nor counted.
#[derive(Debug, Default)]
pub struct FailedLogins {
    /// By address: when its last logged failure was, and the failures held back since.
    by_address: Mutex<HashMap<IpAddr, (Instant, u64)>>,
}

impl FailedLogins {
    /// Notes a failure from `ip` at `now`: `Some(held back)` when it is to be logged, with
    /// the failures from `ip` not logged since the last one; `None` when it is only counted.
    pub fn note(&self, ip: IpAddr, now: Instant) -> Option<u64> {
        let mut map = self
            .by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((logged, held)) = map.get_mut(&ip) {
            if now.duration_since(*logged) < WINDOW {
                *held += 1;
                return None;
            }
            let before = *held;
            *logged = now;
            *held = 0;
            return Some(before);
        }
        if map.len() >= ADDRESSES {
            map.retain(|_, (logged, held)| now.duration_since(*logged) < WINDOW || *held > 0);
            if map.len() >= ADDRESSES {
                return None;
            }
        }
        map.insert(ip, (now, 0));
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_address_per_window_with_the_count_held_back() {
        let logins = FailedLogins::default();
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "::1".parse().unwrap());
        let t = Instant::now();
        assert_eq!(logins.note(a, t), Some(0));
        for i in 1..=100 {
            assert_eq!(logins.note(a, t + Duration::from_millis(i)), None);
        }
        assert_eq!(logins.note(b, t), Some(0), "another address is logged");
        assert_eq!(logins.note(a, t + WINDOW), Some(100));
        assert_eq!(logins.note(a, t + WINDOW * 3), Some(0));
    }
}
