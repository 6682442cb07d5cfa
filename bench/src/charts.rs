//! PNG charts (plotters, bitmap backend, embedded DejaVu Sans: no system
//! fonts needed).

use std::path::Path;
use std::sync::Once;

use anyhow::anyhow;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::FontStyle;

const FONT: &str = "sans-serif";

/// Colours of the bar groups, in order.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(214, 39, 40),   // cordon: red
    RGBColor(255, 127, 14),  // cordon-permissive / variants: orange
    RGBColor(31, 119, 180),  // runc: blue
    RGBColor(44, 160, 44),   // crun: green
    RGBColor(127, 127, 127), // floors / host: grey
    RGBColor(148, 103, 189), // other: purple
];

fn fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// One horizontal bar.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Label on the y axis.
    pub label: String,
    /// Length.
    pub value: f64,
    /// Index into [`PALETTE`].
    pub color: usize,
    /// Text after the bar's end.
    pub note: String,
}

/// A vertical reference line.
#[derive(Debug, Clone)]
pub struct Marker {
    /// Where on the x axis.
    pub at: f64,
    /// Legend text.
    pub label: String,
}

/// Horizontal bar chart, linear or logarithmic x axis.
pub fn hbars(
    path: &Path,
    title: &str,
    x_desc: &str,
    bars: &[Bar],
    log: bool,
    markers: &[Marker],
) -> anyhow::Result<()> {
    fonts();
    if bars.is_empty() {
        return Err(anyhow!("{}: no data", path.display()));
    }
    // The first bar at the top: segment 0 is drawn at the bottom.
    let bars: Vec<Bar> = bars.iter().rev().cloned().collect();
    let bars = &bars[..];
    let n = bars.len();
    let top = n - 1;
    let height = (160 + 38 * n) as u32;
    let root = BitMapBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let vmax = bars
        .iter()
        .map(|b| b.value)
        .chain(markers.iter().map(|m| m.at))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let vmin = bars
        .iter()
        .map(|b| b.value)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let fmt = move |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    // Room after the longest bar for its note.
    if log {
        let lo = 10f64.powf((vmin.min(vmax) * 0.5).log10().floor());
        let hi = vmax * 12.0;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(330)
            .build_cartesian_2d((lo..hi).log_scale(), (0..top).into_segmented())
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&fmt)
            .x_label_formatter(&|v| short(*v))
            .x_desc(x_desc)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        draw_bars(&mut chart, bars, lo, markers)?;
    } else {
        let hi = vmax * 1.35;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(330)
            .build_cartesian_2d(0.0..hi, (0..top).into_segmented())
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&fmt)
            .x_desc(x_desc)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        draw_bars(&mut chart, bars, 0.0, markers)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

fn draw_bars<'a, DB, X>(
    chart: &mut ChartContext<
        'a,
        DB,
        Cartesian2d<X, plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize>>,
    >,
    bars: &[Bar],
    baseline: f64,
    markers: &[Marker],
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
{
    for (c, color) in PALETTE.iter().enumerate() {
        let data: Vec<(usize, f64)> = bars
            .iter()
            .enumerate()
            .filter(|(_, b)| b.color == c && b.value > 0.0)
            .map(|(i, b)| (i, b.value))
            .collect();
        if data.is_empty() {
            continue;
        }
        chart
            .draw_series(
                Histogram::horizontal(chart)
                    .style(color.filled())
                    .margin(6)
                    .baseline(baseline)
                    .data(data),
            )
            .map_err(|e| anyhow!("{e}"))?;
    }
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(
                format!("  {}", b.note),
                (b.value.max(baseline), SegmentValue::CenterOf(i)),
                note_style(),
            )
        }))
        .map_err(|e| anyhow!("{e}"))?;
    for m in markers {
        let style = BLACK.stroke_width(2);
        chart
            .draw_series(LineSeries::new(
                vec![(m.at, SegmentValue::Exact(0)), (m.at, SegmentValue::Last)],
                style,
            ))
            .map_err(|e| anyhow!("{e}"))?
            .label(m.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    }
    if !markers.is_empty() {
        chart
            .configure_series_labels()
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

/// The style of the text after a bar's end: left-aligned, centred on the bar.
fn note_style() -> TextStyle<'static> {
    TextStyle::from((FONT, 13).into_font()).pos(plotters::style::text_anchor::Pos::new(
        plotters::style::text_anchor::HPos::Left,
        plotters::style::text_anchor::VPos::Center,
    ))
}

/// 1500 -> "1.5k", 20000 -> "20k", 0.5 -> "0.5".
fn short(v: f64) -> String {
    let (x, unit) = if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.1}");
    let s = s.strip_suffix(".0").unwrap_or(&s);
    format!("{s}{unit}")
}

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend.
    pub label: String,
    /// Points.
    pub points: Vec<(f64, f64)>,
    /// Index into [`PALETTE`].
    pub color: usize,
}

/// Line chart with points.
pub fn lines(path: &Path, title: &str, x_desc: &str, y_desc: &str, series: &[Line]) -> anyhow::Result<()> {
    fonts();
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    if all.is_empty() {
        return Err(anyhow!("{}: no data", path.display()));
    }
    let xmax = all.iter().map(|p| p.0).fold(0.0f64, f64::max).max(1.0);
    let ymax = all.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9) * 1.15;
    let root = BitMapBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for s in series {
        let color = PALETTE[s.color % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
        chart
            .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| anyhow!("{e}"))?;
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The palette index for a runtime label.
pub fn color_of(label: &str) -> usize {
    match label {
        "cordon" => 0,
        l if l.starts_with("cordon") => 1,
        "runc" => 2,
        "crun" => 3,
        l if l.starts_with("floor") || l.starts_with("host") => 4,
        _ => 5,
    }
}

/// One bar of a stacked chart: its label and the length of each segment,
/// in the order of the chart's segment names (0 where a bar has none).
#[derive(Debug, Clone)]
pub struct Stack {
    /// Label on the y axis.
    pub label: String,
    /// Segment lengths.
    pub parts: Vec<f64>,
    /// Text after the bar's end.
    pub note: String,
}

/// Colours of a stacked chart's segments, in order (repeated past the end).
const SEGMENTS: [RGBColor; 12] = [
    RGBColor(140, 86, 75),
    RGBColor(196, 156, 148),
    RGBColor(214, 39, 40),
    RGBColor(255, 152, 150),
    RGBColor(255, 127, 14),
    RGBColor(31, 119, 180),
    RGBColor(174, 199, 232),
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
    RGBColor(152, 223, 138),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
];

/// Horizontal stacked bars (linear x axis) with a legend naming each
/// segment: `names[k]` is segment k of every bar.
pub fn stacked_hbars(path: &Path, title: &str, x_desc: &str, names: &[String], bars: &[Stack]) -> anyhow::Result<()> {
    fonts();
    if bars.is_empty() {
        return Err(anyhow!("{}: no data", path.display()));
    }
    let n = bars.len();
    let height = (220 + 46 * n + 18 * names.len()) as u32;
    let root = BitMapBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let vmax = bars
        .iter()
        .map(|b| b.parts.iter().sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    // The first bar at the top.
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let fmt = move |v: &f64| {
        let i = n as f64 - v - 0.5;
        if (i - i.round()).abs() < 1e-6 && i >= 0.0 {
            labels.get(i.round() as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(260)
        .build_cartesian_2d(0.0..vmax * 1.6, 0.0..n as f64)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(2 * n + 1)
        .y_label_formatter(&fmt)
        .x_desc(x_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (k, name) in names.iter().enumerate() {
        let color = SEGMENTS[k % SEGMENTS.len()];
        let rects: Vec<Rectangle<(f64, f64)>> = bars
            .iter()
            .enumerate()
            .filter(|(_, b)| b.parts.get(k).copied().unwrap_or(0.0) > 0.0)
            .map(|(i, b)| {
                let x0: f64 = b.parts[..k].iter().sum();
                let y = (n - 1 - i) as f64;
                Rectangle::new([(x0, y + 0.18), (x0 + b.parts[k], y + 0.82)], color.filled())
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(|e| anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(
                format!("  {}", b.note),
                (b.parts.iter().sum::<f64>(), (n - 1 - i) as f64 + 0.5),
                note_style(),
            )
        }))
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_series_labels()
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
