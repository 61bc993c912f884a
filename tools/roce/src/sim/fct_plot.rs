//! `slowdown.svg`: FCT slowdown against flow size, as the HPCC paper's Fig. 11 draws it: one
//! point per 5 % bin of the flows (at the bin's largest size, on a log axis), the bin's 50th,
//! 95th and 99th percentile slowdown joined by lines.

use anyhow::anyhow;
use plotters::prelude::*;
use roce_sim::SlowdownTable;
use roce_sim::fct::SlowdownBin;

use super::plot::COLORS;

const SIZE: (u32, u32) = (900, 520);

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
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 18).into_font())
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
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .draw()?;
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
    use super::size_label;

    #[test]
    fn size_labels_use_decimal_units() {
        assert_eq!(size_label(1000.0), "1K");
        assert_eq!(size_label(2_500_000.0), "2.5M");
        assert_eq!(size_label(350.0), "350");
    }
}
