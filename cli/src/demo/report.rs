//! The report: one self-contained HTML file (no JavaScript, no external assets) with the
//! summary, the timeline plots as inline SVG and the commands to look further. Every text
//! that reaches it is escaped.

use std::fmt::Write as _;

use lograil::escape_html;
use serde_json::Value;

use super::plan::{Plan, TENANTS};
use super::queue::GROUPS;
use super::stats::Row;

/// Plot size, px.
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 34.0;

const TENANT_COLORS: [&str; 3] = ["#d62728", "#1f77b4", "#2ca02c"];

/// One line of a plot.
struct Series {
    name: String,
    color: &'static str,
    points: Vec<(f64, f64)>,
}

/// A shaded span of the time axis: (from s, to s, label, colour).
type Band = (f64, f64, &'static str, &'static str);

/// A line plot over the run's seconds, `y_max` at least the largest point.
fn plot(
    title: &str,
    unit: &str,
    series: &[Series],
    bands: &[Band],
    t_max: f64,
    y_max: f64,
) -> String {
    let (y_max, y_step) = axis(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(y_max, f64::max)
            .max(1.0),
    );
    let (t_max, t_step) = axis(t_max.max(1.0));
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |t: f64| LEFT + t / t_max * w;
    let y = |v: f64| TOP + h - v / y_max * h;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{t}</title>"#,
        t = escape_html(title)
    );
    for (from, to, label, color) in bands {
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{h:.1}" fill="{color}" opacity="0.18"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{}</text>"##,
            x(*from),
            (x(*to) - x(*from)).max(1.0),
            x(*from) + 2.0,
            TOP + 10.0,
            escape_html(label)
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{}</text><line x1="{LEFT}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#333"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b:.1}" stroke="#333"/>"##,
        escape_html(title),
        b = TOP + h,
        r = LEFT + w
    );
    for i in 0..=4 {
        let v = y_step * f64::from(i);
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text><line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/>"##,
            LEFT - 4.0,
            y(v) + 3.0,
            escape_html(&format!("{v:.0$}{unit}", decimals(y_step))),
            LEFT + w,
            yy = y(v)
        );
        let t = t_step * f64::from(i);
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{t:.2$} s</text>"#,
            x(t),
            TOP + h + 14.0,
            decimals(t_step)
        );
    }
    for (i, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{c}" stroke-width="1.6" points="{p}"/><rect x="{lx:.1}" y="{ly:.1}" width="10" height="3" fill="{c}"/><text x="{tx:.1}" y="{ty:.1}" font-size="10">{n}</text>"#,
            c = s.color,
            p = points.join(" "),
            lx = LEFT + 8.0 + 120.0 * i as f64,
            ly = HEIGHT - 10.0,
            tx = LEFT + 22.0 + 120.0 * i as f64,
            ty = HEIGHT - 6.0,
            n = escape_html(&s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Per-second rates of a cumulative count.
fn rate(rows: &[Row], f: impl Fn(&Row) -> u64) -> Vec<(f64, f64)> {
    let mut last = 0;
    rows.iter()
        .map(|r| {
            let v = f(r);
            let d = v.saturating_sub(last);
            last = v;
            (r.t as f64, d as f64)
        })
        .collect()
}

/// The whole report.
pub fn render(summary: &Value, rows: &[Row], plan: &Plan) -> String {
    let t_max = rows.last().map_or(1.0, |r| r.t as f64);
    let bands = bands(plan);
    let mut plots = chain_plots(rows, &bands, t_max);
    plots.extend(queue_plots(rows, &bands, t_max));
    let mut html = String::new();
    html.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>lograil demo report</title><style>body{font-family:sans-serif;margin:2em;\
         max-width:780px}table{border-collapse:collapse}td,th{border:1px solid #ccc;\
         padding:2px 8px;text-align:right}th{background:#f4f4f4}pre{background:#f4f4f4;\
         padding:8px;overflow-x:auto}</style></head><body>\n<h1>lograil demo</h1>\n",
    );
    write_summary(&mut html, summary);
    write_waits(&mut html, summary);
    html.push_str("<h2>Timeline</h2>\n");
    for p in plots {
        html.push_str("<figure>");
        html.push_str(&p);
        html.push_str("</figure>\n");
    }
    write_commands(&mut html, summary);
    html.push_str("</body></html>\n");
    html
}

/// The flood and the outage, shaded on every plot.
fn bands(plan: &Plan) -> Vec<Band> {
    vec![
        (
            plan.flood_ms.0 as f64 / 1000.0,
            plan.flood_ms.1 as f64 / 1000.0,
            "flood",
            "#ffbf00",
        ),
        (
            plan.outage_ms.0 as f64 / 1000.0,
            plan.outage_ms.1 as f64 / 1000.0,
            "outage",
            "#ff0000",
        ),
    ]
}

/// The webhook chain's plots: records per second, and its lag.
fn chain_plots(rows: &[Row], bands: &[Band], t_max: f64) -> Vec<String> {
    let records = plot(
        "Webhook chain: records per second",
        "",
        &[
            Series {
                name: "sent".into(),
                color: "#999999",
                points: rate(rows, |r| r.produced),
            },
            Series {
                name: "completed".into(),
                color: "#2ca02c",
                points: rate(rows, |r| r.completed),
            },
            Series {
                name: "retried".into(),
                color: "#ff7f0e",
                points: rate(rows, |r| r.retried),
            },
            Series {
                name: "dead-lettered (total)".into(),
                color: "#d62728",
                points: rows
                    .iter()
                    .map(|r| (r.t as f64, r.dead_lettered as f64))
                    .collect(),
            },
        ],
        bands,
        t_max,
        0.0,
    );
    let lag = plot(
        "Webhook chain: lag in seconds (oldest unconsumed record)",
        " s",
        &[Series {
            name: "lag".into(),
            color: "#9467bd",
            points: rows
                .iter()
                .filter_map(|r| r.lag_seconds.map(|l| (r.t as f64, l)))
                .collect(),
        }],
        bands,
        t_max,
        0.0,
    );
    vec![records, lag]
}

/// One plot per share group: each tenant's wait p99, on one scale for all groups.
fn queue_plots(rows: &[Row], bands: &[Band], t_max: f64) -> Vec<String> {
    let wait_max = rows
        .iter()
        .flat_map(|r| r.waits.iter().flatten().map(|w| w.p99 as f64))
        .fold(0.0, f64::max);
    let mut plots = Vec::new();
    for (g, kind) in GROUPS.iter().enumerate() {
        let series: Vec<Series> = TENANTS
            .iter()
            .enumerate()
            .map(|(i, tenant)| Series {
                name: (*tenant).to_string(),
                color: TENANT_COLORS[i],
                points: rows
                    .iter()
                    .filter_map(|r| {
                        let w = r.waits.get(g)?.get(i)?;
                        (w.count > 0).then_some((r.t as f64, w.p99 as f64))
                    })
                    .collect(),
            })
            .collect();
        plots.push(plot(
            &format!(
                "Task queue, {} (fairness {}): wait p99 per tenant, ms",
                kind.label, kind.fairness
            ),
            "",
            &series,
            bands,
            t_max,
            wait_max,
        ));
    }
    plots
}

/// The run's line and the summary's table.
fn write_summary(html: &mut String, summary: &Value) {
    let _ = writeln!(
        html,
        "<p>Seed {}, {} s of traffic against {}.</p>",
        escape_html(&summary["seed"].to_string()),
        escape_html(&summary["duration_s"].to_string()),
        escape_html(summary["broker"].as_str().unwrap_or(""))
    );
    html.push_str("<h2>Summary</h2>\n<table>\n");
    let chain = &summary["chain"];
    for (label, value) in [
        ("records sent", &summary["produced"]),
        ("completed by the webhook workers", &chain["completed"]),
        ("retried (forwarded to a retry topic)", &chain["retried"]),
        ("dead-lettered", &chain["dead_lettered"]),
        ("worst lag, seconds", &chain["max_lag_seconds"]),
        ("poison record: attempts", &summary["poison"]["attempts"]),
        (
            "records after it in its partition done meanwhile",
            &summary["poison"]["passed_by"],
        ),
        ("outage: failed probes", &summary["outage"]["failed_probes"]),
        (
            "outage: attempts spent while down",
            &summary["outage"]["retried_while_down"],
        ),
    ] {
        let _ = writeln!(
            html,
            "<tr><th style=\"text-align:left\">{}</th><td>{}</td></tr>",
            escape_html(label),
            escape_html(&value.to_string())
        );
    }
    html.push_str("</table>\n");
}

/// The table of task waits, per share group and tenant.
fn write_waits(html: &mut String, summary: &Value) {
    html.push_str("<h2>Task waits per tenant (ms)</h2>\n<table>\n<tr><th>group</th><th>tenant</th><th>tasks</th><th>p50</th><th>p99</th><th>max</th><th>p99 during the flood</th></tr>\n");
    for q in summary["queues"].as_array().into_iter().flatten() {
        for tenant in TENANTS {
            let t = &q["tenants"][tenant];
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape_html(q["label"].as_str().unwrap_or("")),
                escape_html(tenant),
                escape_html(&t["tasks"].to_string()),
                escape_html(&t["wait_ms"]["p50"].to_string()),
                escape_html(&t["wait_ms"]["p99"].to_string()),
                escape_html(&t["wait_ms"]["max"].to_string()),
                escape_html(&t["flood_wait_ms"]["p99"].to_string()),
            );
        }
    }
    html.push_str("</table>\n");
}

/// The commands to look further.
fn write_commands(html: &mut String, summary: &Value) {
    html.push_str("<h2>Look further</h2>\n<pre>");
    for c in summary["commands"].as_array().into_iter().flatten() {
        html.push_str(&escape_html(c.as_str().unwrap_or("")));
        html.push('\n');
    }
    html.push_str("</pre>\n");
}

/// An axis of four steps up to at least `max` (> 0): (top, step), the step 1, 2, 2.5 or 5
/// times a power of ten, so that each tick is a distinct round number.
fn axis(max: f64) -> (f64, f64) {
    let raw = max / 4.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude);
    (step * 4.0, step)
}

/// Decimals that show every multiple of `step` exactly (at most 6).
fn decimals(step: f64) -> usize {
    (0..6)
        .find(|d| {
            let scaled = step * 10f64.powi(*d as i32);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere() {
        assert_eq!(
            escape_html(r#"<script>alert("x") & 'y'</script>"#),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;"
        );
        let svg = plot(
            "<b>",
            "",
            &[Series {
                name: "</svg>".into(),
                color: "#000",
                points: vec![(0.0, 1.0), (1.0, 2.0)],
            }],
            &[],
            1.0,
            0.0,
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("</svg>").count(), 1, "{svg}");
        assert!(!svg.contains("<b>"));
        assert!(svg.contains("<polyline"));
    }

    #[test]
    fn axis_ticks_are_distinct_round_numbers() {
        assert_eq!(axis(1.0), (1.0, 0.25));
        assert_eq!(axis(7.0), (8.0, 2.0));
        assert_eq!(axis(30.0), (40.0, 10.0));
        assert_eq!(axis(100.0), (100.0, 25.0));
        for max in [1.0, 1.3, 3.0, 7.0, 9.99, 42.0, 1234.5, 0.7] {
            let (top, step) = axis(max);
            assert!(top >= max && top <= max * 2.5 + 1e-9, "{max}: {top}");
            let labels: Vec<String> = (0..=4)
                .map(|i| format!("{:.1$}", step * f64::from(i), decimals(step)))
                .collect();
            let mut distinct = labels.clone();
            distinct.dedup();
            assert_eq!(distinct, labels, "{max}");
        }
        let svg = plot("lag", " s", &[], &[], 1.0, 1.0);
        for tick in ["0.25 s", "0.50 s", "0.75 s", "1.00 s"] {
            assert_eq!(
                svg.matches(&format!(">{tick}<")).count(),
                2,
                "{tick}: {svg}"
            );
        }
    }
}
