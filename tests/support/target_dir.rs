//! Where the workspace's build output, and criterion's results, live.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The workspace's target directory, found as criterion finds it: `CARGO_TARGET_DIR`, else
/// the `target_directory` that `cargo metadata` reports for this workspace (cargo names
/// itself in `CARGO` to the programs it runs), else `target` in the current directory. The
/// benchmarks write beside criterion's results there and the report reads them, wherever
/// each is started from.
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| serde_json::from_slice::<serde_json::Value>(&output.stdout).ok())
        .and_then(|metadata| metadata["target_directory"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target"))
}
