//! `sweep --html DIR`: an index page with the chart, whose points link to the page of one
//! run at each value (the first seed whose verdicts are not all `SAFE`, else the first
//! seed), and those pages (see [`crate::explain::html`]). Every page is self-contained; the
//! index only links to the others, by relative address.

use std::fmt::Write;

use super::sweep_chart::svg_linked;
use crate::runs::sweep::{Sweep, SweepError, SweepRun, SweepSpec};
use crate::scenario::{Scenario, Verdict};

/// The pages of a sweep: the index, and each run's page by its file name under `runs/`.
#[derive(Debug)]
pub struct SweepPages {
    /// `index.html`.
    pub index: String,
    /// (`runs/…html`, the page).
    pub runs: Vec<(String, String)>,
}

fn interesting(run: &SweepRun) -> bool {
    run.exclusion != Verdict::Safe || run.verdicts.iter().any(|&v| v != Verdict::Safe)
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The index and one run's page per value of `sweep` (made from `scenario` with `spec`).
///
/// # Errors
///
/// When the knob does not apply, a run cannot finish, or the chart cannot be drawn.
pub fn pages(
    scenario: &Scenario,
    spec: &SweepSpec,
    sweep: &Sweep,
) -> Result<SweepPages, SweepError> {
    let mut runs = Vec::new();
    let mut links = Vec::new();
    let mut rows = String::new();
    for (j, point) in sweep.points.iter().enumerate() {
        let at: Vec<&SweepRun> = sweep
            .runs
            .iter()
            .filter(|r| r.value == point.value)
            .collect();
        let chosen = at.iter().find(|r| interesting(r)).or_else(|| at.first());
        let link = match chosen {
            Some(run) => {
                let adjusted = spec.scenario_at(scenario, point.value)?;
                let traced = crate::run(&adjusted, run.seed, true)?;
                let file = format!("runs/value-{j}-seed-{}.html", run.seed);
                runs.push((file.clone(), crate::explain::html(&adjusted, &traced)));
                let title = format!(
                    "{} = {}: seed {} ({}, plain {}, fenced {}, strict {})",
                    sweep.parameter,
                    point.value,
                    run.seed,
                    match run.exclusion {
                        Verdict::Violated => "windows overlap",
                        _ => "no overlap",
                    },
                    run.verdicts[0],
                    run.verdicts[1],
                    run.verdicts[2]
                );
                Some((file, title))
            }
            None => None,
        };
        let _ = writeln!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td>\
             <td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td></tr>",
            point.value,
            point.runs,
            point.exclusion_violated,
            point.violated[0],
            point.violated[1],
            point.violated[2],
            point.prevented[1],
            point.prevented[2],
            point.acquired,
            link.as_ref()
                .map_or_else(String::new, |(file, title)| format!(
                    "<a href=\"{}\" title=\"{}\">seed {}</a>",
                    esc(file),
                    esc(title),
                    chosen.map_or(0, |r| r.seed)
                ))
        );
        links.push(link);
    }
    let chart = svg_linked(sweep, &links).map_err(SweepError::Knob)?;
    let title = format!("{}: {}", sweep.scenario, sweep.parameter);
    let mut index = String::new();
    let _ = write!(
        index,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n<title>{}</title>\n\
         <style>body {{ font: 14px/1.45 system-ui, sans-serif; margin: 16px; }} \
         td, th {{ padding: 2px 10px; text-align: right; }} \
         .point-link rect:hover {{ fill-opacity: 0.08; }}</style>\n</head>\n<body>\n\
         <h1>{}</h1>\n<p>Each point of the chart (and each row) opens the page of one run at \
         that value: the first seed whose verdicts are not all SAFE, else the first seed.</p>\n\
         <div class=\"chart\">{chart}</div>\n<table>\n<tr><th>value</th><th>runs</th>\
         <th>exclusion V</th><th>plain V</th><th>fenced V</th><th>strict V</th>\
         <th>fenced P</th><th>strict P</th><th>acquired</th><th>run</th></tr>\n{rows}</table>\n</body>\n</html>\n",
        crate::explain::CSP,
        esc(&title),
        esc(&title)
    );
    Ok(SweepPages { index, runs })
}
