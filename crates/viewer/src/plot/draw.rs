//! Drawing one chart panel with plotters: a time axis, linear or log y axis, stacked
//! areas (bottom layer first) and lines, a legend. Knows nothing about CSV columns; the
//! chart definitions in `charts` fill a [`Panel`].

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Font family every text uses; registered from a TTF file by `plot::load_font`.
pub const FONT: &str = "sans-serif";

/// How a line is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stroke {
    Thin,
    Thick,
    Dashed,
}

/// One series of values (one per x).
#[derive(Clone)]
pub struct Series {
    pub label: String,
    pub color: RGBColor,
    pub values: Vec<f64>,
    pub stroke: Stroke,
}

impl Series {
    pub fn new(label: &str, color: RGBColor, values: Vec<f64>, stroke: Stroke) -> Series {
        Series {
            label: label.to_string(),
            color,
            values,
            stroke,
        }
    }
}

/// One panel: x values and the series drawn against them.
#[derive(Clone)]
pub struct Panel {
    pub title: String,
    pub y_desc: String,
    /// What x is: "time (s)" for the per-second logs, a rate for a bench ladder.
    pub x_desc: String,
    pub x: Vec<f64>,
    /// Stacked areas, bottom layer first.
    pub stacked: Vec<Series>,
    /// Lines drawn over the areas.
    pub lines: Vec<Series>,
    /// Log-scale y axis (values ≤ 0 are drawn at the bottom).
    pub log: bool,
    /// Formats a y-axis value.
    pub y_fmt: fn(f64) -> String,
    /// Values are bytes: the axis is drawn in B, KiB, MiB or GiB (whichever fits the
    /// largest value) so its ticks fall on round numbers of that unit.
    pub bytes: bool,
}

/// A number for an axis label: no trailing `.0`, at most two decimals.
pub fn axis_number(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A copy of a bytes panel with its values divided by the unit that fits its maximum.
fn in_byte_units(p: &Panel, max: f64) -> Panel {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut k = 0;
    while k + 1 < UNITS.len() && max >= 1024f64.powi(k as i32 + 1) {
        k += 1;
    }
    let unit = 1024f64.powi(k as i32);
    let mut q = p.clone();
    for s in q.stacked.iter_mut().chain(q.lines.iter_mut()) {
        s.values.iter_mut().for_each(|v| *v /= unit);
    }
    q.y_desc = format!("{} ({})", p.y_desc, UNITS[k]);
    q.y_fmt = axis_number;
    q.bytes = false;
    q
}

/// The cumulative sums of the stacked series, bottom first.
fn stack(series: &[Series]) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = Vec::new();
    for s in series {
        let row: Vec<f64> = s
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
                v + out.last().map(|b| b[i]).unwrap_or(0.0)
            })
            .collect();
        out.push(row);
    }
    out
}

/// Finite (x, y) pairs of a series.
fn points(x: &[f64], y: &[f64]) -> Vec<(f64, f64)> {
    x.iter()
        .zip(y)
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .map(|(a, b)| (*a, *b))
        .collect()
}

/// Draw `p` into `area`.
pub fn draw_panel(area: &DrawingArea<BitMapBackend<'_>, Shift>, p: &Panel) -> anyhow::Result<()> {
    let tops = stack(&p.stacked);
    let all: Vec<f64> = tops
        .iter()
        .flatten()
        .chain(p.lines.iter().flat_map(|s| s.values.iter()))
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let (x0, x1) =
        p.x.iter()
            .filter(|v| v.is_finite())
            .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
    let (x0, x1) = if x0 > x1 {
        (0.0, 1.0)
    } else if x0 == x1 {
        (x0 - 1.0, x1 + 1.0)
    } else {
        (x0, x1)
    };
    let max = all.iter().copied().fold(0.0f64, f64::max);
    if p.bytes {
        return draw_panel(area, &in_byte_units(p, max));
    }
    if p.log {
        let min_pos = all
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::MAX, f64::min);
        // Start a decade below a minimum that sits on a power of ten, so it is not on the axis.
        let lo = if min_pos == f64::MAX {
            1.0
        } else {
            10f64.powf((min_pos * 0.9).log10().floor())
        };
        let hi = 10f64.powf(max.max(lo * 10.0).log10().ceil());
        draw_with(area, p, &tops, x0..x1, (lo..hi).log_scale(), lo)
    } else {
        let hi = if max > 0.0 { max * 1.08 } else { 1.0 };
        draw_with(area, p, &tops, x0..x1, 0.0..hi, 0.0)
    }
}

fn draw_with<Y>(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    p: &Panel,
    tops: &[Vec<f64>],
    x: std::ops::Range<f64>,
    y: Y,
    floor: f64,
) -> anyhow::Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("drawing {}: {e}", p.title);
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 22).into_font())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(x, y)
        .map_err(|e| err(&e))?;
    let yf = |v: &f64| (p.y_fmt)(*v);
    let xf = |v: &f64| format!("{v:.0}");
    chart
        .configure_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(205, 205, 205))
        .label_style((FONT, 15).into_font())
        .axis_desc_style((FONT, 16).into_font())
        .x_desc(&p.x_desc)
        .y_desc(&p.y_desc)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .x_labels(10)
        .y_labels(8)
        .draw()
        .map_err(|e| err(&e))?;
    let clamp = |v: f64| v.max(floor);
    // Painter's order: the tallest (top) layer first, each lower layer over it.
    for (s, top) in p.stacked.iter().zip(tops).rev() {
        let pts: Vec<(f64, f64)> = points(&p.x, top)
            .into_iter()
            .map(|(a, b)| (a, clamp(b)))
            .collect();
        let fill = s.color.mix(0.85);
        chart
            .draw_series(AreaSeries::new(pts, floor, fill).border_style(s.color.stroke_width(1)))
            .map_err(|e| err(&e))?
            .label(s.label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], fill.filled()));
    }
    for s in &p.lines {
        let pts: Vec<(f64, f64)> = points(&p.x, &s.values)
            .into_iter()
            .map(|(a, b)| (a, clamp(b)))
            .collect();
        let color = s.color;
        let style = match s.stroke {
            Stroke::Thick => color.stroke_width(3),
            _ => color.stroke_width(2),
        };
        let anno = if s.stroke == Stroke::Dashed {
            chart
                .draw_series(DashedLineSeries::new(pts, 8, 5, style))
                .map_err(|e| err(&e))?
        } else {
            chart
                .draw_series(LineSeries::new(pts, style))
                .map_err(|e| err(&e))?
        };
        anno.label(s.label.clone()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
        });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 15).into_font())
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacking_adds_layers_and_ignores_gaps() {
        let s = vec![
            Series::new("a", RED, vec![1.0, f64::NAN, 2.0], Stroke::Thin),
            Series::new("b", BLUE, vec![10.0, 20.0, -5.0], Stroke::Thin),
        ];
        assert_eq!(stack(&s), vec![vec![1.0, 0.0, 2.0], vec![11.0, 20.0, 2.0]]);
        assert_eq!(
            points(&[0.0, 1.0, 2.0], &[1.0, f64::NAN, 3.0]),
            vec![(0.0, 1.0), (2.0, 3.0)]
        );
        assert_eq!(
            (axis_number(2.0), axis_number(0.25), axis_number(1.5)),
            ("2".into(), "0.25".into(), "1.5".into())
        );
    }

    #[test]
    fn byte_axes_pick_the_unit_of_the_maximum() {
        let p = Panel {
            title: "t".into(),
            y_desc: "memory".into(),
            x_desc: "time (s)".into(),
            x: vec![0.0, 1.0],
            stacked: vec![Series::new("a", RED, vec![1024.0, 3072.0], Stroke::Thin)],
            lines: vec![],
            log: false,
            y_fmt: axis_number,
            bytes: true,
        };
        let q = in_byte_units(&p, 3072.0);
        assert_eq!(q.y_desc, "memory (KiB)");
        assert_eq!(q.stacked[0].values, vec![1.0, 3.0]);
        assert_eq!(in_byte_units(&p, 5e9).y_desc, "memory (GiB)");
    }
}
