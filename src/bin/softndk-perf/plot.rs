//! `--plot FILE.svg`: bandwidth against message size for each operation and
//! engine mode, beside memcpy, drawn with plotters' SVG backend.

use std::path::Path;

use plotters::coord::combinators::{BindKeyPoints, IntoLogRange, LogCoord, WithKeyPoints};
use plotters::prelude::{
    BLACK, BLUE, ChartBuilder, Circle, Color, DashedLineSeries, GREEN, IntoDrawingArea, LineSeries,
    PathElement, RED, RGBColor, SVGBackend, SeriesLabelPosition, TriangleMarker, WHITE,
};
use plotters::prelude::{Cartesian2d, ChartContext};

use crate::bench::float;
use crate::ndk::Result;
use crate::report::{Report, size};

/// Draws the bandwidth rows of `report` into the SVG file `path`.
pub fn draw(report: &Report, path: &Path) -> Result<()> {
    if report.bandwidth.is_empty() {
        return Err("--plot needs at least one bandwidth test (--op write, read or send)".into());
    }
    let error = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let mut sizes: Vec<u64> = report.bandwidth.iter().map(|r| r.timed.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    // memcpy at each size: the mean of the memcpy figures measured beside
    // each operation of that size.
    let memcpy: Vec<(f64, f64)> = sizes
        .iter()
        .map(|&s| {
            let at: Vec<f64> = report
                .bandwidth
                .iter()
                .filter(|r| r.timed.size == s)
                .map(|r| r.memcpy_gb_per_s)
                .collect();
            (float(s), at.iter().sum::<f64>() / float(at.len() as u64))
        })
        .collect();
    let values = report
        .bandwidth
        .iter()
        .map(|r| r.gb_per_s)
        .chain(memcpy.iter().map(|&(_, v)| v))
        .filter(|v| v.is_finite() && *v > 0.0);
    let (low, high) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (first, last) = (float(sizes[0]), float(sizes[sizes.len() - 1]));

    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| error(&e))?;
    let caption = format!(
        "SoftNDK loopback bandwidth (host mode, {} {} CPUs, queue depth {})",
        report.machine.arch, report.machine.cpus, report.settings.queue_depth
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (first / 1.5..last * 1.5)
                .log_scale()
                .with_key_points(sizes.iter().map(|&s| float(s)).collect()),
            (low / 2.0..high * 2.0).log_scale(),
        )
        .map_err(|e| error(&e))?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc("GB/s (10^9 bytes/s)")
        .x_label_formatter(&|&x| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a positive axis position"
            )]
            let bytes = x.round() as u64;
            size(bytes)
        })
        .y_label_formatter(&|&y| format!("{y}"))
        .draw()
        .map_err(|e| error(&e))?;

    draw_operations(&mut chart, report).map_err(|e| error(&e))?;
    let memcpy_style = BLACK.stroke_width(2);
    chart
        .draw_series(DashedLineSeries::new(memcpy.clone(), 8, 5, memcpy_style))
        .map_err(|e| error(&e))?
        .label("memcpy (same run)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], memcpy_style));
    chart
        .draw_series(memcpy.iter().map(|&p| Circle::new(p, 3, BLACK.filled())))
        .map_err(|e| error(&e))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| error(&e))?;
    root.present().map_err(|e| error(&e))?;
    Ok(())
}

/// The chart plotters draws on here.
type Chart<'a> =
    ChartContext<'a, SVGBackend<'a>, Cartesian2d<WithKeyPoints<LogCoord<f64>>, LogCoord<f64>>>;

/// One line per operation and engine mode.
fn draw_operations(chart: &mut Chart<'_>, report: &Report) -> std::result::Result<(), String> {
    let series: [(&str, &str, RGBColor); 3] = [
        ("write", "RDMA Write", BLUE),
        ("read", "RDMA Read", RED),
        ("send", "Send", GREEN),
    ];
    for (op, label, color) in series {
        for engine in ["inline", "deferred"] {
            let points: Vec<(f64, f64)> = report
                .bandwidth
                .iter()
                .filter(|r| r.timed.op == op && r.timed.engine == engine)
                .map(|r| (float(r.timed.size), r.gb_per_s))
                .collect();
            if points.is_empty() {
                continue;
            }
            let style = if engine == "inline" {
                color.stroke_width(2)
            } else {
                color.mix(0.5).stroke_width(2)
            };
            chart
                .draw_series(LineSeries::new(points.clone(), style))
                .map_err(|e| e.to_string())?
                .label(format!("{label} ({engine})"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            if engine == "inline" {
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 4, style.filled())))
                    .map_err(|e| e.to_string())?;
            } else {
                chart
                    .draw_series(
                        points
                            .iter()
                            .map(|&p| TriangleMarker::new(p, 5, style.filled())),
                    )
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}
