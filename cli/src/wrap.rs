//! Text that fits the terminal: help, errors and the doctor's findings are wrapped to the
//! width of the terminal `redlock` writes to, or to 80 columns in a pipe or a file (a cron
//! mail, a CI log), where no width can be read.

/// The width used where no terminal tells one.
pub(crate) const PIPE_WIDTH: usize = 80;

/// The narrowest width wrapped to: below it a message is unreadable either way, and
/// wrapping it word by word helps nobody.
const MIN_WIDTH: usize = 40;

/// The width to wrap text written to `stream` (stdout or stderr) to: `COLUMNS` when it holds
/// a number (as shells export it, and as a user sets it to ask for another width), else the
/// width of the terminal `stream` is, else [`PIPE_WIDTH`].
pub(crate) fn width(stream: impl std::os::fd::AsFd) -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.trim().parse::<usize>().ok())
        .filter(|&columns| columns > 0);
    from_env
        .or_else(|| {
            terminal_size::terminal_size_of(stream)
                .map(|(terminal_size::Width(w), _)| usize::from(w))
                .filter(|&w| w > 0)
        })
        .unwrap_or(PIPE_WIDTH)
        .max(MIN_WIDTH)
}

/// `text` wrapped to `width` columns, each line of its own (a message's own line breaks
/// stay), the lines after the first indented by `indent`. Words longer than a line (a URL,
/// a path) are left whole rather than cut, and never broken at a hyphen.
pub(crate) fn fill(text: &str, width: usize, indent: &str) -> String {
    let options = textwrap::Options::new(width.max(MIN_WIDTH))
        .subsequent_indent(indent)
        .break_words(false)
        // Paths and scenario names have hyphens: a line break inside one makes it another.
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    text.split('\n')
        .enumerate()
        .map(|(index, line)| {
            if index == 0 {
                textwrap::fill(line, &options)
            } else {
                textwrap::fill(line, options.clone().initial_indent(indent))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_fits_the_width_and_keeps_every_word() {
        let message = "too few nodes are counted for a quorum: the restart quarantine leaves \
                       out 3 of 3 nodes (127.0.0.1:7000, 127.0.0.1:7001, 127.0.0.1:7002), \
                       which met this process less than 30s ago; wait for it to end, or set \
                       --restart-quarantine off if the nodes persist every write";
        let wrapped = fill(message, 80, "  ");
        assert!(wrapped.lines().count() > 2, "{wrapped}");
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 80, "{line:?} is wider than 80");
        }
        let words = |text: &str| {
            text.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(words(&wrapped), words(message));
        assert!(wrapped.lines().skip(1).all(|line| line.starts_with("  ")));
    }

    #[test]
    fn line_breaks_of_the_message_stay_and_long_words_stay_whole() {
        let url = format!("redis://{}:6379", "a".repeat(100));
        let wrapped = fill(
            &format!("first line\nnot a usable Redis URL: {url}"),
            60,
            "  ",
        );
        assert!(
            wrapped.starts_with("first line\n  not a usable Redis URL:"),
            "{wrapped}"
        );
        assert!(wrapped.contains(&url), "{wrapped}");
        let path = "(simulator/scenarios/rl-06-delayed-restart-5000ms.toml)";
        let wrapped = fill(&format!("{} {path}", "word ".repeat(12)), 60, "");
        assert!(wrapped.contains(path), "{wrapped}");
    }

    #[test]
    fn absurd_widths_are_raised_to_a_readable_minimum() {
        let wrapped = fill(
            "one two three four five six seven eight nine ten eleven",
            3,
            "",
        );
        assert!(
            wrapped
                .lines()
                .all(|line| line.chars().count() <= MIN_WIDTH)
        );
        assert!(wrapped.lines().count() >= 2, "{wrapped}");
    }
}
