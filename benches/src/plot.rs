//! `--plot FILE.svg`: one hand-written SVG per run with two panels,
//!
//! - the latency percentile curve of each histogram the run has (delivery for produce and
//!   end-to-end, end-to-end latency for end-to-end): x is the percentile on a log scale of
//!   `1 / (1 - p)` (ticks 0, 50, 90, 99, 99.9, 99.99, 100), y the latency in ms;
//! - throughput over time: the records acknowledged (producers) and read (consumers) in each
//!   second since the clients started, drawn as steps (the first and last seconds are usually
//!   partial), with the --rate target as a dashed line.
//!
//! The title is the report's first line (mode and parameters), then the results and the machine.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::latency::{human_micros, LatencySummary};
use crate::report::RunReport;

/// Width of the picture, px (its height follows from the lines of the title).
const WIDTH: f64 = 960.0;
/// Left edge and width of both panels' plotting areas.
const LEFT: f64 = 80.0;
const PANEL_WIDTH: f64 = 850.0;
const PANEL_HEIGHT: f64 = 280.0;
/// Characters per line of the title (15 px bold) and of the lines under it (12 px): longer
/// ones are wrapped after a comma or semicolon so they stay inside the picture.
const TITLE_CHARS: usize = 100;
const SUBTITLE_CHARS: usize = 130;

/// Producer-side lines are blue, consumer-side lines red, the --rate target dashed grey.
const PRODUCER_COLOR: &str = "#1f77b4";
const CONSUMER_COLOR: &str = "#d62728";
const TARGET_COLOR: &str = "#7f7f7f";
const TARGET_DASH: &str = "6 4";
/// Height of a row of a legend (above its panel), px.
const LEGEND_ROW: f64 = 18.0;

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

/// What the SVG shows, independent of where it came from (a run's report, or a test).
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    /// Smaller lines under the title.
    pub subtitles: Vec<String>,
    pub latencies: Vec<LatencyLine>,
    /// Shown in the latency panel when `latencies` has no points.
    pub no_latency: String,
    pub throughput: Vec<RateLine>,
    /// Open loop: the rate asked for, records/s.
    pub target_rate: Option<f64>,
}

/// One percentile curve.
#[derive(Debug, Clone)]
pub struct LatencyLine {
    /// Legend text.
    pub name: String,
    pub color: &'static str,
    /// (percentile in %, µs), percentiles ascending (see `Latency::percentile_curve`).
    pub curve: Vec<(f64, u64)>,
}

/// One throughput-over-time line.
#[derive(Debug, Clone)]
pub struct RateLine {
    /// Legend text.
    pub name: String,
    pub color: &'static str,
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
    pub fn svg(&self) -> String {
        let layout = self.layout();
        let height = layout.height;
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
        for (y, size, weight, line) in &layout.header {
            text(&mut out, LEFT - 60.0, *y, *size, "start", weight, line);
        }
        self.latency_panel(&mut out, layout.latency_top);
        self.throughput_panel(&mut out, layout.throughput_top);
        out.push_str("</svg>\n");
        out
    }

    /// Where things go: the header lines, wrapped, then the two panels.
    fn layout(&self) -> Layout {
        let mut header = Vec::new();
        let mut y = 26.0;
        for line in wrap(&self.title, TITLE_CHARS) {
            header.push((y, 15.0, "bold", line));
            y += 19.0;
        }
        y += 3.0;
        for line in self.subtitles.iter().flat_map(|s| wrap(s, SUBTITLE_CHARS)) {
            header.push((y, 12.0, "normal", line));
            y += 17.0;
        }
        let latency_top = y + 41.0 + LEGEND_ROW * legend_rows(&self.latency_legend()) as f64;
        let throughput_top = latency_top
            + PANEL_HEIGHT
            + 110.0
            + LEGEND_ROW * legend_rows(&self.throughput_legend()) as f64;
        Layout {
            header,
            latency_top,
            throughput_top,
            height: throughput_top + PANEL_HEIGHT + 60.0,
        }
    }

    /// The legend of the latency panel: one entry per curve with points.
    fn latency_legend(&self) -> Vec<Entry> {
        self.latencies
            .iter()
            .filter(|l| !l.curve.is_empty())
            .map(|l| Entry {
                color: l.color,
                dash: "",
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
            dash: TARGET_DASH,
            name: format!("target rate ({} records/s)", compact(r)),
        });
        let lines = self
            .throughput
            .iter()
            .filter(|l| !l.per_second.is_empty())
            .map(|l| Entry {
                color: l.color,
                dash: "",
                name: l.name.clone(),
            });
        target.into_iter().chain(lines).collect()
    }

    fn latency_panel(&self, out: &mut String, top: f64) {
        let max_us = self
            .latencies
            .iter()
            .flat_map(|l| l.curve.iter().map(|p| p.1))
            .max();
        let (y_max, y_ticks) = axis(max_us.map_or(0.0, |us| us as f64 / 1e3));
        let frame = Frame {
            top,
            x_max: MAX_POSITION,
            y_max,
        };
        let x_ticks: Vec<(f64, String)> = PERCENTILE_TICKS
            .iter()
            .map(|&(p, label)| (percentile_position(p), label.to_string()))
            .collect();
        let y_ticks = labelled(&y_ticks);
        let legend = self.latency_legend();
        frame.title(out, "Latency by percentile", legend_rows(&legend));
        frame.axes(
            out,
            &x_ticks,
            &y_ticks,
            "percentile (%), log scale of 1 / (1 - p)",
            "latency (ms)",
        );
        let curves = self.latencies.iter().filter(|l| !l.curve.is_empty());
        for (i, line) in curves.enumerate() {
            let points: Vec<(f64, f64)> = line
                .curve
                .iter()
                .map(|&(p, us)| (percentile_position(p), us as f64 / 1e3))
                .collect();
            frame.polyline(out, line.color, "", width(i), &points);
        }
        if legend.is_empty() {
            frame.note(out, &self.no_latency);
        }
        frame.legend(out, &legend);
    }

    fn throughput_panel(&self, out: &mut String, top: f64) {
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
        // Some room above the highest line.
        let (y_max, y_ticks) = axis(max_rate.max(target.unwrap_or(0.0)) * 1.1);
        // Time ends with the last second recorded, not at the next round number.
        let (_, x_ticks) = axis(seconds as f64);
        let x_max = (seconds as f64).max(1.0);
        let x_ticks: Vec<f64> = x_ticks.into_iter().filter(|t| *t <= x_max).collect();
        let frame = Frame { top, x_max, y_max };
        let legend = self.throughput_legend();
        frame.title(out, "Throughput over time", legend_rows(&legend));
        frame.axes(
            out,
            &labelled(&x_ticks),
            &labelled(&y_ticks),
            "seconds since the clients started (first and last seconds partial)",
            "records / s",
        );
        if let Some(rate) = target {
            frame.polyline(
                out,
                TARGET_COLOR,
                TARGET_DASH,
                1.5,
                &[(0.0, rate), (x_max, rate)],
            );
        }
        let lines = self.throughput.iter().filter(|l| !l.per_second.is_empty());
        for (i, line) in lines.enumerate() {
            let mut points = Vec::with_capacity(line.per_second.len() * 2);
            for (i, &count) in line.per_second.iter().enumerate() {
                points.push((i as f64, count as f64));
                points.push((i as f64 + 1.0, count as f64));
            }
            frame.polyline(out, line.color, "", width(i), &points);
        }
        if self.throughput.iter().all(|l| l.per_second.is_empty()) {
            frame.note(out, "no records");
        }
        frame.legend(out, &legend);
    }
}

/// One legend entry: a short line in the color (and dash) of a series, and its name.
#[derive(Debug, Clone)]
struct Entry {
    color: &'static str,
    dash: &'static str,
    name: String,
}

/// Where each legend entry goes: (x offset from the panel's left edge, row), entries flowing
/// left to right and wrapping at the panel's width.
fn legend_places(entries: &[Entry]) -> Vec<(f64, usize)> {
    let mut places = Vec::with_capacity(entries.len());
    let (mut x, mut row) = (0.0, 0);
    for e in entries {
        let w = 34.0 + 6.2 * e.name.chars().count() as f64;
        if x > 0.0 && x + w > PANEL_WIDTH {
            x = 0.0;
            row += 1;
        }
        places.push((x, row));
        x += w + 24.0;
    }
    places
}

/// Rows a legend takes.
fn legend_rows(entries: &[Entry]) -> usize {
    legend_places(entries).last().map_or(0, |p| p.1 + 1)
}

/// Where the parts of the picture go.
#[derive(Debug, Clone)]
struct Layout {
    /// (baseline, font size, font weight, text) of each line above the panels.
    header: Vec<(f64, f64, &'static str, String)>,
    /// Top edges of the two panels' plotting areas.
    latency_top: f64,
    throughput_top: f64,
    height: f64,
}

/// Stroke width of the `i`-th line of a panel: each thinner than the one before, so a line
/// drawn exactly over another (producers and consumers at the same rate) leaves it visible.
fn width(i: usize) -> f64 {
    (3.5 - 1.5 * i as f64).max(1.0)
}

/// `s` cut into lines of at most `max` characters after ", " or "; " (a longer piece stays
/// whole).
fn wrap(s: &str, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        let cut = [", ", "; "]
            .iter()
            .filter_map(|sep| rest.find(sep).map(|i| i + sep.len()))
            .min()
            .unwrap_or(rest.len());
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        if !current.is_empty() && current.chars().count() + piece.trim_end().chars().count() > max {
            lines.push(current.trim_end().to_string());
            current.clear();
        }
        current.push_str(piece);
    }
    if !current.is_empty() || lines.is_empty() {
        lines.push(current.trim_end().to_string());
    }
    lines
}

/// Writes the chart of `report` to `path`.
pub fn write_svg(path: &Path, report: &RunReport) -> anyhow::Result<()> {
    std::fs::write(path, Chart::of(report).svg())
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

/// A percentile's place on the x axis: `log10(1 / (1 - p/100))`, the maximum at
/// [`MAX_POSITION`].
fn percentile_position(p: f64) -> f64 {
    if p >= 100.0 {
        return MAX_POSITION;
    }
    (-(1.0 - p / 100.0).log10()).clamp(0.0, MAX_POSITION)
}

/// The plotting area of a panel and its data ranges (both axes start at 0).
#[derive(Debug, Clone, Copy)]
struct Frame {
    top: f64,
    x_max: f64,
    y_max: f64,
}

impl Frame {
    fn x(&self, v: f64) -> f64 {
        LEFT + PANEL_WIDTH * (v / self.x_max).clamp(0.0, 1.0)
    }

    fn y(&self, v: f64) -> f64 {
        self.top + PANEL_HEIGHT * (1.0 - (v / self.y_max).clamp(0.0, 1.0))
    }

    fn bottom(&self) -> f64 {
        self.top + PANEL_HEIGHT
    }

    /// The panel's title, above `legend_rows` rows of legend.
    fn title(&self, out: &mut String, title: &str, legend_rows: usize) {
        let y = self.top - 14.0 - LEGEND_ROW * legend_rows as f64;
        text(out, LEFT, y, 14.0, "start", "bold", title);
    }

    /// Grid, axes, tick labels and axis labels.
    fn axes(
        &self,
        out: &mut String,
        x_ticks: &[(f64, String)],
        y_ticks: &[(f64, String)],
        x_label: &str,
        y_label: &str,
    ) {
        let (top, bottom, right) = (self.top, self.bottom(), LEFT + PANEL_WIDTH);
        for (v, label) in x_ticks {
            let x = self.x(*v);
            line(out, x, top, x, bottom, "#e0e0e0");
            line(out, x, bottom, x, bottom + 5.0, "black");
            text(out, x, bottom + 19.0, 11.0, "middle", "normal", label);
        }
        for (v, label) in y_ticks {
            let y = self.y(*v);
            line(out, LEFT, y, right, y, "#e0e0e0");
            line(out, LEFT - 5.0, y, LEFT, y, "black");
            text(out, LEFT - 8.0, y + 4.0, 11.0, "end", "normal", label);
        }
        line(out, LEFT, top, LEFT, bottom, "black");
        line(out, LEFT, bottom, right, bottom, "black");
        text(
            out,
            LEFT + PANEL_WIDTH / 2.0,
            bottom + 40.0,
            12.0,
            "middle",
            "normal",
            x_label,
        );
        let (x, y) = (LEFT - 58.0, top + PANEL_HEIGHT / 2.0);
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {x:.1} {y:.1})">{}</text>"#,
            escape(y_label)
        );
    }

    /// A line through data points (`dash`: an SVG stroke-dasharray, or "" for solid).
    fn polyline(
        &self,
        out: &mut String,
        color: &str,
        dash: &str,
        width: f64,
        points: &[(f64, f64)],
    ) {
        let mut coords = String::with_capacity(points.len() * 14);
        for (i, &(x, y)) in points.iter().enumerate() {
            if i > 0 {
                coords.push(' ');
            }
            let _ = write!(coords, "{:.1},{:.1}", self.x(x), self.y(y));
        }
        let dash = if dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{dash}""#)
        };
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="{width}" stroke-linejoin="round"{dash} points="{coords}"/>"#
        );
    }

    /// The legend, in rows between the panel's title and its plotting area.
    fn legend(&self, out: &mut String, entries: &[Entry]) {
        let places = legend_places(entries);
        let rows = legend_rows(entries);
        for (e, (dx, row)) in entries.iter().zip(places) {
            let x = LEFT + dx;
            let y = self.top - 14.0 - LEGEND_ROW * (rows - 1 - row) as f64;
            let dash = if e.dash.is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{}""#, e.dash)
            };
            let _ = writeln!(
                out,
                r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2"{dash}/>"#,
                y - 4.0,
                x + 24.0,
                y - 4.0,
                e.color
            );
            text(out, x + 30.0, y, 11.0, "start", "normal", &e.name);
        }
    }

    /// A note in the middle of an empty panel.
    fn note(&self, out: &mut String, note: &str) {
        let (x, y) = (LEFT + PANEL_WIDTH / 2.0, self.top + PANEL_HEIGHT / 2.0);
        text(out, x, y, 13.0, "middle", "normal", note);
    }
}

fn line(out: &mut String, x1: f64, y1: f64, x2: f64, y2: f64, color: &str) {
    let _ = writeln!(
        out,
        r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{color}" stroke-width="1"/>"#
    );
}

fn text(out: &mut String, x: f64, y: f64, size: f64, anchor: &str, weight: &str, s: &str) {
    let _ = writeln!(
        out,
        r#"<text x="{x:.1}" y="{y:.1}" font-size="{size}" text-anchor="{anchor}" font-weight="{weight}">{}</text>"#,
        escape(s)
    );
}

/// Text safe inside an XML element or attribute.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// An axis from 0 covering `max`: its end (a round number) and the ticks, about 5 of them, at
/// 1, 2, 2.5 or 5 times a power of ten. An empty or invalid range becomes 0..1.
fn axis(max: f64) -> (f64, Vec<f64>) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let n = (max / step - 1e-9).ceil().max(1.0) as u32;
    let ticks = (0..=n).map(|i| f64::from(i) * step).collect();
    (f64::from(n) * step, ticks)
}

/// Tick labels for evenly spaced ticks, with the decimals their step needs.
fn labelled(ticks: &[f64]) -> Vec<(f64, String)> {
    let step = match ticks {
        [a, b, ..] => b - a,
        _ => 1.0,
    };
    ticks.iter().map(|&v| (v, tick_label(v, step))).collect()
}

fn tick_label(v: f64, step: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let (scaled, scaled_step, suffix) = if step >= 1e6 {
        (v / 1e6, step / 1e6, "M")
    } else if step >= 1e3 {
        (v / 1e3, step / 1e3, "k")
    } else {
        (v, step, "")
    };
    let decimals = decimals_for(scaled_step);
    format!("{scaled:.decimals$}{suffix}")
}

/// Decimals that show multiples of `step` exactly (for steps of 1, 2, 2.5 or 5 × 10^k).
fn decimals_for(step: f64) -> usize {
    let mut decimals = 0;
    let mut s = step;
    while decimals < 6 && (s - s.round()).abs() > 1e-6 * s.max(1.0) {
        s *= 10.0;
        decimals += 1;
    }
    decimals
}

/// A rate in few characters: `950`, `20k`, `1.25M`.
fn compact(v: f64) -> String {
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
    use crate::latency::Latency;

    /// Checks that every element is closed in order and that `&` only starts an entity: enough
    /// XML to catch a broken writer, without an XML crate.
    fn assert_well_formed(svg: &str) {
        let mut open: Vec<&str> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                assert!(
                    ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                        .iter()
                        .any(|e| entity.starts_with(e)),
                    "bare & in {text:?}"
                );
            }
            let end = rest[start..]
                .find('>')
                .map(|e| start + e)
                .expect("tag ends");
            let tag = &rest[start + 1..end];
            assert!(!tag.contains('<'), "< inside a tag: {tag:?}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop(), Some(name.trim()), "closing {name}");
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().expect("tag name");
                open.push(name);
            }
            rest = &rest[end + 1..];
        }
        assert!(open.is_empty(), "unclosed: {open:?}");
        assert!(rest.trim().is_empty());
    }

    fn synthetic() -> Chart {
        let mut l = Latency::new();
        for us in 1..=20_000u64 {
            l.record_micros(500 + us % 3_000 + if us % 1000 == 0 { 40_000 } else { 0 });
        }
        Chart {
            title: "lograil-bench end-to-end: topic <t> & \"friends\"".into(),
            subtitles: vec!["1 producer(s), 1 consumer(s)".into()],
            latencies: vec![LatencyLine {
                name: "delivery".into(),
                color: PRODUCER_COLOR,
                curve: l.percentile_curve(),
            }],
            no_latency: "none".into(),
            throughput: vec![
                RateLine {
                    name: "acknowledged".into(),
                    color: PRODUCER_COLOR,
                    per_second: vec![12_000, 20_000, 20_000, 8_000],
                },
                RateLine {
                    name: "read".into(),
                    color: CONSUMER_COLOR,
                    per_second: vec![11_000, 20_000, 20_000, 9_000],
                },
            ],
            target_rate: Some(20_000.0),
        }
    }

    #[test]
    fn svg_of_synthetic_data() {
        let chart = synthetic();
        let svg = chart.svg();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_well_formed(&svg);
        assert!(svg.contains("topic &lt;t&gt; &amp; &quot;friends&quot;"));
        // Two throughput lines, one latency line, one target line.
        assert_eq!(svg.matches("<polyline").count(), 4);
        // The throughput panel: 4 seconds, y axis up to 25k (20k * 1.25).
        let layout = chart.layout();
        let frame = Frame {
            top: layout.throughput_top,
            x_max: 4.0,
            y_max: 25_000.0,
        };
        let first_step = format!(
            "{:.1},{:.1} {:.1},{:.1}",
            frame.x(0.0),
            frame.y(12_000.0),
            frame.x(1.0),
            frame.y(12_000.0)
        );
        assert!(svg.contains(&format!(r#"points="{first_step}"#)), "{svg}");
        // The latency curve starts at 0% and ends at the max, at the right edge.
        let curve = &chart.latencies[0].curve;
        let max_ms = curve[curve.len() - 1].1 as f64 / 1e3;
        let (y_max, _) = axis(max_ms);
        let latency = Frame {
            top: layout.latency_top,
            x_max: MAX_POSITION,
            y_max,
        };
        let end = format!("{:.1},{:.1}\"", latency.x(MAX_POSITION), latency.y(max_ms));
        assert!(svg.contains(&end), "{end} in {svg}");
        for label in ["99.99", ">100<", "20k", "target rate (20k records/s)"] {
            assert!(svg.contains(label), "{label}");
        }
    }

    #[test]
    fn zero_length_run() {
        let chart = Chart {
            latencies: vec![LatencyLine {
                name: "delivery".into(),
                color: PRODUCER_COLOR,
                curve: Latency::new().percentile_curve(),
            }],
            no_latency: "no latency".into(),
            throughput: vec![RateLine {
                name: "read".into(),
                color: CONSUMER_COLOR,
                per_second: Vec::new(),
            }],
            ..Chart::default()
        };
        let svg = chart.svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_well_formed(&svg);
        assert!(!svg.contains("<polyline"));
        assert!(svg.contains("no latency") && svg.contains("no records"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert_well_formed(&Chart::default().svg());
    }

    #[test]
    fn long_lines_wrap_after_commas() {
        let line = "lograil-bench produce: brokers a:1, topic t (6 partitions), 1000 B values";
        assert_eq!(
            wrap(line, 40),
            vec![
                "lograil-bench produce: brokers a:1,",
                "topic t (6 partitions), 1000 B values"
            ]
        );
        assert_eq!(wrap(line, 200), vec![line]);
        assert_eq!(wrap("", 10), vec![""]);
        assert_eq!(
            wrap("no-separator-but-long", 5),
            vec!["no-separator-but-long"]
        );
    }

    #[test]
    fn axes_are_round() {
        let (max, ticks) = axis(0.0);
        assert_eq!((max, ticks.len()), (1.0, 6));
        let (max, ticks) = axis(23_400.0);
        assert_eq!(max, 25_000.0);
        assert_eq!(ticks.len(), 6);
        let (max, ticks) = axis(7.0);
        assert_eq!((max, ticks.len()), (8.0, 5));
        assert_eq!(axis(f64::NAN).0, 1.0);
        assert_eq!(tick_label(25_000.0, 5_000.0), "25k");
        assert_eq!(tick_label(0.0, 5_000.0), "0");
        assert_eq!(tick_label(12_500.0, 2_500.0), "12.5k");
        assert_eq!(tick_label(0.4, 0.2), "0.4");
        assert_eq!(tick_label(1.25, 0.25), "1.25");
        assert_eq!(compact(20_000.0), "20k");
        assert_eq!(compact(1_250_000.0), "1.25M");
        assert!((percentile_position(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(percentile_position(0.0), 0.0);
        assert_eq!(percentile_position(100.0), MAX_POSITION);
    }
}
