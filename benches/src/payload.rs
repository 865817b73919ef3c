//! Record values and the clock stamped in them. The first 8 bytes of a value are its (intended)
//! send time in µs since the Unix epoch, little-endian; a consumer in any process on the same
//! machine subtracts it from its own clock for end-to-end latency. The rest is filler.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bytes of the send-time stamp at the start of each value.
pub const STAMP_LEN: usize = 8;

/// A monotonic clock anchored to the wall clock once, so instants from [`Instant`] (used for
/// pacing and intervals) convert to µs since the Unix epoch (stamped in records) without
/// calling the wall clock for every record.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: Instant,
    base_wall_us: u64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// Anchors the clock now.
    pub fn new() -> Clock {
        Clock {
            base: Instant::now(),
            base_wall_us: wall_us_now(),
        }
    }

    /// The instant the clock was anchored at.
    pub fn base(&self) -> Instant {
        self.base
    }

    /// Nanoseconds from the anchor to `at` (0 if before it).
    pub fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant `nanos` after the anchor.
    pub fn instant(&self, nanos: u64) -> Instant {
        self.base + Duration::from_nanos(nanos)
    }

    /// `at` in µs since the Unix epoch.
    pub fn wall_us(&self, at: Instant) -> u64 {
        self.base_wall_us + self.nanos(at) / 1_000
    }
}

/// The wall clock in µs since the Unix epoch (0 if the clock is before 1970).
pub fn wall_us_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A reusable record value of a fixed size.
#[derive(Debug, Clone)]
pub struct Payload {
    bytes: Vec<u8>,
}

impl Payload {
    /// A value of `size` bytes of filler (not all zeros, so a compressing client can't cheat
    /// much; the harness does not enable compression).
    pub fn new(size: usize) -> Payload {
        let bytes = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
        Payload { bytes }
    }

    /// Writes the send time into the stamp (values shorter than the stamp are not stamped).
    pub fn stamp(&mut self, wall_us: u64) {
        if let Some(head) = self.bytes.get_mut(..STAMP_LEN) {
            head.copy_from_slice(&wall_us.to_le_bytes());
        }
    }

    /// The value as sent.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The send time stamped in a value, if it is long enough to hold one.
pub fn read_stamp(value: &[u8]) -> Option<u64> {
    let head: [u8; STAMP_LEN] = value.get(..STAMP_LEN)?.try_into().ok()?;
    Some(u64::from_le_bytes(head))
}

/// Record keys: `--keys N` distinct keys `key-0` .. `key-(N-1)`, cycled through, or with
/// `--random-keys` drawn at random (the same draws in every run).
#[derive(Debug, Clone)]
pub struct Keys {
    keys: Vec<String>,
    random: bool,
}

impl Keys {
    /// `count` distinct keys (0: records have no key), cycled through.
    pub fn new(count: u64) -> Keys {
        Keys {
            keys: (0..count).map(|i| format!("key-{i}")).collect(),
            random: false,
        }
    }

    /// `count` distinct keys, the `n`-th record's drawn from them by a hash of `n`.
    pub fn random(count: u64) -> Keys {
        Keys {
            random: true,
            ..Keys::new(count)
        }
    }

    /// The key of the `n`-th record, if records are keyed.
    pub fn get(&self, n: u64) -> Option<&str> {
        if self.keys.is_empty() {
            return None;
        }
        let draw = if self.random { splitmix64(n) } else { n };
        let i = usize::try_from(draw % self.keys.len() as u64).ok()?;
        self.keys.get(i).map(String::as_str)
    }
}

/// SplitMix64's output function: a fixed, well-spread hash of `n`.
fn splitmix64(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips_and_short_values_are_left_alone() {
        let mut p = Payload::new(100);
        p.stamp(1_234_567_890_123);
        assert_eq!(p.bytes().len(), 100);
        assert_eq!(read_stamp(p.bytes()), Some(1_234_567_890_123));
        let mut short = Payload::new(4);
        short.stamp(7);
        assert_eq!(read_stamp(short.bytes()), None);
    }

    #[test]
    fn clock_converts_instants_to_wall_time() {
        let clock = Clock::new();
        let later = clock.base() + Duration::from_millis(1500);
        assert_eq!(clock.nanos(later), 1_500_000_000);
        assert_eq!(clock.instant(1_500_000_000), later);
        assert_eq!(
            clock.wall_us(later) - clock.wall_us(clock.base()),
            1_500_000
        );
        // The clock's wall time lies between two readings of the system clock around it.
        let before = wall_us_now();
        let read = clock.wall_us(Instant::now());
        let after = wall_us_now();
        assert!(
            (before - 1_000..=after + 1_000).contains(&read),
            "{before} <= {read} <= {after}"
        );
    }

    #[test]
    fn keys_cycle() {
        let keys = Keys::new(3);
        assert_eq!(keys.get(0), Some("key-0"));
        assert_eq!(keys.get(4), Some("key-1"));
        assert_eq!(Keys::new(0).get(5), None);
    }

    #[test]
    fn random_keys_repeat_across_runs_and_spread() {
        let (a, b) = (Keys::random(100), Keys::random(100));
        let draws: Vec<&str> = (0..10_000).filter_map(|n| a.get(n)).collect();
        assert!((0..10_000).all(|n| b.get(n) == Some(draws[n as usize])));
        let distinct: std::collections::HashSet<&str> = draws.iter().copied().collect();
        assert_eq!(distinct.len(), 100);
        let cycled = Keys::new(100);
        assert!((0..100).any(|n| a.get(n) != cycled.get(n)), "not the cycle");
    }
}
