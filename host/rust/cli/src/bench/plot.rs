//! `--plot FILE`: an SVG of ops/s against workers, one panel per store and
//! op, one line per implementation (drawn with `plotters`, no fonts: the
//! viewer renders the text).
use plotters::prelude::*;

use super::report::ResultRow;

const COLORS: [RGBColor; 4] = [
    RGBColor(0xd6, 0x27, 0x28), // kernel
    RGBColor(0x1f, 0x77, 0xb4), // native
    RGBColor(0x2c, 0xa0, 0x2c), // sql
    RGBColor(0x7f, 0x7f, 0x7f), // ceiling
];

fn color(imp: &str) -> RGBColor {
    let i = super::Impl::parse(imp).map_or(0, |i| i as usize);
    COLORS[i % COLORS.len()]
}

/// The SVG document for `rows`.
///
/// # Errors
/// A sentence, should drawing fail.
pub fn svg(rows: &[ResultRow]) -> Result<String, String> {
    // Panels: (store, op) in run order; in each, a line per implementation.
    let mut panels: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (r.store.clone(), r.op.clone());
        if !panels.contains(&k) {
            panels.push(k);
        }
    }
    let cols = panels.len().clamp(1, 2);
    let rows_n = panels.len().div_ceil(cols).max(1);
    let mut out = String::new();
    {
        let size = (560 * cols as u32, 360 * rows_n as u32);
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let fail = |e: DrawingAreaErrorKind<std::io::Error>| format!("drawing the plot: {e}");
        root.fill(&WHITE).map_err(fail)?;
        let areas = root.split_evenly((rows_n, cols));
        for ((store, op), area) in panels.iter().zip(areas.iter()) {
            let mine: Vec<&ResultRow> = rows
                .iter()
                .filter(|r| &r.store == store && &r.op == op)
                .collect();
            let (lo, hi) = mine.iter().fold((usize::MAX, 0), |(lo, hi), r| {
                (lo.min(r.workers), hi.max(r.workers))
            });
            let (x0, x1) = if lo >= hi {
                (lo as f64 - 1.0, hi as f64 + 1.0)
            } else {
                (lo as f64, hi as f64)
            };
            let ymax = mine.iter().map(|r| r.ops_per_s).fold(1.0, f64::max) * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{op} on {store}"), ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(32)
                .y_label_area_size(64)
                .build_cartesian_2d(x0..x1, 0.0..ymax)
                .map_err(fail)?;
            chart
                .configure_mesh()
                .x_desc("workers")
                .y_desc("ops/s")
                .draw()
                .map_err(fail)?;
            let mut impls: Vec<&str> = Vec::new();
            for r in &mine {
                if !impls.contains(&r.imp.as_str()) {
                    impls.push(&r.imp);
                }
            }
            for imp in impls {
                let c = color(imp);
                let mut points: Vec<(f64, f64)> = mine
                    .iter()
                    .filter(|r| r.imp == imp)
                    .map(|r| (r.workers as f64, r.ops_per_s))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                chart
                    .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                    .map_err(fail)?
                    .label(imp.to_owned())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                    .map_err(fail)?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(fail)?;
        }
        root.present().map_err(fail)?;
    }
    Ok(out)
}
