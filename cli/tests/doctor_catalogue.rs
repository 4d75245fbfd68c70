//! The scenarios `redlock doctor` cites exist, under the names it gives them, with the
//! verdicts `docs/guarantees.md` gives them: reads the `scenario(…)` entries of
//! `cli/src/doctor/catalogue.rs` (four string literals each: id, title, file, verdict).

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::Path;

/// The string literals of `text`, in order.
fn literals(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let end = after.find('"').unwrap();
        found.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    found
}

#[test]
fn every_cited_scenario_exists_with_its_name_and_verdict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let catalogue = std::fs::read_to_string(root.join("cli/src/doctor/catalogue.rs")).unwrap();
    let guarantees = std::fs::read_to_string(root.join("docs/guarantees.md")).unwrap();
    let mut cited = 0;
    for entry in catalogue.split(" = scenario(").skip(1) {
        let body = &entry[..entry.find(");").unwrap()];
        let [id, title, file, verdict]: [String; 4] = literals(body).try_into().unwrap();
        let name = if id == "fence" {
            format!("fencing: {title}")
        } else {
            format!("{id} {title}")
        };
        let scenario = std::fs::read_to_string(root.join(&file))
            .unwrap_or_else(|e| panic!("{file}, cited for `{name}`: {e}"));
        assert!(
            scenario.contains(&format!("name = \"{name}\"")),
            "{file} is not named `{name}`"
        );
        let row = format!("| {name} | {verdict} |");
        assert!(
            guarantees.contains(&row),
            "docs/guarantees.md has no row starting `{row}`"
        );
        cited += 1;
    }
    assert!(
        cited >= 10,
        "only {cited} scenarios found: has the catalogue's layout changed?"
    );
}
