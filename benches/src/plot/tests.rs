//! The SVG of synthetic charts: well formed, its lines and labels where they belong.

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
