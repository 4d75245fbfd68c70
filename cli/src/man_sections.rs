//! The man pages' closing sections, from the help text after the options (`after_help`):
//! its exit codes become an EXIT STATUS section, one tagged paragraph per code (clap_mangen
//! would print the text as one EXTRA section, where `man` joins the table's lines into one
//! run of words), and the rest a NOTES section. The help stays the one source of both.

/// What a paragraph of the help text holds.
enum Paragraph<'a> {
    /// `Exit codes of X:` followed by rows `  CODE   MEANING` (a meaning may go on in lines
    /// indented deeper): a title and its rows.
    Table(&'a str, Vec<(String, String)>),
    /// `Exit codes of X: …` or `Exit codes: …` on its own lines.
    ExitText(String),
    /// Anything else.
    Note(String),
}

/// The roff of the EXIT STATUS and NOTES sections for `after_help` (nothing when it is
/// empty).
pub(crate) fn render(after_help: &str) -> String {
    let paragraphs = paragraphs(after_help);
    let mut exit = String::new();
    let mut notes = String::new();
    for paragraph in &paragraphs {
        match paragraph {
            Paragraph::Table(title, rows) => {
                exit.push_str(&format!(".PP\n{}\n", escape(title)));
                for (code, meaning) in rows {
                    exit.push_str(&format!(
                        ".TP\n\\fB{}\\fR\n{}\n",
                        escape(code),
                        escape(meaning)
                    ));
                }
            }
            Paragraph::ExitText(text) => exit.push_str(&format!(".PP\n{}\n", escape(text))),
            Paragraph::Note(text) => notes.push_str(&format!(".PP\n{}\n", escape(text))),
        }
    }
    let mut roff = String::new();
    if !exit.is_empty() {
        roff.push_str(".SH \"EXIT STATUS\"\n");
        roff.push_str(&exit);
    }
    if !notes.is_empty() {
        roff.push_str(".SH NOTES\n");
        roff.push_str(&notes);
    }
    roff
}

/// The help text cut into paragraphs: at blank lines, and where a line starts with `Exit
/// codes`.
fn paragraphs(text: &str) -> Vec<Paragraph<'_>> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        let starts_block = line.trim().is_empty() || line.starts_with("Exit codes");
        if starts_block && !current.is_empty() {
            blocks.push(std::mem::take(&mut current));
        }
        if !line.trim().is_empty() {
            current.push(line);
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks.into_iter().map(|block| classify(&block)).collect()
}

fn classify<'a>(block: &[&'a str]) -> Paragraph<'a> {
    let joined = || block.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    let Some(first) = block.first() else {
        return Paragraph::Note(String::new());
    };
    if !first.starts_with("Exit codes") {
        return Paragraph::Note(joined());
    }
    if !first.trim_end().ends_with(':') || block.len() == 1 {
        return Paragraph::ExitText(joined());
    }
    let mut rows: Vec<(String, String)> = Vec::new();
    for line in &block[1..] {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        // A row: `  CODE   MEANING`, the code and the meaning at least two spaces apart; a
        // line indented deeper than the rows goes on with the meaning above it.
        match (indent <= 2, body.split_once("  ")) {
            (true, Some((code, meaning))) => {
                rows.push((code.trim().to_owned(), meaning.trim().to_owned()));
            }
            _ => match rows.last_mut() {
                Some((_, meaning)) => {
                    meaning.push(' ');
                    meaning.push_str(body.trim());
                }
                None => rows.push((String::new(), body.trim().to_owned())),
            },
        }
    }
    Paragraph::Table(first.trim_end().trim_end_matches(':'), rows)
}

/// `text` safe in roff: backslashes and dashes escaped, a line that would start with a
/// control character guarded.
fn escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELP: &str = "\
Exit codes of `redlock run`:
  CMD's status   CMD ran to its end
  64             bad arguments
  79             a process was out of reach (it changed
                 its user)
Exit codes of `redlock status`: 0 held, 1 not held.

Each setting comes from its flag.
See docs/cli.md.";

    #[test]
    fn exit_codes_become_tagged_paragraphs_and_the_rest_notes() {
        let roff = render(HELP);
        assert!(
            roff.starts_with(".SH \"EXIT STATUS\"\n.PP\nExit codes of `redlock run`\n"),
            "{roff}"
        );
        assert!(
            roff.contains(".TP\n\\fBCMD's status\\fR\nCMD ran to its end\n"),
            "{roff}"
        );
        assert!(
            roff.contains(".TP\n\\fB79\\fR\na process was out of reach (it changed its user)\n"),
            "{roff}"
        );
        assert!(
            roff.contains(".PP\nExit codes of `redlock status`: 0 held, 1 not held.\n"),
            "{roff}"
        );
        assert!(
            roff.contains(".SH NOTES\n.PP\nEach setting comes from its flag. See docs/cli.md.\n"),
            "{roff}"
        );
        assert!(!roff.contains("EXTRA"));
    }

    #[test]
    fn text_that_roff_would_read_as_requests_is_escaped() {
        assert_eq!(escape(".config --ttl a\\b"), "\\&.config \\-\\-ttl a\\eb");
        assert_eq!(render(""), "");
    }
}
