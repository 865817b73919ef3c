//! `buffer.memory`: bytes of records accepted and not yet acknowledged. `send` waits for room in
//! arrival order (a fair semaphore); `try_send` is refused at once with a retry-after computed
//! from the measured drain rate: bytes freed per second by acknowledged (or failed) batches,
//! smoothed over one-second windows.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::Semaphore;

use crate::util::lock;

const WINDOW: Duration = Duration::from_secs(1);

/// Bytes freed per second, smoothed.
#[derive(Debug)]
struct DrainMeter {
    window_start: Instant,
    window_bytes: usize,
    /// Bytes per second; 0 before anything drained or after a silent stretch.
    rate: f64,
}

impl DrainMeter {
    /// Closes the current window if it is over: the rate moves halfway to the window's rate,
    /// and every further silent window halves it again.
    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed < WINDOW {
            return;
        }
        let current = self.window_bytes as f64 / elapsed.as_secs_f64();
        let windows = (elapsed.as_secs_f64() / WINDOW.as_secs_f64()).floor();
        self.rate = if self.rate == 0.0 {
            current
        } else {
            0.5 * self.rate + 0.5 * current
        };
        // Silent windows beyond the first halve the rate each.
        self.rate *= 0.5f64.powf((windows - 1.0).max(0.0));
        if self.rate < 1.0 {
            self.rate = 0.0;
        }
        self.window_start = now;
        self.window_bytes = 0;
    }
}

#[derive(Debug)]
pub(super) struct BufferPool {
    semaphore: Arc<Semaphore>,
    total: usize,
    meter: Mutex<DrainMeter>,
    /// The hint when nothing has drained lately (`retry.backoff.max.ms`).
    fallback: Duration,
}

impl BufferPool {
    pub(super) fn new(total: usize, fallback: Duration) -> BufferPool {
        BufferPool {
            semaphore: Arc::new(Semaphore::new(total.min(Semaphore::MAX_PERMITS))),
            total,
            meter: Mutex::new(DrainMeter {
                window_start: Instant::now(),
                window_bytes: 0,
                rate: 0.0,
            }),
            fallback,
        }
    }

    fn permits(size: usize) -> u32 {
        u32::try_from(size.max(1)).unwrap_or(u32::MAX)
    }

    /// Waits for `size` bytes; `Err` only if the pool is closed.
    pub(super) async fn acquire(&self, size: usize) -> Result<(), ()> {
        let permit = self
            .semaphore
            .acquire_many(Self::permits(size))
            .await
            .map_err(|_| ())?;
        permit.forget();
        Ok(())
    }

    /// Takes `size` bytes if they are free now.
    pub(super) fn try_acquire_quiet(&self, size: usize) -> bool {
        match self.semaphore.try_acquire_many(Self::permits(size)) {
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        }
    }

    /// Takes `size` bytes now, or says when to try again.
    pub(super) fn try_acquire(&self, size: usize) -> Result<(), Duration> {
        match self.semaphore.try_acquire_many(Self::permits(size)) {
            Ok(permit) => {
                permit.forget();
                Ok(())
            }
            Err(_) => Err(self.retry_after(size)),
        }
    }

    /// Gives `size` bytes back (a batch was acknowledged or failed).
    pub(super) fn release(&self, size: usize) {
        if size == 0 {
            return;
        }
        self.semaphore.add_permits(Self::permits(size) as usize);
        let now = Instant::now();
        let mut meter = lock(&self.meter);
        meter.roll(now);
        meter.window_bytes += size;
    }

    /// How long until `size` bytes are likely free at the measured drain rate.
    pub(super) fn retry_after(&self, size: usize) -> Duration {
        let available = self.semaphore.available_permits();
        let missing = size.saturating_sub(available).max(1);
        let mut meter = lock(&self.meter);
        meter.roll(Instant::now());
        // The current window counts too: a fresh burst of acknowledgements is evidence.
        let elapsed = meter.window_start.elapsed().as_secs_f64();
        let rate = if meter.window_bytes > 0 && elapsed > 0.0 {
            meter
                .rate
                .max(meter.window_bytes as f64 / elapsed.max(WINDOW.as_secs_f64()))
        } else {
            meter.rate
        };
        if rate <= 0.0 {
            return self.fallback;
        }
        Duration::from_secs_f64(missing as f64 / rate)
            .clamp(Duration::from_millis(1), Duration::from_secs(60))
    }

    pub(super) fn used(&self) -> usize {
        self.total
            .saturating_sub(self.semaphore.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn full_pool_refuses_with_a_hint_from_the_drain_rate() {
        let pool = BufferPool::new(1000, Duration::from_secs(1));
        assert!(pool.try_acquire(800).is_ok());
        // Nothing drained yet: the fallback.
        assert_eq!(pool.try_acquire(400), Err(Duration::from_secs(1)));
        assert_eq!(pool.used(), 800);
        // 100 bytes freed per second for a few seconds.
        for _ in 0..4 {
            tokio::time::advance(Duration::from_secs(1)).await;
            pool.release(100);
            assert!(pool.try_acquire(100).is_ok());
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        let hint = pool.try_acquire(400).unwrap_err();
        // 200 bytes free, 200 missing at ~100 B/s: about two seconds.
        assert!(
            hint >= Duration::from_millis(1500) && hint <= Duration::from_millis(2500),
            "{hint:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn acquire_waits_for_release() {
        let pool = Arc::new(BufferPool::new(100, Duration::from_secs(1)));
        pool.acquire(100).await.unwrap();
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.acquire(50).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        pool.release(60);
        waiter.await.unwrap().unwrap();
        assert_eq!(pool.used(), 90);
    }
}
