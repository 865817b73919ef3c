//! The axes' scales and tick labels: percentiles on a log scale of `1 / (1 - p)`, and numbers
//! in few characters.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Where the 100th percentile (the maximum) sits on the percentile axis, in units of
/// `log10(1 / (1 - p))`: one step right of 99.99%.
const MAX_POSITION: f64 = 5.0;

/// Percentile ticks: (percentile, label).
const PERCENTILE_TICKS: [(f64, &str); 7] = [
    (0.0, "0"),
    (50.0, "50"),
    (90.0, "90"),
    (99.0, "99"),
    (99.9, "99.9"),
    (99.99, "99.99"),
    (100.0, "100"),
];

/// The percentile axis: values in %, each placed at [`percentile_position`], a tick at each of
/// [`PERCENTILE_TICKS`].
#[derive(Debug, Clone, Copy)]
pub(super) struct PercentileAxis;

impl Ranged for PercentileAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, p: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(0.0..MAX_POSITION).map(&percentile_position(*p), limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        PERCENTILE_TICKS.map(|(p, _)| p).to_vec()
    }

    fn range(&self) -> Range<f64> {
        0.0..100.0
    }
}

/// A percentile's place on the x axis: `log10(1 / (1 - p/100))`, the maximum at
/// [`MAX_POSITION`].
fn percentile_position(p: f64) -> f64 {
    if p >= 100.0 {
        return MAX_POSITION;
    }
    (-(1.0 - p / 100.0).log10()).clamp(0.0, MAX_POSITION)
}

/// The label of the percentile tick at `percentile`.
pub(super) fn percentile_label(percentile: &f64) -> String {
    PERCENTILE_TICKS
        .iter()
        .find(|(p, _)| (p - percentile).abs() < 1e-9)
        .map_or_else(String::new, |(_, label)| (*label).to_string())
}

/// A number in few characters: `0.25`, `950`, `20k`, `1.25M`.
pub(super) fn compact(v: f64) -> String {
    let (scaled, suffix) = if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{scaled:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_positions() {
        assert_eq!(compact(20_000.0), "20k");
        assert_eq!(compact(12_500.0), "12.5k");
        assert_eq!(compact(1_250_000.0), "1.25M");
        assert_eq!(compact(0.25), "0.25");
        assert_eq!(compact(0.0), "0");
        assert!((percentile_position(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(percentile_position(0.0), 0.0);
        assert_eq!(percentile_position(100.0), MAX_POSITION);
        assert_eq!(percentile_label(&99.99), "99.99");
        assert_eq!(percentile_label(&100.0), "100");
        assert_eq!(percentile_label(&1.5), "");
        // The axis: 99.9% three fifths of the way, the max at the right end.
        assert_eq!(PercentileAxis.map(&99.9, (0, 500)), 300);
        assert_eq!(PercentileAxis.map(&100.0, (0, 500)), 500);
    }
}
