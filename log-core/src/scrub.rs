//! The scrubber: a background pass over every closed segment that checks each batch's CRC and
//! framing, so damage (bit rot, a bad disk, tampering) is found, logged and reported
//! ([`crate::Partition::damage`]) before a consumer trips on it. Closed segments are otherwise
//! checked only when a read first reaches them. A pass runs at open after an unclean shutdown,
//! then every [`ScrubOptions::interval`], reading at most [`ScrubOptions::bytes_per_second`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::partition::Partition;

/// When and how fast the scrubber reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrubOptions {
    /// Time between the starts of two passes; `None`: only the pass after an unclean shutdown.
    pub interval: Option<Duration>,
    /// Most bytes a second a pass reads (on average over each segment).
    pub bytes_per_second: u64,
}

/// One pass a day, at 50 MiB/s.
pub const DEFAULT_SCRUB: ScrubOptions = ScrubOptions {
    interval: Some(Duration::from_secs(24 * 3600)),
    bytes_per_second: 50 << 20,
};

impl Default for ScrubOptions {
    fn default() -> Self {
        DEFAULT_SCRUB
    }
}

/// What the scrubber has done since the log opened.
#[derive(Debug, Default)]
pub struct ScrubStats {
    /// Passes over every closed segment completed.
    pub passes: AtomicU64,
    /// Bytes of closed segments checked.
    pub bytes: AtomicU64,
}

/// Runs passes until `wait` says to stop. `partitions()` lists the partitions to scrub now;
/// `wait(d)` sleeps up to `d` and returns false once the log is closing. `first_now`: start
/// the first pass at once (after an unclean shutdown) rather than after an interval.
pub(crate) fn run(
    options: ScrubOptions,
    stats: &ScrubStats,
    first_now: bool,
    partitions: impl Fn() -> Vec<Arc<Partition>>,
    wait: impl Fn(Duration) -> bool,
) {
    let rate = options.bytes_per_second.max(1);
    let mut due_now = first_now;
    loop {
        if !due_now {
            match options.interval {
                Some(interval) => {
                    if !wait_for(interval, &wait) {
                        return;
                    }
                }
                None => return,
            }
        }
        due_now = false;
        let started = Instant::now();
        let mut stopped = false;
        for partition in partitions() {
            let scrubbed = partition.scrub(|bytes| {
                stats.bytes.fetch_add(bytes, Ordering::Relaxed);
                let pause = Duration::from_secs_f64(bytes as f64 / rate as f64);
                stopped = !wait_for(pause, &wait);
                !stopped
            });
            if let Err(e) = scrubbed {
                // A segment that cannot be read at all (its file is gone or unreadable).
                tracing::error!(partition = partition.name(), error = %e, "scrub could not read a segment");
            }
            if stopped {
                return;
            }
        }
        stats.passes.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            took_ms = started.elapsed().as_millis() as u64,
            "scrub pass over the closed segments done"
        );
    }
}

/// Waits `total` (woken early by unrelated notifications, so it waits again for the rest);
/// false once the log is closing.
fn wait_for(total: Duration, wait: &impl Fn(Duration) -> bool) -> bool {
    let until = Instant::now() + total;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        if !wait(left) {
            return false;
        }
    }
}
