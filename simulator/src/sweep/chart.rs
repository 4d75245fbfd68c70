//! The sweep chart: the rate of each verdict against the swept parameter, with the analytic
//! threshold where one is known.

use plotters::prelude::*;

use super::Sweep;

/// Renders the sweep as an SVG chart.
///
/// # Errors
///
/// A message when the chart cannot be drawn (no points).
pub fn svg(sweep: &Sweep) -> Result<String, String> {
    let (first, last) = match (sweep.points.first(), sweep.points.last()) {
        (Some(f), Some(l)) => (f.value, l.value),
        _ => return Err("no points to draw".into()),
    };
    let span = (last - first).abs().max(1e-9);
    let (x_min, x_max) = (first.min(last) - span * 0.02, first.max(last) + span * 0.02);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (820, 460)).into_drawing_area();
        let draw = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&sweep.scenario, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_min..x_max, -0.02f64..1.02f64)
            .map_err(|e| draw(&e))?;
        chart
            .configure_mesh()
            .x_desc(&sweep.parameter)
            .y_desc("share of runs")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| draw(&e))?;
        // Drawn first and dashed, so that the violation lines stay visible on top of it.
        let green = RGBColor(44, 160, 44);
        let prevented: Vec<(f64, f64)> = sweep
            .points
            .iter()
            .map(|p| (p.value, p.prevented[1]))
            .collect();
        chart
            .draw_series(DashedLineSeries::new(
                prevented,
                8,
                5,
                green.stroke_width(3),
            ))
            .map_err(|e| draw(&e))?
            .label("fenced: PREVENTED_BY_FENCING")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], green.stroke_width(3))
            });
        let series: [(&str, usize, RGBColor, u32); 3] = [
            ("strict: VIOLATED", 2, RGBColor(148, 103, 189), 2),
            ("fenced: VIOLATED", 1, RGBColor(255, 127, 14), 2),
            ("plain: VIOLATED", 0, RGBColor(214, 39, 40), 2),
        ];
        for (label, mode, color, width) in series {
            let points: Vec<(f64, f64)> = sweep
                .points
                .iter()
                .map(|p| (p.value, p.violated[mode]))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(width)))
                .map_err(|e| draw(&e))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width))
                });
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
                )
                .map_err(|e| draw(&e))?;
        }
        if let Some((at, why)) = &sweep.threshold
            && (x_min..=x_max).contains(at)
        {
            let gray = RGBColor(90, 90, 90);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(*at, -0.02), (*at, 1.02)],
                    6,
                    4,
                    gray.stroke_width(1),
                ))
                .map_err(|e| draw(&e))?
                .label(format!("threshold {at:.3}: {why}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], gray));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| draw(&e))?;
        root.present().map_err(|e| draw(&e))?;
    }
    Ok(out)
}
