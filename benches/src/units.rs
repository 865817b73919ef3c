//! Byte sizes on the command line (`64KiB`, `1GiB`, `500MB`, `1000`) and the units of the
//! report: MB is 10^6 bytes (as in BENCHMARKS.md), GiB is 2^30.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A number of bytes, parsed from `N`, `N[KMGT]B` (powers of 1000) or `N[KMGT]iB` (powers of
/// 1024); the unit is case-insensitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let number: f64 = number
            .parse()
            .map_err(|_| format!("{s:?}: expected a number of bytes such as 1000, 64KiB or 1GB"))?;
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" => 1_000,
            "m" | "mb" => 1_000_000,
            "g" | "gb" => 1_000_000_000,
            "t" | "tb" => 1_000_000_000_000,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "tib" => 1 << 40,
            other => return Err(format!("{s:?}: unknown unit {other:?}")),
        };
        let bytes = number * multiplier as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("{s:?}: out of range"));
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
            write!(f, "{}GiB", b >> 30)
        } else if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
            write!(f, "{}MiB", b >> 20)
        } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
            write!(f, "{}KiB", b >> 10)
        } else {
            write!(f, "{b}B")
        }
    }
}

/// Bytes per second in MB/s (10^6 bytes).
pub fn mb_per_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e6
    } else {
        0.0
    }
}

/// Events per second.
pub fn per_s(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Bytes as GiB.
pub fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_and_binary_units() {
        assert_eq!("1000".parse(), Ok(ByteSize(1000)));
        assert_eq!("64KiB".parse(), Ok(ByteSize(65536)));
        assert_eq!("1GiB".parse(), Ok(ByteSize(1 << 30)));
        assert_eq!("500MB".parse(), Ok(ByteSize(500_000_000)));
        assert_eq!("1.5k".parse(), Ok(ByteSize(1500)));
        assert_eq!(" 2 mib ".parse(), Ok(ByteSize(2 << 20)));
        assert!("".parse::<ByteSize>().is_err());
        assert!("12 parsecs".parse::<ByteSize>().is_err());
        assert!("-1".parse::<ByteSize>().is_err());
    }

    #[test]
    fn displays_the_largest_exact_binary_unit() {
        assert_eq!(ByteSize(1 << 30).to_string(), "1GiB");
        assert_eq!(ByteSize(65536).to_string(), "64KiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
    }

    #[test]
    fn rates() {
        assert_eq!(mb_per_s(2_000_000, 2.0), 1.0);
        assert_eq!(per_s(10, 0.0), 0.0);
        assert_eq!(gib(1 << 31), 2.0);
    }
}
