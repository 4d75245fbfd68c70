//! The sweep chart: the rate of each verdict against the swept parameter, with the analytic
//! threshold where one is known.
//!
//! Several rates are often equal (every mode violated in every run, or none): drawn where
//! they are, their lines would hide each other. Each series therefore has its own marker
//! shape and dash pattern, and equal rates are drawn side by side: the lines a few pixels
//! apart up and down, the markers of equal rates a few pixels apart across, in a fixed order
//! that the legend shows.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::runs::sweep::{Sweep, SweepPoint};

/// A value without trailing zeros (`8898`, `1.061`).
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Bar,
}

/// One rate drawn against the parameter.
struct Series {
    label: &'static str,
    color: RGBColor,
    shape: Shape,
    /// Dash and gap in pixels; `None` for a solid line.
    dash: Option<(u32, u32)>,
    rate: fn(&SweepPoint) -> f64,
}

/// The series, in the order they are drawn side by side (left to right, top to bottom).
const SERIES: [Series; 6] = [
    Series {
        label: "mutual exclusion: VIOLATED",
        color: RGBColor(31, 119, 180),
        shape: Shape::Circle,
        dash: None,
        rate: |p| p.exclusion_violated,
    },
    Series {
        label: "plain: VIOLATED",
        color: RGBColor(214, 39, 40),
        shape: Shape::Square,
        dash: None,
        rate: |p| p.violated[0],
    },
    Series {
        label: "fenced: VIOLATED",
        color: RGBColor(230, 120, 0),
        shape: Shape::TriangleUp,
        dash: Some((10, 4)),
        rate: |p| p.violated[1],
    },
    Series {
        label: "strict: VIOLATED",
        color: RGBColor(148, 103, 189),
        shape: Shape::Diamond,
        dash: Some((4, 3)),
        rate: |p| p.violated[2],
    },
    Series {
        label: "fenced: PREVENTED_BY_FENCING",
        color: RGBColor(44, 160, 44),
        shape: Shape::TriangleDown,
        dash: Some((8, 5)),
        rate: |p| p.prevented[1],
    },
    Series {
        label: "acquisitions that got a lease",
        color: RGBColor(120, 120, 120),
        shape: Shape::Bar,
        dash: Some((2, 3)),
        rate: |p| p.acquired,
    },
];

const WIDTH: u32 = 820;
const PLOT_HEIGHT: u32 = 420;
const TITLE_PX: u32 = 19;
const LEGEND_PX: u32 = 14;
const LEGEND_ROW: i32 = 22;
/// Pixels between two series drawn side by side: up and down (lines), across (markers of
/// equal rates, at most; less, down to 6, when the values are close together on the axis).
const NUDGE_Y: f64 = 2.0;
const NUDGE_X: f64 = 7.0;
const MARKER: i32 = 3;

/// A generous estimate of a label's width in pixels: 0.62 em a glyph, of the size asked
/// (plotters writes a smaller one into the SVG, 1/1.24 of it).
fn text_width(text: &str, size: u32) -> f64 {
    text.chars().count() as f64 * f64::from(size) * 0.62
}

/// `text` cut at spaces into lines no wider than `width` pixels.
fn wrap(text: &str, width: f64, size: u32) -> Vec<String> {
    crate::explain::text_fit::wrap(text, width, |line| text_width(line, size))
}

fn px(v: f64) -> i32 {
    // Pixel coordinates of a chart of a few hundred pixels: always in range.
    #[allow(clippy::cast_possible_truncation)]
    let v = v.round() as i32;
    v
}

/// Draws a marker of `shape` centred on `(x, y)`.
fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    shape: Shape,
    (x, y): (i32, i32),
    color: RGBColor,
) -> Result<(), String> {
    let r = MARKER;
    let style = color.filled();
    let draw = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    match shape {
        Shape::Circle => area.draw(&Circle::new((x, y), r, style)).map_err(draw),
        Shape::Square => area
            .draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], style))
            .map_err(draw),
        Shape::TriangleUp => area
            .draw(&Polygon::new(
                vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
                style,
            ))
            .map_err(draw),
        Shape::TriangleDown => area
            .draw(&Polygon::new(
                vec![(x, y + r + 1), (x + r + 1, y - r), (x - r - 1, y - r)],
                style,
            ))
            .map_err(draw),
        Shape::Diamond => area
            .draw(&Polygon::new(
                vec![
                    (x, y - r - 1),
                    (x + r + 1, y),
                    (x, y + r + 1),
                    (x - r - 1, y),
                ],
                style,
            ))
            .map_err(draw),
        Shape::Bar => area
            .draw(&Rectangle::new(
                [(x - r - 1, y - 2), (x + r + 1, y + 2)],
                style,
            ))
            .map_err(draw),
    }
}

/// Draws a line through `points` (pixels), solid or dashed.
fn line<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    points: Vec<(i32, i32)>,
    dash: Option<(u32, u32)>,
    style: ShapeStyle,
) -> Result<(), String> {
    let draw = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    match dash {
        None => area.draw(&PathElement::new(points, style)).map_err(draw),
        Some((on, off)) => area
            .draw(&DashedPathElement::new(points, on, off, style))
            .map_err(draw),
    }
}

/// How many steps left (negative) or right series `series`'s marker at point `index` moves:
/// none when no other series has the same rate there, else its place among those that do,
/// centred. A marker moves only where it would hide or be hidden.
fn beside(sweep: &Sweep, index: usize, series: usize) -> f64 {
    let point = &sweep.points[index];
    let rate = (SERIES[series].rate)(point);
    let equal: Vec<usize> = (0..SERIES.len())
        .filter(|&k| ((SERIES[k].rate)(point) - rate).abs() < 0.01)
        .collect();
    let place = equal.iter().position(|&k| k == series).unwrap_or(0);
    place as f64 - (equal.len() as f64 - 1.0) / 2.0
}

/// Renders the sweep as an SVG chart.
///
/// # Errors
///
/// A message when the chart cannot be drawn (no points).
pub fn svg(sweep: &Sweep) -> Result<String, String> {
    draw(sweep).map(|(svg, _)| svg)
}

/// Renders the sweep as an SVG chart in which each point (its column of markers) links to
/// `links[j]` when it is set: (the address, a tooltip), e.g. the page of a run at that value.
///
/// # Errors
///
/// As [`svg`].
pub fn svg_linked(sweep: &Sweep, links: &[Option<(String, String)>]) -> Result<String, String> {
    let (mut svg, markers) = draw(sweep)?;
    let points = sweep.points.len();
    // Markers are pushed series by series, each with every point in order.
    let columns: Vec<Vec<(i32, i32)>> = (0..points)
        .map(|j| {
            markers
                .iter()
                .enumerate()
                .filter(|(k, _)| k % points == j)
                .map(|(_, &(_, at))| at)
                .collect()
        })
        .collect();
    let centre = |j: usize| {
        let xs = &columns[j];
        xs.iter().map(|&(x, _)| f64::from(x)).sum::<f64>() / xs.len().max(1) as f64
    };
    let spacing = (1..points)
        .map(|j| (centre(j) - centre(j - 1)).abs())
        .fold(40.0_f64, f64::min)
        .max(8.0);
    let mut anchors = String::new();
    for (j, link) in links.iter().enumerate().take(points) {
        let Some((href, title)) = link else {
            continue;
        };
        let ys = columns[j].iter().map(|&(_, y)| y);
        let (top, bottom) = (
            ys.clone().min().unwrap_or(0) - 12,
            ys.max().unwrap_or(0) + 12,
        );
        anchors.push_str(&format!(
            "<a href=\"{}\" class=\"point-link\"><title>{}</title><rect x=\"{:.1}\" y=\"{top}\" \
             width=\"{:.1}\" height=\"{}\" fill=\"#000\" fill-opacity=\"0\" \
             stroke=\"none\"/></a>\n",
            esc(href),
            esc(title),
            centre(j) - spacing / 2.0,
            spacing,
            bottom - top
        ));
    }
    if let Some(end) = svg.rfind("</svg>") {
        svg.insert_str(end, &anchors);
    }
    Ok(svg)
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Where each series' markers went: (series, centre in pixels).
type Markers = Vec<(usize, (i32, i32))>;

/// The chart, and where its markers are (for the tests).
fn draw(sweep: &Sweep) -> Result<(String, Markers), String> {
    let (first, last) = match (sweep.points.first(), sweep.points.last()) {
        (Some(f), Some(l)) => (f.value, l.value),
        _ => return Err("no points to draw".into()),
    };
    let span = (last - first).abs().max(1e-9);
    let (x_min, x_max) = (first.min(last) - span * 0.04, first.max(last) + span * 0.04);
    // The title and the boundary's label wrap to the canvas, whose height follows.
    let title = wrap(&sweep.scenario, f64::from(WIDTH) - 40.0, TITLE_PX);
    let title_h = u32::try_from(title.len()).unwrap_or(1) * (TITLE_PX + 4) + 12;
    let boundary = sweep
        .threshold
        .as_ref()
        .filter(|(at, _)| (x_min..=x_max).contains(at))
        .map(|(at, why)| {
            (
                *at,
                wrap(
                    &format!("boundary {}: {why} (dashed)", trim(*at)),
                    f64::from(WIDTH) - 120.0,
                    LEGEND_PX,
                ),
            )
        });
    let legend_rows = SERIES.len().div_ceil(2) + 1 + boundary.as_ref().map_or(0, |(_, l)| l.len());
    let legend_h = u32::try_from(legend_rows).unwrap_or(0) * 22 + 12;
    let height = title_h + PLOT_HEIGHT + legend_h;
    let markers;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let (head, rest) = root.split_vertically(title_h);
        let (plot, legend_area) = rest.split_vertically(PLOT_HEIGHT);
        draw_title(&head, &title)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .margin_right(24)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_min..x_max, -0.06f64..1.06f64)
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_desc(&sweep.parameter)
            .x_label_formatter(&|x| trim(*x))
            .y_desc("share of runs (or of acquisitions)")
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| fail(&e))?;
        // `backend_coord` gives pixels of the whole canvas: the lines and markers are drawn
        // on `root`, at their nudged pixel positions.
        let (placed, nudge_x) = place(sweep, |value, rate| chart.backend_coord(&(value, rate)));
        if let Some((at, _)) = &boundary {
            let gray = RGBColor(90, 90, 90);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(*at, -0.06), (*at, 1.06)],
                    6,
                    4,
                    gray.stroke_width(1),
                ))
                .map_err(|e| fail(&e))?;
        }
        markers = draw_series(&root, sweep, &placed, nudge_x)?;
        draw_legend(
            &legend_area,
            boundary.as_ref().map(|(_, lines)| lines.as_slice()),
        )?;
        root.present().map_err(|e| fail(&e))?;
    }
    Ok((out, markers))
}

/// Every series' line first, then every marker, so that no line hides a marker; returns
/// where the markers went.
fn draw_series<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    sweep: &Sweep,
    placed: &[Vec<(f64, f64)>],
    nudge_x: f64,
) -> Result<Markers, String> {
    for (series, points) in SERIES.iter().zip(placed) {
        line(
            root,
            points.iter().map(|&(x, y)| (px(x), px(y))).collect(),
            series.dash,
            series.color.stroke_width(2),
        )?;
    }
    let mut markers = Vec::new();
    for (i, (series, points)) in SERIES.iter().zip(placed).enumerate() {
        for (j, &(x, y)) in points.iter().enumerate() {
            let point = (px(x + beside(sweep, j, i) * nudge_x), px(y));
            marker(root, series.shape, point, series.color)?;
            markers.push((i, point));
        }
    }
    Ok(markers)
}

/// The title, centred, one wrapped line under the other.
fn draw_title<DB: DrawingBackend>(
    head: &DrawingArea<DB, Shift>,
    title: &[String],
) -> Result<(), String> {
    for (i, text) in title.iter().enumerate() {
        let y = 10 + i32::try_from(i).unwrap_or(0) * i32::try_from(TITLE_PX + 4).unwrap_or(20);
        head.draw(&Text::new(
            text.clone(),
            (px(f64::from(WIDTH) / 2.0), y),
            ("sans-serif", TITLE_PX)
                .into_font()
                .into_text_style(head)
                .pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Top,
                )),
        ))
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Where each series' points go, in pixels of the canvas (`to_px` maps a value and a rate),
/// and how far apart across equal values' markers sit.
///
/// A series' line runs through its values, a few pixels up or down; its markers sit on the
/// line, a few pixels left or right, so that equal values show every marker. Side by side:
/// as far apart across as the closest two values leave room for, and never closer than 6 px
/// (a marker reaches 4 px from its centre, and the centre of its neighbour must stay clear).
fn place(sweep: &Sweep, to_px: impl Fn(f64, f64) -> (i32, i32)) -> (Vec<Vec<(f64, f64)>>, f64) {
    let step_px = sweep
        .points
        .windows(2)
        .map(|w| {
            let a = to_px(w[0].value, 0.0).0;
            let b = to_px(w[1].value, 0.0).0;
            f64::from((b - a).abs())
        })
        .fold(f64::INFINITY, f64::min);
    let nudge_x = NUDGE_X.min(step_px / SERIES.len() as f64).max(6.0);
    let middle = (SERIES.len() as f64 - 1.0) / 2.0;
    let placed = SERIES
        .iter()
        .enumerate()
        .map(|(i, series)| {
            let offset = i as f64 - middle;
            sweep
                .points
                .iter()
                .map(|p| {
                    let (x, y) = to_px(p.value, (series.rate)(p));
                    (f64::from(x), f64::from(y) + offset * NUDGE_Y)
                })
                .collect()
        })
        .collect();
    (placed, nudge_x)
}

/// The legend: each series with its line and marker, two to a row; then a note on the
/// nudging, then the boundary's wrapped label, if the chart has one.
fn draw_legend<DB: DrawingBackend>(
    legend_area: &DrawingArea<DB, Shift>,
    boundary: Option<&[String]>,
) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    let row_y = |row: usize| 14 + i32::try_from(row).unwrap_or(0) * LEGEND_ROW;
    for (i, series) in SERIES.iter().enumerate() {
        let (x, y) = (60 + i32::try_from(i % 2).unwrap_or(0) * 370, row_y(i / 2));
        line(
            legend_area,
            vec![(x, y), (x + 28, y)],
            series.dash,
            series.color.stroke_width(2),
        )?;
        marker(legend_area, series.shape, (x + 14, y), series.color)?;
        legend_area
            .draw(&Text::new(
                series.label,
                (x + 36, y - 7),
                ("sans-serif", LEGEND_PX),
            ))
            .map_err(|e| fail(&e))?;
    }
    let mut row = SERIES.len().div_ceil(2);
    legend_area
        .draw(&Text::new(
            "equal rates are drawn side by side, a few pixels apart, in the order above",
            (60, row_y(row) - 7),
            ("sans-serif", LEGEND_PX),
        ))
        .map_err(|e| fail(&e))?;
    row += 1;
    if let Some(lines) = boundary {
        let gray = RGBColor(90, 90, 90);
        line(
            legend_area,
            vec![(60, row_y(row)), (88, row_y(row))],
            Some((6, 4)),
            gray.stroke_width(1),
        )?;
        for text in lines {
            legend_area
                .draw(&Text::new(
                    text.clone(),
                    (96, row_y(row) - 7),
                    ("sans-serif", LEGEND_PX),
                ))
                .map_err(|e| fail(&e))?;
            row += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::svg_check::{near, render};

    fn point(value: f64, violated: f64, prevented: f64, acquired: f64) -> SweepPoint {
        SweepPoint {
            value,
            runs: 40,
            exclusion_violated: violated,
            violated: [violated, 0.0, 0.0],
            prevented: [0.0, prevented, prevented],
            acquired,
        }
    }

    /// A sweep as the catalogue's often are: most rates equal to each other at every value.
    fn sweep(values: usize, name: &str) -> Sweep {
        Sweep {
            scenario: name.into(),
            parameter: "client pause (ms)".into(),
            runs: Vec::new(),
            points: (0..values)
                .map(|i| {
                    let unsafe_ = if i >= values / 2 { 1.0 } else { 0.0 };
                    point(i as f64 * 1000.0, unsafe_, unsafe_, 1.0)
                })
                .collect(),
            threshold: Some((
                9500.0,
                "the keys expire during the pause: TTL - 500 ms, and a label long enough to \
                 need a second line on a chart of this width, which it must not leave"
                    .into(),
            )),
        }
    }

    fn check(sweep: &Sweep, name: &str) {
        let (svg, markers) = draw(sweep).expect("the chart draws");
        let picture = render(&svg);
        picture.save_if_asked(name);
        picture.assert_inside_canvas();
        picture.assert_labels_readable();
        picture.assert_labels_apart();
        // Every marker of every series shows its own colour at its centre: none is hidden
        // by another series, however many rates are equal.
        for (i, series) in SERIES.iter().enumerate() {
            let color = [series.color.0, series.color.1, series.color.2];
            let mine: Vec<_> = markers.iter().filter(|(s, _)| *s == i).collect();
            assert_eq!(mine.len(), sweep.points.len(), "{}", series.label);
            for (_, (x, y)) in mine {
                let (x, y) = (u32::try_from(*x).unwrap(), u32::try_from(*y).unwrap());
                assert!(
                    near(picture.rgb(x, y), color, 10),
                    "{}: the marker at ({x}, {y}) is hidden ({:?})",
                    series.label,
                    picture.rgb(x, y)
                );
            }
        }
    }

    #[test]
    fn coinciding_series_stay_visible() {
        check(&sweep(21, "RL-02 pause after acquire, 15 s"), "sweep-21");
        check(&sweep(3, "RL-05 node crash without persistence"), "sweep-3");
    }

    #[test]
    fn only_equal_rates_move_aside() {
        // At the first value the five verdict rates are 0 and availability is 1: the five
        // spread around the value, availability stays on it.
        let sweep = sweep(5, "RL-02");
        let moved: Vec<f64> = (0..SERIES.len()).map(|i| beside(&sweep, 0, i)).collect();
        assert_eq!(moved, [-2.0, -1.0, 0.0, 1.0, 2.0, 0.0]);
    }

    #[test]
    fn a_long_title_wraps_inside_the_canvas() {
        let name = "RL-08b asymmetric partition around a master (Sentinel split brain), a \
                    client that knew the master, with the restart quarantine";
        let (svg, _) = draw(&sweep(13, name)).expect("the chart draws");
        // The title's lines are centred on the canvas.
        assert!(
            svg.matches(r#"<text x="410""#).count() >= 2,
            "the title wraps"
        );
        render(&svg).assert_inside_canvas();
    }
}
