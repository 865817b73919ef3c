//! What both panels are drawn with: a panel's title, legend, axes and note, its height, fonts,
//! text wrapping and line widths.

use std::ops::Range;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::scale::compact;
use super::{
    DASH, GRID_COLOR, LEFT, LEGEND_ROW, PANEL_HEIGHT, PANEL_TITLE, PANEL_WIDTH, WIDTH, X_LABELS,
};

pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Panel<'a, 'b, X> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>;

/// Lines of text, as a pixel multiplier.
pub(super) fn count(lines: &[String]) -> i32 {
    i32::try_from(lines.len()).unwrap_or(i32::MAX / 1024)
}

/// Height of a panel: title, legend, plotting area, x labels.
pub(super) fn panel_height(legend: &[Entry]) -> i32 {
    PANEL_TITLE + LEGEND_ROW * legend_rows(legend) + 10 + PANEL_HEIGHT + X_LABELS
}

/// A sans-serif font of `px` pixels (plotters' SVG backend writes the size divided by 1.24).
pub(super) fn font(px: f64) -> FontDesc<'static> {
    ("sans-serif", px * 1.24).into_font()
}

/// Text as it can go into the SVG: plotters escapes markup characters, not control ones.
pub(super) fn clean(s: &str) -> String {
    s.replace(char::is_control, " ")
}

/// The top of a value axis from 0 covering `max`, with some room above the highest line; an
/// empty or invalid range becomes 0..1.
pub(super) fn top(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// A panel in `area`: its title, its legend, and under them a chart of `x` by `y` whose
/// plotting area is `PANEL_WIDTH` × `PANEL_HEIGHT` at `LEFT`.
pub(super) fn panel<'a, 'b, X: Ranged<ValueType = f64>>(
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
pub(super) fn axes<X: Ranged<ValueType = f64> + ValueFormatter<f64>>(
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
pub(super) fn note<X: Ranged<ValueType = f64>>(
    chart: &Panel<'_, '_, X>,
    note: &str,
) -> anyhow::Result<()> {
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
pub(super) struct Entry {
    pub(super) color: RGBColor,
    pub(super) dashed: bool,
    pub(super) name: String,
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
pub(super) fn width(i: usize) -> u32 {
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
pub(super) fn wrap(s: &str, max: usize) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
