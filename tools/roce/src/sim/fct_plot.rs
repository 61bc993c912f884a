//! `slowdown.svg`: FCT slowdown against flow size, as the HPCC paper's Fig. 11 draws it: one
//! point per 5 % bin of the flows (at the bin's largest size, on a log axis), the bin's 50th,
//! 95th and 99th percentile slowdown joined by lines. The legend stands in a column of its own
//! right of the chart, so it covers no point whatever the data (in the chart's upper left it
//! hid the p99 of the smallest bins, which are often the highest).

use anyhow::anyhow;
use plotters::prelude::*;
use roce_sim::SlowdownTable;
use roce_sim::fct::SlowdownBin;

use super::plot::COLORS;

const SIZE: (u32, u32) = (900, 520);
/// The legend's column, right of the chart.
const LEGEND_WIDTH: u32 = 100;

/// Where the legend's box starts in its column (pixels from the top of the area under the
/// caption), level with the chart's top.
const LEGEND_TOP: i32 = 14;

/// Draws the table; an empty table gives an empty chart that says so.
pub(super) fn plot(name: &str, table: &SlowdownTable) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw(&root, name, table).map_err(|e| anyhow!("cannot draw slowdown.svg: {e}"))?;
        root.present()
            .map_err(|e| anyhow!("cannot draw slowdown.svg: {e}"))?;
    }
    Ok(svg)
}

fn draw(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    name: &str,
    table: &SlowdownTable,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    root.fill(&WHITE)?;
    let sizes = || table.bins.iter().map(|b| b.max_size.max(1) as f64);
    let x_min = sizes().fold(f64::INFINITY, f64::min);
    let x_max = sizes().fold(0.0, f64::max);
    let (x_min, x_max) = if x_min.is_finite() && x_max > x_min {
        (x_min / 1.2, x_max * 1.2)
    } else {
        (1.0, 1e7)
    };
    let y_max = table
        .bins
        .iter()
        .map(|b| b.p99)
        .filter(|v| v.is_finite())
        .fold(2.0, f64::max)
        * 1.1;
    let caption = format!(
        "roce sim {name}: FCT slowdown by flow size ({} flows, {} % bins)",
        table.flows, table.step_percent
    );
    let below = root.titled(&caption, ("sans-serif", 18).into_font())?;
    let (area, side) = below.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&area)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d((x_min..x_max).log_scale(), 1f64..y_max)?;
    chart
        .configure_mesh()
        .light_line_style(BLACK.mix(0.05))
        .bold_line_style(BLACK.mix(0.12))
        .x_desc("flow size (bytes, largest of each bin; log scale)")
        .y_desc("FCT slowdown (fct / ideal)")
        .x_label_formatter(&|v| size_label(*v))
        .draw()?;
    type Pick = fn(&SlowdownBin) -> f64;
    let curves: [(&str, Pick); 3] = [("p50", |b| b.p50), ("p95", |b| b.p95), ("p99", |b| b.p99)];
    for (i, (label, pick)) in curves.iter().enumerate() {
        let color = COLORS[i].to_rgba();
        let points: Vec<(f64, f64)> = table
            .bins
            .iter()
            .map(|b| (b.max_size.max(1) as f64, pick(b)))
            .filter(|p| p.1.is_finite())
            .collect();
        chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
        // Its entry: a line and the label (no mark: every circle of the SVG is a point).
        let y = LEGEND_TOP + 12 + 22 * i as i32;
        side.draw(&PathElement::new(
            vec![(12, y), (36, y)],
            color.stroke_width(2),
        ))?;
        side.draw(&Text::new(
            *label,
            (44, y - 7),
            ("sans-serif", 14).into_font(),
        ))?;
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, color.filled())),
        )?;
    }
    side.draw(&Rectangle::new(
        [
            (4, LEGEND_TOP),
            (LEGEND_WIDTH as i32 - 12, LEGEND_TOP + 22 * 3 + 2),
        ],
        BLACK.mix(0.3).stroke_width(1),
    ))?;
    Ok(())
}

/// 1000 → "1K", 2500000 → "2.5M" (decimal units, as the paper's axis).
fn size_label(v: f64) -> String {
    let (scaled, unit) = if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "K")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.1}");
    format!("{}{unit}", text.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of attribute `name` of an SVG element's text.
    fn attr(element: &str, name: &str) -> f64 {
        let key = format!(" {name}=\"");
        let at = element
            .find(&key)
            .unwrap_or_else(|| panic!("no {name} in {element}"))
            + key.len();
        element[at..].split('"').next().unwrap().parse().unwrap()
    }

    /// Twenty bins whose p99 is highest for the smallest flows, where the legend used to be.
    fn table() -> SlowdownTable {
        let bins = (0..20)
            .map(|i| {
                let p99 = 60.0 - 2.5 * f64::from(i);
                SlowdownBin {
                    percentile: f64::from(i) * 0.05,
                    max_size: (100.0 * 10f64.powf(f64::from(i) * 5.0 / 19.0)) as u64,
                    flows: 10,
                    p50: 1.0 + p99 / 10.0,
                    p95: 1.0 + p99 / 2.0,
                    p99,
                }
            })
            .collect();
        SlowdownTable {
            step_percent: 5,
            flows: 200,
            bins,
        }
    }

    /// The legend's box (the rectangle around its "p50") covers no plotted point: no point's
    /// circle meets it.
    #[test]
    fn the_legend_covers_no_point() {
        let svg = plot("t", &table()).unwrap();
        let elements: Vec<&str> = svg.split('<').collect();
        let circles: Vec<(f64, f64, f64)> = elements
            .iter()
            .filter(|e| e.starts_with("circle "))
            .map(|e| (attr(e, "cx"), attr(e, "cy"), attr(e, "r")))
            .collect();
        // Every bin's three points are drawn.
        assert_eq!(circles.len(), 60);
        let label = elements
            .iter()
            .find(|e| e.starts_with("text ") && e.split('>').nth(1).map(str::trim) == Some("p50"))
            .expect("a legend entry p50");
        let (lx, ly) = (attr(label, "x"), attr(label, "y"));
        let legend = elements
            .iter()
            .filter(|e| e.starts_with("rect "))
            .map(|e| {
                let (x, y) = (attr(e, "x"), attr(e, "y"));
                (x, y, x + attr(e, "width"), y + attr(e, "height"))
            })
            .filter(|&(x0, _, x1, _)| x1 - x0 < f64::from(SIZE.0))
            .find(|&(x0, y0, x1, y1)| (x0..=x1).contains(&lx) && (y0..=y1).contains(&ly))
            .expect("a box around the legend");
        for (cx, cy, r) in circles {
            let apart =
                cx + r < legend.0 || cx - r > legend.2 || cy + r < legend.1 || cy - r > legend.3;
            assert!(
                apart,
                "the point at ({cx}, {cy}) is under the legend {legend:?}"
            );
        }
    }

    #[test]
    fn size_labels_use_decimal_units() {
        assert_eq!(size_label(1000.0), "1K");
        assert_eq!(size_label(2_500_000.0), "2.5M");
        assert_eq!(size_label(350.0), "350");
    }
}
