//! Text laid out in a picture without a font at hand: lines cut at spaces to a width in
//! pixels, measured by the caller's estimate of a label's width (the space-time diagram
//! and the sweep charts each know their own font sizes and weights).

/// `text` cut at spaces into lines whose `width_of` is at most `width`; a word wider than
/// that stays whole on a line of its own.
pub(crate) fn wrap(text: &str, width: f64, width_of: impl Fn(&str) -> f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let candidate = if line.is_empty() {
            word.to_owned()
        } else {
            format!("{line} {word}")
        };
        if !line.is_empty() && width_of(&candidate) > width {
            lines.push(std::mem::replace(&mut line, word.to_owned()));
        } else {
            line = candidate;
        }
    }
    lines.push(line);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_break_at_spaces_within_the_width_and_long_words_stay_whole() {
        let chars = |t: &str| t.chars().count() as f64;
        assert_eq!(wrap("aa bb cc", 5.0, chars), ["aa bb", "cc"]);
        assert_eq!(wrap("aaaaaaa b", 5.0, chars), ["aaaaaaa", "b"]);
        assert_eq!(wrap("", 5.0, chars), [""]);
    }
}
