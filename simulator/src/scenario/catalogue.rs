//! The scenario catalogue, embedded in the crate at build time (`build.rs`), so that a
//! `redlock-sim` installed without a clone of the repository still has it. A scenario of the
//! catalogue is named `catalogue:FILE` wherever a scenario path is taken (`run`, `explain`,
//! `sweep`), e.g. `catalogue:rl-00-baseline.toml`; the `.toml` may be left out.

mod files {
    include!(concat!(env!("OUT_DIR"), "/catalogue.rs"));
}

/// What names a scenario of the catalogue in place of a path.
pub const PREFIX: &str = "catalogue:";

/// Every scenario of the catalogue: its file name (`rl-00-baseline.toml`) and its text, in
/// file-name order.
#[must_use]
pub fn files() -> &'static [(&'static str, &'static str)] {
    files::FILES
}

/// The text of the catalogue's scenario `name` (`rl-00-baseline` or
/// `rl-00-baseline.toml`, with or without the [`PREFIX`]).
#[must_use]
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    let name = name.strip_prefix(PREFIX).unwrap_or(name);
    files()
        .iter()
        .copied()
        .find(|(file, _)| *file == name || file.strip_suffix(".toml") == Some(name))
}

/// `path` as a catalogue name, when it is one (`catalogue:…`).
#[must_use]
pub fn name_of(path: &std::path::Path) -> Option<&str> {
    path.to_str()?.strip_prefix(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_holds_every_scenario_file_and_finds_them_by_name() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let on_disk = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter(|e| {
                        e.as_ref()
                            .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "toml"))
                    })
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(files().len(), on_disk);
        assert!(files().windows(2).all(|w| w[0].0 < w[1].0));
        let (file, text) = find("catalogue:rl-00-baseline").expect("the baseline");
        assert_eq!(file, "rl-00-baseline.toml");
        assert!(text.contains("RL-00"));
        assert_eq!(find("rl-00-baseline.toml").map(|f| f.0), Some(file));
        assert_eq!(find("no-such-scenario"), None);
    }
}
