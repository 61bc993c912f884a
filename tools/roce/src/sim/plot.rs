//! `plot.svg`: three panels against simulated time, each with its legend beside it (never over
//! a curve):
//!
//! 1. the flows' goodput (solid; the payload each receiver accepted in sequence per sampling
//!    interval, so it follows packets, not message completions) and congestion-control rate
//!    (thin: DCQCN's, DCTCP's or TIMELY's), in Gb/s (SI: 10^9 bit/s);
//! 2. the bottleneck port's queue, its maximum in each interval and its value at each sample, in
//!    KiB (IEC: 1024 bytes), with RED's Kmin and Kmax as dashed lines of their own colours;
//! 3. what the switch and the NICs did per interval: packets dropped, PAUSE frames sent, packets
//!    marked CE and CNPs sent, on a log scale, one mark per interval that had any.

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use roce_sim::file::scenario::Loaded;
use roce_sim::scenario::NicCongestion;
use roce_sim::{Scenario, Series};

use super::report::{gbps, ms};

const WIDTH: u32 = 1100;
const LEGEND_WIDTH: u32 = 250;
const PANELS: [u32; 3] = [420, 300, 280];

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's chart with its mesh drawn: `caption` above, simulated time (ms) from 0 to `t_max`
/// across, `y` up under `y_desc`, its labels written by `y_labels` where given.
fn chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: String,
    t_max: f64,
    y: std::ops::Range<f64>,
    y_desc: &str,
    y_labels: Option<&dyn Fn(&f64) -> String>,
) -> Result<Chart<'a, 'b>, DrawingAreaErrorKind<std::io::Error>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20).into_font())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..t_max, y)?;
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(BLACK.mix(0.05))
        .bold_line_style(BLACK.mix(0.12))
        .x_desc("simulated time (ms)")
        .y_desc(y_desc);
    if let Some(labels) = y_labels {
        mesh.y_label_formatter(labels);
    }
    mesh.draw()?;
    Ok(chart)
}

/// One line of a legend: its label, colour, width and whether the curve is dashed or marks.
struct Entry {
    label: String,
    color: RGBAColor,
    width: u32,
    look: Look,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Look {
    Line,
    Dashed,
    Marks(Marker),
}

/// The shape of an event panel's marks: each kind its own, so equal counts (a CNP per CE mark)
/// do not hide one another.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Marker {
    Cross,
    Square,
    Ring,
    Dot,
}

/// Draws one mark centred on `at` (in the area's own coordinates).
fn mark<DB, CT>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    marker: Marker,
    color: RGBAColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    CT: CoordTranslate,
    CT::From: Clone,
{
    match marker {
        Marker::Cross => area.draw(&Cross::new(at, 4, color.stroke_width(2))),
        Marker::Square => {
            area.draw(&(EmptyElement::at(at) + Rectangle::new([(-3, -3), (3, 3)], color.filled())))
        }
        Marker::Ring => area.draw(&Circle::new(at, 5, color.stroke_width(2))),
        Marker::Dot => area.draw(&Circle::new(at, 2, color.filled())),
    }
}

/// Colours that stay apart on white and from each other (Okabe and Ito's palette, then more).
const COLORS: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
    RGBColor(120, 94, 240),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// The `i`-th colour of a chart's curves: [`COLORS`], then Palette99's.
pub(super) fn nth_color(i: usize) -> RGBAColor {
    if i < COLORS.len() {
        COLORS[i].to_rgba()
    } else {
        Palette99::pick(i).to_rgba()
    }
}

/// Draws `plot.svg`.
pub(super) fn plot(loaded: &Loaded, series: &Series) -> anyhow::Result<String> {
    let s = &loaded.scenario;
    let mut svg = String::new();
    {
        let height = PANELS.iter().sum();
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        draw(&root, s, series).map_err(|e| anyhow!("cannot draw the plot: {e}"))?;
        root.present()
            .map_err(|e| anyhow!("cannot draw the plot: {e}"))?;
    }
    Ok(svg)
}

fn draw(root: &Area<'_>, s: &Scenario, series: &Series) -> DrawResult {
    root.fill(&WHITE)?;
    let (rates, rest) = root.split_vertically(PANELS[0]);
    let (queue, events) = rest.split_vertically(PANELS[1]);
    let run = Run {
        s,
        series,
        times: series.times.iter().map(|t| ms(*t)).collect(),
        t_max: ms(s.duration).max(1e-3),
    };
    draw_rates(&rates, &run)?;
    draw_queue(&queue, &run)?;
    draw_events(&events, &run)?;
    Ok(())
}

/// What every panel plots: the scenario, its series, the sample times (ms) and the time axis's
/// end (ms).
struct Run<'a> {
    s: &'a Scenario,
    series: &'a Series,
    times: Vec<f64>,
    t_max: f64,
}

/// Draws a legend in `area`, top to bottom, as many entries as fit (then "and N more").
fn legend(area: &Area<'_>, title: &str, entries: &[Entry]) -> DrawResult {
    let font = ("sans-serif", 14).into_font();
    let (_, height) = area.dim_in_pixel();
    let step = 19i32;
    let mut y = 40i32;
    area.draw(&Text::new(title.to_owned(), (12, y - 16), font.clone()))?;
    let fit = ((height as i32 - y - 10) / step).max(1) as usize;
    let shown = if entries.len() > fit {
        fit - 1
    } else {
        entries.len()
    };
    for e in &entries[..shown] {
        y += step;
        let style = e.color.stroke_width(e.width);
        match e.look {
            Look::Line => {
                area.draw(&PathElement::new(vec![(12, y), (42, y)], style))?;
            }
            Look::Dashed => {
                area.draw(&DashedPathElement::new(vec![(12, y), (42, y)], 6, 4, style))?;
            }
            Look::Marks(marker) => mark(area, (27, y), marker, e.color)?,
        }
        area.draw(&Text::new(e.label.clone(), (50, y - 7), font.clone()))?;
    }
    if shown < entries.len() {
        y += step;
        let more = format!("and {} more", entries.len() - shown);
        area.draw(&Text::new(more, (50, y - 7), font))?;
    }
    Ok(())
}

fn draw_rates(panel: &Area<'_>, run: &Run<'_>) -> DrawResult {
    let (s, series, times, t_max) = (run.s, run.series, run.times.as_slice(), run.t_max);
    let (area, side) = panel.split_horizontally(WIDTH - LEGEND_WIDTH);
    let line = gbps(s.switch.bandwidth_bps as f64);
    let top = series
        .flows
        .iter()
        .flat_map(|f| f.goodput_bps.iter().copied())
        .map(gbps)
        .fold(line, f64::max)
        * 1.05;
    // Whose rate the dashed lines are.
    let algorithm = match s.congestion {
        NicCongestion::None | NicCongestion::Dcqcn | NicCongestion::DcqcnPaper => "DCQCN",
        NicCongestion::Dctcp => "DCTCP",
        NicCongestion::Timely => "TIMELY",
        NicCongestion::DcqcnVwin => "DCQCN+win",
        NicCongestion::TimelyVwin => "TIMELY+win",
        NicCongestion::Hpcc => "HPCC",
        NicCongestion::HpccPint => "HPCC-PINT",
    };
    let caption = match s.congestion {
        NicCongestion::None => format!("{}: flow goodput", s.name),
        _ => format!("{}: flow goodput and {algorithm} rate", s.name),
    };
    let mut chart = chart(&area, caption, t_max, 0f64..top, "Gb/s (10^9 bit/s)", None)?;
    let mut entries = Vec::new();
    for (i, f) in series.flows.iter().enumerate() {
        let color = nth_color(i);
        let points = times
            .iter()
            .zip(&f.goodput_bps)
            .map(|(t, g)| (*t, gbps(*g)));
        chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
        let flow = &s.flows[i];
        entries.push(Entry {
            label: format!("flow {i} ({} -> {}) goodput", flow.from, flow.to),
            color,
            width: 2,
            look: Look::Line,
        });
        let rate: Vec<(f64, f64)> = times
            .iter()
            .zip(&f.rate_bps)
            .filter_map(|(t, r)| r.map(|r| (*t, gbps(r as f64))))
            .collect();
        if !rate.is_empty() {
            let faint = color.mix(0.6);
            chart.draw_series(DashedLineSeries::new(rate, 5, 3, faint.stroke_width(1)))?;
            entries.push(Entry {
                label: format!("flow {i} {algorithm} rate"),
                color: faint,
                width: 1,
                look: Look::Dashed,
            });
        }
    }
    legend(&side, "per sampling interval", &entries)
}

fn draw_queue(panel: &Area<'_>, run: &Run<'_>) -> DrawResult {
    let (s, series, times, t_max) = (run.s, run.series, run.times.as_slice(), run.t_max);
    let (area, side) = panel.split_horizontally(WIDTH - LEGEND_WIDTH);
    let kib = |bytes: usize| bytes as f64 / 1024.0;
    let mut top = series
        .queue_max_bytes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(1);
    if let Some(ecn) = s.switch.ecn {
        top = top.max(ecn.k_max_bytes);
    }
    let q_top = kib(top) * 1.1;
    let caption = format!("port {} egress queue", s.bottleneck);
    let mut chart = chart(&area, caption, t_max, 0f64..q_top, "KiB (1024 bytes)", None)?;
    let mut entries = Vec::new();
    let lines = [
        (
            &series.queue_max_bytes,
            "max in interval",
            RGBColor(200, 30, 30),
            2,
        ),
        (&series.queue_bytes, "at sample", RGBColor(0, 90, 200), 1),
    ];
    for (bytes, label, color, width) in lines {
        let color = color.to_rgba();
        let points = times.iter().zip(bytes).map(|(t, q)| (*t, kib(*q)));
        chart.draw_series(LineSeries::new(points, color.stroke_width(width)))?;
        entries.push(Entry {
            label: label.into(),
            color,
            width,
            look: Look::Line,
        });
    }
    if let Some(ecn) = s.switch.ecn {
        let marks = [
            (ecn.k_min_bytes, "ECN Kmin", RGBColor(0, 150, 60)),
            (ecn.k_max_bytes, "ECN Kmax", RGBColor(150, 0, 170)),
        ];
        for (k, name, color) in marks {
            let color = color.to_rgba();
            let y = kib(k);
            chart.draw_series(DashedLineSeries::new(
                [(0.0, y), (t_max, y)],
                8,
                5,
                color.stroke_width(2),
            ))?;
            entries.push(Entry {
                label: format!("{name} {:.1} KiB", y),
                color,
                width: 2,
                look: Look::Dashed,
            });
        }
    }
    let title = format!("buffer {:.0} KiB per port", kib(s.switch.buffer_bytes));
    legend(&side, &title, &entries)
}

fn draw_events(panel: &Area<'_>, run: &Run<'_>) -> DrawResult {
    let (s, series, times, t_max) = (run.s, run.series, run.times.as_slice(), run.t_max);
    let (area, side) = panel.split_horizontally(WIDTH - LEGEND_WIDTH);
    let per_interval = |cumulative: &[u64]| -> Vec<u64> {
        let mut last = 0;
        cumulative
            .iter()
            .map(|&c| {
                let d = c.saturating_sub(last);
                last = c;
                d
            })
            .collect()
    };
    const RED: RGBColor = RGBColor(200, 30, 30);
    const BROWN: RGBColor = RGBColor(140, 86, 75);
    const ORANGE: RGBColor = RGBColor(230, 159, 0);
    const GREEN: RGBColor = RGBColor(0, 110, 80);
    let kinds = [
        ("drops (switch)", &series.drops, RED, Marker::Cross),
        (
            "PAUSEs sent (switch)",
            &series.pauses,
            BROWN,
            Marker::Square,
        ),
        ("CE marks (switch)", &series.ce_marks, ORANGE, Marker::Ring),
        ("CNPs sent (NICs)", &series.cnps, GREEN, Marker::Dot),
    ]
    .map(|(name, cumulative, color, marker)| (name, per_interval(cumulative), color, marker));
    // Counts on a log scale: the axis is log10(count), labelled with the counts themselves.
    let most = kinds
        .iter()
        .flat_map(|(_, v, _, _)| v.iter().copied())
        .max()
        .unwrap_or(0)
        .max(10);
    let decades = (most as f64).log10().ceil();
    let power = |v: &f64| {
        let k = v.round();
        if (v - k).abs() < 1e-6 && k >= 0.0 {
            format!("{}", 10u64.pow(k as u32))
        } else {
            String::new()
        }
    };
    let caption = format!("events per {} µs interval", s.interval.as_micros());
    let y = -0.2f64..decades + 0.2;
    let chart = chart(&area, caption, t_max, y, "count (log scale)", Some(&power))?;
    let mut entries = Vec::new();
    for (name, counts, color, marker) in kinds {
        let color = color.to_rgba();
        let total: u64 = counts.iter().sum();
        let marks: Vec<(f64, f64)> = times
            .iter()
            .zip(&counts)
            .filter(|(_, c)| **c > 0)
            .map(|(t, c)| (*t, (*c as f64).log10()))
            .collect();
        let plotting = chart.plotting_area();
        for p in marks {
            mark(plotting, p, marker, color)?;
        }
        entries.push(Entry {
            label: format!("{name}: {total}"),
            color,
            width: 1,
            look: Look::Marks(marker),
        });
    }
    legend(&side, "totals (none: no marks)", &entries)
}
