//! Small helpers: poison-tolerant locks, capped exponential backoff with full jitter, and the
//! wall clock in Kafka's unit.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::protocol::StrBytes;

/// Locks `m`, also after a panic elsewhere (the data guarded here stays consistent per call).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Backoff before retry number `attempt` (0 for the first retry): a uniformly random duration
/// between 0 and `min(max, base * 2^attempt)` ("full jitter"), as KIP-580 and the Java client do.
pub(crate) fn backoff(base: Duration, max: Duration, attempt: u32) -> Duration {
    let cap = base
        .saturating_mul(1u32 << attempt.min(20))
        .min(max)
        .max(Duration::from_millis(1));
    let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(fastrand::u64(0..=nanos))
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_jittered() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(1);
        for attempt in 0..40 {
            let cap = (base * 2u32.pow(attempt.min(20))).min(max);
            for _ in 0..50 {
                assert!(backoff(base, max, attempt) <= cap);
            }
        }
        // Full jitter: not always the cap.
        let distinct: std::collections::HashSet<_> =
            (0..50).map(|_| backoff(base, max, 5)).collect();
        assert!(distinct.len() > 10);
    }
}
