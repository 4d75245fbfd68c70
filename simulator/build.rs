//! Records the commit the simulator is built from, for the JSON Lines each run writes
//! (`REDLOCK_SIM_COMMIT` overrides it; outside a git checkout it is `unknown`), and embeds
//! the scenario catalogue (`scenarios/*.toml`) in the crate, so that a `redlock-sim`
//! installed without a clone still has it (`redlock-sim scenarios`, `run --catalogue`).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// Writes `$OUT_DIR/catalogue.rs`: every `scenarios/*.toml` by file name, in name order,
/// with its text included at compile time.
fn embed_catalogue() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .filter(|name| name.ends_with(".toml"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut code = String::from("/// Every scenario of the catalogue: its file name and text.\n");
    code.push_str("pub(super) static FILES: &[(&str, &str)] = &[\n");
    for name in &names {
        let path = dir.join(name);
        println!("cargo::rerun-if-changed={}", path.display());
        code.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out =
        std::path::Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("catalogue.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}

fn main() {
    embed_catalogue();
    println!("cargo::rerun-if-env-changed=REDLOCK_SIM_COMMIT");
    let commit = std::env::var("REDLOCK_SIM_COMMIT")
        .ok()
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    // A new commit moves HEAD's log (a checkout too): build again then, and only then.
    for file in ["HEAD", "logs/HEAD"] {
        // A path that does not exist would make every build run this script again.
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", file])
            .filter(|path| std::path::Path::new(path).exists())
        {
            println!("cargo::rerun-if-changed={path}");
        }
    }
    println!("cargo::rustc-env=REDLOCK_SIM_COMMIT={commit}");
}
