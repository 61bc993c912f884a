//! `slowdown.svg` and a sweep's `compare.svg`: FCT slowdown against flow size, as the HPCC
//! paper's Fig. 11 draws it: one point per 5 % bin of the flows (at the bin's largest size, on a
//! log axis), joined by lines. `slowdown.svg` is one chart of one run's 50th, 95th and 99th
//! percentile; `compare.svg` is a page of three charts (p50, p95, p99), each with one curve per
//! run compared (of a grid of several axes: a row of the three per panel). One function draws both: a page of charts of any number of curves. Each chart's
//! legend stands in a column of its own right of it, so it covers no point whatever the data (in
//! the chart's upper left it hid the p99 of the smallest bins, which are often the highest).

use std::ops::Range;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use roce_sim::SlowdownTable;
use roce_sim::fct::SlowdownBin;

use super::plot::nth_color;

const WIDTH: u32 = 900;
/// A page of one chart (`slowdown.svg`).
const ONE_HEIGHT: u32 = 520;
/// Each chart of a page of several, and the page's caption above them.
const CHART_HEIGHT: u32 = 400;
const CAPTION_HEIGHT: u32 = 40;
/// The legend's column, right of each chart, at least this wide.
const LEGEND_WIDTH: u32 = 100;

/// Where the legend's box starts in its column (pixels from its top), level with the chart's
/// top.
const LEGEND_TOP: i32 = 14;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// One curve of a chart: its label in the legend, and its points (flow size, slowdown).
pub(super) struct Curve {
    pub(super) label: String,
    pub(super) points: Vec<(f64, f64)>,
}

/// One chart: its title (none on a page of one), its curves, and the slowdown its axis must
/// reach at least (the highest of a column of charts, so that they read on one scale).
pub(super) struct Chart {
    pub(super) title: Option<String>,
    pub(super) curves: Vec<Curve>,
    pub(super) y_reach: f64,
}

/// The slowdown axis: linear, or logarithmic in a chart whose slowdowns reach past
/// [`LOG_FROM`] (curves an order of magnitude apart; below it a log axis would label only 1
/// and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum YScale {
    Linear,
    Log,
}

const LOG_FROM: f64 = 5.0;

/// The percentiles a bin has, as the charts name them.
type Pick = fn(&SlowdownBin) -> f64;
const PERCENTILES: [(&str, Pick); 3] = [("p50", |b| b.p50), ("p95", |b| b.p95), ("p99", |b| b.p99)];

/// A table's bins as points of one percentile: (largest size, slowdown), where finite.
fn points(table: &SlowdownTable, pick: Pick) -> Vec<(f64, f64)> {
    table
        .bins
        .iter()
        .map(|b| (b.max_size.max(1) as f64, pick(b)))
        .filter(|p| p.1.is_finite())
        .collect()
}

/// `slowdown.svg`: one chart of the table's p50, p95 and p99; an empty table gives an empty
/// chart that says so.
pub(super) fn plot(name: &str, table: &SlowdownTable) -> anyhow::Result<String> {
    let curves = PERCENTILES
        .iter()
        .map(|&(label, pick)| Curve {
            label: label.to_owned(),
            points: points(table, pick),
        })
        .collect();
    let caption = format!(
        "roce sim {name}: FCT slowdown by flow size ({} flows, {} % bins)",
        table.flows, table.step_percent
    );
    page(
        "slowdown.svg",
        &caption,
        &[Chart {
            title: None,
            curves,
            y_reach: 0.0,
        }],
        1,
        YScale::Linear,
    )
}

/// `compare.svg`: three charts, p50, p95 and p99, each with one curve per run of `runs`
/// (its label and its table), on a log slowdown axis where they reach past [`LOG_FROM`].
pub(super) fn compare(caption: &str, runs: &[(String, &SlowdownTable)]) -> anyhow::Result<String> {
    let charts = percentile_charts(None, runs);
    page("compare.svg", caption, &charts, 1, YScale::Log)
}

/// A chart per percentile (p50, p95, p99), each with a curve per run of `runs`, titled with
/// the percentile and `panel` if given.
fn percentile_charts(panel: Option<&str>, runs: &[(String, &SlowdownTable)]) -> Vec<Chart> {
    PERCENTILES
        .iter()
        .map(|&(percentile, pick)| Chart {
            title: Some(match panel {
                Some(panel) => format!("{percentile} FCT slowdown, {panel}"),
                None => format!("{percentile} FCT slowdown"),
            }),
            curves: runs
                .iter()
                .map(|(label, table)| Curve {
                    label: label.clone(),
                    points: points(table, pick),
                })
                .collect(),
            y_reach: 0.0,
        })
        .collect()
}

/// `compare.svg` of a grid of several axes: a row per panel (its title: the values of the axes
/// that are not compared), and in each row the three charts of [`compare`], p50, p95 and p99,
/// side by side, each with one curve per run of the panel; the charts of a column share their
/// slowdown axis, so that the panels compare at a glance.
pub(super) fn compare_panels(
    caption: &str,
    panels: &[(String, Vec<(String, &SlowdownTable)>)],
) -> anyhow::Result<String> {
    let mut charts: Vec<Chart> = panels
        .iter()
        .flat_map(|(panel, runs)| percentile_charts(Some(panel), runs))
        .collect();
    for column in 0..PERCENTILES.len() {
        let top = charts
            .iter()
            .skip(column)
            .step_by(PERCENTILES.len())
            .flat_map(|c| &c.curves)
            .flat_map(|c| &c.points)
            .map(|p| p.1)
            .fold(0.0, f64::max);
        charts
            .iter_mut()
            .skip(column)
            .step_by(PERCENTILES.len())
            .for_each(|c| c.y_reach = top);
    }
    page(
        "compare.svg",
        caption,
        &charts,
        PERCENTILES.len(),
        YScale::Log,
    )
}

/// Draws `charts` on one page under `caption`, `columns` of them side by side in each row
/// (row by row in their order), every chart with the same flow sizes across and its own
/// slowdowns up (a median near 1 would be flat under a p99's axis); `file` names the page in
/// errors.
pub(super) fn page(
    file: &str,
    caption: &str,
    charts: &[Chart],
    columns: usize,
    y: YScale,
) -> anyhow::Result<String> {
    let columns = columns.clamp(1, charts.len().max(1));
    let rows = charts.len().div_ceil(columns);
    let height = match charts.len() {
        0 | 1 => ONE_HEIGHT,
        _ => CAPTION_HEIGHT + CHART_HEIGHT * rows as u32,
    };
    let width = WIDTH * columns as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        draw_page(&root, caption, charts, (rows, columns), y)
            .map_err(|e| anyhow!("cannot draw {file}: {e}"))?;
        root.present()
            .map_err(|e| anyhow!("cannot draw {file}: {e}"))?;
    }
    Ok(svg)
}

fn draw_page(
    root: &Area<'_>,
    caption: &str,
    charts: &[Chart],
    (rows, columns): (usize, usize),
    y: YScale,
) -> DrawResult {
    root.fill(&WHITE)?;
    let all = || {
        charts
            .iter()
            .flat_map(|c| &c.curves)
            .flat_map(|c| &c.points)
    };
    let x_min = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_max = all().map(|p| p.0).fold(0.0, f64::max);
    let x = if x_min.is_finite() && x_max > x_min {
        x_min / 1.2..x_max * 1.2
    } else {
        1.0..1e7
    };
    let longest = all_labels(charts).map(str::len).max().unwrap_or(0);
    // About 8 pixels a character of the legend's 14-pixel font, after the line.
    let legend_width = LEGEND_WIDTH.max(56 + 8 * longest as u32);
    let below = root.titled(caption, ("sans-serif", 18).into_font())?;
    for (chart, area) in charts
        .iter()
        .zip(below.split_evenly((rows.max(1), columns.max(1))))
    {
        let (area_width, _) = area.dim_in_pixel();
        let (area, side) = area.split_horizontally(area_width.saturating_sub(legend_width));
        let y_max = chart
            .curves
            .iter()
            .flat_map(|c| &c.points)
            .map(|p| p.1)
            .fold(chart.y_reach.max(2.0), f64::max);
        if y == YScale::Log && y_max > LOG_FROM {
            let top = y_max * 1.3;
            let (bold, light) = log_key_points(top);
            let y = (1f64..top)
                .log_scale()
                .with_key_points(bold)
                .with_light_points(light);
            draw_chart(&area, &side, chart, x.clone(), y)?;
        } else {
            draw_chart(&area, &side, chart, x.clone(), 1f64..y_max * 1.1)?;
        }
    }
    Ok(())
}

/// The labelled and the light values of a log axis from 1 to `top`: 1, 2 and 5 times each
/// power of ten up to three decades (powers of ten alone past that), and every multiple of a
/// power of ten as a light line. Exact values: plotters' own key points for a log axis came a
/// rounding apart at a decade, and labelled it twice ("10" over "10").
fn log_key_points(top: f64) -> (Vec<f64>, Vec<f64>) {
    let steps: &[f64] = if top > 1e3 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    let (mut bold, mut light) = (Vec::new(), Vec::new());
    let mut decade = 1.0;
    while decade <= top {
        bold.extend(steps.iter().map(|s| s * decade).filter(|v| *v <= top));
        light.extend((1..10).map(|m| f64::from(m) * decade).filter(|v| *v <= top));
        decade *= 10.0;
    }
    (bold, light)
}

fn all_labels(charts: &[Chart]) -> impl Iterator<Item = &str> {
    charts
        .iter()
        .flat_map(|c| &c.curves)
        .map(|c| c.label.as_str())
}

/// One chart on `area`, its legend in `side`.
fn draw_chart<Y>(area: &Area<'_>, side: &Area<'_>, c: &Chart, x: Range<f64>, y: Y) -> DrawResult
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut builder = ChartBuilder::on(area);
    if let Some(title) = &c.title {
        builder.caption(title, ("sans-serif", 16).into_font());
    }
    let mut chart = builder
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(x.log_scale(), y)?;
    chart
        .configure_mesh()
        // A log axis's light lines between its labels are dense enough to shade a decade.
        .y_max_light_lines(2)
        .light_line_style(BLACK.mix(0.05))
        .bold_line_style(BLACK.mix(0.12))
        .x_desc("flow size (bytes, largest of each bin; log scale)")
        .y_desc("FCT slowdown (fct / ideal)")
        .x_label_formatter(&|v| size_label(*v))
        .y_label_formatter(&|v| number_label(*v))
        .draw()?;
    // The legend's top, level with the chart's (below its title, if any).
    let top = LEGEND_TOP + if c.title.is_some() { 22 } else { 0 };
    let (width, _) = side.dim_in_pixel();
    for (i, curve) in c.curves.iter().enumerate() {
        let color = nth_color(i);
        chart.draw_series(LineSeries::new(
            curve.points.iter().copied(),
            color.stroke_width(2),
        ))?;
        // Its entry: a line and the label (no mark: every circle of the SVG is a point).
        let y = top + 12 + 22 * i as i32;
        side.draw(&PathElement::new(
            vec![(12, y), (36, y)],
            color.stroke_width(2),
        ))?;
        side.draw(&Text::new(
            curve.label.as_str(),
            (44, y - 7),
            ("sans-serif", 14).into_font(),
        ))?;
        chart.draw_series(
            curve
                .points
                .iter()
                .map(|&p| Circle::new(p, 3, color.filled())),
        )?;
    }
    side.draw(&Rectangle::new(
        [
            (4, top),
            (width as i32 - 12, top + 22 * c.curves.len() as i32 + 2),
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
    format!("{}{unit}", number_label(scaled))
}

/// A slowdown or a size to at most one decimal, without a trailing ".0": 2, 2.5, 40.
fn number_label(v: f64) -> String {
    let text = format!("{v:.1}");
    text.trim_end_matches(".0").to_owned()
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

    /// The SVG's circles (the plotted points), as (cx, cy, r).
    fn circles(svg: &str) -> Vec<(f64, f64, f64)> {
        svg.split('<')
            .filter(|e| e.starts_with("circle "))
            .map(|e| (attr(e, "cx"), attr(e, "cy"), attr(e, "r")))
            .collect()
    }

    /// The texts of the SVG, in the order drawn.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split('<')
            .filter(|e| e.starts_with("text "))
            .filter_map(|e| e.split('>').nth(1).map(str::trim))
            .collect()
    }

    /// The box around the legend entry `label` (the nth such entry): no plotted point meets it.
    fn assert_legend_covers_no_point(svg: &str, label: &str, nth: usize) {
        let elements: Vec<&str> = svg.split('<').collect();
        let entry = elements
            .iter()
            .filter(|e| e.starts_with("text ") && e.split('>').nth(1).map(str::trim) == Some(label))
            .nth(nth)
            .unwrap_or_else(|| panic!("no legend entry {label} number {nth}"));
        let (lx, ly) = (attr(entry, "x"), attr(entry, "y"));
        let legend = elements
            .iter()
            .filter(|e| e.starts_with("rect "))
            .map(|e| {
                let (x, y) = (attr(e, "x"), attr(e, "y"));
                (x, y, x + attr(e, "width"), y + attr(e, "height"))
            })
            .filter(|&(x0, _, x1, _)| x1 - x0 < f64::from(WIDTH))
            .find(|&(x0, y0, x1, y1)| (x0..=x1).contains(&lx) && (y0..=y1).contains(&ly))
            .expect("a box around the legend");
        for (cx, cy, r) in circles(svg) {
            let apart =
                cx + r < legend.0 || cx - r > legend.2 || cy + r < legend.1 || cy - r > legend.3;
            assert!(
                apart,
                "the point at ({cx}, {cy}) is under the legend {legend:?}"
            );
        }
    }

    /// The legend's box (the rectangle around its "p50") covers no plotted point: no point's
    /// circle meets it.
    #[test]
    fn the_legend_covers_no_point() {
        let svg = plot("t", &table()).unwrap();
        // Every bin's three points are drawn.
        assert_eq!(circles(&svg).len(), 60);
        assert_legend_covers_no_point(&svg, "p50", 0);
    }

    /// `compare.svg`: a chart per percentile, each with a curve per run, every bin a point, and
    /// each chart's legend naming the runs in their order, over no point.
    #[test]
    fn a_comparison_has_a_chart_per_percentile_and_a_curve_per_run() {
        let one = table();
        let mut other = table();
        for b in &mut other.bins {
            b.p99 /= 10.0;
        }
        let runs = [("dcqcn".to_owned(), &one), ("hpcc".to_owned(), &other)];
        let svg = compare("t: by network.congestion", &runs).unwrap();
        assert_eq!(circles(&svg).len(), 3 * 2 * 20);
        let texts = texts(&svg);
        let titles: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| t.ends_with("FCT slowdown"))
            .collect();
        assert_eq!(
            titles,
            ["p50 FCT slowdown", "p95 FCT slowdown", "p99 FCT slowdown"]
        );
        let legends: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| ["dcqcn", "hpcc"].contains(t))
            .collect();
        assert_eq!(legends, ["dcqcn", "hpcc"].repeat(3));
        for chart in 0..3 {
            assert_legend_covers_no_point(&svg, "hpcc", chart);
        }
    }

    /// A grid's comparison: a row of the three charts per panel, titled with it, and each
    /// column's charts on one slowdown axis (here the second panel's p99s reach 6 and the
    /// first's 60: both p99 charts are labelled up to 50).
    #[test]
    fn panels_are_rows_and_a_column_shares_its_slowdown_axis() {
        let one = table();
        let mut other = table();
        for b in &mut other.bins {
            b.p99 /= 10.0;
            b.p95 = b.p95.min(b.p99);
            b.p50 = b.p50.min(b.p95);
        }
        let panels = [
            ("pfc = true".to_owned(), vec![("dcqcn".to_owned(), &one)]),
            ("pfc = false".to_owned(), vec![("dcqcn".to_owned(), &other)]),
        ];
        let svg = compare_panels("t", &panels).unwrap();
        assert_eq!(circles(&svg).len(), 2 * 3 * 20);
        let texts = texts(&svg);
        let titles: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| t.contains("FCT slowdown,"))
            .collect();
        assert_eq!(
            titles,
            [
                "p50 FCT slowdown, pfc = true",
                "p95 FCT slowdown, pfc = true",
                "p99 FCT slowdown, pfc = true",
                "p50 FCT slowdown, pfc = false",
                "p95 FCT slowdown, pfc = false",
                "p99 FCT slowdown, pfc = false",
            ]
        );
        assert_eq!(texts.iter().filter(|t| **t == "50").count(), 2, "{texts:?}");
        assert!(
            svg.starts_with("<svg width=\"2700\""),
            "three charts across"
        );
    }

    /// No axis label is drawn twice at one place, whatever the log axis's top: the p99 chart
    /// of the shipped comparison figure had two "10"s (two key points a rounding apart).
    #[test]
    fn no_label_is_drawn_twice_at_one_place() {
        for top in [5.5, 9.0, 11.0, 13.0, 27.0, 64.0, 99.0, 140.0, 900.0, 4000.0] {
            let mut t = table();
            for b in &mut t.bins {
                b.p99 *= top / 60.0;
                b.p95 = b.p95.min(b.p99);
                b.p50 = b.p50.min(b.p95);
            }
            let runs = [("a".to_owned(), &t)];
            for svg in [plot("t", &t).unwrap(), compare("t", &runs).unwrap()] {
                let mut seen = std::collections::HashSet::new();
                for e in svg.split('<').filter(|e| e.starts_with("text ")) {
                    let text = e.split('>').nth(1).map(str::trim).unwrap_or_default();
                    let at = (text, attr(e, "x").to_bits(), attr(e, "y").to_bits());
                    assert!(seen.insert(at), "{text:?} twice at one place, top {top}");
                }
                // The y axis keeps its labels.
                let texts = texts(&svg);
                let marks = ["1", "2", "5", "10", "20", "100"];
                let shown = marks.iter().filter(|m| texts.contains(m)).count();
                assert!(shown >= 1, "top {top}: {texts:?}");
            }
        }
    }

    #[test]
    fn a_log_axis_is_labelled_one_two_five() {
        assert_eq!(log_key_points(60.0).0, [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(log_key_points(4000.0).0, [1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(log_key_points(25.0).1.len(), 9 + 2);
    }

    #[test]
    fn size_labels_use_decimal_units() {
        assert_eq!(size_label(1000.0), "1K");
        assert_eq!(size_label(2_500_000.0), "2.5M");
        assert_eq!(size_label(350.0), "350");
    }
}
