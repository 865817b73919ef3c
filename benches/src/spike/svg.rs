//! The `spike-plot` mode: the goodput per second of `spike --json` results, drawn into one
//! SVG.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use plotters::prelude::*;

use super::report::SpikeReport;

/// Flags of the `spike-plot` mode.
#[derive(Debug, Clone, Args)]
pub struct SpikePlotArgs {
    /// The SVG file to write.
    pub svg: PathBuf,
    /// `spike --json` results, one line each (labelled by their --label).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
}

/// Draws the runs of `args.runs` into `args.svg`.
pub fn plot(args: &SpikePlotArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for path in &args.runs {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        runs.push(
            serde_json::from_str::<SpikeReport>(&text)
                .with_context(|| format!("parsing {}", path.display()))?,
        );
    }
    write_svg(&args.svg, &runs)
}

/// Draws goodput per second of `runs` (labelled by their --label), the spike shaded.
pub fn write_svg(path: &Path, runs: &[SpikeReport]) -> anyhow::Result<()> {
    let first = runs.first().context("no run to draw")?;
    let secs = runs.iter().map(|r| r.seconds.len()).max().unwrap_or(1) as f64;
    let top = runs
        .iter()
        .flat_map(|r| r.seconds.iter().map(|s| s.useful.max(s.offered)))
        .max()
        .unwrap_or(1) as f64
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "useful completions per second (within the deadline)",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..secs, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("records/s")
            .draw()?;
        let (s0, s1) = (
            first.args.before_secs as f64,
            (first.args.before_secs + first.args.spike_secs) as f64,
        );
        chart.draw_series([Rectangle::new(
            [(s0, 0.0), (s1, top)],
            RGBColor(230, 230, 230).filled(),
        )])?;
        const COLORS: [RGBColor; 6] = [RED, BLUE, GREEN, MAGENTA, BLACK, RGBColor(255, 140, 0)];
        for (run, &color) in runs.iter().zip(COLORS.iter().cycle()) {
            let label = run.args.label.clone().unwrap_or_else(|| "run".to_string());
            chart
                .draw_series(LineSeries::new(
                    run.seconds
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (i as f64 + 0.5, s.useful as f64)),
                    color.stroke_width(2),
                ))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
}
