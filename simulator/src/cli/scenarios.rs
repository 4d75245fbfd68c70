//! `scenarios`: the catalogue embedded in the binary, listed, shown or written out, so that
//! `redlock-sim` installed without a clone has its scenarios (`run --catalogue` runs them).

use std::path::PathBuf;

use clap::Subcommand;
use redlock_sim::scenario::catalogue;

/// What to do with the embedded catalogue.
#[derive(Debug, Subcommand)]
pub(crate) enum ScenariosCommand {
    /// List the scenarios: the name to give `show`, `run` or `explain` (as
    /// catalogue:NAME), and each scenario's title.
    List,
    /// Print one scenario's file, e.g. `redlock-sim scenarios show rl-02-pause-5s`.
    Show {
        /// The scenario's file name, with or without .toml.
        name: String,
    },
    /// Write every scenario's file into DIR (created when missing), to edit or run them.
    Export {
        /// The directory to write into; existing files of the same names are replaced.
        dir: PathBuf,
    },
}

pub(crate) fn scenarios(command: &ScenariosCommand) -> Result<bool, String> {
    match command {
        ScenariosCommand::List => {
            let width = catalogue::files()
                .iter()
                .map(|(f, _)| f.len() - 5)
                .max()
                .unwrap_or(0);
            for (file, text) in catalogue::files() {
                let name = file.trim_end_matches(".toml");
                println!("{name:width$}  {}", title(text));
            }
            println!(
                "\n{} scenarios; `redlock-sim run --catalogue` runs them all, `redlock-sim \
                 explain catalogue:NAME` draws one",
                catalogue::files().len()
            );
        }
        ScenariosCommand::Show { name } => {
            let (_, text) = catalogue::find(name).ok_or_else(|| unknown(name))?;
            print!("{text}");
        }
        ScenariosCommand::Export { dir } => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for (file, text) in catalogue::files() {
                let path = dir.join(file);
                std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            println!(
                "wrote {} scenarios into {}",
                catalogue::files().len(),
                dir.display()
            );
        }
    }
    Ok(true)
}

/// The error for a name the catalogue does not hold.
pub(crate) fn unknown(name: &str) -> String {
    format!("no scenario `{name}` in the catalogue; `redlock-sim scenarios list` names them")
}

/// A scenario's title: its `name = "…"` line's value.
fn title(text: &str) -> &str {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("name = \"")?.strip_suffix('"'))
        .unwrap_or("")
}
