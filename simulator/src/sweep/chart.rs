//! The sweep chart: the rate of each verdict against the swept parameter, with the analytic
//! threshold where one is known.

use plotters::prelude::*;

use super::Sweep;

/// A value without trailing zeros (`8898`, `1.061`).
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

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
        let root = SVGBackend::with_string(&mut out, (820, 560)).into_drawing_area();
        let draw = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        // The legend goes under the plot, where it can never hide a line.
        let (plot, legend_area) = root.split_vertically(420);
        let mut legend: Vec<(String, RGBColor, u32)> = Vec::new();
        let mut chart = ChartBuilder::on(&plot)
            .caption(&sweep.scenario, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_min..x_max, -0.02f64..1.02f64)
            .map_err(|e| draw(&e))?;
        chart
            .configure_mesh()
            .x_desc(&sweep.parameter)
            .y_desc("share of runs (or of acquisitions)")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| draw(&e))?;
        // Availability, drawn first and thin: how often an acquisition got its lease.
        let gray = RGBColor(150, 150, 150);
        let acquired: Vec<(f64, f64)> =
            sweep.points.iter().map(|p| (p.value, p.acquired)).collect();
        chart
            .draw_series(DashedLineSeries::new(acquired, 3, 3, gray.stroke_width(1)))
            .map_err(|e| draw(&e))?;
        legend.push(("acquisitions that got a lease (dotted)".into(), gray, 1));
        // Dashed, so that the violation lines stay visible on top of it.
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
            .map_err(|e| draw(&e))?;
        legend.push(("fenced: PREVENTED_BY_FENCING (dashed)".into(), green, 3));
        // Mutual exclusion, wide and underneath: where the lock itself failed, whether or not
        // the workload then touched the resource.
        let blue = RGBColor(31, 119, 180);
        let exclusion: Vec<(f64, f64)> = sweep
            .points
            .iter()
            .map(|p| (p.value, p.exclusion_violated))
            .collect();
        chart
            .draw_series(LineSeries::new(exclusion, blue.mix(0.45).stroke_width(7)))
            .map_err(|e| draw(&e))?;
        legend.push((
            "mutual exclusion: VIOLATED (wide, underneath)".into(),
            blue,
            5,
        ));
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
                .map_err(|e| draw(&e))?;
            legend.push((label.into(), color, width));
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
                .map_err(|e| draw(&e))?;
            if legend.len() % 2 == 1 {
                legend.push((String::new(), WHITE, 0));
            }
            legend.push((format!("boundary {}: {why} (dashed)", trim(*at)), gray, 1));
        }
        // Short entries two to a row, the boundary (long) on a row of its own at the end.
        for (i, (label, color, width)) in legend.iter().enumerate() {
            if label.is_empty() {
                continue;
            }
            let column = i32::try_from(i % 2).unwrap_or(0);
            let row = i32::try_from(i / 2).unwrap_or(0);
            let (x, y) = (60 + column * 370, 14 + row * 22);
            legend_area
                .draw(&PathElement::new(
                    vec![(x, y), (x + 24, y)],
                    color.stroke_width(*width),
                ))
                .map_err(|e| draw(&e))?;
            legend_area
                .draw(&Text::new(
                    label.clone(),
                    (x + 32, y - 6),
                    ("sans-serif", 12),
                ))
                .map_err(|e| draw(&e))?;
        }
        root.present().map_err(|e| draw(&e))?;
    }
    Ok(out)
}
