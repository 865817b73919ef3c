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

use std::ops::Range;
use std::path::Path;

use anyhow::Context;
use plotters::coord::ranged1d::{AsRangedCoord, DefaultFormatting, KeyPointHint, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::latency::{human_micros, LatencySummary};
use crate::report::RunReport;

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
    pub color: RGBColor,
    /// (percentile in %, µs), percentiles ascending (see `Latency::percentile_curve`).
    pub curve: Vec<(f64, u64)>,
}

/// One throughput-over-time line.
#[derive(Debug, Clone)]
pub struct RateLine {
    /// Legend text.
    pub name: String,
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

/// The percentile axis: values in %, each placed at [`percentile_position`], a tick at each of
/// [`PERCENTILE_TICKS`].
#[derive(Debug, Clone, Copy)]
struct PercentileAxis;

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

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Panel<'a, 'b, X> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>;

/// Lines of text, as a pixel multiplier.
fn count(lines: &[String]) -> i32 {
    i32::try_from(lines.len()).unwrap_or(i32::MAX / 1024)
}

/// Height of a panel: title, legend, plotting area, x labels.
fn panel_height(legend: &[Entry]) -> i32 {
    PANEL_TITLE + LEGEND_ROW * legend_rows(legend) + 10 + PANEL_HEIGHT + X_LABELS
}

/// A sans-serif font of `px` pixels (plotters' SVG backend writes the size divided by 1.24).
fn font(px: f64) -> FontDesc<'static> {
    ("sans-serif", px * 1.24).into_font()
}

/// Text as it can go into the SVG: plotters escapes markup characters, not control ones.
fn clean(s: &str) -> String {
    s.replace(char::is_control, " ")
}

/// The top of a value axis from 0 covering `max`, with some room above the highest line; an
/// empty or invalid range becomes 0..1.
fn top(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// A panel in `area`: its title, its legend, and under them a chart of `x` by `y` whose
/// plotting area is `PANEL_WIDTH` × `PANEL_HEIGHT` at `LEFT`.
fn panel<'a, 'b, X: Ranged<ValueType = f64>>(
    area: &'a Area<'b>,
    title: &str,
    legend: &[Entry],
    x: impl AsRangedCoord<CoordDescType = X, Value = f64>,
    y: Range<f64>,
) -> anyhow::Result<Panel<'a, 'b, X>> {
    let bold = font(14.0).style(FontStyle::Bold);
    area.draw(&Text::new(title, (LEFT, 0), bold))?;
    for (e, (dx, row)) in legend.iter().zip(legend_places(legend)) {
        let (x, y) = (LEFT + dx, PANEL_TITLE + LEGEND_ROW * row + LEGEND_ROW / 2);
        let style = e.color.stroke_width(2);
        let line = [(x, y), (x + 24, y)];
        if e.dashed {
            area.draw(&DashedPathElement::new(line, DASH.0, DASH.1, style))?;
        } else {
            area.draw(&PathElement::new(line, style))?;
        }
        let text = TextStyle::from(font(11.0)).pos(Pos::new(HPos::Left, VPos::Center));
        area.draw(&Text::new(clean(&e.name), (x + 30, y), text))?;
    }
    let (_, below) = area.split_vertically(PANEL_TITLE + LEGEND_ROW * legend_rows(legend) + 10);
    let chart = ChartBuilder::on(&below)
        .margin_left(10)
        .y_label_area_size(LEFT - 10)
        .x_label_area_size(X_LABELS)
        .margin_right(WIDTH - LEFT - PANEL_WIDTH)
        .build_cartesian_2d(x, y)?;
    Ok(chart)
}

/// Grid, axes, tick labels (the x ones from `x_label`) and axis descriptions.
fn axes<X: Ranged<ValueType = f64> + ValueFormatter<f64>>(
    chart: &mut Panel<'_, '_, X>,
    x_label: &dyn Fn(&f64) -> String,
    x_desc: &str,
    y_desc: &str,
) -> anyhow::Result<()> {
    chart
        .configure_mesh()
        .bold_line_style(GRID_COLOR)
        .light_line_style(TRANSPARENT)
        .x_labels(8)
        .y_labels(6)
        .x_label_formatter(x_label)
        .y_label_formatter(&|v| compact(*v))
        .label_style(font(11.0))
        .axis_desc_style(font(12.0))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    Ok(())
}

/// A note in the middle of an empty panel.
fn note<X: Ranged<ValueType = f64>>(chart: &Panel<'_, '_, X>, note: &str) -> anyhow::Result<()> {
    let (x, y) = (chart.x_range(), chart.y_range());
    let middle = ((x.start + x.end) / 2.0, (y.start + y.end) / 2.0);
    let style = TextStyle::from(font(13.0)).pos(Pos::new(HPos::Center, VPos::Center));
    chart
        .plotting_area()
        .draw(&Text::new(note, middle, style))?;
    Ok(())
}

/// One legend entry: a short line in the color (dashed or not) of a series, and its name.
#[derive(Debug, Clone)]
struct Entry {
    color: RGBColor,
    dashed: bool,
    name: String,
}

/// Where each legend entry goes: (x offset from the panel's left edge, row), entries flowing
/// left to right and wrapping at the panel's width (6.2 px a character at 11 px).
fn legend_places(entries: &[Entry]) -> Vec<(i32, i32)> {
    let mut places = Vec::with_capacity(entries.len());
    let (mut x, mut row) = (0, 0);
    for e in entries {
        let chars = i32::try_from(e.name.chars().count()).unwrap_or(PANEL_WIDTH);
        let w = 34 + chars.saturating_mul(31) / 5;
        if x > 0 && x + w > PANEL_WIDTH {
            x = 0;
            row += 1;
        }
        places.push((x, row));
        x += w + 24;
    }
    places
}

/// Rows a legend takes.
fn legend_rows(entries: &[Entry]) -> i32 {
    legend_places(entries).last().map_or(0, |p| p.1 + 1)
}

/// Stroke width of the `i`-th line of a panel: each thinner than the one before, so a line
/// drawn exactly over another (producers and consumers at the same rate) leaves it visible.
fn width(i: usize) -> u32 {
    if i == 0 {
        4
    } else if i == 1 {
        2
    } else {
        1
    }
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

/// A percentile's place on the x axis: `log10(1 / (1 - p/100))`, the maximum at
/// [`MAX_POSITION`].
fn percentile_position(p: f64) -> f64 {
    if p >= 100.0 {
        return MAX_POSITION;
    }
    (-(1.0 - p / 100.0).log10()).clamp(0.0, MAX_POSITION)
}

/// The label of the percentile tick at `percentile`.
fn percentile_label(percentile: &f64) -> String {
    PERCENTILE_TICKS
        .iter()
        .find(|(p, _)| (p - percentile).abs() < 1e-9)
        .map_or_else(String::new, |(_, label)| (*label).to_string())
}

/// A number in few characters: `0.25`, `950`, `20k`, `1.25M`.
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
            } else if !tag.ends_with('/') && !tag.starts_with('?') {
                let name = tag.split_whitespace().next().expect("tag name");
                open.push(name);
            }
            rest = &rest[end + 1..];
        }
        assert!(open.is_empty(), "unclosed: {open:?}");
        assert!(rest.trim().is_empty());
    }

    /// The points of each polyline stroked in `color`, in drawing order.
    fn polylines(svg: &str, color: RGBColor) -> Vec<Vec<(i32, i32)>> {
        let stroke = format!(
            r##"stroke="#{:02X}{:02X}{:02X}""##,
            color.0, color.1, color.2
        );
        svg.lines()
            .filter(|l| l.starts_with("<polyline") && l.contains(&stroke))
            .map(|l| {
                let points = l.split(r#"points=""#).nth(1).expect("points");
                let points = &points[..points.find('"').expect("points end")];
                points
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').expect("x,y");
                        (x.parse().expect("x"), y.parse().expect("y"))
                    })
                    .collect()
            })
            .collect()
    }

    /// The text of each text element.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text ")
            .skip(1)
            .filter_map(|t| Some(t[t.find('>')? + 1..t.find("</text>")?].trim()))
            .collect()
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
        let svg = chart.svg().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_well_formed(&svg);
        assert!(svg.contains("topic &lt;t&gt; &amp; &quot;friends&quot;"));
        // Blue: a legend line and the latency curve, a legend line and the acknowledged steps;
        // red: a legend line and the read steps.
        let blue = polylines(&svg, PRODUCER_COLOR);
        let red = polylines(&svg, CONSUMER_COLOR);
        assert_eq!((blue.len(), red.len()), (4, 2), "{svg}");
        let (curve, acked) = (&blue[1], &blue[3]);
        // Steps: two points a second, level within each second, the second twice as far
        // right as the first; 12k (first second) is lower on the page than 20k (second).
        assert_eq!(acked.len(), 8);
        for step in acked.chunks(2) {
            assert_eq!(step[0].1, step[1].1, "{acked:?}");
        }
        let x0 = acked[0].0;
        assert_eq!(acked[3].0 - x0, 2 * (acked[1].0 - x0), "{acked:?}");
        assert!(acked[0].1 > acked[2].1, "{acked:?}");
        // The read steps start at the same time, lower (11k < 12k).
        assert_eq!(red[1][0].0, x0);
        assert!(red[1][0].1 > acked[0].1);
        // Both panels share the plotting width: the latency curve starts at 0% where the
        // throughput starts at 0 s, and ends with the max where the throughput ends.
        assert_eq!(curve[0].0, x0);
        assert_eq!(curve.last().unwrap().0, acked.last().unwrap().0);
        assert_eq!(acked.last().unwrap().0 - x0, PANEL_WIDTH - 1);
        // The curve rises to the max: its last point is its highest on the page.
        assert_eq!(
            curve.iter().map(|p| p.1).min(),
            Some(curve.last().unwrap().1)
        );
        // The target: dashes of a grey line, level at 20k, over the whole width.
        let dashes = polylines(&svg, TARGET_COLOR);
        assert!(dashes.len() > 50, "{}", dashes.len());
        let target_y = dashes[dashes.len() - 1][0].1;
        assert_eq!(target_y, acked[2].1, "target at 20k like the second second");
        let texts = texts(&svg);
        for label in [
            "0",
            "50",
            "90",
            "99",
            "99.9",
            "99.99",
            "100",
            "20k",
            "target rate (20k records/s)",
            "Latency by percentile",
            "Throughput over time",
            "records / s",
        ] {
            assert!(texts.contains(&label), "{label} in {texts:?}");
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
        let svg = chart.svg().unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_well_formed(&svg);
        assert!(polylines(&svg, PRODUCER_COLOR).is_empty());
        assert!(polylines(&svg, CONSUMER_COLOR).is_empty());
        assert!(svg.contains("no latency") && svg.contains("no records"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert_well_formed(&Chart::default().svg().unwrap());
    }

    #[test]
    fn control_characters_do_not_reach_the_svg() {
        let chart = Chart {
            title: "label\u{1}with\ta tab".into(),
            ..Chart::default()
        };
        let svg = chart.svg().unwrap();
        assert!(svg.contains("label with a tab"), "{svg}");
        assert!(!svg.contains('\u{1}'));
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
