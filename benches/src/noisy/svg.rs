//! `noisy --plot`: each tenant's waits per run, drawn into one SVG.

use anyhow::Context;
use plotters::prelude::*;

use super::report::{NoisyReport, RunFigures};

/// Draws each tenant's p99 wait (bars) and p50 wait (ticks) per run, on a log scale.
pub fn write_svg(path: &std::path::Path, report: &NoisyReport) -> anyhow::Result<()> {
    let runs: Vec<&RunFigures> = report
        .runs
        .iter()
        .filter(|r| !r.tenants.is_empty())
        .collect();
    anyhow::ensure!(!runs.is_empty(), "no noisy-neighbour run to draw");
    let svg = draw(&runs)?;
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
}

/// Every tenant of the runs, sorted.
fn tenants_of(runs: &[&RunFigures]) -> Vec<String> {
    let mut all: Vec<String> = runs
        .iter()
        .flat_map(|r| r.tenants.iter().map(|t| t.tenant.clone()))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// The y axis, ms: from half the lowest p50 (at least 0.05) to twice the highest p99.
fn wait_range(runs: &[&RunFigures]) -> (f64, f64) {
    let top = runs
        .iter()
        .flat_map(|r| r.tenants.iter().map(|t| t.wait_p99_ms))
        .fold(1.0f64, f64::max)
        * 2.0;
    let bottom = runs
        .iter()
        .flat_map(|r| r.tenants.iter().map(|t| t.wait_p50_ms))
        .fold(top, f64::min)
        .max(0.1)
        / 2.0;
    (bottom, top)
}

/// Run `k`'s bars: per tenant it has, (x, p50, p99), the waits no lower than `bottom`.
fn bars_of(
    run: &RunFigures,
    k: usize,
    tenants: &[String],
    width: f64,
    bottom: f64,
) -> Vec<(f64, f64, f64)> {
    tenants
        .iter()
        .enumerate()
        .filter_map(|(i, name)| {
            let t = run.tenants.iter().find(|t| &t.tenant == name)?;
            let x = i as f64 * width + 0.5 + k as f64;
            Some((x, t.wait_p50_ms.max(bottom), t.wait_p99_ms.max(bottom)))
        })
        .collect()
}

/// The chart: a group of bars per tenant (one per run), labelled at the group's centre.
fn draw(runs: &[&RunFigures]) -> anyhow::Result<String> {
    let tenants = tenants_of(runs);
    let (bottom, top) = wait_range(runs);
    let width = runs.len() as f64 + 1.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "wait per tenant (submit to start of service): p99 bars, p50 ticks",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(
                0f64..tenants.len() as f64 * width,
                (bottom..top).log_scale(),
            )?;
        let names = tenants.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(tenants.len() * 2 + 1)
            .x_label_formatter(&move |x| {
                let i = (x / width).floor() as usize;
                let centre = i as f64 * width + width / 2.0;
                if (x - centre).abs() < width / 4.0 {
                    names.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("tenant")
            .y_desc("ms")
            .draw()?;
        const COLORS: [RGBColor; 4] = [GREEN, RED, BLUE, MAGENTA];
        for (k, (run, &color)) in runs.iter().zip(COLORS.iter().cycle()).enumerate() {
            let bars = bars_of(run, k, &tenants, width, bottom);
            chart
                .draw_series(bars.iter().map(|&(x, _, p99)| {
                    Rectangle::new([(x, bottom), (x + 0.8, p99)], color.mix(0.7).filled())
                }))?
                .label(run.run.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
            chart.draw_series(bars.iter().map(|&(x, p50, _)| {
                PathElement::new([(x, p50), (x + 0.8, p50)], BLACK.stroke_width(3))
            }))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}
