//! `--plot FILE.svg`: one SVG per run, drawn with plotters' SVG backend, with two panels,
//!
//! - the latency percentile curve of each histogram the run has (delivery for produce and
//!   end-to-end, end-to-end latency for end-to-end): x is the percentile on a log scale of
//!   `1 / (1 - p)` (ticks 0, 50, 90, 99, 99.9, 99.99, 100), y the latency in ms;
//! - throughput over time: the records acknowledged (producers) and read (consumers) in each
//!   second since the clients started, drawn as steps (the first and last seconds are usually
//!   partial), with the --rate target as a dashed line.
//!
//! The title is the report's first line (mode and parameters), then the results and the machine.
//! Each panel's legend sits between its title and its plotting area, so it never hides a line.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

use crate::latency::{human_micros, LatencySummary};
use crate::report::RunReport;
use frame::{axes, clean, count, font, note, panel, panel_height, top, width, wrap, Area, Entry};
use scale::{compact, percentile_label, PercentileAxis};

mod frame;
mod scale;
#[cfg(test)]
mod tests;

/// Width of the picture, px (its height follows from the lines of the title and the legends).
const WIDTH: i32 = 960;
/// Left edge and width of both panels' plotting areas, and the height of those areas.
const LEFT: i32 = 80;
const PANEL_WIDTH: i32 = 850;
const PANEL_HEIGHT: i32 = 280;
/// Under a plotting area: tick labels and the axis description.
const X_LABELS: i32 = 50;
/// A panel's title, above its legend.
const PANEL_TITLE: i32 = 28;
/// Height of a row of a legend, px.
const LEGEND_ROW: i32 = 18;
/// Space between the two panels.
const GAP: i32 = 40;
/// Characters per line of the title (15 px bold) and of the lines under it (12 px): longer
/// ones are wrapped after a comma or semicolon so they stay inside the picture.
const TITLE_CHARS: usize = 100;
const SUBTITLE_CHARS: usize = 130;

/// Producer-side lines are blue, consumer-side lines red, the --rate target dashed grey.
const PRODUCER_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const CONSUMER_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const TARGET_COLOR: RGBColor = RGBColor(0x7f, 0x7f, 0x7f);
const GRID_COLOR: RGBColor = RGBColor(0xe0, 0xe0, 0xe0);
/// The target's dashes and the gaps between them, px.
const DASH: (u32, u32) = (6, 4);

/// What the SVG shows, independent of where it came from (a run's report, or a test).
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// The first line, bold; wrapped after a comma or semicolon if long.
    pub title: String,
    /// Smaller lines under the title.
    pub subtitles: Vec<String>,
    /// The latency panel's curves, drawn in this order.
    pub latencies: Vec<LatencyLine>,
    /// Shown in the latency panel when `latencies` has no points.
    pub no_latency: String,
    /// The throughput panel's lines, drawn in this order.
    pub throughput: Vec<RateLine>,
    /// Open loop: the rate asked for, records/s.
    pub target_rate: Option<f64>,
}

/// One percentile curve.
#[derive(Debug, Clone)]
pub struct LatencyLine {
    /// Legend text.
    pub name: String,
    /// Colour of the curve and its legend entry.
    pub color: RGBColor,
    /// (percentile in %, µs), percentiles ascending (see `Latency::percentile_curve`).
    pub curve: Vec<(f64, u64)>,
}

/// One throughput-over-time line.
#[derive(Debug, Clone)]
pub struct RateLine {
    /// Legend text.
    pub name: String,
    /// Colour of the line and its legend entry.
    pub color: RGBColor,
    /// Records in each second since the clients started.
    pub per_second: Vec<u64>,
}

impl Chart {
    /// The chart of a run.
    pub fn of(report: &RunReport) -> Chart {
        let mut chart = Chart {
            title: report.headline(),
            target_rate: report.parameters.rate,
            no_latency: "no latency histogram in this mode (end-to-end measures it)".into(),
            ..Chart::default()
        };
        let mut results = Vec::new();
        if let Some(p) = &report.produce {
            results.push(format!(
                "{} producer(s): {} records acked ({} failed) in {:.2} s, {:.0} records/s, {:.1} MB/s{}",
                p.producers,
                p.records_acked,
                p.records_failed,
                p.seconds,
                p.records_per_s,
                p.mb_per_s,
                if p.timed_out { " [TIMED OUT]" } else { "" },
            ));
            chart.latencies.push(LatencyLine {
                name: legend("delivery (send to ack)", &p.delivery_latency),
                color: PRODUCER_COLOR,
                curve: p.delivery_histogram.percentile_curve(),
            });
            chart.throughput.push(RateLine {
                name: "acknowledged (producers)".into(),
                color: PRODUCER_COLOR,
                per_second: p.acked_per_second.counts().to_vec(),
            });
        }
        if let Some(c) = &report.consume {
            results.push(format!(
                "{} consumer(s): {} records read in {:.2} s, {:.0} records/s, {:.1} MB/s{}",
                c.consumers,
                c.records,
                c.seconds,
                c.records_per_s,
                c.mb_per_s,
                if c.timed_out { " [TIMED OUT]" } else { "" },
            ));
            if let (Some(hist), Some(summary)) = (&c.end_to_end_histogram, &c.end_to_end_latency) {
                chart.latencies.push(LatencyLine {
                    name: legend("end-to-end (send to read)", summary),
                    color: CONSUMER_COLOR,
                    curve: hist.percentile_curve(),
                });
            }
            chart.throughput.push(RateLine {
                name: "read (consumers)".into(),
                color: CONSUMER_COLOR,
                per_second: c.read_per_second.counts().to_vec(),
            });
        }
        let p = &report.parameters;
        // Client settings beyond the headline's, if any were given.
        let mut setup: Vec<String> = Vec::new();
        if let Some(b) = p.batch_size {
            setup.push(format!("batch.size {b}"));
        }
        if let Some(l) = p.linger_ms {
            setup.push(format!("linger.ms {l}"));
        }
        setup.extend(p.config.iter().cloned());
        if let Some(label) = &report.label {
            setup.push(format!("label: {label}"));
        }
        if !setup.is_empty() {
            chart.subtitles.push(setup.join(", "));
        }
        chart.subtitles.push(results.join("; "));
        chart
            .subtitles
            .push(format!("machine: {}", report.machine.describe()));
        chart
    }

    /// The SVG text.
    pub fn svg(&self) -> anyhow::Result<String> {
        let title = wrap(&self.title, TITLE_CHARS);
        let subtitles: Vec<String> = self
            .subtitles
            .iter()
            .flat_map(|s| wrap(s, SUBTITLE_CHARS))
            .collect();
        let (latency_legend, throughput_legend) = (self.latency_legend(), self.throughput_legend());
        let header = 14 + 19 * count(&title) + 3 + 17 * count(&subtitles) + 20;
        let latency_height = panel_height(&latency_legend);
        let height = header + latency_height + GAP + panel_height(&throughput_legend) + 10;
        let mut out = String::new();
        {
            let size = (WIDTH.unsigned_abs(), height.unsigned_abs());
            let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
            root.fill(&WHITE)?;
            let mut y = 14;
            for line in &title {
                let style = font(15.0).style(FontStyle::Bold);
                root.draw(&Text::new(clean(line), (LEFT - 60, y), style))?;
                y += 19;
            }
            y += 3;
            for line in &subtitles {
                root.draw(&Text::new(clean(line), (LEFT - 60, y), font(12.0)))?;
                y += 17;
            }
            let (_, panels) = root.split_vertically(header);
            let (latency, rest) = panels.split_vertically(latency_height);
            let (_, throughput) = rest.split_vertically(GAP);
            self.latency_panel(&latency, &latency_legend)?;
            self.throughput_panel(&throughput, &throughput_legend)?;
            root.present()?;
        }
        Ok(out)
    }

    /// The legend of the latency panel: one entry per curve with points.
    fn latency_legend(&self) -> Vec<Entry> {
        self.latencies
            .iter()
            .filter(|l| !l.curve.is_empty())
            .map(|l| Entry {
                color: l.color,
                dashed: false,
                name: l.name.clone(),
            })
            .collect()
    }

    /// The rate asked for, if it can be drawn.
    fn target(&self) -> Option<f64> {
        self.target_rate.filter(|r| r.is_finite() && *r > 0.0)
    }

    /// The legend of the throughput panel: the target rate, then one entry per line.
    fn throughput_legend(&self) -> Vec<Entry> {
        let target = self.target().map(|r| Entry {
            color: TARGET_COLOR,
            dashed: true,
            name: format!("target rate ({} records/s)", compact(r)),
        });
        let lines = self
            .throughput
            .iter()
            .filter(|l| !l.per_second.is_empty())
            .map(|l| Entry {
                color: l.color,
                dashed: false,
                name: l.name.clone(),
            });
        target.into_iter().chain(lines).collect()
    }

    fn latency_panel(&self, area: &Area, legend: &[Entry]) -> anyhow::Result<()> {
        let max_ms = self
            .latencies
            .iter()
            .flat_map(|l| l.curve.iter().map(|p| p.1 as f64 / 1e3))
            .fold(0.0, f64::max);
        let y = 0.0..top(max_ms);
        let mut chart = panel(area, "Latency by percentile", legend, PercentileAxis, y)?;
        axes(
            &mut chart,
            &percentile_label,
            "percentile (%), log scale of 1 / (1 - p)",
            "latency (ms)",
        )?;
        let curves = self.latencies.iter().filter(|l| !l.curve.is_empty());
        for (i, line) in curves.enumerate() {
            let points = line.curve.iter().map(|&(p, us)| (p, us as f64 / 1e3));
            chart.draw_series(LineSeries::new(points, line.color.stroke_width(width(i))))?;
        }
        if legend.is_empty() {
            note(&chart, &self.no_latency)?;
        }
        Ok(())
    }

    fn throughput_panel(&self, area: &Area, legend: &[Entry]) -> anyhow::Result<()> {
        let seconds = self
            .throughput
            .iter()
            .map(|l| l.per_second.len())
            .max()
            .unwrap_or(0);
        let max_rate = self
            .throughput
            .iter()
            .flat_map(|l| l.per_second.iter().copied())
            .max()
            .unwrap_or(0) as f64;
        let target = self.target();
        // Time ends with the last second recorded, not at the next round number.
        let x_max = (seconds as f64).max(1.0);
        let y_max = top(max_rate.max(target.unwrap_or(0.0)));
        let mut chart = panel(area, "Throughput over time", legend, 0.0..x_max, 0.0..y_max)?;
        axes(
            &mut chart,
            &|v| compact(*v),
            "seconds since the clients started (first and last seconds partial)",
            "records / s",
        )?;
        if let Some(rate) = target {
            let line = [(0.0, rate), (x_max, rate)];
            let style = TARGET_COLOR.stroke_width(2);
            chart.draw_series(DashedLineSeries::new(line, DASH.0, DASH.1, style))?;
        }
        let lines = self.throughput.iter().filter(|l| !l.per_second.is_empty());
        for (i, line) in lines.enumerate() {
            let steps = (0..).zip(&line.per_second).flat_map(|(s, &n)| {
                let (s, n) = (f64::from(s), n as f64);
                [(s, n), (s + 1.0, n)]
            });
            chart.draw_series(LineSeries::new(steps, line.color.stroke_width(width(i))))?;
        }
        if self.throughput.iter().all(|l| l.per_second.is_empty()) {
            note(&chart, "no records")?;
        }
        Ok(())
    }
}

/// Writes the chart of `report` to `path`.
pub fn write_svg(path: &Path, report: &RunReport) -> anyhow::Result<()> {
    std::fs::write(path, Chart::of(report).svg()?)
        .with_context(|| format!("writing {}", path.display()))
}

/// Legend text of a latency line: its name and main percentiles.
fn legend(name: &str, s: &LatencySummary) -> String {
    format!(
        "{name}: p50 {}, p99 {}, p99.9 {}, max {} ({} records)",
        human_micros(s.p50_us),
        human_micros(s.p99_us),
        human_micros(s.p99_9_us),
        human_micros(s.max_us),
        s.count
    )
}
