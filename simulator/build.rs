//! Records the commit the simulator is built from, for the JSON Lines each run writes
//! (`REDLOCK_SIM_COMMIT` overrides it; outside a git checkout it is `unknown`).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
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
