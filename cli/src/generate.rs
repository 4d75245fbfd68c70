//! `redlock completions SHELL` and `redlock man [COMMAND]`: shell completion scripts and
//! man pages generated from the command line's own definitions (`args`), so that they can
//! never disagree with `--help`. Both write to stdout, for a package's build or a user to
//! put where their shell and `man` look (docs/cli.md, "Completions and man pages").

use std::io::{self, Write};

use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::{Cli, CompletionsArgs, ManArgs};
use crate::exit::{Failure, OS_ERROR};
use crate::man_sections;

/// The binary's name, as the scripts must complete it.
const BIN: &str = "redlock";

/// Writes the completion script for `args.shell` to stdout.
///
/// # Errors
///
/// When stdout cannot be written (other than a closed pipe).
pub(crate) fn completions(args: &CompletionsArgs) -> Result<u8, Failure> {
    emit("the completion script", &completion_script(args.shell))
}

/// Writes the man page of `redlock`, or of `redlock COMMAND`, to stdout.
///
/// # Errors
///
/// When stdout cannot be written (other than a closed pipe).
pub(crate) fn man(args: &ManArgs) -> Result<u8, Failure> {
    let page = man_page(args.command.as_deref())
        .map_err(|e| Failure::new(OS_ERROR, format!("cannot render the man page: {e}")))?;
    emit("the man page", &page)
}

fn completion_script(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN, &mut script);
    script
}

/// The page in roff: `redlock(1)`, or `redlock-run(1)` and the like for `command`.
fn man_page(command: Option<&str>) -> io::Result<Vec<u8>> {
    // Building the whole command names each subcommand `redlock-run` (its page's title)
    // and gives it the usage line `redlock run`, as `git`'s and `cargo`'s pages have.
    let mut cli = Cli::command().disable_help_subcommand(true);
    cli.build();
    let page = match command {
        None => cli,
        Some(name) => cli
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| io::Error::other(format!("no command `{name}`")))?,
    };
    let after_help = page
        .get_after_help()
        .map(ToString::to_string)
        .unwrap_or_default();
    let page = page.after_help(None::<&str>).after_long_help(None::<&str>);
    let mut roff = Vec::new();
    // A subcommand has no version of its own: every page names the package's. No date, so
    // that a package built twice gets the same page.
    clap_mangen::Man::new(page)
        .source(format!("{BIN} {}", env!("CARGO_PKG_VERSION")))
        .manual("User Commands")
        .render(&mut roff)?;
    // In place of clap_mangen's EXTRA: EXIT STATUS with a paragraph per code, and NOTES,
    // before the VERSION section as man pages order them.
    let mut page = String::from_utf8(roff).map_err(io::Error::other)?;
    let sections = man_sections::render(&after_help);
    match page.find(".SH VERSION") {
        Some(at) => page.insert_str(at, &sections),
        None => page.push_str(&sections),
    }
    let roff = page.into_bytes();
    Ok(roff)
}

/// Writes `bytes` to stdout. A reader that stopped early (`redlock man | head`) is not an
/// error, as with `cat`; anything else is.
fn emit(what: &str, bytes: &[u8]) -> Result<u8, Failure> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(Failure::new(OS_ERROR, format!("cannot write {what}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    /// Every flag of every subcommand, as `--long`.
    fn flags_of(command: &clap::Command) -> Vec<String> {
        command
            .get_arguments()
            .filter_map(|arg| arg.get_long())
            .filter(|long| !matches!(*long, "help" | "version"))
            .map(|long| format!("--{long}"))
            .collect()
    }

    #[test]
    fn every_shell_completes_every_command_and_flag() {
        let cli = Cli::command();
        for &shell in Shell::value_variants() {
            let script = String::from_utf8(completion_script(shell)).unwrap();
            for sub in cli.get_subcommands() {
                assert!(
                    script.contains(sub.get_name()),
                    "{shell}: no `{}`",
                    sub.get_name()
                );
                for flag in flags_of(sub) {
                    // Some shells list `--ttl`, others the name without dashes next to it.
                    assert!(
                        script.contains(&flag) || script.contains(&flag[2..]),
                        "{shell}: no {flag} of {}",
                        sub.get_name()
                    );
                }
            }
        }
    }

    #[test]
    fn paths_complete_as_files_and_cmd_as_a_command() {
        let zsh = String::from_utf8(completion_script(Shell::Zsh)).unwrap();
        assert!(
            zsh.contains("--config=[") && zsh.contains(":PATH:_files"),
            "{zsh}"
        );
        assert!(zsh.contains("_cmdambivalent"), "{zsh}");
        let fish = String::from_utf8(completion_script(Shell::Fish)).unwrap();
        assert!(
            fish.lines()
                .any(|line| line.contains("-l json") && line.contains("-r -F")),
            "{fish}"
        );
    }

    #[test]
    fn the_man_pages_describe_every_command_and_flag() {
        let main = String::from_utf8(man_page(None).unwrap()).unwrap();
        assert!(main.starts_with(".ie"), "not roff: {}", &main[..40]);
        assert!(main.contains(".TH redlock 1"), "{main}");
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            let name = sub.get_name();
            assert!(main.contains(&format!("redlock\\-{name}")), "{name}");
            let page = String::from_utf8(man_page(Some(name)).unwrap()).unwrap();
            assert!(
                page.contains(&format!(
                    ".TH redlock-{name} 1  \"redlock {}\"",
                    env!("CARGO_PKG_VERSION")
                )),
                "{page}"
            );
            for flag in flags_of(sub) {
                // roff escapes each dash.
                let escaped = flag.replace('-', "\\-");
                assert!(page.contains(&escaped), "{name}: no {flag}");
            }
        }
        // The environment and the exit codes are in the pages, from the help text: the
        // codes in an EXIT STATUS section, one tagged paragraph each.
        assert!(main.contains("REDLOCK_CONFIG"), "{main}");
        let run = String::from_utf8(man_page(Some("run")).unwrap()).unwrap();
        assert!(run.contains(".SH \"EXIT STATUS\""), "{run}");
        assert!(
            run.contains(".TP\n\\fB75\\fR\nanother owner holds"),
            "{run}"
        );
        assert!(!run.contains(".SH EXTRA"), "{run}");
        assert!(man_page(Some("nope")).is_err());
    }
}
