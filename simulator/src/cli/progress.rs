//! The progress bar of the commands that make many runs (`run`, `sweep`).

/// A progress bar on stderr for `total` runs, drawn only when stderr is a terminal:
/// indicatif hides a bar whose target is not one, so that a pipe or a file receives exactly
/// the output a script reads, with no carriage returns.
pub(crate) fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} {wide_bar} {pos}/{len} runs, {elapsed} elapsed, about {eta} left",
    ) {
        bar.set_style(style);
    }
    bar.set_message(what.to_owned());
    // One long run would otherwise freeze the elapsed time.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}
